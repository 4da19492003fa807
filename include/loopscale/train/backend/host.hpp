// The host backend: where the training engine's kernels get their GEMMs, element-wise loops and
// reductions on the CPU. Kernels are templates over a backend type with this static interface, so a
// device backend (Thrust CUDA + cuBLAS) can be added beside it without touching the model code.
//
//   gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc)   row-major C = a op(A) op(B) + b C
//   gemm_batched(ta, tb, M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, count)
//                                                                count independent gemms, C_i = a op(A_i) op(B_i) + b C_i
//                                                                with X_i = X + i * strideX (one launch on a device)
//   parallel_for(n, f)                                           f(i) for i in [0, n), any order
//   sum(n, f)                                                    sum of f(i) in double, fixed order
//   single(f)                                                    f() once, on the backend (serial work on its memory)
//   thread_id(), threads(), set_threads(n)                       thread_id: the caller's index among the threads
//                                                                running the current parallel_for's tasks
//   buffer<T>, upload(dst, src, n), download(dst, src, n)        its memory, and copies to and from the host
//   host_memory                                                  whether host code may read a buffer directly
//   nested_gemm                                                  whether a parallel_for task may call gemm
//
// Kernels of a backend's own (optional): a kernel whose portable form is slow on some backend asks,
// at compile time, whether the backend has a static member of the kernel's name, and calls it
// instead of its own body when it has:
//   if constexpr (requires { B::rmsnorm_forward(x, g, y, rstd, rows, d, T(rms_eps)); }) { B::rmsnorm_forward(...); return; }
// so the model keeps one code path and a backend without the member runs the portable kernel. The
// arguments are the kernel's own, with its constants (rms_eps) and shape structs (LossShape) passed
// as plain values, so a backend need not include the kernels. Hooked now: rmsnorm_forward,
// rmsnorm_backward, rmsnorm_forward_strided, rmsnorm_backward_from_output (kernels/rmsnorm.hpp),
// embedding_backward (kernels/embedding.hpp), softcap_ce_forward, softcap_ce_backward, softcap_ce_fused
// (kernels/loss.hpp), causal_softmax, causal_softmax_backward (kernels/attention.hpp, device form),
// row_dots (kernels/moe.hpp, device form), sort_pairs (kernels/moe_router.hpp: the MoE grouping as
// a sort); CudaBackend supplies all of them (backend/cuda_kernels.hpp), GuardDeviceBackend
// sort_pairs, HostBackend none.
//
// Every buffer a kernel reads or writes is a backend buffer; host code touches one only through
// upload/download or inside a backend call (guard.hpp's backend checks that, for tests). Here a
// buffer is a std::vector and the copies are plain copies.
//
// Element-wise work runs through Thrust with its OpenMP device system (compiled by the host
// compiler). GEMMs use Eigen over Maps of the flat buffers, or OpenBLAS's cblas_sgemm when built
// with LOOPSCALE_GEMM_OPENBLAS (CMake: -DLOOPSCALE_GEMM=openblas), or oneDNN's dnnl_sgemm with
// LOOPSCALE_GEMM_ONEDNN (-DLOOPSCALE_GEMM=onednn), one thread per call. Eigen's own threading scales only about
// 1.6x on two cores (measured when this backend was written), so a large product is instead split into one row (or column)
// panel per thread, each multiplied by single-threaded Eigen; inside an already parallel region
// (attention runs one head per thread) a product runs on the calling thread only.
//
// Determinism: every output element is produced by exactly one thread with a blocking that depends
// only on the shapes and the thread count, and `sum` adds fixed-size chunks in a fixed order, so the
// same thread count gives bit-identical results on one kind of CPU (the GEMM libraries choose their
// kernels by the CPU: gemm_kernels() names them).
#pragma once

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <Eigen/Core>

#include "loopscale/train/backend/portable.hpp"
#include "loopscale/util/thread_limit.hpp"
#if defined(LOOPSCALE_GEMM_OPENBLAS)
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#elif defined(LOOPSCALE_GEMM_ONEDNN)
#include <dnnl.h>
#include <fmt/format.h>
#include <signal.h>
#include <stdexcept>
#endif
#include <immintrin.h>
#include <omp.h>
#include <thrust/for_each.h>
#include <thrust/iterator/counting_iterator.h>
#include <thrust/system/omp/execution_policy.h>

namespace loopscale::train {

using int64 = std::int64_t;

namespace host_detail {
// The CPU's maker, which decides a few kernel choices (swap_transposed_a) and so the last bits of
// a run: "intel", "amd" or "other".
inline const char* cpu_vendor() {
#if defined(__x86_64__) || defined(__i386__)
  static const char* vendor = [] {
    __builtin_cpu_init();
    return __builtin_cpu_is("intel") ? "intel" : __builtin_cpu_is("amd") ? "amd" : "other";
  }();
  return vendor;
#else
  return "other";
#endif
}
}  // namespace host_detail

#if defined(LOOPSCALE_GEMM_ONEDNN)
namespace host_detail {
// oneDNN picks its kernels from the CPU it runs on, not from the build: held to the vector unit the
// build targets, so the peak the MFU divides by (peak_isa()) is the peak of the instructions every
// GEMM uses. Otherwise an AVX2 build on a core with two 512-bit FMA units would run AVX-512 GEMMs
// at up to twice the AVX2 peak it measures, an MFU above 1. Only the first call into oneDNN can
// set the limit, so everything that calls oneDNN calls this first.
inline void hold_onednn_isa() {
#if !defined(__AVX512F__)
#if defined(__FMA__) && defined(__AVX2__)
  static const bool held = (dnnl_set_max_cpu_isa(dnnl_cpu_isa_avx2), true);
#else
  static const bool held = (dnnl_set_max_cpu_isa(dnnl_cpu_isa_sse41), true);
#endif
  (void)held;
#endif
}

// The instruction set of the kernels oneDNN runs here, under the hold above.
inline const char* onednn_isa_name() {
  hold_onednn_isa();
  switch (dnnl_get_effective_cpu_isa()) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
  }
}

// Holds off the calling thread's asynchronous signals for its lifetime (HostBackend::gemm_serial
// says why); a signal that comes meanwhile stays pending and is delivered when the old mask is
// back. Synchronous ones (a fault: SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, and SIGABRT)
// stay open: blocked, a fault would kill the process without its report.
class SignalsHeld {
 public:
  SignalsHeld() { pthread_sigmask(SIG_BLOCK, &asynchronous(), &old_); }
  ~SignalsHeld() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  SignalsHeld(const SignalsHeld&) = delete;
  SignalsHeld& operator=(const SignalsHeld&) = delete;

 private:
  static const sigset_t& asynchronous() {
    static const sigset_t set = [] {
      sigset_t s;
      sigfillset(&s);
      for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT}) sigdelset(&s, sig);
      return s;
    }();
    return set;
  }
  sigset_t old_;
};

// Whether a transposed-A product A^T B (A is K x M, B is K x N) goes to oneDNN as its transpose,
// C^T = B^T A, with C^T in a scratch. oneDNN 2.6's AVX2 sgemm packs the transposed operand slowly
// when its rows are long: on Zen 4 held to AVX2, one thread, K 4096, A^T B ran at 40 GFLOP/s with
// A's rows 1,024 floats long (the d 256 model's MLP up-projection weight gradient, 1024 x 256, or
// a thread's 512 x 256 panel of it), 70 at 512, 75-87 at 256, 96 at 128; B^T A of the same
// operands at 82, 95, 95 where B's rows were the shorter, and transposing the M x N result costs
// little next to the 2MNK flops. Hence: swap when B's rows are no longer than A's and A's are at
// least 256 floats. With AVX-512 kernels it depends on the core. On Zen 4 the transposed operand
// packs fast (92-106 GFLOP/s at the same shapes, the swap 0-35% slower). On an Intel Xeon (family 6
// model 207, two 512-bit FMA units; one thread, 3 Dec 2026) the long products gain and the short
// ones lose: K 4096, a thread's 512 x 256 panel of that gradient (A's rows 1,024 floats) ran at
// 103-108 directly and 141-142 swapped, the QKV gradient's 384 x 256 panel (rows 768) at 139-150
// and 153, a 128 x 256 panel with rows of 256 at 141 and 144; but the attention's 128 x 128 blocks
// of S^T dO (K 128-256, rows 256) at 101-137 directly and 67-100 swapped, and with K 1024 the two
// were within the noise. So AVX-512 builds swap on Intel cores only, and only where K >= 2048 and
// A's rows are at least 512 floats. The choice depends on the machine and the shape, never on a
// timing, so a machine and a thread count give fixed bits.
inline bool swap_transposed_a(bool ta, bool tb, int64_t K, int64_t lda, int64_t ldb) {
  if (!ta || tb || ldb > lda) return false;
#if defined(__AVX512F__)
  static const bool intel = std::string_view(cpu_vendor()) == "intel";
  return intel && K >= 2048 && lda >= 512;
#else
  (void)K;
  return lda >= 256;
#endif
}

// C = alpha A^T B + beta C computed as C^T = alpha B^T A in a per-thread scratch (grown to the
// largest product, then kept), then transposed into C in 32 x 32 tiles. beta 0 overwrites C
// without reading it (it may hold garbage).
inline dnnl_status_t transposed_a_by_swap(int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                                          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  thread_local std::vector<float> ct;
  if (ct.size() < static_cast<std::size_t>(M * N)) ct.resize(static_cast<std::size_t>(M * N));
  const dnnl_status_t st = dnnl_sgemm('T', 'N', N, M, K, alpha, B, ldb, A, lda, 0.0f, ct.data(), M);
  if (st != dnnl_success) return st;
  constexpr int64_t tile = 32;
  for (int64_t i0 = 0; i0 < M; i0 += tile)
    for (int64_t j0 = 0; j0 < N; j0 += tile) {
      const int64_t i1 = std::min(M, i0 + tile), j1 = std::min(N, j0 + tile);
      for (int64_t i = i0; i < i1; ++i) {
        float* c = C + i * ldc;
        if (beta == 0.0f)
          for (int64_t j = j0; j < j1; ++j) c[j] = ct[static_cast<std::size_t>(j * M + i)];
        else
          for (int64_t j = j0; j < j1; ++j) c[j] = beta * c[j] + ct[static_cast<std::size_t>(j * M + i)];
      }
    }
  return dnnl_success;
}
}  // namespace host_detail
#endif

struct HostBackend {
  static constexpr const char* name = "host";
  // The library of gemm_serial, recorded in every run's log (train/trainer.hpp): results differ in
  // the last bits from one library to another, so a comparison of runs needs it.
#if defined(LOOPSCALE_GEMM_OPENBLAS)
  static constexpr const char* gemm_library = "openblas";
#elif defined(LOOPSCALE_GEMM_ONEDNN)
  static constexpr const char* gemm_library = "onednn";
#else
  static constexpr const char* gemm_library = "eigen";
#endif
  // The kernels behind gemm_library on this machine and the CPU's maker, also in every run's log:
  // the same build picks different kernels on different CPUs (oneDNN and OpenBLAS choose at run
  // time; Debian's OpenBLAS 0.3.21 falls back to its generic "Prescott" ones on CPUs it does not
  // know, at a fifth of the speed), and so gives different last bits, and speeds, from one to
  // another. For example "avx512_core, intel" (oneDNN), "SkylakeX, intel" (OpenBLAS).
  static std::string gemm_kernels() {
#if defined(LOOPSCALE_GEMM_OPENBLAS)
    const std::string kernels = openblas_get_corename();
#elif defined(LOOPSCALE_GEMM_ONEDNN)
    const std::string kernels = host_detail::onednn_isa_name();
#else
    const std::string kernels = Eigen::SimdInstructionSetsInUse();
#endif
    return kernels + ", " + host_detail::cpu_vendor();
  }

  // Memory: a backend buffer is a zero-initialised std::vector, which host code may also read
  // directly (host_memory); code that must also run on a device backend uses upload/download.
  template <class T>
  using buffer = std::vector<T>;
  static constexpr bool host_memory = true;
  // Whether a parallel_for task may call gemm (on the calling thread). Where it may, attention and
  // the MoE experts run one task per head or row chunk, each with its own small GEMMs; where it
  // may not (a device), they issue their GEMMs from the host and do the rest element-wise
  // (kernels/attention.hpp and kernels/moe.hpp: the "device form").
  static constexpr bool nested_gemm = true;
  template <class T>
  static void upload(T* dst, const T* src, int64 n) {
    if (n > 0) std::copy_n(src, n, dst);
  }
  template <class T>
  static void download(T* dst, const T* src, int64 n) {
    if (n > 0) std::copy_n(src, n, dst);
  }
  // Serial work on backend memory (a prefix sum over experts, a bias update): f() once, here on
  // the calling thread; a device backend runs it as one device thread.
  template <class F>
  static void single(F f) {
    f();
  }

  // Threads for every parallel region of the engine; Eigen itself stays single-threaded.
  static void set_threads(int n) {
    check_thread_count(n < 0 ? 0 : n, "threads");  // a negative count means every core, as 0 does
    if (n < 1) n = omp_get_num_procs();
    omp_set_num_threads(n);
    Eigen::setNbThreads(1);
#if defined(LOOPSCALE_GEMM_OPENBLAS)
    openblas_set_num_threads(1);  // the engine splits the products over its threads itself
#endif
    thread_count() = n;
  }
  static int threads() { return thread_count() > 0 ? thread_count() : omp_get_max_threads(); }
  // Below threads(); 0 where parallel_for runs its tasks inline on the caller (one task, or called
  // inside another parallel region), so that a kernel's per-thread scratch (attention's dP) needs
  // one slot in a model whose passes run on one thread beside others' (a thread lane,
  // train/thread_lanes.hpp), whichever thread of the lanes' region that is.
  static int thread_id() { return tasks_inline() ? 0 : omp_get_thread_num(); }
  // Whether a parallel_for called here would run its tasks inline on the calling thread.
  static bool runs_inline() { return threads() == 1 || omp_in_parallel(); }

  template <class F>
  static void parallel_for(int64 n, F f) {
    if (n <= 0) return;
    if (n == 1 || omp_in_parallel()) {
      const InlineTasks mark;
      for (int64 i = 0; i < n; ++i) f(i);
      return;
    }
    thrust::for_each(thrust::omp::par, thrust::counting_iterator<int64>(0), thrust::counting_iterator<int64>(n), f);
  }

  // Sum of f(i) over [0, n) in double. Chunks of a fixed size are summed in parallel and the
  // partial sums added in chunk order, so the result does not depend on the schedule.
  template <class F>
  static double sum(int64 n, F f) {
    constexpr int64 chunk = 4096;
    const int64 chunks = (n + chunk - 1) / chunk;
    if (chunks <= 1) {
      double s = 0;
      for (int64 i = 0; i < n; ++i) s += static_cast<double>(f(i));
      return s;
    }
    std::vector<double>& part = scratch();
    if (static_cast<int64>(part.size()) < chunks) part.resize(static_cast<std::size_t>(chunks));  // grows once
    double* p = part.data();
    parallel_for(chunks, [=](int64 c) {
      double s = 0;
      const int64 end = std::min(n, (c + 1) * chunk);
      for (int64 i = c * chunk; i < end; ++i) s += static_cast<double>(f(i));
      p[c] = s;
    });
    double s = 0;
    for (int64 c = 0; c < chunks; ++c) s += p[c];
    return s;
  }

  // C (M x N, leading dimension ldc) = alpha op(A) op(B) + beta C, all row-major; op(X) = X^T when
  // the flag is set. beta is 0 (overwrite, C may hold garbage) or anything else (scale and add).
  template <class T>
  static void gemm(bool ta, bool tb, int64 M, int64 N, int64 K, T alpha, const T* A, int64 lda, const T* B,
                   int64 ldb, T beta, T* C, int64 ldc) {
    if (M <= 0 || N <= 0) return;
    const int nt = omp_in_parallel() ? 1 : threads();
    // Split the longer side of C into one panel per thread, when the panels stay large enough to
    // keep Eigen's kernels efficient.
    const bool split_rows = M >= N;
    const int64 side = split_rows ? M : N;
    const int parts = splits(M, N, K, nt) ? nt : 1;
    if (parts == 1) {
      gemm_serial(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      return;
    }
#pragma omp parallel num_threads(parts)
    {
      const int64 t = omp_get_thread_num();
      // Panels aligned to 8 elements keep the vector lanes of every panel full.
      const int64 step = ((side + parts - 1) / parts + 7) / 8 * 8;
      const int64 lo = std::min(side, t * step), hi = std::min(side, lo + step);
      if (hi > lo) {
        if (split_rows) {
          const T* a = ta ? A + lo : A + lo * lda;
          gemm_serial(ta, tb, hi - lo, N, K, alpha, a, lda, B, ldb, beta, C + lo * ldc, ldc);
        } else {
          const T* b = tb ? B + lo * ldb : B + lo;
          gemm_serial(ta, tb, M, hi - lo, K, alpha, A, lda, b, ldb, beta, C + lo, ldc);
        }
      }
    }
  }

  // count independent products C_i = alpha op(A_i) op(B_i) + beta C_i, X_i = X + i * strideX, each
  // as gemm computes it. A product gemm would split into panels over the threads runs as gemm
  // does, one after the other; smaller ones (attention's per-head products at short contexts) run
  // one whole product per task instead, and as gemm would run them unsplit, the results are
  // gemm's bit for bit in both cases (for a given thread count).
  template <class T>
  static void gemm_batched(bool ta, bool tb, int64 M, int64 N, int64 K, T alpha, const T* A, int64 lda, int64 strideA,
                           const T* B, int64 ldb, int64 strideB, T beta, T* C, int64 ldc, int64 strideC, int64 count) {
    if (count <= 0 || M <= 0 || N <= 0) return;
    const int nt = omp_in_parallel() ? 1 : threads();
    if (count == 1 || nt == 1 || splits(M, N, K, nt)) {
      for (int64 i = 0; i < count; ++i)
        gemm(ta, tb, M, N, K, alpha, A + i * strideA, lda, B + i * strideB, ldb, beta, C + i * strideC, ldc);
      return;
    }
#pragma omp parallel for num_threads(nt) schedule(static)
    for (int64 i = 0; i < count; ++i)
      gemm_serial(ta, tb, M, N, K, alpha, A + i * strideA, lda, B + i * strideB, ldb, beta, C + i * strideC, ldc);
  }

  template <class T>
  static void gemm_serial(bool ta, bool tb, int64 M, int64 N, int64 K, T alpha, const T* A, int64 lda,
                          const T* B, int64 ldb, T beta, T* C, int64 ldc) {
    using Mat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
    using CMap = Eigen::Map<const Mat, 0, Eigen::OuterStride<>>;
    using OMap = Eigen::Map<Mat, 0, Eigen::OuterStride<>>;
    OMap c(C, M, N, Eigen::OuterStride<>(ldc));
    if (K <= 0) {
      if (beta == T(0)) c.setZero();
      else c *= beta;
      return;
    }
#if defined(LOOPSCALE_GEMM_OPENBLAS)
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      static const bool one_thread = (openblas_set_num_threads(1), true);  // also when set_threads was never called
      (void)one_thread;
      const auto ot = [](bool t) { return t ? CblasTrans : CblasNoTrans; };
      const auto i = [](int64 v) { return static_cast<int>(v); };
      if constexpr (std::is_same_v<T, float>)
        cblas_sgemm(CblasRowMajor, ot(ta), ot(tb), i(M), i(N), i(K), alpha, A, i(lda), B, i(ldb), beta, C, i(ldc));
      else
        cblas_dgemm(CblasRowMajor, ot(ta), ot(tb), i(M), i(N), i(K), alpha, A, i(lda), B, i(ldb), beta, C, i(ldc));
      return;
    }
#elif defined(LOOPSCALE_GEMM_ONEDNN)
    // oneDNN has only an fp32 GEMM; doubles (the gradient checks) stay with Eigen. Its OpenMP
    // runtime gives a call as many threads as omp_get_max_threads() outside a parallel region and
    // one inside; outside, this thread's team size is set to 1 for the call, so every panel is one
    // single-threaded product whatever the caller's threads, as with the other libraries.
    if constexpr (std::is_same_v<T, float>) {
      host_detail::hold_onednn_isa();
      const bool outside = !omp_in_parallel();
      const int team = omp_get_max_threads();
      if (outside) omp_set_num_threads(1);
      dnnl_status_t st;
      {
        // No signal handler may run on this thread while oneDNN computes. Its JIT sgemm kernels
        // (jit_avx512_common_gemm_f32, jit_avx_gemm_f32) point rsp into a heap workspace while
        // they run, so Linux writes the frame of a signal caught then (KiBs with the AVX-512
        // state) into the heap, and glibc aborts later ("corrupted size vs. prev_size", "free():
        // invalid pointer") or malloc hangs. oneDNN issue #4845, fixed after 3.11.1 (PR #4855);
        // Debian's 2.6 has it. That is how a `loopscale train` stopped by SIGUSR1 or SIGTERM
        // (util/interrupt.hpp) sometimes died instead of writing its checkpoint. The cost: two
        // sigprocmask calls per product, about 0.5 us.
        const host_detail::SignalsHeld held_off;
        if (host_detail::swap_transposed_a(ta, tb, K, lda, ldb))
          st = host_detail::transposed_a_by_swap(M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
        else
          st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
      }
      if (outside) omp_set_num_threads(team);
      if (st != dnnl_success)
        throw std::runtime_error(fmt::format("dnnl_sgemm failed (status {}) on M {}, N {}, K {}", static_cast<int>(st), M, N, K));
      return;
    }
#endif
    const CMap a(A, ta ? K : M, ta ? M : K, Eigen::OuterStride<>(lda));
    const CMap b(B, tb ? N : K, tb ? K : N, Eigen::OuterStride<>(ldb));
    if (beta == T(0)) c.setZero();
    else if (beta != T(1)) c *= beta;
    // Four spellings so Eigen sees plain (transposed) Maps and picks its GEMM kernel directly.
    if (!ta && !tb) c.noalias() += alpha * a * b;
    else if (ta && !tb) c.noalias() += alpha * a.transpose() * b;
    else if (!ta && tb) c.noalias() += alpha * a * b.transpose();
    else c.noalias() += alpha * a.transpose() * b.transpose();
  }

 private:
  // Set on a thread while it runs a parallel_for's tasks inline (thread_id); restored after, so
  // nested calls and exceptions leave it as it was.
  static bool& tasks_inline() {
    thread_local bool on = false;
    return on;
  }
  struct InlineTasks {
    bool was = tasks_inline();
    InlineTasks() { tasks_inline() = true; }
    ~InlineTasks() { tasks_inline() = was; }
    InlineTasks(const InlineTasks&) = delete;
    InlineTasks& operator=(const InlineTasks&) = delete;
  };

  // Whether gemm splits an M x N x K product into one panel per thread (of nt).
  static bool splits(int64 M, int64 N, int64 K, int nt) {
    const int64 side = std::max(M, N), work = M * N * std::max<int64>(K, 1);
    return nt > 1 && side >= 16 * nt && work >= (int64{1} << 18);
  }
  static int& thread_count() {
    static int n = 0;
    return n;
  }
  static std::vector<double>& scratch() {
    thread_local std::vector<double> s;  // one per thread: the trainer's lanes call sum() side by side
    return s;
  }
};

// The vector unit the peak microkernel uses: the widest the build targets. The build decides, not
// the CPU: a binary compiled without AVX-512 cannot use it, and its GEMMs cannot either, so the peak
// it divides by is the peak of the instructions it has. `peak_isa()` is recorded with every MFU.
struct PeakIsa {
  const char* name;  // "avx512f", "avx2+fma", "portable"
  int lanes;         // fp32 lanes per vector
  int chains;        // independent FMA chains per thread
};

// 12 chains per thread: an FMA's latency is 4 cycles and a core issues up to 2 per cycle (Skylake-X,
// Ice Lake, Sapphire Rapids, Zen 3 and 4), so 8 chains keep both ports busy; 12 leave margin for
// cores with a 5-cycle FMA or a third port, and still fit the register file beside the two
// constants (16 xmm registers with SSE2, 16 ymm with AVX2, 32 zmm with AVX-512).
inline constexpr int peak_chains = 12;

// The three units, widest first; `lanes` orders them.
inline constexpr PeakIsa isa_avx512{"avx512f", 16, peak_chains};
inline constexpr PeakIsa isa_avx2{"avx2+fma", 8, peak_chains};
inline constexpr PeakIsa isa_portable{"portable", 4, peak_chains};  // one SSE2 register: x86-64's baseline

inline constexpr PeakIsa peak_isa() {
#if defined(__AVX512F__)
  return isa_avx512;
#elif defined(__FMA__) && defined(__AVX__)
  return isa_avx2;
#else
  return isa_portable;
#endif
}

// The widest of peak_isa()'s vector units this CPU has, whatever the build targets.
inline PeakIsa cpu_widest_isa() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  if (__builtin_cpu_supports("avx512f")) return isa_avx512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return isa_avx2;
#endif
  return isa_portable;
}

// Empty when the build uses the widest vector unit of the CPU it runs on; otherwise one sentence
// for the user. The library does not impose -march on its users (the CMake target carries none), so a
// trainer compiled without it runs the SSE2 baseline: Eigen's packets, the peak microkernel and,
// under the hold above, oneDNN's GEMMs (a d 256 model trained 2.1 to 2.6 times slower on an AVX2 Zen 3
// than the same code with -march=native, docs/using.md), and its MFU is against that baseline's peak.
inline std::string build_isa_advice() {
  const PeakIsa cpu = cpu_widest_isa();
  if (cpu.lanes <= peak_isa().lanes) return {};
  return std::string("this program was compiled for ") + peak_isa().name + " and this CPU has " + cpu.name +
         ": the engine runs slower than it could and its MFU is against the narrower unit's peak; compile with -march=native "
         "(CMake: link loopscale::native)";
}

namespace detail {

// CPU time of the calling thread so far, in seconds.
inline double thread_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

// `peak_chains` chains of a = a * mul + add on vectors V, with fma(a, mul, add) the vector FMA.
template <class V, class Fma>
inline void fma_loop(V (&a)[peak_chains], V mul, V add, std::int64_t iters, Fma fma) {
  for (std::int64_t it = 0; it < iters; ++it) {
#if defined(__CUDACC__)
#pragma unroll 12
#else
#pragma GCC unroll 12
#endif
    for (int c = 0; c < peak_chains; ++c) a[c] = fma(a[c], mul, add);
  }
}

}  // namespace detail

// The peak fp32 FLOP/s microkernel: every thread runs `peak_chains` independent chains of fused
// multiply-adds on vectors of the widest unit the build targets (peak_isa()), held in registers.
// Explicit FMA intrinsics where the target has them: in ISO C++ mode GCC does not contract
// a * b + c into an FMA. Returns the FLOPs executed (2 per lane per FMA); where slowest_cpu_s is
// given, it receives the CPU time of the thread that used the most (its own compute time, without
// the time it waited while descheduled).
inline double fma_chains(int threads, int64 iters, double* slowest_cpu_s = nullptr) {
  constexpr PeakIsa isa = peak_isa();
  float sink = 0;
  double slowest = 0;
#pragma omp parallel num_threads(threads) reduction(+ : sink) reduction(max : slowest)
  {
    const double cpu0 = detail::thread_cpu_seconds();
    const float t = 1e-7f * static_cast<float>(omp_get_thread_num());
    alignas(64) float out[isa.lanes];
#if defined(__AVX512F__)
    __m512 a[peak_chains];
    for (int c = 0; c < peak_chains; ++c) a[c] = _mm512_set1_ps(static_cast<float>(c));
    detail::fma_loop(a, _mm512_set1_ps(0.999999f + t), _mm512_set1_ps(1e-6f), iters,
                     [](__m512 x, __m512 m, __m512 d) { return _mm512_fmadd_ps(x, m, d); });
    __m512 s = a[0];
    for (int c = 1; c < peak_chains; ++c) s = _mm512_add_ps(s, a[c]);
    _mm512_store_ps(out, s);
#elif defined(__FMA__) && defined(__AVX__)
    __m256 a[peak_chains];
    for (int c = 0; c < peak_chains; ++c) a[c] = _mm256_set1_ps(static_cast<float>(c));
    detail::fma_loop(a, _mm256_set1_ps(0.999999f + t), _mm256_set1_ps(1e-6f), iters,
                     [](__m256 x, __m256 m, __m256 d) { return _mm256_fmadd_ps(x, m, d); });
    __m256 s = a[0];
    for (int c = 1; c < peak_chains; ++c) s = _mm256_add_ps(s, a[c]);
    _mm256_store_ps(out, s);
#else
    // Portable fallback: GCC vector extensions of one SSE2 register (a multiply and an add where
    // there is no FMA). Two registers a chain (8 floats) would need 24 for the 12 chains, more
    // than the 16 there are: the chains spilled to memory and the peak read 17.9 GFLOP/s a thread
    // where oneDNN's SSE4.1 GEMM ran 27.0 (an MFU above 1; Intel Xeon family 6 model 207, 4 Dec
    // 2026); one register a chain measured 31.2 on the same core. A 32-byte vector would also
    // pass through memory at every call without AVX (GCC's -Wpsabi).
    typedef float v4 __attribute__((vector_size(16)));
    v4 a[peak_chains];
    for (int c = 0; c < peak_chains; ++c) a[c] = v4{} + static_cast<float>(c);
    detail::fma_loop(a, v4{} + (0.999999f + t), v4{} + 1e-6f, iters, [](v4 x, v4 m, v4 d) { return x * m + d; });
    v4 s = a[0];
    for (int c = 1; c < peak_chains; ++c) s += a[c];
    for (int i = 0; i < 4; ++i) out[i] = s[i];
#endif
    for (float v : out) sink += v;
    slowest = detail::thread_cpu_seconds() - cpu0;
  }
  volatile float keep = sink;  // the result is used, so the loop cannot be removed
  (void)keep;
  if (slowest_cpu_s) *slowest_cpu_s = slowest;
  return 2.0 * isa.chains * isa.lanes * static_cast<double>(iters) * threads;
}

// Measured peak fp32 FLOP/s of this machine over `threads` threads (0: all), timed over about
// `seconds`: the iteration count grows until one run lasts a third of that, then the best of three.
// A run's time is the CPU time of its slowest thread, not the wall clock: on a busy 2-core machine
// one thread of the two is often descheduled for part of a run, and the wall clock then gave half
// the peak or less, so MFU read above 1 (Zen 4, AVX-512, 2 Dec 2026: a 2-thread peak of 117
// GFLOP/s in one run of bench_train against 228 in the next; with `yes` running beside it, 67-107
// by the wall clock and 193-231 by CPU time, 223-234 by either when idle). The CPU-time peak is
// what the cores do while they run, whatever else runs.
inline double measure_peak_flops(int threads = 0, double seconds = 0.25) {
  if (threads < 1) threads = omp_get_num_procs();
  const auto run = [threads](int64 iters) {
    double cpu = 0;
    const double flops = fma_chains(threads, iters, &cpu);
    return std::pair{flops, cpu};
  };
  int64 iters = 1 << 14;
  while (run(iters).second < seconds / 3 && iters < (int64{1} << 40)) iters *= 2;
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto [f, s] = run(iters);
    best = std::max(best, f / s);
  }
  return best;
}

}  // namespace loopscale::train
