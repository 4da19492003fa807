// The SIMT backend, for tests: the guard backend's device forms (guard.hpp: memory the host cannot
// touch outside backend calls, attention and the MoE experts in the form a GPU runs) with the CUDA
// backend's own kernels (cuda_kernels.hpp: RMSNorm and QK-norm, the softcapped cross-entropy, the
// causal softmax, the embedding gradient, the experts' gate gradients) compiled by the host
// compiler and run by the SIMT emulator (simt_emulator.hpp). What it does not run of the CUDA
// backend: cuBLASLt's GEMMs and their bf16 packing (the host's GEMMs instead), Thrust's CUDA
// system (the host's parallel_for), and CUB's radix sort (the host's stable sort, the same
// order). tests/simt/ compares it with HostBackend on any machine.
//
// This header defines LOOPSCALE_SIMT_EMULATION, and with it CUDA's names (threadIdx, __shared__,
// ...) as macros, for the rest of the file that includes it: include it in test files only.
#pragma once

#if defined(__CUDACC__)
#error "loopscale/train/backend/simt.hpp runs CUDA kernels on the CPU: compile it with the host compiler, not nvcc"
#endif

#if !defined(LOOPSCALE_SIMT_EMULATION)
#define LOOPSCALE_SIMT_EMULATION 1
#endif

#include <vector>

#include "loopscale/train/backend/cuda_kernels.hpp"
#include "loopscale/train/backend/guard.hpp"

namespace loopscale::train {

struct SimtBackend : GuardBackendOf<false>, CudaKernelHooks<guard_detail::Open> {
  static constexpr const char* name = "simt";
  using CudaKernelHooks<guard_detail::Open>::sort_pairs;  // the guard's device form has one too: the kernels' is this backend's
};

// SimtBackend over heap memory (a std::vector per buffer) instead of the guard's pages, for the
// sanitizer stage (tests/sanitize): AddressSanitizer knows a heap block's bounds to the byte, so a
// kernel reading one value past a buffer is reported there, where the guard's whole pages (which
// ASan does not look into) would let it pass. What it gives up is the guard's own check, that the
// host never touches this memory outside a backend call; SimtBackend keeps that in every build.
struct SimtHeapBackend : SimtBackend {
  static constexpr const char* name = "simt-heap";
  template <class T>
  using buffer = std::vector<T>;
};

}  // namespace loopscale::train
