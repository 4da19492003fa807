// Static verification of an iso-depth family: the compiler proves the members are matched in depth,
// width and vocabulary, that the accounting is what the paper's convention says, and how compute
// and parameters relate across r. Nothing here runs; if it compiles, the sweep is well formed.
#include <cstdio>

#include <loopscale/loopscale.hpp>

using namespace loopscale;

// The paper's family at its smallest width: depth 20 = 2 prelude + k * r + 2 coda, r in {1, 2, 4, 8},
// three heads of 128, vocab 32064, linear injection for r > 1 (none for r = 1).
using Family = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<384>, Vocab<32064>>;
using R1 = Family::member<1>;
using R2 = Family::member<2>;
using R4 = Family::member<4>;
using R8 = Family::member<8>;
constexpr int64 T = 2048;

// Same effective depth, width and vocabulary across the family.
static_assert(Family::size == 4);
static_assert(require_iso_depth<R1, R2>() && require_iso_depth<R1, R4>() && require_iso_depth<R1, R8>());
static_assert(iso_depth<R2, R4> && iso_depth<R4, R8>);
static_assert(require_same_width<R1, R8>() && same_vocab<R1, R8>);
static_assert(effective_depth(spec_of<R4>) == 20);

// Block sizes follow k = 16 / r.
static_assert(spec_of<R1>.recur.block.layers == 16 && spec_of<R2>.recur.block.layers == 8);
static_assert(spec_of<R4>.recur.block.layers == 4 && spec_of<R8>.recur.block.layers == 2);

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
static_assert(matched_compute<R1, R2>(T, 0.01) && matched_compute<R1, R4>(T, 0.02));
static_assert(require_matched_compute<R1, R8, T, 0.035>());
static_assert(!matched_compute<R1, R8>(T, 0.001));
// The paper's FLOP formula at s = 6: 6 (once + lm_head + r rec) + 12 h q T * 20.
static_assert(account_of<R4>(T).flops_per_token.train ==
              6 * (account_of<R4>(T).params.once + 32064 * d + 4 * account_of<R4>(T).params.rec) + 12 * 3 * 128 * T * 20);

// Truncated BPTT: only ceil(r/2) recurrences pay for a backward pass.
using R4Truncated = IsoDepthFamily<20, 2, 2, Rs<4>, Width<384>, Vocab<32064>, Linear, Layer<>, half_bptt>::member<4>;
static_assert(require_iso_depth<R4, R4Truncated>());
static_assert(account_of<R4Truncated>(T).flops_per_token.train < account_of<R4>(T).flops_per_token.train);
static_assert(account_of<R4Truncated>(T).flops_per_token.forward == account_of<R4>(T).flops_per_token.forward);

// A looped MoE model: 8 experts, top 2, experts of width 2d: active size equals the dense layer's.
using MoELayer = Layer<Attention<>, MoE<8, 2, 2 * 384>>;
using LoopedMoE = Model<Width<384>, Vocab<32064>, Prelude<2>, Recur<Block<4, MoELayer>, 4, Linear>, Coda<2>>;
static_assert(require_iso_depth<R4, LoopedMoE>());
static_assert(account_of<LoopedMoE>(T).params.rec_active == account_of<R4>(T).params.rec + 4 * 8 * d);
static_assert(account_of<LoopedMoE>(T).params.total > account_of<LoopedMoE>(T).params.active);
static_assert(matched_compute<R4, LoopedMoE>(T, 0.01));

// Other conventions, for comparison: Kaplan drops norms, embeddings and lm_head.
static_assert(account_of<R1>(T, Convention::kaplan).flops_per_token.train ==
              3 * (2 * 20 * 12 * d * d + 2 * 20 * T * d));
static_assert(account_of<R1>(T, Convention::causal).flops_per_token.train < account_of<R1>(T).flops_per_token.train);

int main() {
  // The same numbers at run time, from the family's run-time specs.
  for (const ModelSpec& m : Family::specs(384)) {
    const Accounting a = account(m, T);
    std::printf("r=%lld  non_embedding=%lld  unrolled=%lld  train_flops_per_token=%lld\n",
                static_cast<long long>(m.recur.r), static_cast<long long>(a.params.non_embedding),
                static_cast<long long>(a.params.unrolled), static_cast<long long>(a.flops_per_token.train));
  }
  return 0;
}
