// Stacks of layers: the unshared prelude and coda, the shared block, and its recurrence.
//
// A stack is a list of items, each a Layer or something that expands to layers:
//   Repeat<N, L>             N copies of L
//   Cycle<N, L1, L2, ...>    N layers cycling through L1, L2, ...; Alternate<L1, L2, N> = Cycle<N, L1, L2>
//   Layers<I1, I2, ...>      the items one after another
// Block<I1, I2, ...> is the shared block; Prelude<N, I> and Coda<N, I> are N repetitions of one item
// (Prelude<2> is two default layers, Prelude<1, Layers<A, B>> the layers A then B). The items are
// held in a boost::hana::tuple and folded (hana::for_each) into the spec's list of layers; the
// kinds of the arguments are compared (hana::type_c) to name a misplaced one.
#pragma once

#include <vector>

#include <boost/hana/all_of.hpp>
#include <boost/hana/for_each.hpp>
#include <boost/hana/tuple.hpp>

#include "loopscale/arch/layers.hpp"

namespace loopscale {

namespace detail {
template <class... Items>
inline constexpr bool all_layer_items = decltype(boost::hana::all_of(
    boost::hana::tuple_t<Items...>, [](auto t) { return boost::hana::bool_c<layer_item<typename decltype(t)::type>>; }))::value;

template <class... Items>
inline constexpr bool all_static = (Items::is_static && ...);
}  // namespace detail

#define LOOPSCALE_MSG_NOT_A_LAYER_ITEM(WHERE)                                                                \
  WHERE ": every layer argument must be a Layer<Attn, Ffn>, Repeat<N, L>, Cycle<N, L...>, Alternate<L1, L2, N> " \
        "or Layers<...>; wrap an Attention/Mlp/MoE in Layer<Attention<...>, Mlp<...>>"

template <int64 N, class L>
struct Repeat {
  static_assert(layer_item<L>, LOOPSCALE_MSG_NOT_A_LAYER_ITEM("Repeat<N, L>"));
  static_assert(N == dynamic || N >= 0, "Repeat<N, L>: N (copies) must not be negative");
  static constexpr bool is_static = N != dynamic && L::is_static;
  [[no_unique_address]] Size<N> n{};
  [[no_unique_address]] L layer{};
  constexpr void append_to(std::vector<LayerSpec>& out) const {
    const int64 copies = count_of(n, "the N of Repeat<dynamic, L>");
    for (int64 i = 0; i < copies; ++i) layer.append_to(out);
  }
};
template <int64 N, class L>
struct kind_of<Repeat<N, L>> {
  using type = kinds::layers;
};

template <int64 N, class... Ls>
struct Cycle {
  static_assert(sizeof...(Ls) >= 1, "Cycle<N, L...>: give at least one layer to cycle through");
  static_assert(detail::all_layer_items<Ls...>, LOOPSCALE_MSG_NOT_A_LAYER_ITEM("Cycle<N, L...>"));
  static_assert(N == dynamic || N >= 0, "Cycle<N, L...>: N (layers) must not be negative");
  static constexpr bool is_static = N != dynamic && detail::all_static<Ls...>;
  [[no_unique_address]] Size<N> n{};
  boost::hana::tuple<Ls...> layers{};
  // Layer i is L_(i mod the number of Ls).
  constexpr void append_to(std::vector<LayerSpec>& out) const {
    const int64 count = count_of(n, "the N of Cycle<dynamic, L...>");
    for (int64 i = 0; i < count;)
      boost::hana::for_each(layers, [&](const auto& l) {
        if (i < count) l.append_to(out), ++i;
      });
  }
};
template <int64 N, class... Ls>
struct kind_of<Cycle<N, Ls...>> {
  using type = kinds::layers;
};

// N layers alternating L1, L2, L1, ... (dense and MoE every other layer: GShard, Switch).
template <class L1, class L2, int64 N>
using Alternate = Cycle<N, L1, L2>;

template <class... Items>
struct Layers {
  static_assert(detail::all_layer_items<Items...>, LOOPSCALE_MSG_NOT_A_LAYER_ITEM("Layers<...>"));
  static constexpr bool is_static = detail::all_static<Items...>;
  boost::hana::tuple<Items...> items{};
  constexpr void append_to(std::vector<LayerSpec>& out) const {
    boost::hana::for_each(items, [&](const auto& it) { it.append_to(out); });
  }
};
template <class... Items>
struct kind_of<Layers<Items...>> {
  using type = kinds::layers;
};

// ---- the three stacks ----

template <int64 N = 0, class Item = Layer<>>
struct Prelude {
  static_assert(N == dynamic || N >= 0, "Prelude<N, Layer>: N (layers) must not be negative");
  static_assert(layer_item<Item>, LOOPSCALE_MSG_NOT_A_LAYER_ITEM("Prelude<N, Layer>"));
  static constexpr bool is_static = N != dynamic && Item::is_static;
  [[no_unique_address]] Size<N> n{};
  [[no_unique_address]] Item item{};
  constexpr StackSpec spec() const {
    StackSpec s;
    const int64 copies = count_of(n, "the N of Prelude<dynamic>");
    for (int64 i = 0; i < copies; ++i) item.append_to(s.layers);
    return s;
  }
};
template <int64 N, class I>
struct kind_of<Prelude<N, I>> {
  using type = kinds::prelude;
};

template <int64 N = 0, class Item = Layer<>>
struct Coda {
  static_assert(N == dynamic || N >= 0, "Coda<N, Layer>: N (layers) must not be negative");
  static_assert(layer_item<Item>, LOOPSCALE_MSG_NOT_A_LAYER_ITEM("Coda<N, Layer>"));
  static constexpr bool is_static = N != dynamic && Item::is_static;
  [[no_unique_address]] Size<N> n{};
  [[no_unique_address]] Item item{};
  constexpr StackSpec spec() const {
    StackSpec s;
    const int64 copies = count_of(n, "the N of Coda<dynamic>");
    for (int64 i = 0; i < copies; ++i) item.append_to(s.layers);
    return s;
  }
};
template <int64 N, class I>
struct kind_of<Coda<N, I>> {
  using type = kinds::coda;
};

// The layers whose weights are shared across recurrences: Block<Repeat<4, Layer<>>>,
// Block<Layer<Attention<>, Mlp<>>, Layer<Attention<>, MoE<8, 2>>>, Block<Alternate<D, M, 4>>.
template <class... Items>
struct Block {
  static_assert(detail::all_layer_items<Items...>, LOOPSCALE_MSG_NOT_A_LAYER_ITEM("Block<...>"));
  static constexpr bool is_static = detail::all_static<Items...>;
  boost::hana::tuple<Items...> items{};
  constexpr StackSpec spec() const {
    StackSpec s;
    boost::hana::for_each(items, [&](const auto& it) { it.append_to(s.layers); });
    return s;
  }
};
template <class... Items>
struct kind_of<Block<Items...>> {
  using type = kinds::block;
};

// ---- injections: how the prelude output e re-enters each recurrence with state s ----
// (docs/concepts.md has the update rules.)
template <Inject Kind>
struct InjectOf {
  static constexpr bool is_static = true;
  constexpr InjectSpec spec() const { return {Kind, 0}; }
};
template <Inject I>
struct kind_of<InjectOf<I>> {
  using type = kinds::inject;
};
using NoInject = InjectOf<Inject::none>;              // r = 1 only
using Linear = InjectOf<Inject::linear>;              // u = W [e ; s], W = [I | 0] at init
using Additive = InjectOf<Inject::additive>;          // u = s + e
using Passthrough = InjectOf<Inject::passthrough>;    // u = s
// Hyperconnections with Lanes parallel lane states: the paper's, with lane parameters of their own
// in every recurrence (needs full BPTT and the per-recurrence state norm)...
template <int64 Lanes>
struct Hyper {
  static_assert(Lanes == dynamic || Lanes >= 1, LOOPSCALE_MSG_HYPER_LANES);
  static constexpr bool is_static = Lanes != dynamic;
  [[no_unique_address]] Size<Lanes> lanes{};
  constexpr InjectSpec spec() const { return {Inject::hyper, lanes.get()}; }
};
template <int64 L>
struct kind_of<Hyper<L>> {
  using type = kinds::inject;
};
template <int64 Lanes>
using Hyperconnections = Hyper<Lanes>;
// ...or one set of lane parameters shared by all recurrences.
template <int64 Lanes>
struct HyperShared {
  static_assert(Lanes == dynamic || Lanes >= 1, LOOPSCALE_MSG_HYPER_LANES);
  static constexpr bool is_static = Lanes != dynamic;
  [[no_unique_address]] Size<Lanes> lanes{};
  constexpr InjectSpec spec() const { return {Inject::hyper_shared, lanes.get()}; }
};
template <int64 L>
struct kind_of<HyperShared<L>> {
  using type = kinds::inject;
};

// The block run R times. Bptt: recurrences that get gradients (full_bptt, half_bptt or a count <= R).
// Norm: where the recurrence's RMSNorm goes (StateNorm::per_recurrence, the paper's, or after_loop).
template <class B, int64 R, class I = Linear, int64 Bptt = full_bptt, StateNorm Norm = StateNorm::per_recurrence>
struct Recur {
  static_assert(is_kind<B, kinds::block>,
                "Recur<Block, R, Inject>: the first argument must be a Block<...> (a Prelude or Coda cannot recur)");
  static_assert(R == dynamic || R >= 1, LOOPSCALE_MSG_R);
  static_assert(is_kind<I, kinds::inject>,
                "Recur<Block, R, Inject>: Inject must be NoInject, Linear, Additive, Passthrough, Hyper<Lanes> or "
                "HyperShared<Lanes>");
  static_assert(R == dynamic || R == 1 || !std::is_same_v<I, NoInject>, LOOPSCALE_MSG_INJECT_NEEDED);
  static_assert(Bptt == dynamic || (Bptt >= half_bptt && (R == dynamic || Bptt <= R)), LOOPSCALE_MSG_BPTT);
  static constexpr bool is_static = R != dynamic && Bptt != dynamic && B::is_static && I::is_static;
  [[no_unique_address]] B block{};
  [[no_unique_address]] Size<R> r{};
  [[no_unique_address]] I inject{};
  [[no_unique_address]] Size<Bptt> bptt{};
  constexpr RecurSpec spec() const { return {block.spec(), r.get(), inject.spec(), bptt.get(), Norm}; }
};
template <class B, int64 R, class I, int64 P, StateNorm N>
struct kind_of<Recur<B, R, I, P, N>> {
  using type = kinds::recur;
};

// A model without recurrence (the r = 1 baseline is Recur<Block<Repeat<k, L>>, 1, NoInject>).
using NoRecur = Recur<Block<>, 1, NoInject>;

}  // namespace loopscale
