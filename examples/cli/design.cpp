// `loopscale design`: the looped-MoE design rule (law/moe_design.hpp): from the smallest (R, E)
// that fits the compute and memory limits, a step of R or E only while it lowers the predicted
// loss by at least epsilon.
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>

#include <fmt/format.h>

#include "law_args.hpp"
#include "loopscale/util/json_parse.hpp"

namespace loopscale::cli {
namespace {

struct DesignArgs {
  std::string law, fit;
  std::vector<std::string> params;
  std::optional<double> epsilon;
  double n_act = 0, n_loop = 0, expert_params = 0, top_k = 1, budget = 0;
  std::vector<double> R{1, 2, 3, 4, 6, 8}, E{1, 2, 4, 8, 16};
  double memory_gib = 0, bytes_per_weight = 2, max_inference_flops = 0;
  bool json = false;
};

// A fit as `loopscale fit --json` writes it: the law, its parameters by name, its RMSE, and the
// parameters that ended on an edge of the law's box (the data did not determine them; fits written
// before that field existed have none).
struct FitFile {
  std::string law;
  law::Constants params;
  double rmse = 0;
  std::vector<std::string> at_box_edge;
};

// `rmse_used`: no --epsilon, so the fit's RMSE is epsilon and must be one.
FitFile read_fit(const std::string& path, bool rmse_used) {
  const std::string text = read_input(path, "design: --fit", "a fit file");
  nlohmann::json j;
  std::string key;
  try {
    j = parse_json_bounded<usage_error>(text, "design: --fit " + path, &key);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's own text ("[json.exception.out_of_range.406] number overflow parsing '1e400'")
    // named neither the field nor, for an empty file, the fault.
    throw usage_error("design: --fit " + path + " is not JSON that loopscale can read (" + json_parse_fault(text, e, key) +
                      "; write it with `loopscale fit --json`)");
  }
  FitFile f;
  try {
    f.law = j.at("law").get<std::string>();
    for (const auto& [k, v] : j.at("params").items()) f.params[k] = v.get<double>();
    f.rmse = j.at("rmse").get<double>();
    if (j.contains("at_box_edge")) f.at_box_edge = j.at("at_box_edge").get<std::vector<std::string>>();
  } catch (const nlohmann::json::exception&) {
    throw usage_error("design: --fit " + path + " lacks law, params or rmse, or its at_box_edge is not a list of names (write it with `loopscale fit --json`)");
  }
  // A negative RMSE was reported as "epsilon must be a finite number >= 0", naming neither the file
  // nor the field. 0 is accepted: a fit to synthetic points can be exact, and epsilon 0 (every step
  // that lowers the loss at all) is a design --epsilon 0 also asks for.
  if (rmse_used && !(f.rmse >= 0 && std::isfinite(f.rmse)))
    throw usage_error(concat("design: --fit ", path, ": its rmse ", f.rmse, " is not a finite number >= 0 (write the fit with `loopscale fit "
                             "--json`, or give --epsilon)"));
  return f;
}

void run(const DesignArgs& a) {
  law::MoEDesignSpace s;
  std::string law_name = a.law;
  law::Constants constants;
  std::vector<std::string> undetermined;  // the fit's parameters on an edge of the law's box
  if (!a.fit.empty()) {
    if (!a.params.empty()) throw usage_error("design: give either --fit FILE or --param, not both");
    const FitFile f = read_fit(a.fit, !a.epsilon);
    if (!law_name.empty() && law_name != f.law) throw usage_error("design: --law " + law_name + " but the fit in " + a.fit + " is of " + f.law);
    law_name = f.law;
    constants = f.params;
    undetermined = f.at_box_edge;
    s.epsilon = a.epsilon ? *a.epsilon : f.rmse;
  } else {
    if (a.params.empty()) throw usage_error("design: needs --fit FILE (from `loopscale fit --json`) or --param NAME=VALUE ...");
    if (!a.epsilon) throw usage_error("design: with --param, give --epsilon (the fit's RMSE is the default only with --fit)");
    constants = numeric_assignments(a.params, "--param");
    s.epsilon = a.epsilon;
  }
  if (law_name.empty()) law_name = "looped-moe";
  const law::AnyLaw l = law::law_by_name(law_name);
  // A constant out of its domain is named where it came from: the fit file, or --param.
  const Eigen::VectorXd theta = law::theta_of(l, constants, a.fit.empty() ? "--param" : "--fit " + a.fit + ":");
  print_law_notes(l, constants);
  s.n_act = a.n_act, s.n_loop = a.n_loop, s.n_expert_active = a.expert_params, s.top_k = a.top_k;
  s.R = a.R, s.E = a.E, s.budget = a.budget;
  if (!(a.memory_gib >= 0)) throw usage_error("design: --memory-gib must be >= 0");
  s.memory_bytes = a.memory_gib * 1024.0 * 1024.0 * 1024.0;
  s.bytes_per_weight = a.bytes_per_weight, s.max_inference_flops = a.max_inference_flops;
  const law::MoEDesign d = law::design_looped_moe(l, theta, s);

  const auto same = [](const law::MoEDesignPoint& x, const law::MoEDesignPoint& y) { return x.R == y.R && x.E == y.E; };
  const auto is_near = [&](const law::MoEDesignPoint& p) {
    return std::any_of(d.near.begin(), d.near.end(), [&](const law::MoEDesignPoint& q) { return same(p, q); });
  };
  if (a.json) {
    const auto point = [](const law::MoEDesignPoint& p) {
      return nlohmann::json{{"R", p.R},         {"E", p.E},           {"N_total", p.n_total},           {"m", p.m},
                            {"N_unroll", p.n_unroll}, {"D", p.tokens}, {"loss", p.loss},
                            {"fits_memory", p.fits_memory}, {"fits_compute", p.fits_compute}};
    };
    nlohmann::json j{{"law", l.name()},          {"epsilon", d.epsilon}, {"chosen", point(d.chosen)}, {"optimum", point(d.optimum)},
                     {"fit_at_box_edge", undetermined}};
    j["near"] = nlohmann::json::array();
    for (const auto& p : d.near) j["near"].push_back(point(p));
    j["table"] = nlohmann::json::array();
    for (const auto& p : d.table) j["table"].push_back(point(p));
    std::cout << j.dump(2) << "\n";
    return;
  }
  fmt::print("law {}; budget {:.3g} FLOPs, D = C / (6 N_unroll); epsilon {:.4g}\n", l.name(), s.budget, d.epsilon);
  fmt::print("{:>4} {:>4} {:>12} {:>7} {:>12} {:>12} {:>10}  {}\n", "R", "E", "N_total", "m", "N_unroll", "D", "loss", "");
  for (const auto& p : d.table) {
    std::string mark;
    if (!p.fits_memory) mark = "over the memory limit";
    else if (!p.fits_compute) mark = "over the inference limit";
    else if (same(p, d.chosen)) mark = same(p, d.optimum) ? "<- chosen (the optimum)" : "<- chosen";
    else if (same(p, d.optimum)) mark = "optimum";
    else if (is_near(p)) mark = "within epsilon of the optimum";
    // %g: a fixed-point loss printed hundreds of digits where the constants make it huge (A = 1e308).
    fmt::print("{:>4g} {:>4g} {:>12.4g} {:>7.3f} {:>12.4g} {:>12.4g} {:>10.6g}  {}\n", p.R, p.E, p.n_total, p.m, p.n_unroll, p.tokens,
               p.loss, mark);
  }
  fmt::print("chosen: R = {:g}, E = {:g}, predicted loss {:.6g} ({:.4g} above the optimum R = {:g}, E = {:g}; {} designs within epsilon)\n",
             d.chosen.R, d.chosen.E, d.chosen.loss, d.chosen.loss - d.optimum.loss, d.optimum.R, d.optimum.E, d.near.size());
  // A design is only as good as the constants under it: one the fit left on its box's edge is the
  // box's value, not a measurement (`loopscale fit` says so beside it), and the design inherits that.
  if (!undetermined.empty())
    fmt::print("not determined: {} of the fit ended on an edge of the law's box (the data do not determine {}), so this design "
               "rests on {} the fit did not measure\n",
               fmt::join(undetermined, ", "), undetermined.size() == 1 ? "it" : "them", undetermined.size() == 1 ? "a value" : "values");
}

const bool registered_design = add_command([](CLI::App& app) {
  auto a = std::make_shared<DesignArgs>();
  CLI::App* sub = app.add_subcommand(
      "design", "looped-MoE design rule: from the smallest (R, E), one more step of R or E only while it lowers the predicted loss by at least epsilon, under compute and memory limits");
  sub->add_option("--fit", a->fit, "a fit written by `loopscale fit --law looped-moe ... --json`: its parameters, and its RMSE as epsilon");
  sub->add_option("--law", a->law, "the law (default: the fit's, else looped-moe)");
  sub->add_option("--param", a->params, "instead of --fit: law constants in natural units (with --epsilon)");
  sub->add_option("--epsilon", a->epsilon, "designs whose predicted loss is within this of the best are equal (default: the fit's RMSE)");
  sub->add_option("--n-act", a->n_act, "active non-embedding parameters N_act")->required();
  sub->add_option("--n-loop", a->n_loop, "active parameters of the looped block N_loop (part of N_act)")->required();
  sub->add_option("--expert-params", a->expert_params, "of N_act, the parameters in the top-k routed experts")->required();
  sub->add_option("--top-k", a->top_k, "experts per token")->capture_default_str();
  sub->add_option("--budget", a->budget, "training FLOPs C")->required();
  add_distinct_list(*sub, "--R", a->R, "recurrence candidates", ',');
  add_distinct_list(*sub, "--E", a->E, "routed expert candidates", ',');
  sub->add_option("--memory-gib", a->memory_gib, "memory for the weights (0: no limit)")->capture_default_str();
  sub->add_option("--bytes-per-weight", a->bytes_per_weight, "bytes per stored weight")->capture_default_str();
  sub->add_option("--max-inference-flops", a->max_inference_flops, "inference FLOPs per token, 2 N_unroll (0: no limit)")->capture_default_str();
  sub->add_flag("--json", a->json, "print JSON");
  sub->callback([a] { run(*a); });
});

}  // namespace
}  // namespace loopscale::cli
