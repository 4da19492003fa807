// Layer types. Each is a small value whose sizes are static (template arguments) or dynamic (the
// argument `dynamic`, the value held in the object); `spec()` gives its piece of the ModelSpec.
// Widths stay out of the layer (they come from the model), so one layer type serves every width.
//
// The static_asserts here and the run-time spec checker (spec/spec.hpp) speak the same sentences
// (spec/faults.hpp): a layer that is wrong in its type fails to compile with the sentence that a
// dynamic one throws.
#pragma once

#include "loopscale/arch/size.hpp"

namespace loopscale {

// Causal multi-head attention. Give Heads, or HeadDim, or neither (head dim 128, the paper's);
// KvHeads < Heads groups the key/value heads.
template <int64 Heads = 0, int64 HeadDim = 0, int64 KvHeads = 0, bool Rope = true, bool QkNorm = true>
struct Attention {
  static_assert((Heads == dynamic || Heads >= 0) && (HeadDim == dynamic || HeadDim >= 0) &&
                    (KvHeads == dynamic || KvHeads >= 0),
                LOOPSCALE_MSG_ATTN_NEGATIVE);
  static_assert(KvHeads == dynamic || Heads == dynamic || KvHeads == 0 || Heads == 0 || Heads % KvHeads == 0,
                LOOPSCALE_MSG_ATTN_KV_DIVIDE);
  static constexpr bool is_static = Heads != dynamic && HeadDim != dynamic && KvHeads != dynamic;
  [[no_unique_address]] Size<Heads> heads{};
  [[no_unique_address]] Size<HeadDim> head_dim{};
  [[no_unique_address]] Size<KvHeads> kv_heads{};
  constexpr AttentionSpec spec() const { return {heads.get(), head_dim.get(), kv_heads.get(), Rope, QkNorm}; }
};
template <int64 H, int64 Q, int64 KV, bool R, bool N>
struct kind_of<Attention<H, Q, KV, R, N>> {
  using type = kinds::attention;
};

// Dense MLP with hidden width d_model * MultNum / MultDen.
template <Activation Act = Activation::relu2, int64 MultNum = 4, int64 MultDen = 1>
struct Mlp {
  static_assert(MultNum >= 1 && MultDen >= 1, LOOPSCALE_MSG_MLP_EXPANSION);
  static constexpr bool is_static = true;
  constexpr FfnSpec spec() const { return {Act, MultNum, MultDen, 0, 0, 0, false}; }
};
template <Activation A, int64 N, int64 D>
struct kind_of<Mlp<A, N, D>> {
  using type = kinds::ffn;
};

// Mixture of E routed experts, top-K routing, router weights d x E. Each expert is an MLP of hidden
// width ExpertHidden (0: 4 d_model); Shared adds one always-on expert of the same shape.
// E, K and ExpertHidden may be `dynamic`: MoE<dynamic, 2>{.experts = {8}}.
template <int64 E, int64 K, int64 ExpertHidden = 0, bool Shared = false, Activation Act = Activation::relu2>
struct MoE {
  static_assert(E == dynamic || E >= 1, LOOPSCALE_MSG_MOE_EXPERTS);
  static_assert(K == dynamic || K >= 1, LOOPSCALE_MSG_MOE_TOPK);
  static_assert(K == dynamic || E == dynamic || K <= E, LOOPSCALE_MSG_MOE_TOPK_EXCEEDS);
  static_assert(ExpertHidden == dynamic || ExpertHidden >= 0, LOOPSCALE_MSG_MLP_HIDDEN_NEGATIVE);
  static constexpr bool is_static = E != dynamic && K != dynamic && ExpertHidden != dynamic;
  [[no_unique_address]] Size<E> experts{};
  [[no_unique_address]] Size<K> top_k{};
  [[no_unique_address]] Size<ExpertHidden> hidden{};
  constexpr FfnSpec spec() const { return {Act, 4, 1, hidden.get(), experts.get(), top_k.get(), Shared}; }
};
template <int64 E, int64 K, int64 H, bool S, Activation A>
struct kind_of<MoE<E, K, H, S, A>> {
  using type = kinds::ffn;
};

namespace detail {
// K <= E of a MoE<E, K> read off its template arguments (without instantiating it), so that Layer
// can say so before anything inside it is instantiated.
template <class F>
inline constexpr bool moe_topk_fits = true;
template <int64 E, int64 K, int64 H, bool S, Activation A>
inline constexpr bool moe_topk_fits<MoE<E, K, H, S, A>> = K == dynamic || E == dynamic || K <= E;
}  // namespace detail

// One transformer layer: pre-norm attention then pre-norm MLP (or MoE), each with a residual.
template <class Attn = Attention<>, class Ffn = Mlp<>>
struct Layer {
  static_assert(is_kind<Attn, kinds::attention>,
                "Layer<Attn, Ffn>: the first argument must be an Attention<...> (did you swap Attn and Ffn?)");
  static_assert(is_kind<Ffn, kinds::ffn>, "Layer<Attn, Ffn>: the second argument must be an Mlp<...> or a MoE<E, K>");
  static_assert(detail::moe_topk_fits<Ffn>, LOOPSCALE_MSG_MOE_TOPK_EXCEEDS);
  static constexpr bool is_static = Attn::is_static && Ffn::is_static;
  [[no_unique_address]] Attn attn{};
  [[no_unique_address]] Ffn ffn{};
  constexpr LayerSpec spec() const { return {attn.spec(), ffn.spec()}; }
  constexpr void append_to(std::vector<LayerSpec>& out) const { out.push_back(spec()); }
};
template <class A, class F>
struct kind_of<Layer<A, F>> {
  using type = kinds::layer;
};

}  // namespace loopscale
