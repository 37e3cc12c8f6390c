#!/usr/bin/env python3
"""Makes a large run directory for the benchmark: the records of a real sample
run repeated, each copy with fresh x_request_id / session_num / conversation
ids, until profile_export.jsonl reaches the requested size. The other
artifacts are copied as they are.

    python3 benches/make_big_run.py SAMPLE_RUN OUT_DIR SIZE_MB [--repeat-times] [--shuffle-metrics]

By default each copy of the sample starts after the one before ends (one
long run, distinct times, as a real long run has).

--repeat-times     every copy keeps the sample's times (the input repeats a
                   few dozen timestamps: the benchmark before issue 17;
                   --shift-times, the old name of the default, is accepted)
--shuffle-metrics  each record's metric keys in a random order (seeded), so no
                   two lines have one shape: the reader's worst case
"""

import json
import os
import random
import shutil
import sys

TIMES = ("credit_issued_ns", "request_start_ns", "request_ack_ns", "request_end_ns")


def copy_artifacts(src, out, skip):
    """Copies the sample's files other than those in `skip` into `out`."""
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(src):
        p = os.path.join(src, name)
        if os.path.isfile(p) and name not in skip:
            shutil.copy(p, os.path.join(out, name))


def write_records(src, path, target_bytes=None, count=None, shift=False, shuffle=False,
                  span=None):
    """Writes the sample's records, repeated with fresh ids, to `path` until
    `target_bytes` are written or `count` records (with `shift`, copy k
    later by k * `span` ns, by default the records' own span); returns the
    records' request_end_ns."""
    with open(os.path.join(src, "profile_export.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    t0 = min(r["metadata"]["request_start_ns"] for r in records)
    if span is None:
        span = max(r["metadata"]["request_end_ns"] for r in records) - t0 + 1000
    rng = random.Random(1)
    ends = []
    written = n = copy_no = 0

    def done():
        return (count is not None and n >= count) or (
            target_bytes is not None and written >= target_bytes)

    with open(path, "w", buffering=1 << 20) as f:
        while not done():
            for r in records:
                m = dict(r["metadata"])
                if shift:
                    for k in TIMES:
                        if m.get(k) is not None:
                            m[k] += copy_no * span
                m["x_request_id"] = f"{n:08x}-0000-4000-8000-{n:012x}"
                m["session_num"] = n
                m["conversation_id"] = f"session_{n:09d}"
                rec = {**r, "metadata": m}
                if shuffle and isinstance(r.get("metrics"), dict):
                    items = list(r["metrics"].items())
                    rng.shuffle(items)
                    rec["metrics"] = dict(items)
                line = json.dumps(rec, separators=(",", ":")) + "\n"
                f.write(line)
                ends.append(m["request_end_ns"])
                written += len(line)
                n += 1
                if done():
                    break
            copy_no += 1
    print(f"{path}: {written / 1e9:.3f} GB, {n} records", file=sys.stderr)
    return ends


def main(args):
    flags = {a for a in args if a.startswith("--")}
    src, out, size_mb = [a for a in args if not a.startswith("--")]
    unknown = flags - {"--shift-times", "--repeat-times", "--shuffle-metrics"}
    if unknown:
        sys.exit(f"unknown option(s): {', '.join(sorted(unknown))}")
    copy_artifacts(src, out, {"profile_export.jsonl"})
    write_records(src, os.path.join(out, "profile_export.jsonl"),
                  target_bytes=int(size_mb) * 1024 * 1024,
                  shift="--repeat-times" not in flags, shuffle="--shuffle-metrics" in flags)


if __name__ == "__main__":
    main(sys.argv[1:])
