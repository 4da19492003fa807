// Training-step speed of the looped model on one GPU through CudaBackend: tokens/s, model FLOP/s
// (the paper's convention, account/flops.hpp), MFU, and the device memory the model took against
// loopscale's estimate (account/memory.hpp). Parameters, activations and optimiser state are fp32;
// the GEMMs run in PRECISION (backend/precision.hpp), by default the backend's default, bf16.
//
//   bench_cuda_model OUT.json [STEPS [PRECISION [MODELS [TRACE.csv]]]]
//     PRECISION: bf16 (default), tf32 or fp32; MODELS: all (default) or a comma-separated list of
//     dense, truncated, moe, small; TRACE.csv: a CUPTI timeline of the first model's timed steps
//     (cupti_trace.hpp: every kernel, copy and CUDA call with its start and end), which
//     bench/cuda/kernel_times.py sums by kernel; needs libcupti.so.13 on the library path
//
// Models: d_model 1024, seq 1024, depth 20 (prelude 2, a block of 4 run r = 4 times, coda 2), 8
// heads, batch 8 (8,192 tokens a step), with full and with truncated BPTT (the last 2
// recurrences), and the same with an E8 K2 MoE of equal active size (expert hidden 2 x 1024, the
// dense MLP's 4 x 1024 split over the two chosen experts); and the small model of issue 15's GPU
// run (bench/gpu_mix_probes.sh: d_model 256, 4 heads of 64, prelude 1 + 2 shared layers x r 2 +
// coda 1, byte vocabulary, seq 128, batch 256), whose step is short enough that launches and the
// host's waits weigh. Exit 77 without a usable device.
//
// MFU is against the device's dense peak for the precision (bf16 or TF32 tensor cores, or the fp32
// CUDA cores) from backend/gpu_peaks.hpp, found by the device's name; mfu_bf16_peak is always
// against the bf16 peak (the issue's measure; the same number for bf16). A GPU the table does not
// know, or a MIG slice: set LOOPSCALE_GPU_PEAK_TFLOPS (the peak of PRECISION, TFLOP/s, dense),
// else the MFUs are written as null. summary.json records the precision, the device, its peak and
// where that peak came from. The first run's device memory includes cuBLASLt's 32 MiB workspace
// and the library handles, made at its first GEMM, and, with packed bf16 operands
// (LOOPSCALE_BF16_OPERANDS, cublaslt.hpp), their scratch (about 0.6 GB at d 1024), which the
// estimate leaves out.
//
// Each run also writes its last timed step's loss (last_loss; null if not finite): the bf16
// operand forms round the same inputs once each and accumulate in fp32 (cublaslt.hpp), so their
// losses agree to rounding, and bench/gpu_check.sh compares them: a packed run that is fast but
// wrong would otherwise still report believable tokens/s.
//
// The timed steps, and only they, lie between cudaProfilerStart and cudaProfilerStop, so a
// profiler started with its capture off (`ncu --profile-from-start off`, bench/gpu_profile.sh)
// sees the steady state and not the warm-up's plan searches and first touches.
#include <cuda_profiler_api.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "loopscale/account/flops.hpp"
#include "loopscale/account/memory.hpp"
#include "loopscale/train/backend/cuda.hpp"
#include "loopscale/train/backend/cuda_device.hpp"
#include "loopscale/train/backend/gpu_peaks.hpp"

#include "cupti_trace.hpp"
#include "json_text.hpp"
#include "loopscale/train/backend/precision.hpp"
#include "loopscale/train/model.hpp"
#include "loopscale/train/optim.hpp"

namespace {

using namespace loopscale;
using train::CudaBackend;
using bench::json_string;

struct Peak {
  double flops = 0, bf16 = 0;  // FLOP/s of the measured precision and of bf16; 0: unknown
  std::string source;          // where they came from; empty: unknown
};

Peak device_peak(const train::CudaDeviceInfo& device, train::Precision precision) {
  Peak p;
  if (const auto known = device.peak()) p = {known->flops(precision), known->bf16, std::string(known->source)};
  if (const char* v = std::getenv("LOOPSCALE_GPU_PEAK_TFLOPS")) {
    p.flops = std::atof(v) * 1e12;
    p.bf16 = precision == train::Precision::bf16 ? p.flops : 0;
    p.source = "given (LOOPSCALE_GPU_PEAK_TFLOPS)";
  }
  return p;
}

// The small model of bench/gpu_mix_probes.sh (its `loopscale train` flags, spelled as a spec).
ModelSpec small_spec() {
  ModelSpec m;
  m.d_model = 256;
  m.vocab = 256;
  LayerSpec l;
  l.attn.heads = 4;
  m.prelude = {1, l};
  m.coda = {1, l};
  m.recur.block = {2, l};
  m.recur.r = 2;
  m.recur.inject = {Inject::linear, 0};  // the program's default for r > 1
  return m;
}

ModelSpec model_spec(int64 bptt, bool moe) {
  ModelSpec m;
  m.d_model = 1024;
  m.vocab = 32768;
  LayerSpec l;
  l.attn.heads = 8;
  if (moe) {
    l.ffn.experts = 8;
    l.ffn.top_k = 2;
    l.ffn.hidden = 2 * 1024;
  }
  m.prelude = {2, l};
  m.coda = {2, l};
  m.recur.block = {4, l};
  m.recur.r = 4;
  m.recur.inject = {Inject::linear, 0};
  m.recur.bptt = bptt;
  return m;
}

std::string json_number(double v, bool known = true) { return known ? std::to_string(v) : "null"; }

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_cuda_model OUT.json [STEPS [PRECISION [MODELS [TRACE.csv]]]]   (PRECISION: bf16, tf32 or fp32; MODELS: all or dense,truncated,moe,small)\n");
    return 2;
  }
  if (!CudaBackend::available()) {
    std::printf("no CUDA device usable: skipped\n");
    return 77;
  }
  const int steps = argc > 2 ? std::atoi(argv[2]) : 10;
  if (steps < 1) {
    std::fprintf(stderr, "bench_cuda_model: STEPS must be at least 1, not %s\n", argv[2]);
    return 2;
  }
  const auto precision = argc > 3 ? train::parse_precision(argv[3]) : std::optional<train::Precision>(CudaBackend::precision());
  if (!precision) {
    std::fprintf(stderr, "bench_cuda_model: PRECISION must be bf16, tf32 or fp32, not %s\n", argv[3]);
    return 2;
  }
  const std::string models = argc > 4 ? argv[4] : "all";
  const auto wanted = [&](const char* key) {
    if (models == "all") return true;
    const std::string list = "," + models + ",";
    return list.find("," + std::string(key) + ",") != std::string::npos;
  };
  for (std::size_t at = 0; models != "all";) {  // every name in MODELS must be one of the four
    const std::size_t comma = models.find(',', at);
    const std::string name = models.substr(at, comma == std::string::npos ? std::string::npos : comma - at);
    if (name != "dense" && name != "truncated" && name != "moe" && name != "small") {
      std::fprintf(stderr, "bench_cuda_model: MODELS must be all or a comma-separated list of dense, truncated, moe, small, not %s\n", argv[4]);
      return 2;
    }
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  // The trace's library is loaded before any model exists: a machine without it is one line, exit 2.
  std::unique_ptr<loopscale::bench::CuptiTrace> trace;
  if (argc > 5) try {
      trace = std::make_unique<loopscale::bench::CuptiTrace>();
      trace->start();  // before the kernels load (cupti_trace.hpp); the warm-up's records are dropped below
    } catch (const std::exception& e) {
      std::fprintf(stderr, "bench_cuda_model: %s\n", e.what());
      return 2;
    }
  CudaBackend::set_precision(*precision);
  const train::CudaDeviceInfo device = train::cuda_device_info();
  const Peak peak = device_peak(device, *precision);
  const char* operands = nullptr;  // how bf16 GEMMs get their operands (cublaslt.hpp; LOOPSCALE_BF16_OPERANDS)
  try {
    operands = train::cublaslt::bf16_operands_name(train::cublaslt::Engine::get().bf16_operands());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_cuda_model: %s\n", e.what());
    return 2;
  }
  std::printf("%s (%d SMs, compute capability %s, %.1f GiB), GEMMs in %s%s%s, peak %s\n", device.name.c_str(), device.sm_count,
              device.compute_capability().c_str(), static_cast<double>(device.memory.total) / (1 << 30), train::precision_name(*precision),
              *precision == train::Precision::bf16 ? " with operands " : "", *precision == train::Precision::bf16 ? operands : "",
              peak.flops > 0 ? (std::to_string(peak.flops / 1e12) + " TFLOP/s (" + peak.source + ")").c_str()
                             : "unknown: set LOOPSCALE_GPU_PEAK_TFLOPS for an MFU");
  struct Run {
    const char* key;
    const char* name;
    int64 bptt;
    bool moe;
    bool small = false;
    int64 batch = 8, seq = 1024;
  };
  std::vector<Run> runs;
  for (const Run& r : {Run{"dense", "dense, full BPTT", full_bptt, false}, Run{"truncated", "dense, truncated BPTT (last 2)", 2, false},
                       Run{"moe", "MoE E8 K2, full BPTT", full_bptt, true},
                       Run{"small", "small (d 256, seq 128, batch 256)", full_bptt, false, true, 256, 128}})
    if (wanted(r.key)) runs.push_back(r);

  std::string out = "{\n  \"device\": " + json_string(device.name) + ",\n  \"sm_count\": " + std::to_string(device.sm_count) +
                    ",\n  \"compute_capability\": " + json_string(device.compute_capability()) +
                    ",\n  \"device_memory_total_bytes\": " + std::to_string(device.memory.total) + ",\n  \"precision\": " +
                    json_string(train::precision_name(*precision)) + ",\n  \"bf16_operands\": " + json_string(operands) + ",\n  \"gemm_library\": " + json_string(CudaBackend::gemm_library) +
                    ",\n  \"peak_flops\": " + json_number(peak.flops, peak.flops > 0) + ",\n  \"peak_source\": " +
                    (peak.source.empty() ? std::string("null") : json_string(peak.source)) + ",\n  \"runs\": [\n";
  for (std::size_t k = 0; k < runs.size(); ++k) {
    const ModelSpec spec = runs[k].small ? small_spec() : model_spec(runs[k].bptt, runs[k].moe);
    const int64 batch = runs[k].batch, seq = runs[k].seq;
    const std::size_t free0 = train::cuda_memory_info().free;
    double tokens_per_s = 0, seconds = 0, loss = 0;
    std::size_t used = 0;
    {
      train::Transformer<float, CudaBackend> model(spec, batch, seq);
      model.init(1, train::InitScheme::paper);
      train::AdamW<float, CudaBackend> opt(model.num_params(), {});
      std::vector<std::int32_t> in(batch * seq), tgt(batch * seq);
      for (int64 i = 0; i < batch * seq; ++i) {
        in[i] = static_cast<std::int32_t>((i * 7919) % spec.vocab);
        tgt[i] = static_cast<std::int32_t>((i * 104729 + 1) % spec.vocab);
      }
      const auto step = [&] {
        loss = model.forward_backward(in.data(), tgt.data());  // computed (and waited for) every step anyway
        const std::span<const float> g(model.grads_data(), static_cast<std::size_t>(model.num_params()));
        opt.step(std::span<float>(model.params_data(), static_cast<std::size_t>(model.num_params())), g, model.tensors(), 1e-4,
                 train::AdamW<float, CudaBackend>::grad_norm(g));
        model.update_moe_bias();
      };
      step();  // warm-up: cuBLASLt's plans (one heuristic query per GEMM shape), first touches
      train::cuda_detail::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      const bool traced = trace && k == 0;  // the first model only; the trace stops after its steps
      const auto trace_call = [&](void (loopscale::bench::CuptiTrace::*call)()) {  // a failed trace is one line, exit 1
        try {
          ((*trace).*call)();
          return true;
        } catch (const std::exception& e) {
          std::fprintf(stderr, "bench_cuda_model: %s\n", e.what());
          return false;
        }
      };
      if (traced && !trace_call(&loopscale::bench::CuptiTrace::restart)) return 1;
      train::cuda_detail::check(cudaProfilerStart(), "cudaProfilerStart");
      const auto t0 = std::chrono::steady_clock::now();
      for (int s = 0; s < steps; ++s) step();
      train::cuda_detail::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      train::cuda_detail::check(cudaProfilerStop(), "cudaProfilerStop");
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (traced) {
        if (!trace_call(&loopscale::bench::CuptiTrace::stop)) return 1;
        if (trace->kernels() == 0) {  // no timeline is no answer: say so rather than "the device idled"
          std::fprintf(stderr, "bench_cuda_model: the trace holds no timed kernel (%zu incomplete, %zu untimed, %zu dropped records)\n",
                       trace->incomplete(), trace->untimed(), trace->dropped());
          return 1;
        }
        const std::string what = "bench_cuda_model trace: run " + std::string(runs[k].name) + ", steps " + std::to_string(steps) +
                                 ", wall_s " + std::to_string(seconds) + ", precision " + train::precision_name(*precision);
        if (!trace->write_csv(argv[5], what)) {
          std::fprintf(stderr, "bench_cuda_model: cannot write %s\n", argv[5]);
          return 2;
        }
        std::printf("trace of %s: %zu events in %s\n", runs[k].name, trace->events().size(), argv[5]);
      }
      tokens_per_s = static_cast<double>(batch * seq) * steps / seconds;
      used = free0 - train::cuda_memory_info().free;
    }
    const double flops = tokens_per_s * static_cast<double>(count_flops(spec, seq).train);
    const double estimate = static_cast<double>(count_memory(spec, batch, seq, 1, AttentionScratch::per_sequence).total);  // the device form: dP per sequence
    const bool known = peak.flops > 0, known_bf16 = peak.bf16 > 0;
    std::printf("%-32s %9.0f tokens/s  %7.2f TFLOP/s  MFU %s  (bf16 peak %s)  memory %.2f GiB (estimate %.2f)  last loss %.4f\n", runs[k].name,
                tokens_per_s, flops / 1e12, known ? std::to_string(flops / peak.flops).c_str() : "?",
                known_bf16 ? std::to_string(flops / peak.bf16).c_str() : "?", static_cast<double>(used) / (1 << 30), estimate / (1 << 30), loss);
    out += "    {\"name\": \"" + std::string(runs[k].name) + "\", \"steps\": " + std::to_string(steps) + ", \"seconds\": " + json_number(seconds) +
           ", \"tokens_per_s\": " + json_number(tokens_per_s) + ", \"model_flops_per_s\": " + json_number(flops) +
           ", \"mfu\": " + json_number(known ? flops / peak.flops : 0, known) +
           ", \"mfu_bf16_peak\": " + json_number(known_bf16 ? flops / peak.bf16 : 0, known_bf16) +
           ", \"device_memory_bytes\": " + std::to_string(used) + ", \"memory_estimate_bytes\": " + json_number(estimate) +
           ", \"last_loss\": " + json_number(loss, std::isfinite(loss)) + "}" +
           (k + 1 < runs.size() ? ",\n" : "\n");
  }
  out += "  ]\n}\n";
  FILE* f = std::fopen(argv[1], "w");
  if (!f || std::fputs(out.c_str(), f) < 0 || std::fclose(f) != 0) {
    std::fprintf(stderr, "bench_cuda_model: cannot write %s\n", argv[1]);
    return 2;
  }
  return 0;
}
