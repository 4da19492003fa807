// Messages built from pieces: concat("r = ", r, ", depth ", d). Appends each piece in turn instead
// of chaining operator+, whose `"literal" + std::string` form makes GCC 12 at -O3 warn falsely
// (-Wrestrict, GCC bug 105329) wherever it is inlined.
#pragma once

#include <concepts>
#include <cstdio>
#include <string>
#include <string_view>

namespace loopscale {

namespace detail {
inline void append(std::string& out, std::string_view s) { out.append(s.data(), s.size()); }
inline void append(std::string& out, char c) { out.push_back(c); }
template <std::integral I>
  requires(!std::same_as<I, char> && !std::same_as<I, bool>)
void append(std::string& out, I v) {
  out += std::to_string(v);
}
// Six significant digits, as printf's %g ("-3", "0.0497871", "2.5e+09"); without this overload a
// double would convert to the char one.
template <std::floating_point F>
void append(std::string& out, F v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", static_cast<double>(v));
  out += b;
}
}  // namespace detail

template <class... Parts>
std::string concat(const Parts&... parts) {
  std::string out;
  (detail::append(out, parts), ...);
  return out;
}

}  // namespace loopscale
