// The iso-depth joint law of looped models (Schwethelm, Rueckert, Kaissis 2026, "How Much Is One
// Recurrence Worth?"): L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta. phi says what one
// recurrence of the shared block is worth: 0 nothing beyond storing it once, 1 a full copy.
#pragma once

#include "loopscale/law/chinchilla.hpp"

namespace loopscale::law {

struct IsoDepth : ChinchillaForm<PowerRecurrence> {
  static constexpr std::string_view name = "iso-depth";
  static constexpr std::string_view source = "Schwethelm, Rueckert, Kaissis 2026, How Much Is One Recurrence Worth? (arXiv 2604.21106)";
  static constexpr std::string_view formula = "L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta";
};

// The published constants (the paper's joint fit over its 116 runs).
struct IsoDepthPublished {
  static constexpr double E = 1.56773, A = 28.027, B = 915.82, alpha = 0.19924, beta = 0.36863, phi = 0.459;
};

}  // namespace loopscale::law
