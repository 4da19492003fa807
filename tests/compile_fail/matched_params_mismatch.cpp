// expect: matched_params: non-embedding parameters differ by more than the tolerance
#include <loopscale/loopscale.hpp>
using namespace loopscale;
using Family = IsoDepthFamily<20, 2, 2, Rs<1, 4>, Width<384>, Vocab<32064>>;
#ifdef LOOPSCALE_COMPILE_FAIL
static_assert(require_matched_params<Family::member<1>, Family::member<4>, 0.1>());  // looping shares weights
#else
static_assert(require_matched_params<Family::member<4>, Family::member<4>, 0.0>());
#endif
