// `loopscale sweep plan|run|merge|slurm|report|compare`: thin over include/loopscale/sweep/.
// `sweep run` exits 75 when a signal stopped it (resumable), 2 when its shard is in use.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include <fmt/core.h>

#include "cli.hpp"
#include "device.hpp"
#include "loopscale/sweep/compare.hpp"
#include "loopscale/sweep/engine.hpp"
#include "loopscale/sweep/merge.hpp"
#include "loopscale/sweep/plan.hpp"
#include "loopscale/sweep/presets.hpp"
#include "loopscale/sweep/report.hpp"
#include "loopscale/sweep/results.hpp"
#include "loopscale/sweep/run.hpp"
#include "loopscale/sweep/slurm.hpp"
#include "loopscale/util/atomic_file.hpp"
#include "loopscale/util/interrupt.hpp"
#include "loopscale/util/json_parse.hpp"

namespace loopscale::cli {
namespace {

using namespace loopscale::sweep;

// A spec file or --preset NAME: every sweep command takes one of them.
struct SpecSource {
  std::string file;
  std::string preset;

  void add_to(CLI::App& app, bool positional = true) {
    if (positional) app.add_option("spec", file, "sweep spec (JSON file)");
    else app.add_option("--spec", file, "sweep spec (JSON file)");
    app.add_option("--preset", preset, "a named sweep: smoke | cpu-mini | cpu | paper | looped-moe | mixed-moe");
  }
  bool given() const { return !file.empty() || !preset.empty(); }
  SweepSpec load() const {
    if (!file.empty() && !preset.empty()) throw usage_error("give a spec file or --preset, not both");
    if (!preset.empty()) return sweep::preset(preset);
    if (file.empty()) throw usage_error("a sweep spec file or --preset NAME is required");
    const std::string text = read_input(file, "the spec file", "a JSON file");
    nlohmann::json j;
    std::string key;
    try {
      j = parse_json_bounded<usage_error>(text, file, &key);
    } catch (const nlohmann::json::exception& e) {  // parse_error, and out_of_range for 1e400 (tests/fuzz)
      throw usage_error(file + ": not valid JSON (" + json_parse_fault(text, e, key) + ")");
    }
    try {
      return j.get<SweepSpec>();
    } catch (const sweep_error& e) {
      throw usage_error(file + ": " + e.what());
    }
  }
  // The plan, with every run's training settings checked (the spec's "train" object read as each
  // run's config), so that `plan` refuses what `run` would.
  Plan plan() const {
    try {
      Plan p = make_plan(load());
      for (const auto& r : p.runs) {
        // Every check a run would make before training (a negative lr once failed the first run of
        // `sweep run`, after `plan` had accepted it).
        const train::TrainConfig c = train_config(p.spec, r, "x", "x");  // the train object's keys, for every run
        // A run the plan marks NOT RUN (D below one batch, memory) is skipped by `sweep run`; its
        // budget may be one lr_transfer cannot correct for (under one token), which is no reason
        // to refuse the others.
        if (!r.runnable()) continue;
        try {
          train::detail::check_config(c);
        } catch (const train::config_error& e) {
          throw sweep_error("sweep spec: train (run " + r.id + "): " + e.what());
        }
      }
      return p;
    } catch (const sweep_error& e) {
      throw usage_error(e.what());
    }
  }
};

// A number with an SI prefix up to E (1e18); past 1e21 in plain exponent form: 8.96e24 tokens printed
// as "8.96e+06E".
std::string si(double v) {
  if (!(std::abs(v) < 999.5e18)) return fmt::format("{:.3g}", v);
  const char* unit[] = {"", "K", "M", "G", "T", "P", "E"};
  int i = 0;
  while (std::abs(v) >= 999.5 && i < 6) v /= 1000, ++i;
  return fmt::format("{:.3g}{}", v, unit[i]);
}

// An MoE sweep: E, K and the looped-MoE law's counts (active, recurrent-active, m) per run.
void print_moe_plan(const Plan& plan) {
  const SweepSpec& s = plan.spec;
  fmt::print("sweep {} ({})  depth {} = {} + k r + {}  top-{} of E experts (hidden {} d, {} layers)  seq {}  batch {} tokens  vocab {}  memory model {}\n",
             s.name, plan.fingerprint, s.depth, s.prelude, s.coda, s.top_k, s.expert_ff, s.moe_layers, s.seq_len, s.batch_tokens, s.vocab,
             memory_model);
  fmt::print("{:<24} {:>2} {:>2} {:>3} {:>5} {:>9} {:>9} {:>9} {:>6} {:>10} {:>9} {:>7} {:>8}\n", "id", "E", "r", "s", "d", "N_act",
             "N_loop", "N_total", "m", "F/token", "D", "steps", "mem GiB");
  double total = 0;
  for (const PlannedRun& r : plan.runs) {
    const ParamCounts& p = r.acct.params;
    const double act = static_cast<double>(p.once_active + p.rec_active);
    fmt::print("{:<24} {:>2} {:>2} {:>3} {:>5} {:>9} {:>9} {:>9} {:>6.3f} {:>10} {:>9} {:>7} {:>8.2f}{}\n", r.id, r.experts, r.r, r.s,
               r.model.d_model, si(act), si(static_cast<double>(p.rec_active)), si(static_cast<double>(p.non_embedding)),
               act / static_cast<double>(p.non_embedding), si(r.flops_per_token), si(r.tokens), r.steps, r.memory_bytes / (1 << 30),
               r.runnable() ? "" : "  NOT RUN: " + r.problem);
    if (r.runnable()) total += r.flops_per_token * static_cast<double>(r.steps) * static_cast<double>(s.batch_tokens);
  }
  fmt::print("{} runs, {} runnable, {} reported above as not runnable; {} training FLOPs in all\n", plan.runs.size(),
             plan.runnable(), plan.runs.size() - plan.runnable(), si(total));
}

void print_plan(const Plan& plan) {
  if (plan.spec.moe()) return print_moe_plan(plan);
  const SweepSpec& s = plan.spec;
  fmt::print("sweep {} ({})  depth {} = {} + k r + {}{}  seq {}  batch {} tokens  vocab {}  memory model {}\n", s.name,
             plan.fingerprint, s.depth, s.prelude, s.coda, flat_baseline(s) ? fmt::format(" (r = 1: 0 + {} + 0)", s.depth) : "",
             s.seq_len, s.batch_tokens, s.vocab, memory_model);
  // With lr_transfer, each run's matrices train at a peak rate of their own (train/lr_transfer.hpp),
  // shown in a last column; every run shares the spec's train object, so the first says whether.
  const auto lr_column = [&](const PlannedRun& r) -> std::string {
    const train::TrainConfig c = train_config(s, r, s.name, s.data);
    if (train::parse_lr_transfer(c.lr_transfer) == train::LrTransfer::none) return "";
    const train::LrScales k = train::lr_scales_of(c);
    return k.tokens >= 1 ? fmt::format(" {:>9.4g}", c.lr * k.matrix()) : fmt::format(" {:>9}", "-");
  };
  const bool lr_shown = !plan.runs.empty() && !lr_column(plan.runs.front()).empty();
  fmt::print("{:<22} {:>2} {:>3} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8} {:>8}{}\n", "id", "r", "s", "d", "N_once", "N_rec",
             "N", "N_unroll", "F/token", "D", "steps", "mem GiB", lr_shown ? fmt::format(" {:>9}", "lr") : "");
  double total = 0;
  for (const PlannedRun& r : plan.runs) {
    const ParamCounts& p = r.acct.params;
    fmt::print("{:<22} {:>2} {:>3} {:>6} {:>9} {:>9} {:>9} {:>9} {:>10} {:>9} {:>8} {:>8.2f}{}{}\n", r.id, r.r, r.s, r.model.d_model,
               si(static_cast<double>(p.once)), si(static_cast<double>(p.rec)), si(static_cast<double>(p.non_embedding)),
               si(static_cast<double>(p.unrolled)), si(r.flops_per_token), si(r.tokens), r.steps, r.memory_bytes / (1 << 30),
               lr_shown ? lr_column(r) : "", r.runnable() ? "" : "  NOT RUN: " + r.problem);
    if (r.runnable()) total += r.flops_per_token * static_cast<double>(r.steps) * static_cast<double>(s.batch_tokens);
  }
  fmt::print("{} runs, {} runnable, {} reported above as not runnable; {} training FLOPs in all\n", plan.runs.size(),
             plan.runnable(), plan.runs.size() - plan.runnable(), si(total));
}

// The folder's spec, checked against --spec/--preset when one is given.
void check_folder(const std::string& dir, const SpecSource& src) {
  SweepSpec in_folder;
  try {
    in_folder = folder_spec(dir);
  } catch (const sweep_error& e) {
    throw usage_error(e.what());
  }
  if (src.given() && fingerprint(src.load()) != fingerprint(in_folder))
    throw usage_error(fmt::format("{} holds sweep '{}' ({}), not the spec given ({})", dir, in_folder.name, fingerprint(in_folder),
                                  fingerprint(src.load())));
}

void add_analyse_options(CLI::App& sub, AnalyseOptions& o) {
  sub.add_option("--starts", o.starts, "random starts per law fit (the paper: 500)")->capture_default_str()->check(at_least(1));
  sub.add_option("--bootstrap", o.bootstrap, "block-bootstrap resamples over (C, r) cells (the paper: 200; 0: none)")
      ->capture_default_str()
      ->check(at_least(0));
  sub.add_option("--bootstrap-starts", o.bootstrap_starts, "random starts per resample, besides the full fit's optimum")->capture_default_str()->check(at_least(0));
  sub.add_option("--level", o.level, "interval level")->capture_default_str()->check(number_in(0.5, 0.999));
  sub.add_option("--seed", o.seed, "seed of starts and resamples")->capture_default_str();
}

const bool registered_sweep = add_command([](CLI::App& app) {
  CLI::App* sweep = app.add_subcommand("sweep", "plan, run, merge, analyse and report iso-depth sweeps");
  sweep->require_subcommand(1);

  {  // plan
    auto src = std::make_shared<SpecSource>();
    auto json = std::make_shared<bool>(false);
    CLI::App* sub = sweep->add_subcommand("plan", "list every run of a sweep from the accounting");
    src->add_to(*sub);
    sub->add_flag("--json", *json, "print JSON: {\"runs\": [{\"id\", ...}]}");
    sub->callback([src, json] {
      const Plan plan = src->plan();
      if (*json) std::cout << plan_json(plan).dump(2) << "\n";
      else print_plan(plan);
    });
  }

  {  // run
    auto src = std::make_shared<SpecSource>();
    auto out = std::make_shared<std::string>();
    auto data = std::make_shared<std::string>();
    auto shard = std::make_shared<std::string>("0/1");
    auto threads = std::make_shared<int>(0);
    auto eval_items = std::make_shared<int64>(EngineOptions{}.eval_items);
    auto curve_windows = std::make_shared<int64>(EngineOptions{}.curve_windows);
    auto no_eval = std::make_shared<bool>(false);
    auto ranks = std::make_shared<int>(1);
    auto launcher = std::make_shared<std::string>();
    auto device = std::make_shared<std::string>("host");
    CLI::App* sub = sweep->add_subcommand("run", "train every planned run (resumable; results in OUT/results.jsonl)");
    src->add_to(*sub);
    sub->add_option("--out", *out, "sweep folder")->required()->check(output_folder());
    sub->add_option("--data", *data, "corpus folder (default: the spec's, data/corpus)");
    sub->add_option("--shard", *shard, "run only the runs with index = I mod N")->capture_default_str();
    sub->add_option("--threads", *threads,
                    "training threads of every run (0: the spec's, else chosen per run: one below 2 GFLOP a training step, every core above)")->capture_default_str()->check(thread_count());
    sub->add_option("--eval-items", *eval_items, "items per task of the built-in probes each finished run is scored on")
        ->capture_default_str()
        ->check(CLI::Range(std::int64_t{2}, eval::max_probe_items));  // eval::builtin_probes' bound
    sub->add_option("--curve-windows", *curve_windows,
                    "validation windows of each finished run's test-time recurrence curve (r_eval 1, 2, 4, ... 4r; 0: none)")
        ->capture_default_str()
        ->check(CLI::Range(0, 100000));
    sub->add_flag("--no-eval", *no_eval, "do not score finished runs on the built-in probes nor draw their recurrence curves");
    sub->add_option("--ranks", *ranks, "ranks per run: above 1, each run trains data-parallel under --launcher (--threads per rank)")
        ->capture_default_str()
        ->check(CLI::Range(1, 65536));
    sub->add_option("--launcher", *launcher,
                    "with --ranks: the command that starts the ranks, given -n RANKS (default: mpirun --oversubscribe; on Slurm: "
                    "srun --mpi=pmix)");
    sub->add_option("--device", *device,
                    "where the runs train: host | cuda (this build's CUDA backend, one device per rank) | auto (cuda when usable)")
        ->capture_default_str();
    sub->callback([src, out, data, shard, threads, eval_items, curve_windows, no_eval, ranks, launcher, device] {
      const Plan plan = src->plan();
      RunOptions opt;
      try {
        opt.shard = parse_shard(*shard);
      } catch (const sweep_error& e) {
        throw usage_error(e.what());
      }
      opt.out = *out;
      opt.data = data->empty() ? plan.spec.data : *data;
      // Before any run, in either layout (train.bin and val.bin, or a manifest's shards from `data
      // prepare`), headers only: each run reads every byte against its checksum.
      // A packed corpus (data prepare --pack) is read in rows of its own length: a sweep of another
      // seq_len is refused here, not by each of its runs.
      for (const data::Split s : {data::Split::train, data::Split::val})
        if (const data::Corpus c = data::open_corpus(opt.data, s, data::Verify::headers); c.row_tokens() > 0) data::check_fits(c, plan.spec.seq_len);
      EngineOptions eo;
      eo.threads = *threads;
      eo.eval_items = *no_eval ? 0 : *eval_items;
      eo.curve_windows = *no_eval ? 0 : *curve_windows;
      eo.ranks = *ranks;
      eo.launcher = *launcher;
      eo.device = resolve_device(*device);
      if (eo.device == "cuda")
        eo.train = [](const train::TrainConfig& c, const train::ProgressFn& p) { return train_on_cuda(c, p, train::single_process()); };
      if (!launcher->empty() && *ranks == 1) throw usage_error("--launcher is only used with --ranks above 1");
      if (*ranks > 1) {
        try {
          launcher_words(*launcher);
        } catch (const sweep_error& e) {
          throw usage_error(e.what());
        }
        try {
          (void)accum_for(plan.spec, *ranks);  // every run's batch, split over the ranks (engine.hpp)
        } catch (const sweep_error& e) {
          throw usage_error(fmt::format("--ranks {}: {}", *ranks, e.what()));
        }
      }
      RunSummary s;
      // A signal stops the sweep after the current run's checkpoint: exit 75, resumable (run.hpp).
      const InterruptGuard guard;
      try {
        s = run_sweep(plan, opt, engine_run_fn(eo));
      } catch (const sweep_error& e) {
        throw usage_error(e.what());
      }
      fmt::print("sweep {}: {} trained, {} recorded after a kill, {} finished before, {} not runnable; {:.1f} s; results in {}\n",
                 plan.spec.name, s.trained, s.recovered, s.already, s.unrunnable, s.seconds, results_file(opt.out, opt.shard).string());
    });
  }

  {  // merge
    auto src = std::make_shared<SpecSource>();
    auto out = std::make_shared<std::string>();
    auto inputs = std::make_shared<std::vector<std::string>>();
    CLI::App* sub = sweep->add_subcommand("merge", "join shard results into OUT/results.jsonl (duplicates or another spec: error)");
    src->add_to(*sub, false);
    sub->add_option("--out", *out, "the merged sweep folder")->required()->check(output_folder());
    sub->add_option("inputs", *inputs, "shard folders or results files")->required();
    sub->callback([src, out, inputs] {
      const Plan plan = src->plan();
      std::vector<fs::path> in(inputs->begin(), inputs->end());
      MergeSummary m;
      try {
        m = merge_results(plan, in, *out);
      } catch (const sweep_error& e) {
        throw usage_error(e.what());
      }
      fmt::print("merged {} runs from {} files into {}\n", m.runs, m.files, (fs::path(*out) / "results.jsonl").string());
      if (!m.missing.empty()) {
        std::string ids;
        for (const auto& id : m.missing) ids += " " + id;
        fmt::print("{} runnable runs have no result yet:{}\n", m.missing.size(), ids);
      }
    });
  }

  {  // slurm
    auto src = std::make_shared<SpecSource>();
    auto o = std::make_shared<SlurmOptions>();
    auto spec_on_cluster = std::make_shared<std::string>();
    auto script_path = std::make_shared<std::string>();
    auto dry_run = std::make_shared<bool>(false);
    CLI::App* sub = sweep->add_subcommand("slurm", "print (or write) an sbatch job-array script that runs the sweep's shards");
    src->add_to(*sub);
    sub->add_option("--out", o->out, "sweep folder on the cluster (shared file system)")->required()->check(output_folder());
    sub->add_option("--shards", o->shards, "array tasks")->capture_default_str();
    sub->add_option("--max-array-size", o->max_array_size, "the cluster's MaxArraySize (slurm.conf): --shards at most this")->capture_default_str();
    sub->add_option("--throttle", o->throttle, "at most this many tasks at once (--array=0-N%T; 0: no limit)")->capture_default_str();
    sub->add_option("--program", o->program, "path of loopscale on the cluster")->capture_default_str();
    sub->add_option("--spec-on-cluster", *spec_on_cluster, "where the spec file is on the cluster (default: its path here, made absolute)");
    sub->add_option("--data", o->data, "corpus folder on the cluster")->capture_default_str();
    sub->add_option("--time", o->time, "time limit per task (MINUTES, HH:MM:SS, D-HH:MM:SS)")->capture_default_str();
    sub->add_option("--partition", o->partition, "Slurm partition (default: the cluster's)");
    sub->add_option("--account", o->account, "account to charge (default: yours)");
    sub->add_option("--qos", o->qos, "quality of service (default: the account's)");
    sub->add_option("--gpus", o->gpus, "GPUs per task: N or TYPE:N");
    sub->add_option("--device", o->device, "where the runs train: host | cuda (asks for one GPU per task, per rank with --ranks)")
        ->capture_default_str();
    sub->add_option("--gpu-request", o->gpu_request, "how to ask for the GPUs: gres (--gres=gpu:N) or gpus-per-task")->capture_default_str();
    sub->add_option("--cpus", o->cpus, "CPUs per task (OMP_NUM_THREADS; per rank with --ranks)")->capture_default_str();
    sub->add_option("--ranks", o->ranks, "ranks per run (data parallel): #SBATCH --ntasks and sweep run --ranks")->capture_default_str();
    sub->add_option("--launcher", o->launcher, "with --ranks: how a task starts its ranks")->capture_default_str();
    sub->add_option("--mem", o->mem, "memory per task")->capture_default_str();
    sub->add_option("--job-name", o->job_name, "job name (default: loopscale-NAME)");
    sub->add_option("--log", o->log, "each task's log, with Slurm's %A (job) and %a (task) (default: OUT/slurm-%A_%a.log)");
    // One value per occurrence, so that a repeated option never swallows the positional spec.
    sub->add_option("--module", o->modules, "module to load before loopscale runs (repeatable)")
        ->allow_extra_args(false);
    sub->add_option("--setup", o->setup, "shell line to run before loopscale, e.g. 'source ~/venv/bin/activate' (repeatable)")
        ->allow_extra_args(false);
    sub->add_option("--sbatch", o->sbatch, "another #SBATCH option as sbatch takes it, e.g. --sbatch=--constraint=a100 (repeatable)")
        ->allow_extra_args(false);
    sub->add_option("--signal-seconds", o->signal_seconds,
                    "SIGUSR1 this many seconds before the time limit: checkpoint, exit 75, requeue (0: none)")
        ->capture_default_str();
    sub->add_option("--script", *script_path, "write the script to this file instead of printing it")->check(output_file());
    sub->add_flag("--dry-run", *dry_run, "print the script and create nothing: no script file, no folders");
    sub->callback([src, o, spec_on_cluster, script_path, dry_run] {
      const Plan plan = src->plan();
      SlurmOptions opt = *o;
      if (!src->preset.empty()) opt.spec_arg = "--preset " + shell_quote(src->preset);
      else opt.spec_arg = shell_quote(spec_on_cluster->empty() ? fs::absolute(src->file).string() : *spec_on_cluster);
      std::string script;
      try {
        script = slurm_script(plan, opt);
      } catch (const sweep_error& e) {
        throw usage_error(e.what());
      }
      if (*dry_run) {
        std::cout << script;
        return;
      }
      // Slurm opens each task's log before the script's own mkdir runs (slurm.hpp): make the
      // sweep folder and the log's folder now. A log folder named with Slurm's patterns (%A)
      // cannot be made ahead; say so.
      std::error_code ec;
      fs::create_directories(opt.out, ec);
      if (ec)
        fmt::print(stderr, "loopscale: warning: cannot create {} ({}); create it before sbatch: Slurm writes the tasks' logs there\n",
                   opt.out, ec.message());
      // The default log lies in OUT (made above); only a --log elsewhere needs its own folder.
      const fs::path log_dir = opt.log.empty() ? fs::path() : fs::path(opt.log).parent_path();
      if (!log_dir.empty() && log_dir.string().find('%') != std::string::npos)
        fmt::print(stderr, "loopscale: warning: the log folder {} holds Slurm patterns; it must exist before the tasks start\n",
                   log_dir.string());
      else if (!log_dir.empty() && !fs::create_directories(log_dir, ec) && ec)
        fmt::print(stderr, "loopscale: warning: cannot create {} ({}); create it before sbatch: Slurm writes the tasks' logs there\n",
                   log_dir.string(), ec.message());
      if (script_path->empty()) {
        std::cout << script;
        return;
      }
      write_file_atomic(*script_path, script);  // a failure: one line naming the file, exit 1
      fmt::print("wrote {}; submit it with: sbatch {}\n", *script_path, shell_quote(*script_path));
    });
  }

  {  // report
    auto src = std::make_shared<SpecSource>();
    auto dir = std::make_shared<std::string>();
    auto o = std::make_shared<ReportOptions>();
    auto no_plots = std::make_shared<bool>(false);
    CLI::App* sub = sweep->add_subcommand("report", "analyse a sweep folder; write DIR/report.md, DIR/analysis.json and plots");
    sub->add_option("dir", *dir, "sweep folder")->required();
    src->add_to(*sub, false);
    add_analyse_options(*sub, o->analyse);
    sub->add_flag("--no-plots", *no_plots, "skip gnuplot");
    sub->callback([src, dir, o, no_plots] {
      check_folder(*dir, *src);
      ReportOptions opt = *o;
      opt.plots = !*no_plots;
      ReportFiles f;
      try {
        f = write_report(*dir, opt);
      } catch (const sweep_error& e) {
        throw usage_error(e.what());
      } catch (const law::data_error& e) {
        throw usage_error(e.what());
      }
      const Analysis& a = f.analysis;
      if (a.joint && !a.joint->boot_phi.empty())
        fmt::print("phi = {:.3f}  {:.0f}% interval [{:.3f}, {:.3f}]  (R^2 {:.4f}, RMSE {:.4f}; phi = 0: R^2 {:.4f}; phi = 1: R^2 {:.4f}; {} runs)\n",
                   a.joint->fit.value("phi"), 100 * a.joint->level, a.joint->phi_lo, a.joint->phi_hi, a.joint->fit.r2, a.joint->fit.rmse,
                   a.joint->phi0.r2, a.joint->phi1.r2, a.runs.size());
      else if (a.joint)
        fmt::print("phi = {:.3f}  (no interval: --bootstrap 0; R^2 {:.4f}, {} runs)\n", a.joint->fit.value("phi"), a.joint->fit.r2, a.runs.size());
      else
        fmt::print("no joint fit: {}\n", a.joint_problem);
      if (a.joint)
        if (const auto edges = a.joint->fit.box_edges(); !edges.empty())
          fmt::print("not determined: the joint fit ended on an edge of the law's box for {} (report.md says more)\n", fmt::join(edges, ", "));
      if (!f.plot_problem.empty()) fmt::print("plots: {}\n", f.plot_problem);
      fmt::print("report: {}\n", f.markdown.string());
    });
  }

  {  // compare
    auto dirs = std::make_shared<std::vector<std::string>>();
    auto o = std::make_shared<AnalyseOptions>();
    auto json = std::make_shared<bool>(false);
    auto src = std::make_shared<SpecSource>();
    CLI::App* sub = sweep->add_subcommand("compare", "delta-phi between two sweep folders, with its bootstrap interval");
    sub->add_option("dirs", *dirs, "DIR_A DIR_B")->required()->expected(2);
    src->add_to(*sub, false);
    add_analyse_options(*sub, *o);
    sub->add_flag("--json", *json, "print JSON");
    sub->callback([dirs, o, json, src] {
      check_folder((*dirs)[0], *src);
      Comparison c;
      try {
        c = compare_phi(sweep_phi((*dirs)[0], *o), sweep_phi((*dirs)[1], *o), o->level);
      } catch (const sweep_error& e) {
        throw usage_error(e.what());
      }
      if (*json) {
        std::cout << comparison_json(c).dump(2) << "\n";
        return;
      }
      for (const SweepPhi* s : {&c.a, &c.b})
        fmt::print("{:<24} phi = {:.3f}  [{:.3f}, {:.3f}]  R^2 {:.4f}  {} runs{}{}\n", s->name, s->phi, s->lo, s->hi, s->r2, s->runs,
                   s->from_cache ? "  (analysis.json)" : "",
                   s->phi_edge.empty() ? "" : "  (on the " + s->phi_edge + " edge of the law's box: not determined)");
      fmt::print("delta phi (A - B) = {:+.3f}  {:.0f}% interval [{:+.3f}, {:+.3f}]  ({:.0f}% of {} paired resamples have A > B)\n", c.delta,
                 100 * c.level, c.lo, c.hi, 100 * c.share_above, c.pairs);
      if (!c.a.phi_edge.empty() || !c.b.phi_edge.empty())
        fmt::print("not determined: a phi on an edge of the law's box is the edge, not an estimate, so this difference is not one either\n");
    });
  }
});

}  // namespace
}  // namespace loopscale::cli
