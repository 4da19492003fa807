// JSON form of a ModelSpec and of its accounting (nlohmann-json), for configs, sweep plans,
// checkpoints and `loopscale account --json`. Reading is strict: an unknown enum name is an error.
#pragma once

#include <nlohmann/json.hpp>

#include "loopscale/account/account.hpp"
#include "loopscale/arch/spec.hpp"

namespace loopscale {

NLOHMANN_JSON_SERIALIZE_ENUM(Activation, {{Activation::relu2, "relu2"}, {Activation::gelu, "gelu"}, {Activation::swiglu, "swiglu"}})

inline void to_json(nlohmann::json& j, const Inject& i) { j = std::string(to_string(i)); }
inline void from_json(const nlohmann::json& j, Inject& i) {
  const std::string s = j.get<std::string>();
  for (Inject k : {Inject::none, Inject::linear, Inject::additive, Inject::passthrough, Inject::hyper})
    if (to_string(k) == s) { i = k; return; }
  throw spec_error("spec: unknown inject '" + s + "' (none, linear, additive, passthrough, hyper)");
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(AttentionSpec, heads, head_dim, kv_heads, rope, qk_norm)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(FfnSpec, act, mult_num, mult_den, hidden, experts, top_k, shared_expert)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LayerSpec, attn, ffn)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(StackSpec, layers, layer)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(InjectSpec, kind, lanes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RecurSpec, block, r, inject, bptt)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ModelSpec, d_model, vocab, vocab_multiple, prelude, recur, coda)

// The accounting in the layout of `loopscale account --json` (all counts are integers).
inline nlohmann::json accounting_json(const Accounting& a) {
  const ParamCounts& p = a.params;
  return {{"effective_depth", a.effective_depth},
          {"seq_len", a.seq_len},
          {"convention", std::string(to_string(a.convention))},
          {"params",
           {{"embedding", p.embedding}, {"unembedding", p.unembedding}, {"once", p.once}, {"rec", p.rec},
            {"non_embedding", p.non_embedding}, {"total", p.total}, {"active", p.active},
            {"unrolled", p.unrolled}, {"once_active", p.once_active}, {"rec_active", p.rec_active}}},
          {"flops_per_token", {{"forward", a.flops_per_token.forward}, {"train", a.flops_per_token.train}}}};
}

}  // namespace loopscale
