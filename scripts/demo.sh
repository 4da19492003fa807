#!/usr/bin/env bash
# A new user's first command: set up, build, and run the main job — the `cpu-mini` iso-depth sweep
# (36 tiny looped transformers, r in {1, 2, 4, 8}, trained on the byte-level corpus), then its
# analysis: what one recurrence of the shared block is worth (phi, with a bootstrap interval).
#
# Resumable: the sweep lives in sweeps/cpu-mini; running this script again skips finished runs and
# resumes an interrupted one. Delete sweeps/cpu-mini to start over. Measured durations are in
# docs/sweeps.md (8 to 22 minutes on two cores with the packages installed, 5 to 19 of them the
# sweep, depending on the CPU and the load).
#
# Environment: LOOPSCALE_BUILD (build folder, default build), LOOPSCALE_JOBS (compile jobs,
# default every core), LOOPSCALE_SWEEP (sweep folder, default sweeps/cpu-mini).
set -euo pipefail
cd "$(dirname "$0")/.."
build="${LOOPSCALE_BUILD:-build}"
jobs="${LOOPSCALE_JOBS:-$(nproc)}"
out="${LOOPSCALE_SWEEP:-sweeps/cpu-mini}"

step() { printf '\n=== %s (%s) ===\n' "$1" "$(date +%H:%M:%S)"; }

step "dependencies"
bash scripts/setup.sh

step "build $build/loopscale (Release)"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build "$build" -j "$jobs" --target loopscale_cli

step "corpus"
bash scripts/corpus.sh

step "the sweep: cpu-mini into $out"
"$build/loopscale" sweep plan --preset cpu-mini | tail -n 1
"$build/loopscale" sweep run --preset cpu-mini --out "$out"

step "analysis and report"
"$build/loopscale" sweep report "$out"

step "result"
/usr/bin/python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
a = json.load(open(os.path.join(out, "analysis.json")))
cells = a["cells"]
ok = sum(1 for c in cells if c.get("ok") and not c.get("extrapolated"))
print(f"runs analysed: {a['runs']}; (C, r) cells with an iso-FLOP minimum inside the widths tried: {ok} of {len(cells)}")
if "joint" in a:
    j = a["joint"]
    b = j["bootstrap"]
    fit = j["fit"]
    if b["resamples"]:
        print(f"phi = {j['phi']:.3f}, {100 * b['level']:.0f}% interval [{b['phi_lo']:.3f}, {b['phi_hi']:.3f}] "
              f"(joint law R^2 {fit['r2']:.4f}; phi = 0: R^2 {j['phi0']['r2']:.4f}; phi = 1: R^2 {j['phi1']['r2']:.4f})")
    else:
        print(f"phi = {j['phi']:.3f} (no bootstrap interval)")
else:
    print(f"no joint fit: {a.get('joint_problem', '?')}")
if a.get("missing"):
    print(f"runs not finished: {len(a['missing'])} (run scripts/demo.sh again to resume)")
print(f"report: {os.path.join(out, 'report.md')} (plots in {os.path.join(out, 'plots')})")
PY
