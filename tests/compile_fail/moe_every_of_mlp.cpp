// expect: MoeEvery<MoE<E, K>, Every, FirstDense>: the first argument must be a MoE<E, K>, not an Mlp
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using Placement = MoeEvery<Mlp<>, 2, 1>;
#else
using Placement = MoeEvery<MoE<8, 2>, 2, 1>;
#endif
using F = IsoDepthFamily<20, 2, 2, Rs<1, 2>, Width<384>, Vocab<32064>, Linear, Layer<>, full_bptt, Placement>;
static_assert(require_iso_depth<F::member<1>, F::member<2>>());
