// The backend a `loopscale train` or `sweep run` trains on: the host always; a CUDA device where the
// program was built with nvcc (examples/cli/cuda/train_cuda.cu, LOOPSCALE_HAS_CUDA) and a device is
// usable when the command runs. The trainer is the same template (train/trainer.hpp) on either;
// only the backend it is instantiated with differs, so the .cu file holds the one instantiation
// nvcc must compile.
#pragma once

#include <string>

#include "loopscale/train/trainer.hpp"

namespace loopscale::cli {

// Whether this program holds the CUDA backend, and when it does, why no device is usable now
// (empty: one is) and the name of the one it would train on.
struct CudaStatus {
  bool built = false;
  std::string unusable;
  std::string device;
};
CudaStatus cuda_status();

// train::train<CudaBackend> on this process's device (the launcher's local rank modulo the devices
// under mpirun/srun). Only called when cuda_status() says a device is usable.
train::TrainResult train_on_cuda(const train::TrainConfig& cfg, const train::ProgressFn& progress, train::Communicator& comm);

// "host" or "cuda" for a config's device (auto: cuda when usable, else host). Asking for cuda where
// there is none is bad input (usage_error, exit 2) that names why.
std::string resolve_device(const std::string& device);

// Trains on the device the config's device resolves to.
train::TrainResult train_on_device(const train::TrainConfig& cfg, const train::ProgressFn& progress, train::Communicator& comm);

}  // namespace loopscale::cli
