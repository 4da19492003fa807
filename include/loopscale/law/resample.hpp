// Which points a resample or a held-out slice takes: i.i.d. or by groups (block bootstrap over,
// e.g., (budget, r) cells), and slices named by a column's value. Deterministic in (seed, index).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <map>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "loopscale/law/runs.hpp"
#include "loopscale/law/starts.hpp"

namespace loopscale::law {

// Rows of resample `b`: n rows drawn with replacement, or, with group labels, as many groups drawn
// with replacement as there are groups, each bringing all its rows.
inline std::vector<Eigen::Index> resample_rows(Eigen::Index n, const std::vector<std::string>* groups, std::uint64_t seed,
                                               std::uint64_t b) {
  std::vector<Eigen::Index> rows;
  const std::uint64_t stream = splitmix64(seed ^ (0xB5AD4ECEDA1CE2A9ull * (b + 1)));
  if (!groups) {
    rows.reserve(static_cast<std::size_t>(n));
    for (Eigen::Index i = 0; i < n; ++i)
      rows.push_back(std::min<Eigen::Index>(n - 1, static_cast<Eigen::Index>(detail::unit_uniform(stream, static_cast<std::uint64_t>(i)) * static_cast<double>(n))));
    return rows;
  }
  std::map<std::string, std::vector<Eigen::Index>> by;
  for (Eigen::Index i = 0; i < n; ++i) by[(*groups)[static_cast<std::size_t>(i)]].push_back(i);
  std::vector<const std::vector<Eigen::Index>*> cells;
  for (const auto& [k, v] : by) cells.push_back(&v);
  const std::size_t g = cells.size();
  for (std::size_t k = 0; k < g; ++k) {
    const std::size_t pick = std::min(g - 1, static_cast<std::size_t>(detail::unit_uniform(stream, k) * static_cast<double>(g)));
    rows.insert(rows.end(), cells[pick]->begin(), cells[pick]->end());
  }
  return rows;
}

// A numeric interval such as "(4e11,5e11]": '(' or ']' exclude the bound, '[' or ']' include it;
// an empty bound is unbounded ("(4e11,]"). Not an interval: nullopt.
struct SliceRange {
  double lo = -INFINITY, hi = INFINITY;
  bool lo_closed = false, hi_closed = false;
  bool contains(double x) const { return (lo_closed ? x >= lo : x > lo) && (hi_closed ? x <= hi : x < hi); }
};

inline std::optional<SliceRange> parse_range(const std::string& text, const std::string& what) {
  const bool opens = !text.empty() && (text.front() == '(' || text.front() == '[');
  const bool closes = !text.empty() && (text.back() == ')' || text.back() == ']');
  // Half an interval ("(1e9," or "1e9,2e9]") is a typo, not a label to match.
  if (opens != closes || (opens && text.size() < 3))
    throw data_error(what + ": an interval opens with ( or [ and closes with ) or ], as in (a,b], not '" + text + "'");
  if (!opens) return std::nullopt;
  const std::string inner = text.substr(1, text.size() - 2);
  const auto comma = inner.find(',');
  if (comma == std::string::npos || inner.find(',', comma + 1) != std::string::npos)
    throw data_error(what + ": an interval is (a,b], [a,b), (a,b) or [a,b] with one comma, not '" + text + "'");
  SliceRange iv;
  iv.lo_closed = text.front() == '[';
  iv.hi_closed = text.back() == ']';
  const auto bound = [&](const std::string& b, double& out) {
    if (b.find_first_not_of(" \t") == std::string::npos) return;
    if (!detail::parse_number(b, out) || std::isnan(out)) throw data_error(what + ": '" + b + "' in '" + text + "' is not a number");
  };
  bound(inner.substr(0, comma), iv.lo);
  bound(inner.substr(comma + 1), iv.hi);
  if (!(iv.lo < iv.hi) && !(iv.lo == iv.hi && iv.lo_closed && iv.hi_closed))
    throw data_error(what + ": the interval '" + text + "' is empty");
  return iv;
}

// Rows whose label equals `value`; `max` and `min` name the largest and smallest numeric value of
// the column (e.g. the largest budget); an interval "(a,b]" (parse_range) the rows whose numeric
// value lies in it, as the looped-MoE paper holds out D in (400, 500]B. Numbers compare as numbers
// ("8" matches "8.0").
inline std::vector<bool> slice_rows(const std::vector<std::string>& labels, const std::string& value, const std::string& column) {
  std::vector<bool> in(labels.size(), false);
  const std::string what = "--holdout " + column + "=" + value;
  const auto numbers = [&] {
    std::vector<double> xs(labels.size());
    for (std::size_t i = 0; i < labels.size(); ++i)
      if (!detail::parse_number(labels[i], xs[i]))
        throw data_error(what + ": column '" + column + "' is not numeric ('" + labels[i] + "')");
    return xs;
  };
  if (const std::optional<SliceRange> iv = parse_range(value, what)) {
    const std::vector<double> xs = numbers();
    for (std::size_t i = 0; i < xs.size(); ++i) in[i] = iv->contains(xs[i]);
    return in;
  }
  double v = 0;
  const bool numeric_value = detail::parse_number(value, v);
  if (value == "max" || value == "min") {
    const std::vector<double> xs = numbers();
    v = value == "max" ? *std::max_element(xs.begin(), xs.end()) : *std::min_element(xs.begin(), xs.end());
    for (std::size_t i = 0; i < xs.size(); ++i) in[i] = xs[i] == v;
    return in;
  }
  for (std::size_t i = 0; i < labels.size(); ++i) {
    double x;
    in[i] = labels[i] == value || (numeric_value && detail::parse_number(labels[i], x) && x == v);
  }
  return in;
}

}  // namespace loopscale::law
