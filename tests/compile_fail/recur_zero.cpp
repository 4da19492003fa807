// expect: R (recurrences) must be at least 1
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using R = Recur<Block<4>, 0, Linear>;
#else
using R = Recur<Block<4>, 1, Linear>;
#endif
static_assert(R::spec.block.layers == 4);
