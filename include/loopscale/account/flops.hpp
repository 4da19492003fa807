// FLOPs per token, forward and training, in a chosen convention (conventions.hpp). A shared block
// is counted once for parameters and r times for FLOPs; with truncated BPTT the recurrences that get
// no backward cost one forward pass only.
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

constexpr int64 inject_forward_flops(const InjectSpec& i, int64 d, Convention c) {
  // Hyperconnections with L lanes: aggregate the lanes (L d), mix them (L^2 d) and broadcast the
  // block's output into them (L d), 2 FLOPs per multiply-add.
  if (c == Convention::chinchilla && i.kind == Inject::hyper)
    return 2 * i.lanes * d + 2 * i.lanes * i.lanes * d + 2 * i.lanes * d;
  return 2 * inject_params(i, d);
}

// Everything outside the layers: outer norms, lm_head, and (Chinchilla only) the embedding.
constexpr int64 outer_forward_flops(const ModelSpec& m, Convention c) {
  const int64 d = m.d_model, v = padded_vocab(m);
  switch (c) {
    case Convention::paper:
    case Convention::causal: return 2 * (outer_norms * d + v * d);
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
                     detail::inject_forward_flops(m.recur.inject, d, c);
  const int64 r = m.recur.r, kb = bptt_recurrences(m.recur);
  FlopCounts f;
  f.forward = once + r * step;
  f.train = 3 * once + 3 * kb * step + (r - kb) * step;  // backward = 2 x forward where it runs
  return f;
}

}  // namespace loopscale
