// The `looped-moe` preset: a small looped mixture-of-experts sweep for the looped-MoE law of Chen et
// al. (arXiv 2609.40316; law/looped_moe.hpp), E in {1, 2, 4, 8} routed experts x R in {1, 2, 4}
// recurrences x widths x budgets, on the byte-level corpus (scripts/corpus.sh, vocab 256), sized
// for this two-core machine (docs/sweeps.md, "Looped MoE", has the measured time and the fit).
//
// Kept apart from presets.hpp (which dispatches to it) and self-contained: it restates the CPU
// family's settings rather than sharing them, so changes to the dense CPU presets cannot move it.
#pragma once

#include <string>

#include "loopscale/sweep/plan.hpp"

namespace loopscale::sweep::detail {

inline SweepSpec looped_moe_preset(const std::string& name = "looped-moe") {
  SweepSpec s;
  s.name = name;
  // Effective depth 6 = 1 prelude + 4 recurrent layers + 1 coda: k = 4 / R is whole for R in {1, 2, 4}.
  s.depth = 6;
  s.prelude = 1;
  s.coda = 1;
  s.r = {1, 2, 4};
  s.inject = "linear";
  s.bptt = "full";
  s.width_per_s = 16;  // d = 16 s, head_dim 16 (the CPU presets' widths)
  s.width_round = 16;
  s.head_dim = 16;
  s.vocab = 256;
  s.vocab_multiple = 64;
  s.seq_len = 128;
  s.batch_tokens = 8 * 128;
  s.micro_batch_tokens = 8 * 128;
  s.memory_limit_gib = 16;
  // Every FFN (prelude, block, coda) is a top-1 MoE whose experts have the dense MLP's hidden width
  // 4 d, so the active size (and the FLOPs per token) is the same for every E at a given (R, d),
  // up to the router's d E per layer, while N_total grows with E: m = N_act / N_total falls from 1
  // at E = 1 to about 0.4 at E = 8. E = 1 is the dense MLP behind a one-expert router (gate 1).
  s.experts = {1, 2, 4, 8};
  s.top_k = 1;
  s.expert_ff = 4;
  s.shared_expert = false;
  s.moe_layers = "all";
  // Three (N, D) points per (E, R): d 16 and d 32 at C = 1e11 (an iso-FLOP pair), and d 32 again
  // at 3e11 (the same N with 3x the tokens): 36 runs, 6e12 training FLOPs, 120-360 steps each.
  // Sized from the engine's speed measured here on one thread (docs/sweeps.md, "Looped MoE"):
  // top-1 MoE runs at about the dense model's tokens/s at these widths.
  s.budgets = {{1e11, {1, 2}}, {3e11, {2}}};
  // Router: Switch Transformer's top-1 recipe (Fedus et al. 2021): softmax scores, the gate is the
  // chosen expert's probability (no renormalisation: with K = 1 a renormalised gate is always 1 and
  // the router would learn only from the balancing loss), the Switch aux loss at 0.01, dropless
  // (no capacity limit: no run loses tokens, so runs differ only by the architecture), no z-loss
  // (runs of a few hundred steps at d <= 48 have no logit blow-up to contain). The paper's sigmoid
  // gate with aux-loss-free bias is not used: with one expert its gate sigmoid(z) is not 1, so
  // E = 1 would not be the dense model, and the bias balances over more steps than these runs have.
  // The rest as the dense CPU presets: a fixed validation sample of 64 sequences shared by all runs.
  // No "threads": sweep run chooses them per run (sweep/engine.hpp, auto_threads): every core where
  // a run's sequences form thread lanes (MoE layers route in each lane as in a micro-batch of
  // accumulation), else one for these tiny models, whose steps cost well under 2 GFLOP;
  // `sweep run --threads N` fixes them.
  s.train = {{"lr", 3e-3},
             {"warmup", 0.05},
             {"eval_tokens", 64 * 128},
             {"moe_router", "softmax"},
             {"moe_renormalize", false},
             {"moe_balance", "aux:0.01"},
             {"moe_z_loss", 0.0},
             {"moe_capacity", 0.0}};
  s.seed = 1;
  return s;
}

}  // namespace loopscale::sweep::detail
