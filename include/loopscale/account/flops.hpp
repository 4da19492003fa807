// FLOPs per token, forward and training, in a chosen convention (conventions.hpp). A shared block
// is counted once for parameters and r times for FLOPs; with truncated BPTT the recurrences that get
// no backward cost one forward pass only. A norm scale counts as a weight (paper, causal) once per
// application: the recurrence's norm once per recurrence with the per-recurrence state norm, once in
// all with the norm after the loop.
#pragma once

#include "loopscale/account/conventions.hpp"
#include "loopscale/account/params.hpp"

namespace loopscale {

struct FlopCounts {
  int64 forward = 0;  // per token
  int64 train = 0;    // per token: forward + backward
};

namespace detail {

// Forward FLOPs of one layer for one token at context length T.
constexpr int64 layer_forward_flops(const LayerSpec& l, int64 d, int64 T, Convention c) {
  const LayerCounts p = layer_params(l, d);
  const int64 h = attn_heads(l.attn, d), q = attn_head_dim(l.attn, d);
  const int64 hq = h * q;
  switch (c) {
    case Convention::paper: return 2 * p.active() + 4 * hq * T;
    case Convention::causal: return 2 * p.active() + 2 * hq * T;
    case Convention::kaplan: return 2 * (p.attention + p.ffn_active) + 2 * hq * T;
    case Convention::chinchilla:
      // QKV and output projections, logits, softmax, attention-weighted values, dense (or routed
      // experts + router); norms are not counted.
      return 2 * p.attention + 2 * T * hq + 3 * h * T + 2 * T * hq + 2 * p.ffn_active;
  }
  return 0;
}

constexpr int64 stack_forward_flops(const StackSpec& s, int64 d, int64 T, Convention c) {
  int64 sum = 0;
  for (const LayerSpec& l : s.layers) sum += layer_forward_flops(l, d, T, c);
  return sum;
}

// One recurrence's injection. Hyperconnections with L lanes (either form): aggregate the lanes
// (L d), mix them (L^2 d) and broadcast the block's output into them (L d), 2 FLOPs per multiply-add,
// in every convention; this is the paper code's count too ((L^2 + 2L) d "equivalent parameters" per
// recurrence at 6 per weight in training).
constexpr int64 inject_forward_flops(const InjectSpec& i, int64 d, Convention) {
  if (is_hyper(i.kind)) return 2 * i.lanes * d + 2 * i.lanes * i.lanes * d + 2 * i.lanes * d;
  return 2 * inject_params(i, d);
}

// Forward FLOPs of one application of a norm scale of d: a weight in the paper's and the causal
// convention, nothing in Kaplan's and Chinchilla's.
constexpr int64 norm_forward_flops(int64 d, Convention c) {
  return c == Convention::paper || c == Convention::causal ? 2 * d : 0;
}

// The outer norms applied once per token: all three with the recurrence's norm after the loop; the
// embedding's and the final one with the per-recurrence state norm (whose applications are a part
// of every recurrence).
constexpr int64 once_norms(const RecurSpec& rc) { return rc.state_norm == StateNorm::per_recurrence ? outer_norms - 1 : outer_norms; }

// Everything outside the layers: outer norms, lm_head, and (Chinchilla only) the embedding.
constexpr int64 outer_forward_flops(const ModelSpec& m, Convention c) {
  const int64 d = m.d_model, v = padded_vocab(m);
  switch (c) {
    case Convention::paper:
    case Convention::causal: return once_norms(m.recur) * norm_forward_flops(d, c) + 2 * v * d;
    case Convention::kaplan: return 0;
    case Convention::chinchilla: return 2 * v * d + 2 * d * v;
  }
  return 0;
}

}  // namespace detail

constexpr FlopCounts count_flops(const ModelSpec& m, int64 seq_len, Convention c = Convention::paper) {
  validate(m);
  if (seq_len < 1) throw spec_error("flops: seq_len must be at least 1");
  const int64 d = m.d_model;
  const int64 once = detail::stack_forward_flops(m.prelude, d, seq_len, c) +
                     detail::stack_forward_flops(m.coda, d, seq_len, c) + detail::outer_forward_flops(m, c);
  const int64 step = detail::stack_forward_flops(m.recur.block, d, seq_len, c) +
                     detail::inject_forward_flops(m.recur.inject, d, c) +
                     (m.recur.state_norm == StateNorm::per_recurrence ? detail::norm_forward_flops(d, c) : 0);
  const int64 r = m.recur.r, kb = bptt_recurrences(m.recur);
  FlopCounts f;
  f.forward = once + r * step;
  f.train = 3 * once + 3 * kb * step + (r - kb) * step;  // backward = 2 x forward where it runs
  return f;
}

}  // namespace loopscale
