// CUDA kernels of CudaBackend's own, for kernels whose portable form (one LOOPSCALE_HD lambda per
// row through parallel_for) is slow on a GPU: one thread walking a whole row reads it with a stride
// of a row between neighbouring threads (no coalescing) and leaves most of the device idle. The
// portable kernels call these through the backend hook (backend/host.hpp: a kernel calls B::<its
// name> when the backend has it); CudaBackend forwards to the functions below.
//
//   rmsnorm_forward, rmsnorm_backward (kernels/rmsnorm.hpp): one warp per row, the lanes striding
//     the row (coalesced) and the row's sum of squares or dot product reduced by warp shuffles. The
//     scale gradient dg is a sum over rows: per-block partials over fixed chunks of rows, then one
//     thread per column adds the chunks in order, so it is deterministic (no atomics).
//   rmsnorm_forward_strided, rmsnorm_backward_from_output (QK-norm, inside the fused QKV rows): one
//     warp per head vector. The portable form ran one thread per token walking all its heads, a
//     row apart from its neighbours: 16 blocks on 132 multiprocessors at 8,192 tokens, and by an
//     estimate from the code (not a measurement) most of the non-GEMM time of the first H200 run.
//   embedding_backward (kernels/embedding.hpp): the ids sorted with their positions, one block per
//     run of equal ids adding their rows in position order (the host's order: the same bits).
//   softcap_ce_forward, softcap_ce_backward (kernels/loss.hpp): one block per row of logits, the
//     threads striding the vocabulary, max and sum reduced over the block in a fixed tree.
//   softcap_ce_fused (kernels/loss.hpp, a training step's loss and gradient together): one block
//     per row, an online (max, sum) per thread merged over the block, then the gradient written.
//   causal_softmax, causal_softmax_backward (kernels/attention.hpp, the device form): one warp per
//     row of the T x T matrices, as RMSNorm.
//   row_dots (kernels/moe.hpp, the experts' gate gradients): one warp per row.
//   sort_pairs (kernels/moe_router.hpp, the MoE grouping): CUB's radix sort.
//
// Every kernel is a template over the scalar type: float for training, double for the gradient
// checks (tests/cuda/gradcheck_device.cu); shuffles, shared memory and the math functions all have
// double forms, so double runs the same code in double precision.
//
// The arithmetic is the host twin's term by term (the same formulas, products in the same order);
// only the order of the sums differs (trees instead of one pass in index order), so results agree
// to rounding, and each is the same bits from run to run on one device. tests/cuda/kernels_device.cu
// checks them against the host twins; all but the QK-norm and embedding kernels passed it on an
// NVIDIA H200 (4 Dec 2026), those two came after that run and have so far run only under the
// emulator below.
//
// The same source also compiles with the host compiler against backend/simt_emulator.hpp (with
// LOOPSCALE_SIMT_EMULATION defined; backend/simt.hpp), which runs each launch's threads on the CPU:
// tests/simt/ checks every kernel here that way in every build, GPU or not. Launches are written
// LOOPSCALE_LAUNCH(kernel, grid, block)(args...) for that, device memory comes from
// device_malloc, and the sort is the host's stable sort there (CUB has no host form).
#pragma once

#if defined(LOOPSCALE_SIMT_EMULATION)
#include <cstdlib>
#include <new>

#include "loopscale/train/backend/simt_emulator.hpp"
#include "loopscale/train/backend/sort_pairs_host.hpp"
#elif defined(__CUDACC__)
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>

#include "loopscale/train/backend/cuda_check.hpp"
#define LOOPSCALE_LAUNCH(kernel, grid, block) kernel<<<grid, block>>>
#else
#error "loopscale/train/backend/cuda_kernels.hpp is CUDA code: compile this file with nvcc and link loopscale::cuda (or, on the CPU, include backend/simt.hpp)"
#endif

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>

namespace loopscale::train::cuda_kernels {

using int64 = std::int64_t;

#if defined(LOOPSCALE_SIMT_EMULATION)
using namespace simt::builtins;  // threadIdx, blockIdx, blockDim, dim3, __syncthreads, __shfl_xor_sync
inline void launched(const char*) {}  // the emulator throws at the launch itself
inline void* device_malloc(std::size_t bytes, const std::string&) {
  void* p = std::malloc(bytes);
  if (!p) throw std::bad_alloc();
  return p;
}
inline void device_free(void* p) { std::free(p); }
#else
inline void launched(const char* kernel) { cuda_detail::check(cudaGetLastError(), (std::string("kernel ") + kernel).c_str()); }
inline void* device_malloc(std::size_t bytes, const std::string& what) {
  void* p = nullptr;
  cuda_detail::check(cudaMalloc(&p, bytes), "cudaMalloc", std::to_string(bytes) + " bytes of " + what);
  return p;
}
inline void device_free(void* p) { cudaFree(p); }  // waits for the device: no kernel still reads the block
#endif

// ---- reductions ---------------------------------------------------------------------------------

struct Sum {
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a + b;
  }
};
struct Max {  // the host's `a > m ? a : m`
  template <class T>
  __device__ T operator()(T a, T b) const {
    return a > b ? a : b;
  }
};

// Butterfly over the 32 lanes: lane i adds lane i ^ o's value at every step, and a + b == b + a in
// IEEE arithmetic, so every lane ends with the same bits.
template <class T, class Op>
__device__ T warp_reduce(T v, Op op) {
  for (int o = 16; o > 0; o >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Over the whole block (blockDim.x a multiple of 32, at most 1024): each warp's value into `red`
// (32 slots of shared memory), then every warp reduces the slots, so every thread returns the
// same bits. Starts with a barrier, so `red` may be reused by consecutive calls.
template <class T, class Op>
__device__ T block_reduce(T v, Op op, T identity, T* red) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  v = warp_reduce(v, op);
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  return warp_reduce(lane < warps ? red[lane] : identity, op);
}

// ---- RMSNorm (kernels/rmsnorm.hpp) ----------------------------------------------------------------

inline constexpr int rows_per_block = 8;  // warps per block of the row kernels: 256 threads

// Blocks of the warp-per-row kernels for `rows` rows.
inline unsigned row_blocks(int64 rows) { return static_cast<unsigned>((rows + rows_per_block - 1) / rows_per_block); }

// One warp per row: y = x * r (* g), r = 1 / sqrt(mean(x^2) + eps), kept in rstd.
template <class T>
__global__ void rmsnorm_forward_rows(const T* x, const T* g, T* y, T* rstd, int64 rows, int64 d, T eps) {
  const int64 row = static_cast<int64>(blockIdx.x) * rows_per_block + threadIdx.x / 32;
  if (row >= rows) return;  // the whole warp: every lane of a live warp reaches the shuffles
  const int lane = static_cast<int>(threadIdx.x % 32);
  const T* xi = x + row * d;
  T* yi = y + row * d;
  T ss = 0;
  for (int64 j = lane; j < d; j += 32) ss += xi[j] * xi[j];
  ss = warp_reduce(ss, Sum{});
  const T r = T(1) / std::sqrt(ss / T(d) + eps);
  if (lane == 0) rstd[row] = r;
  if (g)
    for (int64 j = lane; j < d; j += 32) yi[j] = xi[j] * r * g[j];
  else
    for (int64 j = lane; j < d; j += 32) yi[j] = xi[j] * r;
}

// One warp per row: dx = (or +=) r (gy - x c), gy = dy (* g), c = <gy, x> r^2 / d. dx may alias dy
// (without accumulate): the dot product reads the whole row of dy before the shuffles, which every
// lane passes before any writes dx, and afterwards each lane reads dy[j] before writing dx[j].
template <class T>
__global__ void rmsnorm_backward_rows(const T* x, const T* g, const T* rstd, const T* dy, T* dx, int64 rows, int64 d, bool accumulate) {
  const int64 row = static_cast<int64>(blockIdx.x) * rows_per_block + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const T* xi = x + row * d;
  const T* dyi = dy + row * d;
  T* dxi = dx + row * d;
  const T r = rstd[row];
  T dot = 0;
  for (int64 j = lane; j < d; j += 32) dot += (g ? dyi[j] * g[j] : dyi[j]) * xi[j];
  dot = warp_reduce(dot, Sum{});
  const T c = dot * r * r / T(d);
  for (int64 j = lane; j < d; j += 32) {
    const T v = r * ((g ? dyi[j] * g[j] : dyi[j]) - xi[j] * c);
    dxi[j] = accumulate ? dxi[j] + v : v;
  }
}

// dg partials: block (cx, cy) sums dy * x * r over the rows of chunk cy for 32 columns from 32 cx,
// its 8 thread rows each taking every 8th row of the chunk, the 8 sums added in order.
inline constexpr int dg_columns = 32, dg_lanes = 8;

template <class T>
__global__ void rmsnorm_dg_partials(const T* x, const T* rstd, const T* dy, T* part, int64 rows, int64 d, int64 chunk) {
  __shared__ T acc[dg_lanes][dg_columns + 1];  // +1: no bank conflicts down a column
  const int64 j = static_cast<int64>(blockIdx.x) * dg_columns + threadIdx.x;
  const int64 lo = static_cast<int64>(blockIdx.y) * chunk, hi = lo + chunk < rows ? lo + chunk : rows;
  T a = 0;
  if (j < d)
    for (int64 i = lo + threadIdx.y; i < hi; i += dg_lanes) a += dy[i * d + j] * x[i * d + j] * rstd[i];
  acc[threadIdx.y][threadIdx.x] = a;
  __syncthreads();
  if (threadIdx.y == 0 && j < d) {
    T s = acc[0][threadIdx.x];
    for (int y = 1; y < dg_lanes; ++y) s += acc[y][threadIdx.x];
    part[static_cast<int64>(blockIdx.y) * d + j] = s;
  }
}

// dg[j] += the chunks' partials of column j, in chunk order.
template <class T>
__global__ void rmsnorm_dg_sum(const T* part, T* dg, int64 chunks, int64 d) {
  const int64 j = static_cast<int64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  T s = 0;
  for (int64 c = 0; c < chunks; ++c) s += part[c * d + j];
  dg[j] += s;
}

// Device scratch of one element type, kept and grown as needed until exit (as the cuBLAS handle
// is): the dg partials (T), the radix sort's temporary storage (bytes), the embedding backward's
// ids and positions (int32).
template <class T>
T* device_scratch(std::size_t n) {
  static T* p = nullptr;
  static std::size_t capacity = 0;
  if (n > capacity) {
    if (p) device_free(p);
    p = nullptr;
    capacity = 0;
    p = static_cast<T*>(device_malloc(n * sizeof(T), "scratch (RMSNorm scale gradient partials, a radix sort's, or the embedding gradient's)"));
    capacity = n;
  }
  return p;
}

template <class T>
void rmsnorm_forward(const T* x, const T* g, T* y, T* rstd, int64 rows, int64 d, T eps) {
  if (rows <= 0 || d <= 0) return;
  const unsigned blocks = row_blocks(rows);
  LOOPSCALE_LAUNCH(rmsnorm_forward_rows<T>, blocks, 32 * rows_per_block)(x, g, y, rstd, rows, d, eps);
  launched("rmsnorm_forward_rows");
}

template <class T>
void rmsnorm_backward(const T* x, const T* g, const T* rstd, const T* dy, T* dx, T* dg, int64 rows, int64 d, bool accumulate) {
  if (rows <= 0 || d <= 0) return;
  const unsigned blocks = row_blocks(rows);
  LOOPSCALE_LAUNCH(rmsnorm_backward_rows<T>, blocks, 32 * rows_per_block)(x, g, rstd, dy, dx, rows, d, accumulate);
  launched("rmsnorm_backward_rows");
  // dg after dx, as the host twin does (dx may alias dy only where no dg is asked for).
  if (dg) {
    // Chunks of at least 256 rows, at most 1024 of them (the grid's y side must stay under 65536):
    // both depend only on the shape, so the order of the sums does too.
    const int64 chunks_wanted = (rows + 255) / 256;
    const int64 chunks_max = chunks_wanted < 1024 ? chunks_wanted : 1024;
    const int64 chunk = (rows + chunks_max - 1) / chunks_max;
    const int64 chunks = (rows + chunk - 1) / chunk;
    T* part = device_scratch<T>(static_cast<std::size_t>(chunks * d));
    const dim3 grid(static_cast<unsigned>((d + dg_columns - 1) / dg_columns), static_cast<unsigned>(chunks));
    LOOPSCALE_LAUNCH(rmsnorm_dg_partials<T>, grid, dim3(dg_columns, dg_lanes))(x, rstd, dy, part, rows, d, chunk);
    launched("rmsnorm_dg_partials");
    LOOPSCALE_LAUNCH(rmsnorm_dg_sum<T>, static_cast<unsigned>((d + 255) / 256), 256)(part, dg, chunks, d);
    launched("rmsnorm_dg_sum");
  }
}

// ---- QK-norm: RMSNorm of the head vectors inside the fused QKV rows (kernels/rmsnorm.hpp) -------

// The head vector of this warp: v = (row v / per_row, head v % per_row), which starts at
// (v / per_row) * stride + (v % per_row) * d; v >= vectors for the spare warps of the last block.
struct StridedVector {
  int64 v, offset;
  int lane;
  __device__ StridedVector(int64 d, int64 stride, int64 per_row)
      : v(static_cast<int64>(blockIdx.x) * rows_per_block + threadIdx.x / 32),
        offset((v / per_row) * stride + (v % per_row) * d),
        lane(static_cast<int>(threadIdx.x % 32)) {}
};

// One warp per head vector: y = x * r, r = 1 / sqrt(mean(x^2) + eps) kept in rstd[v]. y may be x:
// each lane reads x[j] before it writes y[j], and only its own j.
template <class T>
__global__ void rmsnorm_forward_strided_rows(const T* x, T* y, T* rstd, int64 vectors, int64 d, int64 stride, int64 per_row, T eps) {
  const StridedVector w(d, stride, per_row);
  if (w.v >= vectors) return;
  const int64 v = w.v, o = w.offset;
  const int lane = w.lane;
  T ss = 0;
  for (int64 j = lane; j < d; j += 32) ss += x[o + j] * x[o + j];
  ss = warp_reduce(ss, Sum{});
  const T r = T(1) / std::sqrt(ss / T(d) + eps);
  if (lane == 0) rstd[v] = r;
  for (int64 j = lane; j < d; j += 32) y[o + j] = x[o + j] * r;
}

// One warp per head vector: dx = r (dy - y c), c = <dy, y> / d. dx may be dy: every lane has read
// its part of dy for the dot product before the shuffles, and then reads dy[j] before writing dx[j].
template <class T>
__global__ void rmsnorm_backward_from_output_rows(const T* y, const T* rstd, const T* dy, T* dx, int64 vectors, int64 d, int64 stride,
                                                  int64 per_row) {
  const StridedVector w(d, stride, per_row);
  if (w.v >= vectors) return;
  const int64 v = w.v, o = w.offset;
  const int lane = w.lane;
  T dot = 0;
  for (int64 j = lane; j < d; j += 32) dot += dy[o + j] * y[o + j];
  dot = warp_reduce(dot, Sum{});
  const T c = dot / T(d);
  const T r = rstd[v];
  for (int64 j = lane; j < d; j += 32) dx[o + j] = r * (dy[o + j] - y[o + j] * c);
}

template <class T>
void rmsnorm_forward_strided(const T* x, T* y, T* rstd, int64 rows, int64 d, int64 stride, int64 per_row, T eps) {
  if (rows <= 0 || d <= 0 || per_row <= 0) return;
  LOOPSCALE_LAUNCH(rmsnorm_forward_strided_rows<T>, row_blocks(rows * per_row), 32 * rows_per_block)(x, y, rstd, rows * per_row, d, stride, per_row, eps);
  launched("rmsnorm_forward_strided_rows");
}

template <class T>
void rmsnorm_backward_from_output(const T* y, const T* rstd, const T* dy, T* dx, int64 rows, int64 d, int64 stride, int64 per_row) {
  if (rows <= 0 || d <= 0 || per_row <= 0) return;
  LOOPSCALE_LAUNCH(rmsnorm_backward_from_output_rows<T>, row_blocks(rows * per_row), 32 * rows_per_block)(y, rstd, dy, dx, rows * per_row, d, stride, per_row);
  launched("rmsnorm_backward_from_output_rows");
}

// ---- softcapped cross-entropy (kernels/loss.hpp) ------------------------------------------------

inline constexpr int ce_threads = 512;

// One block per row: caps the first `vocab` logits in place (cap > 0), then lse = max + log(sum of
// exp(z - max)) and loss = lse - z[target]. The padding columns are left as they are.
template <class T>
__global__ void softcap_ce_forward_rows(T* logits, const std::int32_t* targets, T* losses, T* lse, int64 padded_vocab, int64 vocab, T cap) {
  __shared__ T red[32];
  const int64 i = blockIdx.x;
  T* z = logits + i * padded_vocab;
  T mx = -std::numeric_limits<T>::infinity();
  for (int64 j = threadIdx.x; j < vocab; j += blockDim.x) {
    T v = z[j];
    if (cap > T(0)) {
      v = cap * std::tanh(v / cap);
      z[j] = v;
    }
    mx = v > mx ? v : mx;
  }
  mx = block_reduce(mx, Max{}, -std::numeric_limits<T>::infinity(), red);
  T sum = 0;
  for (int64 j = threadIdx.x; j < vocab; j += blockDim.x) sum += std::exp(z[j] - mx);  // this thread's own capped values
  sum = block_reduce(sum, Sum{}, T(0), red);
  // z[target] was capped by its thread before the reductions' barriers, so thread 0 sees it.
  if (threadIdx.x == 0) {
    const T l = mx + std::log(sum);
    lse[i] = l;
    losses[i] = l - z[targets[i]];
  }
}

// One block per row: the capped logits become d loss / d raw logits, (softmax - onehot) * scale
// * (1 - (z / cap)^2); the padding columns become zeros.
template <class T>
__global__ void softcap_ce_backward_rows(T* logits, const std::int32_t* targets, const T* lse, T scale, int64 padded_vocab, int64 vocab,
                                         T cap) {
  const int64 i = blockIdx.x;
  T* z = logits + i * padded_vocab;
  const int64 tgt = targets[i];
  const T l = lse[i];
  for (int64 j = threadIdx.x; j < vocab; j += blockDim.x) {
    const T p = std::exp(z[j] - l);
    const T dz = (p - (j == tgt ? T(1) : T(0))) * scale;
    const T u = cap > T(0) ? z[j] / cap : T(0);
    z[j] = dz * (T(1) - u * u);
  }
  for (int64 j = vocab + threadIdx.x; j < padded_vocab; j += blockDim.x) z[j] = T(0);
}

// The fused form of a training step (llm.c's fused classifier): loss and gradient from one block
// per row that reads the raw logits twice and writes the row once, where the two kernels above
// read it three times and write it twice. Pass 1 keeps each thread's running (max, sum of exp)
// over its capped logits, merged over the block; pass 2 recomputes each capped logit from the raw
// one and writes its gradient. The capped logits are never stored.
template <class T>
struct MaxSum {  // sum of exp(z - m) over some z, m their max; -inf and 0 for none
  T m, s;
};
struct MergeMaxSum {
  // The larger max first, so that merge(a, b) and merge(b, a) are the same bits (the butterfly
  // needs that): equal maxima add the sums, which commute.
  template <class T>
  __device__ MaxSum<T> operator()(MaxSum<T> a, MaxSum<T> b) const {
    if (a.m < b.m) {
      const MaxSum<T> t = a;
      a = b;
      b = t;
    }
    if (b.m == -std::numeric_limits<T>::infinity()) return a;  // b holds no logit (nor a, if both are -inf)
    return {a.m, a.s + b.s * std::exp(b.m - a.m)};
  }
};

template <class T>
__device__ MaxSum<T> shuffle_xor(MaxSum<T> v, int o) {
  return {__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
}

// block_reduce for the pair (one barrier-protected slot per warp, as above).
template <class T>
__device__ MaxSum<T> block_merge(MaxSum<T> v, MaxSum<T>* red) {
  const int lane = static_cast<int>(threadIdx.x % 32), warp = static_cast<int>(threadIdx.x / 32);
  const int warps = static_cast<int>(blockDim.x / 32);
  const MergeMaxSum merge;
  for (int o = 16; o > 0; o >>= 1) v = merge(v, shuffle_xor(v, o));
  __syncthreads();
  if (lane == 0) red[warp] = v;
  __syncthreads();
  v = lane < warps ? red[lane] : MaxSum<T>{-std::numeric_limits<T>::infinity(), T(0)};
  for (int o = 16; o > 0; o >>= 1) v = merge(v, shuffle_xor(v, o));
  return v;
}

template <class T>
__device__ T capped(T v, T cap) {
  return cap > T(0) ? cap * std::tanh(v / cap) : v;
}

template <class T>
__global__ void softcap_ce_fused_rows(T* logits, const std::int32_t* targets, T* losses, T* lse, T scale, int64 padded_vocab, int64 vocab,
                                      T cap) {
  __shared__ MaxSum<T> red[32];
  const int64 i = blockIdx.x;
  T* z = logits + i * padded_vocab;
  const int64 tgt = targets[i];
  MaxSum<T> ms{-std::numeric_limits<T>::infinity(), T(0)};
  for (int64 j = threadIdx.x; j < vocab; j += blockDim.x) {
    const T c = capped(z[j], cap);
    if (c > ms.m) {
      ms.s = ms.s * std::exp(ms.m - c) + T(1);  // exp(-inf) = 0 for the first
      ms.m = c;
    } else if (c != -std::numeric_limits<T>::infinity()) {  // adds exp(-inf) = 0, as the host does (not exp(-inf + inf), NaN)
      ms.s += std::exp(c - ms.m);
    }
  }
  // Read before block_merge's barriers: pass 2 overwrites z[tgt].
  const T zt = threadIdx.x == 0 ? capped(z[tgt], cap) : T(0);
  ms = block_merge(ms, red);
  const T l = ms.m + std::log(ms.s);
  if (threadIdx.x == 0) {
    lse[i] = l;
    losses[i] = l - zt;
  }
  for (int64 j = threadIdx.x; j < vocab; j += blockDim.x) {
    const T c = capped(z[j], cap);
    const T p = std::exp(c - l);
    const T dz = (p - (j == tgt ? T(1) : T(0))) * scale;
    const T u = cap > T(0) ? c / cap : T(0);
    z[j] = dz * (T(1) - u * u);
  }
  for (int64 j = vocab + threadIdx.x; j < padded_vocab; j += blockDim.x) z[j] = T(0);
}

template <class T>
void softcap_ce_forward(T* logits, const std::int32_t* targets, T* losses, T* lse, int64 rows, int64 padded_vocab, int64 vocab, T cap) {
  if (rows <= 0) return;
  LOOPSCALE_LAUNCH(softcap_ce_forward_rows<T>, static_cast<unsigned>(rows), ce_threads)(logits, targets, losses, lse, padded_vocab, vocab, cap);
  launched("softcap_ce_forward_rows");
}

template <class T>
void softcap_ce_backward(T* logits, const std::int32_t* targets, const T* lse, T scale, int64 rows, int64 padded_vocab, int64 vocab,
                         T cap) {
  if (rows <= 0) return;
  LOOPSCALE_LAUNCH(softcap_ce_backward_rows<T>, static_cast<unsigned>(rows), ce_threads)(logits, targets, lse, scale, padded_vocab, vocab, cap);
  launched("softcap_ce_backward_rows");
}

template <class T>
void softcap_ce_fused(T* logits, const std::int32_t* targets, T* losses, T* lse, T scale, int64 rows, int64 padded_vocab, int64 vocab,
                      T cap) {
  if (rows <= 0) return;
  LOOPSCALE_LAUNCH(softcap_ce_fused_rows<T>, static_cast<unsigned>(rows), ce_threads)(logits, targets, losses, lse, scale, padded_vocab, vocab, cap);
  launched("softcap_ce_fused_rows");
}

// ---- causal softmax (kernels/attention.hpp, the device form) -------------------------------------

// One warp per row of a T x T probability matrix, the lanes striding the row (coalesced) where the
// portable form gives a row to one thread. Row r sits at position t = r % T of its sequence; only
// j <= t is live, the rest becomes 0.
template <class T>
__global__ void causal_softmax_rows(T* P, int64 rows, int64 Tn) {
  const int64 r = static_cast<int64>(blockIdx.x) * rows_per_block + threadIdx.x / 32;
  if (r >= rows) return;  // the whole warp
  const int lane = static_cast<int>(threadIdx.x % 32);
  T* row = P + r * Tn;
  const int64 t = r % Tn;
  T mx = -std::numeric_limits<T>::infinity();
  for (int64 j = lane; j <= t; j += 32) mx = row[j] > mx ? row[j] : mx;
  mx = warp_reduce(mx, Max{});
  T sum = 0;
  for (int64 j = lane; j <= t; j += 32) {
    row[j] = std::exp(row[j] - mx);
    sum += row[j];
  }
  sum = warp_reduce(sum, Sum{});
  const T inv = T(1) / sum;
  for (int64 j = lane; j <= t; j += 32) row[j] *= inv;
  for (int64 j = t + 1 + lane; j < Tn; j += 32) row[j] = T(0);
}

// One warp per row of dP (rows x T, row r at position t = r % T of sequence r / T, whose
// probabilities start at P + (r / T) * seq_stride + t * T): dS = p * (dP - <p, dP>) * scale in
// place, zeros after t.
template <class T>
__global__ void causal_softmax_backward_rows(const T* P, int64 seq_stride, T* dP, int64 rows, int64 Tn, T scale) {
  const int64 r = static_cast<int64>(blockIdx.x) * rows_per_block + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  const int64 t = r % Tn;
  const T* p = P + (r / Tn) * seq_stride + t * Tn;
  T* d = dP + r * Tn;
  T dot = 0;
  for (int64 j = lane; j <= t; j += 32) dot += p[j] * d[j];
  dot = warp_reduce(dot, Sum{});
  for (int64 j = lane; j <= t; j += 32) d[j] = p[j] * (d[j] - dot) * scale;
  for (int64 j = t + 1 + lane; j < Tn; j += 32) d[j] = T(0);
}

template <class T>
void causal_softmax(T* P, int64 rows, int64 Tn) {
  if (rows <= 0 || Tn <= 0) return;
  LOOPSCALE_LAUNCH(causal_softmax_rows<T>, row_blocks(rows), 32 * rows_per_block)(P, rows, Tn);
  launched("causal_softmax_rows");
}

template <class T>
void causal_softmax_backward(const T* P, int64 seq_stride, T* dP, int64 rows, int64 Tn, T scale) {
  if (rows <= 0 || Tn <= 0) return;
  LOOPSCALE_LAUNCH(causal_softmax_backward_rows<T>, row_blocks(rows), 32 * rows_per_block)(P, seq_stride, dP, rows, Tn, scale);
  launched("causal_softmax_backward_rows");
}

// ---- dot products of row pairs (kernels/moe.hpp: the experts' gate gradients) --------------------

// out[index[r]] = <x_r, y_r> over `cols` values, one warp per row.
template <class T>
__global__ void row_dots_rows(const T* x, const T* y, int64 cols, const std::int32_t* index, T* out, int64 rows) {
  const int64 r = static_cast<int64>(blockIdx.x) * rows_per_block + threadIdx.x / 32;
  if (r >= rows) return;
  const int lane = static_cast<int>(threadIdx.x % 32);
  T dot = 0;
  for (int64 c = lane; c < cols; c += 32) dot += x[r * cols + c] * y[r * cols + c];
  dot = warp_reduce(dot, Sum{});
  if (lane == 0) out[index[r]] = dot;
}

template <class T>
void row_dots(const T* x, const T* y, int64 cols, const std::int32_t* index, T* out, int64 rows) {
  if (rows <= 0) return;
  LOOPSCALE_LAUNCH(row_dots_rows<T>, row_blocks(rows), 32 * rows_per_block)(x, y, cols, index, out, rows);
  launched("row_dots_rows");
}

// ---- the MoE grouping's sort (kernels/moe_router.hpp, group_slots_sorted) -------------------------

// A stable sort of n int32 (key, value) pairs by the keys' low key_bits bits: CUB's radix sort
// (stable, and the same bits from run to run), its temporary storage kept and grown as needed;
// the host's stable sort under the emulator.
inline void sort_pairs(const std::int32_t* keys_in, std::int32_t* keys_out, const std::int32_t* vals_in, std::int32_t* vals_out, int64 n,
                       int key_bits) {
  if (n <= 0) return;
#if defined(LOOPSCALE_SIMT_EMULATION)
  stable_sort_pairs_host(keys_in, keys_out, vals_in, vals_out, n, key_bits);
#else
  std::size_t bytes = 0;
  cuda_detail::check(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys_in, keys_out, vals_in, vals_out, n, 0, key_bits),
                     "cub::DeviceRadixSort::SortPairs (temporary storage size)", std::to_string(n) + " pairs");
  unsigned char* temp = device_scratch<unsigned char>(bytes > 0 ? bytes : 1);
  cuda_detail::check(cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in, keys_out, vals_in, vals_out, n, 0, key_bits),
                     "cub::DeviceRadixSort::SortPairs", std::to_string(n) + " pairs, " + std::to_string(key_bits) + " key bits");
#endif
}

// ---- embedding backward (kernels/embedding.hpp) --------------------------------------------------

// Block (k, c): position k of the token ids sorted with their positions (stable: equal ids keep
// their positions in order), column chunk c (a thread a column). The blocks at the start of a run
// of equal ids add the run's rows of dout into that id's row of dE, in position order: the host
// twin's additions in the host twin's order, so the same bits. The run's end is found once per
// block; the rows are then loaded four at a time ahead of their additions (which stay in order).
// The other blocks return.
template <class T>
__global__ void embedding_backward_runs(const std::int32_t* ids, const std::int32_t* positions, const T* dout, T* dE, int64 n, int64 d) {
  const int64 k = blockIdx.x;
  const std::int32_t id = ids[k];
  if (k > 0 && ids[k - 1] == id) return;  // the whole block
  __shared__ int64 run_end;
  if (threadIdx.x == 0) {
    int64 e = k + 1;
    while (e < n && ids[e] == id) ++e;
    run_end = e;
  }
  __syncthreads();
  const int64 j = static_cast<int64>(blockIdx.y) * blockDim.x + threadIdx.x;
  if (j >= d) return;
  const int64 end = run_end;
  T* cell = dE + static_cast<int64>(id) * d + j;
  T acc = *cell;
  int64 m = k;
  for (; m + 4 <= end; m += 4) {
    const T a = dout[static_cast<int64>(positions[m]) * d + j], b = dout[static_cast<int64>(positions[m + 1]) * d + j],
            c = dout[static_cast<int64>(positions[m + 2]) * d + j], e = dout[static_cast<int64>(positions[m + 3]) * d + j];
    acc += a;
    acc += b;
    acc += c;
    acc += e;
  }
  for (; m < end; ++m) acc += dout[static_cast<int64>(positions[m]) * d + j];
  *cell = acc;
}

// p[i] = i for i < n (the positions the embedding backward sorts with the ids). A template, as
// every kernel here is, so the header defines it in every file that includes it.
template <class I>
__global__ void sequence_kernel(I* p, int64 n) {
  const int64 i = static_cast<int64>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = static_cast<I>(i);
}

// dE[tok[i]] += dout[i] for the n tokens (ids in [0, 2^31)): the ids sorted with their positions
// (sort_pairs above), then a block per run of equal ids and chunk of 256 columns. The portable form gives one thread a
// column over all n tokens: d threads, 4 blocks of 256 at d 1024 and one at d 256, on a GPU with
// 132 multiprocessors (an estimate from the code, not a measurement, put it at 5-10 ms of the
// d 1024 model's 225 ms step and more of a small model's).
template <class T>
void embedding_backward(const std::int32_t* tok, const T* dout, T* dE, int64 n, int64 d) {
  if (n <= 0 || d <= 0) return;
  if (n > std::numeric_limits<int>::max())
    throw std::length_error("embedding_backward: " + std::to_string(n) + " tokens in one call; at most 2^31 - 1 (one block each)");
  std::int32_t* scratch = device_scratch<std::int32_t>(static_cast<std::size_t>(3 * n));
  std::int32_t *positions = scratch, *ids = scratch + n, *sorted_positions = scratch + 2 * n;
  LOOPSCALE_LAUNCH(sequence_kernel<std::int32_t>, static_cast<unsigned>((n + 255) / 256), 256)(positions, n);
  launched("sequence_kernel (positions)");
  sort_pairs(tok, ids, positions, sorted_positions, n, 31);
  const unsigned threads = d >= 256 ? 256u : static_cast<unsigned>((d + 31) / 32 * 32);
  const int64 chunks = (d + threads - 1) / threads;
  if (chunks > 65535) throw std::length_error("embedding_backward: d_model " + std::to_string(d) + " needs more than 65535 blocks of columns");
  LOOPSCALE_LAUNCH(embedding_backward_runs<T>, dim3(static_cast<unsigned>(n), static_cast<unsigned>(chunks)), threads)(ids, sorted_positions, dout, dE, n, d);
  launched("embedding_backward_runs");
}

}  // namespace loopscale::train::cuda_kernels

namespace loopscale::train {

// The hooks of backend/host.hpp that the kernels above fill: a backend deriving from this gets
// each portable kernel (kernels/rmsnorm.hpp, loss.hpp, attention.hpp's device form, embedding.hpp,
// moe.hpp, moe_router.hpp) routed to its CUDA kernel. CudaBackend derives from it on the device;
// SimtBackend (simt.hpp) on the CPU, with Scope opening its guarded memory around each call.
struct NoScope {};

template <class Scope = NoScope>
struct CudaKernelHooks {
  using int64 = std::int64_t;
  template <class T>
  static void rmsnorm_forward(const T* x, const T* g, T* y, T* rstd, int64 rows, int64 d, T eps) {
    [[maybe_unused]] const Scope scope{};
    cuda_kernels::rmsnorm_forward(x, g, y, rstd, rows, d, eps);
  }
  template <class T>
  static void rmsnorm_backward(const T* x, const T* g, const T* rstd, const T* dy, T* dx, T* dg, int64 rows, int64 d, bool accumulate) {
    [[maybe_unused]] const Scope scope{};
    cuda_kernels::rmsnorm_backward(x, g, rstd, dy, dx, dg, rows, d, accumulate);
  }
  template <class T>
  static void rmsnorm_forward_strided(const T* x, T* y, T* rstd, int64 rows, int64 d, int64 stride, int64 per_row, T eps) {
    [[maybe_unused]] const Scope scope{};
    cuda_kernels::rmsnorm_forward_strided(x, y, rstd, rows, d, stride, per_row, eps);
  }
  template <class T>
  static void rmsnorm_backward_from_output(const T* y, const T* rstd, const T* dy, T* dx, int64 rows, int64 d, int64 stride, int64 per_row) {
    [[maybe_unused]] const Scope scope{};
    cuda_kernels::rmsnorm_backward_from_output(y, rstd, dy, dx, rows, d, stride, per_row);
  }
  template <class T>
  static void embedding_backward(const std::int32_t* tok, const T* dout, T* dE, int64 n, int64 d) {
    [[maybe_unused]] const Scope scope{};
    cuda_kernels::embedding_backward(tok, dout, dE, n, d);
  }
  template <class T>
  static void softcap_ce_forward(T* logits, const std::int32_t* targets, T* losses, T* lse, int64 rows, int64 padded_vocab, int64 vocab,
                                 T cap) {
    [[maybe_unused]] const Scope scope{};
    cuda_kernels::softcap_ce_forward(logits, targets, losses, lse, rows, padded_vocab, vocab, cap);
  }
  template <class T>
  static void softcap_ce_backward(T* logits, const std::int32_t* targets, const T* lse, T scale, int64 rows, int64 padded_vocab,
                                  int64 vocab, T cap) {
    [[maybe_unused]] const Scope scope{};
    cuda_kernels::softcap_ce_backward(logits, targets, lse, scale, rows, padded_vocab, vocab, cap);
  }
  // A training step's loss and gradient in one kernel.
  template <class T>
  static void softcap_ce_fused(T* logits, const std::int32_t* targets, T* losses, T* lse, T scale, int64 rows, int64 padded_vocab,
                               int64 vocab, T cap) {
    [[maybe_unused]] const Scope scope{};
    cuda_kernels::softcap_ce_fused(logits, targets, losses, lse, scale, rows, padded_vocab, vocab, cap);
  }
  template <class T>
  static void causal_softmax(T* P, int64 rows, int64 Tn) {
    [[maybe_unused]] const Scope scope{};
    cuda_kernels::causal_softmax(P, rows, Tn);
  }
  template <class T>
  static void causal_softmax_backward(const T* P, int64 seq_stride, T* dP, int64 rows, int64 Tn, T scale) {
    [[maybe_unused]] const Scope scope{};
    cuda_kernels::causal_softmax_backward(P, seq_stride, dP, rows, Tn, scale);
  }
  // out[index[r]] = <x_r, y_r> over rows of `cols` values (the MoE experts' gate gradients).
  template <class T>
  static void row_dots(const T* x, const T* y, int64 cols, const std::int32_t* index, T* out, int64 rows) {
    [[maybe_unused]] const Scope scope{};
    cuda_kernels::row_dots(x, y, cols, index, out, rows);
  }
  // The MoE grouping's stable sort of (expert, slot) pairs (kernels/moe_router.hpp).
  static void sort_pairs(const std::int32_t* keys_in, std::int32_t* keys_out, const std::int32_t* vals_in, std::int32_t* vals_out, int64 n,
                         int key_bits) {
    [[maybe_unused]] const Scope scope{};
    cuda_kernels::sort_pairs(keys_in, keys_out, vals_in, vals_out, n, key_bits);
  }
};

}  // namespace loopscale::train
