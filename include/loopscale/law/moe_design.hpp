// Choosing R (recurrences) and E (routed experts) of a looped MoE under a compute budget and a
// memory limit, the design rule of Chen et al.: start from the cheapest design and take one more
// step of R or of E only while it lowers the predicted loss by at least epsilon (default: the fit's
// RMSE), since smaller differences are within the law's error.
//
// Model: N_act active params (the looped block's N_loop among them), of which n_expert_active sit
// in routed experts with top_k active; E routed experts store n_expert_active * E / top_k.
// Training FLOPs 6 N_unroll D with N_unroll = N_act + (R - 1) N_loop, so D = C / (6 N_unroll).
#pragma once

#include <cmath>
#include <vector>

#include "loopscale/law/constants.hpp"

namespace loopscale::law {

struct MoEDesignSpace {
  double n_act = 0, n_loop = 0, n_expert_active = 0;
  double top_k = 1;
  std::vector<double> R{1, 2, 3, 4, 6, 8};
  std::vector<double> E{1, 2, 4, 8, 16};
  double budget = 0;             // training FLOPs
  double memory_bytes = 0;       // 0: no limit
  double bytes_per_weight = 2;
  double epsilon = 0;            // minimum loss drop for one more step
};

struct MoEDesignPoint {
  double R = 1, E = 1;
  double n_total = 0, m = 1, tokens = 0, loss = 0;
  bool fits_memory = true;
};

struct MoEDesign {
  MoEDesignPoint chosen;
  std::vector<MoEDesignPoint> path;   // the accepted steps, from the start
  std::vector<MoEDesignPoint> table;  // every (R, E), R-major
};

inline MoEDesign design_looped_moe(const AnyLaw& law, const Eigen::VectorXd& theta, const MoEDesignSpace& s) {
  if (!(s.n_act > 0) || !(s.n_loop > 0) || s.n_loop > s.n_act || s.n_expert_active < 0 || s.n_expert_active > s.n_act)
    throw data_error("design: need 0 < N_loop <= N_act and 0 <= expert params <= N_act");
  if (!(s.budget > 0) || s.R.empty() || s.E.empty() || !(s.top_k >= 1)) throw data_error("design: need a budget, R and E candidates, top_k >= 1");
  const std::size_t nr = s.R.size(), ne = s.E.size();
  MoEDesign d;
  Runs runs;
  const auto k = static_cast<Eigen::Index>(nr * ne);
  for (const char* c : {"N_act", "N_loop", "R", "m", "E", "K", "D", "N_once", "N_rec", "r", "N"}) runs.set(c).resize(k);
  for (std::size_t i = 0; i < nr; ++i)
    for (std::size_t j = 0; j < ne; ++j) {
      MoEDesignPoint p;
      p.R = s.R[i], p.E = s.E[j];
      if (p.E < s.top_k) throw data_error("design: every E must be >= top_k");
      p.n_total = s.n_act + s.n_expert_active * (p.E / s.top_k - 1);
      p.m = s.n_act / p.n_total;
      p.tokens = s.budget / (6 * (s.n_act + (p.R - 1) * s.n_loop));
      p.fits_memory = s.memory_bytes <= 0 || p.n_total * s.bytes_per_weight <= s.memory_bytes;
      const auto q = static_cast<Eigen::Index>(i * ne + j);
      runs.set("N_act")[q] = s.n_act, runs.set("N_loop")[q] = s.n_loop, runs.set("R")[q] = p.R, runs.set("m")[q] = p.m;
      runs.set("E")[q] = p.E, runs.set("K")[q] = s.top_k, runs.set("D")[q] = p.tokens;
      runs.set("N_once")[q] = s.n_act - s.n_loop, runs.set("N_rec")[q] = s.n_loop, runs.set("r")[q] = p.R, runs.set("N")[q] = s.n_act;
      runs.lines.push_back(static_cast<long>(q));
      d.table.push_back(p);
    }
  const Eigen::ArrayXd loss = predict_loss(*law.prepare(runs), theta);
  for (Eigen::Index q = 0; q < k; ++q) d.table[static_cast<std::size_t>(q)].loss = loss[q];
  const auto at = [&](std::size_t i, std::size_t j) -> const MoEDesignPoint& { return d.table[i * ne + j]; };
  if (!at(0, 0).fits_memory) throw data_error("design: even the smallest design does not fit the memory limit");
  std::size_t i = 0, j = 0;
  d.path.push_back(at(0, 0));
  while (true) {
    double best_drop = -INFINITY;
    std::size_t bi = i, bj = j;
    if (i + 1 < nr && at(i + 1, j).fits_memory && at(i, j).loss - at(i + 1, j).loss > best_drop)
      best_drop = at(i, j).loss - at(i + 1, j).loss, bi = i + 1, bj = j;
    if (j + 1 < ne && at(i, j + 1).fits_memory && at(i, j).loss - at(i, j + 1).loss > best_drop)
      best_drop = at(i, j).loss - at(i, j + 1).loss, bi = i, bj = j + 1;
    if ((bi == i && bj == j) || best_drop < s.epsilon) break;
    i = bi, j = bj;
    d.path.push_back(at(i, j));
  }
  d.chosen = at(i, j);
  return d;
}

}  // namespace loopscale::law
