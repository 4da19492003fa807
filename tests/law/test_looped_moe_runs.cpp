// The looped-MoE law and its baselines on measured runs: the `looped-moe` preset's 36 runs
// (tests/data/looped_moe_preset_runs.csv, trained by `loopscale sweep run --preset looped-moe`;
// how and where in tests/data/README.md), fitted as docs/sweeps.md ("The looped-MoE fit") does.
// These tests back that section's claims: the in-sample ranking of the four laws, linear's worse
// extrapolation to the held-out R = 4 slice, and that this sweep does not determine how the other
// three extrapolate.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "../cli/run_cli.hpp"

using loopscale::test::run_cli;

namespace {

const std::string runs_csv = std::string(LOOPSCALE_TEST_DATA) + "/looped_moe_preset_runs.csv";

// gamma, zeta: three (N, D) points per E do not separate them from alpha, beta, delta, omega;
// E_start = 1, E_max = 1e5: Clark's transform is then ln E within 0.01% (docs/sweeps.md says why).
const std::string frozen = " --freeze gamma=0 --freeze zeta=0 --freeze E_start=1 --freeze E_max=1e5";
const std::string four_laws = "looped-moe,looped-moe-bounded,looped-moe-power,looped-moe-linear";

struct Row {
  double rmse = 0, objective = 0, held_out = -1;
  std::string not_determined;
};

std::map<std::string, Row> compare(const std::string& extra) {
  const auto r = run_cli("fit --law " + four_laws + " --data " + runs_csv + frozen + " --starts random:500 " + extra + " --json");
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  std::map<std::string, Row> out;
  for (const auto& e : j.at("comparison")) {
    Row row;
    row.rmse = e.at("rmse").get<double>();
    row.objective = e.at("objective").get<double>();
    if (e.contains("not_determined")) row.not_determined = e["not_determined"]["parameters"].get<std::string>();
    CHECK(e.at("failed_starts").get<int>() == 0);
    if (e.contains("holdout")) {
      CHECK(e["holdout"]["points"].get<int>() == 12);  // R = 4: 3 (C, d) x 4 E
      row.held_out = e["holdout"]["rmse"].get<double>();
    }
    out[e.at("law").get<std::string>()] = row;
  }
  REQUIRE(out.size() == 4);
  return out;
}

}  // namespace

TEST_CASE("the measured looped-moe runs are the preset's 36 runs", "[law][moe][measured]") {
  const auto plan = run_cli("sweep plan --preset looped-moe --json");
  REQUIRE(plan.rc == 0);
  std::set<std::string> planned;
  const auto planned_runs = nlohmann::json::parse(plan.out);  // kept: a range-for over .at() of a temporary dangles
  for (const auto& run : planned_runs.at("runs")) planned.insert(run.at("id").get<std::string>());
  CHECK(planned.size() == 36);
  // The file's ids and its accounting columns are the plan's: the data are this preset's runs.
  const auto fit = run_cli("law --law looped-moe-linear --data " + runs_csv +
                           " --param c=1 --param A=1 --param B=1 --param alpha=0.3 --param beta=0.3 --param delta=0 --param gamma=0"
                           " --param omega=0 --param zeta=0 --param E_start=1 --param E_max=1e5 --json");
  REQUIRE(fit.rc == 0);
  CHECK(nlohmann::json::parse(fit.out).at("predictions").size() == 36);
  std::ifstream in(runs_csv);
  std::string line;
  std::getline(in, line);
  std::set<std::string> ids;
  while (std::getline(in, line))
    if (!line.empty()) ids.insert(line.substr(0, line.find(',')));
  CHECK(ids == planned);
}

TEST_CASE("looped MoE on the measured runs: in sample bounded(R, m) < bounded < power < linear", "[law][moe][measured]") {
  const auto rows = compare("--seed 1");
  const auto rmse = [&](const char* law) { return rows.at(law).rmse; };
  INFO("RMSE: bounded(R, m) " << rmse("looped-moe") << ", bounded " << rmse("looped-moe-bounded") << ", power "
                              << rmse("looped-moe-power") << ", linear " << rmse("looped-moe-linear"));
  // Each law down the list is the one above with a parameter fewer; measured 0.0190, 0.0194,
  // 0.0201, 0.0231 nats (docs/sweeps.md).
  CHECK(rmse("looped-moe") < rmse("looped-moe-bounded"));
  CHECK(rmse("looped-moe-bounded") < rmse("looped-moe-power"));
  CHECK(rmse("looped-moe-power") < rmse("looped-moe-linear"));
  CHECK(rmse("looped-moe") == Approx(0.0190).margin(0.0005));
  CHECK(rmse("looped-moe-linear") == Approx(0.0231).margin(0.0005));
}

TEST_CASE("looped MoE on the measured runs: held out R = 4, linear extrapolates worst, the others are not determined",
          "[law][moe][measured][holdout]") {
  // Fitted on R = 1 and 2 only, predicted at R = 4. Two start seeds, 500 starts each.
  const auto a = compare("--seed 1 --holdout R=4");
  const auto b = compare("--seed 2 --holdout R=4");
  for (const auto* rows : {&a, &b}) {
    const double linear = rows->at("looped-moe-linear").held_out;
    for (const char* law : {"looped-moe", "looped-moe-power"}) {
      INFO(law << " held-out RMSE " << rows->at(law).held_out << ", linear " << linear);
      CHECK(rows->at(law).held_out > 0);
      CHECK(linear > 1.05 * rows->at(law).held_out);  // measured 0.0337 against 0.0267
    }
    // Two R values cannot pin the bounded law's saturation: its kappa1 and kappa2 move one number
    // (N_eff at R = 2). The 500-start searches of seeds 1 and 2 extrapolated to R = 4 with RMSEs
    // 0.0260 and 0.0309 (4 Dec 2026) from whichever pair they kept; the fit now says so instead of
    // printing either (law/identifiability.hpp), and still fits all 36 runs, where R = 4 is in.
    const Row& bounded = rows->at("looped-moe-bounded");
    CHECK(bounded.not_determined == "kappa1, kappa2");
    CHECK(bounded.held_out < 0);
    CHECK(bounded.objective > 0);
  }
  CHECK(a.at("looped-moe-bounded").objective == Approx(b.at("looped-moe-bounded").objective).epsilon(0.005));
}
