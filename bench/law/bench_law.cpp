// Timing of the fits the law module exists for, against SciPy (bench/law/compare_scipy.sh runs both):
//   epoch_grid:     Epoch's Chinchilla data (5 highest losses dropped), the 4,500-start grid;
//   isodepth_500:   the iso-depth law on the paper's 116-run grid with losses drawn from the
//                   published constants (sigma 0.01 in log loss, seed 1), 500 random starts.
// `bench_law --write-isodepth-csv=PATH` writes that synthetic data set (with its (budget, r) cell)
// for the SciPy script and the examples of docs/laws.md.
#include <cstring>
#include <fstream>
#include <string>

#include <benchmark/benchmark.h>

#include "loopscale/law/laws.hpp"

using namespace loopscale::law;

namespace {

Runs epoch_runs() {
  const RunTable t = read_table(LOOPSCALE_TEST_DATA "/chinchilla_epoch_svg_extracted.csv");
  RunReader reader(t, {{"N", "Model Size"}, {"C", "Training FLOP"}});
  return drop_highest_loss(reader.read({"N", "D", "loss"}), 5);
}

Runs isodepth_runs() {
  const AnyLaw law = IsoDepth{};
  using P = IsoDepthPublished;
  const Eigen::VectorXd theta = theta_of(law, {{"E", P::E}, {"A", P::A}, {"B", P::B}, {"alpha", P::alpha}, {"beta", P::beta}, {"phi", P::phi}});
  return with_synthetic_loss(law, iso_depth_paper_grid().runs, theta, 0.01, 1);
}

void report(benchmark::State& state, const FitResult& r) {
  state.counters["objective"] = r.objective;
  state.counters["starts"] = r.starts;
  state.counters["failed"] = r.failed_starts;
}

// Second argument 0: loopscale's defaults (every start scouted under a loose ftol with 5
// corrections and the weak Wolfe line search, the best tenth screened under SciPy's stopping
// rules, then the 8 best polished under tight rules; huber_fit.hpp). 1: SciPy's L-BFGS-B alone
// (ftol 2.22e-9, pgtol 1e-5, maxcor 10, More-Thuente's line search, no scout, no polish), step for
// step what bench/law/scipy_fit.py runs.
void scipy_rules(FitOptions& o, const benchmark::State& state) {
  if (state.range(1) == 0) return;
  o.scout_ftol = o.screen_ftol;
  o.polish = 0;
  o.screen_corrections = 10;
  o.line_search = FitOptions::LineSearch::more_thuente;
}

void epoch_grid(benchmark::State& state) {
  const Runs runs = epoch_runs();
  FitOptions o;
  o.starts = Chinchilla{}.grid();
  o.threads = static_cast<int>(state.range(0));
  scipy_rules(o, state);
  FitResult r;
  for (auto _ : state) r = fit(Chinchilla{}, runs, o);
  report(state, r);
}

void isodepth_500(benchmark::State& state) {
  const Runs runs = isodepth_runs();
  const AnyLaw law = IsoDepth{};
  FitOptions o;
  o.starts = random_starts(law.parameters(), 500, 0);
  o.threads = static_cast<int>(state.range(0));
  scipy_rules(o, state);
  FitResult r;
  for (auto _ : state) r = fit(law, runs, o);
  report(state, r);
  state.counters["phi"] = r.value("phi");
}

}  // namespace

BENCHMARK(epoch_grid)->ArgsProduct({{1, 2}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();
BENCHMARK(isodepth_500)->ArgsProduct({{1, 2}, {0, 1}})->Unit(benchmark::kMillisecond)->UseRealTime()->MeasureProcessCPUTime();

int main(int argc, char** argv) {
  const char* flag = "--write-isodepth-csv=";
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0) {
      const Runs runs = isodepth_runs();
      const PaperGrid grid = iso_depth_paper_grid();
      std::ofstream out(argv[i] + std::strlen(flag));
      out.precision(17);
      out << "N_once,N_rec,r,D,C,loss,cell\n";
      for (Eigen::Index k = 0; k < runs.size(); ++k)
        out << runs["N_once"][k] << ',' << runs["N_rec"][k] << ',' << runs["r"][k] << ',' << runs["D"][k] << ',' << runs["C"][k]
            << ',' << runs["loss"][k] << ',' << grid.cells[static_cast<std::size_t>(k)] << '\n';
      return out ? 0 : 1;
    }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
