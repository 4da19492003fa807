// The CUDA backend: the static interface of backend/host.hpp on one NVIDIA GPU. Buffers are device
// allocations (cudaMalloc, no managed memory), element-wise work runs the kernels' own
// LOOPSCALE_HD lambdas through Thrust's CUDA system, sums reduce in double on the device, and GEMMs
// go to cuBLAS. Every CUDA and cuBLAS error becomes an exception naming the call (and, for a GEMM,
// the shapes).
//
// Status (see docs/training.md, "Backends"): every kernel of the model has a form for this backend.
// The element-wise kernels run their portable LOOPSCALE_HD lambdas through Thrust; attention and
// the MoE experts run their device forms (nested_gemm false: GEMMs issued from the host, attention's
// as one gemm_batched per head over the sequences); RMSNorm and the softcapped cross-entropy run
// kernels of this backend's own (cuda_kernels.hpp, through the hook of backend/host.hpp). The
// kernels are checked against their host twins by tests/cuda/kernels_device.cu and the whole model
// against the host by tests/cuda/model_device.cu. Nothing in this file or cuda_kernels.hpp has yet
// run on a GPU in this project: they are compiled by nvcc in every build that finds nvcc, and
// their tests skip (exit 77) without a device. The device forms' arithmetic is checked on the CPU
// (GuardDeviceBackend, tests/train/test_guard_backend.cpp).
//
// Precision: fp32 throughout, with cuBLAS's default math (no TF32), so results can be compared
// with the host's; determinism: Thrust's reductions use a fixed order for a given size and device,
// and cuBLAS's fp32 GEMMs are deterministic on one GPU with one stream.
#pragma once

#if !defined(__CUDACC__)
#error "loopscale/train/backend/cuda.hpp is CUDA code: compile this file with nvcc and link loopscale::cuda"
#endif

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <thrust/for_each.h>
#include <thrust/functional.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/system/cuda/execution_policy.h>
#include <thrust/transform_reduce.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "loopscale/train/backend/buffer.hpp"
#include "loopscale/train/backend/cuda_kernels.hpp"  // before CudaBackend: its forwarding members name these
#include "loopscale/train/backend/portable.hpp"

namespace loopscale::train {

namespace cuda_detail {

using int64 = std::int64_t;

inline void check(cudaError_t e, const char* call, const std::string& what = {}) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("cuda: ") + call + " failed: " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")" +
                             (what.empty() ? "" : ", " + what));
}
inline void check(cublasStatus_t s, const char* call, const std::string& what = {}) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuda: ") + call + " failed: " + cublasGetStatusString(s) + " (" + cublasGetStatusName(s) + ")" +
                             (what.empty() ? "" : ", " + what));
}

// The process's cuBLAS handle, created on first use on the current device and kept until exit.
inline cublasHandle_t blas() {
  static const cublasHandle_t h = [] {
    cublasHandle_t x = nullptr;
    check(cublasCreate(&x), "cublasCreate");
    check(cublasSetMathMode(x, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
    return x;
  }();
  return h;
}

// Device functors around the kernels' lambdas (extended lambdas cannot be wrapped by lambdas in a
// member function template portably).
template <class F>
struct AsDouble {
  F f;
  LOOPSCALE_HD double operator()(int64 i) const { return static_cast<double>(f(i)); }
};
template <class F>
struct Once {
  F f;
  LOOPSCALE_HD void operator()(int64) const { f(); }
};

template <class T>
struct ScaleInto {  // C = beta C (beta 0: zeros, whatever C held) for a GEMM with K = 0
  T* C;
  int64 N, ldc;
  T beta;
  LOOPSCALE_HD void operator()(int64 i) const {
    T& c = C[(i / N) * ldc + i % N];
    c = beta == T(0) ? T(0) : beta * c;
  }
};

}  // namespace cuda_detail

// Device memory for OwnedBuffer: cudaMalloc'd and zeroed.
struct CudaMemory {
  static void* allocate(std::size_t bytes) {
    void* p = nullptr;
    cuda_detail::check(cudaMalloc(&p, bytes), "cudaMalloc", std::to_string(bytes) + " bytes");
    cuda_detail::check(cudaMemset(p, 0, bytes), "cudaMemset");
    return p;
  }
  static void release(void* p, std::size_t) { cudaFree(p); }  // an error here has nowhere to go; the next checked call reports it
};

template <class T>
using CudaBuffer = OwnedBuffer<T, CudaMemory>;

struct CudaBackend {
  using int64 = std::int64_t;
  static constexpr const char* name = "cuda";
  static constexpr const char* gemm_library = "cublas";
  static constexpr bool host_memory = false;
  static constexpr bool nested_gemm = false;  // attention and the MoE experts run their device forms
  template <class T>
  using buffer = CudaBuffer<T>;

  // One device does the work; the engine's per-thread scratch needs one slot.
  static void set_threads(int) {}
  static int threads() { return 1; }
  static int thread_id() { return 0; }

  // Whether a CUDA device is usable here (tests skip with 77 when not).
  static bool available() {
    int n = 0;
    return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
  }

  template <class T>
  static void upload(T* dst, const T* src, int64 n) {
    if (n > 0) cuda_detail::check(cudaMemcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy (upload)");
  }
  template <class T>
  static void download(T* dst, const T* src, int64 n) {
    if (n > 0) cuda_detail::check(cudaMemcpy(dst, src, static_cast<std::size_t>(n) * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy (download)");
  }

  template <class F>
  static void parallel_for(int64 n, F f) {
    if (n <= 0) return;
    thrust::for_each(thrust::cuda::par, thrust::counting_iterator<int64>(0), thrust::counting_iterator<int64>(n), f);
    cuda_detail::check(cudaGetLastError(), "parallel_for");
  }
  template <class F>
  static double sum(int64 n, F f) {
    if (n <= 0) return 0.0;
    const double s = thrust::transform_reduce(thrust::cuda::par, thrust::counting_iterator<int64>(0), thrust::counting_iterator<int64>(n),
                                              cuda_detail::AsDouble<F>{f}, 0.0, thrust::plus<double>());
    cuda_detail::check(cudaGetLastError(), "sum");
    return s;
  }
  template <class F>
  static void single(F f) {
    thrust::for_each(thrust::cuda::par, thrust::counting_iterator<int64>(0), thrust::counting_iterator<int64>(1), cuda_detail::Once<F>{f});
    cuda_detail::check(cudaGetLastError(), "single");
  }

  // Kernels of this backend's own (the hook of backend/host.hpp; cuda_kernels.hpp): the portable
  // kernels of kernels/rmsnorm.hpp and kernels/loss.hpp call these instead of their bodies.
  template <class T>
  static void rmsnorm_forward(const T* x, const T* g, T* y, T* rstd, int64 rows, int64 d, T eps) {
    cuda_kernels::rmsnorm_forward(x, g, y, rstd, rows, d, eps);
  }
  template <class T>
  static void rmsnorm_backward(const T* x, const T* g, const T* rstd, const T* dy, T* dx, T* dg, int64 rows, int64 d, bool accumulate) {
    cuda_kernels::rmsnorm_backward(x, g, rstd, dy, dx, dg, rows, d, accumulate);
  }
  template <class T>
  static void softcap_ce_forward(T* logits, const std::int32_t* targets, T* losses, T* lse, int64 rows, int64 padded_vocab, int64 vocab,
                                 T cap) {
    cuda_kernels::softcap_ce_forward(logits, targets, losses, lse, rows, padded_vocab, vocab, cap);
  }
  template <class T>
  static void softcap_ce_backward(T* logits, const std::int32_t* targets, const T* lse, T scale, int64 rows, int64 padded_vocab,
                                  int64 vocab, T cap) {
    cuda_kernels::softcap_ce_backward(logits, targets, lse, scale, rows, padded_vocab, vocab, cap);
  }

  // Row-major C = alpha op(A) op(B) + beta C as cuBLAS's column-major C^T = alpha op(B)^T op(A)^T:
  // the same buffers, the operands swapped.
  template <class T>
  static void gemm(bool ta, bool tb, int64 M, int64 N, int64 K, T alpha, const T* A, int64 lda, const T* B, int64 ldb, T beta,
                   T* C, int64 ldc) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "CudaBackend::gemm: float or double");
    if (M <= 0 || N <= 0) return;
    if (K <= 0) {
      parallel_for(M * N, cuda_detail::ScaleInto<T>{C, N, ldc, beta});
      return;
    }
    const auto op = [](bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; };
    const auto i = [](int64 v) { return static_cast<int>(v); };
    const auto shapes = [&] {
      const auto n = [](int64 v) { return std::to_string(v); };
      return std::string("ta ") + (ta ? "T" : "N") + " tb " + (tb ? "T" : "N") + " M " + n(M) + " N " + n(N) + " K " + n(K) + " lda " +
             n(lda) + " ldb " + n(ldb) + " ldc " + n(ldc);
    };
    cublasStatus_t st;
    if constexpr (std::is_same_v<T, float>)
      st = cublasSgemm(cuda_detail::blas(), op(tb), op(ta), i(N), i(M), i(K), &alpha, B, i(ldb), A, i(lda), &beta, C, i(ldc));
    else
      st = cublasDgemm(cuda_detail::blas(), op(tb), op(ta), i(N), i(M), i(K), &alpha, B, i(ldb), A, i(lda), &beta, C, i(ldc));
    if (st != CUBLAS_STATUS_SUCCESS) cuda_detail::check(st, std::is_same_v<T, float> ? "cublasSgemm" : "cublasDgemm", shapes());
  }

  // count products C_i = alpha op(A_i) op(B_i) + beta C_i, X_i = X + i * strideX, in one cuBLAS
  // call, with gemm's operand swap (the strides go with their operands).
  template <class T>
  static void gemm_batched(bool ta, bool tb, int64 M, int64 N, int64 K, T alpha, const T* A, int64 lda, int64 strideA, const T* B,
                           int64 ldb, int64 strideB, T beta, T* C, int64 ldc, int64 strideC, int64 count) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "CudaBackend::gemm_batched: float or double");
    if (count <= 0 || M <= 0 || N <= 0) return;
    if (K <= 0) {  // only C_i = beta C_i: rare enough for one scaling pass per product
      for (int64 b = 0; b < count; ++b) gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C + b * strideC, ldc);
      return;
    }
    const auto op = [](bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; };
    const auto i = [](int64 v) { return static_cast<int>(v); };
    const auto shapes = [&] {
      const auto n = [](int64 v) { return std::to_string(v); };
      return std::string("ta ") + (ta ? "T" : "N") + " tb " + (tb ? "T" : "N") + " M " + n(M) + " N " + n(N) + " K " + n(K) + " lda " +
             n(lda) + " strideA " + n(strideA) + " ldb " + n(ldb) + " strideB " + n(strideB) + " ldc " + n(ldc) + " strideC " +
             n(strideC) + " count " + n(count);
    };
    cublasStatus_t st;
    if constexpr (std::is_same_v<T, float>)
      st = cublasSgemmStridedBatched(cuda_detail::blas(), op(tb), op(ta), i(N), i(M), i(K), &alpha, B, i(ldb), strideB, A, i(lda), strideA,
                                     &beta, C, i(ldc), strideC, i(count));
    else
      st = cublasDgemmStridedBatched(cuda_detail::blas(), op(tb), op(ta), i(N), i(M), i(K), &alpha, B, i(ldb), strideB, A, i(lda), strideA,
                                     &beta, C, i(ldc), strideC, i(count));
    if (st != CUBLAS_STATUS_SUCCESS)
      cuda_detail::check(st, std::is_same_v<T, float> ? "cublasSgemmStridedBatched" : "cublasDgemmStridedBatched", shapes());
  }
};

}  // namespace loopscale::train
