// expect: recur: bptt must be full_bptt, half_bptt or a count of recurrences between 1 and r
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using R = Recur<Block<Repeat<4, Layer<>>>, 4, Linear, 5>;
#else
using R = Recur<Block<Repeat<4, Layer<>>>, 4, Linear, 2>;
#endif
static_assert(bptt_recurrences(R{}.spec()) == 2 || bptt_recurrences(R{}.spec()) == 5);
