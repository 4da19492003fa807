// The iso-depth paper's sweep as runs: 29 (budget, width) points for each r in {1, 2, 4, 8}, 116
// runs, with N_once, N_rec from the parameter accounting and D = C / F from its FLOPs per token
// (context 2048, vocabulary 32064). Losses are not included: synthetic.hpp draws them from a law.
#pragma once

#include <array>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "loopscale/account/flops.hpp"
#include "loopscale/arch/iso_depth.hpp"
#include "loopscale/law/runs.hpp"

namespace loopscale::law {

using PaperFamily = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<dynamic>, Vocab<32064>>;

// d_model = 64 s rounded up to a multiple of 128 (head dim 128).
constexpr int64 paper_width(int64 s) { return ceil_div(64 * s, 128) * 128; }

// Budgets (FLOPs) and their width multipliers s.
inline std::vector<std::pair<double, std::vector<int64>>> paper_budgets() {
  return {{4.64e17, {6, 8, 10, 12}},          {1e18, {6, 8, 10, 12, 14}},      {2.15e18, {8, 10, 12, 14, 16}},
          {4.64e18, {10, 12, 14, 16, 18, 20}}, {1e19, {12, 16, 18, 20, 24}},     {2.15e19, {18, 24, 28, 34}}};
}

struct PaperGrid {
  Runs runs;                        // N_once, N_rec, r, D, C, N (no loss)
  std::vector<std::string> cells;   // "(budget, r)" label per run, for the block bootstrap
};

inline PaperGrid iso_depth_paper_grid(int64 seq_len = 2048) {
  PaperGrid g;
  std::vector<double> n_once, n_rec, r, d, c, n;
  const std::array<int64, 4> rs{1, 2, 4, 8};
  for (std::size_t i = 0; i < rs.size(); ++i)
    for (const auto& [budget, widths] : paper_budgets())
      for (int64 s : widths) {
        const ModelSpec m = PaperFamily::specs(paper_width(s))[i];
        const ParamCounts p = count_params(m);
        const double f = static_cast<double>(count_flops(m, seq_len).train);
        n_once.push_back(static_cast<double>(p.once));
        n_rec.push_back(static_cast<double>(p.rec));
        n.push_back(static_cast<double>(p.non_embedding));
        r.push_back(static_cast<double>(rs[i]));
        c.push_back(budget);
        d.push_back(budget / f);
        char cell[48];
        std::snprintf(cell, sizeof cell, "%.3g/r%lld", budget, static_cast<long long>(rs[i]));
        g.cells.push_back(cell);
      }
  const auto col = [](const std::vector<double>& v) { return Eigen::Map<const Eigen::ArrayXd>(v.data(), static_cast<Eigen::Index>(v.size())); };
  g.runs.set("N_once") = col(n_once);
  g.runs.set("N_rec") = col(n_rec);
  g.runs.set("N") = col(n);
  g.runs.set("r") = col(r);
  g.runs.set("C") = col(c);
  g.runs.set("D") = col(d);
  for (std::size_t k = 0; k < n.size(); ++k) g.runs.lines.push_back(static_cast<long>(k + 1));
  return g;
}

}  // namespace loopscale::law
