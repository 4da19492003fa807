// RMSNorm, y = x / rms(x) * g, over the last dimension of a (rows x d) buffer. With g null it is
// the parameter-free normalisation QK-norm uses. The forward keeps 1/rms per row for the backward.
//
// Backward (xhat = x / rms, gy = dy * g):  dx = (gy - xhat * mean(gy * xhat)) / rms,
//                                          dg += sum over rows of dy * xhat.
#pragma once

#include <cmath>

#include "loopscale/train/backend/host.hpp"
#include "loopscale/train/backend/vector_ops.hpp"
#include "loopscale/train/kernels/row_math.hpp"

namespace loopscale::train::kernels {

inline constexpr double rms_eps = 1e-6;

// A backend with a kernel of its own for these (backend/host.hpp, "Kernels of a backend's own":
// CUDA's one warp per row, or per head vector for the strided pair below) runs it instead, with
// rms_eps passed in.
//
// `copy`, when given, receives x as well, in the same pass: a layer's residual stream is copied
// to where the next GEMM adds into it right where the norm reads it (model.hpp), which saves
// reading the rows again (three separate copies were about 1% of the acceptance model's step).
template <class B, class T>
void rmsnorm_forward(const T* x, const T* g, T* y, T* rstd, int64 rows, int64 d, T* copy = nullptr) {
  if constexpr (requires { B::rmsnorm_forward(x, g, y, rstd, rows, d, T(rms_eps)); }) {
    B::rmsnorm_forward(x, g, y, rstd, rows, d, T(rms_eps));
    if (copy) ::loopscale::train::detail::copy_into<B>(x, copy, rows * d);
    return;
  }
  B::parallel_for(rows, [=] LOOPSCALE_HD(int64 i) {
    const T* xi = x + i * d;
    T* yi = y + i * d;
    const T r = T(1) / std::sqrt(row_sum_squares(xi, d) / T(d) + T(rms_eps));
    rstd[i] = r;
    if (g)
      for (int64 j = 0; j < d; ++j) yi[j] = xi[j] * r * g[j];
    else
      for (int64 j = 0; j < d; ++j) yi[j] = xi[j] * r;
    if (copy)
      for (int64 j = 0; j < d; ++j) copy[i * d + j] = xi[j];
  });
}

// dx = (or +=, when accumulate) the input gradient; dg += the scale gradient (when g is given).
// Without accumulate, dx may alias dy: each row reads all of dy before writing dx.
template <class B, class T>
void rmsnorm_backward(const T* x, const T* g, const T* rstd, const T* dy, T* dx, T* dg, int64 rows, int64 d,
                      bool accumulate) {
  if constexpr (requires { B::rmsnorm_backward(x, g, rstd, dy, dx, dg, rows, d, accumulate); }) {
    B::rmsnorm_backward(x, g, rstd, dy, dx, dg, rows, d, accumulate);
    return;
  }
  B::parallel_for(rows, [=] LOOPSCALE_HD(int64 i) {
    const T* xi = x + i * d;
    const T* dyi = dy + i * d;
    T* dxi = dx + i * d;
    const T r = rstd[i];
    const T dot = g ? row_dot3(dyi, g, xi, d) : row_dot(dyi, xi, d);
    const T c = dot * r * r / T(d);  // mean(gy * xhat) / rms, folded with xhat = x * r
    for (int64 j = 0; j < d; ++j) {
      const T v = r * ((g ? dyi[j] * g[j] : dyi[j]) - xi[j] * c);
      dxi[j] = accumulate ? dxi[j] + v : v;
    }
  });
  if (dg) {
    // Column slices: every thread sums whole columns in row order (deterministic, no races).
    constexpr int64 slice = 16;
    B::parallel_for((d + slice - 1) / slice, [=] LOOPSCALE_HD(int64 s) {
      const int64 lo = s * slice, hi = lo + slice < d ? lo + slice : d;
      T acc[slice] = {};
      for (int64 i = 0; i < rows; ++i) {
        const T r = rstd[i];
        for (int64 j = lo; j < hi; ++j) acc[j - lo] += dy[i * d + j] * x[i * d + j] * r;
      }
      for (int64 j = lo; j < hi; ++j) dg[j] += acc[j - lo];
    });
  }
}

// The parameter-free backward written in terms of the output (y = xhat), so QK-norm need not keep
// its input: dx = rstd * (dy - y * mean(dy * y)). May run in place (dx == dy).
template <class B, class T>
void rmsnorm_backward_from_output(const T* y, const T* rstd, const T* dy, T* dx, int64 rows, int64 d, int64 stride,
                                  int64 per_row) {
  // `rows` groups of `per_row` vectors of length d, the groups `stride` apart: the Q and K heads of
  // each token inside the fused QKV row. A task per row on the host; CUDA's own kernel takes a
  // warp per vector (a thread per row strode a row apart from its neighbours on a device).
  if constexpr (requires { B::rmsnorm_backward_from_output(y, rstd, dy, dx, rows, d, stride, per_row); }) {
    B::rmsnorm_backward_from_output(y, rstd, dy, dx, rows, d, stride, per_row);
    return;
  }
  B::parallel_for(rows, [=] LOOPSCALE_HD(int64 i) {
    for (int64 h = 0; h < per_row; ++h) {
      const int64 o = i * stride + h * d;
      const T r = rstd[i * per_row + h];
      const T c = row_dot(dy + o, y + o, d) / T(d);
      for (int64 j = 0; j < d; ++j) dx[o + j] = r * (dy[o + j] - y[o + j] * c);
    }
  });
}

// Forward of the same strided, parameter-free form: y = x / rms(x) per head vector.
template <class B, class T>
void rmsnorm_forward_strided(const T* x, T* y, T* rstd, int64 rows, int64 d, int64 stride, int64 per_row) {
  if constexpr (requires { B::rmsnorm_forward_strided(x, y, rstd, rows, d, stride, per_row, T(rms_eps)); }) {
    B::rmsnorm_forward_strided(x, y, rstd, rows, d, stride, per_row, T(rms_eps));
    return;
  }
  B::parallel_for(rows, [=] LOOPSCALE_HD(int64 i) {
    for (int64 h = 0; h < per_row; ++h) {
      const int64 o = i * stride + h * d;
      const T r = T(1) / std::sqrt(row_sum_squares(x + o, d) / T(d) + T(rms_eps));
      rstd[i * per_row + h] = r;
      for (int64 j = 0; j < d; ++j) y[o + j] = x[o + j] * r;
    }
  });
}

}  // namespace loopscale::train::kernels
