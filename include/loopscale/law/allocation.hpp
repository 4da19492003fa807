// Compute-optimal allocation per r: at a fixed training budget C, the width whose model minimises
// the predicted loss, with tokens D = C / F and F the training FLOPs per token of the accounting
// (not 6N: attention and the r-fold shared block are counted). Widths step by the head dim (128);
// the minimum is refined by a parabola in log N through the best width and its neighbours, the
// way the iso-depth paper reads its iso-FLOP minima. Across budgets, N* ~ C^a and D* ~ C^b.
// N_once and N_rec follow AllocationOptions::injection (account/injection_convention.hpp); N, N*
// are stored non-embedding parameters whatever it is.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "loopscale/account/flops.hpp"
#include "loopscale/account/injection_convention.hpp"
#include "loopscale/law/constants.hpp"
#include "loopscale/law/iso_depth_grid.hpp"
#include "loopscale/spec/paper_grid.hpp"

namespace loopscale::law {

struct AllocationOptions {
  int64 seq_len = 2048;
  int64 vocab = paper::vocab;
  int64 max_width = 16384;  // widths 128, 256, ..., max_width
  InjectionCount injection = InjectionCount::rec;  // where the injection counts in N_once, N_rec
};

struct WidthPoint {
  int64 d_model = 0;
  double n = 0, n_once = 0, n_rec = 0;  // non-embedding params
  double flops_per_token = 0, tokens = 0, loss = 0;
};

struct Allocation {
  int64 r = 1;
  double budget = 0;
  double n_opt = 0, d_opt = 0, loss_opt = 0;  // refined minimum (non-embedding N*, tokens D*)
  double width_opt = 0;                       // d_model at the refined minimum (interpolated like log F)
  WidthPoint best_width;                      // best width of the grid
  bool at_edge = false;                       // the minimum is at the smallest or largest width
  std::vector<WidthPoint> widths;
};

// The member of the paper's family (prelude 2, coda 2, effective depth 20, linear injection) with
// r recurrences at width d, from the one builder of family members.
inline ModelSpec paper_member(int64 d, int64 r, int64 vocab) {
  FamilySpec f = paper::family();
  f.vocab = vocab;
  try {
    return loopscale::family_member(f, r, d);
  } catch (const spec_error& e) {
    throw data_error("the paper's family at d_model " + std::to_string(d) + ", r " + std::to_string(r) + ": " + e.what());
  }
}

inline Allocation compute_optimal(const AnyLaw& law, const Eigen::VectorXd& theta, int64 r, double budget,
                                  const AllocationOptions& opt = {}) {
  if (!(budget > 0) || !std::isfinite(budget)) throw data_error("optimal: the budget must be a positive number of FLOPs");
  Allocation a;
  a.r = r;
  a.budget = budget;
  Runs runs;
  std::vector<double> n_once, n_rec, n, f;
  for (int64 d = 128; d <= opt.max_width; d += 128) {
    const ModelSpec m = paper_member(d, r, opt.vocab);
    const ParamCounts p = count_params(m);
    const LoopedSplit split = split_params(p, opt.injection);
    WidthPoint w;
    w.d_model = d;
    w.n_once = static_cast<double>(split.once);
    w.n_rec = static_cast<double>(split.rec);
    w.n = static_cast<double>(p.non_embedding);
    w.flops_per_token = static_cast<double>(count_flops(m, opt.seq_len).train);
    w.tokens = budget / w.flops_per_token;
    a.widths.push_back(w);
  }
  // Less than one sequence of data (--seq-len tokens) is no training run: a law fitted on trained
  // models says nothing there, and printed D* = 9e-309 tokens at budget 1e-300 as an optimum (at
  // 1e-320, D underflowed to 0 and the NaN it predicted blamed the constants). The smallest width
  // gets the most tokens; the optimum is checked again below.
  const auto too_few_tokens = [&](const char* what, double tokens, const std::string& where) {
    return data_error(concat("optimal: the budget ", budget, " FLOPs buys ", what, tokens, " tokens at r ", r, where,
                             ", less than one sequence of ", opt.seq_len, " tokens (--seq-len); give a larger budget"));
  };
  if (!a.widths.empty() && !(a.widths.front().tokens >= static_cast<double>(opt.seq_len)))
    throw too_few_tokens("at most ", a.widths.front().tokens, concat(" (d_model ", a.widths.front().d_model, ", the smallest width)"));
  const auto k = static_cast<Eigen::Index>(a.widths.size());
  for (const char* c : {"N", "N_once", "N_rec", "r", "D", "N_act", "N_loop", "R"}) runs.set(c).resize(k);
  for (Eigen::Index i = 0; i < k; ++i) {
    const WidthPoint& w = a.widths[static_cast<std::size_t>(i)];
    runs.set("N")[i] = w.n;
    runs.set("N_once")[i] = w.n_once;
    runs.set("N_rec")[i] = w.n_rec;
    runs.set("r")[i] = static_cast<double>(r);
    runs.set("D")[i] = w.tokens;
    runs.set("N_act")[i] = w.n_once + w.n_rec;
    runs.set("N_loop")[i] = w.n_rec;
    runs.set("R")[i] = static_cast<double>(r);
    runs.lines.push_back(static_cast<long>(i));
  }
  const Eigen::ArrayXd loss = predict_loss(*law.prepare(runs), theta);
  check_predictions(law, runs, loss, [&](Eigen::Index i) {
    return "d_model " + std::to_string(a.widths[static_cast<std::size_t>(i)].d_model) + ", r " + std::to_string(r) + ", budget " +
           concat(budget);
  });
  Eigen::Index best = 0;
  for (Eigen::Index i = 0; i < k; ++i) {
    a.widths[static_cast<std::size_t>(i)].loss = loss[i];
    if (loss[i] < loss[best]) best = i;
  }
  a.best_width = a.widths[static_cast<std::size_t>(best)];
  a.n_opt = a.best_width.n, a.d_opt = a.best_width.tokens, a.loss_opt = a.best_width.loss;
  a.width_opt = static_cast<double>(a.best_width.d_model);
  a.at_edge = best == 0 || best == k - 1;
  if (!a.at_edge) {
    // Parabola through (log N, L) at the three widths; log F interpolated the same way.
    const auto& w0 = a.widths[static_cast<std::size_t>(best - 1)];
    const auto& w1 = a.widths[static_cast<std::size_t>(best)];
    const auto& w2 = a.widths[static_cast<std::size_t>(best + 1)];
    const double x0 = std::log(w0.n), x1 = std::log(w1.n), x2 = std::log(w2.n);
    const auto quad = [&](double y0, double y1, double y2) {
      // Coefficients of y = c0 + c1 (x - x1) + c2 (x - x1)^2 through the three points.
      const double h0 = x0 - x1, h2 = x2 - x1;
      const double c2 = ((y0 - y1) / h0 - (y2 - y1) / h2) / (h0 - h2);
      const double c1 = (y0 - y1) / h0 - c2 * h0;
      return std::array<double, 3>{y1, c1, c2};
    };
    const auto L = quad(w0.loss, w1.loss, w2.loss);
    if (L[2] > 0) {
      const double dx = -L[1] / (2 * L[2]);
      const auto F = quad(std::log(w0.flops_per_token), std::log(w1.flops_per_token), std::log(w2.flops_per_token));
      a.n_opt = std::exp(x1 + dx);
      a.loss_opt = L[0] + L[1] * dx + L[2] * dx * dx;
      a.d_opt = budget / std::exp(F[0] + F[1] * dx + F[2] * dx * dx);
      const auto W = quad(std::log(static_cast<double>(w0.d_model)), std::log(static_cast<double>(w1.d_model)),
                          std::log(static_cast<double>(w2.d_model)));
      a.width_opt = std::exp(W[0] + W[1] * dx + W[2] * dx * dx);
    }
  }
  if (!(a.d_opt >= static_cast<double>(opt.seq_len))) throw too_few_tokens("D* = ", a.d_opt, "");
  return a;
}

struct ScalingExponents {
  double a = 0;  // N* ~ C^a
  double b = 0;  // D* ~ C^b
};

// Least-squares slopes of log N* and log D* against log C.
inline ScalingExponents allocation_exponents(const std::vector<Allocation>& points) {
  if (points.size() < 2) throw data_error("optimal: exponents need at least two budgets");
  double sx = 0, sxx = 0, sn = 0, sd = 0, sxn = 0, sxd = 0;
  const double m = static_cast<double>(points.size());
  for (const auto& p : points) {
    const double x = std::log(p.budget), yn = std::log(p.n_opt), yd = std::log(p.d_opt);
    sx += x, sxx += x * x, sn += yn, sd += yd, sxn += x * yn, sxd += x * yd;
  }
  const double den = m * sxx - sx * sx;
  if (!(den > 0)) throw data_error("optimal: exponents need at least two different budgets");
  return {(m * sxn - sx * sn) / den, (m * sxd - sx * sd) / den};
}

}  // namespace loopscale::law
