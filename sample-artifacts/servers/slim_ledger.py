#!/usr/bin/env python3
"""Slims a mock server's ledger in place for a fixture that needs only the
requests' timing: each request line keeps its id, ordinal, times, tokens,
engine start-up and load fields, and of its observations only the decode
time (the engine's inter-token gaps); connection lines are kept whole.

    python3 slim_ledger.py LEDGER.jsonl
"""

import json
import sys

KEEP = ("event", "ordinal", "x_request_id", "conn_id", "t_start_ns", "t_first_token_ns",
        "t_end_ns", "prompt_tokens", "cached_tokens", "completion_tokens", "cold_stage_s",
        "prefill_batch", "inflight_at_arrival")
OBSERVED = ("vllm:request_decode_time_seconds",)


def slim(line):
    e = json.loads(line)
    if e.get("event") != "request":
        return e
    out = {k: e[k] for k in KEEP if k in e}
    out["observations"] = [o for o in e.get("observations", []) if o.get("metric") in OBSERVED]
    return out


path = sys.argv[1]
with open(path) as f:
    lines = [slim(l) for l in f if l.strip()]
with open(path, "w") as f:
    for e in lines:
        f.write(json.dumps(e, sort_keys=True) + "\n")
