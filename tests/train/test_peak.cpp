// The peak the MFU divides by is a peak: no GEMM of the engine runs faster than it in the same
// process, on whatever vector unit the build targets (AVX-512 machines once measured an MFU of 1.5
// against an 8-wide AVX2 peak).
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <vector>

#include "loopscale/train/backend/host.hpp"

using namespace loopscale::train;

TEST_CASE("the peak kernel uses the widest vector unit the build targets", "[train][peak]") {
  constexpr PeakIsa isa = peak_isa();
#if defined(__AVX512F__)
  CHECK(std::strcmp(isa.name, "avx512f") == 0);
  CHECK(isa.lanes == 16);
#elif defined(__FMA__) && defined(__AVX__)
  CHECK(std::strcmp(isa.name, "avx2+fma") == 0);
  CHECK(isa.lanes == 8);
#else
  CHECK(std::strcmp(isa.name, "portable") == 0);
#endif
  CHECK(isa.chains >= 8);  // 4-cycle latency x 2 FMA ports
  // The FLOPs it reports are 2 per lane per chain per iteration per thread.
  CHECK(fma_chains(1, 1000) == 2.0 * isa.chains * isa.lanes * 1000);
}

TEST_CASE("gemm_kernels names GEMM kernels of the build's vector unit and the CPU's maker", "[train][peak]") {
  // oneDNN picks its kernels from the CPU; held to the build's vector unit (host.hpp,
  // hold_onednn_isa), an AVX2 build on an AVX-512 core must still report AVX2 kernels.
  const std::string k = HostBackend::gemm_kernels();
  INFO(k);
  const auto comma = k.rfind(", ");
  REQUIRE(comma != std::string::npos);
  const std::string kernels = k.substr(0, comma), vendor = k.substr(comma + 2);
  CHECK((vendor == "intel" || vendor == "amd" || vendor == "other"));
  CHECK_FALSE(kernels.empty());
#if defined(LOOPSCALE_GEMM_ONEDNN)
#if defined(__AVX512F__)
  CHECK(kernels.rfind("avx512", 0) == 0);
#elif defined(__FMA__) && defined(__AVX2__)
  CHECK(kernels == "avx2");
#else
  CHECK(kernels == "sse41");
#endif
#elif !defined(LOOPSCALE_GEMM_OPENBLAS)
  // Eigen lists the instruction sets it was compiled for.
#if defined(__AVX512F__)
  CHECK(kernels.find("AVX512") != std::string::npos);
#elif defined(__AVX2__)
  CHECK(kernels.find("AVX2") != std::string::npos);
#endif
#endif
}

TEST_CASE("the measured peak is at least the best GEMM rate measured in the same process", "[train][peak]") {
  // One thread each, interleaved and best of several, so that a neighbour on the other core
  // (ctest runs two tests at once) slows both alike rather than one of them.
  const int saved = HostBackend::threads();
  HostBackend::set_threads(1);
  double peak = 0, gemm = 0;
  for (const int n : {256, 512}) {
    std::vector<float> a(static_cast<std::size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
    for (int rep = 0; rep < 4; ++rep) {
      peak = std::max(peak, measure_peak_flops(1, 0.1));
      const auto t0 = std::chrono::steady_clock::now();
      HostBackend::gemm(false, rep % 2 == 1, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, c.data(), n);
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      gemm = std::max(gemm, 2.0 * n * n * n / s);
    }
    CHECK(c[0] == Approx(0.125 * n));
  }
  HostBackend::set_threads(saved);
  INFO(peak_isa().name << " peak " << peak / 1e9 << " GFLOP/s, best GEMM " << gemm / 1e9 << " GFLOP/s");
  CHECK(peak >= gemm);
  CHECK(gemm > 0.2 * peak);  // and the GEMM is a real one, not a skipped call
}
