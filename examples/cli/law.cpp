// `loopscale law`: evaluate a law with given constants on the points of a file.
#include <iostream>
#include <memory>

#include "law_args.hpp"

namespace loopscale::cli {
namespace {

struct LawArgs {
  std::string law, data, injection;
  std::vector<std::string> params, map;
  bool json = false;
};

void run(const LawArgs& a) {
  const law::AnyLaw l = law::law_by_name(a.law);
  const law::Constants constants = numeric_assignments(a.params, "--param");
  const Eigen::VectorXd theta = law::theta_of(l, constants);
  print_law_notes(l, constants);
  const law::RunTable table = law::read_table(a.data);
  const law::ColumnMap map = column_map(a.map);
  law::RunReader reader(table, map);
  if (!a.injection.empty()) reader.count_injection(injection_option(a.injection));
  const bool has_loss = reader.available("loss");
  const law::Runs runs = reader.read(l.columns(), has_loss ? std::vector<std::string>{"loss"} : std::vector<std::string>{});
  const Eigen::ArrayXd pred = law::predict_loss(*l.prepare(runs), theta);
  law::check_predictions(l, runs, pred, [&](Eigen::Index i) { return "line " + std::to_string(runs.lines[static_cast<std::size_t>(i)]); });
  double rmse = 0, r2 = 0;
  if (has_loss) {
    const Eigen::ArrayXd& loss = runs["loss"];
    const Eigen::ArrayXd e = pred - loss;
    rmse = std::sqrt(e.square().mean());
    const double ss = (loss - loss.mean()).square().sum();
    r2 = ss > 0 ? 1 - e.square().sum() / ss : 0;
  }
  if (a.json) {
    nlohmann::json j;
    j["law"] = l.name();
    const law::Parameters ps = l.parameters();
    Eigen::VectorXd values(theta.size());
    for (std::size_t k = 0; k < ps.size(); ++k) values[static_cast<Eigen::Index>(k)] = ps[k].to_value(theta[static_cast<Eigen::Index>(k)]);
    j["params"] = params_json(ps, values);
    j["predictions"] = std::vector<double>(pred.data(), pred.data() + pred.size());
    if (has_loss) j["rmse"] = rmse, j["r2"] = r2;
    j["points"] = pred.size();
    if (law::reads_looped_counts(l) && !runs.injection.empty()) j["injection"] = runs.injection;
    std::cout << j.dump(2) << "\n";
    return;
  }
  fmt::print("law {}: {}\n", l.name(), l.formula());
  fmt::print("{:>8} {:>12}{}\n", "line", "predicted", has_loss ? fmt::format(" {:>12} {:>10}", "loss", "residual") : "");
  for (Eigen::Index i = 0; i < pred.size(); ++i) {
    fmt::print("{:>8} {:>12.6g}", runs.lines[static_cast<std::size_t>(i)], pred[i]);
    if (has_loss) fmt::print(" {:>12.6g} {:>10.4g}", runs["loss"][i], pred[i] - runs["loss"][i]);
    fmt::print("\n");
  }
  if (has_loss) fmt::print("points {}   RMSE {:.5g}   R^2 {:.5f}\n", pred.size(), rmse, r2);
  if (law::reads_looped_counts(l) && !runs.injection.empty()) fmt::print("injection counted in: {}\n", runs.injection);
}

const bool registered_law = add_command([](CLI::App& app) {
  auto a = std::make_shared<LawArgs>();
  CLI::App* sub = app.add_subcommand("law", "evaluate a law with given constants on the points of a file");
  sub->add_option("--law", a->law, "the law: " + law::law_names())->required();
  sub->add_option("--param", a->params, "a constant in natural units: --param A=28.027 (every parameter of the law)")->required();
  sub->add_option("--data", a->data, "points: CSV with a header, or JSONL (.jsonl)")->required();
  sub->add_option("--map", a->map, "read variable NAME from the file's COLUMN: --map N=\"Model Size\"");
  sub->add_option("--injection", a->injection, injection_help);
  sub->add_flag("--json", a->json, "print JSON");
  sub->callback([a] { run(*a); });
});

}  // namespace
}  // namespace loopscale::cli
