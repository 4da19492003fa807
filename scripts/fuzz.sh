#!/usr/bin/env bash
# The fuzz stage of CI (docs/fuzzing-and-sanitizers.md): builds the libFuzzer harnesses of
# tests/fuzz with clang (LOOPSCALE_FUZZ) in build-fuzz and runs each for a fixed time, as many at
# once as there are cores. Prints executions and coverage per harness; exits non-zero on any
# crash, sanitizer report, hang (-timeout), leak or oversized allocation.
#   scripts/fuzz.sh [SECONDS per harness, default 10] [HARNESS...]
# Longer by hand: scripts/fuzz.sh 3600 fuzz_checkpoint. What a run learns stays in
# build-fuzz/fuzz-work/corpus/<harness> and is reused by the next run; a finding is written to
# build-fuzz/fuzz-work/artifacts/<harness>/ (copy it to tests/fuzz/regressions/<harness>/).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-10}
shift || true
all=(fuzz_runs_csv fuzz_runs_jsonl fuzz_results_jsonl fuzz_train_config fuzz_sweep_spec fuzz_token_file fuzz_checkpoint fuzz_bundle)
[ $# -gt 0 ] && harnesses=("$@") || harnesses=("${all[@]}")
bash scripts/setup.sh
jobs=$(nproc)
cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_COMPILER=clang++ -DLOOPSCALE_FUZZ=ON \
  -DLOOPSCALE_BUILD_BENCH=OFF -DLOOPSCALE_CUDA=OFF >/dev/null
if [ $# -gt 0 ]; then
  cmake --build build-fuzz -j "$jobs" --target fuzz_make_seeds "${harnesses[@]}"
else
  cmake --build build-fuzz -j "$jobs" --target loopscale_fuzz
fi

bin=build-fuzz/tests/fuzz
work=build-fuzz/fuzz-work
mkdir -p "$work"
# The binary seeds again, in the formats of today's writers (the copies in tests/fuzz/corpus may
# be of an older format).
"$bin/fuzz_make_seeds" "$work/seeds"

run_one() {
  local h=$1
  mkdir -p "$work/corpus/$h" "$work/artifacts/$h" "$work/seeds/$h" "tests/fuzz/regressions/$h"
  # The first folder takes what the run finds; the seeds and the saved findings in the source tree
  # are only read (so every finding is replayed here too, under clang's ASan and UBSan).
  local rc=0
  "$bin/$h" -max_total_time="$secs" -timeout=5 -rss_limit_mb=2048 -malloc_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/$h/" "$work/corpus/$h" "tests/fuzz/corpus/$h" "tests/fuzz/regressions/$h" "$work/seeds/$h" >"$work/$h.log" 2>&1 || rc=$?
  echo "$rc" >"$work/$h.rc"
}

pids=()
for h in "${harnesses[@]}"; do
  run_one "$h" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}"
    pids=("${pids[@]:1}")
  fi
done
wait

failed=0
printf '%-20s %12s %10s %8s %8s %s\n' harness executions exec/s cov ft result
for h in "${harnesses[@]}"; do
  log="$work/$h.log"
  rc=$(cat "$work/$h.rc")
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  result=ok
  if [ "$rc" != 0 ]; then result="FAILED (rc $rc)"; failed=1; fi
  printf '%-20s %12s %10s %8s %8s %s\n' "$h" "${execs:-?}" "${speed:-?}" "${cov:-?}" "${ft:-?}" "$result"
done
if [ "$failed" != 0 ]; then
  for h in "${harnesses[@]}"; do
    [ "$(cat "$work/$h.rc")" = 0 ] && continue
    echo "---- $h: $work/$h.log (last lines); findings in $work/artifacts/$h/:"
    ls "$work/artifacts/$h/"
    tail -40 "$work/$h.log"
  done
  exit 1
fi
