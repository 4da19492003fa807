// Held-out error: fit on all points but a slice (the largest budget, r = 8, D in (4e11, 5e11], ...;
// resample.hpp's slice_rows) and report the RMSE of the loss on the slice, the test the looped-MoE
// paper ranks its baselines by.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include "loopscale/law/huber_fit.hpp"
#include "loopscale/util/extern_templates.hpp"
#include "loopscale/law/resample.hpp"

namespace loopscale::law {

struct HoldoutResult {
  std::string column, value;
  Eigen::Index train_points = 0, test_points = 0;
  double rmse = 0;      // of the loss on the held-out slice
  double rmse_log = 0;  // of log loss there
  FitResult fit;        // the fit without the slice
};

// A template, as fit is (huber_fit.hpp says why).
template <FittableLaw L>
HoldoutResult holdout(const L& fitted_law, const Runs& runs, const std::vector<std::string>& labels,
                      const std::string& column, const std::string& value, const FitOptions& opt) {
  const AnyLaw& law = fitted_law;
  // The whole Runs first, so that a bad value is named by its own line or row, not the subset's.
  runs.check_values("fit");
  if (static_cast<Eigen::Index>(labels.size()) != runs.size())
    throw data_error(concat("--holdout ", column, ": ", labels.size(), " labels for ", runs.size(), " points"));
  const std::vector<bool> in = slice_rows(labels, value, column);
  std::vector<Eigen::Index> train, test;
  for (std::size_t i = 0; i < in.size(); ++i) (in[i] ? test : train).push_back(static_cast<Eigen::Index>(i));
  if (test.empty()) throw data_error("--holdout " + column + "=" + value + ": no point is in that slice");
  if (train.empty()) throw data_error("--holdout " + column + "=" + value + ": every point is in that slice; nothing left to fit");
  HoldoutResult h;
  h.column = column;
  h.value = value;
  const Runs tr = runs.subset(train), te = runs.subset(test);
  h.fit = fit(law, tr, opt);
  h.train_points = tr.size();
  h.test_points = te.size();
  const auto prepared = law.prepare(te);
  const Eigen::ArrayXd pred = predict_loss(*prepared, h.fit.theta);
  h.rmse = std::sqrt((pred - te["loss"]).square().mean());
  h.rmse_log = std::sqrt((pred.log() - te["loss"].log()).square().mean());
  return h;
}

#ifdef LOOPSCALE_LAW_INSTANCE  // util/extern_templates.hpp: compiled once, in law/instances.cpp
LOOPSCALE_LAW_INSTANCE HoldoutResult holdout<AnyLaw>(const AnyLaw&, const Runs&, const std::vector<std::string>&,
                                                 const std::string&, const std::string&, const FitOptions&);
#endif

}  // namespace loopscale::law
