// The whole static accounting of a model at one sequence length: what `loopscale account` prints
// and what static checks compare.
#pragma once

#include "loopscale/account/flops.hpp"
#include "loopscale/account/params.hpp"

namespace loopscale {

struct Accounting {
  int64 effective_depth = 0;
  int64 seq_len = 0;
  Convention convention = Convention::paper;
  ParamCounts params{};
  FlopCounts flops_per_token{};
};

constexpr Accounting account(const ModelSpec& m, int64 seq_len, Convention c = Convention::paper) {
  Accounting a;
  a.effective_depth = effective_depth(m);
  a.seq_len = seq_len;
  a.convention = c;
  a.params = count_params(m);
  a.flops_per_token = count_flops(m, seq_len, c);
  return a;
}

}  // namespace loopscale
