#!/usr/bin/env python3
"""Makes a run directory with a large, realistic server_metrics_export.jsonl
for the raw-scrape benchmark.

The scrapes start from a real sample run's raw scrapes (written by AIPerf
against the mock servers, whose families, types, label sets and bucket
boundaries follow vLLM's / SGLang's / Dynamo's source), and resample them:
SCRAPES scrapes per endpoint spread evenly over the sample's own scrape time
range, each holding, for counters and histograms, the cumulative values of
the latest real scrape at or before it (so counters grow exactly as the
server's did and every check still has the run's truth to find), and for
gauges values that move (a seeded walk around the real value). AIPerf only
writes a scrape whose body changed; the moving gauges make every one change.
With --endpoints N above the sample's count, the sample's endpoints are
repeated on further ports (the replicas of a larger deployment).

    python3 benches/make_scrapes.py SAMPLE_RUN OUT_DIR SIZE_MB [--endpoints N]

The other artifacts are copied as they are. Prints the scrapes written per
endpoint and the series per scrape.
"""

import bisect
import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_big_run import copy_artifacts  # noqa: E402

FILE = "server_metrics_export.jsonl"


def main():
    args = sys.argv[1:]
    endpoints = None
    if "--endpoints" in args:
        i = args.index("--endpoints")
        endpoints = int(args[i + 1])
        del args[i:i + 2]
    src, out, size_mb = args[0], args[1], float(args[2])
    copy_artifacts(src, out, {FILE})
    with open(os.path.join(src, "server_metrics_export.json")) as f:
        types = {name: fam.get("type") for name, fam in json.load(f)["metrics"].items()}
    per_ep = {}
    with open(os.path.join(src, FILE)) as f:
        for line in f:
            if line.strip():
                s = json.loads(line)
                per_ep.setdefault(s["endpoint_url"], []).append(s)
    for scrapes in per_ep.values():
        scrapes.sort(key=lambda s: s["timestamp_ns"])
    real = list(per_ep.items())
    n_ep = endpoints or len(real)
    # Endpoint k is the sample's endpoint k % len(real), on its own port.
    eps = []
    for k in range(n_ep):
        url, scrapes = real[k % len(real)]
        if k >= len(real):
            url = re.sub(r":(\d+)/", lambda m: f":{int(m.group(1)) + 1000 * (k // len(real))}/", url)
        eps.append((url, scrapes))
    t0 = min(s[0]["timestamp_ns"] for _, s in real)
    t1 = max(s[-1]["timestamp_ns"] for _, s in real)
    avg_line = sum(len(json.dumps(s, separators=(",", ":"))) + 1
                   for _, ss in real for s in ss) / sum(len(ss) for _, ss in real)
    per_endpoint = max(2, int(size_mb * 1e6 / avg_line / n_ep))
    rng = random.Random(7)
    walk = {}

    def moved(url, fam, i, value):
        key = (url, fam, i)
        w = walk.get(key, 0.0) + rng.uniform(-1.0, 1.0)
        walk[key] = w
        return round(abs(value + w * (abs(value) * 0.01 + 1.0)), 3)

    step = (t1 - t0) / max(1, per_endpoint - 1)
    with open(os.path.join(out, FILE), "w", buffering=1 << 20) as f:
        for j in range(per_endpoint):
            t = int(t0 + j * step)
            for url, scrapes in eps:
                times = [s["timestamp_ns"] for s in scrapes]
                base = scrapes[max(0, bisect.bisect_right(times, t) - 1)]
                metrics = {}
                for fam, samples in base["metrics"].items():
                    if types.get(fam) == "gauge":
                        samples = [dict(x, value=moved(url, fam, i, x["value"]))
                                   if x.get("value") is not None else x
                                   for i, x in enumerate(samples)]
                    metrics[fam] = samples
                s = {"endpoint_url": url, "timestamp_ns": t}
                if "request_sent_ns" in base:
                    s["request_sent_ns"] = t - (base["timestamp_ns"] - base["request_sent_ns"])
                for k in base:
                    if k not in ("endpoint_url", "timestamp_ns", "request_sent_ns", "metrics"):
                        s[k] = base[k]
                s["metrics"] = metrics
                f.write(json.dumps(s, separators=(",", ":")) + "\n")
    series = sum(len(v) for v in real[0][1][-1]["metrics"].values())
    print(f"{per_endpoint} scrapes x {n_ep} endpoints, {series} series per scrape")


if __name__ == "__main__":
    main()
