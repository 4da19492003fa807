// Fuzzes the checkpoint reader (train/checkpoint.hpp load_checkpoint<float>), what a resumed run
// reads. The reader takes a path, so the input goes through a temporary file. Promise: every bad
// file is a train::checkpoint_error.
#include "fuzz_common.hpp"
#include "loopscale/train/checkpoint.hpp"

namespace fuzz_checkpoint {

using namespace loopscale::train;

inline int one(const std::uint8_t* data, std::size_t size) {
  const loopscale_fuzz::TempFile file(data, size, ".ckpt");
  try {
    load_checkpoint<float>(file.path());
  } catch (const checkpoint_error&) {
  }
  return 0;
}

}  // namespace fuzz_checkpoint

#ifndef LOOPSCALE_FUZZ_REPLAY
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { return fuzz_checkpoint::one(data, size); }
#endif
