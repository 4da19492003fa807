// Whole numbers out of JSON without undefined behaviour. nlohmann's get<int64>() of a JSON float
// is a static_cast, undefined outside the integer's range (1e300) and a silent truncation inside
// it (2.5 -> 2), so the readers of outside input (sweep specs, results lines, --config files) ask
// json_whole first and report a number that does not fit as their own error. Found by the fuzz
// harnesses of tests/fuzz/.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace loopscale {

// True when get<T>() of v is defined and exact: v is not a number (nlohmann's type_error, which
// the readers already report, is left to it), or a number that T holds exactly. Vectors: each
// element.
template <class T>
bool json_whole(const nlohmann::json& v) {
  if constexpr (std::is_same_v<T, bool> || !std::is_integral_v<T>) {
    return true;
  } else {
    if (v.is_number_float()) {
      const double x = v.get<double>();
      // [min, 2^digits): every double in it converts exactly once it is whole.
      return std::isfinite(x) && x == std::floor(x) && x >= static_cast<double>(std::numeric_limits<T>::min()) &&
             x < std::ldexp(1.0, std::numeric_limits<T>::digits);
    }
    if (v.is_number_unsigned()) return std::in_range<T>(v.get<std::uint64_t>());
    if (v.is_number_integer()) return std::in_range<T>(v.get<std::int64_t>());
    return true;
  }
}

template <class T>
  requires requires { typename T::value_type; } && std::is_same_v<T, std::vector<typename T::value_type>>
bool json_whole(const nlohmann::json& v) {
  if (!v.is_array()) return true;
  for (const auto& e : v)
    if (!json_whole<typename T::value_type>(e)) return false;
  return true;
}

// True when every number inside v (at any depth) is an exact int64: for documents such as a model
// spec, whose numbers are all whole.
inline bool json_all_whole(const nlohmann::json& v) {
  if (v.is_structured()) {
    for (const auto& e : v)
      if (!json_all_whole(e)) return false;
    return true;
  }
  return json_whole<std::int64_t>(v);
}

}  // namespace loopscale
