// The analysis of a finished (or partly finished) sweep, the way the iso-depth paper does it:
//   1. per (r, C) cell, the iso-FLOP minimum from a parabola in log N through the cell's runs
//      (N = stored non-embedding params), with D there from a line through log D against log N;
//   2. per r, a Chinchilla fit L = E + A N^-alpha + B D^-beta, and the compute-optimal exponents
//      N_opt ~ C^a, D_opt ~ C^b both from that law (a = beta / (alpha + beta)) and from the cell
//      minima (slopes of log N*, log D* against log C);
//   3. the joint iso-depth law L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta over all runs
//      (law/iso_depth.hpp, fitted by law/huber_fit.hpp), the restricted fits phi = 0 and phi = 1,
//      and a block-bootstrap interval of phi that resamples whole (C, r) cells, as the paper does
//      (200 resamples in the paper; law/bootstrap.hpp), because runs of one cell share their errors.
// What cannot be computed from the data at hand (too few runs for a fit, a cell whose parabola
// opens downward) is reported with the reason, never filled in.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <string>
#include <vector>

#include <Eigen/Dense>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loopscale/law/bootstrap.hpp"
#include "loopscale/law/chinchilla.hpp"
#include "loopscale/law/huber_fit.hpp"
#include "loopscale/law/iso_depth.hpp"
#include "loopscale/law/starts.hpp"
#include "loopscale/sweep/results.hpp"

namespace loopscale::sweep {

// ---- 1. iso-FLOP cells -----------------------------------------------------------------------

struct Cell {
  double budget = 0;
  int64 r = 1;
  std::vector<std::size_t> rows;  // indices into the analysed runs, by increasing N
  bool ok = false;
  std::string problem;            // why there is no minimum (ok == false)
  double c0 = 0, c1 = 0, c2 = 0;  // loss = c0 + c1 x + c2 x^2, x = ln N
  double n_opt = 0, loss_opt = 0, d_opt = 0;
  bool extrapolated = false;      // the vertex lies outside the cell's range of N
};

// Least-squares polynomial of degree `deg` in x (Eigen's QR); coefficients from the constant up.
inline Eigen::VectorXd polyfit(const std::vector<double>& x, const std::vector<double>& y, int deg) {
  const Eigen::Index n = static_cast<Eigen::Index>(x.size());
  Eigen::MatrixXd X(n, deg + 1);
  Eigen::VectorXd Y(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    double p = 1;
    for (int k = 0; k <= deg; ++k) X(i, k) = p, p *= x[static_cast<std::size_t>(i)];
    Y[i] = y[static_cast<std::size_t>(i)];
  }
  return X.colPivHouseholderQr().solve(Y);
}

inline std::vector<Cell> iso_flop_cells(const std::vector<RunResult>& runs) {
  std::map<std::pair<double, int64>, std::vector<std::size_t>> groups;
  for (std::size_t i = 0; i < runs.size(); ++i) groups[{runs[i].budget, runs[i].r}].push_back(i);
  std::vector<Cell> cells;
  for (auto& [key, rows] : groups) {
    Cell c;
    c.budget = key.first;
    c.r = key.second;
    std::sort(rows.begin(), rows.end(), [&](auto a, auto b) { return runs[a].n < runs[b].n; });
    c.rows = rows;
    std::vector<double> x, y, ld;
    for (auto i : rows) x.push_back(std::log(runs[i].n)), y.push_back(runs[i].loss), ld.push_back(std::log(runs[i].tokens));
    const bool distinct = std::adjacent_find(x.begin(), x.end()) == x.end();
    if (rows.size() < 3 || !distinct) {
      c.problem = fmt::format("{} distinct widths; a parabola needs 3", distinct ? rows.size() : std::set<double>(x.begin(), x.end()).size());
    } else {
      const Eigen::VectorXd p = polyfit(x, y, 2);
      c.c0 = p[0], c.c1 = p[1], c.c2 = p[2];
      if (!(c.c2 > 0)) {
        c.problem = "the parabola opens downward: no minimum (the widths do not bracket the optimum)";
      } else {
        const double xs = -c.c1 / (2 * c.c2);
        c.ok = true;
        c.n_opt = std::exp(xs);
        c.loss_opt = c.c0 + c.c1 * xs + c.c2 * xs * xs;
        const Eigen::VectorXd q = polyfit(x, ld, 1);
        c.d_opt = std::exp(q[0] + q[1] * xs);
        c.extrapolated = xs < x.front() || xs > x.back();
      }
    }
    cells.push_back(std::move(c));
  }
  return cells;
}

// ---- law fits --------------------------------------------------------------------------------

// The runs as the law library reads them (law/runs.hpp): N_once, N_rec, r, N, D, loss, C.
inline law::Runs law_runs(const std::vector<RunResult>& runs, const std::vector<std::size_t>& rows) {
  law::Runs out;
  const Eigen::Index n = static_cast<Eigen::Index>(rows.size());
  for (const char* c : {"N_once", "N_rec", "r", "N", "D", "loss", "C"}) out.set(c) = Eigen::ArrayXd(n);
  for (Eigen::Index k = 0; k < n; ++k) {
    const RunResult& r = runs[rows[static_cast<std::size_t>(k)]];
    out.set("N_once")[k] = r.n_once;
    out.set("N_rec")[k] = r.n_rec;
    out.set("r")[k] = static_cast<double>(r.r);
    out.set("N")[k] = r.n;
    out.set("D")[k] = r.tokens;
    out.set("loss")[k] = r.loss;
    out.set("C")[k] = r.budget;
    out.lines.push_back(static_cast<long>(rows[static_cast<std::size_t>(k)]) + 1);
  }
  return out;
}

struct AnalyseOptions {
  int starts = 500;          // random starts of each full fit, per-r and joint (the paper: 500)
  int bootstrap = 200;       // block-bootstrap resamples (the paper: 200); 0: none
  int bootstrap_starts = 8;  // random starts per resample, besides the full fit's optimum
  double level = 0.95;       // of the interval
  std::uint64_t seed = 0;
  int threads = 0;           // OpenMP threads of the fitter; 0: all
  // L-BFGS-B stopping rules of the polish (law::FitOptions). SciPy's defaults (pgtol 1e-5,
  // factr 1e7) are absolute once the Huber objective is below 1, which it always is here: a
  // bootstrap refit that starts at the full-data optimum would stop on the spot and report the
  // full-data phi again, shrinking the interval (seen on synthetic sweeps: over half the
  // resamples). The fitter's polish goes on under these tighter rules, which lets it move.
  double gtol = law::FitOptions{}.gtol;
  double ftol = law::FitOptions{}.ftol;
};

struct ArchFit {
  int64 r = 1;
  std::size_t points = 0;
  std::optional<law::FitResult> fit;  // Chinchilla in N, absent with too few points
  std::string problem;
  double a_law = 0, b_law = 0;        // N_opt ~ C^a, D_opt ~ C^b from the fitted law
  std::optional<double> a_minima, b_minima;  // the same from the cell minima (>= 2 budgets)
};

struct JointFit {
  law::FitResult fit;                 // phi free
  law::FitResult phi0, phi1;          // restricted
  std::vector<double> boot_phi;       // one per successful resample
  int boot_failed = 0;
  double phi_lo = 0, phi_hi = 0;      // percentile interval at `level`
  double level = 0.95;
  std::size_t cells = 0;
};

struct Analysis {
  std::vector<RunResult> runs;
  std::vector<Cell> cells;
  std::vector<ArchFit> per_r;
  std::optional<JointFit> joint;
  std::string joint_problem;
  std::vector<std::string> notes;
};

inline law::FitOptions fit_options(const law::AnyLaw& law, const AnalyseOptions& o, std::uint64_t seed) {
  law::FitOptions f;
  f.threads = o.threads;
  f.gtol = o.gtol;
  f.ftol = o.ftol;
  // Random starts in the law's box for every law (the iso-depth paper's plan), also for Chinchilla,
  // whose 4,500-point grid would cost 4,500 starts per r.
  f.starts = law::random_starts(law.parameters(), o.starts, seed);
  return f;
}

// Slope of log y against log x (least squares), when there are at least two distinct x.
inline std::optional<double> log_slope(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() < 2 || std::set<double>(x.begin(), x.end()).size() < 2) return std::nullopt;
  std::vector<double> lx, ly;
  for (std::size_t i = 0; i < x.size(); ++i) lx.push_back(std::log(x[i])), ly.push_back(std::log(y[i]));
  return polyfit(lx, ly, 1)[1];
}

inline Analysis analyse(std::vector<RunResult> runs, const AnalyseOptions& opt = {}) {
  Analysis a;
  if (runs.empty()) throw sweep_error("no finished runs to analyse");
  // What the law fits would refuse, said with the run's id (results.jsonl is written by the sweep,
  // but a hand-edited or merged file can hold anything).
  for (const RunResult& r : runs) {
    for (const auto& [name, v] : {std::pair<const char*, double>{"loss", r.loss}, {"D (tokens)", r.tokens}, {"N", r.n},
                                  {"N_once", r.n_once}, {"N_rec", r.n_rec}, {"C (budget)", r.budget}})
      if (!(v > 0) || !std::isfinite(v)) throw sweep_error(concat("run ", r.id, ": ", name, " = ", v, " must be a finite number > 0"));
    if (r.r < 1) throw sweep_error(concat("run ", r.id, ": r = ", r.r, " must be >= 1"));
  }
  std::sort(runs.begin(), runs.end(), [](const RunResult& x, const RunResult& y) {
    return std::tie(x.budget, x.r, x.n) < std::tie(y.budget, y.r, y.n);
  });
  a.runs = std::move(runs);
  a.cells = iso_flop_cells(a.runs);

  // Per r: Chinchilla in N (stored non-embedding params) and the compute-optimal exponents.
  std::map<int64, std::vector<std::size_t>> by_r;
  for (std::size_t i = 0; i < a.runs.size(); ++i) by_r[a.runs[i].r].push_back(i);
  const law::AnyLaw chin = law::Chinchilla{};
  for (const auto& [r, rows] : by_r) {
    ArchFit f;
    f.r = r;
    f.points = rows.size();
    if (rows.size() < 6) {
      f.problem = fmt::format("{} runs; a Chinchilla fit of 5 parameters needs at least 6", rows.size());
    } else {
      f.fit = law::fit(chin, law_runs(a.runs, rows), fit_options(chin, opt, opt.seed));
      const double al = f.fit->value("alpha"), be = f.fit->value("beta");
      if (al + be > 0) f.a_law = be / (al + be), f.b_law = al / (al + be);
    }
    std::vector<double> c, n, d;
    for (const Cell& cell : a.cells)
      if (cell.r == r && cell.ok) c.push_back(cell.budget), n.push_back(cell.n_opt), d.push_back(cell.d_opt);
    f.a_minima = log_slope(c, n);
    f.b_minima = log_slope(c, d);
    a.per_r.push_back(std::move(f));
  }

  // The joint law over every run, the restricted fits, the block bootstrap over (C, r) cells.
  const law::AnyLaw iso = law::IsoDepth{};
  if (by_r.size() < 2) {
    a.joint_problem = "the runs have a single r; phi needs at least two";
  } else if (a.runs.size() < 7) {
    a.joint_problem = fmt::format("{} runs; the joint law of 6 parameters needs at least 7", a.runs.size());
  } else {
    std::vector<std::size_t> all(a.runs.size());
    for (std::size_t i = 0; i < all.size(); ++i) all[i] = i;
    const law::Runs data = law_runs(a.runs, all);
    JointFit j;
    j.level = opt.level;
    j.cells = a.cells.size();
    const law::FitOptions fo = fit_options(iso, opt, opt.seed);
    j.fit = law::fit(iso, data, fo);
    law::FitOptions f0 = fo, f1 = fo;
    f0.frozen["phi"] = 0.0;
    f1.frozen["phi"] = 1.0;
    j.phi0 = law::fit(iso, data, f0);
    j.phi1 = law::fit(iso, data, f1);
    if (opt.bootstrap > 0) {
      // Block bootstrap (law/bootstrap.hpp): whole (C, r) cells are drawn with replacement.
      std::vector<std::string> groups;
      for (const RunResult& r : a.runs) groups.push_back(fmt::format("{}|{}", r.budget, r.r));
      law::BootstrapOptions bo;
      bo.resamples = opt.bootstrap;
      bo.groups = &groups;
      bo.level = opt.level;
      bo.seed = opt.seed;
      bo.random_starts = opt.bootstrap_starts;
      bo.threads = opt.threads;
      const law::BootstrapResult br = law::bootstrap(iso, data, j.fit, fo, bo);
      const int phi = law::index_of(iso.parameters(), "phi");
      for (Eigen::Index k = 0; k < br.draws.rows(); ++k) j.boot_phi.push_back(br.draws(k, phi));
      j.boot_failed = br.failed;
      j.phi_lo = br.ci[static_cast<std::size_t>(phi)].lo;
      j.phi_hi = br.ci[static_cast<std::size_t>(phi)].hi;
    }
    a.joint = std::move(j);
  }
  return a;
}

// ---- JSON ------------------------------------------------------------------------------------

inline nlohmann::json fit_json(const law::FitResult& f) {
  nlohmann::json p = nlohmann::json::object();
  for (std::size_t i = 0; i < f.parameters.size(); ++i) p[f.parameters[i].name] = f.values[static_cast<Eigen::Index>(i)];
  return {{"law", f.law},         {"params", p},           {"r2", f.r2},
          {"rmse", f.rmse},       {"rmse_log", f.rmse_log}, {"objective", f.objective},
          {"points", f.points},   {"starts", f.starts},     {"failed_starts", f.failed_starts},
          {"at_box_edge", f.box_edge_names()}};  // free parameters on an edge of the law's box: not determined
}

inline nlohmann::json analysis_json(const Analysis& a) {
  nlohmann::json cells = nlohmann::json::array();
  for (const Cell& c : a.cells) {
    nlohmann::json j = {{"C", c.budget}, {"r", c.r}, {"runs", c.rows.size()}, {"ok", c.ok}};
    if (c.ok) {
      j["N_opt"] = c.n_opt;
      j["loss_opt"] = c.loss_opt;
      j["D_opt"] = c.d_opt;
      j["extrapolated"] = c.extrapolated;
      j["parabola"] = {c.c0, c.c1, c.c2};
    } else {
      j["problem"] = c.problem;
    }
    cells.push_back(j);
  }
  nlohmann::json per_r = nlohmann::json::array();
  for (const ArchFit& f : a.per_r) {
    nlohmann::json j = {{"r", f.r}, {"points", f.points}};
    if (f.fit) j["fit"] = fit_json(*f.fit), j["a_law"] = f.a_law, j["b_law"] = f.b_law;
    else j["problem"] = f.problem;
    if (f.a_minima) j["a_minima"] = *f.a_minima;
    if (f.b_minima) j["b_minima"] = *f.b_minima;
    per_r.push_back(j);
  }
  nlohmann::json out = {{"runs", a.runs.size()}, {"cells", cells}, {"per_r", per_r}};
  if (a.joint) {
    const JointFit& j = *a.joint;
    out["joint"] = {{"fit", fit_json(j.fit)},
                    {"phi", j.fit.value("phi")},
                    {"phi0", fit_json(j.phi0)},
                    {"phi1", fit_json(j.phi1)},
                    {"bootstrap", {{"resamples", j.boot_phi.size()}, {"failed", j.boot_failed}, {"level", j.level},
                                   {"cells", j.cells}, {"phi_lo", j.phi_lo}, {"phi_hi", j.phi_hi}, {"phi", j.boot_phi}}}};
  } else {
    out["joint_problem"] = a.joint_problem;
  }
  return out;
}

}  // namespace loopscale::sweep
