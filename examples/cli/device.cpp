#include "device.hpp"

#include "cli.hpp"

namespace loopscale::cli {

std::string resolve_device(const std::string& device) {
  if (device == "host") return "host";
  if (device != "auto" && device != "cuda") throw usage_error("--device must be auto, host or cuda, not '" + device + "'");
  const CudaStatus s = cuda_status();
  if (s.built && s.unusable.empty()) return "cuda";
  if (device == "auto") return "host";
  if (!s.built)
    throw usage_error("--device cuda: this loopscale was built without CUDA (no nvcc when it was configured; see docs/training.md, "
                      "\"Backends\")");
  throw usage_error("--device cuda: no usable CUDA device: " + s.unusable);
}

train::TrainResult train_on_device(const train::TrainConfig& cfg, const train::ProgressFn& progress, train::Communicator& comm) {
  if (resolve_device(cfg.device) == "cuda") return train_on_cuda(cfg, progress, comm);
  return train::train(cfg, progress, comm);
}

}  // namespace loopscale::cli
