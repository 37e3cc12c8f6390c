#!/usr/bin/env python3
"""Checks exposition.py against the real prometheus_client.

Builds the same state (labelled counters, gauges, histograms with the
frameworks' bucket boundaries, lazily created children) through
exposition.Registry and through prometheus_client, renders both the way the
servers do (generate_latest on a registry; MultiProcessCollector for SGLang)
and compares the texts byte for byte. `_created` values come from a frozen
clock in both. Run with a Python that has prometheus_client, e.g.

    /opt/aiperf-venv/bin/python sample-artifacts/servers/check_exposition.py

Exit 0 when both renderings agree, 1 with a unified diff when not.
"""

import difflib
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

FROZEN = 1796000000.123456
time.time = lambda: FROZEN  # noqa: E731  both sides read the same clock

import exposition  # noqa: E402

BUCKETS = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
           7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]
TOKENS = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000]
STEPS = [
    ("counter", "vllm:prompt_tokens", {"model_name": "m", "engine": "0"}, 64.0),
    ("counter", "vllm:prompt_tokens", {"model_name": "m", "engine": "1"}, 1e21),
    ("gauge", "vllm:num_requests_running", {"model_name": "m", "engine": "0"}, 3.0),
    ("gauge", "vllm:num_requests_running", {"model_name": "m", "engine": "0"}, 0.0),
    ("gauge", "vllm:kv_cache_usage_perc", {"model_name": "m", "engine": "1"}, 0.0123456789),
    ("histogram", "vllm:time_to_first_token_seconds", {"model_name": "m", "engine": "0"}, 0.0042),
    ("histogram", "vllm:time_to_first_token_seconds", {"model_name": "m", "engine": "1"}, 3000.0),
    ("histogram", "vllm:request_prompt_tokens", {"model_name": "m", "engine": "0"}, 64),
    ("counter", "vllm:request_success", {"model_name": "m", "engine": "0",
                                         "finished_reason": "length"}, 1.0),
]
SPECS = {
    "vllm:prompt_tokens": ("counter", "Number of prefill tokens processed.", None),
    "vllm:num_requests_running": ("gauge", "Number of requests in model execution batches.", None),
    "vllm:kv_cache_usage_perc": ("gauge", "KV-cache usage. 1 means 100 percent usage.", None),
    "vllm:time_to_first_token_seconds": ("histogram", "Histogram of time to first token in seconds.",
                                         BUCKETS),
    "vllm:request_prompt_tokens": ("histogram", "Number of prefill tokens processed.", TOKENS),
    "vllm:request_success": ("counter", "Count of successfully processed requests.", None),
}


def labelnames(name):
    names = ["model_name", "engine"]
    return names + ["finished_reason"] if name == "vllm:request_success" else names


def ours(multiprocess):
    reg = exposition.Registry()
    fams = {}
    for name, (kind, doc, buckets) in SPECS.items():
        fams[name] = reg.add(name, kind, doc, labelnames(name), buckets=buckets,
                             multiprocess_mode="mostrecent" if multiprocess else "all")
    for kind, name, labels, value in STEPS:
        f = fams[name]
        getattr(f, {"counter": "inc", "gauge": "set", "histogram": "observe"}[kind])(labels, value)
    return reg.render_python(multiprocess=multiprocess)


def theirs(multiprocess):
    import prometheus_client as pc
    kwargs = {}
    if multiprocess:
        kwargs = {"multiprocess_mode": "mostrecent"}
    reg = None if multiprocess else pc.CollectorRegistry()
    fams = {}
    for name, (kind, doc, buckets) in SPECS.items():
        common = {"labelnames": labelnames(name)}
        if not multiprocess:
            common["registry"] = reg
        if kind == "counter":
            fams[name] = pc.Counter(name, doc, **common)
        elif kind == "gauge":
            fams[name] = pc.Gauge(name, doc, **common, **kwargs)
        else:
            fams[name] = pc.Histogram(name, doc, buckets=buckets, **common)
    for kind, name, labels, value in STEPS:
        child = fams[name].labels(**labels)
        getattr(child, {"counter": "inc", "gauge": "set", "histogram": "observe"}[kind])(value)
    if multiprocess:
        from prometheus_client import multiprocess as mp
        reg = pc.CollectorRegistry()
        mp.MultiProcessCollector(reg)
    return pc.generate_latest(reg).decode()


def compare(label, a, b):
    if a == b:
        print(f"{label}: identical ({len(a.splitlines())} lines)")
        return True
    # The multiprocess collector orders families and samples by its mmap
    # files; compare what a parser sees: the set of lines per family.
    if label.startswith("multiprocess") and sorted(a.splitlines()) == sorted(b.splitlines()):
        print(f"{label}: same lines, in another order")
        return True
    sys.stdout.writelines(difflib.unified_diff(b.splitlines(True), a.splitlines(True),
                                               "prometheus_client", "exposition.py"))
    return False


def main():
    try:
        import prometheus_client  # noqa: F401
    except ImportError:
        print("prometheus_client is not importable; nothing to compare", file=sys.stderr)
        return 2
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        # The child: prometheus_client picks its value class at import.
        sys.stdout.write(theirs(True))
        return 0
    ok = compare("generate_latest", ours(False), theirs(False))
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, PROMETHEUS_MULTIPROC_DIR=d)
        child = subprocess.run([sys.executable, __file__], env=env, capture_output=True,
                               text=True, check=True)
        ok &= compare("multiprocess", ours(True), child.stdout)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
