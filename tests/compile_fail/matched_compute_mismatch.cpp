// expect: matched_compute: training FLOPs per token differ by more than the tolerance
#include <loopscale/loopscale.hpp>
using namespace loopscale;
using Family = IsoDepthFamily<20, 2, 2, Rs<1, 4>, Width<384>, Vocab<32064>>;
#ifdef LOOPSCALE_COMPILE_FAIL
using Wide = IsoDepthFamily<20, 2, 2, Rs<4>, Width<512>, Vocab<32064>>::member<4>;  // wider: more FLOPs
static_assert(require_matched_compute<Family::member<1>, Wide, 2048, 0.05>());
#else
static_assert(require_matched_compute<Family::member<1>, Family::member<4>, 2048, 0.05>());
#endif
