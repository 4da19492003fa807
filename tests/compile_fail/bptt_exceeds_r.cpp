// expect: Bptt must be full_bptt, half_bptt or a count between 1 and R
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using R = Recur<Block<4>, 4, Linear, 5>;
#else
using R = Recur<Block<4>, 4, Linear, 2>;
#endif
static_assert(bptt_recurrences(R::spec) == 2 || bptt_recurrences(R::spec) == 5);
