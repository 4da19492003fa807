// A test double for the training engine: a RunFn that "trains" by sleeping per step, keeps its own
// checkpoint (the step reached) in the run folder exactly as a real engine would, resumes from it,
// and returns a summary whose val_loss is a known function of the run. Every executed step is
// appended to steps.log, so a test can see how much work a kill repeated.
#pragma once

#include <chrono>
#include <cmath>
#include <fstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "loopscale/sweep/results.hpp"
#include "loopscale/sweep/run.hpp"

namespace loopscale::test {

// The loss the fake engine reports: the iso-depth law at the paper's constants (phi 0.459).
inline double fake_loss(const sweep::PlannedRun& r, double tokens) {
  const double n = static_cast<double>(r.acct.params.once) + std::pow(static_cast<double>(r.r), 0.459) * static_cast<double>(r.acct.params.rec);
  return 1.56773 + 28.027 * std::pow(n, -0.19924) + 915.82 * std::pow(tokens, -0.36863);
}

struct FakeEngine {
  std::chrono::microseconds per_step{1000};
  int checkpoint_every = 5;

  nlohmann::json operator()(const sweep::RunRequest& req) const {
    const sweep::PlannedRun& run = *req.run;
    const auto ckpt = req.dir / "checkpoint.json";
    long step = 0, resumes = 0;
    if (std::ifstream in{ckpt}) {
      const auto j = nlohmann::json::parse(in);
      step = j.at("step").get<long>();
      resumes = j.at("resumes").get<long>() + 1;
    }
    std::ofstream log(req.dir / "steps.log", std::ios::app);
    while (step < run.steps) {
      std::this_thread::sleep_for(per_step);
      ++step;
      log << step << "\n" << std::flush;
      if (step % checkpoint_every == 0 || step == run.steps)
        sweep::write_file_atomic(ckpt, nlohmann::json{{"step", step}, {"resumes", resumes}}.dump());
      if (req.progress) req.progress({step, run.steps, 3.0, 1000.0});
    }
    const double tokens = static_cast<double>(run.steps) * static_cast<double>(req.spec->batch_tokens);
    return {{"val_loss", fake_loss(run, tokens)}, {"tokens", tokens}, {"steps", run.steps}, {"resumes", resumes}};
  }
};

}  // namespace loopscale::test
