#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/run_cli.hpp"
#include "loopscale/sweep/plan.hpp"
#include "loopscale/sweep/presets.hpp"
#include "loopscale/sweep/slurm.hpp"

using namespace loopscale;
using namespace loopscale::sweep;

TEST_CASE("paper preset: the iso-depth paper's 116-run grid, counted by the accounting") {
  const Plan plan = make_plan(preset("paper"));
  REQUIRE(plan.runs.size() == 116);
  REQUIRE(plan.runnable() == 116);
  int r1 = 0;
  for (const auto& r : plan.runs) {
    r1 += r.r == 1;
    CHECK(r.model.d_model == paper::width(r.s));
    CHECK(effective_depth(r.model) == 20);
    CHECK(r.tokens == Approx(r.budget / r.flops_per_token));
    CHECK(r.steps == static_cast<int64>(std::floor(r.budget / (r.flops_per_token * 262144))));
    // The preset is the paper grid (spec/paper_grid.hpp), whose accounting tests/account checks
    // against the published tables: the same members, counted the same way.
    const ModelSpec grid = family_member(paper::family(), r.r, paper::width(r.s));
    CHECK(r.acct.params.non_embedding == count_params(grid).non_embedding);
    CHECK(r.flops_per_token == static_cast<double>(count_flops(grid, paper::seq_len).train));
  }
  CHECK(r1 == 29);
  std::size_t points = 0;
  for (const ComputeBudget& b : paper::budgets()) points += b.widths.size();
  CHECK(plan.runs.size() == points * paper::rs.size());
  CHECK(plan.spec.vocab == paper::vocab);
}

TEST_CASE("CPU presets: every r in {1, 2, 4, 8} gets at least 3 widths per budget, smoke has at most 8 runs") {
  for (const char* name : {"cpu-mini", "cpu"}) {
    const Plan plan = make_plan(preset(name));
    CHECK(plan.runnable() == plan.runs.size());
    for (const auto& b : plan.spec.budgets) {
      for (int64 r : {1, 2, 4, 8}) {
        int widths = 0;
        for (const auto& run : plan.runs) widths += run.budget == b.flops && run.r == r;
        CHECK(widths >= 3);
      }
    }
    CHECK(plan.spec.vocab == 256);
  }
  // cpu-mini's widths move up with C, as its optimum does (docs/sweeps.md, "The CPU presets").
  const Plan mini = make_plan(preset("cpu-mini"));
  CHECK(mini.runs.size() == 36);
  std::map<double, std::set<int64>> d;
  for (const auto& run : mini.runs) d[run.budget].insert(run.model.d_model);
  CHECK(d == std::map<double, std::set<int64>>{{5e10, {4, 8, 12}}, {1e11, {8, 12, 16}}, {1.6e11, {8, 12, 16}}});
  const Plan smoke = make_plan(preset("smoke"));
  CHECK(smoke.runs.size() <= 8);
  CHECK(smoke.runnable() == smoke.runs.size());
}

TEST_CASE("spec JSON: round trip, strict keys, checks that name the problem") {
  const SweepSpec s = preset("cpu-mini");
  const SweepSpec back = nlohmann::json(s).get<SweepSpec>();
  CHECK(fingerprint(back) == fingerprint(s));
  CHECK_THROWS_WITH(nlohmann::json({{"budget", 1}}).get<SweepSpec>(), Catch::Contains("unknown field 'budget'"));
  SweepSpec bad = s;
  bad.r = {1, 3};
  CHECK_THROWS_WITH(make_plan(bad), Catch::Contains("r = 3 does not divide depth - prelude - coda = 8"));
  bad = s;
  bad.budgets[0].widths = {2, 2};
  CHECK_THROWS_WITH(make_plan(bad), Catch::Contains("lists a width twice"));
  bad = s;
  bad.budgets[0].flops = -1;
  CHECK_THROWS_WITH(make_plan(bad), Catch::Contains("must be a positive number of FLOPs"));
  CHECK_THROWS_WITH(preset("nope"), Catch::Contains("unknown preset 'nope'"));
  // A different spec has a different fingerprint.
  SweepSpec other = s;
  other.seed = 2;
  CHECK(fingerprint(other) != fingerprint(s));
}

TEST_CASE("runs that cannot be trained as planned are reported, not dropped") {
  SweepSpec s = preset("cpu-mini");
  s.budgets = {{1e7, {1, 2, 3}}, {1e12, {1, 2, 3}}};
  // A memory limit between the smallest and the largest run's memory, so some runs are above it.
  double lo = 1e300, hi = 0;
  for (const auto& r : make_plan(s).runs) lo = std::min(lo, r.memory_bytes), hi = std::max(hi, r.memory_bytes);
  REQUIRE(lo < hi);
  s.memory_limit_gib = (lo + hi) / 2 / (1 << 30);
  const Plan plan = make_plan(s);
  REQUIRE(plan.runs.size() == 24);
  int small = 0, big = 0;
  for (const auto& r : plan.runs) {
    if (r.budget == 1e7) {
      CHECK(!r.runnable());
      small += r.problem.find("below one batch") != std::string::npos;
    } else if (r.memory_bytes > s.memory_limit_gib * (1 << 30)) {
      CHECK(!r.runnable());
      big += r.problem.find("GiB limit") != std::string::npos;
    } else {
      CHECK(r.runnable());
    }
  }
  CHECK(small == 12);
  CHECK(big > 0);
  const auto j = plan_json(plan);
  CHECK(j["runs"].size() == 24);
  CHECK(j["runs"][0]["runnable"] == false);
  CHECK(j["runs"][0].contains("problem"));
}

TEST_CASE("slurm: one array task per shard, each running its shard") {
  const Plan plan = make_plan(preset("paper"));
  SlurmOptions o;
  o.shards = 8;
  o.out = "/scratch/sweep";
  o.spec_arg = "--preset paper";
  o.gpus = "1";
  const std::string s = slurm_script(plan, o);
  CHECK(s.find("#SBATCH --array=0-7") != std::string::npos);
  CHECK(s.find("#SBATCH --gres=gpu:1") != std::string::npos);
  CHECK(s.find("sweep run --preset paper --out '/scratch/sweep'") != std::string::npos);
  CHECK(s.find("--shard \"${SLURM_ARRAY_TASK_ID}/8\"") != std::string::npos);
  // A warning signal to the batch shell, forwarded to loopscale; exit 75 requeues the task.
  CHECK(s.find("#SBATCH --requeue\n") != std::string::npos);
  CHECK(s.find("#SBATCH --signal=B:USR1@300\n") != std::string::npos);
  CHECK(s.find("scontrol requeue \"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\"") != std::string::npos);
  CHECK(s.find("exec ") == std::string::npos);  // the shell stays, to requeue
  o.signal_seconds = 0;
  CHECK(slurm_script(plan, o).find("#SBATCH --signal") == std::string::npos);
  o.shards = 0;
  CHECK_THROWS_AS(slurm_script(plan, o), sweep_error);
}

TEST_CASE("cli: sweep plan --json lists every run, bad input is one line and exit 2") {
  using loopscale::test::run_cli;
  const auto ok = run_cli("sweep plan --preset smoke --json");
  REQUIRE(ok.rc == 0);
  const auto j = nlohmann::json::parse(ok.out);
  CHECK(j["runs"].size() == make_plan(preset("smoke")).runs.size());
  for (const auto& r : j["runs"])
    for (const char* k : {"id", "r", "d_model", "N_once", "N_rec", "N", "F", "D", "steps"}) CHECK(r.contains(k));
  const auto bad = run_cli("sweep plan --preset nope");
  CHECK(bad.rc == 2);
  CHECK(loopscale::test::count_lines(bad.out) == 1);
  const auto both = run_cli("sweep plan spec.json --preset smoke");
  CHECK(both.rc == 2);
  const auto shard = run_cli("sweep run --preset smoke --out /tmp/x --shard 3/2");
  CHECK(shard.rc == 2);
  CHECK(loopscale::test::count_lines(shard.out) == 1);
}
