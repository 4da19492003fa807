// Bootstrap intervals of a fit: refit on resampled data (i.i.d. points or whole groups, the block
// bootstrap the iso-depth paper uses over (budget, architecture) cells) and take percentiles of each
// parameter. Each refit starts from the full-data optimum plus a few random starts, which finds the
// resample's optimum without the cost of the full start plan. Resamples run in parallel, each
// single-threaded and seeded by its index, so the intervals do not depend on the thread count.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "loopscale/law/huber_fit.hpp"
#include "loopscale/util/extern_templates.hpp"
#include "loopscale/law/resample.hpp"

namespace loopscale::law {

struct BootstrapOptions {
  int resamples = 200;
  const std::vector<std::string>* groups = nullptr;  // labels per point: block bootstrap
  double level = 0.95;                               // two-sided percentile interval
  std::uint64_t seed = 0;
  int random_starts = 8;  // per resample, besides the full-data optimum
  int threads = 0;
};

struct Interval {
  double lo = 0, hi = 0;
  bool contains(double x) const { return lo <= x && x <= hi; }
};

struct BootstrapResult {
  int resamples = 0;
  int failed = 0;          // resamples whose refit failed (e.g. every start failed)
  double level = 0;
  Eigen::MatrixXd draws;   // successful resamples x parameters, natural units
  std::vector<Interval> ci;  // per parameter
};

// Linear interpolation between order statistics (NumPy's default percentile).
inline double percentile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto i = static_cast<std::size_t>(std::floor(pos));
  const double f = pos - static_cast<double>(i);
  return i + 1 < v.size() ? v[i] * (1 - f) + v[i + 1] * f : v[i];
}

// A template, as fit is (huber_fit.hpp says why): a file that never bootstraps pays nothing for it.
template <FittableLaw L>
BootstrapResult bootstrap(const L& fitted_law, const Runs& runs, const FitResult& best, const FitOptions& fit_opt,
                          const BootstrapOptions& opt) {
  const AnyLaw& law = fitted_law;
  if (opt.resamples < 2) throw data_error("--bootstrap needs at least 2 resamples");
  if (!(opt.level > 0 && opt.level < 1)) throw data_error("the interval level must be in (0, 1)");
  runs.check();
  if (opt.groups && static_cast<Eigen::Index>(opt.groups->size()) != runs.size())
    throw data_error(concat("--block: ", opt.groups->size(), " group labels for ", runs.size(), " points"));
  // One group is drawn whole every time: every resample is the data itself, and the "interval" is
  // the point estimate repeated (E 1.72387 [1.72387, 1.72387]).
  if (opt.groups && !opt.groups->empty() &&
      std::all_of(opt.groups->begin(), opt.groups->end(), [&](const std::string& g) { return g == opt.groups->front(); }))
    throw data_error(concat("--block: every point is in one group ('", opt.groups->front(),
                            "'); a block bootstrap draws whole groups and needs at least 2"));
  const Parameters ps = law.parameters();
  const auto p = static_cast<Eigen::Index>(ps.size());
  const int B = opt.resamples;
  std::vector<Eigen::VectorXd> got(static_cast<std::size_t>(B));
  std::vector<char> ok(static_cast<std::size_t>(B), 0);
  const auto frozen = frozen_coordinates(ps, fit_opt.frozen, law.name());
  const auto one = [&](int b) {
    try {
      const Runs sample = runs.subset(resample_rows(runs.size(), opt.groups, opt.seed, static_cast<std::uint64_t>(b)));
      std::vector<Eigen::VectorXd> starts{best.theta};
      for (auto& s : random_starts(ps, opt.random_starts, opt.seed + 7919 * static_cast<std::uint64_t>(b + 1))) starts.push_back(s);
      FitOptions o = fit_opt;
      o.threads = 1;
      const auto prepared = law.prepare(sample);
      const FitResult r = fit_prepared(*prepared, ps, sample["loss"], starts, frozen, o);
      got[static_cast<std::size_t>(b)] = r.values;
      ok[static_cast<std::size_t>(b)] = 1;
    } catch (const std::exception&) {
    }
  };
#ifdef _OPENMP
  const int threads = opt.threads > 0 ? opt.threads : omp_get_max_threads();
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
  for (int b = 0; b < B; ++b) one(b);
#else
  for (int b = 0; b < B; ++b) one(b);
#endif
  BootstrapResult r;
  r.resamples = B;
  r.level = opt.level;
  std::vector<Eigen::VectorXd> good;
  for (int b = 0; b < B; ++b)
    if (ok[static_cast<std::size_t>(b)]) good.push_back(got[static_cast<std::size_t>(b)]);
  r.failed = B - static_cast<int>(good.size());
  if (good.size() < 2) throw std::runtime_error("bootstrap: fewer than 2 resamples could be fitted");
  r.draws.resize(static_cast<Eigen::Index>(good.size()), p);
  for (std::size_t k = 0; k < good.size(); ++k) r.draws.row(static_cast<Eigen::Index>(k)) = good[k].transpose();
  const double a = (1 - opt.level) / 2;
  for (Eigen::Index j = 0; j < p; ++j) {
    std::vector<double> v(r.draws.col(j).data(), r.draws.col(j).data() + r.draws.rows());
    r.ci.push_back({percentile(v, a), percentile(v, 1 - a)});
  }
  return r;
}

#ifdef LOOPSCALE_LAW_INSTANCE  // util/extern_templates.hpp: compiled once, in law/instances.cpp
LOOPSCALE_LAW_INSTANCE BootstrapResult bootstrap<AnyLaw>(const AnyLaw&, const Runs&, const FitResult&, const FitOptions&,
                                                     const BootstrapOptions&);
#endif

}  // namespace loopscale::law
