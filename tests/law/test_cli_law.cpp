// The law subcommands of the `loopscale` program: JSON keys of the issue, and exit code 2 with one
// line for each kind of bad data.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>

#include <nlohmann/json.hpp>

#include "../cli/run_cli.hpp"

using loopscale::test::count_lines;
using loopscale::test::run_cli;

namespace {
const std::string epoch = std::string(LOOPSCALE_TEST_DATA) + "/chinchilla_epoch_svg_extracted.csv";
const std::string epoch_map = " --map N=\"Model Size\" --map C=\"Training FLOP\"";

std::string temp_file(const std::string& name, const std::string& text) {
  const std::string path = "/tmp/loopscale_test_law_" + name;
  std::ofstream(path) << text;
  return path;
}
}  // namespace

TEST_CASE("loopscale fit --json on Epoch's data", "[law][cli]") {
  const auto r = run_cli("fit --law chinchilla --data " + epoch + epoch_map + " --drop-highest 5 --starts grid --json");
  REQUIRE(r.rc == 0);
  const auto j = nlohmann::json::parse(r.out);
  for (const char* k : {"params", "objective", "r2", "rmse", "starts", "failed_starts", "polished", "seconds", "residuals"}) CHECK(j.contains(k));
  CHECK(j["starts"] == 4500);
  CHECK(j["polished"] == 8);
  CHECK(j["objective"].get<double>() <= 0.00101827402);
  CHECK(j["params"]["E"].get<double>() == Approx(1.8172).epsilon(0.005));
  CHECK(j["residuals"].size() == 240);
}

TEST_CASE("loopscale fit with bootstrap, holdout, freeze and a comparison", "[law][cli]") {
  auto r = run_cli("fit --law chinchilla --data " + epoch + epoch_map +
                   " --drop-highest 5 --starts random:20 --seed 3 --bootstrap 20 --freeze E=1.8 --holdout \"Model Size=max\" --json");
  REQUIRE(r.rc == 0);
  auto j = nlohmann::json::parse(r.out);
  REQUIRE(j.contains("ci"));
  CHECK(j["ci"]["alpha"].size() == 2);
  CHECK(j["ci"]["alpha"][0].get<double>() <= j["params"]["alpha"].get<double>());
  CHECK(j["params"]["E"].get<double>() == Approx(1.8));
  CHECK(j["holdout"]["points"].get<int>() >= 1);
  r = run_cli("fit --law chinchilla,parcae --data " + epoch + epoch_map + " --starts random:10 --json");
  CHECK(r.rc == 2);  // parcae needs N_once, N_rec, r
  CHECK(count_lines(r.out) == 1);
}

TEST_CASE("loopscale law, equivalent and optimal", "[law][cli]") {
  auto r = run_cli("law --law chinchilla --param E=1.8172 --param A=477.8 --param B=2143.4 --param alpha=0.34731 --param beta=0.36717 --data " +
                   epoch + epoch_map + " --json");
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
  expect_error(fit + epoch, "no column 'N'");
  expect_error(fit + temp_file("nonnum.csv", "N,D,loss\n1e8,1e10,3\n2e8,x,3\n"), "not a number");
  expect_error(fit + temp_file("inf.csv", "N,D,loss\n1e8,1e10,3\n2e8,inf,3\n"), "not finite");
  expect_error(fit + temp_file("loss0.csv", "N,D,loss\n1e8,1e10,3\n2e8,1e10,0\n"), "must be > 0");
  expect_error(fit + temp_file("nneg.csv", "N,D,loss\n-1e8,1e10,3\n"), "must be > 0");
  expect_error(fit + temp_file("few.csv", "N,D,loss\n1e8,1e10,3\n2e8,2e10,2.9\n3e8,3e10,2.8\n"), "free parameters");
  expect_error(fit + epoch + " --map N=\"Nope\"", "no column 'Nope'");
  expect_error("fit --law nope --data " + epoch, "no law 'nope'");
  expect_error(fit + epoch + epoch_map + " --freeze zeta=1", "no such parameter");
  expect_error("fit --law chinchilla --starts sometimes --data " + epoch + epoch_map, "--starts");
  expect_error(fit + epoch + epoch_map + " --polish -2", "--polish");
  expect_error("fit --law iso-depth --starts grid --data " + epoch + epoch_map, "");
  expect_error("law --law chinchilla --param E=1 --data " + epoch + epoch_map, "needs --param");
  expect_error("equivalent --law iso-depth --param phi=0.4 --n-once 1e8 --n-rec -1 --r 4", "--n-rec");
  expect_error("optimal --law iso-depth --param phi=0.4 --budget 1e18", "needs --param");
}
