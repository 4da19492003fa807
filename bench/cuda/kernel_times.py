#!/usr/bin/env python3
"""Sum Nsight Compute's kernel durations (ncu --csv --metrics gpu__time_duration.sum) by kernel.

    kernel_times.py KERNELS.csv [WALL.json]

Kernels are grouped by the loopscale function that launched them where the demangled name holds
one (a Thrust for_each over a kernel lambda is named after the lambda's enclosing function), else
by the kernel's own name without template arguments. WALL.json (bench_cuda_model's output for
the same model, unprofiled) gives its first run's step time, so the table says what share of a
step the device spent in kernels at all (profile one model, as gpu_profile.sh does by default).
Standard library only.
"""
import csv
import json
import re
import sys

# ncu writes the unit in words ("nsecond") or in symbols ("ns"), by version.
UNIT = {"nsecond": 1e-9, "usecond": 1e-6, "msecond": 1e-3, "second": 1.0, "ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def key(name):
    m = re.search(r"loopscale::(?:[\w]+::)*[\w]+", name)
    if m:
        return m.group(0)
    base = re.split(r"[<(]", name, maxsplit=1)[0].strip()
    return base.split()[-1] if base else name[:60]


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: kernel_times.py KERNELS.csv [WALL.json]")
    rows = [line for line in open(sys.argv[1], errors="replace") if line.startswith('"')]
    total, count, by = 0.0, 0, {}
    for r in csv.DictReader(rows):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        unit = r["Metric Unit"].strip()
        if unit not in UNIT:
            sys.exit(f"kernel_times.py: unknown time unit {unit!r} in {sys.argv[1]}")
        s = float(r["Metric Value"].replace(",", "")) * UNIT[unit]
        k = key(r["Kernel Name"])
        t, n = by.get(k, (0.0, 0))
        by[k] = (t + s, n + 1)
        total += s
        count += 1
    if not count:
        sys.exit("kernel_times.py: no gpu__time_duration.sum rows in " + sys.argv[1])
    print(f"{count} kernels, {total * 1e3:.2f} ms of kernel time in the profiled step(s)")
    if len(sys.argv) > 2:
        for run in json.load(open(sys.argv[2]))["runs"]:
            step = run["seconds"] / run["steps"]
            print(f"{run['name']}: {step * 1e3:.2f} ms a step unprofiled; kernels {total / step:.0%} of it"
                  " (one run profiled: compare with the first)")
            break
    print(f"{'ms':>9} {'share':>6} {'launches':>8}  kernel")
    for k, (t, n) in sorted(by.items(), key=lambda kv: -kv[1][0]):
        print(f"{t * 1e3:9.3f} {t / total:6.1%} {n:8d}  {k}")


if __name__ == "__main__":
    main()
