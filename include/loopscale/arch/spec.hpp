// The literal model spec: the single description of an architecture that every part of loopscale
// reads. Compile-time types (layers.hpp, stacks.hpp, model.hpp) produce one of these as a constexpr
// value; a sweep builds the same struct at run time. Accounting, training and sweeps consume only
// this struct, so static and dynamic widths share one code path.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

namespace loopscale {

using int64 = std::int64_t;

// Marks a width or vocabulary that is chosen at run time (by a sweep) instead of in the type.
inline constexpr int64 dynamic = -1;
// Recurrences that receive gradients: 0 = all of them (full BPTT), -1 = ceil(r / 2) (the paper's
// truncated BPTT); any positive k <= r = exactly the last k.
inline constexpr int64 full_bptt = 0;
inline constexpr int64 half_bptt = -1;

enum class Activation : std::uint8_t { relu2, gelu, swiglu };
enum class Inject : std::uint8_t { none, linear, additive, passthrough, hyper };

// Every error a spec can have. Thrown at run time; at compile time a throw inside a constexpr
// evaluation stops compilation at the throw, whose line carries the message.
struct spec_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct AttentionSpec {
  int64 heads = 0;     // 0: derived as d_model / head_dim
  int64 head_dim = 0;  // 0: derived as d_model / heads; both 0: head_dim 128 (the paper's)
  int64 kv_heads = 0;  // 0: same as heads (no grouping)
  bool rope = true;
  bool qk_norm = true;  // parameter-free, as in the paper
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
};

struct LayerSpec {
  AttentionSpec attn{};
  FfnSpec ffn{};
};

struct StackSpec {
  int64 layers = 0;
  LayerSpec layer{};
};

struct InjectSpec {
  Inject kind = Inject::none;
  int64 lanes = 0;  // hyperconnections only
};

struct RecurSpec {
  StackSpec block{};
  int64 r = 1;
  InjectSpec inject{};
  int64 bptt = full_bptt;
};

struct ModelSpec {
  int64 d_model = 0;
  int64 vocab = 0;
  int64 vocab_multiple = 64;  // the embedding tables are padded to a multiple of this
  StackSpec prelude{};
  RecurSpec recur{};
  StackSpec coda{};
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
  return m.prelude.layers + m.recur.block.layers * m.recur.r + m.coda.layers;
}

constexpr std::string_view to_string(Activation a) {
  switch (a) {
    case Activation::relu2: return "relu2";
    case Activation::gelu: return "gelu";
    case Activation::swiglu: return "swiglu";
  }
  return "?";
}
constexpr std::string_view to_string(Inject i) {
  switch (i) {
    case Inject::none: return "none";
    case Inject::linear: return "linear";
    case Inject::additive: return "additive";
    case Inject::passthrough: return "passthrough";
    case Inject::hyper: return "hyper";
  }
  return "?";
}

// ---- validation ------------------------------------------------------------------------------
// One function decides what a valid spec is, for the compile-time types and the command line alike.

namespace detail {
// Not constexpr: reaching it during constant evaluation stops compilation at the calling line,
// which carries the message.
[[noreturn]] inline void fail(const char* msg) { throw spec_error(msg); }

constexpr void check_layer(const LayerSpec& l, int64 d) {
  const AttentionSpec& a = l.attn;
  if (a.heads < 0 || a.head_dim < 0 || a.kv_heads < 0) fail("attention: heads, head_dim and kv_heads must not be negative");
  if (a.heads > 0 && a.head_dim == 0 && d % a.heads != 0) fail("attention: d_model must be divisible by heads");
  if (a.heads == 0 && d % (a.head_dim > 0 ? a.head_dim : 128) != 0)
    fail("attention: d_model must be divisible by head_dim (128 unless given)");
  const int64 h = attn_heads(a, d);
  if (h < 1) fail("attention: needs at least one head");
  if (attn_kv_heads(a, d) > h || h % attn_kv_heads(a, d) != 0) fail("attention: kv_heads must divide heads");
  if (a.rope && attn_head_dim(a, d) % 2 != 0) fail("attention: RoPE needs an even head_dim");
  const FfnSpec& f = l.ffn;
  if (f.hidden < 0) fail("mlp: hidden width must not be negative");
  if (f.hidden == 0 && (f.mult_num < 1 || f.mult_den < 1)) fail("mlp: expansion must be positive");
  if (ffn_hidden(f, d) < 1) fail("mlp: hidden width must be at least 1");
  if (f.experts < 0) fail("moe: experts must be at least 1");
  if (f.experts == 0 && (f.top_k != 0 || f.shared_expert)) fail("moe: top_k and shared_expert need experts >= 1");
  if (f.experts > 0 && f.top_k < 1) fail("moe: top_k must be at least 1");
  if (f.experts > 0 && f.top_k > f.experts) fail("moe: top_k must not exceed experts");
}
}  // namespace detail

// Throws spec_error naming the first problem; in a constant expression, fails compilation there.
constexpr void validate(const ModelSpec& m) {
  using detail::fail;
  if (m.d_model < 1) fail("spec: d_model must be positive");
  if (m.vocab < 1) fail("spec: vocab must be positive");
  if (m.vocab_multiple < 1) fail("spec: vocab_multiple must be positive");
  if (m.prelude.layers < 0 || m.coda.layers < 0 || m.recur.block.layers < 0)
    fail("spec: layer counts must not be negative");
  if (m.recur.r < 1) fail("recur: r must be at least 1");
  if (m.recur.r > 1 && m.recur.block.layers < 1) fail("recur: r > 1 needs a recur block of at least one layer");
  if (m.recur.bptt < half_bptt) fail("recur: bptt must be a positive number of recurrences (or full/half)");
  if (m.recur.bptt > m.recur.r) fail("recur: bptt must not exceed r");
  if (m.recur.inject.kind == Inject::none && m.recur.r > 1)
    fail("recur: r > 1 needs an injection (linear, additive, passthrough or hyper)");
  if (m.recur.inject.kind == Inject::hyper && m.recur.inject.lanes < 1)
    fail("recur: hyperconnections need at least one lane");
  if (m.recur.inject.kind != Inject::hyper && m.recur.inject.lanes != 0)
    fail("recur: lanes are only meaningful for hyperconnections");
  if (effective_depth(m) < 1) fail("spec: the model needs at least one layer");
  if (m.prelude.layers > 0) detail::check_layer(m.prelude.layer, m.d_model);
  if (m.recur.block.layers > 0) detail::check_layer(m.recur.block.layer, m.d_model);
  if (m.coda.layers > 0) detail::check_layer(m.coda.layer, m.d_model);
}

// The same check as a value, for code that prefers not to catch.
inline std::string validation_error(const ModelSpec& m) {
  try {
    validate(m);
  } catch (const spec_error& e) {
    return e.what();
  }
  return {};
}

}  // namespace loopscale
