// Synthetic losses drawn from a law: log L = log L_law + sigma * z with z standard normal, from a
// counter-based generator (point i's noise depends only on (seed, i)). For recovery tests and
// coverage studies of the fit and its bootstrap.
#pragma once

#include <cmath>
#include <cstdint>

#include "loopscale/law/law.hpp"
#include "loopscale/law/starts.hpp"

namespace loopscale::law {

inline double standard_normal(std::uint64_t seed, std::uint64_t i) {
  // Box-Muller on two uniforms in (0, 1].
  const double u1 = 1 - detail::unit_uniform(seed, 2 * i), u2 = detail::unit_uniform(seed, 2 * i + 1);
  return std::sqrt(-2 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

inline Runs with_synthetic_loss(const AnyLaw& law, Runs runs, const Eigen::VectorXd& theta, double sigma, std::uint64_t seed) {
  const auto prepared = law.prepare(runs);
  Eigen::ArrayXd logp(runs.size());
  prepared->log_predict(theta, logp, nullptr);
  for (Eigen::Index i = 0; i < logp.size(); ++i) logp[i] += sigma * standard_normal(seed, static_cast<std::uint64_t>(i));
  runs.set("loss") = logp.exp();
  return runs;
}

}  // namespace loopscale::law
