#!/usr/bin/env bash
# Where a CUDA training step's time goes, for the d 1024 looped model of bench/gpu_check.sh
# (bench_cuda_model), in up to three measurements:
#   1. the steps' wall time without any profiler (wall.json);
#   2. a CUPTI trace of the same steps (bench_cuda_model's TRACE.csv: every kernel, copy and CUDA
#      call with its start and end, bench/cuda/cupti_trace.hpp), summed by bench/cuda/kernel_times.py
#      into trace.txt: kernels by time, how much of the wall time the device was busy (the rest it
#      waited on the host), and the host's time in CUDA calls. Cheap: the traced steps run at about
#      their own speed. Needs libcupti.so.13 beside the programs (bench/gpu_check.sh --collect);
#   3. Nsight Compute's duration of every kernel of one step (kernels.csv, kernels.txt), where ncu
#      is installed and can read the device (it could not on every runtime the lent machines use)
#      and GPU_PROFILE_NCU is not 0. It replays each kernel alone, so its step's wall time means
#      nothing; the kernels' durations do.
#
#   bench/gpu_profile.sh OUT_DIR [BIN_DIR [MODELS [PRECISION]]]
#
# BIN_DIR holds bench_cuda_model (default: build/bench/cuda); MODELS is bench_cuda_model's list
# (default dense; the trace covers the first); PRECISION bf16 (default), tf32 or fp32. ncu is
# stopped after GPU_PROFILE_TIMEOUT seconds (default 300), the other runs after GPU_PROFILE_RUN_TIMEOUT
# (default 300).
# Exit status: 0 done (the trace or ncu gave a profile), 1 a step failed or neither profiler
# worked, 2 bad usage, 77 no usable CUDA device.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: bench/gpu_profile.sh OUT_DIR [BIN_DIR [MODELS [PRECISION]]]}
bin=${2:-$here/build/bench/cuda}
models=${3:-dense}
precision=${4:-bf16}
mkdir -p "$out" || { echo "gpu_profile: cannot create $out" >&2; exit 2; }
[ -x "$bin/bench_cuda_model" ] || { echo "gpu_profile: $bin/bench_cuda_model is not built" >&2; exit 2; }

. "$here/bench/gpu_env.sh"
libpath=$(gpu_library_path "$bin")
LD_LIBRARY_PATH=$libpath timeout -k 10 "${GPU_PROFILE_RUN_TIMEOUT:-300}" "$bin/bench_cuda_model" "$out/wall.json" 2 "$precision" "$models"
rc=$?
[ "$rc" = 0 ] || exit "$rc"

profiled=0
summarise() {  # CSV TXT: kernel_times.py's summary of a profile, shown and kept; 1 if it fails
  python3 "$here/bench/cuda/kernel_times.py" "$1" "$out/wall.json" >"$2" || return 1
  cat "$2"
  profiled=1
}
LD_LIBRARY_PATH=$libpath timeout -k 10 "${GPU_PROFILE_RUN_TIMEOUT:-300}" "$bin/bench_cuda_model" "$out/traced.json" 2 "$precision" "$models" "$out/trace.csv"
rc=$?
[ "$rc" = 0 ] && summarise "$out/trace.csv" "$out/trace.txt" || echo "gpu_profile: the CUPTI trace failed (exit $rc)" >&2

ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ "${GPU_PROFILE_NCU:-1}" = 0 ]; then
  echo "gpu_profile: ncu not run (GPU_PROFILE_NCU=0)"
elif [ -z "$ncu" ]; then
  echo "gpu_profile: Nsight Compute (ncu) is not installed: the trace alone" >&2
else
  # One timed step under the profiler (its capture opens at cudaProfilerStart, after the warm-up);
  # the clocks are left as they are (--clock-control none), as in the runs above.
  LD_LIBRARY_PATH=$libpath timeout -k 10 "${GPU_PROFILE_TIMEOUT:-300}" "$ncu" --profile-from-start off --clock-control none \
    --print-kernel-base demangled --metrics gpu__time_duration.sum --csv "$bin/bench_cuda_model" "$out/profiled.json" 1 "$precision" "$models" \
    >"$out/kernels.csv" 2>"$out/ncu.err"
  rc=$?
  [ "$rc" = 0 ] && summarise "$out/kernels.csv" "$out/kernels.txt" || { echo "gpu_profile: ncu exit $rc; see $out/ncu.err" >&2; tail -5 "$out/ncu.err" >&2; }
fi
[ "$profiled" = 1 ] || exit 1
