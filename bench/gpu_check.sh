#!/usr/bin/env bash
# The prepared check of the CUDA backend on a machine with an NVIDIA GPU, in one run:
#   1. the cuBLASLt GEMMs in fp32, tf32 and bf16 against a host reference (tests/cuda/gemm_device.cu),
#   2. the device kernels against their host twins, GEMMs in fp32 (tests/cuda/kernels_device.cu),
#   3. the whole model on the device against the host, GEMMs in fp32 (tests/cuda/model_device.cu),
#   4. training-step speed, MFU and device memory with the default bf16 GEMMs
#      (bench/cuda/bench_model.cu) -> OUT_DIR/summary.json (precision, device, peak and its source),
#   5. the model's GEMMs alone in fp32, tf32 and both bf16 forms (bench/cuda/bench_gemm.cu) ->
#      OUT_DIR/gemm.json, and the dense steps (full and truncated BPTT) again with packed bf16
#      operands -> OUT_DIR/summary_packed.json, and with only the single products packed ->
#      OUT_DIR/summary_packed_single.json,
#   6. those packed runs' last-step losses against the fast run's (summary.json), within 1e-2
#      relative -> OUT_DIR/losses.txt: a packed form that is fast but computes wrong fails here.
#
#   bench/gpu_check.sh OUT_DIR [BIN_DIR]
#
# BIN_DIR holds the six programs (test_cuda_gemm, test_cuda_kernels, test_cuda_model,
# test_cuda_gradcheck, bench_cuda_model, bench_cuda_gemm). Without it they are built here into build-gpu (CMake,
# nvcc and the Debian headers scripts/setup.sh installs). A GPU machine without those headers runs
# programs built elsewhere for sm_90: on the build machine, `bench/gpu_check.sh --collect BIN_DIR`
# copies them, loopscale and the shared libraries they need out of ./build (or $GPU_CHECK_BUILD);
# build that tree with -DLOOPSCALE_NATIVE=OFF -DLOOPSCALE_MPI=OFF for a machine whose CPU and
# libraries are not the build machine's (bench/gpu_session.sh runs everything there).
# Each program is stopped after GPU_CHECK_TIMEOUT seconds (default 240: a hang must not spend a
# lent machine's time) and counts as failed; with GPU_CHECK_DEADLINE, all of them within that many
# seconds of the start (a program that would start past it is skipped and counts as failed).
# Exit status: 0 all passed, 1 a check failed, 2 bad usage, 77 no usable CUDA device.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
programs=(tests/test_cuda_gemm tests/test_cuda_kernels tests/test_cuda_model tests/test_cuda_gradcheck bench/cuda/bench_cuda_model bench/cuda/bench_cuda_gemm)

if [ "${1:-}" = "--collect" ]; then
  bin=${2:?usage: bench/gpu_check.sh --collect BIN_DIR}
  src=${GPU_CHECK_BUILD:-$here/build}  # the build folder the programs come from
  mkdir -p "$bin" || exit 2
  for p in "${programs[@]}"; do
    [ -x "$src/$p" ] || { echo "gpu_check: $src/$p is not built (cmake --build $src)" >&2; exit 2; }
    cp "$src/$p" "$bin/"
  done
  # loopscale itself where it was built (bench/gpu_mix_probes.sh and bench/gpu_session.sh use it).
  [ -x "$src/loopscale" ] && cp "$src/loopscale" "$bin/"
  # The shared libraries they were linked with go along (oneDNN, {fmt}, SentencePiece, GCC's
  # OpenMP runtime): a GPU machine's image need not have them. Not the C library, libstdc++ or the
  # CUDA libraries, which such an image has (newer ones, which run these programs).
  libs=$(for p in "$bin"/*; do [ -x "$p" ] && ldd "$p" 2>/dev/null; done | awk '$3 ~ /^\// { print $3 }' | sort -u |
    grep -v -E '/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt)\.so')
  for l in $libs; do cp -L "$l" "$bin/"; done
  # CUPTI for bench_cuda_model's trace (bench/gpu_profile.sh), which loads it at run time, so ldd
  # does not list it: the toolkit's own, whose activity records the trace's structures describe.
  cupti=$(ls /usr/local/cuda/lib64/libcupti.so.1[0-9] /usr/local/cuda/extras/CUPTI/lib64/libcupti.so.1[0-9] 2>/dev/null | head -1)
  if [ -n "$cupti" ]; then cp -L "$cupti" "$bin/" && libs="$libs $cupti"; else echo "gpu_check: no libcupti.so in the CUDA toolkit: bench_cuda_model cannot trace" >&2; fi
  echo "gpu_check: copied $(ls "$bin" | wc -l) files into $bin (programs and $(echo "$libs" | grep -c .) libraries)"
  echo "gpu_check: a build for that machine's CPU: -DLOOPSCALE_NATIVE=OFF (any x86-64), -DLOOPSCALE_MPI=OFF (no MPI there)"
  exit 0
fi

out=${1:?usage: bench/gpu_check.sh OUT_DIR [BIN_DIR]}
bin=${2:-}
mkdir -p "$out" || { echo "gpu_check: cannot create $out" >&2; exit 2; }
if [ -z "$bin" ]; then
  bin="$here/build-gpu/bin"
  cmake -S "$here" -B "$here/build-gpu" -DCMAKE_BUILD_TYPE=Release -DLOOPSCALE_BUILD_BENCH=ON >"$out/build.log" 2>&1 &&
    cmake --build "$here/build-gpu" --target test_cuda_gemm test_cuda_kernels test_cuda_model test_cuda_gradcheck bench_cuda_model bench_cuda_gemm -j "$(nproc)" >>"$out/build.log" 2>&1 ||
    { echo "gpu_check: the build failed; see $out/build.log" >&2; exit 1; }
  mkdir -p "$bin"
  for p in "${programs[@]}"; do cp "$here/build-gpu/$p" "$bin/"; done
fi
for p in "${programs[@]}"; do
  [ -x "$bin/$(basename "$p")" ] || { echo "gpu_check: $bin/$(basename "$p") is missing" >&2; exit 2; }
done
. "$here/bench/gpu_env.sh"
libpath=$(gpu_library_path "$bin")
timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv >"$out/gpu.csv" 2>&1 || true

status=0
run() {  # name, program, arguments...
  local name=$1
  shift
  local t0=$SECONDS
  # Each program gets GPU_CHECK_TIMEOUT seconds, and all of them together GPU_CHECK_DEADLINE (from
  # this script's start; unset: no deadline), so a caller with a time budget (gpu_session.sh) is
  # never overrun by a hang late in the list.
  local limit=${GPU_CHECK_TIMEOUT:-240}
  if [ -n "${GPU_CHECK_DEADLINE:-}" ]; then
    local rest=$((GPU_CHECK_DEADLINE - SECONDS - 10))
    [ "$rest" -lt "$limit" ] && limit=$rest
    if [ "$limit" -lt 5 ]; then
      echo "gpu_check: $name skipped, past GPU_CHECK_DEADLINE (${GPU_CHECK_DEADLINE} s)" | tee -a "$out/status.txt"
      status=1
      return
    fi
  fi
  LD_LIBRARY_PATH=$libpath timeout -k 10 "$limit" "$@" 2>&1 | tee "$out/$name.txt"
  local rc=${PIPESTATUS[0]}
  local why=""
  [ "$rc" = 124 ] || [ "$rc" = 137 ] && why=" (stopped after $limit s)"
  echo "gpu_check: $name exit $rc in $((SECONDS - t0)) s$why" | tee -a "$out/status.txt"
  if [ "$rc" = 77 ]; then exit 77; fi
  [ "$rc" = 0 ] || status=1
}
run gemm "$bin/test_cuda_gemm"
run kernels "$bin/test_cuda_kernels"
run model "$bin/test_cuda_model"
run gradcheck "$bin/test_cuda_gradcheck"
run bench "$bin/bench_cuda_model" "$out/summary.json" "${GPU_CHECK_STEPS:-10}"
# The GEMMs alone at the model's shapes in every form (how much of a step faster GEMMs could
# remove), and the dense steps (full and truncated BPTT) again with packed bf16 operands
# (cublaslt.hpp) against the fast form the bench above ran.
run gemm_rates "$bin/bench_cuda_gemm" "$out/gemm.json" 10
run bench_packed env LOOPSCALE_BF16_OPERANDS=packed "$bin/bench_cuda_model" "$out/summary_packed.json" "${GPU_CHECK_STEPS:-10}" bf16 dense,truncated
run bench_packed_single env LOOPSCALE_BF16_OPERANDS=packed-single "$bin/bench_cuda_model" "$out/summary_packed_single.json" "${GPU_CHECK_STEPS:-10}" bf16 dense,truncated
# The packed runs' speed counts only if they train the same model: each dense run's last-step loss
# (last_loss) against the fast form's from the bench above. The forms round the same inputs to bf16
# once and accumulate in fp32 (cublaslt.hpp), so after the same steps their losses differ by
# rounding, far below 1e-2 relative; a missing run or loss (a run that failed, a NaN) fails too.
python3 - "$out/summary.json" "$out/summary_packed.json" "$out/summary_packed_single.json" <<'PY' 2>&1 | tee "$out/losses.txt"
import json, math, sys
def losses(path):
    try:
        return {r["name"]: r.get("last_loss") for r in json.load(open(path))["runs"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"{path}: no runs ({e})")
        return None
fast, ok = losses(sys.argv[1]), True
for path in sys.argv[2:]:
    other = losses(path)
    if fast is None or not other:
        ok = False
        continue
    for name, loss in other.items():
        ref = fast.get(name)
        good = isinstance(loss, float) and isinstance(ref, float) and math.isfinite(ref) and abs(loss - ref) <= 1e-2 * abs(ref)
        print(f"{path.rsplit('/', 1)[-1]}: {name}: last loss {loss} against {ref} (fast): {'same' if good else 'DIFFERENT'}")
        ok = ok and good
sys.exit(0 if ok else 1)
PY
rc=${PIPESTATUS[0]}
echo "gpu_check: losses exit $rc (packed and packed-single against fast, within 1e-2 relative)" | tee -a "$out/status.txt"
[ "$rc" = 0 ] || status=1
exit $status
