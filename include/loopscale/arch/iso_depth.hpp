// Iso-depth families and static verification. A family declares once what a sweep compares
// (effective depth, prelude, coda, the r values); its members are model types. The checks come in
// two forms: predicates (constexpr bool, to combine freely) and `require_*` functions whose failure
// message says what to change; both read the same accounting.
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "loopscale/arch/model.hpp"

namespace loopscale {

// ---- predicates ------------------------------------------------------------------------------

template <static_model A, static_model B>
inline constexpr bool iso_depth = effective_depth(A::spec) == effective_depth(B::spec);

template <static_model A, static_model B>
inline constexpr bool same_width = A::spec.d_model == B::spec.d_model;

template <static_model A, static_model B>
inline constexpr bool same_vocab = padded_vocab(A::spec) == padded_vocab(B::spec);

constexpr bool within_tolerance(int64 a, int64 b, double tolerance) {
  const double x = static_cast<double>(a), y = static_cast<double>(b);
  const double diff = x > y ? x - y : y - x;
  const double big = x > y ? x : y;
  return diff <= tolerance * big;
}

// Training FLOPs per token within a relative tolerance, at context length T.
template <static_model A, static_model B>
constexpr bool matched_compute(int64 seq_len, double tolerance, Convention c = Convention::paper) {
  return within_tolerance(count_flops(A::spec, seq_len, c).train, count_flops(B::spec, seq_len, c).train, tolerance);
}

// Unique (stored) non-embedding parameters within a relative tolerance.
template <static_model A, static_model B>
constexpr bool matched_params(double tolerance) {
  return within_tolerance(count_params(A::spec).non_embedding, count_params(B::spec).non_embedding, tolerance);
}

// Active non-embedding parameters (what one token touches) within a relative tolerance.
template <static_model A, static_model B>
constexpr bool matched_active_params(double tolerance) {
  const ParamCounts a = count_params(A::spec), b = count_params(B::spec);
  return within_tolerance(a.once_active + a.rec_active, b.once_active + b.rec_active, tolerance);
}

// Same training cost as a dense model: unrolled sizes within a tolerance.
template <static_model A, static_model B>
constexpr bool matched_unrolled(double tolerance) {
  return within_tolerance(count_params(A::spec).unrolled, count_params(B::spec).unrolled, tolerance);
}

// ---- requirements with messages --------------------------------------------------------------
// The template arguments of these helpers show the offending numbers in the compiler's
// "required from" lines; the static_assert text says what to change.

namespace detail {
template <int64 DepthA, int64 DepthB>
struct effective_depth_of_A_and_B {
  static_assert(DepthA == DepthB,
                "iso_depth: the two models differ in effective depth (the numbers above are A's and B's); "
                "make prelude + k * r + coda equal");
  static constexpr bool value = true;
};
template <int64 WidthA, int64 WidthB>
struct d_model_of_A_and_B {
  static_assert(WidthA == WidthB, "same_width: the two models have different d_model (the numbers above); use one Width<D>");
  static constexpr bool value = true;
};
template <int64 TrainFlopsA, int64 TrainFlopsB, bool Ok>
struct train_flops_per_token_of_A_and_B {
  static_assert(Ok,
                "matched_compute: training FLOPs per token differ by more than the tolerance (the numbers above "
                "are A's and B's); change width, r or the block size, or widen the tolerance");
  static constexpr bool value = true;
};
template <int64 ParamsA, int64 ParamsB, bool Ok>
struct non_embedding_params_of_A_and_B {
  static_assert(Ok,
                "matched_params: non-embedding parameters differ by more than the tolerance (the numbers above are "
                "A's and B's); change width or the block size, or widen the tolerance");
  static constexpr bool value = true;
};
}  // namespace detail

template <static_model A, static_model B>
consteval bool require_iso_depth() {
  return detail::effective_depth_of_A_and_B<effective_depth(A::spec), effective_depth(B::spec)>::value;
}

template <static_model A, static_model B>
consteval bool require_same_width() {
  return detail::d_model_of_A_and_B<A::spec.d_model, B::spec.d_model>::value;
}

template <static_model A, static_model B, int64 SeqLen, double Tolerance, Convention C = Convention::paper>
consteval bool require_matched_compute() {
  return detail::train_flops_per_token_of_A_and_B<count_flops(A::spec, SeqLen, C).train,
                                                  count_flops(B::spec, SeqLen, C).train,
                                                  matched_compute<A, B>(SeqLen, Tolerance, C)>::value;
}

template <static_model A, static_model B, double Tolerance>
consteval bool require_matched_params() {
  return detail::non_embedding_params_of_A_and_B<count_params(A::spec).non_embedding,
                                                 count_params(B::spec).non_embedding,
                                                 matched_params<A, B>(Tolerance)>::value;
}

// ---- iso-depth families ----------------------------------------------------------------------

template <int64... R>
struct Rs {};

namespace detail {
template <int64 RecurrentDepth, int64 R>
struct r_must_divide_recurrent_depth {
  static_assert(R >= 1, "IsoDepthFamily: every r must be at least 1");
  static_assert(R >= 1 && RecurrentDepth % R == 0,
                "IsoDepthFamily: r does not divide the recurrent depth (depth - prelude - coda; the numbers above "
                "are that depth and r); choose r among its divisors");
  static constexpr int64 k = R >= 1 ? RecurrentDepth / R : 0;
};
}  // namespace detail

// All models of effective depth Depth with PreludeN unshared layers, a shared block of
// k = (Depth - PreludeN - CodaN) / r layers run r times, and CodaN unshared layers. The r = 1
// member has no injection; the others use InjectT.
template <int64 Depth, int64 PreludeN, int64 CodaN, class RList, class W = Width<dynamic>, class V = Vocab<dynamic>,
          class InjectT = Linear, class L = Layer<>, int64 Bptt = full_bptt>
struct IsoDepthFamily;

template <int64 Depth, int64 PreludeN, int64 CodaN, int64... R, class W, class V, class InjectT, class L, int64 Bptt>
struct IsoDepthFamily<Depth, PreludeN, CodaN, Rs<R...>, W, V, InjectT, L, Bptt> {
  static_assert(sizeof...(R) >= 1, "IsoDepthFamily: give at least one r, e.g. Rs<1, 2, 4, 8>");
  static_assert(PreludeN >= 0 && CodaN >= 0, "IsoDepthFamily: prelude and coda must not be negative");
  static_assert(Depth > PreludeN + CodaN, "IsoDepthFamily: depth must exceed prelude + coda (the recur block needs a layer)");
  static constexpr int64 depth = Depth;
  static constexpr int64 recurrent_depth = Depth - PreludeN - CodaN;
  static constexpr std::array<int64, sizeof...(R)> rs{R...};
  static constexpr std::size_t size = sizeof...(R);

  template <int64 Rv>
  using member = Model<W, V, Prelude<PreludeN, L>,
                       Recur<Block<detail::r_must_divide_recurrent_depth<recurrent_depth, Rv>::k, L>, Rv,
                             std::conditional_t<Rv == 1, NoInject, InjectT>, (Rv == 1 ? full_bptt : Bptt)>,
                       Coda<CodaN, L>>;
  template <std::size_t I>
  using at = member<rs[I]>;

  // Instantiating every member checks every r at once.
  static constexpr bool all_divide = (detail::r_must_divide_recurrent_depth<recurrent_depth, R>::k + ...) > 0;
  static_assert(all_divide);

  // The members at a run-time width (and vocabulary), in the order of Rs.
  static std::vector<ModelSpec> specs(int64 d, int64 vocab = V::value) {
    return {member<R>::with(d, vocab)...};
  }
};

}  // namespace loopscale
