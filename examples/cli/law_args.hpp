// Shared pieces of the law subcommands (fit, law, equivalent, optimal): `name=value` flags, reading
// runs with a column map, and the JSON and table forms of a fit.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include <fmt/core.h>
#include <nlohmann/json.hpp>

#include "cli.hpp"
#include "loopscale/law/laws.hpp"

namespace loopscale::cli {

// "name=value" -> (name, value); `flag` names the option in messages.
inline std::pair<std::string, std::string> split_assignment(const std::string& s, const std::string& flag) {
  const auto eq = s.find('=');
  if (eq == std::string::npos || eq == 0) throw usage_error(flag + " wants NAME=VALUE, not '" + s + "'");
  return {s.substr(0, eq), s.substr(eq + 1)};
}

inline double parse_double(const std::string& text, const std::string& what) {
  double v = 0;
  if (!law::detail::parse_number(text, v) || !std::isfinite(v)) throw usage_error(what + ": '" + text + "' is not a finite number");
  return v;
}

inline std::map<std::string, std::string> assignments(const std::vector<std::string>& items, const std::string& flag) {
  std::map<std::string, std::string> m;
  for (const auto& s : items) {
    auto [k, v] = split_assignment(s, flag);
    if (m.count(k)) throw usage_error(flag + " " + k + " given twice");
    m[k] = v;
  }
  return m;
}

// --map NAME=COLUMN items as a column map. NAME must be a variable the laws or the reader use
// (docs/laws.md, "Data") or one of `also` (the columns --block and --holdout name): a typo in it
// would otherwise be read by nothing and fit the file's own column instead.
inline law::ColumnMap column_map(const std::vector<std::string>& items, const std::vector<std::string>& also = {}) {
  const auto& variables = law::detail::variable_domains();
  law::ColumnMap map;
  for (const auto& [k, v] : assignments(items, "--map")) {
    if (!variables.contains(k) && k != "injection" && std::find(also.begin(), also.end(), k) == also.end()) {
      std::string names;
      for (const auto& [n, domain] : variables) names += n + ", ";
      names += "injection, ";
      throw usage_error("--map " + k + "=" + v + ": no law reads a variable '" + k + "' (" + names + "or a --block / --holdout column)");
    }
    map[k] = v;
  }
  return map;
}

// --injection WORD: where the injection counts in N_once / N_rec (account/injection_convention.hpp).
inline InjectionCount injection_option(const std::string& word) {
  const auto c = parse_name<InjectionCount>(word);
  if (!c) throw usage_error("--injection must be " + name_choices<InjectionCount>() + ", not '" + word + "'");
  return *c;
}

// What the --injection option says, for every law subcommand's help.
inline constexpr const char* injection_help =
    "where the injection's parameters count in N_once / N_rec: rec (with the shared block, loopscale's accounting and the "
    "paper's code), once (with the once-run parameters) or excluded (in neither: the paper's 410M ~ 580M ~ 1B example)";

// The law's notes on constants that are legal but likely a mistake (law.hpp, HasNotes): one line
// each on stderr; the command goes on.
inline void print_law_notes(const law::AnyLaw& l, const law::Constants& c) {
  for (const std::string& n : l.notes(c)) std::fprintf(stderr, "loopscale: note: %s\n", n.c_str());
}

inline law::Constants numeric_assignments(const std::vector<std::string>& items, const std::string& flag) {
  law::Constants c;
  for (const auto& [k, v] : assignments(items, flag)) c[k] = parse_double(v, flag + " " + k);
  return c;
}

// A comma-separated list of laws, each known to the registry and named once (each is a row of
// the comparison).
inline std::vector<law::AnyLaw> laws_from(const std::string& list) {
  std::vector<law::AnyLaw> laws;
  std::vector<std::string> names;
  std::size_t start = 0;
  while (start <= list.size()) {
    const auto comma = list.find(',', start);
    const std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty()) throw usage_error("--law: empty law name in '" + list + "'");
    names.push_back(name);
    laws.push_back(law::law_by_name(name));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  refuse_repeats(names, "--law");
  return laws;
}

inline nlohmann::json params_json(const law::Parameters& ps, const Eigen::VectorXd& values) {
  nlohmann::json j = nlohmann::json::object();
  for (std::size_t k = 0; k < ps.size(); ++k) j[ps[k].name] = values[static_cast<Eigen::Index>(k)];
  return j;
}

inline nlohmann::json fit_json(const law::FitResult& r, bool with_residuals = true) {
  nlohmann::json j;
  j["law"] = r.law;
  j["params"] = params_json(r.parameters, r.values);
  nlohmann::json frozen = nlohmann::json::array();
  for (std::size_t k = 0; k < r.parameters.size(); ++k)
    if (r.frozen[k]) frozen.push_back(r.parameters[k].name);
  j["frozen"] = frozen;
  j["at_box_edge"] = r.box_edge_names();  // free parameters that ended on an edge of the box
  j["objective"] = r.objective;
  j["r2"] = r.r2;
  j["rmse"] = r.rmse;
  j["rmse_log"] = r.rmse_log;
  j["max_abs_residual"] = r.max_abs_residual;
  j["points"] = r.points;
  j["starts"] = r.starts;
  j["failed_starts"] = r.failed_starts;
  j["polished"] = r.polished;
  j["best_start"] = r.best_start;
  j["seconds"] = r.seconds;
  if (!r.injection.empty()) j["injection"] = r.injection;
  if (with_residuals) j["residuals"] = std::vector<double>(r.residuals.data(), r.residuals.data() + r.residuals.size());
  return j;
}

inline void print_fit(const law::AnyLaw& law, const law::FitResult& r, const law::BootstrapResult* ci) {
  fmt::print("law {}: {}\n  {}\n", law.name(), law.formula(), law.source());
  fmt::print("points {}   starts {} ({} failed, {} polished, best #{})   {:.3f} s\n", r.points, r.starts, r.failed_starts, r.polished,
             r.best_start, r.seconds);
  for (std::size_t k = 0; k < r.parameters.size(); ++k) {
    const auto i = static_cast<Eigen::Index>(k);
    fmt::print("  {:<8} {:>14.6g}", r.parameters[k].name, r.values[i]);
    if (r.frozen[k]) fmt::print("  (frozen)");
    else if (ci) fmt::print("  [{:.6g}, {:.6g}]", ci->ci[k].lo, ci->ci[k].hi);
    if (const std::string_view e = r.box_edge(k); !e.empty())
      fmt::print("  (at the {} edge of the law's box: the data do not determine it)", e);
    fmt::print("\n");
  }
  if (ci) fmt::print("intervals: {:.0f}% percentile, {} resamples ({} failed)\n", 100 * ci->level, ci->resamples, ci->failed);
  fmt::print("objective {:.9g}   R^2 {:.5f}   RMSE {:.5g}   RMSE(log) {:.5g}   max |log residual| {:.5g}\n", r.objective, r.r2,
             r.rmse, r.rmse_log, r.max_abs_residual);
  if (!r.injection.empty()) fmt::print("injection counted in: {}\n", r.injection);
}

}  // namespace loopscale::cli
