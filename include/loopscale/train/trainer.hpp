// One training run, start to finish or resumed: the function `train(config, progress)` that the
// `loopscale train` command, a sweep runner and a user's own program all call.
//
// A run lives in its folder (config.out):
//   config.json      the TrainConfig of the run, its corpus's tokenizer ("tokenizer") and digest ("corpus"), written at the start
//   log.jsonl        one JSON line per step: step, tokens, loss, lr, grad_norm, tokens_per_s, mfu,
//                    seconds (and val_loss, val_bpb on evaluation steps; with MoE layers a "moe"
//                    object: balance_loss, z_loss, drop_rate, max_min_load and each layer's
//                    per-expert load over all calls of the step)
//   checkpoint.bin   parameters, optimiser state (moments or momentum, MuonH's initial norms, step
//                    count), the recipe, step (= data position), seed; atomic and checksummed
//                    (checkpoint.hpp)
//   checkpoint.prev.bin  the checkpoint before it, kept when a new one replaces it
//   summary.json     the result (TrainResult::json()), written atomically at the end
//   .lock            flock'd by the process training the run: a second one is refused, naming
//                    the first (util/file_lock.hpp)
// A signal (SIGTERM, SIGINT, SIGUSR1) under an InterruptGuard (util/interrupt.hpp) ends the run
// after the current step with a checkpoint, an {"event":"interrupted"} line in log.jsonl and status
// "interrupted" in summary.json.
// Resuming reloads checkpoint.bin, cuts log.jsonl back to the checkpoint's step and continues; the
// losses are then bit-identical to an uninterrupted run with the same thread count.
//
// A run follows a recipe (TrainConfig::recipe): train_config.hpp says what each one chooses.
//
// Data parallelism: train(config, progress, comm) with a Communicator of N processes (an
// MpiCommunicator, train/dist/mpi.hpp, under mpirun or srun) trains one model on N ranks. Every
// rank holds the whole model and optimiser; each computes its 1/N of the batch (as config.accum
// micro-batches), the gradients are summed over the ranks (config.reduction) and every rank takes
// the same optimiser step (replicated, not sharded), so the ranks hold the same bits throughout,
// which each checkpoint verifies (a checksum of parameters and optimiser state from every rank).
// Rank 0 alone writes the run folder. A signal to any rank stops all of them after the same step;
// a failure on one rank ends the job on all of them. docs/scaling-out.md.
//
// Everything that can be wrong with the input (spec, numbers, data files, memory) is checked and
// reported as a config_error (or corpus_error / spec_error, all std::invalid_argument) before the
// first step.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <sys/resource.h>

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "loopscale/account/flops.hpp"
#include "loopscale/account/memory.hpp"
#include "loopscale/data/checksum.hpp"
#include "loopscale/spec/spec_json.hpp"
#include "loopscale/train/checkpoint.hpp"
#include "loopscale/train/data.hpp"
#include "loopscale/train/dist/communicator.hpp"
#include "loopscale/train/lane_plan.hpp"
#include "loopscale/train/model.hpp"
#include "loopscale/train/backend/precision.hpp"
#include "loopscale/train/backend/vector_ops.hpp"
#include "loopscale/train/optim.hpp"
#include "loopscale/train/thread_lanes.hpp"
#include "loopscale/train/train_config.hpp"
#include "loopscale/util/atomic_file.hpp"
#include "loopscale/util/thread_limit.hpp"
#include "loopscale/util/file_lock.hpp"
#include "loopscale/util/interrupt.hpp"
#include "loopscale/util/json_number.hpp"
#include "loopscale/util/json_parse.hpp"
#include "loopscale/util/names.hpp"
#include "loopscale/util/regular_file.hpp"
#include "loopscale/util/extern_templates.hpp"

namespace loopscale::train {

// Reported after every step (and after each evaluation, with the validation numbers set).
struct TrainProgress {
  int64 step = 0, steps = 0, tokens = 0;
  double loss = 0, lr = 0, grad_norm = 0, tokens_per_s = 0, mfu = 0, seconds = 0;
  std::optional<double> val_loss, val_bpb;
  std::optional<double> moe_max_min_load, moe_drop_rate;  // with MoE layers: worst layer's max/min load, drop rate
};
// Return false to stop the run early (it checkpoints first, so it can be resumed).
using ProgressFn = std::function<bool(const TrainProgress&)>;

struct TrainResult {
  std::string status;   // "done", "stopped" (by the callback), "interrupted" (by a signal) or "diverged" (NaN/Inf loss)
  std::string signal;   // with "interrupted": "SIGTERM", "SIGINT" or "SIGUSR1" (util/interrupt.hpp)
  std::string message;  // one line saying what happened
  double val_loss = NAN, val_bpb = NAN, train_loss = NAN;
  int64 steps = 0, tokens = 0, params = 0, resumed_from = -1;
  double flops = 0, seconds = 0, tokens_per_s = 0, mfu = 0, peak_flops = 0;
  std::string peak_source;  // what peak_flops is: "given", or "measured avx512f x16" (backend/host.hpp, peak_isa)
  int64 peak_rss_bytes = 0, memory_estimate_bytes = 0;
  nlohmann::json moe;  // with MoE layers: the last step's routing (as in log.jsonl) and the selection biases
  nlohmann::json lr_transfer;  // with lr_transfer hyperp: the corrections (LrScales); otherwise null and not written

  nlohmann::json json() const {
    const auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); };
    nlohmann::json j = {{"status", status},     {"message", message},           {"val_loss", num(val_loss)},
            {"val_bpb", num(val_bpb)}, {"train_loss", num(train_loss)}, {"steps", steps},
            {"tokens", tokens},     {"flops", flops},               {"seconds", seconds},
            {"tokens_per_s", tokens_per_s}, {"mfu", mfu},           {"peak_flops", peak_flops}, {"peak_source", peak_source},
            {"peak_rss_bytes", peak_rss_bytes}, {"memory_estimate_bytes", memory_estimate_bytes},
            {"params", params},     {"resumed_from", resumed_from}, {"moe", moe}};
    if (!signal.empty()) j["signal"] = signal;  // only interrupted runs: other summaries stay as they were
    if (!lr_transfer.is_null()) j["lr_transfer"] = lr_transfer;
    return j;
  }
};

// A backend on a device of its own (backend/cuda.hpp) tells the trainer what the host backends
// measure on the CPU: the device's name, its dense peak in FLOP/s from a table of known devices
// (0 where the device is not in it; the run then needs --peak-flops) with where that figure comes
// from, and the device memory free and in all now, {free, total} in bytes.
template <class B>
concept DeviceBackend = requires {
  { B::device_name() } -> std::convertible_to<std::string>;
  { B::device_peak_flops() } -> std::convertible_to<double>;
  { B::device_peak_source() } -> std::convertible_to<std::string>;
  { B::device_memory() } -> std::convertible_to<std::pair<std::int64_t, std::int64_t>>;
};

// Peak resident memory of this process so far.
inline int64 peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64>(u.ru_maxrss) * 1024;
}

// Memory the system can still give (MemAvailable), or -1 when unknown.
inline int64 available_memory_bytes() {
  std::ifstream f("/proc/meminfo");
  std::string key;
  int64 kb = 0;
  std::string unit;
  while (f >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return -1;
}

namespace detail {

// The fields that must agree between a checkpoint and the config resuming it.
inline nlohmann::json identity(const TrainConfig& c) {
  nlohmann::json j = c;
  for (const char* k : {"out", "data", "resume", "eval_every", "checkpoint_every", "peak_flops", "accum", "reduction", "device", "precision", "thread_split"})
    j.erase(k);
  return j;
}

// The routing of the step just run (each MoE layer's statistics over all its calls).
template <class M>
nlohmann::json moe_step(const M& model) {
  nlohmann::json load = nlohmann::json::object();
  double balance = 0, z = 0, slots = 0, dropped = 0, worst = 1;
  for (int64 i = 0; i < model.moe_layers(); ++i) {
    const auto& st = model.moe_stats(i);
    const auto& shape = model.moe_shape(i);
    std::vector<double> l(static_cast<std::size_t>(st.experts()));
    for (int64 e = 0; e < st.experts(); ++e) l[static_cast<std::size_t>(e)] = st.load(e);
    load[model.moe_name(i)] = l;
    balance += st.balance_loss(shape);
    z += st.z_loss(shape);
    slots += st.slots;
    dropped += st.dropped;
    worst = std::max(worst, st.max_min_ratio());
  }
  // JSON has no infinity: an expert that got nothing is reported as max_min_load null.
  return {{"balance_loss", balance},
          {"z_loss", z},
          {"drop_rate", slots > 0 ? dropped / slots : 0.0},
          {"max_min_load", std::isfinite(worst) ? nlohmann::json(worst) : nlohmann::json(nullptr)},
          {"load", load}};
}

template <class M>
nlohmann::json moe_bias(M& model) {
  nlohmann::json b = nlohmann::json::array();
  for (int64 i = 0; i < model.moe_layers(); ++i) {
    const auto v = model.read_moe_bias(i);
    b.push_back(std::vector<double>(v.begin(), v.end()));  // floats are exact as doubles
  }
  return b;
}

template <class M>
void set_moe_bias(M& model, const nlohmann::json& b) {
  if (!b.is_array() || static_cast<int64>(b.size()) != model.moe_layers())
    throw checkpoint_error("checkpoint: the MoE selection biases do not match the model");
  for (int64 i = 0; i < model.moe_layers(); ++i) {
    const auto v = b[static_cast<std::size_t>(i)].get<std::vector<double>>();
    if (static_cast<int64>(v.size()) != model.moe_shape(i).experts)
      throw checkpoint_error("checkpoint: the MoE selection biases do not match the model");
    model.write_moe_bias(i, std::vector<float>(v.begin(), v.end()));
  }
}

// The text of log.jsonl up to and including the lines of `step` (its lines are in step order; the
// lines after it are the steps a resume trains again, and are cut). A damaged line (not a JSON
// object, or a "step" that is not a whole number) is cut with them where it is the file's last
// line (one torn by a kill: it never parses, every line begins with '{') or the next whole line is
// past `step`. A damaged line before a line the resume keeps is a config_error naming file:line,
// and the log is left as it is: cutting there, as happened until 5 Dec 2026, deleted every
// finished line after it without a word. A missing log is empty.
inline std::string log_through(const std::filesystem::path& log, int64 step) {
  std::ifstream in(log, std::ios::binary);
  std::string line, kept;
  std::int64_t number = 0, damaged = 0;  // the first damaged line's number (1-based), 0: none yet
  while (std::getline(in, line)) {
    ++number;
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    const bool whole = !j.is_discarded() && j.is_object() && (!j.contains("step") || j.at("step").is_number_integer());
    if (whole && j.value("step", int64{0}) > step) break;
    if (damaged != 0)  // a line the resume would keep after the damaged one: that one was not torn by a kill
      throw config_error("config: cannot resume: " + log.string() + ":" + std::to_string(damaged) +
                         " is not a JSON object with a whole-number step, and it is not the last line (one torn by a kill); "
                         "repair or remove that line, then resume again");
    if (!whole) {
      damaged = number;
      continue;
    }
    kept += line + "\n";
  }
  return kept;
}

// Keeps the lines of log.jsonl up to and including `step` (log_through).
inline void cut_log(const std::filesystem::path& log, int64 step) { write_file_atomic(log, log_through(log, step)); }

// The files of a run folder (see the top of this file).
struct RunFiles {
  std::filesystem::path out, config, checkpoint, prev, log, summary;
  explicit RunFiles(const std::filesystem::path& dir)
      : out(dir), config(dir / "config.json"), checkpoint(dir / "checkpoint.bin"), prev(dir / "checkpoint.prev.bin"), log(dir / "log.jsonl"),
        summary(dir / "summary.json") {}
};

// Everything a run reads before it writes anything; reading it checks all of the input.
struct RunInputs {
  Corpus train, val;       // the corpus folder's splits (data/corpus.hpp: one file each, or shards)
  std::optional<Corpus> mix;  // TrainConfig::mix_data, when mix_frac > 0
  nlohmann::json tokenizer;  // what the run records of the corpus's tokenizer (data::tokenizer_record)
  std::string corpus;        // and of its tokens (data::corpus_digest)
  TrainingLength length;
  MemoryEstimate memory;
  int64 lanes = 1;  // thread lanes of a micro-batch (thread_lanes; auto takes one model where lanes would not fit in memory)
  std::optional<Checkpoint<float>> checkpoint;  // the checkpoint a resumed run continues from
};

// The progress a checkpoint records, against the run's `steps`: a step in [1, steps] (a checkpoint
// is written after a step), one optimiser update per step, times that are finite and not
// negative, and splits of the batch of at least one. Version 3 checkpoints are checksummed, but
// versions 1 and 2 are read as they are: a step of 1000000 in a run of 781 steps was resumed as
// done, 128000000 tokens in 3 s at an MFU of 125309%; optimizer_steps -1 ended as "the loss became
// NaN"; step 0 trained the whole schedule again over trained parameters; seconds -1e300 printed
// "tokens in ?". Each is a checkpoint_error naming the field.
inline void check_progress(const Checkpoint<float>& c, int64 steps) {
  const nlohmann::json& m = c.meta;
  const auto corrupt = [&](const std::string& why) { return checkpoint_error("checkpoint " + c.path.string() + " is corrupt: " + why); };
  const int64 step = m.at("step").get<int64>();  // an integer (checkpoint_to_resume checked)
  if (step < 1 || step > steps) throw corrupt(fmt::format("its step {} is outside the run's steps, 1 to {}", step, steps));
  // Version 1 checkpoints name the count adam_steps; one missing is named where it is read (restore).
  const char* updates = m.contains("optimizer_steps") ? "optimizer_steps" : "adam_steps";
  if (m.contains(updates) && !(m.at(updates).is_number_integer() && m.at(updates).get<int64>() == step))
    throw corrupt(fmt::format("its {} {} is not its step {} (one update per step)", updates, json_brief(m.at(updates)), step));
  for (const char* k : {"seconds", "step_seconds"})
    if (m.contains(k) && !(m.at(k).is_number() && std::isfinite(m.at(k).get<double>()) && m.at(k).get<double>() >= 0))
      throw corrupt(fmt::format("its {} {} is not a finite number of seconds >= 0", k, json_brief(m.at(k))));
  for (const char* k : {"ranks", "accum", "lanes"})
    if (m.contains(k) && !(m.at(k).is_number_integer() && m.at(k).get<int64>() >= 1))
      throw corrupt(fmt::format("its {} {} is not a whole number >= 1", k, json_brief(m.at(k))));
}

// The checkpoint to resume from, if the run folder holds one (checkpoint.bin, or only
// checkpoint.prev.bin: a crash while a checkpoint was replaced where hard links are not supported,
// checkpoint.hpp's keep_previous): only with config.resume, and only when the run was started with
// the same identity(config). checkpoint.bin is verified as it loads; when it is missing, truncated
// or corrupt and checkpoint.prev.bin is good, the run resumes from that one, with a warning on
// stderr (the log is then cut to its step, as for any resume); both unusable: a checkpoint_error
// naming both.
inline std::optional<Checkpoint<float>> checkpoint_to_resume(const TrainConfig& cfg, const RunFiles& files) {
  const bool current = std::filesystem::exists(files.checkpoint), previous = std::filesystem::exists(files.prev);
  // A finished run whose checkpoints are gone: training there (with --resume or without) started
  // again from step 1 and replaced its log and summary without a word. A folder with a log only is
  // a run killed before its first checkpoint, and one whose summary says it diverged or stopped
  // before one: those start again, as they must.
  // A summary that cannot say (not JSON, torn, or a status that is not a string) is refused: taken
  // for "not finished" (until 5 Dec 2026) it restarted a finished run from step 1, and a status of
  // another kind escaped as the JSON library's own error, exit 1. loopscale writes summary.json
  // atomically, so such a file was damaged or edited.
  const auto finished = [&] {
    std::ifstream in(files.summary);
    const nlohmann::json s = nlohmann::json::parse(in, nullptr, false);
    if (s.is_discarded() || !s.is_object() || !s.contains("status") || !s.at("status").is_string())
      throw config_error("config: " + files.summary.string() + " is damaged (not a JSON object with a string \"status\"), and " +
                         files.out.string() + " holds no checkpoint: it may be a finished run; choose another --out, or remove " +
                         files.summary.string() + " to train it again from the start");
    return s.at("status").get<std::string>() == "done";
  };
  if (!current && !previous && std::filesystem::is_regular_file(files.summary) && finished())
    throw config_error("config: " + files.out.string() + " holds a finished run (summary.json) but neither " + files.checkpoint.filename().string() +
                       " nor " + files.prev.filename().string() + " to continue it from; choose another --out, or remove " +
                       files.summary.string() + " to train it again from the start");
  if (!current && !previous) return std::nullopt;
  if (!cfg.resume)
    throw config_error("config: " + files.out.string() + " already holds a run; pass --resume to continue it or choose another --out");
  const auto load_previous = [&](const std::string& why) {
    Checkpoint<float> c;
    try {
      c = load_checkpoint<float>(files.prev);
    } catch (const checkpoint_error& e) {
      throw checkpoint_error("cannot resume " + files.out.string() + ": no usable checkpoint: " + why + "; and " + e.what());
    }
    std::fprintf(stderr, "loopscale: warning: %s; resuming from %s (step %lld)\n", why.c_str(), files.prev.string().c_str(),
                 static_cast<long long>(c.meta.value("step", int64{-1})));
    return c;
  };
  Checkpoint<float> ckpt;
  if (!current) {
    ckpt = load_previous(files.checkpoint.string() + " is missing");
  } else {
    try {
      ckpt = load_checkpoint<float>(files.checkpoint);
    } catch (const checkpoint_error& e) {
      if (!previous) throw;
      ckpt = load_previous(e.what());
    }
  }
  // Version 3 checkpoints are checksummed; earlier ones are read as they are, so a field of the
  // wrong type is named here instead of escaping as a JSON library error.
  // (A checkpoint from before recipes has none in its config: adamw, filled in below.)
  if (!ckpt.meta.contains("config") || !ckpt.meta.at("config").is_object() || !ckpt.meta.contains("step") ||
      !ckpt.meta.at("step").is_number_integer() || (ckpt.meta.at("config").contains("recipe") && !ckpt.meta.at("config").at("recipe").is_string()))
    throw checkpoint_error("checkpoint " + ckpt.path.string() + " is corrupt: its JSON lacks an integer step or a config object (with a recipe name, if any)");
  nlohmann::json was = ckpt.meta.at("config");
  const nlohmann::json now = identity(cfg);
  // A checkpoint written before a key existed trained as that key's adamw default says.
  const TrainConfig adamw_defaults;
  const nlohmann::json before = identity(adamw_defaults);
  for (const auto& [k, v] : before.items())
    if (!was.contains(k)) was[k] = v;
  const std::string recipe = was.at("recipe").get<std::string>();
  if (recipe != cfg.recipe)
    throw config_error("config: cannot resume " + files.out.string() + ": it was trained with the " + recipe + " recipe, not " +
                       cfg.recipe + "; pass --recipe " + recipe + " or choose another --out");
  if (was != now) {
    std::string field = "?";
    for (const auto& [k, v] : now.items())
      if (!was.contains(k) || was.at(k) != v) {
        field = k;
        break;
      }
    throw config_error("config: cannot resume " + files.out.string() + ": the run was started with a different '" + field + "'");
  }
  check_progress(ckpt, training_length(cfg).steps);
  return ckpt;
}

// The run folder's lock (util/file_lock.hpp): a second process on the same --out is refused,
// naming the first. check_run_folder_free asks the same without taking it (train --dry-run).
inline const char* const run_folder_advice = "wait for it to end, stop it, or choose another --out";
inline FileLock lock_run_folder(const RunFiles& files) {
  return FileLock::acquire(files.out / ".lock", files.out.string() + "/", run_folder_advice);
}
inline void check_run_folder_free(const RunFiles& files) { FileLock::check_free(files.out / ".lock", files.out.string() + "/", run_folder_advice); }

// A folder or a pipe where a run file goes failed only when the file was written: summary.json
// after the whole run.
inline void check_run_files(const RunFiles& files) {
  for (const std::filesystem::path& f : {files.config, files.checkpoint, files.prev, files.log, files.summary})
    if (const std::string why = not_a_file(f); !why.empty()) throw config_error("config: the run folder's " + why);
}

// The checkpoint to resume from (checkpoint_to_resume), and the same token ids must mean the same
// text: a resumed run keeps its tokenizer (`tokenizer`: data::tokenizer_record of this run's corpus)
// and its corpus (`corpus`: data::corpus_digest): a run resumed on other documents of the same
// tokenizer would train on two corpora and report one. Checkpoints written before runs recorded
// their corpus (5 December 2026) resume on any.
inline std::optional<Checkpoint<float>> resumable_checkpoint(const TrainConfig& cfg, const RunFiles& files, const nlohmann::json& tokenizer,
                                                             const std::string& corpus) {
  std::optional<Checkpoint<float>> c = checkpoint_to_resume(cfg, files);
  if (!c) return c;
  // A log damaged before its last line is refused now, before anything is written (and by
  // --dry-run), not when the resume cuts it.
  (void)log_through(files.log, c->meta.at("step").get<int64>());
  data::check_same_tokenizer(c->meta.value("tokenizer", nlohmann::json()), tokenizer, c->path.string());
  const auto it = c->meta.find("corpus");
  if (it != c->meta.end() && *it != corpus)
    throw config_error("config: cannot resume " + c->path.string() + ": it was trained on corpus " + json_brief(*it) + ", and --data " + cfg.data +
                       " is " + corpus + "; give the corpus it was trained on, or train into another --out");
  return c;
}

// Checks the config, the data and the memory and loads the checkpoint to resume; sets the backend's
// threads (the memory estimate depends on them).
// One split of the run's corpus, checked against the run: the model's vocabulary and a window of
// seq_len + 1 tokens (`--dry-run` reads the headers only).
inline Corpus open_run_corpus(const TrainConfig& cfg, data::Split split, data::Verify verify = data::Verify::checksums) {
  Corpus c = data::open_corpus(cfg.data, split, verify);
  data::check_vocab(c, cfg.spec, c.name());
  data::check_fits(c, cfg.seq_len);
  return c;
}

// The token file mixed into the training windows (TrainConfig::mix_data, when mix_frac > 0),
// checked against the run as the splits are: its checksum and its tokens (as open_corpus does,
// before the run folder is written; `--dry-run`, Verify::headers, maps it and reads its header),
// the model's vocabulary and a window. One function for both, so the dry run refuses what the run
// refuses (it approved a mix_data that did not exist until 5 Dec 2026).
inline std::optional<Corpus> open_mix_corpus(const TrainConfig& cfg, data::Verify verify = data::Verify::checksums) {
  if (!(cfg.mix_frac > 0)) return std::nullopt;
  const data::TokenFile mix = data::read_token_file(cfg.mix_data);
  if (verify == data::Verify::checksums) data::verify_tokens(mix);
  Corpus c(mix);
  data::check_vocab(c, cfg.spec, c.name());
  data::check_fits(c, cfg.seq_len);
  return c;
}

// The run's memory estimate against `avail` bytes (0: unknown) of the host or of a device
// (`where`: " on DEVICE"): config_error naming what to change where it does not fit.
inline void check_memory_fits(const TrainConfig& cfg, int64 micro, const LanePlan& plan, int64 avail, const std::string& where = {}) {
  if (avail > 0 && plan.memory.total > avail)
    throw config_error("config: batch " + std::to_string(micro) + " x " + std::to_string(cfg.seq_len) + " needs about " +
                       std::to_string(plan.memory.total >> 20) + " MiB but only " + std::to_string(avail >> 20) + " MiB are available" +
                       where + "; lower --batch or --seq-len, raise --accum, or use truncated BPTT" +
                       (plan.lanes > 1 ? " or --thread-split kernels (one gradient buffer instead of one per thread)" : ""));
}

template <class B>
RunInputs read_inputs(const TrainConfig& cfg, const RunFiles& files, int ranks = 1) {
  check_config(cfg);
  check_run_files(files);
  const int64 micro = micro_batch(cfg, ranks);
  const std::filesystem::path data(cfg.data);
  RunInputs in;
  in.train = open_run_corpus(cfg, data::Split::train);
  in.val = open_run_corpus(cfg, data::Split::val);
  in.tokenizer = data::tokenizer_record(data, in.train);
  in.corpus = data::corpus_digest(in.train, in.val);
  // The validation sample's bound (train/data.hpp), here and not first in the Trainer: a sample
  // past it failed only when the run's last step was trained.
  (void)validation_batches(cfg.eval_tokens, cfg.batch, cfg.seq_len, in.val);
  in.mix = open_mix_corpus(cfg);

  B::set_threads(cfg.threads);
  in.length = training_length(cfg);
  int64 avail = available_memory_bytes();
  std::string where;
  if constexpr (DeviceBackend<B>) {
    avail = B::device_memory().first;
    where = " on " + B::device_name();
    if (cfg.peak_flops <= 0 && B::device_peak_flops() <= 0)
      throw config_error("config: the dense peak of " + B::device_name() +
                         " is not in loopscale's table of devices, so the MFU has nothing to divide by; give it with --peak-flops");
  }
  const LanePlan plan = plan_lanes(cfg, micro, B::threads(), B::host_memory, attention_scratch(B::nested_gemm), avail);
  in.lanes = plan.lanes;
  in.memory = plan.memory;
  check_memory_fits(cfg, micro, plan, avail, where);
  in.checkpoint = resumable_checkpoint(cfg, files, in.tokenizer, in.corpus);
  return in;
}

inline AdamWConfig adamw_config(const TrainConfig& cfg) {
  AdamWConfig o;
  o.beta1 = cfg.beta1;
  o.beta2 = cfg.beta2;
  o.eps = cfg.eps;
  o.grad_clip = cfg.grad_clip;
  o.groups[static_cast<int>(ParamGroup::embedding)] = {cfg.lr_embedding, 0.0};
  o.groups[static_cast<int>(ParamGroup::lm_head)] = {cfg.lr_lm_head, 0.0};
  o.groups[static_cast<int>(ParamGroup::matrix)] = {1.0, cfg.weight_decay};
  o.groups[static_cast<int>(ParamGroup::norm_inject)] = {cfg.lr_norm, 0.0};
  return o;
}

}  // namespace detail

// The update rule of each tensor under the config's recipe (train_config.hpp's top says what each chooses):
//   adamw  AdamW everywhere with adamw_config's groups (bit-identical to the AdamW class)
//   paper  MuonH for the matrix group and the linear injection (lr x 1); AdamW without weight
//          decay for the embedding (lr x lr_embedding), lm_head (lr_lm_head), norms (lr_norm) and
//          hyperconnection lanes, tensors inject.hyper* (lr_lanes)
// With lr_width_ref > 0 the multipliers of the AdamW tensors outside the matrix group are scaled
// by (d_model / lr_width_ref)^-0.5 (the paper: 512). With lr_transfer hyperp (paper recipe only)
// the MuonH tensors' multipliers are then scaled by LrScales::matrix() and the embedding's and
// lm_head's by LrScales::batch (lr_transfer.hpp).
inline std::vector<TensorRule> tensor_rules(const TrainConfig& cfg, const std::vector<ParamTensor>& tensors) {
  std::vector<TensorRule> rules;
  if (parse_recipe(cfg.recipe) == Recipe::adamw) {
    rules = adamw_rules(tensors, detail::adamw_config(cfg));
  } else {
    for (const ParamTensor& t : tensors) {
      TensorRule r;
      if (t.group == ParamGroup::matrix || t.name == "inject.W") r = {Update::muonh, 1.0, 0.0};
      else if (t.group == ParamGroup::embedding) r.lr_mult = cfg.lr_embedding;
      else if (t.group == ParamGroup::lm_head) r.lr_mult = cfg.lr_lm_head;
      else if (t.name.rfind("inject.hyper", 0) == 0) r.lr_mult = cfg.lr_lanes;
      else r.lr_mult = cfg.lr_norm;
      rules.push_back(r);
    }
  }
  if (cfg.lr_width_ref > 0) {
    const double s = std::pow(static_cast<double>(cfg.spec.d_model) / cfg.lr_width_ref, -0.5);
    for (std::size_t i = 0; i < tensors.size(); ++i)
      if (rules[i].update == Update::adamw && tensors[i].group != ParamGroup::matrix) rules[i].lr_mult *= s;
  }
  if (parse_lr_transfer(cfg.lr_transfer) != LrTransfer::none) {
    const LrScales s = lr_scales_of(cfg);
    for (std::size_t i = 0; i < tensors.size(); ++i) {
      if (rules[i].update == Update::muonh) rules[i].lr_mult *= s.matrix();
      else if (tensors[i].group == ParamGroup::embedding || tensors[i].group == ParamGroup::lm_head) rules[i].lr_mult *= s.batch;
    }
  }
  return rules;
}

// The recipe's optimiser over a model's tensors (n: the size of the parameter buffer); what the
// trainer steps with, and what a custom loop can use (docs/training.md).
template <class T, class B>
Optimizer<T, B> optimizer_of(const TrainConfig& cfg, const std::vector<ParamTensor>& tensors, int64 n) {
  std::vector<TensorRule> rules = tensor_rules(cfg, tensors);
  std::vector<MuonMatrix> matrices;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    if (rules[i].update == Update::muonh)
      for (MuonMatrix& m : muon_matrices(tensors[i], cfg.spec)) matrices.push_back(std::move(m));
  OptimizerConfig o;
  o.beta1 = cfg.beta1;
  o.beta2 = cfg.beta2;
  o.eps = cfg.eps;
  o.grad_clip = cfg.grad_clip;
  o.momentum = cfg.muon_momentum;
  return Optimizer<T, B>(tensors, std::move(rules), std::move(matrices), o, n);
}

namespace detail {

// The exit code a failure means: 2 for bad input (std::invalid_argument, an unusable checkpoint),
// 1 for anything else.
inline int exit_code_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::invalid_argument&) {
    return 2;
  } catch (const checkpoint_error&) {
    return 2;
  } catch (...) {
    return 1;
  }
}

// Ends a phase every rank goes through (`failure`: this rank's, or null): when any rank failed,
// the first one rethrows its own failure and the others throw other_rank_failed. Programs print
// the errors of rank 0 only (every rank meets the same bad input), so the first failing rank
// prints its message here when it is not rank 0.
inline void agree_on_failure(Communicator& comm, const std::exception_ptr& failure, const char* phase) {
  if (comm.size() == 1) {
    if (failure) std::rethrow_exception(failure);
    return;
  }
  const Failure f = first_failure(comm, failure ? exit_code_of(failure) : 0, phase);
  if (f.rank < 0) return;
  if (f.rank != comm.rank()) throw other_rank_failed(f.rank, f.code, std::string("failed during ") + phase);
  if (comm.rank() != 0) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "loopscale: rank %d: %s: %s\n", comm.rank(), f.code == 2 ? "error" : "failed", e.what());
    } catch (...) {
    }
    throw other_rank_failed(f.rank, f.code, std::string("failed during ") + phase);
  }
  std::rethrow_exception(failure);
}

inline Schedule schedule_of(const TrainConfig& cfg, const TrainingLength& length) {
  Schedule s;
  s.lr = cfg.lr;
  s.total_steps = length.steps;
  s.warmup_steps = static_cast<int64>(cfg.warmup * static_cast<double>(length.steps));
  s.decay = parse_decay(cfg.decay);
  s.final_frac = cfg.final_lr_frac;
  return s;
}

// Whether `every` (0: never) falls due after `step` steps.
inline bool due(int64 every, int64 step) { return every > 0 && step % every == 0; }

// What one optimiser step reports: the progress line, the routing of MoE layers, and whether the
// loss and the gradient norm were finite (when not, nothing was updated).
struct StepRecord {
  TrainProgress progress;
  nlohmann::json moe;
  bool finite = true;
};

// One run from valid inputs: the model, the optimiser and the data, restored from the checkpoint or
// freshly initialised, and the training loop.
template <class B>
class Trainer {
 public:
  using clock = std::chrono::steady_clock;

  // Builds the model and the optimiser and restores them from `in.checkpoint` (whose buffers are
  // freed afterwards) or initialises them and starts an empty log.
  Trainer(const TrainConfig& cfg, RunInputs&& in, const RunFiles& files, clock::time_point wall0, const ProgressFn& progress,
          Communicator& comm)
      : comm_(comm),
        reduction_(*parse_name<Reduction>(cfg.reduction)),
        chunks_(static_cast<int64>(comm.size()) * cfg.accum),
        micro_(micro_batch(cfg, comm.size())),
        lanes_(in.lanes),
        cfg_(cfg),
        files_(files),
        progress_(progress),
        wall0_(wall0),
        tokenizer_(std::move(in.tokenizer)),
        corpus_(std::move(in.corpus)),
        length_(in.length),
        memory_(in.memory),
        per_step_(cfg.batch * cfg.seq_len),
        eval_batches_(validation_batches(cfg.eval_tokens, cfg.batch, cfg.seq_len, in.val)),
        model_(make_model(cfg, micro_, lanes_)),
        opt_(optimizer_of<float, B>(cfg, model_.tensors(), model_.num_params())),
        sched_(schedule_of(cfg, length_)),
        sampler_(in.train, cfg.seed, cfg.seq_len, in.mix, cfg.mix_frac, cfg.mix_stride, cfg.batch),
        valset_(in.val, cfg.seq_len, eval_batches_ * cfg.batch),
        inputs_(static_cast<std::size_t>(micro_ * cfg.seq_len)),
        targets_(inputs_.size()),
        chunk_loss_(static_cast<std::size_t>(chunks_)),
        grad_sum_(cfg.accum > 1 ? static_cast<std::size_t>(model_.num_params()) : 0) {
    if constexpr (B::host_memory)
      if (lanes_ > 1) thread_lanes_.emplace(model_, lanes_, micro_);  // lanes 1.. read model_'s parameters, which the optimiser updates in place
    // The routing statistics of a step's chunks: copied over (never reallocated) every step.
    if (chunks_ > 1)
      for (int64 i = 0; i < model_.moe_layers(); ++i) moe_sum_.push_back(model_.moe_stats(i));
    res_.params = model_.num_params();
    if (parse_lr_transfer(cfg.lr_transfer) != LrTransfer::none) res_.lr_transfer = lr_scales_of(cfg);
    res_.memory_estimate_bytes = memory_.total;
    if (in.checkpoint) {
      try {
        restore(*in.checkpoint);
      } catch (const nlohmann::json::exception& e) {
        throw checkpoint_error("checkpoint " + in.checkpoint->path.string() + " is corrupt: a field of its JSON is missing or of another type (" +
                               e.what() + ")");
      }
      in.checkpoint.reset();  // the copies are in place; free the checkpoint's buffers
    } else {
      model_.init(cfg.seed, parse_init(cfg.init));
      if (comm_.root()) write_file_atomic(files_.log, std::string());
    }
  }

  Trainer(const Trainer&) = delete;
  Trainer& operator=(const Trainer&) = delete;

  // Trains from the restored step to the last one; stops early when the loss diverges or the
  // progress callback says so.
  TrainResult train() {
    measure_peak();
    if (comm_.root()) log_.open(files_.log, std::ios::app);
    count_trained(step0_);
    for (int64 step = step0_; step < length_.steps; ++step) {
      StepRecord s = optimiser_step(step);
      if (!s.finite) {
        log_.flush();
        return diverged(s.progress);
      }
      TrainProgress& p = s.progress;
      const bool last = p.step == length_.steps;
      // A signal during the validation cuts it short (the run then stops below, even after the last step).
      const bool cut = (last || due(cfg_.eval_every, p.step)) && !evaluate_into(p);
      p.seconds = elapsed();
      write_log_line(p, s.moe);
      if ((last || due(cfg_.checkpoint_every, p.step)) && !checkpoint(p.step)) return diverged(p, bad_state_);
      bool go_on = !progress_ || progress_(p);
      // A signal (util/interrupt.hpp, set only while an InterruptGuard is installed) stops the
      // run like the callback does, after the step; on the last step the run is done anyway.
      int sig = interrupt_signal();
      if (comm_.size() > 1) agree_to_stop(go_on, sig);
      if ((!go_on || sig != 0) && (!last || cut)) {
        if (last_good_ != p.step && !checkpoint(p.step)) return diverged(p, bad_state_);
        if (sig != 0) return interrupted(sig, p.step);
        return finish("stopped", "stopped by the caller after step " + std::to_string(p.step) + "; resume to continue");
      }
    }
    if (!std::isfinite(res_.val_loss)) {  // resumed after the last step: evaluate the final model
      // Interruptible as the validations of the loop are: a run stopped by a signal in its final
      // validation is resumed here, and a second signal was caught and then ignored, so only
      // SIGKILL ended it. The last step's checkpoint is on disk (the run resumed from it).
      const std::optional<double> v = evaluate(true);
      if (!v) return interrupted(interrupt_signal(), res_.steps);
      res_.val_loss = *v;
      res_.val_bpb = valset_.corpus().bits_per_byte(res_.val_loss);
    }
    return finish("done", "trained " + std::to_string(res_.steps) + " steps, " + std::to_string(res_.tokens) + " tokens");
  }

 private:
  // The trainer's model: lane 0 of the thread lanes where there are several (a thread-lane model,
  // one attention scratch matrix; train/thread_lanes.hpp), else a model over every backend thread.
  static Transformer<float, B> make_model(const TrainConfig& cfg, int64 micro, int64 lanes) {
    if constexpr (B::host_memory)
      if (lanes > 1) return Transformer<float, B>(thread_lane, cfg.spec, lane_sequences(micro, lanes, 0), cfg.seq_len, cfg.softcap, routing_of(cfg));
    return Transformer<float, B>(cfg.spec, micro, cfg.seq_len, cfg.softcap, routing_of(cfg));
  }

  void restore(const Checkpoint<float>& ckpt) {
    // Resumed from checkpoint.prev.bin: checkpoint.bin is bad (or missing), so the next checkpoint
    // replaces it without making it the previous one; the good previous one stays.
    keep_previous_ = ckpt.path != files_.prev;
    if (static_cast<int64>(ckpt.params.size()) != model_.num_params())
      throw checkpoint_error("checkpoint " + ckpt.path.string() + " holds " + std::to_string(ckpt.params.size()) +
                             " parameters, the model has " + std::to_string(model_.num_params()));
    model_.write_params(std::span<const float>(ckpt.params.data(), ckpt.params.size()));
    opt_.write_moments(std::span<const float>(ckpt.m.data(), ckpt.m.size()), std::span<const float>(ckpt.v.data(), ckpt.v.size()));
    step0_ = ckpt.meta.at("step").get<int64>();
    if (step0_ < 0) throw checkpoint_error("checkpoint " + ckpt.path.string() + " is at step " + std::to_string(step0_) + ", before the first");
    // Version 1 checkpoints (adamw only) name the step count adam_steps and hold no norms.
    opt_.set_steps_taken(ckpt.meta.contains("optimizer_steps") ? ckpt.meta.at("optimizer_steps").get<int64>()
                                                               : ckpt.meta.at("adam_steps").get<int64>());
    const std::vector<std::string> names = ckpt.meta.value("muon_matrices", std::vector<std::string>{});
    std::vector<std::string> expected;
    for (const MuonMatrix& m : opt_.matrices()) expected.push_back(m.name);
    const std::vector<double> norms = ckpt.meta.value("muon_norms", std::vector<double>{});
    if (!norms.empty() && names != expected)
      throw checkpoint_error("checkpoint " + ckpt.path.string() + ": its MuonH matrices are not the model's");
    if (norms.empty() && step0_ > 0 && !expected.empty())
      throw checkpoint_error("checkpoint " + ckpt.path.string() + " lacks the initial norms of its MuonH matrices");
    opt_.set_initial_norms(norms);
    if (model_.moe_layers() > 0) set_moe_bias(model_, ckpt.meta.at("moe_bias"));
    prior_seconds_ = ckpt.meta.at("seconds").get<double>();
    step_seconds_ = ckpt.meta.at("step_seconds").get<double>();
    res_.resumed_from = step0_;
    last_good_ = step0_;
    if (comm_.root()) cut_log(files_.log, step0_);
    // The windows are a function of (seed, step, sequence), so any split of the batch draws the
    // same data; only the float sums differ. Checkpoints before data parallelism: 1 x 1.
    // Thread lanes (thread_lanes): checkpoints before them had one model a rank.
    const int64 was_ranks = ckpt.meta.value("ranks", int64{1}), was_accum = ckpt.meta.value("accum", int64{1});
    const int64 was_lanes = ckpt.meta.value("lanes", int64{1});
    if ((was_ranks != comm_.size() || was_accum != cfg_.accum || was_lanes != lanes_) && comm_.root()) {
      resplit_ = fmt::format("checkpoint {} was written by {} rank(s) x {} micro-batch(es) x {} thread lane(s), this run has {} x {} x {}",
                             ckpt.path.string(), was_ranks, was_accum, was_lanes, comm_.size(), cfg_.accum, lanes_);
      std::fprintf(stderr, "loopscale: warning: %s: the run continues on the same data, but not bit for bit as it would have\n", resplit_.c_str());
    }
  }

  // The peak the MFU divides by: the given one (for all ranks together), or each rank's measured
  // peak summed over the ranks.
  void measure_peak() {
    if (cfg_.peak_flops > 0) {
      res_.peak_flops = cfg_.peak_flops;
      res_.peak_source = "given";
      return;
    }
    double peak[] = {0};
    if constexpr (DeviceBackend<B>) {
      peak[0] = B::device_peak_flops();  // read_inputs made sure the table knows the device
      res_.peak_source = B::device_name() + ": " + B::device_peak_source();
    } else {
      peak[0] = measure_peak_flops(B::threads());
      res_.peak_source = std::string("measured ") + peak_isa().name + " x" + std::to_string(peak_isa().lanes);
      peak_measured_ = true;
      if (const std::string advice = build_isa_advice(); !advice.empty()) {
        res_.peak_source += std::string(" (this CPU has ") + cpu_widest_isa().name + ")";
        if (comm_.rank() == 0) std::fprintf(stderr, "loopscale: warning: %s\n", advice.c_str());
      }
    }
    comm_.sum(std::span<double>(peak), Reduction::ordered, "the sum of the peaks");
    res_.peak_flops = peak[0];
    if (comm_.size() > 1) res_.peak_source += fmt::format(", summed over {} ranks", comm_.size());
  }

  // After each step every rank learns whether any rank's progress callback said stop or any rank
  // got a signal, so that all stop after the same step.
  void agree_to_stop(bool& go_on, int& sig) {
    const std::vector<std::uint64_t> all = comm_.gather((go_on ? 0u : 256u) | static_cast<unsigned>(sig & 255), "the stop agreement");
    for (const std::uint64_t v : all) {
      if (v & 256u) go_on = false;
      if (sig == 0 && (v & 255u) != 0) sig = static_cast<int>(v & 255u);
    }
  }

  // Steps, tokens and FLOPs of the result after `steps` steps.
  void count_trained(int64 steps) {
    res_.steps = steps;
    res_.tokens = steps * per_step_;
    res_.flops = static_cast<double>(res_.tokens) * length_.flops_per_token;
  }

  // Optimiser step `step` (from 0): a batch, forward and backward, clipping and the AdamW update.
  StepRecord optimiser_step(int64 step) {
    StepRecord s;
    TrainProgress& p = s.progress;
    const auto t0 = clock::now();
    const std::span<const float> g = gradient(step);
    double loss = 0;
    for (const double l : chunk_loss_) loss += l;
    loss /= static_cast<double>(chunks_);
    if (model_.moe_layers() > 0) s.moe = moe_step(model_);
    const double norm = Optimizer<float, B>::grad_norm(g);
    p.step = step + 1;
    p.loss = loss;
    p.grad_norm = norm;
    if (!std::isfinite(loss) || !std::isfinite(norm)) {
      s.finite = false;
      return s;
    }
    const double lr = sched_.at(step);
    opt_.step(std::span<float>(model_.params_data(), g.size()), g, lr, norm);
    model_.update_moe_bias();
    // A device backend returns once the update's kernels are queued: wait for them, so the step's
    // time (tokens/s, MFU) is its own and not partly the next step's.
    if constexpr (requires { B::synchronize(); }) B::synchronize();
    const double dt = std::chrono::duration<double>(clock::now() - t0).count();
    step_seconds_ += dt;
    if constexpr (DeviceBackend<B>) {
      // Every buffer is allocated by the end of the first step (model memory once, the libraries'
      // workspaces on first use), so the device's use then is the run's.
      if (device_used_ < 0) {
        const auto [free, total] = B::device_memory();
        device_used_ = total - free;
        device_total_ = total;
      }
    }
    count_trained(step + 1);
    res_.train_loss = loss;

    p.steps = length_.steps;
    p.tokens = res_.tokens;
    p.lr = lr;
    p.tokens_per_s = static_cast<double>(per_step_) / dt;
    p.mfu = p.tokens_per_s * length_.flops_per_token / res_.peak_flops;
    if (!s.moe.is_null()) {
      const auto& mm = s.moe.at("max_min_load");
      p.moe_max_min_load = mm.is_null() ? std::numeric_limits<double>::infinity() : mm.get<double>();
      p.moe_drop_rate = s.moe.at("drop_rate").get<double>();
      res_.moe = s.moe;
      res_.moe["bias"] = moe_bias(model_);
    }
    return s;
  }

  // The step's gradient, averaged over its chunks (chunk_loss_ gets each chunk's loss): this rank's
  // chunks one after the other, each gradient added to the sum of those before it, then the sum
  // over the ranks. The span is backend memory: the host hands it to backend calls, never reads it.
  std::span<const float> gradient(int64 step) {
    const int64 n = model_.num_params();
    float* g = model_.grads_data();
    std::fill(chunk_loss_.begin(), chunk_loss_.end(), 0.0);
    const bool moe = model_.moe_layers() > 0 && chunks_ > 1;
    for (int64 a = 0; a < cfg_.accum; ++a) {
      const int64 c = comm_.rank() * cfg_.accum + a;  // the chunk: sequences [c * micro, (c + 1) * micro) of the batch
      sampler_.batch(step, c * micro_, micro_, inputs_.data(), targets_.data());
      chunk_loss_[static_cast<std::size_t>(c)] = micro_pass(true);
      if (cfg_.accum > 1) {
        if (a == 0) detail::copy_into<B>(static_cast<const float*>(g), grad_sum_.data(), n);
        else detail::add_into<B>(static_cast<const float*>(g), grad_sum_.data(), n);
      }
      if (moe)
        for (int64 i = 0; i < model_.moe_layers(); ++i) {
          kernels::MoeStats& m = moe_sum_[static_cast<std::size_t>(i)];
          if (a == 0) m = model_.moe_stats(i);
          else m.combine(1, model_.moe_stats(i));
        }
    }
    float* sum = cfg_.accum > 1 ? grad_sum_.data() : g;
    if (chunks_ == 1) return {sum, static_cast<std::size_t>(n)};
    sum_over_ranks(sum, n);
    // One nonzero entry per chunk: the sum over the ranks gathers the losses exactly.
    comm_.sum(std::span<double>(chunk_loss_), Reduction::allreduce, "the gather of the losses");
    if (moe) sum_moe_stats();
    detail::scale_into<B>(static_cast<const float*>(sum), sum, static_cast<float>(1.0 / static_cast<double>(chunks_)), n);
    return {sum, static_cast<std::size_t>(n)};
  }

  // The mean loss of the micro-batch in inputs_ and targets_; with `backward` its gradient in
  // model_'s: one model, or thread lanes (train/thread_lanes.hpp) with model_ as lane 0.
  double micro_pass(bool backward) {
    if constexpr (B::host_memory)
      if (lanes_ > 1) return thread_lanes_->pass(inputs_.data(), targets_.data(), backward);
    return backward ? model_.forward_backward(inputs_.data(), targets_.data()) : model_.forward(inputs_.data(), targets_.data());
  }

  // The gradient summed over the ranks in place. The communicators (train/dist/) sum host memory:
  // a device backend's gradient goes through a host copy (one download and one upload a step).
  void sum_over_ranks(float* sum, int64 n) {
    if (comm_.size() == 1) return;
    if constexpr (B::host_memory) {
      comm_.sum(std::span<float>(sum, static_cast<std::size_t>(n)), reduction_, "the gradient sum");
    } else {
      host_grad_.resize(static_cast<std::size_t>(n));  // allocated in the first step only
      B::download(host_grad_.data(), static_cast<const float*>(sum), n);
      comm_.sum(std::span<float>(host_grad_), reduction_, "the gradient sum");
      B::upload(sum, static_cast<const float*>(host_grad_.data()), n);
    }
  }

  // The routing statistics of all the step's chunks on every rank, so that the aux-loss-free bias
  // update (and the log) sees the whole batch's load, as one process with the whole batch would.
  void sum_moe_stats() {
    std::vector<double>& flat = moe_flat_;
    flat.clear();  // keeps its capacity: allocated in the first step only
    for (const kernels::MoeStats& m : moe_sum_) {
      flat.insert(flat.end(), m.routed.begin(), m.routed.end());
      flat.insert(flat.end(), m.kept.begin(), m.kept.end());
      flat.insert(flat.end(), m.prob.begin(), m.prob.end());
      flat.insert(flat.end(), {m.tokens, m.slots, m.dropped, m.zsum, static_cast<double>(m.calls)});
    }
    comm_.sum(std::span<double>(flat), reduction_, "the sum of the routing statistics");
    std::size_t k = 0;
    for (std::size_t i = 0; i < moe_sum_.size(); ++i) {
      kernels::MoeStats& m = moe_sum_[i];
      for (std::vector<double>* v : {&m.routed, &m.kept, &m.prob})
        for (double& x : *v) x = flat[k++];
      m.tokens = flat[k++], m.slots = flat[k++], m.dropped = flat[k++], m.zsum = flat[k++];
      m.calls = static_cast<int64>(flat[k++]);
      model_.set_moe_stats(static_cast<int64>(i), m);
    }
  }

  // Mean validation loss over the fixed validation sample: forward passes of micro_ windows,
  // dealt to the ranks in turn, their losses gathered and summed in order (the same sum for any
  // rank count). `interruptible`: nothing where a signal comes during it (one rank only: ranks
  // would have to agree first), so a stop request waits for a forward pass, not for a whole
  // validation sample that can take minutes.
  //
  // The losses are gathered in blocks of eval_block passes, the same for every rank count, and
  // added in order as they come, so the sum is the one a gather of all of them gives, in memory
  // that does not grow with the sample (one loss per pass of the whole sample was allocated after
  // the whole run had trained: 3e12 of them for eval_tokens 1e14, std::bad_alloc, the run lost).
  static constexpr int64 eval_block = 4096;
  std::optional<double> evaluate(bool interruptible = false) {
    const int64 calls = eval_batches_ * cfg_.batch / micro_;
    const int64 ranks = comm_.size();
    double sum = 0;
    for (int64 first = 0; first < calls; first += eval_block) {
      const int64 n = std::min(eval_block, calls - first);
      eval_loss_.assign(static_cast<std::size_t>(n), 0.0);
      for (int64 k = first + ((comm_.rank() - first) % ranks + ranks) % ranks; k < first + n; k += ranks) {  // pass k is rank k % ranks's
        if (interruptible && ranks == 1 && interrupt_signal() != 0) return std::nullopt;
        valset_.batch(k * micro_, micro_, inputs_.data(), targets_.data());
        eval_loss_[static_cast<std::size_t>(k - first)] = micro_pass(false);
      }
      comm_.sum(std::span<double>(eval_loss_), Reduction::allreduce, "the gather of the validation losses");
      for (const double l : eval_loss_) sum += l;
    }
    return sum / static_cast<double>(calls);
  }

  // False where a signal cut the validation short (p then carries no validation loss).
  bool evaluate_into(TrainProgress& p) {
    const std::optional<double> v = evaluate(true);
    if (!v) return false;
    p.val_loss = *v;
    p.val_bpb = valset_.corpus().bits_per_byte(*p.val_loss);
    res_.val_loss = *p.val_loss;
    res_.val_bpb = *p.val_bpb;
    return true;
  }

  void write_log_line(const TrainProgress& p, const nlohmann::json& moe) {
    if (!comm_.root()) return;
    nlohmann::json line = {{"step", p.step},           {"tokens", p.tokens}, {"loss", p.loss},
                           {"lr", p.lr},               {"grad_norm", p.grad_norm},
                           {"tokens_per_s", p.tokens_per_s}, {"mfu", p.mfu}, {"seconds", p.seconds}};
    if (p.val_loss) {
      line["val_loss"] = *p.val_loss;
      line["val_bpb"] = *p.val_bpb;
    }
    if (!moe.is_null()) line["moe"] = moe;
    // The first line each process writes (a fresh start or a resume) says what its mfu is
    // relative to and on which vector unit the peak was measured: resumes may land on another
    // machine, and an MFU read without its ISA is the mistake a 16-lane AVX-512 host revealed.
    if (!logged_setup_) {
      line["peak_flops"] = res_.peak_flops;
      line["peak_source"] = res_.peak_source;
      if constexpr (!DeviceBackend<B>) line["isa"] = peak_isa().name;
      line["gemm"] = B::gemm_library;
      if constexpr (requires { B::gemm_kernels(); }) line["gemm_kernels"] = B::gemm_kernels();
      line["threads"] = B::threads();
      line["thread_split"] = lanes_ > 1 ? "batch" : "kernels";
      line["backend"] = B::name;
      if (!res_.lr_transfer.is_null()) line["lr_transfer"] = res_.lr_transfer;
      if constexpr (DeviceBackend<B>) line["device_name"] = B::device_name();
      if constexpr (requires { B::precision(); }) line["precision"] = precision_name(B::precision());
      if (comm_.size() > 1 || cfg_.accum > 1) {
        line["ranks"] = comm_.size();
        line["accum"] = cfg_.accum;
        line["reduction"] = cfg_.reduction;
        line["communicator"] = comm_.describe();
      }
      if (!resplit_.empty()) line["resplit"] = resplit_;
      logged_setup_ = true;
    }
    log_ << line.dump() << "\n";
    log_.flush();
  }

  double elapsed() const { return prior_seconds_ + std::chrono::duration<double>(clock::now() - wall0_).count(); }

  // Saves the state after `step` steps to checkpoint.bin, the one it replaces to checkpoint.prev.bin
  // (checkpoint.hpp's keep_previous says why every moment of a crash leaves a good one). A failure
  // to write (a full disk) throws a file_write_error naming the file; both files stay as they were.
  // A state that is not finite is not saved (false, bad_state_ says why): the step's loss and
  // gradient norm were finite, but its update overflowed the parameters or the moments, and a
  // checkpoint of that state would be called the last good one. Every rank decides alike (the
  // replicas' checksums agree first).
  bool checkpoint(int64 step) {
    const State st = host_state();
    const std::uint64_t sum = state_checksum(st);
    if (comm_.size() > 1) verify_replicas(sum, step);
    bad_state_ = state_value_fault<float>(st.params, st.m, st.v);
    if (!bad_state_.empty()) return false;
    std::exception_ptr failure;
    if (comm_.root()) {
      try {
        write_checkpoint(step, sum, st);
      } catch (...) {
        failure = std::current_exception();
      }
    }
    agree_on_failure(comm_, failure, "the writing of a checkpoint");
    keep_previous_ = true;
    last_good_ = step;
    return true;
  }

  // The parameters and the optimiser's moments as host memory: the backend's own buffers where the
  // host can read them, else copies downloaded into buffers kept for the next checkpoint.
  struct State {
    std::span<const float> params, m, v;
  };
  State host_state() {
    if constexpr (B::host_memory) {
      return {model_.params(), opt_.first_moment(), opt_.second_moment()};
    } else {
      const auto n = static_cast<std::size_t>(model_.num_params());
      for (std::vector<float>* v : {&host_params_, &host_m_, &host_v_}) v->resize(n);
      model_.read_params(std::span<float>(host_params_));
      opt_.read_moments(std::span<float>(host_m_), std::span<float>(host_v_));
      return {host_params_, host_m_, host_v_};
    }
  }

  // XXH3-64 of the parameters and the optimiser's moments: equal on every rank, or a rank
  // computed something else (a different thread count changes nothing here, a bad node would).
  static std::uint64_t state_checksum(const State& st) {
    data::Checksum sum;
    sum.update(st.params.data(), st.params.size_bytes());
    sum.update(st.m.data(), st.m.size_bytes());
    sum.update(st.v.data(), st.v.size_bytes());
    return sum.value();
  }

  void verify_replicas(std::uint64_t sum, int64 step) {
    const std::vector<std::uint64_t> all = comm_.gather(sum, "the checksum comparison");
    for (std::size_t r = 1; r < all.size(); ++r)
      if (all[r] != all[0])
        throw std::runtime_error(fmt::format("the ranks' parameters differ at step {}: rank {} has checksum {}, rank 0 {}; "
                                             "the replicas diverged (a faulty node or a non-deterministic reduction); resume from the "
                                             "last checkpoint",
                                             step, r, data::checksum_text(all[r]), data::checksum_text(all[0])));
  }

  void write_checkpoint(int64 step, std::uint64_t sum, const State& st) {
    std::vector<std::string> matrices;
    for (const MuonMatrix& m : opt_.matrices()) matrices.push_back(m.name);
    nlohmann::json meta = {{"step", step},
                           {"recipe", cfg_.recipe},
                           {"optimizer_steps", opt_.steps_taken()},
                           {"muon_matrices", matrices},
                           {"muon_norms", opt_.initial_norms()},  // doubles: exact in JSON
                           {"tokens", step * per_step_},
                           {"seconds", elapsed()},
                           {"step_seconds", step_seconds_},
                           {"seed", cfg_.seed},
                           {"data_position", step},  // windows are a function of (seed, step)
                           {"ranks", comm_.size()},
                           {"accum", cfg_.accum},
                           {"lanes", lanes_},
                           {"state_checksum", data::checksum_text(sum)},
                           {"config", identity(cfg_)},
                           {"tokenizer", tokenizer_},
                           {"corpus", corpus_}};
    if (model_.moe_layers() > 0) meta["moe_bias"] = moe_bias(model_);
    save_checkpoint<float>(files_.checkpoint, meta, st.params, st.m, st.v, keep_previous_ ? files_.prev : std::filesystem::path());
  }

  // The step's loss or gradient norm was not finite, or (bad_state: why) its update left a value of
  // the state that is not: the run ends, the last checkpoint is kept.
  TrainResult diverged(const TrainProgress& p, const std::string& bad_state = {}) {
    const double loss = p.loss, norm = p.grad_norm;
    const std::string what = !bad_state.empty()        ? "the update of step " + std::to_string(p.step) + " left the state not finite (" + bad_state + ")"
                             : std::isfinite(loss)     ? "the loss stayed finite but the gradient norm became "
                                                       : "the loss became ";
    const std::string value = !bad_state.empty() ? "" : std::isnan(loss) || std::isnan(norm) ? "NaN" : "Inf";
    const bool kept = std::filesystem::exists(files_.checkpoint);
    return finish("diverged", what + value + (bad_state.empty() ? " at step " + std::to_string(p.step) : "") +
                                  (kept ? "; stopped, the last good checkpoint (step " + std::to_string(last_good_) + ") is kept"
                                        : "; stopped before the first checkpoint (none written; lower --lr or set --grad-clip)"));
  }

  // Stopped by signal `sig` after `step` steps, checkpoint written: the log and summary say so.
  TrainResult interrupted(int sig, int64 step) {
    res_.signal = signal_name(sig);
    if (comm_.root()) {
      log_ << nlohmann::json{{"event", "interrupted"}, {"signal", res_.signal}, {"step", step}}.dump() << "\n";
      log_.flush();
    }
    return finish("interrupted", "interrupted by " + res_.signal + " after step " + std::to_string(step) +
                                     " (checkpoint written); resume to continue");
  }

  // Completes the result and writes summary.json.
  TrainResult finish(const std::string& status, const std::string& message) {
    res_.status = status;
    res_.message = message;
    res_.seconds = elapsed();
    res_.tokens_per_s = step_seconds_ > 0 ? static_cast<double>(res_.tokens) / step_seconds_ : 0;
    // A CPU peak measured at the start can read half the machine's: on a shared VM the FMA
    // microkernel read about 116 instead of 230 GFLOP/s at the start of a few processes whose
    // steps then ran at full speed (docs/benchmarks.md, "The peak by CPU time"), and the MFU read
    // 1.45. A single process measures the peak again now (about 0.15 s) and keeps the higher;
    // ranks would have to agree on it collectively, and not every way to finish passes through
    // all of them.
    if (peak_measured_ && comm_.size() == 1) {
      const double again = measure_peak_flops(B::threads(), 0.1);
      if (again > res_.peak_flops) {
        res_.peak_flops = again;
        res_.peak_source += " (measured again at the end: the higher)";
      }
    }
    res_.mfu = res_.tokens_per_s * length_.flops_per_token / res_.peak_flops;
    res_.peak_rss_bytes = peak_rss_bytes();
    nlohmann::json j = res_.json();
    j["config"] = cfg_;
    j["flops_per_token"] = length_.flops_per_token;
    j["ranks"] = comm_.size();
    if (comm_.size() > 1) j["communicator"] = comm_.describe();
    if (!comm_.root()) return res_;
    j["memory_estimate"] = {{"params", memory_.params},         {"grads", memory_.grads},   {"optimizer", memory_.optimizer},
                            {"activations", memory_.activations}, {"tokens", memory_.tokens}, {"indices", memory_.indices},
                            {"total", memory_.total}};
    if constexpr (DeviceBackend<B>) {
      if (device_used_ >= 0)  // measured after a step of this process
        j["device_memory"] = {{"device", B::device_name()}, {"used_bytes", device_used_}, {"total_bytes", device_total_},
                              {"measured", "total minus free (cudaMemGetInfo) after the first step: the run's buffers, the "
                                           "context and the libraries' workspaces, and anything else on the device"}};
    }
    write_file_atomic(files_.summary, j.dump(2) + "\n");
    return res_;
  }

  Communicator& comm_;
  const Reduction reduction_;
  const int64 chunks_;  // ranks x accum: the pieces a step's batch is cut into
  const int64 micro_;   // sequences per micro-batch (per forward pass of each lane together)
  const int64 lanes_;   // thread lanes of a micro-batch (thread_lanes); model_ takes lane_sequences(micro_, lanes_, 0) sequences
  const TrainConfig& cfg_;
  const RunFiles& files_;
  const ProgressFn& progress_;
  clock::time_point wall0_;
  const nlohmann::json tokenizer_;  // recorded in config.json and every checkpoint
  const std::string corpus_;        // the corpus's digest: recorded likewise, checked by a resume
  const TrainingLength length_;
  const MemoryEstimate memory_;
  const int64 per_step_, eval_batches_;
  Transformer<float, B> model_;
  Optimizer<float, B> opt_;
  const Schedule sched_;
  const TrainSampler sampler_;
  const ValidationSet valset_;
  std::vector<std::int32_t> inputs_, targets_;  // one micro-batch, training or validation
  std::vector<double> chunk_loss_;  // the step's loss of each chunk (on every rank after the sum)
  typename B::template buffer<float> grad_sum_;  // with accum > 1: the sum of this rank's chunks' gradients
  std::optional<ThreadLanes<float, B>> thread_lanes_;  // with lanes_ > 1 (host backend only)
  // Device backends only: host copies for the sum over the ranks and for checkpoints.
  std::vector<float> host_grad_, host_params_, host_m_, host_v_;
  std::int64_t device_used_ = -1, device_total_ = 0;  // device backends: memory in use after the first step
  std::vector<kernels::MoeStats> moe_sum_;  // with MoE and chunks_ > 1: the step's routing statistics
  std::vector<double> moe_flat_;            // sum_moe_stats: moe_sum_ as one buffer for the sum over the ranks
  std::vector<double> eval_loss_;   // evaluate(): the loss of each forward pass of a block
  std::string resplit_;             // resumed with another split of the batch: what changed
  TrainResult res_;
  int64 step0_ = 0;      // the step the run starts (or resumes) from
  int64 last_good_ = 0;  // the step of the newest checkpoint on disk
  std::string bad_state_;  // why the last checkpoint() found the state not finite (empty: it was)
  bool keep_previous_ = true;  // false while checkpoint.bin is a bad one the run did not resume from
  double prior_seconds_ = 0, step_seconds_ = 0;  // wall time of earlier sessions; time spent in steps
  std::ofstream log_;
  bool peak_measured_ = false;  // measure_peak measured the host's peak (not given, not a device's)
  bool logged_setup_ = false;  // write_log_line: the first line of this process carries the peak and ISA
};

}  // namespace detail

// Trains (or resumes) one run as described above and returns its result (also in summary.json);
// with a communicator of N ranks, one run on all of them (every rank calls this with the same
// config; the result is the same on every rank, and only rank 0 writes files).
template <class B = HostBackend>
TrainResult train(const TrainConfig& cfg, const ProgressFn& progress = {}, Communicator& comm = single_process()) {
  const auto wall0 = detail::Trainer<B>::clock::now();
  const detail::RunFiles files(cfg.out);
  // One process per run folder (util/file_lock.hpp), taken before anything is read or written:
  // a second `train` on the same --out stops here, naming the first. A folder that does not exist
  // yet is locked once it is made, after the input is checked, so bad input leaves nothing behind.
  // Rank 0 holds it for the whole job.
  const auto lock_run = [&] {
    FileLock l = detail::lock_run_folder(files);
    remove_stale_temporaries(files.out);  // a killed writer's NAME.tmp.PID
    return l;
  };
  FileLock lock;
  std::optional<detail::Trainer<B>> trainer;
  std::exception_ptr failure;
  try {
    if (comm.root() && std::filesystem::is_directory(files.out)) lock = lock_run();
    detail::RunInputs in = detail::read_inputs<B>(cfg, files, comm.size());
    // From here on the input is valid; build the run.
    if (comm.root()) {
      std::filesystem::create_directories(files.out);
      if (!lock.held()) lock = lock_run();
      nlohmann::json recorded = cfg;
      recorded["tokenizer"] = in.tokenizer;  // records of the corpus, not settings (config_from_json skips them)
      recorded["corpus"] = in.corpus;
      write_file_atomic(files.config, recorded.dump(2) + "\n");
    }
    trainer.emplace(cfg, std::move(in), files, wall0, progress, comm);
  } catch (...) {
    failure = std::current_exception();
  }
  // Bad input fails on every rank alike; anything else may fail on one rank only, and the others
  // must not start training without it.
  detail::agree_on_failure(comm, failure, "the start of the run");
  return trainer->train();
}

#ifdef LOOPSCALE_TRAIN_INSTANCE  // util/extern_templates.hpp: compiled once, in train/instances.cpp
LOOPSCALE_TRAIN_INSTANCE TrainResult train<HostBackend>(const TrainConfig&, const ProgressFn&, Communicator&);
#endif

}  // namespace loopscale::train
