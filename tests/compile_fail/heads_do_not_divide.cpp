// expect: attention: d_model must be divisible by heads
// within: 6 lines
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using M = Model<Width<384>, Vocab<256>, Prelude<2, Layer<Attention<5>>>, NoRecur>;
#else
using M = Model<Width<384>, Vocab<256>, Prelude<2, Layer<Attention<6>>>, NoRecur>;
#endif
static_assert(spec_of<M>().d_model == 384);
