#!/usr/bin/env bash
# Interleaved comparison of one check between two builds of
# `examples/checks_loop` (copy each build's target/release/examples/checks_loop
# aside): each round runs both once, in turn, and takes each process's
# fastest of its ten runs of the check. Prints both sets sorted, the minimum
# and median of each, and in how many rounds B was faster. The "checks_loop
# ... interleaved" figures of docs/performance.md come from this script.
#
#   bash benches/ab_checks.sh ROUNDS RUN_DIR CHECK LOOP_A LOOP_B
#   bash benches/ab_checks.sh 8 /tmp/scr2 p /tmp/before/checks_loop target/release/examples/checks_loop
#
# CHECK as checks_loop takes it: a (artifacts), p (phase_contamination),
# c (cold_connections), x (prefix_cache).
set -euo pipefail
rounds=$1 dir=$2 check=$3 a=$4 b=$5
best() { "$1" "$dir" "$check" 2>&1 | sort -n | head -n 1; }
for _ in $(seq "$rounds"); do
  echo "$(best "$a") $(best "$b")"
done | python3 -c '
import statistics, sys
rows = [tuple(map(float, line.split())) for line in sys.stdin if line.strip()]
a, b = [r[0] for r in rows], [r[1] for r in rows]
print("A", " ".join(f"{x:.3f}" for x in sorted(a)))
print("B", " ".join(f"{x:.3f}" for x in sorted(b)))
print(f"min {min(a):.3f} -> {min(b):.3f} s, median {statistics.median(a):.3f} -> "
      f"{statistics.median(b):.3f} s; B faster in {sum(y < x for x, y in rows)} of {len(rows)} rounds")
'
