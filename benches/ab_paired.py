#!/usr/bin/env python3
"""Interleaved comparison of artifact-check builds on one run directory,
timed finer than benches/ab.sh (perf_counter wall time, getrusage CPU):
each round runs every binary once, in turn, and the ratios are taken per
round against the first binary, so a shared host that speeds up or slows
down during the comparison moves both sides of each ratio alike. Prints,
per binary, the median and fastest wall time, the median CPU time and the
median of the per-round ratios (wall and CPU) to the first binary. The
"paired ratio" figures of docs/performance.md come from this script.

    python3 benches/ab_paired.py ROUNDS RUN_DIR BIN_A BIN_B [BIN...]
"""
import resource
import statistics as st
import subprocess
import sys
import time


def main():
    rounds, run_dir, bins = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    wall = {b: [] for b in bins}
    cpu = {b: [] for b in bins}
    for _ in range(rounds):
        for b in bins:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            t = time.perf_counter()
            subprocess.run([b, "--format", "json", run_dir],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wall[b].append(time.perf_counter() - t)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu[b].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    base = bins[0]
    for b in bins:
        w = st.median([y / x for x, y in zip(wall[base], wall[b])])
        c = st.median([y / x for x, y in zip(cpu[base], cpu[b])])
        print(f"{b:40s} wall median {st.median(wall[b]):.4f} s  min {min(wall[b]):.4f} s  "
              f"CPU median {st.median(cpu[b]):.4f} s  paired ratio wall {w:.3f} CPU {c:.3f}")


if __name__ == "__main__":
    main()
