// The law subcommands of the `loopscale` program: JSON keys of the issue, and exit code 2 with one
// line for each kind of bad data.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "../cli/run_cli.hpp"

using loopscale::test::count_lines;
using loopscale::test::run_cli;

namespace {
const std::string epoch_csv = std::string(LOOPSCALE_TEST_DATA) + "/chinchilla_epoch_svg_extracted.csv";
const std::string epoch_map = " --map N=\"Model Size\" --map C=\"Training FLOP\"";

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/loopscale_test_law_" + name;
  std::ofstream(path) << text;
  return path;
}
}  // namespace

TEST_CASE("loopscale fit --json on Epoch's data", "[law][cli]") {
  const auto r = run_cli("fit --law chinchilla --data " + epoch_csv + epoch_map + " --drop-highest 5 --starts grid --json");
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"params", "objective", "r2", "rmse", "starts", "failed_starts", "polished", "seconds", "residuals"}) CHECK(j.contains(k));
  CHECK(j["starts"] == 4500);
  CHECK(j["polished"] == 8);
  CHECK(j["objective"].get<double>() <= 0.00101827402);
  CHECK(j["params"]["E"].get<double>() == Approx(1.8172).epsilon(0.005));
  CHECK(j["residuals"].size() == 240);
  CHECK(j["at_box_edge"] == nlohmann::json::array());  // every parameter inside the box
}

// The fitter before its scout (SciPy's rules and More-Thuente's search for every start, then the
// polish) is one set of flags away, and reaches the default's optimum on Epoch's grid.
TEST_CASE("loopscale fit: the scout's and the line search's flags", "[law][cli]") {
  const std::string base = "fit --law chinchilla --data " + epoch_csv + epoch_map + " --drop-highest 5 --starts grid --json";
  const auto def = run_cli(base);
  const auto old = run_cli(base + " --scout-ftol 2.220446049250313e-09 --line-search more-thuente");
  REQUIRE(def.rc == 0);
  REQUIRE(old.rc == 0);
  const double f_def = nlohmann::json::parse(def.out)["objective"].get<double>();
  const double f_old = nlohmann::json::parse(old.out)["objective"].get<double>();
  CHECK(f_def <= 0.00101827402);
  CHECK(f_old <= 0.00101827402);
  CHECK(std::abs(f_def - f_old) <= 1e-12 * f_old);
}

TEST_CASE("loopscale fit with bootstrap, holdout, freeze and a comparison", "[law][cli]") {
  auto r = run_cli("fit --law chinchilla --data " + epoch_csv + epoch_map +
                   " --drop-highest 5 --starts random:20 --seed 3 --bootstrap 20 --freeze E=1.8 --holdout \"Model Size=max\" --json");
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.contains("ci"));
  CHECK(j["ci"]["alpha"].size() == 2);
  CHECK(j["ci"]["alpha"][0].get<double>() <= j["params"]["alpha"].get<double>());
  CHECK(j["params"]["E"].get<double>() == Approx(1.8));
  CHECK(j["holdout"]["points"].get<int>() >= 1);
  r = run_cli("fit --law chinchilla,parcae --data " + epoch_csv + epoch_map + " --starts random:10 --json");
  CHECK(r.rc == 2);  // parcae needs N_once, N_rec, r
  CHECK(count_lines(r.out) == 1);
  CHECK_THAT(r.out, Catch::Contains("has no column 'N_once' for N_once; name the file's column with --map N_once="));
}

TEST_CASE("loopscale law, equivalent and optimal", "[law][cli]") {
  auto r = run_cli("law --law chinchilla --param E=1.8172 --param A=477.8 --param B=2143.4 --param alpha=0.34731 --param beta=0.36717 --data " +
                   epoch_csv + epoch_map + " --json");
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["predictions"].size() == 245);
  CHECK(j.contains("rmse"));
  CHECK(j.contains("r2"));
  r = run_cli("equivalent --law iso-depth --param phi=0.459 --n-once 2e8 --n-rec 2.1e8 --r 4 --json");
  REQUIRE(r.rc == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["dense_equivalent_params"].get<double>() == Approx(2e8 + std::pow(4.0, 0.459) * 2.1e8));
  CHECK(j["unrolled_params"].get<double>() == Approx(2e8 + 4 * 2.1e8));
  r = run_cli("optimal --law iso-depth --param E=1.56773 --param A=28.027 --param B=915.82 --param alpha=0.19924 --param beta=0.36863 "
              "--param phi=0.459 --budget 1e18 --budget 1e19 --budget 1e20 --r 1,4 --json");
  REQUIRE(r.rc == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["allocations"].size() == 6);
  CHECK(j["exponents"].contains("1"));
  CHECK(j["exponents"].contains("4"));
}

TEST_CASE("bad data: one line and exit code 2", "[law][cli]") {
  const auto expect_error = [](const std::string& args, const std::string& text) {
    const auto r = run_cli(args);
    INFO(args << "\n-> " << r.out);
    CHECK(r.rc == 2);
    CHECK(count_lines(r.out) == 1);
    CHECK(r.out.find(text) != std::string::npos);
  };
  const std::string fit = "fit --law chinchilla --starts random:4 --data ";
  expect_error(fit + epoch_csv, "no column 'N'");
  expect_error(fit + temp_file("nonnum.csv", "N,D,loss\n1e8,1e10,3\n2e8,x,3\n"), "not a number");
  expect_error(fit + temp_file("inf.csv", "N,D,loss\n1e8,1e10,3\n2e8,inf,3\n"), "not finite");
  expect_error(fit + temp_file("loss0.csv", "N,D,loss\n1e8,1e10,3\n2e8,1e10,0\n"), "must be > 0");
  expect_error(fit + temp_file("nneg.csv", "N,D,loss\n-1e8,1e10,3\n"), "must be > 0");
  expect_error(fit + temp_file("few.csv", "N,D,loss\n1e8,1e10,3\n2e8,2e10,2.9\n3e8,3e10,2.8\n"), "free parameters");
  expect_error(fit + epoch_csv + " --map N=\"Nope\"", "no column 'Nope'");
  expect_error("fit --law nope --data " + epoch_csv, "no law 'nope'");
  expect_error(fit + epoch_csv + epoch_map + " --freeze zeta=1", "no such parameter");
  expect_error("fit --law chinchilla --starts sometimes --data " + epoch_csv + epoch_map, "--starts");
  expect_error(fit + epoch_csv + epoch_map + " --polish -2", "--polish");
  expect_error(fit + epoch_csv + epoch_map + " --scout-ftol -1", "--scout-ftol");
  expect_error(fit + epoch_csv + epoch_map + " --scout-ftol inf", "--scout-ftol must be a finite number >= 0, not inf");
  // --ftol inf and --gtol inf passed `>= 0` and stopped every start at once (a bad fit, exit 0);
  // the three stopping rules are checked the same way.
  for (const char* flag : {"--ftol", "--gtol", "--scout-ftol"})
    for (const char* v : {"inf", "nan", "-1"})
      expect_error(fit + epoch_csv + epoch_map + " " + flag + " " + v, std::string(flag) + " must be a finite number >= 0, not " + v);
  // The level was refused as "the interval level must be in (0, 1)", naming no flag.
  for (const char* v : {"nan", "1.5", "0", "1", "inf"})
    expect_error(fit + epoch_csv + epoch_map + " --bootstrap 5 --ci-level " + v, std::string("--ci-level must be in (0, 1), not ") + v);
  expect_error(fit + epoch_csv + epoch_map + " --screen-share 0", "--screen-share");
  expect_error(fit + epoch_csv + epoch_map + " --screen-share 1.5", "--screen-share");
  expect_error(fit + epoch_csv + epoch_map + " --line-search armijo", "--line-search");
  // The law's first variable the file lacks (law/runs.hpp, RunReader::get).
  expect_error("fit --law iso-depth --starts grid --data " + epoch_csv + epoch_map,
               "has no column 'N_once' for N_once; name the file's column with --map N_once=");
  expect_error("law --law chinchilla --param E=1 --data " + epoch_csv + epoch_map, "needs --param");
  expect_error("equivalent --law iso-depth --param phi=0.4 --n-once 1e8 --n-rec -1 --r 4", "--n-rec");
  expect_error("optimal --law iso-depth --param phi=0.4 --budget 1e18", "needs --param");
  // Found by following the docs as a user (4 Dec 2026): each was accepted, named the wrong flag or
  // command, or printed half a table before its error.
  expect_error(fit + epoch_csv + epoch_map + " --map Q=loss", "--map Q=loss: no law reads a variable 'Q'");
  expect_error(fit + epoch_csv + epoch_map + " --start A=-400,B=400,E=2,alpha=.3,beta=.3", "--start A must be positive");
  expect_error(fit + epoch_csv + epoch_map + " --start A=400,B=400,E=2,alpha=.3,beta=9", "--start beta=9: outside the law's box, beta in [0, 2.5]");
  expect_error(fit + epoch_csv + epoch_map + " --holdout \"N=(1e9,\"", "an interval opens with ( or [ and closes with ) or ]");
  expect_error(fit + epoch_csv + epoch_map + " --holdout \"N=1e9,2e9]\"", "an interval opens with");
  expect_error(fit + temp_file("dup.csv", "N,D,loss,loss\n1e8,1e10,3,6\n"), "column 'loss' appears twice in the header (columns 3 and 4)");
  const std::string optimal = "optimal --law iso-depth --param E=1.56773 --param A=28.027 --param B=915.82 --param alpha=0.19924 "
                              "--param beta=0.36863 --param phi=0.459 ";
  expect_error(optimal + "--budget 1e18 --budget -5", "optimal: the budget must be a positive number");
  expect_error(optimal + "--budget 1e18 --r 3", "optimal: the paper's family at d_model");
  expect_error("equivalent --law iso-depth --param phi=0.459 --d-model 2048 --r 0", "equivalent: the paper's family at d_model 2048, r 0");
  expect_error("design --law chinchilla --param A=400 --param B=400 --param E=1.7 --param alpha=0.3 --param beta=0.3 --epsilon 0.01 "
               "--n-act 1e8 --n-loop 5e7 --expert-params 3e7 --budget 1e19",
               "design: law chinchilla reads no recurrence count R");
  expect_error("account --experts 8 --top-k 0", "--top-k: must be a whole number of at least 1, not '0'");
  expect_error("account --experts 8 --expert-ff 0", "--expert-ff: must be a whole number of at least 1");
  // Found by probing every command with bad values (4 Dec 2026, afternoon): each crashed (SIGSEGV),
  // ran for minutes, exited 1 or counted silently wrong.
  const std::string moe = "design --param c=2.11 --param A=400 --param B=400 --param alpha=0.324 --param beta=1.01 --param delta=-0.1 "
                          "--param gamma=0 --param omega=-0.08 --param zeta=0 --param E_max=1e5 --param kappa1=4 --param kappa2=2.15 "
                          "--param theta=-1.53 --epsilon 0.01 --n-loop 5e7 --expert-params 2e7 --budget 1e19 ";
  // E_start = 0 is outside Clark's transform: refused as read, before any loss is predicted.
  expect_error(moe + "--param E_start=0 --n-act 1e8", "--param E_start=0 is not positive (Clark's expert transform needs 0 < E_start < E_max)");
  expect_error(moe + "--param E_start=1 --n-act inf", "must be finite");
  // R = 1e300 leaves no token of data (C / (6 N_unroll) underflows): refused before any loss is predicted.
  expect_error(moe + "--param E_start=1 --n-act 1e8 --R 1e300", "design: the budget 1e+19 FLOPs at R = 1e+300 leaves D = C / (6 N_unroll) = 0 tokens");
  expect_error(moe + "--param E_start=1 --n-act 1e8 --top-k 1.5", "design: top_k must be a whole number >= 1, not 1.5");
  expect_error("design --fit /tmp --n-act 1e8 --n-loop 5e7 --expert-params 2e7 --budget 1e19", "is a folder, not a fit file");
  expect_error(fit + epoch_csv + epoch_map + " --threads 100000", "--threads: must be a whole number from 0 (every core) to 1024");
  expect_error(optimal + "--budget 1e18 --max-width 1000000000", "optimal: --max-width must be at most 65536");
  expect_error("account --d-model 4294967296", "--d-model 4294967296 is above the limit 65536");
  expect_error("account --d-model 128 --experts 4 --moe-first-dense 100", "--experts 4: the placement");
  // Constants each finite and positive where they must be, whose predictions overflow together:
  // printed as inf (RMSE inf, R^2 -inf, rc 0), and optimal's argmin silently kept the smallest width.
  const std::string overflow = "--law chinchilla --param A=1e308 --param B=400 --param E=1.7 --param alpha=-10 --param beta=0.3 ";
  expect_error("law " + overflow + "--data " + temp_file("overflow.csv", "N,D,loss\n1e6,1e9,3.0\n1e7,1e10,2.5\n1e8,1e11,2.2\n"),
               "--param: the law predicts inf at line 2 (N=1e+06, D=1e+09); check the constants");
  expect_error("optimal " + overflow + "--budget 1e20 --budget 1e21", "--param: the law predicts inf at d_model 128, r ");
  expect_error("equivalent --law iso-depth --param phi=0.459 --d-model 4294967296 --r 4", "is above the limit 65536");
  // Found 4 Dec 2026, evening: delta inf made every objective NaN and the fitter crashed (SIGSEGV);
  // 1e-320 printed the first start as a fit with R^2 -137.
  for (const char* delta : {"inf", "nan", "1e-320", "1e-12", "-1"})
    for (const char* law : {"chinchilla", "iso-depth"})
      expect_error(std::string("fit --law ") + law + " --starts random:4 --threads 1 --data " + epoch_csv + epoch_map +
                       " --huber-delta " + delta,
                   "--huber-delta");
}

// Found by probing the law commands at the edges of their numbers (4 Dec 2026, evening): each
// printed inf, a number hundreds of digits long, an optimum with less than one token of data, or
// half a table before its error.
TEST_CASE("optimal, equivalent and design at the edges of their numbers: one line and exit 2, never inf or half a table", "[law][cli]") {
  const auto expect_error = [](const std::string& args, const std::string& text) {
    const auto r = run_cli(args);
    INFO(args << "\n-> " << r.out);
    CHECK(r.rc == 2);
    CHECK(count_lines(r.out) == 1);  // the error alone: no table header or rows before it
    CHECK(r.out.find(text) != std::string::npos);
    CHECK(r.out.find("check the constants") == std::string::npos);  // the constants are fine
  };
  const std::string optimal = "optimal --law iso-depth --param E=1.56773 --param A=28.027 --param B=915.82 --param alpha=0.19924 "
                              "--param beta=0.36863 --param phi=0.459 ";
  expect_error(optimal + "--budget 1e18 --budget 1.00000001e18 --r 1", "exponents need at least two different budgets");
  expect_error(optimal + "--budget 1e18 --budget 1.00000001e18 --r 1,2", "exponents need at least two different budgets");
  expect_error(optimal + "--budget 1e-300 --r 1", "optimal: the budget 1e-300 FLOPs buys at most ");
  expect_error(optimal + "--budget 1e-300 --r 1", "less than one sequence of 2048 tokens (--seq-len)");
  expect_error(optimal + "--budget 1e-320 --r 1", "less than one sequence of 2048 tokens");
  expect_error(optimal + "--budget 1e18 --budget 1e-300 --r 1", "the budget 1e-300 FLOPs");
  // A budget the law can still answer prints %g-style: no column of hundreds of digits.
  const auto huge = run_cli(optimal + "--budget 1e300 --budget 1e301 --r 1");
  INFO(huge.out);
  CHECK(huge.rc == 0);
  std::istringstream lines(huge.out);
  for (std::string line; std::getline(lines, line);) CHECK(line.size() < 120);

  expect_error("equivalent --n-once 1e6 --n-rec 1e6 --r 2 --param phi=1e300", "--param phi=1e+300: outside the iso-depth law's box, phi in [-3, 3]");
  expect_error("equivalent --n-once 1e6 --n-rec 1e6 --r 2 --param phi=-7", "--param phi=-7: outside the iso-depth law's box, phi in [-3, 3]");
  expect_error("equivalent --n-once 1e6 --n-rec 1e6 --r 1e300 --param phi=5", "--param phi=5: outside");
  expect_error("equivalent --n-once 1e6 --n-rec 1e6 --r 1e300 --param phi=3", "beyond the largest number (inf)");
  expect_error("equivalent --n-once 1e308 --n-rec 1e308 --r 2 --param phi=0.459", "equivalent: N_once 1e+308, N_rec 1e+308, r 2, phi 0.459");
  expect_error("equivalent --d-model 2048 --r 1e30 --param phi=0.459", "equivalent: --r must be a whole number of at most 4096 with --d-model, not 1e+30");
  expect_error("equivalent --d-model 2048 --r 4 --param phi=-7", "loopscale: error: equivalent: --param phi=-7: outside");  // named once
  const auto edge = run_cli("equivalent --n-once 1e6 --n-rec 1e6 --r 2 --param phi=3 --json");  // the box's edge is in it
  REQUIRE(edge.rc == 0);
  CHECK(nlohmann::json::parse(edge.out)["dense_equivalent_params"].get<double>() == Approx(1e6 + 8e6));

  expect_error("design --param c=1.5 --param A=20 --param B=400 --param alpha=0.2 --param beta=0.3 --param delta=0 --param gamma=0 "
               "--param omega=0 --param zeta=0 --param kappa1=0.37 --param kappa2=1.4 --param theta=0.33 --param E_start=1 --param E_max=1e5 "
               "--epsilon 0.01 --n-act 1e8 --n-loop 5e7 --expert-params 5e7 --budget 1e19 --R 1,1e15",
               "design: the budget 1e+19 FLOPs at R = 1e+15 leaves D = C / (6 N_unroll) = ");
  // Sizes so small that D overflowed printed a D column of inf and losses of 23 digits (exit 0): a
  // size below one parameter is refused; sizes whose sum overflows are beyond the largest number. A loss the law gives, however large, prints %g-style.
  const std::string design = "design --param c=0.05 --param B=51.9 --param alpha=0.074 --param beta=0.298 --param delta=-0.066 "
                             "--param gamma=-0.0095 --param omega=-0.087 --param zeta=0.001 --param E_start=1 --param E_max=69599 "
                             "--param kappa1=3.95 --param kappa2=1.41 --param theta=-1.93 --epsilon 0.02 ";
  expect_error(design + "--param A=3.26 --budget 1e18 --n-act 1e-300 --n-loop 1e-300 --expert-params 0",
               "design: need 1 <= N_loop <= N_act (parameters)");  // below one parameter: no model (D was inf)
  expect_error(design + "--param A=3.26 --budget 1e308 --n-act 1e300 --n-loop 1e7 --expert-params 1e300 --E 1,1e10",
               "design: at R = 1, E = 1e+10 the sizes are beyond the largest number (N_total inf");
  for (const char* json : {"", "--json"}) {
    const auto big = run_cli(design + "--param A=1e308 --budget 1e18 --n-act 1e7 --n-loop 4e6 --expert-params 2e6 " + json);
    INFO(big.out);
    CHECK(big.rc == 0);
    std::istringstream lines(big.out);
    for (std::string line; std::getline(lines, line);) CHECK(line.size() < 160);
  }
}

TEST_CASE("the --injection option: where the injection counts, on equivalent, optimal, fit and law", "[law][cli][injection]") {
  auto r = run_cli("equivalent --law iso-depth --param phi=0.459 --d-model 2048 --r 4 --injection excluded --json");
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["injection"] == "excluded");
  CHECK(j["params"].get<double>() == 411080704.0);
  CHECK(j["dense_equivalent_params"].get<double>() == Approx(581.8e6).epsilon(1e-3));
  CHECK(j["unrolled_params"].get<double>() == Approx(1.0067e9).epsilon(1e-3));
  r = run_cli("equivalent --law iso-depth --param phi=0.459 --d-model 2048 --r 4 --json");
  REQUIRE(r.rc == 0);
  CHECK(nlohmann::json::parse(r.out)["injection"] == "rec");
  r = run_cli("optimal --law iso-depth --param E=1.56773 --param A=28.027 --param B=915.82 --param alpha=0.19924 --param beta=0.36863 "
              "--param phi=0.459 --budget 1e19 --r 4 --injection once --json");
  REQUIRE(r.rc == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["injection"] == "once");
  CHECK(j["allocations"][0]["width_opt"].get<double>() > 0);
  // A runs file with the sweep's columns: the fit records and converts the convention.
  const std::string runs = temp_file("inject.csv",
                                     "N_once,N_rec,N_inject,injection,r,C,F,loss\n"
                                     "1.0e7,1.2e7,2e6,rec,4,1e18,6e8,3.1\n2.0e7,2.2e7,2e6,rec,4,2e18,9e8,2.9\n"
                                     "3.0e7,3.2e7,2e6,rec,2,4e18,1.2e9,2.8\n4.0e7,4.2e7,2e6,rec,2,8e18,1.5e9,2.7\n"
                                     "5.0e7,5.2e7,0,rec,1,1.6e19,1.8e9,2.6\n6.0e7,6.2e7,0,rec,1,3.2e19,2.1e9,2.5\n"
                                     "7.0e7,7.2e7,2e6,rec,8,6.4e19,2.4e9,2.45\n8.0e7,8.2e7,2e6,rec,8,1.28e20,2.7e9,2.4\n");
  const std::string pars = " --param E=1.56773 --param A=28.027 --param B=915.82 --param alpha=0.19924 --param beta=0.36863 --param phi=0.459";
  r = run_cli("law --law iso-depth" + pars + " --data " + runs + " --json");
  REQUIRE(r.rc == 0);
  const double as_rec = nlohmann::json::parse(r.out)["predictions"][0].get<double>();
  CHECK(nlohmann::json::parse(r.out)["injection"] == "rec");
  r = run_cli("law --law iso-depth" + pars + " --data " + runs + " --injection excluded --json");
  REQUIRE(r.rc == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["injection"] == "excluded");
  CHECK(j["predictions"][0].get<double>() > as_rec);  // fewer counted parameters, higher predicted loss
  r = run_cli("fit --law iso-depth --data " + runs + " --injection once --starts random:8 --freeze E=1.56773 --json");
  REQUIRE(r.rc == 0);
  CHECK(nlohmann::json::parse(r.out)["injection"] == "once");
  r = run_cli("fit --law iso-depth --data " + runs + " --injection nowhere --starts random:8");
  CHECK(r.rc == 2);
  CHECK(count_lines(r.out) == 1);
  CHECK(r.out.find("rec, once or excluded") != std::string::npos);
  r = run_cli("fit --law chinchilla --data " + epoch_csv + epoch_map + " --injection excluded --starts random:4");
  CHECK(r.rc == 2);
  CHECK(count_lines(r.out) == 1);
  CHECK(r.out.find("'injection' column") != std::string::npos);
  // A held-out range on a derived column: D = C / F in (2e10, 5e10] holds out the last two runs.
  r = run_cli("fit --law iso-depth --data " + runs + " --starts random:8 --freeze E=1.56773 --freeze phi=0.459 --holdout \"D=(2e10,5e10]\" --json");
  REQUIRE(r.rc == 0);
  CHECK(nlohmann::json::parse(r.out)["holdout"]["points"] == 2);
}

TEST_CASE("loopscale design: steps of R or E from the smallest design while each gains the fit's RMSE", "[law][cli][design]") {
  // A fit file as `loopscale fit --json` writes one (law, params, rmse); constants under which
  // experts and, less, recurrences pay.
  const std::string fit_text = R"({"law": "looped-moe", "rmse": 0.02, "params": {
      "c": 1.6, "A": 300, "B": 800, "alpha": 0.30, "beta": 0.28, "delta": -0.2, "gamma": 0.01, "omega": -0.05, "zeta": 0.0,
      "E_start": 2, "E_max": 300, "kappa1": 0.3682, "kappa2": 1.4037, "theta": 0.3286}})";
  const std::string fit = temp_file("design_fit.json", fit_text);
  const std::string space = " --n-act 6e8 --n-loop 2e8 --expert-params 4e8 --budget 1e23";
  auto r = run_cli("design --fit " + fit + space + " --json");
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  CHECK(j["epsilon"] == 0.02);
  CHECK(j["table"].size() == 30);
  const auto& chosen = j["chosen"];
  double r_next = INFINITY, e_next = INFINITY;  // the next candidates above the chosen R and E
  for (const auto& p : j["table"]) {
    if (p["R"].get<double>() > chosen["R"].get<double>()) r_next = std::min(r_next, p["R"].get<double>());
    if (p["E"].get<double>() > chosen["E"].get<double>()) e_next = std::min(e_next, p["E"].get<double>());
  }
  for (const auto& p : j["table"]) {  // where the steps stopped: no next R or E gains epsilon
    const bool next_r = p["E"] == chosen["E"] && p["R"].get<double>() == r_next;
    const bool next_e = p["R"] == chosen["R"] && p["E"].get<double>() == e_next;
    if ((next_r || next_e) && p["fits_memory"] == true && p["fits_compute"] == true) CHECK(p["loss"].get<double>() > chosen["loss"].get<double>() - 0.02);
  }
  // The rule's steps, not the smallest design within epsilon of the optimum: here E 4 -> 8 gains
  // 0.00358 < 0.0037 and the steps stop at E 4, though E 8 is within 0.0037 of the optimum (E 16).
  const std::string stepped = "design --param c=1.2 --param A=35 --param B=410 --param alpha=.21 --param beta=.26 --param delta=-.15 "
                              "--param gamma=-.01 --param omega=-.04 --param zeta=.006 --param E_start=1.5 --param E_max=400 "
                              "--param kappa1=.3682 --param kappa2=1.4037 --param theta=.3286 --epsilon 0.0037 --n-act 6e8 --n-loop 2e8 "
                              "--expert-params 3e8 --budget 1e22 --json";
  r = run_cli(stepped);
  REQUIRE(r.rc == 0);
  const auto step_j = nlohmann::json::parse(r.out);
  CHECK(step_j["chosen"]["R"] == 1);
  CHECK(step_j["chosen"]["E"] == 4);
  CHECK(step_j["optimum"]["E"] == 16);
  CHECK(step_j["near"].front()["E"] == 8);
  // Epsilon 0 takes the optimum itself; a memory limit removes the large E.
  r = run_cli("design --fit " + fit + space + " --epsilon 0 --json");
  REQUIRE(r.rc == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["chosen"] == j["optimum"]);
  r = run_cli("design --fit " + fit + space + " --epsilon 0 --memory-gib 2 --bytes-per-weight 2 --json");
  REQUIRE(r.rc == 0);
  j = nlohmann::json::parse(r.out);
  CHECK(j["chosen"]["N_total"].get<double>() * 2 <= 2.0 * 1024 * 1024 * 1024);
  r = run_cli("design --fit " + fit + space);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("<- chosen") != std::string::npos);
  CHECK(r.out.find("not determined") == std::string::npos);
  // A fit that left parameters on its box's edge: the design says it rests on them, in both forms.
  std::string edged = fit_text;
  edged.insert(edged.rfind('}'), R"(, "at_box_edge": ["alpha", "zeta"])");
  const std::string edge_fit = temp_file("design_fit_edge.json", edged);
  r = run_cli("design --fit " + edge_fit + space);
  REQUIRE(r.rc == 0);
  CHECK(r.out.find("not determined: alpha, zeta of the fit ended on an edge of the law's box") != std::string::npos);
  r = run_cli("design --fit " + edge_fit + space + " --json");
  REQUIRE(r.rc == 0);
  CHECK(nlohmann::json::parse(r.out)["fit_at_box_edge"] == nlohmann::json({"alpha", "zeta"}));
  CHECK(nlohmann::json::parse(run_cli("design --fit " + fit + space + " --json").out)["fit_at_box_edge"].empty());
  // Bad input: one line, exit 2.
  const auto expect_error = [](const std::string& args, const std::string& text) {
    const auto e = run_cli(args);
    INFO(args << "\n-> " << e.out);
    CHECK(e.rc == 2);
    CHECK(count_lines(e.out) == 1);
    CHECK(e.out.find(text) != std::string::npos);
  };
  expect_error("design" + space, "needs --fit");
  expect_error("design --param c=1" + space, "--epsilon");
  expect_error("design --fit /nonexistent.json" + space, "cannot open");
  // The fit's RMSE is epsilon unless --epsilon is given: a negative one was "epsilon must be a finite
  // number >= 0", naming neither the file nor the field. 0 (an exact fit to synthetic points) is accepted.
  std::string negative = fit_text;
  negative.replace(negative.find("0.02"), 4, "-0.02");
  const std::string negative_fit = temp_file("design_fit_negative.json", negative);
  expect_error("design --fit " + negative_fit + space, "design: --fit " + negative_fit + ": its rmse -0.02 is not a finite number >= 0 (write the fit with `loopscale fit --json`, or give --epsilon)");
  CHECK(run_cli("design --fit " + negative_fit + space + " --epsilon 0.01").rc == 0);
  std::string exact = fit_text;
  exact.replace(exact.find("0.02"), 4, "0");
  r = run_cli("design --fit " + temp_file("design_fit_exact.json", exact) + space + " --json");
  REQUIRE(r.rc == 0);
  CHECK(nlohmann::json::parse(r.out)["epsilon"] == 0.0);
  expect_error("design --fit " + temp_file("design_bad.json", "{\"law\": 1}") + space, "lacks law, params or rmse");
  std::string bad_edge = fit_text;
  bad_edge.insert(bad_edge.rfind('}'), R"(, "at_box_edge": "alpha")");
  expect_error("design --fit " + temp_file("design_bad_edge.json", bad_edge) + space, "at_box_edge is not a list of names");
  expect_error("design --fit " + fit + space + " --memory-gib 0.5", "no (R, E) fits");
  expect_error("design --fit " + fit + " --n-act 6e8 --n-loop 7e8 --expert-params 4e8 --budget 1e23", "N_loop <= N_act");
  expect_error("design --fit " + fit + space + " --E 1,0.5", "every E must be a whole number >= top_k, not 0.5");
  expect_error("design --fit " + fit + space + " --R 1,2.5", "every R must be a whole number >= 1, not 2.5");
  expect_error("design --fit " + fit + space + " --law iso-depth", "the fit in");
}
