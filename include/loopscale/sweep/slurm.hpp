// An sbatch script that runs a sweep's shards as a Slurm job array: task I runs
// `loopscale sweep run SPEC --out DIR --shard I/N` into its own results.shard-I-of-N.jsonl in the
// shared folder DIR; the merge after the array is one command, printed in the script's header.
//
// Time limits and preemption: the script asks Slurm for SIGUSR1 `signal_seconds` before the time
// limit (`--signal=B:USR1@S`). B: sends it to the batch shell only (without B:, Slurm signals job
// steps, i.e. srun launches, and loopscale is none), so the shell runs loopscale in the
// background, forwards USR1/TERM/INT to it and `wait`s. loopscale then finishes the step, writes
// the checkpoint and exits 75 (util/interrupt.hpp), and the script requeues its own array task
// (`#SBATCH --requeue`, `scontrol requeue JOB_TASK`), which resumes where it stopped. SIGTERM at
// the limit or on preemption takes the same way, within Slurm's KillWait before SIGKILL.
//
// Slurm opens the --output log (DIR/slurm-%A_%a.log) before the script runs, so DIR must exist at
// submission: `loopscale sweep slurm` creates it (the `mkdir -p` in the script is too late for the
// log; it stays for a folder removed since).
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

inline std::string slurm_script(const Plan& plan, const SlurmOptions& o) {
  if (o.shards < 1) throw sweep_error("--shards must be at least 1");
  if (o.out.empty()) throw sweep_error("slurm: --out (the sweep folder on the cluster) is required");
  if (o.spec_arg.empty()) throw sweep_error("slurm: the spec (file on the cluster or preset) is required");
  std::string s;
  s += "#!/bin/bash\n";
  s += fmt::format("# loopscale sweep '{}' (fingerprint {}): {} runs ({} runnable) in {} shards.\n", plan.spec.name,
                   plan.fingerprint, plan.runs.size(), plan.runnable(), o.shards);
  s += "# Submit: sbatch THIS_FILE. Each array task runs one shard; near its time limit (or when\n";
  s += "# preempted) loopscale checkpoints and exits 75, and the task requeues itself and resumes.\n";
  s += "# After a failure, resubmit (sbatch --array=I THIS_FILE): finished runs are skipped.\n";
  s += "# The folder of --output below must exist before sbatch (loopscale sweep slurm made it).\n";
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
  s += "#SBATCH --requeue\n";
  if (o.signal_seconds > 0) s += fmt::format("#SBATCH --signal=B:USR1@{}\n", o.signal_seconds);
  s += "set -euo pipefail\n";
  s += "mkdir -p " + shell_quote(o.out) + "\n";
  s += "export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-1}\n";
  s += fmt::format("{} sweep run {} --out {} --data {} --shard \"${{SLURM_ARRAY_TASK_ID}}/{}\" &\n", shell_quote(o.program),
                   o.spec_arg, shell_quote(o.out), shell_quote(o.data), o.shards);
  s += "child=$!\n";
  s += "# The shell gets USR1 (--signal=B:); loopscale must, to checkpoint and stop.\n";
  s += "for sig in USR1 TERM INT; do trap \"kill -s $sig $child 2> /dev/null || true\" $sig; done\n";
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
  s += "if [ \"$rc\" -eq 75 ]; then  # stopped by a signal, checkpoint written: run the rest later\n";
  s += "  echo \"loopscale stopped with its state saved; requeueing ${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\"\n";
  // Preemption with PreemptMode=REQUEUE may have requeued the task already; say so, keep 75.
  s += "  scontrol requeue \"${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}\" ||\n";
  s += "    echo \"scontrol requeue failed; resubmit with sbatch --array=${SLURM_ARRAY_TASK_ID}\" >&2\n";
  s += "fi\n";
  s += "exit \"$rc\"\n";
  return s;
}

}  // namespace loopscale::sweep
