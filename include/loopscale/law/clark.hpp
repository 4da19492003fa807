// Clark et al. 2022, "Unified Scaling Laws for Routed Language Models": a bilinear law in the
// dense model size N and the transformed expert count Ehat (expert_transform.hpp),
//   log L = a log N + b log Ehat + c log N log Ehat + d,
// written here with natural logs. Clark et al. use log10: their a and b carry over unchanged, their
// c becomes c / ln 10 and their d becomes d ln 10.
#pragma once

#include <string_view>

#include "loopscale/law/expert_transform.hpp"
#include "loopscale/law/law.hpp"

namespace loopscale::law {

struct Clark {
  static constexpr std::string_view name = "clark";
  static constexpr std::string_view source = "Clark et al. 2022, Unified Scaling Laws for Routed Language Models";
  static constexpr std::string_view formula = "log L = a log N + b log Ehat + c log N log Ehat + d";

  Parameters parameters() const {
    Parameters p{{"a", Scale::linear, -2, 2}, {"b", Scale::linear, -2, 2}, {"c", Scale::linear, -1, 1}, {"d", Scale::linear, -20, 20}};
    for (auto& q : expert_transform_parameters()) p.push_back(q);
    return p;
  }
  std::string domain_fault(const std::map<std::string, double>& c) const { return expert_transform_fault(c); }
  std::vector<std::string> columns() const { return {"N", "E", "K"}; }

  struct Prepared {
    Eigen::ArrayXd log_n, e;
    Eigen::Index size() const { return log_n.size(); }
    void log_predict(const Eigen::VectorXd& th, Eigen::ArrayXd& out, Eigen::MatrixXd* jac) const {
      const double e_start = th[4], e_max = std::exp(th[5]);
      for (Eigen::Index i = 0; i < size(); ++i) {
        const ExpertTransform t = expert_transform(e[i], e_start, e_max);
        const double ln = log_n[i], le = t.log_ehat;
        out[i] = th[0] * ln + th[1] * le + th[2] * ln * le + th[3];
        if (jac) {
          const double dle = th[1] + th[2] * ln;
          jac->row(i) << ln, le, ln * le, 1.0, dle * t.d_e_start, dle * t.d_log_e_max;
        }
      }
    }
  };
  Prepared prepare(const Runs& runs) const { return {runs["N"].log(), runs["E"] / runs["K"]}; }
};

}  // namespace loopscale::law
