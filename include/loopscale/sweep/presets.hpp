// Named sweeps: `--preset NAME` on every sweep command.
//   smoke     at most 8 tiny runs, well under a minute on two cores (tests, CI);
//   cpu-mini  the demo: r in {1, 2, 4, 8}, 3 widths per budget, 5-19 minutes on two cores (docs/sweeps.md);
//   cpu       the same family with more widths and budgets, a few hours on two cores;
//   paper     the 116-run grid of the iso-depth paper (spec/paper_grid.hpp), for GPUs;
//   paper-truncated  its 102-run truncated-BPTT sweep: r in {2, 4, 8}, gradient through ceil(r / 2);
//   looped-moe  E x R for the looped-MoE law (moe_presets.hpp);
//   mixed-moe   cpu-mini's family with dense and MoE layers alternating in the shared block.
// The CPU presets use the byte-level corpus (vocab 256) and an iso-depth family of effective depth
// 10 = 1 + 8 + 1, so that k = 8 / r is whole for every r in {1, 2, 4, 8}. Their widths and budgets
// were chosen from pilot runs of the engine on this machine (docs/sweeps.md, "The CPU presets").
#pragma once

#include <string>
#include <vector>

#include "loopscale/spec/paper_grid.hpp"
#include "loopscale/sweep/moe_presets.hpp"
#include "loopscale/sweep/plan.hpp"
#include "loopscale/train/lr_transfer.hpp"

namespace loopscale::sweep {

inline std::vector<std::string> preset_names() { return {"smoke", "cpu-mini", "cpu", "paper", "paper-truncated", "looped-moe", "mixed-moe"}; }

namespace detail {

// Widths d = 4 s (head_dim 4), context 64, 8 sequences per step. Measured
// here with the engine (docs/sweeps.md): with d = 16-48 and context 128 the narrowest width won
// every (C, r) cell up to 1e12 FLOPs, so the optimum was never bracketed; at context 64 the
// iso-FLOP optimum lies near d = 8 at 5e10 FLOPs and near d = 12 at 1e11, which these widths
// bracket. Threads: on two cores shared with other work, two OpenMP threads sharing each kernel
// trained these tiny models 3.5-22 times slower than one (measured at load 1.4-3.8), so sweep run
// gives them every core only in thread lanes (each thread a share of the 8 sequences through a
// model of its own, train/thread_lanes.hpp), and one thread otherwise (sweep/engine.hpp).
inline SweepSpec cpu_family(const std::string& name) {
  SweepSpec s;
  s.name = name;
  s.depth = 10;
  s.prelude = 1;
  s.coda = 1;
  s.r = {1, 2, 4, 8};
  s.inject = "linear";
  s.bptt = "full";
  s.width_per_s = 4;  // d = 4 s
  s.width_round = 4;
  s.head_dim = 4;
  s.vocab = 256;
  s.vocab_multiple = 64;
  s.seq_len = 64;
  s.batch_tokens = 8 * 64;
  s.micro_batch_tokens = 8 * 64;
  s.memory_limit_gib = 16;
  // A fixed validation sample of 128 sequences: the same for every run, so its sampling error is
  // shared across the sweep instead of moving the iso-FLOP curves independently.
  // No "threads": sweep run chooses them per run (sweep/engine.hpp, auto_threads).
  s.train = {{"lr", 3e-3}, {"warmup", 0.05}, {"eval_tokens", 128 * 64}};
  s.seed = 1;
  return s;
}

}  // namespace detail

inline SweepSpec preset(const std::string& name) {
  if (name == "looped-moe") return detail::looped_moe_preset(name);  // moe_presets.hpp
  if (name == "paper-truncated") {
    // The paper's second sweep, trained as the first (the same recipe, rates, data and validation)
    // with truncated backpropagation through the recurrences and its own grid (spec/paper_grid.hpp).
    SweepSpec s = preset("paper");
    s.name = name;
    s.r.assign(paper::truncated_rs.begin(), paper::truncated_rs.end());
    s.r1_layout = "split";  // no r = 1 run to lay out
    s.bptt = "half";
    s.budgets = paper::truncated_budgets();
    return s;
  }
  if (name == "paper") {
    SweepSpec s;
    s.name = "paper";
    s.depth = paper::depth;
    s.prelude = paper::prelude;
    s.coda = paper::coda;
    s.r.assign(paper::rs.begin(), paper::rs.end());
    s.r1_layout = "flat";  // its baseline as the paper's code builds it: 0 + 20 + 0 (spec/family.hpp, R1Layout)
    s.width_per_s = 64;  // paper::width: 64 s rounded up to a multiple of the head dim
    s.width_round = paper::head_dim;
    s.head_dim = paper::head_dim;
    s.vocab = paper::tokenizer_vocab;  // padded to paper::vocab (vocab_multiple 64): the paper's counts and softmax
    s.seq_len = paper::seq_len;
    s.batch_tokens = 262144;
    s.micro_batch_tokens = 4 * 2048;  // fp32 activations of our engine; the batch by accumulation
    s.memory_limit_gib = 80;
    s.budgets = paper::budgets();
    // Trained as the paper's scaling runs train (docs/training.md, "Recipes"): MuonH + AdamW with
    // its initialisation and schedule, at the base rates its scaling runs pass (scripts/base_train.py
    // of its code: matrices 0.014, embedding 0.3, lm_head 0.004, norms 0.005 and lanes 0.01 as
    // setup_optimizer has them, the AdamW rates at width reference 640), corrected per run by batch
    // and training tokens (lr_transfer hyperp, train/lr_transfer.hpp). The multipliers are of the
    // matrices' rate, as TrainConfig keeps them.
    constexpr double matrix_lr = 0.014;
    s.train = {{"recipe", "paper"},
               {"lr", matrix_lr},
               {"lr_embedding", 0.3 / matrix_lr},
               {"lr_lm_head", 0.004 / matrix_lr},
               {"lr_norm", 0.005 / matrix_lr},
               {"lr_lanes", 0.01 / matrix_lr},
               {"lr_width_ref", static_cast<double>(train::HyperP::reference_width)},  // 640, the reference model's width
               {"lr_transfer", "hyperp"},
               // Validated as its final evaluation is (nanochat/common.py EVAL_ROWS_FULL): on 34,560
               // rows of 2,048, about its whole validation split of 34,608 rows, each once
               // (train::validation_batches), not on the default 2^17 tokens, which round up to one
               // batch of 128 rows.
               {"eval_tokens", 34560 * 2048}};
    s.data = "data/fineweb-edu";
    return s;
  }
  if (name == "smoke") {
    SweepSpec s = detail::cpu_family("smoke");
    s.depth = 4;  // 1 + 2 + 1: r in {1, 2}
    s.r = {1, 2};
    s.width_per_s = 16;  // d = 16, 32 (head_dim 16): the shapes the sweep tests were written for
    s.width_round = 16;
    s.head_dim = 16;
    s.budgets = {{1e10, {1, 2}}, {3e10, {1, 2}}};
    return s;
  }
  if (name == "cpu-mini") {
    SweepSpec s = detail::cpu_family("cpu-mini");
    // 36 runs, 3 widths per (C, r) shifting up with C: d 4-12 at 5e10, d 8-16 at 1e11 and 1.6e11;
    // 3.7e12 training FLOPs. docs/sweeps.md has the measured losses per cell and the time.
    s.budgets = {{5e10, {1, 2, 3}}, {1e11, {2, 3, 4}}, {1.6e11, {2, 3, 4}}};
    return s;
  }
  if (name == "mixed-moe") {
    // The cpu-mini family with a mixed shared block: dense and MoE layers alternate inside the
    // recurrence (every second layer of the block a top-1 MoE of 4 experts of the dense MLP's
    // width, starting dense), the family examples/static_verification.cpp proves iso-depth and
    // matched in compute. r in {1, 2, 4} (k = 8, 4, 2: every member unrolls to the same
    // dense/MoE/dense/MoE stack; r = 8 would leave a one-layer, all-dense block). One expert
    // count, so the whole sweep is the iso-depth analysis's. Routing as the looped-moe preset's
    // (Switch top-1, aux loss 0.01, dropless). docs/sweeps.md has the measured run and its phi.
    SweepSpec s = detail::cpu_family("mixed-moe");
    s.r = {1, 2, 4};
    s.experts = {4};
    s.top_k = 1;
    s.expert_ff = 4;
    s.moe_layers = "recur";
    s.moe_every = 2;
    s.moe_first_dense = 1;
    s.budgets = {{5e10, {1, 2, 3}}, {1e11, {2, 3, 4}}, {1.6e11, {2, 3, 4}}};
    s.train.update({{"moe_router", "softmax"}, {"moe_renormalize", false}, {"moe_balance", "aux:0.01"}, {"moe_z_loss", 0.0},
                    {"moe_capacity", 0.0}});
    return s;
  }
  if (name == "cpu") {
    SweepSpec s = detail::cpu_family("cpu");
    // The same family, 96 runs: five budgets from 5e10 to 8e11 with 4-5 widths each (d 4-40), the
    // widths moving up with C as the optimum does; 3.1e13 training FLOPs, 8 times cpu-mini's (two
    // shards, --shard 0/2 and 1/2, use both cores). Planned from the pilots, not yet run.
    s.budgets = {{5e10, {1, 2, 3, 4}}, {1e11, {1, 2, 3, 4, 5}}, {2e11, {2, 3, 4, 5, 6}}, {4e11, {3, 4, 5, 6, 8}},
                 {8e11, {4, 5, 6, 8, 10}}};
    return s;
  }
  std::string names;
  for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw sweep_error("unknown preset '" + name + "' (known: " + names + ")");
}

}  // namespace loopscale::sweep
