// The engine's GEMMs through three libraries, on the shapes of a training step, at 1 and 2 threads:
// Eigen through HostBackend::gemm (what the engine uses: one row or column panel per thread, each a
// single-threaded Eigen product), OpenBLAS's cblas_sgemm (its own threads) and oneDNN's dnnl_sgemm
// (OpenMP threads). Prints GFLOP/s per library, shape and thread count, each against the FMA peak
// measured in the same process, and the largest difference from Eigen's result (a check that the
// call computes the same product). Issue 18 asks which library the engine's GEMM should use;
// docs/benchmarks.md has the figures. Built only where CMake finds OpenBLAS and oneDNN
// (bench/train/CMakeLists.txt).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <cblas.h>
#include <dnnl.h>
#include <omp.h>

#include "loopscale/train/backend/host.hpp"

namespace {

using loopscale::train::HostBackend;
using int64 = std::int64_t;

extern "C" void openblas_set_num_threads(int);
// The kernels OpenBLAS chose for this CPU: a release that does not know the CPU model falls back
// to its generic ones (Debian's 0.3.21 runs `Prescott` kernels on an Intel Xeon of family 6 model
// 207, at a fifth of the speed; OPENBLAS_CORETYPE overrides the choice, docs/benchmarks.md).
extern "C" char* openblas_get_corename(void);

struct Shape {
  const char* what;
  int64 M, N, K;
  bool ta, tb;
};

// Best wall time of one call over repetitions filling at least `seconds`.
double best_seconds(const std::function<void()>& f, double seconds = 0.4) {
  using clock = std::chrono::steady_clock;
  f();  // warm up: pages, thread pools
  double best = 1e30, total = 0;
  for (int rep = 0; rep < 3 || total < seconds; ++rep) {
    const auto t0 = clock::now();
    f();
    const double s = std::chrono::duration<double>(clock::now() - t0).count();
    best = std::min(best, s);
    total += s;
    if (rep > 200) break;
  }
  return best;
}

}  // namespace

int main() {
  // The acceptance model's step (d 256, 4096 tokens, MLP 4x) and the tiny sweep model's (d 32,
  // 512 tokens): forward products x W^T, and the weight gradient dy^T x.
  const std::vector<Shape> shapes = {
      {"d256 qkv  x W^T", 4096, 768, 256, false, true},  {"d256 up   x W^T", 4096, 1024, 256, false, true},
      {"d256 down x W^T", 4096, 256, 1024, false, true}, {"d256 dW  dy^T x", 1024, 256, 4096, true, false},
      {"d256 dx  dy W", 4096, 256, 1024, false, false},  {"d32 qkv   x W^T", 512, 96, 32, false, true},
      {"d32 dW   dy^T x", 128, 32, 512, true, false},
  };
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::printf("machine: %s; peak measured in this process; OpenBLAS kernels: %s\n", loopscale::train::peak_isa().name,
              openblas_get_corename());
  for (const int threads : {1, 2}) {
    HostBackend::set_threads(threads);
    openblas_set_num_threads(threads);
    omp_set_num_threads(threads);
    const double peak = loopscale::train::measure_peak_flops(threads);
    std::printf("\n%d thread(s), peak %.1f GFLOP/s\n", threads, peak / 1e9);
    std::printf("%-18s %8s %8s %8s   %6s %6s %6s   %s\n", "shape", "Eigen", "OpenBLAS", "oneDNN", "Eigen", "OBLAS", "oneDNN",
                "max |diff| vs Eigen (OpenBLAS, oneDNN)");
    for (const Shape& s : shapes) {
      const int64 lda = s.ta ? s.M : s.K, ldb = s.tb ? s.K : s.N;
      std::vector<float> A(static_cast<std::size_t>(s.M * s.K)), B(static_cast<std::size_t>(s.K * s.N));
      std::vector<float> C0(static_cast<std::size_t>(s.M * s.N)), C1(C0.size()), C2(C0.size());
      for (float& x : A) x = nd(rng);
      for (float& x : B) x = nd(rng);
      const double flops = 2.0 * static_cast<double>(s.M * s.N * s.K);
      const double te = best_seconds([&] {
        HostBackend::gemm(s.ta, s.tb, s.M, s.N, s.K, 1.f, A.data(), lda, B.data(), ldb, 0.f, C0.data(), s.N);
      });
      const double to = best_seconds([&] {
        cblas_sgemm(CblasRowMajor, s.ta ? CblasTrans : CblasNoTrans, s.tb ? CblasTrans : CblasNoTrans, static_cast<int>(s.M),
                    static_cast<int>(s.N), static_cast<int>(s.K), 1.f, A.data(), static_cast<int>(lda), B.data(), static_cast<int>(ldb),
                    0.f, C1.data(), static_cast<int>(s.N));
      });
      const double td = best_seconds([&] {
        dnnl_sgemm(s.ta ? 'T' : 'N', s.tb ? 'T' : 'N', s.M, s.N, s.K, 1.f, A.data(), lda, B.data(), ldb, 0.f, C2.data(), s.N);
      });
      double d1 = 0, d2 = 0;
      for (std::size_t i = 0; i < C0.size(); ++i) {
        d1 = std::max(d1, static_cast<double>(std::fabs(C1[i] - C0[i])));
        d2 = std::max(d2, static_cast<double>(std::fabs(C2[i] - C0[i])));
      }
      std::printf("%-18s %8.1f %8.1f %8.1f   %5.0f%% %5.0f%% %5.0f%%   %.1e, %.1e\n", s.what, flops / te / 1e9, flops / to / 1e9,
                  flops / td / 1e9, 100 * flops / te / peak, 100 * flops / to / peak, 100 * flops / td / peak, d1, d2);
    }
  }
  return 0;
}
