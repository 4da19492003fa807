// results.jsonl: one JSON object per finished run, the only record a sweep's analysis reads.
// Appending rewrites the file to a temporary beside it and renames it over the old one
// (write_file_atomic), so a kill at any moment leaves either the old file or the new one, never a
// torn line. That costs O(n) per append, which is nothing next to training a run; concurrent
// writers must use separate files (shards do: results.shard-I-of-N.jsonl).
//
// A line: {"sweep": fingerprint, "id", "index", "C", "r", "s", "d_model", "N_once", "N_rec", "N",
//          "N_unrolled", "F", "D", "loss", "summary": {the engine's summary.json}}
// with D the tokens actually trained and loss the validation loss (nats per token). Runs of an MoE
// sweep add the looped-MoE law's variables (plan.hpp, moe_columns): "E", "K", "R", "N_act",
// "N_loop", "N_total", "m", "N_unroll".
#pragma once

#include <fstream>
#include <filesystem>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loopscale/sweep/plan.hpp"
#include "loopscale/util/atomic_file.hpp"

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
};

inline RunResult result_from_json(const nlohmann::json& j) {
  RunResult r;
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
    throw sweep_error(fmt::format("result line lacks a field or has a wrong type ({}): {}", e.what(), j.dump().substr(0, 200)));
  }
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

// Every line of a results file, in order; a missing file is an empty list. A line that does not
// parse is an error naming the file and line: these files are only ever written whole.
inline std::vector<nlohmann::json> read_lines(const fs::path& file) {
  std::vector<nlohmann::json> out;
  std::ifstream in(file);
  if (!in) {
    if (fs::exists(file)) throw sweep_error("cannot read " + file.string());
    return out;
  }
  std::string text;
  int number = 0;
  while (std::getline(in, text)) {
    ++number;
    if (text.empty()) continue;
    try {
      out.push_back(nlohmann::json::parse(text));
    } catch (const nlohmann::json::parse_error&) {
      throw sweep_error(fmt::format("{}:{}: not a JSON line", file.string(), number));
    }
  }
  return out;
}

inline std::vector<RunResult> read_results(const fs::path& file) {
  std::vector<RunResult> out;
  for (const auto& j : read_lines(file)) out.push_back(result_from_json(j));
  return out;
}

// The atomic replacement every sweep file goes through (util/atomic_file.hpp); a failure is a
// file_write_error, a std::runtime_error naming the file and the reason.
using loopscale::write_file_atomic;

// Appends one line (all or nothing). Refuses a second line for an id already in the file.
inline void append_result(const fs::path& file, const nlohmann::json& line) {
  std::string contents;
  {
    std::ifstream in(file, std::ios::binary);
    if (in) {
      std::ostringstream ss;
      ss << in.rdbuf();
      contents = ss.str();
    }
  }
  const std::string id = line.at("id").get<std::string>();
  for (const auto& j : read_lines(file))
    if (j.value("id", std::string{}) == id) throw std::logic_error("results: run " + id + " is already in " + file.string());
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
