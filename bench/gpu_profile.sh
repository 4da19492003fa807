#!/usr/bin/env bash
# Where a CUDA training step's time goes: Nsight Compute's duration of every kernel of the timed
# steps of bench_cuda_model (the d 1024 looped model of bench/gpu_check.sh), summed by kernel,
# against the same steps' wall time without the profiler. The gap between the two is time the
# device waited on the host (launches, synchronisations, host work between kernels).
#
#   bench/gpu_profile.sh OUT_DIR [BIN_DIR [MODELS [PRECISION]]]
#
# BIN_DIR holds bench_cuda_model (default: build/bench/cuda); MODELS is bench_cuda_model's list
# (default dense); PRECISION bf16 (default), tf32 or fp32. Writes OUT_DIR/wall.json (two steps,
# no profiler), OUT_DIR/kernels.csv (ncu's CSV of one profiled step) and OUT_DIR/kernels.txt
# (bench/cuda/kernel_times.py's summary). The profiled step runs each kernel alone, so its wall
# time means nothing; the kernels' durations do. ncu is stopped after GPU_PROFILE_TIMEOUT seconds
# (default 300), the unprofiled run after 300.
# Exit status: 0 done, 1 a step failed, 2 bad usage, 77 no usable CUDA device.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: bench/gpu_profile.sh OUT_DIR [BIN_DIR [MODELS [PRECISION]]]}
bin=${2:-$here/build/bench/cuda}
models=${3:-dense}
precision=${4:-bf16}
mkdir -p "$out" || { echo "gpu_profile: cannot create $out" >&2; exit 2; }
[ -x "$bin/bench_cuda_model" ] || { echo "gpu_profile: $bin/bench_cuda_model is not built" >&2; exit 2; }
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
[ -n "$ncu" ] || { echo "gpu_profile: Nsight Compute (ncu) is not installed" >&2; exit 2; }

. "$here/bench/gpu_env.sh"
libpath=$(gpu_library_path "$bin")
LD_LIBRARY_PATH=$libpath timeout -k 10 300 "$bin/bench_cuda_model" "$out/wall.json" 2 "$precision" "$models"
rc=$?
[ "$rc" = 0 ] || exit "$rc"
# One timed step under the profiler (its capture opens at cudaProfilerStart, after the warm-up);
# the clocks are left as they are (--clock-control none), as in the run above.
LD_LIBRARY_PATH=$libpath timeout -k 10 "${GPU_PROFILE_TIMEOUT:-300}" "$ncu" --profile-from-start off --clock-control none \
  --print-kernel-base demangled --metrics gpu__time_duration.sum --csv "$bin/bench_cuda_model" "$out/profiled.json" 1 "$precision" "$models" \
  >"$out/kernels.csv" 2>"$out/ncu.err"
rc=$?
[ "$rc" = 0 ] || { echo "gpu_profile: ncu exit $rc; see $out/ncu.err" >&2; tail -5 "$out/ncu.err" >&2; exit 1; }
python3 "$here/bench/cuda/kernel_times.py" "$out/kernels.csv" "$out/wall.json" | tee "$out/kernels.txt"
