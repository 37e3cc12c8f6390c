#!/usr/bin/env bash
# Fuzzes every reader (and a whole run) for SECONDS each (default 120), seeded
# from the sample runs' own files. Any input libFuzzer saves (crash, leak, oom,
# timeout) is copied into regressions/<target>/, which
# tests/fuzz_regressions.rs replays in CI. A leak report on the first input
# that starts rayon's global pool (whose registry is never freed, by design)
# does not reproduce when that input is replayed alone.
#
#   bash tests/fuzz/run.sh [SECONDS]
# Needs cargo-fuzz (cargo install cargo-fuzz); with a stable toolchain,
# RUSTC_BOOTSTRAP=1 lets it use the nightly flags it needs.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
secs=${1:-120}
export RUSTC_BOOTSTRAP=1
runs="$root/sample-artifacts/runs"

seed() { # target files...
  local t=$1; shift
  mkdir -p "$here/corpus/$t"
  for f in "$@"; do cp "$f" "$here/corpus/$t/$(echo "$f" | md5sum | cut -c1-12)"; done
}
seed records_jsonl "$runs"/*/profile_export.jsonl
# One line per input for the differential target (the first lines of each run).
mkdir -p "$here/corpus/record_fast_path"
for f in "$runs"/*/profile_export.jsonl; do
  head -n 3 "$f" | split -l 1 - "$here/corpus/record_fast_path/$(basename "$(dirname "$f")")-"
  # And lines together: the later ones read with the cache the first filled.
  head -n 3 "$f" > "$here/corpus/record_fast_path/$(basename "$(dirname "$f")")-first3"
done
seed server_metrics_json "$runs"/*/server_metrics_export.json
seed summary_json "$runs"/*/profile_export_aiperf.json
# The first two lines of each run's raw scrapes (a line shape, then a line
# read through it), not whole files: every input is read twice and each
# row's buckets decoded in several orders, so a whole file (100-640 kB)
# takes about 0.1 s, and 60 s went to replaying the seeds without a single
# mutation (667 runs; 8,791 from these, 2026-12-07).
mkdir -p "$here/corpus/scrapes_jsonl"
for f in "$runs"/*/server_metrics_export.jsonl; do
  head -n 2 "$f" > "$here/corpus/scrapes_jsonl/$(basename "$(dirname "$f")")-first2"
done
mkdir -p "$here/corpus/scrape_numbers"
head -c 900 /dev/urandom > "$here/corpus/scrape_numbers/random"
mkdir -p "$here/corpus/whole_run"
for r in "$runs"/*/; do
  { cat "$r/profile_export.jsonl"; printf '\0'; cat "$r/server_metrics_export.json"; printf '\0';
    cat "$r/server_metrics_export.jsonl" 2>/dev/null; } > "$here/corpus/whole_run/$(basename "$r")"
done

# The settings readers: the defaults as `config` writes them, a claims file
# naming every kind of claim, and the sample runs' JSON reports as baselines.
(cd "$root" && cargo build --release -q)
bin="$root/target/release/artifact-check"
mkdir -p "$here/corpus/config_toml" "$here/corpus/claims_toml" "$here/corpus/baseline_json"
(cd / && "$bin" config) > "$here/corpus/config_toml/defaults"
cat > "$here/corpus/config_toml/scoped" <<'TOML'
fail-on = "warning"
ignore = ["cold-connection-bias"]
[[scoped-ignore]]
code = "phase-contamination"
metric = "vllm:*"
run = "late-*"
reason = "known"
[phase-contamination]
request-scoped-metrics = { "x:y" = "arrival" }
TOML
cat > "$here/corpus/claims_toml/every-kind" <<'TOML'
[[claim]]
name = "ttft_p99_ms"
value = 152.0
tolerance-pct = 5.0
[[claim]]
name = "time_to_first_token.p50"
value = 10
tolerance = 0.5
over = "steady-state"
[[claim]]
name = "prefix_cache_hit_rate"
value = 0.5
tolerance = 0.05
[[claim]]
name = "output_token_throughput"
value = 1000
tolerance-pct = 10
over = "steady-state"
[[claim]]
name = "request_throughput"
value = 10
tolerance-pct = 10
TOML
for r in "$runs"/*/; do
  "$bin" "$r" --format json > "$here/corpus/baseline_json/$(basename "$r")" 2>/dev/null || true
done

status=0
for t in records_jsonl record_fast_path server_metrics_json summary_json scrapes_jsonl whole_run scrape_numbers config_toml claims_toml baseline_json; do
  echo "== $t ($secs s)"
  # Inputs an earlier run saved belong in regressions/ already: keep them
  # there and start clean, so only what this run finds is reported.
  if ls "$here/artifacts/$t"/*-* >/dev/null 2>&1; then
    mkdir -p "$here/regressions/$t"
    cp -n "$here/artifacts/$t"/*-* "$here/regressions/$t/"
    rm -f "$here/artifacts/$t"/*-*
  fi
  # Raw-scrape inputs past 32 kB only slow the target down (above).
  len=262144
  [ "$t" = scrapes_jsonl ] && len=32768
  (cd "$root" && cargo fuzz run --fuzz-dir tests/fuzz "$t" -- -max_total_time="$secs" -max_len="$len" \
      -rss_limit_mb=2048 2>&1 | tail -n 3) || status=1
  # crash-, leak-, oom- and timeout- inputs all become regression inputs.
  if ls "$here/artifacts/$t"/*-* >/dev/null 2>&1; then
    mkdir -p "$here/regressions/$t"
    cp "$here/artifacts/$t"/*-* "$here/regressions/$t/"
    echo "inputs libFuzzer saved copied to regressions/$t/"
    status=1
  fi
done
exit $status
