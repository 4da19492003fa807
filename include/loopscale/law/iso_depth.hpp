// The iso-depth joint law of looped models (Schwethelm, Rueckert, Kaissis 2026, "How Much Is One
// Recurrence Worth?"): L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta. phi says what one
// recurrence of the shared block is worth: 0 nothing beyond storing it once, 1 a full copy.
#pragma once

#include <array>

#include "loopscale/law/chinchilla.hpp"

namespace loopscale::law {

struct IsoDepth : ChinchillaForm<PowerRecurrence> {
  static constexpr std::string_view name = "iso-depth";
  static constexpr std::string_view source = "Schwethelm, Rueckert, Kaissis 2026, How Much Is One Recurrence Worth? (arXiv 2604.21106)";
  static constexpr std::string_view formula = "L = E + A (N_once + r^phi N_rec)^-alpha + B D^-beta";
};

// The published constants (the paper's joint fit over its 116 runs), with its reported interval and
// goodness of fit, and its per-architecture Chinchilla fits L = E + A N^-alpha + B D^-beta (N the
// stored non-embedding parameters, D = C / F; published to two or three digits). Which parameter
// counts reproduce which published number: account/injection_convention.hpp and
// tests/law/test_published.cpp.
struct IsoDepthPublished {
  static constexpr double E = 1.56773, A = 28.027, B = 915.82, alpha = 0.19924, beta = 0.36863, phi = 0.459;
  static constexpr double phi_lo = 0.41, phi_hi = 0.53;  // 95% block-bootstrap interval
  static constexpr double r2 = 0.9972, rmse = 0.010;     // over the 116 runs
  static constexpr double r2_phi0 = 0.9858, r2_phi1 = 0.9552;
  struct PerArchitecture {
    int r;
    double A, alpha, B, beta, E;
  };
  static constexpr std::array<PerArchitecture, 4> per_r{{{1, 58, 0.251, 150, 0.267, 1.56},
                                                         {2, 33, 0.216, 910, 0.365, 1.60},
                                                         {4, 23, 0.191, 1300, 0.388, 1.56},
                                                         {8, 41, 0.235, 780, 0.362, 1.69}}};
};

}  // namespace loopscale::law
