// Rounding a GEMM operand to bf16 into a packed copy (the cuBLASLt engine's "packed" bf16 operands,
// backend/cublaslt.hpp). The model keeps every matrix in fp32; a bf16 product can either hand
// cuBLASLt the fp32 operands with CUBLAS_COMPUTE_32F_FAST_16BF (cuBLASLt converts inside its
// kernel) or round them first, as llm.c and PyTorch's autocast do, and run a bf16 x bf16 -> fp32
// product on the tensor cores from half the bytes. This header is the second way's first half:
// one kernel that reads count row-major fp32 matrices (rows x cols, leading dimension ld, stride
// apart) and writes them as bf16, rounded to nearest even (__float2bfloat16_rn), into a dense
// buffer whose rows and matrices start on aligned addresses, and the host twin of that rounding,
// which tests/cuda/kernels_device.cu checks the kernel against bit for bit.
#pragma once

#if !defined(__CUDACC__)
#error "loopscale/train/backend/bf16_pack.hpp is CUDA code: compile this file with nvcc and link loopscale::cuda"
#endif

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "loopscale/train/backend/cuda_check.hpp"

namespace loopscale::train::bf16_pack {

using int64 = std::int64_t;

// Where the packed copy of a matrix (or a strided batch of them) puts its values. Rows start on
// 16-byte boundaries (ld a multiple of 8 values) and matrices on 256-byte boundaries (stride a
// multiple of 128 values), so every matrix of a packed batch has the alignment cuBLASLt's fastest
// kernels ask for, whatever the source's leading dimension and stride were. A batch whose source
// stride is 0 (every product reads the same matrix) is packed once and keeps stride 0.
struct Layout {
  int64 rows = 0, cols = 0, ld = 0, stride = 0, matrices = 0;
  int64 values() const { return matrices * (stride > 0 ? stride : rows * ld); }
};

inline constexpr int64 row_align = 8, matrix_align = 128;  // in bf16 values: 16 and 256 bytes

inline Layout layout(int64 rows, int64 cols, int64 count, int64 source_stride) {
  Layout l;
  l.rows = rows, l.cols = cols;
  l.ld = (cols + row_align - 1) / row_align * row_align;
  const bool many = count > 1 && source_stride != 0;
  l.stride = many ? (rows * l.ld + matrix_align - 1) / matrix_align * matrix_align : 0;
  l.matrices = many ? count : 1;
  return l;
}

// The host twin of __float2bfloat16_rn: the upper 16 bits of the fp32 value rounded to nearest,
// ties to even; values past bf16's largest become infinities, and a NaN becomes a NaN (0x7FFF, the
// canonical one __float2bfloat16_rn returns on the host; kernels_device compares the kernel's NaNs
// as NaNs, whatever their bits).
inline std::uint16_t round_bits(float x) {
  std::uint32_t u = 0;
  std::memcpy(&u, &x, sizeof u);
  if (std::isnan(x)) return 0x7FFFu;
  const std::uint32_t lsb = (u >> 16) & 1u;
  return static_cast<std::uint16_t>((u + 0x7FFFu + lsb) >> 16);
}

// One thread per column of a row; the grid's y walks the rows and its z the matrices (both
// grid-strided past CUDA's 65,535 blocks), so neighbouring threads read neighbouring fp32 values
// and write neighbouring bf16 ones. A template, as every kernel of this header-only library is, so
// that two translation units including it link (a plain __global__ function would be defined twice).
template <class = void>
__global__ void pack_kernel(const float* src, int64 ld, int64 stride, __nv_bfloat16* dst, Layout to) {
  const int64 c = static_cast<int64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= to.cols) return;
  for (int64 m = blockIdx.z; m < to.matrices; m += gridDim.z)
    for (int64 r = blockIdx.y; r < to.rows; r += gridDim.y)
      dst[m * to.stride + r * to.ld + c] = __float2bfloat16_rn(src[m * stride + r * ld + c]);
}

// dst (to.values() bf16 values) = the bf16 rounding of the matrices at src, queued on the default
// stream (the stream of every GEMM and kernel of the backend).
inline void pack(const float* src, int64 ld, int64 stride, __nv_bfloat16* dst, const Layout& to) {
  if (to.rows <= 0 || to.cols <= 0 || to.matrices <= 0) return;
  const int64 threads = to.cols >= 256 ? 256 : (to.cols + 31) / 32 * 32;
  const auto cap = [](int64 v) { return static_cast<unsigned>(v < 65535 ? v : 65535); };
  const dim3 grid(static_cast<unsigned>((to.cols + threads - 1) / threads), cap(to.rows), cap(to.matrices));
  pack_kernel<><<<grid, static_cast<unsigned>(threads)>>>(src, ld, stride, dst, to);
  cuda_detail::check(cudaGetLastError(), "kernel bf16_pack::pack_kernel",
                     std::to_string(to.matrices) + " x " + std::to_string(to.rows) + " x " + std::to_string(to.cols) + " values");
}

}  // namespace loopscale::train::bf16_pack
