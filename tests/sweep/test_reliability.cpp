// Ownership and interruptions of a sweep folder: torn results lines, one process per shard, files
// that cannot be written, the Slurm script's signal and requeue, and `sweep run` stopped by
// SIGTERM / SIGINT / SIGUSR1 and resumed (the real engine through the CLI).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <tuple>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/run_cli.hpp"
#include "fake_engine.hpp"
#include "fixtures.hpp"
#include "test_files.hpp"
#include "loopscale/sweep/merge.hpp"
#include "loopscale/sweep/presets.hpp"
#include "loopscale/sweep/report.hpp"
#include "loopscale/sweep/slurm.hpp"
#include "loopscale/train/data.hpp"
#include "loopscale/util/file_lock.hpp"

using namespace loopscale;
using namespace loopscale::sweep;
using loopscale::test::fresh;
using loopscale::test::slurp;
using loopscale::test::small_plan;

namespace {

void spit(const fs::path& p, const std::string& text) { std::ofstream(p, std::ios::binary) << text; }

RunSummary run_fake(const Plan& plan, const fs::path& out, std::ostream* log = nullptr, Shard shard = {},
                    std::chrono::microseconds per_step = std::chrono::microseconds(0)) {
  RunOptions opt;
  opt.out = out;
  opt.log = log;
  opt.shard = shard;
  test::FakeEngine e;
  e.per_step = per_step;
  return run_sweep(plan, opt, e);
}

int count_prefixed(const fs::path& dir, const std::string& prefix) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().rfind(prefix, 0) == 0;
  return n;
}

// Runs `body` in a forked child; its return value is the child's exit status (-1: killed).
template <class F>
int in_child(F body) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    int rc = 1;
    try {
      rc = body();
    } catch (const std::exception& e) {
      std::fprintf(stderr, "child: unexpected: %s\n", e.what());
    }
    std::fflush(nullptr);
    _exit(rc);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

TEST_CASE("reliability: a torn last results line is set aside with a warning and its run recorded again, a bad middle line is an error",
          "[sweep][reliability]") {
  const Plan plan = small_plan();
  const fs::path out = fresh("rel_torn");
  run_fake(plan, out);
  const fs::path file = out / "results.jsonl";
  const std::string whole = slurp(file);
  const auto before = read_results(file);
  REQUIRE(before.size() == 6);
  const std::size_t last_start = whole.rfind('\n', whole.size() - 2) + 1;

  // Power loss mid-write: cut short; NUL bytes; a whole JSON object without a result's fields;
  // a whole line without its newline.
  const std::vector<std::pair<std::string, std::string>> tails = {
      {"cut short", whole.substr(0, whole.size() - 40)},
      {"NUL bytes", whole.substr(0, last_start) + std::string(37, '\0')},
      {"fields missing", whole.substr(0, last_start) + "{\"id\": \"x\", \"loss\": 1.0}\n"},
      {"no newline", whole.substr(0, whole.size() - 1)},
  };
  for (const auto& [what, text] : tails) {
    INFO(what);
    spit(file, text);
    std::ostringstream warn;
    const auto read = read_results(file, &warn);
    CHECK(read.size() == 5);  // never analysed
    CHECK(warn.str().rfind("loopscale: warning: " + file.string() + ":6: the last line is torn", 0) == 0);  // as the CLI's warnings
    // merge and the report read the same way: the torn run is missing, not merged.
    const fs::path merged = fresh("rel_torn_merged");
    const MergeSummary m = merge_results(plan, {file}, merged);
    CHECK(m.runs == 5);
    CHECK(m.missing.size() == 1);
    // The next `sweep run` sets the line aside and records the run again from runs/ID/result.json.
    std::ostringstream log;
    const RunSummary s = run_fake(plan, out, &log);
    CHECK(log.str().find("loopscale: warning: " + file.string() + ":6: the last line was torn") != std::string::npos);
    CHECK(s.recovered == 1);
    CHECK(s.trained == 0);
    CHECK(slurp(file) == whole);  // every run once, as before
    CHECK(count_prefixed(out, "results.jsonl.torn-") == 1);
    for (const auto& e : fs::directory_iterator(out))
      if (e.path().filename().string().rfind("results.jsonl.torn-", 0) == 0) fs::remove(e.path());
  }

  // Without result.json the run is trained again.
  spit(file, whole.substr(0, whole.size() - 40));
  const std::string id = before.back().id;
  fs::remove(out / "runs" / id / "result.json");
  fs::remove(out / "runs" / id / "checkpoint.json");
  const RunSummary s = run_fake(plan, out);
  CHECK(s.trained == 1);
  CHECK(read_results(file).back().loss == before.back().loss);

  // A bad line in the middle is no torn write: an error naming file:line.
  std::string middle = whole;
  middle.replace(middle.find("\"loss\""), 6, "\"lo$$\"");
  spit(file, whole.substr(0, whole.find('\n') + 1) + "{oops\n" + whole.substr(whole.find('\n') + 1));
  CHECK_THROWS_WITH(read_results(file), Catch::Contains("results.jsonl:2: not a JSON line"));
  CHECK_THROWS_WITH(run_fake(plan, out), Catch::Contains("results.jsonl:2: not a JSON line"));
  spit(file, middle);
  CHECK_THROWS_WITH(read_results(file), Catch::Contains("results.jsonl:1: result line lacks a field"));
  // Numbers no fit can take (a negative loss, a negative count) are named, not fitted.
  std::string negative = whole;
  negative.insert(negative.find("\"loss\":") + 7, "-");
  spit(file, negative);
  CHECK_THROWS_WITH(read_results(file), Catch::Contains("results.jsonl:1: result line: 'loss' = -"));
  // A folder where results.jsonl goes is named as one (it read as "no finished runs").
  fs::remove(file);
  fs::create_directories(file);
  CHECK_THROWS_WITH(read_results(file), Catch::Contains("is a folder, not a file"));
  fs::remove_all(out);
}

TEST_CASE("reliability: a results line whose fields differ from its planned run, or whose run is not planned, is refused by run, merge and report",
          "[sweep][reliability]") {
  const Plan plan = small_plan();
  const fs::path out = fresh("rel_plan_fields");
  run_fake(plan, out);
  const fs::path file = out / "results.jsonl";
  const std::string whole = slurp(file);
  std::vector<nlohmann::json> lines = read_lines(file);
  REQUIRE(lines.size() == 6);
  REQUIRE(finished_runs(out, plan).size() == 6);  // lines written by `sweep run` match their plan

  // Every reader that fits, merges or resumes refuses the same edit, naming file:line, run and field.
  const auto refused_everywhere = [&](const std::string& text, const std::string& message) {
    spit(file, text);
    CHECK_THROWS_WITH(finished_runs(out, plan), Catch::Contains(message));
    CHECK_THROWS_WITH(merge_results(plan, {file}, fresh("rel_plan_fields_merged")), Catch::Contains(message));
    CHECK_FALSE(fs::exists(out.parent_path() / "rel_plan_fields_merged" / "results.jsonl"));
    CHECK_THROWS_WITH(run_fake(plan, out), Catch::Contains(message));
    CHECK(slurp(file) == text);  // nothing trained over it, nothing set aside
  };
  const auto with = [&](std::size_t k, const char* field, const nlohmann::json& value) {
    std::string text;
    for (std::size_t i = 0; i < lines.size(); ++i) {
      nlohmann::json j = lines[i];
      if (i == k) j[field] = value;
      text += j.dump() + "\n";
    }
    return text;
  };
  const std::string id0 = lines[0].at("id").get<std::string>();
  const int64 r0 = lines[0].at("r").get<int64>();
  {
    INFO("r");
    refused_everywhere(with(0, "r", r0 + 7), fmt::format("results.jsonl:1: run {} has r {} where the plan says {}", id0, r0 + 7, r0));
  }
  {
    INFO("an id the plan does not have");
    refused_everywhere(with(2, "id", "C9e99-r3-s7"), "results.jsonl:3: run C9e99-r3-s7 is not in the plan of sweep 'smoke'");
  }
  {
    INFO("a double one ulp off: C and F compare exactly, as the writer writes the plan's own values");
    const double c = lines[1].at("C").get<double>();
    refused_everywhere(with(1, "C", std::nextafter(c, 2 * c)), "results.jsonl:2: run " + lines[1].at("id").get<std::string>() + " has C ");
    const double f = lines[4].at("F").get<double>();
    refused_everywhere(with(4, "F", f + 1), "results.jsonl:5: run " + lines[4].at("id").get<std::string>() + " has F ");
  }
  {
    INFO("counts, width and index");
    refused_everywhere(with(5, "N_rec", lines[5].at("N_rec").get<int64>() + 1), "results.jsonl:6: run " + lines[5].at("id").get<std::string>() + " has N_rec ");
    refused_everywhere(with(3, "d_model", 48), "results.jsonl:4: run " + lines[3].at("id").get<std::string>() + " has d_model 48 where the plan says ");
    refused_everywhere(with(3, "index", 99), "results.jsonl:4: run " + lines[3].at("id").get<std::string>() + " has index 99 where the plan says " +
                                                 lines[3].at("index").dump());
  }
  {
    INFO("an MoE column in a dense sweep's line");
    refused_everywhere(with(0, "K", 1), fmt::format("results.jsonl:1: run {} has K 1 where the plan is a dense sweep, without K", id0));
  }
  {
    INFO("another sweep's line in a folder of this one");
    refused_everywhere(with(0, "sweep", "0123456789abcdef"), "results.jsonl:1: run " + id0 + " is from sweep 0123456789abcdef, not ");
  }

  // Lines of an older loopscale, without the columns added since (the injection's, the plan index,
  // F): absent columns are fine; the runs are what they were.
  std::string older;
  for (nlohmann::json j : lines) {
    for (const char* k : {"N_inject", "injection", "index", "F", "N_unrolled"}) j.erase(k);
    older += j.dump() + "\n";
  }
  spit(file, older);
  CHECK(finished_runs(out, plan).size() == 6);
  CHECK(merge_results(plan, {file}, fresh("rel_plan_fields_older")).runs == 6);
  CHECK(run_fake(plan, out).already == 6);
  // Written with integers as floats ("r": 1.0): the same numbers.
  spit(file, with(0, "r", static_cast<double>(r0)));
  CHECK(finished_runs(out, plan).size() == 6);

  // The CLI: one line, exit 2 (the report fitted r 8 and named no problem).
  spit(file, with(0, "r", r0 + 7));
  using loopscale::test::run_cli;
  const auto rep = run_cli("sweep report " + out.string() + " --bootstrap 0 --no-plots");
  INFO(rep.out);
  CHECK(rep.rc == 2);
  CHECK(loopscale::test::count_lines(rep.out) == 1);
  CHECK_THAT(rep.out, Catch::Contains(fmt::format("results.jsonl:1: run {} has r {} where the plan says {}", id0, r0 + 7, r0)));
  spit(file, with(2, "id", "C9e99-r3-s7"));
  const auto unplanned = run_cli("sweep report " + out.string() + " --bootstrap 0 --no-plots");
  CHECK(unplanned.rc == 2);
  CHECK_THAT(unplanned.out, Catch::Contains("run C9e99-r3-s7 is not in the plan"));
  CHECK(!fs::exists(out / "report.md"));
  spit(file, whole);
  fs::remove_all(out);
}

TEST_CASE("reliability: the lines sweep run writes match their plan in every preset, through a dump and a parse", "[sweep][reliability]") {
  for (const std::string& name : preset_names()) {
    INFO(name);
    const Plan plan = make_plan(preset(name));
    std::vector<RunResult> results;
    for (const PlannedRun& run : plan.runs) {
      const double tokens = static_cast<double>(run.steps) * static_cast<double>(plan.spec.batch_tokens);
      const nlohmann::json line = result_line(plan, run, {{"val_loss", 3.25}, {"tokens", tokens}});
      results.push_back(result_from_json(nlohmann::json::parse(line.dump())));
    }
    CHECK_NOTHROW(check_against_plan(results, plan));
    // Another preset's lines are another sweep's.
    const Plan other = make_plan(preset(name == "smoke" ? "cpu-mini" : "smoke"));
    CHECK_THROWS_WITH(check_against_plan(results, other), Catch::Contains("spec mismatch"));
  }
}

TEST_CASE("reliability: a results file of junk is an error naming its line, not a torn last line, and merge refuses an input without a whole result line",
          "[sweep][reliability]") {
  const Plan plan = small_plan();
  const fs::path out = fresh("rel_junk");
  run_fake(plan, out);
  const fs::path file = out / "results.jsonl";
  const std::string whole = slurp(file);

  // Text, binary and a JSON value that is no object are no result line cut short, last or not.
  const std::string elf = std::string("\x7f" "ELF\x02\x01\x01\0\0\0\0\0\0\0\0\0\x03\0\x3e\0", 20);
  const std::vector<std::tuple<std::string, std::string, std::string>> junk = {
      {"text", "this is not json at all\n", "results.jsonl:1: not a JSON line"},
      {"text without a newline", "this is not json at all", "results.jsonl:1: not a JSON line"},
      {"ELF bytes", elf, "results.jsonl:1: not a JSON line"},
      {"text after whole lines", whole + "garbage\n", "results.jsonl:7: not a JSON line"},
      {"a number after whole lines", whole + "42\n", "results.jsonl:7: not a whole result"},
      // Another program's JSONL: refused at its first line, with no warning that its last is torn.
      {"JSON lines that are no results", "{\"step\": 1, \"loss\": 2.5}\n{\"step\": 2, \"loss\": 2.4}\n", "results.jsonl:1: result line lacks a field"},
  };
  for (const auto& [what, text, message] : junk) {
    INFO(what);
    spit(file, text);
    std::ostringstream warn;
    CHECK_THROWS_WITH(read_results(file, &warn), Catch::Contains(message));
    CHECK(warn.str().empty());
    CHECK_THROWS_WITH(finished_runs(out, plan), Catch::Contains(message));
    CHECK_THROWS_WITH(run_fake(plan, out), Catch::Contains(message));
    CHECK(slurp(file) == text);  // not set aside as a torn line and replaced
    const fs::path merged = fresh("rel_junk_merged") / "out";
    CHECK_THROWS_WITH(merge_results(plan, {file}, merged), Catch::Contains(message));
    CHECK_FALSE(fs::exists(merged));  // nothing written, the folder not claimed
  }

  // Merge inputs without a whole result line: an empty file, a file whose one line is torn, a
  // folder whose only results file is empty. Each is named; OUT is left as it was.
  const fs::path in = fresh("rel_junk_inputs");
  spit(in / "empty.jsonl", "");
  spit(in / "torn.jsonl", whole.substr(0, 50));
  fs::create_directories(in / "shard");
  spit(in / "shard" / "results.shard-0-of-2.jsonl", "");
  spit(file, whole);
  for (const fs::path& bad : {in / "empty.jsonl", in / "torn.jsonl", in / "shard"}) {
    INFO(bad.string());
    const fs::path merged = in / "out";
    CHECK_THROWS_WITH(merge_results(plan, {file, bad}, merged), Catch::Contains(bad.string() + " holds no whole result line"));
    CHECK_FALSE(fs::exists(merged));
  }
  // An empty shard file beside shards with runs is fine: the folder as a whole has whole lines.
  fs::copy_file(file, in / "shard" / "results.shard-1-of-2.jsonl");
  CHECK(merge_results(plan, {in / "shard"}, in / "out").runs == 6);

  // The CLI: one line, exit 2, and no OUT.
  using loopscale::test::run_cli;
  spit(in / "junk.jsonl", "this is not json at all\n");
  const auto m = run_cli("sweep merge --preset smoke --out " + (in / "cli_out").string() + " " + (in / "junk.jsonl").string());
  INFO(m.out);
  CHECK(m.rc == 2);
  CHECK(loopscale::test::count_lines(m.out) == 1);
  CHECK_THAT(m.out, Catch::Contains("junk.jsonl:1: not a JSON line"));
  CHECK_FALSE(fs::exists(in / "cli_out"));
  const auto e = run_cli("sweep merge --preset smoke --out " + (in / "cli_out").string() + " " + (in / "empty.jsonl").string());
  CHECK(e.rc == 2);
  CHECK(loopscale::test::count_lines(e.out) == 1);
  CHECK_THAT(e.out, Catch::Contains("empty.jsonl holds no whole result line"));
  CHECK_FALSE(fs::exists(in / "cli_out"));
  fs::remove_all(in);
  fs::remove_all(out);
}

TEST_CASE("reliability: two processes on one shard: the second is refused naming the first, other shards run beside it",
          "[sweep][reliability]") {
  const Plan plan = small_plan();
  const fs::path out = fresh("rel_shards");
  // The first process: shard 0/2, slowed down so that it is still running when the others start.
  std::fflush(nullptr);
  const pid_t first = fork();
  if (first == 0) {
    int rc = 0;
    try {
      run_fake(plan, out, nullptr, {0, 2}, std::chrono::microseconds(3000));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "first shard: %s\n", e.what());
      rc = 1;
    }
    _exit(rc);
  }
  const fs::path lock = out / ".lock.shard-0-of-2";
  for (int i = 0; i < 500 && slurp(lock).rfind(std::to_string(first) + " ", 0) != 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(slurp(lock).rfind(std::to_string(first) + " ", 0) == 0);

  const auto t0 = std::chrono::steady_clock::now();
  try {
    run_fake(plan, out, nullptr, {0, 2});
    FAIL("a second process on shard 0/2 was not refused");
  } catch (const folder_in_use& e) {
    CHECK(std::string(e.what()).find("(shard 0/2) is in use by process " + std::to_string(first) + " (host ") != std::string::npos);
    CHECK(e.holder_pid == first);
  }
  CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2));  // at once
  // Shard 1/2 runs to the end while shard 0/2 is still busy.
  const RunSummary other = run_fake(plan, out, nullptr, {1, 2});
  CHECK(other.trained == other.in_shard - other.unrunnable);
  int status = 0;
  CHECK(waitpid(first, &status, WNOHANG) == 0);  // still running
  waitpid(first, &status, 0);
  REQUIRE((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  // The lock died with its holder: the same shard runs again (and finds everything done).
  CHECK(run_fake(plan, out, nullptr, {0, 2}).trained == 0);
  const MergeSummary m = merge_results(plan, {out}, out);
  CHECK(m.runs == 6);
  CHECK(m.missing.empty());
  fs::remove_all(out);
}

TEST_CASE("reliability: a results line or a report that cannot be written is one clear error and loses no finished result",
          "[sweep][reliability]") {
  const Plan plan = small_plan();
  const fs::path out = fresh("rel_full");
  run_fake(plan, out);
  const fs::path file = out / "results.jsonl";
  // Keep the first 4 lines: the last two runs have result.json but no line yet.
  std::string text = slurp(file);
  std::size_t cut = 0;
  for (int i = 0; i < 4; ++i) cut = text.find('\n', cut) + 1;
  text.resize(cut);
  spit(file, text);

  // Disk full: files may not grow past the results file's size (SIGXFSZ ignored, so the write
  // fails with EFBIG instead of killing the process), in a child so the limit stays there.
  const auto limited = [&](rlim_t size, auto body) {
    return in_child([&] {
      rlimit lim{size, size};
      if (setrlimit(RLIMIT_FSIZE, &lim) != 0) return 3;
      std::signal(SIGXFSZ, SIG_IGN);
      return body();
    });
  };
  const rlim_t results_size = static_cast<rlim_t>(fs::file_size(file));
  CHECK(limited(results_size, [&] {
          try {
            run_fake(plan, out);
          } catch (const file_write_error& e) {
            std::fprintf(stderr, "expected: %s\n", e.what());
            return std::string(e.what()).find("File too large") != std::string::npos ? 0 : 1;
          }
          return 2;
        }) == 0);
  CHECK(slurp(file) == text);  // every earlier line kept
  CHECK(count_prefixed(out, "results.jsonl.tmp.") == 0);
  // The report: the same error, nothing lost.
  CHECK(limited(100, [&] {
          try {
            ReportOptions o;
            o.plots = false;
            o.analyse.starts = 2;
            o.analyse.bootstrap = 0;
            write_report(out, o);
          } catch (const file_write_error& e) {
            std::fprintf(stderr, "expected: %s\n", e.what());
            return std::string(e.what()).find("File too large") != std::string::npos ? 0 : 1;
          } catch (const std::exception& e) {
            std::fprintf(stderr, "report: %s\n", e.what());
            return 4;
          }
          return 2;
        }) == 0);
  CHECK(slurp(file) == text);

  // A read-only folder (0555; the results file 0644, readable by anyone). Root (CAP_DAC_OVERRIDE)
  // writes there all the same, and CI runs as root: then the append is tried in a child that drops
  // to the user nobody (65534), as the checkpoint integrity test does. The child enters the folder
  // while still root and names the file relative to it, so that the folders above need not be open
  // to nobody: one it could not pass would fail the append with "Permission denied" as well, for
  // the wrong reason.
  const auto r_x = fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                   fs::perms::others_read | fs::perms::others_exec;
  fs::permissions(out, r_x);
  fs::permissions(file, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read | fs::perms::others_read);
  // A run without a line yet (the file's lines are in the order the runs finished, not the plan's):
  // one that has a line is refused as a duplicate before any write is tried.
  const auto lineless = std::find_if(plan.runs.begin(), plan.runs.end(),
                                     [&](const auto& run) { return text.find("\"" + run.id + "\"") == std::string::npos; });
  REQUIRE(lineless != plan.runs.end());
  const auto sixth = result_line(plan, *lineless, {{"val_loss", 3.0}});
  if (access(out.c_str(), W_OK) != 0) {
    CHECK_THROWS_WITH(append_result(file, sixth), Catch::Equals("cannot write " + file.string() + ": " + std::strerror(EACCES)));
  } else {
    const int rc = in_child([&] {
      if (chdir(out.c_str()) != 0 || setgid(65534) != 0 || setuid(65534) != 0) return 3;
      // nobody must read the file and must not write the folder, or the append below proves nothing.
      if (access(".", W_OK) == 0 || access("results.jsonl", R_OK) != 0) return 4;
      try {
        append_result("results.jsonl", sixth);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "expected: %s\n", e.what());
        return std::string(e.what()) == "cannot write results.jsonl: " + std::string(std::strerror(EACCES)) ? 0 : 1;
      }
      return 2;  // written
    });
    if (rc == 3) {
      WARN("the read-only folder check is skipped: this process writes into a 0555 folder (root) and cannot drop to the user nobody");
    } else {
      INFO("child: 1 another error, 2 no error, 4 nobody could write the folder or not read the file, -1 killed");
      CHECK(rc == 0);
    }
  }
  CHECK(slurp(file) == text);
  CHECK(count_prefixed(out, "results.jsonl.tmp.") == 0);
  fs::permissions(out, fs::perms::owner_all, fs::perm_options::add);

  // With room again the next run records both runs from runs/ID/result.json, nothing retrained.
  const RunSummary s = run_fake(plan, out);
  CHECK(s.recovered == 2);
  CHECK(s.trained == 0);
  CHECK(read_results(file).size() == 6);
  fs::remove_all(out);
}

TEST_CASE("reliability: the Slurm script forwards the warning signal and requeues its task when loopscale exits 75, not after scancel's TERM",
          "[sweep][reliability][slurm]") {
  const fs::path dir = fresh("rel_slurm");
  // Stand-ins: a program that stops with 75 on SIGUSR1 as loopscale does, and scontrol.
  spit(dir / "fake_loopscale", "#!/bin/sh\ntrap 'echo stopping; exit 75' USR1 TERM\necho \"$@\" > '" + (dir / "args").string() +
                                   "'\nwhile :; do sleep 0.05; done\n");
  spit(dir / "scontrol", "#!/bin/sh\necho \"$@\" >> '" + (dir / "scontrol.log").string() + "'\n");
  fs::permissions(dir / "fake_loopscale", fs::perms::owner_all);
  fs::permissions(dir / "scontrol", fs::perms::owner_all);
  SlurmOptions o;
  o.shards = 4;
  o.out = (dir / "sweep").string();
  o.spec_arg = "--preset smoke";
  o.program = (dir / "fake_loopscale").string();
  spit(dir / "job.sh", slurm_script(make_plan(preset("smoke")), o));
  // Array task `task` of job 77 runs the script with the stand-ins first on PATH; returns once the
  // stand-in loopscale has started (it writes its arguments).
  const auto start_task = [&dir](const char* task) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      setenv("PATH", (dir.string() + ":" + std::getenv("PATH")).c_str(), 1);
      setenv("SLURM_ARRAY_JOB_ID", "77", 1);
      setenv("SLURM_ARRAY_TASK_ID", task, 1);
      execl("/bin/bash", "bash", (dir / "job.sh").c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    for (int i = 0; i < 500 && !fs::exists(dir / "args"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return pid;
  };

  const pid_t pid = start_task("3");
  REQUIRE(fs::exists(dir / "args"));
  CHECK(slurp(dir / "args").find("--shard 3/4") != std::string::npos);
  kill(pid, SIGUSR1);  // what --signal=B:USR1@300 does: the batch shell only
  int status = 0;
  waitpid(pid, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 75);
  CHECK(slurp(dir / "scontrol.log") == "requeue 77_3\n");

  // scancel sends TERM to the batch shell (and to loopscale): the task stops with its state saved
  // and stays cancelled; requeueing itself would undo every scancel (found on a live cluster).
  fs::remove(dir / "args");
  const pid_t cancelled = start_task("2");
  REQUIRE(fs::exists(dir / "args"));
  kill(cancelled, SIGTERM);
  status = 0;
  waitpid(cancelled, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 75);
  CHECK(slurp(dir / "scontrol.log") == "requeue 77_3\n");  // no second requeue

  // `sweep slurm` makes the folder Slurm opens the logs in.
  const auto r = test::run_cli("sweep slurm --preset smoke --shards 2 --out " + (dir / "made").string());
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK(fs::is_directory(dir / "made"));
  fs::remove_all(dir);
}

namespace {

// Two tiny runs of the real engine, one thread (bit-identical on resume), about a second each.
nlohmann::json tiny_sweep_spec() {
  SweepSpec s;
  s.name = "interrupt-test";
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
  s.budgets = {{4e9, {1}}};
  s.train = {{"lr", 3e-3}, {"eval_tokens", 512}, {"threads", 1}, {"peak_flops", 1e11}, {"checkpoint_every", 20}};
  return s;
}

fs::path reliability_corpus() {
  const fs::path dir = fresh("rel_corpus");
  const std::string text = "the quick brown fox jumps over the lazy dog. what is one recurrence worth? ";
  std::vector<std::int32_t> train, val;
  for (int i = 0; i < 600; ++i)
    for (std::size_t k = 0; k < text.size(); ++k) train.push_back(static_cast<unsigned char>(text[(k * (i % 7 + 1)) % text.size()]));
  for (int i = 0; i < 30; ++i)
    for (unsigned char c : text) val.push_back(c);
  train::write_token_file((dir / "train.bin").string(), train, 256);
  train::write_token_file((dir / "val.bin").string(), val, 256);
  return dir;
}

std::map<std::string, double> losses_by_id(const fs::path& out) {
  std::map<std::string, double> m;
  for (const auto& j : read_lines(out / "results.jsonl")) REQUIRE(m.emplace(j.at("id"), j.at("loss").get<double>()).second);
  return m;
}

}  // namespace

TEST_CASE("reliability: sweep run stopped by SIGTERM, SIGINT or SIGUSR1 exits 75 and resumes to the uninterrupted results",
          "[sweep][reliability][signal]") {
  const fs::path dir = fresh("rel_signal");
  const fs::path data = reliability_corpus();
  spit(dir / "spec.json", tiny_sweep_spec().dump());
  const std::string args = "sweep run " + (dir / "spec.json").string() + " --data " + data.string() + " --out ";
  const auto t0 = std::chrono::steady_clock::now();
  const auto full = test::run_cli(args + (dir / "full").string());
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(full.out);
  REQUIRE(full.rc == 0);
  const auto want = losses_by_id(dir / "full");
  REQUIRE(want.size() == 2);

  // Whether a run in `out` has logged a step (the trainer flushes each line).
  const auto training = [](const fs::path& out) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(out / "runs", ec)) {
      const auto size = fs::file_size(e.path() / "log.jsonl", ec);
      if (!ec && size > 0) return true;
    }
    return false;
  };
  std::mt19937 rng(20261130);
  int stopped_runs = 0;  // rounds that exited 75 with a run's summary.json saying "interrupted"
  // Each signal at a random moment (in a run, between runs or too late), then SIGTERM as soon as
  // the first run has logged a step: a run is about a second of steps, each followed by the check
  // for a signal, so that round stops a run midway however loaded the machine. The random rounds
  // alone could all miss the runs and check no stopped run.
  for (const auto& [sig, in_run] : std::vector<std::pair<int, bool>>{{SIGTERM, false}, {SIGINT, false}, {SIGUSR1, false}, {SIGTERM, true}}) {
    const fs::path out = dir / ("part_" + std::to_string(sig) + (in_run ? "_in_run" : ""));
    // A random round: at a random moment within the first 70% of an uninterrupted sweep's time
    // after the sweep took its lock (its handlers are in place by then), in a run or between runs.
    const auto delay = std::chrono::duration<double>(in_run ? 0.0 : std::uniform_real_distribution<double>(0.0, 0.7)(rng) * seconds);
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      const std::string cmd = "exec " + std::string(LOOPSCALE_CLI) + " " + args + out.string() + " > " + out.string() + ".err 2>&1";
      execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
      _exit(127);
    }
    if (in_run) {
      // As long as an uninterrupted sweep takes to start its first run, with room for a busy machine.
      const auto limit = std::chrono::steady_clock::now() + std::chrono::duration<double>(std::max(60.0, 5 * seconds));
      while (!training(out) && std::chrono::steady_clock::now() < limit) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      if (!training(out)) {  // a sweep that never started a run fails here, saying so, and is not left running
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
      REQUIRE(training(out));
    } else {
      for (int i = 0; i < 2000 && !fs::exists(out / ".lock"); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::this_thread::sleep_for(delay);
    }
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    const std::string err = slurp(out.string() + ".err");
    INFO("signal " << sig << (in_run ? " once a run had logged a step" : " after " + std::to_string(delay.count()) + " s") << ": " << err);
    REQUIRE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 0 && !in_run) {
      WARN("the sweep finished before the signal (a loaded machine started it late); nothing to resume");
    } else {
      CHECK(WEXITSTATUS(status) == 75);
      CHECK(err.find("interrupted by " + signal_name(sig)) != std::string::npos);
      // The interrupted run has no results line; its log and summary say what happened. A signal
      // between runs leaves no such summary.
      std::size_t lines = fs::exists(out / "results.jsonl") ? read_lines(out / "results.jsonl").size() : 0;
      CHECK(lines < 2);
      int stopped = 0;
      for (const auto& e : fs::directory_iterator(out / "runs")) {
        if (!fs::exists(e.path() / "summary.json")) continue;
        const auto summary = nlohmann::json::parse(slurp(e.path() / "summary.json"));
        if (summary.at("status") != "interrupted") continue;
        ++stopped;
        CHECK(summary.at("signal") == signal_name(sig));
        const std::string log = slurp(e.path() / "log.jsonl");
        CHECK(log.find("{\"event\":\"interrupted\",\"signal\":\"" + signal_name(sig) + "\",\"step\":" +
                       std::to_string(summary.at("steps").get<int64>()) + "}\n") != std::string::npos);
      }
      CHECK(stopped <= 1);  // the sweep stops at the first
      if (in_run) CHECK(stopped == 1);
      stopped_runs += WEXITSTATUS(status) == 75 && stopped == 1;
      const auto again = test::run_cli(args + out.string());
      INFO(again.out);
      REQUIRE(again.rc == 0);
    }
    CHECK(losses_by_id(out) == want);  // every run once, bit-identical
  }
  REQUIRE(stopped_runs >= 1);
  fs::remove_all(dir);
}

TEST_CASE("reliability: sweep run reads a sharded corpus (data prepare's manifest) as training does, and names a folder that holds none",
          "[sweep][reliability][data]") {
  // `sweep run` once checked for train.bin and val.bin only, so the corpus docs/sweeps.md's Slurm
  // steps prepare (shards named in manifest.json) was refused before any run.
  const fs::path dir = fresh("rel_sharded");
  {
    std::ofstream docs(dir / "docs.jsonl");
    const std::string text = "the quick brown fox jumps over the lazy dog. what is one recurrence worth? ";
    for (int i = 0; i < 400; ++i) docs << nlohmann::json{{"text", std::to_string(i) + " " + text + text}}.dump() << '\n';
  }
  const auto prep = test::run_cli("data prepare --input " + (dir / "docs.jsonl").string() + " --val-fraction 0.1 --shard-tokens 16384 --quiet --out " +
                                  (dir / "corpus").string());
  INFO(prep.out);
  REQUIRE(prep.rc == 0);
  REQUIRE(fs::exists(dir / "corpus" / "manifest.json"));
  REQUIRE(!fs::exists(dir / "corpus" / "train.bin"));
  spit(dir / "spec.json", tiny_sweep_spec().dump());
  const auto run = test::run_cli("sweep run " + (dir / "spec.json").string() + " --data " + (dir / "corpus").string() + " --out " +
                                 (dir / "out").string());
  INFO(run.out);
  CHECK(run.rc == 0);
  CHECK(losses_by_id(dir / "out").size() == 2);

  fs::create_directories(dir / "empty");
  const auto none = test::run_cli("sweep run " + (dir / "spec.json").string() + " --data " + (dir / "empty").string() + " --out " +
                                  (dir / "out_none").string());
  CHECK(none.rc == 2);
  CHECK(test::count_lines(none.out) == 1);
  CHECK_THAT(none.out, Catch::Contains((dir / "empty").string()));
  CHECK(!fs::exists(dir / "out_none" / "results.jsonl"));
}
