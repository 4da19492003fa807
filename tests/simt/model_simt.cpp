// tests/cuda/model_device.cu's whole-model comparison with the host (losses, gradients, parameters
// after AdamW steps, two runs bit for bit), compiled by the host compiler: the CUDA backend's own
// kernels run under the SIMT emulator (backend/simt.hpp).
#include "loopscale/train/backend/simt.hpp"
#include "cuda/model_device.cu"
