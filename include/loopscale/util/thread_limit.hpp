// The most threads any part of loopscale starts. A thread count is a small number; a slip such as
// --threads 100000 must be refused with a message, not handed to libgomp, which cannot create that
// many and then crashes (SIGSEGV at 100,000, an abort at 50,000: `loopscale fit`, `train` and `eval`
// on a 2-core AMD EPYC, 4 Dec 2026). 1024 is above the core count of any machine this library
// targets and far below what libgomp can start.
#pragma once

#include <stdexcept>
#include <string>

namespace loopscale {

inline constexpr int max_threads = 1024;

// `what` names the setting in the message ("--threads", "threads").
inline void check_thread_count(long long n, const std::string& what) {
  if (n < 0 || n > max_threads)
    throw std::invalid_argument(what + " must be between 0 (every core) and " + std::to_string(max_threads) + ", not " + std::to_string(n));
}

}  // namespace loopscale
