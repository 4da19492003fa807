// Iso-depth families as types. A family declares once what a sweep compares (effective depth,
// prelude, coda, the r values, injection, BPTT, the layer and where MoE layers go); its members are
// model types, checked by the static verification of checks.hpp:
//
//   using F = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<384>, Vocab<32064>>;
//   static_assert(require_iso_depth<F::member<1>, F::member<8>>());
//
// A member's layers come from the one builder of family members (spec/family.hpp,
// family_member), the same function the sweep planner, the command line and the law's allocation
// call; `F::spec` is the family's FamilySpec and `F::specs(d)` its members at a run-time width.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "loopscale/arch/checks.hpp"
#include "loopscale/spec/family.hpp"

namespace loopscale {

template <int64... R>
struct Rs {};

// Dense layers everywhere (the default of a family).
struct NoMoE {
  static constexpr MoePlacement placement{};
};

// The FFN of every `Every`-th layer of the scope, after `FirstDense` dense ones, is MoeFfn (a
// MoE<E, K>): MoeEvery<MoE<8, 2>, 2, 1, MoeScope::recur> alternates dense and MoE layers inside the
// shared block, starting dense.
// (Checked where the family uses it, so that a mistake is reported at the user's line.)
template <class MoeFfn, int64 Every = 1, int64 FirstDense = 0, MoeScope Scope = MoeScope::all>
struct MoeEvery {
  using ffn_type = MoeFfn;
  static constexpr MoePlacement placement{Scope, Every, FirstDense};
};

namespace detail {
template <class Moe>
constexpr FfnSpec placed_ffn() {
  if constexpr (requires { typename Moe::ffn_type; }) {
    using F = typename Moe::ffn_type;
    if constexpr (is_kind<F, kinds::ffn> && F::is_static) return F{}.spec();
  }
  return FfnSpec{};
}
}  // namespace detail

namespace detail {
template <int64 RecurrentDepth, int64 R>
struct r_must_divide_recurrent_depth {
  static_assert(R >= 1, LOOPSCALE_MSG_R);
  static_assert(R >= 1 && RecurrentDepth % R == 0, LOOPSCALE_MSG_FAMILY_R_DIVIDES " (the numbers above are that depth and r)");  // member<r> with an r not in Rs
  static constexpr int64 k = R >= 1 ? RecurrentDepth / R : 0;
};

// The N layers of one stack of a family member whose block has BlockLayers layers, from the
// family's builder.
template <class Family, FamilyStack Stack, int64 N, int64 BlockLayers>
struct FamilyLayers {
  static constexpr bool is_static = true;
  constexpr void append_to(std::vector<LayerSpec>& out) const {
    for (int64 i = 0; i < N; ++i) out.push_back(family_layer(Family::spec, Stack, i, BlockLayers));
  }
};
}  // namespace detail
template <class F, FamilyStack S, int64 N, int64 K>
struct kind_of<detail::FamilyLayers<F, S, N, K>> {
  using type = kinds::layers;
};

// All models of effective depth Depth with PreludeN unshared layers, a shared block of
// k = (Depth - PreludeN - CodaN) / r layers run r times, and CodaN unshared layers. The r = 1
// member has no injection; the others use InjectT and Bptt. L is every dense layer; Moe places
// MoE FFNs (NoMoE: none). R1: the r = 1 member split like the others (the default) or flat, Depth
// layers in one block, as the iso-depth paper's code builds its baseline (R1Layout, spec/family.hpp).
template <int64 Depth, int64 PreludeN, int64 CodaN, class RList, class W = Width<dynamic>, class V = Vocab<dynamic>,
          class InjectT = Linear, class L = Layer<>, int64 Bptt = full_bptt, class Moe = NoMoE, R1Layout R1 = R1Layout::split>
struct IsoDepthFamily;

template <int64 Depth, int64 PreludeN, int64 CodaN, int64... R, class W, class V, class InjectT, class L, int64 Bptt, class Moe,
          R1Layout R1>
struct IsoDepthFamily<Depth, PreludeN, CodaN, Rs<R...>, W, V, InjectT, L, Bptt, Moe, R1> {
  static_assert(sizeof...(R) >= 1, "IsoDepthFamily: give at least one r, e.g. Rs<1, 2, 4, 8>");
  static_assert(PreludeN >= 0 && CodaN >= 0, "IsoDepthFamily: prelude and coda must not be negative");
  static_assert(Depth > PreludeN + CodaN, "IsoDepthFamily: depth must exceed prelude + coda (the shared block needs a layer)");
  static_assert(is_kind<L, kinds::layer> && L::is_static, "IsoDepthFamily: the layer argument must be a static Layer<Attn, Ffn>");
  static_assert(is_kind<InjectT, kinds::inject> && InjectT::is_static, "IsoDepthFamily: Inject must be Linear, Additive, Passthrough or Hyper<Lanes>");
  static_assert(((R >= 1 && (Depth - PreludeN - CodaN) % R == 0) && ...), LOOPSCALE_MSG_FAMILY_R_DIVIDES);
  static_assert(std::is_same_v<Moe, NoMoE> || detail::placed_ffn<Moe>().experts > 0,
                "MoeEvery<MoE<E, K>, Every, FirstDense>: the first argument must be a MoE<E, K>, not an Mlp");
  static_assert(Moe::placement.every >= 1 && Moe::placement.first_dense >= 0,
                "MoeEvery<MoE<E, K>, Every, FirstDense>: Every must be at least 1 and FirstDense not negative");
  static_assert(R1 == R1Layout::split || std::is_same_v<Moe, NoMoE>,
                "IsoDepthFamily: R1Layout::flat is for dense families (an MoE placement counts the prelude and coda)");
  static constexpr int64 depth = Depth;
  static constexpr int64 recurrent_depth = Depth - PreludeN - CodaN;
  static constexpr std::array<int64, sizeof...(R)> rs{R...};
  static constexpr std::size_t size = sizeof...(R);
  static constexpr FamilySpec spec{Depth,        PreludeN, CodaN, InjectT{}.spec(), Bptt, V::is_static ? V{}.get() : 0,
                                   V::multiple, L{}.spec(), detail::placed_ffn<Moe>(), Moe::placement, FamilySpec::derived,
                                   StateNorm::per_recurrence, R1};

 private:
  // The member's stacks: a flat r = 1 member puts the whole depth in its block.
  template <int64 Rv>
  static constexpr bool flat_member = R1 == R1Layout::flat && Rv == 1;
  template <int64 Rv>
  static constexpr int64 block_of = flat_member<Rv> ? Depth : detail::r_must_divide_recurrent_depth<recurrent_depth, Rv>::k;

 public:
  template <int64 Rv>
  using member_of = Model<
      W, V, Prelude<1, detail::FamilyLayers<IsoDepthFamily, FamilyStack::prelude, flat_member<Rv> ? 0 : PreludeN, block_of<Rv>>>,
      Recur<Block<detail::FamilyLayers<IsoDepthFamily, FamilyStack::block, block_of<Rv>, block_of<Rv>>>, Rv,
            std::conditional_t<Rv == 1, NoInject, InjectT>, (Rv == 1 ? full_bptt : (Bptt > 0 && Bptt > Rv ? Rv : Bptt))>,
      Coda<1, detail::FamilyLayers<IsoDepthFamily, FamilyStack::coda, flat_member<Rv> ? 0 : CodaN, block_of<Rv>>>>;
  template <int64 Rv>
  using member = member_of<Rv>;
  template <std::size_t I>
  using at = member<rs[I]>;

  // The members at a run-time width (and vocabulary), in the order of Rs, from the same builder.
  static std::vector<ModelSpec> specs(int64 d, int64 vocab = V::is_static ? V{}.get() : 0) {
    FamilySpec f = spec;
    f.vocab = vocab;
    return {family_member(f, R, d)...};
  }
};

}  // namespace loopscale
