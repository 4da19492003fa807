// The small looped model the scoring and generation tests share, and random token sequences over
// its vocabulary.
#pragma once

#include <cstdint>
#include <vector>

#include "loopscale/spec/spec.hpp"
#include "loopscale/util/random.hpp"

namespace loopscale::eval::test {

inline constexpr int64 vocab = 37;  // padded to 40: the padding columns must stay out of every score

// Prelude 1, a shared block of 2 layers run r times, coda 1; d 16, 2 heads.
inline ModelSpec looped(int64 r, Inject inj, int64 lanes = 0, StateNorm norm = StateNorm::per_recurrence) {
  ModelSpec m;
  m.d_model = 16;
  m.vocab = vocab;
  m.vocab_multiple = 8;
  LayerSpec l;
  l.attn.heads = 2;
  l.ffn.mult_num = 2;
  m.prelude = {1, l};
  m.coda = {1, l};
  m.recur.block = {2, l};
  m.recur.r = r;
  m.recur.inject = {inj, lanes};
  m.recur.state_norm = norm;
  return m;
}

inline std::vector<std::int32_t> random_tokens(int64 n, std::uint64_t seed) {
  SplitMix64 r{seed};
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  for (auto& v : t) v = static_cast<std::int32_t>(r.next() % vocab);
  return t;
}

}  // namespace loopscale::eval::test
