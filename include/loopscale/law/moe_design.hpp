// Choosing R (recurrences) and E (routed experts) of a looped MoE, the design rule of Chen et al.
// (arXiv 2609.40316): among the designs that fit the compute and memory limits, start from the
// smallest (the fewest recurrences and experts) and accept one more step of R or of E (the next of
// its candidates) only while it lowers the predicted loss by at least epsilon (the fit's RMSE unless
// given): a gain the law cannot tell from its error buys no recurrence or expert. Of two steps that
// both gain enough, the one to the lower loss; an expert's step on a tie, since an expert costs
// memory only and a recurrence 2 N_loop FLOPs per token at inference and, at a fixed training
// budget, tokens. The feasible design of lowest loss, and every design within epsilon of it, are
// reported beside the choice.
//
// Model: N_act active params (the looped block's N_loop among them), of which n_expert_active sit
// in routed experts with top_k active; E routed experts store n_expert_active * E / top_k, so
// N_total = N_act + n_expert_active (E / top_k - 1) and m = N_act / N_total. Compute as the paper
// counts it: N_unroll = N_act + (R - 1) N_loop, training FLOPs 6 N_unroll D, so D = C / (6 N_unroll);
// inference 2 N_unroll FLOPs per token. Memory: N_total * bytes_per_weight.
#pragma once

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "loopscale/law/constants.hpp"
#include "loopscale/law/huber_fit.hpp"
#include "loopscale/util/text.hpp"

namespace loopscale::law {

struct MoEDesignSpace {
  double n_act = 0, n_loop = 0, n_expert_active = 0;
  double top_k = 1;
  std::vector<double> R{1, 2, 3, 4, 6, 8};
  std::vector<double> E{1, 2, 4, 8, 16};
  double budget = 0;               // training FLOPs C
  double memory_bytes = 0;         // 0: no limit
  double bytes_per_weight = 2;
  double max_inference_flops = 0;  // per token, 2 N_unroll; 0: no limit
  std::optional<double> epsilon;   // loss within which designs count as equal; default: the fit's RMSE
};

struct MoEDesignPoint {
  double R = 1, E = 1;
  double n_total = 0, m = 1, n_unroll = 0, tokens = 0, loss = 0;
  bool fits_memory = true, fits_compute = true;
  bool feasible() const { return fits_memory && fits_compute; }
};

struct MoEDesign {
  MoEDesignPoint chosen;               // where the steps of R and E that gain at least epsilon lead from the smallest design
  MoEDesignPoint optimum;              // the feasible design of lowest predicted loss
  double epsilon = 0;
  std::vector<MoEDesignPoint> near;    // every feasible design within epsilon, fewest R then fewest E first
  std::vector<MoEDesignPoint> table;   // every (R, E), R-major, in the order the candidates were given
};

inline MoEDesign design_looped_moe(const AnyLaw& law, const Eigen::VectorXd& theta, const MoEDesignSpace& s) {
  // Sizes are parameter counts: below one parameter is no model (N_act 1e-300 was designed for).
  if (!(s.n_act >= 1) || !(s.n_loop >= 1) || s.n_loop > s.n_act || !(s.n_expert_active >= 0) || s.n_expert_active > s.n_act)
    throw data_error("design: need 1 <= N_loop <= N_act (parameters) and 0 <= expert params <= N_act");
  if (!(s.budget > 0) || !std::isfinite(s.budget)) throw data_error("design: the budget must be a positive number of FLOPs");
  if (s.R.empty() || s.E.empty()) throw data_error("design: need R and E candidates");
  if (!(s.top_k >= 1) || !std::isfinite(s.top_k) || s.top_k != std::floor(s.top_k))
    throw data_error(concat("design: top_k must be a whole number >= 1, not ", s.top_k));
  if (!std::isfinite(s.n_act) || !std::isfinite(s.n_expert_active))
    throw data_error("design: N_act, N_loop and the expert params must be finite");
  if (!s.epsilon) throw data_error("design: epsilon is not set (design from a fit uses its RMSE)");
  if (!(*s.epsilon >= 0) || !std::isfinite(*s.epsilon)) throw data_error("design: epsilon must be a finite number >= 0");
  if (!(s.memory_bytes >= 0) || !(s.bytes_per_weight > 0) || !(s.max_inference_flops >= 0))
    throw data_error("design: the memory limit and the inference limit must be >= 0, bytes per weight > 0");
  // Recurrences and experts are counts: R = 2.5 is no design.
  // A candidate given twice predicts the same loss twice, and no step from one to the other gains.
  for (const auto* list : {&s.R, &s.E}) {
    std::vector<double> sorted = *list;
    std::sort(sorted.begin(), sorted.end());
    if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end())
      throw data_error(concat("design: the ", list == &s.R ? "R" : "E", " candidates list ", *twice, " twice"));
  }
  for (const double r : s.R)
    if (!(r >= 1) || !std::isfinite(r) || r != std::floor(r)) throw data_error(concat("design: every R must be a whole number >= 1, not ", r));
  for (const double e : s.E)
    if (!(e >= s.top_k) || !std::isfinite(e) || e != std::floor(e))
      throw data_error(concat("design: every E must be a whole number >= top_k, not ", e));
  // Routed experts of no parameters: every E is the dense model's size (m = 1), yet the law reads E
  // and credits it a loss that no memory pays for (expert params 0 chose E = 16, exit 0).
  if (s.n_expert_active == 0)
    for (const double e : s.E)
      if (e > 1)
        throw data_error(concat("design: expert params 0 with E = ", e, ": routed experts of no parameters (give the parameters of the top-k "
                                "experts, or only E = 1)"));
  // A law that does not read R cannot tell the recurrences apart: every design would predict the same loss.
  {
    const std::vector<std::string> cols = law.columns();
    if (std::find(cols.begin(), cols.end(), "R") == cols.end())
      throw data_error("design: law " + law.name() + " reads no recurrence count R; design needs a looped-MoE law (looped-moe and its baselines)");
  }
  const std::size_t nr = s.R.size(), ne = s.E.size();
  MoEDesign d;
  d.epsilon = *s.epsilon;
  Runs runs;
  const auto k = static_cast<Eigen::Index>(nr * ne);
  for (const char* c : {"N_act", "N_loop", "R", "m", "E", "K", "D", "N_once", "N_rec", "r", "N"}) runs.set(c).resize(k);
  for (std::size_t i = 0; i < nr; ++i)
    for (std::size_t j = 0; j < ne; ++j) {
      MoEDesignPoint p;
      p.R = s.R[i], p.E = s.E[j];
      p.n_total = s.n_act + s.n_expert_active * (p.E / s.top_k - 1);
      p.m = s.n_act / p.n_total;
      p.n_unroll = s.n_act + (p.R - 1) * s.n_loop;
      p.tokens = s.budget / (6 * p.n_unroll);
      // Less than one token of data is no training run, and the law's prediction there no loss:
      // budget 1e19 with R = 1e15 was chosen as the optimum with D = 3.3e-5 tokens and loss 1.07e7.
      if (!(p.tokens >= 1))
        throw data_error(concat("design: the budget ", s.budget, " FLOPs at R = ", p.R, " leaves D = C / (6 N_unroll) = ", p.tokens,
                                " tokens, less than one; give a larger budget or smaller R"));
      // Sizes past a double are no model either: N_act 1e-300 left D = inf (and a loss of 23
      // digits, exit 0), and N_act and the expert params near 1e308 overflow N_total.
      if (!std::isfinite(p.n_total) || !std::isfinite(p.n_unroll) || !std::isfinite(p.tokens))
        throw data_error(concat("design: at R = ", p.R, ", E = ", p.E, " the sizes are beyond the largest number (N_total ", p.n_total,
                                ", N_unroll ", p.n_unroll, ", D = C / (6 N_unroll) = ", p.tokens,
                                "); check N_act, N_loop, the expert params and the budget"));
      p.fits_memory = s.memory_bytes <= 0 || p.n_total * s.bytes_per_weight <= s.memory_bytes;
      p.fits_compute = s.max_inference_flops <= 0 || 2 * p.n_unroll <= s.max_inference_flops;
      const auto q = static_cast<Eigen::Index>(i * ne + j);
      runs.set("N_act")[q] = s.n_act, runs.set("N_loop")[q] = s.n_loop, runs.set("R")[q] = p.R, runs.set("m")[q] = p.m;
      runs.set("E")[q] = p.E, runs.set("K")[q] = s.top_k, runs.set("D")[q] = p.tokens;
      runs.set("N_once")[q] = s.n_act - s.n_loop, runs.set("N_rec")[q] = s.n_loop, runs.set("r")[q] = p.R, runs.set("N")[q] = s.n_act;
      runs.lines.push_back(static_cast<long>(q));
      d.table.push_back(p);
    }
  for (const std::string& c : law.columns())
    if (!runs.has(c)) throw data_error("design: law " + law.name() + " reads " + c + ", which a design point does not have");
  const Eigen::ArrayXd loss = predict_loss(*law.prepare(runs), theta);
  for (Eigen::Index q = 0; q < k; ++q) {
    MoEDesignPoint& p = d.table[static_cast<std::size_t>(q)];
    p.loss = loss[q];
    // A loss the law cannot give (NaN or infinite: constants outside its domain, such as E_start
    // <= 0, or sizes so large that the powers overflow) would make every comparison below false.
    if (!std::isfinite(p.loss))
      throw data_error(concat("design: law ", law.name(), " predicts no finite loss at R = ", p.R, ", E = ", p.E, " (N_total ", p.n_total,
                              ", D ", p.tokens, "): check its constants and the sizes"));
  }

  const MoEDesignPoint* best = nullptr;
  for (const MoEDesignPoint& p : d.table)
    if (p.feasible() && (!best || p.loss < best->loss)) best = &p;
  if (!best) throw data_error("design: no (R, E) fits the memory and inference limits");
  d.optimum = *best;
  for (const MoEDesignPoint& p : d.table)
    if (p.feasible() && p.loss <= best->loss + d.epsilon) d.near.push_back(p);
  std::stable_sort(d.near.begin(), d.near.end(), [](const MoEDesignPoint& a, const MoEDesignPoint& b) {
    return a.R != b.R ? a.R < b.R : a.E < b.E;
  });
  // The steps, over the candidates in increasing order. Memory grows with E alone and inference
  // compute with R alone, so the smallest design fits whenever any does (best above).
  std::vector<std::size_t> by_r(nr), by_e(ne);
  for (std::size_t i = 0; i < nr; ++i) by_r[i] = i;
  for (std::size_t j = 0; j < ne; ++j) by_e[j] = j;
  std::stable_sort(by_r.begin(), by_r.end(), [&](std::size_t a, std::size_t b) { return s.R[a] < s.R[b]; });
  std::stable_sort(by_e.begin(), by_e.end(), [&](std::size_t a, std::size_t b) { return s.E[a] < s.E[b]; });
  const auto at = [&](std::size_t a, std::size_t b) -> const MoEDesignPoint& { return d.table[by_r[a] * ne + by_e[b]]; };
  std::size_t a = 0, b = 0;
  for (;;) {
    const MoEDesignPoint& here = at(a, b);
    std::optional<std::pair<std::size_t, std::size_t>> step;
    for (const auto& [x, y] : {std::pair{a, b + 1}, std::pair{a + 1, b}}) {  // an expert first: it wins a tie
      if (x >= nr || y >= ne) continue;
      const MoEDesignPoint& p = at(x, y);
      if (p.feasible() && p.loss < here.loss && here.loss - p.loss >= d.epsilon && (!step || p.loss < at(step->first, step->second).loss))
        step = {x, y};
    }
    if (!step) break;
    std::tie(a, b) = *step;
  }
  d.chosen = at(a, b);
  return d;
}

// From a fit: its parameters, and its RMSE as epsilon unless the space sets one.
inline MoEDesign design_looped_moe(const AnyLaw& law, const FitResult& fit, MoEDesignSpace s) {
  if (fit.law != law.name()) throw data_error("design: the fit is of law " + fit.law + ", not " + law.name());
  if (!s.epsilon && !(fit.rmse >= 0 && std::isfinite(fit.rmse)))  // named as the fit's, not as an epsilon the caller never set
    throw data_error(concat("design: the fit's rmse ", fit.rmse, " is not a finite number >= 0; set the space's epsilon"));
  if (!s.epsilon) s.epsilon = fit.rmse;
  return design_looped_moe(law, fit.theta, s);
}

}  // namespace loopscale::law
