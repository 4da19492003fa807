// `loopscale equivalent`: the dense sizes a looped model is worth, in loss and in training cost.
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>

#include "law_args.hpp"
#include "loopscale/spec/limits.hpp"

namespace loopscale::cli {
namespace {

struct EquivalentArgs {
  std::string law = "iso-depth";
  std::vector<std::string> params;
  std::optional<double> n_once, n_rec;
  std::optional<int64> d_model;
  double r = 0;
  std::optional<int64> vocab;  // with --d-model; default 32064
  std::string injection;
  bool json = false;
};

void run(const EquivalentArgs& a) {
  const law::AnyLaw l = law::law_by_name(a.law);
  if (l.name() != "iso-depth" && l.name() != "looped-moe-power")
    throw usage_error("equivalent: --law must be iso-depth (its N_once + r^phi N_rec is the dense equivalent)");
  const law::Constants c = numeric_assignments(a.params, "--param");
  for (const auto& [k, v] : c)
    if (law::index_of(l.parameters(), k) < 0) throw usage_error("--param " + k + ": law " + l.name() + " has no such parameter");
  if (!c.count("phi")) throw usage_error("equivalent: needs --param phi=...");
  const double phi = c.at("phi");
  law::Equivalence e;
  std::optional<int64> d;
  if (a.d_model) {
    if (a.n_once || a.n_rec) throw usage_error("equivalent: give either --d-model or --n-once and --n-rec");
    const double rr = a.r;
    // Checked as a double before the cast to int64: r = 1e30 became -9223372036854775808 in the
    // message. r < 1 goes on to the family builder, which names it.
    if (rr != std::floor(rr) || !(std::abs(rr) <= static_cast<double>(SpecLimits::depth)))
      throw usage_error(concat("equivalent: --r must be a whole number of at most ", SpecLimits::depth, " with --d-model, not ", rr));
    const InjectionCount inj = injection_option(a.injection.empty() ? "rec" : a.injection);
    try {
      e = law::looped_equivalence(law::paper_member(*a.d_model, static_cast<int64>(rr), a.vocab.value_or(32064)), phi, inj);
    } catch (const law::data_error& err) {
      const std::string what = err.what();  // the family's errors say no command, looped_equivalence's do
      throw usage_error(what.starts_with("equivalent: ") ? what : "equivalent: " + what);
    } catch (const spec_error& err) {
      throw usage_error(std::string("equivalent: --d-model ") + std::to_string(*a.d_model) + ": " + err.what());
    }
    d = a.d_model;
  } else {
    if (!a.n_once || !a.n_rec) throw usage_error("equivalent: needs --n-once and --n-rec (or --d-model for the paper's family)");
    if (!a.injection.empty()) throw usage_error("equivalent: --injection goes with --d-model; --n-once and --n-rec are taken as given");
    // It chose the family member's vocabulary; without --d-model there is none (it was ignored).
    if (a.vocab) throw usage_error("equivalent: --vocab goes with --d-model; --n-once and --n-rec are taken as given");
    e = law::looped_equivalence(*a.n_once, *a.n_rec, a.r, phi);
  }
  if (a.json) {
    nlohmann::json j{{"law", l.name()}, {"phi", phi}, {"r", a.r}, {"params", e.params},
                     {"dense_equivalent_params", e.dense_equivalent_params}, {"unrolled_params", e.unrolled_params}};
    if (d) j["d_model"] = *d;
    if (!e.injection.empty()) j["injection"] = e.injection, j["n_once"] = e.n_once, j["n_rec"] = e.n_rec;
    std::cout << j.dump(2) << "\n";
    return;
  }
  fmt::print("looped model: {:.4g} non-embedding params, r = {:g}, phi = {:g}\n", e.params, a.r, phi);
  if (!e.injection.empty())
    fmt::print("  N_once {:.4g}, N_rec {:.4g} (the injection counted in: {})\n", e.n_once, e.n_rec, e.injection);
  fmt::print("  same predicted loss as a dense model of   {:.4g} params (N_once + r^phi N_rec)\n", e.dense_equivalent_params);
  fmt::print("  same training cost as a dense model of    {:.4g} params (unrolled, N_once + r N_rec)\n", e.unrolled_params);
}

const bool registered_equivalent = add_command([](CLI::App& app) {
  auto a = std::make_shared<EquivalentArgs>();
  CLI::App* sub = app.add_subcommand("equivalent", "dense sizes equivalent to a looped model in loss and in training cost");
  sub->add_option("--law", a->law, "the law (iso-depth)")->capture_default_str();
  sub->add_option("--param", a->params, "law constants; phi is the one used: --param phi=0.459")->required();
  sub->add_option("--n-once", a->n_once, "params run once (prelude, coda, outer norms)");
  sub->add_option("--n-rec", a->n_rec, "params of the shared block and its injection");
  sub->add_option("--d-model", a->d_model, "instead of --n-once/--n-rec: the paper family's member of this width");
  sub->add_option("--vocab", a->vocab, "vocabulary with --d-model (default 32064)");
  sub->add_option("--injection", a->injection, std::string(injection_help) + "; with --d-model (default rec)");
  sub->add_option("--r", a->r, "recurrences")->required();
  sub->add_flag("--json", a->json, "print JSON");
  sub->callback([a] { run(*a); });
});

}  // namespace
}  // namespace loopscale::cli
