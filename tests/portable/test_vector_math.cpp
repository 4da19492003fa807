// The fitter's vector exp and log (law/simd_math.hpp) built for any x86-64: two doubles, one SSE2
// register, the same results as the AVX builds' (tests/law/test_laws.cpp checks those).
#include <catch2/catch.hpp>

#include <cmath>

#include "loopscale/law/simd_math.hpp"

namespace simd = loopscale::law::simd;

TEST_CASE("the vector exp and log built for any x86-64 agree with std::exp and std::log", "[portable][simd]") {
  STATIC_REQUIRE(simd::lanes == 2);
  for (const double x : {-700.0, -3.5, -1e-3, 0.0, 0.5, 1.0, 42.0, 700.0}) {
    const simd::vd e = simd::exp(simd::splat(x));
    for (int i = 0; i < simd::lanes; ++i) CHECK(e[i] == Approx(std::exp(x)).epsilon(1e-15));
  }
  for (const double y : {1e-300, 1e-5, 0.25, 1.0, 3.0, 1e10, 1e300}) {
    const simd::vd l = simd::log(simd::splat(y));
    for (int i = 0; i < simd::lanes; ++i) CHECK(l[i] == Approx(std::log(y)).epsilon(1e-15).margin(1e-300));
  }
  CHECK(simd::exp(simd::splat(-800))[0] == 0);
  CHECK(std::isinf(simd::exp(simd::splat(800))[1]));
}
