#!/usr/bin/env python3
"""Makes a run directory where phase attribution has the most pending work:
the records of a sample run repeated RECORDS times over, each copy shifted in
time after the one before (a long run), and a raw-scrape file
(server_metrics_export.jsonl) of SCRAPES scrapes over the whole run in which
the server's histograms counted only a tenth of the requests that had
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

TIMES = ("credit_issued_ns", "request_start_ns", "request_ack_ns", "request_end_ns")


def main(src, out, n_records=100_000, n_scrapes=2000):
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for name in os.listdir(src):
        p = os.path.join(src, name)
        if os.path.isfile(p) and name not in ("profile_export.jsonl", "server_metrics_export.jsonl"):
            shutil.copy(p, os.path.join(out, name))
    with open(os.path.join(src, "profile_export.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    t0 = min(r["metadata"]["request_start_ns"] for r in records)
    span = max(r["metadata"]["request_end_ns"] for r in records) - t0 + 1000
    ends = []
    n = copy_no = 0
    with open(os.path.join(out, "profile_export.jsonl"), "w") as f:
        while n < n_records:
            for r in records:
                m = dict(r["metadata"])
                for k in TIMES:
                    if m.get(k) is not None:
                        m[k] += copy_no * span
                m["x_request_id"] = f"{n:08x}-0000-4000-8000-{n:012x}"
                m["session_num"] = n
                m["conversation_id"] = f"session_{n:09d}"
                ends.append(m["request_end_ns"])
                f.write(json.dumps({**r, "metadata": m}, separators=(",", ":")) + "\n")
                n += 1
                if n >= n_records:
                    break
            copy_no += 1
    ends.sort()
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
    print(f"{out}: {n} records, {n_scrapes} scrapes", file=sys.stderr)


if __name__ == "__main__":
    args = sys.argv[1:]
    main(args[0], args[1], *(int(a) for a in args[2:4]))
