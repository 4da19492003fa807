// Fitting a scaling law from C++: runs built in code (or read from a CSV or JSONL file), the
// iso-depth law fitted, phi and the parameters on an edge of the law's box read back.
//
//   fit_law [RUNS.csv]
//
// Without a file the losses are drawn from the published iso-depth constants (noise 0.3% in log
// loss, a fixed seed): exits 0 when the fit finds phi within 0.05 of 0.459, 1 when not, 2 on bad data.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include <loopscale/law/laws.hpp>

namespace law = loopscale::law;

// 108 runs: every (N_once, N_rec, r, D) of a small grid, the loss from L = E + A (N_once + r^phi
// N_rec)^-alpha + B D^-beta times exp(0.003 z), z standard normal from seed 7.
law::Runs published_runs() {
  using P = law::IsoDepthPublished;
  std::vector<double> n_once, n_rec, r, d, loss;
  for (double no : {2e7, 8e7, 3e8})
    for (double nr : {1e7, 4e7, 1.6e8})
      for (double rv : {1.0, 2.0, 4.0, 8.0})
        for (double dv : {2e9, 8e9, 3.2e10}) {
          const double z = law::standard_normal(7, loss.size());
          n_once.push_back(no), n_rec.push_back(nr), r.push_back(rv), d.push_back(dv);
          loss.push_back((P::E + P::A * std::pow(no + std::pow(rv, P::phi) * nr, -P::alpha) + P::B * std::pow(dv, -P::beta)) *
                         std::exp(0.003 * z));
        }
  // One column per variable, one value per row; Runs::lines (file lines, for messages) is optional.
  law::Runs runs;
  const auto column = [](const std::vector<double>& v) { return Eigen::Map<const Eigen::ArrayXd>(v.data(), static_cast<Eigen::Index>(v.size())); };
  runs.set("N_once") = column(n_once);
  runs.set("N_rec") = column(n_rec);
  runs.set("r") = column(r);
  runs.set("D") = column(d);
  runs.set("loss") = column(loss);
  return runs;
}

int main(int argc, char** argv) try {
  const law::AnyLaw iso = law::IsoDepth{};
  law::Runs runs;
  if (argc > 1) {
    // read() reads the columns it is given and no others: the law's, and the loss to fit.
    const law::RunTable table = law::read_table(argv[1]);
    std::vector<std::string> columns = iso.columns();
    columns.push_back("loss");
    runs = law::RunReader(table, {}).read(columns);
  } else {
    runs = published_runs();
  }
  const law::FitResult fit = law::fit(iso, runs);  // the law's default starts: random:500
  std::printf("%s: %s\npoints %ld   R^2 %.5f   RMSE(log) %.5f\n", fit.law.c_str(), iso.formula().c_str(), static_cast<long>(fit.points),
              fit.r2, fit.rmse_log);
  for (std::size_t k = 0; k < fit.parameters.size(); ++k)
    std::printf("  %-6s %12.6g\n", fit.parameters[k].name.c_str(), fit.values[static_cast<Eigen::Index>(k)]);
  // A parameter on an edge of the law's box is not an estimate: the data did not pin it down.
  for (const std::string& e : fit.box_edges()) std::printf("at an edge of the box: %s\n", e.c_str());
  const double phi = fit.value("phi");  // a parameter by name, in natural units
  if (argc > 1) return 0;
  const bool ok = std::abs(phi - law::IsoDepthPublished::phi) < 0.05 && fit.box_edges().empty();
  std::printf("phi %.4f, generated with %.3f: %s\n", phi, law::IsoDepthPublished::phi, ok ? "recovered" : "NOT recovered");
  return ok ? 0 : 1;
} catch (const law::data_error& e) {
  std::fprintf(stderr, "fit_law: %s\n", e.what());
  return 2;
}
