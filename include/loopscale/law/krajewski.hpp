// Krajewski et al. 2024, "Scaling Laws for Fine-Grained Mixture of Experts": granularity G (expert
// size relative to the dense MLP) enters the size term,
//   L = c + (g / G^gamma + a) / N^alpha + b / D^beta,
// fitted as the log-sum-exp of log c, log a - alpha log N, log g - gamma log G - alpha log N and
// log b - beta log D.
#pragma once

#include <string_view>

#include "loopscale/law/law.hpp"

namespace loopscale::law {

struct Krajewski {
  static constexpr std::string_view name = "krajewski";
  static constexpr std::string_view source = "Krajewski et al. 2024, Scaling Laws for Fine-Grained Mixture of Experts";
  static constexpr std::string_view formula = "L = c + (g / G^gamma + a) / N^alpha + b / D^beta";

  Parameters parameters() const {
    return {{"c", Scale::log, -3, 2},           {"a", Scale::log, -5, 35},     {"g", Scale::log, -5, 35},
            {"gamma", Scale::linear, -2.5, 2.5}, {"alpha", Scale::linear, 0, 2.5}, {"b", Scale::log, -5, 35},
            {"beta", Scale::linear, 0, 2.5}};
  }
  std::vector<std::string> columns() const { return {"N", "D", "G"}; }

  struct Prepared {
    Eigen::ArrayXd log_n, log_d, log_g;
    Eigen::Index size() const { return log_n.size(); }
    void log_predict(const Eigen::VectorXd& th, Eigen::ArrayXd& out, Eigen::MatrixXd* jac) const {
      Scratch& s = Scratch::local();
      s.terms.resize(size(), 4);
      s.terms.col(0).setConstant(th[0]);
      s.terms.col(1) = th[1] - th[4] * log_n;
      s.terms.col(2) = th[2] - th[3] * log_g - th[4] * log_n;
      s.terms.col(3) = th[5] - th[6] * log_d;
      log_sum_exp(s.terms, out, s.b);
      if (!jac) return;
      Eigen::MatrixXd& J = *jac;
      const auto w = [&](int k) { return s.terms.col(k); };
      J.col(0) = w(0).matrix();
      J.col(1) = w(1).matrix();
      J.col(2) = w(2).matrix();
      J.col(3) = (-w(2) * log_g).matrix();
      J.col(4) = (-(w(1) + w(2)) * log_n).matrix();
      J.col(5) = w(3).matrix();
      J.col(6) = (-w(3) * log_d).matrix();
    }
  };
  Prepared prepare(const Runs& runs) const { return {runs["N"].log(), runs["D"].log(), runs["G"].log()}; }
};

}  // namespace loopscale::law
