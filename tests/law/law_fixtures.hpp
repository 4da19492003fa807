// Shared by the law tests: a grid of runs carrying every variable some law reads, consistent with
// each other, and test constants for every law in the registry.
#pragma once

#include <map>
#include <string>

#include "loopscale/law/laws.hpp"

namespace loopscale::law::test {

// 4 sizes x 4 token counts x 4 recurrences x 3 expert counts = 192 runs. Two thirds of the active
// params sit in experts (top-1), the looped block is a third of the active params, and the
// granularity G cycles through 1..8.
inline Runs variable_grid() {
  Runs g;
  std::vector<double> n_act, d, R, E, G;
  int k = 0;
  for (double n : {1e8, 3e8, 1e9, 3e9})
    for (double t : {2e10, 6e10, 2e11, 6e11})
      for (double r : {1.0, 2.0, 4.0, 8.0})
        for (double e : {1.0, 4.0, 16.0}) {
          n_act.push_back(n), d.push_back(t), R.push_back(r), E.push_back(e), G.push_back(double(1 << (k++ % 4)));
        }
  const auto col = [](const std::vector<double>& v) { return Eigen::Map<const Eigen::ArrayXd>(v.data(), static_cast<Eigen::Index>(v.size())); };
  g.set("N_act") = col(n_act);
  g.set("N") = col(n_act);
  g.set("N_loop") = col(n_act) / 3;
  g.set("N_once") = col(n_act) * 2 / 3;
  g.set("N_rec") = col(n_act) / 3;
  g.set("R") = col(R);
  g.set("r") = col(R);
  g.set("D") = col(d);
  g.set("E") = col(E);
  g.set("K") = Eigen::ArrayXd::Ones(static_cast<Eigen::Index>(n_act.size()));
  g.set("G") = col(G);
  const Eigen::ArrayXd n_total = col(n_act) * (1 + 2.0 / 3 * (col(E) - 1));
  g.set("m") = col(n_act) / n_total;
  for (std::size_t i = 0; i < n_act.size(); ++i) g.lines.push_back(static_cast<long>(i + 2));
  return g;
}

inline Constants test_constants(const std::string& law) {
  const Constants chin{{"E", 1.7}, {"A", 400}, {"B", 900}, {"alpha", 0.34}, {"beta", 0.30}};
  Constants moe{{"c", 1.6},  {"A", 300},     {"B", 800},  {"alpha", 0.30}, {"beta", 0.28},    {"delta", -0.2},
                {"gamma", 0.01}, {"omega", 0.1}, {"zeta", -0.01}, {"E_start", 2}, {"E_max", 300}};
  if (law == "chinchilla" || law == "parcae") return chin;
  if (law == "iso-depth") {
    Constants c = chin;
    c["phi"] = 0.46;
    return c;
  }
  if (law == "moe" || law == "looped-moe-linear") return moe;
  if (law == "looped-moe-power") return moe["phi"] = 0.5, moe;
  if (law == "looped-moe-bounded") return moe["kappa1"] = 0.3682, moe["kappa2"] = 1.4037, moe;
  if (law == "looped-moe") return moe["kappa1"] = 0.3682, moe["kappa2"] = 1.4037, moe["theta"] = 0.3286, moe;
  if (law == "clark") return {{"a", -0.08}, {"b", -0.05}, {"c", 0.005}, {"d", 2.5}, {"E_start", 2}, {"E_max", 300}};
  if (law == "krajewski") return {{"c", 1.7}, {"a", 300}, {"g", 100}, {"gamma", 0.5}, {"alpha", 0.33}, {"b", 900}, {"beta", 0.3}};
  if (law == "abnar")
    return {{"e", 1.6}, {"a", 300},  {"alpha", 0.33}, {"b", 900},     {"beta", 0.3},
            {"c", 0.05}, {"lambda", 0.3}, {"d", 50}, {"delta", 0.4}, {"gamma", 0.25}};
  throw std::logic_error("no test constants for " + law);
}

}  // namespace loopscale::law::test
