// An sbatch script that runs a sweep's shards as a Slurm job array: task I runs
// `loopscale sweep run SPEC --out DIR --shard I/N` into its own results.shard-I-of-N.jsonl in the
// shared folder DIR; the merge after the array is one command, printed in the script's header.
//
// Time limits and preemption: the script asks Slurm for SIGUSR1 `signal_seconds` before the time
// limit (`--signal=B:USR1@S`). B: sends it to the batch shell only (without B:, Slurm signals job
// steps, i.e. srun launches, and loopscale is none), so the shell runs loopscale in the
// background, forwards USR1/TERM/INT to it and `wait`s. loopscale then finishes the step, writes
// the checkpoint and exits 75 (util/interrupt.hpp). After USR1, the time limit's warning, the
// script requeues its own array task (`#SBATCH --requeue`, `scontrol requeue JOB_TASK`), which
// resumes where it stopped. After TERM or INT it does not: `scancel` sends TERM to the batch shell
// and to loopscale, and a cancelled task must stay cancelled (the live test found that requeueing
// on TERM brought every cancelled task back); a preempted task is requeued by Slurm itself under
// PreemptMode=REQUEUE. Either way the checkpoint is written within Slurm's KillWait.
//
// Slurm opens the --output log (DIR/slurm-%A_%a.log, or --log) before the script runs, so its
// folder must exist at submission: `loopscale sweep slurm` creates it (the `mkdir -p` in the script
// is too late for the log; it stays for a folder removed since). The log is opened for appending,
// so a requeued task's log keeps what its earlier attempts wrote.
//
// Every option is checked before anything is written (check_slurm_options): a value that Slurm
// would reject at submission, or that would break the script (a newline would end an #SBATCH line
// and start a shell command), is one sweep_error naming the option. Tested against a live one-node
// cluster by tests/sweep/slurm_live.sh (docs/sweeps.md).
#pragma once

#include <cctype>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "loopscale/sweep/plan.hpp"

namespace loopscale::sweep {

struct SlurmOptions {
  int64 shards = 4;
  // The cluster's MaxArraySize (slurm.conf): the largest array index is one less. Slurm's documented
  // default is 1001; a site that raised it says so with --max-array-size.
  int64 max_array_size = 1001;
  int64 throttle = 0;                 // at most this many tasks at once (--array=0-N%T); 0: no limit
  std::string program = "loopscale";  // path of the loopscale program on the cluster
  std::string spec_arg;               // shell words naming the spec: "--preset cpu" or a quoted path
  std::string out;                    // the sweep folder (shared file system)
  std::string data = "data/corpus";
  std::string time = "24:00:00";      // Slurm's formats: MINUTES, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
  std::string partition;              // empty: the cluster's default
  std::string account;                // empty: the user's default account
  std::string qos;                    // empty: the account's default QOS
  std::string gpus;                   // GPUs per task, "N" or "TYPE:N"; empty: none (1 with device cuda)
  std::string gpu_request = "gres";   // how to ask for them: gres (--gres=gpu:N) | gpus-per-task
  std::string device = "host";        // where the runs train (sweep run --device): host | cuda (one GPU per rank)
  int64 cpus = 8;                     // CPUs per task (per rank with ranks > 1)
  int64 ranks = 1;                    // ranks per run: above 1, --ntasks and `sweep run --ranks` under `launcher`
  std::string launcher = "srun --mpi=pmix";  // how a task starts its ranks (Debian's Slurm + Open MPI: pmix only)
  std::string mem = "64G";
  std::string job_name;               // empty: loopscale-NAME, from the spec's name
  std::string log;                    // each task's log (Slurm's %A, %a patterns); empty: OUT/slurm-%A_%a.log
  std::vector<std::string> modules;   // `module load NAME` before loopscale runs
  std::vector<std::string> setup;     // shell lines run before loopscale: an environment, a venv
  std::vector<std::string> sbatch;    // more #SBATCH options as given, e.g. --constraint=a100
  // SIGUSR1 this long before the time limit; enough for one step and a checkpoint (Slurm sends
  // it up to a minute early: its timer ticks once a minute). 0: no warning signal.
  int64 signal_seconds = 300;
};

// POSIX shell single quotes around a word.
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

namespace slurm_detail {

inline bool has_space_or_control(std::string_view s) {
  for (unsigned char c : s)
    if (c <= ' ' || c == 0x7f) return true;
  return false;
}

inline bool all_of_chars(std::string_view s, std::string_view extra) {
  if (s.empty()) return false;
  for (unsigned char c : s)
    if (!std::isalnum(c) && extra.find(static_cast<char>(c)) == std::string_view::npos) return false;
  return true;
}

inline bool digits(std::string_view s) { return !s.empty() && s.find_first_not_of("0123456789") == std::string_view::npos; }

// A value inside single quotes for an error message, control characters written as escapes, so
// the message stays one line whatever the value holds.
inline std::string shown(std::string_view v) {
  std::string out = "'";
  for (unsigned char c : v) {
    if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (c < ' ' || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  return out + "'";
}

// Slurm's time limit formats (sbatch(1), --time): MINUTES, MINUTES:SECONDS, HOURS:MINUTES:SECONDS,
// DAYS-HOURS, DAYS-HOURS:MINUTES, DAYS-HOURS:MINUTES:SECONDS, or UNLIMITED / INFINITE. Returns the
// limit in seconds (infinity for UNLIMITED), or nothing when `t` is none of these. In double: a
// field of twenty digits must not wrap around to a small limit.
inline std::optional<double> slurm_time_seconds(std::string_view t) {
  if (t == "UNLIMITED" || t == "INFINITE") return std::numeric_limits<double>::infinity();
  std::optional<double> days;
  if (const auto dash = t.find('-'); dash != std::string_view::npos) {
    if (!digits(t.substr(0, dash))) return std::nullopt;
    days = std::stod(std::string(t.substr(0, dash)));
    t = t.substr(dash + 1);
  }
  std::vector<double> f;
  for (std::size_t from = 0;;) {
    const auto colon = t.find(':', from);
    const std::string_view field = t.substr(from, colon == std::string_view::npos ? std::string_view::npos : colon - from);
    if (!digits(field) || f.size() == 3) return std::nullopt;
    f.push_back(std::stod(std::string(field)));
    if (colon == std::string_view::npos) break;
    from = colon + 1;
  }
  // The fields' units by their count, with and without days.
  if (days) {
    const double hours[] = {3600, 60, 1};
    double s = *days * 86400;
    for (std::size_t i = 0; i < f.size(); ++i) s += f[i] * hours[i];
    return s;
  }
  if (f.size() == 1) return f[0] * 60;              // MINUTES
  if (f.size() == 2) return f[0] * 60 + f[1];       // MINUTES:SECONDS
  return f[0] * 3600 + f[1] * 60 + f[2];            // HOURS:MINUTES:SECONDS
}

// The task log's default: OUT/slurm-%A_%a.log, with a '%' of OUT itself doubled (Slurm reads
// "%%" as one '%' and any other '%x' as a pattern).
inline std::string default_log(const std::string& out) {
  std::string dir;
  for (char c : out) dir += c == '%' ? std::string("%%") : std::string(1, c);
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir + "/slurm-%A_%a.log";
}

// The spec's name as a job name: what Slurm and a shell take without quotes.
inline std::string job_name_of(const std::string& spec_name) {
  std::string n = "loopscale-";
  for (unsigned char c : spec_name) n += std::isalnum(c) || c == '-' || c == '_' || c == '.' ? static_cast<char>(c) : '_';
  return n;
}

}  // namespace slurm_detail

// The path of each task's log as the #SBATCH --output line gives it.
inline std::string slurm_log(const SlurmOptions& o) { return o.log.empty() ? slurm_detail::default_log(o.out) : o.log; }

// Throws sweep_error, one line naming the option, for what Slurm would refuse at submission or
// what would break the script.
inline void check_slurm_options(const SlurmOptions& o) {
  using namespace slurm_detail;
  // Each shard is one array task, indices 0 to shards - 1, and sbatch refuses an array past the
  // cluster's MaxArraySize at submission: --shards 100000000000 wrote --array=0-99999999999. Shards
  // above the number of runs are allowed: their tasks run nothing and end at once, and refusing them
  // would refuse the default 4 for a sweep of one to three runs.
  if (o.max_array_size < 1 || o.max_array_size > 4000001)  // slurm.conf(5): "may not exceed 4000001"
    throw sweep_error(fmt::format("slurm: --max-array-size {} must be from 1 to 4000001", o.max_array_size));
  if (o.shards < 1 || o.shards > o.max_array_size)
    throw sweep_error(fmt::format("slurm: --shards {} must be from 1 to {} (MaxArraySize {}: array indices 0 to {}; a cluster that raised it: "
                                  "--max-array-size)",
                                  o.shards, o.max_array_size, o.max_array_size, o.max_array_size - 1));
  if (o.out.empty()) throw sweep_error("slurm: --out (the sweep folder on the cluster) is required");
  if (o.spec_arg.empty()) throw sweep_error("slurm: the spec (file on the cluster or preset) is required");
  // The script runs the program by this path: '' would be run as a command named nothing.
  if (o.program.find_first_not_of(" \t") == std::string::npos) throw sweep_error("slurm: --program must name the loopscale program, not be empty");
  if (o.throttle < 0) throw sweep_error(fmt::format("slurm: --throttle {} must be at least 0 (0: no limit)", o.throttle));
  if (o.cpus < 1) throw sweep_error(fmt::format("slurm: --cpus {} must be at least 1", o.cpus));
  if (o.ranks < 1 || o.ranks > 65536) throw sweep_error(fmt::format("slurm: --ranks {} must be between 1 and 65536", o.ranks));
  if (o.ranks > 1 && (o.launcher.find_first_of("\n\r'") != std::string::npos || o.launcher.find_first_not_of(' ') == std::string::npos))
    throw sweep_error(fmt::format("slurm: --launcher {} must be a command line without quotes or line breaks", shown(o.launcher)));
  // Slurm keeps the warning's lead time in 16 bits.
  if (o.signal_seconds < 0 || o.signal_seconds > 65535)
    throw sweep_error(fmt::format("slurm: --signal-seconds {} must be between 0 and 65535", o.signal_seconds));
  // These go into the script as they are: a newline would end the line and start a command.
  for (const auto& [name, v] : {std::pair<const char*, const std::string&>{"--out", o.out}, {"--program", o.program}, {"--data", o.data},
                                {"the spec", o.spec_arg}})
    if (v.find_first_of("\n\r") != std::string::npos) throw sweep_error(fmt::format("slurm: {} holds a line break", name));
  const std::optional<double> limit = slurm_time_seconds(o.time);
  if (!limit)
    throw sweep_error(fmt::format("slurm: --time {} is not a Slurm time limit (MINUTES, HH:MM:SS, D-HH, D-HH:MM:SS or UNLIMITED)", shown(o.time)));
  // Slurm reads a limit of zero as no limit at all; UNLIMITED says that without the surprise.
  if (*limit <= 0) throw sweep_error(fmt::format("slurm: --time {} is no time at all (for no limit, give UNLIMITED)", shown(o.time)));
  // A warning due at or before the start would arrive as the task begins: it would checkpoint after
  // its first step and requeue, again and again.
  if (o.signal_seconds > 0 && o.signal_seconds >= *limit)
    throw sweep_error(fmt::format("slurm: --signal-seconds {} is not less than --time {} ({:g} s): the warning would come as the task starts",
                                  o.signal_seconds, shown(o.time), *limit));
  const auto mem_unit = o.mem.empty() ? std::string_view::npos : std::string_view("KMGTkmgt").find(o.mem.back());
  if (!digits(mem_unit == std::string_view::npos ? std::string_view(o.mem) : std::string_view(o.mem).substr(0, o.mem.size() - 1)))
    throw sweep_error(fmt::format("slurm: --mem {} is not a Slurm memory size (a number of megabytes, or with K, M, G or T: 64G)", shown(o.mem)));
  for (const auto& [name, v] : {std::pair<const char*, const std::string&>{"--partition", o.partition}, {"--account", o.account},
                                {"--qos", o.qos}})
    if (!v.empty() && !all_of_chars(v, "._-,"))
      throw sweep_error(fmt::format("slurm: {} {} is not a Slurm name (letters, digits, '.', '_', '-'; several separated by ',')", name, shown(v)));
  if (!o.job_name.empty() && !all_of_chars(o.job_name, "._-"))
    throw sweep_error(fmt::format("slurm: --job-name {} may hold only letters, digits, '.', '_' and '-'", shown(o.job_name)));
  if (!o.gpus.empty()) {
    const auto colon = o.gpus.rfind(':');
    const std::string_view count = colon == std::string::npos ? std::string_view(o.gpus) : std::string_view(o.gpus).substr(colon + 1);
    const bool typed_ok = colon == std::string::npos || all_of_chars(std::string_view(o.gpus).substr(0, colon), "._-");
    if (!digits(count) || count.find_first_not_of('0') == std::string_view::npos || !typed_ok)
      throw sweep_error(fmt::format("slurm: --gpus {} is not a GPU count per task (N, or TYPE:N such as a100:2, N at least 1)", shown(o.gpus)));
  }
  if (o.device != "host" && o.device != "cuda")
    throw sweep_error(fmt::format("slurm: --device {} must be host or cuda", shown(o.device)));
  if (o.gpu_request != "gres" && o.gpu_request != "gpus-per-task")
    throw sweep_error(fmt::format("slurm: --gpu-request {} must be gres or gpus-per-task", shown(o.gpu_request)));
  const std::string log = slurm_log(o);
  if (has_space_or_control(log))
    throw sweep_error(fmt::format("slurm: the task log {} holds whitespace, which an #SBATCH --output line cannot carry; give --log a path "
                                  "without",
                                  shown(log)));
  for (const std::string& m : o.modules)
    if (!all_of_chars(m, "._-/+:@"))
      throw sweep_error(fmt::format("slurm: --module {} is not a module name (letters, digits and . _ - / + : @, e.g. gcc/12.2.0)", shown(m)));
  for (const std::string& line : o.setup)
    if (line.find_first_of("\n\r") != std::string::npos)
      throw sweep_error("slurm: a --setup line holds a line break; give each line as its own --setup");
  for (const std::string& opt : o.sbatch)
    if (opt.size() < 3 || opt.rfind("--", 0) != 0 || has_space_or_control(opt))
      throw sweep_error(fmt::format("slurm: --sbatch {} must be one long sbatch option without spaces, e.g. --constraint=a100", shown(opt)));
}

inline std::string slurm_script(const Plan& plan, const SlurmOptions& o) {
  check_slurm_options(o);
  std::string s;
  s += "#!/bin/bash\n";
  // The spec's name as shown(): a line break in it would end this comment and start a command.
  s += fmt::format("# loopscale sweep {} (fingerprint {}): {} runs ({} runnable) in {} shards.\n", slurm_detail::shown(plan.spec.name),
                   plan.fingerprint, plan.runs.size(), plan.runnable(), o.shards);
  s += "# Submit: sbatch THIS_FILE. Each array task runs one shard; near its time limit loopscale\n";
  s += "# checkpoints and exits 75, and the task requeues itself and resumes. scancel stops a task\n";
  s += "# with its state saved; scontrol requeue JOB_TASK continues it.\n";
  s += "# After a failure, resubmit (sbatch --array=I THIS_FILE): finished runs are skipped.\n";
  s += "# The folder of --output below must exist before sbatch (loopscale sweep slurm made it).\n";
  s += "# When all tasks are done: " + o.program + " sweep merge " + (o.spec_arg.rfind("--preset", 0) == 0 ? o.spec_arg : "--spec " + o.spec_arg) + " --out " + shell_quote(o.out) +
       " " + shell_quote(o.out) + "\n";
  s += fmt::format("#SBATCH --job-name={}\n", o.job_name.empty() ? slurm_detail::job_name_of(plan.spec.name) : o.job_name);
  s += fmt::format("#SBATCH --array=0-{}{}\n", o.shards - 1, o.throttle > 0 ? fmt::format("%{}", o.throttle) : "");
  s += fmt::format("#SBATCH --time={}\n", o.time);
  if (o.ranks > 1) s += fmt::format("#SBATCH --ntasks={}\n", o.ranks);  // each run's ranks (the shell and sweep run in the first)
  s += fmt::format("#SBATCH --cpus-per-task={}\n", o.cpus);
  s += fmt::format("#SBATCH --mem={}\n", o.mem);
  if (!o.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", o.partition);
  if (!o.account.empty()) s += fmt::format("#SBATCH --account={}\n", o.account);
  if (!o.qos.empty()) s += fmt::format("#SBATCH --qos={}\n", o.qos);
  // A CUDA sweep asks for a GPU per task (per rank with --ranks) unless told how many.
  const std::string gpus = !o.gpus.empty() ? o.gpus : o.device == "cuda" ? (o.ranks > 1 && o.gpu_request == "gres" ? std::to_string(o.ranks) : "1") : "";
  if (!gpus.empty())
    s += o.gpu_request == "gres" ? fmt::format("#SBATCH --gres=gpu:{}\n", gpus) : fmt::format("#SBATCH --gpus-per-task={}\n", gpus);
  s += fmt::format("#SBATCH --output={}\n", slurm_log(o));
  // Slurm truncates the log when a requeued task starts again, unless asked to append.
  s += "#SBATCH --open-mode=append\n";
  s += "#SBATCH --requeue\n";
  if (o.signal_seconds > 0) s += fmt::format("#SBATCH --signal=B:USR1@{}\n", o.signal_seconds);
  for (const std::string& opt : o.sbatch) s += "#SBATCH " + opt + "\n";
  // -u only after the setup: module scripts (Lmod, environment modules) and many activate scripts
  // read variables that may be unset.
  s += "set -eo pipefail\n";
  for (const std::string& m : o.modules) s += "module load " + m + "\n";
  for (const std::string& line : o.setup) s += line + "\n";
  s += "set -u\n";
  s += "mkdir -p " + shell_quote(o.out) + "\n";
  s += "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}\n";
  const std::string ranks = o.ranks > 1 ? fmt::format(" --ranks {} --launcher '{}' --threads {}", o.ranks, o.launcher, o.cpus) : "";
  const std::string device = o.device == "host" ? "" : " --device " + o.device;
  s += fmt::format("{} sweep run {} --out {} --data {} --shard \"${{SLURM_ARRAY_TASK_ID}}/{}\"{}{} &\n", shell_quote(o.program),
                   o.spec_arg, shell_quote(o.out), shell_quote(o.data), o.shards, ranks, device);
  s += "child=$!\n";
  s += "# The shell gets USR1 (--signal=B:); loopscale must, to checkpoint and stop.\n";
  s += "got=\n";
  s += "for sig in USR1 TERM INT; do trap \"got=$sig; kill -s $sig $child 2> /dev/null || true\" $sig; done\n";
  s += "rc=0\n";
  s += "while :; do\n";
  s += "  wait \"$child\" && rc=0 || rc=$?\n";
  s += "  # A trapped signal also ends wait (status > 128) while loopscale is still stopping.\n";
  s += "  kill -0 \"$child\" 2> /dev/null || break\n";
  s += "done\n";
  s += "if [ \"$rc\" -gt 128 ]; then  # the signal's wait, and loopscale ended before the next one\n";
  s += "  last=0; wait \"$child\" && last=0 || last=$?\n";
  s += "  [ \"$last\" -eq 127 ] || rc=$last\n";
  s += "fi\n";
  s += "if [ \"$rc\" -eq 75 ] && [ \"$got\" = USR1 ]; then  # the time limit is near, checkpoint written: run the rest later\n";
  s += "  echo \"loopscale stopped with its state saved; requeueing ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\"\n";
  // The task may have been requeued already (preemption); say so, keep 75.
  s += "  scontrol requeue \"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\" ||\n";
  s += "    echo \"scontrol requeue failed; resubmit with sbatch --array=${SLURM_ARRAY_TASK_ID}\" >&2\n";
  s += "elif [ \"$rc\" -eq 75 ]; then  # scancel (or preemption, which Slurm requeues itself): stay stopped\n";
  s += "  echo \"loopscale stopped on SIG${got:-?} with its state saved; not requeued (to continue: scontrol requeue ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID})\"\n";
  s += "fi\n";
  s += "exit \"$rc\"\n";
  return s;
}

}  // namespace loopscale::sweep
