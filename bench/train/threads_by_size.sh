#!/usr/bin/env bash
# Threads by model size (issue 18): tokens/s of models from d 32 to d 256 at the CPU sweep presets'
# step (8 sequences of 64 tokens; the last at the acceptance model's 16 x 256), trained with 1 thread
# and with 2 (sharing each kernel of one model, then in thread lanes: docs/training.md) one after
# the other on the otherwise idle machine; with the training FLOPs of a step, the measurement
# behind sweep::auto_threads (include/loopscale/sweep/engine.hpp).
# Prints the machine (CPU, cores, ISA, load) and a table; tokens/s from summary.json (step time).
# Usage: bench/train/threads_by_size.sh [LOOPSCALE]   (default build/loopscale)
#        EXPERTS=8 TOP_K=2 bench/train/threads_by_size.sh   the same models with every FFN an MoE
#        of EXPERTS experts, TOP_K a token (expert width the dense MLP's)
set -euo pipefail
bin=${1:-build/loopscale}
data=${DATA:-data/corpus}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
moe=()
[ -n "${EXPERTS:-}" ] && moe=(--experts "$EXPERTS" --top-k "${TOP_K:-2}")
isa=$(grep -o -w -E 'avx512f|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, ${isa:-no AVX2}, load $(cut -d' ' -f1-3 /proc/loadavg), OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive (unset: loopscale sets it)}${EXPERTS:+, MoE $EXPERTS experts top-${TOP_K:-2}}"
echo "| model | step (tokens) | GFLOP per step | tokens/s, 1 thread | 2 threads sharing kernels | 2 threads in lanes | kernels / 1 | lanes / 1 | load (1 min) at the end |"
echo "|---|---|---|---|---|---|---|---|---|"
for spec in "32 8 64" "64 8 64" "96 8 64" "128 8 64" "192 8 64" "256 8 64" "256 16 256"; do
  read -r d batch seq <<<"$spec"
  steps=$(( d >= 192 ? 20 : 150 ))
  [ "$batch" = 16 ] && steps=4
  args=(--d-model "$d" --head-dim 16 --prelude 1 --coda 1 --recur-layers 2 --r 2 --batch "$batch" --seq-len "$seq"
        --tokens $((steps * batch * seq)) --eval-tokens 2048 --peak-flops 1e11 --data "$data")
  [ "$batch" = 16 ] && args=(--d-model 256 --heads 2 --prelude 2 --coda 2 --recur-layers 4 --r 4 --batch 16 --seq-len 256
        --tokens $((steps * 16 * 256)) --eval-tokens 4096 --peak-flops 1e11 --data "$data")
  rate=()
  for setting in "1 kernels" "2 kernels" "2 batch"; do
    read -r threads split <<<"$setting"
    "$bin" train "${args[@]}" "${moe[@]}" --threads $threads --thread-split $split --out "$work/$d-$batch-$threads-$split" > /dev/null 2>&1
    rate+=("$(jq .tokens_per_s "$work/$d-$batch-$threads-$split/summary.json")")
  done
  fpt=$(jq .flops_per_token "$work/$d-$batch-1-kernels/summary.json")
  awk -v d="$d" -v b="$batch" -v s="$seq" -v f="$fpt" -v r1="${rate[0]}" -v r2="${rate[1]}" -v r3="${rate[2]}" -v load="$(cut -d' ' -f1 /proc/loadavg)" \
    'BEGIN { printf "| d %s | %s x %s | %.3f | %.0f | %.0f | %.0f | %.2f | %.2f | %s |\n", d, b, s, f * b * s / 1e9, r1, r2, r3, r2 / r1, r3 / r1, load }' 
done
