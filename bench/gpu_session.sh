#!/usr/bin/env bash
# Everything a lent GPU machine is for, in one command that keeps what it finished: the device
# tests and the training speed (bench/gpu_check.sh), where a step's time goes (bench/gpu_profile.sh,
# the d 1024 model and then issue 15's small one),
# and issue 15's acceptance pair (bench/gpu_mix_probes.sh), within SECONDS in all. After every
# stage, and every 20 s while one runs, OUT_DIR/results.tgz is written again (atomically: a command
# stopped at its time limit, or a machine taken back mid-stage, still returns what was written up
# to 20 s before) beside OUT_DIR/summary.txt; two files, so a lease's limit on returned files never
# bites.
#
#   bench/gpu_session.sh OUT_DIR BIN_DIR [CORPUS [SECONDS]]
#
# BIN_DIR: on the build machine, configure a tree for the GPU machine (-DLOOPSCALE_NATIVE=OFF
# -DLOOPSCALE_MPI=OFF -DLOOPSCALE_BUILD_BENCH=ON), build its CUDA programs and loopscale, then
# `GPU_CHECK_BUILD=that-tree bench/gpu_check.sh --collect BIN_DIR`. CORPUS: the byte-level corpus
# folder (default data/corpus) or a .tar.xz of it (a fifth of the size to carry), read by the mix
# stage only. SECONDS: default 540; keep it a minute under the limit of the command that runs this
# (a lent machine's call runs at most 600 s), and within what the lease has left: its start, the
# transfers and the wait between two calls count against the same device time, so derive SECONDS
# from the lease's time left just before the call, not from a plan made before it started.
# STAGES (environment): default "check profile mix".
# Exit status: 0 every stage ran, 1 a stage failed, 2 bad usage, 77 no usable CUDA device.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: bench/gpu_session.sh OUT_DIR BIN_DIR [CORPUS [SECONDS]]}
bin=${2:?usage: bench/gpu_session.sh OUT_DIR BIN_DIR [CORPUS [SECONDS]]}
corpus=${3:-$here/data/corpus}
budget=${4:-540}
stages=${STAGES:-check profile mix}
t0=$SECONDS
left() { echo $((budget - (SECONDS - t0))); }
mkdir -p "$out" || { echo "gpu_session: cannot create $out" >&2; exit 2; }
bin=$(cd "$bin" 2>/dev/null && pwd) || { echo "gpu_session: no folder $2" >&2; exit 2; }
work=$(mktemp -d /tmp/gpu_session.XXXXXX)
summary="$out/summary.txt"
note() { echo "gpu_session: [$((SECONDS - t0)) s] $*" | tee -a "$summary"; }
keep() {  # results.tgz again, from everything the stages wrote so far (a .part of each writer's own)
  local part="$out/results.tgz.part.$BASHPID"
  tar -czf "$part" --exclude='*.bin' -C "$work" . 2>/dev/null && mv "$part" "$out/results.tgz" || rm -f "$part"
}

. "$here/bench/gpu_env.sh"
{
  date -u
  timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv 2>&1
  grep -m1 'model name' /proc/cpuinfo
  echo "cores $(nproc); $(ldd --version | head -1)"
  missing=$(LD_LIBRARY_PATH=$(gpu_library_path "$bin") ldd "$bin/loopscale" "$bin/bench_cuda_model" 2>&1 | grep 'not found' | sort -u)
  [ -n "$missing" ] && echo "missing libraries: $missing"
  echo "xz: $(command -v xz || echo 'not installed (a .tar.xz corpus is unpacked with Python)')"
} 2>&1 | tee -a "$summary"
keep
# The stages' own keep runs only when a stage ends; a command stopped mid-stage (its time limit)
# would lose everything that stage wrote, the mix stage's first scored run included.
( while sleep 20; do keep; done ) &
keeper=$!
trap 'kill "$keeper" 2>/dev/null' EXIT

status=0
if [[ " $stages " == *" check "* ]]; then
  note "check: bench/gpu_check.sh ($(left) s left)"
  # Within the session's budget, leaving the profile stage the 95 s it needs to start.
  GPU_CHECK_TIMEOUT=${GPU_CHECK_TIMEOUT:-90} GPU_CHECK_DEADLINE=$(($(left) - 95)) \
    bash "$here/bench/gpu_check.sh" "$work/check" "$bin" >"$work/check.log" 2>&1
  rc=$?
  cat "$work/check/status.txt" >>"$summary" 2>/dev/null
  tail -n 5 "$work/check/bench.txt" >>"$summary" 2>/dev/null
  grep -A11 "one step's GEMMs" "$work/check/gemm_rates.txt" >>"$summary" 2>/dev/null
  tail -n 3 "$work/check/bench_packed.txt" "$work/check/bench_packed_single.txt" >>"$summary" 2>/dev/null
  note "check exit $rc"
  keep
  [ "$rc" = 77 ] && exit 77
  [ "$rc" = 0 ] || status=1
fi
# The profile's first part, two unprofiled and two traced steps of one model (two short runs of
# bench_cuda_model, which the check stage ran for three models of ten steps within its 34 s on the
# H200), gets at most 40 s a run, less when the check stage ran to its deadline (the two runs
# then share what is left but 10 s); Nsight Compute what is left, at most 150 s, none under 40 s.
if [[ " $stages " == *" profile "* ]] && [ "$(left)" -gt 90 ]; then
  note "profile: bench/gpu_profile.sh ($(left) s left)"
  ncu_seconds=$(($(left) - 130))  # 40 s of it kept for the small model's trace after
  [ "$ncu_seconds" -gt 150 ] && ncu_seconds=150
  run_seconds=$((($(left) - 10) / 2))
  [ "$run_seconds" -gt 40 ] && run_seconds=40
  GPU_PROFILE_NCU=$([ "$ncu_seconds" -ge 40 ] && echo 1 || echo 0) GPU_PROFILE_TIMEOUT=$ncu_seconds GPU_PROFILE_RUN_TIMEOUT=$run_seconds \
    bash "$here/bench/gpu_profile.sh" "$work/profile" "$bin" dense >"$work/profile.log" 2>&1
  rc=$?
  cat "$work/profile/trace.txt" >>"$summary" 2>/dev/null
  head -n 25 "$work/profile/kernels.txt" >>"$summary" 2>/dev/null
  note "profile exit $rc"
  keep
  [ "$rc" = 77 ] && exit 77
  [ "$rc" = 0 ] || status=1
  # The small model of the mix stage too (a few seconds, no ncu): its step is short enough that the
  # trace shows what launches and the host's waits cost, which the d 1024 step hides.
  if [ "$(left)" -gt 60 ]; then
    note "profile of the small model ($(left) s left)"
    GPU_PROFILE_NCU=0 GPU_PROFILE_RUN_TIMEOUT=25 bash "$here/bench/gpu_profile.sh" "$work/profile_small" "$bin" small >"$work/profile_small.log" 2>&1
    rc=$?
    cat "$work/profile_small/trace.txt" >>"$summary" 2>/dev/null
    note "profile of the small model exit $rc"
    keep
    [ "$rc" = 0 ] || status=1
  fi
fi
if [[ " $stages " == *" mix "* ]]; then
  mix_seconds=$(($(left) - ${NOMIX_RESERVE:-100} - ${EVAL_RESERVE:-90}))
  if [[ -f "$corpus" ]]; then  # a tarball of the corpus folder, unpacked beside the results (not into them)
    unpacked=$(mktemp -d /tmp/gpu_session_corpus.XXXXXX)
    # GNU tar needs an xz program for -J, which a bare image may lack; Python's tarfile reads it alone.
    if command -v xz >/dev/null; then
      tar -xJf "$corpus" -C "$unpacked" 2>>"$summary" || note "cannot unpack $corpus"
    else
      python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$corpus" "$unpacked" 2>>"$summary" ||
        note "cannot unpack $corpus (no xz; Python's tarfile failed)"
    fi
    found=$(find "$unpacked" -name train.bin | head -1)
    corpus=${found:+$(dirname "$found")}
    mix_seconds=$(($(left) - ${NOMIX_RESERVE:-100} - ${EVAL_RESERVE:-90}))
  fi
  if [ ! -f "$corpus/train.bin" ]; then
    note "mix: skipped, no corpus (train.bin) in ${3:-data/corpus}"
    status=1
  elif [ "$mix_seconds" -lt 120 ]; then
    note "mix: skipped, $(left) s left"
  else
    note "mix: bench/gpu_mix_probes.sh, the mix run stopped after $mix_seconds s ($(left) s left)"
    MIX_SECONDS=$mix_seconds NOMIX_SECONDS=${NOMIX_SECONDS:-90} EVAL_SECONDS=${EVAL_SECONDS:-40} \
      NOMIX_TOKENS=${NOMIX_TOKENS:-4e7} MIX_TOKENS=${MIX_TOKENS:-3e8} \
      bash "$here/bench/gpu_mix_probes.sh" "$work/mix" "$bin/loopscale" "$corpus" >"$work/mix.log" 2>&1
    rc=$?
    grep 'gpu_mix_probes:' "$work/mix.log" >>"$summary"
    cat "$work/mix/nomix.eval.txt" "$work/mix/mix10.eval.txt" >>"$summary" 2>/dev/null
    note "mix exit $rc"
    keep
    [ "$rc" = 0 ] || status=1
  fi
fi
note "done, exit $status"
kill "$keeper" 2>/dev/null; wait "$keeper" 2>/dev/null  # so no older snapshot replaces the last one
keep
rm -f "$out"/results.tgz.part.*
exit $status
