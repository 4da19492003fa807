// Parameter counts of a spec. Pure constexpr arithmetic: the same numbers at compile time (in a
// static_assert) and at run time (the `loopscale account` command, a sweep plan, the engine's
// buffer sizes).
#pragma once

#include "loopscale/spec/spec.hpp"

namespace loopscale {

// Norms outside the blocks: after the embedding, the recurrence's (at the end of every recurrence or
// once after the loop, RecurSpec::state_norm; one scale either way) and before the lm_head, each a
// learnable scale of d_model, stored once (in `once`). Together with the layers this reproduces the
// published per-width N tables of the iso-depth paper exactly.
inline constexpr int64 outer_norms = 3;

// Parameters of one layer, or summed over a stack of layers.
struct LayerCounts {
  int64 attention = 0;  // Q, K, V, O matrices
  int64 ffn = 0;        // all experts (and router, shared expert) for MoE
  int64 ffn_active = 0; // what one token touches: router + top_k experts + shared expert
  int64 norms = 0;      // two pre-norm scales
  constexpr int64 total() const { return attention + ffn + norms; }
  constexpr int64 active() const { return attention + ffn_active + norms; }
  constexpr LayerCounts& operator+=(const LayerCounts& o) {
    attention += o.attention, ffn += o.ffn, ffn_active += o.ffn_active, norms += o.norms;
    return *this;
  }
};

constexpr int64 mlp_params(const FfnSpec& f, int64 d) {
  const int64 h = ffn_hidden(f, d);
  return (f.act == Activation::swiglu ? 3 : 2) * d * h;
}

constexpr LayerCounts layer_params(const LayerSpec& l, int64 d) {
  LayerCounts p;
  const int64 h = attn_heads(l.attn, d), q = attn_head_dim(l.attn, d), kv = attn_kv_heads(l.attn, d);
  p.attention = d * h * q + 2 * d * kv * q + h * q * d;
  const int64 mlp = mlp_params(l.ffn, d);
  if (l.ffn.experts == 0) {
    p.ffn = p.ffn_active = mlp;
  } else {
    const int64 router = d * l.ffn.experts;
    const int64 shared = l.ffn.shared_expert ? mlp : 0;
    p.ffn = router + l.ffn.experts * mlp + shared;
    p.ffn_active = router + l.ffn.top_k * mlp + shared;
  }
  p.norms = 2 * d;
  return p;
}

// The injection parameters one recurrence applies.
constexpr int64 inject_params(const InjectSpec& i, int64 d) {
  switch (i.kind) {
    case Inject::linear: return 2 * d * d;  // W in R^{d x 2d} acting on [e ; s]
    case Inject::hyper:
    case Inject::hyper_shared: return i.lanes * i.lanes + 2 * i.lanes;  // M (K x K), alpha (K), beta (K)
    default: return 0;
  }
}

// The injection parameters stored: the paper's hyperconnections keep a set per recurrence
// (r (K^2 + 2K)); every other injection one set for all recurrences.
constexpr int64 stored_inject_params(const RecurSpec& rc, int64 d) {
  return (rc.inject.kind == Inject::hyper ? rc.r : 1) * inject_params(rc.inject, d);
}

constexpr LayerCounts stack_params(const StackSpec& s, int64 d) {
  LayerCounts sum;
  for (const LayerSpec& l : s.layers) sum += layer_params(l, d);
  return sum;
}

struct ParamCounts {
  int64 embedding = 0;
  int64 unembedding = 0;
  int64 once = 0;           // non-embedding params run once per token: prelude, coda, outer norms
  int64 rec = 0;            // the shared block plus the injection, counted once
  int64 non_embedding = 0;  // once + rec
  int64 total = 0;          // embedding + unembedding + non_embedding
  int64 active = 0;         // total as one token sees it (MoE: top_k experts and router)
  int64 unrolled = 0;       // once + r * rec (each recurrence's own injection set counted once): the stored parameters of every recurrence
  // once_active + r * rec_active (likewise): the dense model of the same training cost, the
  // looped-MoE paper's N_unroll = N_act + (R - 1) N_loop; equal to unrolled for a dense model.
  int64 unrolled_active = 0;
  // Active counterparts of once and rec, the N_act and N_loop of the looped-MoE law.
  int64 once_active = 0;
  int64 rec_active = 0;
  // The injection's parameters, a part of rec (and of rec_active). Where a law counts them is a
  // convention (account/injection_convention.hpp).
  int64 inject = 0;
};

constexpr ParamCounts count_params(const ModelSpec& m) {
  validate(m);
  const int64 d = m.d_model, v = padded_vocab(m);
  ParamCounts p;
  p.embedding = v * d;
  p.unembedding = v * d;
  const LayerCounts pre = stack_params(m.prelude, d), blk = stack_params(m.recur.block, d), coda = stack_params(m.coda, d);
  const int64 inj = stored_inject_params(m.recur, d);
  p.once = pre.total() + coda.total() + outer_norms * d;
  p.once_active = pre.active() + coda.active() + outer_norms * d;
  p.rec = blk.total() + inj;
  p.rec_active = blk.active() + inj;
  p.inject = inj;
  p.non_embedding = p.once + p.rec;
  p.total = p.embedding + p.unembedding + p.non_embedding;
  p.active = p.embedding + p.unembedding + p.once_active + p.rec_active;
  p.unrolled = p.once + m.recur.r * (blk.total() + inject_params(m.recur.inject, d));
  p.unrolled_active = p.once_active + m.recur.r * (blk.active() + inject_params(m.recur.inject, d));
  return p;
}

}  // namespace loopscale
