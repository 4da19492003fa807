// expect: IsoDepthFamily: R1Layout::flat is for dense families (an MoE placement counts the prelude and coda)
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using Placement = MoeEvery<MoE<8, 2>, 2, 1>;
#else
using Placement = NoMoE;
#endif
using F = IsoDepthFamily<20, 2, 2, Rs<1, 2>, Width<384>, Vocab<32064>, Linear, Layer<>, full_bptt, Placement, R1Layout::flat>;
static_assert(require_iso_depth<F::member<1>, F::member<2>>());
