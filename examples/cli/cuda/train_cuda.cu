// The CUDA half of `loopscale train --device cuda` (examples/cli/device.hpp): the one translation
// unit nvcc compiles, holding train::train<CudaBackend>. Linked into the program only where CMake
// found nvcc (examples/CMakeLists.txt); cuda/no_cuda.cpp stands in elsewhere.
#include <cstdlib>
#include <optional>
#include <string>

#include "../device.hpp"
#include "loopscale/train/backend/cuda.hpp"

namespace loopscale::cli {

namespace {

// The rank of this process among those of its node, as the launchers name it; 0 when none does.
int local_rank() {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID", "LOCAL_RANK"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return 0;
}

}  // namespace

CudaStatus cuda_status() {
  CudaStatus s;
  s.built = true;
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    s.unusable = std::string(cudaGetErrorString(e)) + " (" + cudaGetErrorName(e) + ")";
    return s;
  }
  if (n == 0) {
    s.unusable = "the CUDA runtime sees no device";
    return s;
  }
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, local_rank() % n) == cudaSuccess) s.device = p.name;
  return s;
}

train::TrainResult train_on_cuda(const train::TrainConfig& cfg, const train::ProgressFn& progress, train::Communicator& comm) {
  const std::optional<train::Precision> precision = train::parse_precision(cfg.precision);
  if (!precision) throw train::config_error("config: precision must be bf16, tf32 or fp32, not '" + cfg.precision + "'");
  try {  // how bf16 GEMMs get their operands (backend/cublaslt.hpp): a bad value is bad input, before any work
    (void)train::cublaslt::bf16_operands_from_environment();
  } catch (const std::runtime_error& e) {
    throw train::config_error(e.what());
  }
  int n = 0;
  train::cuda_detail::check(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  // Under a launcher each rank of a node takes its own device (ranks beyond the devices share);
  // the device cuda_status() named.
  train::cuda_detail::check(cudaSetDevice(local_rank() % n), "cudaSetDevice");
  train::CudaBackend::set_precision(*precision);
  return train::train<train::CudaBackend>(cfg, progress, comm);
}

}  // namespace loopscale::cli
