#!/usr/bin/env python3
"""Makes a large run directory for the benchmark: the records of a real sample
run repeated, each copy with fresh x_request_id / session_num / conversation
ids, until profile_export.jsonl reaches the requested size. The other
artifacts are copied as they are.

    python3 benches/make_big_run.py SAMPLE_RUN OUT_DIR SIZE_MB
"""

import json
import os
import shutil
import sys


def main(src, out, size_mb):
    os.makedirs(out, exist_ok=True)
    for name in os.listdir(src):
        if name == "profile_export.jsonl":
            continue
        p = os.path.join(src, name)
        if os.path.isfile(p):
            shutil.copy(p, os.path.join(out, name))
    with open(os.path.join(src, "profile_export.jsonl")) as f:
        records = [json.loads(line) for line in f if line.strip()]
    target = size_mb * 1024 * 1024
    written = 0
    n = 0
    with open(os.path.join(out, "profile_export.jsonl"), "w", buffering=1 << 20) as f:
        while written < target:
            for r in records:
                m = r["metadata"]
                m["x_request_id"] = f"{n:08x}-0000-4000-8000-{n:012x}"
                m["session_num"] = n
                m["conversation_id"] = f"session_{n:09d}"
                line = json.dumps(r, separators=(",", ":")) + "\n"
                f.write(line)
                written += len(line)
                n += 1
                if written >= target:
                    break
    print(f"{out}/profile_export.jsonl: {written / 1e9:.3f} GB, {n} records", file=sys.stderr)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]))
