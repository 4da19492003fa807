// expect: Layer<Attn, Ffn>: the first argument must be an Attention<...> (did you swap Attn and Ffn?)
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using L = Layer<Mlp<>, Attention<>>;
#else
using L = Layer<Attention<>, Mlp<>>;
#endif
static_assert(L{}.spec().ffn.mult_num == 4);
