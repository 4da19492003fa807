// What a looped model is worth in dense terms, under the iso-depth law: the dense size with the same
// predicted loss at the same data, N_once + r^phi N_rec (the law depends on size only through it),
// and the dense size with the same training cost, the unrolled N_once + r N_rec.
#pragma once

#include <cmath>

#include "loopscale/account/params.hpp"
#include "loopscale/law/runs.hpp"

namespace loopscale::law {

struct Equivalence {
  double params = 0;                   // N_once + N_rec, stored non-embedding parameters
  double dense_equivalent_params = 0;  // same predicted loss
  double unrolled_params = 0;          // same training cost
};

inline Equivalence looped_equivalence(double n_once, double n_rec, double r, double phi) {
  if (!(n_once >= 0) || !(n_rec > 0) || !std::isfinite(n_once) || !std::isfinite(n_rec))
    throw data_error("equivalent: --n-once must be >= 0 and --n-rec > 0");
  if (!(r >= 1) || !std::isfinite(r)) throw data_error("equivalent: --r must be >= 1");
  if (!std::isfinite(phi)) throw data_error("equivalent: phi must be finite");
  return {n_once + n_rec, n_once + std::pow(r, phi) * n_rec, n_once + r * n_rec};
}

// From a model spec: N_once and N_rec as the accounting counts them.
inline Equivalence looped_equivalence(const ModelSpec& m, double phi) {
  const ParamCounts p = count_params(m);
  return looped_equivalence(static_cast<double>(p.once), static_cast<double>(p.rec), static_cast<double>(m.recur.r), phi);
}

}  // namespace loopscale::law
