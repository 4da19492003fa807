// How fast the CUDA backend's GEMMs run at the shapes of bench_model.cu's dense model, in every
// form a float GEMM can take (cublaslt.hpp): fp32, TF32, bf16 with the fp32 operands converted
// inside cuBLASLt ("fast", the default) and bf16 with operands rounded into packed copies first
// ("packed"); "packed-single" (packed single products, fast batches) is summed from those
// columns. Each shape also carries how many times one training step calls it, so the table ends
// with the GEMMs' share of a step in each form: the part of bench_cuda_model's step time that
// faster GEMMs could remove, and the rest that only the other kernels can.
//
//   bench_cuda_gemm OUT.json [REPS]     (REPS: timed calls of each shape after two warm-up calls, default 20)
//
// The shapes are the calls a recording backend (one that only logs each gemm and gemm_batched)
// listed for one forward and backward of that model (d_model 1024, 8 heads of 128, seq 1024,
// batch 8, depth 20 = prelude 2 + a block of 4 x r 4 + coda 2, linear injection, vocab 32,768),
// written here as the linear layers' three products and attention's six per head, from the
// model's sizes: 16.5 TFLOP a step in all. Operands are random in [-1, 1] and beta is 0 throughout
// (the model adds into dW, dV and dK with beta 1, one more read of C); times are CUDA events
// around REPS calls on the default stream. Exit 77 without a usable device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "loopscale/train/backend/bf16_pack.hpp"
#include "loopscale/train/backend/cuda.hpp"
#include "loopscale/train/backend/cuda_device.hpp"
#include "loopscale/train/backend/precision.hpp"

#include "json_text.hpp"

namespace {

using namespace loopscale;
using train::CudaBackend;
using train::Precision;
namespace lt = train::cublaslt;
using int64 = std::int64_t;
using train::cuda_detail::check;
using bench::json_string;

struct Shape {
  std::string what;
  bool ta, tb;
  int64 M, N, K, lda, ldb, ldc, sA, sB, sC, count;
  int64 per_step;  // calls in one training step
  double flops() const { return 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) * static_cast<double>(count); }
  int64 values_a() const { return count > 1 ? sA * (count - 1) + (ta ? K : M) * lda : (ta ? K : M) * lda; }
  int64 values_b() const { return count > 1 ? sB * (count - 1) + (tb ? N : K) * ldb : (tb ? N : K) * ldb; }
  int64 values_c() const { return count > 1 ? sC * (count - 1) + M * ldc : M * ldc; }
};

// The model's GEMM calls (kernels/linear.hpp and kernels/attention.hpp's device form).
std::vector<Shape> model_shapes() {
  constexpr int64 d = 1024, heads = 8, q = 128, T = 1024, batch = 8, hidden = 4 * d, vocab = 32768;
  constexpr int64 rows = batch * T, layer_runs = 2 + 4 * 4 + 2, injections = 8;
  constexpr int64 C = 3 * d, hq = d, TT = T * T, HTT = heads * TT;  // a fused QKV row, an output row, P's strides
  std::vector<Shape> s;
  // y = x W^T (rows x out), dx = dy W, dW += dy^T x; W is out x in, its rows ld_w apart.
  const auto linear = [&](const std::string& name, int64 in, int64 out, int64 ld_x, int64 ld_w, int64 ld_y, int64 calls) {
    s.push_back({name + " forward", false, true, rows, out, in, ld_x, ld_w, ld_y, 0, 0, 0, 1, calls});
    s.push_back({name + " dx", false, false, rows, in, out, ld_y, ld_w, ld_x, 0, 0, 0, 1, calls});
    s.push_back({name + " dW", true, false, out, in, rows, ld_y, ld_x, ld_w, 0, 0, 0, 1, calls});
  };
  linear("QKV", d, C, d, d, C, layer_runs);
  linear("attention out", d, d, d, d, d, layer_runs);
  linear("MLP up", d, hidden, d, d, hidden, layer_runs);
  linear("MLP down", hidden, d, hidden, hidden, d, layer_runs);
  linear("injection (half of [h, e])", d, d, d, 2 * d, d, injections);
  linear("LM head", d, vocab, d, d, vocab, 1);
  const int64 per_head = layer_runs * heads;
  s.push_back({"attention S = Q K^T", false, true, T, T, q, C, C, T, T * C, T * C, HTT, batch, per_head});
  s.push_back({"attention O = P V", false, false, T, q, T, T, C, hq, HTT, T * C, T * hq, batch, per_head});
  s.push_back({"attention dP = dO V^T", false, true, T, T, q, hq, C, T, T * hq, T * C, TT, batch, per_head});
  s.push_back({"attention dV = P^T dO", true, false, T, q, T, T, hq, C, HTT, T * hq, T * C, batch, per_head});
  s.push_back({"attention dQ = dS K", false, false, T, q, T, T, C, C, TT, T * C, T * C, batch, per_head});
  s.push_back({"attention dK = dS^T Q", true, false, T, q, T, T, C, C, TT, T * C, T * C, batch, per_head});
  return s;
}

// What attention's six products would cost with every head of every sequence in one strided
// batch (count batch x heads, as llm.c lays Q, K and V out head-major, [b][h][t][q]) instead of one
// call per head over the sequences: a call per product rather than eight, and 64 matrices to
// spread over the multiprocessors rather than 8 (O = P V's output is then 512 tiles of 128 x 128,
// not 64 on 132 SMs). Not in the step's sum: the model does not lay them out so (yet); the rows
// say whether doing it would pay.
std::vector<Shape> head_major_shapes() {
  constexpr int64 heads = 8, q = 128, T = 1024, batch = 8, layer_runs = 2 + 4 * 4 + 2;
  constexpr int64 Tq = T * q, TT = T * T, n = batch * heads;
  return {{"S = Q K^T, heads batched", false, true, T, T, q, q, q, T, Tq, Tq, TT, n, layer_runs},
          {"O = P V, heads batched", false, false, T, q, T, T, q, q, TT, Tq, Tq, n, layer_runs},
          {"dP = dO V^T, heads batched", false, true, T, T, q, q, q, T, Tq, Tq, TT, n, layer_runs},
          {"dV = P^T dO, heads batched", true, false, T, q, T, T, q, q, TT, Tq, Tq, n, layer_runs},
          {"dQ = dS K, heads batched", false, false, T, q, T, T, q, q, TT, Tq, Tq, n, layer_runs},
          {"dK = dS^T Q, heads batched", true, false, T, q, T, T, q, q, TT, Tq, Tq, n, layer_runs}};
}

__global__ void fill_kernel(float* x, int64 n, std::uint64_t seed) {
  for (int64 i = static_cast<int64>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += static_cast<int64>(gridDim.x) * blockDim.x) {
    std::uint64_t h = (static_cast<std::uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    h ^= h >> 31, h *= 0xBF58476D1CE4E5B9ull, h ^= h >> 29;
    x[i] = static_cast<float>(h >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  }
}
void fill(float* x, int64 n, std::uint64_t seed) {
  fill_kernel<<<1024, 256>>>(x, n, seed);
  check(cudaGetLastError(), "fill_kernel");
}

struct Form {
  const char* name;
  Precision precision;
  lt::Bf16Operands operands;
};

// Milliseconds per call of f, over reps calls after two warm-up calls.
template <class F>
double time_ms(int reps, F f) {
  f();
  f();
  cudaEvent_t a, b;
  check(cudaEventCreate(&a), "cudaEventCreate");
  check(cudaEventCreate(&b), "cudaEventCreate");
  check(cudaEventRecord(a), "cudaEventRecord");
  for (int i = 0; i < reps; ++i) f();
  check(cudaEventRecord(b), "cudaEventRecord");
  check(cudaEventSynchronize(b), "cudaEventSynchronize");
  float ms = 0;
  check(cudaEventElapsedTime(&ms, a, b), "cudaEventElapsedTime");
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return static_cast<double>(ms) / reps;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_cuda_gemm OUT.json [REPS]\n");
    return 2;
  }
  const int reps = argc > 2 ? std::atoi(argv[2]) : 20;
  if (reps < 1) {
    std::fprintf(stderr, "bench_cuda_gemm: REPS must be at least 1, not %s\n", argv[2]);
    return 2;
  }
  if (!CudaBackend::available()) {
    std::printf("no CUDA device usable: skipped\n");
    return 77;
  }
  const train::CudaDeviceInfo device = train::cuda_device_info();
  const auto peak = device.peak();
  std::printf("%s (%d SMs, compute capability %s); %d timed calls a shape\n", device.name.c_str(), device.sm_count,
              device.compute_capability().c_str(), reps);
  const Form forms[] = {{"fp32", Precision::fp32, lt::Bf16Operands::fast},
                        {"tf32", Precision::tf32, lt::Bf16Operands::fast},
                        {"bf16 fast", Precision::bf16, lt::Bf16Operands::fast},
                        {"bf16 packed", Precision::bf16, lt::Bf16Operands::packed}};
  constexpr int n_forms = sizeof forms / sizeof forms[0];
  std::vector<Shape> shapes = model_shapes();
  const std::size_t in_step = shapes.size();  // the model's calls; the head-major what-ifs follow
  for (const Shape& w : head_major_shapes()) shapes.push_back(w);
  std::vector<std::vector<double>> ms(shapes.size(), std::vector<double>(n_forms, 0.0));
  std::vector<double> pack_ms(shapes.size(), 0.0);
  std::vector<bool> fell_back(shapes.size(), false);  // the packed form ran the fast one (no bf16 x bf16 kernel)
  double step_flops = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    if (i < in_step) step_flops += s.flops() * static_cast<double>(s.per_step);
    CudaBackend::buffer<float> A(static_cast<std::size_t>(s.values_a())), B(static_cast<std::size_t>(s.values_b())),
        Cm(static_cast<std::size_t>(s.values_c()));
    fill(A.data(), s.values_a(), 3 * i + 1);
    fill(B.data(), s.values_b(), 3 * i + 2);
    fill(Cm.data(), s.values_c(), 3 * i + 3);
    for (int f = 0; f < n_forms; ++f) {
      CudaBackend::set_precision(forms[f].precision);
      lt::Engine::get().set_bf16_operands(forms[f].operands);
      const std::size_t fallbacks = lt::Engine::get().packed_fallbacks();
      ms[i][f] = time_ms(reps, [&] {
        CudaBackend::gemm_batched(s.ta, s.tb, s.M, s.N, s.K, 1.0f, A.data(), s.lda, s.sA, B.data(), s.ldb, s.sB, 0.0f, Cm.data(), s.ldc, s.sC,
                                  s.count);
      });
      if (lt::Engine::get().packed_fallbacks() != fallbacks) fell_back[i] = true;
    }
    // The packed form's two conversions alone (its share of the "bf16 packed" time).
    const train::bf16_pack::Layout la = train::bf16_pack::layout(s.ta ? s.K : s.M, s.ta ? s.M : s.K, s.count, s.sA),
                                   lb = train::bf16_pack::layout(s.tb ? s.N : s.K, s.tb ? s.K : s.N, s.count, s.sB);
    CudaBackend::buffer<__nv_bfloat16> pa(static_cast<std::size_t>(la.values())), pb(static_cast<std::size_t>(lb.values()));
    pack_ms[i] = time_ms(reps, [&] {
      train::bf16_pack::pack(A.data(), s.lda, s.sA, pa.data(), la);
      train::bf16_pack::pack(B.data(), s.ldb, s.sB, pb.data(), lb);
    });
  }
  lt::Engine::get().set_bf16_operands(lt::Bf16Operands::fast);

  // The table: microseconds and TFLOP/s a call in each form, and the calls' milliseconds a step.
  std::printf("\n%-36s %6s %6s %6s %5s %5s", "GEMM (ta tb M N K x count)", "", "", "", "", "calls");
  for (const Form& f : forms) std::printf(" | %-20s", f.name);
  std::printf(" | packing\n");
  std::vector<double> step_ms(n_forms, 0.0), attention_ms(n_forms, 0.0), head_major_ms(n_forms, 0.0);
  double step_pack_ms = 0;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    if (i == in_step) std::printf("what if attention laid Q, K and V out head-major (not in the step):\n");
    std::printf("%-36s %c%c %5lld %5lld %5lld x%-3lld %5lld", s.what.c_str(), s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', static_cast<long long>(s.M),
                static_cast<long long>(s.N), static_cast<long long>(s.K), static_cast<long long>(s.count), static_cast<long long>(s.per_step));
    for (int f = 0; f < n_forms; ++f) {
      std::printf(" | %8.1f us %6.1f TF", ms[i][f] * 1e3, s.flops() / (ms[i][f] * 1e-3) / 1e12);
      const double a_step = ms[i][f] * static_cast<double>(s.per_step);
      if (i >= in_step) head_major_ms[f] += a_step;
      else step_ms[f] += a_step;
      if (i < in_step && s.what.rfind("attention ", 0) == 0 && s.count > 1) attention_ms[f] += a_step;
    }
    std::printf(" | %7.1f us%s\n", pack_ms[i] * 1e3, fell_back[i] ? "  (packed fell back to fast: no bf16 x bf16 kernel)" : "");
    if (i < in_step) step_pack_ms += pack_ms[i] * static_cast<double>(s.per_step);
  }
  std::printf("\none step's GEMMs (%.2f TFLOP):\n", step_flops / 1e12);
  for (int f = 0; f < n_forms; ++f) {
    const double tflops = step_flops / (step_ms[f] * 1e-3) / 1e12;
    std::printf("  %-12s %8.2f ms, %6.1f TFLOP/s", forms[f].name, step_ms[f], tflops);
    if (peak) std::printf(", %.3f of the bf16 peak (%s)", tflops * 1e12 / peak->bf16, std::string(peak->source).c_str());
    std::printf("\n");
  }
  std::printf("  of which the packed form's conversions: %.2f ms\n", step_pack_ms);
  // packed-single (cublaslt.hpp): the packed form's times for single products, the fast form's for
  // strided batches, from the columns above.
  double single_ms = 0;
  for (std::size_t i = 0; i < in_step; ++i)
    single_ms += ms[i][shapes[i].count == 1 ? 3 : 2] * static_cast<double>(shapes[i].per_step);
  std::printf("  %-12s %8.2f ms, %6.1f TFLOP/s (packed single products, fast batches: from the columns above)\n", "bf16 p-single", single_ms,
              step_flops / (single_ms * 1e-3) / 1e12);
  std::printf("attention's products a step, per head as the model runs them / all heads in one call:\n");
  for (int f = 0; f < n_forms; ++f) std::printf("  %-12s %8.2f ms / %8.2f ms\n", forms[f].name, attention_ms[f], head_major_ms[f]);

  std::string out = "{\n  \"device\": " + json_string(device.name) + ",\n  \"reps\": " + std::to_string(reps) + ",\n  \"step_gemm_tflop\": " +
                    std::to_string(step_flops / 1e12) + ",\n  \"peak_bf16_flops\": " + (peak ? std::to_string(peak->bf16) : "null") +
                    ",\n  \"step_ms\": {";
  for (int f = 0; f < n_forms; ++f) out += std::string(f ? ", " : "") + "\"" + forms[f].name + "\": " + std::to_string(step_ms[f]);
  out += ", \"bf16 packed-single\": " + std::to_string(single_ms) + "},\n  \"attention_ms\": {";
  for (int f = 0; f < n_forms; ++f) out += std::string(f ? ", " : "") + "\"" + forms[f].name + "\": " + std::to_string(attention_ms[f]);
  out += "},\n  \"attention_head_major_ms\": {";
  for (int f = 0; f < n_forms; ++f) out += std::string(f ? ", " : "") + "\"" + forms[f].name + "\": " + std::to_string(head_major_ms[f]);
  out += "},\n  \"step_packing_ms\": " + std::to_string(step_pack_ms) + ",\n  \"shapes\": [\n";
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    const Shape& s = shapes[i];
    out += "    {\"what\": " + json_string(s.what) + ", \"ta\": " + (s.ta ? "true" : "false") + ", \"tb\": " + (s.tb ? "true" : "false") +
           ", \"M\": " + std::to_string(s.M) + ", \"N\": " + std::to_string(s.N) + ", \"K\": " + std::to_string(s.K) +
           ", \"count\": " + std::to_string(s.count) + ", \"calls_per_step\": " + std::to_string(s.per_step) +
           ", \"in_step\": " + (i < in_step ? "true" : "false") + ", \"ms\": {";
    for (int f = 0; f < n_forms; ++f) out += std::string(f ? ", " : "") + "\"" + forms[f].name + "\": " + std::to_string(ms[i][f]);
    out += "}, \"packing_ms\": " + std::to_string(pack_ms[i]) + ", \"packed_fell_back\": " + (fell_back[i] ? "true" : "false") + "}" + (i + 1 < shapes.size() ? "," : "") + "\n";
  }
  out += "  ]\n}\n";
  if (FILE* f = std::fopen(argv[1], "w")) {
    std::fputs(out.c_str(), f);
    std::fclose(f);
  } else {
    std::fprintf(stderr, "bench_cuda_gemm: cannot write %s\n", argv[1]);
    return 1;
  }
  return 0;
}
