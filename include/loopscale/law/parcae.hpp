// Parcae's accounting of looped models (2026): a Chinchilla law in the unrolled parameter count
// N_once + r N_rec, i.e. every recurrence worth a full copy of the block (the iso-depth law at
// phi = 1, the baseline the iso-depth paper reports as R^2 0.9552).
#pragma once

#include "loopscale/law/chinchilla.hpp"

namespace loopscale::law {

struct Parcae : ChinchillaForm<UnrolledRecurrence> {
  static constexpr std::string_view name = "parcae";
  static constexpr std::string_view source = "Parcae (2026): unrolled parameters in a Chinchilla law";
  static constexpr std::string_view formula = "L = E + A (N_once + r N_rec)^-alpha + B D^-beta";
  std::vector<Eigen::VectorXd> grid() const { return chinchilla_grid(); }
};

}  // namespace loopscale::law
