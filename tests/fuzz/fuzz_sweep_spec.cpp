// Fuzzes the reading of a sweep spec (sweep/plan.hpp from_json, validate) and its planning
// (make_plan), what `loopscale sweep plan|run SPEC.json` does. Text that is not JSON is the
// caller's to report (any nlohmann::json::exception of the parse); from a parsed document on, the
// promise is that every bad spec is an std::invalid_argument (sweep_error, or spec_error from a
// family member).
#include <nlohmann/json.hpp>

#include "fuzz_common.hpp"
#include "loopscale/sweep/plan.hpp"

namespace fuzz_sweep_spec {

using namespace loopscale::sweep;

inline int one(const std::uint8_t* data, std::size_t size) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(loopscale_fuzz::text_of(data, size));
  } catch (const nlohmann::json::exception&) {  // parse_error, or out_of_range for 1e400
    return 0;
  }
  try {
    const SweepSpec s = j.get<SweepSpec>();
    validate(s);
    const Plan p = make_plan(s);
    plan_json(p);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}

}  // namespace fuzz_sweep_spec

#ifndef LOOPSCALE_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return fuzz_sweep_spec::one(data, size); }
#endif
