// The CUDA backend: the static interface of backend/host.hpp on one NVIDIA GPU. Buffers are device
// allocations (cudaMalloc, no managed memory), element-wise work runs the kernels' own
// LOOPSCALE_HD lambdas through Thrust's CUDA system, sums reduce in double on the device, and float
// GEMMs go to cuBLASLt (backend/cublaslt.hpp; double ones to cuBLAS). Every CUDA and cuBLAS error
// becomes an exception naming the call (and, for a GEMM, the shapes).
//
// Status (see docs/training.md, "Backends"): every kernel of the model has a form for this backend.
// The element-wise kernels run their portable LOOPSCALE_HD lambdas through Thrust, one thread per
// value (backend/spans.hpp); attention and the MoE experts run their device forms (nested_gemm
// false: GEMMs issued from the host, attention's as one gemm_batched per head over the sequences);
// RMSNorm (QK-norm's strided form too), the softcapped cross-entropy (fused in a training step),
// attention's causal softmax, the embedding gradient and the MoE grouping's sort run kernels of
// this backend's own (cuda_kernels.hpp, through the hook of backend/host.hpp). The
// kernels are checked against their host twins by tests/cuda/kernels_device.cu, the whole model
// against the host by tests/cuda/model_device.cu, and its gradients in double against finite
// differences by tests/cuda/gradcheck_device.cu. All three passed on an NVIDIA H200 (4 Dec 2026);
// the QK-norm and embedding kernels and the unsynchronised parallel_for came after that run and
// have not yet run on a GPU. They are compiled by nvcc in every build that finds nvcc, and the
// tests skip (exit 77) without a device. On the CPU, in every build: the device forms' arithmetic
// (GuardDeviceBackend, tests/train/test_guard_backend.cpp), and this backend's own kernels, run by
// the SIMT emulator (SimtBackend, tests/simt/: the kernel checks of tests/cuda/kernels_device.cu and
// a model's training steps).
//
// Precision: buffers, master weights, gradients and optimiser state are fp32; the float GEMMs run
// in set_precision()'s arithmetic (backend/precision.hpp): bf16 by default (bf16 inputs on the
// tensor cores, fp32 accumulation), tf32, or fp32, which compares with the host backend within
// fp32 rounding (the device tests set it). Determinism: Thrust's reductions use a fixed order for a
// given size and device, and each GEMM shape keeps one cuBLASLt algorithm (cublaslt.hpp), so runs
// on one GPU with one stream give the same bits.
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

#include <cstdlib>
#include <string_view>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>

#include "loopscale/train/backend/buffer.hpp"
#include "loopscale/train/backend/cublaslt.hpp"
#include "loopscale/train/backend/cuda_check.hpp"
#include "loopscale/train/backend/cuda_device.hpp"
#include "loopscale/train/backend/cuda_kernels.hpp"  // before CudaBackend: its forwarding members name these
#include "loopscale/train/backend/portable.hpp"
#include "loopscale/train/backend/precision.hpp"

namespace loopscale::train {

namespace cuda_detail {

using int64 = std::int64_t;

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

// The arithmetic of CudaBackend's float GEMMs (CudaBackend::set_precision).
inline Precision& gemm_precision() {
  static Precision p = Precision::bf16;
  return p;
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

// Thrust's temporary storage for CudaBackend::sum (a reduction's partials and result), kept
// between calls: plain thrust::cuda::par would cudaMalloc and cudaFree it on every sum, and
// cudaFree waits for the whole device (the MoE step makes about 180 sums). Freed blocks are kept
// by size and handed out again, so two live requests never share one; they stay until exit, like
// the cuBLAS handle. The reduction itself is Thrust's, unchanged: the same bits as before.
struct CachedTemporaries {
  using value_type = char;
  char* allocate(std::ptrdiff_t bytes) {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = free.find(bytes);
    if (it != free.end()) {
      char* p = it->second;
      free.erase(it);
      return p;
    }
    void* p = nullptr;
    check(cudaMalloc(&p, static_cast<std::size_t>(bytes)), "cudaMalloc", std::to_string(bytes) + " bytes of a reduction's temporary storage");
    return static_cast<char*>(p);
  }
  void deallocate(char* p, std::size_t bytes) {
    const std::lock_guard<std::mutex> lock(mutex);
    free.emplace(static_cast<std::ptrdiff_t>(bytes), p);
  }
  static CachedTemporaries& get() {
    static CachedTemporaries& c = *new CachedTemporaries;  // never destroyed: see Engine::get in cublaslt.hpp
    return c;
  }

 private:
  std::mutex mutex;
  std::multimap<std::ptrdiff_t, char*> free;
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

struct CudaBackend : CudaKernelHooks<> {
  using int64 = std::int64_t;
  static constexpr const char* name = "cuda";
  static constexpr const char* gemm_library = "cublaslt";  // float GEMMs; double ones: cuBLAS
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

  // parallel_for and single return once their kernel is queued (par_nosync): thrust::cuda::par
  // waits for the stream after every for_each, about 240 waits a step of the d 1024 model. Nothing
  // needs them: every kernel, Thrust's and cuBLASLt's, goes to the default stream in order, and the
  // host reads device memory only through download's cudaMemcpy or sum's result, which wait. A
  // fault inside a kernel then surfaces at the next call that waits, under that call's name;
  // LOOPSCALE_CUDA_SYNC=1 in the environment makes each call wait, so the fault is named where it
  // happens (slower; for debugging).
  static bool wait_each_call() {
    static const bool on = [] {
      const char* v = std::getenv("LOOPSCALE_CUDA_SYNC");
      return v && *v && std::string_view(v) != "0";
    }();
    return on;
  }
  template <class F>
  static void parallel_for(int64 n, F f) {
    if (n <= 0) return;
    if (wait_each_call())
      thrust::for_each(thrust::cuda::par, thrust::counting_iterator<int64>(0), thrust::counting_iterator<int64>(n), f);
    else
      thrust::for_each(thrust::cuda::par_nosync, thrust::counting_iterator<int64>(0), thrust::counting_iterator<int64>(n), f);
    cuda_detail::check(cudaGetLastError(), "parallel_for");
  }
  // Waits until the device has done everything queued (the trainer's step time).
  static void synchronize() { cuda_detail::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }
  template <class F>
  static double sum(int64 n, F f) {
    if (n <= 0) return 0.0;
    const double s = thrust::transform_reduce(thrust::cuda::par(cuda_detail::CachedTemporaries::get()), thrust::counting_iterator<int64>(0),
                                              thrust::counting_iterator<int64>(n),
                                              cuda_detail::AsDouble<F>{f}, 0.0, thrust::plus<double>());
    cuda_detail::check(cudaGetLastError(), "sum");
    return s;
  }
  template <class F>
  static void single(F f) {
    if (wait_each_call())
      thrust::for_each(thrust::cuda::par, thrust::counting_iterator<int64>(0), thrust::counting_iterator<int64>(1), cuda_detail::Once<F>{f});
    else
      thrust::for_each(thrust::cuda::par_nosync, thrust::counting_iterator<int64>(0), thrust::counting_iterator<int64>(1), cuda_detail::Once<F>{f});
    cuda_detail::check(cudaGetLastError(), "single");
  }

  // The arithmetic of the float GEMMs (backend/precision.hpp), for the whole process: bf16 unless
  // set, the project's default (bf16 inputs, fp32 accumulation, fp32 master weights); fp32 to
  // compare with the host backend. double GEMMs are always fp64.
  static void set_precision(Precision p) { cuda_detail::gemm_precision() = p; }
  static Precision precision() { return cuda_detail::gemm_precision(); }

  // What the trainer asks a device backend (trainer.hpp, DeviceBackend): the current device's name,
  // its dense bf16 tensor-core peak from backend/gpu_peaks.hpp (0 for a GPU the table lacks: the
  // run then needs --peak-flops), which the MFU of a GPU run divides by whatever the GEMM precision,
  // as llm.c and the MFU literature report it; and its memory {free, total} now.
  static std::string device_name() { return cuda_device_info().name; }
  static double device_peak_flops() {
    const std::optional<GpuPeak> p = find_gpu_peak(device_name());
    return p ? p->bf16 : 0.0;
  }
  static std::string device_peak_source() {
    const std::optional<GpuPeak> p = find_gpu_peak(device_name());
    return p ? std::string("dense bf16 peak of the ") + std::string(p->product) + ", " + std::string(p->source) : std::string("unknown");
  }
  static std::pair<std::int64_t, std::int64_t> device_memory() {
    const CudaMemoryInfo m = cuda_memory_info();
    return {static_cast<std::int64_t>(m.free), static_cast<std::int64_t>(m.total)};
  }

  // Kernels of this backend's own (the hooks of backend/host.hpp: rmsnorm_forward, softcap_ce_fused,
  // causal_softmax, embedding_backward, sort_pairs, ...) come from CudaKernelHooks (cuda_kernels.hpp).

  // Row-major C = alpha op(A) op(B) + beta C.
  template <class T>
  static void gemm(bool ta, bool tb, int64 M, int64 N, int64 K, T alpha, const T* A, int64 lda, const T* B, int64 ldb, T beta,
                   T* C, int64 ldc) {
    gemm_batched(ta, tb, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0, 1);
  }

  // count products C_i = alpha op(A_i) op(B_i) + beta C_i, X_i = X + i * strideX, in one call.
  // float: cuBLASLt in precision() (cublaslt.hpp maps row-major onto its column-major); double:
  // cuBLAS's cublasDgemm(StridedBatched) as column-major C^T = alpha op(B)^T op(A)^T, the same
  // buffers with the operands swapped (the gradient checks' type, where cuBLASLt adds nothing).
  template <class T>
  static void gemm_batched(bool ta, bool tb, int64 M, int64 N, int64 K, T alpha, const T* A, int64 lda, int64 strideA, const T* B,
                           int64 ldb, int64 strideB, T beta, T* C, int64 ldc, int64 strideC, int64 count) {
    static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>, "CudaBackend::gemm_batched: float or double");
    if (count <= 0 || M <= 0 || N <= 0) return;
    if (K <= 0) {  // only C_i = beta C_i: no product to run
      for (int64 b = 0; b < count; ++b) parallel_for(M * N, cuda_detail::ScaleInto<T>{C + b * strideC, N, ldc, beta});
      return;
    }
    if constexpr (std::is_same_v<T, float>) {
      cublaslt::Engine::get().run({.precision = precision(), .ta = ta, .tb = tb, .M = M, .N = N, .K = K, .lda = lda, .ldb = ldb, .ldc = ldc,
                                   .strideA = strideA, .strideB = strideB, .strideC = strideC, .count = count},
                                  alpha, A, B, beta, C);
    } else {
      const auto op = [](bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; };
      const auto i = [](int64 v) { return static_cast<int>(v); };
      const auto shapes = [&] {
        const auto n = [](int64 v) { return std::to_string(v); };
        return std::string("double, ta ") + (ta ? "T" : "N") + " tb " + (tb ? "T" : "N") + " M " + n(M) + " N " + n(N) + " K " + n(K) +
               " lda " + n(lda) + " ldb " + n(ldb) + " ldc " + n(ldc) +
               (count == 1 ? "" : " strideA " + n(strideA) + " strideB " + n(strideB) + " strideC " + n(strideC) + " count " + n(count));
      };
      if (count == 1) {
        const cublasStatus_t st =
            cublasDgemm(cuda_detail::blas(), op(tb), op(ta), i(N), i(M), i(K), &alpha, B, i(ldb), A, i(lda), &beta, C, i(ldc));
        if (st != CUBLAS_STATUS_SUCCESS) cuda_detail::check(st, "cublasDgemm", shapes());
      } else {
        const cublasStatus_t st = cublasDgemmStridedBatched(cuda_detail::blas(), op(tb), op(ta), i(N), i(M), i(K), &alpha, B, i(ldb), strideB,
                                                            A, i(lda), strideA, &beta, C, i(ldc), strideC, i(count));
        if (st != CUBLAS_STATUS_SUCCESS) cuda_detail::check(st, "cublasDgemmStridedBatched", shapes());
      }
    }
  }

};

}  // namespace loopscale::train
