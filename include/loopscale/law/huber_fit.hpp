// Fitting a law the way the scaling-law papers do: the summed Huber loss (delta 1e-3) of log
// residuals, minimised by L-BFGS-B (LBFGSpp) in the law's box from many starts, keeping the best.
// Starts run in parallel (OpenMP); each start is a pure function of its point, and the winner is
// the lowest objective, ties to the lowest start index, so the result does not depend on the
// thread count. A start whose line search fails (LBFGSpp throws) is counted as failed and skipped.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <concepts>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Core>
#include <LBFGSB.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "loopscale/law/identifiability.hpp"
#include "loopscale/law/law.hpp"
#include "loopscale/util/text.hpp"
#include "loopscale/util/extern_templates.hpp"
#include "loopscale/util/thread_limit.hpp"
#include "loopscale/law/small_lbfgsb.hpp"
#include "loopscale/law/starts.hpp"

namespace loopscale::law {

// The smallest Huber delta a fit takes. Below about delta * points ~ 1e-10 the objective is an L1
// sum scaled so far down that its gradient (of order delta per point) is under the polish's
// absolute gtol (FitOptions::gtol, 1e-10) from the first step: the optimiser stops where it
// started, and the start is printed as a fit (a 9-run Chinchilla fit ended at R^2 -1.3e8 with delta
// 1e-12 and at -137 with 1e-320, where the objective is a denormal; 1e-10 still gave R^2 0.83
// against 0.86 at 1e-3). Residuals are of log loss, of order 1e-3 to 1e-1, so a useful delta is
// orders above this bound.
inline constexpr double min_huber_delta = 1e-10;

// A Huber delta that is not finite makes the objective NaN (delta * (|r| - |c|) is inf * 0 inside
// the quadratic zone), one below min_huber_delta a fit that never moves: both are refused.
inline void check_huber_delta(double delta) {
  if (!std::isfinite(delta) || !(delta >= min_huber_delta))
    throw data_error(concat("--huber-delta ", delta, ": must be a finite number >= ", min_huber_delta,
                            " (the Huber delta, on residuals of log loss)"));
}

struct FitOptions {
  double huber_delta = 1e-3;  // check_huber_delta
  std::map<std::string, double> frozen;  // name -> value (natural units, not logs)
  std::vector<Eigen::VectorXd> starts;   // fitted coordinates; empty: the law's default plan
  // Stopping rules, in three phases (fit_prepared).
  // - Scout: every start runs under SciPy's pgtol (1e-5) with a looser ftol, `scout_ftol` (1e-7:
  //   an iteration that gains less than 1e-7 of the objective ends the start).
  // - Screen: the `screen_share` of the starts with the lowest scouted objectives (at least
  //   `polish` of them) go on from where they stopped under SciPy's L-BFGS-B defaults (pgtol 1e-5,
  //   factr 1e7, i.e. ftol 2.2e-9). scout_ftol <= screen_ftol drops the scout: every start then
  //   runs under SciPy's rules, as the fitter did before the scout.
  // - Polish: SciPy's rules are absolute, and the summed Huber loss with delta 1e-3 has gradients
  //   of order delta, so a screened start can stop while still far from its optimum (on
  //   noise-free synthetic data, a Chinchilla fit from 64 random starts ends at objective 3e-3
  //   instead of 0; the iso-depth fit of bench_law stops 0.5% above SciPy's best). The `polish`
  //   starts with the lowest objectives then go on under ftol and gtol, three orders tighter.
  // Why the scout: on both benchmark fits about half the starts end in the best optimum when run
  // to the tight rules (2,127 of Epoch's 4,500, 224 of bench_law's 500 iso-depth starts), but
  // SciPy's rules stop them at scattered points on the way; which start is furthest along says
  // little about which basin it is in, and the polish of 8 reaches the same optimum from a scout
  // at 1e-7 as from SciPy's screen, the fit taking about 40% of the evaluations (with the weak
  // Wolfe search; docs/benchmarks.md). The screen of the best tenth keeps SciPy's rules for the
  // starts the polish picks from.
  // polish = -1 runs every start to the tight rules in one phase; polish = 0 stops after the screen.
  double scout_ftol = 1e-7;
  double screen_share = 0.1;
  double screen_ftol = 2.220446049250313e-09;
  double screen_gtol = 1e-5;
  int polish = 8;
  double ftol = 0;
  double gtol = 1e-10;
  // A start whose line search can make no more progress counts as converged if its projected
  // gradient is below this (SciPy's pgtol), else as failed.
  double stationary_gtol = 1e-5;
  // L-BFGS corrections kept (SciPy's maxcor is 10). LBFGSpp factorises a 2m x 2m matrix every
  // iteration, which for laws of 5 or 6 parameters costs more than the law itself: the screen
  // keeps 5, which takes as many iterations here as 10; the polish keeps 10, which ends closer to
  // the optimum in the flat valleys of the iso-depth law (docs/benchmarks.md).
  int screen_corrections = 5;
  int corrections = 10;
  int max_iterations = 10000;  // per phase, as in the iso-depth paper
  int max_restarts = 20;  // after failed line searches, see fit_prepared
  int threads = 0;  // 0: OpenMP's default (all cores)
  // The line search of L-BFGS-B (laws of at most 16 free parameters; SmallLBFGSB): the weak Wolfe
  // conditions by bracketing (small_lbfgsb.hpp says why), or LBFGSpp's More-Thuente search for
  // the strong ones, as SciPy's L-BFGS-B. With more_thuente, 27% of Epoch's grid starts ran out of
  // line-search trials under SciPy's rules and restarted; weak_wolfe took 18% fewer evaluations
  // there and 26% fewer on the iso-depth fit, to the same optimum (docs/benchmarks.md).
  using LineSearch = detail::SmallLBFGSB::Search;
  LineSearch line_search = LineSearch::weak_wolfe;
};

// Where a fitted coordinate sits on an edge of its parameter's box (within 1e-4 of the box's
// width): "lower" or "upper", else empty. FitResult::box_edge and sweep compare use this rule.
inline std::string_view box_edge_of(const Parameter& p, double fitted) {
  const double tol = 1e-4 * (p.hi - p.lo);
  if (fitted <= p.lo + tol) return "lower";
  if (fitted >= p.hi - tol) return "upper";
  return {};
}

struct FitResult {
  std::string law;
  Parameters parameters;
  Eigen::VectorXd theta;      // best point, fitted coordinates
  Eigen::VectorXd values;     // best point, natural units
  std::vector<bool> frozen;   // per parameter
  double objective = std::numeric_limits<double>::infinity();
  double r2 = 0;              // of the loss (not its log)
  double rmse = 0;            // of the loss
  double rmse_log = 0;        // of log loss, the fitted quantity
  double max_abs_residual = 0;  // of log loss
  Eigen::ArrayXd residuals;   // log predicted - log observed, per point
  Eigen::ArrayXd predicted;   // predicted loss per point
  int starts = 0;
  int failed_starts = 0;
  int polished = 0;           // starts that went on under the tight rules (FitOptions::polish)
  int best_start = -1;
  double seconds = 0;
  Eigen::Index points = 0;
  // Where the injection counts in the N_once / N_rec (N_act / N_loop) the law read (Runs::injection:
  // rec, once, excluded); empty for a law that reads none of them, or data that do not say.
  std::string injection;

  // Where free parameter k ended on an edge of the law's box (within 1e-4 of the box's width):
  // "lower" or "upper", else empty. There the data did not pin the parameter down inside the box,
  // and the value printed is the box's edge, not an estimate (a smoke sweep's joint fit ended at
  // phi = -3, the lower edge, and its report printed that as phi).
  std::string_view box_edge(std::size_t k) const {
    if (k >= parameters.size() || frozen[k]) return {};
    return box_edge_of(parameters[k], theta[static_cast<Eigen::Index>(k)]);
  }
  // The names of the free parameters on an edge of the box (analysis.json's and fit --json's at_box_edge).
  std::vector<std::string> box_edge_names() const {
    std::vector<std::string> out;
    for (std::size_t k = 0; k < parameters.size(); ++k)
      if (!box_edge(k).empty()) out.push_back(parameters[k].name);
    return out;
  }
  // The same, as "phi (lower edge, -3)"; empty when none is.
  std::vector<std::string> box_edges() const {
    std::vector<std::string> out;
    for (std::size_t k = 0; k < parameters.size(); ++k)
      if (const std::string_view e = box_edge(k); !e.empty())
        out.push_back(concat(parameters[k].name, " (", e, " edge, ", values[static_cast<Eigen::Index>(k)], ")"));
    return out;
  }

  double value(const std::string& name) const {
    const int i = index_of(parameters, name);
    if (i < 0) throw data_error("law " + law + " has no parameter '" + name + "' (it has " + names_of(parameters) + ")");
    return values[i];
  }
};

// Summed Huber loss of residuals and its derivative (the residual clipped to [-delta, delta]).
// Written as 0.5 c^2 + delta (|r| - |c|), c the residual clipped to [-delta, delta]: one pass and
// no temporary array, at every evaluation of every start (5% of a whole fit, measured).
inline double huber_sum(const Eigen::ArrayXd& r, double delta, Eigen::ArrayXd* slope) {
  if (!slope) {
    const auto c = r.max(-delta).min(delta);
    return (0.5 * c.square() + delta * (r.abs() - c.abs())).sum();
  }
  *slope = r.max(-delta).min(delta);
  return (0.5 * slope->square() + delta * (r.abs() - slope->abs())).sum();
}

// Why the fitter's functions below are templates (on the prepared law's type, on the law's): GCC
// instantiates, in every file, the templates that a non-template inline function calls, whether
// the file calls that function or not. As plain inline functions they made every file that
// included this header instantiate LBFGSpp's solver and the fitter's Eigen expressions (design.md,
// "What a user's own file pays"); as templates, only a file that fits pays for the fitter.

// A law to fit: a law's own value type (law.hpp's Law) or its run-time handle.
template <class L>
concept FittableLaw = Law<L> || std::same_as<L, AnyLaw>;

// The quality of a point in fitted coordinates: R^2 and RMSE of the loss, residuals of its log.
template <PreparedLaw P>
void score(const P& prepared, const Eigen::ArrayXd& loss, FitResult& r) {
  Eigen::ArrayXd logp(prepared.size());
  prepared.log_predict(r.theta, logp, nullptr);
  r.residuals = logp - loss.log();
  r.predicted = logp.exp();
  const Eigen::ArrayXd e = r.predicted - loss;
  r.rmse = std::sqrt(e.square().mean());
  r.rmse_log = std::sqrt(r.residuals.square().mean());
  r.max_abs_residual = r.residuals.abs().maxCoeff();
  const double ss_tot = (loss - loss.mean()).square().sum();
  r.r2 = ss_tot > 0 ? 1 - e.square().sum() / ss_tot : 0;
  r.points = prepared.size();
}

namespace detail {

// The objective over the free coordinates, as LBFGSpp calls it.
template <PreparedLaw P>
struct HuberObjective {
  const P& prepared;
  const Eigen::ArrayXd& log_loss;
  const std::vector<int>& free;
  double delta;
  Eigen::VectorXd theta;  // full point; frozen coordinates stay as set
  Eigen::ArrayXd logp, resid, slope;
  Eigen::MatrixXd jac;
  Eigen::VectorXd full_grad;  // every coordinate, from the law's fused pass
  double best_f = std::numeric_limits<double>::infinity();  // lowest value seen, and where
  Eigen::VectorXd best_x;

  HuberObjective(const P& p, const Eigen::ArrayXd& ll, const std::vector<int>& f, double d, Eigen::VectorXd full)
      : prepared(p), log_loss(ll), free(f), delta(d), theta(std::move(full)), logp(p.size()), resid(p.size()),
        slope(p.size()), jac(p.size(), theta.size()), full_grad(theta.size()) {}

  double operator()(const Eigen::VectorXd& x, Eigen::VectorXd& grad) {
    for (std::size_t k = 0; k < free.size(); ++k) theta[free[k]] = x[static_cast<Eigen::Index>(k)];
    double fused = 0;
    if (fused_huber(theta, fused)) {
      for (std::size_t k = 0; k < free.size(); ++k) grad[static_cast<Eigen::Index>(k)] = full_grad[free[k]];
      if (fused < best_f) best_f = fused, best_x = x;
      return fused;
    }
    prepared.log_predict(theta, logp, &jac);
    resid = logp - log_loss;
    const double f = huber_sum(resid, delta, &slope);
    for (std::size_t k = 0; k < free.size(); ++k) grad[static_cast<Eigen::Index>(k)] = jac.col(free[k]).dot(slope.matrix());
    if (f < best_f) best_f = f, best_x = x;
    return f;
  }

  // The law's fused Huber pass, where it has one (law.hpp, AnyPreparedLaw::huber).
  bool fused_huber(const Eigen::VectorXd& at, double& f) {
    if constexpr (requires { prepared.huber(at, log_loss, delta, f, full_grad); })
      return prepared.huber(at, log_loss, delta, f, full_grad);
    else
      return false;
  }
};

struct StartOutcome {
  bool ok = false;
  bool finite_seen = false;  // some evaluation of the start gave a finite objective
  double objective = std::numeric_limits<double>::infinity();
  Eigen::VectorXd theta;
};

inline LBFGSpp::LBFGSBParam<double> stopping_rules(double ftol, double gtol, int corrections, const FitOptions& opt) {
  LBFGSpp::LBFGSBParam<double> param;
  param.m = corrections;
  param.epsilon = gtol;
  param.epsilon_rel = 0;
  param.past = 1;
  param.delta = ftol;
  param.max_iterations = opt.max_iterations;
  return param;
}

// One start: L-BFGS-B from `full` (fitted coordinates, frozen ones set) over the free coordinates.
template <PreparedLaw P>
StartOutcome run_start(const P& prepared, const Eigen::ArrayXd& log_loss, const std::vector<int>& free,
                       const Eigen::VectorXd& full, const Eigen::VectorXd& lb, const Eigen::VectorXd& ub,
                       const LBFGSpp::LBFGSBParam<double>& param, const FitOptions& opt) {
  const Eigen::Index nf = static_cast<Eigen::Index>(free.size());
  HuberObjective<P> f(prepared, log_loss, free, opt.huber_delta, full);
  Eigen::VectorXd x(nf);
  for (Eigen::Index k = 0; k < nf; ++k) x[k] = full[free[k]];
  double fx = 0;
  StartOutcome o;
  try {
    if (nf > 0) {
      // LBFGSpp throws when a line search fails. Fortran L-BFGS-B (SciPy's) then drops its
      // curvature memory and goes on from the best point; so do we, as long as the restart made
      // progress. A start that fails again without progress is a failed start.
      for (int restart = 0;; ++restart) {
        const double before = f.best_f;
        try {
          // SmallLBFGSB is LBFGSpp's algorithm on a dense n x n matrix (small_lbfgsb.hpp): the
          // same steps without the 2m x 2m factorisations and allocations of every iteration.
          if (nf <= detail::SmallLBFGSB::max_n && param.m <= detail::SmallLBFGSB::max_m) {
            detail::SmallLBFGSB solver(param, opt.line_search);
            solver.minimize(f, x, fx, lb, ub);
          } else {
            LBFGSpp::LBFGSBSolver<double> solver(param);
            solver.minimize(f, x, fx, lb, ub);
          }
          if (f.best_f < fx) x = f.best_x, fx = f.best_f;
          break;
        } catch (const std::exception&) {
          const bool progress = !std::isfinite(before) ? std::isfinite(f.best_f)
                                                       : f.best_f < before - param.delta * std::max({std::abs(before), std::abs(f.best_f), 1.0});
          if (!progress || restart >= opt.max_restarts) {
            // No further decrease is possible from here. That is convergence at the limit of
            // floating point when the point is stationary by SciPy's test (projected gradient
            // below pgtol = 1e-5), and a failed start otherwise.
            // No finite value seen (every evaluation NaN): there is no best point to go back to.
            if (f.best_x.size() == 0) throw;
            Eigen::VectorXd g(nf);
            x = f.best_x;
            fx = f(x, g);
            const double pg = ((x - g).cwiseMax(lb).cwiseMin(ub) - x).cwiseAbs().maxCoeff();
            if (pg > opt.stationary_gtol) throw;
            break;
          }
          if (f.best_x.size() == 0) throw;  // as above: no finite value to restart from
          x = f.best_x;
        }
      }
    } else {
      Eigen::VectorXd g(0);
      fx = f(x, g);
    }
    for (Eigen::Index k = 0; k < nf; ++k) f.theta[free[k]] = x[k];
    o.ok = std::isfinite(fx);
    o.objective = fx;
    o.theta = f.theta;
  } catch (const std::exception&) {
    o.ok = false;
  }
  o.finite_seen = o.ok || std::isfinite(f.best_f);
  return o;
}

// Runs job(i) for i in [0, count) on `threads` threads (0: OpenMP's default). Dynamic scheduling:
// starts far from the optimum take many more iterations than others.
template <class Job>
void for_each_start(int count, int threads, const Job& job) {
  check_thread_count(threads < 0 ? 0 : threads, "fit: threads");  // a negative count means every core, as 0 does
#ifdef _OPENMP
  const int t = threads > 0 ? threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 4) num_threads(t)
  for (int i = 0; i < count; ++i) job(i);
#else
  (void)threads;
  for (int i = 0; i < count; ++i) job(i);
#endif
}

}  // namespace detail

// The core: a prepared law, its parameters and the observed losses. `frozen` holds fitted
// coordinates of the frozen parameters (index -> value). P: AnyPreparedLaw (what AnyLaw::prepare
// returns), or a law's own prepared type, which spares the virtual calls.
template <PreparedLaw P>
FitResult fit_prepared(const P& prepared, const Parameters& ps, const Eigen::ArrayXd& loss,
                       const std::vector<Eigen::VectorXd>& starts, const std::map<int, double>& frozen,
                       const FitOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  const Eigen::Index p = static_cast<Eigen::Index>(ps.size());
  std::vector<int> free;
  for (int j = 0; j < p; ++j)
    if (!frozen.count(j)) free.push_back(j);
  const Eigen::Index nf = static_cast<Eigen::Index>(free.size());
  if (prepared.size() < nf + 1)
    throw data_error("data: " + std::to_string(prepared.size()) + " points cannot fit " + std::to_string(nf) +
                     " free parameters (need at least " + std::to_string(nf + 1) + ")");
  if (starts.empty()) throw data_error("fit: no starts");
  check_huber_delta(opt.huber_delta);
  if (opt.corrections < 1 || opt.screen_corrections < 1)
    throw data_error("fit: L-BFGS needs at least 1 correction, not " + std::to_string(std::min(opt.corrections, opt.screen_corrections)));
  Eigen::VectorXd lb(nf), ub(nf);
  for (Eigen::Index k = 0; k < nf; ++k) lb[k] = ps[static_cast<std::size_t>(free[k])].lo, ub[k] = ps[static_cast<std::size_t>(free[k])].hi;
  const Eigen::ArrayXd log_loss = loss.log();

  const bool one_phase = opt.polish < 0;
  const bool scout = !one_phase && opt.scout_ftol > opt.screen_ftol;
  const auto first = one_phase ? detail::stopping_rules(opt.ftol, opt.gtol, opt.corrections, opt)
                     : scout   ? detail::stopping_rules(opt.scout_ftol, opt.screen_gtol, opt.screen_corrections, opt)
                               : detail::stopping_rules(opt.screen_ftol, opt.screen_gtol, opt.screen_corrections, opt);
  const int S = static_cast<int>(starts.size());
  std::vector<detail::StartOutcome> out(static_cast<std::size_t>(S));
  detail::for_each_start(S, opt.threads, [&](int i) {
    Eigen::VectorXd full = starts[static_cast<std::size_t>(i)];
    for (const auto& [j, v] : frozen) full[j] = v;
    out[static_cast<std::size_t>(i)] = detail::run_start(prepared, log_loss, free, full, lb, ub, first, opt);
  });
  FitResult r;
  r.parameters = ps;
  r.starts = S;
  std::vector<int> ranked;
  for (int i = 0; i < S; ++i)
    if (out[static_cast<std::size_t>(i)].ok) ranked.push_back(i);
  r.failed_starts = S - static_cast<int>(ranked.size());
  if (ranked.empty()) {
    // Every objective NaN is not a hard problem but a wrong one (a NaN frozen value or delta, a
    // loss the law cannot take): say so rather than that the optimiser failed.
    if (std::none_of(out.begin(), out.end(), [](const detail::StartOutcome& o) { return o.finite_seen; }))
      throw data_error("fit: every start's objective was NaN or infinite (all " + std::to_string(S) +
                       " starts): the data, the frozen values or the Huber delta make the law's objective undefined");
    throw std::runtime_error("fit: all " + std::to_string(S) + " starts failed");
  }
  // Lowest objective first, ties to the lowest start index: the same order on any thread count.
  const auto rank = [&] {
    std::sort(ranked.begin(), ranked.end(), [&](int a, int b) {
      const double fa = out[static_cast<std::size_t>(a)].objective, fb = out[static_cast<std::size_t>(b)].objective;
      return fa < fb || (fa == fb && a < b);
    });
  };
  rank();
  if (scout && opt.screen_share > 0) {
    // The screen: the best scouted starts go on under SciPy's rules from where they stopped (a
    // screen that fails leaves the scouted point), then all are ranked again.
    const double share = std::ceil(std::min(opt.screen_share, 1.0) * static_cast<double>(ranked.size()));
    const int keep = std::min(static_cast<int>(ranked.size()), std::max({opt.polish, 1, static_cast<int>(share)}));
    const auto rules = detail::stopping_rules(opt.screen_ftol, opt.screen_gtol, opt.screen_corrections, opt);
    detail::for_each_start(keep, opt.threads, [&](int k) {
      detail::StartOutcome& o = out[static_cast<std::size_t>(ranked[static_cast<std::size_t>(k)])];
      detail::StartOutcome q = detail::run_start(prepared, log_loss, free, o.theta, lb, ub, rules, opt);
      if (q.ok && q.objective <= o.objective) o = std::move(q);
    });
    rank();
  }
  if (!one_phase && opt.polish > 0) {
    r.polished = std::min(opt.polish, static_cast<int>(ranked.size()));
    const auto tight = detail::stopping_rules(opt.ftol, opt.gtol, opt.corrections, opt);
    detail::for_each_start(r.polished, opt.threads, [&](int k) {
      detail::StartOutcome& o = out[static_cast<std::size_t>(ranked[static_cast<std::size_t>(k)])];
      // A polish that fails (its line search stalls short of stationarity) leaves the screened point.
      detail::StartOutcome q = detail::run_start(prepared, log_loss, free, o.theta, lb, ub, tight, opt);
      if (q.ok && q.objective <= o.objective) o = std::move(q);
    });
  }
  for (const int i : ranked) {
    const auto& o = out[static_cast<std::size_t>(i)];
    if (o.objective < r.objective || (o.objective == r.objective && i < r.best_start))
      r.objective = o.objective, r.best_start = i, r.theta = o.theta;
  }
  r.values.resize(p);
  r.frozen.assign(static_cast<std::size_t>(p), false);
  for (Eigen::Index j = 0; j < p; ++j) r.values[j] = ps[static_cast<std::size_t>(j)].to_value(r.theta[j]);
  for (const auto& [j, v] : frozen) r.frozen[static_cast<std::size_t>(j)] = true;
  score(prepared, loss, r);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// Frozen values by name (natural units) -> fitted coordinates by index. An unknown name, a value
// that is not finite, or a value <= 0 of a log-scale parameter is an error; a value outside the
// parameter's box is not (the box bounds only the free coordinates the optimiser moves).
inline std::map<int, double> frozen_coordinates(const Parameters& ps, const std::map<std::string, double>& frozen,
                                                const std::string& law) {
  std::map<int, double> f;
  for (const auto& [name, v] : frozen) {
    const int j = index_of(ps, name);
    if (j < 0) throw data_error("--freeze " + name + ": law " + law + " has no such parameter (it has " + names_of(ps) + ")");
    const Parameter& q = ps[static_cast<std::size_t>(j)];
    if (!std::isfinite(v) || (q.scale == Scale::log && v <= 0))
      throw data_error("--freeze " + name + "=" + std::to_string(v) + ": must be " + (q.scale == Scale::log ? "positive" : "finite"));
    f[j] = q.to_fitted(v);
  }
  return f;
}

// Reads what the law needs, fits from the options' starts (or the law's default plan).
// Whether a law reads counts whose value depends on where the injection counts (N_once, N_rec,
// N_act, N_loop; account/injection_convention.hpp).
inline bool reads_looped_counts(const AnyLaw& law) {
  for (const std::string& c : law.columns())
    if (c == "N_once" || c == "N_rec" || c == "N_act" || c == "N_loop") return true;
  return false;
}

template <FittableLaw L>
FitResult fit(const L& fitted_law, const Runs& runs, const FitOptions& opt = {}) {
  const AnyLaw& law = fitted_law;  // L is AnyLaw, or a law it holds for the checks below
  // The reader refuses values outside a variable's domain; runs built in code (a sweep's results, a
  // user's own) are checked here, since a loss <= 0 or a NaN size makes the objective NaN, and a
  // column shorter than the others would be read past its end (Runs::check).
  runs.check_values("fit");
  if (!runs.has("loss"))
    throw data_error("fit: the runs have no 'loss' column (RunReader::read reads only the columns it is given: "
                     "law.columns() and \"loss\")");
  const Parameters ps = law.parameters();
  const auto prepared = law.prepare(runs);
  const auto starts = opt.starts.empty() ? make_starts(law, default_start_plan(law)) : opt.starts;
  for (const auto& s : starts)
    if (s.size() != static_cast<Eigen::Index>(ps.size()))
      throw data_error("fit: a start has " + std::to_string(s.size()) + " values, law " + law.name() + " has " +
                       std::to_string(ps.size()) + " parameters");
  const std::map<int, double> frozen = frozen_coordinates(ps, opt.frozen, law.name());
  // Frozen values outside the formula's domain (law.hpp, HasDomain) would make every start's objective NaN.
  if (const std::string fault = law.domain_fault(opt.frozen); !fault.empty()) throw data_error("--freeze " + fault);
  // A frozen value can also cross a free parameter's box (E_start frozen at 20 while E_max is fitted
  // in [10, 1e5]), and the optimiser would then step out of the domain. The laws' domains are
  // bounds between pairs of constants, so it is enough that each end of every free box is inside
  // together with the frozen values.
  if (!opt.frozen.empty())
    for (const Parameter& q : ps) {
      if (opt.frozen.count(q.name)) continue;
      for (const double end : {q.lo, q.hi}) {
        std::map<std::string, double> c = opt.frozen;
        c[q.name] = q.to_value(end);
        if (const std::string fault = law.domain_fault(c); !fault.empty())
          throw data_error(concat("--freeze: ", q.name, " is fitted in [", q.to_value(q.lo), ", ", q.to_value(q.hi),
                                  "], which crosses the frozen values: at its end ", fault, "; freeze ", q.name, " too"));
      }
    }
  // Runs that cannot determine a free parameter (identifiability.hpp) are refused before fitting:
  // the fit would print whatever value its best start kept.
  {
    std::vector<int> free;
    for (int j = 0; j < static_cast<int>(ps.size()); ++j)
      if (!frozen.count(j)) free.push_back(j);
    check_determined(law, *prepared, runs, ps, free, frozen);
  }
  FitResult r = fit_prepared(*prepared, ps, runs["loss"], starts, frozen, opt);
  r.law = law.name();
  if (reads_looped_counts(law)) r.injection = runs.injection;
  return r;
}

#ifdef LOOPSCALE_LAW_INSTANCE  // util/extern_templates.hpp: compiled once, in law/instances.cpp
LOOPSCALE_LAW_INSTANCE FitResult fit<AnyLaw>(const AnyLaw&, const Runs&, const FitOptions&);
LOOPSCALE_LAW_INSTANCE FitResult fit_prepared<AnyPreparedLaw>(const AnyPreparedLaw&, const Parameters&, const Eigen::ArrayXd&,
                                                          const std::vector<Eigen::VectorXd>&, const std::map<int, double>&,
                                                          const FitOptions&);
#endif

}  // namespace loopscale::law
