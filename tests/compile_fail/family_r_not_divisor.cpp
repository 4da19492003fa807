// expect: iso-depth family: r does not divide the recurrent depth (depth - prelude - coda); choose r among its divisors
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using Family = IsoDepthFamily<20, 2, 2, Rs<1, 2, 3, 4>, Width<384>, Vocab<32064>>;  // 3 does not divide 16
#else
using Family = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<384>, Vocab<32064>>;
#endif
static_assert(Family::size == 4);
