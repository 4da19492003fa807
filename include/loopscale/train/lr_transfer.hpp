// Learning-rate transfer across the runs of a sweep: the corrections the iso-depth paper's scaling
// runs apply on top of their base rates (its code, kschwethelm/looped-lm-scaling,
// scripts/base_train.py; the rules are HyperP's, arXiv:2603.28743, sections 3.4 and 5.4):
//
//   batch  every rate of the matrices, the embedding and the lm_head times (B / 2^18)^0.558, B the
//          tokens of one optimiser step (batch x seq_len); the norms' and the lanes' rates are not
//          corrected
//   data   the matrices' (MuonH's) rate also times (D / D_ref)^-0.32, D the run's training tokens
//          (its token budget, or its FLOP budget over the training FLOPs per token, before rounding
//          to whole steps), D_ref ten times the effective parameters of a reference model
//
// The reference model is the paper's "architecture-matched" one at width 640 (its size 10 times
// its aspect ratio 64, rounded up to a multiple of the head dimension): for a looped run (r > 1)
// 2 prelude + 4 shared + 2 coda layers with linear injection at the run's own r, for r = 1 twenty
// layers run once. Its effective parameters are the paper's `effective_params` with embeddings
// excluded: prelude, coda and the outer norms once, the shared block and its injection r times
// (ParamCounts::unrolled, account/params.hpp). So D_ref depends on r: at head dimension 128 it is
// 9.83e8 tokens at r = 1, 6.06e8 at r = 2, 1.02e9 at r = 4 and 1.84e9 at r = 8.
//
// The reference's layers are the paper's: attention heads of the run's head dimension (that of its
// first layer) filling the reference width, no grouped keys and values, a relu^2 MLP of 4 d. They
// take nothing else from the run, so D_ref depends on the run's r and head dimension only, not on
// its width or MLP. The rule is the paper's for dense models: a spec with mixture-of-experts layers
// is refused, since the paper does not say what its reference would be.
//
// Where the paper's runs trained at 2^18 tokens a step (the `paper` sweep preset does), the batch
// correction is 1; the data correction is what moves the matrices' rate from run to run (by a
// review's count 0.0062 to 0.0244 over the paper's grid at base 0.014).
#pragma once

#include <cmath>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "loopscale/account/params.hpp"
#include "loopscale/spec/family.hpp"
#include "loopscale/spec/spec.hpp"
#include "loopscale/util/names.hpp"

namespace loopscale::train {

enum class LrTransfer : std::uint8_t { none, hyperp };

constexpr auto names_of(LrTransfer) { return make_names<LrTransfer>({{LrTransfer::none, "none"}, {LrTransfer::hyperp, "hyperp"}}); }

// The constants of the paper's code (scripts/base_train.py): REF_SIZE x aspect ratio,
// REF_DATA_RATIO, B_REF and the two exponents.
struct HyperP {
  static constexpr int64 reference_width = 640;
  static constexpr double reference_data_ratio = 10;
  static constexpr double reference_batch_tokens = 262144;  // 2^18
  static constexpr double batch_exponent = 0.558;
  static constexpr double data_exponent = -0.32;
};

// The corrections one run trains with (1 and 1 without transfer), and what they came from.
struct LrScales {
  double batch = 1;             // on the matrices, the embedding and the lm_head
  double data = 1;              // on the matrices only
  double tokens = 0;            // D: the run's training tokens the data correction reads
  double reference_tokens = 0;  // D_ref
  double matrix() const { return batch * data; }
};
NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE(LrScales, batch, data, tokens, reference_tokens)

// Why a spec has no HyperP reference, or "" when it has one.
inline std::string hyperp_fault(const ModelSpec& run) {
  for (const StackSpec* s : {&run.prelude, &run.recur.block, &run.coda})
    for (const LayerSpec& l : s->layers)
      if (l.ffn.moe())
        return "lr_transfer hyperp follows the iso-depth paper's dense reference model, and the spec has mixture-of-experts layers "
               "(the paper does not say what their reference would be); use lr_transfer none and set the rates";
  return {};
}

// The paper's reference model for a run (above). The spec must be dense (hyperp_fault).
inline ModelSpec hyperp_reference(const ModelSpec& run) {
  // The run's first layer, wherever it is (a valid spec may leave one or two of the stacks empty).
  const StackSpec& stack = !run.prelude.empty() ? run.prelude : !run.recur.block.empty() ? run.recur.block : run.coda;
  const int64 head_dim = attn_head_dim(stack[0].attn, run.d_model);
  // A member of the family builder's default family (2 + k + 2 of the paper's layers, linear
  // injection): k fixed at 4 for a looped run, and for r = 1 its flat member, 0 + 20 + 0.
  FamilySpec f;
  f.vocab = run.vocab;  // not counted: embeddings are excluded
  f.vocab_multiple = run.vocab_multiple;
  f.layer.attn.head_dim = head_dim;
  if (run.recur.r > 1) f.block_layers = 4;
  else f.r1_layout = R1Layout::flat;
  return family_member(f, run.recur.r, ceil_div(HyperP::reference_width, head_dim) * head_dim);
}

// D_ref: ten times the reference's effective (unrolled, non-embedding) parameters.
inline double hyperp_reference_tokens(const ModelSpec& run) {
  return HyperP::reference_data_ratio * static_cast<double>(count_params(hyperp_reference(run)).unrolled);
}

// The corrections of a run of `tokens` training tokens at `batch_tokens` tokens a step.
inline LrScales lr_scales(LrTransfer t, const ModelSpec& run, double batch_tokens, double tokens) {
  LrScales s;
  s.tokens = tokens;
  if (t == LrTransfer::none) return s;
  s.reference_tokens = hyperp_reference_tokens(run);
  s.batch = std::pow(batch_tokens / HyperP::reference_batch_tokens, HyperP::batch_exponent);
  s.data = std::pow(tokens / s.reference_tokens, HyperP::data_exponent);
  return s;
}

}  // namespace loopscale::train
