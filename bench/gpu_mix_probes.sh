#!/usr/bin/env bash
# Issue 15's acceptance run on a GPU (docs/eval.md, "Training on the probes' text"): a small model
# trained with 10% of its windows from the two lookup probes, and the same model without them,
# each scored with `loopscale eval` on the host. Every result is written to OUT_DIR as soon as it
# exists, so a run cut short by a machine's time limit still leaves what it finished.
#
#   bench/gpu_mix_probes.sh OUT_DIR [LOOPSCALE [CORPUS]]
#
# LOOPSCALE is the program (default build/loopscale, built with CUDA); CORPUS the byte-level corpus
# folder (default data/corpus, scripts/corpus.sh). Environment: MIX_TOKENS (default 3e8) and
# NOMIX_TOKENS (4e7) tokens; MIX_SECONDS (default 420): the mix run is stopped with SIGTERM after
# that many seconds, which writes its checkpoint, and is then scored as it stands; the run without
# the mix likewise after NOMIX_SECONDS (default 150), each scoring after EVAL_SECONDS (default 90).
# DEVICE=host (default cuda) tries the script on a CPU (give small MIX_TOKENS and NOMIX_TOKENS).
# Writes OUT_DIR/{nomix,mix10}.{log,eval.json,eval.txt} and the runs under OUT_DIR/runs.
set -uo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: bench/gpu_mix_probes.sh OUT_DIR [LOOPSCALE [CORPUS]]}
ls=${2:-$here/build/loopscale}
corpus=${3:-$here/data/corpus}
mkdir -p "$out/runs" || { echo "gpu_mix_probes: cannot create $out" >&2; exit 2; }
[ -x "$ls" ] || { echo "gpu_mix_probes: $ls is not built" >&2; exit 2; }
[ -f "$corpus/train.bin" ] || { echo "gpu_mix_probes: no corpus at $corpus (scripts/corpus.sh)" >&2; exit 2; }
. "$here/bench/gpu_env.sh"
libpath=$(gpu_library_path "$(dirname "$ls")")

# d 256, four heads of 64, prelude 1 + two shared layers x r 2 + coda 1, seq 128: 766,000 tokens/s
# at batch 256 on one H200 (docs/benchmarks.md).
model=(--d-model 256 --head-dim 64 --prelude 1 --coda 1 --recur-layers 2 --r 2 --depth 6 --seq-len 128
  --batch 256 --recipe adamw --lr 1e-3 --data "$corpus" --eval-tokens 16384 --eval-every 1000
  --checkpoint-every 1000 --device "${DEVICE:-cuda}")

score() {  # run name: loopscale eval on the host, the summary table beside the JSON
  LD_LIBRARY_PATH=$libpath timeout -k 10 "${EVAL_SECONDS:-90}" "$ls" eval "$out/runs/$1" --max-per-task 200 --json >"$out/$1.eval.json" 2>"$out/$1.eval.err"
  echo "gpu_mix_probes: $1 scored, exit $?"
  python3 - "$out/$1.eval.json" <<'PY' | tee "$out/$1.eval.txt"
import json, sys
d = json.load(open(sys.argv[1]))
for res in d["results"]:
    print(f"step {d['step']}, r_eval {res['r_eval']}, validation loss {res['validation']['loss']:.4f}, CORE {res['eval']['core']:.3f}")
    for t in res["eval"]["tasks"]:
        print(f"  {t['label']:22s} accuracy {t['accuracy']:.3f} (chance {t['random_baseline']}), answer bits per byte {t['answer_bpb']:.3f}")
PY
}

LD_LIBRARY_PATH=$libpath timeout -k 10 -s TERM "${NOMIX_SECONDS:-150}" "$ls" train "${model[@]}" --tokens "${NOMIX_TOKENS:-4e7}" \
  --out "$out/runs/nomix" >"$out/nomix.log" 2>&1
echo "gpu_mix_probes: nomix trained, exit $? (124: stopped at NOMIX_SECONDS with a checkpoint); $(grep -v '^step' "$out/nomix.log" | tail -1)"
score nomix
LD_LIBRARY_PATH=$libpath timeout -k 20 -s TERM "${MIX_SECONDS:-420}" "$ls" train "${model[@]}" --tokens "${MIX_TOKENS:-3e8}" --out "$out/runs/mix10" \
  --mix-probes 0.1 --mix-probes-tasks induction,var_assign_d0_math >"$out/mix10.log" 2>&1
echo "gpu_mix_probes: mix10 trained, exit $? (124: stopped at MIX_SECONDS with a checkpoint); $(grep -v '^step' "$out/mix10.log" | tail -1)"
score mix10
