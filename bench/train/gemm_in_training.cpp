// The GEMMs of a real training run, by shape: a shared library that `loopscale train` loads with
// LD_PRELOAD (bench/train/gemm_in_training.sh). It stands in for oneDNN's dnnl_sgemm, times each call
// around the real one (found with dlsym(RTLD_NEXT)) and, when the process exits, prints to stderr
// one line per (transposes, M, N, K): calls, seconds, share of all GEMM time and GFLOP/s. With the
// run's own wall time this says how much of a step the GEMMs take and how near the peak each shape
// runs, which the standalone GEMM benchmarks (bench_gemm_libraries) cannot: there the operands sit
// in cache between repetitions, here they come from the step's activations (issue 18).
// Only a build whose host GEMM is oneDNN calls dnnl_sgemm (LOOPSCALE_GEMM, CMakeLists.txt).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

namespace {

using Sgemm = int (*)(char, char, std::int64_t, std::int64_t, std::int64_t, float, const float*, std::int64_t, const float*,
                      std::int64_t, float, float*, std::int64_t);
using Shape = std::tuple<char, char, std::int64_t, std::int64_t, std::int64_t>;  // transa, transb, M, N, K

struct Tally {
  double seconds = 0;
  std::int64_t calls = 0;
};

class Table {
 public:
  void add(const Shape& s, double seconds) {
    const std::lock_guard<std::mutex> hold(mutex_);
    Tally& t = tallies_[s];
    t.seconds += seconds;
    ++t.calls;
  }
  // At exit: the shapes by time spent, largest first.
  ~Table() {
    std::vector<std::pair<Shape, Tally>> rows(tallies_.begin(), tallies_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
    double total = 0;
    std::int64_t calls = 0;
    for (const auto& [s, t] : rows) total += t.seconds, calls += t.calls;
    std::fprintf(stderr, "gemm_in_training: %lld dnnl_sgemm calls, %.3f s\n", static_cast<long long>(calls), total);
    std::fprintf(stderr, "| op | M | N | K | calls | seconds | share | GFLOP/s |\n|---|---|---|---|---|---|---|---|\n");
    for (const auto& [s, t] : rows) {
      const auto [ta, tb, M, N, K] = s;
      const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K) * static_cast<double>(t.calls);
      std::fprintf(stderr, "| %c%c | %lld | %lld | %lld | %lld | %.3f | %.1f%% | %.1f |\n", ta, tb, static_cast<long long>(M),
                   static_cast<long long>(N), static_cast<long long>(K), static_cast<long long>(t.calls), t.seconds,
                   total > 0 ? 100.0 * t.seconds / total : 0.0, t.seconds > 0 ? flops / t.seconds / 1e9 : 0.0);
    }
  }

 private:
  std::mutex mutex_;
  std::map<Shape, Tally> tallies_;
};

Table table;

}  // namespace

extern "C" int dnnl_sgemm(char ta, char tb, std::int64_t M, std::int64_t N, std::int64_t K, float alpha, const float* A, std::int64_t lda,
                          const float* B, std::int64_t ldb, float beta, float* C, std::int64_t ldc) {
  static const Sgemm real = [] {
    auto* f = reinterpret_cast<Sgemm>(dlsym(RTLD_NEXT, "dnnl_sgemm"));
    if (f == nullptr) {
      std::fprintf(stderr, "gemm_in_training: no dnnl_sgemm after this library (is the program linked with oneDNN?)\n");
      std::exit(2);
    }
    return f;
  }();
  const auto t0 = std::chrono::steady_clock::now();
  const int status = real(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  table.add({ta, tb, M, N, K}, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return status;
}
