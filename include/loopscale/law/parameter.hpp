// A law's parameter: its name, whether the optimiser sees it on a log scale, and the box the
// optimiser searches. Positive scale factors (A, B, E, kappa) are fitted as logs, the way the
// papers fit them, so the box and the start grids are written in that coordinate.
#pragma once

#include <cmath>
#include <string>
#include <vector>

namespace loopscale::law {

enum class Scale { linear, log };

struct Parameter {
  std::string name;
  Scale scale = Scale::linear;
  double lo = 0;  // bounds in the fitted coordinate (log of the value for Scale::log)
  double hi = 0;

  double to_fitted(double value) const { return scale == Scale::log ? std::log(value) : value; }
  double to_value(double fitted) const { return scale == Scale::log ? std::exp(fitted) : fitted; }
  // The name of the coordinate the optimiser moves, as printed in the box ("log A").
  std::string fitted_name() const { return scale == Scale::log ? "log " + name : name; }
};

using Parameters = std::vector<Parameter>;

inline int index_of(const Parameters& ps, const std::string& name) {
  for (std::size_t i = 0; i < ps.size(); ++i)
    if (ps[i].name == name) return static_cast<int>(i);
  return -1;
}

inline std::string names_of(const Parameters& ps) {
  std::string s;
  for (const auto& p : ps) s += (s.empty() ? "" : ", ") + p.name;
  return s;
}

}  // namespace loopscale::law
