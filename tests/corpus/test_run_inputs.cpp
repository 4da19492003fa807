// Bad input in a run folder and in a run's settings, on the real corpus (tests/real_corpus.hpp):
// each is refused before any work with one line, exit 2, and leaves the folder as it was, or (a
// signal) stops the run cleanly. Found by a hunt for bad input on 5 Dec 2026, each one a finished
// run lost, silently wrong files, or a process only SIGKILL could stop.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "cli/run_cli.hpp"
#include "corpus/tiny_run.hpp"
#include "loopscale/train/trainer.hpp"
#include "loopscale/util/interrupt.hpp"
#include "real_corpus.hpp"
#include "test_files.hpp"

using namespace loopscale;
using namespace loopscale::test;

namespace run_inputs_test {

namespace fs = std::filesystem;

// The model of the CLI cases: 156 steps of 4 x 32 tokens, a few seconds on one thread.
std::string cli_args(const fs::path& data) {
  return "train --data " + data.string() +
         " --d-model 32 --head-dim 16 --prelude 1 --coda 1 --recur-layers 1 --r 2 --depth 4 --seq-len 32 --batch 4 --tokens 2e4 "
         "--threads 1 --peak-flops 1e11";
}

// `loopscale ARGS` is refused: exit 2 and one line that contains `what`.
void refused(const std::string& args, const std::string& what) {
  const CliResult r = run_cli(args);
  INFO(args << "\n" << r.out);
  CHECK(r.rc == 2);
  CHECK(count_lines(r.out) == 1);
  CHECK_THAT(r.out, Catch::Contains(what));
}

// A tiny run of the library (tests/corpus/tiny_run.hpp: 12 steps), stopped by its callback after
// `stop` steps (0: to the end), with a checkpoint every 2 steps.
train::TrainResult tiny_train(const fs::path& out, std::int64_t stop = 0) {
  train::TrainConfig c = tiny_run(real_corpus(), out, 256);
  c.checkpoint_every = 2;
  c.resume = true;
  return train::train(c, [stop](const train::TrainProgress& p) { return stop == 0 || p.step < stop; });
}

train::TrainConfig tiny_config(const fs::path& out) {
  train::TrainConfig c = tiny_run(real_corpus(), out, 256);
  c.checkpoint_every = 2;
  c.resume = true;
  return c;
}

std::size_t lines_of(const fs::path& p) {
  std::ifstream f(p);
  std::size_t n = 0;
  for (std::string l; std::getline(f, l);) n += !l.empty();
  return n;
}

// The exit status of `pid` within `seconds`, or -1 (then it is killed).
int exit_within(pid_t pid, double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  int status = 0;
  while (std::chrono::steady_clock::now() < end) {
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &status, 0);
  return -1;
}

// checkpoint.bin rewritten as a version 2 checkpoint (no checksum) whose JSON `change` edits.
template <class F>
void rewrite_as_v2(const fs::path& p, F change) {
  train::Checkpoint<float> c = train::load_checkpoint<float>(p);
  change(c.meta);
  train::save_checkpoint<float>(p, c.meta, c.params, c.m, c.v);
  std::string b = slurp(p);
  b.resize(b.size() - 8);  // version 2: no checksum trailer
  const std::uint32_t two = 2;
  std::memcpy(b.data() + 8, &two, 4);
  write_text(p, b);
}

}  // namespace run_inputs_test

using namespace run_inputs_test;

TEST_CASE("run inputs: an eval_tokens past the validation split is refused by train and --dry-run before a run folder is written",
          "[corpus][training][inputs]") {
  const fs::path data = real_corpus(), out = temp_path("evaltokens");
  // Before: the dry run said yes, the run trained all 156 steps and then died of std::bad_alloc in
  // its final validation (3e12 losses), exit 1, with no checkpoint and no summary.
  for (const std::string extra : {"", " --dry-run", " --eval-every 1"})
    refused(cli_args(data) + " --eval-tokens 99999999999999 --out " + out.string() + extra, "eval_tokens (99999999999999) asks for");
  CHECK_FALSE(fs::exists(out));
  // The bound: the split's distinct windows (one per start), rounded up to whole batches.
  const data::Corpus val = data::open_corpus(data, data::Split::val, data::Verify::headers);
  const std::int64_t most = train::max_validation_windows(val, 32);
  CHECK(most == static_cast<std::int64_t>(val.tokens()) - 32);
  const std::int64_t limit = (most + 3) / 4 * 4 * 32;
  CHECK(train::validation_batches(limit, 4, 32, val) == (most + 3) / 4);
  CHECK_THROWS_WITH(train::validation_batches(limit + 4 * 32, 4, 32, val),
                    Catch::Contains("give at most " + std::to_string(limit) + " tokens"));
  // A split shorter than the default sample keeps it (the windows overlap, as they always did).
  const fs::path tiny = temp_dir("evaltokens_tiny");
  std::vector<std::int32_t> t(3000);
  for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<std::int32_t>(i * 7 % 256);
  data::write_token_file((tiny / "val.bin").string(), t, 256);
  const data::Corpus small = data::open_corpus(tiny, data::Split::val);
  const train::TrainConfig defaults;  // a named object: g++ 12 -O3 warns (maybe-uninitialized) about temporaries here
  CHECK(train::validation_batches(defaults.eval_tokens, 4, 32, small) == 1024);
  CHECK_THROWS_WITH(train::validation_batches(2 * defaults.eval_tokens, 4, 32, small), Catch::Contains("2968 distinct ones"));
  fs::remove_all(tiny);
}

TEST_CASE("run inputs: SIGTERM or SIGINT stops a resumed run in its final validation, exit 75", "[corpus][training][interrupt]") {
  // A validation of 40M tokens (within the split's bound) takes minutes: the run is stopped in it,
  // then resumed, which does nothing but that validation, and stopped again.
  const fs::path data = real_corpus(), out = temp_path("final_validation");
  const std::string args = cli_args(data) + " --eval-tokens 40000000 --out " + out.string();
  const fs::path err = out.string() + ".err";
  const pid_t first = start_cli(args, err.string());
  for (int i = 0; i < 3000 && lines_of(out / "log.jsonl") < 155; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  REQUIRE(lines_of(out / "log.jsonl") == 155);  // step 156 is written after its validation
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  kill(first, SIGTERM);
  REQUIRE(exit_within(first, 20) == exit_interrupted);
  INFO(slurp(err));
  REQUIRE(nlohmann::json::parse(slurp(out / "summary.json")).at("steps") == 156);
  for (const int sig : {SIGTERM, SIGINT}) {
    const pid_t again = start_cli(args + " --resume", err.string());
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
    const auto t0 = std::chrono::steady_clock::now();
    kill(again, sig);
    // Before: caught and ignored; the validation ran on, and only SIGKILL ended it.
    const int rc = exit_within(again, 20);
    const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(signal_name(sig) << ": " << slurp(err));
    CHECK(rc == exit_interrupted);
    CHECK(took < 5);
    const nlohmann::json summary = nlohmann::json::parse(slurp(out / "summary.json"));
    CHECK(summary.at("status") == "interrupted");
    CHECK(summary.at("signal") == signal_name(sig));
    CHECK(train::load_checkpoint<float>(out / "checkpoint.bin").meta.at("step") == 156);
  }
  fs::remove_all(out);
  fs::remove(err);
}

TEST_CASE("run inputs: a resume refuses a log.jsonl damaged before its last line and cuts only a torn one", "[corpus][training][inputs]") {
  const fs::path out = temp_path("damaged_log");
  REQUIRE(tiny_train(out, 6).status == "stopped");  // checkpoint at step 6, log lines 1..6
  const std::string log = slurp(out / "log.jsonl");
  REQUIRE(lines_of(out / "log.jsonl") == 6);
  std::vector<std::string> lines;
  {
    std::istringstream in(log);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  const auto join = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& l : v) s += l + "\n";
    return s;
  };
  // A damaged line in the middle (cut JSON, a step that is not a number, not an object): refused,
  // naming file:line, the log untouched. Before: the resume kept the lines before it and deleted
  // the rest, without a word.
  for (const std::string& bad : {std::string(R"({"step": 3, "loss": 3.1)"), std::string(R"({"step": "3", "loss": 3.1})"), std::string("[3]")}) {
    std::vector<std::string> v = lines;
    v[2] = bad;
    write_text(out / "log.jsonl", join(v));
    INFO(bad);
    CHECK_THROWS_WITH(train::train(tiny_config(out)), Catch::Contains((out / "log.jsonl").string() + ":3 is not a JSON object with a whole-number step"));
    CHECK(slurp(out / "log.jsonl") == join(v));
  }
  refused("train --config " + (out / "config.json").string() + " --resume", "log.jsonl:3 is not a JSON object");
  // The dry run refuses it too.
  refused("train --config " + (out / "config.json").string() + " --resume --dry-run", "log.jsonl:3 is not a JSON object");

  // A torn last line, and a damaged line among the lines after the checkpoint's step (trained
  // again): cut, the run resumes and ends with one line per step.
  nlohmann::json past = nlohmann::json::parse(lines[5]);
  past["step"] = 8;
  const std::string torn = R"({"step": 7, "lo)";
  for (const std::string& tail : {torn, torn + "\n" + past.dump() + "\n"}) {
    const std::string text = log + tail;
    const fs::path o2 = temp_path("damaged_log_tail");
    fs::copy(out, o2);
    write_text(o2 / "log.jsonl", text);
    REQUIRE(tiny_train(o2).status == "done");
    const std::string after = slurp(o2 / "log.jsonl");
    CHECK(after.substr(0, log.size()) == log);
    CHECK(lines_of(o2 / "log.jsonl") == 12);
    fs::remove_all(o2);
  }
  fs::remove_all(out);
}

TEST_CASE("run inputs: a damaged summary.json in a run folder without checkpoints is refused, not taken for an unfinished run",
          "[corpus][training][inputs]") {
  const fs::path out = temp_path("damaged_summary");
  REQUIRE(tiny_train(out).status == "done");
  fs::remove(out / "checkpoint.bin");
  fs::remove(out / "checkpoint.prev.bin");
  const std::string log = slurp(out / "log.jsonl");
  // Before: a status of another kind escaped as "[json.exception.type_error.302] ...", exit 1; a
  // torn summary was taken for "not finished" and the run trained again from step 1 over its log.
  for (const std::string s : {R"({"status": 5})", R"({"status": null})", R"({"status": true})", R"({"status": ["done"]})", R"({"status": "do)", "", "[]"}) {
    write_text(out / "summary.json", s);
    INFO(s);
    CHECK_THROWS_WITH(train::train(tiny_config(out)), Catch::Contains("summary.json is damaged"));
    CHECK(slurp(out / "log.jsonl") == log);
  }
  write_text(out / "summary.json", R"({"status": 5})");
  for (const std::string extra : {"", " --dry-run"})
    refused("train --config " + (out / "config.json").string() + " --resume" + extra, "summary.json is damaged");
  CHECK(slurp(out / "log.jsonl") == log);
  fs::remove_all(out);
}

TEST_CASE("run inputs: --dry-run refuses a mix_data the run refuses", "[corpus][training][inputs]") {
  const fs::path dir = temp_dir("dry_mix");
  const train::TrainConfig c0 = tiny_run(real_corpus(), dir / "run", 256);
  nlohmann::json j = c0;
  j["mix_data"] = (dir / "missing.bin").string();
  j["mix_frac"] = 0.5;
  write_text(dir / "cfg.json", j.dump());
  // Before: the dry run said yes (exit 0) and the run said "data: cannot open ...".
  for (const std::string extra : {" --dry-run", ""}) refused("train --config " + (dir / "cfg.json").string() + extra, "missing.bin");
  CHECK_FALSE(fs::exists(dir / "run"));
  fs::remove_all(dir);
}

TEST_CASE("run inputs: a version 2 checkpoint whose step, update count, seconds or batch split is impossible is refused, naming the field",
          "[corpus][training][inputs]") {
  const fs::path out = temp_path("v2_fields");
  REQUIRE(tiny_train(out, 6).status == "stopped");
  fs::remove(out / "checkpoint.prev.bin");
  const std::string good = slurp(out / "checkpoint.bin");
  struct Case {
    const char* key;
    nlohmann::json value;
    const char* says;
  };
  // Before: step 1000000 resumed as done with an MFU of 125309%, optimizer_steps -1 ended as "the
  // loss became NaN", step 0 trained the schedule again over trained parameters.
  const std::vector<Case> cases{{"step", 1000000, "its step 1000000 is outside the run's steps, 1 to 12"},
                                {"step", 0, "its step 0 is outside the run's steps, 1 to 12"},
                                {"optimizer_steps", -1, "its optimizer_steps -1 is not its step 6"},
                                {"seconds", -1e300, "its seconds -1e+300 is not a finite number of seconds >= 0"},
                                {"step_seconds", "x", "its step_seconds \"x\" is not a finite number"},
                                {"lanes", 0, "its lanes 0 is not a whole number >= 1"}};
  for (const Case& k : cases) {
    write_text(out / "checkpoint.bin", good);
    rewrite_as_v2(out / "checkpoint.bin", [&](nlohmann::json& m) { m[k.key] = k.value; });
    INFO(k.key);
    CHECK_THROWS_WITH(train::train(tiny_config(out)), Catch::Contains("checkpoint.bin is corrupt: " + std::string(k.says)));
  }
  refused("train --config " + (out / "config.json").string() + " --resume", "checkpoint.bin is corrupt: its lanes 0");
  // The same checkpoint as it was, in version 2, still resumes.
  write_text(out / "checkpoint.bin", good);
  rewrite_as_v2(out / "checkpoint.bin", [](nlohmann::json&) {});
  CHECK(tiny_train(out).status == "done");
  fs::remove_all(out);
}
