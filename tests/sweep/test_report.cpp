#include <catch2/catch.hpp>

#include <cstdlib>
#include <fstream>
#include <random>
#include <sstream>

#include "cli/run_cli.hpp"
#include "test_files.hpp"
#include "loopscale/law/constants.hpp"
#include "loopscale/sweep/compare.hpp"
#include "loopscale/sweep/presets.hpp"
#include "loopscale/sweep/report.hpp"

using namespace loopscale;
using namespace loopscale::sweep;
using loopscale::test::slurp;

namespace {

// A sweep folder of the paper's grid whose losses come from the joint law with the given phi
// (noise sigma in log loss), written the way `sweep run` writes it.
fs::path synthetic_folder(const std::string& name, double phi, double sigma, std::uint64_t seed) {
  const fs::path dir = fs::path(LOOPSCALE_TEST_TMP) / name;
  fs::remove_all(dir);
  const Plan plan = make_plan(preset("paper"));
  claim_folder(dir, plan);
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, sigma);
  for (const PlannedRun& run : plan.runs) {
    const auto& p = run.acct.params;
    const double n = static_cast<double>(p.once) + std::pow(static_cast<double>(run.r), phi) * static_cast<double>(p.rec);
    const double tokens = static_cast<double>(run.steps) * static_cast<double>(plan.spec.batch_tokens);
    const double loss = (1.56773 + 28.027 * std::pow(n, -0.19924) + 915.82 * std::pow(tokens, -0.36863)) * std::exp(noise(rng));
    append_result(dir / "results.jsonl", result_line(plan, run, {{"val_loss", loss}, {"tokens", tokens}}));
  }
  return dir;
}

}  // namespace

TEST_CASE("report: report.md with phi and its interval, analysis.json, runs.csv and three plots") {
  const fs::path dir = synthetic_folder("report_paper", 0.459, 0.005, 11);
  ReportOptions o;
  o.analyse.starts = 60;
  o.analyse.bootstrap = 40;
  o.analyse.bootstrap_starts = 4;
  const ReportFiles f = write_report(dir, o);
  REQUIRE(f.analysis.joint);
  const double phi = f.analysis.joint->fit.value("phi");
  CHECK(std::abs(phi - 0.459) < 0.06);
  const std::string md = slurp(f.markdown);
  CHECK(md.find(fmt::format("**phi = {:.3f}, 95% interval [{:.3f}, {:.3f}]**", phi, f.analysis.joint->phi_lo, f.analysis.joint->phi_hi)) !=
        std::string::npos);
  CHECK(md.find("restricted phi = 0") != std::string::npos);
  CHECK(md.find("**Not determined**") == std::string::npos);
  CHECK(md.find("**116 of 116 planned runs finished**") != std::string::npos);
  const auto j = nlohmann::json::parse(slurp(f.json));
  CHECK(j["joint"]["phi"].get<double>() == phi);
  CHECK(j["cells"].size() == 24);
  CHECK(loopscale::test::count_lines(slurp(f.csv)) == 117);
  // The runs table's joint law is the fitted law's own prediction at each run.
  const std::vector<double> predicted = joint_law_at_runs(f.analysis);
  REQUIRE(predicted.size() == f.analysis.runs.size());
  for (std::size_t i = 0; i < predicted.size(); ++i)
    CHECK(predicted[i] == Approx(f.analysis.joint->fit.predicted[static_cast<Eigen::Index>(i)]).epsilon(1e-12));
  if (std::system("gnuplot --version > /dev/null 2>&1") == 0) {
    CHECK(f.plot_problem.empty());
    REQUIRE(f.plots.size() == 3);
    for (const auto& p : f.plots) CHECK(fs::file_size(p) > 10000);
  } else {
    CHECK(!f.plot_problem.empty());
  }
}

TEST_CASE("report data: the joint law's losses are law::IsoDepth's with the fit's parameters") {
  using P = law::IsoDepthPublished;
  const law::AnyLaw iso = law::IsoDepth{};
  law::FitResult fit;
  fit.law = iso.name();
  fit.parameters = iso.parameters();
  fit.theta = law::theta_of(iso, {{"E", P::E}, {"A", P::A}, {"B", P::B}, {"alpha", P::alpha}, {"beta", P::beta}, {"phi", P::phi}});
  const std::vector<JointPoint> points{{2e7, 5e7, 1, 2e9}, {3e8, 1e8, 4, 1e11}, {1e6, 1e6, 8, 5e8}};
  const std::vector<double> loss = joint_law_loss(fit, points);
  REQUIRE(loss.size() == points.size());
  for (std::size_t i = 0; i < points.size(); ++i) {
    const JointPoint& q = points[i];
    const double expect = P::E + P::A * std::pow(q.n_once + std::pow(q.r, P::phi) * q.n_rec, -P::alpha) + P::B * std::pow(q.tokens, -P::beta);
    CHECK(loss[i] == Approx(expect).epsilon(1e-12));
  }
  CHECK(joint_law_loss(fit, {}).empty());
  law::FitResult other = fit;
  other.law = "chinchilla";
  CHECK_THROWS_AS(joint_law_loss(other, points), sweep_error);
}

TEST_CASE("compare: delta-phi of two sweeps with different phi, and the CLI around report and compare") {
  const fs::path a = synthetic_folder("compare_a", 0.6, 0.004, 21);
  const fs::path b = synthetic_folder("compare_b", 0.35, 0.004, 22);
  AnalyseOptions o;
  o.starts = 40;
  o.bootstrap = 30;
  o.bootstrap_starts = 3;
  const Comparison c = compare_phi(sweep_phi(a, o), sweep_phi(b, o));
  CHECK(c.delta == Approx(0.25).margin(0.08));
  CHECK(c.lo > 0);  // the difference is resolved
  CHECK(c.hi > c.lo);
  CHECK(c.share_above > 0.9);

  using loopscale::test::run_cli;
  const auto rep = run_cli("sweep report " + a.string() + " --starts 40 --bootstrap 20 --bootstrap-starts 2 --no-plots");
  REQUIRE(rep.rc == 0);
  CHECK(rep.out.find("phi = 0.") != std::string::npos);
  CHECK(rep.out.find("report: " + (a / "report.md").string()) != std::string::npos);
  const auto cmp = run_cli("sweep compare " + a.string() + " " + b.string() + " --starts 40 --bootstrap 20 --bootstrap-starts 2 --json");
  REQUIRE(cmp.rc == 0);
  const auto cj = nlohmann::json::parse(cmp.out);
  CHECK(cj["a"]["draws"] == 20);  // from a's analysis.json, written by the report above
  CHECK(cj["delta_phi"].get<double>() > 0.1);
  // analysis.json is a cache: one with a field of another type (it escaped as a JSON library error,
  // exit 1) or a folder in its place is passed over and the sweep analysed afresh.
  auto cached = nlohmann::json::parse(slurp(a / "analysis.json"));
  cached["joint"]["bootstrap"]["phi_lo"] = "low";
  std::ofstream(a / "analysis.json") << cached.dump();
  const auto fresh = run_cli("sweep compare " + a.string() + " " + b.string() + " --starts 40 --bootstrap 10 --bootstrap-starts 2 --json");
  INFO(fresh.out);
  REQUIRE(fresh.rc == 0);
  CHECK(nlohmann::json::parse(fresh.out)["a"]["draws"] == 10);  // analysed again, at this --bootstrap
  fs::remove(a / "analysis.json");
  fs::create_directories(a / "analysis.json");
  CHECK(run_cli("sweep compare " + a.string() + " " + b.string() + " --starts 40 --bootstrap 10 --bootstrap-starts 2 --json").rc == 0);
  fs::remove_all(a / "analysis.json");
  // Bad input: one line, exit 2.
  const auto wrong = run_cli("sweep report " + a.string() + " --preset smoke");
  CHECK(wrong.rc == 2);
  CHECK(loopscale::test::count_lines(wrong.out) == 1);
  const auto none = run_cli("sweep report /nonexistent/dir");
  CHECK(none.rc == 2);
  CHECK(loopscale::test::count_lines(none.out) == 1);
}

TEST_CASE("report: a joint fit that ends on an edge of the law's box says its value is not determined") {
  // The smoke preset's report once headlined "phi = -3.000" (the box's lower edge) as if measured.
  // Here the losses come from phi = -6: one more recurrence costs far more than the box allows.
  const fs::path dir = synthetic_folder("report_edge", -6.0, 0.002, 31);
  ReportOptions o;
  o.analyse.starts = 40;
  o.plots = false;
  const ReportFiles f = write_report(dir, o);
  REQUIRE(f.analysis.joint);
  const law::FitResult& fit = f.analysis.joint->fit;
  const auto k = static_cast<std::size_t>(law::index_of(fit.parameters, "phi"));
  CHECK(fit.value("phi") == Approx(-3.0).margin(1e-3));
  CHECK(fit.box_edge(k) == "lower");
  const std::string md = slurp(f.markdown);
  CHECK_THAT(md, Catch::Contains("**Not determined**: the joint fit ended on an edge of the law's box for "));
  CHECK_THAT(md, Catch::Contains("phi (lower edge, -3)"));
  const auto analysis = nlohmann::json::parse(slurp(f.json));
  CHECK_THAT(analysis["joint"]["fit"]["at_box_edge"].dump(), Catch::Contains("\"phi\""));
  // sweep compare reads the bootstrap draws from analysis.json, and says the difference is not one.
  const auto cmp = loopscale::test::run_cli("sweep compare " + dir.string() + " " + dir.string());
  INFO(cmp.out);
  CHECK(cmp.rc == 0);
  CHECK_THAT(cmp.out, Catch::Contains("(on the lower edge of the law's box: not determined)") &&
                          Catch::Contains("not determined: a phi on an edge of the law's box"));
  CHECK(phi_box_edge(0.459).empty());
  CHECK(phi_box_edge(3.0) == "upper");
  const auto cli = loopscale::test::run_cli("sweep report " + dir.string() + " --starts 40 --bootstrap 0 --no-plots");
  INFO(cli.out);
  CHECK(cli.rc == 0);
  // A folder where report.md goes: one line and exit 2 before the analysis (it was exit 1 at the write).
  fs::remove(dir / "report.md");
  fs::create_directory(dir / "report.md");
  const auto blocked = loopscale::test::run_cli("sweep report " + dir.string() + " --starts 40 --bootstrap 0 --no-plots");
  INFO(blocked.out);
  CHECK(blocked.rc == 2);
  CHECK(loopscale::test::count_lines(blocked.out) == 1);
  CHECK_THAT(blocked.out, Catch::Contains("report.md is a folder, not a file"));
  fs::remove(dir / "report.md");
  CHECK_THAT(cli.out, Catch::Contains("not determined: the joint fit ended on an edge of the law's box for ") &&
                          Catch::Contains("phi (lower edge, -3)"));
  // A fit inside the box names no edge (the paper's phi, above, reports none either).
  law::FitResult inside = fit;
  inside.theta[static_cast<Eigen::Index>(k)] = 0.459;
  CHECK(inside.box_edge(k).empty());
  inside.theta[static_cast<Eigen::Index>(k)] = 3.0;
  CHECK(inside.box_edge(k) == "upper");
  inside.frozen[k] = true;  // a frozen parameter is the user's value, not the fit's
  CHECK(inside.box_edge(k).empty());
}

TEST_CASE("report: a sweep too small to fit has no frontier to draw, and that is no plot problem") {
  // Two runs: no cell has the three widths around a minimum, and the joint law needs more runs.
  const fs::path dir = fs::path(LOOPSCALE_TEST_TMP) / "report_small";
  fs::remove_all(dir);
  const Plan plan = make_plan(preset("smoke"));
  claim_folder(dir, plan);
  for (std::size_t i = 0; i < 2; ++i)
    append_result(dir / "results.jsonl", result_line(plan, plan.runs[i], {{"val_loss", 3.0 - 0.1 * static_cast<double>(i)}, {"tokens", 1000.0}}));
  const ReportFiles f = write_report(dir, ReportOptions{});
  CHECK_FALSE(f.analysis.joint);
  CHECK_FALSE(fs::exists(dir / "plots" / "frontier.gp"));
  if (std::system("gnuplot --version > /dev/null 2>&1") == 0) {
    CHECK(f.plot_problem.empty());
    REQUIRE(f.plots.size() == 1);
    CHECK(f.plots[0].filename() == "isoflop.png");
  }
}
