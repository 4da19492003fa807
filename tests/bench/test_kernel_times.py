#!/usr/bin/env python3
"""bench/cuda/kernel_times.py on fixtures of both its inputs: a CUPTI trace written the way
bench_cuda_model writes one (bench/cuda/cupti_trace.hpp) and an Nsight Compute CSV. The sums, the
device's busy share and the grouping by loopscale function are checked against hand-computed values.
Standard library only. The checks raise AssertionError themselves rather than use `assert`, which
python3 -O (or PYTHONOPTIMIZE in the environment) strips, passing every check."""
import os
import subprocess
import sys
import tempfile

script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench", "cuda", "kernel_times.py")


def check(ok, message):
    if not ok:
        raise AssertionError(message)


def run(path, *extra):
    r = subprocess.run([sys.executable, script, path, *extra], capture_output=True, text=True)
    check(r.returncode == 0, f"kernel_times.py {path} exited {r.returncode}:\n{r.stderr}")
    return r.stdout


def expect(text, line):
    check(line in text, f"expected {line!r} in:\n{text}")


with tempfile.TemporaryDirectory() as d:
    # Two steps, 1 ms of wall time. Kernels: two launches of one Thrust lambda (0.1 ms each; the
    # lambda's enclosing function names it), a GEMM overlapping the first by 0.05 ms (0.2 ms), a
    # softmax (0.1 ms) and a copy (0.001 ms): busy = [0.001, 0.25] + [0.3, 0.401] + [0.5, 0.6] ms = 0.45 ms.
    trace = os.path.join(d, "trace.csv")
    lam = "void thrust::cuda_cub::core::_kernel_agent<loopscale::train::detail::rmsnorm_forward<float, loopscale::train::CudaBackend>(int, int)::{lambda(long)#1}, long>(long)"
    with open(trace, "w") as f:
        f.write("# bench_cuda_model trace: run dense, full BPTT, steps 2, wall_s 0.001000, precision bf16\n")
        f.write("kind,name,start_ns,end_ns,bytes\n")
        f.write(f'kernel,"{lam}",1000,101000,0\n')
        f.write('kernel,"cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8",50000,250000,0\n')
        f.write('kernel,"void loopscale::train::cuda_detail::softmax_causal<float>(float const*, int, int)",300000,400000,0\n')
        f.write('memcpy,"memcpy DtoH",400000,401000,8\n')
        f.write(f'kernel,"{lam}",500000,600000,0\n')
        f.write('runtime,"cudaLaunchKernel_v7000",900,1500,0\n')
        f.write('runtime,"cudaStreamSynchronize_v3020",401000,451000,0\n')
        f.write('driver,"cuLaunchKernel",1000,1400,0\n')
    out = run(trace)
    expect(out, "a step: 2.5 kernels, copies and memsets")  # 5 device events over 2 steps
    expect(out, "the device busy 0.23 ms of 0.50 ms wall (45%")  # 0.45 ms busy of 1 ms; a step is half
    expect(out, "    0.100  39.9%      1.0  loopscale::train::detail::rmsnorm_forward")  # 0.2 ms of 0.501 ms, 2 launches
    expect(out, "    0.100  39.9%      0.5  cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8")
    expect(out, "    0.050  20.0%      0.5  loopscale::train::cuda_detail::softmax_causal")
    expect(out, "    0.025  98.0%      0.5  runtime: cudaStreamSynchronize_v3020")
    # Against the untraced steps (0.9 ms for 2): 0.225 ms busy of a 0.45 ms step.
    untraced = os.path.join(d, "untraced.json")
    with open(untraced, "w") as f:
        f.write('{"runs": [{"name": "dense, full BPTT", "steps": 2, "seconds": 0.0009}]}')
    expect(run(trace, untraced), "dense, full BPTT without the trace: 0.45 ms a step; the traced busy time is 50% of it")
    # A trace without kernels is no profile: an error, not "the device waited".
    empty = os.path.join(d, "empty.csv")
    with open(empty, "w") as f:
        f.write("# bench_cuda_model trace: run dense, steps 2, wall_s 0.001, incomplete 0, untimed 3, dropped 0\n")
        f.write("kind,name,start_ns,end_ns,bytes\n")
        f.write('runtime,"cudaLaunchKernel_v7000",900,1500,0\n')
    r = subprocess.run([sys.executable, script, empty], capture_output=True, text=True)
    check(r.returncode != 0 and "holds no kernel" in r.stderr, (r.returncode, r.stdout, r.stderr))

    # Nsight Compute's CSV, units in symbols: 3 kernels, 0.5 ms in all; the step took 2 ms unprofiled.
    ncu = os.path.join(d, "kernels.csv")
    with open(ncu, "w") as f:
        f.write("==PROF== Connected to process\n")
        f.write('"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"\n')
        f.write(f'"0","{lam}","gpu__time_duration.sum","us","100"\n')
        f.write(f'"1","{lam}","gpu__time_duration.sum","us","150"\n')
        f.write('"2","ampere_sgemm_128x64_nn","gpu__time_duration.sum","ms","0.25"\n')
    wall = os.path.join(d, "wall.json")
    with open(wall, "w") as f:
        f.write('{"runs": [{"name": "dense, full BPTT", "steps": 2, "seconds": 0.004}]}')
    out = run(ncu, wall)
    expect(out, "3 kernels, 0.50 ms of kernel time")
    expect(out, "dense, full BPTT: 2.00 ms a step unprofiled; kernels 25% of it")
    expect(out, "    0.250  50.0%        2  loopscale::train::detail::rmsnorm_forward")
    expect(out, "    0.250  50.0%        1  ampere_sgemm_128x64_nn")

# CCCL 3's names (cccl3_kernel_names.txt, from nvcc 13): each kernel keyed by the library function
# whose lambda it runs, not by the span_detail / cuda_detail wrapper that comes first in the name
# (EachValue, EachRowValue, AsDouble, Once: one row each for every call site before).
sys.path.insert(0, os.path.dirname(script))
import kernel_times  # noqa: E402

names = os.path.join(os.path.dirname(os.path.abspath(__file__)), "cccl3_kernel_names.txt")
cases = [line.rstrip("\n").split("\t") for line in open(names) if not line.startswith("#")]
check(len(cases) == 11, f"{names}: {len(cases)} names")
for want, name in cases:
    got = kernel_times.key(name)
    check(got == want, f"key gave {got!r}, not {want!r}, for {name}")
# ... and in a trace: the two for_spans call sites (add_into, hyper_aggregate_backward) two rows.
with tempfile.TemporaryDirectory() as d:
    trace = os.path.join(d, "trace.csv")
    device = {want: name for want, name in cases if "EachValue" in name and name.startswith("void ")}  # not the host form
    add, hyper = device["loopscale::train::kernels::add_into"], device["loopscale::train::kernels::hyper_aggregate_backward"]
    with open(trace, "w") as f:
        f.write("# bench_cuda_model trace: run dense, full BPTT, steps 1, wall_s 0.001000, precision bf16\n")
        f.write("kind,name,start_ns,end_ns,bytes\n")
        f.write(f'kernel,"{add}",0,100000,0\n')
        f.write(f'kernel,"{hyper}",100000,400000,0\n')
    out = run(trace)
    expect(out, "    0.300  75.0%      1.0  loopscale::train::kernels::hyper_aggregate_backward")
    expect(out, "    0.100  25.0%      1.0  loopscale::train::kernels::add_into")
print("kernel_times.py: trace and ncu fixtures summed as expected, CCCL 3 kernel names keyed by their launching function")
