// expect: recur: r (R of Recur<Block, R>) must be at least 1
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using R = Recur<Block<Repeat<4, Layer<>>>, 0, Linear>;
#else
using R = Recur<Block<Repeat<4, Layer<>>>, 1, Linear>;
#endif
static_assert(R{}.spec().block.size() == 4);
