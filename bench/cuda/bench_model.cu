// Training-step speed of the looped model on one GPU through CudaBackend (fp32): tokens/s, model
// FLOP/s (the paper's convention, account/flops.hpp), MFU against the device's dense bf16 peak (the
// issue's measure) and against its fp32 peak (what an fp32 path can reach), and the device memory
// the model took against loopscale's estimate (account/memory.hpp).
//
//   bench_cuda_model OUT.json [STEPS]
//
// Models: d_model 1024, seq 1024, depth 20 (prelude 2, a block of 4 run r = 4 times, coda 2), 8
// heads, batch 8 (8,192 tokens a step), with full and with truncated BPTT (the last 2
// recurrences), and the same with an E8 K2 MoE of equal active size (expert hidden 2 x 1024, the
// dense MLP's 4 x 1024 split over the two chosen experts). Exit 77 without a usable device.
//
// Peaks (dense, no sparsity; NVIDIA's data sheets): H100 SXM and H200 bf16 989.4 TFLOP/s, fp32
// 66.9; A100 bf16 312, fp32 19.5. Another device: set LOOPSCALE_GPU_PEAK_BF16 and
// LOOPSCALE_GPU_PEAK_FP32 (TFLOP/s), else the MFUs are written as null.
#include <chrono>
#include <iterator>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "loopscale/account/flops.hpp"
#include "loopscale/account/memory.hpp"
#include "loopscale/train/backend/cuda.hpp"
#include "loopscale/train/model.hpp"
#include "loopscale/train/optim.hpp"

namespace {

using namespace loopscale;
using train::CudaBackend;

struct Peaks {
  double bf16 = 0, fp32 = 0;  // FLOP/s; 0: unknown
};

Peaks device_peaks(const std::string& name) {
  Peaks p;
  if (name.find("H100") != std::string::npos || name.find("H200") != std::string::npos) p = {989.4e12, 66.9e12};
  if (name.find("A100") != std::string::npos) p = {312e12, 19.5e12};
  if (const char* v = std::getenv("LOOPSCALE_GPU_PEAK_BF16")) p.bf16 = std::atof(v) * 1e12;
  if (const char* v = std::getenv("LOOPSCALE_GPU_PEAK_FP32")) p.fp32 = std::atof(v) * 1e12;
  return p;
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
    std::fprintf(stderr, "usage: bench_cuda_model OUT.json [STEPS]\n");
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
  cudaDeviceProp prop{};
  train::cuda_detail::check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  const Peaks peaks = device_peaks(prop.name);
  constexpr int64 batch = 8, seq = 1024;
  const struct {
    const char* name;
    int64 bptt;
    bool moe;
  } runs[] = {{"dense, full BPTT", full_bptt, false}, {"dense, truncated BPTT (last 2)", 2, false}, {"MoE E8 K2, full BPTT", full_bptt, true}};

  std::string out = "{\n  \"device\": \"" + std::string(prop.name) + "\",\n  \"precision\": \"fp32 (cuBLAS default math)\",\n  \"runs\": [\n";
  for (std::size_t k = 0; k < std::size(runs); ++k) {
    const ModelSpec spec = model_spec(runs[k].bptt, runs[k].moe);
    std::size_t free0 = 0, total = 0;
    train::cuda_detail::check(cudaMemGetInfo(&free0, &total), "cudaMemGetInfo");
    double tokens_per_s = 0, seconds = 0;
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
        model.forward_backward(in.data(), tgt.data());
        const std::span<const float> g(model.grads_data(), static_cast<std::size_t>(model.num_params()));
        opt.step(std::span<float>(model.params_data(), static_cast<std::size_t>(model.num_params())), g, model.tensors(), 1e-4,
                 train::AdamW<float, CudaBackend>::grad_norm(g));
        model.update_moe_bias();
      };
      step();  // warm-up: cuBLAS heuristics, first touches
      train::cuda_detail::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      const auto t0 = std::chrono::steady_clock::now();
      for (int s = 0; s < steps; ++s) step();
      train::cuda_detail::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      tokens_per_s = static_cast<double>(batch * seq) * steps / seconds;
      std::size_t free1 = 0;
      train::cuda_detail::check(cudaMemGetInfo(&free1, &total), "cudaMemGetInfo");
      used = free0 - free1;
    }
    const double flops = tokens_per_s * static_cast<double>(count_flops(spec, seq).train);
    const double estimate = static_cast<double>(count_memory(spec, batch, seq, 1).total);
    std::printf("%-32s %9.0f tokens/s  %7.2f TFLOP/s  MFU bf16 %.3f  fp32 %.3f  memory %.2f GiB (estimate %.2f)\n", runs[k].name,
                tokens_per_s, flops / 1e12, peaks.bf16 > 0 ? flops / peaks.bf16 : 0.0, peaks.fp32 > 0 ? flops / peaks.fp32 : 0.0,
                static_cast<double>(used) / (1 << 30), estimate / (1 << 30));
    out += "    {\"name\": \"" + std::string(runs[k].name) + "\", \"steps\": " + std::to_string(steps) + ", \"seconds\": " + json_number(seconds) +
           ", \"tokens_per_s\": " + json_number(tokens_per_s) + ", \"model_flops_per_s\": " + json_number(flops) +
           ", \"mfu_bf16_peak\": " + json_number(peaks.bf16 > 0 ? flops / peaks.bf16 : 0, peaks.bf16 > 0) +
           ", \"mfu_fp32_peak\": " + json_number(peaks.fp32 > 0 ? flops / peaks.fp32 : 0, peaks.fp32 > 0) +
           ", \"device_memory_bytes\": " + std::to_string(used) + ", \"memory_estimate_bytes\": " + json_number(estimate) + "}" +
           (k + 1 < std::size(runs) ? ",\n" : "\n");
  }
  out += "  ]\n}\n";
  FILE* f = std::fopen(argv[1], "w");
  if (!f || std::fputs(out.c_str(), f) < 0 || std::fclose(f) != 0) {
    std::fprintf(stderr, "bench_cuda_model: cannot write %s\n", argv[1]);
    return 2;
  }
  return 0;
}
