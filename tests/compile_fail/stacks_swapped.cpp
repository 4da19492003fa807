// expect: Model<Width, Vocab, Prelude, Recur, Coda>: the third argument must be a Prelude<N, Layer>; the order is Width, Vocab, Prelude, Recur, Coda (are two stacks swapped?)
#include <loopscale/loopscale.hpp>
using namespace loopscale;
using R = Recur<Block<Repeat<4, Layer<>>>, 4, Linear>;
#ifdef LOOPSCALE_COMPILE_FAIL
using M = Model<Width<384>, Vocab<32064>, Coda<3>, R, Prelude<1>>;
#else
using M = Model<Width<384>, Vocab<32064>, Prelude<1>, R, Coda<3>>;
#endif
static_assert(effective_depth(spec_of<M>()) == 20);
