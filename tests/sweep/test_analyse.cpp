#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "loopscale/law/iso_depth.hpp"
#include "loopscale/sweep/analyse.hpp"
#include "loopscale/sweep/presets.hpp"

using namespace loopscale;
using namespace loopscale::sweep;

namespace {

// A synthetic sweep in the published per-run layout (results.jsonl lines: id, C, r, N_once, N_rec,
// N, D, loss): the paper's 116-run grid with losses from the joint law at known constants, times
// exp(noise) with noise ~ N(0, sigma).
struct Truth {
  double E = 1.56773, A = 28.027, B = 915.82, alpha = 0.19924, beta = 0.36863, phi = 0.459;
  double loss(double n_once, double n_rec, double r, double d) const {
    return E + A * std::pow(n_once + std::pow(r, phi) * n_rec, -alpha) + B * std::pow(d, -beta);
  }
};

std::vector<RunResult> synthetic(double sigma, std::uint64_t seed, const Truth& t = {}) {
  const Plan plan = make_plan(preset("paper"));
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0.0, sigma);
  std::vector<RunResult> out;
  for (const PlannedRun& run : plan.runs) {
    const auto& p = run.acct.params;
    const double loss = t.loss(static_cast<double>(p.once), static_cast<double>(p.rec), static_cast<double>(run.r), run.tokens) *
                        std::exp(sigma > 0 ? noise(rng) : 0.0);
    nlohmann::json line = {{"sweep", plan.fingerprint}, {"id", run.id}, {"C", run.budget}, {"r", run.r}, {"s", run.s},
                           {"d_model", run.model.d_model}, {"N_once", p.once}, {"N_rec", p.rec}, {"N", p.non_embedding},
                           {"D", run.tokens}, {"loss", loss}};
    out.push_back(result_from_json(nlohmann::json::parse(line.dump())));  // through the text form, as read from disk
  }
  return out;
}

}  // namespace

TEST_CASE("analyse: a noiseless synthetic sweep gives back phi and the losses, and phi = 0 and 1 fit worse") {
  AnalyseOptions o;
  o.starts = 60;
  o.bootstrap = 0;
  const Truth t;
  const Analysis a = analyse(synthetic(0.0, 1), o);
  REQUIRE(a.joint);
  const law::FitResult& f = a.joint->fit;
  // phi is pinned by the data; E, B and beta trade off against each other over this grid's range
  // of D (the fitter stops where SciPy's L-BFGS-B would), so they are checked loosely and the
  // predicted losses tightly.
  CHECK(f.value("phi") == Approx(t.phi).epsilon(5e-3));
  CHECK(f.value("alpha") == Approx(t.alpha).epsilon(3e-2));
  CHECK(f.value("beta") == Approx(t.beta).epsilon(8e-2));
  CHECK(f.value("E") == Approx(t.E).epsilon(3e-2));
  CHECK(f.rmse < 1.5e-3);  // SciPy's stopping rule (factr 1e7) is absolute once the objective is below 1
  CHECK(f.r2 > 0.9999);
  CHECK(a.joint->phi0.r2 < f.r2 - 1e-4);
  CHECK(a.joint->phi1.r2 < f.r2 - 1e-4);
  CHECK(a.joint->phi0.value("phi") == 0.0);
  CHECK(a.joint->phi1.value("phi") == 1.0);
  // Per r: a Chinchilla law fits each architecture; its exponents give the compute-optimal ones.
  REQUIRE(a.per_r.size() == 4);
  for (const ArchFit& x : a.per_r) {
    CHECK(x.points == 29);
    REQUIRE(x.fit);
    CHECK(x.fit->r2 > 0.999);
    CHECK(x.a_law + x.b_law == Approx(1.0));
    REQUIRE(x.a_minima);
    CHECK(*x.a_minima > 0.2);
    CHECK(*x.a_minima < 0.8);
  }
}

TEST_CASE("analyse: with noise, the joint fit equals a fit done by hand on the same points, and the interval covers phi") {
  const std::vector<RunResult> runs = synthetic(0.004, 7);
  AnalyseOptions o;
  o.starts = 60;
  o.bootstrap = 40;
  o.bootstrap_starts = 4;
  const Analysis a = analyse(runs, o);
  REQUIRE(a.joint);

  // By hand: the law's columns straight from the lines, the same starts, the law library's fitter.
  law::Runs data;
  const Eigen::Index n = static_cast<Eigen::Index>(runs.size());
  for (const char* c : {"N_once", "N_rec", "r", "D", "loss"}) data.set(c) = Eigen::ArrayXd(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& l = runs[static_cast<std::size_t>(i)].line;
    data.set("N_once")[i] = l["N_once"].get<double>();
    data.set("N_rec")[i] = l["N_rec"].get<double>();
    data.set("r")[i] = l["r"].get<double>();
    data.set("D")[i] = l["D"].get<double>();
    data.set("loss")[i] = l["loss"].get<double>();
    data.lines.push_back(i + 1);
  }
  const law::AnyLaw iso = law::IsoDepth{};
  law::FitOptions fo;
  fo.starts = law::random_starts(iso.parameters(), 60, 0);
  fo.gtol = sweep::AnalyseOptions{}.gtol;  // the analysis's stopping rules
  fo.ftol = sweep::AnalyseOptions{}.ftol;
  const law::FitResult hand = law::fit(iso, data, fo);
  CHECK(a.joint->fit.objective == Approx(hand.objective).epsilon(1e-9));
  for (const char* p : {"E", "A", "B", "alpha", "beta", "phi"}) CHECK(a.joint->fit.value(p) == Approx(hand.value(p)).epsilon(1e-6));

  const double phi = a.joint->fit.value("phi");
  CHECK(std::abs(phi - 0.459) < 0.05);
  CHECK(a.joint->boot_phi.size() + static_cast<std::size_t>(a.joint->boot_failed) == 40);
  CHECK(a.joint->boot_phi.size() >= 36);
  CHECK(a.joint->cells == 24);
  CHECK(a.joint->phi_lo < phi);
  CHECK(a.joint->phi_hi > phi);
  CHECK(a.joint->phi_lo < 0.459);
  CHECK(a.joint->phi_hi > 0.459);
  CHECK(a.joint->phi_hi - a.joint->phi_lo < 0.3);
}

TEST_CASE("analyse: the iso-FLOP minimum of a cell is the vertex of the least-squares parabola in ln N") {
  const std::vector<RunResult> runs = synthetic(0.002, 3);
  const std::vector<Cell> cells = iso_flop_cells(runs);
  CHECK(cells.size() == 24);
  int with_minimum = 0;
  for (const Cell& c : cells) {
    // By hand: normal equations of y = c0 + c1 x + c2 x^2 solved by Cramer's rule.
    double S[5] = {0, 0, 0, 0, 0}, T[3] = {0, 0, 0};
    for (auto i : c.rows) {
      const double x = std::log(runs[i].n), y = runs[i].loss;
      double p = 1;
      for (int k = 0; k < 5; ++k) {
        if (k < 3) T[k] += p * y;
        S[k] += p;
        p *= x;
      }
    }
    const auto det3 = [](double a, double b, double c, double d, double e, double f, double g, double h, double i) {
      return a * (e * i - f * h) - b * (d * i - f * g) + c * (d * h - e * g);
    };
    const double D = det3(S[0], S[1], S[2], S[1], S[2], S[3], S[2], S[3], S[4]);
    const double c1 = det3(S[0], T[0], S[2], S[1], T[1], S[3], S[2], T[2], S[4]) / D;
    const double c2 = det3(S[0], S[1], T[0], S[1], S[2], T[1], S[2], S[3], T[2]) / D;
    CHECK(c.c2 == Approx(c2).margin(1e-9));
    if (c2 > 0) {
      REQUIRE(c.ok);
      CHECK(std::log(c.n_opt) == Approx(-c1 / (2 * c2)).epsilon(1e-6));
      ++with_minimum;
    } else {
      CHECK(!c.ok);  // noise made this cell's parabola open downward: reported, no minimum
    }
  }
  CHECK(with_minimum >= 20);
  // A cell of two widths has no parabola; one that opens downward has no minimum: both reported.
  std::vector<RunResult> two(runs.begin(), runs.begin() + 2);
  const auto c2 = iso_flop_cells(two);
  REQUIRE(c2.size() == 1);
  CHECK(!c2[0].ok);
  CHECK(c2[0].problem.find("a parabola needs 3") != std::string::npos);
  std::vector<RunResult> bent(runs.begin(), runs.begin() + 3);
  bent[1].loss += 1.0;
  const auto c3 = iso_flop_cells(bent);
  CHECK(!c3[0].ok);
  CHECK(c3[0].problem.find("opens downward") != std::string::npos);
}

TEST_CASE("analyse: too few runs for a law are reported, not fitted") {
  const std::vector<RunResult> runs = synthetic(0.0, 1);
  std::vector<RunResult> one_r;
  for (const auto& r : runs)
    if (r.r == 4 && r.budget < 2e18) one_r.push_back(r);
  const Analysis a = analyse(one_r, AnalyseOptions{60, 0, 0, 0.95, 0, 0});
  CHECK(!a.joint);
  CHECK(a.joint_problem.find("single r") != std::string::npos);
  REQUIRE(a.per_r.size() == 1);
  CHECK(a.per_r[0].fit);
  CHECK(a.per_r[0].points == 9);
  std::vector<RunResult> tiny(one_r.begin(), one_r.begin() + 4);
  const Analysis b = analyse(tiny, AnalyseOptions{60, 0, 0, 0.95, 0, 0});
  CHECK(!b.per_r[0].fit);
  CHECK(b.per_r[0].problem.find("needs at least 6") != std::string::npos);
}

TEST_CASE("analyse: a result outside a law's domain is named by its run id, not fitted") {
  // A hand-edited or merged results.jsonl with a loss of -1 crashed `sweep report` (SIGSEGV in the
  // fitter's objective, 4 Dec 2026); zeros made every start fail with no run named.
  std::vector<RunResult> runs = synthetic(0.0, 1);
  runs[3].loss = -1;
  CHECK_THROWS_WITH(analyse(runs, AnalyseOptions{60, 0, 0, 0.95, 0, 0}), Catch::Contains("run " + runs[3].id + ": loss = -1 must be"));
  runs[3] = synthetic(0.0, 1)[3];
  runs[7].tokens = 0;
  CHECK_THROWS_WITH(analyse(runs, AnalyseOptions{60, 0, 0, 0.95, 0, 0}), Catch::Contains("run " + runs[7].id + ": D (tokens) = 0 must be"));
  runs[7] = synthetic(0.0, 1)[7];
  runs[1].r = 0;
  CHECK_THROWS_WITH(analyse(runs, AnalyseOptions{60, 0, 0, 0.95, 0, 0}), Catch::Contains("run " + runs[1].id + ": r = 0 must be >= 1"));
}
