#!/usr/bin/env bash
# The raw-scrape benchmark of docs/performance.md (issue 17). For each size
# in SIZES_MB (default "300 2048"), generates a run directory whose
# server_metrics_export.jsonl is about that size (benches/make_scrapes.py:
# copies of SAMPLE's real raw scrapes laid end to end in time, counters
# growing every scrape as the server's did, ENDPOINTS endpoints), then
# measures in one run, on a warm page cache, in ROUNDS interleaved rounds:
#   - artifact-check, the full check of the run (every check, JSON report);
#   - the raw-scrape reader alone (examples/scrape_read, the checks' columns);
#   - the Python loop an analyst writes (benches/python_scrapes.py);
#   - `wc -l` on the same file.
# Prints per contender the median wall time, GB/s of the raw-scrape file and
# peak RSS (also as % of the file), the ratios to the Python loop and to
# `wc -l`, and how time and memory grow from the first size to the last.
#
#   bash benches/scrapes.sh                  # SIZES_MB="300 2048" ROUNDS=3
#   SIZES_MB=300 ROUNDS=5 bash benches/scrapes.sh
set -euo pipefail
cd "$(dirname "$0")/.."
SIZES_MB=${SIZES_MB:-"300 2048"}
ROUNDS=${ROUNDS:-3}
ENDPOINTS=${ENDPOINTS:-2}
SAMPLE=${SAMPLE:-sample-artifacts/runs/vllm-dp}
work="$(mktemp -d "${BENCH_DIR:-/tmp}/artifact-check-scrapes.XXXXXX")"
trap 'rm -rf "$work"' EXIT

cargo build --release --quiet
cargo build --release --quiet --example scrape_read
bin=target/release/artifact-check
reader=target/release/examples/scrape_read

# shellcheck source=benches/lib.sh
source benches/lib.sh

: > "$work/summary"
for size in $SIZES_MB; do
  dir="$work/run-$size"
  python3 benches/make_scrapes.py "$SAMPLE" "$dir" "$size" --endpoints "$ENDPOINTS" > "$work/made"
  file="$dir/server_metrics_export.jsonl"
  bytes=$(stat -c %s "$file")
  sync
  cat "$file" > /dev/null
  : > "$work/runs"
  for _ in $(seq "$ROUNDS"); do
    run_once full "$bin" --format json "$dir"
    run_once reader "$reader" "$file" 1
    run_once python python3 benches/python_scrapes.py "$file"
    run_once wc wc -l "$file"
  done
  echo "== $(cat "$work/made"); $(awk "BEGIN{printf \"%.3f\", $bytes / 1e9}") GB, $ROUNDS rounds"
  awk -v bytes="$bytes" -v size="$size" '
    { t[$1] = t[$1] " " $2; m[$1] = ($3 > m[$1] ? $3 : m[$1]) }
    function median(s,   a, n, i, j, x) {
      n = split(s, a, " ")
      for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { x = a[i]; a[i] = a[j]; a[j] = x }
      return a[int((n + 1) / 2)]
    }
    END {
      py = median(t["python"]); wc = median(t["wc"])
      for (k in t) {
        s = median(t[k])
        printf "%-7s %8.3f s %6.2f GB/s  peak RSS %7.1f MB (%5.1f %% of the file)  %6.1fx the Python loop  %6.1fx wc -l\n",
          k, s, bytes / s / 1e9, m[k] / 1024, m[k] * 1024 / bytes * 100, py / s, s / wc
        print size, k, s, m[k], bytes >> "'"$work/summary"'"
      }
    }' "$work/runs" | sort
done
# Growth from the first size to the last.
awk '
  { if (!(($2) in t0)) { t0[$2] = $3; m0[$2] = $4; b0 = $5 } t1[$2] = $3; m1[$2] = $4; b1 = $5 }
  END {
    if (b1 == b0) exit
    printf "== growth, file x%.2f\n", b1 / b0
    for (k in t0) printf "%-7s time x%.2f  peak RSS x%.2f\n", k, t1[k] / t0[k], m1[k] / m0[k]
  }' "$work/summary" | sort
