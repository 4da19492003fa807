// Training runs as a law sees them: named numeric columns of equal length (N, D, loss, r, ...).
// A raw table (runs_io.hpp reads one from CSV or JSONL) becomes Runs through a column map, so a
// foreign file is read as it is; missing variables are derived where the papers derive them
// (D = C / F), and every bad value is reported as one line that names the file, line and column.
// N_once / N_rec (N_act / N_loop) carry a convention, where the injection counts
// (account/injection_convention.hpp): read from the file's `injection` column, or converted to a
// chosen one with the file's N_inject column, and recorded in Runs::injection.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include <Eigen/Core>

#include "loopscale/account/injection_convention.hpp"
#include "loopscale/util/json_parse.hpp"
#include "loopscale/util/text.hpp"

namespace loopscale::law {

// Bad data or bad arguments: the command line prints the message as one line and exits 2.
struct data_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// A table as read from a file: every cell as text, with the file line each row came from.
struct RunTable {
  std::string source;                           // file name, for messages
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> cells;  // [column][row]
  std::vector<long> lines;                      // file line of each row

  std::size_t rows() const { return lines.size(); }
  int column(const std::string& name) const {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return static_cast<int>(i);
    return -1;
  }
};

// Canonical variable name -> the column of the file that holds it (`--map N="Model Size"`).
using ColumnMap = std::map<std::string, std::string>;

namespace detail {

inline bool parse_number(const std::string& text, double& out) {
  const char* b = text.c_str();
  while (*b == ' ' || *b == '\t') ++b;
  if (*b == '\0') return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(b, &end);
  while (*end == ' ' || *end == '\t' || *end == '\r') ++end;
  return *end == '\0' && end != b;
}

// What each variable must satisfy, checked where it is read.
enum class Domain { any, positive, non_negative, at_least_one, unit_interval };

// Every numeric variable the laws and the reader read, with its domain (docs/laws.md, "Data");
// the reader also reads the text column "injection".
inline const std::map<std::string, Domain>& variable_domains() {
  static const std::map<std::string, Domain> d{
      {"N", Domain::positive},        {"D", Domain::positive},      {"C", Domain::positive},
      {"loss", Domain::positive},     {"N_once", Domain::positive}, {"N_rec", Domain::positive},
      {"N_act", Domain::positive},    {"N_loop", Domain::positive}, {"N_total", Domain::positive},
      {"r", Domain::at_least_one},    {"R", Domain::at_least_one},  {"E", Domain::at_least_one},
      {"K", Domain::at_least_one},    {"G", Domain::positive},      {"m", Domain::unit_interval},
      {"F", Domain::positive},        {"N_inject", Domain::non_negative}};
  return d;
}

inline Domain domain_of(const std::string& name) {
  const auto& d = variable_domains();
  auto it = d.find(name);
  return it == d.end() ? Domain::any : it->second;
}

inline const char* domain_text(Domain d) {
  switch (d) {
    case Domain::positive: return "must be > 0";
    case Domain::non_negative: return "must be >= 0";
    case Domain::at_least_one: return "must be >= 1";
    case Domain::unit_interval: return "must be in (0, 1]";
    default: return "";
  }
}

inline bool in_domain(Domain d, double v) {
  switch (d) {
    case Domain::positive: return v > 0;
    case Domain::non_negative: return v >= 0;
    case Domain::at_least_one: return v >= 1;
    case Domain::unit_interval: return v > 0 && v <= 1;
    default: return true;
  }
}

}  // namespace detail

// Runs a law reads: named columns, one value per row. `lines` is optional: the readers fill it
// with the file line of each row, for messages; a Runs built in code may leave it empty, and its
// rows are then named "row 1" to "row n" (size() counts the columns' values). The one rule, which
// check() enforces: every column has one value per row, and `lines`, when not empty, one entry per
// row. fit, subset, a law's prepare and the other entry points check it, so a short column is
// refused as one line naming it rather than read past its end.
struct Runs {
  std::map<std::string, Eigen::ArrayXd> columns;
  std::vector<long> lines;  // file line of each row, for messages; may be empty (rows "row 1".."row n")
  // Where the injection counts in N_once / N_rec (N_act / N_loop): a name of InjectionCount, or
  // empty when the data do not say (a file without an `injection` column, read as it is).
  std::string injection;

  // Rows: one per entry of `lines`, or, without lines, the length of the columns (of the first,
  // when check() would refuse them).
  Eigen::Index size() const {
    if (!lines.empty()) return static_cast<Eigen::Index>(lines.size());
    return columns.empty() ? 0 : columns.begin()->second.size();
  }
  // How messages name row i: "line 12" (its file line) or, without lines, "row 3" (1-based).
  std::string row_name(Eigen::Index i) const {
    if (lines.empty()) return "row " + std::to_string(i + 1);
    return "line " + std::to_string(lines[static_cast<std::size_t>(i)]);
  }
  bool has(const std::string& name) const { return columns.count(name) != 0; }
  const Eigen::ArrayXd& operator[](const std::string& name) const {
    auto it = columns.find(name);
    if (it == columns.end()) throw data_error("data: no column '" + name + "'");
    return it->second;
  }
  Eigen::ArrayXd& set(const std::string& name) { return columns[name]; }

  // Refuses columns of different lengths, or a column whose length is not that of `lines` (when
  // given): "data: column 'loss' has 6 values, column 'D' has 8 ...". Without lines the length most
  // columns share is the reference (the first column's on a tie), so the odd column is named.
  void check() const {
    const auto refuse = [](const std::string& name, Eigen::Index n, const std::string& other) {
      throw data_error("data: column '" + name + "' has " + std::to_string(n) + " value" + (n == 1 ? "" : "s") + ", " + other +
                       "; every column needs one value per row");
    };
    if (!lines.empty()) {
      for (const auto& [name, col] : columns)
        if (col.size() != static_cast<Eigen::Index>(lines.size()))
          refuse(name, col.size(), "lines has " + std::to_string(lines.size()) + " entries");
      return;
    }
    const std::string* ref = nullptr;
    long best = 0;
    for (const auto& [name, col] : columns) {
      long same = 0;
      for (const auto& [other, c] : columns) same += c.size() == col.size();
      if (same > best) best = same, ref = &name;
    }
    if (!ref) return;
    const Eigen::Index n = columns.at(*ref).size();
    for (const auto& [name, col] : columns)
      if (col.size() != n) refuse(name, col.size(), "column '" + *ref + "' has " + std::to_string(n));
  }

  // check(), and every value finite and in its variable's domain (loss > 0, r >= 1, ...; the
  // readers refuse such values in a file): "fit: line 7: loss = -1 must be > 0", `who` first.
  void check_values(const std::string& who) const {
    check();
    for (const auto& [name, col] : columns) {
      const detail::Domain dom = detail::domain_of(name);
      for (Eigen::Index i = 0; i < col.size(); ++i)
        if (!std::isfinite(col[i]) || !detail::in_domain(dom, col[i]))
          throw data_error(concat(who, ": ", row_name(i), ": ", name, " = ", col[i], " ",
                                  std::isfinite(col[i]) ? detail::domain_text(dom) : "is not finite"));
    }
    check_routing(who);
  }

  // Values of two columns that contradict each other: an MoE routes each token to K of its E
  // experts, so K <= E. The laws that read both took K = 4 of E = 2 as a sparsity of -1.
  void check_routing(const std::string& who) const {
    if (!has("E") || !has("K")) return;
    const Eigen::ArrayXd &E = columns.at("E"), &K = columns.at("K");
    for (Eigen::Index i = 0; i < std::min(E.size(), K.size()); ++i)
      if (K[i] > E[i])
        throw data_error(concat(who, ": ", row_name(i), ": K = ", K[i], " is above E = ", E[i],
                                " (each token goes to K of the E experts, so K <= E)"));
  }

  // The given rows, in the given order (repeats allowed). Their lines go with them; a Runs without
  // lines gives one without, numbered afresh (check_values the whole Runs first for messages that
  // name its own rows, as holdout does).
  Runs subset(const std::vector<Eigen::Index>& rows) const {
    check();
    const Eigen::Index n = size();
    for (auto i : rows)
      if (i < 0 || i >= n) throw data_error(concat("data: subset: row index ", i, " outside the ", n, " rows"));
    Runs s;
    s.injection = injection;
    if (!lines.empty()) {
      s.lines.reserve(rows.size());
      for (auto i : rows) s.lines.push_back(lines[static_cast<std::size_t>(i)]);
    }
    for (const auto& [name, col] : columns) {
      Eigen::ArrayXd c(static_cast<Eigen::Index>(rows.size()));
      for (std::size_t k = 0; k < rows.size(); ++k) c[static_cast<Eigen::Index>(k)] = col[rows[k]];
      s.columns.emplace(name, std::move(c));
    }
    return s;
  }
};

// The rows left when the k points of highest loss are removed (Epoch drops the 5 highest-loss
// points of Chinchilla's figure as outliers of the SVG extraction), in their original order. Ties go
// by row order, so the result is unique.
inline std::vector<Eigen::Index> rows_without_highest_loss(const Runs& runs, Eigen::Index k) {
  runs.check();
  std::vector<Eigen::Index> order(static_cast<std::size_t>(runs.size()));
  std::iota(order.begin(), order.end(), Eigen::Index{0});
  if (k <= 0) return order;
  const Eigen::ArrayXd& loss = runs["loss"];
  runs.check_values("data");  // a NaN loss cannot be ranked
  if (k >= runs.size())
    throw data_error("data: --drop-highest " + std::to_string(k) + " would drop all " + std::to_string(runs.size()) + " points");
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return loss[a] > loss[b]; });
  std::vector<Eigen::Index> keep(order.begin() + k, order.end());
  std::sort(keep.begin(), keep.end());
  return keep;
}

inline Runs drop_highest_loss(const Runs& runs, Eigen::Index k) { return runs.subset(rows_without_highest_loss(runs, k)); }

// Reads the variables a law needs (and any `optional` ones present) from a table. Derivations,
// used only when the variable has no column of its own:
//   D = C / F, F the training FLOPs per token (the iso-depth paper's tokens, and a sweep's: its
//     runs.csv has F). Without an F column, D = C / (6 N) for dense runs only (Chinchilla's and
//     Epoch's convention; a file whose r or R column says every run is r = 1, or that has none):
//     for a looped run F is 1.2-7.5 times 6 N (the r-fold block, attention, the lm_head), so a
//     looped run without D or F is an error;
//   N_once = N_act - N_loop, N_rec = N_loop, r = R and the reverse; m = N_act / N_total;
//   K = 1 (E is then the routed experts per token, E_route / k).
// Where the injection counts: with count_injection(c), N_once, N_rec, N_act and N_loop are
// converted from the convention in the file's `injection` column to c, using its N_inject column
// (a sweep's runs.csv has both); Runs::injection records the convention of what was read.
class RunReader {
 public:
  RunReader(const RunTable& table, ColumnMap map) : t_(table), map_(std::move(map)) {
    for (const auto& [name, col] : map_)
      if (t_.column(col) < 0)
        throw data_error("data: --map " + name + "=\"" + col + "\": " + t_.source + " has no column '" + col + "'");
  }

  // Read N_once, N_rec, N_act, N_loop under convention `c` (converted from the file's).
  void count_injection(InjectionCount c) {
    for (const char* need : {"injection", "N_inject"})
      if (!available_raw(need))
        throw data_error("data: --injection " + std::string(name_of(c)) + " converts N_once / N_rec with the file's '" + need +
                         "' column, which " + t_.source + " lacks (a sweep's runs.csv has injection and N_inject)");
    to_ = c;
  }

  // The columns named, and no others: to fit, name "loss" beside the law's columns
  // (`cols = law.columns(); cols.push_back("loss")`, as `loopscale fit` does). The loss is not added
  // for a law's columns on purpose: `loopscale law` and prediction read the same columns from files
  // of points that have no loss (it passes "loss" as optional when the file has one), and one read
  // that sometimes requires a column the caller did not name would surprise more than fit's refusal
  // ("fit: the runs have no 'loss' column ...") does.
  Runs read(const std::vector<std::string>& needed, const std::vector<std::string>& optional = {}) {
    Runs runs;
    runs.lines = t_.lines;
    if (t_.rows() == 0) throw data_error("data: " + t_.source + " has no rows");
    for (const auto& name : needed) runs.columns[name] = get(name, true, needed);
    for (const auto& name : optional)
      if (!runs.has(name) && available(name)) runs.columns[name] = get(name, true, needed);
    runs.injection = injection_label();
    runs.check_routing("data: " + t_.source);
    return runs;
  }

  // The convention of the counts read: the chosen one, else the file's (when its `injection`
  // column names one convention for every row), else empty. Read as it is, a file whose
  // `injection` column holds other words is not an error: it just does not say.
  std::string injection_label() const {
    if (to_) return std::string(name_of(*to_));
    if (!available_raw("injection") || t_.rows() == 0) return "";
    const auto& col = t_.cells[static_cast<std::size_t>(source_column("injection"))];
    const auto first = parse_name<InjectionCount>(col.front());
    for (const std::string& w : col)
      if (!first || parse_name<InjectionCount>(w) != first) return "";
    return std::string(name_of(*first));
  }

  // A column as group labels (any text): equal text, equal id. Used for block bootstrap and
  // held-out slices, whose columns need not be numeric.
  std::vector<std::string> labels(const std::string& name) const {
    const int c = source_column(name);
    if (c < 0) throw data_error("data: " + t_.source + " has no column '" + source_name(name) + "'");
    return t_.cells[static_cast<std::size_t>(c)];
  }

  bool available(const std::string& name) const {
    if (source_column(name) >= 0) return true;
    if (name == "D") return available_raw("C") && (available_raw("F") || available_raw("N"));
    if (name == "N_once") return available_raw("N_act") && available_raw("N_loop");
    if (name == "N_rec") return available_raw("N_loop");
    if (name == "r") return available_raw("R");
    if (name == "N_act") return available_raw("N_once") && available_raw("N_rec");
    if (name == "N_loop") return available_raw("N_rec");
    if (name == "R") return available_raw("r");
    if (name == "m") return available("N_act") && available_raw("N_total");
    if (name == "K") return true;
    return false;
  }

 private:
  const RunTable& t_;
  ColumnMap map_;
  std::optional<InjectionCount> to_;

  std::string source_name(const std::string& name) const {
    auto it = map_.find(name);
    return it == map_.end() ? name : it->second;
  }
  int source_column(const std::string& name) const { return t_.column(source_name(name)); }
  bool available_raw(const std::string& name) const { return source_column(name) >= 0; }
  std::string where(std::size_t row) const { return t_.source + " line " + std::to_string(t_.lines[row]); }

  Eigen::ArrayXd raw(const std::string& name) const {
    const int c = source_column(name);
    const auto& col = t_.cells[static_cast<std::size_t>(c)];
    const detail::Domain dom = detail::domain_of(name);
    Eigen::ArrayXd v(static_cast<Eigen::Index>(col.size()));
    for (std::size_t i = 0; i < col.size(); ++i) {
      const std::string at = where(i) + ", column '" + source_name(name) + "'";
      double x;
      if (!detail::parse_number(col[i], x)) throw data_error("data: " + at + ": " + text_brief(col[i]) + " is not a number");
      if (!std::isfinite(x)) throw data_error("data: " + at + ": " + col[i] + " is not finite");
      if (!detail::in_domain(dom, x))
        throw data_error("data: " + at + ": " + name + " = " + col[i] + " " + detail::domain_text(dom));
      v[static_cast<Eigen::Index>(i)] = x;
    }
    return v;
  }

  // The convention of each row's counts, from the file's `injection` column.
  std::vector<InjectionCount> file_conventions() const {
    const auto& col = t_.cells[static_cast<std::size_t>(source_column("injection"))];
    std::vector<InjectionCount> out;
    for (std::size_t i = 0; i < col.size(); ++i) {
      const auto c = parse_name<InjectionCount>(col[i]);
      if (!c)
        throw data_error("data: " + where(i) + ", column '" + source_name("injection") + "': '" + col[i] + "' is not " +
                         name_choices<InjectionCount>());
      out.push_back(*c);
    }
    return out;
  }

  // What converting `name` from the file's convention to to_ adds to each row: the injection moves
  // into or out of N_once (once), N_rec and N_loop (rec), N_act (every convention but excluded).
  Eigen::ArrayXd injection_shift(const std::string& name) const {
    const Eigen::ArrayXd inj = raw("N_inject");
    const std::vector<InjectionCount> from = file_conventions();
    Eigen::ArrayXd shift(inj.size());
    const auto in = [&](InjectionCount c) {
      if (name == "N_once") return c == InjectionCount::once ? 1.0 : 0.0;
      if (name == "N_act") return c == InjectionCount::excluded ? 0.0 : 1.0;
      return c == InjectionCount::rec ? 1.0 : 0.0;  // N_rec, N_loop
    };
    for (Eigen::Index i = 0; i < inj.size(); ++i) shift[i] = inj[i] * (in(*to_) - in(from[static_cast<std::size_t>(i)]));
    return shift;
  }

  // A count in the file's convention, then in the chosen one.
  Eigen::ArrayXd count(const std::string& name, Eigen::ArrayXd v) const {
    if (!to_) return v;
    v += injection_shift(name);
    check_positive(name, name + " with the injection counted as '" + std::string(name_of(*to_)) + "'", v);
    return v;
  }

  // D = C / F, or C / (6 N) for dense runs (see the class comment).
  Eigen::ArrayXd tokens() const {
    const Eigen::ArrayXd c = raw("C");
    if (available_raw("F")) return c / raw("F");
    for (const char* rc : {"r", "R"})
      if (available_raw(rc)) {
        const Eigen::ArrayXd r = raw(rc);
        for (Eigen::Index i = 0; i < r.size(); ++i)
          if (r[i] != 1)
            throw data_error("data: " + where(static_cast<std::size_t>(i)) + ": a looped run (" + rc + " = " + fmt_number(r[i]) +
                             ") without a D column: D = C / F needs the F column (training FLOPs per token); 6 N would leave "
                             "out the repeated block, attention and the lm_head");
      }
    return c / (6 * raw("N"));
  }

  static std::string fmt_number(double x) {
    std::string s = std::to_string(x);
    s.erase(s.find_last_not_of('0') + 1);
    if (!s.empty() && s.back() == '.') s.pop_back();
    return s;
  }

  Eigen::ArrayXd get(const std::string& name, bool required, const std::vector<std::string>& needed) const {
    const bool looped_count = name == "N_once" || name == "N_rec" || name == "N_act" || name == "N_loop";
    if (available_raw(name)) return looped_count ? count(name, raw(name)) : raw(name);
    if (name == "D" && available("D")) return tokens();
    if (name == "N_once" && available(name)) {
      Eigen::ArrayXd v = raw("N_act") - raw("N_loop");
      check_positive("N_once", "N_act - N_loop", v);
      return count(name, v);
    }
    if (name == "N_rec" && available(name)) return count(name, raw("N_loop"));
    if (name == "r" && available(name)) return raw("R");
    if (name == "N_act" && available(name)) return count(name, raw("N_once") + raw("N_rec"));
    if (name == "N_loop" && available(name)) return count(name, raw("N_rec"));
    if (name == "R" && available(name)) return raw("r");
    if (name == "m" && available(name)) {
      Eigen::ArrayXd v = get("N_act", true, needed) / raw("N_total");
      for (Eigen::Index i = 0; i < v.size(); ++i)
        if (!(v[i] > 0 && v[i] <= 1))
          throw data_error("data: " + where(static_cast<std::size_t>(i)) + ": m = N_act / N_total = " + std::to_string(v[i]) +
                           " must be in (0, 1]");
      return v;
    }
    if (name == "K") return Eigen::ArrayXd::Ones(static_cast<Eigen::Index>(t_.rows()));
    if (!required) return {};
    std::string hint;
    if (name == "D") hint = " (or C with F, to derive D = C / F; for dense runs C with N, D = C / 6N)";
    throw data_error("data: " + t_.source + " has no column '" + source_name(name) + "' for " + name + hint +
                     "; name the file's column with --map " + name + "=\"...\"");
  }

  void check_positive(const std::string& name, const std::string& how, const Eigen::ArrayXd& v) const {
    for (Eigen::Index i = 0; i < v.size(); ++i)
      if (!(v[i] > 0))
        throw data_error("data: " + where(static_cast<std::size_t>(i)) + ": " + name + " = " + how + " = " + std::to_string(v[i]) +
                         " must be > 0");
  }
};

}  // namespace loopscale::law
