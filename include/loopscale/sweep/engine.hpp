// The RunFn that trains a planned run with loopscale's own engine (train/trainer.hpp): the run's
// ModelSpec, batch (batch_tokens / seq_len sequences), context length and budget C in FLOPs, the
// sweep's seed and engine settings (SweepSpec::train), resumed from the run folder's checkpoint.
// The engine rounds the budget down to whole steps exactly as the plan does (training_length), so
// the planned steps are the trained steps. Kept apart from run.hpp so that the orchestration and
// its tests do not compile the engine.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include "loopscale/data/corpus.hpp"
#include "loopscale/eval/model_scorer.hpp"
#include "loopscale/eval/probes.hpp"
#include "loopscale/eval/run_model.hpp"
#include "loopscale/eval/score.hpp"
#include "loopscale/eval/validation.hpp"
#include "loopscale/sweep/launch.hpp"
#include "loopscale/sweep/run.hpp"
#include "loopscale/train/trainer.hpp"
#include "loopscale/util/atomic_file.hpp"
#include "loopscale/util/interrupt.hpp"

namespace loopscale::sweep {

// Training threads for a run whose step costs `step_flops` (training FLOPs per token times the
// tokens of a step), on `cores` cores: one thread below serial_step_flops, every core from there.
// A small step splits into parallel regions too short to pay for the second thread; a thread that
// waits on a descheduled one costs more still when the machine is shared. Measured with
// bench/train/threads_by_size.sh (docs/benchmarks.md, "Threads by model size": AMD EPYC Zen 4, 2
// cores, oneDNN, idle, two runs): two threads against one 0.68-0.69x at 0.34 GFLOP a step (d 32),
// 0.89-0.99x at 1.16 (d 64), 1.20-1.24x at 2.46 (d 96), 1.33-1.47x at 4.2 (d 128), 1.9x at 466
// (the acceptance model).
// That holds for threads that share each kernel of one model. Threads in lanes (train/lane_plan.hpp and
// thread_lanes.hpp: each its share of the batch through a model of its own) meet once per pass and pay
// at every size, so a run whose threads would form lanes gets every core.
inline constexpr double serial_step_flops = 2e9;
inline int auto_threads(double step_flops, int cores, bool lanes = false) {
  return lanes || step_flops >= serial_step_flops ? std::max(1, cores) : 1;
}

struct EngineOptions {
  // Training threads of every run; 0: the spec's train "threads" where it sets them, else chosen per
  // run by auto_threads from the run's step (all cores divided among the ranks).
  int threads = 0;
  // Checkpoints per run: about one per `flops_per_checkpoint` of training (1e12: half a minute
  // or so on two cores), at least 2 (a kill loses at most half of a short run) and at most 20
  // (a kill loses at most 5% of a long one). Each writes parameters and AdamW state with fsync,
  // so checkpointing tiny runs every few steps would cost more than it saves.
  double flops_per_checkpoint = 1e12;
  int64 min_checkpoints = 2, max_checkpoints = 20;
  // After training, each run is scored on the built-in probes (eval/probes.hpp) at its trained r,
  // this many items per task, and the scores go into its summary ("eval") and so into its results
  // line; 0: no evaluation. Scoring a run costs a few percent of training it (docs/eval.md).
  int64 eval_items = 50;
  // And its test-time recurrence curve (eval/validation.hpp, recurrence_curve_points: r_eval = 1, 2,
  // 4, ... 4r) on this many evenly spaced validation windows, the same for every run of the sweep,
  // so that the report can draw the curve of each r's largest model; 0: none. 32 windows of 256
  // tokens cost about 8 (1 + 2 + ... + 4r) / r forward passes of a 1,024-token batch.
  int64 curve_windows = 32;
  // Ranks per run: above 1, each run trains data-parallel under `launcher` (sweep/launch.hpp;
  // empty: default_launcher(), mpirun), `threads` threads per rank.
  int ranks = 1;
  std::string launcher;
  // Where each run trains: "host" (train::train on the CPU) or "cuda" through `train`, which the
  // program supplies (the library is headers only; the trainer instantiated with the CUDA backend
  // is compiled by nvcc in the program, examples/cli/device.hpp). A device run's threads and peak
  // are not the CPU's: neither is chosen nor measured here.
  std::string device = "host";
  std::function<train::TrainResult(const train::TrainConfig&, const train::ProgressFn&)> train;  // empty: train::train
};

// The built-in probes a sweep's runs are scored on: drawn once per sweep from its seed, each
// prompt within the sweep's context, the cloze lines from its corpus when that is byte-level
// (eval::builtin_probes leaves them out otherwise). The probes' text is bytes: another tokenizer
// scores the other tasks the same way, but for those it cannot score (evaluate_run leaves them out).
inline eval::Bundle sweep_probes(const SweepSpec& spec, const fs::path& data, int64 items) {
  return eval::builtin_probes({spec.seed, items, std::min<int64>(256, spec.seq_len), data}).bundle;
}

// Scores a trained run (eval::load_run of its folder) on `probes` at its trained r: per task and
// per axis (eval/score.hpp), with the seconds it took; on `threads` host threads, each scoring whole
// tasks with a scorer of its own (eval::evaluate_parallel: the results of one thread).
inline nlohmann::json evaluate_run(const eval::RunModel& model, const eval::Bundle& probes, std::uint64_t seed, int threads = 1) {
  if (!model.tokenizer) return {{"skipped", "the run's corpus has no tokenizer loopscale can read, so task text cannot be encoded"}};
  eval::EvalOptions opt;
  opt.seed = seed;
  opt.prefix = model.document_start();  // a packed corpus's BOS, before every prompt
  const auto t0 = std::chrono::steady_clock::now();
  eval::Bundle scorable = probes;  // without the tasks this run's tokenizer cannot score (repeat, under SentencePiece)
  const std::vector<eval::LeftOut> left_out = eval::leave_out_unscorable(scorable, *model.tokenizer, model.context(), opt);
  if (scorable.tasks.empty()) {
    nlohmann::json j = {{"skipped", "no built-in task can be scored with the run's tokenizer at its context"}};
    for (const eval::LeftOut& l : left_out) j["left_out"][l.label] = l.reason;
    return j;
  }
  const auto scorer = [&]() -> std::unique_ptr<eval::Scorer> { return std::make_unique<eval::ModelScorer<>>(model, model.spec.recur.r); };
  nlohmann::json j = eval::to_json(eval::evaluate_parallel(scorable, scorer, *model.tokenizer, opt, threads));
  for (const eval::LeftOut& l : left_out) j["left_out"][l.label] = l.reason;
  j["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  j["r_eval"] = model.spec.recur.r;
  return j;
}

// A trained run's test-time recurrence curve: validation loss and bits per byte at each r_eval of
// recurrence_curve_points(r) on `windows` windows of the corpus's val split, and the wall seconds
// it took. On `threads` host threads the r_eval points run side by side, each with a scorer of its
// own on one thread (the largest first), with the losses one thread gives.
inline nlohmann::json recurrence_curve(const eval::RunModel& model, const fs::path& data, int64 seq_len, int64 windows, int threads = 1) {
  // Only the points the model can run: a per-recurrence hyperconnection stops at its trained r, and
  // 4r of a deep sweep can pass the effective-depth limit (train::recurrence_fault).
  std::vector<int64> rs;
  for (const int64 r : eval::recurrence_curve_points(model.spec.recur.r))
    if (train::recurrence_fault(model.spec, r).empty()) rs.push_back(r);
  const auto n = static_cast<int64>(rs.size());
  std::vector<eval::ValidationResult> v(rs.size());
  std::vector<std::exception_ptr> failed(rs.size());
  const auto t0 = std::chrono::steady_clock::now();
#pragma omp parallel for schedule(dynamic, 1) num_threads(static_cast<int>(std::clamp<int64>(threads, 1, n)))
  for (int64 i = n - 1; i >= 0; --i) {
    const auto k = static_cast<std::size_t>(i);
    try {  // nothing may leave an OpenMP region by an exception
      const data::Corpus val = data::open_corpus(data, data::Split::val, data::Verify::headers);
      eval::ModelScorer<> scorer(model, rs[k]);
      v[k] = eval::validation_loss(scorer, val, seq_len, windows);
    } catch (...) {
      failed[k] = std::current_exception();
    }
  }
  for (const std::exception_ptr& f : failed)
    if (f) std::rethrow_exception(f);
  nlohmann::json points = nlohmann::json::array();
  for (std::size_t k = 0; k < rs.size(); ++k)
    points.push_back({{"r_eval", rs[k]}, {"loss", v[k].loss}, {"bpb", std::isfinite(v[k].bpb) ? nlohmann::json(v[k].bpb) : nlohmann::json(nullptr)}});
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return {{"r", model.spec.recur.r}, {"windows", windows}, {"seq_len", seq_len}, {"points", points}, {"seconds", seconds}};
}

// Whether `accum` micro-batches per rank and step split the spec's batch evenly over `ranks` into
// forward/backward passes of at most micro_batch_tokens, the pass its memory plan counts (plan.hpp).
inline bool accum_fits(const SweepSpec& spec, int ranks, int64 accum) {
  const int64 batch = spec.batch_tokens / spec.seq_len, chunks = std::max(1, ranks) * accum;
  return accum >= 1 && batch % chunks == 0 && (batch / chunks) * spec.seq_len <= spec.micro_batch_tokens;
}

// Micro-batches per rank and step (train::TrainConfig::accum, unless the spec's train object sets
// one that fits): the fewest that fit (accum_fits). The paper preset's batch of 128 sequences in
// passes of 4 is 32 of them on one process and 4 on 8 ranks, as the paper's code accumulates 2^18
// tokens from its device batches.
inline int64 accum_for(const SweepSpec& spec, int ranks) {
  const int64 batch = spec.batch_tokens / spec.seq_len;
  for (int64 a = 1; a <= batch; ++a)
    if (accum_fits(spec, ranks, a)) return a;
  throw sweep_error(fmt::format("sweep: its batch of {} sequences ({} tokens) does not split evenly over {} ranks", batch, spec.batch_tokens,
                                std::max(1, ranks)));
}

// The engine's configuration for one planned run on `ranks` processes.
inline train::TrainConfig train_config(const SweepSpec& spec, const PlannedRun& run, const fs::path& dir, const fs::path& data, int ranks = 1) {
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
  // A spec's own train.accum (specs written before the sweep set it) stays when its passes fit.
  if (spec.train.contains("accum")) {
    if (!accum_fits(spec, ranks, c.accum))
      throw sweep_error(fmt::format("sweep spec: train.accum {} does not split the batch of {} sequences over {} rank(s) into whole passes of at "
                                    "most {} (micro_batch_tokens); remove it, and the sweep chooses", c.accum, c.batch, std::max(1, ranks),
                                    spec.micro_batch_tokens / spec.seq_len));
  } else {
    c.accum = accum_for(spec, ranks);
  }
  c.flops = run.budget;
  c.tokens = 0;
  c.seed = spec.seed;
  c.data = data.string();
  c.out = dir.string();
  c.resume = true;
  return c;
}

// Trains one run on o.ranks ranks: its config goes to RUN/train_config.json, `LAUNCHER -n RANKS
// loopscale train --config` trains it (data-parallel, rank 0 writing the run folder), and its
// summary.json is the result. Exit 75 (stopped with a checkpoint) stops the sweep like a signal.
inline nlohmann::json train_on_ranks(const train::TrainConfig& c, const RunRequest& req, const EngineOptions& o) {
  fs::create_directories(req.dir);
  const fs::path config = req.dir / "train_config.json";
  write_file_atomic(config, nlohmann::json(c).dump(2) + "\n");
  std::vector<std::string> argv = launcher_words(o.launcher);
  const std::string launcher = fmt::format("{}", fmt::join(argv, " "));
  for (const std::string& a : {std::string("-n"), std::to_string(o.ranks), this_program(), std::string("train"),
                               std::string("--config"), config.string()})
    argv.push_back(a);
  const int rc = run_forwarding_stop(argv);
  if (rc == exit_interrupted)
    throw interrupted_error(interrupt_signal() != 0 ? interrupt_signal() : SIGUSR1,
                            fmt::format("sweep: run {} stopped on its {} ranks with a checkpoint; run the sweep again to resume", req.run->id, o.ranks));
  if (rc != 0)
    throw std::runtime_error(fmt::format("run {}: `{} -n {} ... train` exited with {} (its ranks' messages are above)", req.run->id,
                                         launcher, o.ranks, rc));
  std::ifstream in(req.dir / "summary.json");
  nlohmann::json s = nlohmann::json::parse(in, nullptr, false);
  if (s.is_discarded() || !s.is_object() || s.value("status", "") != "done")
    throw std::runtime_error(fmt::format("run {}: the ranks exited 0 but {} holds no finished run", req.run->id, (req.dir / "summary.json").string()));
  for (const char* k : {"config", "flops_per_token", "memory_estimate"}) s.erase(k);  // as TrainResult::json() has it, plus the ranks
  return s;
}

inline RunFn engine_run_fn(const EngineOptions& o = {}) {
  auto peaks = std::make_shared<std::map<int, double>>();  // per thread count, measured once per sweep call
  auto probes = std::make_shared<std::optional<eval::Bundle>>();  // drawn once per sweep call
  return [o, peaks, probes](const RunRequest& req) -> nlohmann::json {
    train::TrainConfig c = train_config(*req.spec, *req.run, req.dir, req.data, o.ranks);
    c.device = o.device;
    const bool host = o.device == "host";
    if (!host && !o.train && o.ranks == 1) throw sweep_error("sweep: device " + o.device + " needs the program's trainer for it");
    if (!host) {
      if (o.threads > 0) c.threads = o.threads;
    } else if (o.threads > 0) {
      c.threads = o.threads;
    } else if (!req.spec->train.contains("threads")) {
      const int cores = std::max(1, omp_get_num_procs() / std::max(1, o.ranks));
      const int64 chunks = static_cast<int64>(std::max(1, o.ranks)) * c.accum;
      const int64 micro = c.batch / chunks;
      const bool lanes = c.batch % chunks == 0 && (c.thread_split == "batch" ? cores > 1 && train::detail::why_no_lanes(micro, cores, true).empty()
                                                                             : c.thread_split == "auto" && train::detail::auto_lanes(micro, cores, true));
      c.threads = auto_threads(req.run->flops_per_token * static_cast<double>(req.spec->batch_tokens), cores, lanes);
    }
    if (c.checkpoint_every == 0) {
      const double run_flops = req.run->flops_per_token * static_cast<double>(req.run->steps * req.spec->batch_tokens);
      const int64 n = std::clamp<int64>(static_cast<int64>(run_flops / o.flops_per_checkpoint), o.min_checkpoints, o.max_checkpoints);
      c.checkpoint_every = std::max<int64>(1, req.run->steps / n);
    }
    nlohmann::json summary;
    if (o.ranks > 1) {
      summary = train_on_ranks(c, req, o);  // each rank measures its own peak
    } else {
      if (c.peak_flops == 0 && host) {
        double& peak = (*peaks)[c.threads];
        if (peak == 0) peak = train::measure_peak_flops(c.threads);
        c.peak_flops = peak;
      }
      const train::ProgressFn progress = [&](const train::TrainProgress& p) {
        if (req.progress) req.progress({p.step, p.steps, p.loss, p.tokens_per_s});
        return true;
      };
      const train::TrainResult r = o.train ? o.train(c, progress) : train::train(c, progress);
      // A signal (util/interrupt.hpp) stopped the run after a checkpoint: the sweep stops too, and
      // the run gets no results line; the next `sweep run` resumes it.
      if (r.status == "interrupted") throw interrupted_error(interrupt_signal(), fmt::format("sweep: run {} {}", req.run->id, r.message));
      if (r.status != "done")
        throw std::runtime_error(fmt::format("run {} {}: {}", req.run->id, r.status, r.message));
      summary = r.json();
    }
    if (o.eval_items == 0 && o.curve_windows == 0) return summary;
    const eval::RunModel model = eval::load_run(req.dir);  // read once for the probes and the curve
    // The run's host threads score side by side, each with a model of its own (as thread lanes train).
    const int eval_threads = host ? std::max(1, c.threads) : 1;
    if (o.eval_items > 0) {
      if (!*probes) *probes = sweep_probes(*req.spec, req.data, o.eval_items);
      summary["eval"] = (*probes)->tasks.empty()
                            ? nlohmann::json{{"skipped", fmt::format("no built-in probe fits in the sweep's context of {} tokens", req.spec->seq_len)}}
                            : evaluate_run(model, **probes, req.spec->seed, eval_threads);
    }
    if (o.curve_windows > 0) summary["recurrence_curve"] = recurrence_curve(model, req.data, req.spec->seq_len, o.curve_windows, eval_threads);
    return summary;
  };
}

}  // namespace loopscale::sweep
