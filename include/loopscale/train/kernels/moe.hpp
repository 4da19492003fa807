// The mixture-of-experts FFN: y (+)= sum over the K chosen experts of g_k mlp_e_k(x) [+ mlp_shared(x)]
// over flat, once-allocated buffers. Routing, grouping and balancing are in moe_router.hpp.
//
// Experts run on their own contiguous groups of token slots (the sort of moe_router.hpp): each
// expert gathers its rows of x, runs the two GEMMs of its MLP on them into per-slot output rows,
// and every token then sums its kept slots, in k order, times their gates. No expert touches a
// token it was not chosen for, so the routed work is K/E of a dense pass over all experts. The
// backward mirrors this (per-slot dx rows summed per token), and each weight gradient element has
// one writer, so results are bit-identical from run to run with the same thread count.
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
#include <vector>

#include "loopscale/train/kernels/mlp.hpp"
#include "loopscale/train/kernels/moe_router.hpp"
#include "loopscale/train/backend/spans.hpp"

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

// Work of the expert phase is cut into tasks that each run on one thread with single-threaded
// GEMMs, one parallel region per phase instead of a few per expert: row tasks (up to
// moe_row_chunk grouped rows of one expert; everything row-local: gather, both GEMMs and the
// activation forward, and their backward to the input) and weight tasks (a panel of
// moe_weight_panel output rows of one expert's dW1 or dW2, summed over all its rows). Every output
// element has exactly one task, so there are no atomics and no reductions across threads, and a
// skewed routing still splits the row phase evenly: a busy expert is just more row tasks. (The
// weight tasks go expert by expert, so a strongly skewed routing loads one thread more there.)
inline constexpr int64 moe_row_chunk = 256;
inline constexpr int64 moe_weight_panel = 64;
inline int64 moe_max_row_tasks(int64 experts, int64 slots) { return (slots + moe_row_chunk - 1) / moe_row_chunk + experts; }

// Element counts for a call of N tokens.
struct MoeSizes {
  int64 acts = 0, acts_index = 0;        // saved per call: T values, int32 values
  int64 scratch = 0, scratch_index = 0;  // shared across calls
};

inline MoeSizes moe_sizes(const MoeShape& s, int64 N) {
  const int64 E = s.experts, K = s.top_k, H = s.hidden, H1 = s.in_rows(), d = s.d, S = N * K;
  if (S >= (int64{1} << 31)) throw spec_error("moe: N * top-k token slots must fit in int32");
  MoeSizes z;
  z.acts = 2 * N * E + N + S + S * H1 + S * H + (s.shared_expert ? N * (H1 + H) : 0);
  z.acts_index = 3 * S + 2 * E + 1;
  // Grouped rows of every slot (S >= N, so dh / dhp also serve the shared expert's backward).
  z.scratch = 3 * S * d + S * H + S * H1 + N * E + S;
  z.scratch_index = moe_group_scratch(E, S) + 3 * moe_max_row_tasks(E, S);
  return z;
}

// One call's saved activations: pointers carved from the caller's buffers.
template <class T>
struct MoeActs {
  T *logits, *scores, *lse, *gates;        // N E, N E, N, N K
  T *hpre, *hact;                          // grouped rows: N K x H1, N K x H
  T *shared_hpre, *shared_hact;            // N x H1, N x H (null without a shared expert)
  int32 *expert, *order, *pos;             // N K each: chosen experts, grouped order, slot -> row
  int32 *offset, *kept;                    // E + 1, E
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
  a.pos = iv, iv += S;
  a.offset = iv, iv += E + 1;
  a.kept = iv;
  return a;
}

template <class T>
struct MoeScratch {
  T *xg, *yg, *dxg;    // N K x d each: gathered inputs, expert outputs (dy in the backward), dx rows
  T *dh, *dhp;         // N K x H, N K x H1
  T *dlogits, *dgate;  // N x E (the balancing probabilities in the forward), N x K
  int32 *hist, *tasks; // grouping; row tasks (expert, begin, end)
};

template <class T>
MoeScratch<T> moe_scratch(const MoeShape& s, int64 N, T* v, int32* iv) {
  const int64 S = N * s.top_k;
  MoeScratch<T> w;
  w.xg = v, v += S * s.d;
  w.yg = v, v += S * s.d;
  w.dxg = v, v += S * s.d;
  w.dh = v, v += S * s.hidden;
  w.dhp = v, v += S * s.in_rows();
  w.dlogits = v, v += N * s.experts;
  w.dgate = v;
  w.hist = iv, iv += moe_group_scratch(s.experts, S);
  w.tasks = iv;
  return w;
}

namespace detail {
// Row tasks of the experts' kept rows; returns their count.
inline int64 row_tasks(int64 E, const int32* offset, const int32* kept, int32* tasks) {
  int64 n = 0;
  for (int64 e = 0; e < E; ++e)
    for (int64 b = offset[e]; b < offset[e] + kept[e]; b += moe_row_chunk, ++n) {
      tasks[3 * n] = static_cast<int32>(e);
      tasks[3 * n + 1] = static_cast<int32>(b);
      tasks[3 * n + 2] = static_cast<int32>(std::min<int64>(b + moe_row_chunk, offset[e] + kept[e]));
    }
  return n;
}

// One call's group counts copied to the host, offset (E + 1) then kept (E): the step statistics
// and the number of row tasks are decided there, so this small copy is the only one a call makes
// from the backend. The storage grows once per thread.
template <class B>
const int32* host_counts(int64 E, const int32* offset, const int32* kept) {
  thread_local std::vector<int32> h;
  h.resize(static_cast<std::size_t>(2 * E + 1));
  B::download(h.data(), offset, E + 1);
  B::download(h.data() + E + 1, kept, E);
  return h.data();
}

// The row tasks of host counts (offset[E] is the number of slots), uploaded into the backend's
// `tasks`; returns their count.
template <class B>
int64 upload_row_tasks(int64 E, const int32* offset, const int32* kept, int32* tasks) {
  thread_local std::vector<int32> h;
  h.resize(static_cast<std::size_t>(3 * moe_max_row_tasks(E, offset[E])));
  const int64 n = row_tasks(E, offset, kept, h.data());
  B::upload(tasks, h.data(), 3 * n);
  return n;
}

// dst row i = src row of the token of grouped row i, for i in [b, e).
template <class T>
void gather_rows(const T* src, T* dst, const int32* order, int64 b, int64 e, int64 K, int64 d) {
  for (int64 i = b; i < e; ++i)
    std::memcpy(dst + i * d, src + static_cast<int64>(order[i]) / K * d, static_cast<std::size_t>(d) * sizeof(T));
}

// The same on the backend: one element-wise pass over the rows (the device form).
template <class B, class T>
void gather_rows_on(const T* src, T* dst, const int32* order, int64 b, int64 e, int64 K, int64 d) {
  for_row_spans<B>(e - b, d, [=] LOOPSCALE_HD(int64 r, int64 lo, int64 hi) {
    const int64 i = b + r;
    const T* s = src + static_cast<int64>(order[i]) / K * d;
    for (int64 j = lo; j < hi; ++j) dst[i * d + j] = s[j];
  });
}

// The part of the expert backward local to grouped row i: u = dh[i] (dy W2) dotted with the
// activation is the gate's gradient; then dh[i] *= g (the activation's gradient) and dyg[i] *= g
// (g dy, for dW2).
template <class T>
LOOPSCALE_HD inline void expert_row_backward(int64 i, const int32* order, const T* gates, const T* hact, T* dh, T* dyg, T* dgate,
                                             int64 H, int64 d) {
  const int64 slot = order[i];
  const T g = gates[slot];
  T* ui = dh + i * H;
  const T* hi = hact + i * H;
  T dot = 0;
  for (int64 c = 0; c < H; ++c) dot += ui[c] * hi[c];
  dgate[slot] = dot;
  for (int64 c = 0; c < H; ++c) ui[c] *= g;
  T* dr = dyg + i * d;
  for (int64 c = 0; c < d; ++c) dr[c] *= g;
}

// Row r of X (rows x width) *= the gate of its slot, order[r]; one thread per value on a device.
template <class B, class T>
void scale_rows_by_gate(T* X, int64 width, const int32* order, const T* gates, int64 rows) {
  for_row_spans<B>(rows, width, [=] LOOPSCALE_HD(int64 r, int64 lo, int64 hi) {
    const T g = gates[order[r]];
    for (int64 c = lo; c < hi; ++c) X[r * width + c] *= g;
  });
}

// The same for the grouped rows [b, b + rows) on the backend (the device form): the gates'
// gradients first (a dot over H per row: the backend's row_dots where it has one, CUDA's a warp
// per row, else a task per row), then the scaling one thread per value (spans.hpp). Each value
// gets expert_row_backward's arithmetic in its order.
template <class B, class T>
void expert_rows_backward_on(int64 b, int64 rows, const int32* order, const T* gates, const T* hact, T* dh, T* dyg, T* dgate, int64 H,
                             int64 d) {
  if constexpr (requires { B::row_dots(dh, hact, H, order, dgate, rows); }) {
    B::row_dots(dh + b * H, hact + b * H, H, order + b, dgate, rows);
  } else {
    B::parallel_for(rows, [=] LOOPSCALE_HD(int64 r) {
      const T* u = dh + (b + r) * H;
      const T* h = hact + (b + r) * H;
      T dot = 0;
      for (int64 c = 0; c < H; ++c) dot += u[c] * h[c];
      dgate[order[b + r]] = dot;
    });
  }
  scale_rows_by_gate<B>(dh + b * H, H, order + b, gates, rows);
  scale_rows_by_gate<B>(dyg + b * d, d, order + b, gates, rows);
}

// y[t] (+)= sum over t's kept slots, in k order, of scale(slot) * rows[pos[slot]].
template <class B, class T, class Scale>
void combine_rows(int64 N, int64 K, int64 d, const int32* expert, const int32* pos, const int32* offset, const int32* kept,
                  const T* rows, T* y, bool overwrite, Scale scale) {
  for_row_spans<B>(N, d, [=] LOOPSCALE_HD(int64 t, int64 lo, int64 hi) {
    T* yt = y + t * d;
    if (overwrite)
      for (int64 j = lo; j < hi; ++j) yt[j] = T(0);
    for (int64 k = 0; k < K; ++k) {
      const int64 slot = t * K + k, e = expert[slot], r = pos[slot];
      if (r - offset[e] >= kept[e]) continue;  // dropped by the capacity
      const T g = scale(slot);
      const T* src = rows + r * d;
      for (int64 j = lo; j < hi; ++j) yt[j] += g * src[j];
    }
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
                   a.scores, a.lse, a.expert, a.gates, w.dlogits);
  group_slots<B>(N, K, E, s.capacity(N), a.expert, a.order, a.pos, a.offset, a.kept, w.hist);
  const int32* order = a.order;
  const int32* counts = detail::host_counts<B>(E, a.offset, a.kept);
  const MoeCall call = route_stats<B>(s, N, w.dlogits, a.lse, counts, counts + E + 1, stats);

  const Activation act = s.act;
  T *xg = w.xg, *yg = w.yg, *hpre = a.hpre, *hact = a.hact;
  if constexpr (B::nested_gemm) {
    // Row tasks of at most moe_row_chunk rows of one expert, spread over the threads.
    const int32* tasks = w.tasks;
    const int64 ntasks = detail::upload_row_tasks<B>(E, counts, counts + E + 1, w.tasks);
    B::parallel_for(ntasks, [=](int64 j) {
      const int64 e = tasks[3 * j], b = tasks[3 * j + 1], en = tasks[3 * j + 2], rows = en - b;
      detail::gather_rows(x, xg, order, b, en, K, d);
      // Inside the parallel region the backend runs these on the calling thread.
      linear_forward<B>(xg + b * d, P + L.expert_w1(e), hpre + b * H1, rows, d, H1);
      activation_forward<B>(act, hpre + b * H1, hact + b * H, rows, H);
      linear_forward<B>(hact + b * H, P + L.expert_w2(e), yg + b * d, rows, H, d);
    });
  } else {
    // Device form: expert after expert, each one GEMM over all its kept rows.
    for (int64 e = 0; e < E; ++e) {
      const int64 b = counts[e], rows = counts[E + 1 + e];
      if (rows == 0) continue;
      detail::gather_rows_on<B>(x, xg, order, b, b + rows, K, d);
      linear_forward<B>(xg + b * d, P + L.expert_w1(e), hpre + b * H1, rows, d, H1);
      activation_forward<B>(act, hpre + b * H1, hact + b * H, rows, H);
      linear_forward<B>(hact + b * H, P + L.expert_w2(e), yg + b * d, rows, H, d);
    }
  }

  if (s.shared_expert) mlp_forward<B>(x, P + L.shared_w1, P + L.shared_w2, a.shared_hpre, a.shared_hact, y, {N, d, H, s.act}, accumulate);
  const T* gates = a.gates;
  detail::combine_rows<B>(N, K, d, a.expert, a.pos, a.offset, a.kept, w.yg, y, !s.shared_expert && !accumulate,
                          [=] LOOPSCALE_HD(int64 slot) { return gates[slot]; });
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
  T* dgate = w.dgate;  // written for the slots that ran; route_backward reads no other
  if (s.shared_expert)
    mlp_backward<B>(x, P + L.shared_w1, P + L.shared_w2, a.shared_hpre, a.shared_hact, dy, dx, G + L.shared_w1,
                    G + L.shared_w2, w.dh, w.dhp, {N, d, H, s.act});

  const int32* counts = detail::host_counts<B>(E, a.offset, a.kept);
  const int32* order = a.order;
  const T *gates = a.gates, *hpre = a.hpre, *hact = a.hact;
  const Activation act = s.act;
  T *xg = w.xg, *dyg = w.yg, *dxg = w.dxg, *dh = w.dh, *dhp = w.dhp;
  if constexpr (B::nested_gemm) {
    // Row tasks: everything that is local to a grouped row.
    const int32* tasks = w.tasks;
    const int64 ntasks = detail::upload_row_tasks<B>(E, counts, counts + E + 1, w.tasks);
    B::parallel_for(ntasks, [=](int64 j) {
      const int64 e = tasks[3 * j], b = tasks[3 * j + 1], en = tasks[3 * j + 2], rows = en - b;
      detail::gather_rows(dy, dyg, order, b, en, K, d);
      // u = dy W2 is d loss / d (expert output) before the gate: its dot with the activation is the
      // gate's gradient, and g u is the activation's.
      B::gemm(false, false, rows, H, d, T(1), dyg + b * d, d, P + L.expert_w2(e), H, T(0), dh + b * H, H);
      for (int64 i = b; i < en; ++i) detail::expert_row_backward(i, order, gates, hact, dh, dyg, dgate, H, d);
      activation_backward<B>(act, hpre + b * H1, dh + b * H, dhp + b * H1, rows, H);
      B::gemm(false, false, rows, d, H1, T(1), dhp + b * H1, H1, P + L.expert_w1(e), d, T(0), dxg + b * d, d);
      detail::gather_rows(x, xg, order, b, en, K, d);  // for dW1
    });

    // Weight tasks: panels of dW1 (H1 x d) and dW2 (d x H), each summed over its expert's rows.
    const int64 p1 = (H1 + moe_weight_panel - 1) / moe_weight_panel, p2 = (d + moe_weight_panel - 1) / moe_weight_panel;
    const int32 *offset = a.offset, *kept = a.kept;
    B::parallel_for(E * (p1 + p2), [=](int64 j) {
      const int64 e = j / (p1 + p2), p = j % (p1 + p2), off = offset[e], rows = kept[e];
      if (rows == 0) return;
      if (p < p1) {
        const int64 lo = p * moe_weight_panel, n = std::min(H1, lo + moe_weight_panel) - lo;
        B::gemm(true, false, n, d, rows, T(1), dhp + off * H1 + lo, H1, xg + off * d, d, T(1), G + L.expert_w1(e) + lo * d, d);
      } else {
        const int64 lo = (p - p1) * moe_weight_panel, n = std::min(d, lo + moe_weight_panel) - lo;
        B::gemm(true, false, n, H, rows, T(1), dyg + off * d + lo, d, hact + off * H, H, T(1), G + L.expert_w2(e) + lo * H, H);
      }
    });
  } else {
    // Device form: expert after expert, GEMMs over all its kept rows from the host, the per-row
    // work element-wise, and each weight gradient one GEMM over the expert's rows.
    for (int64 e = 0; e < E; ++e) {
      const int64 b = counts[e], rows = counts[E + 1 + e], en = b + rows;
      if (rows == 0) continue;
      detail::gather_rows_on<B>(dy, dyg, order, b, en, K, d);
      B::gemm(false, false, rows, H, d, T(1), dyg + b * d, d, P + L.expert_w2(e), H, T(0), dh + b * H, H);
      detail::expert_rows_backward_on<B>(b, rows, order, gates, hact, dh, dyg, dgate, H, d);
      activation_backward<B>(act, hpre + b * H1, dh + b * H, dhp + b * H1, rows, H);
      B::gemm(false, false, rows, d, H1, T(1), dhp + b * H1, H1, P + L.expert_w1(e), d, T(0), dxg + b * d, d);
      detail::gather_rows_on<B>(x, xg, order, b, en, K, d);
      B::gemm(true, false, H1, d, rows, T(1), dhp + b * H1, H1, xg + b * d, d, T(1), G + L.expert_w1(e), d);
      B::gemm(true, false, d, H, rows, T(1), dyg + b * d, d, hact + b * H, H, T(1), G + L.expert_w2(e), H);
    }
  }

  detail::combine_rows<B>(N, K, d, a.expert, a.pos, a.offset, a.kept, w.dxg, dx, !s.shared_expert, [] LOOPSCALE_HD(int64) { return T(1); });
  route_backward<B>(s, N, x, P + L.router, a.logits, a.scores, a.lse, a.expert, a.gates, a.pos, a.offset, a.kept, dgate,
                    stats, w.dlogits, dx, G + L.router, true);
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
