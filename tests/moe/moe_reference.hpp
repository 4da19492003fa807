// A naive double-precision mixture-of-experts layer: plain loops, a std::stable_sort for the top-K
// and per-expert counters for the capacity, with its own parameter offsets. Written from the
// definitions in moe_router.hpp's header comment, not from the kernel's code.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "../train/reference.hpp"
#include "loopscale/train/kernels/moe.hpp"

namespace loopscale::test {

using train::kernels::Balance;
using train::kernels::MoeShape;
using train::kernels::RouterKind;

struct RefMoe {
  vecd y;                   // N x d
  std::vector<int> expert;  // N x K, in selection order
  std::vector<int> kept;    // N x K: 1 if the slot ran
  vecd gates;               // N x K
  vecd routed, prob;        // E: routed slots, summed balancing probability
  double zsum = 0;
  long dropped = 0;
  double margin = std::numeric_limits<double>::infinity();  // smallest key gap deciding the selection
  double kink = std::numeric_limits<double>::infinity();    // relu2: smallest |pre-activation|
};

// y += scale * mlp(x) for one row; W1 (H1 x d), W2 (d x H).
inline void ref_mlp_row(const double* x, const double* W1, const double* W2, int64 d, int64 H, Activation a,
                        double scale, double* y, double* kink = nullptr) {
  const int64 H1 = a == Activation::swiglu ? 2 * H : H;
  vecd h(H1), act(H);
  for (int64 j = 0; j < H1; ++j) {
    double v = 0;
    for (int64 i = 0; i < d; ++i) v += x[i] * W1[j * d + i];
    h[j] = v;
    if (kink && a == Activation::relu2) *kink = std::min(*kink, std::abs(v));
  }
  for (int64 j = 0; j < H; ++j) act[j] = a == Activation::swiglu ? ref_act(a, h[j]) * h[H + j] : ref_act(a, h[j]);
  for (int64 o = 0; o < d; ++o) {
    double v = 0;
    for (int64 j = 0; j < H; ++j) v += act[j] * W2[o * H + j];
    y[o] += scale * v;
  }
}

inline RefMoe ref_moe(const MoeShape& s, int64 N, const vecd& x, const vecd& P, const vecd* bias) {
  const int64 E = s.experts, K = s.top_k, d = s.d, H = s.hidden;
  const int64 H1 = s.act == Activation::swiglu ? 2 * H : H;
  const double* Wr = P.data();
  const double* W1 = Wr + E * d;
  const double* W2 = W1 + E * H1 * d;
  const double* SW1 = W2 + E * d * H;
  const double* SW2 = SW1 + H1 * d;
  RefMoe r;
  r.y.assign(N * d, 0.0);
  r.expert.assign(N * K, -1);
  r.kept.assign(N * K, 0);
  r.gates.assign(N * K, 0.0);
  r.routed.assign(E, 0.0);
  r.prob.assign(E, 0.0);
  for (int64 t = 0; t < N; ++t) {
    vecd z(E), sc(E), key(E);
    for (int64 e = 0; e < E; ++e) {
      double v = 0;
      for (int64 j = 0; j < d; ++j) v += x[t * d + j] * Wr[e * d + j];
      z[e] = v;
    }
    const double mx = *std::max_element(z.begin(), z.end());
    double se = 0;
    for (double v : z) se += std::exp(v - mx);
    const double lse = mx + std::log(se);
    r.zsum += lse * lse;
    double ssum = 0;
    for (int64 e = 0; e < E; ++e) {
      sc[e] = s.router == RouterKind::softmax ? std::exp(z[e] - lse) : 1.0 / (1.0 + std::exp(-z[e]));
      ssum += sc[e];
      key[e] = sc[e] + (bias && s.balance == Balance::bias ? (*bias)[e] : 0.0);
    }
    for (int64 e = 0; e < E; ++e) r.prob[e] += s.router == RouterKind::softmax ? sc[e] : sc[e] / ssum;
    std::vector<int> idx(E);
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int a, int b) { return key[a] > key[b]; });
    for (int64 k = 0; k < K && k + 1 < E; ++k) r.margin = std::min(r.margin, key[idx[k]] - key[idx[k + 1]]);
    double chosen = 0;
    for (int64 k = 0; k < K; ++k) chosen += sc[idx[k]];
    for (int64 k = 0; k < K; ++k) {
      r.expert[t * K + k] = idx[k];
      r.gates[t * K + k] = s.renormalize ? sc[idx[k]] / chosen : sc[idx[k]];
    }
  }
  // Capacity: first choices of all tokens, then second choices, ...; earlier tokens first.
  const int64 C = s.capacity_factor > 0
                      ? std::min<int64>(N, std::max<int64>(1, static_cast<int64>(std::ceil(s.capacity_factor * N * K / E))))
                      : N;
  std::vector<int64> used(E, 0);
  for (int64 k = 0; k < K; ++k)
    for (int64 t = 0; t < N; ++t) {
      const int e = r.expert[t * K + k];
      r.routed[e] += 1;
      if (used[e] < C) ++used[e], r.kept[t * K + k] = 1;
      else ++r.dropped;
    }
  for (int64 t = 0; t < N; ++t) {
    for (int64 k = 0; k < K; ++k)
      if (r.kept[t * K + k]) {
        const int e = r.expert[t * K + k];
        ref_mlp_row(&x[t * d], W1 + e * H1 * d, W2 + e * d * H, d, H, s.act, r.gates[t * K + k], &r.y[t * d], &r.kink);
      }
    if (s.shared_expert) ref_mlp_row(&x[t * d], SW1, SW2, d, H, s.act, 1.0, &r.y[t * d], &r.kink);
  }
  return r;
}

// R calls chained through a residual, x_{c+1} = x_c + y_c (a looped block), with the objective
// sum_c w_c . y_c + balance loss + z-loss over the statistics of all R calls.
struct RefChain {
  double objective = 0, margin = std::numeric_limits<double>::infinity(), kink = margin;
  long dropped = 0;
  std::vector<RefMoe> calls;
};

inline RefChain ref_chain(const MoeShape& s, int64 N, const vecd& x0, const vecd& P, const vecd* bias,
                          const std::vector<vecd>& w) {
  RefChain c;
  vecd x = x0;
  const int64 E = s.experts;
  vecd routed(E, 0.0), prob(E, 0.0);
  double zsum = 0, tokens = 0, slots = 0;
  for (const vecd& wc : w) {
    RefMoe r = ref_moe(s, N, x, P, bias);
    for (std::size_t i = 0; i < x.size(); ++i) c.objective += wc[i] * r.y[i], x[i] += r.y[i];
    for (int64 e = 0; e < E; ++e) routed[e] += r.routed[e], prob[e] += r.prob[e];
    zsum += r.zsum;
    tokens += N;
    slots += N * s.top_k;
    c.margin = std::min(c.margin, r.margin);
    c.kink = std::min(c.kink, r.kink);
    c.dropped += r.dropped;
    c.calls.push_back(std::move(r));
  }
  if (s.balance == Balance::aux_loss) {
    double acc = 0;
    for (int64 e = 0; e < E; ++e) acc += routed[e] / slots * prob[e] / tokens;
    c.objective += s.aux_coef * E * acc;
  }
  c.objective += s.z_coef * zsum / tokens;
  return c;
}

}  // namespace loopscale::test
