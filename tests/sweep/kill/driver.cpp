// Driver of the kill-and-rerun test (kill_rerun.sh): runs the cpu-mini plan with the fake engine
// (0.4 ms per step, a checkpoint every 10 steps: cpu-mini has 44k steps, and each checkpoint is an
// fsync'd write), so the script can SIGKILL it at random moments and run it again; `verify`
// checks the end state; `merge` joins shard folders.
//   sweep_kill_driver run OUT [I/N]      sweep_kill_driver verify OUT      sweep_kill_driver merge OUT IN...
#include <chrono>
#include <cstdio>
#include <iostream>
#include <map>

#include "fake_engine.hpp"
#include "loopscale/sweep/merge.hpp"
#include "loopscale/sweep/presets.hpp"

using namespace loopscale;

int run_main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s run OUT [I/N] | verify OUT | merge OUT IN...\n", argv[0]);
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
    engine.checkpoint_every = 10;
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
  if (mode == "verify") {
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
      // Every step ran at least once; a kill repeats at most the steps since the last checkpoint.
      std::ifstream log(sweep::run_dir(out, r) / "steps.log");
      long n = 0, s = 0, max = 0;
      while (log >> s) ++n, max = std::max(max, s);
      if (max != r.steps) {
        std::printf("FAIL: %s reached step %ld of %ld\n", r.id.c_str(), max, static_cast<long>(r.steps));
        ++bad;
      }
      repeated += n - r.steps;
      resumes += line.line.at("summary").at("resumes").get<long>();
    }
    if (count.size() != plan.runs.size()) {
      std::printf("FAIL: %zu distinct ids in results, %zu planned\n", count.size(), plan.runs.size());
      ++bad;
    }
    std::printf("%s: %zu runs, each once; %ld resumes from a checkpoint; %ld steps repeated after kills\n",
                bad ? "FAILED" : "ok", plan.runs.size(), resumes, repeated);
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
