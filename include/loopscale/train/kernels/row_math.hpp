// Reductions and exponentials along one contiguous row, as the element-wise kernels need them:
// RMSNorm's sums of squares and dot products, the softmaxes' max, exp and sum.
//
// On the host they run on Eigen's SIMD packets (Eigen::internal: ploadu, padd, pmax, pexp, predux)
// of the build's vector width. The plain loop `s += x[j] * x[j]` is one chain of dependent
// additions, which GCC without -ffast-math keeps in order: it loads 16 floats and adds them one at
// a time, about 4 cycles a value; std::exp is a scalar libm call. In the acceptance model's step
// (perf, Intel Xeon with AVX-512, 3 Dec 2026) those in-order sums and the scalar softmax were the
// largest of the non-GEMM kernels.
// The loops here start at the row's first value whatever its address and end with one packet
// padded in a local buffer: Eigen's own expressions (Map(...).sum(), .exp()) peel scalars until the
// address is aligned, so their results would change with where a row sits in memory, and the
// guard backend (padded buffers) must give the host's bits.
// On a device (nvcc's device pass) they stay plain loops: a row there belongs to one thread.
//
// The order of additions is lane by lane over the row, then Eigen's fixed tree over the lanes, so
// the last bits change with the vector width a build targets (as the GEMMs' already do); for one
// build they are fixed, and the task and device forms of the kernels (spans.hpp), which both call
// these, agree bit for bit on the CPU. NaN propagates: a NaN in a row gives a NaN max and sum.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include <Eigen/Core>

#include "loopscale/train/backend/portable.hpp"

namespace loopscale::train::kernels {

namespace row_detail {
#if !defined(__CUDA_ARCH__)
namespace ei = Eigen::internal;
template <class T>
using Packet = typename ei::packet_traits<T>::type;
template <class T>
inline constexpr std::int64_t width = ei::unpacket_traits<Packet<T>>::size;

// The packet of x[0..m) (m < width), the lanes after m set to `fill`.
template <class T>
inline Packet<T> load_tail(const T* x, std::int64_t m, T fill) {
  alignas(64) T buf[width<T>];
  for (std::int64_t l = 0; l < width<T>; ++l) buf[l] = l < m ? x[l] : fill;
  return ei::ploadu<Packet<T>>(buf);
}

// The sum over j < n of the terms f(packets of the inputs at j), lane by lane, then across the
// lanes; f must map zeros to zero (the padding of the last packet).
template <class T, class F, class... In>
inline T packet_sum(std::int64_t n, F f, const In*... in) {
  using P = Packet<T>;
  constexpr std::int64_t W = width<T>;
  P acc = ei::pset1<P>(T(0));
  std::int64_t j = 0;
  for (; j + W <= n; j += W) acc = ei::padd(acc, f(ei::ploadu<P>(in + j)...));
  if (j < n) acc = ei::padd(acc, f(load_tail(in + j, n - j, T(0))...));
  return ei::predux(acc);
}
#endif
}  // namespace row_detail

// sum of x[j]^2 over j < n.
template <class T>
LOOPSCALE_HD inline T row_sum_squares(const T* x, std::int64_t n) {
#if defined(__CUDA_ARCH__)
  T s = 0;
  for (std::int64_t j = 0; j < n; ++j) s += x[j] * x[j];
  return s;
#else
  return row_detail::packet_sum<T>(n, [](auto a) { return row_detail::ei::pmul(a, a); }, x);
#endif
}

// sum of a[j] b[j] over j < n.
template <class T>
LOOPSCALE_HD inline T row_dot(const T* a, const T* b, std::int64_t n) {
#if defined(__CUDA_ARCH__)
  T s = 0;
  for (std::int64_t j = 0; j < n; ++j) s += a[j] * b[j];
  return s;
#else
  return row_detail::packet_sum<T>(n, [](auto u, auto v) { return row_detail::ei::pmul(u, v); }, a, b);
#endif
}

// sum of a[j] b[j] c[j] over j < n, each product formed as (a b) c.
template <class T>
LOOPSCALE_HD inline T row_dot3(const T* a, const T* b, const T* c, std::int64_t n) {
#if defined(__CUDA_ARCH__)
  T s = 0;
  for (std::int64_t j = 0; j < n; ++j) s += a[j] * b[j] * c[j];
  return s;
#else
  namespace ei = row_detail::ei;
  return row_detail::packet_sum<T>(n, [](auto u, auto v, auto w) { return ei::pmul(ei::pmul(u, v), w); }, a, b, c);
#endif
}

// The largest of x[0..n), n >= 1; NaN if any is NaN.
template <class T>
LOOPSCALE_HD inline T row_max(const T* x, std::int64_t n) {
#if defined(__CUDA_ARCH__)
  T m = -std::numeric_limits<T>::infinity();
  for (std::int64_t j = 0; j < n; ++j) m = (x[j] > m || x[j] != x[j]) ? x[j] : m;
  return m;
#else
  namespace ei = row_detail::ei;
  using P = row_detail::Packet<T>;
  constexpr std::int64_t W = row_detail::width<T>;
  const T lowest = -std::numeric_limits<T>::infinity();
  P acc = ei::pset1<P>(lowest);
  std::int64_t j = 0;
  for (; j + W <= n; j += W) acc = ei::pmax<Eigen::PropagateNaN>(acc, ei::ploadu<P>(x + j));
  if (j < n) acc = ei::pmax<Eigen::PropagateNaN>(acc, row_detail::load_tail(x + j, n - j, lowest));
  return ei::predux_max<Eigen::PropagateNaN>(acc);
#endif
}

// x[j] = exp(x[j] - shift) for j < n, in place; returns their sum.
template <class T>
LOOPSCALE_HD inline T row_exp_shifted(T* x, std::int64_t n, T shift) {
#if defined(__CUDA_ARCH__)
  T s = 0;
  for (std::int64_t j = 0; j < n; ++j) {
    x[j] = std::exp(x[j] - shift);
    s += x[j];
  }
  return s;
#else
  namespace ei = row_detail::ei;
  using P = row_detail::Packet<T>;
  constexpr std::int64_t W = row_detail::width<T>;
  const P sh = ei::pset1<P>(shift);
  P acc = ei::pset1<P>(T(0));
  std::int64_t j = 0;
  for (; j + W <= n; j += W) {
    const P e = ei::pexp(ei::psub(ei::ploadu<P>(x + j), sh));
    ei::pstoreu(x + j, e);
    acc = ei::padd(acc, e);
  }
  if (j < n) {
    alignas(64) T buf[W];
    ei::pstoreu(buf, ei::pexp(ei::psub(row_detail::load_tail(x + j, n - j, shift), sh)));
    for (std::int64_t l = 0; l < W; ++l) {
      if (l < n - j) x[j + l] = buf[l];
      else buf[l] = T(0);  // the padding's exp(0) adds nothing
    }
    acc = ei::padd(acc, ei::ploadu<P>(buf));
  }
  return ei::predux(acc);
#endif
}

}  // namespace loopscale::train::kernels
