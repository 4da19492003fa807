// Logit softcap and cross-entropy. z = c tanh(l / c) bounds the logits (c = 15 in the paper);
// the loss of a row is logsumexp(z) - z[target] over the real vocabulary (padding columns of the
// embedding tables are masked out, so they get neither probability nor gradient).
//   dl = (softmax(z) - onehot(target)) * scale * (1 - (z / c)^2)
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "loopscale/train/backend/host.hpp"

namespace loopscale::train::kernels {

struct LossShape {
  int64 rows = 0, padded_vocab = 0, vocab = 0;
  double softcap = 15.0;  // 0: no cap
};

// A backend with a kernel of its own for these two (backend/host.hpp, "Kernels of a backend's
// own": CUDA's one block per row) runs it instead, with the shape as plain values.

// Caps `logits` (rows x padded_vocab) in place, writes each row's loss (nats) and logsumexp.
template <class B, class T>
void softcap_ce_forward(T* logits, const std::int32_t* targets, T* losses, T* lse, const LossShape& s) {
  const T cap = T(s.softcap);
  if constexpr (requires { B::softcap_ce_forward(logits, targets, losses, lse, s.rows, s.padded_vocab, s.vocab, cap); }) {
    B::softcap_ce_forward(logits, targets, losses, lse, s.rows, s.padded_vocab, s.vocab, cap);
    return;
  }
  B::parallel_for(s.rows, [=] LOOPSCALE_HD(int64 i) {
    T* z = logits + i * s.padded_vocab;
    T mx = -std::numeric_limits<T>::infinity();
    for (int64 j = 0; j < s.vocab; ++j) {
      if (cap > T(0)) z[j] = cap * std::tanh(z[j] / cap);
      mx = z[j] > mx ? z[j] : mx;
    }
    T sum = 0;
    for (int64 j = 0; j < s.vocab; ++j) sum += std::exp(z[j] - mx);
    const T l = mx + std::log(sum);
    lse[i] = l;
    losses[i] = l - z[targets[i]];
  });
}

// Replaces the capped logits by d loss / d raw logits, for loss = scale * sum of row losses.
template <class B, class T>
void softcap_ce_backward(T* logits, const std::int32_t* targets, const T* lse, T scale, const LossShape& s) {
  const T cap = T(s.softcap);
  if constexpr (requires { B::softcap_ce_backward(logits, targets, lse, scale, s.rows, s.padded_vocab, s.vocab, cap); }) {
    B::softcap_ce_backward(logits, targets, lse, scale, s.rows, s.padded_vocab, s.vocab, cap);
    return;
  }
  B::parallel_for(s.rows, [=] LOOPSCALE_HD(int64 i) {
    T* z = logits + i * s.padded_vocab;
    const int64 tgt = targets[i];
    for (int64 j = 0; j < s.vocab; ++j) {
      const T p = std::exp(z[j] - lse[i]);
      const T dz = (p - (j == tgt ? T(1) : T(0))) * scale;
      const T u = cap > T(0) ? z[j] / cap : T(0);
      z[j] = dz * (T(1) - u * u);
    }
    for (int64 j = s.vocab; j < s.padded_vocab; ++j) z[j] = T(0);
  });
}

// A training step's loss and gradient together: what softcap_ce_forward then softcap_ce_backward
// leave (losses, logsumexps, and the gradient in place of the logits). The host runs exactly
// those two (the same bits); a backend with a fused kernel of its own (CUDA: one block per row,
// two reads of the row and one write instead of three and two) runs that.
template <class B, class T>
void softcap_ce_forward_backward(T* logits, const std::int32_t* targets, T* losses, T* lse, T scale, const LossShape& s) {
  const T cap = T(s.softcap);
  if constexpr (requires { B::softcap_ce_fused(logits, targets, losses, lse, scale, s.rows, s.padded_vocab, s.vocab, cap); }) {
    B::softcap_ce_fused(logits, targets, losses, lse, scale, s.rows, s.padded_vocab, s.vocab, cap);
  } else {
    softcap_ce_forward<B>(logits, targets, losses, lse, s);
    softcap_ce_backward<B>(logits, targets, lse, scale, s);
  }
}

}  // namespace loopscale::train::kernels
