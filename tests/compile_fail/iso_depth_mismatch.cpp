// expect: iso_depth: the two models differ in effective depth
#include <loopscale/loopscale.hpp>
using namespace loopscale;
using A = Model<Width<384>, Vocab<32064>, Prelude<2>, Recur<Block<Repeat<8, Layer<>>>, 2, Linear>, Coda<2>>;
#ifdef LOOPSCALE_COMPILE_FAIL
using B = Model<Width<384>, Vocab<32064>, Prelude<2>, Recur<Block<Repeat<7, Layer<>>>, 2, Linear>, Coda<2>>;  // depth 18
#else
using B = Model<Width<384>, Vocab<32064>, Prelude<2>, Recur<Block<Repeat<4, Layer<>>>, 4, Linear>, Coda<2>>;  // depth 20
#endif
static_assert(require_iso_depth<A, B>());
