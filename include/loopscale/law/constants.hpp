// A law's constants given by name in natural units (A = 28.027, phi = 0.459, ...), turned into the
// fitted coordinates a prepared law evaluates. Used wherever a fit is used rather than made.
#pragma once

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "loopscale/law/law.hpp"
#include "loopscale/util/text.hpp"

namespace loopscale::law {

using Constants = std::map<std::string, double>;

// `flag` names where the constants came from in errors (--param; the fit's --start).
inline Eigen::VectorXd theta_of(const AnyLaw& law, const Constants& c, const std::string& flag = "--param") {
  const Parameters ps = law.parameters();
  Eigen::VectorXd th(static_cast<Eigen::Index>(ps.size()));
  std::string missing;
  for (std::size_t j = 0; j < ps.size(); ++j) {
    auto it = c.find(ps[j].name);
    if (it == c.end()) {
      missing += (missing.empty() ? "" : ", ") + ps[j].name;
      continue;
    }
    if (!std::isfinite(it->second) || (ps[j].scale == Scale::log && it->second <= 0))
      throw data_error(flag + " " + ps[j].name + " must be " + (ps[j].scale == Scale::log ? "positive" : "finite"));
    th[static_cast<Eigen::Index>(j)] = ps[j].to_fitted(it->second);
  }
  if (!missing.empty()) throw data_error("law " + law.name() + " needs " + flag + " for " + missing);
  for (const auto& [name, v] : c)
    if (index_of(ps, name) < 0)
      throw data_error(flag + " " + name + ": law " + law.name() + " has no such parameter (it has " + names_of(ps) + ")");
  // Finite and positive where a scale must be, yet outside the formula: E_start >= E_max, say, would
  // predict a NaN or a finite but meaningless loss.
  if (const std::string fault = law.domain_fault(c); !fault.empty()) throw data_error(flag + " " + fault);
  return th;
}

// The variables a law reads at point i of `runs`, for messages: "(N=1e+06, D=1e+09)".
inline std::string point_values(const AnyLaw& law, const Runs& runs, Eigen::Index i) {
  std::string o = "(";
  const std::vector<std::string> cs = law.columns();
  for (std::size_t k = 0; k < cs.size(); ++k)
    if (runs.has(cs[k])) o += concat(o.size() > 1 ? ", " : "", cs[k], "=", runs[cs[k]][i]);
  return o + ")";
}

// Refuses predictions that are not finite. Constants that each pass theta_of (finite, positive) can
// still overflow the formula together (A = 1e308 with alpha = -10 predicts inf at every point), and
// an inf or NaN loss was printed as a result (RMSE inf) or silently lost in an argmin (every
// comparison false: the smallest width won). `where(i)` names point i ("line 2", "d_model 128");
// `flag` where the constants came from.
template <class Where>
void check_predictions(const AnyLaw& law, const Runs& runs, const Eigen::ArrayXd& pred, Where&& where, const std::string& flag = "--param") {
  for (Eigen::Index i = 0; i < pred.size(); ++i)
    if (!std::isfinite(pred[i]))
      throw data_error(flag + ": the law predicts " + (std::isnan(pred[i]) ? "nan" : pred[i] > 0 ? "inf" : "-inf") + " at " + where(i) + " " +
                       point_values(law, runs, i) + "; check the constants");
}

// Predicted loss of one point given as named variables.
inline double predict_point(const AnyLaw& law, const Eigen::VectorXd& theta, const std::map<std::string, double>& vars) {
  Runs runs;
  runs.lines = {0};
  for (const auto& [k, v] : vars) runs.set(k) = Eigen::ArrayXd::Constant(1, v);
  const auto prepared = law.prepare(runs);
  return predict_loss(*prepared, theta)[0];
}

}  // namespace loopscale::law
