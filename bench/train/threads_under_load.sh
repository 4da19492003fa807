#!/usr/bin/env bash
# Threads against load (issue 18): tokens/s of a tiny model (d 32) and of the acceptance model (d 256,
# docs/benchmarks.md) trained with 1 thread and 2 (sharing kernels, then in thread lanes), on an
# otherwise idle machine and beside one competing busy process (a shell loop holding one core),
# one run after the other. On two cores a
# parallel region waits for its slowest thread, so a descheduled thread stalls every step.
# Prints the machine (CPU, cores, ISA, load) and a table; tokens/s from summary.json (step time).
# Usage: [OMP_WAIT_POLICY=active] bench/train/threads_under_load.sh [LOOPSCALE]   (default build/loopscale)
# `loopscale` runs with OMP_WAIT_POLICY=passive (idle OpenMP threads sleep at once instead of
# spinning) unless the variable is set (examples/cli/main.cpp); OMP_WAIT_POLICY=active measures
# libgomp's default, which docs/benchmarks.md compares.
set -euo pipefail
bin=${1:-build/loopscale}
data=${DATA:-data/corpus}
work=$(mktemp -d)
hog=
trap '[ -n "$hog" ] && kill $hog 2> /dev/null; rm -rf "$work"' EXIT
isa=$(grep -o -w -E 'avx512f|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, ${isa:-no AVX2}, load $(cut -d' ' -f1-3 /proc/loadavg), OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive (unset: loopscale sets it)}"
small=(--d-model 32 --heads 2 --depth 4 --prelude 1 --coda 1 --r 2 --batch 8 --seq-len 64 --tokens $((300 * 8 * 64)))
large=(--d-model 256 --heads 2 --prelude 2 --coda 2 --recur-layers 4 --r 4 --seq-len 256 --batch 16 --tokens $((3 * 16 * 256)))
echo "| model | threads | thread split | competing process | tokens/s | load (1 min) at the end |"
echo "|---|---|---|---|---|---|"
for model in small large; do
  declare -n args=$model
  for busy in no yes; do
    if [ $busy = yes ]; then (while :; do :; done) & hog=$!; sleep 1; fi
    # Two threads both ways: sharing each kernel of one model, and in lanes (a share of the batch each).
    for setting in "1 kernels" "2 kernels" "2 batch"; do
      read -r threads split <<<"$setting"
      out="$work/$model-$threads-$split-$busy"
      "$bin" train "${args[@]}" --threads $threads --thread-split $split --eval-tokens 4096 --peak-flops 1e11 --data "$data" \
        --out "$out" > /dev/null 2>&1
      printf '| %s | %s | %s | %s | %.0f | %s |\n' "$([ $model = small ] && echo 'd 32 (55.6k params)' || echo 'd 256 (6.56M)')" $threads \
        "$([ $threads = 1 ] && echo - || echo $split)" $busy "$(jq .tokens_per_s "$out/summary.json")" "$(cut -d' ' -f1 /proc/loadavg)"
    done
    if [ $busy = yes ]; then kill $hog; wait $hog 2> /dev/null || true; hog=; fi
  done
done
