// Stopping cleanly on a signal: SIGTERM (kill, Slurm at the time limit or on preemption), SIGINT
// (Ctrl-C) and SIGUSR1 (Slurm's warning before the time limit, `#SBATCH --signal=B:USR1@...`).
// While an InterruptGuard is alive, those signals only record which one came; the trainer
// (train/trainer.hpp) looks after every step, and on one it finishes the step, writes a checkpoint,
// records {"event":"interrupted","signal":"SIGTERM","step":N} in log.jsonl and status
// "interrupted" in summary.json, and returns. The `loopscale` program then exits with
// exit_interrupted (75, EX_TEMPFAIL of sysexits.h: "try again later"), which a job script reads as
// "requeue me": the run resumes where it stopped.
//
// A second signal while stopping changes nothing (the first one's stop is under way, and dying in
// the middle of the checkpoint would lose the step); it prints one line saying so. When the guard
// is destroyed the previous handlers (normally: die) come back, so a signal after the checkpoint
// is written acts as it would have without the guard. SIGKILL cannot be caught; what it costs is
// the steps since the last checkpoint (the atomic writes keep every file whole).
#pragma once

#include <csignal>
#include <cstring>
#include <stdexcept>
#include <string>

#include <signal.h>
#include <unistd.h>

namespace loopscale {

// The exit status of a run or sweep stopped by a signal after a checkpoint: resumable, run it again.
inline constexpr int exit_interrupted = 75;  // EX_TEMPFAIL

namespace interrupt_detail {

// The first signal received (0: none). A plain sig_atomic_t: the only type a handler may write.
inline volatile std::sig_atomic_t received = 0;

extern "C" inline void on_signal(int sig) {
  if (received == 0) {
    received = sig;
    return;
  }
  // Only async-signal-safe calls here: write(2).
  static const char msg[] = "\nloopscale: already stopping: finishing the step and writing the checkpoint\n";
  [[maybe_unused]] const ssize_t n = ::write(2, msg, sizeof msg - 1);
}

inline constexpr int signals[] = {SIGTERM, SIGINT, SIGUSR1};

}  // namespace interrupt_detail

// The signal that asked this process to stop, or 0.
inline int interrupt_signal() { return interrupt_detail::received; }
inline bool interrupt_requested() { return interrupt_detail::received != 0; }
// Forgets a received signal (tests; a program that handled one and goes on).
inline void clear_interrupt() { interrupt_detail::received = 0; }

// "SIGTERM", "SIGINT", "SIGUSR1", or "signal N".
inline std::string signal_name(int sig) {
  switch (sig) {
    case SIGTERM: return "SIGTERM";
    case SIGINT: return "SIGINT";
    case SIGUSR1: return "SIGUSR1";
    case SIGUSR2: return "SIGUSR2";
    case SIGHUP: return "SIGHUP";
    default: return "signal " + std::to_string(sig);
  }
}

// Thrown (by the sweep engine, the CLI) when work stopped on a signal after saving its state.
struct interrupted_error : std::runtime_error {
  int signal = 0;
  interrupted_error(int sig, const std::string& what) : std::runtime_error(what), signal(sig) {}
};

// Installs the handlers for its lifetime. Not nestable in a meaningful way: an inner guard
// restores the outer one's handlers, which is what nesting should do anyway.
class InterruptGuard {
 public:
  InterruptGuard() {
    struct sigaction sa {};
    sa.sa_handler = interrupt_detail::on_signal;
    sigemptyset(&sa.sa_mask);
    // SA_RESTART: a write or fsync of the checkpoint that the signal lands in goes on instead of
    // failing with EINTR, which would turn a clean stop into an I/O error.
    sa.sa_flags = SA_RESTART;
    for (std::size_t i = 0; i < std::size(interrupt_detail::signals); ++i) sigaction(interrupt_detail::signals[i], &sa, &old_[i]);
  }
  ~InterruptGuard() {
    for (std::size_t i = 0; i < std::size(interrupt_detail::signals); ++i) sigaction(interrupt_detail::signals[i], &old_[i], nullptr);
  }
  InterruptGuard(const InterruptGuard&) = delete;
  InterruptGuard& operator=(const InterruptGuard&) = delete;

 private:
  struct sigaction old_[std::size(interrupt_detail::signals)] {};
};

}  // namespace loopscale
