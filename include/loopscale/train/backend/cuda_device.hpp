// The current CUDA device as a run reports it: its name (which finds its peaks in gpu_peaks.hpp),
// SM count, compute capability, and its memory free and in all (cudaMemGetInfo), for a trainer to
// set the memory a run takes beside loopscale's estimate (account/memory.hpp). CUDA runtime calls
// only: compiles with nvcc or with a host compiler given CUDA's headers and cudart.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>

#include "loopscale/train/backend/cuda_check.hpp"
#include "loopscale/train/backend/gpu_peaks.hpp"

namespace loopscale::train {

struct CudaMemoryInfo {
  std::size_t free = 0, total = 0;  // bytes
  std::size_t used() const { return total - free; }
};

// The current device's memory now: what every process has allocated on it, not this one's alone.
inline CudaMemoryInfo cuda_memory_info() {
  CudaMemoryInfo m;
  cuda_detail::check(cudaMemGetInfo(&m.free, &m.total), "cudaMemGetInfo");
  return m;
}

struct CudaDeviceInfo {
  int index = 0;  // cudaGetDevice
  std::string name;  // cudaDeviceProp::name, e.g. "NVIDIA H100 80GB HBM3"
  int sm_count = 0;
  int major = 0, minor = 0;  // compute capability
  CudaMemoryInfo memory;     // when the info was taken

  std::string compute_capability() const { return std::to_string(major) + "." + std::to_string(minor); }
  // Its dense peaks, or nothing for a GPU the table does not know (the caller then needs a given peak).
  std::optional<GpuPeak> peak() const { return find_gpu_peak(name); }
};

inline CudaDeviceInfo cuda_device_info() {
  CudaDeviceInfo d;
  cuda_detail::check(cudaGetDevice(&d.index), "cudaGetDevice");
  cudaDeviceProp prop{};
  cuda_detail::check(cudaGetDeviceProperties(&prop, d.index), "cudaGetDeviceProperties");
  d.name = prop.name;
  d.sm_count = prop.multiProcessorCount;
  d.major = prop.major;
  d.minor = prop.minor;
  d.memory = cuda_memory_info();
  return d;
}

}  // namespace loopscale::train
