// Joining the results of shards (or of separate machines' folders) into one results.jsonl. Every
// line must come from the same spec (fingerprint) and no run may appear twice: either would mean
// results that do not belong together, so both are errors rather than something to smooth over.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "loopscale/sweep/results.hpp"
#include "loopscale/sweep/run.hpp"

namespace loopscale::sweep {

struct MergeSummary {
  std::size_t files = 0;
  std::size_t runs = 0;
  std::vector<std::string> missing;  // runnable planned runs with no result anywhere
};

// Reads every results file of `inputs` (folders or files), checks them against `plan`
// (check_against_plan), and writes the union, in plan order, to `out`/results.jsonl (atomically).
// `out` may be one of the inputs; its own results.jsonl then counts as one more input. An input
// that yields no whole result line (a file, or all the results files of a folder) is refused before
// anything is written: it is a wrong path or a damaged file, and merging it would write an empty
// results.jsonl and claim OUT for the sweep as if nothing were amiss.
inline MergeSummary merge_results(const Plan& plan, const std::vector<fs::path>& inputs, const fs::path& out) {
  std::vector<std::pair<fs::path, std::vector<fs::path>>> sources;  // each input with its files
  for (const fs::path& p : inputs) {
    if (fs::is_directory(p)) {
      const auto f = results_files(p);
      if (f.empty()) throw sweep_error(p.string() + " holds no results.jsonl or results.shard-*.jsonl");
      sources.emplace_back(p, f);
    } else if (fs::is_regular_file(p)) {
      sources.emplace_back(p, std::vector<fs::path>{p});
    } else {
      throw sweep_error(fs::exists(p) ? p.string() + " is neither a results file nor a sweep folder" : p.string() + " does not exist");
    }
  }
  std::set<fs::path> seen_files;
  std::map<std::string, std::pair<RunResult, fs::path>> by_id;
  MergeSummary sum;
  for (const auto& [input, files] : sources) {
    bool any = false;  // a whole result line in this input
    for (const fs::path& f : files) {
      if (!seen_files.insert(fs::weakly_canonical(f)).second) {
        any = true;  // read already, as part of another input
        continue;
      }
      ++sum.files;
      const std::vector<RunResult> results = read_results(f);
      check_against_plan(results, plan);
      any = any || !results.empty();
      for (const RunResult& r : results) {
        const auto [it, fresh] = by_id.emplace(r.id, std::make_pair(r, f));
        if (!fresh)
          throw sweep_error(fmt::format("run {} appears twice: in {} and in {}", r.id, it->second.second.string(), f.string()));
      }
    }
    if (!any)
      throw sweep_error(fmt::format("{} holds no whole result line{}: nothing to merge from it", input.string(),
                                    fs::is_directory(input) ? " in any of its results files" : ""));
  }
  std::vector<RunResult> all;
  for (const auto& [id, rf] : by_id) all.push_back(rf.first);
  check_one_corpus(all);  // shards run on different --data
  std::string text;
  for (const PlannedRun& r : plan.runs) {
    const auto it = by_id.find(r.id);
    if (it != by_id.end()) {
      text += it->second.first.line.dump() + "\n";
      ++sum.runs;
    } else if (r.runnable()) {
      sum.missing.push_back(r.id);
    }
  }
  // Finished results are never dropped: a merged file already in OUT whose runs the inputs lack
  // (OUT itself not among them) stops the merge instead of being replaced by fewer runs.
  const fs::path merged = out / "results.jsonl";
  if (fs::exists(merged) && !seen_files.count(fs::weakly_canonical(merged))) {
    std::vector<std::string> lost;
    for (const RunResult& r : read_results(merged))
      if (!by_id.count(r.id)) lost.push_back(r.id);
    if (!lost.empty())
      throw sweep_error(fmt::format("{} holds {} run(s) the inputs do not ({}{}); list {} among the inputs to keep them, or remove the file to replace it",
                                    merged.string(), lost.size(), lost.front(), lost.size() > 1 ? ", ..." : "", out.string()));
  }
  claim_folder(out, plan);
  write_file_atomic(merged, text);
  return sum;
}

}  // namespace loopscale::sweep
