# Shared by the benchmark scripts (sourced; needs $work).
# run_once NAME CMD...: one timed run; appends "NAME wall_s peak_rss_kib" to
# $work/runs (the wall time from the clock in ns, the RSS from /usr/bin/time).
run_once() {
  local name=$1; shift
  local t0 t1
  t0=$(date +%s%N)
  /usr/bin/time -f "%M" -o "$work/t" "$@" > /dev/null 2>&1 || true
  t1=$(date +%s%N)
  echo "$name $(awk "BEGIN{print ($t1 - $t0) / 1e9}") $(tail -n 1 "$work/t")" >> "$work/runs"
}
