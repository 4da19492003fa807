// The mixture-of-experts FFN: y (+)= sum over the K chosen experts of g_k mlp_e_k(x) [+ mlp_shared(x)]
// over flat, once-allocated buffers. Routing, grouping and balancing are in moe_router.hpp.
//
// Experts run on their own contiguous groups of token slots (the sort of moe_router.hpp): each
// expert gathers its rows of x, runs the two GEMMs of its MLP on them and adds g * out back into its
// tokens' rows of y. No expert touches a token it was not chosen for, so the routed work is K/E of
// a dense pass over all experts. A token picks an expert at most once, so within one expert every
// row belongs to a different token and the scatter-add runs in parallel without atomics; experts
// are added in index order, so the result is the same on every run with the same thread count.
//
// Parameters, in this order (moe_param_layout), totalling layer_params(...).ffn of the accounting:
//   router Wr (E x d) | W1 of expert 0..E-1 (H1 x d each) | W2 of expert 0..E-1 (d x H each)
//   | shared W1 (H1 x d) | shared W2 (d x H)          H1 = 2H for SwiGLU, else H
// The aux-loss-free bias (E values) is state, not a parameter: it never receives a gradient and is
// moved by moe_update_bias once per step.
//
// Buffers for N tokens (moe_sizes): `acts` are one call's saved activations (a looped block keeps
// one set per recurrence that gets gradients), `scratch` is shared by every call and layer. Each
// comes as a T part and an int32 part (selections and the grouping).
#pragma once

#include <cstring>

#include "loopscale/train/kernels/mlp.hpp"
#include "loopscale/train/kernels/moe_router.hpp"

namespace loopscale::train::kernels {

struct MoeParamLayout {
  int64 router = 0, w1 = 0, w2 = 0, shared_w1 = 0, shared_w2 = 0, total = 0;
  int64 w1_size = 0, w2_size = 0;  // one expert's W1 and W2
  int64 expert_w1(int64 e) const { return w1 + e * w1_size; }
  int64 expert_w2(int64 e) const { return w2 + e * w2_size; }
};

inline MoeParamLayout moe_param_layout(const MoeShape& s) {
  MoeParamLayout l;
  l.w1_size = s.in_rows() * s.d;
  l.w2_size = s.d * s.hidden;
  l.router = 0;
  l.w1 = s.experts * s.d;
  l.w2 = l.w1 + s.experts * l.w1_size;
  l.shared_w1 = l.w2 + s.experts * l.w2_size;
  l.shared_w2 = l.shared_w1 + (s.shared_expert ? l.w1_size : 0);
  l.total = l.shared_w2 + (s.shared_expert ? l.w2_size : 0);
  return l;
}
inline int64 moe_param_count(const MoeShape& s) { return moe_param_layout(s).total; }

// Element counts for a call of N tokens.
struct MoeSizes {
  int64 acts = 0, acts_index = 0;        // saved per call: T values, int32 values
  int64 scratch = 0, scratch_index = 0;  // shared across calls
};

inline MoeSizes moe_sizes(const MoeShape& s, int64 N) {
  const int64 E = s.experts, K = s.top_k, H = s.hidden, H1 = s.in_rows(), d = s.d, S = N * K;
  MoeSizes z;
  if (S >= (int64{1} << 31)) throw spec_error("moe: N * top-k token slots must fit in int32");
  z.acts = 2 * N * E + N + S + S * H1 + S * H + (s.shared_expert ? N * (H1 + H) : 0);
  z.acts_index = 2 * S + 2 * E + 1;
  // Rows of one expert are at most N (capacity(N) <= N), and the shared expert has N rows.
  z.scratch = 2 * N * d + N * H + N * H1 + N * E + S;
  z.scratch_index = moe_group_scratch(E, S);
  return z;
}

// One call's saved activations: pointers carved from the caller's buffers.
template <class T>
struct MoeActs {
  T *logits, *scores, *lse, *gates;  // N E, N E, N, N K
  T *hpre, *hact;                    // expert rows, in grouped order: N K x H1, N K x H
  T *shared_hpre, *shared_hact;      // N x H1, N x H (null without a shared expert)
  int32 *expert, *order, *offset, *kept;  // N K, N K, E + 1, E
};

template <class T>
MoeActs<T> moe_acts(const MoeShape& s, int64 N, T* v, int32* iv) {
  const int64 E = s.experts, S = N * s.top_k;
  MoeActs<T> a;
  a.logits = v, v += N * E;
  a.scores = v, v += N * E;
  a.lse = v, v += N;
  a.gates = v, v += S;
  a.hpre = v, v += S * s.in_rows();
  a.hact = v, v += S * s.hidden;
  a.shared_hpre = a.shared_hact = nullptr;
  if (s.shared_expert) {
    a.shared_hpre = v, v += N * s.in_rows();
    a.shared_hact = v, v += N * s.hidden;
  }
  a.expert = iv, iv += S;
  a.order = iv, iv += S;
  a.offset = iv, iv += E + 1;
  a.kept = iv;
  return a;
}

template <class T>
struct MoeScratch {
  T *rows_a, *rows_b;  // N x d each: gathered inputs / outputs of one expert
  T *dh, *dhp;         // N x H, N x H1
  T *dlogits, *dgate;  // N x E (the balancing probabilities in the forward), N x K
  int32* hist;         // grouping
};

template <class T>
MoeScratch<T> moe_scratch(const MoeShape& s, int64 N, T* v, int32* iv) {
  MoeScratch<T> w;
  w.rows_a = v, v += N * s.d;
  w.rows_b = v, v += N * s.d;
  w.dh = v, v += N * s.hidden;
  w.dhp = v, v += N * s.in_rows();
  w.dlogits = v, v += N * s.experts;
  w.dgate = v;
  w.hist = iv;
  return w;
}

namespace detail {
// dst row i = src row of the token of grouped slot base + i.
template <class B, class T>
void gather_rows(const T* src, T* dst, const int32* order, int64 base, int64 rows, int64 K, int64 d) {
  B::parallel_for(rows, [=](int64 i) {
    const T* r = src + static_cast<int64>(order[base + i]) / K * d;
    std::memcpy(dst + i * d, r, static_cast<std::size_t>(d) * sizeof(T));
  });
}
}  // namespace detail

// y = moe(x) (y += moe(x) when accumulate: the residual add). bias: E selection biases, used when
// balance == bias and bias is not null. Adds this call's routing to `stats` and returns its own.
template <class B, class T>
MoeCall moe_forward(const MoeShape& s, int64 N, const T* x, const T* P, const T* bias, T* y, bool accumulate,
                    const MoeActs<T>& a, const MoeScratch<T>& w, MoeStats& stats) {
  const MoeParamLayout L = moe_param_layout(s);
  const int64 E = s.experts, K = s.top_k, d = s.d, H = s.hidden, H1 = s.in_rows();
  route_forward<B>(s, N, x, P + L.router, s.balance == Balance::bias ? bias : static_cast<const T*>(nullptr), a.logits,
                   a.scores, a.lse, a.expert, a.gates);
  group_slots<B>(N, K, E, s.capacity(N), a.expert, a.order, a.offset, a.kept, w.hist);
  const MoeCall call = route_stats<B>(s, N, a.scores, a.lse, a.offset, a.kept, w.dlogits, stats);

  if (s.shared_expert) mlp_forward<B>(x, P + L.shared_w1, P + L.shared_w2, a.shared_hpre, a.shared_hact, y, {N, d, H, s.act}, accumulate);
  else if (!accumulate) B::parallel_for(N, [=](int64 t) { std::fill(y + t * d, y + (t + 1) * d, T(0)); });

  for (int64 e = 0; e < E; ++e) {
    const int64 rows = a.kept[e], base = a.offset[e];
    if (rows == 0) continue;
    T* hpre = a.hpre + base * H1;
    T* hact = a.hact + base * H;
    detail::gather_rows<B>(x, w.rows_a, a.order, base, rows, K, d);
    linear_forward<B>(w.rows_a, P + L.expert_w1(e), hpre, rows, d, H1);
    activation_forward<B>(s.act, hpre, hact, rows, H);
    linear_forward<B>(hact, P + L.expert_w2(e), w.rows_b, rows, H, d);
    const T* out = w.rows_b;
    const int32* order = a.order;
    const T* gates = a.gates;
    B::parallel_for(rows, [=](int64 i) {
      const int64 slot = order[base + i];
      const T g = gates[slot];
      T* yt = y + slot / K * d;
      const T* o = out + i * d;
      for (int64 j = 0; j < d; ++j) yt[j] += g * o[j];
    });
  }
  return call;
}

// dx = d loss / dx (overwritten) for the upstream gradient dy (N x d) plus the balance and z-losses
// of the step `stats` (finished: every call of the step has run forward). G accumulates parameter
// gradients in the layout of P.
template <class B, class T>
void moe_backward(const MoeShape& s, int64 N, const T* x, const T* P, const MoeActs<T>& a, const MoeStats& stats,
                  const T* dy, T* dx, T* G, const MoeScratch<T>& w) {
  const MoeParamLayout L = moe_param_layout(s);
  const int64 E = s.experts, K = s.top_k, d = s.d, H = s.hidden, H1 = s.in_rows();
  T* dgate = w.dgate;
  B::parallel_for(N, [=](int64 t) { std::fill(dgate + t * K, dgate + (t + 1) * K, T(0)); });  // dropped slots stay 0
  if (s.shared_expert)
    mlp_backward<B>(x, P + L.shared_w1, P + L.shared_w2, a.shared_hpre, a.shared_hact, dy, dx, G + L.shared_w1,
                    G + L.shared_w2, w.dh, w.dhp, {N, d, H, s.act});
  else
    B::parallel_for(N, [=](int64 t) { std::fill(dx + t * d, dx + (t + 1) * d, T(0)); });

  for (int64 e = 0; e < E; ++e) {
    const int64 rows = a.kept[e], base = a.offset[e];
    if (rows == 0) continue;
    const T* hpre = a.hpre + base * H1;
    const T* hact = a.hact + base * H;
    const T* W1 = P + L.expert_w1(e);
    const T* W2 = P + L.expert_w2(e);
    const int32* order = a.order;
    const T* gates = a.gates;
    T* dyg = w.rows_a;
    T* u = w.dh;
    detail::gather_rows<B>(dy, dyg, a.order, base, rows, K, d);
    // u = dy W2 is d loss / d (expert output) before the gate: its dot with the activation is the
    // gate's gradient, and g u is the activation's.
    B::gemm(false, false, rows, H, d, T(1), dyg, d, W2, H, T(0), u, H);
    B::parallel_for(rows, [=](int64 i) {
      const int64 slot = order[base + i];
      const T g = gates[slot];
      T* ui = u + i * H;
      const T* hi = hact + i * H;
      T dot = 0;
      for (int64 j = 0; j < H; ++j) dot += ui[j] * hi[j];
      dgate[slot] = dot;
      for (int64 j = 0; j < H; ++j) ui[j] *= g;
      T* dr = dyg + i * d;
      for (int64 j = 0; j < d; ++j) dr[j] *= g;
    });
    B::gemm(true, false, d, H, rows, T(1), dyg, d, hact, H, T(1), G + L.expert_w2(e), H);  // dW2 += (g dy)^T h
    activation_backward<B>(s.act, hpre, u, w.dhp, rows, H);
    T* xg = w.rows_b;
    detail::gather_rows<B>(x, xg, a.order, base, rows, K, d);
    B::gemm(true, false, H1, d, rows, T(1), w.dhp, H1, xg, d, T(1), G + L.expert_w1(e), d);  // dW1 += dhpre^T x
    T* dxg = w.rows_a;                                                                       // dy rows are done
    B::gemm(false, false, rows, d, H1, T(1), w.dhp, H1, W1, d, T(0), dxg, d);
    B::parallel_for(rows, [=](int64 i) {
      T* dt = dx + static_cast<int64>(order[base + i]) / K * d;
      const T* r = dxg + i * d;
      for (int64 j = 0; j < d; ++j) dt[j] += r[j];
    });
  }
  route_backward<B>(s, N, x, P + L.router, a.logits, a.scores, a.lse, a.expert, a.gates, dgate, stats, w.dlogits, dx,
                    G + L.router, true);
}

// The aux-loss-free step (DeepSeek-V3): b_e += rate * sign(mean load - load_e) from the routed
// loads of the whole step. Outside the gradient; a no-op unless balance == bias.
template <class T>
void moe_update_bias(const MoeShape& s, const MoeStats& st, T* bias) {
  if (s.balance != Balance::bias || st.slots <= 0) return;
  const double mean = st.slots / static_cast<double>(s.experts);
  for (int64 e = 0; e < s.experts; ++e) {
    const double gap = mean - st.routed[e];
    bias[e] += static_cast<T>(gap > 0 ? s.bias_rate : gap < 0 ? -s.bias_rate : 0.0);
  }
}

}  // namespace loopscale::train::kernels
