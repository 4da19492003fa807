// expect: moe: top_k (K of MoE<E, K>) must not exceed experts (E); lower K or raise E
// within: 20 lines
// The mistake of moe_topk_exceeds_experts.cpp where a user makes it: deep inside a Model whose
// accounting is asked for. GCC first prints how it got there (Model, Recur, Block, Repeat, Layer:
// about a dozen "required from" lines), then the sentence.
#include <loopscale/loopscale.hpp>
using namespace loopscale;
using L = Layer<Attention<4>>;
#ifdef LOOPSCALE_COMPILE_FAIL
using Moe = Layer<Attention<4>, MoE<2, 4>>;
#else
using Moe = Layer<Attention<4>, MoE<4, 2>>;
#endif
using Looped = Model<Width<256>, Vocab<256>, Prelude<2, L>, Recur<Block<Repeat<4, Moe>>, 2, Linear>, Coda<2, L>>;
static_assert(account_of<Looped>(512).params.total > 0);
