#!/usr/bin/env bash
# The sanitizer stage of CI (docs/fuzzing-and-sanitizers.md): builds the tests of the code most
# exposed to bad input (tests/sanitize/CMakeLists.txt) with AddressSanitizer +
# UndefinedBehaviorSanitizer (GCC, LOOPSCALE_SANITIZE) in build-asan, and runs them. Any report fails the test that made it.
# Arguments go to ctest (e.g. -R runs_io).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
jobs=$(nproc)
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DLOOPSCALE_SANITIZE=ON -DLOOPSCALE_BUILD_BENCH=OFF -DLOOPSCALE_CUDA=OFF
cmake --build build-asan -j "$jobs" --target loopscale_sanitize
# detect_leaks: LeakSanitizer works in this container (it needs ptrace, which is allowed here).
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:strict_string_checks=1:detect_stack_use_after_return=1:check_initialization_order=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-asan -L '^sanitize$' --output-on-failure --no-tests=error -j "$jobs" "$@"
