// Fuzzes the law's CSV runs reader (law/runs_io.hpp read_csv) and the reading of its columns as
// numbers (law/runs.hpp RunReader), what `loopscale fit --runs FILE.csv` does. Promise: every bad
// input is a law::data_error.
#include <sstream>

#include "fuzz_common.hpp"
#include "fuzz_runs.hpp"

namespace fuzz_runs_csv {

using namespace loopscale::law;

inline int one(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(loopscale_fuzz::text_of(data, size));
  RunTable t;
  try {
    t = read_csv(in, "fuzz.csv");
  } catch (const data_error&) {
    return 0;
  }
  fuzz_runs::read_columns(t);
  return 0;
}

}  // namespace fuzz_runs_csv

#ifndef LOOPSCALE_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return fuzz_runs_csv::one(data, size); }
#endif
