// Upper limits on a model's sizes, far above any model trained today, under which the accounting's
// int64 arithmetic (parameters, FLOPs per token, training memory) cannot overflow. find_fault
// checks what makes a spec wrong; these check what makes it too large to count, for the readers
// of outside input (a --config's spec, a sweep spec), where the fuzz harnesses of tests/fuzz/ found
// sizes such as d_model = 2^40 overflowing (signed overflow is undefined behaviour).
//
// The bound that matters: a layer's parameters, at most E x 3 x d_model x hidden = 2^8 x 3 x 2^16
// x 2^20 < 2^46, times at most 2^12 layers of effective depth, times the few FLOPs per parameter,
// stays below 2^63; activations are at most 2^26 tokens x 2^12 layers x a few 2^20-wide buffers.
#pragma once

#include <string>
#include <utility>

#include "loopscale/spec/spec.hpp"

namespace loopscale {

struct SpecLimits {
  static constexpr int64 width = int64{1} << 16;        // d_model, heads, head_dim, heads x head_dim
  static constexpr int64 hidden = int64{1} << 20;       // an MLP's or an expert's hidden width
  static constexpr int64 multiplier = int64{1} << 8;    // mult_num, mult_den, experts, top_k, lanes
  static constexpr int64 vocab = int64{1} << 24;        // vocab and vocab_multiple
  static constexpr int64 depth = int64{1} << 12;        // stored layers and effective depth, r
  static constexpr int64 seq_len = int64{1} << 20;
  static constexpr int64 batch_tokens = int64{1} << 26;  // tokens in one (micro-)batch held in memory
};

namespace limits_detail {
inline std::string over(const char* what, int64 v, int64 limit) {
  return what + std::string(" = ") + std::to_string(v) + " is above the limit " + std::to_string(limit) + " (spec/limits.hpp)";
}
}  // namespace limits_detail

// A context length above SpecLimits, as a sentence; empty when there is none (lengths below 1 are
// each reader's to refuse: training needs 2, a FLOP count 1).
inline std::string seq_len_fault(int64 seq_len) {
  return seq_len > SpecLimits::seq_len ? limits_detail::over("seq_len", seq_len, SpecLimits::seq_len) : std::string();
}

// The first size of `m` above SpecLimits, as a sentence; empty when there is none. `m` need not be
// valid (find_fault): negative and zero sizes are left to it.
inline std::string size_fault(const ModelSpec& m) {
  using L = SpecLimits;
  using limits_detail::over;
  if (m.d_model > L::width) return over("d_model", m.d_model, L::width);
  if (m.vocab > L::vocab) return over("vocab", m.vocab, L::vocab);
  if (m.vocab_multiple > L::vocab) return over("vocab_multiple", m.vocab_multiple, L::vocab);
  if (m.recur.r > L::depth) return over("r", m.recur.r, L::depth);
  if (m.recur.inject.lanes > L::multiplier) return over("lanes", m.recur.inject.lanes, L::multiplier);
  const int64 stored = m.prelude.size() + m.recur.block.size() + m.coda.size();
  if (stored > L::depth) return over("layers", stored, L::depth);
  if (effective_depth(m) > L::depth) return over("effective depth", effective_depth(m), L::depth);
  for (const StackSpec* s : {&m.prelude, &m.recur.block, &m.coda})
    for (const LayerSpec& l : s->layers) {
      const AttentionSpec& a = l.attn;
      const FfnSpec& f = l.ffn;
      for (const auto& [what, v] : {std::pair<const char*, int64>{"heads", a.heads}, {"head_dim", a.head_dim}, {"kv_heads", a.kv_heads}})
        if (v > L::width) return over(what, v, L::width);
      if (a.heads > 0 && a.head_dim > 0 && a.heads * a.head_dim > L::width)
        return over("heads x head_dim", a.heads * a.head_dim, L::width);
      for (const auto& [what, v] :
           {std::pair<const char*, int64>{"mult_num", f.mult_num}, {"mult_den", f.mult_den}, {"experts", f.experts}, {"top_k", f.top_k}})
        if (v > L::multiplier) return over(what, v, L::multiplier);
      if (f.hidden > L::hidden) return over("hidden", f.hidden, L::hidden);
      if (f.hidden <= 0 && f.mult_den >= 1 && m.d_model > 0 && f.mult_num > 0 && m.d_model * f.mult_num / f.mult_den > L::hidden)
        return over("hidden (d_model x mult_num / mult_den)", m.d_model * f.mult_num / f.mult_den, L::hidden);
    }
  return {};
}

}  // namespace loopscale
