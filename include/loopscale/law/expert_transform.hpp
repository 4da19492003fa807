// Clark et al. 2022 ("Unified Scaling Laws for Routed Language Models"): the benefit of more
// experts saturates, so laws use a transformed expert count
//   1/Ehat = 1 / (E - 1 + (1/E_start - 1/E_max)^-1) + 1/E_max,
// which grows like E at first and tends to E_max. E_start and E_max are fitted with the law (as
// Clark et al. do), E_start linearly in [1, 8] and E_max as a log in [log 10, log 1e5], so that
// E_start < E_max holds everywhere in the box.
#pragma once

#include <cmath>
#include <map>
#include <string>

#include "loopscale/law/parameter.hpp"
#include "loopscale/util/text.hpp"

namespace loopscale::law {

inline Parameters expert_transform_parameters() {
  return {{"E_start", Scale::linear, 1, 8}, {"E_max", Scale::log, std::log(10.0), std::log(1e5)}};
}

// The transform is defined for 0 < E_start < E_max only: (1/E_start - 1/E_max)^-1 needs E_start > 0
// and E_start != E_max, and with E_start > E_max it is negative, so that 1/Ehat is <= 0 for some E
// (no log) and Ehat is finite but meaningless for the others. The box keeps every fit inside; this
// is for constants given by hand (--param, --start, --freeze, a fit file). "" when the constants present in
// `c` are in the domain.
inline std::string expert_transform_fault(const std::map<std::string, double>& c) {
  const auto start = c.find("E_start"), max = c.find("E_max");
  if (start != c.end() && !(start->second > 0))
    return concat("E_start=", start->second, " is not positive (Clark's expert transform needs 0 < E_start < E_max)");
  if (start != c.end() && max != c.end() && !(start->second < max->second))
    return concat("E_start=", start->second, " is not below E_max=", max->second, " (Clark's expert transform needs 0 < E_start < E_max)");
  return {};
}

struct ExpertTransform {
  double log_ehat;       // ln Ehat
  double d_e_start;      // d ln Ehat / d E_start
  double d_log_e_max;    // d ln Ehat / d log E_max
};

// e: experts per token, E_route / k; e_start, e_max in natural units.
inline ExpertTransform expert_transform(double e, double e_start, double e_max) {
  const double c0 = 1 / (1 / e_start - 1 / e_max);
  const double x = e - 1 + c0;
  const double inv = 1 / x + 1 / e_max;
  const double ehat = 1 / inv;
  const double c2x2 = c0 * c0 / (x * x);
  return {-std::log(inv), ehat * c2x2 / (e_start * e_start), ehat * (1 - c2x2) / e_max};
}

}  // namespace loopscale::law
