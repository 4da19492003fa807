// AdamW with decoupled weight decay over the model's flat parameter buffer, with one learning rate
// multiplier and weight decay per parameter group (embedding, lm_head, matrices, norms and
// injection), a warmup then linear or cosine decay to a floor, and global gradient-norm clipping.
// The moments are flat buffers like the parameters, allocated once; the update is element-wise
// (parallel, deterministic) and the gradient norm a fixed-order reduction.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "loopscale/train/backend/host.hpp"
#include "loopscale/train/param_tensor.hpp"
#include "loopscale/util/names.hpp"

namespace loopscale::train {

// The learning rate after warmup: cosine or linear decay to the floor, or constant.
enum class Decay : std::uint8_t { cosine, linear, constant };

constexpr auto names_of(Decay) {
  return make_names<Decay>({{Decay::cosine, "cosine"}, {Decay::linear, "linear"}, {Decay::constant, "constant"}});
}

struct Schedule {
  double lr = 3e-3;          // peak learning rate
  int64 warmup_steps = 0;    // linear warmup from lr / warmup_steps to lr
  int64 total_steps = 1;
  Decay decay = Decay::cosine;
  double final_frac = 0.1;   // the floor: lr * final_frac at the last step

  double at(int64 step) const {  // step counts from 0
    if (step < warmup_steps) return lr * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
    const int64 span = std::max<int64>(1, total_steps - warmup_steps - 1);
    const double p = std::min(1.0, static_cast<double>(step - warmup_steps) / static_cast<double>(span));
    double f = 1.0;
    if (decay == Decay::cosine) f = final_frac + (1 - final_frac) * 0.5 * (1 + std::cos(3.141592653589793 * p));
    if (decay == Decay::linear) f = 1 - (1 - final_frac) * p;
    return lr * f;
  }
};

struct GroupSettings {
  double lr_mult = 1.0;
  double weight_decay = 0.0;
};

struct AdamWConfig {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
  double grad_clip = 1.0;  // global L2 norm; 0: no clipping
  // Indexed by ParamGroup: embedding, lm_head, matrix, norm_inject.
  GroupSettings groups[param_groups] = {{1.0, 0.0}, {1.0, 0.0}, {1.0, 0.1}, {1.0, 0.0}};
};

template <class T, class B = HostBackend>
class AdamW {
 public:
  AdamW(int64 n, const AdamWConfig& cfg) : cfg_(cfg), m_(static_cast<std::size_t>(n), T(0)), v_(static_cast<std::size_t>(n), T(0)) {}

  // Global L2 norm of the gradients, in double, in a fixed order.
  static double grad_norm(std::span<const T> g) {
    const T* p = g.data();
    return std::sqrt(B::sum(static_cast<int64>(g.size()), [p](int64 i) { return static_cast<double>(p[i]) * p[i]; }));
  }

  // One update at learning rate lr (already scheduled); `norm` is grad_norm(grads). Returns the
  // clipping factor applied.
  double step(std::span<T> params, std::span<const T> grads, const std::vector<ParamTensor>& tensors, double lr, double norm) {
    ++t_;
    const double clip = cfg_.grad_clip > 0 && norm > cfg_.grad_clip ? cfg_.grad_clip / norm : 1.0;
    const double b1 = cfg_.beta1, b2 = cfg_.beta2;
    const double bc1 = 1 - std::pow(b1, static_cast<double>(t_)), bc2 = 1 - std::pow(b2, static_cast<double>(t_));
    for (const ParamTensor& t : tensors) {
      const GroupSettings& g = cfg_.groups[static_cast<int>(t.group)];
      const T a = static_cast<T>(lr * g.lr_mult / bc1);
      const T decay = static_cast<T>(1 - lr * g.lr_mult * g.weight_decay);
      const T c = static_cast<T>(clip), tb1 = static_cast<T>(b1), tb2 = static_cast<T>(b2);
      const T rbc2 = static_cast<T>(1 / std::sqrt(bc2)), eps = static_cast<T>(cfg_.eps);
      T* p = params.data() + t.offset;
      const T* gr = grads.data() + t.offset;
      T* m = m_.data() + t.offset;
      T* v = v_.data() + t.offset;
      const int64 n = t.size;
      B::parallel_for((n + 4095) / 4096, [=](int64 chunk) {
        const int64 hi = std::min(n, (chunk + 1) * 4096);
        for (int64 i = chunk * 4096; i < hi; ++i) {
          const T gi = gr[i] * c;
          m[i] = tb1 * m[i] + (T(1) - tb1) * gi;
          v[i] = tb2 * v[i] + (T(1) - tb2) * gi * gi;
          p[i] = p[i] * decay - a * m[i] / (std::sqrt(v[i]) * rbc2 + eps);
        }
      });
    }
    return clip;
  }

  int64 steps_taken() const { return t_; }
  std::span<T> first_moment() { return m_; }
  std::span<T> second_moment() { return v_; }
  void set_steps_taken(int64 t) { t_ = t; }
  const AdamWConfig& config() const { return cfg_; }

 private:
  AdamWConfig cfg_;
  std::vector<T> m_, v_;
  int64 t_ = 0;
};

}  // namespace loopscale::train
