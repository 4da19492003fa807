// Dense peak FLOP/s of known NVIDIA GPUs, what a GPU run's MFU is divided by: the bf16 and TF32
// tensor-core peaks (fp32 accumulation) and the fp32 (CUDA core) peak, each without 2:4
// sparsity. NVIDIA's data sheets print the tensor-core figures *with* sparsity (marked "*"); a
// dense figure is half of that. Plain C++: no CUDA is needed to look a name up.
//
// A GPU is found by the name cudaGetDeviceProperties reports ("NVIDIA H100 80GB HBM3", "NVIDIA
// A100-SXM4-40GB", "NVIDIA L40S"): an entry matches when every one of its words is a word of the
// name (case-insensitive; words are split at spaces and '-'), so "L4" does not match "L40S" and
// "H200" does not match "GH200". The first match wins, so boards of one chip with different
// peaks come before their general entry. A name with a word of another product (a laptop part, a
// cut-down "D" model, a MIG slice, which has only some of the SMs) matches nothing, as does any GPU
// not listed: the caller must then be given the peak (--peak-flops) rather than guess one.
#pragma once

#include <optional>
#include <string_view>

#include "loopscale/train/backend/precision.hpp"

namespace loopscale::train {

struct GpuPeak {
  std::string_view product;  // NVIDIA's name for it
  std::string_view words;    // all of these must be words of the device name
  double bf16 = 0, tf32 = 0, fp32 = 0;  // dense FLOP/s
  std::string_view source;

  // The peak a GEMM of this precision runs against: bf16 and tf32 on the tensor cores, fp32 on
  // the CUDA cores.
  constexpr double flops(Precision p) const { return p == Precision::bf16 ? bf16 : p == Precision::tf32 ? tf32 : fp32; }
};

// Sources, each NVIDIA's data sheet of the product (the column of that board), sparse tensor-core
// figures halved where the sheet gives only those.
inline constexpr GpuPeak gpu_peaks[] = {
    // GH200 Grace Hopper Superchip data sheet: its H100 GPU's FP32 67, TF32 989*, BF16 1,979*.
    {"GH200", "GH200", 989.5e12, 494.5e12, 67e12, "NVIDIA GH200 Grace Hopper Superchip data sheet (sparse figures / 2)"},
    // H200 data sheet, H200 NVL column: FP32 60, TF32 835*, BF16 1,671*.
    {"H200 NVL", "H200 NVL", 835.5e12, 417.5e12, 60e12, "NVIDIA H200 data sheet, H200 NVL (sparse figures / 2)"},
    // H200 data sheet, H200 SXM column: FP32 67, TF32 989*, BF16 1,979* (the H100 SXM's compute).
    {"H200 SXM", "H200", 989.5e12, 494.5e12, 67e12, "NVIDIA H200 data sheet, H200 SXM (sparse figures / 2)"},
    // H100 data sheet, H100 PCIe column: FP32 51, TF32 756*, BF16 1,513*.
    {"H100 PCIe", "H100 PCIe", 756.5e12, 378e12, 51e12, "NVIDIA H100 data sheet, H100 PCIe (sparse figures / 2)"},
    // H100 data sheet, H100 NVL column: FP32 60, TF32 835*, BF16 1,671*.
    {"H100 NVL", "H100 NVL", 835.5e12, 417.5e12, 60e12, "NVIDIA H100 data sheet, H100 NVL (sparse figures / 2)"},
    // H100 data sheet, H100 SXM column: FP32 67, TF32 989*, BF16 1,979*; the SXM5 board reports
    // "NVIDIA H100 80GB HBM3", so any other H100 name lands here. (The H100 architecture white
    // paper's dense figures at its boost clock: 989.4, 494.7, 66.9.)
    {"H100 SXM", "H100", 989.5e12, 494.5e12, 67e12, "NVIDIA H100 data sheet, H100 SXM (sparse figures / 2)"},
    // A100 data sheet (the same figures for the 40GB and 80GB, PCIe and SXM boards): FP32 19.5,
    // TF32 156 (312*), BF16 312 (624*).
    {"A100 PCIe", "A100 PCIe", 312e12, 156e12, 19.5e12, "NVIDIA A100 data sheet, A100 PCIe (dense figures)"},
    {"A100 SXM", "A100", 312e12, 156e12, 19.5e12, "NVIDIA A100 data sheet, A100 SXM (dense figures)"},
    // L40S data sheet: FP32 91.6, TF32 183 (366*), BF16 362.05 (733*).
    {"L40S", "L40S", 362.05e12, 183e12, 91.6e12, "NVIDIA L40S data sheet (dense figures)"},
    // L40 data sheet: FP32 90.5, TF32 90.5 (181*), BF16 181.05 (362.1*).
    {"L40", "L40", 181.05e12, 90.5e12, 90.5e12, "NVIDIA L40 data sheet (dense figures)"},
    // L4 data sheet: FP32 30.3, TF32 120*, BF16 242*.
    {"L4", "L4", 121e12, 60e12, 30.3e12, "NVIDIA L4 data sheet (sparse figures / 2)"},
    // RTX 6000 Ada Generation data sheet: single precision 91.1, "tensor performance" 1,457.0,
    // which is FP8 with sparsity: BF16 dense is a quarter of it (FP8 runs at twice BF16's rate),
    // TF32 half of BF16 (as on the L40S, the same AD102 chip).
    {"RTX 6000 Ada Generation", "RTX 6000 Ada", 364.25e12, 182.1e12, 91.1e12,
     "NVIDIA RTX 6000 Ada Generation data sheet (FP8 sparse figure / 4)"},
    // NVIDIA Ada GPU architecture white paper, GeForce RTX 4090 column: FP32 82.6, TF32 82.6
    // (165.2*), BF16 with FP32 accumulate 165.2 (330.4*): GeForce boards accumulate in fp32 at
    // half the fp16-accumulate rate.
    {"GeForce RTX 4090", "RTX 4090", 165.2e12, 82.6e12, 82.6e12, "NVIDIA Ada GPU architecture white paper, RTX 4090 (dense figures)"},
};

namespace gpu_peaks_detail {

constexpr char lower(char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; }
constexpr bool same_word(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i])) return false;
  return true;
}
constexpr bool separator(char c) { return c == ' ' || c == '-' || c == '\t'; }
// Calls f(word) for each word of s until f returns true; whether one did.
template <class F>
constexpr bool any_word(std::string_view s, F f) {
  std::size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && separator(s[i])) ++i;
    std::size_t j = i;
    while (j < s.size() && !separator(s[j])) ++j;
    if (j > i && f(s.substr(i, j - i))) return true;
    i = j;
  }
  return false;
}
constexpr bool has_word(std::string_view name, std::string_view word) {
  return any_word(name, [&](std::string_view w) { return same_word(w, word); });
}

}  // namespace gpu_peaks_detail

// The peaks of the GPU of this name, or nothing when it is not in the table.
constexpr std::optional<GpuPeak> find_gpu_peak(std::string_view device_name) {
  using namespace gpu_peaks_detail;
  for (const std::string_view other : {"Laptop", "Mobile", "D", "MIG"})
    if (has_word(device_name, other)) return std::nullopt;
  for (const GpuPeak& p : gpu_peaks)
    if (!any_word(p.words, [&](std::string_view w) { return !has_word(device_name, w); })) return p;
  return std::nullopt;
}

}  // namespace loopscale::train
