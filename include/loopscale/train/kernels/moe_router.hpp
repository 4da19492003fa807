// The router of the mixture-of-experts layer: which experts each token goes to, with what gate, and
// the balancing terms that act on that choice. The expert MLPs themselves are in moe.hpp.
//
//   z = x Wr^T (N x E)            logits
//   s = softmax(z) | sigmoid(z)   scores; the gates are taken from s
//   top-K of s + b                selection; b is the aux-loss-free bias (DeepSeek-V3), used only
//                                 here, never in a gate, so it gets no gradient
//   g_k = s_e_k  or  s_e_k / sum_j s_e_j over the K chosen (renormalised)
//
// Ties in the top-K go to the lower expert index (a strict > scan), so the choice is a pure
// function of the scores. Balancing:
//   Switch aux loss   coef * E * sum_e f_e P_e, f_e = share of the step's token slots routed to e
//                     (a count, treated as a constant), P_e = mean balancing probability of e (the
//                     softmax scores, or the sigmoid scores normalised over the E experts)
//   z-loss            coef * mean_t logsumexp(z_t)^2 (ST-MoE), for either score function
//   bias              b_e += rate * sign(mean load - load_e) after the step (moe_update_bias)
// f, P and the z-loss mean are taken over every call of one step (MoeStats): a looped block calls
// its layer r times per step, and balancing has to see the load of all r recurrences together.
// Because f is a constant and only known once the last recurrence has run, the backward of every
// call reads the step's finished statistics.
//
// Grouping: token slots (t, k) are stably sorted by expert with a counting sort, a per-chunk
// histogram, an exclusive scan (Thrust) and a scatter in chunk order. Within an expert the slots
// keep the priority order (k, t): first choices of all tokens before second choices, earlier
// tokens first. With a capacity C the first C slots of each expert run and the rest are dropped
// (their gate contributes nothing; the residual carries the token), as in Switch / GShard.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <thrust/execution_policy.h>
#include <thrust/scan.h>

#include "loopscale/spec/spec.hpp"
#include "loopscale/train/backend/host.hpp"
#include "loopscale/train/moe_routing.hpp"
#include "loopscale/train/kernels/linear.hpp"

namespace loopscale::train::kernels {

using int32 = std::int32_t;

// The routing options (moe_routing.hpp), named here too for the kernels and their tests.
using train::Balance;
using train::MoeRouting;
using train::RouterKind;
using train::validate;

// Shapes and options of one MoE FFN layer.
struct MoeShape {
  int64 d = 0;        // model width
  int64 hidden = 0;   // hidden width of every expert (and of the shared expert)
  int64 experts = 0;  // E
  int64 top_k = 0;    // K
  Activation act = Activation::relu2;
  bool shared_expert = false;
  RouterKind router = RouterKind::softmax;
  bool renormalize = true;         // gates divided by their sum over the K chosen experts
  Balance balance = Balance::none;
  double aux_coef = 0.01;          // Switch aux loss coefficient (balance == aux_loss)
  double bias_rate = 1e-3;         // aux-loss-free bias step (balance == bias)
  double z_coef = 0.0;             // router z-loss coefficient (0: off)
  double capacity_factor = 0.0;    // 0: dropless; > 0: C = ceil(factor * N K / E) slots per expert

  constexpr int64 in_rows() const { return act == Activation::swiglu ? 2 * hidden : hidden; }
  // Slots an expert takes in a call of N tokens. A token picks an expert at most once, so an
  // expert never needs more than N rows; that bound is also the dropless capacity.
  int64 capacity(int64 N) const {
    if (capacity_factor <= 0) return N;
    const double c = std::ceil(capacity_factor * static_cast<double>(N * top_k) / static_cast<double>(experts));
    return std::clamp<int64>(static_cast<int64>(c), 1, N);
  }
};

// The layer an FfnSpec with experts > 0 describes, with default router options.
inline MoeShape moe_shape(const FfnSpec& f, int64 d) {
  MoeShape s;
  s.d = d;
  s.hidden = ffn_hidden(f, d);
  s.experts = f.experts;
  s.top_k = f.top_k;
  s.act = f.act;
  s.shared_expert = f.shared_expert;
  return s;
}

inline MoeShape moe_shape(const FfnSpec& f, int64 d, const MoeRouting& r) {
  MoeShape s = moe_shape(f, d);
  s.router = r.router;
  s.renormalize = r.renormalize;
  s.balance = r.balance;
  s.aux_coef = r.aux_coef;
  s.bias_rate = r.bias_rate;
  s.z_coef = r.z_coef;
  s.capacity_factor = r.capacity_factor;
  return s;
}

// One line per error, as the command line reports them.
inline void validate(const MoeShape& s) {
  if (s.d < 1 || s.hidden < 1) throw spec_error("moe: d and the expert hidden width must be at least 1");
  if (s.experts < 1) throw spec_error("moe: needs at least one expert (E >= 1)");
  if (s.top_k < 1 || s.top_k > s.experts) throw spec_error("moe: top-k must be between 1 and the number of experts");
  if (s.capacity_factor < 0) throw spec_error("moe: capacity factor must be positive (0 = dropless)");
  if (s.aux_coef < 0 || s.bias_rate < 0 || s.z_coef < 0) throw spec_error("moe: balancing coefficients must not be negative");
}

// Balancing statistics summed over the calls of one step. Allocated once (E entries); reset() at
// the start of each step.
struct MoeStats {
  std::vector<double> routed;  // slots routed to each expert (before capacity)
  std::vector<double> kept;    // slots each expert ran (after capacity)
  std::vector<double> prob;    // sum over tokens of each expert's balancing probability
  double tokens = 0, slots = 0, dropped = 0, zsum = 0;  // zsum: sum of logsumexp(z)^2
  int64 calls = 0;

  MoeStats() = default;
  explicit MoeStats(int64 experts)
      : routed(static_cast<std::size_t>(experts)), kept(routed.size()), prob(routed.size()) {}
  void reset() {
    std::fill(routed.begin(), routed.end(), 0.0);
    std::fill(kept.begin(), kept.end(), 0.0);
    std::fill(prob.begin(), prob.end(), 0.0);
    tokens = slots = dropped = zsum = 0;
    calls = 0;
  }
  int64 experts() const { return static_cast<int64>(routed.size()); }
  // this = a * this + other, field by field (a = 1: add; a = -1: other minus this).
  void combine(double a, const MoeStats& o) {
    for (std::size_t e = 0; e < routed.size(); ++e) {
      routed[e] = a * routed[e] + o.routed[e];
      kept[e] = a * kept[e] + o.kept[e];
      prob[e] = a * prob[e] + o.prob[e];
    }
    tokens = a * tokens + o.tokens, slots = a * slots + o.slots, dropped = a * dropped + o.dropped;
    zsum = a * zsum + o.zsum;
    calls = static_cast<int64>(a) * calls + o.calls;
  }
  // Share of the routed slots that went to expert e (sums to 1).
  double load(int64 e) const { return slots > 0 ? routed[e] / slots : 0.0; }
  double drop_rate() const { return slots > 0 ? dropped / slots : 0.0; }
  // max / min routed load; infinity when an expert got nothing.
  double max_min_ratio() const {
    if (routed.empty()) return 1.0;
    const auto [lo, hi] = std::minmax_element(routed.begin(), routed.end());
    return *lo > 0 ? *hi / *lo : std::numeric_limits<double>::infinity();
  }
  // The losses moe_backward differentiates, over everything gathered so far.
  double balance_loss(const MoeShape& s) const {
    if (s.balance != Balance::aux_loss || slots <= 0 || tokens <= 0) return 0.0;
    double acc = 0;
    for (std::size_t e = 0; e < routed.size(); ++e) acc += routed[e] / slots * (prob[e] / tokens);
    return s.aux_coef * static_cast<double>(s.experts) * acc;
  }
  double z_loss(const MoeShape& s) const { return tokens > 0 ? s.z_coef * zsum / tokens : 0.0; }
};

// What one call routed, on its own (the step's figures are in MoeStats).
struct MoeCall {
  int64 tokens = 0, slots = 0, dropped = 0;
  double balance_loss = 0, z_loss = 0;  // of this call's tokens alone
  double drop_rate() const { return slots > 0 ? static_cast<double>(dropped) / static_cast<double>(slots) : 0.0; }
};

// Slots per chunk of the counting sort: large enough that a chunk's histogram is cheap to scan,
// small enough that a few thousand tokens still split over the threads.
inline constexpr int64 moe_group_chunk = 1024;
inline int64 moe_group_chunks(int64 slots) { return std::max<int64>(1, (slots + moe_group_chunk - 1) / moe_group_chunk); }
// int32 scratch the grouping needs: the counting sort's histogram (E per chunk) or, where the
// backend sorts (group_slots below), the sort's keys in and out and the slot ids (3 per slot).
inline int64 moe_group_scratch(int64 experts, int64 slots) { return std::max(experts * moe_group_chunks(slots), 3 * slots); }

// Balancing probability of expert e for token t: the softmax scores, or the sigmoid scores
// normalised over the E experts (so that P sums to 1 either way).
template <class T>
LOOPSCALE_HD inline void balancing_probs(const MoeShape& s, const T* score, T* p) {
  const int64 E = s.experts;
  if (s.router == RouterKind::softmax) {
    for (int64 e = 0; e < E; ++e) p[e] = score[e];
    return;
  }
  T sum = 0;
  for (int64 e = 0; e < E; ++e) sum += score[e];
  for (int64 e = 0; e < E; ++e) p[e] = score[e] / sum;
}

// Logits, scores, logsumexp, selection and gates of N tokens, and the balancing probabilities
// (N x E) when probs is not null. expert and gates are (N x K), slot (t, k) at t * K + k, k in
// decreasing order of s + b. bias may be null.
template <class B, class T>
void route_forward(const MoeShape& s, int64 N, const T* x, const T* Wr, const T* bias, T* logits, T* scores, T* lse,
                   int32* expert, T* gates, T* probs) {
  const int64 E = s.experts, K = s.top_k;
  linear_forward<B>(x, Wr, logits, N, s.d, E);
  const bool soft = s.router == RouterKind::softmax, renorm = s.renormalize;
  B::parallel_for(N, [=] LOOPSCALE_HD(int64 t) {
    const T* z = logits + t * E;
    T* p = scores + t * E;
    T mx = z[0];
    for (int64 e = 1; e < E; ++e) mx = z[e] > mx ? z[e] : mx;
    T sum = 0;
    for (int64 e = 0; e < E; ++e) sum += std::exp(z[e] - mx);
    lse[t] = mx + std::log(sum);
    for (int64 e = 0; e < E; ++e) p[e] = soft ? std::exp(z[e] - mx) / sum : T(1) / (T(1) + std::exp(-z[e]));
    int32* sel = expert + t * K;
    T* g = gates + t * K;
    T chosen = 0;
    for (int64 k = 0; k < K; ++k) {
      // K passes of a strict > scan: equal keys leave the lower index in place.
      int64 best = -1;
      T best_key = 0;
      for (int64 e = 0; e < E; ++e) {
        bool taken = false;
        for (int64 j = 0; j < k; ++j) taken |= sel[j] == e;
        if (taken) continue;
        const T key = bias ? p[e] + bias[e] : p[e];
        if (best < 0 || key > best_key) best = e, best_key = key;
      }
      sel[k] = static_cast<int32>(best);
      g[k] = p[best];
      chosen += p[best];
    }
    if (renorm)
      for (int64 k = 0; k < K; ++k) g[k] /= chosen;
    if (probs) balancing_probs(s, p, probs + t * E);
  });
}

// Priority position j -> slot id (j = k N + t: every token's first choice before any second).
LOOPSCALE_HD inline int64 group_slot_of(int64 j, int64 N, int64 K) { return (j % N) * K + j / N; }

// The first index of the ascending sorted[0, n) whose value is at least v (n if none).
LOOPSCALE_HD inline int64 first_at_least(const int32* sorted, int64 n, int64 v) {
  int64 lo = 0, hi = n;
  while (lo < hi) {
    const int64 mid = lo + (hi - lo) / 2;
    if (sorted[mid] < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// The grouping of group_slots (below) by a stable sort of the slots, in the counting sort's
// priority order, by expert: both sorts are stable over the same sequence, so order, pos, offset
// and kept are the same. Each expert's first row is then a binary search in the sorted keys, and
// pos the inverse of order. scratch: 3 N K ints.
template <class B>
void group_slots_sorted(int64 N, int64 K, int64 E, int64 capacity, const int32* expert, int32* order, int32* pos, int32* offset,
                        int32* kept, int32* scratch) {
  const int64 S = N * K;
  int32 *keys = scratch, *sorted = scratch + S, *slots = scratch + 2 * S;
  B::parallel_for(S, [=] LOOPSCALE_HD(int64 j) {
    const int64 slot = group_slot_of(j, N, K);
    keys[j] = expert[slot];
    slots[j] = static_cast<int32>(slot);
  });
  int bits = 1;  // expert ids are below E: only their low bits need sorting
  while ((int64{1} << bits) < E) ++bits;
  B::sort_pairs(keys, sorted, slots, order, S, bits);
  B::parallel_for(E, [=] LOOPSCALE_HD(int64 e) {
    const int64 b = first_at_least(sorted, S, e), en = first_at_least(sorted, S, e + 1);
    offset[e] = static_cast<int32>(b);
    kept[e] = static_cast<int32>(en - b < capacity ? en - b : capacity);
    if (e == E - 1) offset[E] = static_cast<int32>(S);
  });
  B::parallel_for(S, [=] LOOPSCALE_HD(int64 row) { pos[order[row]] = static_cast<int32>(row); });
}

// Stable counting sort of the N K slots by expert. order (N K) receives slot ids t * K + k, expert
// by expert, each expert's slots in priority order (k, t); offset (E + 1) the start of each
// expert's group; kept (E) how many of its slots run (capacity); pos (N K) the inverse of order,
// the grouped row of each slot. hist: moe_group_scratch ints.
//
// On a backend that sorts (B::sort_pairs, a stable sort of int32 pairs by key: CUDA's radix sort)
// the grouping is that sort instead (group_slots_sorted): the counting sort's loops run one thread
// per chunk of 1,024 slots, which a GPU would run on a few dozen threads.
template <class B>
concept SortsPairs = requires(const int32* keys, int32* out) { B::sort_pairs(keys, out, keys, out, int64{1}, 1); };

template <class B>
void group_slots(int64 N, int64 K, int64 E, int64 capacity, const int32* expert, int32* order, int32* pos, int32* offset,
                 int32* kept, int32* hist) {
  if constexpr (SortsPairs<B>) {
    group_slots_sorted<B>(N, K, E, capacity, expert, order, pos, offset, kept, hist);
    return;
  }
  const int64 S = N * K, P = moe_group_chunks(S);
  // hist[e P + c] = slots of chunk c routed to e; laid out expert-major so that the exclusive scan
  // gives every (expert, chunk) pair its first output position, and the sort is stable.
  B::parallel_for(P, [=] LOOPSCALE_HD(int64 c) {
    for (int64 e = 0; e < E; ++e) hist[e * P + c] = 0;
    const int64 end = std::min(S, (c + 1) * moe_group_chunk);
    for (int64 j = c * moe_group_chunk; j < end; ++j) ++hist[expert[group_slot_of(j, N, K)] * P + c];
  });
  // E P entries (a few dozen): a sequential scan costs less than starting threads. It runs on the
  // backend (single), where hist, offset and kept live.
  B::single([=] LOOPSCALE_HD {
    thrust::exclusive_scan(thrust::seq, hist, hist + E * P, hist);
    for (int64 e = 0; e < E; ++e) offset[e] = hist[e * P];
    offset[E] = static_cast<int32>(S);
    for (int64 e = 0; e < E; ++e) kept[e] = static_cast<int32>(std::min<int64>(offset[e + 1] - offset[e], capacity));
  });
  // Each chunk owns its E cursors, so the scatter needs no atomics.
  B::parallel_for(P, [=] LOOPSCALE_HD(int64 c) {
    const int64 end = std::min(S, (c + 1) * moe_group_chunk);
    for (int64 j = c * moe_group_chunk; j < end; ++j) {
      const int64 slot = group_slot_of(j, N, K);
      const int32 row = hist[expert[slot] * P + c]++;
      order[row] = static_cast<int32>(slot);
      pos[slot] = row;
    }
  });
}

// Adds one call's routing to the step statistics and returns its own figures. pbuf: the balancing
// probabilities route_forward wrote; offset and kept: the host's copy of group_slots' counts
// (detail::host_counts in moe.hpp).
template <class B, class T>
MoeCall route_stats(const MoeShape& s, int64 N, const T* pbuf, const T* lse, const int32* offset, const int32* kept,
                    MoeStats& st) {
  const int64 E = s.experts, K = s.top_k;
  MoeCall c;
  c.tokens = N;
  c.slots = N * K;
  double fp = 0;
  for (int64 e = 0; e < E; ++e) {
    const double pe = B::sum(N, [=] LOOPSCALE_HD(int64 t) { return pbuf[t * E + e]; });
    const int64 routed = offset[e + 1] - offset[e];
    c.dropped += routed - kept[e];
    fp += static_cast<double>(routed) / static_cast<double>(c.slots) * (pe / static_cast<double>(N));
    st.routed[e] += static_cast<double>(routed);
    st.kept[e] += static_cast<double>(kept[e]);
    st.prob[e] += pe;
  }
  const double zsum = B::sum(N, [=] LOOPSCALE_HD(int64 t) { return static_cast<double>(lse[t]) * static_cast<double>(lse[t]); });
  c.balance_loss = s.balance == Balance::aux_loss ? s.aux_coef * static_cast<double>(E) * fp : 0.0;
  c.z_loss = s.z_coef * zsum / static_cast<double>(N);
  st.tokens += static_cast<double>(N);
  st.slots += static_cast<double>(c.slots);
  st.dropped += static_cast<double>(c.dropped);
  st.zsum += zsum;
  st.calls += 1;
  return c;
}

// Host values a kernel reads, in backend memory: the host's own where the backend shares it, else a
// copy in a buffer kept per thread (it grows once).
template <class B>
const double* on_backend(const std::vector<double>& v) {
  if constexpr (B::host_memory) {
    return v.data();
  } else {
    thread_local typename B::template buffer<double> buf;
    if (buf.size() < v.size()) buf = typename B::template buffer<double>(v.size());
    B::upload(buf.data(), v.data(), static_cast<int64>(v.size()));
    return buf.data();
  }
}

// d loss / d logits (N x E) from the gate gradients dgate (N x K; read only for the slots that
// ran: a dropped slot's gate had no effect, so its gradient is 0), the Switch aux loss and the
// z-loss of the step `st`; then dx (+)= dz Wr, dWr += dz^T x.
template <class B, class T>
void route_backward(const MoeShape& s, int64 N, const T* x, const T* Wr, const T* logits, const T* scores, const T* lse,
                    const int32* expert, const T* gates, const int32* pos, const int32* offset, const int32* kept,
                    const T* dgate, const MoeStats& st, T* dlogits, T* dx, T* dWr, bool accumulate_dx) {
  const int64 E = s.experts, K = s.top_k;
  const bool soft = s.router == RouterKind::softmax, renorm = s.renormalize;
  const bool aux = s.balance == Balance::aux_loss && st.slots > 0 && st.tokens > 0;
  // d aux / d P_e(t) = coef E f_e / tokens, the same for every token of the step.
  const double aux_scale = aux ? s.aux_coef * static_cast<double>(E) / st.tokens : 0.0;
  const double inv_slots = st.slots > 0 ? 1.0 / st.slots : 0.0;
  const double zs = st.tokens > 0 ? 2.0 * s.z_coef / st.tokens : 0.0;
  const double* routed = on_backend<B>(st.routed);
  B::parallel_for(N, [=] LOOPSCALE_HD(int64 t) {
    const T* p = scores + t * E;
    const int32* sel = expert + t * K;
    const T* g = gates + t * K;
    T* dz = dlogits + t * E;  // holds d loss / d score until the last step
    for (int64 e = 0; e < E; ++e) dz[e] = T(0);
    const auto dg = [&](int64 k) {
      const int64 slot = t * K + k, e = sel[k];
      return pos[slot] - offset[e] < kept[e] ? dgate[slot] : T(0);
    };
    if (renorm) {
      // g_k = s_k / Z: d/ds_k = (dg_k - sum_j dg_j g_j) / Z.
      T Z = 0, dot = 0;
      for (int64 k = 0; k < K; ++k) Z += p[sel[k]], dot += dg(k) * g[k];
      for (int64 k = 0; k < K; ++k) dz[sel[k]] += (dg(k) - dot) / Z;
    } else {
      for (int64 k = 0; k < K; ++k) dz[sel[k]] += dg(k);
    }
    if (aux) {
      if (soft) {
        for (int64 e = 0; e < E; ++e) dz[e] += T(aux_scale * routed[e] * inv_slots);
      } else {
        // P_e = s_e / S: d/ds_i = (dP_i - sum_e dP_e P_e) / S.
        T S = 0, dot = 0;
        for (int64 e = 0; e < E; ++e) S += p[e];
        for (int64 e = 0; e < E; ++e) dot += T(aux_scale * routed[e] * inv_slots) * p[e] / S;
        for (int64 e = 0; e < E; ++e) dz[e] += (T(aux_scale * routed[e] * inv_slots) - dot) / S;
      }
    }
    // Through the score function.
    if (soft) {
      T dot = 0;
      for (int64 e = 0; e < E; ++e) dot += dz[e] * p[e];
      for (int64 e = 0; e < E; ++e) dz[e] = p[e] * (dz[e] - dot);
    } else {
      for (int64 e = 0; e < E; ++e) dz[e] = dz[e] * p[e] * (T(1) - p[e]);
    }
    // z-loss: d coef lse^2 / dz_e = 2 coef lse softmax(z)_e.
    if (zs > 0) {
      const T c = T(zs) * lse[t];
      for (int64 e = 0; e < E; ++e) dz[e] += c * std::exp(logits[t * E + e] - lse[t]);
    }
  });
  linear_backward<B>(x, Wr, dlogits, dx, dWr, N, s.d, E, accumulate_dx);
}

}  // namespace loopscale::train::kernels
