#!/usr/bin/env bash
# The example sweep specs of examples/sweeps/: every one plans (it is a valid spec a user can copy);
# quickstart.json also runs, reports and fits, end to end, on the byte-level corpus.
#   sweep_specs.sh LOOPSCALE SPECS_DIR WORK_DIR CORPUS_DIR
set -euo pipefail
loopscale="$1" specs="$2" work="$3" corpus="$4"
rm -rf "$work"
mkdir -p "$work"
n=0
for spec in "$specs"/*.json; do
  "$loopscale" sweep plan "$spec" > "$work/$(basename "$spec" .json).plan.txt"
  n=$((n + 1))
done
[ "$n" -ge 4 ] || { echo "expected at least 4 example specs, found $n"; exit 1; }
# The copies of presets are the presets, but for their names (docs/using.md says so; they had
# drifted: their files fixed one training thread where the presets let sweep run choose).
for pair in iso-depth-cpu:cpu-mini looped-moe-cpu:looped-moe mixed-moe-cpu:mixed-moe paper-gpu:paper paper-truncated-gpu:paper-truncated; do
  "$loopscale" sweep plan "$specs/${pair%%:*}.json" --json > "$work/file.json"
  "$loopscale" sweep plan --preset "${pair##*:}" --json > "$work/preset.json"
  python3 - "$work/file.json" "$work/preset.json" "$pair" <<'PY'
import json, sys
a, b = (json.load(open(f))["spec"] for f in sys.argv[1:3])
differ = sorted(k for k in set(a) | set(b) if k != "name" and a.get(k) != b.get(k))
if differ:
    sys.exit(f"{sys.argv[3]}: the example spec differs from its preset in {differ}")
PY
done
"$loopscale" sweep run "$specs/quickstart.json" --out "$work/quickstart" --data "$corpus" > "$work/run.log"
"$loopscale" sweep report "$work/quickstart" --no-plots > "$work/report.log"
test -s "$work/quickstart/report.md"
runs=$(($(wc -l < "$work/quickstart/runs.csv") - 1))
planned=$("$loopscale" sweep plan "$specs/quickstart.json" --json | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["runs"]))')
[ "$runs" -eq "$planned" ] || { echo "runs.csv has $runs runs, the plan $planned"; exit 1; }
# The runs file fits: the iso-depth joint law with its phi.
"$loopscale" fit --law iso-depth --data "$work/quickstart/runs.csv" --starts random:20 > "$work/fit.txt"
grep -q "phi" "$work/fit.txt"
echo "example specs: $n planned; quickstart: $runs runs trained, reported and fitted"
