// The numbers a sweep's report shows, apart from how it shows them (report.hpp renders and writes
// them): the finished runs of a folder and the planned runs still missing, the runs the iso-depth
// analysis reads, the joint law's predicted loss at any point (the law's own prediction,
// law/iso_depth.hpp, with the fitted parameters), and the data behind the three plots: iso-FLOP
// curves per r, the loss-compute frontier per r, the bootstrap distribution of phi. The fits
// themselves are analyse.hpp's.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "loopscale/law/iso_depth.hpp"
#include "loopscale/sweep/analyse.hpp"
#include "loopscale/sweep/merge.hpp"
#include "loopscale/sweep/run.hpp"

namespace loopscale::sweep {

// ---- the runs --------------------------------------------------------------------------------

// The finished runs of DIR: results.jsonl, or the shard results when there is no merged file. A run
// recorded twice, a line that does not match the plan (check_against_plan), or no run at all is an
// error.
inline std::vector<RunResult> finished_runs(const fs::path& dir, const Plan& plan) {
  std::vector<RunResult> results;
  if (fs::exists(dir / "results.jsonl")) {
    results = read_results(dir / "results.jsonl");
  } else {
    for (const auto& f : results_files(dir)) {
      auto more = read_results(f);
      results.insert(results.end(), more.begin(), more.end());
    }
  }
  check_against_plan(results, plan);
  check_one_corpus(results);
  results_by_id(results, dir.string());  // duplicates are an error
  if (results.empty()) throw sweep_error(dir.string() + " has no finished runs yet");
  return results;
}

// The ids of the runnable planned runs that have no result, in plan order.
inline std::vector<std::string> missing_runs(const Plan& plan, const std::vector<RunResult>& results) {
  std::vector<std::string> missing;
  for (const auto& r : plan.runs)
    if (r.runnable() && std::none_of(results.begin(), results.end(), [&](const RunResult& x) { return x.id == r.id; })) missing.push_back(r.id);
  return missing;
}

// The runs the iso-depth analysis (phi, iso-FLOP cells) reads. A dense sweep: all of them. An MoE
// sweep: the runs of its smallest expert count only (E = 1, a routed dense MLP, when swept), since
// the joint law of iso-depth has no term for E; the looped-MoE law is fitted on all runs with
// `loopscale fit --law looped-moe --data DIR/runs.csv`.
inline std::vector<RunResult> iso_depth_runs(const SweepSpec& spec, const std::vector<RunResult>& results, int64* experts = nullptr) {
  if (!spec.moe() || results.empty()) return results;
  int64 e = results.front().experts;
  for (const RunResult& r : results) e = std::min(e, r.experts);
  if (experts) *experts = e;
  std::vector<RunResult> out;
  for (const RunResult& r : results)
    if (r.experts == e) out.push_back(r);
  return out;
}

// ---- the joint law ---------------------------------------------------------------------------

// The counts of an (r, d) point of the sweep's family (the one builder, spec/family.hpp) for
// smooth law curves: one head of dimension d, so any even d is a valid spec. Parameters and FLOPs
// depend on h q = d only, so the counts at the sweep's widths equal the sweep's own. experts > 0:
// the MoE member with E experts (its expert hidden width follows d as the sweep's does).
inline Accounting curve_point(const SweepSpec& s, int64 r, int64 d, int64 experts = 0) {
  FamilySpec f = family_of(s, experts);
  f.layer.attn.heads = 1, f.layer.attn.head_dim = 0;
  return account(family_member(f, r, d), s.seq_len);
}

// A point of the joint law: N_once, N_rec, r and D (tokens).
struct JointPoint {
  double n_once = 0, n_rec = 0, r = 1, tokens = 0;
};

// The joint law's predicted loss at each point, by law::IsoDepth itself with the fitted parameters
// of `fit` (a fit of that law, as analyse() makes).
inline std::vector<double> joint_law_loss(const law::FitResult& fit, const std::vector<JointPoint>& points) {
  const law::AnyLaw iso = law::IsoDepth{};
  if (fit.law != iso.name()) throw sweep_error("joint_law_loss: a fit of law " + fit.law + ", not " + iso.name());
  if (points.empty()) return {};
  law::Runs runs;
  const Eigen::Index n = static_cast<Eigen::Index>(points.size());
  for (const char* c : {"N_once", "N_rec", "r", "D"}) runs.set(c) = Eigen::ArrayXd(n);
  for (Eigen::Index k = 0; k < n; ++k) {
    const JointPoint& p = points[static_cast<std::size_t>(k)];
    runs.set("N_once")[k] = p.n_once;
    runs.set("N_rec")[k] = p.n_rec;
    runs.set("r")[k] = p.r;
    runs.set("D")[k] = p.tokens;
    runs.lines.push_back(static_cast<long>(k) + 1);
  }
  const Eigen::ArrayXd loss = law::predict_loss(*iso.prepare(runs), fit.theta);
  return {loss.begin(), loss.end()};
}

// The point of the family member (r, d) trained on budget C: its counts, and D = C / F.
inline JointPoint joint_point(const Accounting& acc, int64 r, double budget) {
  return {static_cast<double>(acc.params.once), static_cast<double>(acc.params.rec), static_cast<double>(r),
          budget / static_cast<double>(acc.flops_per_token.train)};
}

// The joint law's prediction for every analysed run (a.runs order); empty without a joint fit.
inline std::vector<double> joint_law_at_runs(const Analysis& a) {
  if (!a.joint) return {};
  std::vector<JointPoint> points;
  for (const RunResult& r : a.runs) points.push_back({r.n_once, r.n_rec, static_cast<double>(r.r), r.tokens});
  return joint_law_loss(a.joint->fit, points);
}

// ---- the data of the plots -------------------------------------------------------------------

// Plot 1, one budget of one r: the runs (N, loss) and the joint law along the family's widths at
// that budget (N, predicted loss), N the stored non-embedding parameters.
struct IsoFlopCurve {
  double budget = 0;
  std::vector<std::pair<double, double>> runs;  // by increasing N
  std::vector<std::pair<int64, double>> law;    // empty without a joint fit
};

// Plot 1, one panel: the budgets at which runs of this r finished, ascending.
struct IsoFlopPanel {
  int64 r = 1;
  std::vector<IsoFlopCurve> curves;
};

// Plot 2, one r: the cell minima (C, loss at N*) and the joint law minimised over the width (C, loss).
struct FrontierCurve {
  int64 r = 1;
  std::vector<std::pair<double, double>> minima;  // the cells of this r that have a minimum
  std::vector<std::pair<double, double>> law;     // 61 budgets from half the smallest to twice the largest; empty without a joint fit
};

// Plot 3: the resampled phi, binned for a histogram, with the fit and its interval.
struct PhiHistogram {
  std::vector<double> draws;
  double bin_width = 0;  // a 30th of the draws' range, at least 1e-4
  double phi = 0, lo = 0, hi = 0, level = 0.95;
  std::size_t cells = 0;  // (C, r) cells resampled
};

struct PlotData {
  std::string sweep;              // its name, for the titles
  bool law = false;               // a joint fit: the plots draw its curves
  std::vector<double> budgets;    // of the cells, ascending; a budget's colour is its index here
  std::vector<IsoFlopPanel> isoflop;    // one per r of the per-r fits
  std::vector<FrontierCurve> frontier;  // the same r
  std::optional<PhiHistogram> phi;      // with a joint fit and a bootstrap
};

inline PlotData plot_data(const SweepSpec& spec, const Analysis& a) {
  PlotData p;
  p.sweep = spec.name;
  p.law = a.joint.has_value();
  for (const auto& c : a.cells)
    if (std::find(p.budgets.begin(), p.budgets.end(), c.budget) == p.budgets.end()) p.budgets.push_back(c.budget);
  std::sort(p.budgets.begin(), p.budgets.end());
  const int64 experts = a.runs.empty() ? 0 : a.runs.front().experts;
  int64 dmax = 0;
  for (const auto& run : a.runs) dmax = std::max(dmax, run.d_model);

  for (const auto& f : a.per_r) {
    const int64 r = f.r;
    // 1. iso-FLOP: the law at even widths from 3/4 of the narrowest run to 5/4 of the widest.
    IsoFlopPanel panel{r, {}};
    for (double c : p.budgets) {
      IsoFlopCurve curve{c, {}, {}};
      int64 dmin = std::numeric_limits<int64>::max(), dhi = 0;
      for (const auto& run : a.runs)
        if (run.r == r && run.budget == c) {
          curve.runs.emplace_back(run.n, run.loss);
          dmin = std::min(dmin, run.d_model), dhi = std::max(dhi, run.d_model);
        }
      if (curve.runs.empty()) continue;
      if (a.joint) {
        const int64 lo = std::max<int64>(2, dmin * 3 / 4 / 2 * 2), hi = dhi * 5 / 4 / 2 * 2;
        std::vector<int64> ns;
        std::vector<JointPoint> points;
        for (int64 d = lo; d <= hi; d += std::max<int64>(2, (hi - lo) / 80 / 2 * 2)) {
          const Accounting acc = curve_point(spec, r, d, experts);
          ns.push_back(acc.params.non_embedding);
          points.push_back(joint_point(acc, r, c));
        }
        const std::vector<double> loss = joint_law_loss(a.joint->fit, points);
        for (std::size_t i = 0; i < ns.size(); ++i) curve.law.emplace_back(ns[i], loss[i]);
      }
      panel.curves.push_back(std::move(curve));
    }
    p.isoflop.push_back(std::move(panel));

    // 2. frontier: the law's lowest loss over even widths from 8 to 4 times the widest run.
    FrontierCurve front{r, {}, {}};
    for (const auto& c : a.cells)
      if (c.r == r && c.ok) front.minima.emplace_back(c.budget, c.loss_opt);
    if (a.joint && !p.budgets.empty()) {
      std::vector<Accounting> widths;
      for (int64 d = 8; d <= 4 * dmax; d += std::max<int64>(2, dmax / 200 * 2)) widths.push_back(curve_point(spec, r, d, experts));
      const double c0 = p.budgets.front() / 2, c1 = p.budgets.back() * 2;
      std::vector<double> budgets;
      std::vector<JointPoint> points;  // budget by budget, each at every width
      for (int k = 0; k <= 60; ++k) {
        budgets.push_back(c0 * std::pow(c1 / c0, k / 60.0));
        for (const Accounting& acc : widths) points.push_back(joint_point(acc, r, budgets.back()));
      }
      const std::vector<double> loss = joint_law_loss(a.joint->fit, points);
      for (std::size_t k = 0; k < budgets.size(); ++k) {
        double best = std::numeric_limits<double>::infinity();
        for (std::size_t i = 0; i < widths.size(); ++i) best = std::min(best, loss[k * widths.size() + i]);
        front.law.emplace_back(budgets[k], best);
      }
    }
    p.frontier.push_back(std::move(front));
  }

  if (a.joint && !a.joint->boot_phi.empty()) {  // 3. phi
    const JointFit& j = *a.joint;
    PhiHistogram h;
    h.draws = j.boot_phi;
    const double lo = *std::min_element(j.boot_phi.begin(), j.boot_phi.end());
    const double hi = *std::max_element(j.boot_phi.begin(), j.boot_phi.end());
    h.bin_width = std::max((hi - lo) / 30, 1e-4);
    h.phi = j.fit.value("phi");
    h.lo = j.phi_lo, h.hi = j.phi_hi, h.level = j.level;
    h.cells = j.cells;
    p.phi = std::move(h);
  }
  return p;
}

}  // namespace loopscale::sweep
