// How element-wise kernels cut their work into tasks on each backend. A kernel writes its body for
// a span of consecutive values, f(lo, hi) over a flat range or f(row, lo, hi) over one row's
// columns, and these run it over the whole range:
// - on the host (B::nested_gemm: CPU threads that may run GEMMs inside tasks), one task per chunk
//   of span_chunk values or per row, so a task's inner loop runs over contiguous values and
//   vectorises, and a few dozen tasks fill the cores;
// - on a device (nested_gemm false: CUDA, and GuardDeviceBackend standing in for it in the tests),
//   one thread per value, so neighbouring threads touch neighbouring addresses (coalesced loads)
//   and there are enough threads to fill the GPU. One thread walking a whole row of H values would
//   read with a row's stride between neighbouring threads, 32 cache lines per warp load.
// Each value gets the same operations in the same order either way; what changes is only which
// thread computes which value. So the host forms and the device forms run on the CPU
// (GuardDeviceBackend) give the same bits; on a GPU nvcc may contract a * b + c into one FMA, so
// there results agree to rounding. (embedding_backward makes the same choice for its column
// slices.)
#pragma once

#include <cstdint>

#include "loopscale/train/backend/portable.hpp"

namespace loopscale::train {

inline constexpr std::int64_t span_chunk = 1024;  // values per host task of a flat range

namespace span_detail {

// Thrust functors that call a span body (structs, so an nvcc extended lambda can be their member).
template <class F>
struct EachChunk {
  F f;
  std::int64_t n, chunk;
  LOOPSCALE_HD void operator()(std::int64_t c) const { f(c * chunk, (c + 1) * chunk < n ? (c + 1) * chunk : n); }
};
template <class F>
struct EachValue {
  F f;
  LOOPSCALE_HD void operator()(std::int64_t i) const { f(i, i + 1); }
};
template <class F>
struct EachRow {
  F f;
  std::int64_t cols;
  LOOPSCALE_HD void operator()(std::int64_t r) const { f(r, std::int64_t{0}, cols); }
};
template <class F>
struct EachRowValue {
  F f;
  std::int64_t cols;
  LOOPSCALE_HD void operator()(std::int64_t i) const {
    const std::int64_t r = i / cols, c = i - r * cols;
    f(r, c, c + 1);
  }
};

}  // namespace span_detail

// f(lo, hi) over [0, n): host tasks of Chunk values, device threads of one.
template <class B, std::int64_t Chunk = span_chunk, class F>
void for_spans(std::int64_t n, F f) {
  static_assert(Chunk > 0, "for_spans: a host task needs at least one value");
  if (n <= 0) return;
  if constexpr (B::nested_gemm) B::parallel_for((n + Chunk - 1) / Chunk, span_detail::EachChunk<F>{f, n, Chunk});
  else B::parallel_for(n, span_detail::EachValue<F>{f});
}

// f(row, lo, hi) over the columns [0, cols) of rows [0, rows): host tasks of one row, device
// threads of one value.
template <class B, class F>
void for_row_spans(std::int64_t rows, std::int64_t cols, F f) {
  if (rows <= 0 || cols <= 0) return;
  if constexpr (B::nested_gemm) B::parallel_for(rows, span_detail::EachRow<F>{f, cols});
  else B::parallel_for(rows * cols, span_detail::EachRowValue<F>{f, cols});
}

}  // namespace loopscale::train
