// A bias-free linear layer y = x W^T over row-major flat buffers: W is (out x in), x is (rows x in).
// Forward and backward are single GEMMs; the backward accumulates into the weight gradient, which is
// how a shared block sums its gradients over the recurrences it ran.
#pragma once

#include "loopscale/train/backend/host.hpp"

namespace loopscale::train::kernels {

// y (rows x out) = x W^T, or y += x W^T when accumulate.
template <class B, class T>
void linear_forward(const T* x, const T* W, T* y, int64 rows, int64 in, int64 out, bool accumulate = false) {
  B::gemm(false, true, rows, out, in, T(1), x, in, W, in, accumulate ? T(1) : T(0), y, out);
}

// dx (rows x in) = dy W (or += when accumulate_dx; skipped when dx is null); dW += dy^T x.
template <class B, class T>
void linear_backward(const T* x, const T* W, const T* dy, T* dx, T* dW, int64 rows, int64 in, int64 out,
                     bool accumulate_dx = false) {
  if (dx) B::gemm(false, false, rows, in, out, T(1), dy, out, W, in, accumulate_dx ? T(1) : T(0), dx, in);
  if (dW) B::gemm(true, false, out, in, rows, T(1), dy, out, x, in, T(1), dW, in);
}

}  // namespace loopscale::train::kernels
