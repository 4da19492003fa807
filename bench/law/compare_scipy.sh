#!/usr/bin/env bash
# Times the law fits of bench_law against the same fits in SciPy, in one run on this machine, and
# prints the ratios recorded in docs/benchmarks.md.
# Usage: bench/law/compare_scipy.sh [BUILD_DIR [KEEP_DIR]]   (KEEP_DIR: where the raw JSON is kept)
# Needs /usr/bin/python3 with SciPy (Debian python3-scipy, installed by scripts/setup.sh).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
build="${1:-$root/build-law}"
bench="$build/bench/law/bench_law"
work="$(mktemp -d)"
keep="${2:-}"
trap '[ -n "$keep" ] && mkdir -p "$keep" && cp "$work"/*.json "$keep"/; rm -rf "$work"' EXIT

"$bench" --write-isodepth-csv="$work/isodepth_116.csv"
"$bench" --benchmark_format=json --benchmark_repetitions=3 --benchmark_report_aggregates_only=true > "$work/bench.json"
epoch="$root/tests/data/chinchilla_epoch_svg_extracted.csv"
for grad in numeric analytic; do
  /usr/bin/python3 "$here/scipy_fit.py" chinchilla "$epoch" --grad $grad > "$work/scipy_chinchilla_$grad.json"
  /usr/bin/python3 "$here/scipy_fit.py" iso-depth "$work/isodepth_116.csv" --grad $grad > "$work/scipy_isodepth_$grad.json"
done

/usr/bin/python3 - "$work" <<'PY'
import json, sys, os
work = sys.argv[1]
bench = json.load(open(os.path.join(work, "bench.json")))
ours = {}
for b in bench["benchmarks"]:
    if b.get("aggregate_name") == "median":
        ours[b["run_name"]] = (b["real_time"] / 1e3, b.get("objective"), b["cpu_time"] / 1e3)
print(f"{'fit':<40} {'loopscale s':>12} {'CPU s':>8} {'objective':>14}")
for k, (t, o, c) in sorted(ours.items()):
    print(f"{k:<40} {t:>12.3f} {c:>8.3f} {o:>14.10f}")
print()
print(f"{'SciPy fit':<28} {'seconds':>9} {'objective':>16}   ratios against loopscale on 2 threads")
def ours_at(prefix):  # the 2-thread run, whatever timing suffixes Google Benchmark adds to its name
    return next(v for k, v in ours.items() if k.startswith(prefix))
# Two comparisons: loopscale's defaults (a loose scout of every start, SciPy's rules for the best
# tenth, then the 8 best polished; huber_fit.hpp),
# and step for step (SciPy's rules alone, 10 corrections; second benchmark argument 1).
for law, key in (("chinchilla", "epoch_grid/2/"), ("isodepth", "isodepth_500/2/")):
    for grad in ("numeric", "analytic"):
        s = json.load(open(os.path.join(work, f"scipy_{law}_{grad}.json")))
        print(f"{law + ' (' + grad + ')':<28} {s['seconds']:>9.2f} {s['objective']:>16.12f}", end="")
        for arg, label in (("0/", "defaults"), ("1/", "SciPy's rules")):
            t, o, c = ours_at(key + arg)
            print(f"   {label}: {s['seconds'] / t:.0f}x wall, {s['cpu_seconds'] / c:.0f}x CPU"
                  f" ({'<=' if o <= s['objective'] else '>'} SciPy's objective)", end="")
        print()
        print(f"    params {s['params']}")
PY
