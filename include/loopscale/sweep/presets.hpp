// Named sweeps: `--preset NAME` on every sweep command.
//   smoke     at most 8 tiny runs, well under a minute on two cores (tests, CI);
//   cpu-mini  the demo: r in {1, 2, 4, 8}, 3 widths per budget, about 20 minutes on two cores;
//   cpu       the same family with more widths and budgets, a few hours on two cores;
//   paper     the 116-run grid of the iso-depth paper (REFERENCE s.1), for GPUs.
// The CPU presets use the byte-level corpus (vocab 256) and an iso-depth family of effective depth
// 10 = 1 + 8 + 1, so that k = 8 / r is whole for every r in {1, 2, 4, 8}. Their budgets were chosen
// from the accounting and the engine's measured speed on this machine (docs/sweeps.md).
#pragma once

#include <string>
#include <vector>

#include "loopscale/sweep/plan.hpp"

namespace loopscale::sweep {

inline std::vector<std::string> preset_names() { return {"smoke", "cpu-mini", "cpu", "paper"}; }

namespace detail {

inline SweepSpec cpu_family(const std::string& name) {
  SweepSpec s;
  s.name = name;
  s.depth = 10;
  s.prelude = 1;
  s.coda = 1;
  s.r = {1, 2, 4, 8};
  s.inject = "linear";
  s.bptt = "full";
  s.width_per_s = 32;  // d = 32 s (s = 2, 3, 4 -> 64, 96, 128)
  s.width_round = 32;
  s.head_dim = 32;
  s.vocab = 256;
  s.vocab_multiple = 64;
  s.seq_len = 128;
  s.batch_tokens = 16 * 128;
  s.micro_batch_tokens = 16 * 128;
  s.memory_limit_gib = 16;
  s.optim = {{"lr", 3e-3}, {"warmup_frac", 0.05}, {"weight_decay", 0.0}};
  s.seed = 1;
  return s;
}

}  // namespace detail

inline SweepSpec preset(const std::string& name) {
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
    s.optim = {{"matrix_lr", 0.014}};
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
    s.budgets = {{2e10, {2, 4}}, {6e10, {2, 4}}};
    return s;
  }
  if (name == "cpu-mini") {
    SweepSpec s = detail::cpu_family("cpu-mini");
    s.budgets = {{3e11, {2, 3, 4}}, {1e12, {2, 3, 4}}, {3e12, {2, 3, 4}}};
    return s;
  }
  if (name == "cpu") {
    SweepSpec s = detail::cpu_family("cpu");
    s.budgets = {{1e12, {2, 3, 4, 5}}, {3e12, {2, 3, 4, 5, 6}}, {1e13, {3, 4, 5, 6, 8}}, {3e13, {4, 5, 6, 8, 10}}};
    return s;
  }
  std::string names;
  for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw sweep_error("unknown preset '" + name + "' (known: " + names + ")");
}

}  // namespace loopscale::sweep
