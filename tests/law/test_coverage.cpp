// Coverage of the bootstrap interval of phi over 100 synthetic data sets (sigma 0.01 on the paper's
// 116-run grid): the 90% interval must cover the true phi at least 80 times. Slow (minutes), so
// hidden from ctest: run `build-law/tests/test_law "[.slow]"`.
#include <catch2/catch.hpp>

#include <cstdio>

#include "loopscale/law/laws.hpp"

using namespace loopscale::law;

TEST_CASE("90% block-bootstrap interval of phi covers the truth >= 80 of 100 times", "[law][.slow][coverage]") {
  const AnyLaw law = IsoDepth{};
  using P = IsoDepthPublished;
  const Eigen::VectorXd th = theta_of(law, {{"E", P::E}, {"A", P::A}, {"B", P::B}, {"alpha", P::alpha}, {"beta", P::beta}, {"phi", P::phi}});
  const PaperGrid g = iso_depth_paper_grid();
  const int phi = index_of(law.parameters(), "phi");
  int covered = 0;
  double width = 0;
  for (int k = 0; k < 100; ++k) {
    const Runs runs = with_synthetic_loss(law, g.runs, th, 0.01, 1000 + static_cast<std::uint64_t>(k));
    FitOptions o;
    o.starts = random_starts(law.parameters(), 50, static_cast<std::uint64_t>(k));
    const FitResult r = fit(law, runs, o);
    BootstrapOptions b;
    b.resamples = 100;
    b.groups = &g.cells;
    b.level = 0.90;
    b.seed = static_cast<std::uint64_t>(k);
    const BootstrapResult ci = bootstrap(law, runs, r, o, b);
    covered += ci.ci[phi].contains(P::phi);
    width += ci.ci[phi].hi - ci.ci[phi].lo;
  }
  std::printf("coverage: the 90%% interval of phi covered %.3f in %d of 100 data sets (mean width %.3f)\n", P::phi, covered, width / 100);
  CHECK(covered >= 80);
}
