// JSON form of a ModelSpec (nlohmann-json), for configs, sweep plans, checkpoints and
// `loopscale account --json`. Reading is strict: an unknown enum name is an error.
//
// A stack whose layers are all alike is written as {"layers": N, "layer": {...}} (the form every
// file had before stacks could mix layers, so those files still read); a mixed stack as
// {"layers": [{...}, {...}, ...]}, one object per layer in the order they run. Both forms read.
// A recurrence without "state_norm" is a file from before the paper's state norm and
// hyperconnections; it reads as the model it was (see from_json of RecurSpec).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "loopscale/spec/limits.hpp"
#include "loopscale/spec/spec.hpp"
#include "loopscale/util/json_number.hpp"
#include "loopscale/util/json_parse.hpp"

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

namespace detail {
// Reading is strict about field names too: a misspelt key ("qknorm") would otherwise be ignored
// and the model built with the default, silently.
inline void only_fields(const nlohmann::json& j, const char* what, std::initializer_list<const char*> fields) {
  if (!j.is_object()) throw spec_error(concat("spec: ", what, " must be an object, got ", json_brief(j)));
  for (const auto& [k, v] : j.items()) {
    bool known = false;
    std::string list;
    for (const char* f : fields) {
      known = known || k == f;
      list += (list.empty() ? "" : ", ") + std::string(f);
    }
    if (!known) throw spec_error(concat("spec: unknown ", what, " field '", k, "' (", list, ")"));
  }
}
// Every integer field is read with get<int64>(), a static_cast of a JSON float: "d_model": 256.5
// would count as 256 and 1e300 is undefined. So the integer fields of an object are checked first.
inline void whole_fields(const nlohmann::json& j, const char* what, std::initializer_list<const char*> fields) {
  for (const char* f : fields)
    if (j.contains(f) && !json_whole<int64>(j.at(f)))
      throw spec_error(concat("spec: ", what, " field '", f, "' must be a whole number that fits in 64 bits, got ", json_brief(j.at(f))));
}
// A number, string or true/false field of another kind than the same field of `defaults` (the
// type's default, as JSON): "d_model": "512", "act": 5 or "rope": 1 failed in nlohmann's get as
// "type must be number, but is string", naming no field. Said as a train config says it (json_kind,
// util/json_parse.hpp). An object field (a stack, "recur", "attn") is checked by its own reader.
inline void same_kinds(const nlohmann::json& j, const char* what, const nlohmann::json& defaults) {
  for (const auto& [k, v] : j.items())
    if (defaults.contains(k) && !defaults.at(k).is_structured() && std::string_view(json_kind(defaults.at(k))) != json_kind(v))
      throw spec_error(concat("spec: ", what, " field '", k, "' must be ", json_kind(defaults.at(k)), ", not ", json_brief(v)));
}
// A default LayerSpec as JSON, for same_kinds (defined below, once LayerSpec has its to_json).
inline nlohmann::json layer_defaults();
// A layer object and its attn and ffn objects.
inline void check_layer_fields(const nlohmann::json& j) {
  only_fields(j, "layer", {"attn", "ffn"});
  const nlohmann::json defaults = layer_defaults();
  same_kinds(j, "layer", defaults);
  if (j.contains("attn")) {
    only_fields(j.at("attn"), "attn", {"heads", "head_dim", "kv_heads", "rope", "qk_norm"});
    same_kinds(j.at("attn"), "attn", defaults.at("attn"));
    whole_fields(j.at("attn"), "attn", {"heads", "head_dim", "kv_heads"});
  }
  if (j.contains("ffn")) {
    only_fields(j.at("ffn"), "ffn", {"act", "mult_num", "mult_den", "hidden", "experts", "top_k", "shared_expert"});
    same_kinds(j.at("ffn"), "ffn", defaults.at("ffn"));
    whole_fields(j.at("ffn"), "ffn", {"mult_num", "mult_den", "hidden", "experts", "top_k"});
  }
}
}  // namespace detail

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(AttentionSpec, heads, head_dim, kv_heads, rope, qk_norm)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(FfnSpec, act, mult_num, mult_den, hidden, experts, top_k, shared_expert)
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(LayerSpec, attn, ffn)

inline nlohmann::json detail::layer_defaults() { return LayerSpec{}; }

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
    for (const nlohmann::json& l : n) detail::check_layer_fields(l);
    s.layers = n.get<std::vector<LayerSpec>>();
    return;
  }
  if (j.contains("layer")) detail::check_layer_fields(j.at("layer"));
  if (!n.is_number_integer() || n.get<int64>() < 0)
    throw spec_error(concat("spec: a stack's 'layers' must be a count >= 0 or a list of layers, got ", json_brief(n)));
  // Checked before the layers are made: "layers": 1e12 would otherwise fill the memory (tests/fuzz).
  if (n.get<int64>() > SpecLimits::depth)
    throw spec_error(concat("spec: a stack's 'layers' = ", n.dump(), " is above the limit ", SpecLimits::depth, " (spec/limits.hpp)"));
  s = StackSpec(n.get<int64>(), j.contains("layer") ? j.at("layer").get<LayerSpec>() : LayerSpec{});
}

inline void to_json(nlohmann::json& j, const StateNorm& n) { j = std::string(name_of(n)); }
inline void from_json(const nlohmann::json& j, StateNorm& n) {
  const std::string s = j.get<std::string>();
  const auto v = parse_name<StateNorm>(s);
  if (!v) throw spec_error(concat("spec: unknown state_norm '", s, "' (", name_choices<StateNorm>(), ")"));
  n = *v;
}

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(InjectSpec, kind, lanes)

// The recurrence is always written with its state_norm. A file without one was written before the
// field existed, when loopscale had one placement of the recurrence norm and one form of
// hyperconnections; it reads as the model it described: state_norm after_loop, and "hyper" as the
// shared form (hyper_shared). So checkpoints, run configs and plans written earlier keep their
// meaning; only a spec written with the field gets today's defaults.
inline void to_json(nlohmann::json& j, const RecurSpec& r) {
  j = {{"block", r.block}, {"r", r.r}, {"inject", r.inject}, {"bptt", r.bptt}, {"state_norm", r.state_norm}};
}
inline void from_json(const nlohmann::json& j, RecurSpec& r) {
  detail::only_fields(j, "recur", {"block", "r", "inject", "bptt", "state_norm"});
  const nlohmann::json kinds = RecurSpec{};
  detail::same_kinds(j, "recur", kinds);
  detail::whole_fields(j, "recur", {"r", "bptt"});
  if (j.contains("inject")) {
    detail::only_fields(j.at("inject"), "inject", {"kind", "lanes"});
    detail::same_kinds(j.at("inject"), "inject", kinds.at("inject"));
    detail::whole_fields(j.at("inject"), "inject", {"lanes"});
  }
  const RecurSpec defaults{};
  r.block = j.value("block", defaults.block);
  r.r = j.value("r", defaults.r);
  r.inject = j.value("inject", defaults.inject);
  r.bptt = j.value("bptt", defaults.bptt);
  if (j.contains("state_norm")) {
    r.state_norm = j.at("state_norm").get<StateNorm>();
  } else {
    r.state_norm = StateNorm::after_loop;
    if (r.inject.kind == Inject::hyper) r.inject.kind = Inject::hyper_shared;
  }
}
inline void to_json(nlohmann::json& j, const ModelSpec& m) {
  j = {{"d_model", m.d_model}, {"vocab", m.vocab}, {"vocab_multiple", m.vocab_multiple},
       {"prelude", m.prelude}, {"recur", m.recur},  {"coda", m.coda}};
}
inline void from_json(const nlohmann::json& j, ModelSpec& m) {
  detail::only_fields(j, "model", {"d_model", "vocab", "vocab_multiple", "prelude", "recur", "coda"});
  detail::same_kinds(j, "model", ModelSpec{});
  detail::whole_fields(j, "model", {"d_model", "vocab", "vocab_multiple"});
  const ModelSpec defaults{};
  m.d_model = j.value("d_model", defaults.d_model);
  m.vocab = j.value("vocab", defaults.vocab);
  m.vocab_multiple = j.value("vocab_multiple", defaults.vocab_multiple);
  m.prelude = j.value("prelude", defaults.prelude);
  m.recur = j.value("recur", defaults.recur);
  m.coda = j.value("coda", defaults.coda);
}

}  // namespace loopscale
