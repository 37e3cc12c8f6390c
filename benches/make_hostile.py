#!/usr/bin/env python3
"""Hostile raw scrapes for the cost figures of docs/reliability.md (issue 36):
a copy of a sample run whose server_metrics_export.jsonl has, in every scrape,

  buckets N: every vllm:time_to_first_token_seconds series with N buckets
             (cumulative and valid);
  labels N:  N ever-new label sets of vllm:prompt_tokens spread over the
             scrapes (each set in one scrape only);
  families N: N ever-new gauge families (fam_<i>, one series each) spread
             over the scrapes (each family in one scrape only);
  endpoints N: N scrapes of ever-new endpoints (one gauge each) after the
             run's own scrapes (each endpoint scraped once);

or, for `baseline`, a JSON report (as `--format json` writes it) of the run
SRC whose run holds N distinct findings, written to the file DST:

    python3 benches/make_hostile.py buckets SRC DST N
    python3 benches/make_hostile.py labels SRC DST N
    python3 benches/make_hostile.py families SRC DST N
    python3 benches/make_hostile.py endpoints SRC DST N
    python3 benches/make_hostile.py baseline SRC DST.json N
"""
import json
import os
import shutil
import sys


def main():
    kind, src, dst, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    if kind == "baseline":
        return baseline(src, dst, n)
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    lines = [json.loads(l) for l in open(os.path.join(src, "server_metrics_export.jsonl"))]
    per = n // len(lines)
    with open(os.path.join(dst, "server_metrics_export.jsonl"), "w") as out:
        if kind == "endpoints":
            for d in lines:
                out.write(json.dumps(d, separators=(",", ":")) + "\n")
            t = lines[-1]["timestamp_ns"]
            for i in range(n):
                e = {"endpoint_url": f"http://e{i}:8000/metrics", "timestamp_ns": t + i,
                     "metrics": {"vllm:num_requests_running": [{"labels": {"engine": "0"}, "value": 1.0}]}}
                out.write(json.dumps(e, separators=(",", ":")) + "\n")
            return
        for k, d in enumerate(lines):
            if kind == "buckets":
                for s in d["metrics"].get("vllm:time_to_first_token_seconds", []):
                    c = s["count"]
                    b = {f"{(i + 1) * 1e-4:.4f}": (c if i >= n // 2 else 0.0) for i in range(n)}
                    b["+Inf"] = c
                    s["buckets"] = b
                out.write(json.dumps(d) + "\n")
            elif kind == "labels":
                d["metrics"]["vllm:prompt_tokens"] += [
                    {"labels": {"engine": "0", "model_name": "m", "id": str(k * per + i)}, "value": 1.0}
                    for i in range(per)
                ]
                out.write(json.dumps(d, separators=(",", ":")) + "\n")
            elif kind == "families":
                for i in range(per):
                    d["metrics"][f"fam_{k * per + i}"] = [{"value": 1.0}]
                out.write(json.dumps(d, separators=(",", ":")) + "\n")
            else:
                sys.exit(f"unknown kind {kind!r}: buckets, labels, families or endpoints")


def baseline(src, dst, n):
    """A report of run SRC with N findings, each its own identity (the
    metric differs), shaped as the JSON report writes a finding."""
    run = {"path": src, "id": os.path.basename(os.path.normpath(src)), "benchmark_id": None,
           "status": "fail", "findings": []}
    with open(dst, "w") as out:
        out.write('{"tool": "artifact-check", "runs": [')
        out.write(json.dumps({k: v for k, v in run.items() if k != "findings"})[:-1])
        out.write(', "findings": [')
        for i in range(n):
            f = {"code": "unexplained-residual", "severity": "error", "check": "phase_contamination",
                 "message": "Observations of a histogram landed in the wrong phase: see the metric",
                 "file": "server_metrics_export.json", "field": "stats.count",
                 "metric": f"vllm:metric_{i}", "endpoint": "http://127.0.0.1:8000/metrics",
                 "series": {"engine": "0", "model_name": "m"}}
            out.write(("," if i else "") + json.dumps(f))
        out.write("]}]}\n")


if __name__ == "__main__":
    main()
