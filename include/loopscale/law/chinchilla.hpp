// Chinchilla's loss law (Hoffmann et al. 2022, approach 3), L = E + A N^-alpha + B D^-beta, and
// its form over an effective parameter count N_eff (recurrence.hpp), which gives the iso-depth and
// Parcae laws. Fitted as log L = LSE(log E, log A - alpha log N_eff, log B - beta log D).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>
#include <cmath>
#include <limits>
#include <string_view>
#include <type_traits>

#include "loopscale/law/law.hpp"
#include "loopscale/law/recurrence.hpp"
#include "loopscale/law/simd_math.hpp"

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

  struct Range {
    double lo = 0, hi = 0;
  };
  struct Prepared {
    typename Mapping::Prepared neff;
    Eigen::ArrayXd log_d;
    struct {
      Range log_d, log_n, log_r, log_n_rec, n_once;
    } ranges;
    // The distinct model sizes (the N side of a point: log N, or N_once, N_rec and r), for the
    // fused pass: the N term exp(log A - alpha log N_eff) (and N_eff itself under the power
    // mapping) is computed once per model and looked up per point. Filled only where it pays:
    // when at most `shared_models_max` of the points' models are distinct (measured: below).
    struct {
      typename Mapping::Prepared neff;   // one row per distinct model
      std::vector<std::int32_t> of_point;  // point i's row
    } models;
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
    // The fitter's inner loop in one pass (AnyPreparedLaw::huber): per point the exponentials, the
    // division and the log of the law (simd_math.hpp, 4 or 8 points a step), the Huber loss of the
    // log residual and its gradient, summed in registers. The log_predict route writes the terms,
    // the weights and an n x p Jacobian to memory and reads them back, with Eigen's slower exp
    // and log; perf put it at half of a whole fit (docs/benchmarks.md). Mappings with no
    // parameters (a prepared log N) and PowerRecurrence's (phi) have the pass; for others this
    // returns false and the fitter takes log_predict. Before the pass, the arguments of every
    // exponential are bounded from the data's ranges: within [-708, 700] each sum is a positive
    // normal number and needs no check per point; otherwise (far outside the law's box) this
    // returns false and log_predict's log-sum-exp takes those points.
    bool huber(const Eigen::VectorXd& theta, const Eigen::ArrayXd& log_loss, double delta, double& f, Eigen::VectorXd& grad) const {
      constexpr bool fixed_n = requires { neff.log_n; };
      constexpr bool power = std::is_same_v<typename Mapping::Prepared, PowerRecurrence::Prepared>;
      if constexpr (!fixed_n && !power) {
        return false;
      } else {
        const double* th = theta.data();
        const Eigen::Index n = size();
        if (n == 0) return false;
        // Bounds of the exponentials' arguments: a x + b over x in [lo, hi] lies between its
        // values at the ends.
        const auto span = [](double a, double b, const Range& x) {
          const double u = a * x.lo + b, v = a * x.hi + b;
          return Range{std::min(u, v), std::max(u, v)};
        };
        const auto ok = [](const Range& r) { return r.lo >= -708 && r.hi <= 700; };
        Range ln;
        if constexpr (fixed_n) {
          ln = ranges.log_n;
        } else {
          const Range lr = span(th[5], 0, ranges.log_r);  // phi log r
          const Range rec{lr.lo + ranges.log_n_rec.lo, lr.hi + ranges.log_n_rec.hi};
          if (!ok(rec) || !(ranges.n_once.lo >= 0)) return false;
          ln = {std::log(ranges.n_once.lo + std::exp(rec.lo)), std::log(ranges.n_once.hi + std::exp(rec.hi))};
        }
        if (!(th[0] >= -708 && th[0] <= 700) || !ok(span(-th[3], th[1], ln)) || !ok(span(-th[4], th[2], ranges.log_d))) return false;

        namespace v = simd;
        using vd = v::vd;
        const vd E = v::splat(std::exp(th[0])), lA = v::splat(th[1]), lB = v::splat(th[2]), al = v::splat(th[3]),
                 be = v::splat(th[4]), dl = v::splat(delta), ndl = v::splat(-delta);
        const vd phi = v::splat(power ? th[5] : 0.0);
        // The N side of v::lanes points (or models) from their arrays at i, or from `pad`:
        // log N_eff, its N term e1 and, under the power mapping, d log N_eff / d phi.
        const auto n_side = [&](const typename Mapping::Prepared& nf, Eigen::Index i, const double* pad, vd& lne, vd& e1, vd& dphi) {
          const auto get = [&](const Eigen::ArrayXd& a, int k) { return pad ? v::load(pad + v::lanes * k) : v::load(a.data() + i); };
          if constexpr (fixed_n) {
            lne = get(nf.log_n, 2);
          } else {
            const vd lr = get(nf.log_r, 2), rec = v::exp_in_range(phi * lr + get(nf.log_n_rec, 3)), ne = get(nf.n_once, 4) + rec;
            lne = v::log(ne);
            dphi = lr * rec / ne;  // d log N_eff / d phi
          }
          e1 = v::exp_in_range(lA - al * lne);
        };
        // `pad` rows for a partial last step: copies of the last point (or model).
        const auto fill_pad = [&](double* pad, const typename Mapping::Prepared& nf, Eigen::Index i, Eigen::Index n_rows) {
          for (int k = 0; k < v::lanes; ++k) {
            const Eigen::Index j = std::min(i + k, n_rows - 1);
            if constexpr (fixed_n) {
              pad[2 * v::lanes + k] = nf.log_n[j];
            } else {
              pad[2 * v::lanes + k] = nf.log_r[j];
              pad[3 * v::lanes + k] = nf.log_n_rec[j];
              pad[4 * v::lanes + k] = nf.n_once[j];
            }
          }
        };
        // With the model table: its N side once per model, three values a model side by side.
        const bool table = !models.of_point.empty();
        thread_local std::vector<double> tab;
        if (table) {
          Eigen::Index m;
          if constexpr (fixed_n) m = models.neff.log_n.size();
          else m = models.neff.n_once.size();
          tab.resize(static_cast<std::size_t>(3 * (m + v::lanes)));
          for (Eigen::Index i = 0; i < m; i += v::lanes) {
            alignas(v::bytes) double pad[5 * v::lanes];
            const bool part = i + v::lanes > m;
            if (part) fill_pad(pad, models.neff, i, m);
            vd lne, e1, dphi = v::splat(0);
            n_side(models.neff, i, part ? pad : nullptr, lne, e1, dphi);
            for (int k = 0; k < v::lanes; ++k) {
              double* t = tab.data() + 3 * (i + k);
              t[0] = lne[k], t[1] = e1[k], t[2] = dphi[k];
            }
          }
        }
        vd fs = v::splat(0), g0 = fs, g1 = fs, g2 = fs, g3 = fs, g4 = fs, g5 = fs;
        // v::lanes points (2, 4 or 8: simd_math.hpp); `pad` (the last, partial step) holds copies of
        // the last point, and `live` zeroes their contributions.
        // A template over `Table`, so the loop without the table is the plain one.
        const auto step = [&]<bool Table>(std::bool_constant<Table>, Eigen::Index i, const double* pad, const vd live) {
          const auto get = [&](const Eigen::ArrayXd& a, int k) { return pad ? v::load(pad + v::lanes * k) : v::load(a.data() + i); };
          const vd lnd = get(log_d, 0), ll = get(log_loss, 1);
          vd lne, e1, dphi = v::splat(0);
          if constexpr (Table) {
            for (int k = 0; k < v::lanes; ++k) {
              const double* t = tab.data() + 3 * models.of_point[static_cast<std::size_t>(std::min<Eigen::Index>(i + k, n - 1))];
              lne[k] = t[0], e1[k] = t[1], dphi[k] = t[2];
            }
          } else {
            n_side(neff, i, pad, lne, e1, dphi);
          }
          const vd e2 = v::exp_in_range(lB - be * lnd);
          const vd s = E + e1 + e2;
          const vd r = v::log(s) - ll;
          const vd c = pad ? v::vmin(v::vmax(r, ndl), dl) * live : v::vmin(v::vmax(r, ndl), dl);  // the Huber slope
          const vd h = 0.5 * c * c + dl * (v::vabs(r) - v::vabs(c));
          fs += pad ? h * live : h;
          const vd cinv = c / s;
          const vd w1 = cinv * e1, w2 = cinv * e2;
          g0 += cinv * E;
          g1 += w1;
          g2 += w2;
          g3 -= w1 * lne;
          g4 -= w2 * lnd;
          if constexpr (power) g5 -= w1 * dphi;
        };
        const auto steps = [&]<bool Table>(std::bool_constant<Table> t) {
          Eigen::Index i = 0;
          for (; i + v::lanes <= n; i += v::lanes) step(t, i, nullptr, v::splat(1));
          if (i < n) {
            alignas(v::bytes) double pad[5 * v::lanes];
            vd live = v::splat(0);
            for (int k = 0; k < v::lanes; ++k) {
              const Eigen::Index j = std::min(i + k, n - 1);
              pad[k] = log_d[j];
              pad[v::lanes + k] = log_loss[j];
              live[k] = i + k < n ? 1.0 : 0.0;
            }
            fill_pad(pad, neff, i, n);
            step(t, i, pad, live);
          }
        };
        if (table) steps(std::true_type{});
        else steps(std::false_type{});
        f = v::hsum(fs);
        grad[0] = v::hsum(g0), grad[1] = v::hsum(g1), grad[2] = v::hsum(g2), grad[3] = v::hsum(g3), grad[4] = v::hsum(g4);
        if constexpr (power) grad[5] = th[3] * v::hsum(g5);  // g5 holds -sum c w1 dphi
        return std::isfinite(f) && grad.allFinite();
      }
    }
  };
  // The data's ranges, for huber's bounds (empty ranges for arrays a mapping does not have).
  static Range range_of(const Eigen::ArrayXd& a) { return a.size() ? Range{a.minCoeff(), a.maxCoeff()} : Range{}; }
  static Prepared make(typename Mapping::Prepared neff, Eigen::ArrayXd log_d) {
    Prepared p{std::move(neff), std::move(log_d), {}, {}};
    p.ranges.log_d = range_of(p.log_d);
    if constexpr (requires { p.neff.log_n; }) p.ranges.log_n = range_of(p.neff.log_n);
    if constexpr (std::is_same_v<typename Mapping::Prepared, PowerRecurrence::Prepared>) {
      p.ranges.log_r = range_of(p.neff.log_r);
      p.ranges.log_n_rec = range_of(p.neff.log_n_rec);
      p.ranges.n_once = range_of(p.neff.n_once);
    }
    index_models(p);
    return p;
  }
  // At most this share of distinct models among the points, the fused pass uses the model table
  // (Prepared::models). Measured on AMD EPYC Zen 4 (docs/benchmarks.md, "Zen 4 with AVX-512"):
  // the iso-depth grid (44 models of 116 points) gains, Epoch's (142 of 240) does not.
  static constexpr double shared_models_max = 0.5;
  static void index_models(Prepared& p) {
    const Eigen::Index n = p.size();
    std::vector<std::array<double, 3>> key(static_cast<std::size_t>(n));
    for (Eigen::Index i = 0; i < n; ++i) {
      if constexpr (requires { p.neff.log_n; }) key[i] = {p.neff.log_n[i], 0, 0};
      else if constexpr (std::is_same_v<typename Mapping::Prepared, PowerRecurrence::Prepared>)
        key[i] = {p.neff.log_r[i], p.neff.log_n_rec[i], p.neff.n_once[i]};
      else return;  // no fused pass for this mapping
    }
    std::vector<std::array<double, 3>> rows = key;
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    if (n == 0 || static_cast<double>(rows.size()) > shared_models_max * static_cast<double>(n)) return;
    const auto m = static_cast<Eigen::Index>(rows.size());
    p.models.of_point.resize(static_cast<std::size_t>(n));
    for (Eigen::Index i = 0; i < n; ++i)
      p.models.of_point[i] = static_cast<std::int32_t>(std::lower_bound(rows.begin(), rows.end(), key[i]) - rows.begin());
    if constexpr (requires { p.neff.log_n; }) {
      p.models.neff.log_n.resize(m);
      for (Eigen::Index j = 0; j < m; ++j) p.models.neff.log_n[j] = rows[j][0];
    } else {
      p.models.neff.log_r.resize(m), p.models.neff.log_n_rec.resize(m), p.models.neff.n_once.resize(m);
      for (Eigen::Index j = 0; j < m; ++j)
        p.models.neff.log_r[j] = rows[j][0], p.models.neff.log_n_rec[j] = rows[j][1], p.models.neff.n_once[j] = rows[j][2];
    }
  }
  Prepared prepare(const Runs& runs) const { return make(Mapping::prepare(runs), runs["D"].log()); }
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
