// An sbatch script that runs a sweep's shards as a Slurm job array: task I runs
// `loopscale sweep run SPEC --out DIR --shard I/N` into its own results.shard-I-of-N.jsonl in the
// shared folder DIR; the merge after the array is one command, printed in the script's header.
#pragma once

#include <string>

#include <fmt/format.h>

#include "loopscale/sweep/plan.hpp"

namespace loopscale::sweep {

struct SlurmOptions {
  int64 shards = 4;
  std::string program = "loopscale";  // path of the loopscale program on the cluster
  std::string spec_arg;               // shell words naming the spec: "--preset cpu" or a quoted path
  std::string out;                    // the sweep folder (shared file system)
  std::string data = "data/corpus";
  std::string time = "24:00:00";
  std::string partition;              // empty: the cluster's default
  std::string gpus;                   // e.g. "1" -> --gres=gpu:1; empty: none
  int64 cpus = 8;
  std::string mem = "64G";
};

// POSIX shell single quotes around a word.
inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

inline std::string slurm_script(const Plan& plan, const SlurmOptions& o) {
  if (o.shards < 1) throw sweep_error("--shards must be at least 1");
  if (o.out.empty()) throw sweep_error("slurm: --out (the sweep folder on the cluster) is required");
  if (o.spec_arg.empty()) throw sweep_error("slurm: the spec (file on the cluster or preset) is required");
  std::string s;
  s += "#!/bin/bash\n";
  s += fmt::format("# loopscale sweep '{}' (fingerprint {}): {} runs ({} runnable) in {} shards.\n", plan.spec.name,
                   plan.fingerprint, plan.runs.size(), plan.runnable(), o.shards);
  s += "# Submit: sbatch THIS_FILE. Each array task runs one shard and can be resubmitted after a\n";
  s += "# failure or time limit: it skips finished runs and resumes the interrupted one.\n";
  s += "# When all tasks are done: " + o.program + " sweep merge " + (o.spec_arg.rfind("--preset", 0) == 0 ? o.spec_arg : "--spec " + o.spec_arg) + " --out " + shell_quote(o.out) +
       " " + shell_quote(o.out) + "\n";
  s += fmt::format("#SBATCH --job-name=loopscale-{}\n", plan.spec.name);
  s += fmt::format("#SBATCH --array=0-{}\n", o.shards - 1);
  s += fmt::format("#SBATCH --time={}\n", o.time);
  s += fmt::format("#SBATCH --cpus-per-task={}\n", o.cpus);
  s += fmt::format("#SBATCH --mem={}\n", o.mem);
  if (!o.partition.empty()) s += fmt::format("#SBATCH --partition={}\n", o.partition);
  if (!o.gpus.empty()) s += fmt::format("#SBATCH --gres=gpu:{}\n", o.gpus);
  s += fmt::format("#SBATCH --output={}/slurm-%A_%a.log\n", o.out);
  s += "set -euo pipefail\n";
  s += "mkdir -p " + shell_quote(o.out) + "\n";
  s += "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}\n";
  s += fmt::format("exec {} sweep run {} --out {} --data {} --shard \"${{SLURM_ARRAY_TASK_ID}}/{}\"\n", shell_quote(o.program),
                   o.spec_arg, shell_quote(o.out), shell_quote(o.data), o.shards);
  return s;
}

}  // namespace loopscale::sweep
