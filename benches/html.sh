#!/usr/bin/env bash
# The HTML report of a large run: its size, the time to write it (against
# the JSON report of the same run, in the same session), and the time
# headless Chromium takes to load and lay it out (against the page of the
# 16-request clean sample, the baseline: the browser's own start-up).
#
#   bash benches/html.sh [REQUESTS] [ROUNDS]     # defaults: 100000, 3
#
# Needs a release build (cargo build --release) and, for the browser part,
# chromium. Figures: docs/performance.md.
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-100000}; rounds=${2:-3}
bin=target/release/artifact-check
work=$(mktemp -d /tmp/artifact-check-html.XXXXXX)
trap 'rm -rf "$work"' EXIT

python3 - "$n" "$work/big" <<'PY'
import json, os, sys
n, out = int(sys.argv[1]), sys.argv[2]
os.makedirs(out)
recs = [json.loads(l) for l in open("sample-artifacts/runs/clean/profile_export.jsonl")]
starts = [r["metadata"]["request_start_ns"] for r in recs]
ends = [r["metadata"]["request_end_ns"] for r in recs]
span = max(ends) - min(starts)
with open(os.path.join(out, "profile_export.jsonl"), "w") as f:
    for i in range(n):
        r = json.loads(json.dumps(recs[i % len(recs)]))
        shift = (i // len(recs)) * span // 4
        for k in ("request_start_ns", "request_end_ns", "request_ack_ns", "credit_issued_ns"):
            if isinstance(r["metadata"].get(k), int):
                r["metadata"][k] += shift
        r["metadata"]["x_request_id"] = f"req-{i}"
        f.write(json.dumps(r) + "\n")
PY
echo "records: $n ($(du -h "$work/big/profile_export.jsonl" | cut -f1))"

# Wall time of a command (s), its output discarded.
t() {
  python3 -c 'import subprocess, sys, time
s = time.perf_counter(); subprocess.run(sys.argv[1:], capture_output=True)
print(f"{time.perf_counter() - s:.2f}")' "$@"
}
for r in $(seq "$rounds"); do
  echo "round $r: json $(t "$bin" "$work/big" --format json -o "$work/big.json") s," \
    "html $(t "$bin" "$work/big" --format html -o "$work/big.html") s"
done
echo "page: $(du -k "$work/big.html" | cut -f1) KiB; JSON report $(du -k "$work/big.json" | cut -f1) KiB"

browser=$(command -v chromium || command -v chromium-browser || true)
[ -n "$browser" ] || { echo "no chromium: browser timing skipped"; exit 0; }
"$bin" sample-artifacts/runs/clean --format html -o "$work/small.html" || true
chrome=("$browser" --headless --no-sandbox --disable-gpu --dump-dom)
for r in $(seq "$rounds"); do
  echo "round $r: chromium small page $(t "${chrome[@]}" "file://$work/small.html") s," \
    "10^5-request page $(t "${chrome[@]}" "file://$work/big.html") s"
done
