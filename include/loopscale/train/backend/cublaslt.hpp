// The CUDA backend's GEMM engine (backend/cuda.hpp): row-major fp32 products through cuBLASLt, in
// a chosen precision (backend/precision.hpp), one at a time or strided-batched.
//
// One cuBLASLt handle and one 32 MiB workspace per process (cudaMalloc'd once, no managed memory;
// 32 MiB is the workspace cuBLAS's documentation recommends for Hopper, cublasSetWorkspace), both
// made on the device current at the first call and kept until exit: the backend drives one
// device. Each distinct call (precision, whether its bf16 operands are packed, transposes, M, N, K,
// leading dimensions, batch count and strides, the operands' alignment) gets a plan at its first use: the matmul descriptor, the three
// matrix layouts and the algorithm cuBLASLt's heuristic picks. Every later call of that key only
// looks the plan up and launches: no allocation, no heuristic query. A training step repeats a few
// dozen keys, so the cache stays small.
//
// Row-major C = alpha op(A) op(B) + beta C is cuBLASLt's column-major C^T = alpha op(B)^T op(A)^T
// over the same buffers: its A is our B, its B our A, its m = N and n = M (as in cuda.hpp's
// cuBLAS calls). D is C, in place.
//
// Precision: A, B, C and the scalars are fp32 (CUDA_R_32F) in all three (but for bf16's packed
// form below, whose A and B are bf16 copies); the compute type says what the multiply may do with
// them:
//   fp32  CUBLAS_COMPUTE_32F: fp32 multiplies, no tensor-core rounding;
//   tf32  CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded to TF32 on tensor cores, fp32 accumulation;
//   bf16  CUBLAS_COMPUTE_32F_FAST_16BF: inputs rounded to bf16 on tensor cores (cublas_api.h:
//         "allows down-converting inputs to bfloat16 or TF32"), fp32 accumulation, fp32 result.
// bf16 has a second form, chosen per process (Engine::set_bf16_operands, or the environment's
// LOOPSCALE_BF16_OPERANDS=fast|packed|packed-single when the engine is made; fast unless set;
// packed-single packs single products and leaves strided batches to the fast form):
//   fast    the above: fp32 A and B, cuBLASLt rounds them inside its kernel;
//   packed  a kernel of ours rounds A and B to bf16 (nearest even) into packed copies
//           (backend/bf16_pack.hpp) and cuBLASLt multiplies bf16 x bf16 -> fp32 C with
//           CUBLAS_COMPUTE_32F, reading half the bytes, as llm.c and PyTorch's autocast feed it.
// Both round each input once to bf16 and accumulate in fp32, so they agree to rounding; which is
// faster at the model's shapes is what bench/cuda/bench_gemm.cu measures (the first H200 run gave
// bf16 and TF32 steps within 0.2% of each other, which the fast form's in-kernel conversion may
// explain). Where cuBLASLt has no bf16 x bf16 kernel for a packed call, that call runs the fast
// form (said once on stderr). The packed copies live in two scratch buffers the engine grows to
// the largest operands seen (about 0.6 GB for the d 1024 model's head: its gradient GEMMs read the
// 8,192 x 32,768 logits' gradient), memory account/memory.hpp does not count.
//
// That cublasLtMatmul takes fp32 A/B/C/D with the two FAST compute types and scale type
// CUDA_R_32F is the cuBLAS documentation's cuBLASLt API reference, section cublasLtMatmul(), table
// "Datatypes supported" (https://docs.nvidia.com/cuda/cublas/#cublasltmatmul), and the compute
// types are described in its section 2.2.11, cublasComputeType_t. So the master weights, the
// activations and the gradients stay fp32 in memory and only the products see bf16. The packed
// form's combination (bf16 A and B, fp32 C and D, CUBLAS_COMPUTE_32F, scale type CUDA_R_32F) is the
// one PyTorch's aten/src/ATen/cuda/CUDABlas.cpp asks cuBLASLt for when a bf16 product writes an fp32
// result; it has not run here on a GPU yet, and a call cuBLASLt offers no kernel for is counted
// (packed_fallbacks()), which tests/cuda/gemm_device.cu expects to stay 0 for model-like products
// on a GPU with bf16 tensor cores.
//
// Alignment: cuBLASLt's heuristic assumes every operand 256-byte aligned unless told otherwise
// (CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_{A,B,C,D}_BYTES, default 256, cublasLt.h) and may pick an
// algorithm that fails on a less aligned matrix; attention's per-head slices and batch strides are
// not 256-byte aligned. Each plan is therefore chosen for the operands' actual alignment (the
// largest power of two up to 256 dividing every matrix's address), which is part of its key.
//
// Determinism: a plan fixes the algorithm, so every call of a key runs the same kernel with the
// same workspace on one stream; cuBLAS promises the same bits run to run on GPUs of one
// architecture and SM count with one active stream (its documentation, 2.1.4 "Results
// reproducibility"). Calls go to the default stream, as Thrust's in cuda.hpp do.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <array>
#include <climits>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "loopscale/train/backend/bf16_pack.hpp"
#include "loopscale/train/backend/cuda_check.hpp"
#include "loopscale/train/backend/precision.hpp"

namespace loopscale::train::cublaslt {

using int64 = std::int64_t;

inline constexpr std::size_t workspace_bytes = std::size_t{32} << 20;

using cuda_detail::check;

inline cublasComputeType_t compute_type(Precision p) {
  switch (p) {
    case Precision::fp32: return CUBLAS_COMPUTE_32F;
    case Precision::tf32: return CUBLAS_COMPUTE_32F_FAST_TF32;
    case Precision::bf16: return CUBLAS_COMPUTE_32F_FAST_16BF;
  }
  throw std::runtime_error("cuda: cuBLASLt: unknown precision " + std::to_string(static_cast<int>(p)));
}

// How a bf16 product gets its bf16 inputs (the header's comment): cuBLASLt's in-kernel conversion
// of the fp32 operands, packed copies rounded by bf16_pack.hpp, or packed copies for single
// products only (packed_single: the linear layers) and the fast form for strided batches
// (attention's, whose T x T probabilities and their gradient would be copied for every product:
// at the d 1024 model about as many bytes a step as all the linear layers' copies, for about an
// eighth of the FLOPs; an estimate from the shapes, docs/training.md).
enum class Bf16Operands { fast, packed, packed_single };

inline const char* bf16_operands_name(Bf16Operands o) {
  return o == Bf16Operands::packed ? "packed" : o == Bf16Operands::packed_single ? "packed-single" : "fast";
}

// LOOPSCALE_BF16_OPERANDS: unset or empty gives fast; "fast", "packed" or "packed-single"; anything
// else is an error naming the variable and its value (a typo must not silently measure another
// form).
inline Bf16Operands bf16_operands_from_environment() {
  const char* v = std::getenv("LOOPSCALE_BF16_OPERANDS");
  if (!v || !*v) return Bf16Operands::fast;
  const std::string_view s(v);
  if (s == "fast") return Bf16Operands::fast;
  if (s == "packed") return Bf16Operands::packed;
  if (s == "packed-single") return Bf16Operands::packed_single;
  throw std::runtime_error("cuda: LOOPSCALE_BF16_OPERANDS must be fast, packed or packed-single, not '" + std::string(s) + "'");
}

// One row-major product, or count of them with X_i = X + i * strideX (strides in elements).
struct Gemm {
  Precision precision = Precision::fp32;
  bool ta = false, tb = false;
  int64 M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
  int64 strideA = 0, strideB = 0, strideC = 0, count = 1;

  std::string describe() const {
    const auto n = [](int64 v) { return std::to_string(v); };
    std::string s = std::string("ta ") + (ta ? "T" : "N") + " tb " + (tb ? "T" : "N") + " M " + n(M) + " N " + n(N) + " K " + n(K) +
                    " lda " + n(lda) + " ldb " + n(ldb) + " ldc " + n(ldc);
    if (count != 1) s += " strideA " + n(strideA) + " strideB " + n(strideB) + " strideC " + n(strideC) + " count " + n(count);
    return s + " precision " + precision_name(precision);
  }
};

// The largest power of two up to 256 dividing the address of every matrix X + i * stride.
inline int64 alignment(const void* p, int64 stride_bytes, int64 count) {
  std::uint64_t bits = reinterpret_cast<std::uintptr_t>(p) | 256u;
  if (count > 1) bits |= static_cast<std::uint64_t>(stride_bytes);
  return static_cast<int64>(bits & (~bits + 1));  // the lowest set bit
}

// A call's descriptors and chosen algorithm; destroys what it holds.
struct Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // cuBLASLt's A (our B), B (our A), C = D
  cublasLtMatmulAlgo_t algo{};
  bool packed = false;                  // bf16 operands rounded into the engine's scratch first
  bf16_pack::Layout packed_a, packed_b;  // our A's and our B's packed copies (when packed)

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {  // only when building a plan failed: the engine keeps its plans until exit
    if (c) cublasLtMatrixLayoutDestroy(c);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (op) cublasLtMatmulDescDestroy(op);
  }
};

class Engine {
 public:
  // The process's engine, made on the current device at its first use and never destroyed, like
  // cuda.hpp's cuBLAS handle: a static destructor could run after the CUDA runtime and cuBLASLt
  // have shut down.
  static Engine& get() {
    static Engine& e = *new Engine;
    return e;
  }

  // C = alpha op(A) op(B) + beta C for each of g.count products; needs M, N, K, count >= 1.
  void run(const Gemm& g, float alpha, const float* A, const float* B, float beta, float* C) {
    if (g.M < 1 || g.N < 1 || g.K < 1 || g.count < 1 || g.count > INT_MAX)
      throw std::runtime_error("cuda: cuBLASLt GEMM needs M, N, K and count from 1 (count up to 2^31 - 1): " + g.describe());
    // The key: everything the plan depends on (strides only matter for a batch).
    const bool batched = g.count > 1;
    constexpr int64 bytes = sizeof(float);
    // The mutex keeps two host threads from building one plan twice and from sharing the packed
    // scratch; the backend is driven from one thread, so it is never contended.
    const std::lock_guard<std::mutex> lock(mutex_);
    const bool packed = g.precision == Precision::bf16 && (bf16_operands_ == Bf16Operands::packed ||
                                                           (bf16_operands_ == Bf16Operands::packed_single && g.count == 1));
    const std::array<int64, 17> key = {static_cast<int64>(g.precision), packed, g.ta, g.tb, g.M, g.N, g.K, g.lda, g.ldb, g.ldc, g.count,
                                       batched ? g.strideA : 0, batched ? g.strideB : 0, batched ? g.strideC : 0,
                                       alignment(A, g.strideA * bytes, g.count), alignment(B, g.strideB * bytes, g.count),
                                       alignment(C, g.strideC * bytes, g.count)};
    if (packed) {
      // cuBLASLt would refuse a leading dimension shorter than a stored row; the copies have
      // their own, so say it here, before planning, rather than pack rows that overlap.
      const int64 cols_a = g.ta ? g.M : g.K, cols_b = g.tb ? g.K : g.N;
      if (g.lda < cols_a || g.ldb < cols_b)
        throw std::runtime_error("cuda: cublasLtMatmul (bf16 operands packed) refused: " +
                                 std::string(g.lda < cols_a ? "lda " + std::to_string(g.lda) + " is below A's " + std::to_string(cols_a)
                                                            : "ldb " + std::to_string(g.ldb) + " is below B's " + std::to_string(cols_b)) +
                                 " stored columns, " + g.describe());
    }
    auto it = plans_.find(key);
    if (it == plans_.end()) {
      it = plans_.emplace(key, plan(g, key[14], key[15], key[16], packed)).first;
      if (packed && !it->second->packed) ++packed_fallbacks_;
    }
    const Plan& p = *it->second;
    if (p.packed) {
      __nv_bfloat16* a = grow(scratch_a_, p.packed_a.values());
      __nv_bfloat16* b = grow(scratch_b_, p.packed_b.values());
      bf16_pack::pack(A, g.lda, g.strideA, a, p.packed_a);
      bf16_pack::pack(B, g.ldb, g.strideB, b, p.packed_b);
      const cublasStatus_t s =
          cublasLtMatmul(handle_, p.op, &alpha, b, p.a, a, p.b, &beta, C, p.c, C, p.c, &p.algo, workspace_, workspace_bytes, cudaStream_t{});
      if (s != CUBLAS_STATUS_SUCCESS) check(s, "cublasLtMatmul", g.describe() + " (bf16 operands packed)");
      return;
    }
    const cublasStatus_t s =
        cublasLtMatmul(handle_, p.op, &alpha, B, p.a, A, p.b, &beta, C, p.c, C, p.c, &p.algo, workspace_, workspace_bytes, cudaStream_t{});
    if (s != CUBLAS_STATUS_SUCCESS) check(s, "cublasLtMatmul", g.describe());
  }

  // How bf16 products get their operands from now on (the header's comment); plans of the other
  // form stay cached under their own key.
  void set_bf16_operands(Bf16Operands o) {
    const std::lock_guard<std::mutex> lock(mutex_);
    bf16_operands_ = o;
  }
  Bf16Operands bf16_operands() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return bf16_operands_;
  }

  // How many packed plans (distinct calls: shape, transposes, strides, alignment) got the fast form
  // because cuBLASLt had no bf16 x bf16 -> fp32 kernel for them, counted when planned: tests expect none
  // on a GPU with bf16 tensor cores, and bench_gemm reports it, so the packed form cannot quietly
  // measure the fast one.
  std::size_t packed_fallbacks() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return packed_fallbacks_;
  }

  // How many plans the cache holds (tests: steady-state calls add none).
  std::size_t plans() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return plans_.size();
  }

 private:
  Engine() : bf16_operands_(bf16_operands_from_environment()) {
    check(cublasLtCreate(&handle_), "cublasLtCreate", "the process's cuBLASLt handle");
    check(cudaMalloc(&workspace_, workspace_bytes), "cudaMalloc", "the cuBLASLt workspace, " + std::to_string(workspace_bytes) + " bytes");
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // A packed plan (bf16 x bf16 -> fp32 from the packed copies) reads its operands from the
  // engine's scratch, whose rows and matrices bf16_pack::layout aligns; any other plan reads the
  // caller's fp32 matrices at the alignments measured in run().
  std::unique_ptr<Plan> plan(const Gemm& g, int64 align_a, int64 align_b, int64 align_c, bool packed) const {
    const std::string what = g.describe() + (packed ? " (bf16 operands packed)" : "");
    auto p = std::make_unique<Plan>();
    p->packed = packed;
    if (packed) {
      p->packed_a = bf16_pack::layout(g.ta ? g.K : g.M, g.ta ? g.M : g.K, g.count, g.strideA);
      p->packed_b = bf16_pack::layout(g.tb ? g.N : g.K, g.tb ? g.K : g.N, g.count, g.strideB);
    }
    const int64 operand_align_a = packed ? 256 : align_a, operand_align_b = packed ? 256 : align_b;  // the copies start on 256 bytes
    const cudaDataType_t operand = packed ? CUDA_R_16BF : CUDA_R_32F;
    const int64 lda = packed ? p->packed_a.ld : g.lda, ldb = packed ? p->packed_b.ld : g.ldb;
    const int64 stride_a = packed ? p->packed_a.stride : g.strideA, stride_b = packed ? p->packed_b.stride : g.strideB;
    check(cublasLtMatmulDescCreate(&p->op, packed ? CUBLAS_COMPUTE_32F : compute_type(g.precision), CUDA_R_32F), "cublasLtMatmulDescCreate",
          what);
    const cublasOperation_t op_a = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), "cublasLtMatmulDescSetAttribute (TRANSA)",
          what);
    check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), "cublasLtMatmulDescSetAttribute (TRANSB)",
          what);
    // Column-major layouts of the stored matrices (rows, columns, leading dimension): cuBLASLt's
    // A = our B, op(A) N x K; its B = our A, op(B) K x M; C is N x M.
    const auto u = [](int64 v) { return static_cast<std::uint64_t>(v); };
    check(cublasLtMatrixLayoutCreate(&p->a, operand, u(g.tb ? g.K : g.N), u(g.tb ? g.N : g.K), ldb), "cublasLtMatrixLayoutCreate (B)", what);
    check(cublasLtMatrixLayoutCreate(&p->b, operand, u(g.ta ? g.M : g.K), u(g.ta ? g.K : g.M), lda), "cublasLtMatrixLayoutCreate (A)", what);
    check(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, u(g.N), u(g.M), g.ldc), "cublasLtMatrixLayoutCreate (C)", what);
    if (g.count > 1) {
      const std::int32_t count = static_cast<std::int32_t>(g.count);
      const std::pair<cublasLtMatrixLayout_t, int64> strided[] = {{p->a, stride_b}, {p->b, stride_a}, {p->c, g.strideC}};
      for (const auto& [layout, stride] : strided) {
        check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)),
              "cublasLtMatrixLayoutSetAttribute (BATCH_COUNT)", what);
        check(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)),
              "cublasLtMatrixLayoutSetAttribute (STRIDED_BATCH_OFFSET)", what);
      }
    }

    // The heuristic's best algorithm within the workspace, for these alignments.
    struct Preference {
      cublasLtMatmulPreference_t h = nullptr;
      ~Preference() {
        if (h) cublasLtMatmulPreferenceDestroy(h);
      }
    } pref;
    check(cublasLtMatmulPreferenceCreate(&pref.h), "cublasLtMatmulPreferenceCreate", what);
    const std::uint64_t max_workspace = workspace_bytes;
    check(cublasLtMatmulPreferenceSetAttribute(pref.h, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &max_workspace, sizeof(max_workspace)),
          "cublasLtMatmulPreferenceSetAttribute (MAX_WORKSPACE_BYTES)", what);
    const std::uint32_t aligned[] = {static_cast<std::uint32_t>(operand_align_b), static_cast<std::uint32_t>(operand_align_a),
                                     static_cast<std::uint32_t>(align_c), static_cast<std::uint32_t>(align_c)};
    const cublasLtMatmulPreferenceAttributes_t attrs[] = {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      check(cublasLtMatmulPreferenceSetAttribute(pref.h, attrs[i], &aligned[i], sizeof(aligned[i])),
            "cublasLtMatmulPreferenceSetAttribute (MIN_ALIGNMENT)", what);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(handle_, p->op, p->a, p->b, p->c, p->c, pref.h, 1, &result, &found);
    if (packed && (hs == CUBLAS_STATUS_NOT_SUPPORTED || (hs == CUBLAS_STATUS_SUCCESS && found < 1))) {
      // No bf16 x bf16 -> fp32 kernel for this call: it runs the fast form (fp32 operands,
      // converted by cuBLASLt), said once per process; the plan is cached under the packed key.
      static std::once_flag said;
      std::call_once(said, [&] {
        std::fprintf(stderr, "loopscale: cuBLASLt offers no bf16 x bf16 -> fp32 kernel for %s; such products convert their fp32 operands inside cuBLASLt\n",
                     what.c_str());
      });
      return plan(g, align_a, align_b, align_c, false);
    }
    if ((hs == CUBLAS_STATUS_NOT_SUPPORTED || (hs == CUBLAS_STATUS_SUCCESS && found < 1)) && g.precision != Precision::fp32) {
      // No tensor-core kernel for these operands (the fast paths may refuse an alignment or a shape
      // that plain fp32 takes): this product runs in fp32 rather than stopping the run, said once
      // per process on stderr. The plan is cached under the asked precision, so it is decided once.
      static std::once_flag said;
      std::call_once(said, [&] {
        std::fprintf(stderr, "loopscale: cuBLASLt offers no %s kernel for %s; such products run in fp32\n", precision_name(g.precision),
                     what.c_str());
      });
      Gemm f = g;
      f.precision = Precision::fp32;
      return plan(f, align_a, align_b, align_c, false);
    }
    check(hs, "cublasLtMatmulAlgoGetHeuristic", what);
    if (found < 1) check(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoGetHeuristic (no algorithm)", what);
    check(result.state, "cublasLtMatmulAlgoGetHeuristic (its algorithm)", what);
    p->algo = result.algo;
    return p;
  }

  // A packed operand's scratch, grown to the largest copy asked for and kept until exit. cudaFree
  // waits for the device, so no GEMM still reads the old block when it goes.
  struct Scratch {
    __nv_bfloat16* data = nullptr;
    int64 capacity = 0;  // values
  };
  static __nv_bfloat16* grow(Scratch& s, int64 values) {
    if (values > s.capacity) {
      if (s.data) check(cudaFree(s.data), "cudaFree", "the packed bf16 GEMM operands' old scratch");
      s.data = nullptr, s.capacity = 0;
      const std::size_t bytes = static_cast<std::size_t>(values) * sizeof(__nv_bfloat16);
      check(cudaMalloc(&s.data, bytes), "cudaMalloc", std::to_string(bytes) + " bytes of packed bf16 GEMM operands");
      s.capacity = values;
    }
    return s.data;
  }

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::mutex mutex_;
  Bf16Operands bf16_operands_ = Bf16Operands::fast;
  Scratch scratch_a_, scratch_b_;
  std::size_t packed_fallbacks_ = 0;
  std::map<std::array<int64, 17>, std::unique_ptr<Plan>> plans_;
};

}  // namespace loopscale::train::cublaslt
