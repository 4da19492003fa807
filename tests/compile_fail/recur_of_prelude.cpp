// expect: Recur<Block, R, Inject>: the first argument must be a Block<...> (a Prelude or Coda cannot recur)
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using R = Recur<Prelude<4>, 4, Linear>;
#else
using R = Recur<Block<Repeat<4, Layer<>>>, 4, Linear>;
#endif
static_assert(R{}.spec().r == 4);
