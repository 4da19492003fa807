// Looped-MoE: the baselines ranked on a held-out R slice of synthetic runs, and the design rule.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "law_fixtures.hpp"

using namespace loopscale::law;

TEST_CASE("held-out R slice: the bounded law extrapolates better than linear", "[law][moe][holdout]") {
  const Runs grid = loopscale::law::test::variable_grid();
  const AnyLaw truth_law = LoopedMoE{};
  const Runs runs = with_synthetic_loss(truth_law, grid, theta_of(truth_law, loopscale::law::test::test_constants("looped-moe")), 0.003, 4);
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

// Where the paper's steps stopped: no next R or E of the chosen design (the next of its sorted
// candidates) fits and lowers the predicted loss by epsilon or more.
static void check_stopped(const MoEDesign& d, const MoEDesignSpace& s) {
  REQUIRE(d.chosen.feasible());
  const auto next = [](const std::vector<double>& grid, double v) {
    double n = INFINITY;
    for (const double g : grid)
      if (g > v) n = std::min(n, g);
    return n;
  };
  const double r_next = next(s.R, d.chosen.R), e_next = next(s.E, d.chosen.E);
  int neighbours = 0;
  for (const auto& p : d.table)
    if ((p.R == r_next && p.E == d.chosen.E) || (p.R == d.chosen.R && p.E == e_next)) {
      ++neighbours;
      INFO("chosen R " << d.chosen.R << " E " << d.chosen.E << " loss " << d.chosen.loss << "; next R " << p.R << " E " << p.E << " loss " << p.loss);
      CHECK(!(p.feasible() && p.loss < d.chosen.loss && d.chosen.loss - p.loss >= d.epsilon));
    }
  CHECK(neighbours == (std::isfinite(r_next) ? 1 : 0) + (std::isfinite(e_next) ? 1 : 0));
}

TEST_CASE("design: from the smallest design, a step of R or E only while it gains epsilon, as the paper's rule", "[law][moe][design]") {
  const AnyLaw law = LoopedMoE{};
  // Constants under which experts pay (omega < 0: more experts also lower the data term); at this
  // budget the predicted loss falls from E = 1 to 16 by about 0.3 while looping does not pay.
  Constants c = loopscale::law::test::test_constants("looped-moe");
  c["omega"] = -0.05;
  c["zeta"] = 0.0;
  const Eigen::VectorXd th = theta_of(law, c);
  MoEDesignSpace s;
  s.n_act = 6e8;
  s.n_loop = 2e8;
  s.n_expert_active = 4e8;
  s.budget = 1e23;
  CHECK_THROWS_WITH(design_looped_moe(law, th, s), Catch::Contains("epsilon is not set"));
  s.epsilon = 0.0;
  const MoEDesign exact = design_looped_moe(law, th, s);
  CHECK(exact.table.size() == s.R.size() * s.E.size());
  // epsilon 0: the global optimum (the lowest loss of the whole table), here the most experts.
  double lowest = INFINITY;
  for (const auto& p : exact.table) lowest = std::min(lowest, p.loss);
  CHECK(exact.optimum.loss == lowest);
  CHECK(exact.chosen.loss == lowest);
  CHECK(exact.chosen.E == 16);
  check_stopped(exact, s);
  // A larger epsilon: the steps stop where no next R or E gains it, never above the smallest
  // design's loss; every design within epsilon of the optimum is listed, fewest R then fewest E first.
  double start = INFINITY;
  for (const auto& p : exact.table)
    if (p.R == 1 && p.E == 1) start = p.loss;
  REQUIRE(std::isfinite(start));
  for (const double eps : {0.01, 0.05, 0.1, 0.3, 1.0}) {
    s.epsilon = eps;
    const MoEDesign d = design_looped_moe(law, th, s);
    INFO("epsilon " << eps << ": chosen R " << d.chosen.R << " E " << d.chosen.E);
    CHECK(d.optimum.loss == lowest);
    CHECK(d.chosen.loss <= start);
    check_stopped(d, s);
    std::size_t within = 0;
    for (const auto& p : d.table) within += p.loss <= lowest + eps;
    CHECK(d.near.size() == within);
    for (std::size_t i = 1; i < d.near.size(); ++i)
      CHECK((d.near[i - 1].R < d.near[i].R || (d.near[i - 1].R == d.near[i].R && d.near[i - 1].E < d.near[i].E)));
  }
  // A large epsilon keeps the cheapest design.
  s.epsilon = 1.0;
  const MoEDesign stay = design_looped_moe(law, th, s);
  CHECK(stay.chosen.R == 1);
  CHECK(stay.chosen.E == 1);
  // A memory limit caps the experts: 2 bytes per weight, at most 1.4e9 weights.
  s.epsilon = 0.0;
  s.memory_bytes = 2 * 1.4e9;
  const MoEDesign capped = design_looped_moe(law, th, s);
  CHECK(capped.chosen.n_total * 2 <= s.memory_bytes);
  CHECK(capped.chosen.E == 2);  // N_total 1.0e9 at E = 2, 1.8e9 at E = 4
  // An inference limit caps the recurrences: 2 N_unroll <= 2 (6e8 + 2e8).
  s.memory_bytes = 0;
  s.max_inference_flops = 2 * (6e8 + 2e8);
  for (const auto& p : design_looped_moe(law, th, s).near) CHECK(p.R <= 2);
  s.max_inference_flops = 1;
  CHECK_THROWS_WITH(design_looped_moe(law, th, s), Catch::Contains("no (R, E) fits"));
  // A candidate given twice would stop the steps there (no step between equals gains): refused.
  s.max_inference_flops = 0;
  s.R = {2, 1, 2};
  CHECK_THROWS_WITH(design_looped_moe(law, th, s), Catch::Contains("the R candidates list 2 twice"));
}

TEST_CASE("design from a fit: epsilon defaults to its RMSE", "[law][moe][design]") {
  const AnyLaw law = LoopedMoE{};
  const Runs grid = loopscale::law::test::variable_grid();
  const Runs runs = with_synthetic_loss(law, grid, theta_of(law, loopscale::law::test::test_constants("looped-moe")), 0.01, 2);
  FitOptions o;
  o.frozen = {{"E_start", 2}, {"E_max", 300}};
  o.starts = random_starts(law.parameters(), 16, 3);
  const FitResult f = fit(law, runs, o);
  MoEDesignSpace s;
  s.n_act = 6e8, s.n_loop = 2e8, s.n_expert_active = 4e8, s.budget = 1e22;
  const MoEDesign d = design_looped_moe(law, f, s);
  CHECK(d.epsilon == f.rmse);
  CHECK(d.epsilon > 0);
  s.epsilon = 0.5;
  CHECK(design_looped_moe(law, f, s).epsilon == 0.5);
  CHECK_THROWS_WITH(design_looped_moe(LoopedMoEPower{}, f, s), Catch::Contains("the fit is of law looped-moe"));
  // A fit's negative RMSE is named as the fit's (it was "epsilon must be a finite number >= 0"), and
  // only when it would be epsilon; 0 (an exact fit) is epsilon 0.
  FitResult bad = f;
  bad.rmse = -0.02;
  CHECK(design_looped_moe(law, bad, s).epsilon == 0.5);
  s.epsilon.reset();
  CHECK_THROWS_AS(design_looped_moe(law, bad, s), data_error);
  CHECK_THROWS_WITH(design_looped_moe(law, bad, s), "design: the fit's rmse -0.02 is not a finite number >= 0; set the space's epsilon");
  bad.rmse = 0;
  CHECK(design_looped_moe(law, bad, s).epsilon == 0.0);
}
