// `loopscale optimal`: the compute-optimal width, parameters and tokens per r for given budgets.
#include <algorithm>
#include <iostream>
#include <memory>
#include <optional>

#include "law_args.hpp"
#include "loopscale/spec/limits.hpp"

namespace loopscale::cli {
namespace {

struct OptimalArgs {
  std::string law = "iso-depth";
  std::vector<std::string> params;
  std::vector<double> budgets;
  std::vector<int64> rs{1, 2, 4, 8};
  int64 seq_len = 2048, vocab = 32064, max_width = 16384;
  std::string injection = "rec";
  bool json = false;
};

// `r_given`: --r was on the command line (a.rs is its default otherwise).
void run(const OptimalArgs& a, bool r_given) {
  const law::AnyLaw l = law::law_by_name(a.law);
  const std::vector<std::string> cols = l.columns();
  for (const auto& c : cols)
    if (c != "N" && c != "N_once" && c != "N_rec" && c != "r" && c != "D")
      throw usage_error("optimal: law " + l.name() + " reads " + c + "; optimal knows dense and looped laws in N, N_once, N_rec, r, D");
  const Eigen::VectorXd theta = law::theta_of(l, numeric_assignments(a.params, "--param"));
  if (a.budgets.empty()) throw usage_error("optimal: needs --budget C");
  if (a.seq_len < 1 || a.vocab < 1 || a.max_width < 128) throw usage_error("optimal: --seq-len, --vocab must be positive and --max-width >= 128");
  // The widths are tried one by one (steps of 128): a width of a billion was minutes of work, and
  // the accounting counts widths up to SpecLimits::width only (spec/limits.hpp).
  if (a.max_width > SpecLimits::width) throw usage_error(concat("optimal: --max-width must be at most ", SpecLimits::width, ", not ", a.max_width));
  if (a.seq_len > SpecLimits::seq_len || a.vocab > SpecLimits::vocab)
    throw usage_error(concat("optimal: --seq-len must be at most ", SpecLimits::seq_len, " and --vocab at most ", SpecLimits::vocab));
  law::AllocationOptions o;
  o.seq_len = a.seq_len, o.vocab = a.vocab, o.max_width = a.max_width;
  o.injection = injection_option(a.injection);
  std::vector<int64> rs = a.rs;
  // A dense law (chinchilla: N and D) knows no r: its one row is r = 1. An --r given to it was
  // ignored without a word, and the table printed r = 1 rows only.
  if (std::find(cols.begin(), cols.end(), "r") == cols.end()) {
    if (r_given) throw usage_error("optimal: law " + l.name() + " has no r (a dense law, its rows are r = 1); drop --r");
    rs = {1};
  }
  nlohmann::json j{{"law", l.name()}, {"injection", a.injection}, {"allocations", nlohmann::json::array()},
                   {"exponents", nlohmann::json::object()}};
  // Every allocation and every r's exponents first, then the table: a bad budget or r, or budgets
  // too close to fit a slope through (1e18 and 1.00000001e18), is one line, not half a table.
  std::vector<std::vector<law::Allocation>> per_r;
  std::vector<std::optional<law::ScalingExponents>> exponents;
  for (int64 r : rs) {
    std::vector<law::Allocation>& points = per_r.emplace_back();
    std::optional<law::ScalingExponents>& e = exponents.emplace_back();
    try {
      for (double c : a.budgets) points.push_back(law::compute_optimal(l, theta, r, c, o));
      if (points.size() >= 2) e = law::allocation_exponents(points);
    } catch (const law::data_error& err) {
      const std::string what = err.what();
      throw usage_error(what.starts_with("optimal: ") ? what : "optimal: " + what);
    }
  }
  if (!a.json)
    // d_grid: the grid's best width (a model one can build); d*: the width interpolated at N*.
    fmt::print("{:>3} {:>10} {:>7} {:>7} {:>12} {:>12} {:>8} {:>9}\n", "r", "budget", "d_grid", "d*", "N*", "D*", "L*", "D*/N*");
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const int64 r = rs[i];
    const std::vector<law::Allocation>& points = per_r[i];
    for (std::size_t k = 0; k < points.size(); ++k) {
      const law::Allocation& x = points[k];
      const double c = a.budgets[k];
      j["allocations"].push_back({{"r", r}, {"budget", c}, {"n_opt", x.n_opt}, {"d_opt", x.d_opt}, {"loss_opt", x.loss_opt},
                                  {"d_model", x.best_width.d_model}, {"width_opt", x.width_opt}, {"at_edge", x.at_edge}});
      if (!a.json)
        // %g throughout: a fixed-point L* or D*/N* printed hundreds of digits at extreme budgets.
        fmt::print("{:>3} {:>10.3g} {:>7} {:>7.0f} {:>12.4g} {:>12.4g} {:>8.5g} {:>9.4g}{}\n", r, c, x.best_width.d_model, x.width_opt, x.n_opt,
                   x.d_opt, x.loss_opt, x.d_opt / x.n_opt, x.at_edge ? "  (at the edge of the widths)" : "");
    }
    if (const std::optional<law::ScalingExponents>& e = exponents[i]) {
      j["exponents"][std::to_string(r)] = {{"a", e->a}, {"b", e->b}};
      if (!a.json) fmt::print("    r = {}: N* ~ C^{:.3f}, D* ~ C^{:.3f}\n", r, e->a, e->b);
    }
  }
  if (a.json) std::cout << j.dump(2) << "\n";
}

const bool registered_optimal = add_command([](CLI::App& app) {
  auto a = std::make_shared<OptimalArgs>();
  CLI::App* sub = app.add_subcommand("optimal", "compute-optimal allocation per r at given budgets (FLOPs per token from the accounting)");
  sub->add_option("--law", a->law, "iso-depth, parcae or chinchilla")->capture_default_str();
  sub->add_option("--param", a->params, "law constants in natural units: --param A=28.027 ...")->required();
  add_distinct_list(*sub, "--budget", a->budgets, "training FLOPs (repeat for several budgets: exponents need two)")->required();
  add_distinct_list(*sub, "--r", a->rs, "recurrences (divisors of 16)", ',');
  sub->add_option("--seq-len", a->seq_len, "context length T of the FLOP count")->capture_default_str();
  sub->add_option("--vocab", a->vocab, "vocabulary")->capture_default_str();
  sub->add_option("--max-width", a->max_width, "largest d_model tried (widths step by 128)")->capture_default_str();
  sub->add_option("--injection", a->injection, injection_help)->capture_default_str();
  sub->add_flag("--json", a->json, "print JSON");
  sub->callback([a, sub] { run(*a, sub->count("--r") > 0); });
});

}  // namespace
}  // namespace loopscale::cli
