// A loopscale built without nvcc: the host is the only backend (examples/cli/device.hpp).
#include <stdexcept>

#include "../device.hpp"

namespace loopscale::cli {

CudaStatus cuda_status() { return {}; }

train::TrainResult train_on_cuda(const train::TrainConfig&, const train::ProgressFn&, train::Communicator&) {
  throw std::logic_error("train_on_cuda: this loopscale was built without CUDA");
}

}  // namespace loopscale::cli
