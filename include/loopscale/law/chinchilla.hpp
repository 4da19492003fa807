// Chinchilla's loss law (Hoffmann et al. 2022, approach 3), L = E + A N^-alpha + B D^-beta, and
// its form over an effective parameter count N_eff (recurrence.hpp), which gives the iso-depth and
// Parcae laws. Fitted as log L = LSE(log E, log A - alpha log N_eff, log B - beta log D).
#pragma once

#include <algorithm>
#include <cmath>
#include <string_view>

#include "loopscale/law/law.hpp"
#include "loopscale/law/recurrence.hpp"

namespace loopscale::law {

// The box of Schwethelm et al.: log A, log B in [-5, 35], alpha, beta in [0, 2.5], log E in [-3, 2].
inline Parameters chinchilla_parameters() {
  return {{"E", Scale::log, -3, 2},
          {"A", Scale::log, -5, 35},
          {"B", Scale::log, -5, 35},
          {"alpha", Scale::linear, 0, 2.5},
          {"beta", Scale::linear, 0, 2.5}};
}

template <class Mapping>
struct ChinchillaForm {
  Parameters parameters() const {
    Parameters p = chinchilla_parameters();
    for (auto& q : Mapping::parameters()) p.push_back(q);
    return p;
  }
  std::vector<std::string> columns() const {
    auto c = Mapping::columns();
    c.push_back("D");
    return c;
  }

  struct Prepared {
    typename Mapping::Prepared neff;
    Eigen::ArrayXd log_d;
    Eigen::Index size() const { return log_d.size(); }

    // theta = (log E, log A, log B, alpha, beta, mapping...)
    void log_predict(const Eigen::VectorXd& theta, Eigen::ArrayXd& out, Eigen::MatrixXd* jac) const {
      const Eigen::Index n = size(), q = static_cast<Eigen::Index>(Mapping::parameters().size());
      const double* th = theta.data();
      Scratch& s = Scratch::local();
      s.a.resize(n);
      if (q > 0 && jac) s.derivs.resize(n, q);
      neff.log_neff(th + 5, s.a, q > 0 && jac ? &s.derivs : nullptr);
      s.terms.resize(n, 3);
      s.terms.col(1) = th[1] - th[3] * s.a;
      s.terms.col(2) = th[2] - th[4] * log_d;
      // The E term is one constant within the box, so the sum never underflows; while the other
      // two terms cannot overflow, skip the max-shift of the general log-sum-exp: two
      // exponentials and one log per point instead of three and one.
      if (std::max(s.terms.col(1).maxCoeff(), s.terms.col(2).maxCoeff()) < 700) {
        const double e = std::exp(th[0]);
        s.terms.col(1) = s.terms.col(1).exp();
        s.terms.col(2) = s.terms.col(2).exp();
        s.b = 1 / (e + s.terms.col(1) + s.terms.col(2));
        out = -s.b.log();
        s.terms.col(0) = e * s.b;
        s.terms.col(1) *= s.b;
        s.terms.col(2) *= s.b;
      } else {
        s.terms.col(0).setConstant(th[0]);
        log_sum_exp(s.terms, out, s.b);
      }
      if (!jac) return;
      Eigen::MatrixXd& J = *jac;
      const auto w = [&](int k) { return s.terms.col(k); };
      J.col(0) = w(0).matrix();
      J.col(1) = w(1).matrix();
      J.col(2) = w(2).matrix();
      J.col(3) = (-w(1) * s.a).matrix();
      J.col(4) = (-w(2) * log_d).matrix();
      for (Eigen::Index k = 0; k < q; ++k) J.col(5 + k) = (-th[3] * w(1) * s.derivs.col(k)).matrix();
    }
  };
  Prepared prepare(const Runs& runs) const { return {Mapping::prepare(runs), runs["D"].log()}; }
};

// Epoch's and Hoffmann et al.'s grid: alpha, beta in {0, .5, .., 2}, log E in {-1, -.5, .., 1},
// log A, log B in {0, 5, .., 25}: 4,500 starts, the mapping's parameters at `extra`.
inline std::vector<Eigen::VectorXd> chinchilla_grid(const Eigen::VectorXd& extra = {}) {
  std::vector<Eigen::VectorXd> g;
  g.reserve(4500);
  for (int ia = 0; ia < 5; ++ia)
    for (int ib = 0; ib < 5; ++ib)
      for (int ie = 0; ie < 5; ++ie)
        for (int iA = 0; iA < 6; ++iA)
          for (int iB = 0; iB < 6; ++iB) {
            Eigen::VectorXd x(5 + extra.size());
            x.head(5) << -1 + 0.5 * ie, 5.0 * iA, 5.0 * iB, 0.5 * ia, 0.5 * ib;
            x.tail(extra.size()) = extra;
            g.push_back(x);
          }
  return g;
}

struct Chinchilla : ChinchillaForm<DenseParams> {
  static constexpr std::string_view name = "chinchilla";
  static constexpr std::string_view source = "Hoffmann et al. 2022, Training Compute-Optimal Large Language Models (approach 3)";
  static constexpr std::string_view formula = "L = E + A N^-alpha + B D^-beta";
  std::vector<Eigen::VectorXd> grid() const { return chinchilla_grid(); }
};

}  // namespace loopscale::law
