// The feed-forward block: y = act(x W1^T) W2^T with relu^2 (the paper's), tanh-GELU, or SwiGLU
// (W1 then holds the gate rows above the up rows, 2H x d, and act(g, u) = silu(g) * u). The forward
// keeps the pre-activation and the activation; the backward needs both.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "loopscale/spec/spec.hpp"
#include "loopscale/train/kernels/linear.hpp"
#include "loopscale/train/backend/spans.hpp"

namespace loopscale::train::kernels {

// Rows of W1: H, or 2H for SwiGLU.
constexpr int64 mlp_in_rows(Activation a, int64 hidden) { return a == Activation::swiglu ? 2 * hidden : hidden; }

template <class T>
struct Gelu {  // tanh approximation
  static constexpr T k = T(0.7978845608028654), c = T(0.044715);
  LOOPSCALE_HD static T f(T x) { return T(0.5) * x * (T(1) + std::tanh(k * (x + c * x * x * x))); }
  LOOPSCALE_HD static T df(T x) {
    const T t = std::tanh(k * (x + c * x * x * x));
    return T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * k * (T(1) + T(3) * c * x * x);
  }
};

// v where x > 0, else +0 (x NaN included), as relu^2 and its derivative need it. On the host it is
// written without a branch, a quiet comparison turned into a bit mask, because that is the only
// form GCC 12 vectorises for AVX2: `x > 0 ? v : 0` (and std::max, and a comparison cast to
// float) leave a branch in the loop under the default -ftrapping-math (a signalling comparison is
// not speculated; AVX-512 builds escape it through masked instructions). The scalar loops took 11%
// of the acceptance model's step in an AVX2 build (perf, Zen 4 held to AVX2). Results are the
// same bits as the branch's.
template <class T>
LOOPSCALE_HD inline T where_positive(T x, T v) {
#if defined(__CUDA_ARCH__)
  return x > T(0) ? v : T(0);
#else
  using U = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
  const U mask = U(0) - static_cast<U>(std::isgreater(x, T(0)));
  return std::bit_cast<T>(std::bit_cast<U>(v) & mask);
#endif
}

// hact (rows x H) = act(hpre), hpre (rows x H1). Element-wise along the rows (spans.hpp).
template <class B, class T>
void activation_forward(Activation a, const T* hpre, T* hact, int64 rows, int64 H) {
  for_row_spans<B>(rows, H, [=] LOOPSCALE_HD(int64 i, int64 lo, int64 hi) {
    T* o = hact + i * H;
    if (a == Activation::swiglu) {
      const T* g = hpre + i * 2 * H;
      const T* u = g + H;
      for (int64 j = lo; j < hi; ++j) o[j] = g[j] / (T(1) + std::exp(-g[j])) * u[j];
    } else if (a == Activation::gelu) {
      const T* h = hpre + i * H;
      for (int64 j = lo; j < hi; ++j) o[j] = Gelu<T>::f(h[j]);
    } else {
      const T* h = hpre + i * H;
      for (int64 j = lo; j < hi; ++j) o[j] = where_positive(h[j], h[j] * h[j]);
    }
  });
}

// dhpre (rows x H1) from dhact (rows x H).
template <class B, class T>
void activation_backward(Activation a, const T* hpre, const T* dhact, T* dhpre, int64 rows, int64 H) {
  for_row_spans<B>(rows, H, [=] LOOPSCALE_HD(int64 i, int64 lo, int64 hi) {
    const T* d = dhact + i * H;
    if (a == Activation::swiglu) {
      const T* g = hpre + i * 2 * H;
      const T* u = g + H;
      T* dg = dhpre + i * 2 * H;
      T* du = dg + H;
      for (int64 j = lo; j < hi; ++j) {
        const T sg = T(1) / (T(1) + std::exp(-g[j]));
        du[j] = d[j] * g[j] * sg;
        dg[j] = d[j] * u[j] * sg * (T(1) + g[j] * (T(1) - sg));
      }
    } else if (a == Activation::gelu) {
      const T* h = hpre + i * H;
      T* dh = dhpre + i * H;
      for (int64 j = lo; j < hi; ++j) dh[j] = d[j] * Gelu<T>::df(h[j]);
    } else {
      const T* h = hpre + i * H;
      T* dh = dhpre + i * H;
      for (int64 j = lo; j < hi; ++j) dh[j] = where_positive(h[j], T(2) * h[j] * d[j]);
    }
  });
}

struct MlpShape {
  int64 rows = 0, d = 0, hidden = 0;
  Activation act = Activation::relu2;
  constexpr int64 in_rows() const { return mlp_in_rows(act, hidden); }
};

// y (rows x d) = mlp(x), or y += mlp(x) when accumulate (the residual add).
template <class B, class T>
void mlp_forward(const T* x, const T* W1, const T* W2, T* hpre, T* hact, T* y, const MlpShape& s, bool accumulate) {
  linear_forward<B>(x, W1, hpre, s.rows, s.d, s.in_rows());
  activation_forward<B>(s.act, hpre, hact, s.rows, s.hidden);
  linear_forward<B>(hact, W2, y, s.rows, s.hidden, s.d, accumulate);
}

// dx (rows x d) = d mlp / dx applied to dy (overwritten); dW1, dW2 accumulate. dhact (rows x H)
// and dhpre (rows x H1) are scratch.
template <class B, class T>
void mlp_backward(const T* x, const T* W1, const T* W2, const T* hpre, const T* hact, const T* dy, T* dx, T* dW1,
                  T* dW2, T* dhact, T* dhpre, const MlpShape& s) {
  linear_backward<B>(hact, W2, dy, dhact, dW2, s.rows, s.hidden, s.d);
  activation_backward<B>(s.act, hpre, dhact, dhpre, s.rows, s.hidden);
  linear_backward<B>(x, W1, dhpre, dx, dW1, s.rows, s.d, s.in_rows());
}

}  // namespace loopscale::train::kernels
