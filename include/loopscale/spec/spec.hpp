// The literal model spec: the one description of an architecture that every part of loopscale
// reads. The compile-time types of arch/ fold into one of these; a sweep, the command line or a JSON
// file build the same struct at run time. Accounting (account/), training (train/) and sweeps
// consume only this struct, so static and dynamic models share one code path.
//
// A stack (prelude, shared block, coda) is a list of layers, each with its own attention and FFN,
// so dense and MoE layers can alternate or follow each other in any order. Everything here is
// constexpr (std::vector included, C++20): a static model's spec is built, checked and accounted
// while compiling.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "loopscale/spec/faults.hpp"
#include "loopscale/util/names.hpp"
#include "loopscale/util/text.hpp"

namespace loopscale {

using int64 = std::int64_t;

// Marks a size that is chosen at run time instead of in a type (arch/size.hpp).
inline constexpr int64 dynamic = std::numeric_limits<int64>::min();
// Recurrences that receive gradients: 0 = all of them (full BPTT), -1 = ceil(r / 2) (the paper's
// truncated BPTT); any positive k <= r = exactly the last k.
inline constexpr int64 full_bptt = 0;
inline constexpr int64 half_bptt = -1;

enum class Activation : std::uint8_t { relu2, gelu, swiglu };
// hyper: the iso-depth paper's hyperconnections, one set of lane parameters per recurrence;
// hyper_shared: one set for all recurrences (loopscale's earlier form). docs/concepts.md has both.
enum class Inject : std::uint8_t { none, linear, additive, passthrough, hyper, hyper_shared };
// Where the recurrence's RMSNorm (one learnable scale of d_model, shared by every recurrence) is
// applied: per_recurrence, at the end of every recurrence, on the block's output, so each state the
// next recurrence reads is normalised (the paper's, the default); after_loop, once on the state the
// loop leaves, before the coda (loopscale's earlier placement). For r = 1 the two are one model.
enum class StateNorm : std::uint8_t { per_recurrence, after_loop };

constexpr auto names_of(Activation) {
  return make_names<Activation>({{Activation::relu2, "relu2"}, {Activation::gelu, "gelu"}, {Activation::swiglu, "swiglu"}});
}
constexpr auto names_of(Inject) {
  return make_names<Inject>({{Inject::none, "none"},
                             {Inject::linear, "linear"},
                             {Inject::additive, "additive"},
                             {Inject::passthrough, "passthrough"},
                             {Inject::hyper, "hyper"},
                             {Inject::hyper_shared, "hyper-shared"}});
}
constexpr auto names_of(StateNorm) {
  return make_names<StateNorm>({{StateNorm::per_recurrence, "per-recurrence"}, {StateNorm::after_loop, "after-loop"}});
}
// Either form of hyperconnections (both have lanes).
constexpr bool is_hyper(Inject k) { return k == Inject::hyper || k == Inject::hyper_shared; }
constexpr std::string_view to_string(Activation a) { return name_of(a); }
constexpr std::string_view to_string(Inject i) { return name_of(i); }
constexpr std::string_view to_string(StateNorm n) { return name_of(n); }

// Every error a spec can have (faults.hpp has the sentences).
struct spec_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct AttentionSpec {
  int64 heads = 0;     // 0: derived as d_model / head_dim
  int64 head_dim = 0;  // 0: derived as d_model / heads; both 0: head_dim 128 (the paper's)
  int64 kv_heads = 0;  // 0: same as heads (no grouping)
  bool rope = true;
  bool qk_norm = true;  // parameter-free, as in the paper
  friend constexpr bool operator==(const AttentionSpec&, const AttentionSpec&) = default;
};

// A dense MLP or, with experts > 0, a mixture of experts whose experts are MLPs of this shape.
struct FfnSpec {
  Activation act = Activation::relu2;
  int64 mult_num = 4;  // hidden width = d_model * mult_num / mult_den, unless `hidden` > 0
  int64 mult_den = 1;
  int64 hidden = 0;    // absolute hidden width (per expert for MoE)
  int64 experts = 0;   // 0: dense MLP; E >= 1: E routed experts (E = 1 is a routed dense MLP)
  int64 top_k = 0;     // experts per token (MoE only)
  bool shared_expert = false;
  constexpr bool moe() const { return experts > 0; }
  friend constexpr bool operator==(const FfnSpec&, const FfnSpec&) = default;
};

struct LayerSpec {
  AttentionSpec attn{};
  FfnSpec ffn{};
  friend constexpr bool operator==(const LayerSpec&, const LayerSpec&) = default;
};

// A stack of layers, in the order they run.
struct StackSpec {
  std::vector<LayerSpec> layers;

  constexpr StackSpec() = default;
  constexpr explicit StackSpec(std::vector<LayerSpec> l) : layers(std::move(l)) {}
  // n copies of one layer: StackSpec{2, layer}.
  constexpr StackSpec(int64 n, const LayerSpec& layer) {
    for (int64 i = 0; i < n; ++i) layers.push_back(layer);
  }

  constexpr int64 size() const { return static_cast<int64>(layers.size()); }
  constexpr bool empty() const { return layers.empty(); }
  constexpr const LayerSpec& operator[](int64 i) const { return layers[static_cast<std::size_t>(i)]; }
  // Every layer the same (an empty stack is uniform).
  constexpr bool uniform() const {
    for (const LayerSpec& l : layers)
      if (!(l == layers.front())) return false;
    return true;
  }
  // The distinct layers, in order of first appearance.
  constexpr std::vector<LayerSpec> distinct() const {
    std::vector<LayerSpec> out;
    for (const LayerSpec& l : layers) {
      bool seen = false;
      for (const LayerSpec& o : out) seen = seen || o == l;
      if (!seen) out.push_back(l);
    }
    return out;
  }
  friend constexpr bool operator==(const StackSpec&, const StackSpec&) = default;
};

struct InjectSpec {
  Inject kind = Inject::none;
  int64 lanes = 0;  // hyperconnections only
  friend constexpr bool operator==(const InjectSpec&, const InjectSpec&) = default;
};

struct RecurSpec {
  StackSpec block{};
  int64 r = 1;
  InjectSpec inject{};
  int64 bptt = full_bptt;
  StateNorm state_norm = StateNorm::per_recurrence;
  friend constexpr bool operator==(const RecurSpec&, const RecurSpec&) = default;
};

struct ModelSpec {
  int64 d_model = 0;
  int64 vocab = 0;
  int64 vocab_multiple = 64;  // the embedding tables are padded to a multiple of this
  StackSpec prelude{};
  RecurSpec recur{};
  StackSpec coda{};
  friend constexpr bool operator==(const ModelSpec&, const ModelSpec&) = default;
};

// ---- derived quantities, all constexpr -------------------------------------------------------

constexpr int64 ceil_div(int64 a, int64 b) { return (a + b - 1) / b; }

constexpr int64 padded_vocab(const ModelSpec& m) {
  return m.vocab_multiple <= 1 ? m.vocab : ceil_div(m.vocab, m.vocab_multiple) * m.vocab_multiple;
}

constexpr int64 attn_heads(const AttentionSpec& a, int64 d) {
  if (a.heads > 0) return a.heads;
  return d / (a.head_dim > 0 ? a.head_dim : 128);
}
constexpr int64 attn_head_dim(const AttentionSpec& a, int64 d) {
  if (a.head_dim > 0) return a.head_dim;
  return a.heads > 0 ? d / a.heads : 128;
}
constexpr int64 attn_kv_heads(const AttentionSpec& a, int64 d) {
  return a.kv_heads > 0 ? a.kv_heads : attn_heads(a, d);
}
constexpr int64 ffn_hidden(const FfnSpec& f, int64 d) {
  return f.hidden > 0 ? f.hidden : d * f.mult_num / f.mult_den;
}

constexpr int64 bptt_recurrences(const RecurSpec& r) {
  if (r.bptt == full_bptt) return r.r;
  if (r.bptt == half_bptt) return ceil_div(r.r, 2);
  return r.bptt;
}

constexpr int64 effective_depth(const ModelSpec& m) {
  return m.prelude.size() + m.recur.block.size() * m.recur.r + m.coda.size();
}

// Unique (stored) layers: prelude, block (once) and coda.
constexpr int64 unique_layers(const ModelSpec& m) { return m.prelude.size() + m.recur.block.size() + m.coda.size(); }

constexpr bool has_moe(const ModelSpec& m) {
  for (const StackSpec* s : {&m.prelude, &m.recur.block, &m.coda})
    for (const LayerSpec& l : s->layers)
      if (l.ffn.moe()) return true;
  return false;
}

// ---- names of injections and BPTT, as the command line and sweep specs write them -------------

// "linear", "hyper:4", "hyper-shared:2", ...: the kind, with the lane count for hyperconnections.
// The one place these names are made and read (the command line and sweep specs use both).
inline std::string inject_name(const InjectSpec& i) {
  std::string s(name_of(i.kind));
  if (is_hyper(i.kind)) s = concat(s, ':', i.lanes);
  return s;
}

// The inverse of inject_name; nullopt for anything else ("hyper" and "hyper-shared" need ":L",
// L >= 1 lanes).
inline std::optional<InjectSpec> parse_inject(std::string_view s) {
  const std::size_t colon = s.find(':');
  const auto kind = parse_name<Inject>(s.substr(0, colon));
  if (!kind || is_hyper(*kind) != (colon != std::string_view::npos)) return std::nullopt;
  if (!is_hyper(*kind)) return InjectSpec{*kind, 0};
  const std::string k(s.substr(colon + 1));
  if (k.empty() || k.find_first_not_of("0123456789") != std::string::npos || k.size() > 12) return std::nullopt;
  const long long lanes = std::stoll(k);
  if (lanes < 1) return std::nullopt;
  return InjectSpec{*kind, lanes};
}
inline constexpr const char* inject_choices =
    "none, linear, additive, passthrough, hyper:L (the paper's hyperconnections, lane parameters per recurrence) or "
    "hyper-shared:L (one set for all recurrences), L >= 1 lanes";

inline std::string bptt_name(int64 bptt) {
  if (bptt == full_bptt) return "full";
  if (bptt == half_bptt) return "half";
  return std::to_string(bptt);
}
// "full", "half" or a positive count; nullopt for anything else.
inline std::optional<int64> parse_bptt(std::string_view s) {
  if (s == "full") return full_bptt;
  if (s == "half") return half_bptt;
  if (s.empty() || s.find_first_not_of("0123456789") != std::string_view::npos || s.size() > 12) return std::nullopt;
  const long long k = std::stoll(std::string(s));
  if (k < 1) return std::nullopt;
  return k;
}
inline constexpr const char* bptt_choices = "full, half or a positive count of recurrences";

// ---- validation ------------------------------------------------------------------------------
// One function decides what a valid spec is: find_fault. The compile-time checks turn its answer
// into a static_assert with the fault's sentence (arch/model.hpp); validate() into a spec_error.

enum class SpecFault : std::uint8_t {
  none,
#define LOOPSCALE_X(name, msg) name,
  LOOPSCALE_SPEC_FAULTS(LOOPSCALE_X)
#undef LOOPSCALE_X
};

constexpr const char* fault_message(SpecFault f) {
  switch (f) {
#define LOOPSCALE_X(name, msg) \
  case SpecFault::name: return msg;
    LOOPSCALE_SPEC_FAULTS(LOOPSCALE_X)
#undef LOOPSCALE_X
    case SpecFault::none: break;
  }
  return "";
}

// Where a fault is: the stack ("prelude", "recur", "coda"; empty for the model as a whole) and the
// layer's index in it (-1: the stack or model itself).
struct Fault {
  SpecFault what = SpecFault::none;
  const char* stack = "";
  int64 layer = -1;
  constexpr explicit operator bool() const { return what != SpecFault::none; }
};

constexpr SpecFault layer_fault(const LayerSpec& l, int64 d) {
  const AttentionSpec& a = l.attn;
  if (a.heads == dynamic || a.head_dim == dynamic || a.kv_heads == dynamic) return SpecFault::size_not_given;
  if (a.heads < 0 || a.head_dim < 0 || a.kv_heads < 0) return SpecFault::attn_negative;
  if (a.heads > 0 && a.head_dim == 0 && d % a.heads != 0) return SpecFault::attn_heads_divide;
  if (a.heads == 0 && d % (a.head_dim > 0 ? a.head_dim : 128) != 0) return SpecFault::attn_head_dim_divide;
  const int64 h = attn_heads(a, d);
  if (h < 1) return SpecFault::attn_no_head;
  if (attn_kv_heads(a, d) > h || h % attn_kv_heads(a, d) != 0) return SpecFault::attn_kv_divide;
  if (a.rope && attn_head_dim(a, d) % 2 != 0) return SpecFault::attn_rope_odd;
  const FfnSpec& f = l.ffn;
  if (f.hidden == dynamic || f.experts == dynamic || f.top_k == dynamic) return SpecFault::size_not_given;
  if (f.hidden < 0) return SpecFault::mlp_hidden_negative;
  if (f.hidden == 0 && (f.mult_num < 1 || f.mult_den < 1)) return SpecFault::mlp_expansion;
  if (ffn_hidden(f, d) < 1) return SpecFault::mlp_hidden_zero;
  if (f.experts < 0) return SpecFault::moe_experts;
  if (f.experts == 0 && (f.top_k != 0 || f.shared_expert)) return SpecFault::moe_routing_without_experts;
  if (f.experts > 0 && f.top_k < 1) return SpecFault::moe_topk;
  if (f.experts > 0 && f.top_k > f.experts) return SpecFault::moe_topk_exceeds;
  return SpecFault::none;
}

// The first fault of a spec, or none.
constexpr Fault find_fault(const ModelSpec& m) {
  if (m.d_model == dynamic || m.vocab == dynamic || m.recur.r == dynamic || m.recur.bptt == dynamic ||
      m.recur.inject.lanes == dynamic)
    return {SpecFault::size_not_given};
  if (m.d_model < 1) return {SpecFault::d_model};
  if (m.vocab < 1) return {SpecFault::vocab};
  if (m.vocab_multiple < 1) return {SpecFault::vocab_multiple};
  const RecurSpec& rc = m.recur;
  if (rc.r < 1) return {SpecFault::r, "recur"};
  if (rc.r > 1 && rc.block.empty()) return {SpecFault::r_needs_block, "recur"};
  if (rc.bptt < half_bptt || rc.bptt > rc.r) return {SpecFault::bptt, "recur"};
  if (rc.inject.kind == Inject::none && rc.r > 1) return {SpecFault::inject_needed, "recur"};
  if (is_hyper(rc.inject.kind) && rc.inject.lanes < 1) return {SpecFault::hyper_lanes, "recur"};
  if (!is_hyper(rc.inject.kind) && rc.inject.lanes != 0) return {SpecFault::lanes_without_hyper, "recur"};
  if (rc.inject.kind > Inject::hyper_shared) return {SpecFault::inject_kind, "recur"};
  if (rc.state_norm != StateNorm::per_recurrence && rc.state_norm != StateNorm::after_loop)
    return {SpecFault::state_norm, "recur"};
  if (rc.inject.kind == Inject::hyper && bptt_recurrences(rc) < rc.r) return {SpecFault::hyper_truncated, "recur"};
  if (rc.inject.kind == Inject::hyper && rc.state_norm != StateNorm::per_recurrence)
    return {SpecFault::hyper_after_loop, "recur"};
  if (effective_depth(m) < 1) return {SpecFault::no_layers};
  const std::pair<const char*, const StackSpec*> stacks[] = {{"prelude", &m.prelude}, {"recur", &rc.block}, {"coda", &m.coda}};
  for (const auto& [name, s] : stacks)
    for (int64 i = 0; i < s->size(); ++i)
      if (const SpecFault f = layer_fault((*s)[i], m.d_model); f != SpecFault::none) return {f, name, i};
  return {};
}

// "attention: d_model must be divisible by heads (recur layer 1)".
inline std::string fault_text(const Fault& f) {
  std::string s = fault_message(f.what);
  if (f.layer >= 0) s = concat(s, " (", f.stack, " layer ", f.layer, ")");
  return s;
}

// Throws spec_error naming the first problem. (A static model is checked by arch/model.hpp with
// the same sentences as static_asserts.)
constexpr void validate(const ModelSpec& m) {
  if (const Fault f = find_fault(m)) {
    if (std::is_constant_evaluated()) throw spec_error(fault_message(f.what));  // stops compilation here
    throw spec_error(fault_text(f));
  }
}

// The same check as a value, for code that prefers not to catch.
inline std::string validation_error(const ModelSpec& m) {
  const Fault f = find_fault(m);
  return f ? fault_text(f) : std::string();
}

}  // namespace loopscale
