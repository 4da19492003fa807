#include <catch2/catch.hpp>

#include <fstream>

#include <omp.h>

#include "loopscale/sweep/downstream.hpp"
#include "loopscale/sweep/engine.hpp"
#include "loopscale/sweep/presets.hpp"
#include "loopscale/sweep/report.hpp"
#include "loopscale/train/backend/guard.hpp"
#include "loopscale/train/data.hpp"

using namespace loopscale;
using namespace loopscale::sweep;

namespace {

// A tiny byte corpus written by the test itself, so the test needs no prepared data.
fs::path tiny_corpus() {
  const fs::path dir = fs::path(LOOPSCALE_TEST_TMP) / "engine_corpus";
  fs::create_directories(dir);
  const std::string text =
      "the quick brown fox jumps over the lazy dog. a looped model runs its shared block r times; "
      "what is one recurrence worth? ";
  std::vector<std::int32_t> train, val;
  for (int i = 0; i < 400; ++i)
    for (std::size_t k = 0; k < text.size(); ++k) train.push_back(static_cast<unsigned char>(text[(k * (i % 7 + 1)) % text.size()]));
  for (int i = 0; i < 40; ++i)
    for (unsigned char c : text) val.push_back(c);
  train::write_token_file((dir / "train.bin").string(), train, 256);
  train::write_token_file((dir / "val.bin").string(), val, 256);
  return dir;
}

Plan tiny_plan() {
  SweepSpec s;
  s.name = "engine-test";
  s.depth = 4;
  s.prelude = 1;
  s.coda = 1;
  s.r = {1, 2};
  s.width_per_s = 16;
  s.width_round = 16;
  s.head_dim = 16;
  s.vocab = 256;
  s.seq_len = 32;
  s.batch_tokens = 4 * 32;
  s.micro_batch_tokens = 4 * 32;
  s.memory_limit_gib = 1;
  s.budgets = {{5e8, {1}}};
  s.train = {{"lr", 3e-3}, {"eval_tokens", 1024}, {"threads", 1}};
  return make_plan(s);
}

// Options of a sweep into `out` (emptied first) on `data`, with no progress log.
RunOptions quiet_options(const fs::path& out, const fs::path& data) {
  fs::remove_all(out);
  RunOptions opt;
  opt.out = out;
  opt.data = data;
  opt.log = nullptr;
  return opt;
}

}  // namespace

TEST_CASE("engine: sweep run trains with the real engine, an interrupted run resumes to the same loss") {
  const fs::path data = tiny_corpus();
  const Plan plan = tiny_plan();
  REQUIRE(plan.runnable() == 2);
  const RunFn engine = engine_run_fn();

  // Uninterrupted.
  const fs::path a = fs::path(LOOPSCALE_TEST_TMP) / "engine_a";
  RunOptions opt = quiet_options(a, data);
  const RunSummary s = run_sweep(plan, opt, engine);
  CHECK(s.trained == 2);
  const auto ra = read_results(a / "results.jsonl");
  REQUIRE(ra.size() == 2);
  for (const auto& r : ra) {
    CHECK(r.loss > 0);
    CHECK(r.loss < 6);  // below the loss of a uniform byte model (ln 256 = 5.55) plus slack
    const bool planned_tokens = r.tokens == static_cast<double>(plan.runs[0].steps * plan.spec.batch_tokens) ||
                                r.tokens == static_cast<double>(plan.runs[1].steps * plan.spec.batch_tokens);
    CHECK(planned_tokens);
    CHECK(r.line["summary"]["status"] == "done");
    // A 32-token context holds only the arithmetic probe (its one-shot prompts are that short) and
    // repeat (its shorter strings).
    const nlohmann::json& e = r.line["summary"]["eval"];
    REQUIRE(e.contains("tasks"));
    REQUIRE(e.at("tasks").size() == 2);
    CHECK(e.at("tasks")[0].at("label") == "arithmetic");
    CHECK(e.at("tasks")[1].at("label") == "repeat");
    CHECK(e.at("r_eval") == r.r);
  }

  // Interrupted after 3/4 of its first run (the engine checkpointed half-way), then rerun.
  const fs::path b = fs::path(LOOPSCALE_TEST_TMP) / "engine_b";
  fs::remove_all(b);
  opt.out = b;
  const int64 stop_at = plan.runs[0].steps * 3 / 4;
  RunFn interrupted = [&](const RunRequest& req) {
    RunRequest r = req;
    r.progress = [&](const StepProgress& p) {
      if (p.step == stop_at) throw std::runtime_error("killed");
    };
    return engine(r);
  };
  CHECK_THROWS_WITH(run_sweep(plan, opt, interrupted), "killed");
  CHECK(read_results(b / "results.jsonl").empty());
  CHECK(fs::exists(b / "runs" / plan.runs[0].id / "checkpoint.bin"));
  const RunSummary s2 = run_sweep(plan, opt, engine);
  CHECK(s2.trained == 2);
  const auto rb = read_results(b / "results.jsonl");
  REQUIRE(rb.size() == 2);
  CHECK(rb[0].line["summary"]["resumed_from"].get<int64>() > 0);
  for (std::size_t i = 0; i < 2; ++i) CHECK(rb[i].loss == ra[i].loss);  // bit-identical (one thread)
}

TEST_CASE("engine: threads per run: every core in lanes, else one below 2 GFLOP a step, unless the spec or --threads fixes them") {
  CHECK(auto_threads(0.34e9, 2) == 1);  // d 32 at 8 x 64 tokens, threads sharing kernels: one thread is 1.45x faster
  CHECK(auto_threads(1.99e9, 2) == 1);
  CHECK(auto_threads(2.46e9, 2) == 2);  // d 96: two threads 1.2x faster
  CHECK(auto_threads(466e9, 16) == 16);
  CHECK(auto_threads(466e9, 0) == 1);
  CHECK(auto_threads(0.34e9, 2, true) == 2);  // in lanes: two threads pay at every size
  CHECK(auto_threads(0.34e9, 0, true) == 1);
  // The tiny plan without "threads" in its train settings: its steps cost far below 2 GFLOP, but it
  // is dense with 4 sequences a step, so on 2 or 4 cores its threads form lanes and it gets them
  // all (one thread elsewhere); --threads 2 (EngineOptions) fixes two.
  const int cores = omp_get_num_procs();
  const int chosen = cores > 1 && 4 % cores == 0 ? cores : 1;
  const fs::path data = tiny_corpus();
  SweepSpec spec = tiny_plan().spec;
  spec.train.erase("threads");
  spec.budgets = {{5e8, {1}}};
  spec.r = {1};
  const Plan plan = make_plan(spec);
  REQUIRE(plan.runnable() == 1);
  REQUIRE(plan.runs[0].flops_per_token * static_cast<double>(spec.batch_tokens) < serial_step_flops);
  for (int fixed : {0, 2}) {
    const fs::path out = fs::path(LOOPSCALE_TEST_TMP) / ("engine_threads_" + std::to_string(fixed));
    const RunOptions opt = quiet_options(out, data);
    EngineOptions eo;
    eo.threads = fixed;
    eo.eval_items = 0;
    eo.curve_windows = 0;
    REQUIRE(run_sweep(plan, opt, engine_run_fn(eo)).trained == 1);
    std::ifstream in(out / "runs" / plan.runs[0].id / "summary.json");
    const nlohmann::json summary = nlohmann::json::parse(in);
    CHECK(summary.at("config").at("threads") == (fixed == 0 ? chosen : 2));
  }
  // A device sweep: each run goes to the program's trainer for the device (here the guard
  // backend's device forms stand in for a GPU), with neither the CPU's threads nor its peak chosen.
  const fs::path out = fs::path(LOOPSCALE_TEST_TMP) / "engine_device";
  const RunOptions opt = quiet_options(out, data);
  EngineOptions eo;
  eo.eval_items = 0;
  eo.curve_windows = 0;
  eo.device = "cuda";
  CHECK_THROWS_WITH(run_sweep(plan, opt, engine_run_fn(eo)), Catch::Contains("sweep: device cuda needs the program's trainer for it"));
  int calls = 0;
  eo.train = [&](const train::TrainConfig& c, const train::ProgressFn& p) {
    ++calls;
    CHECK(c.device == "cuda");
    CHECK(c.peak_flops == 0);
    CHECK(c.threads == 0);
    return train::train<train::GuardDeviceBackend>(c, p);
  };
  REQUIRE(run_sweep(plan, opt, engine_run_fn(eo)).trained == 1);
  CHECK(calls == 1);
  std::ifstream in(out / "runs" / plan.runs[0].id / "summary.json");
  CHECK(nlohmann::json::parse(in).at("config").at("device") == "cuda");
}

TEST_CASE("engine: settings the sweep owns are refused in the spec's train object") {
  const Plan plan = tiny_plan();
  SweepSpec s = plan.spec;
  s.train["seq_len"] = 64;
  CHECK_THROWS_WITH(train_config(s, plan.runs[0], "x", "y"), Catch::Contains("train.seq_len is set by the sweep itself"));
  s = plan.spec;
  s.train["lrr"] = 1;
  CHECK_THROWS_WITH(train_config(s, plan.runs[0], "x", "y"), Catch::Contains("unknown key 'lrr'"));
  const train::TrainConfig c = train_config(plan.spec, plan.runs[1], "out", "data");
  CHECK(c.batch == 4);
  CHECK(c.flops == 5e8);
  CHECK(train::training_length(c).steps == plan.runs[1].steps);  // the engine trains the planned steps
}

TEST_CASE("engine: a batch above micro_batch_tokens is trained by accumulation, in the passes the memory plan counts") {
  // The fewest whole chunks per rank whose pass holds at most micro_batch_tokens.
  SweepSpec s = tiny_plan().spec;
  CHECK(accum_for(s, 1) == 1);
  s.batch_tokens = 12 * 32;
  s.micro_batch_tokens = 4 * 32;
  CHECK(accum_for(s, 1) == 3);
  CHECK(accum_for(s, 2) == 2);   // 3 sequences a pass
  CHECK(accum_for(s, 3) == 1);
  CHECK(accum_for(s, 12) == 1);
  CHECK_THROWS_WITH(accum_for(s, 5), Catch::Contains("batch of 12 sequences") && Catch::Contains("over 5 ranks"));
  s.micro_batch_tokens = 5 * 32;  // no divisor of 12 is 5: passes of 4
  CHECK(accum_for(s, 1) == 3);
  // The paper preset: 2^18 tokens a step in passes of 4 sequences of 2,048, as planned.
  const Plan paper = make_plan(preset("paper"));
  const train::TrainConfig pc = train_config(paper.spec, paper.runs[0], "x", "y");
  CHECK(pc.accum == 32);
  CHECK(train::detail::micro_batch(pc, 1) * pc.seq_len == paper.spec.micro_batch_tokens);
  CHECK(train::detail::micro_batch(train_config(paper.spec, paper.runs[0], "x", "y", 8), 8) == 4);
  // A spec's own accum (specs before 5 Dec 2026 could set one) stays where its passes fit.
  s = tiny_plan().spec;
  s.train["accum"] = 2;
  CHECK(train_config(s, tiny_plan().runs[0], "x", "y").accum == 2);
  s.train["accum"] = 3;
  CHECK_THROWS_WITH(train_config(s, tiny_plan().runs[0], "x", "y"), Catch::Contains("train.accum 3 does not split the batch of 4 sequences"));
  s.micro_batch_tokens = 32;
  s.train["accum"] = 2;
  CHECK_THROWS_WITH(train_config(s, tiny_plan().runs[0], "x", "y"), Catch::Contains("passes of at most 1 (micro_batch_tokens)"));

  // A run trains so, and gives the loss of the same batch in one pass (the same sums in another order).
  const fs::path data = tiny_corpus();
  Plan whole = tiny_plan();
  whole.runs.resize(1);
  Plan halves = whole;
  halves.spec.micro_batch_tokens = 2 * 32;
  const fs::path a = fs::path(LOOPSCALE_TEST_TMP) / "engine_accum_1", b = fs::path(LOOPSCALE_TEST_TMP) / "engine_accum_2";
  EngineOptions eo;
  eo.eval_items = 0;
  eo.curve_windows = 0;
  REQUIRE(run_sweep(whole, quiet_options(a, data), engine_run_fn(eo)).trained == 1);
  REQUIRE(run_sweep(halves, quiet_options(b, data), engine_run_fn(eo)).trained == 1);
  const auto ra = read_results(a / "results.jsonl"), rb = read_results(b / "results.jsonl");
  REQUIRE((ra.size() == 1 && rb.size() == 1));
  const auto accum_of = [&](const fs::path& out) {
    std::ifstream in(out / "runs" / whole.runs[0].id / "summary.json");
    return nlohmann::json::parse(in).at("config").at("accum").get<int64>();
  };
  CHECK(accum_of(a) == 1);
  CHECK(accum_of(b) == 2);
  CHECK(rb[0].loss == Approx(ra[0].loss).epsilon(1e-3));
}

TEST_CASE("engine: finished runs are scored on the built-in probes, and the report shows them per (C, r) and axis") {
  const fs::path data = tiny_corpus();
  SweepSpec spec = tiny_plan().spec;
  spec.seq_len = 128;
  spec.batch_tokens = spec.micro_batch_tokens = 2 * 128;
  const Plan plan = make_plan(spec);
  REQUIRE(plan.runnable() == 2);
  const fs::path dir = fs::path(LOOPSCALE_TEST_TMP) / "engine_eval";
  const RunOptions opt = quiet_options(dir, data);
  EngineOptions eo;
  eo.eval_items = 8;
  // The curve on the trainer's own validation windows, so that at the trained r it is the run's val_loss.
  const train::TrainConfig cfg = train_config(spec, plan.runs[0], "x", data);
  eo.curve_windows = eval::trainer_validation_windows(cfg.eval_tokens, cfg.batch, cfg.seq_len, data::open_corpus(data, data::Split::val));
  run_sweep(plan, opt, engine_run_fn(eo));
  const auto runs = read_results(dir / "results.jsonl");
  REQUIRE(runs.size() == 2);
  for (const auto& r : runs) {
    const nlohmann::json& c = r.line["summary"]["recurrence_curve"];
    INFO(c.dump());
    REQUIRE(c.at("points").size() == eval::recurrence_curve_points(r.r).size());
    for (std::size_t k = 0; k < c.at("points").size(); ++k) {
      const nlohmann::json& p = c["points"][k];
      CHECK(p.at("r_eval") == eval::recurrence_curve_points(r.r)[k]);
      CHECK(std::isfinite(p.at("loss").get<double>()));
      if (p.at("r_eval") == r.r) CHECK(p.at("loss").get<double>() == Approx(r.loss).epsilon(1e-5));
    }
    const nlohmann::json& e = r.line["summary"]["eval"];
    INFO(e.dump());
    REQUIRE(e.contains("tasks"));
    CHECK(e.at("r_eval") == r.r);
    CHECK(e.at("tasks").size() >= 3);  // the tasks whose prompts fit in 128 bytes (no cloze: the corpus has no lines)
    for (const auto& t : e.at("tasks")) {
      CHECK(t.at("n") == 8);
      CHECK(t.at("answer_bpb").get<double>() > 0);
    }
  }
  const Downstream d = downstream(runs);
  CHECK(d.evaluated == 2);
  REQUIRE(d.cells.size() == 2);  // one budget, r = 1 and 2
  CHECK(d.points.size() == 2);
  CHECK_FALSE(d.axes.empty());
  REQUIRE(d.curves.size() == 2);  // one model per r: the largest is the only one
  CHECK(d.curves[0].r == 1);
  CHECK(d.curves[1].r == 2);
  CHECK(d.curves[1].r_eval == std::vector<int64>{1, 2, 4, 8});
  ReportOptions ro;
  ro.plots = false;
  ro.analyse.starts = 4;
  ro.analyse.bootstrap = 0;
  write_report(dir, ro);
  std::ifstream md(dir / "report.md");
  const std::string text((std::istreambuf_iterator<char>(md)), std::istreambuf_iterator<char>());
  CHECK_THAT(text, Catch::Contains("## Downstream: the built-in probes") && Catch::Contains("2 of 2 runs scored"));
  CHECK_THAT(text, Catch::Contains("## Test-time recurrence") && Catch::Contains("| r_eval 8 |"));
}

TEST_CASE("report: the recurrence curve shown per r is that of its largest model, and malformed curves are skipped") {
  const auto run = [](const char* id, double c, int64 r, double n, nlohmann::json curve) {
    RunResult x;
    x.id = id;
    x.budget = c;
    x.r = r;
    x.n = n;
    x.line = {{"id", id}, {"summary", {{"recurrence_curve", std::move(curve)}}}};
    return x;
  };
  const auto curve = [](std::vector<std::pair<int64, double>> pts) {
    nlohmann::json p = nlohmann::json::array();
    for (auto [r, l] : pts) p.push_back({{"r_eval", r}, {"loss", l}, {"bpb", l / std::log(2.0)}});
    return nlohmann::json{{"windows", 4}, {"seq_len", 32}, {"points", p}};
  };
  const std::vector<RunResult> runs = {
      run("small", 1e9, 2, 100, curve({{1, 3.0}, {2, 2.9}, {4, 2.95}, {8, 3.0}})),
      run("large", 1e9, 2, 300, curve({{1, 2.8}, {2, 2.5}, {4, 2.45}, {8, 2.46}})),
      run("large-more-c", 2e9, 2, 300, curve({{1, 2.7}, {2, 2.4}, {4, 2.35}, {8, 2.36}})),
      run("bad", 4e9, 2, 900, {{"points", {{{"r_eval", "two"}, {"loss", 1.0}}}}}),
      run("r1", 1e9, 1, 50, curve({{1, 3.1}, {2, 3.2}, {4, 3.5}})),
  };
  const Downstream d = downstream(runs);
  REQUIRE(d.curves.size() == 2);
  CHECK(d.curves[0].id == "r1");
  CHECK(d.curves[1].id == "large-more-c");  // equal N: the larger budget
  CHECK(d.curves[1].loss == std::vector<double>{2.7, 2.4, 2.35, 2.36});
  CHECK(d.evaluated == 0);  // no probe scores
  const std::string md = downstream_markdown(d);
  CHECK_THAT(md, Catch::Contains("| large-more-c | 300 | 2 | 2.7000 | **2.4000** | 2.3500 | 2.3600 |"));
  CHECK_THAT(md, Catch::Contains("| r1 | 50 | 1 | **3.1000** | 3.2000 | 3.5000 | - |"));
  CHECK_THAT(md, !Catch::Contains("## Downstream"));

  // The plot's range follows the curves up to their trained r; the r = 1 model's rise past it
  // (3.5 at r_eval 4) would otherwise flatten the others.
  const fs::path dir = fs::path(LOOPSCALE_TEST_TMP) / "recurrence_plot";
  fs::remove_all(dir);
  PlotData pd;
  pd.sweep = "t";
  std::string problem;
  write_plots(dir, pd, "true", problem, d);  // `true` stands in for gnuplot: the scripts are what is checked
  CHECK(problem.empty());
  std::ifstream gp(dir / "plots" / "recurrence.gp");
  const std::string script((std::istreambuf_iterator<char>(gp)), std::istreambuf_iterator<char>());
  CHECK_THAT(script, Catch::Contains("set yrange [2.1625:3.2875]") && Catch::Contains("losses above the range are in report.md"));
  std::ifstream dt(dir / "plots" / "recurrence_trained.dat");
  const std::string trained((std::istreambuf_iterator<char>(dt)), std::istreambuf_iterator<char>());
  CHECK_THAT(trained, Catch::Contains("# large-more-c\n2 2.4\n"));
}
