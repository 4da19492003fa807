// Naive double-precision references for the training kernels (plain loops, no backend), and the
// finite-difference helper the gradient checks share.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <vector>

#include "loopscale/spec/spec.hpp"

namespace loopscale::test {

using vecd = std::vector<double>;
using int64 = std::int64_t;

inline vecd randn(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> d(0.0, scale);
  vecd v(n);
  for (double& x : v) x = d(g);
  return v;
}

template <class T>
std::vector<T> cast(const vecd& v) {
  return std::vector<T>(v.begin(), v.end());
}

// y = x W^T
inline vecd ref_linear(const vecd& x, const vecd& W, int64 rows, int64 in, int64 out) {
  vecd y(rows * out, 0.0);
  for (int64 i = 0; i < rows; ++i)
    for (int64 o = 0; o < out; ++o) {
      double s = 0;
      for (int64 j = 0; j < in; ++j) s += x[i * in + j] * W[o * in + j];
      y[i * out + o] = s;
    }
  return y;
}

inline vecd ref_rmsnorm(const vecd& x, const double* g, int64 rows, int64 d, double eps = 1e-6) {
  vecd y(x.size());
  for (int64 i = 0; i < rows; ++i) {
    double ss = 0;
    for (int64 j = 0; j < d; ++j) ss += x[i * d + j] * x[i * d + j];
    const double r = 1.0 / std::sqrt(ss / d + eps);
    for (int64 j = 0; j < d; ++j) y[i * d + j] = x[i * d + j] * r * (g ? g[j] : 1.0);
  }
  return y;
}

// Rotates pairs (j, j + q/2) of `heads` heads at the start of each row by t * 10000^(-2j/q).
inline vecd ref_rope(const vecd& x, int64 rows, int64 seq, int64 heads, int64 q, int64 stride) {
  vecd y = x;
  for (int64 i = 0; i < rows; ++i) {
    const double t = static_cast<double>(i % seq);
    for (int64 h = 0; h < heads; ++h)
      for (int64 j = 0; j < q / 2; ++j) {
        const double a = t * std::pow(10000.0, -2.0 * j / q);
        const double u = x[i * stride + h * q + j], v = x[i * stride + h * q + j + q / 2];
        y[i * stride + h * q + j] = u * std::cos(a) - v * std::sin(a);
        y[i * stride + h * q + j + q / 2] = u * std::sin(a) + v * std::cos(a);
      }
  }
  return y;
}

// Causal attention over fused rows [Q heads | K heads | V heads].
inline vecd ref_attention(const vecd& qkv, int64 B, int64 T, int64 h, int64 kv, int64 q) {
  const int64 C = (h + 2 * kv) * q, group = h / kv;
  vecd out(B * T * h * q, 0.0);
  for (int64 b = 0; b < B; ++b)
    for (int64 hh = 0; hh < h; ++hh) {
      const int64 g = hh / group;
      for (int64 t = 0; t < T; ++t) {
        vecd s(t + 1);
        double mx = -1e300;
        for (int64 j = 0; j <= t; ++j) {
          double dot = 0;
          for (int64 c = 0; c < q; ++c) dot += qkv[(b * T + t) * C + hh * q + c] * qkv[(b * T + j) * C + (h + g) * q + c];
          s[j] = dot / std::sqrt(static_cast<double>(q));
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (double& v : s) z += (v = std::exp(v - mx));
        for (int64 c = 0; c < q; ++c) {
          double o = 0;
          for (int64 j = 0; j <= t; ++j) o += s[j] / z * qkv[(b * T + j) * C + (h + kv + g) * q + c];
          out[(b * T + t) * h * q + hh * q + c] = o;
        }
      }
    }
  return out;
}

inline double ref_act(Activation a, double x) {
  if (a == Activation::relu2) return x > 0 ? x * x : 0.0;
  if (a == Activation::gelu) return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
  return x / (1 + std::exp(-x));  // silu (the gate of swiglu)
}

inline vecd ref_mlp(const vecd& x, const vecd& W1, const vecd& W2, int64 rows, int64 d, int64 H, Activation a) {
  const int64 H1 = a == Activation::swiglu ? 2 * H : H;
  const vecd h = ref_linear(x, W1, rows, d, H1);
  vecd act(rows * H);
  for (int64 i = 0; i < rows; ++i)
    for (int64 j = 0; j < H; ++j)
      act[i * H + j] = a == Activation::swiglu ? ref_act(a, h[i * H1 + j]) * h[i * H1 + H + j] : ref_act(a, h[i * H1 + j]);
  return ref_linear(act, W2, rows, H, d);
}

// Mean over rows of logsumexp(cap tanh(l / cap)) - capped[target], over the first `vocab` columns.
inline double ref_softcap_ce(const vecd& logits, const std::vector<std::int32_t>& tgt, int64 rows, int64 vp, int64 vocab,
                             double cap) {
  double total = 0;
  for (int64 i = 0; i < rows; ++i) {
    vecd z(vocab);
    double mx = -1e300;
    for (int64 j = 0; j < vocab; ++j) {
      z[j] = cap > 0 ? cap * std::tanh(logits[i * vp + j] / cap) : logits[i * vp + j];
      mx = std::max(mx, z[j]);
    }
    double s = 0;
    for (double v : z) s += std::exp(v - mx);
    total += mx + std::log(s) - z[tgt[i]];
  }
  return total / rows;
}

// Central difference of f at x[i].
inline double finite_diff(const std::function<double()>& f, double& xi, double h = 1e-5) {
  const double x0 = xi;
  xi = x0 + h;
  const double fp = f();
  xi = x0 - h;
  const double fm = f();
  xi = x0;
  return (fp - fm) / (2 * h);
}

// |a - b| within an absolute floor plus a relative tolerance.
inline bool close(double a, double b, double rel, double abs) { return std::abs(a - b) <= abs + rel * std::max(std::abs(a), std::abs(b)); }

inline double max_abs_diff(const vecd& a, const vecd& b) {
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

}  // namespace loopscale::test
