#!/usr/bin/env python3
"""The raw-scrape baseline: what an analyst writes to get each server
series' growth over a run, json.loads per line, first and last cumulative
value per (endpoint, family, labels)."""

import json
import sys

first, last = {}, {}
with open(sys.argv[1]) as f:
    for line in f:
        s = json.loads(line)
        ep = s["endpoint_url"]
        for fam, samples in s["metrics"].items():
            for x in samples:
                key = (ep, fam, tuple(sorted(x.get("labels", {}).items())))
                v = x.get("count", x.get("value"))
                first.setdefault(key, v)
                last[key] = v
print(len(last))
