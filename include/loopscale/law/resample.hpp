// Which points a resample or a held-out slice takes: i.i.d. or by groups (block bootstrap over,
// e.g., (budget, r) cells), and slices named by a column's value. Deterministic in (seed, index).
#pragma once

#include <algorithm>
#include <cstdint>
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

// Rows whose label equals `value`; `max` and `min` name the largest and smallest numeric value of
// the column (e.g. the largest budget). Numbers compare as numbers ("8" matches "8.0").
inline std::vector<bool> slice_rows(const std::vector<std::string>& labels, const std::string& value, const std::string& column) {
  std::vector<bool> in(labels.size(), false);
  double v = 0;
  const bool numeric_value = detail::parse_number(value, v);
  if (value == "max" || value == "min") {
    std::vector<double> xs(labels.size());
    for (std::size_t i = 0; i < labels.size(); ++i)
      if (!detail::parse_number(labels[i], xs[i]))
        throw data_error("--holdout " + column + "=" + value + ": column '" + column + "' is not numeric ('" + labels[i] + "')");
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
