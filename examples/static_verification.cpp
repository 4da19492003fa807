// Static verification: the compiler proves that the members of an iso-depth family are matched in
// depth, width and vocabulary, that the accounting is what the paper's convention says, and how
// compute and parameters relate across r. Nothing here runs; if it compiles, the sweep is well
// formed. main() prints the same numbers from the run-time specs, through the same functions.
#include <cstdio>

#include <loopscale/loopscale.hpp>

using namespace loopscale;

// ---- the paper's family at its smallest width ------------------------------------------------
// Depth 20 = 2 prelude + k * r + 2 coda, r in {1, 2, 4, 8}, three heads of 128, vocab 32064, linear
// injection for r > 1 (none for r = 1).
using Family = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<384>, Vocab<32064>>;
using R1 = Family::member<1>;
using R2 = Family::member<2>;
using R4 = Family::member<4>;
using R8 = Family::member<8>;
constexpr int64 T = 2048;

// Same effective depth, width and vocabulary across the family.
static_assert(Family::size == 4);
static_assert(require_iso_depth<R1, R2>() && require_iso_depth<R1, R4>() && require_iso_depth<R1, R8>());
static_assert(iso_depth(R2{}, R4{}) && iso_depth(R4{}, R8{}));
static_assert(require_same_width<R1, R8>() && same_vocab(R1{}, R8{}));
static_assert(effective_depth(spec_of<R4>()) == 20);

// Block sizes follow k = 16 / r.
static_assert(spec_of<R1>().recur.block.size() == 16 && spec_of<R2>().recur.block.size() == 8);
static_assert(spec_of<R4>().recur.block.size() == 4 && spec_of<R8>().recur.block.size() == 2);

// The family's members are the builder's members (spec/family.hpp), the function sweeps call.
static_assert(spec_of<R4>() == family_member(Family::spec, 4, 384));
static_assert(spec_of<R4>() == family_member(paper::family(), 4, 384));

// A layer holds 12 d^2 matmul weights and 2 d norm scales; the linear injection 2 d^2.
constexpr int64 d = 384, layer = 12 * d * d + 2 * d, inject = 2 * d * d;
static_assert(account_of<R1>(T).params.once == 4 * layer + 3 * d);
static_assert(account_of<R1>(T).params.rec == 16 * layer);
static_assert(account_of<R4>(T).params.rec == 4 * layer + inject);
static_assert(account_of<R8>(T).params.rec == 2 * layer + inject);

// Looping shares weights: fewer stored parameters as r grows...
static_assert(account_of<R2>(T).params.non_embedding < account_of<R1>(T).params.non_embedding);
static_assert(account_of<R8>(T).params.non_embedding < account_of<R4>(T).params.non_embedding);
// ...but the unrolled (training-cost) size stays that of the dense model plus the injections.
static_assert(account_of<R4>(T).params.unrolled == account_of<R1>(T).params.unrolled + 4 * inject);

// Matched compute: each linear injection adds 6 * 2 d^2 FLOPs per token per recurrence, about
// 0.37% of the r = 1 model's training FLOPs here, so r = 8 stays within 3.5%.
static_assert(matched_compute(R1{}, R2{}, T, 0.01) && matched_compute(R1{}, R4{}, T, 0.02));
static_assert(require_matched_compute<R1, R8, T, 0.035>());
static_assert(!matched_compute(R1{}, R8{}, T, 0.001));
// The paper's FLOP formula at s = 6: 6 (once + lm_head + r rec) + 12 h q T * 20, with the recurrence's
// norm (d scales, in once) applied at the end of each of the r recurrences rather than once.
static_assert(account_of<R4>(T).flops_per_token.train ==
              6 * (account_of<R4>(T).params.once - d + 32064 * d + 4 * (account_of<R4>(T).params.rec + d)) + 12 * 3 * 128 * T * 20);

// Truncated BPTT: only ceil(r/2) recurrences pay for a backward pass.
using R4Truncated = IsoDepthFamily<20, 2, 2, Rs<4>, Width<384>, Vocab<32064>, Linear, Layer<>, half_bptt>::member<4>;
static_assert(require_iso_depth<R4, R4Truncated>());
static_assert(account_of<R4Truncated>(T).flops_per_token.train < account_of<R4>(T).flops_per_token.train);
static_assert(account_of<R4Truncated>(T).flops_per_token.forward == account_of<R4>(T).flops_per_token.forward);

// ---- a looped MoE model, written out by hand --------------------------------------------------
// 8 experts, top 2, experts of width 2d: the active size equals the dense layer's.
using MoELayer = Layer<Attention<>, MoE<8, 2, 2 * 384>>;
using LoopedMoE = Model<Width<384>, Vocab<32064>, Prelude<2>, Recur<Block<Repeat<4, MoELayer>>, 4, Linear>, Coda<2>>;
static_assert(require_iso_depth<R4, LoopedMoE>());
static_assert(account_of<LoopedMoE>(T).params.rec_active == account_of<R4>(T).params.rec + 4 * 8 * d);
static_assert(account_of<LoopedMoE>(T).params.total > account_of<LoopedMoE>(T).params.active);
static_assert(matched_compute(R4{}, LoopedMoE{}, T, 0.01));

// ---- a mixed-stack family: dense and MoE layers alternating inside the recurrence ---------------
// The `mixed-moe` sweep preset's family (sweep/presets.hpp), at its middle width d = 12: effective
// depth 10 = 1 prelude + k r + 1 coda, r in {1, 2, 4}, heads of dimension 4, byte vocabulary; in the
// shared block every second layer is a MoE of 4 experts, top 1, starting dense (GShard / Switch):
// k = 8, 4, 2 layers give dense, MoE, dense, MoE, ... whatever r, so every member unrolls to the
// same 8-layer stack and the comparison across r is iso-depth and matched in compute.
using Head4 = Layer<Attention<0, 4>>;
using Mixed = IsoDepthFamily<10, 1, 1, Rs<1, 2, 4>, Width<12>, Vocab<256>, Linear, Head4, full_bptt,
                             MoeEvery<MoE<4, 1>, 2, 1, MoeScope::recur>>;
using M1 = Mixed::member<1>;
using M2 = Mixed::member<2>;
using M4 = Mixed::member<4>;
static_assert(require_iso_depth<M1, M2>() && require_iso_depth<M1, M4>());
static_assert(spec_of<M4>().recur.block.size() == 2);
static_assert(!spec_of<M4>().recur.block[0].ffn.moe() && spec_of<M4>().recur.block[1].ffn.experts == 4);
static_assert(!spec_of<M4>().prelude[0].ffn.moe() && !spec_of<M4>().coda[0].ffn.moe());
// The injection (2 d^2 per recurrence) is all that separates the members' compute: within 4%.
static_assert(require_matched_compute<M1, M2, 64, 0.02>() && require_matched_compute<M1, M4, 64, 0.04>());
static_assert(!matched_compute(M1{}, M4{}, 64, 0.01));
// Active parameters: the same per unrolled layer for every r (top-1 of 4 experts, each the dense
// MLP's size, plus a 4 d router), so the unrolled active size equals the dense member's unrolled
// size plus the routers: per MoE layer 4 d router weights and 3 more experts of 8 d^2.
constexpr int64 dm = 12;
static_assert(account_of<M4>(64).params.rec_active - account_of<M4>(64).params.rec == -3 * 8 * dm * dm);
static_assert(account_of<M1>(64).params.non_embedding - account_of<M1>(64).params.active + 2 * 256 * dm == 4 * 3 * 8 * dm * dm);

// ---- the same checks on models whose sizes are chosen at run time ------------------------------
// A type with dynamic sizes holds them; the checks run when the program does and throw spec_error
// with the sentence a static model's static_assert would print.
using Sweepable = Model<Width<dynamic>, Vocab<256>, Prelude<1, Head4>,
                        Recur<Block<Alternate<Head4, Layer<Attention<0, 4>, MoE<dynamic, 1>>, dynamic>>, dynamic>, Coda<1, Head4>>;

int main() {
  // The paper family's members at a run-time width, from the same builder.
  for (const ModelSpec& m : Family::specs(384)) {
    const Accounting a = account(m, T);
    std::printf("r=%lld  non_embedding=%lld  unrolled=%lld  train_flops_per_token=%lld\n",
                static_cast<long long>(m.recur.r), static_cast<long long>(a.params.non_embedding),
                static_cast<long long>(a.params.unrolled), static_cast<long long>(a.flops_per_token.train));
  }
  // The mixed family at r = 4 with sizes given at run time equals the static member.
  Sweepable s{.width = {12}, .recur = {.block = {{{.n = {2}, .layers = {{}, {.ffn = {.experts = {4}}}}}}}, .r = {4}}};
  const bool same = spec_of(s) == spec_of<M4>();
  require_iso_depth(s, M1{});
  require_matched_compute<64, 0.04>(s, M1{});
  std::printf("mixed family, r = 4 at run time: %s the static member\n", same ? "equals" : "DIFFERS FROM");
  bool caught = false;
  try {
    require_matched_compute<64, 0.01>(s, M1{});
  } catch (const spec_error& e) {
    caught = true;
    std::printf("as expected, at 1%%: %s\n", e.what());
  }
  return same && caught ? 0 : 1;
}
