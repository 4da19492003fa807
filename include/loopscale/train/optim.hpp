// The optimisers over the model's flat parameter buffer, a warmup then linear or cosine decay to a
// floor, and global gradient-norm clipping.
//   AdamW      decoupled weight decay, one learning-rate multiplier and weight decay per parameter
//              group (embedding, lm_head, matrices, norms and injection)
//   Optimizer  each tensor by a rule: AdamW with its own multiplier and weight decay, or MuonH
//              (muon.hpp) for the matrices; the recipes of trainer.hpp build their rules ("adamw":
//              AdamW everywhere, bit-identical to the AdamW class; "paper": the iso-depth paper's
//              MuonH + AdamW)
// The moments are flat buffers like the parameters, allocated once; AdamW's update is element-wise
// (parallel, deterministic), MuonH's a fixed sequence of GEMMs per matrix, and every norm a
// fixed-order reduction, so the same thread count gives the same bits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "loopscale/train/backend/host.hpp"
#include "loopscale/train/backend/spans.hpp"
#include "loopscale/train/muon.hpp"
#include "loopscale/train/param_tensor.hpp"
#include "loopscale/util/extern_templates.hpp"
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

namespace detail {

// The AdamW update of n values (one tensor) at step t (from 1), learning rate lr * lr_mult,
// decoupled weight decay wd, gradients scaled by clip: the one element loop of AdamW and Optimizer.
template <class T, class B>
void adamw_update(T* p, const T* gr, T* m, T* v, int64 n, double lr, double lr_mult, double wd, double clip, double b1,
                  double b2, double eps_, int64 t) {
  const double bc1 = 1 - std::pow(b1, static_cast<double>(t)), bc2 = 1 - std::pow(b2, static_cast<double>(t));
  const T a = static_cast<T>(lr * lr_mult / bc1);
  const T decay = static_cast<T>(1 - lr * lr_mult * wd);
  const T c = static_cast<T>(clip), tb1 = static_cast<T>(b1), tb2 = static_cast<T>(b2);
  const T rbc2 = static_cast<T>(1 / std::sqrt(bc2)), eps = static_cast<T>(eps_);
  for_spans<B, 4096>(n, [=] LOOPSCALE_HD(int64 lo, int64 hi) {
    for (int64 i = lo; i < hi; ++i) {
      const T gi = gr[i] * c;
      m[i] = tb1 * m[i] + (T(1) - tb1) * gi;
      v[i] = tb2 * v[i] + (T(1) - tb2) * gi * gi;
      p[i] = p[i] * decay - a * m[i] / (std::sqrt(v[i]) * rbc2 + eps);
    }
  });
}

}  // namespace detail

template <class T, class B = HostBackend>
class AdamW {
 public:
  // The moments live in backend memory beside the parameters they update (zeroed).
  AdamW(int64 n, const AdamWConfig& cfg) : cfg_(cfg), m_(static_cast<std::size_t>(n)), v_(static_cast<std::size_t>(n)) {}

  // Global L2 norm of the gradients, in double, in a fixed order.
  static double grad_norm(std::span<const T> g) {
    return std::sqrt(detail::sum_squares<B>(g.data(), static_cast<int64>(g.size())));
  }

  // One update at learning rate lr (already scheduled); `norm` is grad_norm(grads). Returns the
  // clipping factor applied.
  double step(std::span<T> params, std::span<const T> grads, const std::vector<ParamTensor>& tensors, double lr, double norm) {
    ++t_;
    const double clip = cfg_.grad_clip > 0 && norm > cfg_.grad_clip ? cfg_.grad_clip / norm : 1.0;
    for (const ParamTensor& t : tensors) {
      const GroupSettings& g = cfg_.groups[static_cast<int>(t.group)];
      detail::adamw_update<T, B>(params.data() + t.offset, grads.data() + t.offset, m_.data() + t.offset, v_.data() + t.offset,
                                 t.size, lr, g.lr_mult, g.weight_decay, clip, cfg_.beta1, cfg_.beta2, cfg_.eps, t_);
    }
    return clip;
  }

  int64 steps_taken() const { return t_; }
  std::span<T> first_moment() {
    static_assert(B::host_memory, "AdamW::first_moment(): the moments are backend memory the host cannot read here");
    return {m_.data(), m_.size()};
  }
  std::span<T> second_moment() {
    static_assert(B::host_memory, "AdamW::second_moment(): the moments are backend memory the host cannot read here");
    return {v_.data(), v_.size()};
  }
  void set_steps_taken(int64 t) { t_ = t; }
  const AdamWConfig& config() const { return cfg_; }

 private:
  AdamWConfig cfg_;
  typename B::template buffer<T> m_, v_;
  int64 t_ = 0;
};

// How one parameter tensor is updated: by AdamW with its learning-rate multiplier and decoupled
// weight decay, or by MuonH (muon.hpp) with its multiplier.
enum class Update : std::uint8_t { adamw, muonh };

struct TensorRule {
  Update update = Update::adamw;
  double lr_mult = 1.0;       // of the scheduled learning rate
  double weight_decay = 0.0;  // AdamW only
};

struct OptimizerConfig {
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;  // AdamW
  double grad_clip = 1.0;                          // global L2 norm, before both; 0: no clipping
  double momentum = 0.95;                          // MuonH's (Nesterov) momentum
};

// The rules under which Optimizer does what AdamW does with `cfg`: every tensor by AdamW with its
// group's settings.
inline std::vector<TensorRule> adamw_rules(const std::vector<ParamTensor>& tensors, const AdamWConfig& cfg) {
  std::vector<TensorRule> r;
  for (const ParamTensor& t : tensors) {
    const GroupSettings& g = cfg.groups[static_cast<int>(t.group)];
    r.push_back({Update::adamw, g.lr_mult, g.weight_decay});
  }
  return r;
}

// Each tensor by its rule. State: the first moments of the AdamW tensors and the momentum of the
// MuonH matrices share one flat buffer (first_moment(), each value belongs to one tensor), the
// second moments of AdamW another (zero over MuonH tensors), the step count, and the initial
// Frobenius norm of each MuonH matrix (taken at the first step, or restored).
template <class T, class B = HostBackend>
class Optimizer {
 public:
  // `rules` has one rule per tensor; `matrices` must tile exactly the tensors whose rule is
  // MuonH (muon_matrices() of each); `n` is the size of the parameter buffer.
  Optimizer(std::vector<ParamTensor> tensors, std::vector<TensorRule> rules, std::vector<MuonMatrix> matrices,
            const OptimizerConfig& cfg, int64 n)
      : tensors_(std::move(tensors)),
        rules_(std::move(rules)),
        matrices_(std::move(matrices)),
        cfg_(cfg),
        m_(static_cast<std::size_t>(n)),
        v_(static_cast<std::size_t>(n)) {
    if (rules_.size() != tensors_.size()) throw std::invalid_argument("optimizer: one rule per tensor is needed");
    // Each matrix inside a MuonH tensor, the matrices of a tensor tiling it in order.
    std::size_t j = 0;
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const ParamTensor& t = tensors_[i];
      if (t.offset < 0 || t.offset + t.size > n) throw std::invalid_argument("optimizer: tensor " + t.name + " lies outside the buffer");
      if (rules_[i].update != Update::muonh) continue;
      int64 at = t.offset;
      while (j < matrices_.size() && matrices_[j].offset >= t.offset && matrices_[j].offset < t.offset + t.size) {
        const MuonMatrix& mm = matrices_[j];
        if (mm.offset != at || mm.rows < 1 || mm.cols < 1)
          throw std::invalid_argument("optimizer: the matrices of " + t.name + " do not tile it");
        at += mm.size();
        matrix_mult_.push_back(rules_[i].lr_mult);
        pe_.reserve(mm.rows, mm.cols);
        ++j;
      }
      if (at != t.offset + t.size) throw std::invalid_argument("optimizer: the matrices of " + t.name + " do not tile it");
    }
    if (j != matrices_.size()) throw std::invalid_argument("optimizer: matrix " + matrices_[j].name + " is not in a MuonH tensor, in order");
  }

  static double grad_norm(std::span<const T> g) { return AdamW<T, B>::grad_norm(g); }

  // One update at learning rate lr (already scheduled); `norm` is grad_norm(grads). Returns the
  // clipping factor applied.
  double step(std::span<T> params, std::span<const T> grads, double lr, double norm) {
    ++t_;
    const double clip = cfg_.grad_clip > 0 && norm > cfg_.grad_clip ? cfg_.grad_clip / norm : 1.0;
    if (norms_.size() != matrices_.size()) take_initial_norms(params);
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      const ParamTensor& t = tensors_[i];
      const TensorRule& r = rules_[i];
      if (r.update != Update::adamw) continue;
      detail::adamw_update<T, B>(params.data() + t.offset, grads.data() + t.offset, m_.data() + t.offset, v_.data() + t.offset,
                                 t.size, lr, r.lr_mult, r.weight_decay, clip, cfg_.beta1, cfg_.beta2, cfg_.eps, t_);
    }
    for (std::size_t j = 0; j < matrices_.size(); ++j) {
      const MuonMatrix& mm = matrices_[j];
      muonh_step<T, B>(params.data() + mm.offset, grads.data() + mm.offset, m_.data() + mm.offset, mm.rows, mm.cols, norms_[j],
                       lr * matrix_mult_[j], cfg_.momentum, clip, pe_);
    }
    return clip;
  }

  // The initial Frobenius norm of each matrix, in the order of matrices(): empty before the first
  // step. Restoring them (with the moments and the step count) continues a run bit for bit.
  const std::vector<double>& initial_norms() const { return norms_; }
  void set_initial_norms(std::vector<double> n) {
    if (!n.empty() && n.size() != matrices_.size())
      throw std::invalid_argument("optimizer: " + std::to_string(n.size()) + " initial norms for " +
                                  std::to_string(matrices_.size()) + " matrices");
    norms_ = std::move(n);
  }

  const std::vector<MuonMatrix>& matrices() const { return matrices_; }
  const std::vector<TensorRule>& rules() const { return rules_; }
  const OptimizerConfig& config() const { return cfg_; }
  int64 steps_taken() const { return t_; }
  void set_steps_taken(int64 t) { t_ = t; }
  std::span<T> first_moment() {
    static_assert(B::host_memory, "Optimizer::first_moment(): the moments are backend memory the host cannot read here");
    return {m_.data(), m_.size()};
  }
  std::span<T> second_moment() {
    static_assert(B::host_memory, "Optimizer::second_moment(): the moments are backend memory the host cannot read here");
    return {v_.data(), v_.size()};
  }
  // Copies between the host and the moments (any backend): checkpoints write and restore them.
  void read_moments(std::span<T> m, std::span<T> v) const {
    check_moment_sizes("read_moments", m.size(), v.size());
    B::download(m.data(), m_.data(), static_cast<int64>(m.size()));
    B::download(v.data(), v_.data(), static_cast<int64>(v.size()));
  }
  void write_moments(std::span<const T> m, std::span<const T> v) {
    check_moment_sizes("write_moments", m.size(), v.size());
    B::upload(m_.data(), m.data(), static_cast<int64>(m.size()));
    B::upload(v_.data(), v.data(), static_cast<int64>(v.size()));
  }
  // Values of the MuonH workspace (beside the two moment buffers).
  int64 workspace_values() const { return pe_.workspace_values(); }

 private:
  void take_initial_norms(std::span<const T> params) {
    norms_.clear();
    for (const MuonMatrix& mm : matrices_) {
      const T* w = params.data() + mm.offset;
      norms_.push_back(std::sqrt(detail::sum_squares<B>(w, mm.size())));
    }
  }

  void check_moment_sizes(const char* what, std::size_t m, std::size_t v) const {
    if (m != m_.size() || v != v_.size())
      throw std::invalid_argument(std::string("optimizer: ") + what + ": " + std::to_string(m) + " and " + std::to_string(v) +
                                  " values for moments of " + std::to_string(m_.size()));
  }

  std::vector<ParamTensor> tensors_;
  std::vector<TensorRule> rules_;
  std::vector<MuonMatrix> matrices_;
  std::vector<double> matrix_mult_, norms_;
  OptimizerConfig cfg_;
  typename B::template buffer<T> m_, v_;  // the moments, in backend memory beside the parameters
  PolarExpress<T, B> pe_;
  int64 t_ = 0;
};

#ifdef LOOPSCALE_TRAIN_INSTANCE  // util/extern_templates.hpp: compiled once, in train/instances.cpp
LOOPSCALE_TRAIN_INSTANCE class AdamW<float, HostBackend>;
#endif

}  // namespace loopscale::train
