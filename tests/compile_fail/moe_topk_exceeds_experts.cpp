// expect: moe: top_k (K of MoE<E, K>) must not exceed experts (E); lower K or raise E
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using L = Layer<Attention<>, MoE<4, 8>>;
#else
using L = Layer<Attention<>, MoE<8, 4>>;
#endif
static_assert(L{}.spec().ffn.experts > 0);
