// The host twin of the bf16 packing kernel's rounding (train/backend/bf16_pack.hpp, round_bits),
// which tests/cuda/kernels_device.cu holds the kernel to bit for bit on a GPU, against CUDA's own
// __float2bfloat16_rn run on the host (cuda_bf16.h has a host form): 4 million random bit patterns
// (NaNs and infinities among them) and every fp32 value from 1.0 up across 2^17 ulps, where each
// bf16 step has its tie. Needs nvcc, not a device: this runs in every build that has nvcc.
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "loopscale/train/backend/bf16_pack.hpp"

int main() {
  long checked = 0, differ = 0;
  const auto one = [&](std::uint32_t u) {
    float x;
    std::memcpy(&x, &u, sizeof x);
    const __nv_bfloat16 b = __float2bfloat16_rn(x);
    std::uint16_t cuda;
    std::memcpy(&cuda, &b, sizeof cuda);
    const std::uint16_t twin = loopscale::train::bf16_pack::round_bits(x);
    ++checked;
    if (cuda != twin && differ++ < 5) std::printf("FAIL 0x%08x (%a): CUDA 0x%04x, twin 0x%04x\n", u, static_cast<double>(x), cuda, twin);
  };
  std::uint64_t s = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < 4000000; ++i) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    one(static_cast<std::uint32_t>(s >> 16));
  }
  for (std::uint32_t u = 0x3F800000u; u < 0x3F800000u + (1u << 17); ++u) one(u);
  for (const std::uint32_t u : {0x7F7FFFFFu, 0x7F7F8000u, 0xFF7F8000u, 0x00000001u, 0x80000001u, 0x7F800000u, 0xFFC00000u, 0x7F800001u})
    one(u);
  std::printf("%ld of %ld values round differently\n", differ, checked);
  return differ == 0 ? 0 : 1;
}
