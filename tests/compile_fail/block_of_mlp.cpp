// expect: Block<...>: every layer argument must be a Layer<Attn, Ffn>, Repeat<N, L>, Cycle<N, L...>, Alternate<L1, L2, N> or Layers<...>; wrap an Attention/Mlp/MoE in Layer<Attention<...>, Mlp<...>>
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using B = Block<Layer<>, MoE<8, 2>>;  // a MoE where a layer belongs
#else
using B = Block<Layer<>, Layer<Attention<>, MoE<8, 2>>>;
#endif
static_assert(B{}.spec().size() == 2);
