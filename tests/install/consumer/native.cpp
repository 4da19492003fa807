// The host backend as a user's program compiles it: built twice, with loopscale::native
// (-march=native, EXPECT_NATIVE) and without any -march (the SSE2 baseline). On the machine that
// runs them, the first targets the CPU's widest vector unit and has nothing to warn about; the
// second targets the baseline and, on a CPU with AVX2 or AVX-512, gives the trainer's warning.
#include <cstdio>
#include <string_view>

#include <loopscale/train/backend/host.hpp>

int main() {
  using namespace loopscale::train;
  const std::string advice = build_isa_advice();
  const std::string_view cpu = cpu_widest_isa().name;
#ifdef EXPECT_NATIVE
  const bool ok = advice.empty() && cpu == peak_isa().name;
#else
  const bool ok = std::string_view(peak_isa().name) == "portable" && advice.empty() == (cpu == "portable") &&
                  (advice.empty() || advice.find("loopscale::native") != std::string::npos);
#endif
  std::printf("consumer %s %s: the build targets %s, the CPU's widest unit is %s%s%s\n",
#ifdef EXPECT_NATIVE
              "native",
#else
              "baseline",
#endif
              ok ? "ok" : "failed", peak_isa().name, cpu.data(), advice.empty() ? "" : "; advice: ", advice.c_str());
  return ok ? 0 : 1;
}
