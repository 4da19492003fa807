// Looped-MoE: recovery of the bounded-recurrence constants, the baselines ranked on a held-out R
// slice, and the design rule.
#include <catch2/catch.hpp>

#include "law_fixtures.hpp"

using namespace loopscale::law;

TEST_CASE("held-out R slice: the bounded law extrapolates better than linear", "[law][moe][holdout]") {
  const Runs grid = test::variable_grid();
  const AnyLaw truth_law = LoopedMoE{};
  const Runs runs = with_synthetic_loss(truth_law, grid, theta_of(truth_law, test::test_constants("looped-moe")), 0.003, 4);
  std::vector<std::string> labels;
  for (Eigen::Index i = 0; i < runs.size(); ++i) labels.push_back(std::to_string(static_cast<int>(runs["R"][i])));
  FitOptions o;
  o.frozen = {{"E_start", 2}, {"E_max", 300}};
  std::map<std::string, double> rmse;
  for (const std::string name : {"looped-moe", "looped-moe-linear"}) {
    const AnyLaw law = law_by_name(name);
    o.starts = random_starts(law.parameters(), 48, 6);
    const HoldoutResult h = holdout(law, runs, labels, "R", "max", o);
    CHECK(h.test_points == 48);
    rmse[name] = h.rmse;
  }
  INFO("held-out RMSE: bounded(R, m) " << rmse["looped-moe"] << ", linear " << rmse["looped-moe-linear"]);
  CHECK(rmse["looped-moe"] < 0.02);
  CHECK(rmse["looped-moe"] < rmse["looped-moe-linear"]);
}

TEST_CASE("design: one more step of R or E only if it buys epsilon", "[law][moe][design]") {
  const AnyLaw law = LoopedMoE{};
  // Constants under which experts pay (omega < 0: more experts also lower the data term); at this
  // budget the predicted loss falls from E = 1 to 16 by about 0.3 while looping does not pay.
  Constants c = test::test_constants("looped-moe");
  c["omega"] = -0.05;
  c["zeta"] = 0.0;
  const Eigen::VectorXd th = theta_of(law, c);
  MoEDesignSpace s;
  s.n_act = 6e8;
  s.n_loop = 2e8;
  s.n_expert_active = 4e8;
  s.budget = 1e23;
  s.epsilon = 0.0;
  const MoEDesign free = design_looped_moe(law, th, s);
  CHECK(free.table.size() == s.R.size() * s.E.size());
  CHECK(free.path.size() >= 2);
  // Each accepted step lowered the predicted loss.
  for (std::size_t i = 1; i < free.path.size(); ++i) CHECK(free.path[i].loss < free.path[i - 1].loss);
  // A large epsilon keeps the cheapest design.
  s.epsilon = 1.0;
  const MoEDesign stay = design_looped_moe(law, th, s);
  CHECK(stay.chosen.R == 1);
  CHECK(stay.chosen.E == 1);
  // A memory limit caps the experts: 2 bytes per weight, at most 1.4e9 weights.
  s.epsilon = 0.0;
  s.memory_bytes = 2 * 1.4e9;
  const MoEDesign capped = design_looped_moe(law, th, s);
  CHECK(free.chosen.E == 16);
  CHECK(capped.chosen.n_total * 2 <= s.memory_bytes);
  CHECK(capped.chosen.E == 2);  // N_total 1.0e9 at E = 2, 1.8e9 at E = 4
}
