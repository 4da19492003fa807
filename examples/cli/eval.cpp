// `loopscale eval` and `loopscale sample`: what a trained run can do. eval scores a task bundle
// (the built-in probes, eval/probes.hpp, or a CORE-format folder, eval/bundle.hpp) and the run's
// validation windows at one or more numbers of recurrences (--r-eval 1,2,4,8: the test-time
// recurrence curve of one model); sample generates text with the KV cache (eval/generate.hpp).
// `eval --write-builtin DIR` writes the probe bundle for inspection or for other tools.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/core.h>

#include "cli.hpp"
#include "loopscale/data/corpus.hpp"
#include "loopscale/eval/bundle.hpp"
#include "loopscale/eval/generate.hpp"
#include "loopscale/eval/model_scorer.hpp"
#include "loopscale/eval/probes.hpp"
#include "loopscale/eval/run_model.hpp"
#include "loopscale/eval/score.hpp"
#include "loopscale/eval/validation.hpp"
#include "loopscale/train/backend/host.hpp"

namespace loopscale::cli {
namespace {

struct EvalArgs {
  std::string run, tasks = "builtin", write_builtin, corpus;
  std::string prefix;  // text before every prompt (CORE's BOS), encoded with the run's tokenizer
  std::vector<int64> r_eval;
  int64 max_per_task = 0, items = 200, max_bytes = 256, batch = 8;
  std::optional<int64> val_tokens;  // unset: the trainer's windows (a -1 for that let `--val-tokens -1` through)
  std::uint64_t seed = 0;
  bool seed_given = false;  // --seed on the command line (else a run's probes.json may set it)
  int threads = 0;
  bool json = false;
};

// The run's config.json: where its corpus is and how it validated (trainer.hpp writes it).
nlohmann::json run_config(const std::filesystem::path& run) {
  std::ifstream f(run / "config.json");
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception&) {
    throw usage_error(fmt::format("{}: not valid JSON", (run / "config.json").string()));
  }
  return j;
}

// The folder `train` ran in, where config.json's relative "data" was read: the run folder's path
// without config.json's "out" when that is relative and the path ends with it (`train --out run`
// in work/, evaluated as work/run: work), or nothing when that cannot be told (an absolute or
// moved run folder).
std::optional<std::filesystem::path> training_folder(const std::string& run, const nlohmann::json& cfg) {
  const std::string out = cfg.value("out", std::string());
  const auto parts = [](const std::filesystem::path& p) {
    std::vector<std::filesystem::path> v;
    for (const std::filesystem::path& e : p.lexically_normal())
      if (!e.empty() && e != ".") v.push_back(e);
    return v;
  };
  const std::filesystem::path o(out);
  if (out.empty() || o.is_absolute()) return std::nullopt;
  const std::vector<std::filesystem::path> r = parts(run), tail = parts(o);
  if (tail.empty() || tail.size() > r.size() || std::find(tail.begin(), tail.end(), "..") != tail.end()) return std::nullopt;
  if (!std::equal(tail.begin(), tail.end(), r.end() - static_cast<std::ptrdiff_t>(tail.size()))) return std::nullopt;
  std::filesystem::path base = std::filesystem::path(run).lexically_normal();
  if (base.filename().empty()) base = base.parent_path();  // "work/run/"
  for (std::size_t i = 0; i < tail.size(); ++i) base = base.parent_path();
  return base.empty() ? std::filesystem::path(".") : base;
}

// The corpus folder the probes' cloze lines and the validation windows come from: --corpus, or
// the run's own, config.json's "data" read as train read it: a relative path from the folder train
// ran in (training_folder), then from the current folder. A folder found there must hold the
// corpus the run recorded ("corpus", data::corpus_digest, as `train --resume` checks): eval read
// "data" from the current folder only and never compared, so `eval work/run` from the folder
// above scored whatever corpus of that name it found there, without a word. Found, but none the
// recorded one: a usage_error. Not found: empty (the caller says so). --corpus is taken as given:
// it is how a run is scored on another corpus.
std::filesystem::path corpus_of(const EvalArgs& a, const nlohmann::json& cfg) {
  namespace fs = std::filesystem;
  if (!a.corpus.empty()) return a.corpus;
  const std::string d = cfg.value("data", std::string());
  if (d.empty()) return {};
  const fs::path p(d);
  std::vector<fs::path> candidates;
  if (!p.is_absolute())
    if (const std::optional<fs::path> base = training_folder(a.run, cfg)) candidates.push_back((*base / p).lexically_normal());
  if (candidates.empty() || candidates.front() != p.lexically_normal()) candidates.push_back(p);
  const auto it = cfg.find("corpus");
  const std::string recorded = it != cfg.end() && it->is_string() ? it->get<std::string>() : std::string();  // runs before 5 Dec 2026 record none
  std::string other;  // the first folder found that holds another corpus
  for (const fs::path& c : candidates) {
    std::error_code ec;
    // Either layout: val.bin, or a manifest's shards (`data prepare`, `data import`).
    if (!fs::exists(c / "val.bin", ec) && !data::has_manifest(c)) continue;
    if (recorded.empty()) return c;
    std::string digest;
    try {
      digest = data::corpus_digest(data::open_corpus(c, data::Split::train, data::Verify::headers), data::open_corpus(c, data::Split::val, data::Verify::headers));
    } catch (const std::invalid_argument& e) {
      digest = fmt::format("unreadable ({})", e.what());
    }
    if (digest == recorded) return c;
    if (other.empty()) other = fmt::format("{} is {}", c.string(), digest);
  }
  if (!other.empty())
    throw usage_error(fmt::format("{}: the run was trained on corpus {}, and {}; give --corpus DIR (the corpus it was trained on, or another to score it on)",
                                  a.run, recorded, other));
  return {};
}

// The seed of the probes' text a run trained on (`train --mix-probes` records it in probes.json),
// or nothing for a run without one.
std::optional<std::uint64_t> mix_probes_seed(const std::filesystem::path& run) {
  std::ifstream f(run / "probes.json");
  if (!f) return std::nullopt;
  const nlohmann::json j = nlohmann::json::parse(f, nullptr, false);
  if (!j.is_object() || !j.contains("seed") || !j["seed"].is_number_unsigned())
    throw usage_error(fmt::format("{}: no unsigned 'seed' in it", (run / "probes.json").string()));
  return j["seed"].get<std::uint64_t>();
}

void run_eval(EvalArgs a) {
  if (a.items < 2 || a.items > eval::max_probe_items)  // eval::builtin_probes' bound, named as the flag
    throw usage_error(fmt::format("--items must be from 2 to {}, not {}", eval::max_probe_items, a.items));
  if (a.max_bytes < 16) throw usage_error("--max-bytes must be at least 16");
  if (a.max_per_task < 0) throw usage_error("--max-per-task must be 0 (all) or more");
  if (a.batch < 1) throw usage_error("--batch must be at least 1");
  if (a.val_tokens && *a.val_tokens < 0) throw usage_error(fmt::format("--val-tokens must be 0 (none) or more, not {}", *a.val_tokens));
  if (a.val_tokens == 0 && a.tasks == "none" && a.write_builtin.empty())
    throw usage_error("--val-tokens 0 and --tasks none leave nothing to evaluate");
  train::HostBackend::set_threads(a.threads);
  if (!a.write_builtin.empty()) {
    if (!a.run.empty()) throw usage_error("--write-builtin writes the probe bundle and evaluates nothing: give no RUN_DIR");
    const eval::Probes p = eval::builtin_probes({a.seed, a.items, a.max_bytes, a.corpus});
    eval::write_bundle(p.bundle, a.write_builtin);
    std::printf("wrote %zu tasks to %s\n", p.bundle.tasks.size(), a.write_builtin.c_str());
    for (const eval::LeftOut& l : p.left_out) std::printf("left out %s: %s\n", l.label.c_str(), l.reason.c_str());
    return;
  }
  if (a.run.empty()) throw usage_error("give a RUN_DIR to evaluate (or --write-builtin DIR)");
  const eval::RunModel model = eval::load_run(a.run);
  if (!model.warning.empty()) std::fprintf(stderr, "loopscale: warning: %s\n", model.warning.c_str());
  const nlohmann::json cfg = run_config(a.run);
  const std::filesystem::path corpus = corpus_of(a, cfg);
  // A run trained on the probes' text left out the evaluation items of its own seed only, so it is
  // scored with that seed unless --seed says otherwise (then some items may have been trained on).
  if (const std::optional<std::uint64_t> trained = mix_probes_seed(a.run)) {
    if (!a.seed_given) a.seed = *trained;
    else if (a.seed != *trained)
      std::fprintf(stderr, "loopscale: warning: %s trained on the probes' text of seed %llu, which may hold evaluation items of --seed %llu\n", a.run.c_str(),
                   static_cast<unsigned long long>(*trained), static_cast<unsigned long long>(a.seed));
  }

  // The tasks: the built-in probes (drawn from the run's corpus when it is at hand) or a bundle.
  eval::Bundle bundle;
  std::vector<eval::LeftOut> left_out;
  if (a.tasks == "builtin") {
    eval::Probes p = eval::builtin_probes({a.seed, a.items, std::min<int64>(a.max_bytes, model.context() - 1), corpus});
    bundle = std::move(p.bundle);
    left_out = std::move(p.left_out);
  } else if (a.tasks != "none") {
    bundle = eval::read_bundle(a.tasks);
  }
  eval::EvalOptions opt;
  opt.max_per_task = a.max_per_task;
  opt.seed = a.seed;
  opt.batch = 4 * a.batch;
  opt.prefix = model.document_start();  // a packed corpus's BOS, as the run saw it before every document
  if (!bundle.tasks.empty()) model.text_tokenizer().encode(a.prefix, opt.prefix);
  // The built-in probes are written for byte-level models: those the run's tokenizer cannot score
  // are left out, and said so (a bundle of the user's is checked whole below: a bad row is an error).
  if (a.tasks == "builtin" && !bundle.tasks.empty()) {
    std::vector<eval::LeftOut> unscorable = eval::leave_out_unscorable(bundle, model.text_tokenizer(), model.context(), opt);
    if (bundle.tasks.empty() && a.val_tokens == 0)
      throw usage_error(fmt::format("nothing to evaluate: no built-in task can be scored with the run's tokenizer ({}: {}) and --val-tokens is 0",
                                    unscorable.front().label, unscorable.front().reason));
    for (eval::LeftOut& l : unscorable) left_out.push_back(std::move(l));
  }
  const bool tasks = !bundle.tasks.empty();
  // Every row the evaluation will score is prepared once now (a rendering and an encoding each, no
  // forward), so a row too long for the context or a num_fewshot that cannot fit is one line before
  // the validation windows and the first r_eval's tasks are scored, not after them.
  if (tasks) eval::check_scorable(bundle, model.text_tokenizer(), model.context(), opt, train::HostBackend::threads());

  // The validation windows: the trainer's own (same count and spacing) unless --val-tokens says.
  std::optional<data::Corpus> val;
  int64 windows = 0;
  const int64 seq = model.seq_len;
  if (corpus.empty() && !a.val_tokens) {
    // Not found where config.json says (corpus_of looks from the folder train ran in, then from
    // here): without tasks there is nothing to do; with them the validation line is left out, and
    // said so.
    const std::string where = cfg.value("data", std::string("(none recorded)"));
    const std::optional<std::filesystem::path> base = training_folder(a.run, cfg);
    const std::string from = (base ? base->string() + " or " : std::string()) + std::filesystem::current_path().string();
    if (!tasks)
      throw usage_error(fmt::format("nothing to evaluate: the run's corpus {} was not found from {} (give --corpus DIR) and --tasks is none",
                                    where, from));
    std::fprintf(stderr, "loopscale: warning: the run's corpus %s was not found from %s: no validation windows (give --corpus DIR)\n",
                 where.c_str(), from.c_str());
  }
  if (a.val_tokens != 0 && !corpus.empty()) {
    val = data::open_corpus(corpus, data::Split::val);
    // Bounded as the trainer's sample is (train::check_validation_windows: the split's distinct
    // windows): a huge --val-tokens or config.json eval_tokens ran for ever, printing nothing.
    if (a.val_tokens) {
      windows = std::max<int64>(1, *a.val_tokens / seq);
      train::check_validation_windows(windows, 1, seq, *val, "--val-tokens", *a.val_tokens);
    } else {
      const train::TrainConfig defaults;  // one named object: g++ 12 -O3 warned (maybe-uninitialized) about two temporaries here
      windows = eval::trainer_validation_windows(cfg.value("eval_tokens", defaults.eval_tokens), cfg.value("batch", defaults.batch), seq, *val,
                                                 (std::filesystem::path(a.run) / "config.json").string() + ": eval_tokens (the default of --val-tokens)");
    }
  } else if (a.val_tokens > 0) {
    throw usage_error("--val-tokens: the run's corpus was not found; give --corpus DIR");
  }

  std::vector<int64> rs = a.r_eval.empty() ? std::vector<int64>{model.spec.recur.r} : a.r_eval;
  for (const int64 r : rs) train::check_recurrences(model.spec, r);

  eval::ModelScorer<> scorer(model, rs.front(), a.batch);
  nlohmann::json out = {{"run", a.run}, {"step", model.step}, {"trained_r", model.spec.recur.r}, {"seed", a.seed},
                        {"checkpoint", model.checkpoint.string()}, {"tasks", !tasks ? std::string("none") : a.tasks == "builtin" ? std::string("builtin") : a.tasks},  // what was asked; the bundle's own name is under "bundle"
                        {"threads", train::HostBackend::threads()}, {"results", nlohmann::json::array()}};
  for (const eval::LeftOut& l : left_out) out["left_out"][l.label] = l.reason;
  if (!opt.prefix.empty()) out["prefix_tokens"] = opt.prefix;  // what went before every prompt
  for (const int64 r : rs) {
    scorer.set_recurrences(r);
    nlohmann::json row = {{"r_eval", r}};
    if (val) {
      const eval::ValidationResult v = eval::validation_loss(scorer, *val, seq, windows, a.batch);
      row["validation"] = eval::to_json(v);
      // Windows that overlap (a split shorter than they are) say so: "4096 windows of 32 tokens"
      // from a 2000-token split would read as far more text than was scored.
      const bool overlap = v.covered_tokens < v.windows * (seq + 1);
      if (!a.json)
        std::printf("r_eval %lld: val_loss %.4f nats/token, val_bpb %.4f (%lld windows of %lld tokens%s, %.0f tokens/s)\n",
                    static_cast<long long>(r), v.loss, v.bpb, static_cast<long long>(v.windows), static_cast<long long>(seq),
                    overlap ? fmt::format(", overlapping: {} distinct tokens of the split", v.covered_tokens).c_str() : "", v.tokens_per_s);
    }
    if (tasks) {
      const auto t0 = std::chrono::steady_clock::now();
      // The tasks shared among the threads, each with a scorer of its own (eval::evaluate_parallel:
      // one thread's results; docs/eval.md, "Evaluating on several threads").
      const auto make = [&]() -> std::unique_ptr<eval::Scorer> { return std::make_unique<eval::ModelScorer<>>(model, r, a.batch); };
      const eval::EvalResults res = eval::evaluate_parallel(bundle, make, model.text_tokenizer(), opt, train::HostBackend::threads());
      const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      row["eval"] = eval::to_json(res);
      row["eval_seconds"] = s;
      if (!a.json) std::printf("r_eval %lld: tasks (%.1f s)\n%s\n", static_cast<long long>(r), s, eval::format_table(res).c_str());
    }
    out["results"].push_back(row);
  }
  if (!a.json)
    for (const eval::LeftOut& l : left_out) std::printf("left out %s: %s\n", l.label.c_str(), l.reason.c_str());
  if (a.json) std::cout << out.dump(2) << "\n";
}

struct SampleArgs {
  std::string run, prompt;
  int64 max_new = 200, top_k = 0, r_eval = 0;
  double temperature = 0.8;
  std::uint64_t seed = 0;
  int threads = 0;
  bool json = false;
};

void run_sample(const SampleArgs& a, bool max_new_given) {
  // inf passed a ">= 0" test and failed later naming no flag.
  if (!(a.temperature >= 0) || !std::isfinite(a.temperature))
    throw usage_error(concat("--temperature ", a.temperature, ": must be a finite number, 0 (greedy) or more"));
  train::HostBackend::set_threads(a.threads);
  const eval::RunModel model = eval::load_run(a.run);
  if (!model.warning.empty()) std::fprintf(stderr, "loopscale: warning: %s\n", model.warning.c_str());
  const data::Tokenizer& tok = model.text_tokenizer();
  std::vector<std::int32_t> prompt = model.document_start();  // a packed corpus's BOS: the run's documents began with it
  tok.encode(a.prompt, prompt);
  if (prompt.empty()) throw usage_error("--prompt is empty");  // after a BOS an empty prompt is a document's start
  const int64 room = model.context() - static_cast<int64>(prompt.size());
  // The default asks for at most what the context leaves; a --max-new given must fit.
  const int64 max_new = max_new_given ? a.max_new : std::min(a.max_new, room);
  if (room < 1)  // named alone: the default --max-new, cut to the room, would read as a negative count
    throw usage_error(fmt::format("--prompt ({} tokens) leaves no room in the model's context of {} tokens", prompt.size(), model.context()));
  if (room < max_new)
    throw usage_error(fmt::format("--prompt ({} tokens) and --max-new {} exceed the model's context of {} tokens", prompt.size(),
                                  max_new, model.context()));
  const int64 r = a.r_eval > 0 ? a.r_eval : model.spec.recur.r;
  eval::Generator<> g(model, r);
  const auto t0 = std::chrono::steady_clock::now();
  const eval::Generation out = g.generate(prompt, max_new, {a.temperature, a.top_k, a.seed});
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::string text = tok.decode(out.tokens);
  if (a.json) {
    double lp = 0;
    for (const float x : out.logp) lp += x;
    const nlohmann::json j = {{"prompt", a.prompt}, {"text", text}, {"tokens", out.tokens}, {"r_eval", r},
                              {"temperature", a.temperature}, {"top_k", a.top_k}, {"seed", a.seed}, {"sum_logp", lp},
                              {"seconds", s}, {"tokens_per_s", s > 0 ? static_cast<double>(out.tokens.size()) / s : 0.0}};
    std::cout << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
  } else {
    std::fwrite(a.prompt.data(), 1, a.prompt.size(), stdout);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fputc('\n', stdout);
  }
}

const bool registered_eval = add_command([](CLI::App& app) {
  auto a = std::make_shared<EvalArgs>();
  CLI::App* sub = app.add_subcommand("eval", "score a trained run on downstream tasks and its validation windows, at any number of recurrences");
  sub->add_option("run", a->run, "the run folder (loopscale train --out)");
  sub->add_option("--tasks", a->tasks, "builtin (the generated probes), a CORE-format bundle folder, or none")->capture_default_str();
  add_distinct_list(*sub, "--r-eval", a->r_eval, "numbers of recurrences to evaluate at, e.g. 1,2,4,8 (default: the trained r)", ',');
  sub->add_option("--max-per-task", a->max_per_task, "score at most N items of each task (0: all)")->capture_default_str();
  sub->add_option("--items", a->items, "built-in probes: items per task")->capture_default_str();
  sub->add_option("--max-bytes", a->max_bytes, "built-in probes: bytes per prompt, few-shot example included")->capture_default_str();
  sub->add_option("--seed", a->seed, "seed of the built-in probes, the item subset and the few-shot draws (default: a run's --mix-probes-seed)")->capture_default_str();
  sub->add_option("--corpus", a->corpus, "corpus folder for the validation windows and the cloze probes (default: the run's)");
  sub->add_option("--val-tokens", a->val_tokens, "validation tokens (default: the trainer's windows; 0: none)");
  sub->add_option("--prefix", a->prefix,
                  "text put before every prompt (after the BOS of a run trained on a packed corpus, which is always there), as CORE puts its BOS "
                  "(e.g. $'\\n', the separator of a byte-level corpus's documents; default: none)");
  sub->add_option("--batch", a->batch, "sequences per forward")->capture_default_str();
  sub->add_option("--threads", a->threads, "threads (0: every core)")->capture_default_str()->check(thread_count());
  sub->add_option("--write-builtin", a->write_builtin, "write the built-in probe bundle to DIR and stop")->check(output_folder());
  sub->add_flag("--json", a->json, "print the results as one JSON object");
  sub->callback([a, sub] {
    a->seed_given = sub->get_option("--seed")->count() > 0;
    run_eval(*a);
  });

  auto s = std::make_shared<SampleArgs>();
  CLI::App* smp = app.add_subcommand("sample", "generate text from a trained run (KV cache, any number of recurrences)");
  smp->add_option("run", s->run, "the run folder (loopscale train --out)")->required();
  smp->add_option("--prompt", s->prompt, "the text to continue")->required();
  smp->add_option("--max-new", s->max_new, "tokens to generate (default: 200, or what the context leaves)")->capture_default_str()->check(at_least(1));
  smp->add_option("--temperature", s->temperature, "0: greedy")->capture_default_str();
  smp->add_option("--top-k", s->top_k, "draw among the k most likely tokens (0: all)")->capture_default_str();
  smp->add_option("--r-eval", s->r_eval, "number of recurrences (default: the trained r)")->check(at_least(1));
  smp->add_option("--seed", s->seed, "seed of the draws")->capture_default_str();
  smp->add_option("--threads", s->threads, "threads (0: every core)")->capture_default_str()->check(thread_count());
  smp->add_flag("--json", s->json, "print the sample and its log-probability as JSON");
  smp->callback([s, smp] { run_sample(*s, smp->get_option("--max-new")->count() > 0); });
});

}  // namespace
}  // namespace loopscale::cli
