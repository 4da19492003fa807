// How a run's threads share its micro-batch (TrainConfig::thread_split): thread lanes, one model a
// thread on its share of the sequences (thread_lanes.hpp runs them), or one model whose kernels
// the threads share; and the memory each takes (account/memory.hpp), which can decide it.
#pragma once

#include <string>

#include "loopscale/account/memory.hpp"
#include "loopscale/train/train_config.hpp"

namespace loopscale::train::detail {

// Why lanes (below) cannot run a micro-batch of `micro` sequences on `threads` threads; empty where they can.
inline std::string why_no_lanes(int64 micro, int threads, bool host_memory) {
  if (!host_memory) return "only the host backend runs a model per thread";
  if (micro < threads)
    return "a micro-batch of " + std::to_string(micro) + " sequence(s) cannot give each of " + std::to_string(threads) + " threads a sequence";
  return {};
}

// The share of `threads` lanes' time that a micro-batch of `micro` sequences keeps busy: a pass
// takes as long as the largest lane (lane_sequences, account/memory.hpp), so micro / (threads x
// its sequences); 1 where the threads divide the micro-batch.
inline double lane_balance(int64 micro, int threads) {
  return static_cast<double>(micro) / static_cast<double>(threads * lane_sequences(micro, threads, 0));
}
// The balance below which auto leaves the threads on one model's kernels: on two threads of a
// 2-core Intel Xeon (docs/benchmarks.md, "Threads over the batch") equal lanes ran the acceptance
// model 1.93x one thread and shared kernels 1.71x, so lanes with 7/8 of the threads' time busy
// (1.69x) are about level with the kernels, and smaller models, whose kernels share worse
// (0.5-1.4x at d 32-192), gain more from lanes.
inline constexpr double min_lane_balance = 0.875;

// Whether auto (below) would run a micro-batch of `micro` sequences in lanes on `threads` threads.
inline bool auto_lanes(int64 micro, int threads, bool host_memory) {
  return threads > 1 && why_no_lanes(micro, threads, host_memory).empty() && lane_balance(micro, threads) >= min_lane_balance;
}

// The lanes of a micro-batch of `micro` sequences on `threads` threads (TrainConfig::thread_split):
// that many models, one a thread, each on its share of the sequences; 1 where the threads share
// every kernel of one model instead. `host_memory` is the backend's (B::host_memory): only the host
// backend lets several threads run whole passes through it at once. MoE layers route in each lane as
// in a micro-batch of accumulation (train/thread_lanes.hpp).
inline int64 thread_lanes(const TrainConfig& c, int64 micro, int threads, bool host_memory) {
  if (c.thread_split == "kernels" || threads <= 1) return 1;
  if (c.thread_split == "auto") return auto_lanes(micro, threads, host_memory) ? threads : 1;
  const std::string why = why_no_lanes(micro, threads, host_memory);
  if (!why.empty()) throw config_error("config: thread_split batch: " + why + "; use thread_split auto or kernels");
  return threads;
}

// Bytes a rank's training takes: count_lane_memory's for its micro-batch, and with accum > 1 the
// gradient sum over the micro-batches.
inline MemoryEstimate training_memory(const TrainConfig& c, int64 micro, int64 threads, int64 lanes, AttentionScratch scratch) {
  MemoryEstimate e = count_lane_memory(c.spec, micro, c.seq_len, threads, lanes, scratch);
  if (c.accum > 1) {
    e.grads += e.params;
    e.total += e.params;
  }
  return e;
}

// The thread lanes a run uses and its memory estimate, on `threads` threads of a backend whose
// memory is the host's or not, with `avail` bytes free (0: unknown): thread_lanes' choice, except
// that auto takes one model where the lanes' gradient buffers would not fit and one model would.
struct LanePlan {
  int64 lanes = 1;
  MemoryEstimate memory;
};
inline LanePlan plan_lanes(const TrainConfig& c, int64 micro, int threads, bool host_memory, AttentionScratch scratch, int64 avail) {
  LanePlan p;
  p.lanes = thread_lanes(c, micro, threads, host_memory);
  p.memory = training_memory(c, micro, threads, p.lanes, scratch);
  if (avail > 0 && p.memory.total > avail && p.lanes > 1 && c.thread_split == "auto") {
    const MemoryEstimate one = training_memory(c, micro, threads, 1, scratch);
    if (one.total <= avail) p = {1, one};
  }
  return p;
}

}  // namespace loopscale::train::detail
