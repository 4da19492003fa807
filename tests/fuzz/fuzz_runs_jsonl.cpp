// Fuzzes the law's JSONL runs reader (law/runs_io.hpp read_jsonl, what `loopscale fit --runs
// FILE.jsonl` reads) and the reading of its columns as numbers. Promise: every bad input is a
// law::data_error (a line that is not JSON included).
#include <sstream>

#include "fuzz_common.hpp"
#include "fuzz_runs.hpp"

namespace fuzz_runs_jsonl {

using namespace loopscale::law;

inline int one(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(loopscale_fuzz::text_of(data, size));
  RunTable t;
  try {
    t = read_jsonl(in, "fuzz.jsonl");
  } catch (const data_error&) {
    return 0;
  }
  fuzz_runs::read_columns(t);
  return 0;
}

}  // namespace fuzz_runs_jsonl

#ifndef LOOPSCALE_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return fuzz_runs_jsonl::one(data, size); }
#endif
