// Effective parameter counts of looped models: how many dense parameters a model with a shared
// block run r (= R) times is worth. Each mapping gives log N_eff per point and its derivatives in
// its own parameters, and plugs into a loss law's form as its template argument: ChinchillaForm
// (chinchilla.hpp; the iso-depth and Parcae laws) or MoEForm (looped_moe.hpp; the looped-MoE laws).
//
// Variables: N_once (params run once), N_rec (the shared block, = N_loop), r (= R); for MoE runs
// N_act = N_once + N_rec (active params) and m = N_act / N_total.
#pragma once

#include <string>
#include <vector>

#include <Eigen/Core>

#include "loopscale/law/parameter.hpp"
#include "loopscale/law/runs.hpp"

namespace loopscale::law {

// A plain dense count: N_eff = N.
struct DenseParams {
  static constexpr const char* label = "N";
  static Parameters parameters() { return {}; }
  static std::vector<std::string> columns() { return {"N"}; }
  struct Prepared {
    Eigen::ArrayXd log_n;
    void log_neff(const double*, Eigen::ArrayXd& out, Eigen::ArrayXXd*) const { out = log_n; }
  };
  static Prepared prepare(const Runs& runs) { return {runs["N"].log()}; }
};

// Parcae (2026): a looped model costs and counts as its unrolled size, N_once + r N_rec.
struct UnrolledRecurrence {
  static constexpr const char* label = "N_once + r N_rec";
  static Parameters parameters() { return {}; }
  static std::vector<std::string> columns() { return {"N_once", "N_rec", "r"}; }
  struct Prepared {
    Eigen::ArrayXd log_n;
    void log_neff(const double*, Eigen::ArrayXd& out, Eigen::ArrayXXd*) const { out = log_n; }
  };
  static Prepared prepare(const Runs& runs) { return {(runs["N_once"] + runs["r"] * runs["N_rec"]).log()}; }
};

// Schwethelm et al. 2026 (iso-depth): N_once + r^phi N_rec. phi = 0 counts the shared block once,
// phi = 1 is the unrolled count. Identical to the looped-MoE paper's "power" baseline
// N_act + (R^phi - 1) N_loop.
struct PowerRecurrence {
  static constexpr const char* label = "N_once + r^phi N_rec";
  static Parameters parameters() { return {{"phi", Scale::linear, -3, 3}}; }
  static std::vector<std::string> columns() { return {"N_once", "N_rec", "r"}; }
  struct Prepared {
    Eigen::ArrayXd n_once, log_n_rec, log_r;
    void log_neff(const double* th, Eigen::ArrayXd& out, Eigen::ArrayXXd* d) const {
      // rec = r^phi N_rec; d log N_eff / d phi = log r * rec / N_eff.
      const double phi = th[0];
      if (d) {
        d->col(0) = (phi * log_r + log_n_rec).exp();
        out = n_once + d->col(0);
        d->col(0) *= log_r / out;
        out = out.log();
      } else {
        out = (n_once + (phi * log_r + log_n_rec).exp()).log();
      }
    }
  };
  static Prepared prepare(const Runs& runs) { return {runs["N_once"], runs["N_rec"].log(), runs["r"].log()}; }
};

// Chen et al. (looped MoE): the gain from recurrence saturates,
//   N_eff = N_act + kappa1 q N_loop (1 - exp(-(R - 1) / (kappa2 q))),  q = m^-theta,
// so sparser models (small m) keep gaining longer. WithSparsity = false is the paper's "bounded
// without m" baseline (q = 1).
template <bool WithSparsity>
struct BoundedRecurrence {
  static constexpr const char* label = WithSparsity ? "bounded(R, m)" : "bounded(R)";
  static Parameters parameters() {
    Parameters p{{"kappa1", Scale::log, -7, 3}, {"kappa2", Scale::log, -5, 5}};
    if (WithSparsity) p.push_back({"theta", Scale::linear, -2, 2});
    return p;
  }
  static std::vector<std::string> columns() {
    if (WithSparsity) return {"N_act", "N_loop", "R", "m"};
    return {"N_act", "N_loop", "R"};
  }
  struct Prepared {
    Eigen::ArrayXd n_act, n_loop, r_minus_1, log_m;
    void log_neff(const double* th, Eigen::ArrayXd& out, Eigen::ArrayXXd* d) const {
      const double k1 = std::exp(th[0]), k2 = std::exp(th[1]), theta = WithSparsity ? th[2] : 0.0;
      const Eigen::Index n = n_act.size();
      for (Eigen::Index i = 0; i < n; ++i) {
        const double q = WithSparsity ? std::exp(-theta * log_m[i]) : 1.0;
        const double u = r_minus_1[i] / (k2 * q);
        const double eu = std::exp(-u), g = 1 - eu;
        const double gain = k1 * q * n_loop[i];
        const double neff = n_act[i] + gain * g;
        out[i] = std::log(neff);
        if (d) {
          (*d)(i, 0) = gain * g / neff;          // d / d log kappa1
          (*d)(i, 1) = -gain * eu * u / neff;    // d / d log kappa2
          if (WithSparsity) (*d)(i, 2) = gain * log_m[i] * (u * eu - g) / neff;  // d / d theta
        }
      }
    }
  };
  static Prepared prepare(const Runs& runs) {
    Prepared p{runs["N_act"], runs["N_loop"], runs["R"] - 1, {}};
    p.log_m = WithSparsity ? Eigen::ArrayXd(runs["m"].log()) : Eigen::ArrayXd::Zero(runs.size());
    return p;
  }
};

// Chen et al.'s "linear" baseline: every recurrence is worth a full copy, N_act + (R - 1) N_loop.
struct LinearLoopRecurrence {
  static constexpr const char* label = "N_act + (R - 1) N_loop";
  static Parameters parameters() { return {}; }
  static std::vector<std::string> columns() { return {"N_act", "N_loop", "R"}; }
  struct Prepared {
    Eigen::ArrayXd log_n;
    void log_neff(const double*, Eigen::ArrayXd& out, Eigen::ArrayXXd*) const { out = log_n; }
  };
  static Prepared prepare(const Runs& runs) {
    return {(runs["N_act"] + (runs["R"] - 1) * runs["N_loop"]).log()};
  }
};

// Chen et al.'s "power" baseline on MoE variables: N_act + (R^phi - 1) N_loop.
struct PowerLoopRecurrence {
  static constexpr const char* label = "N_act + (R^phi - 1) N_loop";
  static Parameters parameters() { return {{"phi", Scale::linear, -3, 3}}; }
  static std::vector<std::string> columns() { return {"N_act", "N_loop", "R"}; }
  using Prepared = PowerRecurrence::Prepared;
  static Prepared prepare(const Runs& runs) {
    return {runs["N_act"] - runs["N_loop"], runs["N_loop"].log(), runs["R"].log()};
  }
};

}  // namespace loopscale::law
