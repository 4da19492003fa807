// Training memory of a spec at a batch shape: parameters, gradients, AdamW state and the
// activations the engine keeps for the backward pass. Pure constexpr arithmetic like the rest of
// account/; the training engine (train/model.hpp) lays out its buffers from the same functions, so
// the estimate of the buffers is exact (a test checks it) and what remains to measure is the
// process overhead around them.
//
// Truncated BPTT lowers the activations: only the last k_bwd recurrences keep per-layer
// activations; the forward-only ones reuse one layer's worth of scratch.
#pragma once

#include <cstdint>

#include "loopscale/account/params.hpp"

namespace loopscale {

// Values kept per token by one executed layer for its backward.
// MoE layers keep their hidden activations per routed slot (top_k per token, plus the shared
// expert's per token) and the router's logits, scores, logsumexp and gates (`router`); `index`
// counts the 32-bit integers of the routing (chosen expert, grouped order, slot row: 3 per slot), which are
// not values of the scalar type and so are not part of total().
struct LayerActivations {
  int64 xn1 = 0, rstd1 = 0, qkv_n = 0, qkv = 0, rstd_qk = 0, probs = 0, att = 0, x_mid = 0, xn2 = 0, rstd2 = 0,
        hpre = 0, hact = 0, router = 0, out = 0;
  int64 index = 0;
  constexpr int64 total() const {
    return xn1 + rstd1 + qkv_n + qkv + rstd_qk + probs + att + x_mid + xn2 + rstd2 + hpre + hact + router + out;
  }
};

constexpr int64 qkv_width(const LayerSpec& l, int64 d) {
  return (attn_heads(l.attn, d) + 2 * attn_kv_heads(l.attn, d)) * attn_head_dim(l.attn, d);
}
constexpr int64 mlp_in_width(const LayerSpec& l, int64 d) {
  return (l.ffn.act == Activation::swiglu ? 2 : 1) * ffn_hidden(l.ffn, d);
}

// Per token at context length T. The attention probabilities are h * T values per token (T x T per
// head and sequence): at long contexts they dominate.
constexpr LayerActivations layer_activations(const LayerSpec& l, int64 d, int64 T) {
  LayerActivations a;
  const int64 h = attn_heads(l.attn, d), kv = attn_kv_heads(l.attn, d), q = attn_head_dim(l.attn, d);
  a.xn1 = d;
  a.rstd1 = 1;
  a.qkv_n = qkv_width(l, d);
  a.qkv = qkv_width(l, d);
  a.rstd_qk = h + kv;
  a.probs = h * T;
  a.att = h * q;
  a.x_mid = d;
  a.xn2 = d;
  a.rstd2 = 1;
  a.hpre = mlp_in_width(l, d);
  a.hact = ffn_hidden(l.ffn, d);
  a.out = d;
  if (l.ffn.experts > 0) {
    const int64 top_k = l.ffn.top_k, E = l.ffn.experts, shared = l.ffn.shared_expert ? 1 : 0;
    a.hpre = (top_k + shared) * mlp_in_width(l, d);
    a.hact = (top_k + shared) * ffn_hidden(l.ffn, d);
    a.router = 2 * E + 1 + top_k;
    a.index = 3 * top_k;
  }
  return a;
}

// Values per token of the one workspace every MoE layer shares (gathered rows, expert outputs and
// their gradients, router gradients); 0 for a dense layer.
constexpr int64 moe_workspace(const LayerSpec& l, int64 d) {
  if (l.ffn.experts == 0) return 0;
  const int64 top_k = l.ffn.top_k;
  return 3 * top_k * d + top_k * (ffn_hidden(l.ffn, d) + mlp_in_width(l, d)) + l.ffn.experts + top_k;
}

// Every buffer of the engine, in values (of the training scalar type) per token unless noted.
struct ActivationPlan {
  int64 kept_layers = 0;       // layer executions that keep activations
  int64 kept_recurrences = 0;  // recurrences that get gradients
  int64 forward_only = 0;      // recurrences run forward only
  int64 outer = 0;             // embedding output, outer norms, lm_head logits, per-token losses
  int64 layers = 0;            // kept layers' activations
  int64 recur = 0;             // injection inputs and lane states of the kept recurrences
  int64 scratch = 0;           // one layer's worth for the forward-only recurrences
  int64 workspace = 0;         // gradients of activations during the backward
  int64 per_thread = 0;        // attention's dP (T x T), per thread or per sequence (count_memory), not per token
  int64 index = 0;             // 32-bit routing indices per token (MoE), besides the values above
  constexpr int64 per_token() const { return outer + layers + recur + scratch + workspace; }
};

constexpr ActivationPlan activation_plan(const ModelSpec& m, int64 T) {
  validate(m);
  const int64 d = m.d_model, v = padded_vocab(m);
  const bool hyper = is_hyper(m.recur.inject.kind);
  const int64 lanes = hyper ? m.recur.inject.lanes : 0;
  const int64 r = m.recur.r, k = m.recur.block.size(), kb = bptt_recurrences(m.recur);
  // The state norm: per recurrence, each kept recurrence keeps its normed state and 1/rms (the
  // forward-only ones share one such pair of scratch); after the loop, the norm's output and 1/rms.
  const bool per_recurrence = m.recur.state_norm == StateNorm::per_recurrence;
  const int64 state_norm = d + 1;
  ActivationPlan p;
  p.kept_recurrences = kb;
  p.forward_only = r - kb;
  p.kept_layers = m.prelude.size() + m.coda.size() + kb * k;
  // x0, rstd0, normed x0; start state; (after the loop) rstd and output of the recurrence's norm;
  // final norm output and rstd; logits; losses and logsumexp.
  p.outer = d + 1 + d + (hyper ? lanes * d : d) + (per_recurrence ? 0 : state_norm) + d + 1 + v + 2;
  if (hyper) p.outer += lanes * d + d;  // final lanes, pooled state
  const auto values = [d, T](const StackSpec& s) {
    int64 sum = 0;
    for (const LayerSpec& l : s.layers) sum += layer_activations(l, d, T).total();
    return sum;
  };
  const auto index = [d, T](const StackSpec& s) {
    int64 sum = 0;
    for (const LayerSpec& l : s.layers) sum += layer_activations(l, d, T).index;
    return sum;
  };
  p.layers = values(m.prelude) + values(m.coda) + kb * values(m.recur.block);
  // Block input u (hyper: x), the lanes it read, the normed state.
  p.recur = kb * (d + (hyper ? lanes * d : 0) + (per_recurrence ? state_norm : 0));
  p.index = index(m.prelude) + index(m.coda) + kb * index(m.recur.block);
  if (p.forward_only > 0 && k > 0) {
    // The forward-only recurrences reuse one layer's worth of scratch per distinct layer of the
    // block (one for a uniform block; two for dense and MoE layers alternating).
    const StackSpec distinct{m.recur.block.distinct()};
    p.scratch = values(distinct) + d + (hyper ? 2 * lanes * d : 0) + (per_recurrence ? state_norm : 0);
    p.index += index(distinct);
  }
  // Widest layer of the model for the per-layer gradient buffers.
  int64 C = 0, hq = 0, H = 0, H1 = 0, moe = 0;
  for (const StackSpec* s : {&m.prelude, &m.recur.block, &m.coda})
    for (const LayerSpec& l : s->layers) {
      C = C > qkv_width(l, d) ? C : qkv_width(l, d);
      const int64 a = attn_heads(l.attn, d) * attn_head_dim(l.attn, d);
      hq = hq > a ? hq : a;
      H = H > ffn_hidden(l.ffn, d) ? H : ffn_hidden(l.ffn, d);
      H1 = H1 > mlp_in_width(l, d) ? H1 : mlp_in_width(l, d);
      moe = moe > moe_workspace(l, d) ? moe : moe_workspace(l, d);
    }
  // g, dxn, de, ds, dqkv, datt, dhact, dhpre; hyper: two lane gradients and d(delta).
  p.workspace = 4 * d + C + hq + H + H1 + (hyper ? 2 * lanes * d + d : 0);
  p.workspace += moe;
  p.per_thread = T * T;
  return p;
}

struct MemoryEstimate {
  int64 params = 0;       // bytes
  int64 grads = 0;
  int64 optimizer = 0;    // AdamW first and second moments
  int64 activations = 0;  // every activation and workspace buffer at this batch shape
  int64 tokens = 0;       // input and target token ids
  int64 indices = 0;      // MoE routing indices (32-bit) per token; the grouping's few counters per call are not counted
  int64 total = 0;
};

// Where attention's backward keeps its T x T gradient dP: one matrix per thread (the host's task
// form, a backend whose B::nested_gemm is true) or one per sequence (the device form of
// train/kernels/attention.hpp). An enum, not a bool, so that it cannot slip into the bytes-per-value
// argument after it: a bool passed there once made the trainer's estimate count one byte a value
// on the host and none on a device.
enum class AttentionScratch : std::uint8_t { per_thread, per_sequence };
constexpr AttentionScratch attention_scratch(bool nested_gemm) {
  return nested_gemm ? AttentionScratch::per_thread : AttentionScratch::per_sequence;
}

// Bytes for training `m` on batches of `batch` sequences of `seq_len` tokens with `threads`
// threads, values of `value_bytes` bytes (4: fp32).
constexpr MemoryEstimate count_memory(const ModelSpec& m, int64 batch, int64 seq_len, int64 threads = 2,
                                      AttentionScratch scratch = AttentionScratch::per_thread, int64 value_bytes = 4) {
  const ActivationPlan p = activation_plan(m, seq_len);
  const int64 n = count_params(m).total, tokens = batch * seq_len;
  MemoryEstimate e;
  e.params = n * value_bytes;
  e.grads = n * value_bytes;
  e.optimizer = 2 * n * value_bytes;
  e.activations = (p.per_token() * tokens + p.per_thread * (scratch == AttentionScratch::per_thread ? threads : batch)) * value_bytes;
  e.tokens = 2 * tokens * 4;
  e.indices = p.index * tokens * 4;
  e.total = e.params + e.grads + e.optimizer + e.activations + e.tokens + e.indices;
  return e;
}

// Sequences lane `lane` of `lanes` thread lanes takes of a batch of `batch` (train/thread_lanes.hpp):
// batch / lanes, one more for the first batch % lanes lanes, so lane 0 is never smaller than another.
constexpr int64 lane_sequences(int64 batch, int64 lanes, int64 lane) {
  return batch / lanes + (lane < batch % lanes ? 1 : 0);
}

// count_memory for a batch of `batch` sequences trained in `lanes` thread lanes
// (train/thread_lanes.hpp): each lane a model of lane_sequences(batch, lanes, t) sequences with its
// own activations (attention's scratch for the one thread it runs on), tokens and gradients; the
// parameters and the optimiser's moments once. One lane: count_memory on `threads` threads.
constexpr MemoryEstimate count_lane_memory(const ModelSpec& m, int64 batch, int64 seq_len, int64 threads, int64 lanes,
                                           AttentionScratch scratch = AttentionScratch::per_thread) {
  if (lanes <= 1) return count_memory(m, batch, seq_len, threads, scratch);
  // Two lane sizes at most: batch / lanes + 1 sequences in the first batch % lanes lanes, batch / lanes in the rest.
  const int64 larger = batch % lanes;
  const MemoryEstimate big = count_memory(m, batch / lanes + 1, seq_len, 1, scratch);
  const MemoryEstimate small = count_memory(m, batch / lanes, seq_len, 1, scratch);
  MemoryEstimate e = small;
  e.activations = larger * big.activations + (lanes - larger) * small.activations;
  e.grads = larger * big.grads + (lanes - larger) * small.grads;
  e.tokens = larger * big.tokens + (lanes - larger) * small.tokens;
  e.indices = larger * big.indices + (lanes - larger) * small.indices;
  e.total = e.params + e.grads + e.optimizer + e.activations + e.tokens + e.indices;
  return e;
}

}  // namespace loopscale
