// A separate project using the installed headers: the algebra at compile time and at run time.
#include <cstdio>

#include <loopscale/loopscale.hpp>

using namespace loopscale;
using Family = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<384>, Vocab<32064>>;
static_assert(require_iso_depth<Family::member<1>, Family::member<8>>());

int main() {
  using Dynamic = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<dynamic>, Vocab<32064>>;
  const Accounting a = account(Dynamic::member<4>{.width = {384}}, 2048);
  if (a.flops_per_token.train != account_of<Family::member<4>>(2048).flops_per_token.train) return 1;
  std::printf("consumer ok: r=4 trains at %lld FLOPs per token\n", static_cast<long long>(a.flops_per_token.train));
  return 0;
}
