// `loopscale train` and signals: SIGTERM, SIGINT or SIGUSR1 at a random step stop the run after
// that step with a checkpoint, exit 75 and a record in log.jsonl and summary.json, and --resume
// ends bit for bit where an uninterrupted run ends. A second `train` on the same --out is refused
// at once, naming the first; a dead writer's temporaries are removed.
#include <catch2/catch.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <sys/wait.h>
#include <unistd.h>

#include "../cli/run_cli.hpp"
#include "loopscale/train/trainer.hpp"
#include "loopscale/util/interrupt.hpp"
#include "test_files.hpp"

using namespace loopscale;
using namespace loopscale::train;
using loopscale::test::start_cli;
using loopscale::test::slurp;
using loopscale::test::temp_path;
namespace fs = std::filesystem;

namespace {

fs::path interrupt_corpus() {
  const fs::path dir = temp_path("corpus");
  fs::create_directories(dir);
  std::vector<std::int32_t> t;
  unsigned s = 1;
  while (t.size() < 60000) {
    s = s * 1103515245u + 12345u;
    for (char c : "the cat number " + std::to_string(s >> 20) + " sat on the mat.\n") t.push_back(static_cast<unsigned char>(c));
  }
  write_token_file((dir / "train.bin").string(), std::vector<std::int32_t>(t.begin(), t.begin() + 52000), 256);
  write_token_file((dir / "val.bin").string(), std::vector<std::int32_t>(t.begin() + 52000, t.end()), 256);
  return dir;
}

std::vector<nlohmann::json> log_lines(const fs::path& p) {
  std::vector<nlohmann::json> v;
  std::istringstream in(slurp(p));
  std::string line;
  while (std::getline(in, line))
    if (!line.empty()) v.push_back(nlohmann::json::parse(line, nullptr, false));
  return v;
}

// The log's step lines (the interruption's event line left out), without the wall-clock fields
// and the setup a process records on its first line (a resumed run has two such lines).
std::vector<nlohmann::json> steps_of(const fs::path& log) {
  std::vector<nlohmann::json> v;
  for (nlohmann::json j : log_lines(log)) {
    if (j.is_discarded() || j.contains("event")) continue;
    for (const char* k : {"seconds", "tokens_per_s", "mfu", "peak_flops", "peak_source", "isa", "gemm", "gemm_kernels", "threads", "thread_split", "backend", "device_name", "precision"}) j.erase(k);
    v.push_back(j);
  }
  return v;
}

// Waits until OUT/log.jsonl has `lines` lines (false: the child ended first).
bool wait_for_steps(pid_t pid, const fs::path& out, std::size_t lines) {
  for (int i = 0; i < 3000; ++i) {
    if (fs::exists(out / "log.jsonl") && log_lines(out / "log.jsonl").size() >= lines) return true;
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

const std::string args_of(const fs::path& data) {
  return "train --d-model 32 --heads 2 --depth 4 --prelude 1 --coda 1 --r 2 --batch 4 --seq-len 32 --threads 1 "
         "--tokens 19200 --eval-every 50 --eval-tokens 512 --checkpoint-every 40 --peak-flops 1e11 --data " +
         data.string();
}

}  // namespace

TEST_CASE("loopscale train: SIGTERM, SIGINT or SIGUSR1 at a random step exits 75, records it, and --resume ends bit-identical",
          "[train][cli][interrupt]") {
  const fs::path data = interrupt_corpus();
  const std::string args = args_of(data);
  const fs::path full = temp_path("full");
  const auto r = test::run_cli(args + " --out " + full.string());
  INFO(r.out);
  REQUIRE(r.rc == 0);
  const auto want = steps_of(full / "log.jsonl");
  REQUIRE(want.size() == 150);
  const auto want_summary = nlohmann::json::parse(slurp(full / "summary.json"));
  const auto want_params = load_checkpoint<float>(full / "checkpoint.bin").params;

  std::mt19937 rng(1130);
  int round = 0;
  for (const int sig : {SIGTERM, SIGINT, SIGUSR1, SIGTERM}) {
    ++round;
    const fs::path part = temp_path("part" + std::to_string(round)), err = part.string() + ".err";
    // A random step, between checkpoints or not; the last round sends the signal twice.
    const std::size_t at = std::uniform_int_distribution<std::size_t>(1, 110)(rng);
    const pid_t pid = start_cli(args + " --out " + part.string(), err.string());
    REQUIRE(wait_for_steps(pid, part, at));
    kill(pid, sig);
    if (round == 4) kill(pid, sig);  // a second signal while stopping: no harm
    int status = 0;
    waitpid(pid, &status, 0);
    const std::string said = slurp(err);
    INFO("round " << round << ", " << signal_name(sig) << " after log line " << at << ": " << said);
    REQUIRE(WIFEXITED(status));
    REQUIRE(WEXITSTATUS(status) == exit_interrupted);
    CHECK(said.find("loopscale: train: interrupted by " + signal_name(sig) + " after step ") != std::string::npos);
    const auto summary = nlohmann::json::parse(slurp(part / "summary.json"));
    CHECK(summary.at("status") == "interrupted");
    CHECK(summary.at("signal") == signal_name(sig));
    const int64 step = summary.at("steps").get<int64>();
    CHECK(step >= static_cast<int64>(at));
    CHECK(step < 150);
    const auto log = log_lines(part / "log.jsonl");
    CHECK(log.back() == nlohmann::json{{"event", "interrupted"}, {"signal", signal_name(sig)}, {"step", step}});
    CHECK(load_checkpoint<float>(part / "checkpoint.bin").meta.at("step").get<int64>() == step);

    const auto again = test::run_cli(args + " --resume --out " + part.string());
    INFO(again.out);
    REQUIRE(again.rc == 0);
    CHECK(steps_of(part / "log.jsonl") == want);
    const auto got = nlohmann::json::parse(slurp(part / "summary.json"));
    CHECK(got.at("status") == "done");
    CHECK(got.at("val_loss") == want_summary.at("val_loss"));
    CHECK(got.at("train_loss") == want_summary.at("train_loss"));
    CHECK(load_checkpoint<float>(part / "checkpoint.bin").params == want_params);  // the final parameters, bit for bit
    // The interruption stays on record in the log.
    CHECK(slurp(part / "log.jsonl").find("\"event\":\"interrupted\"") != std::string::npos);
    fs::remove_all(part);
    fs::remove(err);
  }
  fs::remove_all(full);
  fs::remove_all(data);
}

TEST_CASE("loopscale train: a second process on the same --out exits 2 at once naming the first, a dead writer's temporaries go",
          "[train][cli][lock]") {
  const fs::path data = interrupt_corpus();
  const std::string args = args_of(data);
  const fs::path out = temp_path("locked"), err = out.string() + ".err";
  const pid_t first = start_cli(args + " --out " + out.string(), err.string());
  REQUIRE(wait_for_steps(first, out, 2));
  // Held still, so that it is alive (and holds the lock) while the second one starts: its 150 steps
  // take under a second.
  kill(first, SIGSTOP);
  for (const char* resume : {"", " --resume"}) {
    const auto t0 = std::chrono::steady_clock::now();
    const auto second = test::run_cli(args + resume + " --out " + out.string());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    INFO(second.out);
    CHECK(second.rc == 2);
    CHECK(second.out.find(out.string() + "/ is in use by process " + std::to_string(first) + " (host ") != std::string::npos);
    CHECK(test::count_lines(second.out) == 1);
    CHECK(seconds < 5);  // at once: no training, no peak measurement
  }
  kill(first, SIGTERM);  // pending until it continues: it stops after the step it is in
  kill(first, SIGCONT);
  int status = 0;
  waitpid(first, &status, 0);
  REQUIRE(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == exit_interrupted);

  // A writer killed between writing its temporary and renaming it leaves NAME.tmp.PID behind; the
  // next owner of the folder removes it (a live process's is kept).
  const pid_t dead = fork();
  if (dead == 0) _exit(0);
  waitpid(dead, &status, 0);
  const fs::path stale = out / ("checkpoint.bin.tmp." + std::to_string(dead));
  const fs::path live = out / ("notes.tmp." + std::to_string(getpid()));
  std::ofstream(stale) << "torn";
  std::ofstream(live) << "mine";
  const auto r = test::run_cli(args + " --resume --out " + out.string());
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK_FALSE(fs::exists(stale));
  CHECK(fs::exists(live));
  fs::remove_all(out);
  fs::remove(err);
  fs::remove_all(data);
}
