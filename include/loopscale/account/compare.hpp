// Relations between two models, read off their accounting: equal effective depth (iso-depth), equal
// width, training FLOPs per token and non-embedding parameters within a tolerance. Predicates return
// a bool; `require_*` throw spec_error with the sentence of spec/faults.hpp and both numbers. The
// static model types of arch/ fold the same requirements into static_asserts with the same
// sentences (arch/checks.hpp); `loopscale account --compare A B` runs these.
#pragma once

#include <string>

#include "loopscale/account/account.hpp"
#include "loopscale/spec/faults.hpp"

namespace loopscale {

// |a - b| <= tolerance * max(a, b).
constexpr bool within_tolerance(int64 a, int64 b, double tolerance) {
  const double x = static_cast<double>(a), y = static_cast<double>(b);
  const double diff = x > y ? x - y : y - x;
  const double big = x > y ? x : y;
  return diff <= tolerance * big;
}

constexpr bool iso_depth(const ModelSpec& a, const ModelSpec& b) { return effective_depth(a) == effective_depth(b); }
constexpr bool same_width(const ModelSpec& a, const ModelSpec& b) { return a.d_model == b.d_model; }
constexpr bool same_vocab(const ModelSpec& a, const ModelSpec& b) { return padded_vocab(a) == padded_vocab(b); }

// Training FLOPs per token within a relative tolerance, at context length T.
constexpr bool matched_compute(const ModelSpec& a, const ModelSpec& b, int64 seq_len, double tolerance,
                               Convention c = Convention::paper) {
  return within_tolerance(count_flops(a, seq_len, c).train, count_flops(b, seq_len, c).train, tolerance);
}
// Unique (stored) non-embedding parameters within a relative tolerance.
constexpr bool matched_params(const ModelSpec& a, const ModelSpec& b, double tolerance) {
  return within_tolerance(count_params(a).non_embedding, count_params(b).non_embedding, tolerance);
}
// Active non-embedding parameters (what one token touches) within a relative tolerance.
constexpr bool matched_active_params(const ModelSpec& a, const ModelSpec& b, double tolerance) {
  const ParamCounts x = count_params(a), y = count_params(b);
  return within_tolerance(x.once_active + x.rec_active, y.once_active + y.rec_active, tolerance);
}
// Same training cost as a dense model: unrolled active sizes within a tolerance (for an MoE the
// experts a token does not reach cost nothing; for a dense model active and stored are one).
constexpr bool matched_unrolled(const ModelSpec& a, const ModelSpec& b, double tolerance) {
  return within_tolerance(count_params(a).unrolled_active, count_params(b).unrolled_active, tolerance);
}

namespace detail {
[[noreturn]] inline void unmet(const char* sentence, long long a, long long b) {
  throw spec_error(concat(sentence, " (A: ", a, ", B: ", b, ")"));
}
}  // namespace detail

inline void require_iso_depth(const ModelSpec& a, const ModelSpec& b) {
  if (!iso_depth(a, b)) detail::unmet(LOOPSCALE_MSG_ISO_DEPTH, effective_depth(a), effective_depth(b));
}
inline void require_same_width(const ModelSpec& a, const ModelSpec& b) {
  if (!same_width(a, b)) detail::unmet(LOOPSCALE_MSG_SAME_WIDTH, a.d_model, b.d_model);
}
inline void require_matched_compute(const ModelSpec& a, const ModelSpec& b, int64 seq_len, double tolerance,
                                    Convention c = Convention::paper) {
  if (!matched_compute(a, b, seq_len, tolerance, c))
    detail::unmet(LOOPSCALE_MSG_MATCHED_COMPUTE, count_flops(a, seq_len, c).train, count_flops(b, seq_len, c).train);
}
inline void require_matched_params(const ModelSpec& a, const ModelSpec& b, double tolerance) {
  if (!matched_params(a, b, tolerance))
    detail::unmet(LOOPSCALE_MSG_MATCHED_PARAMS, count_params(a).non_embedding, count_params(b).non_embedding);
}

}  // namespace loopscale
