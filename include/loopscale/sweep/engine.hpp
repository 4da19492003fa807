// The RunFn that trains a planned run with loopscale's own engine (train/trainer.hpp): the run's
// ModelSpec, batch (batch_tokens / seq_len sequences), context length and budget C in FLOPs, the
// sweep's seed and engine settings (SweepSpec::train), resumed from the run folder's checkpoint.
// The engine rounds the budget down to whole steps exactly as the plan does (training_length), so
// the planned steps are the trained steps. Kept apart from run.hpp so that the orchestration and
// its tests do not compile the engine.
#pragma once

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "loopscale/sweep/run.hpp"
#include "loopscale/train/trainer.hpp"
#include "loopscale/util/interrupt.hpp"

namespace loopscale::sweep {

struct EngineOptions {
  int threads = 0;  // 0: every core
  // Checkpoints per run: about one per `flops_per_checkpoint` of training (1e12: half a minute
  // or so on two cores), at least 2 (a kill loses at most half of a short run) and at most 20
  // (a kill loses at most 5% of a long one). Each writes parameters and AdamW state with fsync,
  // so checkpointing tiny runs every few steps would cost more than it saves.
  double flops_per_checkpoint = 1e12;
  int64 min_checkpoints = 2, max_checkpoints = 20;
};

// The engine's configuration for one planned run.
inline train::TrainConfig train_config(const SweepSpec& spec, const PlannedRun& run, const fs::path& dir, const fs::path& data) {
  nlohmann::json j = spec.train;
  for (const char* k : {"spec", "batch", "seq_len", "tokens", "flops", "data", "out", "seed", "resume"})
    if (j.contains(k)) throw sweep_error(fmt::format("sweep spec: train.{} is set by the sweep itself; remove it", k));
  train::TrainConfig c;
  try {
    c = train::config_from_json(j);
  } catch (const train::config_error& e) {
    throw sweep_error(std::string("sweep spec: train: ") + e.what());
  }
  c.spec = run.model;
  c.seq_len = spec.seq_len;
  c.batch = spec.batch_tokens / spec.seq_len;
  c.flops = run.budget;
  c.tokens = 0;
  c.seed = spec.seed;
  c.data = data.string();
  c.out = dir.string();
  c.resume = true;
  return c;
}

inline RunFn engine_run_fn(const EngineOptions& o = {}) {
  auto peak = std::make_shared<double>(0.0);  // measured once per sweep call, not once per run
  return [o, peak](const RunRequest& req) -> nlohmann::json {
    train::TrainConfig c = train_config(*req.spec, *req.run, req.dir, req.data);
    if (o.threads > 0) c.threads = o.threads;
    if (c.checkpoint_every == 0) {
      const double run_flops = req.run->flops_per_token * static_cast<double>(req.run->steps * req.spec->batch_tokens);
      const int64 n = std::clamp<int64>(static_cast<int64>(run_flops / o.flops_per_checkpoint), o.min_checkpoints, o.max_checkpoints);
      c.checkpoint_every = std::max<int64>(1, req.run->steps / n);
    }
    if (c.peak_flops == 0) {
      if (*peak == 0) *peak = train::measure_peak_flops(c.threads);
      c.peak_flops = *peak;
    }
    const train::TrainResult r = train::train(c, [&](const train::TrainProgress& p) {
      if (req.progress) req.progress({p.step, p.steps, p.loss, p.tokens_per_s});
      return true;
    });
    // A signal (util/interrupt.hpp) stopped the run after a checkpoint: the sweep stops too, and
    // the run gets no results line; the next `sweep run` resumes it.
    if (r.status == "interrupted") throw interrupted_error(interrupt_signal(), fmt::format("sweep: run {} {}", req.run->id, r.message));
    if (r.status != "done")
      throw std::runtime_error(fmt::format("run {} {}: {}", req.run->id, r.status, r.message));
    return r.json();
  };
}

}  // namespace loopscale::sweep
