// How the CUDA code reports a failed call (cuda.hpp, cublaslt.hpp, cuda_kernels.hpp,
// cuda_device.hpp): an std::runtime_error "cuda: CALL failed: MESSAGE (NAME), WHAT", with the
// runtime's or cuBLAS's message and status name, and what was being done (shapes, sizes) where the
// caller says. CUDA's headers only: compiles with nvcc or with a host compiler.
#pragma once

#include <cublas_api.h>
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

namespace loopscale::train::cuda_detail {

inline void check(cudaError_t e, const char* call, const std::string& what = {}) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("cuda: ") + call + " failed: " + cudaGetErrorString(e) + " (" + cudaGetErrorName(e) + ")" +
                             (what.empty() ? "" : ", " + what));
}
inline void check(cublasStatus_t s, const char* call, const std::string& what = {}) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string("cuda: ") + call + " failed: " + cublasGetStatusString(s) + " (" + cublasGetStatusName(s) + ")" +
                             (what.empty() ? "" : ", " + what));
}

}  // namespace loopscale::train::cuda_detail
