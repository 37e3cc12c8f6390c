#!/usr/bin/env python3
"""Makes a run directory where phase attribution has the most pending work:
the records of a sample run repeated RECORDS times over, each copy shifted in
time after the one before (a long run; see make_big_run.py), and a raw-scrape
file (server_metrics_export.jsonl) of SCRAPES scrapes over the whole run in
which the server's histograms counted only a tenth of the requests that had
completed. Nine requests in ten then wait for an observation that never
comes: a timing case for the attribution, not a realistic run.

    python3 benches/make_undercounted_run.py SAMPLE_RUN OUT_DIR [RECORDS] [SCRAPES]
    # defaults: 100000 records, 2000 scrapes (about 265 MB)
"""

import bisect
import copy
import json
import os
import shutil
import sys

from make_big_run import copy_artifacts, write_records


def main(src, out, n_records=100_000, n_scrapes=2000):
    shutil.rmtree(out, ignore_errors=True)
    copy_artifacts(src, out, {"profile_export.jsonl", "server_metrics_export.jsonl"})
    ends = sorted(write_records(src, os.path.join(out, "profile_export.jsonl"),
                                count=n_records, shift=True))
    with open(os.path.join(src, "profile_export.jsonl")) as f:
        t0 = min(json.loads(line)["metadata"]["request_start_ns"] for line in f if line.strip())
    with open(os.path.join(src, "server_metrics_export.jsonl")) as f:
        scrapes = [json.loads(line) for line in f if line.strip()]
    first, last = scrapes[0], scrapes[-1]
    t_end = ends[-1] + 10**9
    with open(os.path.join(out, "server_metrics_export.jsonl"), "w") as f:
        f.write(json.dumps(first) + "\n")
        for i in range(1, n_scrapes + 1):
            t = t0 + (t_end - t0) * i // n_scrapes
            count = float(bisect.bisect_right(ends, t) // 10)
            s = copy.deepcopy(last)
            s["timestamp_ns"] = t
            for series in s["metrics"].values():
                for x in series if isinstance(series, list) else []:
                    if isinstance(x, dict) and x.get("count"):
                        scale = count / x["count"]
                        if "buckets" in x:
                            x["buckets"] = {le: round(c * scale) for le, c in x["buckets"].items()}
                        if "sum" in x:
                            x["sum"] *= scale
                        x["count"] = count
            f.write(json.dumps(s) + "\n")
    print(f"{out}: {n_records} records, {n_scrapes} scrapes", file=sys.stderr)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], args[1], *(int(a) for a in args[2:4]))
