#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "cli/run_cli.hpp"
#include "loopscale/sweep/engine.hpp"
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
    // r = 1 as the paper's code builds it, 0 + 20 + 0; the looped members as the grid's.
    if (r.r == 1) {
      CHECK(r.model.prelude.empty());
      CHECK(r.model.recur.block.size() == 20);
      CHECK(r.model.coda.empty());
    } else {  // the sweep names the head dimension the grid derives: compare the layouts
      CHECK(r.model.prelude.size() == grid.prelude.size());
      CHECK(r.model.recur.block.size() == grid.recur.block.size());
      CHECK(r.model.coda.size() == grid.coda.size());
      CHECK(r.model.recur.inject == grid.recur.inject);
    }
    // The tokenizer's 32,001 classes in the softmax, the tables' 32,064 rows in the counts.
    CHECK(r.model.vocab == paper::tokenizer_vocab);
    CHECK(padded_vocab(r.model) == paper::vocab);
    CHECK(r.acct.params.embedding == count_params(grid).embedding);
  }
  CHECK(r1 == 29);
  std::size_t points = 0;
  for (const ComputeBudget& b : paper::budgets()) points += b.widths.size();
  CHECK(plan.runs.size() == points * paper::rs.size());
  CHECK(plan.spec.vocab == paper::tokenizer_vocab);
}

TEST_CASE("paper-truncated preset: the paper's 102-run truncated-BPTT grid, trained as the paper preset") {
  const Plan plan = make_plan(preset("paper-truncated"));
  const SweepSpec full = preset("paper");
  REQUIRE(plan.runs.size() == 102);
  REQUIRE(plan.runnable() == 102);
  std::map<int64, int> per_r;
  for (const auto& r : plan.runs) {
    INFO(r.id);
    ++per_r[r.r];
    CHECK(r.model.d_model == paper::width(r.s));
    CHECK(effective_depth(r.model) == 20);
    CHECK(bptt_recurrences(r.model.recur) == (r.r + 1) / 2);  // the paper's BPTT_K: 1, 2, 4
    const ModelSpec grid = family_member(paper::family(), r.r, paper::width(r.s));
    CHECK(r.acct.params.non_embedding == count_params(grid).non_embedding);  // truncation moves FLOPs, not parameters
    CHECK(r.flops_per_token < static_cast<double>(count_flops(grid, paper::seq_len).train));
  }
  CHECK(per_r == std::map<int64, int>{{2, 34}, {4, 34}, {8, 34}});
  // Everything else as the paper preset: recipe, rates, batch, data, validation.
  CHECK(plan.spec.train == full.train);
  CHECK((plan.spec.batch_tokens == full.batch_tokens && plan.spec.micro_batch_tokens == full.micro_batch_tokens));
  CHECK((plan.spec.vocab == full.vocab && plan.spec.seq_len == full.seq_len && plan.spec.data == full.data));
}

TEST_CASE("paper preset: each run trains at the paper's scaling-run rates, corrected by its tokens (lr_transfer hyperp)") {
  const Plan plan = make_plan(preset("paper"));
  double lowest = 1, highest = 0;
  for (const auto& run : plan.runs) {
    const train::TrainConfig c = train_config(plan.spec, run, "/nonexistent/run", "/nonexistent/data");
    INFO(run.id);
    REQUIRE_NOTHROW(train::detail::check_config(c));
    REQUIRE(c.lr_transfer == "hyperp");
    // The base rates of the paper's scaling runs (the multipliers are of the matrices' rate).
    CHECK(c.lr == 0.014);
    CHECK(c.lr * c.lr_embedding == Approx(0.3));
    CHECK(c.lr * c.lr_lm_head == Approx(0.004));
    CHECK(c.lr * c.lr_norm == Approx(0.005));
    CHECK(c.lr * c.lr_lanes == Approx(0.01));
    CHECK(c.lr_width_ref == 640);
    const train::LrScales s = train::lr_scales_of(c);
    CHECK(s.batch == 1);  // 2^18 tokens a step, the paper's reference batch
    CHECK(s.tokens == std::floor(run.tokens));
    CHECK(s.reference_tokens == train::hyperp_reference_tokens(run.model));
    lowest = std::min(lowest, c.lr * s.matrix());
    highest = std::max(highest, c.lr * s.matrix());
  }
  // Over the grid the matrices' rate spans about a factor of four: lowest for the model that sees
  // the most tokens against its reference's (the largest budget's narrowest, r = 2), highest for
  // the fewest (the smallest budget's widest, r = 8).
  CHECK(lowest == Approx(0.0062).epsilon(0.02));
  CHECK(highest == Approx(0.0244).epsilon(0.02));
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
  // The r = 1 layout: written and read back when flat, another fingerprint, a bad name refused.
  SweepSpec flat = s;
  flat.r1_layout = "flat";
  const nlohmann::json fj = flat;
  CHECK(fj.at("r1_layout") == "flat");
  CHECK(fj.get<SweepSpec>().r1_layout == "flat");
  CHECK(fingerprint(fj.get<SweepSpec>()) == fingerprint(flat));
  CHECK(fingerprint(flat) != fingerprint(s));
  for (const auto& run : make_plan(flat).runs)
    if (run.r == 1) CHECK(run.model.recur.block.size() == s.depth);
  flat.r1_layout = "flatter";
  CHECK_THROWS_WITH(make_plan(flat), Catch::Contains("r1_layout must be split or flat, not 'flatter'"));
  flat = preset("mixed-moe");
  flat.r1_layout = "flat";
  CHECK_THROWS_WITH(make_plan(flat), Catch::Contains("r1_layout flat is for dense sweeps"));
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

namespace {

// The script's lines in order.
std::vector<std::string> lines_of(const std::string& s) {
  std::vector<std::string> v;
  std::size_t from = 0;
  for (std::size_t nl; (nl = s.find('\n', from)) != std::string::npos; from = nl + 1) v.push_back(s.substr(from, nl - from));
  return v;
}

std::size_t line_index(const std::vector<std::string>& lines, const std::string& line) {
  return static_cast<std::size_t>(std::find(lines.begin(), lines.end(), line) - lines.begin());
}

}  // namespace

TEST_CASE("slurm: partition, account, QOS, GPUs, throttle, modules, setup lines, log and extra options in the script") {
  const Plan plan = make_plan(preset("paper"));
  SlurmOptions o;
  o.shards = 8;
  o.throttle = 3;
  o.out = "/scratch/sweep";
  o.spec_arg = "--preset paper";
  o.time = "2-00:00:00";
  o.partition = "gpu";
  o.account = "proj-42";
  o.qos = "high";
  o.gpus = "a100:2";
  o.cpus = 16;
  o.mem = "120G";
  o.job_name = "paper.sweep";
  o.log = "/scratch/logs/%x-%A_%a.log";
  o.modules = {"gcc/12.2.0", "cuda/12.1"};
  o.setup = {"source /opt/venv/bin/activate", "export LOOPSCALE_X=1"};
  o.sbatch = {"--constraint=a100", "--mail-type=FAIL"};
  const std::string s = slurm_script(plan, o);
  const auto lines = lines_of(s);
  for (const char* want : {"#SBATCH --job-name=paper.sweep", "#SBATCH --array=0-7%3", "#SBATCH --time=2-00:00:00", "#SBATCH --partition=gpu",
                           "#SBATCH --account=proj-42", "#SBATCH --qos=high", "#SBATCH --gres=gpu:a100:2", "#SBATCH --cpus-per-task=16",
                           "#SBATCH --mem=120G", "#SBATCH --output=/scratch/logs/%x-%A_%a.log", "#SBATCH --open-mode=append",
                           "#SBATCH --constraint=a100", "#SBATCH --mail-type=FAIL", "module load gcc/12.2.0", "module load cuda/12.1",
                           "source /opt/venv/bin/activate", "export LOOPSCALE_X=1", "set -u"}) {
    INFO(want);
    CHECK(line_index(lines, want) < lines.size());
  }
  // sbatch reads #SBATCH lines only up to the first command: all of them come before it.
  std::size_t first_command = 0;
  while (first_command < lines.size() && (lines[first_command].empty() || lines[first_command][0] == '#')) ++first_command;
  for (std::size_t i = first_command; i < lines.size(); ++i) CHECK(lines[i].rfind("#SBATCH", 0) != 0);
  // The environment is set up (modules first, then the lines in order) before loopscale runs,
  // and -u only after it: module scripts read unset variables.
  const std::size_t run = static_cast<std::size_t>(std::find_if(lines.begin(), lines.end(), [](const std::string& l) {
                                                      return l.find("sweep run") != std::string::npos && l.rfind("#", 0) != 0;
                                                    }) -
                                                    lines.begin());
  REQUIRE(run < lines.size());
  CHECK(line_index(lines, "set -eo pipefail") < line_index(lines, "module load gcc/12.2.0"));
  CHECK(line_index(lines, "module load gcc/12.2.0") < line_index(lines, "module load cuda/12.1"));
  CHECK(line_index(lines, "module load cuda/12.1") < line_index(lines, "source /opt/venv/bin/activate"));
  CHECK(line_index(lines, "export LOOPSCALE_X=1") < line_index(lines, "set -u"));
  CHECK(line_index(lines, "set -u") < run);

  o.gpu_request = "gpus-per-task";
  CHECK(slurm_script(plan, o).find("#SBATCH --gpus-per-task=a100:2\n") != std::string::npos);
  CHECK(slurm_script(plan, o).find("--gres") == std::string::npos);
  // Runs on several ranks: one task per rank, started by the sweep through srun.
  CHECK(slurm_script(plan, o).find("--ntasks") == std::string::npos);
  CHECK(slurm_script(plan, o).find("--ranks") == std::string::npos);
  o.ranks = 4;
  const std::string rs = slurm_script(plan, o);
  CHECK(rs.find("#SBATCH --ntasks=4\n") != std::string::npos);
  CHECK(rs.find(fmt::format(" --ranks 4 --launcher 'srun --mpi=pmix' --threads {} &\n", o.cpus)) != std::string::npos);
  o.ranks = 1;
  // Defaults: no throttle, no account or QOS, the log in the sweep folder with a '%' of the
  // folder's name doubled (Slurm would read "%x" as a pattern), the spec's name in the job name.
  SlurmOptions d;
  d.out = "/scratch/50%x/";
  d.spec_arg = "--preset smoke";
  const std::string ds = slurm_script(make_plan(preset("smoke")), d);
  CHECK(ds.find("#SBATCH --array=0-3\n") != std::string::npos);
  CHECK(ds.find("#SBATCH --output=/scratch/50%%x/slurm-%A_%a.log\n") != std::string::npos);
  CHECK(ds.find("#SBATCH --job-name=loopscale-smoke\n") != std::string::npos);
  CHECK(ds.find("--account") == std::string::npos);
  CHECK(ds.find("--qos") == std::string::npos);
  CHECK(ds.find("module load") == std::string::npos);
  CHECK(ds.find("--gres") == std::string::npos);
  CHECK(ds.find("--device") == std::string::npos);
  CHECK(slurm_log(d) == "/scratch/50%%x/slurm-%A_%a.log");
  // A CUDA sweep: one GPU per task (per rank), sweep run --device cuda; --gpus still decides.
  SlurmOptions g = d;
  g.device = "cuda";
  const std::string gs = slurm_script(make_plan(preset("smoke")), g);
  CHECK(gs.find("#SBATCH --gres=gpu:1\n") != std::string::npos);
  CHECK(gs.find("/4\" --device cuda &\n") != std::string::npos);
  g.ranks = 2;
  CHECK(slurm_script(make_plan(preset("smoke")), g).find("#SBATCH --gres=gpu:2\n") != std::string::npos);
  g.gpu_request = "gpus-per-task";
  CHECK(slurm_script(make_plan(preset("smoke")), g).find("#SBATCH --gpus-per-task=1\n") != std::string::npos);
  g.gpus = "h100:1";
  CHECK(slurm_script(make_plan(preset("smoke")), g).find("#SBATCH --gpus-per-task=h100:1\n") != std::string::npos);
  g.device = "gpu";
  CHECK_THROWS_WITH(slurm_script(make_plan(preset("smoke")), g), Catch::Contains("slurm: --device 'gpu' must be host or cuda"));
  // A spec's name goes into a comment and the job name: a line break in it must not start a command.
  SweepSpec two_lines = preset("smoke");
  two_lines.name = "two\nlines";
  const std::string ns = slurm_script(make_plan(two_lines), d);
  CHECK(ns.find("# loopscale sweep 'two\\nlines' (fingerprint") != std::string::npos);
  CHECK(ns.find("#SBATCH --job-name=loopscale-two_lines\n") != std::string::npos);
  CHECK(ns.find("\nlines") == std::string::npos);
}

TEST_CASE("slurm: an option Slurm would refuse, or one that would break the script, is one error naming it") {
  const Plan plan = make_plan(preset("smoke"));
  SlurmOptions base;
  base.out = "/scratch/sweep";
  base.spec_arg = "--preset smoke";
  REQUIRE_NOTHROW(slurm_script(plan, base));
  struct Bad {
    const char* what;
    std::function<void(SlurmOptions&)> set;
    const char* names;
  };
  const std::vector<Bad> bad = {
      {"time 25h", [](SlurmOptions& o) { o.time = "25h"; }, "--time '25h'"},
      {"time with four fields", [](SlurmOptions& o) { o.time = "1:2:3:4"; }, "--time"},
      {"time with days and four fields", [](SlurmOptions& o) { o.time = "1-2:3:4:5"; }, "--time"},
      {"time without hours after the days", [](SlurmOptions& o) { o.time = "1-"; }, "--time"},
      {"empty time", [](SlurmOptions& o) { o.time = ""; }, "--time"},
      // Slurm reads zero as no limit; UNLIMITED says so.
      {"time zero", [](SlurmOptions& o) { o.time = std::string(1, '0'); }, "--time '0' is no time at all"},
      {"time zero with days", [](SlurmOptions& o) { o.time = "0-00:00"; }, "--time '0-00:00' is no time at all"},
      {"warning at the start", [](SlurmOptions& o) { o.time = "1:30"; }, "--signal-seconds 300 is not less than --time '1:30' (90 s)"},
      {"mem 64GB", [](SlurmOptions& o) { o.mem = "64GB"; }, "--mem '64GB'"},
      // One-character values built as strings: GCC 12 warns (-Wrestrict, a false positive) about
      // assigning a one-character literal after inlining.
      {"mem G alone", [](SlurmOptions& o) { o.mem = std::string(1, 'G'); }, "--mem"},
      {"partition with a space", [](SlurmOptions& o) { o.partition = "a b"; }, "--partition 'a b'"},
      {"account with a semicolon", [](SlurmOptions& o) { o.account = "x;rm"; }, "--account"},
      {"qos with a line break", [](SlurmOptions& o) { o.qos = "high\n#SBATCH --x"; }, "--qos"},
      {"no GPUs", [](SlurmOptions& o) { o.gpus = std::string(1, '0'); }, "--gpus '0'"},
      {"GPUs in words", [](SlurmOptions& o) { o.gpus = "two"; }, "--gpus"},
      {"GPU type without a count", [](SlurmOptions& o) { o.gpus = "a100:"; }, "--gpus"},
      {"GPU count without a type", [](SlurmOptions& o) { o.gpus = ":2"; }, "--gpus"},
      {"unknown GPU request", [](SlurmOptions& o) { o.gpu_request = "gpu"; }, "--gpu-request 'gpu'"},
      {"negative throttle", [](SlurmOptions& o) { o.throttle = -1; }, "--throttle -1"},
      {"no CPUs", [](SlurmOptions& o) { o.cpus = 0; }, "--cpus 0"},
      {"no ranks", [](SlurmOptions& o) { o.ranks = 0; }, "--ranks 0"},
      {"launcher with a quote", [](SlurmOptions& o) {
         o.ranks = 2;
         o.launcher = "srun '--x'";
       }, "--launcher"},
      {"signal beyond 16 bits", [](SlurmOptions& o) { o.signal_seconds = 70000; }, "--signal-seconds 70000"},
      {"negative signal", [](SlurmOptions& o) { o.signal_seconds = -1; }, "--signal-seconds"},
      {"log with a space", [](SlurmOptions& o) { o.log = "/a b/x.log"; }, "--log"},
      {"folder with a space and no --log", [](SlurmOptions& o) { o.out = "/scratch/my sweep"; }, "--log"},
      {"folder with a line break", [](SlurmOptions& o) {
         o.out = "/scratch/x\nrm";
         o.log = "/logs/x.log";
       }, "--out"},
      {"program with a line break", [](SlurmOptions& o) { o.program = "loopscale\nrm"; }, "--program"},
      {"module with a space", [](SlurmOptions& o) { o.modules = {"gcc 12"}; }, "--module 'gcc 12'"},
      {"setup with a line break", [](SlurmOptions& o) { o.setup = {"a\nb"}; }, "--setup"},
      {"sbatch option without dashes", [](SlurmOptions& o) { o.sbatch = {"constraint=a100"}; }, "--sbatch 'constraint=a100'"},
      {"sbatch option with a space", [](SlurmOptions& o) { o.sbatch = {"--constraint a100"}; }, "--sbatch"},
      {"job name with a space", [](SlurmOptions& o) { o.job_name = "my sweep"; }, "--job-name"},
      {"no shards", [](SlurmOptions& o) { o.shards = 0; }, "--shards"},
      // Slurm's default MaxArraySize (slurm.conf) is 1001: array indices 0 to 1000.
      {"more shards than a Slurm array holds", [](SlurmOptions& o) { o.shards = 1002; }, "--shards 1002 must be from 1 to 1001"},
      {"more shards than a raised MaxArraySize", [](SlurmOptions& o) { o.max_array_size = 5000; o.shards = 5001; }, "--shards 5001 must be from 1 to 5000"},
      {"a MaxArraySize Slurm cannot have", [](SlurmOptions& o) { o.max_array_size = 0; }, "--max-array-size 0 must be from 1 to 4000001"},
      {"shards past any array", [](SlurmOptions& o) { o.shards = 100000000000; }, "--shards 100000000000"},
      {"no program", [](SlurmOptions& o) { o.program = ""; }, "--program must name the loopscale program"},
      {"a blank program", [](SlurmOptions& o) { o.program = "  "; }, "--program"},
  };
  for (const Bad& b : bad) {
    INFO(b.what);
    SlurmOptions o = base;
    b.set(o);
    try {
      slurm_script(plan, o);
      FAIL("no error");
    } catch (const sweep_error& e) {
      const std::string msg = e.what();
      INFO(msg);
      CHECK(msg.find(b.names) != std::string::npos);
      CHECK(msg.find('\n') == std::string::npos);
    }
  }
  // What Slurm accepts passes, a limit longer than the warning (1:30 is 90 s).
  for (const char* t : {"90", "1:30", "12:00:00", "2-12", "2-12:30", "2-12:30:00", "UNLIMITED", "INFINITE"}) {
    SlurmOptions o = base;
    o.time = t;
    o.signal_seconds = 60;
    INFO(t);
    CHECK_NOTHROW(slurm_script(plan, o));
  }
  for (const char* m : {"0", "4096", "64G", "512m", "1T"}) {
    SlurmOptions o = base;
    o.mem = m;
    INFO(m);
    CHECK_NOTHROW(slurm_script(plan, o));
  }
  for (const char* g : {"1", "8", "a100:2", "nvidia_h100_80gb:1"}) {
    SlurmOptions o = base;
    o.gpus = g;
    INFO(g);
    CHECK_NOTHROW(slurm_script(plan, o));
  }
  SlurmOptions widest = base;  // the largest array Slurm takes by default, and more shards than runs (tasks that run nothing)
  widest.shards = 1001;
  REQUIRE(plan.runs.size() < 1001);
  CHECK(slurm_script(plan, widest).find("#SBATCH --array=0-1000\n") != std::string::npos);
  widest.max_array_size = 5000;  // a site that raised MaxArraySize
  widest.shards = 5000;
  CHECK(slurm_script(plan, widest).find("#SBATCH --array=0-4999\n") != std::string::npos);
  SlurmOptions spaced = base;  // a folder with a space is fine once the log is elsewhere
  spaced.out = "/scratch/my sweep";
  spaced.log = "/scratch/logs/%A_%a.log";
  CHECK(slurm_script(plan, spaced).find("--out '/scratch/my sweep'") != std::string::npos);
}

TEST_CASE("cli: sweep slurm --dry-run creates nothing, --script writes the file and the log folder, bad options exit 2") {
  using loopscale::test::run_cli;
  const std::filesystem::path dir = std::filesystem::path(LOOPSCALE_TEST_TMP) / "slurm_cli";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string out = (dir / "sweep").string();

  const auto dry = run_cli("sweep slurm --preset smoke --out " + out + " --shards 2 --throttle 1 --time 10 --mem 1G --cpus 1 --module gcc/12 "
                           "--module cuda/12 --setup 'export A=1' --sbatch=--constraint=x --dry-run");
  INFO(dry.out);
  REQUIRE(dry.rc == 0);
  CHECK(dry.out.rfind("#!/bin/bash\n", 0) == 0);
  for (const char* want : {"#SBATCH --array=0-1%1\n", "#SBATCH --time=10\n", "#SBATCH --mem=1G\n", "module load gcc/12\nmodule load cuda/12\n",
                           "export A=1\n", "#SBATCH --constraint=x\n", "--shard \"${SLURM_ARRAY_TASK_ID}/2\""})
    CHECK(dry.out.find(want) != std::string::npos);
  CHECK(!std::filesystem::exists(out));

  const std::filesystem::path script = dir / "job.sbatch";
  const auto wrote = run_cli("sweep slurm --preset smoke --out " + out + " --log " + (dir / "logs" / "t-%A_%a.log").string() +
                             " --script " + script.string());
  INFO(wrote.out);
  REQUIRE(wrote.rc == 0);
  CHECK(wrote.out.find("sbatch") != std::string::npos);
  CHECK(loopscale::test::count_lines(wrote.out) == 1);
  REQUIRE(std::filesystem::exists(script));
  std::ifstream in(script);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK(text.find("#SBATCH --output=" + (dir / "logs" / "t-%A_%a.log").string() + "\n") != std::string::npos);
  CHECK(std::filesystem::is_directory(out));
  CHECK(std::filesystem::is_directory(dir / "logs"));  // Slurm opens the log before the script runs

  for (const std::string& args : {std::string("--time 25h"), std::string("--mem 64GB"), std::string("--gpus 0"), std::string("--partition 'a b'"),
                                  std::string("--throttle -2"), std::string("--gpu-request x"), std::string("--sbatch=constraint"),
                                  std::string("--signal-seconds 99999"), std::string("--script /nonexistent/dir/x.sh"),
                                  std::string("--program ''"), std::string("--shards 100000000000"), std::string("--shards 1002"),
                                  std::string("--script ") + dir.string()}) {  // these two exited 1 after the work (4 Dec 2026)
    const auto r = run_cli("sweep slurm --preset smoke --out " + out + " --dry-run " + args);
    INFO(args << ": " << r.out);
    CHECK(r.rc == 2);
    CHECK(loopscale::test::count_lines(r.out) == 1);
  }

  // A repeatable option takes one value each time: the spec file after it stays the spec.
  const std::filesystem::path spec = dir / "spec.json";
  std::ofstream(spec) << R"({"name": "cli spec", "depth": 4, "prelude": 1, "coda": 1, "r": [1], "budgets": [{"C": 1e10, "s": [1]}]})";
  const auto pos = run_cli("sweep slurm --module gcc/12 " + spec.string() + " --module cuda/12 --out " + out + " --dry-run");
  INFO(pos.out);
  REQUIRE(pos.rc == 0);
  CHECK(pos.out.find("module load gcc/12\nmodule load cuda/12\n") != std::string::npos);
  CHECK(pos.out.find("#SBATCH --job-name=loopscale-cli_spec\n") != std::string::npos);
  CHECK(pos.out.find("sweep run '" + spec.string() + "' --out") != std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST_CASE("cli: sweep plan --json lists every run, bad input is one line and exit 2") {
  using loopscale::test::run_cli;
  const auto ok = run_cli("sweep plan --preset smoke --json");
  REQUIRE(ok.rc == 0);
  const auto j = nlohmann::json::parse(ok.out);
  CHECK(j["runs"].size() == make_plan(preset("smoke")).runs.size());
  for (const auto& r : j["runs"])
    for (const char* k : {"id", "r", "d_model", "N_once", "N_rec", "N", "F", "D", "steps"}) CHECK(r.contains(k));
  // The table: the paper preset's runs each with the matrices' rate lr_transfer gives them, and
  // its flat baseline in the header; no lr column where the rates are not corrected.
  const auto paper = run_cli("sweep plan --preset paper");
  REQUIRE(paper.rc == 0);
  CHECK_THAT(paper.out, Catch::Contains("(r = 1: 0 + 20 + 0)") && Catch::Contains("mem GiB        lr\n") &&
                            Catch::Contains(" 0.006164\n") && Catch::Contains(" 0.02438\n"));
  const auto smoke = run_cli("sweep plan --preset smoke");
  REQUIRE(smoke.rc == 0);
  CHECK_THAT(smoke.out, Catch::Contains("mem GiB\n") && !Catch::Contains("(r = 1: 0 +"));
  // With hyperp, a run the plan will not train (a budget under one batch, here under one token) is
  // listed as NOT RUN with the others planned, not a refusal of the whole spec.
  nlohmann::json tiny = preset("smoke");
  tiny["train"]["recipe"] = "paper";
  tiny["train"]["lr_transfer"] = "hyperp";
  tiny["train"].erase("lr");
  tiny["train"].erase("warmup");
  tiny["budgets"].push_back({{"C", 1e4}, {"s", {1}}});
  const std::string tiny_file = (std::filesystem::temp_directory_path() / "loopscale_plan_hyperp_tiny.json").string();
  std::ofstream(tiny_file) << tiny.dump();
  const auto listed = run_cli("sweep plan " + tiny_file);
  CHECK(listed.rc == 0);
  CHECK_THAT(listed.out, Catch::Contains("NOT RUN") && Catch::Contains(" lr\n"));
  std::filesystem::remove(tiny_file);
  const auto bad = run_cli("sweep plan --preset nope");
  CHECK(bad.rc == 2);
  CHECK(loopscale::test::count_lines(bad.out) == 1);
  const auto both = run_cli("sweep plan spec.json --preset smoke");
  CHECK(both.rc == 2);
  // A typo inside "train" is refused by plan as by run, naming the key.
  nlohmann::json typo = preset("smoke");
  typo["train"]["lr_warmup"] = 0.1;
  const std::string typo_file = (std::filesystem::temp_directory_path() / "loopscale_plan_typo.json").string();
  std::ofstream(typo_file) << typo.dump();
  for (const char* cmd : {"sweep plan ", "sweep run --out /tmp/loopscale_plan_typo_out "}) {
    const auto t = run_cli(std::string(cmd) + typo_file);
    CHECK(t.rc == 2);
    CHECK(t.out == "loopscale: error: sweep spec: train: config: unknown key 'lr_warmup'\n");
  }
  // A value the run would refuse is refused by plan too, before `run` writes anything (a negative lr
  // once passed `plan` and failed the first run of `sweep run`, leaving sweep.json behind).
  typo["train"].erase("lr_warmup");
  typo["train"]["lr"] = -1;
  std::ofstream(typo_file) << typo.dump();
  std::filesystem::remove_all("/tmp/loopscale_plan_lr_out");
  for (const char* cmd : {"sweep plan ", "sweep run --out /tmp/loopscale_plan_lr_out "}) {
    const auto t = run_cli(std::string(cmd) + typo_file);
    INFO(t.out);
    CHECK(t.rc == 2);
    CHECK(loopscale::test::count_lines(t.out) == 1);
    CHECK(t.out.find("): config: lr must be positive") != std::string::npos);
  }
  CHECK(!std::filesystem::exists("/tmp/loopscale_plan_lr_out/sweep.json"));
  std::filesystem::remove(typo_file);
  const auto shard = run_cli("sweep run --preset smoke --out /tmp/x --shard 3/2");
  CHECK(shard.rc == 2);
  CHECK(loopscale::test::count_lines(shard.out) == 1);
}
