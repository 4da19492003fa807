// expect: R > 1 needs an injection
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using R = Recur<Block<4>, 4, NoInject>;
#else
using R = Recur<Block<4>, 4, Additive>;
#endif
static_assert(R::spec.r == 4);
