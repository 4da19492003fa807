#!/usr/bin/env bash
# The live Slurm test alone (tests/sweep/slurm_live.sh, ctest label `slurm`): sets up the
# dependencies (slurm-wlm, munge and Open MPI among them), builds only the `loopscale` program and
# runs the test, which starts a one-node cluster (scripts/slurm-cluster.sh), submits the smoke
# sweep's job array, cancels and requeues tasks, and stops the cluster. Needs root. About a minute
# on two cores (docs/sweeps.md, "The live Slurm test"). The build folder is $LOOPSCALE_BUILD
# (default build).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${LOOPSCALE_BUILD:-build}"
bash scripts/setup.sh
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$build" -j "$(nproc)" --target loopscale_cli
ctest --test-dir "$build" -L slurm --output-on-failure --no-tests=error "$@"
