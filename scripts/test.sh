#!/usr/bin/env bash
# Sets up the dependencies, builds everything (Release) and runs all tests with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$jobs"
bash scripts/corpus.sh   # the training, learning and sweep tests read data/corpus
ctest --test-dir build --output-on-failure -j "$jobs" "$@"
