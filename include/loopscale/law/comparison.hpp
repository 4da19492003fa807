// Several laws fitted to the same runs, side by side: goodness of fit, and (with a held-out slice)
// how well each extrapolates. Each law reads the variables it needs from the same table.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "loopscale/law/holdout.hpp"
#include "loopscale/law/huber_fit.hpp"

namespace loopscale::law {

struct ComparisonRow {
  FitResult fit;
  int free_parameters = 0;
  std::optional<HoldoutResult> held_out;
  // The free parameters the runs cannot determine (identifiability.hpp), fitted on all runs or on
  // those left beside the held-out slice; the row's fit (or held_out) is then empty, and the other
  // laws are compared as before.
  std::string not_determined;  // "kappa1, kappa2"; empty when determined
  std::string not_determined_why;  // the whole line
};

struct HoldoutSpec {
  std::string column, value;
};

// `read` gives the runs for a law (RunReader::read over its columns, after any dropping); `plan`
// the starts (default: each law's own default plan).
template <class ReadRuns>
std::vector<ComparisonRow> compare(const std::vector<AnyLaw>& laws, ReadRuns&& read, const FitOptions& opt,
                                   const std::optional<StartPlan>& plan = std::nullopt,
                                   const std::optional<HoldoutSpec>& slice = std::nullopt,
                                   const std::vector<std::string>* slice_labels = nullptr) {
  std::vector<ComparisonRow> rows;
  for (const auto& law : laws) {
    const Runs runs = read(law);
    ComparisonRow row;
    FitOptions o = opt;
    // Each law its own starts: its grid, or random points in its own box.
    o.starts = make_starts(law, plan ? *plan : default_start_plan(law));
    row.free_parameters = static_cast<int>(law.parameters().size() - opt.frozen.size());
    row.fit.law = law.name();
    try {
      row.fit = fit(law, runs, o);
      if (slice && slice_labels) row.held_out = holdout(law, runs, *slice_labels, slice->column, slice->value, o);
    } catch (const undetermined_error& e) {
      row.not_determined = e.parameters;
      row.not_determined_why = e.what();
    }
    rows.push_back(std::move(row));
  }
  return rows;
}

}  // namespace loopscale::law
