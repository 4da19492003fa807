// delta-phi between two sweeps (e.g. full vs truncated BPTT, or two injections): the paper's
// diagnostic for whether a change to the recurrence changes what one recurrence is worth. Each
// sweep's phi comes with its block-bootstrap draws; the two sweeps' resamples are independent, so
// the interval of the difference is the percentile interval of draw_a[i] - draw_b[i].
#pragma once

#include <algorithm>
#include <cmath>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loopscale/sweep/report.hpp"
#include "loopscale/util/regular_file.hpp"

namespace loopscale::sweep {

struct SweepPhi {
  std::string name, fingerprint;
  std::size_t runs = 0;
  double phi = 0, lo = 0, hi = 0, r2 = 0;
  std::vector<double> draws;
  bool from_cache = false;  // read from DIR/analysis.json
  // phi on an edge of the joint law's box (law::box_edge_of): not an estimate, and a difference
  // taken from it is none either.
  std::string phi_edge;
};

// The edge of the joint law's phi box that phi sits on, if any ("lower", "upper" or empty).
inline std::string phi_box_edge(double phi) {
  const law::AnyLaw iso = law::IsoDepth{};
  const law::Parameters& ps = iso.parameters();
  const law::Parameter& p = ps[static_cast<std::size_t>(law::index_of(ps, "phi"))];
  return std::string(law::box_edge_of(p, p.to_fitted(phi)));
}

struct Comparison {
  SweepPhi a, b;
  double delta = 0;           // phi_a - phi_b
  double lo = 0, hi = 0;      // interval of the difference
  double level = 0.95;
  double share_above = 0;     // share of paired draws with phi_a > phi_b
  std::size_t pairs = 0;
};

// phi of a sweep folder: from its analysis.json when that was written for the results now there
// (same runs count and fingerprint, with bootstrap draws), else analysed afresh.
inline SweepPhi sweep_phi(const fs::path& dir, const AnalyseOptions& opt) {
  const SweepSpec spec = folder_spec(dir);
  const Plan plan = make_plan(spec);
  // An MoE sweep's phi is that of its smallest E (report_data.hpp, iso_depth_runs), as its report says.
  const std::vector<RunResult> all = read_results(dir / "results.jsonl");
  check_against_plan(all, plan);
  const auto results = iso_depth_runs(spec, all);
  if (results.empty()) throw sweep_error(dir.string() + ": no results.jsonl with finished runs (merge shards first)");
  SweepPhi s;
  s.name = spec.name;
  s.fingerprint = plan.fingerprint;
  s.runs = results.size();
  // analysis.json is a cache of `sweep report`: one that is not what report writes for these results
  // (another sweep, other runs, a field missing or of another type, a number that is not finite) is
  // passed over and the sweep analysed afresh.
  const fs::path cache = dir / "analysis.json";
  std::ifstream in;
  if (not_a_file(cache).empty()) in.open(cache);  // asked first: opening a pipe waits for a writer
  if (in) {
    try {
      const auto j = nlohmann::json::parse(in);
      if (j.at("fingerprint").get<std::string>() == plan.fingerprint && j.at("runs").get<std::size_t>() == results.size()) {
        const nlohmann::json& joint = j.at("joint");
        SweepPhi c = s;
        c.phi = joint.at("phi").get<double>();
        c.lo = joint.at("bootstrap").at("phi_lo").get<double>();
        c.hi = joint.at("bootstrap").at("phi_hi").get<double>();
        c.r2 = joint.at("fit").at("r2").get<double>();
        c.draws = joint.at("bootstrap").at("phi").get<std::vector<double>>();
        const auto finite = [](double v) { return std::isfinite(v); };
        if (c.draws.size() >= 2 && finite(c.phi) && finite(c.lo) && finite(c.hi) && finite(c.r2) && std::all_of(c.draws.begin(), c.draws.end(), finite)) {
          c.from_cache = true;
          c.phi_edge = phi_box_edge(c.phi);
          return c;
        }
      }
    } catch (const nlohmann::json::exception&) {
      // not report's file: analysed afresh below
    }
  }
  const Analysis a = analyse(results, opt);
  if (!a.joint) throw sweep_error(fmt::format("{}: no joint fit ({})", dir.string(), a.joint_problem));
  if (a.joint->boot_phi.size() < 2) throw sweep_error(dir.string() + ": compare needs bootstrap draws (--bootstrap N >= 2)");
  s.phi = a.joint->fit.value("phi");
  s.lo = a.joint->phi_lo;
  s.hi = a.joint->phi_hi;
  s.r2 = a.joint->fit.r2;
  s.draws = a.joint->boot_phi;
  s.phi_edge = phi_box_edge(s.phi);
  return s;
}

inline Comparison compare_phi(const SweepPhi& a, const SweepPhi& b, double level = 0.95) {
  Comparison c;
  c.a = a;
  c.b = b;
  c.level = level;
  c.delta = a.phi - b.phi;
  c.pairs = std::min(a.draws.size(), b.draws.size());
  if (c.pairs < 2) throw sweep_error("compare: each sweep needs at least 2 bootstrap draws of phi");
  std::vector<double> d(c.pairs);
  std::size_t above = 0;
  for (std::size_t i = 0; i < c.pairs; ++i) d[i] = a.draws[i] - b.draws[i], above += d[i] > 0;
  c.lo = law::percentile(d, (1 - level) / 2);
  c.hi = law::percentile(d, 1 - (1 - level) / 2);
  c.share_above = static_cast<double>(above) / static_cast<double>(c.pairs);
  return c;
}

inline nlohmann::json comparison_json(const Comparison& c) {
  const auto side = [](const SweepPhi& s) {
    return nlohmann::json{{"sweep", s.name}, {"fingerprint", s.fingerprint}, {"runs", s.runs}, {"phi", s.phi},
                          {"phi_lo", s.lo}, {"phi_hi", s.hi}, {"r2", s.r2}, {"draws", s.draws.size()},
                          {"phi_at_box_edge", s.phi_edge.empty() ? nlohmann::json(nullptr) : nlohmann::json(s.phi_edge)}};
  };
  return {{"a", side(c.a)}, {"b", side(c.b)}, {"delta_phi", c.delta}, {"lo", c.lo}, {"hi", c.hi}, {"level", c.level},
          {"pairs", c.pairs}, {"share_a_above_b", c.share_above}};
}

}  // namespace loopscale::sweep
