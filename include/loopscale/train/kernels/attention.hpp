// Causal multi-head attention core, softmax(Q K^T / sqrt(q)) V per (sequence, head), over a fused
// QKV buffer whose rows are [Q heads | K heads | V heads] (grouped KV heads: h/kv query heads share
// one K and V head). The projections, QK-norm and RoPE live in the layer (model.hpp); this kernel
// is the part between them.
//
// The score and probability matrices are T x T with the upper triangle masked. The task form (the
// host) computes them in blocks of causal_block_rows query rows, each against the key positions up
// to its last row only, so the masked triangle costs little (oneDNN GEMMs on Zen 4, the acceptance
// shape's attention forward and backward, 2 threads: 19.1-20.3 ms untiled, 15.9-17.2 ms in blocks of
// 128 rows; about 2% of the training step). The device form multiplies whole T x T matrices. The
// FLOP convention counts attention at full T either way. The forward keeps the probabilities P for
// the backward:
//   dP = dO V^T,  dV += P^T dO,  dS = P * (dP - rowsum(P * dP)) / sqrt(q),  dQ = dS K,  dK += dS^T Q.
#pragma once

#include <algorithm>
#include <cmath>

#include "loopscale/train/backend/host.hpp"
#include "loopscale/train/backend/spans.hpp"
#include "loopscale/train/kernels/row_math.hpp"

namespace loopscale::train::kernels {

// Rows per block of the task form's causal tiling (the host): a block of query rows multiplies only
// the key positions at or before its last row. At T = 256, 128-row blocks do 3/4 of the full
// products' work in 2 GEMMs per product, 64-row blocks 5/8 in 4 smaller ones, which were no faster
// in the training step.
inline constexpr int64 causal_block_rows = 128;

// f(b0, b1) for each block [b0, b1) of causal_block_rows rows of a T-row matrix, in order.
template <class F>
inline void for_causal_blocks(int64 Tn, F f) {
  for (int64 b0 = 0; b0 < Tn; b0 += causal_block_rows) f(b0, std::min(Tn, b0 + causal_block_rows));
}

struct AttentionShape {
  int64 batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0;
  constexpr int64 row() const { return (heads + 2 * kv_heads) * head_dim; }  // fused QKV row
  constexpr int64 out_row() const { return heads * head_dim; }
  constexpr int64 probs() const { return batch * heads * seq * seq; }
};

// Row t of a causal score matrix (Tn columns) in place: the softmax over j <= t, zeros after.
template <class T>
LOOPSCALE_HD inline void causal_softmax_row(T* row, int64 t, int64 Tn) {
  const T inv = T(1) / row_exp_shifted(row, t + 1, row_max(row, t + 1));
  for (int64 j = 0; j <= t; ++j) row[j] *= inv;
  for (int64 j = t + 1; j < Tn; ++j) row[j] = T(0);
}

// Row t of dS from the probabilities p and dP (in place in d): p * (d - <p, d>) * scale, zeros after t.
template <class T>
LOOPSCALE_HD inline void causal_softmax_backward_row(const T* p, T* d, int64 t, int64 Tn, T scale) {
  const T dot = row_dot(p, d, t + 1);
  for (int64 j = 0; j <= t; ++j) d[j] = p[j] * (d[j] - dot) * scale;
  for (int64 j = t + 1; j < Tn; ++j) d[j] = T(0);
}

// Two forms of the same arithmetic, chosen by the backend (B::nested_gemm): the task form runs one
// parallel task per (sequence, head) that makes its own GEMMs (the host: the heads spread over the
// threads); the device form issues every GEMM from the host, one strided-batched GEMM per head over
// all sequences (a sequence's rows are T * row() values after the previous one's, its probabilities
// heads * T * T after), and runs the softmax as one element-wise pass over all rows (a GPU, or
// GuardDeviceBackend in the tests), or as the backend's own kernel where it has one (CUDA: a warp
// per row; the hook of backend/host.hpp). Batching over the heads too would need one stride for two
// steps (a head is head_dim values into the row, a sequence T rows on), so the heads stay a loop:
// `heads` launches per product rather than batch * heads.

// out (N x h q) and P (batch x heads x T x T) from qkv (N x row()).
template <class B, class T>
void attention_forward(const T* qkv, T* P, T* out, const AttentionShape& s) {
  const int64 Tn = s.seq, q = s.head_dim, C = s.row(), hq = s.out_row(), group = s.heads / s.kv_heads;
  const T scale = T(1) / std::sqrt(T(q));
  if constexpr (B::nested_gemm) {
    B::parallel_for(s.batch * s.heads, [=](int64 bh) {
      const int64 b = bh / s.heads, h = bh % s.heads, g = h / group;
      const T* Q = qkv + b * Tn * C + h * q;
      const T* K = qkv + b * Tn * C + (s.heads + g) * q;
      const T* V = qkv + b * Tn * C + (s.heads + s.kv_heads + g) * q;
      T* S = P + bh * Tn * Tn;
      T* O = out + b * Tn * hq + h * q;
      // Row block [r0, r1) attends to positions < r1 only: the scores right of that are never
      // computed (the softmax writes their zeros), and P V stops at column r1.
      for_causal_blocks(Tn, [&](int64 r0, int64 r1) {
        B::gemm(false, true, r1 - r0, r1, q, scale, Q + r0 * C, C, K, C, T(0), S + r0 * Tn, Tn);
      });
      for (int64 t = 0; t < Tn; ++t) causal_softmax_row(S + t * Tn, t, Tn);
      for_causal_blocks(Tn, [&](int64 r0, int64 r1) {
        B::gemm(false, false, r1 - r0, q, r1, T(1), S + r0 * Tn, Tn, V, C, T(0), O + r0 * hq, hq);
      });
    });
  } else {
    const int64 seqC = Tn * C, seqP = s.heads * Tn * Tn;  // one sequence on, in qkv and in P
    for (int64 h = 0; h < s.heads; ++h) {
      const int64 g = h / group;
      B::gemm_batched(false, true, Tn, Tn, q, scale, qkv + h * q, C, seqC, qkv + (s.heads + g) * q, C, seqC, T(0), P + h * Tn * Tn, Tn, seqP,
                      s.batch);
    }
    if constexpr (requires { B::causal_softmax(P, s.batch, Tn); }) B::causal_softmax(P, s.batch * s.heads * Tn, Tn);
    else B::parallel_for(s.batch * s.heads * Tn, [=] LOOPSCALE_HD(int64 r) { causal_softmax_row(P + r * Tn, r % Tn, Tn); });
    for (int64 h = 0; h < s.heads; ++h) {
      const int64 g = h / group;
      B::gemm_batched(false, false, Tn, q, Tn, T(1), P + h * Tn * Tn, Tn, seqP, qkv + (s.heads + s.kv_heads + g) * q, C, seqC, T(0),
                      out + h * q, hq, Tn * hq, s.batch);
    }
  }
}

// Row t of attention_forward for one sequence whose keys and values of positions 0..t are kept in a
// cache (generation: each new position attends over the cached ones, eval/generate.hpp). q is the
// position's fused QKV row (its Q heads are read); K and V hold t + 1 rows of kv_heads x head_dim
// values, `ld` apart; out receives heads x head_dim values; scores is heads x (t + 1) scratch. The
// arithmetic is attention_forward's for that row: scaled scores by a GEMM, the same max-shifted
// softmax over j <= t, then a GEMM with V (the forward's masked columns add zeros). The heads run in
// parallel only when there is work enough: one position's attention over a short context is a few
// thousand multiply-adds, less than starting the threads costs.
inline constexpr int64 attention_decode_parallel_work = int64{1} << 16;

template <class B, class T>
void attention_decode(const T* q, const T* K, const T* V, int64 ld, int64 t, T* out, T* scores, const AttentionShape& s) {
  const int64 qd = s.head_dim, group = s.heads / s.kv_heads, n = t + 1;
  const T scale = T(1) / std::sqrt(T(qd));
  const auto head = [=](int64 h) {
    const int64 g = h / group;
    T* row = scores + h * n;
    B::gemm(false, true, 1, n, qd, scale, q + h * qd, qd, K + g * qd, ld, T(0), row, n);
    causal_softmax_row(row, n - 1, n);  // the forward's row t = n - 1 (nothing after it to zero)
    B::gemm(false, false, 1, qd, n, T(1), row, n, V + g * qd, ld, T(0), out + h * qd, qd);
  };
  if (s.heads * n * qd >= attention_decode_parallel_work) {
    B::parallel_for(s.heads, head);
  } else {
    for (int64 h = 0; h < s.heads; ++h) head(h);
  }
}

namespace detail {

// The task form's backward of the query heads of KV group bg (sequence bg / kv_heads), in head
// order, adding into the group's dK and dV (zeroed by the caller); dP is one T x T scratch matrix.
template <class B, class T>
void attention_group_backward(const T* qkv, const T* P, const T* dout, T* dqkv, T* dP, int64 bg, const AttentionShape& s, T scale) {
  const int64 Tn = s.seq, q = s.head_dim, C = s.row(), hq = s.out_row(), group = s.heads / s.kv_heads;
  const int64 b = bg / s.kv_heads, g = bg % s.kv_heads;
  const int64 base = b * Tn * C;
  const T* K = qkv + base + (s.heads + g) * q;
  const T* V = qkv + base + (s.heads + s.kv_heads + g) * q;
  T* dK = dqkv + base + (s.heads + g) * q;
  T* dV = dqkv + base + (s.heads + s.kv_heads + g) * q;
  for (int64 h = g * group; h < (g + 1) * group; ++h) {
    const T* Q = qkv + base + h * q;
    T* dQ = dqkv + base + h * q;
    const T* S = P + (b * s.heads + h) * Tn * Tn;
    const T* dO = dout + b * Tn * hq + h * q;
    // In blocks of causal_block_rows, skipping the masked triangle: rows [r0, r1) of dP and dQ
    // need positions < r1; rows [c0, c1) of dV and dK receive from positions >= c0 only.
    for_causal_blocks(Tn, [&](int64 r0, int64 r1) {
      B::gemm(false, true, r1 - r0, r1, q, T(1), dO + r0 * hq, hq, V, C, T(0), dP + r0 * Tn, Tn);
    });
    for_causal_blocks(Tn, [&](int64 c0, int64 c1) {
      B::gemm(true, false, c1 - c0, q, Tn - c0, T(1), S + c0 * Tn + c0, Tn, dO + c0 * hq, hq, T(1), dV + c0 * C, C);
    });
    for (int64 t = 0; t < Tn; ++t) causal_softmax_backward_row(S + t * Tn, dP + t * Tn, t, Tn, scale);
    for_causal_blocks(Tn, [&](int64 r0, int64 r1) {
      B::gemm(false, false, r1 - r0, q, r1, T(1), dP + r0 * Tn, Tn, K, C, T(0), dQ + r0 * C, C);
    });
    for_causal_blocks(Tn, [&](int64 c0, int64 c1) {
      B::gemm(true, false, c1 - c0, q, Tn - c0, T(1), dP + c0 * Tn + c0, Tn, Q + c0 * C, C, T(1), dK + c0 * C, C);
    });
  }
}

}  // namespace detail

// The T x T matrices of dP the backward needs as scratch: one per backend thread in the task form
// (each task works through its heads with one), one per sequence in the device form (a head's
// batched GEMMs produce every sequence's dP at once). model.hpp and account/memory.hpp size it so.
template <class B>
constexpr int64 attention_scratch_matrices(int64 batch, int64 threads) {
  return B::nested_gemm ? threads : batch;
}

// dqkv (N x row()) is overwritten; scratch holds attention_scratch_matrices<B> T x T matrices.
template <class B, class T>
void attention_backward(const T* qkv, const T* P, const T* dout, T* dqkv, T* scratch, const AttentionShape& s) {
  const int64 Tn = s.seq, q = s.head_dim, C = s.row();
  const T scale = T(1) / std::sqrt(T(q));
  if constexpr (B::nested_gemm) {
    // One task per (sequence, KV head): the query heads of a group add into the same dK and dV.
    B::parallel_for(s.batch * s.kv_heads, [=](int64 bg) {
      const int64 base = (bg / s.kv_heads) * Tn * C, g = bg % s.kv_heads;
      T* dK = dqkv + base + (s.heads + g) * q;
      T* dV = dqkv + base + (s.heads + s.kv_heads + g) * q;
      for (int64 t = 0; t < Tn; ++t)
        for (int64 j = 0; j < q; ++j) dK[t * C + j] = dV[t * C + j] = T(0);
      detail::attention_group_backward<B>(qkv, P, dout, dqkv, scratch + static_cast<int64>(B::thread_id()) * Tn * Tn, bg, s, scale);
    });
  } else {
    // dK and dV (the columns after the query heads) of every row start at zero; then the heads in
    // order, each batched over the sequences with one T x T matrix of dP per sequence in scratch.
    // The heads of a group add into its dK and dV in head order, as in the task form.
    const int64 first = s.heads * q, hq = s.out_row(), group = s.heads / s.kv_heads;
    const int64 seqC = Tn * C, seqO = Tn * hq, seqP = s.heads * Tn * Tn, TT = Tn * Tn;
    for_row_spans<B>(s.batch * Tn, C - first, [=] LOOPSCALE_HD(int64 r, int64 lo, int64 hi) {
      for (int64 j = first + lo; j < first + hi; ++j) dqkv[r * C + j] = T(0);
    });
    T* dP = scratch;
    for (int64 h = 0; h < s.heads; ++h) {
      const int64 g = h / group;
      const T* Q = qkv + h * q;
      const T* K = qkv + (s.heads + g) * q;
      const T* V = qkv + (s.heads + s.kv_heads + g) * q;
      const T* S = P + h * TT;
      const T* dO = dout + h * q;
      T* dQ = dqkv + h * q;
      T* dK = dqkv + (s.heads + g) * q;
      T* dV = dqkv + (s.heads + s.kv_heads + g) * q;
      B::gemm_batched(false, true, Tn, Tn, q, T(1), dO, hq, seqO, V, C, seqC, T(0), dP, Tn, TT, s.batch);
      B::gemm_batched(true, false, Tn, q, Tn, T(1), S, Tn, seqP, dO, hq, seqO, T(1), dV, C, seqC, s.batch);
      // Row r of the batch's dP: sequence r / T, position r % T.
      if constexpr (requires { B::causal_softmax_backward(S, seqP, dP, s.batch, Tn, scale); }) {
        B::causal_softmax_backward(S, seqP, dP, s.batch * Tn, Tn, scale);
      } else {
        B::parallel_for(s.batch * Tn, [=] LOOPSCALE_HD(int64 r) {
          const int64 b = r / Tn, t = r % Tn;
          causal_softmax_backward_row(S + b * seqP + t * Tn, dP + r * Tn, t, Tn, scale);
        });
      }
      B::gemm_batched(false, false, Tn, q, Tn, T(1), dP, Tn, TT, K, C, seqC, T(0), dQ, C, seqC, s.batch);
      B::gemm_batched(true, false, Tn, q, Tn, T(1), dP, Tn, TT, Q, C, seqC, T(1), dK, C, seqC, s.batch);
    }
  }
}

}  // namespace loopscale::train::kernels
