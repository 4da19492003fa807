// Driver of the kill-and-rerun test (kill_rerun.sh): runs the cpu-mini plan with the fake engine
// (0.4 ms per step, a checkpoint every 10 steps: cpu-mini has 44k steps, and each checkpoint is an
// fsync'd write), so the script can SIGKILL it at random moments and run it again; `partway` lists
// the runs a kill left with a checkpoint short of their end (the script records it after each
// kill); `verify` checks the end state against the kills; `merge` joins shard folders.
//   sweep_kill_driver run OUT [I/N]      sweep_kill_driver partway OUT
//   sweep_kill_driver verify OUT KILLS PARTWAY_FILE      sweep_kill_driver merge OUT IN...
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "fake_engine.hpp"
#include "loopscale/sweep/merge.hpp"
#include "loopscale/sweep/presets.hpp"

using namespace loopscale;

// The fake engine's checkpoint interval: a kill repeats at most this many steps (verify's bound).
constexpr int checkpoint_every = 10;

int run_main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s run OUT [I/N] | partway OUT | verify OUT KILLS PARTWAY_FILE | merge OUT IN...\n", argv[0]);
    return 2;
  }
  const std::string mode = argv[1];
  const sweep::Plan plan = sweep::make_plan(sweep::preset("cpu-mini"));
  const sweep::fs::path out = argv[2];
  if (mode == "run") {
    sweep::RunOptions opt;
    opt.out = out;
    opt.log = nullptr;
    if (argc > 3) opt.shard = sweep::parse_shard(argv[3]);
    test::FakeEngine engine;
    engine.per_step = std::chrono::microseconds(400);
    engine.checkpoint_every = checkpoint_every;
    const auto s = sweep::run_sweep(plan, opt, engine);
    std::printf("trained %zu recovered %zu already %zu\n", s.trained, s.recovered, s.already);
    return 0;
  }
  if (mode == "merge") {
    std::vector<sweep::fs::path> in(argv + 3, argv + argc);
    const auto m = sweep::merge_results(plan, in, out);
    std::printf("merged %zu runs from %zu files, %zu missing\n", m.runs, m.files, m.missing.size());
    return m.missing.empty() ? 0 : 1;
  }
  if (mode == "partway") {
    // "ID STEP" for each run whose checkpoint is short of its end: the kill just now left it
    // partway, so the next pass must resume it from that checkpoint (verify checks that it did).
    // Checkpoints are replaced atomically, so one read beside a running driver is whole.
    for (const auto& r : plan.runs) {
      std::ifstream in(sweep::run_dir(out, r) / "checkpoint.json");
      if (!in) continue;
      const long step = nlohmann::json::parse(in).at("step").get<long>();
      if (step < r.steps) std::printf("%s %ld\n", r.id.c_str(), step);
    }
    return 0;
  }
  if (mode == "verify") {
    // KILLS: the SIGKILLs the script sent for this folder; PARTWAY_FILE: partway's output after each.
    if (argc != 5) {
      std::fprintf(stderr, "usage: %s verify OUT KILLS PARTWAY_FILE\n", argv[0]);
      return 2;
    }
    const long kills = std::stol(argv[3]);
    std::set<std::string> partway;
    {
      std::ifstream in(argv[4]);
      if (!in) throw std::runtime_error(std::string("cannot read ") + argv[4]);
      std::string id;
      long step = 0;
      while (in >> id >> step) partway.insert(id);
    }
    std::map<std::string, int> count;
    for (const auto& j : sweep::read_lines(out / "results.jsonl")) count[j.at("id").get<std::string>()]++;
    int bad = 0;
    long repeated = 0, resumes = 0;
    const auto results = sweep::read_results(out / "results.jsonl");
    for (const auto& r : plan.runs) {
      if (count[r.id] != 1) {
        std::printf("FAIL: %s appears %d times\n", r.id.c_str(), count[r.id]);
        ++bad;
        continue;
      }
      const auto& line = *std::find_if(results.begin(), results.end(), [&](const auto& x) { return x.id == r.id; });
      const double want = test::fake_loss(r, static_cast<double>(r.steps) * static_cast<double>(plan.spec.batch_tokens));
      if (line.loss != want || line.sweep != plan.fingerprint) {
        std::printf("FAIL: %s has loss %.17g (want %.17g) sweep %s\n", r.id.c_str(), line.loss, want, line.sweep.c_str());
        ++bad;
      }
      // Every step ran at least once; a kill repeats at most the steps since the last checkpoint
      // (bounded over all runs below).
      std::ifstream log(sweep::run_dir(out, r) / "steps.log");
      std::vector<char> ran(static_cast<std::size_t>(r.steps) + 1, 0);
      long n = 0, s = 0;
      while (log >> s) {
        ++n;
        if (s >= 1 && s <= r.steps) ran[static_cast<std::size_t>(s)] = 1;
      }
      const auto missed = std::find(ran.begin() + 1, ran.end(), 0);
      if (missed != ran.end()) {
        std::printf("FAIL: %s never ran step %ld of %ld\n", r.id.c_str(), static_cast<long>(missed - ran.begin()), static_cast<long>(r.steps));
        ++bad;
      }
      repeated += n - r.steps;
      const long res = line.line.at("summary").at("resumes").get<long>();
      resumes += res;
      // A run a kill left with a checkpoint short of its end must have resumed from it: one that
      // started over (its folder wiped, its checkpoint ignored) reports no resume.
      if (partway.count(r.id) && res < 1) {
        std::printf("FAIL: %s was left partway by a kill but its summary says it never resumed from a checkpoint\n", r.id.c_str());
        ++bad;
      }
    }
    if (count.size() != plan.runs.size()) {
      std::printf("FAIL: %zu distinct ids in results, %zu planned\n", count.size(), plan.runs.size());
      ++bad;
    }
    if (partway.empty()) {
      std::printf("FAIL: no kill left a run partway, so nothing here tested a resume\n");
      ++bad;
    }
    if (repeated > kills * checkpoint_every) {
      std::printf("FAIL: %ld steps repeated after %ld kills: more than %d (the steps since a checkpoint) per kill\n", repeated, kills,
                  checkpoint_every);
      ++bad;
    }
    std::printf("%s: %zu runs, each once; %ld kills, %zu runs left partway; %ld resumes from a checkpoint; %ld steps repeated (at most %ld)\n",
                bad ? "FAILED" : "ok", plan.runs.size(), kills, partway.size(), resumes, repeated, kills * checkpoint_every);
    return bad ? 1 : 0;
  }
  std::fprintf(stderr, "unknown mode %s\n", mode.c_str());
  return 2;
}

int main(int argc, char** argv) {
  try {
    return run_main(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sweep_kill_driver: %s\n", e.what());
    return 1;
  }
}
