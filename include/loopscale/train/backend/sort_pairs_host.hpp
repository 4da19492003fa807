// The host's form of a device backend's sort_pairs, shared by the guard backend (guard.hpp) and
// the SIMT backend (simt.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstddef>
#include <vector>

namespace loopscale::train {

// A stable sort of n (key, value) pairs by the low key_bits bits of the key, on the host: what a
// device backend's sort_pairs does (CUDA: a CUB radix sort over those bits).
inline void stable_sort_pairs_host(const std::int32_t* keys_in, std::int32_t* keys_out, const std::int32_t* vals_in, std::int32_t* vals_out,
                                   std::int64_t n, int key_bits) {
  const std::uint32_t mask = key_bits >= 32 ? ~0u : (1u << key_bits) - 1u;
  std::vector<std::int64_t> idx(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i) idx[static_cast<std::size_t>(i)] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) {
    return (static_cast<std::uint32_t>(keys_in[a]) & mask) < (static_cast<std::uint32_t>(keys_in[b]) & mask);
  });
  for (std::int64_t i = 0; i < n; ++i) {
    keys_out[i] = keys_in[idx[static_cast<std::size_t>(i)]];
    vals_out[i] = vals_in[idx[static_cast<std::size_t>(i)]];
  }
}

}  // namespace loopscale::train
