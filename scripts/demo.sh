#!/usr/bin/env bash
# A new user's first command: set up, build, and run the main job.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)" --target loopscale_cli
# The main job (for now): the static accounting of the paper's iso-depth family at its first width.
for r in 1 2 4 8; do
  echo "=== iso-depth family, d_model 384, r = $r ==="
  ./build/loopscale account --d-model 384 --heads 3 --vocab 32064 --seq-len 2048 --depth 20 --prelude 2 --coda 2 --r "$r"
  echo
done
