#!/usr/bin/env python3
"""Makes a run directory with a large, realistic server_metrics_export.jsonl
for the raw-scrape benchmark: one long run, made of copies of a real sample
run laid end to end in time.

The sample's raw scrapes were written by AIPerf against the mock servers,
whose families, types, label sets and bucket boundaries follow vLLM's /
SGLang's / Dynamo's source. Copy k of them is k sample-lengths later, and
every counter and histogram (count, sum, each bucket) has grown by k times
what it grew over the sample, so each scrape moves exactly as much as the
real server's scrapes did at the sample's load; gauges move (a seeded walk
around the real value). The records are copied the same way
(benches/make_big_run.py --shift-times, the same span), so the scrapes lie
in the run's own time range. With --endpoints N above the sample's count,
the sample's endpoints are repeated on further ports (the replicas of a
larger deployment).

    python3 benches/make_scrapes.py SAMPLE_RUN OUT_DIR SIZE_MB [--endpoints N]

The other artifacts are copied as they are. Prints the copies, scrapes and
series written.
"""

import json
import os
import random
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_big_run import copy_artifacts, write_records  # noqa: E402

FILE = "server_metrics_export.jsonl"


def key(sample):
    return tuple(sorted(sample.get("labels", {}).items()))


def main():
    args = sys.argv[1:]
    endpoints = None
    if "--endpoints" in args:
        i = args.index("--endpoints")
        endpoints = int(args[i + 1])
        del args[i:i + 2]
    src, out, size_mb = args[0], args[1], float(args[2])
    copy_artifacts(src, out, {FILE, "profile_export.jsonl"})
    with open(os.path.join(src, "server_metrics_export.json")) as f:
        types = {name: fam.get("type") for name, fam in json.load(f)["metrics"].items()}
    with open(os.path.join(src, FILE)) as f:
        scrapes = [json.loads(line) for line in f if line.strip()]
    scrapes.sort(key=lambda s: s["timestamp_ns"])
    urls = sorted({s["endpoint_url"] for s in scrapes})
    n_ep = max(endpoints or len(urls), len(urls))
    # Endpoint k repeats the sample's endpoint k % len(urls), on its own port.
    replicas = {u: [u] for u in urls}
    for k in range(len(urls), n_ep):
        u = urls[k % len(urls)]
        shift = 1000 * (k // len(urls))
        replicas[u].append(re.sub(r":(\d+)/", lambda m: f":{int(m.group(1)) + shift}/", u))
    # Growth of every cumulative series over the sample: last - first.
    first, last = {}, {}
    for s in scrapes:
        for fam, samples in s["metrics"].items():
            if types.get(fam) == "gauge":
                continue
            for x in samples:
                k = (s["endpoint_url"], fam, key(x))
                first.setdefault(k, x)
                last[k] = x

    def grown(a, b, name):
        return (b.get(name) or 0) - (a.get(name) or 0)

    growth = {}
    for k, b in last.items():
        a = first[k]
        g = {n: grown(a, b, n) for n in ("value", "count", "sum")}
        g["buckets"] = {le: c - (a.get("buckets") or {}).get(le, 0)
                        for le, c in (b.get("buckets") or {}).items()}
        growth[k] = g
    times = [t for r in [scrapes] for s in r for t in (s["timestamp_ns"],)]
    with open(os.path.join(src, "profile_export.jsonl")) as f:
        recs = [json.loads(line)["metadata"] for line in f if line.strip()]
    t0 = min(min(times), min(r["request_start_ns"] for r in recs))
    t1 = max(max(times), max(r["request_end_ns"] for r in recs))
    span = t1 - t0 + 1_000_000
    per_copy = sum(len(json.dumps(s, separators=(",", ":"))) + 1 for s in scrapes)
    per_copy *= n_ep / len(urls)
    copies = max(1, round(size_mb * 1e6 / per_copy))
    rng = random.Random(7)
    walk = {}

    def moved(url, fam, i, value):
        k = (url, fam, i)
        w = walk.get(k, 0.0) + rng.uniform(-1.0, 1.0)
        walk[k] = w
        return round(abs(value + w * (abs(value) * 0.01 + 1.0)), 3)

    def add(v, g, c):
        # Integers stay integers (counts), floats get their growth (sums).
        return v + g * c if v is not None else None

    lines = 0
    with open(os.path.join(out, FILE), "w", buffering=1 << 20) as f:
        for c in range(copies):
            for s in scrapes:
                for url in replicas[s["endpoint_url"]]:
                    metrics = {}
                    for fam, samples in s["metrics"].items():
                        new = []
                        for i, x in enumerate(samples):
                            if types.get(fam) == "gauge":
                                if x.get("value") is not None:
                                    x = dict(x, value=moved(url, fam, i, x["value"]))
                            else:
                                g = growth.get((s["endpoint_url"], fam, key(x)))
                                if g and c:
                                    x = dict(x)
                                    for n in ("value", "count", "sum"):
                                        if x.get(n) is not None:
                                            x[n] = add(x[n], g[n], c)
                                    if x.get("buckets"):
                                        x["buckets"] = {le: v + g["buckets"].get(le, 0) * c
                                                        for le, v in x["buckets"].items()}
                            new.append(x)
                        metrics[fam] = new
                    o = {"endpoint_url": url, "timestamp_ns": s["timestamp_ns"] + c * span}
                    if s.get("request_sent_ns") is not None:
                        o["request_sent_ns"] = s["request_sent_ns"] + c * span
                    for k in s:
                        if k not in ("endpoint_url", "timestamp_ns", "request_sent_ns",
                                     "metrics"):
                            o[k] = s[k]
                    o["metrics"] = metrics
                    f.write(json.dumps(o, separators=(",", ":")) + "\n")
                    lines += 1
    write_records(src, os.path.join(out, "profile_export.jsonl"), count=copies * len(recs),
                  shift=True, span=span)
    series = sum(len(v) for v in scrapes[-1]["metrics"].values())
    print(f"{copies} copies, {lines} scrapes over {n_ep} endpoints, {series} series per scrape, "
          f"{changed(os.path.join(out, FILE)):.0%} of a scrape's numbers changed from its "
          "endpoint's scrape before (first 400 lines)")


def changed(path, lines=400):
    """The share of numbers that differ from the same endpoint's previous
    scrape, over the file's first `lines` lines (scrapes of one shape)."""
    num = re.compile(r'(?<=[:\[,])-?\d[\d.eE+-]*')
    last, total, moved = {}, 0, 0
    with open(path) as f:
        for _, line in zip(range(lines), f):
            url = json.loads(line)["endpoint_url"]
            now = num.findall(line)
            before = last.get(url)
            if before is not None and len(before) == len(now):
                total += len(now)
                moved += sum(a != b for a, b in zip(before, now))
            last[url] = now
    return moved / total if total else 0.0


if __name__ == "__main__":
    main()
