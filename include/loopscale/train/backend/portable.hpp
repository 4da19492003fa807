// Code that runs on every backend: element-wise lambdas and the small helpers they call are
// marked LOOPSCALE_HD, which is __host__ __device__ when nvcc compiles them (CUDA's extended
// lambdas, nvcc --extended-lambda) and nothing for the host compiler. A kernel whose lambda also
// calls B::gemm (attention, the MoE experts) cannot run on a device in that form and is not marked.
#pragma once

#if defined(__CUDACC__)
#define LOOPSCALE_HD __host__ __device__
#else
#define LOOPSCALE_HD
#endif
