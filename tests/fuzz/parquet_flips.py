#!/usr/bin/env python3
"""Damaged copies of the real parquet raw scrapes, each audited by a build
with the `parquet` feature (no cargo-fuzz target reads parquet: polars
under the fuzz build's instrumentation is not built).

Each copy of a run, fixtures/parquet/late-warmup unless RUN is given (its
JSONL raw scrapes removed, so the parquet file is read), has 1-8 bytes of its
`server_metrics_export.parquet` set at random. A copy fails when the check
exits with anything but 0 or 1, writes to stderr (a panic message), or
takes over 60 s; its file is kept as DIR/failed-N.parquet.

    cargo build --release --features parquet
    python3 tests/fuzz/parquet_flips.py SEED COUNT [DIR [RUN]]

DIR defaults to a new temporary directory. Prints one line per failure and
a count; exits 1 when any copy failed.
"""

import os
import random
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RUN = os.path.join(ROOT, "fixtures", "parquet", "late-warmup")
BIN = os.path.join(ROOT, "target", "release", "artifact-check")
FILE = "server_metrics_export.parquet"


def main() -> int:
    seed, count = int(sys.argv[1]), int(sys.argv[2])
    work = sys.argv[3] if len(sys.argv) > 3 else tempfile.mkdtemp(prefix="parquet-flips-")
    source = sys.argv[4] if len(sys.argv) > 4 else RUN
    run = os.path.join(work, "run")
    shutil.rmtree(run, ignore_errors=True)
    shutil.copytree(source, run)
    jsonl = os.path.join(run, "server_metrics_export.jsonl")
    if os.path.exists(jsonl):
        os.remove(jsonl)
    good = open(os.path.join(source, FILE), "rb").read()
    rng = random.Random(seed)
    failed = 0
    for n in range(count):
        bad = bytearray(good)
        for _ in range(rng.randint(1, 8)):
            bad[rng.randrange(len(bad))] = rng.randrange(256)
        with open(os.path.join(run, FILE), "wb") as f:
            f.write(bad)
        try:
            r = subprocess.run([BIN, run, "--format", "json"], capture_output=True, timeout=60)
            why = None if r.returncode in (0, 1) and not r.stderr.strip() else (
                f"exit {r.returncode}: {r.stderr.decode(errors='replace')[:300]!r}")
        except subprocess.TimeoutExpired:
            why = "over 60 s"
        if why:
            failed += 1
            keep = os.path.join(work, f"failed-{n}.parquet")
            with open(keep, "wb") as f:
                f.write(bad)
            print(f"copy {n} ({keep}): {why}", flush=True)
    print(f"{count} damaged copies, {failed} failed (seed {seed}, in {work})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
