// expect: model_fault<loopscale::SpecFault::attn_heads_divide, loopscale::detail::Where::recur, 1>
// A fault of one layer names the layer: here the second layer (1, counted from 0 as the run-time
// message counts it) of the recurrent block, whose 5 heads do not divide d_model 384.
#include <loopscale/loopscale.hpp>
using namespace loopscale;
#ifdef LOOPSCALE_COMPILE_FAIL
using M = Model<Width<384>, Vocab<256>, Prelude<1, Layer<Attention<6>>>, Recur<Block<Layer<Attention<6>>, Layer<Attention<5>>>, 2>,
                Coda<1, Layer<Attention<6>>>>;
#else
using M = Model<Width<384>, Vocab<256>, Prelude<1, Layer<Attention<6>>>, Recur<Block<Layer<Attention<6>>, Layer<Attention<4>>>, 2>,
                Coda<1, Layer<Attention<6>>>>;
#endif
static_assert(spec_of<M>().d_model == 384);
