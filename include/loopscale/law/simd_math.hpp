// exp and log on a few doubles at once (GCC/Clang vector extensions: one register, of 8 doubles
// where the build targets AVX-512, 4 with AVX, 2 with x86-64's baseline SSE2), for the fitter's
// fused objective (chinchilla.hpp). Never wider than a register: without AVX a 32-byte vector
// passed by value has another ABI than in an AVX build, and GCC warned (-Wpsabi) at every call.
//
// Why not Eigen's: its double exp and log are rational approximations with a division each, and
// measured 4.6 and 6.8 ns a value here; these are a polynomial (exp) and fdlibm's log with one
// division, inlined into the loop that sums the Huber loss and its gradient, so no value makes a
// round trip through memory. Accuracy: exp within 1 ulp for arguments in [-708, 709] (0 below,
// +inf above); log within 1 ulp for positive normal arguments, the only ones the laws pass
// (a sum that includes E = exp(log E) > 0). tests/law/test_laws.cpp checks both against std::.
#pragma once

#include <cstdint>
#include <bit>
#include <cstring>

namespace loopscale::law::simd {

#if defined(__AVX512F__)
#define LOOPSCALE_SIMD_MATH_LANES 8
#elif defined(__AVX__) || !(defined(__x86_64__) || defined(__i386__))
#define LOOPSCALE_SIMD_MATH_LANES 4
#else
#define LOOPSCALE_SIMD_MATH_LANES 2
#endif
inline constexpr int lanes = LOOPSCALE_SIMD_MATH_LANES;
inline constexpr int bytes = lanes * 8;
typedef double vd __attribute__((vector_size(bytes)));
typedef std::int64_t vi __attribute__((vector_size(bytes)));

inline vd splat(double x) { return vd{} + x; }
inline vi splat_bits(std::int64_t x) { return vi{} + x; }
inline vd load(const double* p) {
  vd v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline vd as_double(vi v) { return std::bit_cast<vd>(v); }
inline vi as_int(vd v) { return std::bit_cast<vi>(v); }
typedef std::uint64_t vu __attribute__((vector_size(bytes)));
inline vu as_uint(vd v) { return std::bit_cast<vu>(v); }
inline vi as_int(vu v) { return std::bit_cast<vi>(v); }
inline vd as_double(vu v) { return std::bit_cast<vd>(v); }
inline vd vmin(vd a, vd b) { return a < b ? a : b; }
inline vd vmax(vd a, vd b) { return a > b ? a : b; }
inline vd vabs(vd a) { return as_double(as_int(a) & splat_bits(0x7FFFFFFFFFFFFFFF)); }
// A fixed order (pairwise), so a sum is the same bits on every run of a build.
inline double hsum(vd v) {
#if LOOPSCALE_SIMD_MATH_LANES == 8
  return ((v[0] + v[1]) + (v[2] + v[3])) + ((v[4] + v[5]) + (v[6] + v[7]));
#elif LOOPSCALE_SIMD_MATH_LANES == 4
  return (v[0] + v[1]) + (v[2] + v[3]);
#else
  return v[0] + v[1];
#endif
}

// Integral k in [-2^51, 2^51] between double and int64 through the mantissa of 1.5 * 2^52
// (AVX2 has no packed int64 <-> double conversion; the same code serves AVX-512).
inline constexpr double shifter = 0x1.8p52;
inline vi to_int(vd k) { return as_int(k + shifter) - as_int(splat(shifter)); }
inline vd to_double(vi k) { return as_double(k + as_int(splat(shifter))) - shifter; }

// exp(x) for x in [-708.39, 709.08], unchecked: x = k ln2 + r with |r| <= ln2 / 2 (k rounded to
// nearest by the shifter; ln2 split in a high part exact under multiplication by k and the rest),
// exp(r) by its Taylor polynomial to r^13 (truncation error below 1e-17 relative), times 2^k
// built in the exponent field. The fused pass bounds its arguments once per evaluation instead
// of clamping every value (chinchilla.hpp).
inline vd exp_in_range(vd x) {
  const vd ks = x * 1.4426950408889634074 + shifter;
  const vd k = ks - shifter;
  const vd r = (x - k * 6.93147180369123816490e-01) - k * 1.90821492927058770002e-10;
  vd p = splat(1.0 / 6227020800.0);  // 1/13!
  p = p * r + 1.0 / 479001600.0;
  p = p * r + 1.0 / 39916800.0;
  p = p * r + 1.0 / 3628800.0;
  p = p * r + 1.0 / 362880.0;
  p = p * r + 1.0 / 40320.0;
  p = p * r + 1.0 / 5040.0;
  p = p * r + 1.0 / 720.0;
  p = p * r + 1.0 / 120.0;
  p = p * r + 1.0 / 24.0;
  p = p * r + 1.0 / 6.0;
  p = p * r + 0.5;
  p = p * r + 1.0;
  p = p * r + 1.0;
  return p * as_double((as_int(ks) - as_int(splat(shifter)) + 1023) << 52);
}

// exp(x) for any x: 0 below -708.39 (the subnormal range is dropped), +inf above 709.08, NaN
// stays NaN.
inline vd exp(vd x) {
  const vd lo = splat(-708.39), hi = splat(709.08);
  vd y = exp_in_range(vmin(vmax(x, lo), hi));
  y = x < lo ? splat(0.0) : y;
  y = x > hi ? splat(__builtin_huge_val()) : y;
  return x != x ? x : y;
}

// log(x) for positive normal x: fdlibm's e_log.c. x = 2^k m with m in [sqrt(2)/2, sqrt(2)) (one
// integer add moves that interval's lower end to the start of an exponent, so k is a plain
// shift: no compare and select), f = m - 1, s = f / (2 + f), log(1 + f) = f - s (f - R(s^2))
// with fdlibm's minimax R; within 1 ulp. Zero, negative, subnormal, infinite or NaN arguments
// give meaningless values: the fused pass proves its sums positive and finite beforehand.
inline vd log(vd x) {
  const vu bits = as_uint(x);
  const vu kb = (bits + 0x00095F619980C433ull) >> 52;  // k + 1023 (unsigned: a logical shift)
  const vu mb = bits - ((kb - 1023) << 52);
  const vd k = to_double(as_int(kb) - splat_bits(1023));
  const vd f = as_double(mb) - 1.0;
  const vd hfsq = 0.5 * f * f;
  const vd s = f / (2.0 + f);
  const vd z = s * s, w = z * z;
  const vd t1 = w * (3.999999999940941908e-01 + w * (2.222219843214978396e-01 + w * 1.531383769920937332e-01));
  const vd t2 = z * (6.666666666666735130e-01 +
                     w * (2.857142874366239149e-01 + w * (1.818357216161805012e-01 + w * 1.479819860511658591e-01)));
  const vd R = t2 + t1;
  return k * 6.93147180369123816490e-01 - ((hfsq - (s * (hfsq + R) + k * 1.90821492927058770002e-10)) - f);
}

}  // namespace loopscale::law::simd
