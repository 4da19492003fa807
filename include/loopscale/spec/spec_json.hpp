// JSON form of a ModelSpec (nlohmann-json), for configs, sweep plans, checkpoints and
// `loopscale account --json`. Reading is strict: an unknown enum name is an error.
//
// A stack whose layers are all alike is written as {"layers": N, "layer": {...}} (the form every
// file had before stacks could mix layers, so those files still read); a mixed stack as
// {"layers": [{...}, {...}, ...]}, one object per layer in the order they run. Both forms read.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "loopscale/spec/spec.hpp"

namespace loopscale {

inline void to_json(nlohmann::json& j, const Activation& a) { j = std::string(name_of(a)); }
inline void from_json(const nlohmann::json& j, Activation& a) {
  const std::string s = j.get<std::string>();
  const auto v = parse_name<Activation>(s);
  if (!v) throw spec_error(concat("spec: unknown activation '", s, "' (", name_choices<Activation>(), ")"));
  a = *v;
}
inline void to_json(nlohmann::json& j, const Inject& i) { j = std::string(name_of(i)); }
inline void from_json(const nlohmann::json& j, Inject& i) {
  const std::string s = j.get<std::string>();
  const auto v = parse_name<Inject>(s);
  if (!v) throw spec_error(concat("spec: unknown inject '", s, "' (", name_choices<Inject>(), ")"));
  i = *v;
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(AttentionSpec, heads, head_dim, kv_heads, rope, qk_norm)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(FfnSpec, act, mult_num, mult_den, hidden, experts, top_k, shared_expert)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LayerSpec, attn, ffn)

inline void to_json(nlohmann::json& j, const StackSpec& s) {
  if (s.uniform()) {
    j = {{"layers", s.size()}, {"layer", s.empty() ? LayerSpec{} : s.layers.front()}};
    return;
  }
  j = {{"layers", s.layers}};
}
inline void from_json(const nlohmann::json& j, StackSpec& s) {
  if (!j.is_object()) throw spec_error("spec: a stack must be an object {\"layers\": N, \"layer\": {...}} or {\"layers\": [...]}");
  for (const auto& [k, v] : j.items())
    if (k != "layers" && k != "layer") throw spec_error(concat("spec: unknown stack field '", k, "' (layers, layer)"));
  const nlohmann::json& n = j.contains("layers") ? j.at("layers") : nlohmann::json(0);
  if (n.is_array()) {
    if (j.contains("layer")) throw spec_error("spec: a stack with a list of layers takes no 'layer'");
    s.layers = n.get<std::vector<LayerSpec>>();
    return;
  }
  if (!n.is_number_integer() || n.get<int64>() < 0)
    throw spec_error(concat("spec: a stack's 'layers' must be a count >= 0 or a list of layers, got ", n.dump()));
  s = StackSpec(n.get<int64>(), j.contains("layer") ? j.at("layer").get<LayerSpec>() : LayerSpec{});
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(InjectSpec, kind, lanes)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(RecurSpec, block, r, inject, bptt)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(ModelSpec, d_model, vocab, vocab_multiple, prelude, recur, coda)

}  // namespace loopscale
