// Token embedding: a row lookup forward, a scatter-add backward. The backward is parallel over
// column slices (each thread owns some columns of every row), so tokens that repeat in a batch never
// race and the additions happen in token order: deterministic.
#pragma once

#include <cstdint>

#include "loopscale/train/backend/host.hpp"
#include "loopscale/train/backend/spans.hpp"

namespace loopscale::train::kernels {

// out (n x d) = E[tok[i]] for each of the n tokens.
template <class B, class T>
void embedding_forward(const std::int32_t* tok, const T* E, T* out, int64 n, int64 d) {
  for_row_spans<B>(n, d, [=] LOOPSCALE_HD(int64 i, int64 lo, int64 hi) {
    const T* src = E + static_cast<int64>(tok[i]) * d;
    T* dst = out + i * d;
    for (int64 j = lo; j < hi; ++j) dst[j] = src[j];
  });
}

// dE[tok[i]] += dout[i] for each token. A task owns `slice` columns: 16 on the host (a task per
// 16 columns fills the cores and keeps their stores in one cache line); one on a device, whose
// thousands of threads would otherwise sit idle while d / 16 of them walk every token. Each value
// is added in token order either way, so the slice changes no bit.
template <class B, class T>
void embedding_backward(const std::int32_t* tok, const T* dout, T* dE, int64 n, int64 d) {
  // A backend's own kernel where it has one (CUDA: the ids sorted, a block per run of equal ids,
  // the same additions in the same order).
  if constexpr (requires { B::embedding_backward(tok, dout, dE, n, d); }) {
    B::embedding_backward(tok, dout, dE, n, d);
    return;
  }
  constexpr int64 slice = B::nested_gemm ? 16 : 1;
  const int64 slices = (d + slice - 1) / slice;
  B::parallel_for(slices, [=] LOOPSCALE_HD(int64 s) {
    const int64 lo = s * slice, hi = lo + slice < d ? lo + slice : d;
    for (int64 i = 0; i < n; ++i) {
      T* dst = dE + static_cast<int64>(tok[i]) * d;
      const T* src = dout + i * d;
      for (int64 j = lo; j < hi; ++j) dst[j] += src[j];
    }
  });
}

}  // namespace loopscale::train::kernels
