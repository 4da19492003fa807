// Abnar et al. 2025, "Parameters vs FLOPs: Scaling Laws for Optimal Sparsity for Mixture-of-Experts
// Language Models": sparsity S = (E - K) / E (E experts, K active) enters as
//   L = a N^-alpha + b D^-beta + c (1 - S)^-lambda + d (1 - S)^-delta N^-gamma + e,
// fitted as the log-sum-exp of its five log-terms.
#pragma once

#include <string_view>

#include "loopscale/law/law.hpp"

namespace loopscale::law {

struct Abnar {
  static constexpr std::string_view name = "abnar";
  static constexpr std::string_view source = "Abnar et al. 2025, Parameters vs FLOPs: Scaling Laws for Optimal Sparsity for MoE LMs";
  static constexpr std::string_view formula = "L = a N^-alpha + b D^-beta + c (1-S)^-lambda + d (1-S)^-delta N^-gamma + e";

  Parameters parameters() const {
    return {{"e", Scale::log, -3, 2},            {"a", Scale::log, -5, 35},          {"alpha", Scale::linear, 0, 2.5},
            {"b", Scale::log, -5, 35},           {"beta", Scale::linear, 0, 2.5},    {"c", Scale::log, -10, 2},
            {"lambda", Scale::linear, -3, 3},    {"d", Scale::log, -10, 35},         {"delta", Scale::linear, -3, 3},
            {"gamma", Scale::linear, 0, 2.5}};
  }
  std::vector<std::string> columns() const { return {"N", "D", "E", "K"}; }

  struct Prepared {
    Eigen::ArrayXd log_n, log_d, log_dense;  // log_dense = log(1 - S) = log(K / E)
    Eigen::Index size() const { return log_n.size(); }
    void log_predict(const Eigen::VectorXd& th, Eigen::ArrayXd& out, Eigen::MatrixXd* jac) const {
      Scratch& s = Scratch::local();
      s.terms.resize(size(), 5);
      s.terms.col(0).setConstant(th[0]);
      s.terms.col(1) = th[1] - th[2] * log_n;
      s.terms.col(2) = th[3] - th[4] * log_d;
      s.terms.col(3) = th[5] - th[6] * log_dense;
      s.terms.col(4) = th[7] - th[8] * log_dense - th[9] * log_n;
      log_sum_exp(s.terms, out, s.b);
      if (!jac) return;
      Eigen::MatrixXd& J = *jac;
      const auto w = [&](int k) { return s.terms.col(k); };
      J.col(0) = w(0).matrix();
      J.col(1) = w(1).matrix();
      J.col(2) = (-w(1) * log_n).matrix();
      J.col(3) = w(2).matrix();
      J.col(4) = (-w(2) * log_d).matrix();
      J.col(5) = w(3).matrix();
      J.col(6) = (-w(3) * log_dense).matrix();
      J.col(7) = w(4).matrix();
      J.col(8) = (-w(4) * log_dense).matrix();
      J.col(9) = (-w(4) * log_n).matrix();
    }
  };
  Prepared prepare(const Runs& runs) const {
    return {runs["N"].log(), runs["D"].log(), (runs["K"] / runs["E"]).log()};
  }
};

}  // namespace loopscale::law
