// Running a planned sweep: one run after another, each trained (or resumed) by a RunFn, each
// finished run recorded as one line of results.jsonl. The orchestration knows nothing of training:
// a RunFn is handed the planned run and its own folder, trains or resumes it there from its own
// checkpoints, and returns the engine's summary JSON (which must hold val_loss). Re-running the
// same command after a kill at any moment skips the finished runs, resumes the interrupted one and
// ends with every run exactly once:
//   - a run is "finished" when its line is in the results file (written atomically, results.hpp);
//   - between the RunFn returning and that line, its summary is first kept in runs/ID/result.json
//     (also atomic), so a kill in that gap costs nothing: the next pass records it without training.
// Shards: `shard {I, N}` takes the runs whose plan index is I mod N and writes its own results
// file (results.shard-I-of-N.jsonl), so N processes can share one folder on a shared file system.
//
// Ownership: each shard's process holds a lock (util/file_lock.hpp) on DIR/.lock.shard-I-of-N
// (the whole sweep: DIR/.lock) for as long as it runs, so a second process for the same shard is
// refused at once, naming the first; other shards run beside it. Each run folder has its own lock
// too (the trainer's), which also keeps a whole-sweep run and a shard from training one run twice.
// Under its lock the process sets aside a torn last line of its results file (results.hpp) and
// removes that file's temporaries left by a killed predecessor.
//
// Signals: under an InterruptGuard (util/interrupt.hpp) the RunFn stops its run after a checkpoint
// and throws interrupted_error (engine.hpp does); a signal between runs stops before the next one.
// The interrupted run gets no results line, so the next call resumes it.
#pragma once

#include <chrono>
#include <cstdio>
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loopscale/data/corpus.hpp"
#include "loopscale/sweep/plan.hpp"
#include "loopscale/sweep/results.hpp"
#include "loopscale/util/file_lock.hpp"
#include "loopscale/util/interrupt.hpp"
#include "loopscale/util/regular_file.hpp"

namespace loopscale::sweep {

// What a RunFn reports after each optimiser step; drives the progress display.
struct StepProgress {
  int64 step = 0;   // steps done
  int64 steps = 0;  // steps planned
  double loss = 0;  // training loss of the last step
  double tokens_per_second = 0;
};

struct RunRequest {
  const SweepSpec* spec = nullptr;
  const PlannedRun* run = nullptr;
  fs::path dir;   // the run's own folder: checkpoints, logs, summary
  fs::path data;  // the corpus folder
  std::function<void(const StepProgress&)> progress;  // call after each step (may be empty)
};

// Trains (or resumes) one run and returns its summary JSON with at least "val_loss".
using RunFn = std::function<nlohmann::json(const RunRequest&)>;

struct Shard {
  int64 index = 0;  // I
  int64 count = 1;  // N
  bool whole() const { return count == 1; }
  bool owns(std::size_t plan_index) const { return static_cast<int64>(plan_index % static_cast<std::size_t>(count)) == index; }
};

// "I/N" with 0 <= I < N.
inline Shard parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  Shard s;
  try {
    if (slash == std::string::npos) throw std::invalid_argument("");
    std::size_t a = 0, b = 0;
    s.index = std::stoll(text.substr(0, slash), &a);
    s.count = std::stoll(text.substr(slash + 1), &b);
    if (a != slash || b != text.size() - slash - 1) throw std::invalid_argument("");
  } catch (const std::exception&) {
    throw sweep_error("--shard must look like I/N (e.g. 0/4), not '" + text + "'");
  }
  if (s.count < 1 || s.index < 0 || s.index >= s.count)
    throw sweep_error(fmt::format("--shard {}: need 0 <= I < N", text));
  return s;
}

inline fs::path results_file(const fs::path& out, const Shard& shard) {
  if (shard.whole()) return out / "results.jsonl";
  return out / fmt::format("results.shard-{}-of-{}.jsonl", shard.index, shard.count);
}

inline fs::path run_dir(const fs::path& out, const PlannedRun& run) { return out / "runs" / run.id; }

// The lock file a shard's process holds (see the top of this file).
inline fs::path shard_lock_file(const fs::path& out, const Shard& shard) {
  if (shard.whole()) return out / ".lock";
  return out / fmt::format(".lock.shard-{}-of-{}", shard.index, shard.count);
}

// Takes the shard's lock or throws folder_in_use ("DIR/ (shard I/N) is in use by process P (host H); ...").
inline FileLock lock_shard(const fs::path& out, const Shard& shard) {
  const std::string what = out.string() + "/" + (shard.whole() ? "" : fmt::format(" (shard {}/{})", shard.index, shard.count));
  return FileLock::acquire(shard_lock_file(out, shard), what, "wait for it to end, or stop it; other shards may run beside it");
}

// Writes DIR/sweep.json the first time; afterwards the folder must belong to the same spec.
inline void claim_folder(const fs::path& out, const Plan& plan) {
  fs::create_directories(out / "runs");
  const fs::path file = out / "sweep.json";
  const nlohmann::json mine = {{"fingerprint", plan.fingerprint}, {"spec", plan.spec}};
  if (fs::exists(file)) {
    nlohmann::json theirs;
    try {
      std::ifstream in(file);
      theirs = nlohmann::json::parse(in);
    } catch (const nlohmann::json::exception&) {
      throw sweep_error(file.string() + " is not valid JSON");
    }
    if (theirs.value("fingerprint", std::string{}) != plan.fingerprint)
      throw sweep_error(fmt::format("{} belongs to another sweep ('{}', fingerprint {}), not '{}' ({}); use another --out",
                                    out.string(), theirs.value("spec", nlohmann::json::object()).value("name", std::string{"?"}),
                                    theirs.value("fingerprint", std::string{"?"}), plan.spec.name, plan.fingerprint));
    return;
  }
  write_file_atomic(file, mine.dump(2) + "\n");
}

// The spec recorded in a sweep folder.
inline SweepSpec folder_spec(const fs::path& out) {
  const fs::path file = out / "sweep.json";
  if (const std::string why = not_a_file(file); !why.empty()) throw sweep_error(why);
  std::ifstream in(file);
  if (!in) throw sweep_error(fmt::format("{} has no sweep.json: not a sweep folder", out.string()));
  try {
    return nlohmann::json::parse(in).at("spec").get<SweepSpec>();
  } catch (const nlohmann::json::exception&) {
    throw sweep_error(file.string() + " is not a sweep.json written by loopscale sweep");
  }
}

struct RunOptions {
  fs::path out;
  fs::path data = "data/corpus";
  Shard shard{};
  std::ostream* log = &std::cerr;  // progress and notes; nullptr: silent
  double progress_interval_s = 2.0;  // at most one progress line this often
};

struct RunSummary {
  std::size_t planned = 0;      // runs in the plan
  std::size_t in_shard = 0;     // runs this shard owns
  std::size_t unrunnable = 0;   // owned runs the plan reports as not runnable
  std::size_t already = 0;      // owned runs found finished
  std::size_t recovered = 0;    // finished before a kill, recorded now without training
  std::size_t trained = 0;      // trained (or resumed) by this call
  double seconds = 0;
};

namespace detail {

inline std::string clock(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const long t = static_cast<long>(s + 0.5);
  return t >= 3600 ? fmt::format("{}:{:02}:{:02}", t / 3600, t / 60 % 60, t % 60) : fmt::format("{}:{:02}", t / 60, t % 60);
}

inline double run_flops(const PlannedRun& r, const SweepSpec& s) {
  return r.flops_per_token * static_cast<double>(r.steps) * static_cast<double>(s.batch_tokens);
}

// The digest of the corpus folder `data` (data::corpus_digest, from its shards' headers), which
// every result line records; empty where `data` is not a corpus folder (a RunFn of a test's own
// may need none: a real run fails on it anyway).
inline std::string corpus_of(const fs::path& data) {
  try {
    return data::corpus_digest(data::open_corpus(data, data::Split::train, data::Verify::headers),
                               data::open_corpus(data, data::Split::val, data::Verify::headers));
  } catch (const data::corpus_error&) {
    return {};
  }
}

inline nlohmann::json with_corpus(nlohmann::json line, const std::string& corpus) {
  if (!corpus.empty()) line["corpus"] = corpus;
  return line;
}

}  // namespace detail

inline RunSummary run_sweep(const Plan& plan, const RunOptions& opt, const RunFn& fn) {
  using Clock = std::chrono::steady_clock;
  const auto t0 = Clock::now();
  const auto since = [](Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); };
  claim_folder(opt.out, plan);
  const FileLock lock = lock_shard(opt.out, opt.shard);
  const fs::path file = results_file(opt.out, opt.shard);
  remove_stale_temporaries(opt.out, file.filename().string());
  set_aside_torn(file, opt.log);
  const std::vector<RunResult> read = read_results(file, opt.log);
  check_against_plan(read, plan);  // a line that names a planned run but not its values would skip that run
  const std::string corpus = detail::corpus_of(opt.data);
  {  // finished runs of another corpus, in this shard's file or another's, would join this one's
    std::vector<RunResult> all = read;
    for (const fs::path& other : results_files(opt.out))
      if (other != file)
        for (RunResult& r : read_results(other, nullptr)) all.push_back(std::move(r));
    check_one_corpus(all, corpus, opt.data.string());
  }
  const auto done = results_by_id(read, file.string());

  RunSummary sum;
  sum.planned = plan.runs.size();
  std::vector<const PlannedRun*> todo;
  double todo_flops = 0;
  for (const PlannedRun& r : plan.runs) {
    if (!opt.shard.owns(r.index)) continue;
    ++sum.in_shard;
    if (!r.runnable()) {
      ++sum.unrunnable;
      if (opt.log) *opt.log << fmt::format("skip {}: {}\n", r.id, r.problem);
      continue;
    }
    if (done.count(r.id)) {
      ++sum.already;
      continue;
    }
    todo.push_back(&r);
    todo_flops += detail::run_flops(r, plan.spec);
  }
  if (opt.log)
    *opt.log << fmt::format("sweep {}: {} runs planned, {} in this shard, {} finished before, {} to run ({:.3g} FLOPs)\n",
                            plan.spec.name, sum.planned, sum.in_shard, sum.already, todo.size(), todo_flops);

  const bool tty = opt.log == &std::cerr && ::isatty(2);
  double flops_done = 0, seconds_training = 0;  // this call's measured rate, for the time left
  for (std::size_t i = 0; i < todo.size(); ++i) {
    const PlannedRun& run = *todo[i];
    if (const int sig = interrupt_signal())
      throw interrupted_error(sig, fmt::format("sweep: interrupted by {} before run {} ({} of {} left); run the same command to continue",
                                               signal_name(sig), run.id, todo.size() - i, todo.size()));
    const fs::path dir = run_dir(opt.out, run);
    fs::create_directories(dir);
    const fs::path kept = dir / "result.json";
    nlohmann::json summary;
    if (fs::exists(kept)) {
      std::ifstream in(kept);
      summary = nlohmann::json::parse(in, nullptr, false);
      if (!summary.is_discarded() && summary.contains("val_loss")) {
        // Recorded with the corpus it was trained on, which must be this call's; one kept before
        // results recorded a corpus (5 Dec 2026) is recorded without one, as its line would have been.
        const std::string its = summary.contains("corpus") && summary.at("corpus").is_string() ? summary.at("corpus").get<std::string>() : "";
        summary.erase("corpus");  // the line's own field, not the engine's summary
        if (!corpus.empty() && !its.empty() && its != corpus)
          throw sweep_error(fmt::format("run {}: {} was trained on corpus {}, and --data {} is {}: give that corpus, or remove {} to train "
                                        "the run again", run.id, kept.string(), json_brief(nlohmann::json(its)), opt.data.string(), corpus, dir.string()));
        append_result(file, detail::with_corpus(result_line(plan, run, summary), its));
        ++sum.recovered;
        if (opt.log) *opt.log << fmt::format("[{}/{}] {}: recorded from {}\n", i + 1, todo.size(), run.id, kept.string());
        continue;
      }
    }
    const auto t_run = Clock::now();
    auto last_print = Clock::now() - std::chrono::hours(1);
    const double remaining_after = [&] {
      double f = 0;
      for (std::size_t k = i + 1; k < todo.size(); ++k) f += detail::run_flops(*todo[k], plan.spec);
      return f;
    }();
    RunRequest req;
    req.spec = &plan.spec;
    req.run = &run;
    req.dir = dir;
    req.data = opt.data;
    req.progress = [&](const StepProgress& p) {
      if (!opt.log) return;
      const bool last = p.step >= p.steps;
      if (!last && since(last_print) < opt.progress_interval_s) return;
      last_print = Clock::now();
      const double run_left = p.tokens_per_second > 0
                                  ? static_cast<double>(p.steps - p.step) * static_cast<double>(plan.spec.batch_tokens) / p.tokens_per_second
                                  : -1;
      // The rest of the sweep at this run's FLOP rate (or the call's average once a run finished).
      const double rate = seconds_training > 0 ? flops_done / seconds_training : p.tokens_per_second * run.flops_per_token;
      const double sweep_left = rate > 0 && run_left >= 0 ? run_left + remaining_after / rate : -1;
      *opt.log << fmt::format("{}[run {}/{}] {}r {} d {} step {}/{} loss {:.4f} {:.0f} tok/s  left: run {} sweep {}{}",
                              tty ? "\r" : "", i + 1, todo.size(), run.experts > 0 ? fmt::format("E {} ", run.experts) : "", run.r,
                              run.model.d_model, p.step, p.steps, p.loss,
                              p.tokens_per_second, detail::clock(run_left), detail::clock(sweep_left), tty ? "   " : "\n");
      if (tty && last) *opt.log << "\n";
      opt.log->flush();
    };
    if (opt.log) *opt.log << fmt::format("[run {}/{}] {}: r {} d_model {} N {} steps {}\n", i + 1, todo.size(), run.id, run.r,
                                         run.model.d_model, run.acct.params.non_embedding, run.steps);
    summary = fn(req);
    const nlohmann::json line = detail::with_corpus(result_line(plan, run, summary), corpus);  // validates the summary first
    write_file_atomic(kept, detail::with_corpus(summary, corpus).dump(2) + "\n");
    append_result(file, line);
    ++sum.trained;
    const double secs = since(t_run);
    flops_done += detail::run_flops(run, plan.spec);
    seconds_training += secs;
    if (opt.log) *opt.log << fmt::format("[run {}/{}] {}: val_loss {:.4f} in {:.1f} s\n", i + 1, todo.size(), run.id, line.at("loss").get<double>(), secs);
  }
  sum.seconds = since(t0);
  return sum;
}

}  // namespace loopscale::sweep
