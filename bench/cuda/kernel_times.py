#!/usr/bin/env python3
"""Sum a profile's kernel durations by kernel: Nsight Compute's CSV (ncu --csv --metrics
gpu__time_duration.sum) or bench_cuda_model's CUPTI trace (its TRACE.csv argument: every kernel,
copy and CUDA call of the traced steps with its start and end, bench/cuda/cupti_trace.hpp).

    kernel_times.py KERNELS.csv [WALL.json]

For a trace, it also says how much of the traced steps' wall time the device was busy (the union
of its kernels, copies and memsets) and where the host's time in CUDA calls went, so time the
device waited on the host shows as the gap between the two. Kernels are grouped by the loopscale function that launched them where the demangled name holds
one (a Thrust for_each or reduction over a kernel's lambda is named after the lambda's enclosing
function, not after the span_detail or cuda_detail wrapper around the lambda), else
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


# A Thrust/CUB kernel over a kernel's lambda (CCCL 3: for_each::static_kernel<..., op_wrapper_t<long,
# span_detail::EachValue<loopscale::...::add_into<...>(...)::{lambda(long, long)#1}>, ...>, or a
# reduction's DeviceReduceKernel<..., cuda_detail::AsDouble<...>>) is named after the function
# that encloses the lambda: the wrappers (span_detail's, cuda_detail::AsDouble and Once) come first
# in the name, and taking the first loopscale name folded every call site into their few rows.
LAMBDA = re.compile(r"(loopscale::(?:\w+::)*\w+)(?:<(?:[^()<>]|<[^()<>]*>)*>)?\([^()]*\)::\{lambda")
# The host side's form of the same lambda: nvcc's __nv_dl_tag<..., &(void loopscale::...::f<...>(...)), 1u>.
TAG = re.compile(r"&\((?:[^()&]*?\s)?(loopscale::(?:\w+::)*\w+)")
NAME = re.compile(r"loopscale::(?:\w+::)*\w+")
WRAPPER = re.compile(r"loopscale::train::(?:span_detail::\w+|cuda_detail::(?:AsDouble|Once))")


def key(name):
    for pattern in (LAMBDA, TAG):
        m = pattern.search(name)
        if m:
            return m.group(1)
    names = [n for n in NAME.findall(name) if not WRAPPER.fullmatch(n)]
    if names:  # a kernel of the library's own (cuda_detail::softmax_causal), or a functor one
        return names[0]
    base = re.split(r"[<(]", name, maxsplit=1)[0].strip()
    return base.split()[-1] if base else name[:60]


def busy_time(intervals):
    """Length of the union of (start, end) intervals."""
    total, end = 0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def table(by, total, scale, label):
    print(f"{'ms':>9} {'share':>6} {'calls':>8}  {label}")
    for k, (t, n) in sorted(by.items(), key=lambda kv: -kv[1][0]):
        print(f"{t * scale * 1e3:9.3f} {t / total if total else 0:6.1%} {n * scale:8.1f}  {k}")


def trace(path, wall_json=None):
    """bench_cuda_model's CUPTI trace: per step, device busy time, kernels by name, host CUDA calls.
    With WALL.json (the same model's steps without the trace), the busy time is also set against
    the untraced step: recording every CUDA call slows the host, which is what the gap measures."""
    lines = open(path, errors="replace").read().splitlines()
    comment = lines[0][1:].strip() if lines and lines[0].startswith("#") else ""
    m = re.search(r"\bsteps (\d+)", comment)
    steps = int(m.group(1)) if m else 1
    m = re.search(r"\bwall_s ([0-9.eE+-]+)", comment)
    wall = float(m.group(1)) if m else None
    rows = list(csv.DictReader(line for line in lines if not line.startswith("#")))
    if not rows:
        sys.exit("kernel_times.py: no events in " + path)
    device, kernels, host = [], {}, {}
    for r in rows:
        a, b = int(r["start_ns"]), int(r["end_ns"])
        s = (b - a) * 1e-9
        if r["kind"] in ("kernel", "memcpy", "memset"):
            device.append((a, b))
            k = key(r["name"]) if r["kind"] == "kernel" else r["name"]
            t, n = kernels.get(k, (0.0, 0))
            kernels[k] = (t + s, n + 1)
        else:
            k = f"{r['kind']}: {r['name']}"
            t, n = host.get(k, (0.0, 0))
            host[k] = (t + s, n + 1)
    if not any(r["kind"] == "kernel" for r in rows):
        sys.exit("kernel_times.py: the trace " + path + " holds no kernel: no timeline, no answer")
    busy = busy_time(device) * 1e-9
    launches = sum(n for _, n in kernels.values())
    print(f"{comment}")
    per = 1.0 / steps
    head = f"a step: {launches * per:.1f} kernels, copies and memsets, the device busy {busy * per * 1e3:.2f} ms"
    if wall:
        head += f" of {wall * per * 1e3:.2f} ms wall ({busy / wall:.0%}; the rest the device waited on the host)"
    print(head)
    if wall_json:
        run = json.load(open(wall_json))["runs"][0]
        step = run["seconds"] / run["steps"]
        print(f"{run['name']} without the trace: {step * 1e3:.2f} ms a step; the traced busy time is {busy * per / step:.0%} of it")
    table(kernels, sum(t for t, _ in kernels.values()), per, "kernel (a step; share of device time)")
    print()
    top = dict(sorted(host.items(), key=lambda kv: -kv[1][0])[:15])
    table(top, sum(t for t, _ in host.values()), per, "host CUDA call (a step; runtime and driver calls nest, so shares overlap)")


def main():
    if len(sys.argv) < 2:
        sys.exit("usage: kernel_times.py KERNELS.csv [WALL.json]")
    with open(sys.argv[1], errors="replace") as f:
        first = f.readline()
    if first.startswith("# bench_cuda_model trace") or first.startswith("kind,name,"):
        trace(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
        return
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
