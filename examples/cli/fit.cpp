// `loopscale fit`: fit one law (or compare several) to runs read from CSV or JSONL.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <utility>

#include "law_args.hpp"

namespace loopscale::cli {
namespace {

// The line searches by their flag names (--line-search).
constexpr std::pair<const char*, law::FitOptions::LineSearch> line_searches[] = {{"weak-wolfe", law::FitOptions::LineSearch::weak_wolfe},
                                                                               {"more-thuente", law::FitOptions::LineSearch::more_thuente}};
std::string line_search_name(law::FitOptions::LineSearch s) {
  for (const auto& [name, v] : line_searches)
    if (v == s) return name;
  return "?";
}

struct FitArgs {
  std::string law, data, starts, holdout, block, injection;
  std::vector<std::string> map, freeze, start_points;
  long drop_highest = 0;
  std::uint64_t seed = 0;
  double huber_delta = law::FitOptions{}.huber_delta;
  double ftol = law::FitOptions{}.ftol, gtol = law::FitOptions{}.gtol;
  int polish = law::FitOptions{}.polish;
  double scout_ftol = law::FitOptions{}.scout_ftol, screen_share = law::FitOptions{}.screen_share;
  std::string line_search = line_search_name(law::FitOptions{}.line_search);
  int bootstrap = 0;
  double ci_level = 0.95;
  int threads = 0;
  bool json = false;
};

void run(const FitArgs& a) {
  const std::vector<law::AnyLaw> laws = laws_from(a.law);
  law::check_huber_delta(a.huber_delta);
  if (a.drop_highest < 0) throw usage_error("--drop-highest must not be negative");
  if (a.bootstrap < 0 || a.bootstrap == 1) throw usage_error("--bootstrap needs at least 2 resamples");
  if (!a.block.empty() && a.bootstrap == 0) throw usage_error("--block needs --bootstrap N");
  if (a.threads < 0) throw usage_error("--threads must not be negative");
  // Named here: the bootstrap's own check said "the interval level must be in (0, 1)", naming no flag.
  if (!(a.ci_level > 0 && a.ci_level < 1)) throw usage_error(concat("--ci-level must be in (0, 1), not ", a.ci_level));
  const law::RunTable table = law::read_table(a.data);
  const law::ColumnMap map = column_map(a.map, {a.block, a.holdout.empty() ? std::string() : split_assignment(a.holdout, "--holdout").first});
  law::RunReader reader(table, map);
  if (!a.injection.empty()) reader.count_injection(injection_option(a.injection));

  law::FitOptions opt;
  opt.huber_delta = a.huber_delta;
  // The stopping rules, each the same way: inf passed `>= 0` for --ftol and --gtol and stopped every
  // start at once, a bad fit with exit 0.
  for (const auto& [flag, tol] : {std::pair{"--ftol", a.ftol}, std::pair{"--gtol", a.gtol}, std::pair{"--scout-ftol", a.scout_ftol}})
    if (!(tol >= 0) || !std::isfinite(tol)) throw usage_error(concat(flag, " must be a finite number >= 0, not ", tol));
  opt.ftol = a.ftol;
  opt.gtol = a.gtol;
  if (a.polish < -1) throw usage_error("--polish must be -1 (every start), 0 (none) or a count of starts");
  opt.polish = a.polish;
  opt.scout_ftol = a.scout_ftol;
  if (!(a.screen_share > 0 && a.screen_share <= 1)) throw usage_error("--screen-share must be a fraction in (0, 1]");
  opt.screen_share = a.screen_share;
  const auto* search = std::find_if(std::begin(line_searches), std::end(line_searches), [&](const auto& e) { return a.line_search == e.first; });
  if (search == std::end(line_searches)) throw usage_error("--line-search must be weak-wolfe or more-thuente, not '" + a.line_search + "'");
  opt.line_search = search->second;
  opt.threads = a.threads;
  opt.frozen = numeric_assignments(a.freeze, "--freeze");
  std::optional<law::StartPlan> plan;
  if (!a.starts.empty()) plan = law::parse_start_plan(a.starts, a.seed);
  if (!a.start_points.empty() && laws.size() > 1) throw usage_error("--start needs a single --law");

  std::optional<law::HoldoutSpec> slice;
  if (!a.holdout.empty()) {
    auto [c, v] = split_assignment(a.holdout, "--holdout");
    slice = law::HoldoutSpec{c, v};
  }
  // The rows kept after --drop-highest, read once for every law: losses must be read to rank them.
  std::vector<Eigen::Index> keep;
  {
    const law::Runs loss_only = reader.read({"loss"});
    keep = law::rows_without_highest_loss(loss_only, a.drop_highest);
  }
  // A column's labels; a variable the file derives (D = C / F, ...) as its numbers, so a held-out
  // range can name it.
  const auto rows_of = [&](const std::string& column) {
    std::vector<std::string> all;
    if (table.column(map.count(column) ? map.at(column) : column) < 0 && reader.available(column)) {
      const Eigen::ArrayXd v = reader.read({column})[column];
      for (Eigen::Index i = 0; i < v.size(); ++i) all.push_back(fmt::format("{:.17g}", v[i]));
    } else {
      all = reader.labels(column);
    }
    std::vector<std::string> kept;
    for (auto i : keep) kept.push_back(all[static_cast<std::size_t>(i)]);
    return kept;
  };
  const auto read = [&](const law::AnyLaw& l) {
    std::vector<std::string> cols = l.columns();
    cols.push_back("loss");
    return reader.read(cols).subset(keep);
  };
  std::optional<std::vector<std::string>> slice_labels;
  if (slice) slice_labels = rows_of(slice->column);

  if (laws.size() > 1) {
    if (a.bootstrap > 0) throw usage_error("--bootstrap takes a single --law");
    const auto rows = law::compare(laws, read, opt, plan, slice, slice_labels ? &*slice_labels : nullptr);
    if (a.json) {
      nlohmann::json j;
      j["comparison"] = nlohmann::json::array();
      for (const auto& r : rows) {
        const bool fitted = r.fit.theta.size() > 0;  // false: the runs do not determine it at all
        nlohmann::json e = fitted ? fit_json(r.fit, false) : nlohmann::json{{"law", r.fit.law}};
        e["free_params"] = r.free_parameters;
        if (!r.not_determined.empty()) e["not_determined"] = {{"parameters", r.not_determined}, {"message", r.not_determined_why}};
        if (r.held_out) e["holdout"] = {{"column", r.held_out->column}, {"value", r.held_out->value}, {"rmse", r.held_out->rmse},
                                        {"rmse_log", r.held_out->rmse_log}, {"points", r.held_out->test_points}};
        j["comparison"].push_back(e);
      }
      std::cout << j.dump(2) << "\n";
      return;
    }
    fmt::print("{:<20} {:>5} {:>13} {:>9} {:>10} {:>10} {:>8}", "law", "free", "objective", "R^2", "RMSE", "RMSE(log)", "failed");
    if (slice) fmt::print(" {:>16}", "held-out RMSE");
    fmt::print("\n");
    for (const auto& r : rows) {
      if (r.fit.theta.size() == 0) {
        fmt::print("{:<20} {:>5}  not determined by these runs: {}\n", r.fit.law, r.free_parameters, r.not_determined);
        continue;
      }
      fmt::print("{:<20} {:>5} {:>13.7g} {:>9.5f} {:>10.5g} {:>10.5g} {:>8}", r.fit.law, r.free_parameters, r.fit.objective, r.fit.r2,
                 r.fit.rmse, r.fit.rmse_log, r.fit.failed_starts);
      if (r.held_out) fmt::print(" {:>16.5g}", r.held_out->rmse);
      if (slice && !r.not_determined.empty()) fmt::print("  not determined without the held-out runs: {}", r.not_determined);
      fmt::print("\n");
    }
    if (slice) fmt::print("held out: {} = {}\n", slice->column, slice->value);
    for (const auto& r : rows)
      if (!r.not_determined_why.empty()) fmt::print("{}: {}\n", r.fit.law, r.not_determined_why);
    return;
  }

  const law::AnyLaw& l = laws.front();
  const law::Runs runs = read(l);
  if (!a.start_points.empty()) {
    const law::Parameters ps = l.parameters();
    for (const auto& s : a.start_points) {
      // "A=400,B=400,..." in natural units; every parameter named.
      std::vector<std::string> items;
      std::size_t b = 0;
      while (b <= s.size()) {
        const auto c = s.find(',', b);
        items.push_back(s.substr(b, c == std::string::npos ? std::string::npos : c - b));
        if (c == std::string::npos) break;
        b = c + 1;
      }
      const Eigen::VectorXd th = law::theta_of(l, numeric_assignments(items, "--start"), "--start");
      // The optimiser keeps to the law's box; a start outside it would be moved in without a word.
      for (std::size_t j = 0; j < ps.size(); ++j) {
        const double x = th[static_cast<Eigen::Index>(j)];
        if (x < ps[j].lo || x > ps[j].hi)
          throw usage_error(fmt::format("--start {}={:g}: outside the law's box, {} in [{:g}, {:g}]", ps[j].name, ps[j].to_value(x),
                                        ps[j].fitted_name(), ps[j].lo, ps[j].hi));
      }
      opt.starts.push_back(th);
    }
  } else {
    opt.starts = law::make_starts(l, plan ? *plan : law::default_start_plan(l, a.seed));
  }
  const law::FitResult r = law::fit(l, runs, opt);

  std::optional<law::BootstrapResult> ci;
  std::optional<std::vector<std::string>> groups;
  if (a.bootstrap > 0) {
    law::BootstrapOptions bo;
    bo.resamples = a.bootstrap;
    bo.level = a.ci_level;
    bo.seed = a.seed;
    bo.threads = a.threads;
    if (!a.block.empty()) {
      groups = rows_of(a.block);
      bo.groups = &*groups;
    }
    ci = law::bootstrap(l, runs, r, opt, bo);
  }
  std::optional<law::HoldoutResult> held;
  if (slice) held = law::holdout(l, runs, *slice_labels, slice->column, slice->value, opt);

  if (a.json) {
    nlohmann::json j = fit_json(r);
    if (ci) {
      nlohmann::json c = nlohmann::json::object();
      for (std::size_t k = 0; k < r.parameters.size(); ++k) c[r.parameters[k].name] = {ci->ci[k].lo, ci->ci[k].hi};
      j["ci"] = c;
      j["ci_level"] = ci->level;
      j["bootstrap"] = {{"resamples", ci->resamples}, {"failed", ci->failed}, {"block", a.block}};
    }
    if (held)
      j["holdout"] = {{"column", held->column}, {"value", held->value}, {"rmse", held->rmse}, {"rmse_log", held->rmse_log},
                      {"points", held->test_points}, {"train_points", held->train_points}, {"params", params_json(r.parameters, held->fit.values)}};
    std::cout << j.dump(2) << "\n";
    return;
  }
  print_fit(l, r, ci ? &*ci : nullptr);
  if (held)
    fmt::print("held out {} = {}: {} points, RMSE {:.5g} (RMSE(log) {:.5g}) fitted on the other {}\n", held->column, held->value,
               held->test_points, held->rmse, held->rmse_log, held->train_points);
}

const bool registered_fit = add_command([](CLI::App& app) {
  auto a = std::make_shared<FitArgs>();
  CLI::App* sub = app.add_subcommand("fit", "fit a scaling law to runs (CSV or JSONL): summed Huber on log loss, L-BFGS-B, many starts");
  sub->add_option("--law", a->law, "law to fit, or several separated by commas to compare them: " + law::law_names())->required();
  sub->add_option("--data", a->data, "runs: CSV with a header, or JSONL (.jsonl)")->required();
  sub->add_option("--map", a->map, "read variable NAME from the file's COLUMN: --map N=\"Model Size\"");
  sub->add_option("--drop-highest", a->drop_highest, "drop the K points of highest loss first")->capture_default_str();
  sub->add_option("--starts", a->starts, "grid (the law's grid, Chinchilla's 4,500) or random:N in the law's box (default: grid if the law has one, else random:500)");
  sub->add_option("--start", a->start_points, "a start of your own, every parameter named: A=400,B=400,E=2,alpha=.3,beta=.3");
  sub->add_option("--seed", a->seed, "seed of random starts and bootstrap resamples")->capture_default_str();
  sub->add_option("--huber-delta", a->huber_delta, "Huber delta on log residuals")->capture_default_str();
  sub->add_option("--scout-ftol", a->scout_ftol,
                  "scout: every start first runs until an iteration gains less than this share of the objective (at or below SciPy's 2.2e-9: every start under SciPy's rules)")
      ->capture_default_str();
  sub->add_option("--screen-share", a->screen_share, "screen: this share of the best scouted starts goes on under SciPy's rules")->capture_default_str();
  sub->add_option("--polish", a->polish, "this many of the best screened starts then go on to --ftol/--gtol (-1: every start runs to them in one phase, 0: none)")->capture_default_str();
  sub->add_option("--line-search", a->line_search, "weak-wolfe | more-thuente (SciPy's and LBFGSpp's)")->capture_default_str();
  sub->add_option("--ftol", a->ftol, "polish: stop when the objective falls by less than this (times max(1, |f|))")->capture_default_str();
  sub->add_option("--gtol", a->gtol, "polish: stop when the projected gradient is below this")->capture_default_str();
  sub->add_option("--freeze", a->freeze, "hold a parameter at a value: --freeze phi=0");
  sub->add_option("--bootstrap", a->bootstrap, "percentile intervals from N resamples");
  sub->add_option("--block", a->block, "resample whole groups of this column (block bootstrap)");
  sub->add_option("--ci-level", a->ci_level, "level of the bootstrap intervals")->capture_default_str();
  sub->add_option("--holdout", a->holdout,
                  "also fit without the points where COLUMN=VALUE (max/min for the extremes, or a range: D=(4e11,5e11]) and report their RMSE");
  sub->add_option("--injection", a->injection, injection_help);
  sub->add_option("--threads", a->threads, "threads (default: all cores)")->check(thread_count());
  sub->add_flag("--json", a->json, "print JSON");
  sub->callback([a] { run(*a); });
});

}  // namespace
}  // namespace loopscale::cli
