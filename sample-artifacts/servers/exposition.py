"""Prometheus metric state and text exposition, standard library only.

Two renderings, as the real servers produce them:

- ``render_python``: prometheus_client's ``generate_latest`` (vLLM, TensorRT-LLM,
  the engine metrics a Dynamo worker passes through): families in registration
  order, label names sorted, counters as ``<name>_total`` with their
  ``<name>_created`` samples as a separate gauge family after each family,
  histogram buckets then ``_count``, ``_sum``, ``_created``; numbers written by
  prometheus_client's ``floatToGoString``. With ``multiprocess=True``, what
  prometheus_client's ``MultiProcessCollector`` renders (SGLang): no
  ``_created`` samples, counters first, then histograms, then gauges, a
  histogram's ``_sum`` before its buckets and ``_count`` after them, and a
  ``pid`` label on gauges of multiprocess mode ``all``.
- ``render_rust``: the Rust ``prometheus`` crate's ``TextEncoder`` (Dynamo):
  families sorted by name, label names sorted with ``le`` last, histograms as
  buckets, ``_sum``, ``_count``, no ``_created``, numbers in Rust's ``Display``.

``check_exposition.py`` renders the same state through the real
prometheus_client (when it is importable) and compares byte for byte.
"""

import math
from decimal import Decimal
import threading
import time

LOCK = threading.RLock()


def go_float(d):
    """prometheus_client.utils.floatToGoString."""
    d = float(d)
    if d == math.inf:
        return "+Inf"
    if d == -math.inf:
        return "-Inf"
    if math.isnan(d):
        return "NaN"
    s = repr(d)
    dot = s.find(".")
    if d > 0 and dot > 6:
        mantissa = f"{s[0]}.{s[1:dot]}{s[dot + 1:]}".rstrip("0.")
        return f"{mantissa}e+0{dot - 1}"
    return s


def rust_float(d):
    """Rust's `Display` for f64 (what the prometheus crate writes)."""
    d = float(d)
    if d == math.inf:
        return "+Inf"
    if d == -math.inf:
        return "-Inf"
    if math.isnan(d):
        return "NaN"
    if d == int(d):
        return str(int(d))
    s = repr(d)  # the shortest round-trip digits, as Rust's; Rust never writes exponents
    return format(Decimal(s), "f") if "e" in s else s


def escape(v):
    return str(v).replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def label_text(pairs):
    if not pairs:
        return ""
    return "{" + ",".join(f'{k}="{escape(v)}"' for k, v in pairs) + "}"


class Family:
    """One metric family and its labelled children (created on first use,
    as prometheus_client creates a labelled child on its first `.labels()`)."""

    def __init__(self, name, kind, documentation, labelnames=(), buckets=None,
                 multiprocess_mode="all"):
        if kind == "counter" and name.endswith("_total"):
            name = name[: -len("_total")]
        self.name, self.kind, self.doc = name, kind, documentation
        self.labelnames = tuple(labelnames)
        self.buckets = None
        if kind == "histogram":
            bounds = [float(b) for b in buckets]
            if bounds[-1] != math.inf:
                bounds.append(math.inf)
            self.buckets = bounds
        self.multiprocess_mode = multiprocess_mode
        # Families a custom collector computes at collection time (GC, process)
        # have no _created samples.
        self.created_samples = kind in ("counter", "histogram")
        self.children = {}
        if not self.labelnames:
            self.child({})  # an unlabelled metric exists from registration

    def child(self, labels):
        """The child of `labels` (a dict with every label name), created now if new."""
        key = tuple(str(labels[n]) for n in self.labelnames)
        c = self.children.get(key)
        if c is None:
            c = {"created": time.time(), "value": 0.0}
            if self.kind == "histogram":
                c["counts"] = [0.0] * len(self.buckets)
                c["sum"] = 0.0
            self.children[key] = c
        return c

    def inc(self, labels, amount=1.0):
        with LOCK:
            self.child(labels)["value"] += amount

    def set(self, labels, value):
        with LOCK:
            self.child(labels)["value"] = float(value)

    def observe(self, labels, value, times=1):
        with LOCK:
            c = self.child(labels)
            for i, bound in enumerate(self.buckets):
                if value <= bound:
                    c["counts"][i] += times
                    break
            c["sum"] += value * times

    def reset(self):
        """A process restart: every child is gone."""
        with LOCK:
            self.children.clear()

    def _pairs(self, key, extra=()):
        return sorted(list(zip(self.labelnames, key)) + list(extra))

    # -- prometheus_client ---------------------------------------------------------------

    def render_python(self, out, multiprocess=False, pid="1"):
        exposed = self.name + "_total" if self.kind == "counter" else self.name
        doc = self.doc
        out.append(f"# HELP {exposed} {doc}\n")
        out.append(f"# TYPE {exposed} {self.kind}\n")
        created = []
        for key, c in self.children.items():
            if self.kind == "counter":
                out.append(f"{exposed}{label_text(self._pairs(key))} {go_float(c['value'])}\n")
                created.append(f"{self.name}_created{label_text(self._pairs(key))} "
                               f"{go_float(c['created'])}\n")
            elif self.kind == "gauge":
                extra = [("pid", pid)] if multiprocess and self.multiprocess_mode == "all" else []
                out.append(f"{self.name}{label_text(self._pairs(key, extra))} "
                           f"{go_float(c['value'])}\n")
            else:
                acc, lines = 0.0, []
                for bound, n in zip(self.buckets, c["counts"]):
                    acc += n
                    pairs = self._pairs(key, [("le", go_float(bound))])
                    lines.append(f"{self.name}_bucket{label_text(pairs)} {go_float(acc)}\n")
                count = f"{self.name}_count{label_text(self._pairs(key))} {go_float(acc)}\n"
                total = f"{self.name}_sum{label_text(self._pairs(key))} {go_float(c['sum'])}\n"
                if multiprocess:
                    out.append(total)
                    out.extend(lines)
                    out.append(count)
                else:
                    out.extend(lines)
                    out.append(count)
                    out.append(total)
                created.append(f"{self.name}_created{label_text(self._pairs(key))} "
                               f"{go_float(c['created'])}\n")
        if created and self.created_samples and not multiprocess:
            out.append(f"# HELP {self.name}_created {self.doc}\n")
            out.append(f"# TYPE {self.name}_created gauge\n")
            out.extend(created)

    # -- the Rust prometheus crate ---------------------------------------------------

    def rust_name(self):
        return self.name + "_total" if self.kind == "counter" else self.name

    def render_rust(self, out):
        name = self.rust_name()
        if not self.children:
            return
        out.append(f"# HELP {name} {self.doc}\n")
        out.append(f"# TYPE {name} {self.kind}\n")
        for key in sorted(self.children):
            c = self.children[key]
            pairs = self._pairs(key)
            if self.kind == "histogram":
                acc = 0.0
                for bound, n in zip(self.buckets, c["counts"]):
                    acc += n
                    le = "+Inf" if bound == math.inf else rust_float(bound)
                    out.append(f"{name}_bucket{label_text(pairs + [('le', le)])} {rust_float(acc)}\n")
                out.append(f"{name}_sum{label_text(pairs)} {rust_float(c['sum'])}\n")
                out.append(f"{name}_count{label_text(pairs)} {rust_float(acc)}\n")
            else:
                out.append(f"{name}{label_text(pairs)} {rust_float(c['value'])}\n")


class Registry:
    def __init__(self):
        self.families = []

    def add(self, *args, **kwargs):
        f = Family(*args, **kwargs)
        self.families.append(f)
        return f

    def reset(self):
        for f in self.families:
            f.reset()

    def render_python(self, multiprocess=False):
        out = []
        with LOCK:
            families = self.families
            if multiprocess:
                order = {"counter": 0, "histogram": 1, "gauge": 2}
                families = sorted(self.families, key=lambda f: order[f.kind])
            for f in families:
                if multiprocess and not f.children:
                    continue
                f.render_python(out, multiprocess)
        return "".join(out)

    def render_rust(self):
        out = []
        with LOCK:
            for f in sorted(self.families, key=lambda f: f.rust_name()):
                f.render_rust(out)
        return "".join(out)


def python_process_families(registry, start_time):
    """The collectors prometheus_client registers by default (GC, platform,
    process), as every Python server that serves its default registry shows."""
    gc_collected = registry.add("python_gc_objects_collected", "counter",
                                "Objects collected during gc", ["generation"])
    gc_uncollectable = registry.add("python_gc_objects_uncollectable", "counter",
                                    "Uncollectable objects found during GC", ["generation"])
    gc_collections = registry.add("python_gc_collections", "counter",
                                  "Number of times this generation was collected",
                                  ["generation"])
    info = registry.add("python_info", "gauge", "Python platform information",
                        ["implementation", "major", "minor", "patchlevel", "version"])
    vmem = registry.add("process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.")
    rss = registry.add("process_resident_memory_bytes", "gauge", "Resident memory size in bytes.")
    start = registry.add("process_start_time_seconds", "gauge",
                         "Start time of the process since unix epoch in seconds.")
    cpu = registry.add("process_cpu_seconds", "counter", "Total user and system CPU time spent in seconds.")
    fds = registry.add("process_open_fds", "gauge", "Number of open file descriptors.")
    maxfds = registry.add("process_max_fds", "gauge", "Maximum number of open file descriptors.")
    for g in ("0", "1", "2"):
        gc_collected.inc({"generation": g}, 100.0 * (3 - int(g)))
        gc_uncollectable.inc({"generation": g}, 0.0)
        gc_collections.inc({"generation": g}, 10.0 * (3 - int(g)))
    info.set({"implementation": "CPython", "major": "3", "minor": "12", "patchlevel": "3",
              "version": "3.12.3"}, 1.0)
    vmem.set({}, 2.1e10)
    rss.set({}, 3.4e9)
    start.set({}, start_time)
    fds.set({}, 512.0)
    maxfds.set({}, 1048576.0)
    # These collectors compute their samples at collection: no _created.
    for f in (gc_collected, gc_uncollectable, gc_collections, cpu):
        f.created_samples = False
    return {"start": start, "cpu": cpu, "rss": rss}
