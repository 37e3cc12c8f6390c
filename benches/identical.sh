#!/usr/bin/env bash
# Whether two artifact-check builds write the same JSON report: md5 of
# `--format json` for every run directory of sample-artifacts/ and
# fixtures/ (a directory holding an AIPerf export), plus any directory
# given after the two binaries (e.g. the benchmark's generated runs). The
# "reports byte-identical" statements of docs/performance.md come from this
# script. Prints each directory whose reports differ, then the count; exits
# 1 if any differs.
#
#   bash benches/identical.sh BIN_A BIN_B [RUN_DIR...]
#   bash benches/identical.sh /tmp/before/artifact-check target/release/artifact-check /tmp/big
set -euo pipefail
a=$1 b=$2
shift 2
cd "$(dirname "$0")/.."
mapfile -t dirs < <(find sample-artifacts fixtures \( -name 'profile_export*.json*' \
  -o -name server_metrics_export.json \) -print | xargs -n1 dirname | sort -u)
n=0 differ=0
for d in "${dirs[@]}" "$@"; do
  [ -d "$d" ] || continue
  x=$("$a" --format json "$d" 2> /dev/null | md5sum || true)
  y=$("$b" --format json "$d" 2> /dev/null | md5sum || true)
  n=$((n + 1))
  if [ "$x" != "$y" ]; then
    differ=$((differ + 1))
    echo "differs: $d"
  fi
done
echo "$n run directories, $differ differ"
[ "$differ" -eq 0 ]
