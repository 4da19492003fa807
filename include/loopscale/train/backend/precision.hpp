// The arithmetic of a device backend's GEMMs. Matrices, master weights, gradients and optimiser
// state stay fp32 in every case; only the multiply inside the GEMM changes:
//   fp32  fp32 multiplies and fp32 accumulation (comparable with the host backend to fp32 rounding)
//   tf32  inputs rounded to TF32 (10-bit mantissa) on tensor cores, fp32 accumulation
//   bf16  inputs rounded to bf16 (7-bit mantissa) on tensor cores, fp32 accumulation: the
//         project's default on a GPU (bf16 inputs, fp32 accumulation, fp32 master weights)
// Plain C++ (no CUDA): the GPU peak table (gpu_peaks.hpp) and the command line name it too.
#pragma once

#include <optional>
#include <string_view>

namespace loopscale::train {

enum class Precision { fp32, tf32, bf16 };

constexpr const char* precision_name(Precision p) {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::tf32: return "tf32";
    case Precision::bf16: return "bf16";
  }
  return "?";
}

// "fp32", "tf32" or "bf16"; nothing for any other text.
constexpr std::optional<Precision> parse_precision(std::string_view s) {
  for (const Precision p : {Precision::fp32, Precision::tf32, Precision::bf16})
    if (s == precision_name(p)) return p;
  return std::nullopt;
}

}  // namespace loopscale::train
