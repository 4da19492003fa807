// The small model specs and token streams of the whole-model gradient checks, shared by the host's
// (tests/train/test_model.cpp) and the CUDA backend's (tests/cuda/gradcheck_device.cu), so both
// check the same models.
#pragma once

#include <cstdint>
#include <vector>

#include "loopscale/spec/spec.hpp"

namespace loopscale::test {

// d 8, vocab 11 padded to 16, 2 heads, a 2x MLP; a prelude and a coda of one layer, a shared block
// of one layer (r = 1) or two, run r times.
inline ModelSpec small_spec(std::int64_t r, Inject inj, std::int64_t lanes = 0, std::int64_t bptt = full_bptt,
                            Activation act = Activation::relu2, std::int64_t kv = 0) {
  ModelSpec m;
  m.d_model = 8;
  m.vocab = 11;
  m.vocab_multiple = 8;  // padded to 16: the padding columns must stay out of the loss
  LayerSpec l;
  l.attn.heads = 2;
  l.attn.kv_heads = kv;
  l.ffn.act = act;
  l.ffn.mult_num = 2;
  m.prelude = {1, l};
  m.coda = {1, l};
  m.recur.block = {r == 1 ? 1 : 2, l};
  m.recur.r = r;
  m.recur.inject = {inj, lanes};
  m.recur.bptt = bptt;
  return m;
}

// The small spec's r = 1 model laid out flat (R1Layout::flat, the paper's baseline): its three
// layers in one block, no prelude or coda.
inline ModelSpec flat_spec() {
  ModelSpec m = small_spec(1, Inject::none);
  m.recur.block = {3, m.recur.block[0]};
  m.prelude = {};
  m.coda = {};
  return m;
}

inline ModelSpec with_norm(ModelSpec m, StateNorm n) {
  m.recur.state_norm = n;
  return m;
}

// The small spec with every FFN an MoE of E experts, top-K, hidden 12.
inline ModelSpec moe_spec(std::int64_t r, std::int64_t E, std::int64_t K, bool shared = false, std::int64_t bptt = full_bptt,
                          Activation act = Activation::relu2) {
  ModelSpec m = small_spec(r, r == 1 ? Inject::none : Inject::linear, 0, bptt, act);
  for (StackSpec* st : {&m.prelude, &m.recur.block, &m.coda})
    for (LayerSpec& l : st->layers) {
      l.ffn.experts = E;
      l.ffn.top_k = K;
      l.ffn.hidden = 12;
      l.ffn.shared_expert = shared;
    }
  return m;
}

// n token ids below vocab from an LCG seeded with `seed`.
inline std::vector<std::int32_t> tokens(std::int64_t n, std::int64_t vocab, std::uint64_t seed) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  std::uint64_t s = seed;
  for (auto& v : t) v = static_cast<std::int32_t>((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33) % vocab;
  return t;
}

}  // namespace loopscale::test
