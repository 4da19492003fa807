// The CUDA backend's GEMM engine (backend/cuda.hpp): row-major fp32 products through cuBLASLt, in
// a chosen precision (backend/precision.hpp), one at a time or strided-batched.
//
// One cuBLASLt handle and one 32 MiB workspace per process (cudaMalloc'd once, no managed memory;
// 32 MiB is the workspace cuBLAS's documentation recommends for Hopper, cublasSetWorkspace), both
// made on the device current at the first call and kept until exit: the backend drives one
// device. Each distinct call (precision, transposes, M, N, K, leading dimensions, batch count and
// strides, the operands' alignment) gets a plan at its first use: the matmul descriptor, the three
// matrix layouts and the algorithm cuBLASLt's heuristic picks. Every later call of that key only
// looks the plan up and launches: no allocation, no heuristic query. A training step repeats a few
// dozen keys, so the cache stays small.
//
// Row-major C = alpha op(A) op(B) + beta C is cuBLASLt's column-major C^T = alpha op(B)^T op(A)^T
// over the same buffers: its A is our B, its B our A, its m = N and n = M (as in cuda.hpp's
// cuBLAS calls). D is C, in place.
//
// Precision: A, B, C and the scalars are fp32 (CUDA_R_32F) in all three; the compute type says
// what the multiply may do with them:
//   fp32  CUBLAS_COMPUTE_32F: fp32 multiplies, no tensor-core rounding;
//   tf32  CUBLAS_COMPUTE_32F_FAST_TF32: inputs rounded to TF32 on tensor cores, fp32 accumulation;
//   bf16  CUBLAS_COMPUTE_32F_FAST_16BF: inputs rounded to bf16 on tensor cores (cublas_api.h:
//         "allows down-converting inputs to bfloat16 or TF32"), fp32 accumulation, fp32 result.
// That cublasLtMatmul takes fp32 A/B/C/D with the two FAST compute types and scale type
// CUDA_R_32F is the cuBLAS documentation's cuBLASLt API reference, section cublasLtMatmul(), table
// "Datatypes supported" (https://docs.nvidia.com/cuda/cublas/#cublasltmatmul), and the compute
// types are described in its section 2.2.11, cublasComputeType_t. So the master weights, the
// activations and the gradients stay fp32 in memory and only the products see bf16.
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
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>

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
    const std::array<int64, 16> key = {static_cast<int64>(g.precision), g.ta, g.tb, g.M, g.N, g.K, g.lda, g.ldb, g.ldc, g.count,
                                       batched ? g.strideA : 0, batched ? g.strideB : 0, batched ? g.strideC : 0,
                                       alignment(A, g.strideA * bytes, g.count), alignment(B, g.strideB * bytes, g.count),
                                       alignment(C, g.strideC * bytes, g.count)};
    // The mutex keeps two host threads from building one plan twice; the backend is driven
    // from one thread, so it is never contended.
    const std::lock_guard<std::mutex> lock(mutex_);
    auto it = plans_.find(key);
    if (it == plans_.end()) it = plans_.emplace(key, plan(g, key[13], key[14], key[15])).first;
    const Plan& p = *it->second;
    const cublasStatus_t s =
        cublasLtMatmul(handle_, p.op, &alpha, B, p.a, A, p.b, &beta, C, p.c, C, p.c, &p.algo, workspace_, workspace_bytes, cudaStream_t{});
    if (s != CUBLAS_STATUS_SUCCESS) check(s, "cublasLtMatmul", g.describe());
  }

  // How many plans the cache holds (tests: steady-state calls add none).
  std::size_t plans() {
    const std::lock_guard<std::mutex> lock(mutex_);
    return plans_.size();
  }

 private:
  Engine() {
    check(cublasLtCreate(&handle_), "cublasLtCreate", "the process's cuBLASLt handle");
    check(cudaMalloc(&workspace_, workspace_bytes), "cudaMalloc", "the cuBLASLt workspace, " + std::to_string(workspace_bytes) + " bytes");
  }
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  std::unique_ptr<Plan> plan(const Gemm& g, int64 align_a, int64 align_b, int64 align_c) const {
    const std::string what = g.describe();
    auto p = std::make_unique<Plan>();
    check(cublasLtMatmulDescCreate(&p->op, compute_type(g.precision), CUDA_R_32F), "cublasLtMatmulDescCreate", what);
    const cublasOperation_t op_a = g.tb ? CUBLAS_OP_T : CUBLAS_OP_N, op_b = g.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)), "cublasLtMatmulDescSetAttribute (TRANSA)",
          what);
    check(cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)), "cublasLtMatmulDescSetAttribute (TRANSB)",
          what);
    // Column-major layouts of the stored matrices (rows, columns, leading dimension): cuBLASLt's
    // A = our B, op(A) N x K; its B = our A, op(B) K x M; C is N x M.
    const auto u = [](int64 v) { return static_cast<std::uint64_t>(v); };
    check(cublasLtMatrixLayoutCreate(&p->a, CUDA_R_32F, u(g.tb ? g.K : g.N), u(g.tb ? g.N : g.K), g.ldb), "cublasLtMatrixLayoutCreate (B)", what);
    check(cublasLtMatrixLayoutCreate(&p->b, CUDA_R_32F, u(g.ta ? g.M : g.K), u(g.ta ? g.K : g.M), g.lda), "cublasLtMatrixLayoutCreate (A)", what);
    check(cublasLtMatrixLayoutCreate(&p->c, CUDA_R_32F, u(g.N), u(g.M), g.ldc), "cublasLtMatrixLayoutCreate (C)", what);
    if (g.count > 1) {
      const std::int32_t count = static_cast<std::int32_t>(g.count);
      const std::pair<cublasLtMatrixLayout_t, int64> strided[] = {{p->a, g.strideB}, {p->b, g.strideA}, {p->c, g.strideC}};
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
    const std::uint32_t aligned[] = {static_cast<std::uint32_t>(align_b), static_cast<std::uint32_t>(align_a),
                                     static_cast<std::uint32_t>(align_c), static_cast<std::uint32_t>(align_c)};
    const cublasLtMatmulPreferenceAttributes_t attrs[] = {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                                                          CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES};
    for (int i = 0; i < 4; ++i)
      check(cublasLtMatmulPreferenceSetAttribute(pref.h, attrs[i], &aligned[i], sizeof(aligned[i])),
            "cublasLtMatmulPreferenceSetAttribute (MIN_ALIGNMENT)", what);
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(handle_, p->op, p->a, p->b, p->c, p->c, pref.h, 1, &result, &found);
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
      return plan(f, align_a, align_b, align_c);
    }
    check(hs, "cublasLtMatmulAlgoGetHeuristic", what);
    if (found < 1) check(CUBLAS_STATUS_NOT_SUPPORTED, "cublasLtMatmulAlgoGetHeuristic (no algorithm)", what);
    check(result.state, "cublasLtMatmulAlgoGetHeuristic (its algorithm)", what);
    p->algo = result.algo;
    return p;
  }

  cublasLtHandle_t handle_ = nullptr;
  void* workspace_ = nullptr;
  std::mutex mutex_;
  std::map<std::array<int64, 16>, std::unique_ptr<Plan>> plans_;
};

}  // namespace loopscale::train::cublaslt
