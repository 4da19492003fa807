// Rotary position embedding on the Q and K heads of a fused QKV row. Pairs are (j, j + q/2) of each
// head ("rotate half"); position t rotates pair j by t * base^(-2j/q). The backward is the rotation
// by the opposite angle, so both run in place.
#pragma once

#include <cmath>
#include <vector>

#include "loopscale/train/backend/host.hpp"

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
template <class B, class T>
void rope_apply(T* x, const T* cos_t, const T* sin_t, int64 rows, int64 seq_len, int64 heads, int64 q, int64 stride,
                bool inverse) {
  const int64 half = q / 2;
  B::parallel_for(rows, [=] LOOPSCALE_HD(int64 i) {
    const int64 t = i % seq_len;
    const T* c = cos_t + t * half;
    const T* s = sin_t + t * half;
    for (int64 h = 0; h < heads; ++h) {
      T* v = x + i * stride + h * q;
      for (int64 j = 0; j < half; ++j) {
        const T a = v[j], b = v[j + half];
        const T sn = inverse ? -s[j] : s[j];
        v[j] = a * c[j] - b * sn;
        v[j + half] = a * sn + b * c[j];
      }
    }
  });
}

}  // namespace loopscale::train::kernels
