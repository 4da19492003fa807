// Fuzzes a sweep's results.jsonl reader (sweep/results.hpp read_lines, read_results,
// results_by_id), what `loopscale sweep report|merge|run` read from a sweep folder. The reader
// takes a path, so the input goes through a temporary file. Promise: every bad input is a
// sweep::sweep_error.
#include "fuzz_common.hpp"
#include "loopscale/sweep/results.hpp"

namespace fuzz_results_jsonl {

using namespace loopscale::sweep;

inline int one(const std::uint8_t* data, std::size_t size) {
  const loopscale_fuzz::TempFile file(data, size, ".results.jsonl");
  try {
    const std::vector<RunResult> results = read_results(file.path());
    results_by_id(results, file.path());
  } catch (const sweep_error&) {
  }
  return 0;
}

}  // namespace fuzz_results_jsonl

#ifndef LOOPSCALE_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return fuzz_results_jsonl::one(data, size); }
#endif
