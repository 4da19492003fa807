// Iso-depth families and the one builder of their members. A family fixes what a comparison across
// r holds equal: the effective depth (prelude + k r + coda), the prelude and coda (of every looped
// member; the r = 1 member may put the whole depth in one block, R1Layout), the injection,
// BPTT and state norm placement of the looped members, the vocabulary, the dense layer and, for mixture-of-experts
// families, which layers carry the MoE FFN. Its member at (r, d_model) is one ModelSpec.
//
// Every member of every family is built by family_member(): the static families of
// arch/iso_depth.hpp, the sweep planner, the command line's model flags, the report's law curves
// and the law's compute-optimal allocation all call it, so a "member" means one thing everywhere.
#pragma once

#include <cmath>
#include <cstdio>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "loopscale/spec/limits.hpp"
#include "loopscale/spec/spec.hpp"

namespace loopscale {

// Which layers of a family get the MoE FFN: counting the layers of the scope in the order they run
// (scope `all`: prelude, then the shared block once, then coda; scope `recur`: the shared block
// only), layer i is MoE when i >= first_dense and (i - first_dense) is a multiple of `every`.
// every 1, first_dense 0: every layer (of the scope); every 2, first_dense 1: dense, MoE, dense, MoE,
// ... (GShard/Switch); every 1, first_dense k: k dense layers, then MoE (DeepSeek).
enum class MoeScope : std::uint8_t { all, recur };
constexpr auto names_of(MoeScope) { return make_names<MoeScope>({{MoeScope::all, "all"}, {MoeScope::recur, "recur"}}); }

struct MoePlacement {
  MoeScope scope = MoeScope::all;
  int64 every = 1;
  int64 first_dense = 0;
  constexpr bool moe_at(int64 i) const { return i >= first_dense && (i - first_dense) % every == 0; }
  friend constexpr bool operator==(const MoePlacement&, const MoePlacement&) = default;
};

enum class FamilyStack : std::uint8_t { prelude, block, coda };

// How a family builds its r = 1 member, the baseline every phi is measured against. split: the
// family's prelude + k + coda like every other member (k = depth - prelude - coda), the recurrence
// norm after the block. flat: depth layers in one block and no prelude or coda, as the iso-depth
// paper's code trains its baseline (0 + 20 + 0: ARCH=noloop in its shells/scaling_laws/
// scaling_laws.sh), the recurrence norm after the last layer, just before the final norm. Both
// count the same parameters and FLOPs in all; they split them differently between N_once and
// N_rec (flat: N_once is the outer norms alone), of which the laws read only the sum at r = 1. They
// are different functions: split puts a normalisation with a learned scale inside the residual
// stream, before the coda.
enum class R1Layout : std::uint8_t { split, flat };
constexpr auto names_of(R1Layout) { return make_names<R1Layout>({{R1Layout::split, "split"}, {R1Layout::flat, "flat"}}); }

struct FamilySpec {
  int64 depth = 20;  // effective depth prelude + k r + coda
  int64 prelude = 2;
  int64 coda = 2;
  InjectSpec inject{Inject::linear, 0};  // of the looped members; r = 1 has none
  int64 bptt = full_bptt;                // of the looped members, at most r (clamped)
  int64 vocab = 32064;
  int64 vocab_multiple = 64;
  LayerSpec layer{};        // every dense layer; MoE layers keep its attention
  FfnSpec moe{};            // experts > 0: the FFN of the layers `placement` picks
  MoePlacement placement{};
  int64 block_layers = derived;  // >= 0: k fixed (the depth then follows r); derived: k = (depth - prelude - coda) / r
  static constexpr int64 derived = -1;
  // Where the recurrence's norm goes, in every member (for r = 1 both placements are one model). After
  // the fields above (and before r1_layout, added later), so positional initialisers written before
  // it still fill the fields they did.
  StateNorm state_norm = StateNorm::per_recurrence;
  R1Layout r1_layout = R1Layout::split;  // the r = 1 member (above); flat only for dense families with a derived block. Last, as state_norm was
  friend constexpr bool operator==(const FamilySpec&, const FamilySpec&) = default;
};

// The shared block's layer count k of the member with r recurrences; throws spec_error when r
// does not divide the recurrent depth.
constexpr int64 family_block_layers(const FamilySpec& f, int64 r) {
  if (f.prelude < 0 || f.coda < 0) throw spec_error("iso-depth family: prelude and coda must not be negative");
  if (r < 1) throw spec_error(LOOPSCALE_MSG_R);
  if (f.block_layers >= 0) return f.block_layers;
  if (f.block_layers != FamilySpec::derived) throw spec_error("iso-depth family: block_layers must not be negative");
  const int64 rest = f.depth - f.prelude - f.coda;
  if (rest < 1) throw spec_error("iso-depth family: depth must exceed prelude + coda (the shared block needs a layer)");
  if (rest % r != 0) {
    if (std::is_constant_evaluated()) throw spec_error(LOOPSCALE_MSG_FAMILY_R_DIVIDES);
    // The r that do divide it, named (`optimal --r 3` said "choose r among its divisors" and listed
    // none); r is at most SpecLimits::depth, so no more are listed.
    std::string divisors;
    for (int64 d = 1; d <= rest && d <= SpecLimits::depth; ++d)
      if (rest % d == 0) divisors += divisors.empty() ? concat(d) : concat(", ", d);
    throw spec_error(concat(LOOPSCALE_MSG_FAMILY_R_DIVIDES, ": r = ", r, ", recurrent depth ", rest, ", whose divisors",
                            rest > SpecLimits::depth ? " up to the limit 4096" : "", " are ", divisors));
  }
  return rest / r;
}

// Layer i of a member's stack (its block has k layers).
constexpr LayerSpec family_layer(const FamilySpec& f, FamilyStack stack, int64 i, int64 k) {
  LayerSpec l = f.layer;
  if (!f.moe.moe()) return l;
  bool moe = false;
  if (f.placement.scope == MoeScope::recur) {
    moe = stack == FamilyStack::block && f.placement.moe_at(i);
  } else {
    const int64 g = stack == FamilyStack::prelude ? i : stack == FamilyStack::block ? f.prelude + i : f.prelude + k + i;
    moe = f.placement.moe_at(g);
  }
  if (moe) l.ffn = f.moe;
  return l;
}

constexpr StackSpec family_stack(const FamilySpec& f, FamilyStack stack, int64 n, int64 k) {
  StackSpec s;
  for (int64 i = 0; i < n; ++i) s.layers.push_back(family_layer(f, stack, i, k));
  return s;
}

// The member with r recurrences at width d_model.
constexpr ModelSpec family_member(const FamilySpec& f, int64 r, int64 d_model) {
  // Before any size is multiplied: past these the accounting's int64 arithmetic overflows.
  if (d_model > SpecLimits::width) throw spec_error("iso-depth family: d_model is above the limit 65536 (spec/limits.hpp)");
  if (r > SpecLimits::depth) throw spec_error("iso-depth family: r is above the limit 4096 (spec/limits.hpp)");
  static_assert(SpecLimits::width == 65536 && SpecLimits::depth == 4096, "family_member's messages state the limits");
  if (f.moe.moe() && (f.placement.every < 1 || f.placement.first_dense < 0))
    throw spec_error("iso-depth family: the MoE placement needs every >= 1 and first_dense >= 0");
  const int64 k = family_block_layers(f, r);  // checks prelude, coda, depth and r, flat or not
  if (f.r1_layout == R1Layout::flat) {
    if (f.moe.moe()) throw spec_error("iso-depth family: r1_layout flat is for dense families (an MoE placement counts the prelude and coda)");
    if (f.block_layers != FamilySpec::derived)
      throw spec_error("iso-depth family: r1_layout flat needs the block derived from the depth (block_layers fixed makes depth follow r)");
    if (r == 1) {
      FamilySpec one = f;  // the same family with the whole depth in the block
      one.prelude = one.coda = 0;
      one.r1_layout = R1Layout::split;
      return family_member(one, 1, d_model);
    }
  }
  ModelSpec m;
  m.d_model = d_model;
  m.vocab = f.vocab;
  m.vocab_multiple = f.vocab_multiple;
  m.prelude = family_stack(f, FamilyStack::prelude, f.prelude, k);
  m.recur.block = family_stack(f, FamilyStack::block, k, k);
  m.recur.r = r;
  m.recur.inject = r > 1 ? f.inject : InjectSpec{Inject::none, 0};
  m.recur.bptt = r > 1 ? (f.bptt > 0 ? (f.bptt < r ? f.bptt : r) : f.bptt) : full_bptt;
  m.recur.state_norm = f.state_norm;
  m.coda = family_stack(f, FamilyStack::coda, f.coda, k);
  validate(m);
  return m;
}

// A compute budget C of a sweep over a family, with the width multipliers s tried at it (the width
// rule that turns s into d_model belongs to the sweep: 64 s rounded to 128 in the paper).
struct ComputeBudget {
  double flops = 0;
  std::vector<int64> widths;
};

// An expansion given as a decimal (the command line's --mlp-mult 2.5, a sweep's expert_ff 0.5) as
// the fraction num / den of FfnSpec, so hidden = d * num / den stays integral. The decimal must be
// a multiple of 0.001 (2.0004 would otherwise be rounded to 2 silently) whose fraction in lowest
// terms fits FfnSpec's limits (spec/limits.hpp), so 2.5 = 5/2 is one and 2.667 = 2667/1000 is not:
// refused here, naming the value as given, rather than later as "mult_num = 2667". `what` names
// the value in messages ("--mlp-mult").
inline std::pair<int64, int64> expansion_fraction(double x, const std::string& what = "mlp: the expansion") {
  char shown[32];
  std::snprintf(shown, sizeof shown, "%.10g", x);
  if (!(x > 0) || !std::isfinite(x)) throw spec_error(what + " must be a positive number");
  const auto rule = [&] {
    return concat(what, " ", shown, " must be a multiple of 0.001 whose fraction in lowest terms has numerator and denominator at most ",
                  SpecLimits::multiplier, " (spec/limits.hpp), e.g. 2.5 = 5/2 or 2.75 = 11/4");
  };
  // Before rounding: llround of a value past int64 is unspecified (it gave "at least 0.001" for 1e300).
  if (x > static_cast<double>(SpecLimits::multiplier))
    throw spec_error(concat(what, " ", shown, " is above the limit ", SpecLimits::multiplier, " (spec/limits.hpp)"));
  const int64 num = std::llround(x * 1000), den = 1000;
  if (num < 1) throw spec_error(what + " must be at least 0.001");
  // 1e-6 of a thousandth: far above the rounding of x * 1000 (x <= 256), far below any typed digit.
  if (std::abs(x * 1000 - static_cast<double>(num)) > 1e-6) throw spec_error(rule());
  const int64 g = std::gcd(num, den);
  if (num / g > SpecLimits::multiplier || den / g > SpecLimits::multiplier) throw spec_error(rule());
  return {num / g, den / g};
}

}  // namespace loopscale
