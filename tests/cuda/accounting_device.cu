// The accounting headers compiled by nvcc: per-layer FLOPs evaluated in device code must equal the
// host's. Exit 77 (skipped) when no CUDA device is usable, as on a build machine without a GPU.
#include <cstdio>

#include <cuda_runtime.h>
#include <thrust/device_vector.h>
#include <thrust/host_vector.h>
#include <thrust/transform.h>

#include <loopscale/loopscale.hpp>

struct LayerFlops {
  __host__ __device__ long long operator()(long long d) const {
    const loopscale::LayerSpec layer{};
    return loopscale::detail::layer_forward_flops(layer, d, 2048, loopscale::Convention::paper);
  }
};

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("no CUDA device usable: skipped\n");
    return 77;
  }
  thrust::host_vector<long long> widths;
  for (long long d = 384; d <= 2176; d += 128) widths.push_back(d);
  thrust::device_vector<long long> dev = widths, out(widths.size());
  thrust::transform(dev.begin(), dev.end(), out.begin(), LayerFlops{});
  thrust::host_vector<long long> got = out;
  for (std::size_t i = 0; i < widths.size(); ++i) {
    const long long want = LayerFlops{}(widths[i]);
    if (got[i] != want) {
      std::printf("d=%lld: device %lld, host %lld\n", widths[i], got[i], want);
      return 1;
    }
  }
  std::printf("device accounting matches the host for %zu widths\n", widths.size());
  return 0;
}
