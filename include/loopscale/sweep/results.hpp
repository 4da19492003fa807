// results.jsonl: one JSON object per finished run, the only record a sweep's analysis reads.
// Appending rewrites the file to a temporary beside it and renames it over the old one
// (write_file_atomic), so a kill at any moment leaves either the old file or the new one, never a
// torn line. That costs O(n) per append, which is nothing next to training a run; concurrent
// writers must use separate files (shards do: results.shard-I-of-N.jsonl), each owned by one
// process through its lock (run.hpp). A torn last line all the same (ResultsFile below) is left
// out with a warning by readers and set aside by the writer.
//
// A line: {"sweep": fingerprint, "id", "index", "C", "r", "s", "d_model", "N_once", "N_rec", "N",
//          "N_unrolled", "F", "D", "loss", "summary": {the engine's summary.json}}
// with D the tokens actually trained and loss the validation loss (nats per token). Runs of an MoE
// sweep add the looped-MoE law's variables (plan.hpp, moe_columns): "E", "K", "R", "N_act",
// "N_loop", "N_total", "m", "N_unroll".
#pragma once

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "loopscale/sweep/plan.hpp"
#include "loopscale/util/atomic_file.hpp"
#include "loopscale/util/json_parse.hpp"
#include "loopscale/util/regular_file.hpp"

namespace loopscale::sweep {

namespace fs = std::filesystem;

// One finished run as the analysis sees it.
struct RunResult {
  std::string sweep;  // the spec's fingerprint
  std::string id;
  double budget = 0;  // C
  int64 r = 1;
  int64 s = 0;
  int64 d_model = 0;
  double n_once = 0, n_rec = 0, n = 0, n_unrolled = 0;
  double flops_per_token = 0;
  double tokens = 0;  // D
  double loss = 0;
  // MoE sweeps only (experts == 0: a dense run): E, K and the active counts of plan.hpp's moe_columns.
  int64 experts = 0, top_k = 0;
  double n_act = 0, n_loop = 0, n_total = 0, m = 1;
  nlohmann::json line;  // the whole line, as read
  std::string where;    // "FILE:LINE" it was read from (read_results); empty: not read from a file
};

inline RunResult result_from_json(const nlohmann::json& j) {
  RunResult r;
  // get<int64>() of a float out of range is undefined behaviour (util/json_number.hpp).
  for (const char* k : {"r", "s", "d_model", "E", "K"})
    if (j.is_object() && j.contains(k) && !json_whole<int64>(j.at(k)))
      throw sweep_error(fmt::format("result line: '{}' must be a whole number, got {}: {}", k, j.at(k).dump(), j.dump().substr(0, 200)));
  try {
    r.sweep = j.value("sweep", std::string{});
    r.id = j.at("id").get<std::string>();
    r.budget = j.at("C").get<double>();
    r.r = j.at("r").get<int64>();
    r.s = j.value("s", int64{0});
    r.d_model = j.value("d_model", int64{0});
    r.n_once = j.at("N_once").get<double>();
    r.n_rec = j.at("N_rec").get<double>();
    r.n = j.value("N", r.n_once + r.n_rec);
    r.n_unrolled = j.value("N_unrolled", r.n_once + static_cast<double>(r.r) * r.n_rec);
    r.flops_per_token = j.value("F", 0.0);
    r.tokens = j.at("D").get<double>();
    r.loss = j.at("loss").get<double>();
    if (j.contains("E")) {
      r.experts = j.at("E").get<int64>();
      r.top_k = j.at("K").get<int64>();
      r.n_act = j.at("N_act").get<double>();
      r.n_loop = j.at("N_loop").get<double>();
      r.n_total = j.at("N_total").get<double>();
      r.m = j.at("m").get<double>();
    }
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's text without its tag (json_error_text), and the line in brief: a train log given
    // as results dumped a few hundred characters of it.
    throw sweep_error(fmt::format("result line lacks a field or has a wrong type ({}): not a line of sweep results? {}", json_error_text(e),
                                  json_brief(j)));
  }
  // What the fits read: an infinite loss printed R^2 -nan and a shifted phi without a word.
  for (const auto& [k, v] : {std::pair<const char*, double>{"C", r.budget}, {"N_once", r.n_once}, {"N_rec", r.n_rec}, {"D", r.tokens}, {"loss", r.loss}})
    if (const bool positive = std::string_view(k) == "loss";  // counts may be 0 (a planned run too large to run has D 0)
        !std::isfinite(v) || v < 0 || (positive && v == 0))
      throw sweep_error(fmt::format("result line: '{}' = {} is not a finite, {} number: {}", k, v, positive ? "positive" : "non-negative",
                                    j.dump().substr(0, 200)));
  if (r.r < 1) throw sweep_error(fmt::format("result line: 'r' = {} is not a number of recurrences: {}", r.r, j.dump().substr(0, 200)));
  r.line = j;
  return r;
}

// The line written for a run the engine finished; `summary` is what the RunFn returned. The
// loss is the summary's val_loss; D its trained tokens when it reports them, else the plan's.
inline nlohmann::json result_line(const Plan& plan, const PlannedRun& run, const nlohmann::json& summary) {
  if (!summary.is_object() || !summary.contains("val_loss") || !summary.at("val_loss").is_number())
    throw std::runtime_error(fmt::format("run {}: the engine's summary has no numeric val_loss: {}", run.id, summary.dump().substr(0, 200)));
  const ParamCounts& p = run.acct.params;
  const double trained = summary.contains("tokens") && summary.at("tokens").is_number()
                             ? summary.at("tokens").get<double>()
                             : static_cast<double>(run.steps) * static_cast<double>(plan.spec.batch_tokens);
  nlohmann::json line = run_columns(run);
  line.update({{"sweep", plan.fingerprint}, {"D", trained}, {"loss", summary.at("val_loss").get<double>()}, {"summary", summary}});
  if (run.experts > 0) line.update(moe_columns(p, run.r, run.experts, run.top_k));
  return line;
}

// A results file as read: its whole lines, and its last line when that one is torn.
//
// loopscale replaces these files atomically, so a torn line means something else went wrong: a
// power loss on a file system that reorders data and rename (the tail then reads as NUL bytes or
// is cut short), a copy that was interrupted, another program appending. Only the LAST line can be
// torn that way, and the run it named is not lost: `sweep run` records it again from
// runs/ID/result.json or trains it again. So a bad last line that can be a result line cut short
// (looks_torn: it begins with '{' but has no newline at its end, is not JSON or lacks a result's
// fields; or it is NUL bytes only) is set aside with a warning, never merged or fitted. Any other
// bad line, last or not, is an error naming file:line: no crash explains it, and a file of text or
// binary junk must not pass for a results file whose one line was torn.
struct ResultsFile {
  std::vector<nlohmann::json> lines;
  std::vector<int> numbers;  // line number of each of `lines` (from 1)
  std::string torn;          // the bad last line, as it was (empty: none)
  int torn_number = 0;
  std::string torn_reason;   // why it counts as torn
  std::string whole_text;    // the file's text without the torn line (what a repair writes)
};

// Whether a bad last line can be a result line cut short: it begins as every result line does,
// with '{', or it is NUL bytes only (the data that never reached the disk before a power loss).
inline bool looks_torn(std::string_view line) {
  const std::size_t first = line.find_first_not_of(" \t");
  if (first != std::string_view::npos && line[first] == '{') return true;
  return line.find_first_not_of('\0') == std::string_view::npos;
}

inline ResultsFile parse_results_file(const fs::path& file) {
  ResultsFile f;
  if (const std::string why = not_a_file(file); !why.empty()) throw sweep_error(why);
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    if (fs::exists(file)) throw sweep_error("cannot read " + file.string());
    return f;
  }
  std::ostringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  // [begin, end) of each non-empty line, and whether a newline ended it.
  struct Span {
    std::size_t begin, end;
    bool newline;
    int number;
  };
  std::vector<Span> spans;
  int number = 0;
  for (std::size_t pos = 0; pos < text.size();) {
    const std::size_t nl = text.find('\n', pos);
    const std::size_t end = nl == std::string::npos ? text.size() : nl;
    ++number;
    if (end > pos) spans.push_back({pos, end, nl != std::string::npos, number});
    pos = end + 1;
  }
  for (std::size_t i = 0; i < spans.size(); ++i) {
    const Span& sp = spans[i];
    const std::string line = text.substr(sp.begin, sp.end - sp.begin);
    const bool last = i + 1 == spans.size();
    std::string problem;
    nlohmann::json j;
    try {
      j = parse_json_bounded<sweep_error>(line, "");
    } catch (const nlohmann::json::out_of_range&) {  // 1e400
      problem = "a number beyond the range of a double";
    } catch (const nlohmann::json::exception&) {
      problem = "not a JSON line";
    } catch (const sweep_error& e) {  // a key twice (nlohmann would keep the last) or absurd nesting
      problem = std::string(e.what()).substr(2);
    }
    if (problem.empty()) {
      // Every JSON line must be a result. The last may be one cut short (torn, below); one before
      // it is an error here, so another program's JSONL given as a results file is refused at its
      // first line, before its last could be warned about as torn.
      try {
        result_from_json(j);
      } catch (const sweep_error& e) {
        if (!last) throw sweep_error(fmt::format("{}:{}: {}", file.string(), sp.number, e.what()));
        problem = "not a whole result (fields missing)";
      }
      if (problem.empty() && last && !sp.newline) problem = "no newline at its end";
    }
    if (problem.empty()) {
      f.lines.push_back(std::move(j));
      f.numbers.push_back(sp.number);
    } else if (last && looks_torn(line)) {
      f.torn = line;
      f.torn_number = sp.number;
      f.torn_reason = problem;
      f.whole_text = text.substr(0, sp.begin);
    } else {
      throw sweep_error(fmt::format("{}:{}: {}", file.string(), sp.number, problem));
    }
  }
  if (f.torn.empty()) f.whole_text = text;
  return f;
}

inline std::string torn_warning(const fs::path& file, const ResultsFile& f) {
  return fmt::format("loopscale: warning: {}:{}: the last line is torn ({}): left out; its run is recorded again from runs/ID/result.json "
                     "or trained again by the next `sweep run`\n",
                     file.string(), f.torn_number, f.torn_reason);
}

// Every whole line of a results file, in order; a missing file is an empty list. A torn last line
// is left out with a warning on `warn` (nullptr: none); any other bad line is an error naming the
// file and line.
inline std::vector<nlohmann::json> read_lines(const fs::path& file, std::ostream* warn = &std::cerr) {
  ResultsFile f = parse_results_file(file);
  if (!f.torn.empty() && warn) *warn << torn_warning(file, f) << std::flush;
  return std::move(f.lines);
}

inline std::vector<RunResult> read_results(const fs::path& file, std::ostream* warn = &std::cerr) {
  ResultsFile f = parse_results_file(file);
  if (!f.torn.empty() && warn) *warn << torn_warning(file, f) << std::flush;
  std::vector<RunResult> out;
  for (std::size_t i = 0; i < f.lines.size(); ++i) {  // each line passed result_from_json in parse_results_file
    out.push_back(result_from_json(f.lines[i]));
    out.back().where = fmt::format("{}:{}", file.string(), f.numbers[i]);
  }
  return out;
}

// Checks that results belong to `plan`: each line of the plan's sweep (fingerprint), its id a
// planned run's, and every field the plan determines (run_columns, and an MoE run's moe_columns)
// that the line carries equal to the plan's value. The fingerprint covers the spec, not the lines:
// a line edited by hand or by a script (r 1 made 8) or a run id the plan does not have was fitted
// and counted as what it claimed. Lines written before a column existed lack it, which is fine; a
// column present with another value is refused, naming file:line, the run and the field. Values
// compare exactly: result_line writes the plan's own numbers (doubles included), and JSON text keeps
// a double's value through a dump and a parse. Throws sweep_error; `sweep run` (resume), merge and
// the report's finished_runs call it on everything they read.
inline void check_against_plan(const std::vector<RunResult>& results, const Plan& plan) {
  std::map<std::string_view, const PlannedRun*> planned;
  for (const PlannedRun& p : plan.runs) planned.emplace(p.id, &p);
  for (const RunResult& r : results) {
    const std::string at = r.where.empty() ? std::string{} : r.where + ": ";
    if (r.sweep != plan.fingerprint)
      throw sweep_error(fmt::format("{}run {} is from sweep {}, not {} ('{}'): spec mismatch", at, r.id, r.sweep, plan.fingerprint,
                                    plan.spec.name));
    const auto it = planned.find(r.id);
    if (it == planned.end()) throw sweep_error(fmt::format("{}run {} is not in the plan of sweep '{}'", at, r.id, plan.spec.name));
    const PlannedRun& p = *it->second;
    nlohmann::json expected = run_columns(p);
    // A dense run has none of the MoE columns: a line of a dense sweep that carries one is refused too.
    const nlohmann::json moe = moe_columns(p.acct.params, p.r, std::max<int64>(p.experts, 1), std::max<int64>(p.top_k, 1));
    for (const auto& [k, v] : moe.items()) expected[k] = p.experts > 0 ? v : nullptr;
    for (const auto& [k, v] : expected.items())
      if (r.line.contains(k) && r.line.at(k) != v)
        throw sweep_error(v.is_null() ? fmt::format("{}run {} has {} {} where the plan is a dense sweep, without {}", at, r.id, k,
                                                    json_brief(r.line.at(k)), k)
                                      : fmt::format("{}run {} has {} {} where the plan says {}", at, r.id, k, json_brief(r.line.at(k)), v.dump()));
  }
}

// The results files in a folder: results.jsonl and results.shard-*-of-*.jsonl.
inline std::vector<fs::path> results_files(const fs::path& dir) {
  std::vector<fs::path> out;
  if (!fs::is_directory(dir)) throw sweep_error(dir.string() + " is not a folder");
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.is_regular_file() && (name == "results.jsonl" || (name.rfind("results.shard-", 0) == 0 && e.path().extension() == ".jsonl")))
      out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Checks that results were trained on one corpus: every line that records its corpus (the digest
// of data::corpus_digest, written by run_sweep since 5 December 2026) records the same one, and,
// with `corpus` given (the --data of a `sweep run`), that one. Shards run with different --data,
// or a sweep resumed on another corpus, gave a fit over runs of two corpora without a word. Lines
// written before the record existed are accepted as they are. Throws sweep_error naming two runs
// (or the run and --data) and their corpora.
inline void check_one_corpus(const std::vector<RunResult>& results, const std::string& corpus = {}, const std::string& data = {}) {
  const RunResult* first = nullptr;
  for (const RunResult& r : results) {
    const auto it = r.line.find("corpus");
    if (it == r.line.end()) continue;
    const std::string at = r.where.empty() ? r.id : r.id + " (" + r.where + ")";
    if (!it->is_string()) throw sweep_error(fmt::format("run {}: its corpus must be a digest string, not {}", at, json_brief(*it)));
    if (!corpus.empty() && *it != corpus)
      throw sweep_error(fmt::format("run {} was trained on corpus {}, and --data {} is {}: give the corpus its runs were trained on, or "
                                    "another --out", at, json_brief(*it), data, corpus));
    if (!first) {
      first = &r;
    } else if (*it != first->line.at("corpus")) {
      const std::string at0 = first->where.empty() ? first->id : first->id + " (" + first->where + ")";
      throw sweep_error(fmt::format("runs of two corpora: {} was trained on {}, {} on {}; one fit needs one corpus", at0,
                                    json_brief(first->line.at("corpus")), at, json_brief(*it)));
    }
  }
}

// The atomic replacement every sweep file goes through (util/atomic_file.hpp); a failure is a
// file_write_error, a std::runtime_error naming the file and the reason.
using loopscale::write_file_atomic;

// Moves a torn last line (see ResultsFile) out of a results file: into FILE.torn-TIME-PID, then
// the file is replaced without it (both atomic). Only the file's writer may do this (under its
// lock: run.hpp); readers just leave the line out. Returns whether a line was set aside.
inline bool set_aside_torn(const fs::path& file, std::ostream* log = &std::cerr) {
  const ResultsFile f = parse_results_file(file);
  if (f.torn.empty()) return false;
  char stamp[32] = {};
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  const fs::path aside = file.string() + ".torn-" + stamp + "-" + std::to_string(::getpid());
  write_file_atomic(aside, f.torn + "\n");
  write_file_atomic(file, f.whole_text);
  if (log)
    *log << fmt::format("loopscale: warning: {}:{}: the last line was torn ({}); moved to {}; its run will be recorded again or retrained\n",
                        file.string(), f.torn_number, f.torn_reason, aside.string())
         << std::flush;
  return true;
}

// Appends one line (all or nothing). Refuses a second line for an id already in the file. A torn
// last line is set aside first, so that the new line never follows it.
inline void append_result(const fs::path& file, const nlohmann::json& line) {
  set_aside_torn(file);
  const ResultsFile f = parse_results_file(file);
  const std::string id = line.at("id").get<std::string>();
  for (const auto& j : f.lines)
    if (j.value("id", std::string{}) == id) throw std::logic_error("results: run " + id + " is already in " + file.string());
  std::string contents = f.whole_text;
  if (!contents.empty() && contents.back() != '\n') contents += '\n';
  contents += line.dump() + "\n";
  write_file_atomic(file, contents);
}

// Results keyed by id. Duplicate ids are an error (they mean two writers or a bad merge).
inline std::map<std::string, RunResult> results_by_id(const std::vector<RunResult>& results, const std::string& where) {
  std::map<std::string, RunResult> out;
  for (const RunResult& r : results)
    if (!out.emplace(r.id, r).second) throw sweep_error(fmt::format("{}: run {} appears twice", where, r.id));
  return out;
}

}  // namespace loopscale::sweep
