// Whether a set of runs can determine a law's free parameters at all. A fit always returns numbers;
// on runs whose r is 1 in every row the iso-depth law's phi has no effect on any prediction, and
// the fit printed whatever phi its best start happened to keep (-0.68, or 0.78 with another seed),
// with exit 0. Likewise Chinchilla on runs of one D (E, B and beta then move the same constant) or
// on one point repeated. law::fit refuses such runs before fitting (huber_fit.hpp), naming the
// parameters and the input that does not vary.
//
// The test is structural, not statistical: the Jacobian of the predicted log loss with respect to
// the free parameters (fitted coordinates), each column scaled to unit length so that a parameter
// whose term is tiny still counts, has a direction that changes no prediction (a singular value
// below 1e-9 of the largest, where exact dependence leaves about 1e-16). That holds at every
// parameter value when it comes from the data, so it is asked at three points of the law's box and
// only a dependence found at all of them is reported; weakly determined parameters (wide bootstrap
// intervals) are not this, and fit as before.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <Eigen/Core>
#include <Eigen/SVD>

#include "loopscale/law/law.hpp"
#include "loopscale/law/runs.hpp"
#include "loopscale/util/text.hpp"

namespace loopscale::law {

// What check_determined throws: a data_error whose message is the whole line, and the names alone
// (law::compare reports a law the runs cannot determine in its row instead of failing the rest).
struct undetermined_error : data_error {
  std::string parameters;  // "kappa1, kappa2"
  undetermined_error(const std::string& message, std::string names) : data_error(message), parameters(std::move(names)) {}
};

namespace detail {

// The free parameters (indices into `free`) in a direction of the Jacobian's null space at
// `theta`; nullopt when the Jacobian is not finite there (no answer at this point).
template <class P>
std::optional<std::set<int>> undetermined_at(const P& prepared, const Eigen::VectorXd& theta, const std::vector<int>& free) {
  const Eigen::Index n = prepared.size(), p = theta.size(), nf = static_cast<Eigen::Index>(free.size());
  Eigen::ArrayXd out(n);
  Eigen::MatrixXd jac(n, p);
  prepared.log_predict(theta, out, &jac);
  if (!out.allFinite() || !jac.allFinite()) return std::nullopt;
  std::set<int> none;
  Eigen::MatrixXd J(n, nf);
  std::vector<Eigen::Index> kept;  // columns that move some prediction
  for (Eigen::Index k = 0; k < nf; ++k) {
    const Eigen::VectorXd c = jac.col(free[static_cast<std::size_t>(k)]);
    const double norm = c.norm();
    if (!(norm > 0)) {
      none.insert(static_cast<int>(k));
    } else {
      J.col(static_cast<Eigen::Index>(kept.size())) = c / norm;
      kept.push_back(k);
    }
  }
  const Eigen::Index m = static_cast<Eigen::Index>(kept.size());
  if (m > 0) {
    const Eigen::JacobiSVD<Eigen::MatrixXd> svd(J.leftCols(m), Eigen::ComputeFullV);
    const Eigen::VectorXd s = svd.singularValues();  // min(n, m) values, largest first
    const Eigen::MatrixXd& V = svd.matrixV();
    // Directions past the n points' rank count too: m parameters on fewer than m distinct points.
    for (Eigen::Index d = 0; d < m; ++d) {
      const double sd = d < s.size() ? s[d] : 0.0;
      if (sd > 1e-9 * s[0]) continue;
      for (Eigen::Index k = 0; k < m; ++k)
        if (std::abs(V(k, d)) > 0.2) none.insert(static_cast<int>(kept[static_cast<std::size_t>(k)]));
    }
  }
  return none;
}

}  // namespace detail

// Refuses runs that cannot determine the free parameters `free` of `law` (prepared on `runs`) with
// data_error("fit: the runs do not determine ..."), naming the parameters and the law's inputs
// that take one or two values. `frozen`: fitted coordinates of the frozen parameters.
//
// The Jacobian is asked at points drawn uniformly from the law's box (a fixed generator, so the
// answer is the same on every run), not at the fit's starts: a start grid's corners are special
// (Chinchilla's first starts have alpha = beta = 0, where every term is a constant and E, A and B
// move the prediction alike on any data). Points where the law is not finite (outside a domain
// the box allows) are skipped; at most 16 are drawn for 3 answers.
template <class P>
void check_determined(const AnyLaw& law, const P& prepared, const Runs& runs, const Parameters& ps, const std::vector<int>& free,
                      const std::map<int, double>& frozen) {
  std::optional<std::set<int>> common;
  std::uint64_t state = 0x2545F4914F6CDD1Dull;
  const auto uniform = [&state] {
    state ^= state << 13, state ^= state >> 7, state ^= state << 17;
    return static_cast<double>(state >> 11) * 0x1.0p-53;
  };
  int answers = 0;
  for (int drawn = 0; drawn < 16 && answers < 3; ++drawn) {
    Eigen::VectorXd theta(static_cast<Eigen::Index>(ps.size()));
    for (std::size_t j = 0; j < ps.size(); ++j) {
      const auto it = frozen.find(static_cast<int>(j));
      theta[static_cast<Eigen::Index>(j)] = it != frozen.end() ? it->second : ps[j].lo + uniform() * (ps[j].hi - ps[j].lo);
    }
    const std::optional<std::set<int>> u = detail::undetermined_at(prepared, theta, free);
    if (!u) continue;
    ++answers;
    if (!common) {
      common = *u;
    } else {
      std::set<int> both;
      std::set_intersection(common->begin(), common->end(), u->begin(), u->end(), std::inserter(both, both.begin()));
      common = std::move(both);
    }
    if (common->empty()) return;
  }
  if (!common || common->empty()) return;
  std::string names;
  for (const int k : *common) names += (names.empty() ? "" : ", ") + ps[static_cast<std::size_t>(free[static_cast<std::size_t>(k)])].name;
  // The law's inputs that take one or two values (the usual cause: r = 1 everywhere, or two values
  // of R where a saturation needs three), and how many distinct points there are.
  std::string few;
  std::set<std::vector<double>> points;
  const std::vector<std::string> inputs = law.columns();
  for (Eigen::Index i = 0; i < runs.size(); ++i) {
    std::vector<double> x;
    for (const std::string& c : inputs)
      if (runs.has(c)) x.push_back(runs[c][i]);
    points.insert(std::move(x));
  }
  for (const std::string& c : inputs) {
    if (!runs.has(c)) continue;
    const Eigen::ArrayXd& v = runs[c];
    const std::set<double> values(v.data(), v.data() + v.size());
    if (values.size() == 1) few += concat(few.empty() ? "" : "; ", c, " = ", *values.begin(), " in every row");
    if (values.size() == 2) few += concat(few.empty() ? "" : "; ", c, " only ", *values.begin(), " and ", *values.rbegin());
  }
  std::string why;
  if (points.size() < free.size() + 1)
    why = concat(runs.size(), " rows hold ", points.size(), " distinct points, fewer than the ", free.size() + 1, " that ", free.size(),
                 " free parameters need");
  if (!few.empty()) why += concat(why.empty() ? "" : "; ", few);
  if (why.empty()) why = "the law's prediction does not change along a combination of them on these points";
  throw undetermined_error(concat("fit: the runs do not determine ", names, " of law ", law.name(), " (", why,
                                  "); add runs that vary it, or --freeze them"),
                           names);
}

}  // namespace loopscale::law
