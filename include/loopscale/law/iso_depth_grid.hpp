// The iso-depth paper's sweep (spec/paper_grid.hpp) as runs: 29 (budget, width) points for each r
// in {1, 2, 4, 8}, 116 runs, with N_once, N_rec from the parameter accounting (the injection counted
// as `injection` says, account/injection_convention.hpp) and D = C / F from its FLOPs per token
// (context 2048). Losses are not included: synthetic.hpp draws them from a law.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include "loopscale/account/flops.hpp"
#include "loopscale/account/injection_convention.hpp"
#include "loopscale/account/params.hpp"
#include "loopscale/law/runs.hpp"
#include "loopscale/spec/paper_grid.hpp"

namespace loopscale::law {

struct PaperGrid {
  Runs runs;                        // N_once, N_rec, r, D, C, N, F (no loss)
  std::vector<std::string> cells;   // "(budget, r)" label per run, for the block bootstrap
};

inline PaperGrid iso_depth_paper_grid(int64 seq_len = 2048, InjectionCount injection = InjectionCount::rec) {
  PaperGrid g;
  std::vector<double> n_once, n_rec, r, d, c, n, flops;
  for (const int64 rv : paper::rs)
    for (const ComputeBudget& b : paper::budgets())
      for (const int64 s : b.widths) {
        const double budget = b.flops;
        const ModelSpec m = family_member(paper::family(), rv, paper::width(s));
        const ParamCounts p = count_params(m);
        const LoopedSplit split = split_params(p, injection);
        const double f = static_cast<double>(count_flops(m, seq_len).train);
        n_once.push_back(static_cast<double>(split.once));
        n_rec.push_back(static_cast<double>(split.rec));
        flops.push_back(f);
        n.push_back(static_cast<double>(p.non_embedding));
        r.push_back(static_cast<double>(rv));
        c.push_back(budget);
        d.push_back(budget / f);
        char cell[48];
        std::snprintf(cell, sizeof cell, "%.3g/r%lld", budget, static_cast<long long>(rv));
        g.cells.push_back(cell);
      }
  const auto col = [](const std::vector<double>& v) { return Eigen::Map<const Eigen::ArrayXd>(v.data(), static_cast<Eigen::Index>(v.size())); };
  g.runs.set("N_once") = col(n_once);
  g.runs.set("N_rec") = col(n_rec);
  g.runs.set("N") = col(n);
  g.runs.set("r") = col(r);
  g.runs.set("C") = col(c);
  g.runs.set("D") = col(d);
  g.runs.set("F") = col(flops);
  g.runs.injection = std::string(name_of(injection));
  for (std::size_t k = 0; k < n.size(); ++k) g.runs.lines.push_back(static_cast<long>(k + 1));
  return g;
}

}  // namespace loopscale::law
