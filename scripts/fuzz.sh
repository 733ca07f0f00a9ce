#!/usr/bin/env bash
# Runs the fuzz targets of Tests/Fuzz with the coverage-guided gattway-fuzz (libFuzzer), FUZZ_JOBS
# at a time (default: one per core; each target is one single-threaded process), and prints a
# table in the targets' order: executions, executions/s, new corpus entries, corpus size, crashes.
# Used by `make fuzz` and `make test-fuzz`; the Makefile builds the binary first.
#
#   scripts/fuzz.sh fuzz BINARY   long runs: FUZZ_SECONDS (default 120) per target; the corpus is
#                                 kept and grows in .build/fuzz-corpus/NAME (started from the
#                                 target's seeds and Tests/Fixtures/fuzz/NAME); a crash, hang
#                                 (timeout) or out-of-memory input is written to
#                                 Tests/Fixtures/fuzz/NAME/ (crash-*, timeout-*, oom-*), where it
#                                 becomes a fixture once fixed and renamed.
#   scripts/fuzz.sh test BINARY   the make test lane: each target bounded and reproducible
#                                 (-seed=1, TEST_FUZZ_RUNS runs or TEST_FUZZ_SECONDS, whichever
#                                 comes first; defaults 100000 and 9) from a fresh corpus of its seeds; artifacts go to
#                                 .build/fuzz-test/NAME/, and any crash fails the script, naming
#                                 the input.
#
# TARGETS="json config" limits either mode to some targets (gattway-fuzz list names them all);
# FUZZ_FLAGS adds libFuzzer options (e.g. "-fork=2 -ignore_crashes=1" to keep going past a crash).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: scripts/fuzz.sh fuzz|test BINARY}
binary=${2:?usage: scripts/fuzz.sh fuzz|test BINARY}
targets=${TARGETS:-$("$binary" list | cut -f1)}
# Swift's backtracer would take seconds per crash and print pages; libFuzzer reports the input.
export SWIFT_BACKTRACE=enable=no
# LeakSanitizer counts Swift's lazily initialised globals and runtime caches as leaks (at the exit
# of `gattway-fuzz seeds`, say). Memory that grows with the input is caught by libFuzzer's own
# -rss_limit_mb and -malloc_limit_mb (2 GB by default) instead.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}

case "$mode" in
  fuzz) seconds=${FUZZ_SECONDS:-120} ;;
  test) runs=${TEST_FUZZ_RUNS:-100000} seconds=${TEST_FUZZ_SECONDS:-9} ;;
  *) echo "usage: scripts/fuzz.sh fuzz|test BINARY" >&2; exit 64 ;;
esac

count() { find "$1" -maxdepth 1 -type f | wc -l; }
size() { du -sk "$1" | cut -f1; }
stat_of() { sed -n "s/^stat::$1: *//p" "$2" | tail -1; }

# run_one NAME: fuzzes one target; its table row goes to .build/fuzz-logs/NAME.row and, when it
# crashed, the inputs and libFuzzer's summary to NAME.failed (printed after all have run).
run_one() {
  local name=$1 fixtures corpus artifacts options before_files dirs log status started elapsed
  local executions per_second added crashes
  fixtures=Tests/Fixtures/fuzz/$name
  rm -f ".build/fuzz-logs/$name.row" ".build/fuzz-logs/$name.failed"
  if [ "$mode" = fuzz ]; then
    corpus=.build/fuzz-corpus/$name
    artifacts=$fixtures/
    mkdir -p "$fixtures"
    options=(-max_total_time="$seconds")
  else
    corpus=.build/fuzz-test/$name/corpus
    artifacts=.build/fuzz-test/$name/
    rm -rf ".build/fuzz-test/$name"
    options=(-seed=1 -runs="$runs" -max_total_time="$seconds")
  fi
  mkdir -p "$corpus"
  "$binary" seeds "$name" "$corpus" >/dev/null
  before_files=$(count "$corpus")
  dirs=("$corpus")
  # The fixtures are read, never written: new inputs go to the first folder only.
  [ -d "$fixtures" ] && dirs+=("$fixtures")
  log=.build/fuzz-logs/$name.log
  status=0
  started=$(date +%s.%N)
  # shellcheck disable=SC2086  # FUZZ_FLAGS is a list of options
  "$binary" run "$name" "${options[@]}" -print_final_stats=1 -timeout=10 -rss_limit_mb=2048 \
    -artifact_prefix="$artifacts" ${FUZZ_FLAGS:-} "${dirs[@]}" >"$log" 2>&1 || status=$?
  elapsed=$(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
  executions=$(stat_of number_of_executed_units "$log")
  # -fork prints no final stats; its progress lines (#N: …) count the executions of every job.
  [ -n "$executions" ] || executions=$(sed -n 's/^#\([0-9][0-9]*\): cov:.*/\1/p' "$log" | tail -1)
  # libFuzzer's average_exec_per_sec counts whole seconds (0 for a run under one); this is the
  # wall time of the whole run, loading the corpus included.
  per_second=$(awk -v n="${executions:-0}" -v t="$elapsed" 'BEGIN { printf "%d", (t > 0 ? n / t : 0) }')
  added=$(( $(count "$corpus") - before_files ))
  crashes=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$log" | grep -cE '/(crash|timeout|oom|leak)-' || true)
  [ "$status" -ne 0 ] && [ "$crashes" -eq 0 ] && crashes="exit $status"
  printf '%-18s %7ss %12s %10s %8s %8s %9s  %s\n' "$name" "$elapsed" "${executions:-?}" "$per_second" "$added" \
    "$(count "$corpus")" "$(size "$corpus")K" "$crashes" > ".build/fuzz-logs/$name.row"
  if [ "$status" -ne 0 ]; then
    {
      sed -n 's/.*Test unit written to \(.*\)$/  \1/p' "$log"
      grep -m3 -E 'Fatal error|runtime failure|ERROR: libFuzzer|SUMMARY' "$log" | sed 's/^/  /' || true
      echo "fuzz: $name failed (log: $log)"
    } > ".build/fuzz-logs/$name.failed"
  fi
}

jobs=${FUZZ_JOBS:-$(nproc)}
mkdir -p .build/fuzz-logs
for name in $targets; do
  while [ "$(jobs -rp | wc -l)" -ge "$jobs" ]; do wait -n || true; done
  run_one "$name" &
done
wait

failed=()
printf '%-18s %8s %12s %10s %8s %8s %9s  %s\n' target time executions execs/s new corpus size crashes
for name in $targets; do
  if [ -e ".build/fuzz-logs/$name.row" ]; then cat ".build/fuzz-logs/$name.row"; else printf '%-18s did not run\n' "$name"; failed+=("$name"); fi
  if [ -e ".build/fuzz-logs/$name.failed" ]; then cat ".build/fuzz-logs/$name.failed" >&2; failed+=("$name"); fi
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz: crashes in ${failed[*]} — the inputs are listed above (replay: gattway-fuzz replay NAME FILE)" >&2
  exit 1
fi
