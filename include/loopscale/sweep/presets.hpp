// Named sweeps: `--preset NAME` on every sweep command.
//   smoke     at most 8 tiny runs, well under a minute on two cores (tests, CI);
//   cpu-mini  the demo: r in {1, 2, 4, 8}, 3 widths per budget, about 20 minutes on two cores;
//   cpu       the same family with more widths and budgets, a few hours on two cores;
//   paper     the 116-run grid of the iso-depth paper (REFERENCE s.1), for GPUs.
// The CPU presets use the byte-level corpus (vocab 256) and an iso-depth family of effective depth
// 10 = 1 + 8 + 1, so that k = 8 / r is whole for every r in {1, 2, 4, 8}. Their budgets were chosen
// from the accounting and the engine's speed measured on this machine (docs/sweeps.md).
#pragma once

#include <string>
#include <vector>

#include "loopscale/sweep/moe_presets.hpp"
#include "loopscale/sweep/plan.hpp"

namespace loopscale::sweep {

inline std::vector<std::string> preset_names() { return {"smoke", "cpu-mini", "cpu", "paper", "looped-moe"}; }

namespace detail {

// Widths d = 16 s (head_dim 16), context 128, 8 sequences per step. Measured here with the engine:
// at d 32-96 the optimum of budgets around 3e11 FLOPs lies below d = 32 (losses fall
// monotonically towards the narrowest model: too few tokens per parameter), so the CPU presets
// use d = 16-48 for their small budgets, where the widths can bracket the optimum.
inline SweepSpec cpu_family(const std::string& name) {
  SweepSpec s;
  s.name = name;
  s.depth = 10;
  s.prelude = 1;
  s.coda = 1;
  s.r = {1, 2, 4, 8};
  s.inject = "linear";
  s.bptt = "full";
  s.width_per_s = 16;  // d = 16 s
  s.width_round = 16;
  s.head_dim = 16;
  s.vocab = 256;
  s.vocab_multiple = 64;
  s.seq_len = 128;
  s.batch_tokens = 8 * 128;
  s.micro_batch_tokens = 8 * 128;
  s.memory_limit_gib = 16;
  // A fixed validation sample of 64 sequences: the same for every run, so its sampling error is
  // shared across the sweep instead of moving the iso-FLOP curves independently.
  s.train = {{"lr", 3e-3}, {"warmup", 0.05}, {"eval_tokens", 64 * 128}};
  s.seed = 1;
  return s;
}

}  // namespace detail

inline SweepSpec preset(const std::string& name) {
  if (name == "looped-moe") return detail::looped_moe_preset(name);  // moe_presets.hpp
  if (name == "paper") {
    SweepSpec s;
    s.name = "paper";
    s.depth = 20;
    s.prelude = 2;
    s.coda = 2;
    s.r = {1, 2, 4, 8};
    s.width_per_s = 64;
    s.width_round = 128;
    s.head_dim = 128;
    s.vocab = 32000;
    s.seq_len = 2048;
    s.batch_tokens = 262144;
    s.micro_batch_tokens = 4 * 2048;  // fp32 activations of our engine; the batch by accumulation
    s.memory_limit_gib = 80;
    s.budgets = {{4.64e17, {6, 8, 10, 12}},          {1e18, {6, 8, 10, 12, 14}},   {2.15e18, {8, 10, 12, 14, 16}},
                 {4.64e18, {10, 12, 14, 16, 18, 20}}, {1e19, {12, 16, 18, 20, 24}}, {2.15e19, {18, 24, 28, 34}}};
    // The paper trained with Muon (matrix lr 0.014); this engine has AdamW and its defaults.
    s.data = "data/fineweb-edu";
    return s;
  }
  if (name == "smoke") {
    SweepSpec s = detail::cpu_family("smoke");
    s.depth = 4;  // 1 + 2 + 1: r in {1, 2}
    s.r = {1, 2};
    s.seq_len = 64;
    s.batch_tokens = 8 * 64;
    s.micro_batch_tokens = 8 * 64;
    s.budgets = {{1e10, {1, 2}}, {3e10, {1, 2}}};
    return s;
  }
  if (name == "cpu-mini") {
    SweepSpec s = detail::cpu_family("cpu-mini");
    // 36 runs, 1.8e13 training FLOPs: about 17 minutes at the 17.7 GFLOP/s per CPU-second the
    // engine reached here at these widths (measured on one thread of a loaded machine).
    s.budgets = {{1.5e11, {1, 2, 3}}, {4e11, {1, 2, 3}}, {1e12, {1, 2, 3}}};
    return s;
  }
  if (name == "cpu") {
    SweepSpec s = detail::cpu_family("cpu");
    // 76 runs, 2.9e14 training FLOPs: about 4.5 hours at the speed above.
    s.budgets = {{3e11, {1, 2, 3, 4}}, {1e12, {1, 2, 3, 4, 5}}, {3e12, {2, 3, 4, 5, 6}}, {1e13, {2, 3, 4, 6, 8}}};
    return s;
  }
  std::string names;
  for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw sweep_error("unknown preset '" + name + "' (known: " + names + ")");
}

}  // namespace loopscale::sweep
