// A sweep run on several ranks: the sweep process starts `LAUNCHER -n N PROGRAM train --config
// RUN/train_config.json` (mpirun or srun; data-parallel training, train/trainer.hpp) and waits for
// it. The sweep itself stays one process: it plans, waits, then scores the finished run.
//
// Signals: the sweep forwards a stop request (SIGTERM, SIGINT, SIGUSR1 under its InterruptGuard) to
// the launcher as SIGUSR1, which mpirun and srun pass on to every rank; the ranks stop after the
// same step with a checkpoint and exit 75, and so does the sweep. SIGUSR1 and not TERM because
// mpirun answers TERM by killing its ranks. If the sweep process itself dies, the launcher gets
// SIGUSR1 too (PR_SET_PDEATHSIG), so no orphaned job keeps training into the run folder.
#pragma once

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>

#include "loopscale/sweep/plan.hpp"
#include "loopscale/util/interrupt.hpp"

namespace loopscale::sweep {

// The launcher of a machine without a scheduler: Open MPI's mpirun, allowed more ranks than cores
// (the point on a small machine is correctness) and, as root, allowed to run at all.
inline std::string default_launcher() { return geteuid() == 0 ? "mpirun --oversubscribe --allow-run-as-root" : "mpirun --oversubscribe"; }

// The words of a launcher command line (empty: default_launcher()), split at spaces (no quoting: a
// launcher and its options are plain words).
inline std::vector<std::string> launcher_words(const std::string& given) {
  const std::string launcher = given.empty() ? default_launcher() : given;
  std::vector<std::string> w;
  std::istringstream in(launcher);
  for (std::string s; in >> s;) w.push_back(s);
  if (w.empty()) throw sweep_error("sweep: --launcher is empty; give a command such as 'mpirun' or 'srun --mpi=pmix'");
  return w;
}

// The path of this program (what the ranks run).
inline std::string this_program() {
  std::vector<char> buf(4096);
  const ssize_t n = readlink("/proc/self/exe", buf.data(), buf.size() - 1);
  if (n <= 0) throw std::runtime_error(std::string("sweep: cannot find this program (/proc/self/exe): ") + std::strerror(errno));
  return std::string(buf.data(), static_cast<std::size_t>(n));
}

// Runs argv and returns its exit status (128 + N after signal N), forwarding a stop request as
// SIGUSR1 once.
inline int run_forwarding_stop(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw std::runtime_error(std::string("sweep: fork: ") + std::strerror(errno));
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGUSR1);
    if (getppid() != parent) _exit(75);  // the sweep died before prctl took effect
    execvp(args[0], args.data());
    std::fprintf(stderr, "loopscale: sweep: cannot run %s: %s\n", args[0], std::strerror(errno));
    _exit(127);
  }
  bool forwarded = false;
  for (;;) {
    int status = 0;
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0 && errno != EINTR) throw std::runtime_error(std::string("sweep: waitpid: ") + std::strerror(errno));
    if (!forwarded && interrupt_requested()) {
      kill(pid, SIGUSR1);
      forwarded = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace loopscale::sweep
