// The downstream part of a sweep report: the built-in probe scores each run recorded after
// training (engine.hpp, evaluate_run; eval/score.hpp's JSON under the line's summary.eval),
// gathered per (C, r) cell and per axis, and the points of the plot that asks the paper's
// question: does downstream track loss? (answer bits per byte against validation bits per byte,
// one colour per r: if looped models trail by what their loss predicts, the r's fall on one curve).
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "loopscale/eval/task.hpp"
#include "loopscale/sweep/plan.hpp"
#include "loopscale/sweep/results.hpp"

namespace loopscale::sweep {

// One (C, r) cell's means over its runs that were evaluated.
struct DownstreamCell {
  double budget = 0;
  int64 r = 1;
  int runs = 0;
  double core = 0;  // mean centred accuracy over all tasks (CORE)
  std::map<std::string, double> centered, answer_bpb;  // per axis: means over runs
};

// One evaluated run: its validation bpb and the answer bpb pooled over all its tasks.
struct DownstreamPoint {
  int64 r = 1;
  double val_bpb = 0, answer_bpb = 0;
};

struct Downstream {
  std::vector<std::string> axes;  // the axes some run was scored on, in eval/task.hpp's order
  std::vector<DownstreamCell> cells;  // by C, then r
  std::vector<DownstreamPoint> points;
  int evaluated = 0, runs = 0;
};

namespace detail {
inline const nlohmann::json* eval_of(const RunResult& r) {
  const nlohmann::json& l = r.line;
  if (!l.is_object() || !l.contains("summary") || !l["summary"].is_object() || !l["summary"].contains("eval")) return nullptr;
  const nlohmann::json& e = l["summary"]["eval"];
  return e.is_object() && e.contains("axes") && e.contains("tasks") ? &e : nullptr;
}
}  // namespace detail

inline Downstream downstream(const std::vector<RunResult>& runs) {
  Downstream d;
  d.runs = static_cast<int>(runs.size());
  std::map<std::pair<double, int64>, std::vector<const nlohmann::json*>> by_cell;
  std::vector<bool> seen_axis(5, false);
  for (const RunResult& r : runs) {
    const nlohmann::json* e = detail::eval_of(r);
    if (!e) continue;
    ++d.evaluated;
    by_cell[{r.budget, r.r}].push_back(e);
    double bits = 0, bytes = 0;
    for (const auto& t : (*e)["tasks"]) {
      bits += t.value("answer_bits", 0.0);
      bytes += t.value("answer_bytes", 0.0);
    }
    for (const auto& a : (*e)["axes"])
      if (const auto axis = parse_name<eval::Axis>(a.value("axis", std::string())))
        seen_axis[static_cast<std::size_t>(*axis)] = true;
    const nlohmann::json& s = r.line["summary"];
    if (bytes > 0 && s.contains("val_bpb") && s["val_bpb"].is_number()) d.points.push_back({r.r, s["val_bpb"].get<double>(), bits / bytes});
  }
  for (std::size_t i = 0; i < seen_axis.size(); ++i)
    if (seen_axis[i]) d.axes.emplace_back(name_of(static_cast<eval::Axis>(i)));
  for (const auto& [key, evals] : by_cell) {
    DownstreamCell c;
    c.budget = key.first;
    c.r = key.second;
    c.runs = static_cast<int>(evals.size());
    for (const nlohmann::json* e : evals) {
      c.core += e->value("core", 0.0) / c.runs;
      for (const auto& a : (*e)["axes"]) {
        const std::string axis = a.value("axis", std::string());
        c.centered[axis] += a.value("centered", 0.0) / c.runs;
        c.answer_bpb[axis] += a.value("answer_bpb", 0.0) / c.runs;
      }
    }
    d.cells.push_back(std::move(c));
  }
  std::sort(d.points.begin(), d.points.end(), [](const auto& a, const auto& b) { return std::pair(a.r, a.val_bpb) < std::pair(b.r, b.val_bpb); });
  return d;
}

// The report's section: per (C, r) the mean CORE and each axis's centred accuracy, then each axis's
// answer bits per byte. Empty when no run was evaluated.
inline std::string downstream_markdown(const Downstream& d) {
  if (d.evaluated == 0) return "";
  std::string m = "## Downstream: the built-in probes\n\n";
  m += fmt::format("{} of {} runs scored after training on the built-in probes (eval/probes.hpp) at their trained r; "
                   "means over the runs of each (C, r) cell. Centred accuracy is 0 at chance and 1 at perfect; "
                   "answer bits per byte is the gold answers' -log2 p per byte, continuous where accuracy is at chance. "
                   "`loopscale eval RUN_DIR` prints a run's per-task table; docs/eval.md says what each task measures.\n\n",
                   d.evaluated, d.runs);
  const auto header = [&](const char* what) {
    m += fmt::format("| C | r | runs | {} |", what);
    for (const auto& a : d.axes) m += fmt::format(" {} |", a);
    m += "\n|---|---|---|---|";
    for (std::size_t i = 0; i < d.axes.size(); ++i) m += "---|";
    m += "\n";
  };
  const auto cell = [](const std::map<std::string, double>& v, const std::string& axis) {
    const auto it = v.find(axis);
    return it == v.end() ? std::string("-") : fmt::format("{:.3f}", it->second);
  };
  header("CORE (centred)");
  for (const DownstreamCell& c : d.cells) {
    m += fmt::format("| {} | {} | {} | {:.3f} |", budget_label(c.budget), c.r, c.runs, c.core);
    for (const auto& a : d.axes) m += fmt::format(" {} |", cell(c.centered, a));
    m += "\n";
  }
  m += "\nAnswer bits per byte:\n\n";
  header("-");
  for (const DownstreamCell& c : d.cells) {
    m += fmt::format("| {} | {} | {} | |", budget_label(c.budget), c.r, c.runs);
    for (const auto& a : d.axes) m += fmt::format(" {} |", cell(c.answer_bpb, a));
    m += "\n";
  }
  m += "\n";
  return m;
}

}  // namespace loopscale::sweep
