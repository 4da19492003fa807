#!/usr/bin/env bash
# Data-parallel throughput on this machine: the acceptance model of docs/benchmarks.md (d 256, 2
# heads, seq 256, batch 16, depth 20 = prelude 2 + 4 layers x r 4 + coda 2) trained for STEPS steps
# by one process with 2 threads, then by 2 MPI ranks with 1 thread each (docs/scaling-out.md).
# Prints the machine (CPU, ISA, load) and tokens/s of each from summary.json (step time only,
# start-up excluded), one after the other.
# Usage: bench/train/dp_throughput.sh [LOOPSCALE] [STEPS]   (defaults: build/loopscale, 10)
set -euo pipefail
bin=${1:-build/loopscale} steps=${2:-10}
data=${DATA:-data/corpus}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mpi=(mpirun --oversubscribe -np 2 --mca btl self,vader)
[ "$(id -u)" = 0 ] && mpi+=(--allow-run-as-root)
model=(--d-model 256 --heads 2 --prelude 2 --coda 2 --recur-layers 4 --r 4 --seq-len 256 --batch 16
       --tokens $((steps * 16 * 256)) --eval-tokens 4096 --data "$data")
isa=$(grep -o -w -E 'avx512f|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, ${isa:-no AVX2}, load $(cut -d' ' -f1-3 /proc/loadavg)"
run() {  # run NAME CMD...: tokens/s and MFU of the run
  local name=$1; shift
  "$@" --out "$work/$name" > /dev/null 2> "$work/$name.err" || { tail -3 "$work/$name.err"; exit 1; }
  jq -r --arg n "$name" '"\($n): \(.tokens_per_s | floor) tokens/s, MFU \(.mfu * 100 | . * 10 | floor / 10)% of \(.peak_flops / 1e9 | floor) GFLOP/s (\(.peak_source))"' "$work/$name/summary.json"
}
run "1 rank x 2 threads" "$bin" train "${model[@]}" --threads 2
run "2 ranks x 1 thread" "${mpi[@]}" "$bin" train "${model[@]}" --threads 1
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
