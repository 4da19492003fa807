#!/usr/bin/env bash
# loopscale against PyTorch 2 (issue 18): training tokens/s of the acceptance model (d 256, 2 heads,
# prelude 2 + 4 shared layers x r 4 + coda 2, batch 16 x 256, 6.56M parameters; docs/benchmarks.md)
# trained by `loopscale train`, by PyTorch eager and by PyTorch with torch.compile, one after the
# other, with the same thread count on the same machine. The PyTorch model is its twin,
# bench/train/torch_model.py (same layers, injection, norms, loss, optimiser, fp32). Two checks that
# it is the same model, either failing exits 1 after the table: the parameter counts agree (loopscale's
# summary.json and `loopscale account` against PyTorch's), and PyTorch, given loopscale's trained
# weights (checkpoint.bin), computes the run's validation loss on the same windows (relative
# difference below 1e-4).
# Usage: [THREADS=n] [WARMUP=k] [COMPILE_MODE=m] bench/train/pytorch_compare.sh [LOOPSCALE_BIN [STEPS]]
#   LOOPSCALE_BIN  default build/loopscale; STEPS (default 6) optimiser steps per implementation,
#   warm-up included. THREADS defaults to nproc (2 here), DATA to data/corpus (made by
#   scripts/corpus.sh when missing), COMPILE_MODE to default (torch.compile's mode; on the CPU
#   max-autotune-no-cudagraphs also tries Inductor's C++ GEMM templates, compiling much longer).
# Timing: every implementation leaves out its first WARMUP steps (default 2) and reports
# tokens/s = batch * seq_len * (STEPS - WARMUP) / (summed time of the remaining steps), step time
# only. For loopscale the per-step times come from log.jsonl (each line's tokens_per_s is one step's
# tokens over that step's time; summary.json's tokens_per_s, over all steps, is printed beside it);
# PyTorch times each step itself (torch_model.py). torch.compile compiles during the first step(s),
# so the compile time is inside the warm-up and excluded (it is printed as "warm-up s"; Inductor
# caches compiled graphs under /tmp/torchinductor_$USER, so a first run compiles for minutes on two
# cores and later runs load the cache in seconds). Each row also lists every step's tokens/s: on a
# shared two-core machine the runs differ from one to the next, so read the table beside the load.
# OpenMP wait policy: `loopscale` sets OMP_WAIT_POLICY=passive unless it is set; PyTorch's libgomp
# keeps its default (spin, then sleep). Setting OMP_WAIT_POLICY applies to all three.
# PyTorch comes from PyPI into a virtual environment under build-torch/venv (ignored by git, made
# once, reused): only this benchmark needs it, nothing in the project depends on it. The CPU-only
# wheels (download.pytorch.org/whl/cpu) are tried first; when unreachable, PyPI's default torch
# (which brings CUDA libraries it does not use here).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
bin_name=${1:-build/loopscale}
bin=$(realpath "${1:-$root/build/loopscale}")
steps=${2:-6}
warmup=${WARMUP:-2}
threads=${THREADS:-$(nproc)}
data=${DATA:-$root/data/corpus}
venv=$root/build-torch/venv
py=$venv/bin/python
[ -x "$bin" ] || { echo "pytorch_compare: $bin is not an executable (build loopscale first)" >&2; exit 2; }
[ "$steps" -gt "$warmup" ] || { echo "pytorch_compare: STEPS ($steps) must exceed WARMUP ($warmup)" >&2; exit 2; }
command -v jq > /dev/null || { echo "pytorch_compare: needs jq" >&2; exit 2; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# ---- PyTorch in its own virtual environment (idempotent) ----
if ! "$py" -c 'import torch' 2> /dev/null; then
  echo "pytorch_compare: installing torch into $venv" >&2
  base=/usr/bin/python3
  [ -x "$base" ] || base=python3
  "$base" -m venv "$venv"
  if "$py" -m pip install --quiet --timeout 15 --retries 1 --index-url https://download.pytorch.org/whl/cpu torch >&2; then
    echo "https://download.pytorch.org/whl/cpu (CPU-only wheel)" > "$venv/torch-source"
  else
    echo "pytorch_compare: the CPU-only index is unreachable; installing torch from PyPI" >&2
    "$py" -m pip install --quiet torch >&2
    echo "PyPI (https://pypi.org/simple, default wheel with CUDA libraries)" > "$venv/torch-source"
  fi
  "$py" -m pip install --quiet numpy >&2 || true  # optional: silences torch's warning at import
fi
torch_source=$(cat "$venv/torch-source" 2> /dev/null || echo "unknown (venv made elsewhere)")

# ---- the corpus loopscale trains on (PyTorch gets random bytes: the content does not change speed) ----
if [ ! -f "$data/train.bin" ]; then
  echo "pytorch_compare: $data missing; making it with scripts/corpus.sh" >&2
  LOOPSCALE="$bin" "$root/scripts/corpus.sh" "$data" >&2
fi

# ---- the machine and the two libraries ----
isa=$(grep -o -w -E 'avx512f|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "machine: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores, ${isa:-no AVX2}, load $(cut -d' ' -f1-3 /proc/loadavg), OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset (loopscale: passive; PyTorch: libgomp default)}"
echo "torch: $("$py" - <<'PY'
import re, torch
cfg = torch.__config__.show()
def pick(pattern):
    m = re.search(pattern, cfg)
    return m.group(1) if m else "?"
cap = torch.backends.cpu.get_cpu_capability() if hasattr(torch.backends, "cpu") else "?"
onednn = "available" if torch.backends.mkldnn.is_available() else "not available"
blas, mkl, dnn = pick(r"BLAS_INFO=([^,\s]+)"), pick(r"Math Kernel Library Version ([^ ]+)"), pick(r"MKL-DNN (v[0-9.]+)")
print(f"{torch.__version__}, BLAS {blas} (MKL {mkl}), oneDNN {dnn} {onednn}, CPU capability {cap}")
PY
), from $torch_source"

# ---- the model, one spec for both (threads_under_load.sh's `large`) ----
batch=16 seq=256 tok=$((16 * 256))
spec=(--d-model 256 --heads 2 --prelude 2 --coda 2 --recur-layers 4 --r 4)
torch_spec=("${spec[@]}" --vocab 256 --seq-len $seq --batch $batch)
acct=$("$bin" account "${spec[@]}" --vocab 256 --seq-len $seq --json)
ls_params_account=$(jq .params.total <<< "$acct")
flops_per_token=$(jq .flops_per_token.train <<< "$acct")

# ---- 1. loopscale ----
echo "pytorch_compare: loopscale train, $steps steps, $threads threads" >&2
out=$work/loopscale
"$bin" train "${spec[@]}" --seq-len $seq --batch $batch --threads "$threads" --tokens $((steps * tok)) \
  --eval-tokens $tok --peak-flops 1e11 --data "$data" --out "$out" > "$work/loopscale.log" 2>&1 ||
  { cat "$work/loopscale.log" >&2; exit 1; }
ls_params=$(jq .params "$out/summary.json")
ls_summary_tps=$(jq .tokens_per_s "$out/summary.json")
ls_tps=$(jq -s --argjson w "$warmup" --argjson n $tok \
  '[.[] | select(.step? != null and .tokens_per_s? != null and .step > $w)] | (length * $n) / (map($n / .tokens_per_s) | add)' \
  "$out/log.jsonl")
ls_warm=$(jq -s --argjson w "$warmup" --argjson n $tok \
  '[.[] | select(.step? != null and .tokens_per_s? != null and .step <= $w)] | map($n / .tokens_per_s) | add' "$out/log.jsonl")

# The same model? PyTorch, on loopscale's trained weights (checkpoint.bin) and the run's validation
# windows, must reproduce its val_loss: one forward pass, a few seconds.
if [ -f "$data/val.bin" ]; then
  "$py" "$root/bench/train/torch_model.py" "${torch_spec[@]}" --threads "$threads" --check-run "$out" --data "$data" \
    > "$work/check.json" 2> "$work/check.log" || { cat "$work/check.log" >&2; exit 1; }
  check=$(jq -r '"val_loss of loopscale'"'"'s trained weights: loopscale \(.val_loss_loopscale), PyTorch \(.val_loss_torch) (relative difference \(.rel_diff), \(.windows) windows)"' "$work/check.json")
  same_forward=$(jq '.rel_diff < 1e-4' "$work/check.json")
else
  check="forward check skipped: $data has no val.bin (a sharded corpus)"
  same_forward=true
fi

# ---- 2. PyTorch eager, 3. PyTorch with torch.compile ----
echo "pytorch_compare: PyTorch eager, $steps steps" >&2
"$py" "$root/bench/train/torch_model.py" "${torch_spec[@]}" --threads "$threads" --steps "$steps" --warmup "$warmup" \
  > "$work/eager.json" 2> "$work/eager.log" || { cat "$work/eager.log" >&2; exit 1; }
echo "pytorch_compare: PyTorch torch.compile, $steps steps (compiles in the first)" >&2
"$py" "$root/bench/train/torch_model.py" "${torch_spec[@]}" --threads "$threads" --steps "$steps" --warmup "$warmup" --compile --compile-mode "${COMPILE_MODE:-default}" \
  > "$work/compiled.json" 2> "$work/compiled.log" || { cat "$work/compiled.log" >&2; exit 1; }
eager_tps=$(jq .tokens_per_s "$work/eager.json")
comp_tps=$(jq .tokens_per_s "$work/compiled.json")
torch_params=$(jq .params "$work/eager.json")

# ---- the table ----
echo
echo "acceptance model, batch $batch x $seq, fp32, full BPTT, AdamW; $steps steps each, the first $warmup left out; load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
echo
echo "| implementation | threads | tokens/s | loopscale / this | GFLOP/s (loopscale's FLOP count) | warm-up s | params |"
echo "|---|---|---|---|---|---|---|"
row() {  # name tokens/s warm-up-seconds params
  printf '| %s | %s | %.1f | %.2f | %.1f | %.1f | %s |\n' "$1" "$threads" "$2" "$(jq -n "$ls_tps / $2")" \
    "$(jq -n "$2 * $flops_per_token / 1e9")" "$3" "$4"
}
row "loopscale ($bin_name; summary.json, all steps: $(printf '%.1f' "$ls_summary_tps"))" "$ls_tps" "$ls_warm" "$ls_params"
row "PyTorch $(jq -r .torch "$work/eager.json") eager (AdamW $(jq -r .adamw "$work/eager.json"))" "$eager_tps" "$(jq .warmup_s "$work/eager.json")" "$torch_params"
row "PyTorch $(jq -r .torch "$work/compiled.json") torch.compile, mode $(jq -r .compile_mode "$work/compiled.json") (AdamW $(jq -r .adamw "$work/compiled.json"))" "$comp_tps" "$(jq .warmup_s "$work/compiled.json")" "$(jq .params "$work/compiled.json")"
echo
echo "parameters: loopscale $ls_params (train), $ls_params_account (account); PyTorch $torch_params"
echo "$check"
echo "tokens/s of each step (warm-up included): loopscale $(jq -s -r '[.[] | select(.step? != null and .tokens_per_s? != null) | .tokens_per_s * 10 | round / 10] | join(" ")' "$out/log.jsonl");" \
  "eager $(jq -r '.step_tokens_per_s | join(" ")' "$work/eager.json"); compiled $(jq -r '.step_tokens_per_s | join(" ")' "$work/compiled.json")"
echo "first/last training loss: loopscale $(jq -s '[.[] | select(.loss? != null)] | "\(.[0].loss) / \(.[-1].loss)"' -r "$out/log.jsonl") (corpus), PyTorch eager $(jq -r '"\(.loss_first) / \(.loss_last)"' "$work/eager.json") (random bytes)"
if [ "$ls_params" != "$torch_params" ] || [ "$ls_params_account" != "$torch_params" ]; then
  echo "pytorch_compare: the parameter counts differ (loopscale $ls_params, PyTorch $torch_params): not the same model" >&2
  exit 1
fi
if [ "$same_forward" != true ]; then
  echo "pytorch_compare: PyTorch on loopscale's weights does not reproduce its validation loss: not the same model" >&2
  exit 1
fi
