// Rotary position embedding on the Q and K heads of a fused QKV row. Pairs are (j, j + q/2) of each
// head ("rotate half"); position t rotates pair j by t * base^(-2j/q). The backward is the rotation
// by the opposite angle, so both run in place.
#pragma once

#include <cmath>
#include <vector>

#include "loopscale/train/backend/host.hpp"
#include "loopscale/train/backend/spans.hpp"

namespace loopscale::train::kernels {

// cos and sin tables, (T x q/2) each, computed in double and rounded once.
template <class T>
void rope_tables(int64 seq_len, int64 head_dim, T* cos_t, T* sin_t, double base = 10000.0) {
  const int64 half = head_dim / 2;
  for (int64 t = 0; t < seq_len; ++t)
    for (int64 j = 0; j < half; ++j) {
      const double ang = static_cast<double>(t) * std::pow(base, -2.0 * static_cast<double>(j) / static_cast<double>(head_dim));
      cos_t[t * half + j] = static_cast<T>(std::cos(ang));
      sin_t[t * half + j] = static_cast<T>(std::sin(ang));
    }
}

// Rotates `heads` head vectors of dimension q at the start of each of the rows (row stride `stride`);
// row i is at position i % seq_len. inverse = true applies the transpose (the backward).
//
// From `src` into x (src may be x): the rotated heads, and when `copy_rest` the row's other values
// [heads q, stride) unchanged too, in the same pass. The forward reads the Q and K heads of the
// normalised QKV rows and writes the rotated rows the attention reads, V included, where a copy
// followed by rotation in place read and wrote every row twice.
template <class B, class T>
void rope_apply(const T* src, T* x, const T* cos_t, const T* sin_t, int64 rows, int64 seq_len, int64 heads, int64 q, int64 stride,
                bool inverse, bool copy_rest) {
  const int64 half = q / 2, rotations = heads * half, rest = copy_rest ? stride - heads * q : 0;
  // A row's work is heads x half rotations, column k = h half + j, then the `rest` values copied,
  // column rotations + m for value heads q + m (spans.hpp); each span walks the heads it covers.
  for_row_spans<B>(rows, rotations + rest, [=] LOOPSCALE_HD(int64 i, int64 lo, int64 hi) {
    const int64 t = i % seq_len;
    const T* c = cos_t + t * half;
    const T* s = sin_t + t * half;
    const int64 rot_hi = hi < rotations ? hi : rotations;
    for (int64 h = lo / half; h * half < rot_hi; ++h) {
      const T* u = src + i * stride + h * q;
      T* v = x + i * stride + h * q;
      const int64 j0 = h * half < lo ? lo - h * half : 0, j1 = (h + 1) * half > rot_hi ? rot_hi - h * half : half;
      for (int64 j = j0; j < j1; ++j) {
        const T a = u[j], b = u[j + half];
        const T sn = inverse ? -s[j] : s[j];
        v[j] = a * c[j] - b * sn;
        v[j + half] = a * sn + b * c[j];
      }
    }
    const int64 m0 = lo > rotations ? lo - rotations : 0, m1 = hi - rotations;
    const int64 o = i * stride + heads * q;
    for (int64 m = m0; m < m1; ++m) x[o + m] = src[o + m];
  });
}

// In place: the heads of x rotated, the rest of each row left as it is.
template <class B, class T>
void rope_apply(T* x, const T* cos_t, const T* sin_t, int64 rows, int64 seq_len, int64 heads, int64 q, int64 stride, bool inverse) {
  rope_apply<B>(static_cast<const T*>(x), x, cos_t, sin_t, rows, seq_len, heads, q, stride, inverse, false);
}

}  // namespace loopscale::train::kernels
