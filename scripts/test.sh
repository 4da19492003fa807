#!/usr/bin/env bash
# Sets up the dependencies, builds everything (Release) and runs all tests with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)
# Warnings in the project's own code fail the build (LOOPSCALE_WERROR; GCC 12's AVX-512 header
# false positives are turned off for exactly that compiler and target in CMakeLists.txt).
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DLOOPSCALE_WERROR=ON
cmake --build build -j "$jobs"
bash scripts/corpus.sh   # the training, learning and sweep tests read data/corpus
ctest --test-dir build --output-on-failure --no-tests=error -j "$jobs" "$@"
