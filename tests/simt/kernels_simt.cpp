// tests/cuda/kernels_device.cu's checks of every CUDA-backend kernel against its host twin,
// compiled by the host compiler: the CUDA backend's own kernels (backend/cuda_kernels.hpp) run
// under the SIMT emulator (backend/simt.hpp), in every build, GPU or not.
#include "loopscale/train/backend/simt.hpp"
#include "cuda/kernels_device.cu"
