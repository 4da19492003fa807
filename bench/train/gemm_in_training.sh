#!/usr/bin/env bash
# The GEMMs of a training run by shape, timed inside `loopscale train` (bench/train/gemm_in_training.cpp,
# loaded with LD_PRELOAD): how much of the run the host GEMMs take and how near the peak each shape
# runs. Default: the acceptance model (d 256, 2 heads, prelude 2 + 4 layers x r 4 + coda 2, seq 256)
# on ONE thread with 8 sequences a step, one thread lane's share of the default two-lane step, for
# 10 steps and one evaluation of 2,048 tokens; the flags after LOOPSCALE replace the shape flags.
# Needs a build with the oneDNN GEMM (LOOPSCALE_GEMM auto or onednn, the default where libdnnl-dev
# is installed). Prints the machine, the run's last line (tokens/s, MFU against the one-thread peak)
# and the table, whose total seconds against the run's wall time give the GEMMs' share.
# Usage: bench/train/gemm_in_training.sh [BUILD_DIR] [loopscale train flags...]   (default build)
set -euo pipefail
build=${1:-build}
shift || true
shim="$build/bench/train/libgemm_in_training.so"
[ -f "$shim" ] || { echo "gemm_in_training.sh: $shim not found (cmake --build $build --target gemm_in_training)" >&2; exit 2; }
grep -q dnnl "$build/CMakeCache.txt" && grep -q '^LOOPSCALE_GEMM:STRING=\(auto\|onednn\)' "$build/CMakeCache.txt" ||
  { echo "gemm_in_training.sh: $build does not use the oneDNN GEMM" >&2; exit 2; }
flags=("$@")
[ ${#flags[@]} -eq 0 ] && flags=(--d-model 256 --heads 2 --prelude 2 --coda 2 --recur-layers 4 --r 4 --batch 8 --seq-len 256
                                 --tokens $((10 * 8 * 256)) --eval-tokens 2048 --eval-every 1000 --threads 1)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
isa=$(grep -o -w -E 'avx512f|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, ${isa:-no AVX2}, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "loopscale train ${flags[*]}"
start=$(date +%s.%N)
LD_PRELOAD="$(realpath "$shim")" "$build/loopscale" train "${flags[@]}" --data "${DATA:-data/corpus}" --out "$work/run" 2> "$work/gemm.txt" | tail -1
end=$(date +%s.%N)
echo "training steps $(jq '.tokens / .tokens_per_s' "$work/run/summary.json") s (tokens / tokens_per_s of summary.json), the whole process $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.2f s", b - a }') (start-up, the peak's measurement and the evaluation too)"
cat "$work/gemm.txt"
