// The accounting in the layout of `loopscale account --json` (all counts are integers).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "loopscale/account/account.hpp"

namespace loopscale {

inline nlohmann::json accounting_json(const Accounting& a) {
  const ParamCounts& p = a.params;
  return {{"effective_depth", a.effective_depth},
          {"seq_len", a.seq_len},
          {"convention", std::string(to_string(a.convention))},
          {"params",
           {{"embedding", p.embedding}, {"unembedding", p.unembedding}, {"once", p.once}, {"rec", p.rec},
            {"non_embedding", p.non_embedding}, {"total", p.total}, {"active", p.active},
            {"unrolled", p.unrolled}, {"unrolled_active", p.unrolled_active}, {"once_active", p.once_active}, {"rec_active", p.rec_active}, {"inject", p.inject}}},
          {"flops_per_token", {{"forward", a.flops_per_token.forward}, {"train", a.flops_per_token.train}}}};
}

}  // namespace loopscale
