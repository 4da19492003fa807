// Static verification between two models: require_iso_depth, require_same_width,
// require_matched_compute, require_matched_params. Two forms of each:
//   require_iso_depth<A, B>()       A and B static model types: a static_assert with the sentence
//                                   of spec/faults.hpp and a note showing the numbers compared;
//   require_iso_depth(a, b)         model objects: folds to the static form when both types are
//                                   static, and otherwise runs the run-time twin of
//                                   account/compare.hpp, which throws spec_error with the same sentence.
// Predicates (iso_depth, matched_compute, ...) are the functions of account/compare.hpp; a model
// object converts to its spec, so `iso_depth(a, b)` works on objects and specs alike.
#pragma once

#include "loopscale/account/compare.hpp"
#include "loopscale/arch/model.hpp"

namespace loopscale {

// ---- static types ----
// Each static_assert sits in the function the user's line instantiates, so the compiler prints the
// sentence within the first lines of its output, followed by a note with the numbers compared
// ("the comparison reduces to '(20 == 18)'": A's then B's).

template <static_model A, static_model B>
consteval bool require_iso_depth() {
  constexpr int64 depth_of_A = effective_depth(spec_of<A>()), depth_of_B = effective_depth(spec_of<B>());
  static_assert(depth_of_A == depth_of_B, LOOPSCALE_MSG_ISO_DEPTH);
  return true;
}

template <static_model A, static_model B>
consteval bool require_same_width() {
  constexpr int64 d_model_of_A = spec_of<A>().d_model, d_model_of_B = spec_of<B>().d_model;
  static_assert(d_model_of_A == d_model_of_B, LOOPSCALE_MSG_SAME_WIDTH);
  return true;
}

namespace detail {
// |a - b| / max(a, b), the quantity within_tolerance compares with the tolerance.
constexpr double relative_difference(int64 a, int64 b) {
  const double x = static_cast<double>(a), y = static_cast<double>(b);
  return (x > y ? x - y : y - x) / (x > y ? x : y);
}
}  // namespace detail

template <static_model A, static_model B, int64 SeqLen, double Tolerance, Convention C = Convention::paper>
consteval bool require_matched_compute() {
  constexpr double relative_difference_of_train_flops =
      detail::relative_difference(count_flops(spec_of<A>(), SeqLen, C).train, count_flops(spec_of<B>(), SeqLen, C).train);
  static_assert(relative_difference_of_train_flops <= Tolerance, LOOPSCALE_MSG_MATCHED_COMPUTE);
  return true;
}

template <static_model A, static_model B, double Tolerance>
consteval bool require_matched_params() {
  constexpr double relative_difference_of_non_embedding_params =
      detail::relative_difference(count_params(spec_of<A>()).non_embedding, count_params(spec_of<B>()).non_embedding);
  static_assert(relative_difference_of_non_embedding_params <= Tolerance, LOOPSCALE_MSG_MATCHED_PARAMS);
  return true;
}

// ---- objects: static when the types are, run-time otherwise ----

template <model_type A, model_type B>
constexpr bool require_iso_depth(const A& a, const B& b) {
  if constexpr (A::is_static && B::is_static) return require_iso_depth<A, B>();
  else return require_iso_depth(spec_of(a), spec_of(b)), true;
}

template <model_type A, model_type B>
constexpr bool require_same_width(const A& a, const B& b) {
  if constexpr (A::is_static && B::is_static) return require_same_width<A, B>();
  else return require_same_width(spec_of(a), spec_of(b)), true;
}

// The tolerance is a template argument so that the static form can fold it.
template <int64 SeqLen, double Tolerance, Convention C = Convention::paper, model_type A, model_type B>
constexpr bool require_matched_compute(const A& a, const B& b) {
  if constexpr (A::is_static && B::is_static) return require_matched_compute<A, B, SeqLen, Tolerance, C>();
  else return require_matched_compute(spec_of(a), spec_of(b), SeqLen, Tolerance, C), true;
}

template <double Tolerance, model_type A, model_type B>
constexpr bool require_matched_params(const A& a, const B& b) {
  if constexpr (A::is_static && B::is_static) return require_matched_params<A, B, Tolerance>();
  else return require_matched_params(spec_of(a), spec_of(b), Tolerance), true;
}

}  // namespace loopscale
