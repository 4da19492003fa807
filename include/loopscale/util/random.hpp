// Deterministic random numbers for initialisation and data sampling.
#pragma once

#include <cmath>
#include <cstdint>

namespace loopscale {

// The splitmix64 step: a well-mixed 64-bit value of x (Steele, Lea, Flood 2014). A pure function,
// so a value keyed by (seed, counter) needs no generator state.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// splitmix64 as a generator: a stream is fully described by its 64-bit state (checkpointed as one
// integer).
struct SplitMix64 {
  std::uint64_t state = 0;
  std::uint64_t next() {
    const std::uint64_t z = splitmix64(state);
    state += 0x9E3779B97F4A7C15ull;
    return z;
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }  // [0, 1)
  double normal() {  // Box-Muller, one value per call
    const double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
};

}  // namespace loopscale
