#!/usr/bin/env python3
"""The baseline: what an analyst writes today (seed 002), json.loads per line,
collecting the profiling TTFTs and connection-reuse flags."""

import json
import sys

ttft, reused = [], []
with open(sys.argv[1]) as f:
    for line in f:
        r = json.loads(line)
        if r["metadata"]["benchmark_phase"] != "profiling":
            continue
        m = r["metrics"]
        if "time_to_first_token" in m:
            ttft.append(m["time_to_first_token"]["value"])
        if "http_req_connection_reused" in m:
            reused.append(m["http_req_connection_reused"]["value"])
print(len(ttft), sum(reused))
