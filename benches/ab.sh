#!/usr/bin/env bash
# Interleaved comparison of artifact-check builds on one run directory: each
# round runs every binary once, in turn, so a busy shared machine slows them
# alike. Prints, per binary, the fastest and the median wall time, the median
# CPU time (user + system), the median minor page faults and the peak RSS.
# The "median of N interleaved runs" figures of docs/performance.md come from
# this script.
#
#   bash benches/ab.sh ROUNDS RUN_DIR BIN_A BIN_B [BIN...]
#   bash benches/ab.sh 11 /tmp/big /tmp/before/artifact-check target/release/artifact-check
#
# PAUSE=SECONDS sleeps that long before every run, for one-shot runs on an
# idle machine rather than back to back (see "Huge pages" in
# docs/performance.md). A "binary" may be a wrapper script, e.g. one that
# sets ARTIFACT_CHECK_HUGE_PAGES.
set -euo pipefail
rounds=$1 dir=$2
shift 2
pause=${PAUSE:-0}
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
for i in $(seq "$rounds"); do
  n=0
  for bin in "$@"; do
    sleep "$pause"
    /usr/bin/time -f "%e %U %S %R %M" -o "$work/t" "$bin" --format json "$dir" > /dev/null 2>&1 || true
    tail -n 1 "$work/t" >> "$work/$n"
    n=$((n + 1))
  done
done
n=0
for bin in "$@"; do
  awk -v name="$bin" '
    function median(a, k,   i, j, t) {
      for (i = 2; i <= k; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
      return a[int((k + 1) / 2)]
    }
    { w[NR] = $1; c[NR] = $2 + $3; f[NR] = $4; m[NR] = $5 }
    END {
      min = w[1]; for (i = 2; i <= NR; i++) if (w[i] < min) min = w[i]
      peak = m[1]; for (i = 2; i <= NR; i++) if (m[i] > peak) peak = m[i]
      printf "%-50s min %.2f s  median %.2f s  median CPU %.2f s  median faults %d  peak RSS %d MiB\n",
        name, min, median(w, NR), median(c, NR), median(f, NR), peak / 1024
    }' "$work/$n"
  n=$((n + 1))
done
