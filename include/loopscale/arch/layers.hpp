// Compile-time layer types. Each is an empty tag carrying a constexpr piece of the spec; widths stay
// out of the layer (they come from the model) so the same layer serves every width of a sweep.
#pragma once

#include <type_traits>

#include "loopscale/arch/spec.hpp"

namespace loopscale {

// Causal multi-head attention. Give Heads, or HeadDim, or neither (head dim 128, the paper's);
// KvHeads < Heads groups the key/value heads.
template <int64 Heads = 0, int64 HeadDim = 0, int64 KvHeads = 0, bool Rope = true, bool QkNorm = true>
struct Attention {
  static_assert(Heads >= 0 && HeadDim >= 0 && KvHeads >= 0,
                "Attention<Heads, HeadDim, KvHeads>: counts must not be negative (0 means 'derive from d_model')");
  static_assert(KvHeads == 0 || Heads == 0 || Heads % KvHeads == 0,
                "Attention<Heads, HeadDim, KvHeads>: KvHeads must divide Heads");
  static constexpr AttentionSpec spec{Heads, HeadDim, KvHeads, Rope, QkNorm};
};

// Dense MLP with hidden width d_model * MultNum / MultDen.
template <Activation Act = Activation::relu2, int64 MultNum = 4, int64 MultDen = 1>
struct Mlp {
  static_assert(MultNum >= 1 && MultDen >= 1, "Mlp<Act, MultNum, MultDen>: the expansion MultNum / MultDen must be positive");
  static constexpr FfnSpec spec{Act, MultNum, MultDen, 0, 0, 0, false};
};

// Mixture of E routed experts, top-K routing, router weights d x E. Each expert is an MLP of hidden
// width ExpertHidden (0: 4 d_model); Shared adds one always-on expert of the same shape.
template <int64 E, int64 K, int64 ExpertHidden = 0, bool Shared = false, Activation Act = Activation::relu2>
struct MoE {
  static_assert(E >= 1, "MoE<E, K>: E (routed experts) must be at least 1");
  static_assert(K >= 1, "MoE<E, K>: K (experts per token) must be at least 1");
  static_assert(K <= E, "MoE<E, K>: K (experts per token) must not exceed E (routed experts)");
  static_assert(ExpertHidden >= 0, "MoE<E, K, ExpertHidden>: ExpertHidden must not be negative");
  static constexpr FfnSpec spec{Act, 4, 1, ExpertHidden, E, K, Shared};
};

template <class T>
concept attention_type = std::is_same_v<std::remove_cv_t<decltype(T::spec)>, AttentionSpec>;
template <class T>
concept ffn_type = std::is_same_v<std::remove_cv_t<decltype(T::spec)>, FfnSpec>;

// One transformer layer: pre-norm attention then pre-norm MLP (or MoE), each with a residual.
template <class Attn = Attention<>, class Ffn = Mlp<>>
struct Layer {
  static_assert(attention_type<Attn>, "Layer<Attn, Ffn>: the first argument must be an Attention<...>");
  static_assert(ffn_type<Ffn>, "Layer<Attn, Ffn>: the second argument must be an Mlp<...> or MoE<...>");
  static constexpr LayerSpec spec{Attn::spec, Ffn::spec};
};

template <class T>
concept layer_type = std::is_same_v<std::remove_cv_t<decltype(T::spec)>, LayerSpec>;

}  // namespace loopscale
