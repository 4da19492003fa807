// Input injection: how the prelude output e re-enters each recurrence whose running state is s.
// z below is the recurrence's new state: the block's output y normalised by the recurrence's norm
// with the per-recurrence state norm (the paper's), y itself with the norm after the loop.
//   linear        u = W [e ; s], W (d x 2d) initialised [I | 0]; s starts as e
//   additive      u = s + e; s starts at zero
//   passthrough   u = s; s starts as e (also what r = 1 without injection means)
//   hyper (K)     the iso-depth paper's hyperconnections: K lane states H_k, all starting as e. In
//                 recurrence i the block reads x = sum_k alpha_ik H_k, computes y = block(x), and the
//                 lanes become H'_k = sum_j M_ikj H_j + beta_ik z (z = norm(y): this form needs the
//                 per-recurrence state norm). Each recurrence has its own set (M_i, alpha_i, beta_i),
//                 r (K^2 + 2K) parameters, initialised cyclically: alpha_i = e_{i mod K}, M_i = I,
//                 beta_i = 1.
//   hyper-shared  one set (M, alpha, beta) for all recurrences, K^2 + 2K parameters, and the lanes
//   (K)           take the state's update: H'_k = sum_j M_kj H_j + beta_k (z - x). Initialised as the
//                 first member of the cyclic start, alpha = e_0, M = I, beta = 1, so with one lane it
//                 is the plain loop (H' = z).
// Either form sum-pools the lanes before the coda.
#pragma once

#include "loopscale/train/kernels/linear.hpp"
#include "loopscale/train/backend/spans.hpp"

namespace loopscale::train::kernels {

// ---- linear ----------------------------------------------------------------------------------
// u (n x d) = e We^T + s Ws^T with W = [We | Ws] stored (d x 2d).
template <class B, class T>
void inject_linear_forward(const T* e, const T* s, const T* W, T* u, int64 n, int64 d) {
  B::gemm(false, true, n, d, d, T(1), e, d, W, 2 * d, T(0), u, d);
  B::gemm(false, true, n, d, d, T(1), s, d, W + d, 2 * d, T(1), u, d);
}

// de += du We; ds = du Ws (when ds is given); dW += [du^T e | du^T s].
template <class B, class T>
void inject_linear_backward(const T* e, const T* s, const T* W, const T* du, T* de, T* ds, T* dW, int64 n, int64 d) {
  B::gemm(false, false, n, d, d, T(1), du, d, W, 2 * d, T(1), de, d);
  if (ds) B::gemm(false, false, n, d, d, T(1), du, d, W + d, 2 * d, T(0), ds, d);
  B::gemm(true, false, d, d, n, T(1), du, d, e, d, T(1), dW, 2 * d);
  B::gemm(true, false, d, d, n, T(1), du, d, s, d, T(1), dW + d, 2 * d);
}

template <class T>
void inject_linear_init(T* W, int64 d) {
  for (int64 i = 0; i < d; ++i)
    for (int64 j = 0; j < 2 * d; ++j) W[i * 2 * d + j] = i == j ? T(1) : T(0);
}

// ---- element-wise helpers (additive, passthrough, lane pooling) ------------------------------
template <class B, class T>
void add_into(T* y, const T* x, int64 n) {  // y += x
  for_spans<B>(n, [=] LOOPSCALE_HD(int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) y[i] += x[i];
  });
}
template <class B, class T>
void copy(T* y, const T* x, int64 n) {
  for_spans<B>(n, [=] LOOPSCALE_HD(int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) y[i] = x[i];
  });
}
template <class B, class T>
void fill(T* y, T v, int64 n) {
  for_spans<B>(n, [=] LOOPSCALE_HD(int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) y[i] = v;
  });
}
template <class B, class T>
void add_scaled(T* y, const T* x, T a, int64 n) {  // y += a x
  for_spans<B>(n, [=] LOOPSCALE_HD(int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) y[i] += a * x[i];
  });
}
template <class B, class T>
void sum2(T* u, const T* a, const T* b, int64 n) {  // u = a + b
  for_spans<B>(n, [=] LOOPSCALE_HD(int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) u[i] = a[i] + b[i];
  });
}

// *y += v for one value y in backend memory and v a reduction the host holds.
template <class B, class T>
void add_scalar(T* y, T v) {
  B::single([=] LOOPSCALE_HD { *y += v; });
}

// ---- hyperconnections --------------------------------------------------------------------------
// Lanes are stored one after another: H is (K x n) with n = rows * d.
struct HyperParams {
  int64 K = 0;
  static constexpr int64 count(int64 K) { return K * K + 2 * K; }
  // Layout inside the parameter block: M (K x K), alpha (K), beta (K).
  static constexpr int64 M(int64) { return 0; }
  static constexpr int64 alpha(int64 K) { return K * K; }
  static constexpr int64 beta(int64 K) { return K * K + K; }
};

// The cyclic start of `sets` consecutive parameter sets (one per recurrence for the paper's form, one
// for the shared form): set i has M = I, alpha = e_{i mod K}, beta = 1.
template <class T>
void hyper_init(T* p, int64 K, int64 sets = 1) {
  for (int64 s = 0; s < sets; ++s, p += HyperParams::count(K)) {
    for (int64 i = 0; i < K; ++i)
      for (int64 j = 0; j < K; ++j) p[i * K + j] = i == j ? T(1) : T(0);
    for (int64 k = 0; k < K; ++k) p[HyperParams::alpha(K) + k] = k == s % K ? T(1) : T(0);
    for (int64 k = 0; k < K; ++k) p[HyperParams::beta(K) + k] = T(1);
  }
}

// x = sum_k alpha_k H_k.
template <class B, class T>
void hyper_aggregate(const T* H, const T* alpha, T* x, int64 K, int64 n) {
  for_spans<B>(n, [=] LOOPSCALE_HD(int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) {
      T v = 0;
      for (int64 k = 0; k < K; ++k) v += alpha[k] * H[k * n + i];
      x[i] = v;
    }
  });
}

// dalpha_k += <dx, H_k>; dH_k += alpha_k dx.
template <class B, class T>
void hyper_aggregate_backward(const T* H, const T* alpha, const T* dx, T* dH, T* dalpha, int64 K, int64 n) {
  for (int64 k = 0; k < K; ++k) {
    const T* h = H + k * n;
    add_scalar<B>(dalpha + k, static_cast<T>(B::sum(n, [=] LOOPSCALE_HD(int64 i) { return dx[i] * h[i]; })));
  }
  for_spans<B>(n, [=] LOOPSCALE_HD(int64 lo, int64 hi) {
    for (int64 k = 0; k < K; ++k)
      for (int64 i = lo; i < hi; ++i) dH[k * n + i] += alpha[k] * dx[i];
  });
}

// Hout_k = sum_j M_kj H_j + beta_k (y - x); without x (null, the paper's form) beta_k y.
template <class B, class T>
void hyper_update(const T* H, const T* M, const T* beta, const T* x, const T* y, T* Hout, int64 K, int64 n) {
  for_spans<B>(n, [=] LOOPSCALE_HD(int64 lo, int64 hi) {
    for (int64 k = 0; k < K; ++k)
      for (int64 i = lo; i < hi; ++i) {
        T v = beta[k] * (x ? y[i] - x[i] : y[i]);
        for (int64 j = 0; j < K; ++j) v += M[k * K + j] * H[j * n + i];
        Hout[k * n + i] = v;
      }
  });
}

// From dHout: ddelta = sum_k beta_k dHout_k (the gradient of y, and minus that of x when x is given);
// dbeta_k += <dHout_k, y - x> (x null: <dHout_k, y>); dM_kj += <dHout_k, H_j>;
// dH_j = sum_k M_kj dHout_k (overwritten).
template <class B, class T>
void hyper_update_backward(const T* H, const T* M, const T* beta, const T* x, const T* y, const T* dHout, T* dH,
                           T* ddelta, T* dM, T* dbeta, int64 K, int64 n) {
  for (int64 k = 0; k < K; ++k) {
    const T* g = dHout + k * n;
    add_scalar<B>(dbeta + k, static_cast<T>(B::sum(n, [=] LOOPSCALE_HD(int64 i) { return g[i] * (x ? y[i] - x[i] : y[i]); })));
    for (int64 j = 0; j < K; ++j) {
      const T* h = H + j * n;
      add_scalar<B>(dM + k * K + j, static_cast<T>(B::sum(n, [=] LOOPSCALE_HD(int64 i) { return g[i] * h[i]; })));
    }
  }
  for_spans<B>(n, [=] LOOPSCALE_HD(int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) {
      T dd = 0;
      for (int64 k = 0; k < K; ++k) dd += beta[k] * dHout[k * n + i];
      ddelta[i] = dd;
      for (int64 j = 0; j < K; ++j) {
        T v = 0;
        for (int64 k = 0; k < K; ++k) v += M[k * K + j] * dHout[k * n + i];
        dH[j * n + i] = v;
      }
    }
  });
}

}  // namespace loopscale::train::kernels
