// Fuzzes the trainer's reading of a `--config` JSON file (train/train_config.hpp config_from_json, then
// detail::check_config, the run's length, its thread lanes and memory estimate, all before any file
// is opened). Text that is not JSON is the caller's to report (`loopscale train` turns any
// nlohmann::json::exception of the parse into its usage error); from a parsed document on, the
// promise is that every bad config is an std::invalid_argument: config_error, or spec_error for the
// model spec inside it.
#include <nlohmann/json.hpp>

#include "fuzz_common.hpp"
#include "loopscale/train/trainer.hpp"

namespace fuzz_train_config {

using namespace loopscale::train;

inline int one(const std::uint8_t* data, std::size_t size) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(loopscale_fuzz::text_of(data, size));
  } catch (const nlohmann::json::exception&) {  // parse_error, or out_of_range for 1e400
    return 0;
  }
  try {
    const TrainConfig c = config_from_json(j);
    detail::check_config(c);
    training_length(c);
    // What --dry-run and the start of a run compute next: the micro-batch, the thread lanes on two
    // host threads and the memory estimate.
    const int64 micro = detail::micro_batch(c, 1);
    detail::training_memory(c, micro, 2, detail::thread_lanes(c, micro, 2, true), loopscale::AttentionScratch::per_thread);
  } catch (const std::invalid_argument&) {
  }
  return 0;
}

}  // namespace fuzz_train_config

#ifndef LOOPSCALE_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return fuzz_train_config::one(data, size); }
#endif
