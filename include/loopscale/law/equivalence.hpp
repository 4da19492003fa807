// What a looped model is worth in dense terms, under the iso-depth law: the dense size with the same
// predicted loss at the same data, N_once + r^phi N_rec (the law depends on size only through it),
// and the dense size with the same training cost, the unrolled N_once + r N_rec.
//
// Both depend on where the injection counts (account/injection_convention.hpp). The paper's example
// (d 2048, r 4, phi 0.459: "a 410M looped model performs on par with a 580M non-looped model but
// costs as much as a 1B one") is reproduced to 1% with the injection excluded: stored 411.1M,
// 581.8M, 1.007B; loopscale's default (the injection with the shared block, as the paper's code's
// effective_params counts it) gives 597.6M and 1.040B (tests/law/test_published.cpp).
#pragma once

#include <cmath>
#include <string>

#include "loopscale/account/injection_convention.hpp"
#include "loopscale/account/params.hpp"
#include "loopscale/law/iso_depth.hpp"
#include "loopscale/law/runs.hpp"
#include "loopscale/util/text.hpp"

namespace loopscale::law {

struct Equivalence {
  double params = 0;                   // stored non-embedding parameters (with the injection: what the model holds)
  double n_once = 0, n_rec = 0;        // the law's counts, under `injection`
  double dense_equivalent_params = 0;  // same predicted loss: N_once + r^phi N_rec
  double unrolled_params = 0;          // same training cost: N_once + r N_rec
  std::string injection;               // where the injection counts; empty when the counts were given directly
};

// From counts given directly: stored = N_once + N_rec.
inline Equivalence looped_equivalence(double n_once, double n_rec, double r, double phi) {
  if (!(n_once >= 0) || !(n_rec > 0) || !std::isfinite(n_once) || !std::isfinite(n_rec))
    throw data_error("equivalent: --n-once must be >= 0 and --n-rec > 0");
  if (!(r >= 1) || !std::isfinite(r)) throw data_error("equivalent: --r must be >= 1");
  // phi as the iso-depth law takes it: in its domain (domain_fault, as theta_of asks) and within the
  // box a fit of it searches (PowerRecurrence: [-3, 3]): phi = -7 was accepted as if fitted, and
  // phi = 1e300 made r^phi infinite.
  const AnyLaw law{IsoDepth{}};
  if (const std::string fault = law.domain_fault({{"phi", phi}}); !fault.empty()) throw data_error("equivalent: --param " + fault);
  const Parameter box = law.parameters()[static_cast<std::size_t>(index_of(law.parameters(), "phi"))];
  if (!std::isfinite(phi) || phi < box.lo || phi > box.hi)
    throw data_error(concat("equivalent: --param phi=", phi, ": outside the iso-depth law's box, phi in [", box.lo, ", ", box.hi, "]"));
  const Equivalence e{n_once + n_rec, n_once, n_rec, n_once + std::pow(r, phi) * n_rec, n_once + r * n_rec, ""};
  // Each input finite and in range, yet the sums can overflow together (N_once = N_rec = 1e308).
  if (!std::isfinite(e.params) || !std::isfinite(e.dense_equivalent_params) || !std::isfinite(e.unrolled_params))
    throw data_error(concat("equivalent: N_once ", n_once, ", N_rec ", n_rec, ", r ", r, ", phi ", phi,
                            " give a dense size beyond the largest number (inf); check --n-once, --n-rec and --r"));
  return e;
}

// From a model spec: N_once and N_rec as the accounting counts them under `injection`.
inline Equivalence looped_equivalence(const ModelSpec& m, double phi, InjectionCount injection = InjectionCount::rec) {
  const ParamCounts p = count_params(m);
  const LoopedSplit s = split_params(p, injection);
  Equivalence e = looped_equivalence(static_cast<double>(s.once), static_cast<double>(s.rec), static_cast<double>(m.recur.r), phi);
  e.params = static_cast<double>(p.non_embedding);
  e.injection = std::string(name_of(injection));
  return e;
}

}  // namespace loopscale::law
