#!/usr/bin/env python3
"""Whether AIPerf's phase split of a run equals the server's ledger.

    python3 exact_split.py RUN_DIR LEDGER [--except METRIC ...]

For every metric the ledger has observations of, the export's warmup and
profiling figures (a histogram's count, a counter's total, summed over every
endpoint and series) must equal what the ledger says the requests of each
phase caused (requests matched to phases by X-Request-ID). Exit 0 when every
metric not excepted splits exactly, 1 (with the differences) when not.
generate.sh retries a clean control until it does: a clean control is a run
in which nothing crossed a phase boundary, so that artifact-check's verdict
on it can be held to "no warning".
"""

import argparse
import json
import sys
from collections import defaultdict


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run")
    p.add_argument("ledger")
    p.add_argument("--except", dest="skip", action="append", default=[])
    a = p.parse_args()
    phase_of = {}
    for line in open(f"{a.run}/profile_export.jsonl"):
        r = json.loads(line)
        phase_of[r["metadata"]["x_request_id"]] = r["metadata"]["benchmark_phase"]
    truth = defaultdict(float)  # (metric, phase) -> count or amount
    kinds = {}
    for line in open(a.ledger):
        e = json.loads(line)
        if e.get("event") != "request":
            continue
        phase = phase_of.get(e["x_request_id"])
        for o in e["observations"]:
            truth[(o["metric"], phase)] += 1
            truth[(o["metric"] + "#amount", phase)] += o["value"]
    export = json.load(open(f"{a.run}/server_metrics_export.json"))
    bad = []
    for metric in sorted({m for m, _ in truth if not m.endswith("#amount")}):
        if metric in a.skip:
            continue
        for section, phase in (("warmup_metrics", "warmup"), ("metrics", "profiling")):
            fams = export.get(section) or {}
            fam = fams.get(metric) or fams.get(metric.removesuffix("_total"))
            if fam is None:
                continue
            kinds[metric] = fam["type"]
            if fam["type"] == "histogram":
                found = sum(s["stats"].get("count") or 0 for s in fam["series"])
                want = truth[(metric, phase)]
            else:
                found = sum(s["stats"].get("total") or 0 for s in fam["series"])
                want = truth[(metric + "#amount", phase)]
            if abs(found - want) > 1e-6:
                bad.append(f"{metric} {phase}: export {found:g}, ledger {want:g}")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
