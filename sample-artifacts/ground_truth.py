#!/usr/bin/env python3
"""Prints what really happened in each sample run, from the mock server's
ledger and AIPerf's own artifacts (stdlib only). sample-artifacts/README.md
quotes this output; rerun it after regenerating a run.

    python3 sample-artifacts/ground_truth.py [run ...]
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main(names):
    for name in names:
        run = os.path.join(HERE, "runs", name)
        records = jsonl(os.path.join(run, "profile_export.jsonl"))
        ledger = jsonl(os.path.join(HERE, "ledgers", name + ".jsonl"))
        export = json.load(open(os.path.join(run, "server_metrics_export.json")))
        phase = {r["metadata"]["x_request_id"]: r["metadata"]["benchmark_phase"] for r in records}
        requests = [e for e in ledger if e["event"] == "request"]
        print(f"== {name}")
        for ph in ("warmup", "profiling"):
            mine = [e for e in requests if phase.get(e["x_request_id"]) == ph]
            first = sum(1 for e in mine if e.get("request_on_connection") == 1)
            cached = sum(e["cached_tokens"] for e in mine)
            prompt = sum(e["prompt_tokens"] for e in mine)
            print(f"  {ph}: {len(mine)} requests served; {first} first on a new connection; "
                  f"cached/prompt tokens {cached}/{prompt}"
                  + (f" = {cached / prompt:.4%}" if prompt else ""))
        obs = {}
        for e in requests:
            for o in e["observations"]:
                key = (o["metric"], phase.get(e["x_request_id"], "?"))
                obs[key] = obs.get(key, 0) + 1
        for e in ledger:
            if e["event"] == "late_observation":
                key = (e["metric"], phase.get(e["x_request_id"], "?"))
                obs[key] = obs.get(key, 0) + 1
                print(f"  late observation: {e['metric']} of {phase.get(e['x_request_id'])} "
                      f"request {e['x_request_id']}")
        for section, ph in (("warmup_metrics", "warmup"), ("metrics", "profiling")):
            for metric, fam in sorted(export.get(section, {}).items()):
                if fam["type"] != "histogram" and not metric.endswith("request_success"):
                    continue
                # Per-token families (ITL, iteration tokens) are not in the
                # ledger's per-request observations.
                if not any(m == metric for m, _ in obs):
                    continue
                found = sum(s["stats"].get("count", s["stats"].get("total", 0)) for s in fam["series"])
                truth = obs.get((metric, ph), 0)
                flag = "" if found == truth else "   <-- AIPerf export differs"
                print(f"  {ph:9} {metric}: server observed {truth}, export says {found:g}{flag}")
        ranges = export["summary"].get("phase_time_ranges", {})
        if "warmup" in ranges and "profiling" in ranges:
            overlap = (ranges["warmup"]["end_ns"] - ranges["profiling"]["start_ns"]) / 1e6
            print(f"  warmup window closes {overlap:.1f} ms after profiling starts")
        for m in ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries", "vllm:prompt_tokens"):
            if m in export["metrics"]:
                total = sum(s["stats"]["total"] for s in export["metrics"][m]["series"])
                print(f"  export profiling {m} = {total:g}")


if __name__ == "__main__":
    main(sys.argv[1:] or sorted(os.listdir(os.path.join(HERE, "runs"))))
