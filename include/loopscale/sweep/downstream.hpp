// The downstream part of a sweep report: the built-in probe scores each run recorded after
// training (engine.hpp, evaluate_run; eval/score.hpp's JSON under the line's summary.eval),
// gathered per (C, r) cell and per axis, and the points of the plot that asks the paper's
// question: does downstream track loss? (answer bits per byte against validation bits per byte,
// one colour per r: if looped models trail by what their loss predicts, the r's fall on one curve),
// and the test-time recurrence curve of each r's largest model (summary.recurrence_curve).
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
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

// The test-time recurrence curve of one trained r's largest model (most stored non-embedding
// parameters; of equal ones the larger budget): validation loss at each r_eval (engine.hpp,
// recurrence_curve).
struct RecurrenceCurve {
  int64 r = 1;
  std::string id;
  double n = 0, budget = 0;
  int64 windows = 0, seq_len = 0;
  std::vector<int64> r_eval;
  std::vector<double> loss, bpb;  // bpb NaN when the corpus does not know its bytes
};

struct Downstream {
  std::vector<std::string> axes;  // the axes some run was scored on, in eval/task.hpp's order
  std::vector<DownstreamCell> cells;  // by C, then r
  std::vector<DownstreamPoint> points;
  std::vector<RecurrenceCurve> curves;  // by trained r
  int evaluated = 0, runs = 0;
};

namespace detail {
inline const nlohmann::json* eval_of(const RunResult& r) {
  const nlohmann::json& l = r.line;
  if (!l.is_object() || !l.contains("summary") || !l["summary"].is_object() || !l["summary"].contains("eval")) return nullptr;
  const nlohmann::json& e = l["summary"]["eval"];
  return e.is_object() && e.contains("axes") && e.contains("tasks") ? &e : nullptr;
}

// The run's recorded curve, or nothing when it has none or it is malformed (a line is data).
inline std::optional<RecurrenceCurve> curve_of(const RunResult& r) {
  const nlohmann::json& l = r.line;
  if (!l.is_object() || !l.contains("summary") || !l["summary"].is_object() || !l["summary"].contains("recurrence_curve")) return std::nullopt;
  const nlohmann::json& c = l["summary"]["recurrence_curve"];
  if (!c.is_object() || !c.contains("points") || !c["points"].is_array() || c["points"].empty()) return std::nullopt;
  RecurrenceCurve out;
  out.r = r.r;
  out.id = r.id;
  out.n = r.n;
  out.budget = r.budget;
  out.windows = c.value("windows", int64{0});
  out.seq_len = c.value("seq_len", int64{0});
  for (const auto& p : c["points"]) {
    if (!p.is_object() || !p.contains("r_eval") || !p["r_eval"].is_number_integer() || !p.contains("loss") || !p["loss"].is_number())
      return std::nullopt;
    out.r_eval.push_back(p["r_eval"].get<int64>());
    out.loss.push_back(p["loss"].get<double>());
    out.bpb.push_back(p.contains("bpb") && p["bpb"].is_number() ? p["bpb"].get<double>() : std::nan(""));
  }
  return out;
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
  std::map<int64, RecurrenceCurve> largest;
  for (const RunResult& r : runs)
    if (auto c = detail::curve_of(r)) {
      const auto it = largest.find(c->r);
      if (it == largest.end() || std::pair(c->n, c->budget) > std::pair(it->second.n, it->second.budget)) largest[c->r] = std::move(*c);
    }
  for (auto& [r, c] : largest) d.curves.push_back(std::move(c));
  return d;
}

// The report's section: per (C, r) the mean CORE and each axis's centred accuracy, then each axis's
// answer bits per byte. Empty when no run was evaluated.
inline std::string downstream_markdown(const Downstream& d) {
  std::string m;
  if (!d.curves.empty()) {
    std::vector<int64> rs;  // every r_eval of some curve, in order
    for (const RecurrenceCurve& c : d.curves) rs.insert(rs.end(), c.r_eval.begin(), c.r_eval.end());
    std::sort(rs.begin(), rs.end());
    rs.erase(std::unique(rs.begin(), rs.end()), rs.end());
    m += "## Test-time recurrence\n\n";
    m += fmt::format("The largest model of each trained r evaluated with r_eval recurrences of its shared block: validation loss "
                     "(nats/token) on {} evenly spaced windows of {} tokens of val.bin (fewer than the trainer's, so the trained r's "
                     "loss differs slightly from the run's). `plots/recurrence.png` draws it; `loopscale eval RUN_DIR --r-eval LIST` "
                     "gives any run's.\n\n",
                     d.curves.front().windows, d.curves.front().seq_len);
    m += "| run | N | trained r |";
    for (const int64 x : rs) m += fmt::format(" r_eval {} |", x);
    m += "\n|---|---|---|";
    for (std::size_t i = 0; i < rs.size(); ++i) m += "---|";
    m += "\n";
    for (const RecurrenceCurve& c : d.curves) {
      m += fmt::format("| {} | {:.3g} | {} |", c.id, c.n, c.r);
      for (const int64 x : rs) {
        const auto it = std::find(c.r_eval.begin(), c.r_eval.end(), x);
        const double loss = it == c.r_eval.end() ? std::nan("") : c.loss[static_cast<std::size_t>(it - c.r_eval.begin())];
        m += std::isnan(loss) ? std::string(" - |") : (x == c.r ? fmt::format(" **{:.4f}** |", loss) : fmt::format(" {:.4f} |", loss));
      }
      m += "\n";
    }
    m += "\n";
  }
  if (d.evaluated == 0) return m;
  m += "## Downstream: the built-in probes\n\n";
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
