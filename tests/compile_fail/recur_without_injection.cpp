// expect: recur: r > 1 needs an injection (Linear, Additive, Passthrough or Hyper<Lanes>)
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using R = Recur<Block<Repeat<4, Layer<>>>, 4, NoInject>;
#else
using R = Recur<Block<Repeat<4, Layer<>>>, 4, Additive>;
#endif
static_assert(R{}.spec().r == 4);
