// The host twin of the bf16 packing kernel's rounding (train/backend/bf16_pack.hpp, round_bits),
// which tests/cuda/kernels_device.cu holds the kernel to bit for bit on a GPU, against CUDA's own
// __float2bfloat16_rn run on the host (cuda_bf16.h has a host form): every one of the 2^32 fp32 bit
// patterns (ties, subnormals, infinities and NaNs among them; about 20 s). Needs nvcc, not a
// device: this runs in every build that has nvcc.
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
  for (std::uint64_t u = 0; u <= 0xFFFFFFFFull; ++u) one(static_cast<std::uint32_t>(u));
  std::printf("%ld of %ld values round differently\n", differ, checked);
  return differ == 0 ? 0 : 1;
}
