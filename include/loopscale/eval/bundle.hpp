// Task bundles on disk: a manifest (JSON) that lists the tasks, and one JSONL file of rows per task.
//
// read_bundle(where) takes a folder (its manifest is `bundle.json`) or a manifest file. The
// manifest is one of two dialects; both give the same fields per task:
//
//   (a) CORE's own shape, the `icl_tasks` list of DCLM's core.yaml:
//       {"name": "core",                                   (optional; default: the folder's name)
//        "icl_tasks": [{"label": "hellaswag", "dataset_uri": "language_understanding/hellaswag.jsonl",
//                       "icl_task_type": "multiple_choice", "num_fewshot": [10],
//                       "continuation_delimiter": " ", "example_delimiter": "\n\n",
//                       "axis": "reasoning_primitives", "random_baseline": 0.25}, ...]}
//   (b) grouped by axis: {"groups": {"math": ["gsm_mc", ...], ...},
//                         "tasks": {"gsm_mc": {"dataset_uri": ..., "icl_task_type": ..., ...}, ...}}
//       every task in exactly one group, every grouped label a task; the tasks come in the order of
//       the axes (task.hpp's order), then of each group's list (JSON objects keep no order).
//
// Per task:
//   label                   unique in the bundle (dialect b: the key of "tasks")
//   dataset_uri             the rows' JSONL, relative to the manifest's folder
//   icl_task_type           language_modeling | multiple_choice | schema ("task_type", as the
//                           iso-depth code's own bundles call it, is read too)
//   num_fewshot             a whole number >= 0, or CORE's list form [k]; default 0. A list of
//                           several values ([0, 5]) is refused: one task is evaluated one way, so
//                           give a task (its own label) per value.
//   continuation_delimiter  default " " (as the iso-depth code's evaluator)
//   example_delimiter       default "\n\n": the iso-depth code (a nanochat fork) separates few-shot
//                           examples and the item by a blank line whatever the YAML says, so that
//                           is what an absent field means here (task.hpp's struct default differs)
//   axis                    one of task.hpp's five axes (dialect b: the group)
//   random_baseline         chance accuracy as a FRACTION in [0, 1) (0.25 for four choices), or
//   random_baseline_percent the same in percent, [0, 100): CORE's eval_meta_data.csv column
//                           "Random baseline" (25.0 means 25%). Exactly one of the two; a
//                           random_baseline >= 1 is refused (it is the percent form misplaced).
// Other keys (CORE's max_seq_len, has_categories, ...) are ignored.
//
// CORE's core.yaml is YAML with block lists (`- label: ...`), not JSON, and has neither axis nor
// baselines. Convert it once and add them:
//   python3 -c 'import json,sys,yaml; json.dump(yaml.safe_load(open(sys.argv[1])), sys.stdout, indent=1)' core.yaml
//       > eval_data/bundle.json                      (or: yq -o=json core.yaml > eval_data/bundle.json)
// then give each task its "axis" and its "random_baseline_percent" from eval_meta_data.csv. CORE's
// dataset_uri values are relative to eval_bundle/eval_data/, hence the manifest's place there.
//
// Rows (one JSON object per line; blank lines are skipped; other keys ignored):
//   language_modeling  {"context": str, "continuation": str (not empty)}
//   multiple_choice    {"query": str, "choices": [str (not empty), at least 2], "gold": index}
//   schema             {"context_options": [str, at least 2], "continuation": str (not empty), "gold": index}
//
// Every problem is one bundle_error (an std::invalid_argument: the `loopscale` program prints it
// and exits with 2) of one line naming the file, the row's line or the manifest's entry, and the
// field: "eval: b/mc.jsonl line 3: gold 4 is out of range: the row has 3 choices (0 .. 2)".
//
// write_bundle(bundle, folder) writes dialect (a) to folder/bundle.json (the shape CORE users
// know, and an array keeps the tasks' order) and each task's rows to its dataset_uri (a task
// without one gets "<label>.jsonl"), each file atomically (util/atomic_file.hpp), the manifest
// last. Only the fields of a task's type are written. It refuses what read_bundle would refuse,
// so read_bundle(write_bundle(b)) == b.
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "loopscale/eval/task.hpp"
#include "loopscale/util/atomic_file.hpp"
#include "loopscale/util/json_number.hpp"
#include "loopscale/util/json_parse.hpp"
#include "loopscale/util/names.hpp"
#include "loopscale/util/text.hpp"

namespace loopscale::eval {

// A bad bundle, or a bundle that cannot be scored as asked (eval/score.hpp): bad input.
struct bundle_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

inline constexpr const char* bundle_manifest_name = "bundle.json";
// What an absent example_delimiter means (see above).
inline constexpr const char* core_example_delimiter = "\n\n";

// Field-by-field equality, for round trips and tests (task.hpp declares none; a defaulted
// comparison must live in the class, and that header is shared).
inline bool operator==(const Item& a, const Item& b) {
  return a.context == b.context && a.query == b.query && a.choices == b.choices && a.context_options == b.context_options &&
         a.continuation == b.continuation && a.gold == b.gold;
}
inline bool operator==(const Task& a, const Task& b) {
  return a.label == b.label && a.dataset_uri == b.dataset_uri && a.type == b.type && a.axis == b.axis &&
         a.num_fewshot == b.num_fewshot && a.continuation_delimiter == b.continuation_delimiter &&
         a.example_delimiter == b.example_delimiter && a.random_baseline == b.random_baseline && a.items == b.items;
}
inline bool operator==(const Bundle& a, const Bundle& b) { return a.name == b.name && a.tasks == b.tasks; }

namespace bundle_detail {

using nlohmann::json;

inline std::string in_quotes(std::string_view s) { return concat('"', s, '"'); }

// "a string", "a number", ... for "must be X, not Y" messages.
inline std::string kind_of(const json& v) {
  if (v.is_number_integer() || v.is_number_unsigned()) return "a whole number";
  if (v.is_number_float()) return "a number";
  const std::string_view t = v.type_name();
  return concat(t == "object" || t == "array" ? "an " : "a ", t);
}

// What is wrong with a row of a task of type `type`, or nothing (the gold index is checked against
// the row's choices). Shared by reading (after parsing), writing and scoring.
inline std::optional<std::string> item_problem(TaskType type, const Item& it) {
  const auto gold_problem = [&](std::size_t n, std::string_view what) -> std::optional<std::string> {
    if (it.gold < 0 || static_cast<std::uint64_t>(it.gold) >= n)
      return concat("gold ", it.gold, " is out of range: the row has ", n, ' ', what, " (0 .. ", n - 1, ')');
    return std::nullopt;
  };
  switch (type) {
    case TaskType::language_modeling:
      if (it.continuation.empty()) return std::string("continuation is empty: there is nothing to score");
      return std::nullopt;
    case TaskType::multiple_choice:
      if (it.choices.size() < 2)
        return concat("choices holds ", it.choices.size(), " string", it.choices.size() == 1 ? "" : "s", "; a question needs at least 2");
      for (std::size_t j = 0; j < it.choices.size(); ++j)
        if (it.choices[j].empty()) return concat("choices[", j, "] is empty: there is nothing to score");
      return gold_problem(it.choices.size(), "choices");
    case TaskType::schema:
      if (it.context_options.size() < 2)
        return concat("context_options holds ", it.context_options.size(), " string", it.context_options.size() == 1 ? "" : "s",
                      "; a question needs at least 2");
      if (it.continuation.empty()) return std::string("continuation is empty: there is nothing to score");
      return gold_problem(it.context_options.size(), "context_options");
  }
  return std::nullopt;
}

// The fields a row of each type must have, for "missing field" messages.
inline std::string_view fields_of(TaskType type) {
  switch (type) {
    case TaskType::language_modeling: return "context, continuation";
    case TaskType::multiple_choice: return "query, choices, gold";
    case TaskType::schema: return "context_options, continuation, gold";
  }
  return "";
}

// One row from its JSON; `where` ("eval: FILE line N") starts every message.
inline Item parse_item(TaskType type, const json& row, const std::string& where) {
  const auto fail = [&](const std::string& what) { return bundle_error(concat(where, ": ", what)); };
  if (!row.is_object()) throw fail(concat("a row must be a JSON object, not ", kind_of(row)));
  const auto field = [&](const char* name) -> const json& {
    const auto f = row.find(name);
    if (f == row.end()) throw fail(concat("missing field \"", name, "\" (a ", name_of(type), " row has ", fields_of(type), ')'));
    return *f;
  };
  const auto text = [&](const char* name) {
    const json& v = field(name);
    if (!v.is_string()) throw fail(concat(name, " must be a string, not ", kind_of(v)));
    return v.get<std::string>();
  };
  const auto texts = [&](const char* name) {
    const json& v = field(name);
    if (!v.is_array()) throw fail(concat(name, " must be an array of strings, not ", kind_of(v)));
    std::vector<std::string> out;
    for (std::size_t j = 0; j < v.size(); ++j) {
      if (!v[j].is_string()) throw fail(concat(name, '[', j, "] must be a string, not ", kind_of(v[j])));
      out.push_back(v[j].get<std::string>());
    }
    return out;
  };
  const auto index = [&](const char* name) {
    const json& v = field(name);
    if (!v.is_number() || !json_whole<std::int64_t>(v))
      throw fail(v.is_number_integer() || v.is_number_unsigned() ? concat(name, " ", v.dump(), " is too large")
                                                                 : concat(name, " must be a whole number, not ", kind_of(v)));
    return v.get<std::int64_t>();
  };
  Item it;
  switch (type) {
    case TaskType::language_modeling:
      it.context = text("context");
      it.continuation = text("continuation");
      break;
    case TaskType::multiple_choice:
      it.query = text("query");
      it.choices = texts("choices");
      it.gold = index("gold");
      break;
    case TaskType::schema:
      it.context_options = texts("context_options");
      it.continuation = text("continuation");
      it.gold = index("gold");
      break;
  }
  if (auto p = item_problem(type, it)) throw fail(*p);
  return it;
}

// The row of an item as written: only its type's fields.
inline json row_json(TaskType type, const Item& it) {
  switch (type) {
    case TaskType::language_modeling: return {{"context", it.context}, {"continuation", it.continuation}};
    case TaskType::multiple_choice: return {{"query", it.query}, {"choices", it.choices}, {"gold", it.gold}};
    case TaskType::schema: return {{"context_options", it.context_options}, {"continuation", it.continuation}, {"gold", it.gold}};
  }
  return json::object();
}

// A dataset_uri names a file inside the bundle's folder: relative, never above it. Read and write
// keep the same rule, so a manifest cannot send the reader to /dev/zero or another folder's files.
inline bool inside_folder(const std::string& uri) {
  const std::filesystem::path rel = std::filesystem::path(uri).lexically_normal();
  return !rel.empty() && !rel.is_absolute() && *rel.begin() != ".." && rel.has_filename();
}

inline std::string read_file(const std::filesystem::path& path) {
  // Only regular files: a FIFO or a device would block or never end.
  if (std::error_code ec; std::filesystem::exists(path, ec) && !std::filesystem::is_regular_file(path, ec))
    throw bundle_error(concat("eval: cannot read ", path.string(), ": not a regular file"));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw bundle_error(concat("eval: cannot read ", path.string(), ": ", std::generic_category().message(errno)));
  std::string s;
  char buf[1 << 16];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, n);
  const bool bad = std::ferror(f) != 0;
  std::fclose(f);
  if (bad) throw bundle_error(concat("eval: cannot read ", path.string()));
  return s;
}

// The rows of a JSONL file; an empty file (or only blank lines) is an error too, as a task of no
// rows has no accuracy.
inline std::vector<Item> read_rows(const std::filesystem::path& path, TaskType type) {
  if (std::error_code ec; std::filesystem::is_directory(path, ec))
    throw bundle_error(concat("eval: cannot read ", path.string(), ": it is a folder, not a JSONL file"));
  const std::string text = read_file(path);
  std::vector<Item> items;
  std::size_t pos = 0;
  std::int64_t line = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    const std::string_view s(text.data() + pos, end - pos);
    pos = end + 1;
    ++line;
    if (s.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    const std::string where = concat("eval: ", path.string(), " line ", line);
    json row;
    try {
      row = parse_json_bounded<bundle_error>(std::string(s), where);  // a key twice is an error, not its last value
    } catch (const json::out_of_range&) {  // 1e400
      throw bundle_error(concat(where, ": a number beyond the range of a double"));
    } catch (const json::exception&) {
      throw bundle_error(concat(where, ": not a JSON object (the line is not JSON)"));
    }
    items.push_back(parse_item(type, row, where));
  }
  if (items.empty()) throw bundle_error(concat("eval: ", path.string(), " holds no rows"));
  return items;
}

// The manifest's JSON; a key given twice in one object (a label twice in "tasks", say) is an
// error (parse_json_bounded), where nlohmann would keep the last silently.
inline json parse_manifest(const std::filesystem::path& path) {
  json m;
  try {
    m = parse_json_bounded<bundle_error>(read_file(path), concat("eval: ", path.string()));
  } catch (const json::out_of_range&) {  // 1e400
    throw bundle_error(concat("eval: ", path.string(), ": a number beyond the range of a double"));
  } catch (const json::exception&) {
    throw bundle_error(concat("eval: ", path.string(), " is not JSON"));
  }
  if (!m.is_object()) throw bundle_error(concat("eval: ", path.string(), " must hold a JSON object, not ", kind_of(m)));
  return m;
}

// One task's entry of either dialect. `where` ("eval: MANIFEST: icl_tasks[2]") starts messages;
// `label`/`axis` are given by dialect (b) and read from the entry in dialect (a).
inline Task parse_task(const json& e, const std::string& where_entry, std::optional<std::string> label, std::optional<Axis> axis,
                       const std::filesystem::path& base) {
  if (!e.is_object()) throw bundle_error(concat(where_entry, ": a task must be a JSON object, not ", kind_of(e)));
  std::string where = where_entry;
  const auto fail = [&](const std::string& what) { return bundle_error(concat(where, ": ", what)); };
  const auto find = [&](const char* name) -> const json* {
    const auto f = e.find(name);
    return f == e.end() ? nullptr : &*f;
  };
  const auto text = [&](const char* name, const json& v) {
    if (!v.is_string()) throw fail(concat(name, " must be a string, not ", kind_of(v)));
    return v.get<std::string>();
  };
  const auto required = [&](const char* name) -> const json& {
    if (const json* v = find(name)) return *v;
    throw fail(concat("missing field \"", name, '"'));
  };

  Task t;
  if (label) {
    t.label = *label;
  } else {
    t.label = text("label", required("label"));
  }
  if (t.label.empty()) throw fail("label is empty");
  where = concat(where_entry, " (", in_quotes(t.label), ')');

  t.dataset_uri = text("dataset_uri", required("dataset_uri"));
  if (t.dataset_uri.empty()) throw fail("dataset_uri is empty");
  if (!inside_folder(t.dataset_uri))
    throw fail(concat("dataset_uri ", in_quotes(t.dataset_uri), " is not a file inside the bundle's folder (relative, no ..)"));

  const json* type = find("icl_task_type");
  const json* alias = find("task_type");
  if (type && alias && *type != *alias) throw fail("icl_task_type and task_type differ; give one");
  if (!type) type = alias;
  if (!type) throw fail("missing field \"icl_task_type\"");
  const std::string type_name = text("icl_task_type", *type);
  const auto parsed_type = parse_name<TaskType>(type_name);
  if (!parsed_type) throw fail(concat("icl_task_type ", in_quotes(type_name), " is not one of ", name_choices<TaskType>()));
  t.type = *parsed_type;

  if (const json* k = find("num_fewshot")) {
    const json* v = k;
    if (k->is_array()) {
      if (k->size() != 1)
        throw fail(concat("num_fewshot lists ", k->size(), " values (", k->dump(), "); a task is evaluated with one: give one value ",
                          "(e.g. \"num_fewshot\": 0) and a task, with its own label, per further value"));
      v = &(*k)[0];
    }
    if (!v->is_number() || !json_whole<std::int64_t>(*v) || v->get<std::int64_t>() < 0)
      throw fail(concat("num_fewshot must be a whole number >= 0 (or a list of one), not ", v->is_number() ? v->dump() : kind_of(*v)));
    t.num_fewshot = v->get<std::int64_t>();
  }
  t.continuation_delimiter = " ";
  if (const json* v = find("continuation_delimiter")) t.continuation_delimiter = text("continuation_delimiter", *v);
  t.example_delimiter = core_example_delimiter;
  if (const json* v = find("example_delimiter")) t.example_delimiter = text("example_delimiter", *v);

  const json* entry_axis = find("axis");
  if (axis) {
    if (entry_axis && (!entry_axis->is_string() || parse_name<Axis>(entry_axis->get<std::string>()) != axis))
      throw fail(concat("axis ", entry_axis->dump(), " differs from its group ", in_quotes(name_of(*axis))));
    t.axis = *axis;
  } else {
    const std::string a = text("axis", required("axis"));
    const auto parsed_axis = parse_name<Axis>(a);
    if (!parsed_axis) throw fail(concat("axis ", in_quotes(a), " is not one of ", name_choices<Axis>()));
    t.axis = *parsed_axis;
  }

  const json* frac = find("random_baseline");
  const json* pct = find("random_baseline_percent");
  if (frac && pct) throw fail("give random_baseline (a fraction) or random_baseline_percent, not both");
  if (!frac && !pct)
    throw fail("missing field \"random_baseline\" (chance accuracy as a fraction, e.g. 0.25; or random_baseline_percent, e.g. 25.0)");
  const json& b = frac ? *frac : *pct;
  const char* bname = frac ? "random_baseline" : "random_baseline_percent";
  if (!b.is_number()) throw fail(concat(bname, " must be a number, not ", kind_of(b)));
  const double x = b.get<double>();
  if (frac && !(x >= 0 && x < 1))
    throw fail(concat("random_baseline ", b.dump(), " is not a fraction in [0, 1)",
                      x >= 1 && x < 100 ? "; for CORE's percent (eval_meta_data.csv's 25.0) write random_baseline_percent" : ""));
  if (pct && !(x >= 0 && x < 100)) throw fail(concat("random_baseline_percent ", b.dump(), " is not in [0, 100)"));
  t.random_baseline = frac ? x : x / 100.0;

  const std::filesystem::path file = base / t.dataset_uri;
  t.items = read_rows(file, t.type);
  if (static_cast<std::uint64_t>(t.num_fewshot) >= t.items.size())
    throw fail(concat("num_fewshot ", t.num_fewshot, " needs at least ", t.num_fewshot + 1, " rows (few-shot examples are other rows); ",
                      file.string(), " has ", t.items.size()));
  return t;
}

}  // namespace bundle_detail

// What is wrong with a task as data (labels aside), or nothing: its rows, its few-shot count
// against them, its baseline. eval/score.hpp asks it of bundles built in code.
inline std::optional<std::string> task_problem(const Task& t) {
  if (t.label.empty()) return std::string("the label is empty");
  if (t.items.empty()) return concat("task ", bundle_detail::in_quotes(t.label), " has no rows");
  for (std::size_t i = 0; i < t.items.size(); ++i)
    if (auto p = bundle_detail::item_problem(t.type, t.items[i])) return concat("task ", bundle_detail::in_quotes(t.label), " row ", i + 1, ": ", *p);
  if (t.num_fewshot < 0 || static_cast<std::uint64_t>(t.num_fewshot) >= t.items.size())
    return concat("task ", bundle_detail::in_quotes(t.label), ": num_fewshot ", t.num_fewshot, " needs 0 .. ", t.items.size() - 1,
                  " (few-shot examples are other rows of its ", t.items.size(), ')');
  if (!(t.random_baseline >= 0 && t.random_baseline < 1))
    return concat("task ", bundle_detail::in_quotes(t.label), ": random_baseline is not a fraction in [0, 1)");
  return std::nullopt;
}

// Reads a bundle from a folder (its bundle.json) or from a manifest file; see the top of the file.
inline Bundle read_bundle(const std::filesystem::path& where) {
  namespace fs = std::filesystem;
  using bundle_detail::json;
  using bundle_detail::in_quotes;
  std::error_code ec;
  const bool is_dir = fs::is_directory(where, ec);
  const fs::path manifest = is_dir ? where / bundle_manifest_name : where;
  const fs::path base = manifest.parent_path();
  const json m = bundle_detail::parse_manifest(manifest);
  const std::string at = concat("eval: ", manifest.string());

  Bundle b;
  if (const auto n = m.find("name"); n != m.end()) {
    if (!n->is_string()) throw bundle_error(concat(at, ": name must be a string, not ", bundle_detail::kind_of(*n)));
    b.name = n->get<std::string>();
  } else {
    const fs::path folder = fs::absolute(manifest, ec).lexically_normal().parent_path();
    b.name = is_dir || manifest.filename() == bundle_manifest_name ? folder.filename().string() : manifest.stem().string();
  }

  const bool a = m.contains("icl_tasks"), grouped = m.contains("groups") || m.contains("tasks");
  if (a && grouped) throw bundle_error(concat(at, ": holds both icl_tasks and groups/tasks; use one dialect"));
  if (a) {
    const json& list = m["icl_tasks"];
    if (!list.is_array()) throw bundle_error(concat(at, ": icl_tasks must be an array of tasks, not ", bundle_detail::kind_of(list)));
    std::map<std::string, std::size_t> seen;
    for (std::size_t i = 0; i < list.size(); ++i) {
      const std::string entry = concat(at, ": icl_tasks[", i, ']');
      Task t = bundle_detail::parse_task(list[i], entry, std::nullopt, std::nullopt, base);
      if (const auto [it, fresh] = seen.emplace(t.label, i); !fresh)
        throw bundle_error(concat(entry, ": label ", in_quotes(t.label), " is used twice (icl_tasks[", it->second, "] and [", i, "])"));
      b.tasks.push_back(std::move(t));
    }
  } else if (grouped) {
    if (!m.contains("groups") || !m.contains("tasks"))
      throw bundle_error(concat(at, ": the grouped dialect needs both \"groups\" (axis: [labels]) and \"tasks\" (label: task)"));
    const json& groups = m["groups"];
    const json& tasks = m["tasks"];
    if (!groups.is_object()) throw bundle_error(concat(at, ": groups must be an object (axis: [labels]), not ", bundle_detail::kind_of(groups)));
    if (!tasks.is_object()) throw bundle_error(concat(at, ": tasks must be an object (label: task), not ", bundle_detail::kind_of(tasks)));
    std::vector<std::pair<Axis, std::vector<std::string>>> order;
    std::map<std::string, std::string> group_of;
    for (const auto& [axis_name, labels] : groups.items()) {
      const auto axis = parse_name<Axis>(axis_name);
      if (!axis) throw bundle_error(concat(at, ": groups: axis ", in_quotes(axis_name), " is not one of ", name_choices<Axis>()));
      if (!labels.is_array()) throw bundle_error(concat(at, ": groups.", axis_name, " must be an array of labels, not ", bundle_detail::kind_of(labels)));
      std::vector<std::string> ls;
      for (const json& l : labels) {
        if (!l.is_string()) throw bundle_error(concat(at, ": groups.", axis_name, " must list labels (strings), not ", bundle_detail::kind_of(l)));
        const std::string label = l.get<std::string>();
        if (const auto [it, fresh] = group_of.emplace(label, axis_name); !fresh)
          throw bundle_error(concat(at, ": groups: label ", in_quotes(label), " is listed twice (in ", it->second, " and ", axis_name, ')'));
        if (!tasks.contains(label)) throw bundle_error(concat(at, ": groups.", axis_name, ": label ", in_quotes(label), " has no entry in tasks"));
        ls.push_back(label);
      }
      order.emplace_back(*axis, std::move(ls));
    }
    for (const auto& [label, e] : tasks.items())
      if (!group_of.contains(label)) throw bundle_error(concat(at, ": tasks.", label, " is in no group (groups: axis -> [labels])"));
    std::stable_sort(order.begin(), order.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (const auto& [axis, labels] : order)
      for (const std::string& label : labels)
        b.tasks.push_back(bundle_detail::parse_task(tasks[label], concat(at, ": tasks.", label), label, axis, base));
  } else {
    throw bundle_error(concat(at, ": lists no tasks: give \"icl_tasks\": [...] or \"groups\" and \"tasks\" (see eval/bundle.hpp)"));
  }
  if (b.tasks.empty()) throw bundle_error(concat(at, ": lists no tasks"));
  return b;
}

// Writes `b` into the folder `dir` (made if missing) as dialect (a) plus one JSONL per task; see
// the top of the file. A bundle read_bundle would refuse is refused before anything is written.
inline void write_bundle(const Bundle& b, const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  using bundle_detail::json;
  using bundle_detail::in_quotes;
  const std::string at = concat("eval: cannot write the bundle to ", dir.string());
  if (b.tasks.empty()) throw bundle_error(concat(at, ": it has no tasks"));
  std::set<std::string> labels;
  std::map<std::string, const Task*> file_of;  // dataset_uri -> the first task writing it
  std::vector<std::pair<fs::path, const Task*>> files;
  json list = json::array();
  for (const Task& t : b.tasks) {
    if (auto p = task_problem(t)) throw bundle_error(concat(at, ": ", *p));
    if (!labels.insert(t.label).second) throw bundle_error(concat(at, ": label ", in_quotes(t.label), " is used twice"));
    const std::string uri = t.dataset_uri.empty() ? concat(t.label, ".jsonl") : t.dataset_uri;
    const fs::path rel = fs::path(uri).lexically_normal();
    if (!bundle_detail::inside_folder(uri))
      throw bundle_error(concat(at, ": task ", in_quotes(t.label), ": dataset_uri ", in_quotes(uri), " is not a file inside the folder"));
    if (const auto [it, fresh] = file_of.emplace(rel.string(), &t); !fresh) {
      if (it->second->type != t.type || !(it->second->items == t.items))
        throw bundle_error(concat(at, ": tasks ", in_quotes(it->second->label), " and ", in_quotes(t.label), " both write ", in_quotes(uri),
                                  " with different rows"));
    } else {
      files.emplace_back(dir / rel, &t);
    }
    json e = {{"label", t.label},
              {"dataset_uri", uri},
              {"icl_task_type", std::string(name_of(t.type))},
              {"num_fewshot", t.num_fewshot},
              {"continuation_delimiter", t.continuation_delimiter},
              {"example_delimiter", t.example_delimiter},
              {"axis", std::string(name_of(t.axis))},
              {"random_baseline", t.random_baseline}};
    list.push_back(std::move(e));
  }
  // Rendered in full before anything is written: a string that is not UTF-8 fails here.
  std::vector<std::string> contents;
  for (const auto& [path, t] : files) {
    std::string s;
    for (std::size_t i = 0; i < t->items.size(); ++i) {
      try {
        s += bundle_detail::row_json(t->type, t->items[i]).dump();
      } catch (const json::exception&) {
        throw bundle_error(concat(at, ": task ", in_quotes(t->label), " row ", i + 1, " holds text that is not UTF-8 (JSON cannot carry it)"));
      }
      s += '\n';
    }
    contents.push_back(std::move(s));
  }
  std::string manifest;
  try {
    manifest = json{{"name", b.name}, {"icl_tasks", list}}.dump(2) + "\n";
  } catch (const json::exception&) {
    throw bundle_error(concat(at, ": a name, label or delimiter is not UTF-8 (JSON cannot carry it)"));
  }
  std::error_code ec;
  const auto refuse_folder = [&](const fs::path& f) {  // before any file is written
    if (fs::is_directory(f, ec)) throw bundle_error(concat(at, ": ", f.string(), " is a folder; write the bundle into another folder"));
  };
  for (const auto& [path, t] : files) refuse_folder(path);
  refuse_folder(dir / bundle_manifest_name);
  for (std::size_t i = 0; i < files.size(); ++i) {
    fs::create_directories(files[i].first.parent_path(), ec);
    if (ec) throw file_write_error(concat("eval: cannot make the folder ", files[i].first.parent_path().string(), ": ", ec.message()));
    write_file_atomic(files[i].first, contents[i]);
  }
  write_file_atomic(dir / bundle_manifest_name, manifest);
}

}  // namespace loopscale::eval
