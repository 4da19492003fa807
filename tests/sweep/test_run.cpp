#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <set>

#include "fake_engine.hpp"
#include "fixtures.hpp"
#include "loopscale/data/token_file.hpp"
#include "loopscale/sweep/merge.hpp"
#include "loopscale/sweep/presets.hpp"
#include "loopscale/sweep/report_data.hpp"
#include "loopscale/sweep/results.hpp"
#include "loopscale/sweep/run.hpp"

using namespace loopscale;
using namespace loopscale::sweep;
using loopscale::test::fresh;
using loopscale::test::small_plan;

namespace {

test::FakeEngine fast() {
  test::FakeEngine e;
  e.per_step = std::chrono::microseconds(0);
  return e;
}

}  // namespace

TEST_CASE("results: appends are whole lines, a second line for the same run is refused") {
  const fs::path dir = fresh("results");
  const Plan plan = small_plan();
  const fs::path file = dir / "results.jsonl";
  CHECK(read_results(file).empty());
  append_result(file, result_line(plan, plan.runs[0], {{"val_loss", 3.5}, {"tokens", 1000.0}}));
  append_result(file, result_line(plan, plan.runs[1], {{"val_loss", 3.25}}));
  const auto r = read_results(file);
  REQUIRE(r.size() == 2);
  CHECK(r[0].id == plan.runs[0].id);
  CHECK(r[0].loss == 3.5);
  CHECK(r[0].tokens == 1000.0);
  CHECK(r[1].tokens == static_cast<double>(plan.runs[1].steps * plan.spec.batch_tokens));
  CHECK(r[1].n_once == static_cast<double>(plan.runs[1].acct.params.once));
  CHECK(r[1].sweep == plan.fingerprint);
  // The refusal itself, by its message: sweep_error and std::out_of_range are logic_errors too, so
  // the type alone would pass a line refused for any other reason. The file keeps its two lines.
  CHECK_THROWS_WITH(append_result(file, result_line(plan, plan.runs[0], {{"val_loss", 1.0}})),
                    Catch::Contains("results: run " + plan.runs[0].id + " is already in " + file.string()));
  CHECK(read_results(file).size() == 2);
  CHECK_THROWS_WITH(result_line(plan, plan.runs[0], {{"loss", 1.0}}), Catch::Contains("no numeric val_loss"));
  // A bad line before the last is an error (a torn last line is set aside instead: test_reliability.cpp).
  std::ofstream(dir / "bad.jsonl") << result_line(plan, plan.runs[0], {{"val_loss", 3.5}}).dump() << "\n{oops\n{\"id\": \"y\"}\n";
  CHECK_THROWS_WITH(read_lines(dir / "bad.jsonl"), Catch::Contains("bad.jsonl:2: not a JSON line"));
  // And a whole JSON line that is no result, before the last: named at its line.
  std::ofstream(dir / "other.jsonl") << "{\"id\": \"x\"}\n{\"id\": \"y\"}\n";
  CHECK_THROWS_WITH(read_lines(dir / "other.jsonl"), Catch::Contains("other.jsonl:1: result line lacks a field"));
  // A number past a double, or a key given twice, is named for what it is (1e400 was exit 1 once
  // the reader threw nlohmann's out_of_range).
  std::ofstream(dir / "huge.jsonl") << "{\"id\": 1e400}\n{\"id\": \"y\"}\n";
  CHECK_THROWS_WITH(read_lines(dir / "huge.jsonl"), Catch::Contains("huge.jsonl:1: a number beyond the range of a double"));
  std::ofstream(dir / "twice.jsonl") << "{\"loss\": 1, \"loss\": 2}\n{\"id\": \"y\"}\n";
  CHECK_THROWS_WITH(read_lines(dir / "twice.jsonl"), Catch::Contains("twice.jsonl:1: the key \"loss\" appears twice in one object"));
}

TEST_CASE("run: every runnable run once, a rerun trains nothing, a result kept before a kill is recorded") {
  const fs::path dir = fresh("run");
  const Plan plan = small_plan();
  RunOptions opt;
  opt.out = dir;
  opt.log = nullptr;
  auto s = run_sweep(plan, opt, fast());
  CHECK(s.trained == plan.runnable());
  CHECK(s.unrunnable == 2);
  CHECK(read_results(dir / "results.jsonl").size() == plan.runnable());
  s = run_sweep(plan, opt, fast());
  CHECK(s.trained == 0);
  CHECK(s.already == plan.runnable());

  // A kill between the engine's return and the append: the summary is in result.json only.
  const auto lines = read_lines(dir / "results.jsonl");
  std::string keep;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) keep += lines[i].dump() + "\n";
  write_file_atomic(dir / "results.jsonl", keep);
  int calls = 0;
  RunFn counting = [&](const RunRequest& r) { ++calls; return fast()(r); };
  s = run_sweep(plan, opt, counting);
  CHECK(calls == 0);
  CHECK(s.recovered == 1);
  CHECK(read_results(dir / "results.jsonl").size() == plan.runnable());
}

TEST_CASE("run: a folder belongs to one spec, a results line of another sweep is refused") {
  const fs::path dir = fresh("mismatch");
  Plan plan = small_plan();
  RunOptions opt;
  opt.out = dir;
  opt.log = nullptr;
  run_sweep(plan, opt, fast());
  SweepSpec other = plan.spec;
  other.seed = 99;
  CHECK_THROWS_WITH(run_sweep(make_plan(other), opt, fast()), Catch::Contains("belongs to another sweep"));
}

TEST_CASE("run: a failing engine loses nothing already finished, and the rerun continues") {
  const fs::path dir = fresh("failing");
  const Plan plan = small_plan();
  RunOptions opt;
  opt.out = dir;
  opt.log = nullptr;
  int calls = 0;
  RunFn flaky = [&](const RunRequest& r) {
    if (++calls == 3) throw std::runtime_error("engine crashed");
    return fast()(r);
  };
  CHECK_THROWS_WITH(run_sweep(plan, opt, flaky), "engine crashed");
  CHECK(read_results(dir / "results.jsonl").size() == 2);
  const auto s = run_sweep(plan, opt, fast());
  CHECK(s.already == 2);
  CHECK(s.trained == plan.runnable() - 2);
}

TEST_CASE("shards: I/N parse, every run in exactly one shard, merge joins them and refuses duplicates") {
  CHECK(parse_shard("1/3").index == 1);
  CHECK_THROWS_AS(parse_shard("3/3"), sweep_error);
  CHECK_THROWS_AS(parse_shard("1/"), sweep_error);
  CHECK_THROWS_AS(parse_shard("-1/2"), sweep_error);
  CHECK_THROWS_AS(parse_shard("a/b"), sweep_error);
  const fs::path dir = fresh("shards");
  const Plan plan = small_plan();
  for (int i = 0; i < 3; ++i) {
    RunOptions opt;
    opt.out = dir;
    opt.log = nullptr;
    opt.shard = {i, 3};
    run_sweep(plan, opt, fast());
  }
  CHECK(results_files(dir).size() == 3);
  const auto m = merge_results(plan, {dir}, dir / "merged");
  CHECK(m.runs == plan.runnable());
  CHECK(m.missing.empty());
  std::set<std::string> ids;
  for (const auto& r : read_results(dir / "merged" / "results.jsonl")) ids.insert(r.id);
  CHECK(ids.size() == plan.runnable());
  // The same shard twice: an error naming both files.
  fs::create_directories(dir / "copy");
  fs::copy_file(dir / "results.shard-0-of-3.jsonl", dir / "copy" / "results.shard-0-of-3.jsonl");
  CHECK_THROWS_WITH(merge_results(plan, {dir, dir / "copy"}, dir / "merged2"), Catch::Contains("appears twice"));
  // Another spec's results: an error.
  SweepSpec other = plan.spec;
  other.seed = 7;
  CHECK_THROWS_WITH(merge_results(make_plan(other), {dir}, dir / "merged3"), Catch::Contains("spec mismatch"));
  // A partial merge says what is missing.
  const auto part = merge_results(plan, {dir / "results.shard-1-of-3.jsonl"}, dir / "partial");
  CHECK(part.missing.size() == plan.runnable() - part.runs);
  // A merged folder is never replaced by fewer runs: one shard merged into the full merge without
  // the folder itself among the inputs is refused, the file kept; with it, the merge goes on.
  CHECK_THROWS_WITH(merge_results(plan, {dir / "results.shard-1-of-3.jsonl"}, dir / "merged"),
                    Catch::Contains("run(s) the inputs do not") && Catch::Contains("among the inputs to keep them"));
  CHECK(read_results(dir / "merged" / "results.jsonl").size() == plan.runnable());
  CHECK_THROWS_WITH(merge_results(plan, {dir / "merged", dir / "results.shard-1-of-3.jsonl"}, dir / "merged"), Catch::Contains("appears twice"));
  CHECK(merge_results(plan, {dir / "merged"}, dir / "merged").runs == plan.runnable());
  CHECK(merge_results(plan, {dir / "partial", dir / "results.shard-0-of-3.jsonl"}, dir / "partial").runs > part.runs);
}

TEST_CASE("run, merge, report: the runs of one sweep are trained on one corpus, whatever --data each shard was given") {
  const fs::path dir = fresh("one_corpus");
  // Two corpora of one vocabulary and size, different tokens.
  const auto corpus = [&](const std::string& name, std::int32_t token) {
    const fs::path c = dir / name;
    fs::create_directories(c);
    data::write_token_file((c / "train.bin").string(), std::vector<std::int32_t>(4096, token), 256);
    data::write_token_file((c / "val.bin").string(), std::vector<std::int32_t>(1024, token), 256);
    return c;
  };
  const fs::path a = corpus("a", 7), b = corpus("b", 9);
  const std::string da = sweep::detail::corpus_of(a), db = sweep::detail::corpus_of(b);
  REQUIRE(da.rfind("xxh3-64:", 0) == 0);
  REQUIRE(da != db);
  CHECK(sweep::detail::corpus_of(dir / "nothing_here").empty());

  const Plan plan = small_plan();
  RunOptions opt;
  opt.out = dir / "sweep";
  opt.log = nullptr;
  opt.data = a;
  opt.shard = {0, 2};
  REQUIRE(run_sweep(plan, opt, fast()).trained > 0);
  for (const RunResult& r : read_results(results_file(opt.out, opt.shard))) CHECK(r.line.at("corpus") == da);
  // The same shard resumed on another corpus: refused before any run, naming both.
  opt.data = b;
  CHECK_THROWS_WITH(run_sweep(plan, opt, fast()), Catch::Contains("was trained on corpus \"" + da) && Catch::Contains("--data " + b.string() + " is " + db));
  // The other shard on the other corpus is refused too: it reads the first shard's file.
  opt.shard = {1, 2};
  CHECK_THROWS_WITH(run_sweep(plan, opt, fast()), Catch::Contains("was trained on corpus \"" + da));
  // Shard 1 run in a folder of its own, then merged with shard 0: the merge and the report refuse
  // the two corpora together.
  RunOptions other = opt;
  other.out = dir / "sweep_b";
  REQUIRE(run_sweep(plan, other, fast()).trained > 0);
  const fs::path b_file = results_file(other.out, other.shard);
  CHECK_THROWS_WITH(merge_results(plan, {opt.out, b_file}, dir / "merged"),
                    Catch::Contains("runs of two corpora") && Catch::Contains(da) && Catch::Contains(db));
  CHECK(!fs::exists(dir / "merged" / "results.jsonl"));
  fs::copy_file(b_file, results_file(opt.out, opt.shard));
  CHECK_THROWS_WITH(finished_runs(opt.out, plan), Catch::Contains("runs of two corpora"));
  fs::remove(results_file(opt.out, opt.shard));
  // A result kept in a run folder (the gap between a run's end and its line) is not recorded under
  // another corpus.
  fs::copy(other.out / "runs", opt.out / "runs", fs::copy_options::recursive | fs::copy_options::overwrite_existing);
  opt.data = a;
  CHECK_THROWS_WITH(run_sweep(plan, opt, fast()), Catch::Contains("result.json was trained on corpus \"" + db) && Catch::Contains("--data " + a.string()));
  for (const PlannedRun& r : plan.runs)
    if (opt.shard.owns(r.index)) fs::remove_all(run_dir(opt.out, r));
  // Shard 1 on the first corpus, in the first folder: the merge takes them all.
  REQUIRE(run_sweep(plan, opt, fast()).trained > 0);
  CHECK(merge_results(plan, {opt.out}, dir / "merged").runs == plan.runnable());
}

