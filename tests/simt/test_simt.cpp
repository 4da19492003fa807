// The SIMT emulator (backend/simt_emulator.hpp) keeps CUDA's rules where the CUDA backend's
// kernels depend on them, and refuses what a device would hang on or leave undefined; and a
// model's training steps under SimtBackend, whose RMSNorm, QK-norm, loss, softmax, embedding
// gradient and MoE gate gradients are the CUDA kernels run by the emulator, follow HostBackend's.
#include <catch2/catch.hpp>

#include "loopscale/train/backend/simt.hpp"  // first: defines the CUDA names for the kernels below

#include <atomic>
#include <cmath>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "train/backend_steps.hpp"

using namespace loopscale;
using loopscale::train::HostBackend;
using loopscale::train::SimtBackend;
namespace simt = loopscale::train::simt;
namespace ck = loopscale::train::cuda_kernels;

namespace {

using namespace loopscale::train::simt::builtins;  // threadIdx, blockIdx, blockDim, __syncthreads

// out[b] = the sum of row b of x (n values), by cuda_kernels' block reduction.
template <class T>
__global__ void block_sums(const T* x, T* out, int64 n) {
  __shared__ T red[32];
  T v = 0;
  for (int64 i = threadIdx.x; i < n; i += blockDim.x) v += x[static_cast<int64>(blockIdx.x) * n + i];
  v = ck::block_reduce(v, ck::Sum{}, T(0), red);
  if (threadIdx.x == 0) out[blockIdx.x] = v;
}

// Thread 0 writes a value every thread of the block reads: only correct with the barrier.
template <class T>
__global__ void broadcast(T* out, bool barrier) {
  __shared__ T value;
  if (threadIdx.x == 0) value = static_cast<T>(blockIdx.x + 1);
  if (barrier) __syncthreads();
  out[static_cast<int64>(blockIdx.x) * blockDim.x + threadIdx.x] = value;
}

// The upper half of each warp returns, the lower half shuffles over the whole warp.
template <class T>
__global__ void half_warp_shuffles(T* out) {
  if (threadIdx.x % 32 >= 16) return;
  out[threadIdx.x] = ck::warp_reduce(T(1), ck::Sum{});
}

// Lanes 0-15 wait at a shuffle for lanes 16-31, which wait at __syncthreads for lanes 0-15.
template <class T>
__global__ void crossed_waits(T* out) {
  if (threadIdx.x < 16)
    out[threadIdx.x] = ck::warp_reduce(T(1), ck::Sum{});
  else
    __syncthreads();
}

template <class T>
__global__ void nothing(T*) {}

// block_reduce without its first barrier, the one that lets `red` be written again: a warp that
// runs ahead into the next sum overwrites a partial a slower warp has not read yet.
template <class T>
__device__ T reduce_without_reuse_barrier(T v, T* red) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32), warps = static_cast<int>(blockDim.x / 32);
  v = ck::warp_reduce(v, ck::Sum{});
  if (lane == 0) red[warp] = v;
  __syncthreads();
  return ck::warp_reduce(lane < warps ? red[lane] : T(0), ck::Sum{});
}

// Two block sums in a row over one shared array; every thread writes what it got.
template <class T>
__global__ void two_sums(const T* x, T* out, bool reuse_barrier) {
  __shared__ T red[32];
  const int64 i = static_cast<int64>(blockIdx.x) * blockDim.x + threadIdx.x;
  const T a = x[i];
  out[2 * i] = reuse_barrier ? ck::block_reduce(a, ck::Sum{}, T(0), red) : reduce_without_reuse_barrier(a, red);
  out[2 * i + 1] = reuse_barrier ? ck::block_reduce(T(2) * a, ck::Sum{}, T(0), red) : reduce_without_reuse_barrier(T(2) * a, red);
}

// Shuffles the emulator refuses: 0, a mask without the calling lane; 1, two masks in one warp;
// 2, a read of a lane the mask leaves out (lanes 0-15 with mask 0xffff reading lane ^ 16).
template <class T>
__global__ void bad_shuffles(T* out, int which) {
  const unsigned lane = threadIdx.x % 32;
  T v = T(1);
  if (which == 0) v = __shfl_xor_sync(0xfffffffeu, v, 0);  // xor 0: every other lane reads itself, inside the mask
  if (which == 1) v = __shfl_xor_sync(lane < 16 ? 0x0000ffffu : 0xffff0000u, v, 1);
  if (which == 2) {
    if (lane >= 16) return;
    v = __shfl_xor_sync(0x0000ffffu, v, 16);
  }
  out[threadIdx.x] = v;
}

template <class T>
__global__ void launches_inside(T* out) {
  LOOPSCALE_LAUNCH(nothing<T>, 1u, 32u)(out);
}

// Tells the test it runs, then waits until another thread has tried a launch of its own.
template <class T>
__global__ void hold(std::atomic<bool>* running, std::atomic<bool>* tried, T*) {
  running->store(true);
  while (!tried->load()) std::this_thread::yield();
}

}  // namespace

TEST_CASE("a block reduction over 1, 3 and 32 warps sums every value once", "[simt]") {
  const std::int64_t before = simt::launches("block_sums<double>");
  for (const unsigned threads : {32u, 96u, 1024u}) {
    const int64 blocks = 5, n = 1000;
    std::vector<double> x(static_cast<std::size_t>(blocks * n)), out(static_cast<std::size_t>(blocks));
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 97);  // integers: every order of the sum is exact
    LOOPSCALE_LAUNCH(block_sums<double>, static_cast<unsigned>(blocks), threads)(x.data(), out.data(), n);
    for (int64 b = 0; b < blocks; ++b) {
      double want = 0;
      for (int64 i = 0; i < n; ++i) want += x[static_cast<std::size_t>(b * n + i)];
      INFO(threads << " threads, block " << b);
      REQUIRE(out[static_cast<std::size_t>(b)] == want);
    }
  }
  REQUIRE(simt::launches("block_sums<double>") - before == 3);
}

TEST_CASE("threads run in a shuffled order, so a read of shared memory without its barrier is caught", "[simt]") {
  const unsigned blocks = 16, threads = 64;
  std::vector<int> out(blocks * threads);
  const auto wrong = [&] {
    int n = 0;
    for (unsigned b = 0; b < blocks; ++b)
      for (unsigned t = 0; t < threads; ++t) n += out[b * threads + t] != static_cast<int>(b + 1);
    return n;
  };
  LOOPSCALE_LAUNCH(broadcast<int>, blocks, threads)(out.data(), true);
  REQUIRE(wrong() == 0);
  LOOPSCALE_LAUNCH(broadcast<int>, blocks, threads)(out.data(), false);
  REQUIRE(wrong() > 0);  // threads that ran before thread 0 in their block read the last block's value
}

TEST_CASE("a warp that runs ahead into the next sum is caught when a barrier before shared memory is reused is missing", "[simt]") {
  const unsigned blocks = 64, threads = 256;
  std::vector<double> x(blocks * threads), out(2 * x.size());
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>(i % 13);  // integers: sums exact in any order
  const auto wrong = [&] {
    int n = 0;
    for (unsigned b = 0; b < blocks; ++b) {
      double sum = 0;
      for (unsigned t = 0; t < threads; ++t) sum += x[b * threads + t];
      for (unsigned t = 0; t < threads; ++t) {
        const std::size_t i = b * threads + t;
        n += (out[2 * i] != sum) + (out[2 * i + 1] != 2 * sum);
      }
    }
    return n;
  };
  LOOPSCALE_LAUNCH(two_sums<double>, blocks, threads)(x.data(), out.data(), true);
  REQUIRE(wrong() == 0);
  LOOPSCALE_LAUNCH(two_sums<double>, blocks, threads)(x.data(), out.data(), false);
  REQUIRE(wrong() > 0);  // only the schedule where one warp runs ahead shows it: warps in step never do
}

TEST_CASE("a shuffle naming returned lanes, barriers that wait for each other and bad configurations are refused", "[simt]") {
  std::vector<float> out(1024);
  REQUIRE_THROWS_WITH(LOOPSCALE_LAUNCH(half_warp_shuffles<float>, 2u, 64u)(out.data()), Catch::Contains("half_warp_shuffles<float>") &&
                                                                                             Catch::Contains("shuffle") &&
                                                                                             Catch::Contains("returned"));
  REQUIRE_THROWS_WITH(LOOPSCALE_LAUNCH(crossed_waits<float>, 1u, 32u)(out.data()),
                      Catch::Contains("crossed_waits<float>") && Catch::Contains("wait at barriers"));
  REQUIRE_THROWS_AS(LOOPSCALE_LAUNCH(nothing<float>, 1u, 0u)(out.data()), std::invalid_argument);
  REQUIRE_THROWS_WITH(LOOPSCALE_LAUNCH(nothing<float>, 1u, 1025u)(out.data()), Catch::Contains("invalid configuration"));
  REQUIRE_THROWS_WITH(LOOPSCALE_LAUNCH(nothing<float>, simt::dim3(1, 70000), 32u)(out.data()), Catch::Contains("invalid configuration"));
  REQUIRE_THROWS_AS(LOOPSCALE_LAUNCH(nothing<float>, 0u, 32u)(out.data()), std::invalid_argument);
  // A warp of 16 lanes (a block of 48 threads) shuffling over 32.
  std::vector<double> ones(48, 1.0), sum(1);
  REQUIRE_THROWS_WITH(LOOPSCALE_LAUNCH(block_sums<double>, 1u, 48u)(ones.data(), sum.data(), int64{48}), Catch::Contains("do not exist"));
  REQUIRE_THROWS_WITH(LOOPSCALE_LAUNCH(bad_shuffles<float>, 1u, 32u)(out.data(), 0), Catch::Contains("leaves out the calling lane"));
  REQUIRE_THROWS_WITH(LOOPSCALE_LAUNCH(bad_shuffles<float>, 1u, 32u)(out.data(), 1), Catch::Contains("different masks"));
  REQUIRE_THROWS_WITH(LOOPSCALE_LAUNCH(bad_shuffles<float>, 1u, 32u)(out.data(), 2), Catch::Contains("which its mask leaves out"));
  REQUIRE_THROWS_WITH(LOOPSCALE_LAUNCH(launches_inside<float>, 1u, 32u)(out.data()), Catch::Contains("launched from inside an emulated kernel"));
  // Two threads launching at once would share the kernels' shared memory (a static): refused.
  std::atomic<bool> running{false}, tried{false};
  std::string refused;
  std::thread other([&] {
    while (!running.load()) std::this_thread::yield();
    try {
      LOOPSCALE_LAUNCH(nothing<float>, 1u, 32u)(out.data());
    } catch (const std::logic_error& e) {
      refused = e.what();
    }
    tried.store(true);
  });
  LOOPSCALE_LAUNCH(hold<float>, 1u, 1u)(&running, &tried, out.data());
  other.join();
  REQUIRE_THAT(refused, Catch::Contains("launched while another thread runs a launch"));
  // After a refused launch the emulator runs the next one.
  std::vector<double> x(64, 1.0), s(1);
  LOOPSCALE_LAUNCH(block_sums<double>, 1u, 64u)(x.data(), s.data(), int64{64});
  REQUIRE(s[0] == 64.0);
}

TEST_CASE("training steps with the CUDA backend's own kernels under the emulator follow the host backend", "[simt]") {
  using loopscale::test::spec_of;
  using loopscale::test::train_steps;
  const train::kernels::MoeRouting aux = loopscale::test::aux_routing(), bias = loopscale::test::bias_routing();
  const std::pair<ModelSpec, train::kernels::MoeRouting> cases[] = {
      {spec_of(3, Inject::linear, 0, full_bptt, StateNorm::per_recurrence, 0), {}},
      {spec_of(3, Inject::hyper, 2, full_bptt, StateNorm::per_recurrence, 0), {}},
      {spec_of(4, Inject::additive, 0, 2, StateNorm::after_loop, 0), {}},
      {spec_of(4, Inject::hyper_shared, 3, 2, StateNorm::per_recurrence, 0), {}},
      {spec_of(2, Inject::linear, 0, full_bptt, StateNorm::per_recurrence, 4), aux},
      {spec_of(3, Inject::additive, 0, 2, StateNorm::per_recurrence, 4), bias},
  };
  HostBackend::set_threads(2);
  for (const auto& [spec, routing] : cases) {
    INFO(inject_name(spec.recur.inject) << ", experts " << spec.recur.block[0].ffn.experts);
    const auto host = train_steps<HostBackend>(spec, routing, 3);
    const auto dev = train_steps<SimtBackend>(spec, routing, 3);
    REQUIRE(std::isfinite(host.losses.back()));
    for (std::size_t i = 0; i < host.losses.size(); ++i) {
      INFO("step " << i << ": host " << host.losses[i] << ", simt " << dev.losses[i]);
      REQUIRE(std::abs(host.losses[i] - dev.losses[i]) <= 1e-6 * std::abs(host.losses[i]));
    }
    // tests/cuda/model_device.cu's bounds (|simt - host| <= tol + eps |host|): the kernels sum in
    // the device's trees, not the host's order, and AdamW's normalised steps carry those roundings
    // into the parameters at up to the learning rate where a gradient is near zero.
    const auto excess = [](const std::vector<float>& h, const std::vector<float>& d, double tol, double eps) {
      double worst = -1;
      for (std::size_t i = 0; i < h.size(); ++i)
        worst = std::max(worst, std::abs(static_cast<double>(h[i]) - d[i]) - (tol + eps * std::abs(static_cast<double>(h[i]))));
      return worst;
    };
    REQUIRE(host.params.size() == dev.params.size());
    REQUIRE(excess(host.grads, dev.grads, 1e-5, 1e-2) <= 0);
    REQUIRE(excess(host.params, dev.params, 1e-4, 1e-3) <= 0);
    REQUIRE(host.bias == dev.bias);
  }
  HostBackend::set_threads(0);
  // The emulated kernels ran, not the portable forms (a hook the backend lost would fall back
  // silently): every kernel of cuda_kernels.hpp a dense or MoE step uses.
  for (const char* k : {"rmsnorm_forward_rows<T>", "rmsnorm_backward_rows<T>", "rmsnorm_dg_partials<T>", "rmsnorm_forward_strided_rows<T>",
                        "rmsnorm_backward_from_output_rows<T>", "softcap_ce_fused_rows<T>", "causal_softmax_rows<T>",
                        "causal_softmax_backward_rows<T>", "embedding_backward_runs<T>", "row_dots_rows<T>", "rmsnorm_dg_sum<T>",
                        "sequence_kernel<std::int32_t>"}) {
    INFO(k);
    REQUIRE(simt::launches(k) > 0);
  }
}
