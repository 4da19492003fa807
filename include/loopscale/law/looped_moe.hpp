// The looped-MoE laws. The MoE loss law of Ludziejewski et al. 2025 (joint MoE scaling laws) over Clark's transformed
// expert count Ehat (expert_transform.hpp), with an effective parameter count N_eff
// (recurrence.hpp) in place of N:
//   L = A Ehat^delta N_eff^-(alpha + gamma ln Ehat) + B Ehat^omega D^-(beta + zeta ln Ehat) + c.
// The exponents carry an explicit minus so alpha and beta are positive, as in Chinchilla.
// Chen et al.'s looped-MoE law is this form with the bounded recurrence N_eff(R, m).
#pragma once

#include <algorithm>
#include <array>
#include <string_view>
#include <utility>
#include <vector>

#include "loopscale/law/constants.hpp"
#include "loopscale/law/expert_transform.hpp"
#include "loopscale/law/law.hpp"
#include "loopscale/law/recurrence.hpp"
#include "loopscale/util/text.hpp"

namespace loopscale::law {

template <class Mapping>
struct MoEForm {
  static constexpr int base = 11;  // c, A, B, alpha, beta, delta, gamma, omega, zeta, E_start, E_max

  Parameters parameters() const {
    Parameters p{{"c", Scale::log, -3, 2},          {"A", Scale::log, -5, 35},           {"B", Scale::log, -5, 35},
                 {"alpha", Scale::linear, 0, 2.5},  {"beta", Scale::linear, 0, 2.5},     {"delta", Scale::linear, -3, 3},
                 {"gamma", Scale::linear, -1, 1},   {"omega", Scale::linear, -3, 3},     {"zeta", Scale::linear, -1, 1}};
    for (auto& q : expert_transform_parameters()) p.push_back(q);
    for (auto& q : Mapping::parameters()) p.push_back(q);
    return p;
  }
  std::string domain_fault(const std::map<std::string, double>& c) const { return expert_transform_fault(c); }
  // A negative alpha or beta is legal but makes the loss grow with N_eff or D: what a constant
  // copied from the looped-MoE paper, which writes these exponents without the minus, gives
  // (the sign conventions below).
  std::vector<std::string> notes(const std::map<std::string, double>& c) const {
    std::vector<std::string> out;
    for (const auto& [name, size] : {std::pair<const char*, const char*>{"alpha", "N_eff"}, {"beta", "D"}})
      if (const auto it = c.find(name); it != c.end() && it->second < 0)
        out.push_back(concat(name, "=", it->second, " is negative, so the predicted loss grows with ", size,
                             "; loopscale writes this law's exponents with a minus, so alpha, beta, gamma and zeta are the"
                             " negatives of the looped-MoE paper's (docs/laws.md): a constant copied from the paper needs its sign changed"));
    return out;
  }
  std::vector<std::string> columns() const {
    auto c = Mapping::columns();
    for (const char* v : {"D", "E", "K"})
      if (std::find(c.begin(), c.end(), v) == c.end()) c.push_back(v);
    return c;
  }

  struct Prepared {
    typename Mapping::Prepared neff;
    Eigen::ArrayXd log_d, e;  // e = E / K, experts per token
    Eigen::Index size() const { return log_d.size(); }

    void log_predict(const Eigen::VectorXd& theta, Eigen::ArrayXd& out, Eigen::MatrixXd* jac) const {
      const Eigen::Index n = size(), q = static_cast<Eigen::Index>(Mapping::parameters().size());
      const double* th = theta.data();
      const double A = th[1], B = th[2], al = th[3], be = th[4], de = th[5], ga = th[6], om = th[7], ze = th[8];
      const double e_start = th[9], e_max = std::exp(th[10]);
      Scratch& s = Scratch::local();
      s.a.resize(n);  // ln N_eff
      s.c.resize(n);  // ln Ehat
      s.d.resize(n);  // d ln Ehat / d E_start
      s.e.resize(n);  // d ln Ehat / d log E_max
      if (q > 0 && jac) s.derivs.resize(n, q);
      neff.log_neff(th + base, s.a, q > 0 && jac ? &s.derivs : nullptr);
      for (Eigen::Index i = 0; i < n; ++i) {
        const ExpertTransform t = expert_transform(e[i], e_start, e_max);
        s.c[i] = t.log_ehat, s.d[i] = t.d_e_start, s.e[i] = t.d_log_e_max;
      }
      s.terms.resize(n, 3);
      s.terms.col(0).setConstant(th[0]);
      s.terms.col(1) = A + de * s.c - (al + ga * s.c) * s.a;
      s.terms.col(2) = B + om * s.c - (be + ze * s.c) * log_d;
      log_sum_exp(s.terms, out, s.b);
      if (!jac) return;
      Eigen::MatrixXd& J = *jac;
      const auto w1 = s.terms.col(1), w2 = s.terms.col(2);
      J.col(0) = s.terms.col(0).matrix();
      J.col(1) = w1.matrix();
      J.col(2) = w2.matrix();
      J.col(3) = (-w1 * s.a).matrix();
      J.col(4) = (-w2 * log_d).matrix();
      J.col(5) = (w1 * s.c).matrix();
      J.col(6) = (-w1 * s.c * s.a).matrix();
      J.col(7) = (w2 * s.c).matrix();
      J.col(8) = (-w2 * s.c * log_d).matrix();
      s.b = w1 * (de - ga * s.a) + w2 * (om - ze * log_d);  // d out / d ln Ehat
      J.col(9) = (s.b * s.d).matrix();
      J.col(10) = (s.b * s.e).matrix();
      for (Eigen::Index k = 0; k < q; ++k) J.col(base + k) = (-w1 * (al + ga * s.c) * s.derivs.col(k)).matrix();
    }
  };
  Prepared prepare(const Runs& runs) const {
    return {Mapping::prepare(runs), runs["D"].log(), runs["E"] / runs["K"]};
  }
};

// Chen et al., "Scaling Laws for Looped Mixture of Experts": bounded recurrence with sparsity.
struct LoopedMoE : MoEForm<BoundedRecurrence<true>> {
  static constexpr std::string_view name = "looped-moe";
  static constexpr std::string_view source = "Chen, Goyal, Krishnamoorthi et al., Scaling Laws for Looped Mixture of Experts (arXiv 2609.40316)";
  static constexpr std::string_view formula =
      "MoE law (Ludziejewski 2025, Clark's Ehat) with N_eff = N_act + kappa1 m^-theta N_loop (1 - exp(-(R-1)/(kappa2 m^-theta)))";
};

// Its baselines: bounded without m, the linear unrolled count, the power count.
struct LoopedMoEBounded : MoEForm<BoundedRecurrence<false>> {
  static constexpr std::string_view name = "looped-moe-bounded";
  static constexpr std::string_view source = "Chen et al. (looped MoE), baseline: bounded recurrence without sparsity";
  static constexpr std::string_view formula = "MoE law with N_eff = N_act + kappa1 N_loop (1 - exp(-(R-1)/kappa2))";
};
struct LoopedMoELinear : MoEForm<LinearLoopRecurrence> {
  static constexpr std::string_view name = "looped-moe-linear";
  static constexpr std::string_view source = "Chen et al. (looped MoE), baseline: linear unrolled count (Parcae)";
  static constexpr std::string_view formula = "MoE law with N_eff = N_act + (R-1) N_loop";
};
struct LoopedMoEPower : MoEForm<PowerLoopRecurrence> {
  static constexpr std::string_view name = "looped-moe-power";
  static constexpr std::string_view source = "Chen et al. (looped MoE), baseline: power count (iso-depth)";
  static constexpr std::string_view formula = "MoE law with N_eff = N_act + (R^phi - 1) N_loop";
};
// The looped-MoE paper's published numbers (Chen, Goyal, Krishnamoorthi et al., arXiv 2609.40316), as
// IsoDepthPublished (iso_depth.hpp) is for the iso-depth paper.
//
// Sign conventions. The paper writes the MoE form (Ludziejewski et al. 2025) with its exponents as
// they stand,
//   L = A Ehat^delta N_eff^(alpha + gamma ln Ehat) + B Ehat^omega D^(beta + zeta ln Ehat) + c,
// so its fitted alpha, beta are negative numbers (loss falls with N_eff and D). loopscale writes
//   L = A Ehat^delta N_eff^-(alpha + gamma ln Ehat) + B Ehat^omega D^-(beta + zeta ln Ehat) + c
// with alpha, beta positive as in Chinchilla. So alpha, beta, gamma and zeta change sign between
// the paper and loopscale (alpha_loopscale = -alpha_paper, ...); A, B, c, delta, omega, E_start,
// E_max are the same numbers. The recurrence mapping N_eff(R, m) = N_act + kappa1 m^-theta N_loop
// (1 - exp(-(R - 1) / (kappa2 m^-theta))) is written the same way in both, so kappa1, kappa2 and
// theta (positive: sparser models gain more, for longer) enter loopscale's LoopedMoE unchanged.
//
// Published: the mapping's three constants with their 90% intervals, the full law's RMSE, and the
// held-out RMSE of the baselines on the paper's held-out R slice (MoE models). The full law's
// other constants (A, B, alpha, ...) are not published in a form this repository holds, so a
// complete parameter set comes from a fit (`loopscale fit --law looped-moe`) or, in the paper's
// signs, through from_paper_signs.
struct LoopedMoEPublished {
  static constexpr double kappa1 = 0.3682, kappa2 = 1.4037, theta = 0.3286;
  static constexpr double kappa1_lo = 0.3658, kappa1_hi = 0.3723;  // 90% intervals
  static constexpr double kappa2_lo = 1.3896, kappa2_hi = 1.4243;
  static constexpr double theta_lo = 0.3183, theta_hi = 0.3350;
  static constexpr double rmse = 0.0037;  // of the full law
  // Held-out RMSE on the R slice (MoE): the ranking bounded(R, m) < bounded < power < linear.
  static constexpr double holdout_linear = 0.2847, holdout_power = 0.0480, holdout_bounded = 0.0190,
                          holdout_bounded_m = 0.0100;
  // The paper's grid: N_act in {0.3, 0.6, 1.0}B, D 100-500B tokens, E in {1, 2, 4, 8, 16},
  // R in {1, 2, 3, 4, 6, 8}; held-out slices R = 16, E = 16, N_act = 1.0B, D in (400, 500]B.
  static constexpr std::array<double, 5> experts{1, 2, 4, 8, 16};
  static constexpr std::array<double, 6> recurrences{1, 2, 3, 4, 6, 8};
};

// The parameters whose sign differs between the paper's way of writing the MoE form and loopscale's.
inline constexpr std::array<std::string_view, 4> paper_sign_flipped{"alpha", "beta", "gamma", "zeta"};

// Constants written with the paper's signs, in loopscale's: alpha, beta, gamma, zeta negated, the
// rest unchanged. Its own inverse (to_paper_signs).
inline Constants from_paper_signs(Constants c) {
  for (const std::string_view k : paper_sign_flipped) {
    const auto it = c.find(std::string(k));
    if (it != c.end()) it->second = -it->second;
  }
  return c;
}
inline Constants to_paper_signs(const Constants& c) { return from_paper_signs(c); }

// The MoE law alone, for runs without recurrence.
struct MoE : MoEForm<DenseParams> {
  static constexpr std::string_view name = "moe";
  static constexpr std::string_view source = "Ludziejewski et al. 2025 (joint MoE scaling laws) with Clark et al. 2022's Ehat";
  static constexpr std::string_view formula = "L = A Ehat^delta N^-(alpha + gamma ln Ehat) + B Ehat^omega D^-(beta + zeta ln Ehat) + c";
};

}  // namespace loopscale::law
