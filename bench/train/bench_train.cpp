// Training engine benchmarks (Google Benchmark):
//   BM_PeakFma/threads        the machine's peak fp32 FLOP/s (FMA chains, kernels in host.hpp)
//   BM_Gemm/M/N/K             the host backend's GEMM on the shapes of a d = 256 training step
//   BM_TrainStep/bptt         one optimiser step of the acceptance model: d_model 256, 2 heads
//                             (head dim 128), seq 256, batch 16, depth 20 = 2 + 4 x 4 + 2 (r = 4),
//                             byte vocabulary; bptt 0 = full, 2 = truncated (ceil(r/2)); the two
//                             threads share each kernel of one model
//   BM_TrainStepLanes/bptt    the same step in two thread lanes (train/thread_lanes.hpp), a model
//                             of 8 sequences per thread, as `loopscale train` runs it on two threads
// Counters: FLOP/s in the paper's convention (account/flops.hpp), MFU against the peak measured in
// the same process at start, tokens/s, the accounting's memory estimate and the peak RSS.
// Run each BM_TrainStep variant in its own process (--benchmark_filter) for its own peak RSS.
#include <algorithm>
#include <string>
#include <benchmark/benchmark.h>

#include <sys/resource.h>
#include <time.h>

#include "loopscale/account/flops.hpp"
#include "loopscale/account/memory.hpp"
#include "loopscale/train/data.hpp"
#include "loopscale/train/model.hpp"
#include "loopscale/train/optim.hpp"
#include "loopscale/train/thread_lanes.hpp"

using namespace loopscale;
using namespace loopscale::train;

namespace {

double peak(int threads) {
  static double p[3] = {0, 0, 0};
  if (p[threads] == 0) p[threads] = measure_peak_flops(threads, 0.5);
  return p[threads];
}

// CPU seconds of the whole process (every thread). On a shared machine the wall-clock rate
// depends on how much CPU the process gets; FLOPs per CPU-second of the training step over FLOPs
// per CPU-second of the FMA kernel is an efficiency that load changes much less.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

int64 rss() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64>(u.ru_maxrss) * 1024;
}

void BM_PeakFma(benchmark::State& state) {
  const int threads = static_cast<int>(state.range(0));
  double flops = 0;
  const double c0 = cpu_seconds();
  for (auto _ : state) flops += fma_chains(threads, 1 << 22);
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
  state.counters["FLOP/cpu_s"] = flops / (cpu_seconds() - c0);
  state.SetLabel(std::string(peak_isa().name) + " x" + std::to_string(peak_isa().lanes));
}
BENCHMARK(BM_PeakFma)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_Gemm(benchmark::State& state) {
  HostBackend::set_threads(2);
  const int64 M = state.range(0), N = state.range(1), K = state.range(2);
  const bool ta = state.range(3) & 1, tb = state.range(3) & 2;
  std::vector<float> A(M * K, 0.01f), B(K * N, 0.02f), C(M * N);
  for (auto _ : state) {
    HostBackend::gemm<float>(ta, tb, M, N, K, 1.0f, A.data(), ta ? M : K, B.data(), tb ? K : N, 0.0f, C.data(), N);
    benchmark::DoNotOptimize(C.data());
  }
  const double flops = 2.0 * M * N * K * static_cast<double>(state.iterations());
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsRate);
  state.counters["of_peak"] = benchmark::Counter(flops / peak(2), benchmark::Counter::kIsRate);
}
// Forward QKV (x W^T), the MLP up projection, and the weight gradient dW = dy^T x.
BENCHMARK(BM_Gemm)->Args({4096, 768, 256, 2})->Args({4096, 1024, 256, 2})->Args({4096, 256, 1024, 2})
    ->Args({1024, 256, 4096, 1})->Args({256, 256, 128, 2})->UseRealTime()->Unit(benchmark::kMillisecond);

ModelSpec acceptance_spec(int64 bptt) {
  ModelSpec m;
  m.d_model = 256;
  m.vocab = 256;
  LayerSpec l;
  l.attn.heads = 2;
  m.prelude = {2, l};
  m.coda = {2, l};
  m.recur.block = {4, l};
  m.recur.r = 4;
  m.recur.inject = {Inject::linear, 0};
  m.recur.bptt = bptt == 0 ? full_bptt : bptt;
  return m;
}

// One optimiser step of the acceptance model on two threads, in `lanes` thread lanes
// (train/thread_lanes.hpp; 1: the threads share each kernel of one model).
void train_step(benchmark::State& state, int64 lanes) {
  HostBackend::set_threads(2);
  const ModelSpec spec = acceptance_spec(state.range(0));
  const int64 B = 16, T = 256;
  Transformer<float> model(spec, B / lanes, T);
  model.init(1);
  ThreadLanes<float, HostBackend> step(model, lanes);
  AdamW<float> opt(model.num_params(), AdamWConfig{});
  std::vector<std::int32_t> in(B * T), tg(B * T);
  for (int64 i = 0; i < B * T; ++i) in[i] = static_cast<std::int32_t>((i * 37) % 256), tg[i] = static_cast<std::int32_t>((i * 91) % 256);
  const double per_token = static_cast<double>(count_flops(spec, T).train);
  const double pk_before = peak(2);
  step.pass(in.data(), tg.data(), true);  // warm the caches and page in the buffers
  const double c0 = cpu_seconds();
  for (auto _ : state) {
    step.pass(in.data(), tg.data(), true);
    const auto g = model.grads();
    const double norm = AdamW<float>::grad_norm(std::span<const float>(g.data(), g.size()));
    opt.step(model.params(), std::span<const float>(g.data(), g.size()), model.tensors(), 1e-3, norm);
  }
  const double cpu = cpu_seconds() - c0;
  // The peak again, after the steps, and the higher of the two: a measurement at the start of the
  // process sometimes read half the cores' peak for reasons outside the process (2 Dec 2026, Zen 4:
  // 116 GFLOP/s in two processes one after the other, 228-233 in the others, the training step at
  // its usual speed in all), which read as an MFU of 1.45.
  const double pk_after = measure_peak_flops(2, 0.5);
  const double pk = std::max(pk_before, pk_after);
  const double tokens = static_cast<double>(B * T) * static_cast<double>(state.iterations());
  // MFU per CPU-second: against the one-thread FMA peak per CPU-second of that thread, measured
  // now. (By the process's CPU time it also counted the other OpenMP thread spinning after the
  // steps' last parallel region, which halved the peak and printed MFU_cpu 1.02 on 2 Dec 2026.)
  double fma_cpu = 0;
  const double fma = fma_chains(1, 1 << 24, &fma_cpu);
  const double fma_per_cpu_s = fma / fma_cpu;
  state.counters["FLOP/cpu_s"] = tokens * per_token / cpu;
  state.counters["MFU_cpu"] = tokens * per_token / cpu / fma_per_cpu_s;
  state.counters["tokens/s"] = benchmark::Counter(tokens, benchmark::Counter::kIsRate);
  state.counters["FLOP/s"] = benchmark::Counter(tokens * per_token, benchmark::Counter::kIsRate);
  state.counters["MFU"] = benchmark::Counter(tokens * per_token / pk, benchmark::Counter::kIsRate);
  state.counters["peak_GFLOP/s"] = pk / 1e9;
  // Both, so a run in which the FMA peak changed shows it (docs/benchmarks.md, "The peak by CPU
  // time": at the start of a few processes it read about half).
  state.counters["peak_start_GFLOP/s"] = pk_before / 1e9;
  state.counters["peak_end_GFLOP/s"] = pk_after / 1e9;
  state.counters["mem_est_MiB"] = static_cast<double>(count_lane_memory(spec, B, T, 2, lanes).total) / (1 << 20);
  state.counters["peak_RSS_MiB"] = static_cast<double>(rss()) / (1 << 20);
}
void BM_TrainStep(benchmark::State& state) { train_step(state, 1); }
void BM_TrainStepLanes(benchmark::State& state) { train_step(state, 2); }
BENCHMARK(BM_TrainStep)->Arg(0)->Arg(2)->UseRealTime()->Unit(benchmark::kSecond)->MinTime(10.0);
BENCHMARK(BM_TrainStepLanes)->Arg(0)->Arg(2)->UseRealTime()->Unit(benchmark::kSecond)->MinTime(10.0);

}  // namespace

BENCHMARK_MAIN();
