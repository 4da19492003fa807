// The iso-depth paper's sweep (Schwethelm et al. 2026), in one place: its family (effective depth
// 20 = 2 prelude + k r + 2 coda, r in {1, 2, 4, 8}, linear injection, head dim 128), its width rule
// and its six compute budgets with their width multipliers: 29 (budget, width) points per r, 116
// runs. The accounting tests, the `paper` sweep preset and the law's synthetic grid and allocation
// all read it from here; its truncated-BPTT sweep (the `paper-truncated` preset) too.
//
// Vocabulary 32064: the paper's code pads its tokenizer's 32,001 tokens (Llama 2's 32,000 and one
// more) to a multiple of 64 for the embedding and the head. With it the accounting reproduces the
// published per-width tables (tests/data/isodepth_project_page.json): N exactly and log F within
// 1e-4; with 32000 log F misses by up to 3e-4. The paper's code cuts the logits back to 32,001
// before the softmax; so does a model of vocab 32,001 padded to 32,064 (ModelSpec::vocab_multiple
// 64: the loss reads the first `vocab` logits of each padded row), which the `paper` sweep preset
// trains. Its counts are those of 32,064.
#pragma once

#include <array>
#include <utility>
#include <vector>

#include "loopscale/spec/family.hpp"

namespace loopscale::paper {

inline constexpr int64 depth = 20;
inline constexpr int64 prelude = 2;
inline constexpr int64 coda = 2;
inline constexpr int64 vocab = 32064;            // the rows of the embedding and the head
inline constexpr int64 tokenizer_vocab = 32001;  // the tokens, which the softmax spans
inline constexpr int64 seq_len = 2048;
inline constexpr int64 head_dim = 128;
inline constexpr std::array<int64, 4> rs{1, 2, 4, 8};

constexpr FamilySpec family() {
  FamilySpec f;
  f.depth = depth;
  f.prelude = prelude;
  f.coda = coda;
  f.inject = {Inject::linear, 0};
  f.vocab = vocab;
  // f.layer is the default layer: attention heads of dimension 128 (AttentionSpec derives heads = d / 128), relu^2 MLP of 4 d.
  return f;
}

// d_model = 64 s rounded up to a multiple of the head dim 128.
constexpr int64 width(int64 s) { return ceil_div(64 * s, head_dim) * head_dim; }

inline std::vector<ComputeBudget> budgets() {
  return {{4.64e17, {6, 8, 10, 12}},          {1e18, {6, 8, 10, 12, 14}},  {2.15e18, {8, 10, 12, 14, 16}},
          {4.64e18, {10, 12, 14, 16, 18, 20}}, {1e19, {12, 16, 18, 20, 24}}, {2.15e19, {18, 24, 28, 34}}};
}

// Its truncated-BPTT sweep (shells/scaling_laws/scaling_laws_truncbptt.sh of its code): r in
// {2, 4, 8} with gradient through the last ceil(r / 2) recurrences (BPTT_K 1, 2, 4: the spec's
// "half"), no r = 1 run, and from 1e18 up one more width on the large side of each budget
// ("trunc BPTT shifts the compute-optimum wider"): 34 (budget, width) points per r, 102 runs.
inline constexpr std::array<int64, 3> truncated_rs{2, 4, 8};

inline std::vector<ComputeBudget> truncated_budgets() {
  return {{4.64e17, {6, 8, 10, 12}},              {1e18, {6, 8, 10, 12, 14, 16}},      {2.15e18, {8, 10, 12, 14, 16, 18}},
          {4.64e18, {10, 12, 14, 16, 18, 20, 22}}, {1e19, {12, 16, 18, 20, 24, 28}}, {2.15e19, {18, 24, 28, 34, 40}}};
}

}  // namespace loopscale::paper
