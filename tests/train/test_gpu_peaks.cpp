// The GPU peak table (train/backend/gpu_peaks.hpp): device names as cudaGetDeviceProperties
// reports them find their board, near names do not find a wrong one, and an unknown GPU finds
// nothing (the caller must then be given the peak).
#include <catch2/catch.hpp>

#include <string>

#include "loopscale/train/backend/gpu_peaks.hpp"
#include "loopscale/train/backend/precision.hpp"

using namespace loopscale::train;

namespace {
std::string product_of(std::string_view device_name) {
  const auto p = find_gpu_peak(device_name);
  return p ? std::string(p->product) : std::string("(none)");
}
}  // namespace

// The lookup is constexpr: a wrong table entry can fail the build.
static_assert(find_gpu_peak("NVIDIA H100 80GB HBM3")->bf16 == 989.5e12);
static_assert(!find_gpu_peak("NVIDIA B200"));

TEST_CASE("GPU peaks: data-center boards by the names the driver reports", "[train][gpu_peaks]") {
  CHECK(product_of("NVIDIA H100 80GB HBM3") == "H100 SXM");
  CHECK(product_of("NVIDIA H100 PCIe") == "H100 PCIe");
  CHECK(product_of("NVIDIA H100 NVL") == "H100 NVL");
  CHECK(product_of("NVIDIA H200") == "H200 SXM");
  CHECK(product_of("NVIDIA H200 NVL") == "H200 NVL");
  CHECK(product_of("NVIDIA GH200 480GB") == "GH200");  // not "H200": whole words only
  CHECK(product_of("NVIDIA A100-SXM4-40GB") == "A100 SXM");
  CHECK(product_of("NVIDIA A100-SXM4-80GB") == "A100 SXM");
  CHECK(product_of("NVIDIA A100-PCIE-40GB") == "A100 PCIe");  // case-insensitive, '-' separates words
  CHECK(product_of("NVIDIA A100 80GB PCIe") == "A100 PCIe");
  CHECK(product_of("NVIDIA L40S") == "L40S");
  CHECK(product_of("NVIDIA L40") == "L40");
  CHECK(product_of("NVIDIA L4") == "L4");  // not L40 or L40S
}

TEST_CASE("GPU peaks: workstation and GeForce boards, and near names that are other products", "[train][gpu_peaks]") {
  CHECK(product_of("NVIDIA RTX 6000 Ada Generation") == "RTX 6000 Ada Generation");
  CHECK(product_of("Quadro RTX 6000") == "(none)");  // Turing, not Ada
  CHECK(product_of("NVIDIA GeForce RTX 4090") == "GeForce RTX 4090");
  CHECK(product_of("NVIDIA GeForce RTX 4090 Laptop GPU") == "(none)");
  CHECK(product_of("NVIDIA GeForce RTX 4090 D") == "(none)");
  CHECK(product_of("NVIDIA H100 80GB HBM3 MIG 1g.10gb") == "(none)");  // a slice has only some of the SMs
}

TEST_CASE("GPU peaks: an unknown GPU finds nothing", "[train][gpu_peaks]") {
  CHECK_FALSE(find_gpu_peak("NVIDIA B200"));
  CHECK_FALSE(find_gpu_peak("Tesla V100-SXM2-16GB"));
  CHECK_FALSE(find_gpu_peak("NVIDIA H20"));
  CHECK_FALSE(find_gpu_peak(""));
}

TEST_CASE("GPU peaks: the peak follows the precision, and every entry is whole and reachable", "[train][gpu_peaks]") {
  const GpuPeak h100 = *find_gpu_peak("NVIDIA H100 80GB HBM3");
  CHECK(h100.flops(Precision::bf16) == 989.5e12);
  CHECK(h100.flops(Precision::tf32) == 494.5e12);
  CHECK(h100.flops(Precision::fp32) == 67e12);
  CHECK(find_gpu_peak("NVIDIA A100-SXM4-80GB")->flops(Precision::bf16) == 312e12);
  for (const GpuPeak& p : gpu_peaks) {
    INFO(std::string(p.product));
    CHECK(p.fp32 > 0);
    CHECK(p.tf32 >= p.fp32);
    CHECK(p.bf16 >= p.tf32);
    CHECK(!p.source.empty());
    // The entry's own words find it, not an earlier entry.
    CHECK(product_of(p.words) == std::string(p.product));
  }
}

TEST_CASE("precision names round-trip", "[train][gpu_peaks]") {
  for (const Precision p : {Precision::fp32, Precision::tf32, Precision::bf16}) CHECK(parse_precision(precision_name(p)) == p);
  CHECK_FALSE(parse_precision("fp16"));
  CHECK_FALSE(parse_precision("BF16"));
}
