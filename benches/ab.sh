#!/usr/bin/env bash
# Interleaved comparison of artifact-check builds on one run directory: each
# round runs every binary once, in turn, so a busy shared machine slows them
# alike. Prints, per binary, the fastest and the median wall time, and the
# peak RSS. The "median of 11 interleaved runs" figures of
# docs/performance.md come from this script.
#
#   bash benches/ab.sh ROUNDS RUN_DIR BIN_A BIN_B [BIN...]
#   bash benches/ab.sh 11 /tmp/big /tmp/before/artifact-check target/release/artifact-check
set -euo pipefail
rounds=$1 dir=$2
shift 2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for i in $(seq "$rounds"); do
  n=0
  for bin in "$@"; do
    /usr/bin/time -f "%e %M" -o "$work/t" "$bin" --format json "$dir" > /dev/null 2>&1 || true
    tail -n 1 "$work/t" >> "$work/$n"
    n=$((n + 1))
  done
done
n=0
for bin in "$@"; do
  sort -n "$work/$n" | awk -v name="$bin" '
    { w[NR] = $1; m[NR] = $2 }
    END { printf "%-50s min %.2f s  median %.2f s  peak RSS %d MiB\n", name, w[1], w[int((NR + 1) / 2)], m[1] / 1024 }'
  n=$((n + 1))
done
