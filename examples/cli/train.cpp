// `loopscale train`: one training run on the CPU or a CUDA device (--device, cli/device.hpp). A thin
// layer over train::train() (trainer.hpp):
// flags (or a JSON config, flags overriding it) become a TrainConfig, progress goes to stderr as a
// bar on a terminal and as plain lines otherwise, and the result is summary.json in --out. The
// recipe (--recipe, or the config's) gives every optimiser setting that neither names. SIGTERM,
// SIGINT or SIGUSR1 stop it after the current step with a checkpoint and exit 75 (resumable); a
// second process on the same --out is refused with exit 2. Under mpirun or srun (a build with MPI)
// the ranks train one model together (data parallel, docs/scaling-out.md); rank 0 prints.
#include <algorithm>
#include <cstdio>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <memory>

#include <fmt/core.h>
#include <unistd.h>

#include "cli.hpp"
#include "device.hpp"
#include "loopscale/data/corpus.hpp"
#include "loopscale/eval/probes.hpp"
#include "loopscale/train/trainer.hpp"
#include "loopscale/util/atomic_file.hpp"
#include "loopscale/util/interrupt.hpp"
#include "loopscale/util/json_parse.hpp"
#include "processes.hpp"
#include "spec_flags.hpp"

namespace loopscale::cli {
namespace {

struct TrainArgs {
  SpecFlags spec;
  MoeFlags moe;
  train::TrainConfig cfg;
  std::string config_file;
  std::string decay = "cosine";
  double tokens = 0;  // accepts 1e7 as well as 10000000
  double mix_probes = 0;
  std::uint64_t mix_probes_seed = 0;
  std::vector<std::string> mix_probes_tasks;
  bool dry_run = false;
  double collective_timeout = 600;
  TrainArgs() {
    spec.vocab = 256;  // the byte-level corpus of scripts/corpus.sh
    spec.vocab_multiple = 64;
  }
};

std::string duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const long t = static_cast<long>(s + 0.5);
  return t >= 3600 ? fmt::format("{}h{:02}m", t / 3600, t % 3600 / 60) : fmt::format("{}m{:02}s", t / 60, t % 60);
}

const bool registered_train = add_command([](CLI::App& app) {
  auto a = std::make_shared<TrainArgs>();
  CLI::App* sub = app.add_subcommand("train", "train a looped transformer on a token corpus (CPU or CUDA device)");
  a->spec.add_to(*sub);
  a->moe.add_to(*sub);
  sub->get_option("--d-model")->required(false);  // may come from --config instead
  train::TrainConfig& c = a->cfg;
  sub->add_option("--config", a->config_file, "JSON TrainConfig file; flags given as well override it");
  sub->add_option("--batch", c.batch, "sequences per step")->capture_default_str();
  sub->add_option("--seq-len", c.seq_len, "tokens per sequence")->capture_default_str();
  sub->add_option("--tokens", a->tokens, "training tokens (or give --flops)");
  sub->add_option("--flops", c.flops, "training FLOPs, paper convention; tokens = flops / train FLOPs per token");
  // Defaults of the optimiser flags are the recipe's (adamw / paper), so they are not captured.
  sub->add_option("--recipe", c.recipe,
                  "adamw (AdamW everywhere, the default) or paper (the iso-depth paper's MuonH + AdamW and its "
                  "initialisation); the optimiser flags below default to the recipe's values");
  sub->add_option("--init", c.init, "initialisation: scaled-normal (adamw) or paper (paper)");
  sub->add_option("--lr", c.lr, "peak learning rate of the matrices (adamw 3e-3, paper 0.02)");
  sub->add_option("--lr-embedding", c.lr_embedding, "learning-rate multiplier of the embedding (adamw 1, paper 10)");
  sub->add_option("--lr-lm-head", c.lr_lm_head, "learning-rate multiplier of the lm_head (adamw 1, paper 0.2)");
  sub->add_option("--lr-norm", c.lr_norm, "learning-rate multiplier of norms (adamw: and the injection; 1, paper 0.25)");
  sub->add_option("--lr-lanes", c.lr_lanes, "paper recipe: learning-rate multiplier of hyperconnection lanes (0.5)");
  sub->add_option("--lr-width-ref", c.lr_width_ref,
                  "AdamW multipliers outside the matrices times (d_model / this)^-0.5; 0: off (adamw 0, paper 512)");
  sub->add_option("--lr-transfer", c.lr_transfer,
                  "none | hyperp (paper recipe): correct the rates by the step's tokens and the matrices' also by the run's "
                  "training tokens, as the iso-depth paper's scaling runs do (none)");
  sub->add_option("--weight-decay", c.weight_decay, "adamw recipe: decoupled weight decay of the matrices (0.1; paper: none)");
  sub->add_option("--muon-momentum", c.muon_momentum, "paper recipe: MuonH's Nesterov momentum (0.95)");
  sub->add_option("--grad-clip", c.grad_clip, "global gradient-norm clip, 0: off (adamw 1, paper 0)");
  sub->add_option("--warmup", c.warmup, "fraction of the steps in warmup (adamw 0.02, paper 0)");
  sub->add_option("--decay", a->decay, "cosine | linear | constant (adamw cosine, paper linear)");
  sub->add_option("--final-lr-frac", c.final_lr_frac, "learning-rate floor as a fraction of --lr (0.1)");
  sub->add_option("--softcap", c.softcap, "logit softcap (0: off)")->capture_default_str();
  sub->add_option("--data", c.data, "corpus folder: train.bin and val.bin, or a manifest.json and its shards (data prepare)")->capture_default_str();
  sub->add_option("--out", c.out, "run folder: log.jsonl, checkpoint.bin, summary.json")->check(output_folder());
  sub->add_option("--seed", c.seed, "seed of the initialisation and the data order (not of a packed corpus, read in its rows' order)")->capture_default_str();
  sub->add_option("--threads", c.threads, "threads (0: every core)")->capture_default_str()->check(thread_count());
  sub->add_option("--thread-split", c.thread_split,
                  "how the threads share a pass: batch (each thread its share of the sequences through a model of its own), "
                  "kernels (all threads on each kernel of one model), auto (batch on the host where the micro-batch gives "
                  "every thread a sequence and the shares keep the threads at least 7/8 busy)")
      ->capture_default_str();
  sub->add_option("--device", c.device,
                  "auto (a CUDA device when this build has CUDA and one is usable, else the host) | host | cuda; a run may "
                  "resume on another device")
      ->capture_default_str();
  sub->add_option("--precision", c.precision,
                  "GEMM arithmetic on a CUDA device: bf16 (bf16 inputs, fp32 accumulation and master weights) | tf32 | fp32; "
                  "the host computes in fp32")
      ->capture_default_str();
  sub->add_option("--eval-every", c.eval_every, "steps between validation evaluations (0: at the end only)")->capture_default_str();
  sub->add_option("--eval-tokens", c.eval_tokens, "tokens in the fixed validation sample")->capture_default_str();
  sub->add_option("--checkpoint-every", c.checkpoint_every, "steps between checkpoints (0: at the end only)")->capture_default_str();
  sub->add_option("--peak-flops", c.peak_flops, "FLOP/s the MFU is relative to (0: measure)");
  sub->add_flag("--resume", c.resume, "continue the run in --out from its checkpoint");
  sub->add_option("--mix-probes", a->mix_probes,
                  "mix the built-in probes' task text into training: this fraction of the training windows (byte-level corpora; "
                  "written to OUT/probes.bin, never the evaluation items)");
  sub->add_option("--mix-probes-seed", a->mix_probes_seed, "the probes' seed, the one `loopscale eval --seed` evaluates with")
      ->capture_default_str();
  add_distinct_list(*sub, "--mix-probes-tasks", a->mix_probes_tasks,
                    "only these probe tasks in the mixed text, e.g. induction,var_assign_d0_math (default: every task the text has)", ',');
  sub->add_option("--accum", c.accum,
                  "micro-batches per step and rank: each forward pass computes batch / (ranks x accum) sequences, their "
                  "gradients summed (less memory, the same step)")
      ->capture_default_str();
  sub->add_option("--reduction", c.reduction,
                  "under mpirun: how the ranks' gradients are summed: allreduce (MPI's own order) or ordered (rank 0 + 1 + ..., "
                  "so N ranks equal one process with --accum N bit for bit)")
      ->capture_default_str();
  sub->add_option("--collective-timeout", a->collective_timeout,
                  "under mpirun: seconds a rank waits for the others in a collective before it ends the job (a rank died or hangs)")
      ->capture_default_str();
  sub->add_flag("--dry-run", a->dry_run, "check the input as the run would (config, corpus headers, probe tasks, memory, the --out folder) but not every token, print the config, budget and memory estimate, and stop");
  c.data = "data/corpus";

  sub->callback([a, sub] {
    train::TrainConfig cfg = a->cfg;
    cfg.decay = a->decay;
    if (a->tokens < 0 || !std::isfinite(a->tokens)) throw usage_error("--tokens must be positive");
    // A count of tokens: 1.5 would be cut to 1, and 1e30 does not fit the int64 it is kept in.
    if (a->tokens != std::floor(a->tokens) || a->tokens >= 0x1p62)
      throw usage_error(concat("--tokens must be a whole number below 2^62, not ", a->tokens));
    cfg.tokens = static_cast<int64>(a->tokens);
    // Whether spec flags were given: they build the spec, laid over the config's if it has one.
    const bool spec_flags = SpecFlags::any_given(*sub);
    // The config: the file's keys (if any), then the flags given, read as one JSON config so that
    // every key neither gives takes the recipe's default.
    nlohmann::json j = nlohmann::json::object();
    if (!a->config_file.empty()) {
      const std::string text = read_input(a->config_file, "--config:", "a JSON file");
      std::string key;
      try {
        j = parse_json_bounded<usage_error>(text, "--config: " + a->config_file, &key);
      } catch (const nlohmann::json::exception& e) {
        throw usage_error("--config: " + a->config_file + " is not valid JSON: " + json_parse_fault(text, e, key));
      }
      if (!j.is_object()) throw usage_error("--config: " + a->config_file + " does not hold a JSON object");
    }
    const nlohmann::json flags = cfg;
    const std::pair<const char*, const char*> map[] = {
        {"--recipe", "recipe"}, {"--init", "init"}, {"--batch", "batch"}, {"--seq-len", "seq_len"}, {"--tokens", "tokens"},
        {"--flops", "flops"}, {"--lr", "lr"}, {"--lr-embedding", "lr_embedding"}, {"--lr-lm-head", "lr_lm_head"},
        {"--lr-norm", "lr_norm"}, {"--lr-lanes", "lr_lanes"}, {"--lr-width-ref", "lr_width_ref"}, {"--lr-transfer", "lr_transfer"},
        {"--weight-decay", "weight_decay"}, {"--muon-momentum", "muon_momentum"}, {"--grad-clip", "grad_clip"},
        {"--warmup", "warmup"}, {"--decay", "decay"}, {"--final-lr-frac", "final_lr_frac"}, {"--softcap", "softcap"},
        {"--data", "data"}, {"--out", "out"}, {"--seed", "seed"}, {"--threads", "threads"}, {"--eval-every", "eval_every"},
        {"--eval-tokens", "eval_tokens"}, {"--checkpoint-every", "checkpoint_every"}, {"--peak-flops", "peak_flops"},
        {"--resume", "resume"}, {"--accum", "accum"}, {"--reduction", "reduction"}, {"--device", "device"}, {"--precision", "precision"},
        {"--thread-split", "thread_split"}};
    for (const auto& [flag, key] : map)
      if (sub->get_option(flag)->count() > 0) j[key] = flags[key];
    // One budget flag replaces the file's other budget; both flags given are checked as both.
    const bool tokens_flag = sub->get_option("--tokens")->count() > 0, flops_flag = sub->get_option("--flops")->count() > 0;
    if (tokens_flag && !flops_flag) j["flops"] = 0.0;
    if (flops_flag && !tokens_flag) j["tokens"] = 0;
    if (!j.contains("data")) j["data"] = flags["data"];
    const bool d_model_flag = sub->get_option("--d-model")->count() > 0;
    std::optional<SpecFlags> read_back;
    if (spec_flags && j.contains("spec")) {
      // The config's spec read back as flags, the flags given laid over them (SpecFlags::from_spec
      // says how flags that depend on each other combine), so a flag given changes what it names
      // and nothing else: --moe-every was ignored, and --d-model rebuilt the spec from the defaults.
      // A spec no flags build (an older config, a hand-written one) with --d-model given is built
      // from the flags alone, as before; without --d-model it is refused (from_spec says why).
      try {
        read_back = SpecFlags::from_spec(train::config_from_json(j).spec, "--config " + a->config_file);
      } catch (const usage_error&) {
        if (!d_model_flag) throw;
      }
    }
    if (read_back) {
      const SpecFlags from_config = *read_back;
      read_back->override_with(a->spec, *sub);
      try {
        j["spec"] = read_back->build();
      } catch (const usage_error& e) {
        // The builder names flags (--r 2) that may be the config's, not the user's: say which were
        // given and what the config holds for the structural ones that were not.
        std::string given, kept;
        SpecFlags::for_each_flag([&](const char* name, auto) {
          const CLI::Option* o = sub->get_option(name);
          if (o->count() == 0) return;
          given += fmt::format("{}{}{}", given.empty() ? "" : " ", name, o->get_expected_min() == 0 ? "" : " " + o->as<std::string>());
        });
        const std::pair<const char*, int64> structure[] = {
            {"--depth", from_config.depth}, {"--prelude", from_config.prelude}, {"--coda", from_config.coda}, {"--r", from_config.r}};
        for (const auto& [name, v] : structure)
          if (sub->get_option(name)->count() == 0) kept += fmt::format(" {} {}", name, v);
        throw usage_error(fmt::format("--config {} with {}: {}{}", a->config_file, given, e.what(), kept.empty() ? "" : " (the config's spec gives" + kept + ")"));
      }
    } else if (spec_flags && (!a->config_file.empty() || d_model_flag)) {
      j["spec"] = a->spec.build();
    }
    const bool has_spec = j.contains("spec");
    cfg = train::config_from_json(j);
    if (!has_spec) throw usage_error("--d-model is required (or give --config with a spec)");
    if (a->moe.any()) {  // routing flags override the config's
      a->moe.routing(cfg.spec);
      if (a->moe.router) cfg.moe_router = *a->moe.router;
      if (a->moe.balance) cfg.moe_balance = *a->moe.balance;
      if (a->moe.z_loss) cfg.moe_z_loss = *a->moe.z_loss;
      if (a->moe.capacity) cfg.moe_capacity = *a->moe.capacity;
      if (a->moe.no_renormalize) cfg.moe_renormalize = false;
    }
    if (cfg.tokens == 0 && cfg.flops == 0) throw usage_error("give a budget: --tokens or --flops");
    if (cfg.out.empty()) throw usage_error("--out is required");
    // --out is checked as it is read (output_folder); a config file's "out" only here, before any
    // work, or a folder under a file failed later as a raw filesystem error, exit 1.
    if (const std::string why = output_folder_fault(cfg.out); !why.empty()) throw usage_error("--config " + a->config_file + ": out: " + why);
    const std::string device = resolve_device(cfg.device);  // before anything starts: cuda where there is none is bad input
    if (!(a->collective_timeout > 0) || !std::isfinite(a->collective_timeout)) throw usage_error("--collective-timeout must be positive");
    // Under mpirun or srun, the ranks (MPI starts here; one plain process otherwise).
    train::Communicator& comm = a->dry_run ? train::single_process() : processes(a->collective_timeout);
    if (!a->mix_probes_tasks.empty() && sub->get_option("--mix-probes")->count() == 0)
      throw usage_error("--mix-probes-tasks needs --mix-probes FRAC, the share of the windows they take");
    if (sub->get_option("--mix-probes")->count() > 0) {
      if (!(a->mix_probes > 0 && a->mix_probes < 1)) throw usage_error("--mix-probes must be a fraction in (0, 1)");
      cfg.mix_frac = a->mix_probes;
      cfg.mix_data = (std::filesystem::path(cfg.out) / "probes.bin").string();
      cfg.mix_stride = cfg.seq_len + 1;  // windows start where probes.bin's windows do, each at a whole item
      train::detail::check_config(cfg);
      if (data::open_corpus(cfg.data, data::Split::train, data::Verify::headers).vocab() != 256)
        throw usage_error(fmt::format("--mix-probes: the probes are byte text, and {} is not a byte-level corpus (vocab 256)", cfg.data));
      // The text of the probes `loopscale eval` scores this run on (same seed, items and prompt
      // bytes), minus those evaluation items, in windows of seq_len + 1 bytes that each begin with
      // an item; deterministic, so a resumed run writes nothing new. Sized to the run
      // (probe_text_bytes: before, a fixed 2 MiB that a long run drew each window of many times).
      // What it was written from is recorded beside it (probes.json); a resume must ask for the same.
      const eval::ProbeOptions po{a->mix_probes_seed, 200, std::min<int64>(256, cfg.seq_len), {}};
      const std::size_t bytes = eval::probe_text_bytes(cfg.mix_frac * static_cast<double>(train::training_length(cfg).tokens));
      const nlohmann::json record = {{"seed", po.seed}, {"tasks", a->mix_probes_tasks}, {"items_per_task", po.items_per_task},
                                     {"max_bytes", po.max_bytes}, {"window", cfg.seq_len + 1}};
      const std::filesystem::path record_path = std::filesystem::path(cfg.out) / "probes.json";
      // The text (or, for --dry-run, its first byte: the same checks of the task names and items).
      const auto probe_text = [&](std::size_t n) {
        try {
          return eval::probe_training_text(po, a->mix_probes_tasks, n, static_cast<std::size_t>(cfg.seq_len + 1));
        } catch (const std::invalid_argument& e) {
          throw usage_error(fmt::format("--mix-probes: {}", e.what()));  // a task named wrongly, or too few items
        }
      };
      if (a->dry_run) (void)probe_text(1);
      if (!a->dry_run && comm.root() && !std::filesystem::exists(cfg.mix_data)) {
        const std::string text = probe_text(bytes);
        std::vector<std::int32_t> tokens(text.begin(), text.end());
        for (std::int32_t& t : tokens) t &= 0xFF;  // char may be signed
        std::filesystem::create_directories(cfg.out);
        nlohmann::json written = record;
        written["bytes"] = text.size();
        write_file_atomic(record_path, written.dump(2) + "\n");  // first: probes.bin alone would be taken for a run from before the record
        data::write_token_file(cfg.mix_data, tokens, 256);
      } else if (std::filesystem::exists(record_path)) {  // a dry run too: it only reads
        std::ifstream in(record_path);
        nlohmann::json old = nlohmann::json::parse(in, nullptr, false);
        if (old.is_object()) old.erase("bytes");
        if (old != record)
          throw usage_error(fmt::format("--mix-probes: {} was written from {}, not from this command's {} (the same --mix-probes-seed and "
                                        "--mix-probes-tasks, or a new --out)",
                                        cfg.mix_data, old.dump(), record.dump()));
      }
      comm.gather(0, "the writing of probes.bin");  // the other ranks read it once rank 0 wrote it
    }

    if (a->dry_run) {
      train::detail::check_config(cfg);
      // What the run checks before it trains, but the checksums: the corpus, its vocabulary and
      // context (the probe tasks above), and (on the host) the memory below.
      const data::Corpus train_split = train::detail::open_run_corpus(cfg, data::Split::train, data::Verify::headers);
      const data::Corpus val_split = train::detail::open_run_corpus(cfg, data::Split::val, data::Verify::headers);
      // The token file mixed in (--mix-probes writes its probes.bin only when the run starts).
      if (sub->get_option("--mix-probes")->count() == 0 || std::filesystem::exists(cfg.mix_data))
        (void)train::detail::open_mix_corpus(cfg, data::Verify::headers);
      // The run folder as the run finds it: a process training there, a run there without
      // --resume, a resume whose recipe, settings or tokenizer differ, a folder where a file goes.
      const train::detail::RunFiles files(cfg.out);
      train::detail::check_run_files(files);
      if (std::filesystem::is_directory(files.out)) {
        train::detail::check_run_folder_free(files);  // takes no lock, writes nothing
        (void)train::detail::resumable_checkpoint(cfg, files, data::tokenizer_record(cfg.data, train_split), data::corpus_digest(train_split, val_split));
      }
      const train::TrainingLength b = train::training_length(cfg);
      // A device's forms of attention keep a T x T gradient per sequence, the host's one per thread;
      // only the host runs thread lanes.
      const bool on_host = device == "host";
      const int threads = on_host ? (cfg.threads > 0 ? cfg.threads : static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))) : 1;
      const int64 micro = train::detail::micro_batch(cfg, 1);
      const int64 avail = on_host ? train::available_memory_bytes() : 0;
      const train::detail::LanePlan plan = train::detail::plan_lanes(cfg, micro, threads, on_host, attention_scratch(on_host), avail);
      train::detail::check_memory_fits(cfg, micro, plan, avail);
      const MemoryEstimate& m = plan.memory;
      nlohmann::json j = {{"config", cfg}, {"device", device}, {"thread_lanes", plan.lanes}, {"steps", b.steps}, {"tokens", b.tokens},
                          {"flops_per_token", b.flops_per_token},
                          {"flops", b.flops_per_token * static_cast<double>(b.tokens)}, {"params", count_params(cfg.spec).total},
                          {"memory_estimate", {{"params", m.params}, {"grads", m.grads}, {"optimizer", m.optimizer},
                                               {"activations", m.activations}, {"tokens", m.tokens}, {"indices", m.indices}, {"total", m.total}}}};
      if (train::parse_lr_transfer(cfg.lr_transfer) != train::LrTransfer::none) j["lr_transfer"] = train::lr_scales_of(cfg);
      {  // the validation sample every evaluation scores (train::validation_batches)
        const int64 windows = train::validation_batches(cfg.eval_tokens, cfg.batch, cfg.seq_len, val_split) * cfg.batch;
        j["validation"] = {{"windows", windows}, {"tokens", windows * cfg.seq_len}};
      }
      if (train_split.row_tokens() > 0)  // read row by row: how often the run goes through them
        j["packed_rows"] = {{"rows", train_split.rows()}, {"row_tokens", train_split.row_tokens()},
                            {"epochs", static_cast<double>(b.steps * cfg.batch) / static_cast<double>(train_split.rows())}};
      std::cout << j.dump(2) << "\n";
      return;
    }

    const bool tty = isatty(fileno(stderr)) != 0;
    const bool quiet = !comm.root();  // rank 0 shows the progress of all
    const auto show = [tty, quiet](const train::TrainProgress& p) {
      if (quiet) return true;
      const double frac = static_cast<double>(p.step) / static_cast<double>(p.steps);
      const double eta = p.seconds / std::max(frac, 1e-9) * (1 - frac);
      std::string val = p.val_loss ? fmt::format("  val {:.4f} ({:.3f} bpb)", *p.val_loss, *p.val_bpb) : "";
      if (p.moe_max_min_load) val += fmt::format("  load max/min {:.2f}  drop {:.1f}%", *p.moe_max_min_load, 100 * *p.moe_drop_rate);
      if (tty) {
        const int width = 24, fill = static_cast<int>(frac * width);
        fmt::print(stderr, "\r[{}{}] {}/{}  loss {:.4f}  {:.0f} tok/s  mfu {:.1f}%  eta {}{}\033[K", std::string(fill, '#'),
                   std::string(width - fill, '.'), p.step, p.steps, p.loss, p.tokens_per_s, 100 * p.mfu, duration(eta), val);
        if (p.val_loss || p.step == p.steps) fmt::print(stderr, "\n");
      } else {
        const int64 every = std::max<int64>(1, p.steps / 50);
        if (p.step % every == 0 || p.step == p.steps || p.val_loss)
          fmt::print(stderr, "step {}/{}  tokens {}  loss {:.4f}  lr {:.3g}  grad_norm {:.3f}  {:.0f} tok/s  mfu {:.1f}%{}\n", p.step,
                     p.steps, p.tokens, p.loss, p.lr, p.grad_norm, p.tokens_per_s, 100 * p.mfu, val);
      }
      return true;
    };
    const InterruptGuard guard;  // SIGTERM/SIGINT/SIGUSR1: stop after the step with a checkpoint
    const train::TrainResult r = train_on_device(cfg, show, comm);
    if (r.status == "interrupted")
      throw interrupted_error(interrupt_signal(), fmt::format("train: {} (the same command with --resume)", r.message));
    if (r.status == "diverged") {
      if (comm.root()) fmt::print(stderr, "loopscale: train: {}\n", r.message);
      throw train::other_rank_failed(0, 1, "found the training diverged");  // every rank did: exit 1, no more lines
    }
    if (!comm.root()) return;
    fmt::print("{}: val_loss {:.4f} nats/token, val_bpb {:.4f}, {} tokens in {}, {:.0f} tok/s, mfu {:.1f}%, peak RSS {} MiB -> {}\n",
               r.status, r.val_loss, r.val_bpb, r.tokens, duration(r.seconds), r.tokens_per_s, 100 * r.mfu, r.peak_rss_bytes >> 20,
               (std::filesystem::path(cfg.out) / "summary.json").string());
  });
});

}  // namespace
}  // namespace loopscale::cli
