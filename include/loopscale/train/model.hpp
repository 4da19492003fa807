// The looped transformer as flat buffers: prelude -> recur (a block of k layers run r times, with
// input injection) -> coda, then the final norm, the lm_head, the logit softcap and cross-entropy.
// The recurrence's RMSNorm (one scale for all recurrences) normalises the block's output at the end
// of every recurrence, so each state the next one reads is normed (StateNorm::per_recurrence, the
// paper's), or once after the loop (after_loop); RecurSpec::state_norm says which.
// Parameters, their gradients and every activation live in buffers allocated once in the
// constructor, laid out from the spec (account/params.hpp for the parameters, account/memory.hpp
// for the activations); forward_backward() allocates nothing.
//
// Each stack is a list of layers, each with its own shape (dense and MoE layers may alternate); a
// layer's shape, parameter offsets and activations are its own.
//
// Backward is written by hand, layer by layer (llm.c style), in the reverse order of the forward.
// The shared block's weight gradients accumulate over the recurrences that get gradients; with
// truncated BPTT the earlier recurrences run forward only, through scratch activations (one set
// per distinct layer of the block), and their input state is treated as a constant.
//
// Mixture-of-experts layers (kernels/moe.hpp) take the place of the MLP wherever the spec has
// experts > 0, the shared block included. Each MoE layer has its own balancing statistics, reset at
// every forward() and summed over all calls of that forward (a looped layer runs r times), and its
// own selection bias (aux-loss-free balancing), which is state, not a parameter. The balance and
// z-losses of the last forward are aux_loss(); backward() differentiates the cross-entropy plus them.
//
// Forward only (inference, eval/): Transformer(forward_only, ...) builds the same model without
// gradients and without any backward buffer. Every recurrence runs through one set of scratch
// activations (what truncated BPTT does for its forward-only recurrences), so the memory does not
// depend on r, and the number of recurrences is chosen per call (set_recurrences; check_recurrences
// says which r a trained spec can run). Its parameters may live in the caller's buffer, so several
// models of different (batch, seq_len) shapes share one copy of a trained model's weights.
//
// Memory is the backend's (B::buffer, backend/host.hpp): every kernel reads and writes backend
// buffers, and host code reaches them only through read_params/write_params and the other read_/
// write_ calls, which go through B::upload and B::download. Token ids are uploaded at every call
// unless the backend shares the host's memory. The spans params(), grads(), token_losses() and
// logits() exist only where it does (HostBackend). tests/train/test_guard_backend.cpp runs whole
// training steps under backend/guard.hpp, whose buffers the host cannot touch, to keep it so.
//
// T is the scalar type (float for training, double for the gradient checks); B the backend.
#pragma once

#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "loopscale/account/memory.hpp"
#include "loopscale/account/params.hpp"
#include "loopscale/spec/limits.hpp"
#include "loopscale/train/backend/host.hpp"
#include "loopscale/train/backend/vector_ops.hpp"
#include "loopscale/train/kernels/attention.hpp"
#include "loopscale/train/kernels/embedding.hpp"
#include "loopscale/train/kernels/inject.hpp"
#include "loopscale/train/kernels/linear.hpp"
#include "loopscale/train/kernels/loss.hpp"
#include "loopscale/train/kernels/mlp.hpp"
#include "loopscale/train/kernels/moe.hpp"
#include "loopscale/train/kernels/rmsnorm.hpp"
#include "loopscale/train/kernels/rope.hpp"
#include "loopscale/train/param_tensor.hpp"
#include "loopscale/util/extern_templates.hpp"
#include "loopscale/util/names.hpp"
#include "loopscale/util/random.hpp"

namespace loopscale::train {

// How init() draws the initial weights (see Transformer::init): today's scaled normal draws, or the
// iso-depth paper's uniform ones.
enum class InitScheme : std::uint8_t { scaled_normal, paper };
constexpr auto names_of(InitScheme) {
  return make_names<InitScheme>({{InitScheme::scaled_normal, "scaled-normal"}, {InitScheme::paper, "paper"}});
}

// Selects the forward-only constructor of Transformer.
struct forward_only_t {
  explicit forward_only_t() = default;
};
inline constexpr forward_only_t forward_only{};

// Selects the thread-lane constructor of Transformer (train/thread_lanes.hpp).
struct thread_lane_t {
  explicit thread_lane_t() = default;
};
inline constexpr thread_lane_t thread_lane{};

// Why a model trained as `spec` cannot run r recurrences at inference, as a sentence; empty when it
// can. The parameter layout of the linear, additive and passthrough injections and of the shared
// hyperconnections (hyper-shared) does not depend on r, so any r >= 1 runs the same weights (r = 1
// without injection is the passthrough loop, which is what Inject::none means). The paper's
// hyperconnections (hyper) hold one parameter set per trained recurrence: r above the trained R has
// no parameters and is refused; r <= R runs the first r sets, exactly the trained model's first r
// recurrences followed by its lane pooling and coda (an early exit from the trained loop), which is
// well defined and is what is chosen here. A model without a shared block has no loop: only r = 1.
inline std::string recurrence_fault(const ModelSpec& spec, int64 r) {
  if (r < 1) return concat("the number of recurrences must be at least 1, not ", r);
  // The KV cache and the activations grow with r: past the limits a typo allocated without bound.
  ModelSpec at = spec;
  at.recur.r = r;
  if (r > SpecLimits::depth || effective_depth(at) > SpecLimits::depth)
    return concat("r = ", r, " gives an effective depth above the limit ", SpecLimits::depth, " (spec/limits.hpp)");
  if (spec.recur.block.empty() && r != 1) return concat("the model has no shared block, so it runs r = 1 only, not ", r);
  if (spec.recur.inject.kind == Inject::hyper && r > spec.recur.r)
    return concat("the model's hyperconnections (", inject_name(spec.recur.inject), ") hold one parameter set per ", "recurrence, ",
                  spec.recur.r, " of them; it cannot run ", r, " recurrences (at most ", spec.recur.r, ")");
  return {};
}

// The same as a spec_error, for callers that refuse.
inline void check_recurrences(const ModelSpec& spec, int64 r) {
  if (std::string why = recurrence_fault(spec, r); !why.empty()) throw spec_error(std::move(why));
}

template <class T, class B = HostBackend>
class Transformer {
  template <class U>
  using Buffer = typename B::template buffer<U>;

 public:
  // Shapes of one layer, resolved from its LayerSpec.
  struct LayerShape {
    int64 d = 0, h = 0, kv = 0, q = 0, C = 0, hq = 0, H = 0, H1 = 0;
    Activation act = Activation::relu2;
    bool rope = true, qk_norm = true;
    bool moe = false;
    kernels::MoeShape ms{};  // the MoE FFN (moe only)
  };
  // Offsets of one layer's parameters in the flat buffer. An MoE layer's FFN is one block in the
  // kernel's layout (router | expert W1s | expert W2s | shared W1 | shared W2) starting at w1.
  struct LayerOffsets {
    int64 wqkv = 0, wo = 0, w1 = 0, w2 = 0, g1 = 0, g2 = 0;
    int64 moe = -1;  // index of the layer's MoE state
  };
  // One layer execution's saved activations (pointers into the arena).
  struct Acts {
    T *xn1, *rstd1, *qkv_n, *qkv, *rstd_qk, *P, *att, *x_mid, *xn2, *rstd2, *hpre, *hact, *out;
    kernels::MoeActs<T> moe;
  };
  // What one MoE layer carries besides its parameters.
  struct MoeLayer {
    std::string name;               // "recur.0", ...
    const LayerShape* shape = nullptr;
    kernels::MoeStats stats;        // of the last forward, over every call of that layer
    kernels::MoeStats forward_only; // the forward-only recurrences' share (truncated BPTT, see freeze)
    Buffer<T> bias;                 // selection bias (balance == bias)
    kernels::MoeScratch<T> scratch{};
  };

  // For training: parameters, gradients and the activations of every recurrence that gets gradients.
  Transformer(const ModelSpec& spec, int64 batch, int64 seq_len, double softcap = 15.0, const kernels::MoeRouting& routing = {})
      : Transformer(spec, batch, seq_len, softcap, routing, true, {}) {}

  // For training in a thread lane (train/thread_lanes.hpp): a model whose passes run on one thread
  // beside other lanes', inside their parallel region (HostBackend::runs_inline; a backward pass
  // elsewhere is a logic_error), so its attention keeps one T x T scratch matrix rather than one
  // per backend thread. With `params` it reads another model's parameters (num_params() values, in
  // place: the caller keeps them alive) and has gradients and activations of its own; without, it
  // owns its parameters, as lane 0 does.
  Transformer(thread_lane_t, const ModelSpec& spec, int64 batch, int64 seq_len, double softcap = 15.0,
              const kernels::MoeRouting& routing = {}, std::span<const T> params = {})
      : Transformer(spec, batch, seq_len, softcap, routing, true, params, true) {
    static_assert(B::host_memory, "Transformer(thread_lane, ...): lanes run whole passes side by side, which only the host backend allows");
  }

  // Forward only: no gradients, no backward buffers, all recurrences through one scratch set
  // (see the top of this file). With `params` empty the model owns zeroed parameters (init() fills
  // them); otherwise it reads `params` (num_params() values, not copied: the caller keeps them alive
  // and unchanged while the model is used).
  Transformer(forward_only_t, const ModelSpec& spec, int64 batch, int64 seq_len, double softcap = 15.0,
              const kernels::MoeRouting& routing = {}, std::span<const T> params = {})
      : Transformer(spec, batch, seq_len, softcap, routing, false, params) {}

  Transformer(const Transformer&) = delete;
  Transformer& operator=(const Transformer&) = delete;

  const ModelSpec& spec() const { return spec_; }
  int64 batch() const { return batch_; }
  int64 seq_len() const { return seq_; }
  int64 num_params() const { return n_params_; }
  // Writable parameters; a forward-only model reading the caller's buffer has none to give.
  std::span<T> params() {
    static_assert(B::host_memory, "Transformer::params(): this accessor hands out the backend's memory to host code; use read_params / write_params");
    if (external_) throw std::logic_error("train: this model reads its parameters from the caller's buffer");
    return {params_.data(), params_.size()};
  }
  std::span<const T> params() const {
    static_assert(B::host_memory, "Transformer::params(): this accessor hands out the backend's memory to host code; use read_params");
    return {P_, static_cast<std::size_t>(n_params_)};
  }
  std::span<T> grads() {
    static_assert(B::host_memory, "Transformer::grads(): this accessor hands out the backend's memory to host code; use read_grads");
    return {grads_.data(), grads_.size()};
  }
  // Copies between the host and the model's parameters and gradients (any backend).
  void read_params(std::span<T> out) const {
    check_size("read_params", out.size(), n_params_);
    B::download(out.data(), P_, n_params_);
  }
  void write_params(std::span<const T> in) {
    if (external_) throw std::logic_error("train: this model reads its parameters from the caller's buffer");
    check_size("write_params", in.size(), n_params_);
    B::upload(params_.data(), in.data(), n_params_);
  }
  void read_grads(std::span<T> out) const {
    if (!train_) throw std::logic_error("train: a forward-only model has no gradients");
    check_size("read_grads", out.size(), n_params_);
    B::download(out.data(), grads_.data(), n_params_);
  }
  // The backend buffers themselves, for code that runs on the backend (the optimiser's kernels).
  T* params_data() {
    if (external_) throw std::logic_error("train: this model reads its parameters from the caller's buffer");
    return params_.data();
  }
  const T* params_data() const { return P_; }
  T* grads_data() { return grads_.data(); }
  // Whether the model was built for training (gradients, backward buffers) or forward only.
  bool trains() const { return train_; }
  double softcap() const { return softcap_; }
  int64 padded_vocab() const { return vp_; }

  // Recurrences the next forward() runs: the spec's r when training; a forward-only model runs any
  // r that check_recurrences accepts for its spec, chosen per call (its buffers do not depend on r).
  int64 recurrences() const { return r_; }
  void set_recurrences(int64 r) {
    if (train_ && r != spec_.recur.r)
      throw std::logic_error("train: a training model runs its spec's r; build it forward_only to choose r per call");
    check_recurrences(spec_, r);
    r_ = r;
  }

  // Per-position results of the last forward(): each position's cross-entropy (nats; minus the
  // log-probability of its target), and the logits (batch * seq_len rows of padded_vocab() values)
  // whose first vocab columns are softcapped, the values the loss's softmax read. The padding
  // columns hold uncapped values outside the softmax. (After backward() the logits hold gradients.)
  std::span<const T> token_losses() const {
    static_assert(B::host_memory, "Transformer::token_losses(): this accessor hands out the backend's memory to host code; use read_token_losses");
    return {losses_, static_cast<std::size_t>(n_)};
  }
  std::span<const T> logits() const {
    static_assert(B::host_memory, "Transformer::logits(): this accessor hands out the backend's memory to host code; use read_logits");
    return {logits_, static_cast<std::size_t>(n_ * vp_)};
  }
  void read_token_losses(std::span<T> out) const {
    check_size("read_token_losses", out.size(), n_);
    B::download(out.data(), losses_, n_);
  }
  void read_logits(std::span<T> out) const {
    check_size("read_logits", out.size(), n_ * vp_);
    B::download(out.data(), logits_, n_ * vp_);
  }

  // ---- the parameter layout, for code that runs the same weights another way (eval/generate.hpp's
  // KV cache runs one position at a time through these offsets and shapes) ----
  enum class Stack : std::uint8_t { prelude, block, coda };
  struct Offsets {
    int64 embedding = 0, lm_head = 0, norm_embedding = 0, norm_recur = 0, norm_final = 0;
    int64 inject = 0;  // inject.W (linear) or inject.hyper; 0 for the other injections
  };
  Offsets offsets() const { return {emb_, head_, norm0_, norm1_, norm2_, inj_}; }
  const LayerShape& layer_shape(Stack s, int64 i) const {
    return s == Stack::prelude ? pre_shape(i) : s == Stack::block ? blk_shape(i) : coda_shape(i);
  }
  const LayerOffsets& layer_offsets(Stack s, int64 i) const {
    const std::vector<LayerOffsets>& v = s == Stack::prelude ? pre_w_ : s == Stack::block ? blk_w_ : coda_w_;
    return v[static_cast<std::size_t>(i)];
  }
  // The head dimension the RoPE tables are built for (every RoPE layer has it).
  int64 rope_head_dim() const { return max_q_; }
  // The hyperconnection parameters of recurrence i: its own set for the paper's form, the one shared
  // set for hyper-shared.
  struct HyperSet {
    const T *M, *alpha, *beta;
  };
  HyperSet hyper_set(int64 i) const {
    const int64 L = lanes_;
    const T* p = P_ + inj_ + (inject_ == Inject::hyper ? i * kernels::HyperParams::count(L) : 0);
    return {p + kernels::HyperParams::M(L), p + kernels::HyperParams::alpha(L), p + kernels::HyperParams::beta(L)};
  }
  const std::vector<ParamTensor>& tensors() const { return tensors_; }
  // For gradient checks of truncated BPTT: while frozen, forward() skips the forward-only
  // recurrences and reuses the state the last unfrozen forward() computed at the truncation point,
  // so finite differences see exactly the function whose gradient truncated BPTT computes.
  void freeze_truncated_state(bool on) {
    if (on && !train_) throw std::logic_error("train: a forward-only model has no truncated state to freeze");
    frozen_ = on;
  }

  // Values of the activation arena (equals activation_plan's count, checked by a test).
  int64 activation_values() const { return static_cast<int64>(arena_.size()); }
  // 32-bit routing indices of the MoE layers.
  int64 index_values() const { return static_cast<int64>(index_arena_.size()); }

  // ---- mixture of experts ----
  int64 moe_layers() const { return static_cast<int64>(moe_.size()); }
  const std::string& moe_name(int64 i) const { return moe_[i].name; }
  const kernels::MoeShape& moe_shape(int64 i) const { return moe_[i].shape->ms; }
  const kernels::MoeStats& moe_stats(int64 i) const { return moe_[i].stats; }
  // Replaces layer i's statistics of the step (data parallelism: the whole batch's, summed over
  // micro-batches and ranks), before update_moe_bias and the step's log line read them.
  void set_moe_stats(int64 i, const kernels::MoeStats& s) { moe_[i].stats = s; }
  // Layer i's selection bias in backend memory (for kernels), and copies of it to and from the host.
  const T* moe_bias_data(int64 i) const { return moe_[i].bias.data(); }
  std::span<T> moe_bias(int64 i) {
    static_assert(B::host_memory, "Transformer::moe_bias(): this accessor hands out the backend's memory to host code; use read_moe_bias / write_moe_bias");
    return {moe_[i].bias.data(), moe_[i].bias.size()};
  }
  std::span<const T> moe_bias(int64 i) const {
    static_assert(B::host_memory, "Transformer::moe_bias(): this accessor hands out the backend's memory to host code; use read_moe_bias");
    return {moe_[i].bias.data(), moe_[i].bias.size()};
  }
  std::vector<T> read_moe_bias(int64 i) const {
    std::vector<T> out(moe_[i].bias.size());
    B::download(out.data(), moe_[i].bias.data(), static_cast<int64>(out.size()));
    return out;
  }
  void write_moe_bias(int64 i, std::span<const T> in) {
    check_size("write_moe_bias", in.size(), static_cast<int64>(moe_[i].bias.size()));
    B::upload(moe_[i].bias.data(), in.data(), static_cast<int64>(in.size()));
  }
  const kernels::MoeRouting& moe_routing() const { return routing_; }
  // Balance loss plus z-loss of the last forward (0 without MoE layers).
  double aux_loss() const { return aux_; }
  // The aux-loss-free step from the last forward's loads; call once per optimiser step.
  // The statistics are on the host; the E biases come over, are updated there and go back.
  void update_moe_bias() {
    for (int64 i = 0; i < moe_layers(); ++i) {
      const MoeLayer& m = moe_[i];
      if (m.shape->ms.balance != kernels::Balance::bias) continue;
      std::vector<T> b = read_moe_bias(i);
      kernels::moe_update_bias(m.shape->ms, m.stats, b.data());
      write_moe_bias(i, b);
    }
  }

  // Initial values (serial, so independent of the thread count), by scheme:
  //   scaled_normal  embedding N(0, 1); input projections (wqkv, w1, router) N(0, 1/fan_in); output
  //                  projections (wo, w2) the same scaled down by sqrt(2 * effective depth), since
  //                  each residual branch adds to the stream; lm_head N(0, 0.001^2)
  //   paper          the iso-depth paper's (nanochat's init_weights): embedding N(0, 1); lm_head
  //                  N(0, 0.001^2); q, k, v, the attention output, the MLP input and the MoE router
  //                  uniform with std 1/sqrt(d_model) (bound sqrt(3) std); the MLP output (dense,
  //                  expert or shared) uniform with std 1/sqrt(hidden), Kaiming fan_in, which is
  //                  1/sqrt(4 d_model) for the paper's 4x MLP
  // Both: norm scales 1, the injection at its documented start (kernels/inject.hpp: linear [I | 0],
  // hyperconnections their cyclic start).
  void init(std::uint64_t seed, InitScheme scheme = InitScheme::scaled_normal) {
    if (external_) throw std::logic_error("train: this model reads its parameters from the caller's buffer; initialise those");
    // Drawn on the host (serially, so the same weights on every backend and thread count), then
    // uploaded in one copy.
    std::vector<T> host(static_cast<std::size_t>(n_params_));
    SplitMix64 rng{seed};
    const double depth = static_cast<double>(effective_depth(spec_));
    const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(d_));
    for (const ParamTensor& t : tensors_) {
      T* p = host.data() + t.offset;
      double std = 0;
      const std::string& nm = t.name;
      const auto ends = [&nm](const char* s) {
        const std::string x(s);
        return nm.size() >= x.size() && nm.compare(nm.size() - x.size(), x.size(), x) == 0;
      };
      const double inv_sqrt_fan_in = t.fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(t.fan_in)) : 0.0;
      const bool input = ends(".wqkv") || ends(".w1") || ends(".router");
      const bool output = ends(".wo") || ends(".w2");
      bool uniform = false;
      if (nm == "embedding") std = 1.0;
      else if (nm == "lm_head") std = 0.001;
      else if (scheme == InitScheme::scaled_normal) {
        if (input) std = inv_sqrt_fan_in;
        else if (output) std = inv_sqrt_fan_in / std::sqrt(2 * depth);
      } else {
        uniform = input || output;
        if (input || ends(".wo")) std = inv_sqrt_d;
        else if (ends(".w2")) std = inv_sqrt_fan_in;
      }
      if (std > 0 && uniform) {
        const double bound = std::sqrt(3.0) * std;  // U(-a, a) has std a / sqrt(3)
        for (int64 i = 0; i < t.size; ++i) p[i] = static_cast<T>(bound * (2.0 * rng.uniform() - 1.0));
      } else if (std > 0) {
        for (int64 i = 0; i < t.size; ++i) p[i] = static_cast<T>(std * rng.normal());
      } else if (nm == "inject.W") {
        kernels::inject_linear_init(p, d_);
      } else if (nm == "inject.hyper") {
        kernels::hyper_init(p, lanes_, t.size / kernels::HyperParams::count(lanes_));
      } else {
        for (int64 i = 0; i < t.size; ++i) p[i] = T(1);  // norm scales
      }
    }
    B::upload(params_.data(), host.data(), n_params_);
  }

  // Mean cross-entropy (nats per token) of next-token prediction; tokens and targets hold
  // batch * seq_len ids each. Gradients are overwritten (not accumulated across calls).
  // The loss's gradient comes out of the same kernel as the loss (kernels/loss.hpp: fused where the
  // backend has such a kernel; the host's two kernels give the same bits as forward() + backward()).
  double forward_backward(const std::int32_t* tokens, const std::int32_t* targets) {
    if (!train_) throw std::logic_error("train: a forward-only model has no gradients");
    const double loss = forward_pass(tokens, targets, true);
    backward_from_logits(B::host_memory ? tokens : tokens_.data());  // forward_pass uploaded the batch
    return loss;
  }

  // Mean cross-entropy without gradients (the activations are written all the same).
  double forward(const std::int32_t* tokens, const std::int32_t* targets) { return forward_pass(tokens, targets, false); }

  // Gradients of the mean loss of the last forward() (which must have been on the same batch).
  void backward(const std::int32_t* tokens, const std::int32_t* targets) {
    if (!train_) throw std::logic_error("train: a forward-only model has no gradients");
    if constexpr (!B::host_memory) {  // the same batch as the last forward(), which uploaded it
      tokens = tokens_.data();
      targets = targets_.data();
    }
    kernels::softcap_ce_backward<B>(logits_, targets, lse_, T(1) / T(n_), loss_shape());
    backward_from_logits(tokens);
  }

 private:
  // The forward pass; with_grad: the logits are left holding the loss's gradient (a training step).
  double forward_pass(const std::int32_t* tokens, const std::int32_t* targets, bool with_grad) {
    ensure_tables();
    tokens = stage(tokens, tokens_);
    targets = stage(targets, targets_);
    for (MoeLayer& m : moe_) m.stats.reset();
    const T* P = P_;
    kernels::embedding_forward<B>(tokens, P + emb_, x0_, n_, d_);
    kernels::rmsnorm_forward<B>(x0_, P + norm0_, st0_, rstd0_, n_, d_);
    const T* x = st0_;
    for (int64 i = 0; i < spec_.prelude.size(); ++i) {
      layer_forward(pre_w_[i], pre_shape(i), x, pre_a_[i]);
      x = pre_a_[i].out;
    }
    e_ = x;
    final_state_ = recur_forward();
    // The recurrence's norm after the loop; with the per-recurrence state norm the state is normed.
    if (!per_rec_) kernels::rmsnorm_forward<B>(final_state_, P + norm1_, c0_, rstd_r_, n_, d_);
    coda_in_ = per_rec_ ? final_state_ : c0_;
    x = coda_in_;
    for (int64 i = 0; i < spec_.coda.size(); ++i) {
      layer_forward(coda_w_[i], coda_shape(i), x, coda_a_[i]);
      x = coda_a_[i].out;
    }
    coda_out_ = x;
    kernels::rmsnorm_forward<B>(x, P + norm2_, xf_, rstd_f_, n_, d_);
    kernels::linear_forward<B>(xf_, P + head_, logits_, n_, d_, vp_);
    if (with_grad) kernels::softcap_ce_forward_backward<B>(logits_, targets, losses_, lse_, T(1) / T(n_), loss_shape());
    else kernels::softcap_ce_forward<B>(logits_, targets, losses_, lse_, loss_shape());
    aux_ = 0;
    for (const MoeLayer& m : moe_) aux_ += m.stats.balance_loss(m.shape->ms) + m.stats.z_loss(m.shape->ms);
    return detail::sum_values<B>(static_cast<const T*>(losses_), n_) / static_cast<double>(n_);
  }

  // Everything of the backward pass after the loss: logits_ holds d loss / d logits.
  void backward_from_logits(const std::int32_t* tokens) {
    if constexpr (requires { B::runs_inline(); })
      if (thread_lane_ && !B::runs_inline())
        throw std::logic_error("train: a thread-lane model's backward runs on one thread inside its lanes' parallel region (train/thread_lanes.hpp), not on " +
                               std::to_string(B::threads()) + " threads");
    T* G = grads_.data();
    const T* P = P_;
    kernels::fill<B>(G, T(0), n_params_);
    kernels::linear_backward<B>(xf_, P + head_, logits_, dxn_, G + head_, n_, d_, vp_);
    kernels::rmsnorm_backward<B>(coda_out_, P + norm2_, rstd_f_, dxn_, g_, G + norm2_, n_, d_, false);
    for (int64 i = spec_.coda.size() - 1; i >= 0; --i)
      layer_backward(coda_w_[i], coda_shape(i), i == 0 ? coda_in_ : coda_a_[i - 1].out, coda_a_[i], g_);
    // g_ is now the gradient of the coda's input: the final state's (per-recurrence state norm) or,
    // through the norm after the loop, into it.
    if (per_rec_) kernels::copy<B>(ds_, g_, n_ * d_);
    else kernels::rmsnorm_backward<B>(final_state_, P + norm1_, rstd_r_, g_, ds_, G + norm1_, n_, d_, false);
    recur_backward();  // leaves the gradient of the prelude output e in de_
    T* g = de_;
    for (int64 i = spec_.prelude.size() - 1; i >= 0; --i)
      layer_backward(pre_w_[i], pre_shape(i), i == 0 ? st0_ : pre_a_[i - 1].out, pre_a_[i], g);
    kernels::rmsnorm_backward<B>(x0_, P + norm0_, rstd0_, g, dxn_, G + norm0_, n_, d_, false);
    kernels::embedding_backward<B>(tokens, dxn_, G + emb_, n_, d_);
  }

  Transformer(const ModelSpec& spec, int64 batch, int64 seq_len, double softcap, const kernels::MoeRouting& routing, bool train,
              std::span<const T> params, bool thread_lane = false)
      : spec_(spec), batch_(batch), seq_(seq_len), n_(batch * seq_len), softcap_(softcap), routing_(routing), train_(train),
        thread_lane_(thread_lane) {
    validate(spec);
    kernels::validate(routing);
    if (batch < 1 || seq_len < 1) throw std::invalid_argument("train: batch and seq_len must be at least 1");
    d_ = spec.d_model;
    vp_ = loopscale::padded_vocab(spec);
    r_ = spec.recur.r;
    k_ = spec.recur.block.size();
    kb_ = train ? bptt_recurrences(spec.recur) : 0;  // forward only: no recurrence keeps activations
    inject_ = spec.recur.inject.kind;
    lanes_ = is_hyper(inject_) ? spec.recur.inject.lanes : 0;
    per_rec_ = spec.recur.state_norm == StateNorm::per_recurrence;
    layout_params();
    if (params.empty()) {
      params_ = Buffer<T>(static_cast<std::size_t>(n_params_));
      P_ = params_.data();
    } else {
      if (static_cast<int64>(params.size()) != n_params_)
        throw std::invalid_argument(concat("train: the model has ", n_params_, " parameters, the buffer given holds ", params.size()));
      P_ = params.data();
      external_ = true;
    }
    if (train) grads_ = Buffer<T>(static_cast<std::size_t>(n_params_));
    layout_activations();
    rope_cos_ = Buffer<T>(static_cast<std::size_t>(seq_ * max_q_ / 2));
    rope_sin_ = Buffer<T>(rope_cos_.size());
    if constexpr (!B::host_memory) {
      tokens_ = Buffer<std::int32_t>(static_cast<std::size_t>(n_));
      targets_ = Buffer<std::int32_t>(static_cast<std::size_t>(n_));
    }
  }

  // ---- layout -------------------------------------------------------------------------------
  LayerShape shape_of(const LayerSpec& l) const {
    LayerShape s;
    s.d = d_;
    s.h = attn_heads(l.attn, d_);
    s.kv = attn_kv_heads(l.attn, d_);
    s.q = attn_head_dim(l.attn, d_);
    s.C = (s.h + 2 * s.kv) * s.q;
    s.hq = s.h * s.q;
    s.H = ffn_hidden(l.ffn, d_);
    s.act = l.ffn.act;
    s.H1 = kernels::mlp_in_rows(s.act, s.H);
    s.rope = l.attn.rope;
    s.qk_norm = l.attn.qk_norm;
    if (l.ffn.experts > 0) {
      s.moe = true;
      s.ms = kernels::moe_shape(l.ffn, d_, routing_);
      kernels::validate(s.ms);
    }
    return s;
  }

  int64 add_tensor(std::string name, int64 size, ParamGroup g, int64 fan_in = 0) {
    const int64 off = n_params_;
    tensors_.push_back({std::move(name), off, size, g, fan_in});
    n_params_ += size;
    return off;
  }

  LayerOffsets add_layer(const std::string& prefix, const LayerShape& s) {
    LayerOffsets w;
    w.wqkv = add_tensor(prefix + ".wqkv", s.C * s.d, ParamGroup::matrix, s.d);
    w.wo = add_tensor(prefix + ".wo", s.d * s.hq, ParamGroup::matrix, s.hq);
    if (s.moe) {
      const kernels::MoeShape& m = s.ms;
      const kernels::MoeParamLayout L = kernels::moe_param_layout(m);
      const int64 E = m.experts, H = m.hidden, H1 = m.in_rows();
      w.w1 = add_tensor(prefix + ".router", E * s.d, ParamGroup::matrix, s.d);
      add_tensor(prefix + ".experts.w1", E * H1 * s.d, ParamGroup::matrix, s.d);
      add_tensor(prefix + ".experts.w2", E * s.d * H, ParamGroup::matrix, H);
      if (m.shared_expert) {
        add_tensor(prefix + ".shared.w1", H1 * s.d, ParamGroup::matrix, s.d);
        add_tensor(prefix + ".shared.w2", s.d * H, ParamGroup::matrix, H);
      }
      if (n_params_ - w.w1 != L.total || L.router != 0 || L.w1 != E * s.d || L.w2 != L.w1 + E * H1 * s.d)
        throw std::logic_error("train: MoE tensors disagree with the kernel's parameter layout");
      w.moe = static_cast<int64>(moe_.size());
      MoeLayer state;
      state.name = prefix;
      state.shape = &s;
      state.stats = kernels::MoeStats(E);
      state.forward_only = kernels::MoeStats(E);
      state.bias = Buffer<T>(static_cast<std::size_t>(E));
      moe_.push_back(std::move(state));
    } else {
      w.w1 = add_tensor(prefix + ".w1", s.H1 * s.d, ParamGroup::matrix, s.d);
      w.w2 = add_tensor(prefix + ".w2", s.d * s.H, ParamGroup::matrix, s.H);
    }
    w.g1 = add_tensor(prefix + ".norm1", s.d, ParamGroup::norm_inject);
    w.g2 = add_tensor(prefix + ".norm2", s.d, ParamGroup::norm_inject);
    return w;
  }

  void layout_params() {
    emb_ = add_tensor("embedding", vp_ * d_, ParamGroup::embedding);
    head_ = add_tensor("lm_head", vp_ * d_, ParamGroup::lm_head);
    norm0_ = add_tensor("norm.embedding", d_, ParamGroup::norm_inject);
    norm1_ = add_tensor("norm.recur", d_, ParamGroup::norm_inject);
    norm2_ = add_tensor("norm.final", d_, ParamGroup::norm_inject);
    // One shape per unique layer, in the order prelude, block, coda; MoE layers point at theirs, so
    // the vector is filled once and never grows.
    shapes_.reserve(static_cast<std::size_t>(unique_layers(spec_)));
    for (const StackSpec* st : {&spec_.prelude, &spec_.recur.block, &spec_.coda})
      for (const LayerSpec& l : st->layers) shapes_.push_back(shape_of(l));
    for (int64 i = 0; i < spec_.prelude.size(); ++i) pre_w_.push_back(add_layer("prelude." + std::to_string(i), pre_shape(i)));
    for (int64 i = 0; i < k_; ++i) blk_w_.push_back(add_layer("recur." + std::to_string(i), blk_shape(i)));
    if (inject_ == Inject::linear) inj_ = add_tensor("inject.W", 2 * d_ * d_, ParamGroup::norm_inject);
    // Hyperconnections: one parameter set per recurrence (the paper's) or one for all (hyper-shared).
    if (is_hyper(inject_))
      inj_ = add_tensor("inject.hyper", (inject_ == Inject::hyper ? r_ : 1) * kernels::HyperParams::count(lanes_),
                        ParamGroup::norm_inject);
    for (int64 i = 0; i < spec_.coda.size(); ++i) coda_w_.push_back(add_layer("coda." + std::to_string(i), coda_shape(i)));
    max_q_ = 2;
    for (const LayerShape& s : shapes_) max_q_ = std::max(max_q_, s.q);
    // The forward-only recurrences of truncated BPTT run through scratch activations, one set per
    // distinct layer of the block (account/memory.hpp counts the same).
    const std::vector<LayerSpec> distinct = spec_.recur.block.distinct();
    for (const LayerSpec& l : spec_.recur.block.layers)
      for (std::size_t u = 0; u < distinct.size(); ++u)
        if (distinct[u] == l) blk_distinct_.push_back(static_cast<int64>(u));
  }

  // Carves the arena in two passes: the first counts, the second hands out pointers.
  template <class U>
  struct CarverOf {
    U* base = nullptr;
    int64 used = 0;
    U* take(int64 values) {
      U* p = base ? base + used : nullptr;
      used += values;
      return p;
    }
  };
  using Carver = CarverOf<T>;
  using IndexCarver = CarverOf<kernels::int32>;

  Acts carve_layer(Carver& c, IndexCarver& ic, const LayerShape& s, const LayerSpec& l) {
    const LayerActivations a = layer_activations(l, d_, seq_);
    Acts x{};
    x.xn1 = c.take(a.xn1 * n_);
    x.rstd1 = c.take(a.rstd1 * n_);
    x.qkv_n = c.take(a.qkv_n * n_);
    x.qkv = c.take(a.qkv * n_);
    x.rstd_qk = c.take(a.rstd_qk * n_);
    x.P = c.take(a.probs * n_);
    x.att = c.take(a.att * n_);
    x.x_mid = c.take(a.x_mid * n_);
    x.xn2 = c.take(a.xn2 * n_);
    x.rstd2 = c.take(a.rstd2 * n_);
    if (s.moe) {  // the MoE kernel's own saved activations take the place of the MLP's
      const kernels::MoeSizes z = kernels::moe_sizes(s.ms, n_);
      if (z.acts != (a.hpre + a.hact + a.router) * n_)
        throw std::logic_error("train: MoE activations disagree with the memory plan");
      T* v = c.take(z.acts);
      kernels::int32* iv = ic.take(z.acts_index);
      if (v && iv) x.moe = kernels::moe_acts(s.ms, n_, v, iv);
    } else {
      x.hpre = c.take(a.hpre * n_);
      x.hact = c.take(a.hact * n_);
    }
    x.out = c.take(a.out * n_);
    (void)s;
    return x;
  }

  void carve(Carver& c, IndexCarver& ic) {
    const int64 N = n_, d = d_, L = lanes_;  // L: hyperconnection lanes
    const bool hyper = is_hyper(inject_);
    x0_ = c.take(d * N);
    rstd0_ = c.take(N);
    st0_ = c.take(d * N);
    s_start_ = c.take((hyper ? L : 1) * d * N);
    rstd_r_ = per_rec_ ? nullptr : c.take(N);  // the norm after the loop
    c0_ = per_rec_ ? nullptr : c.take(d * N);
    xf_ = c.take(d * N);
    rstd_f_ = c.take(N);
    logits_ = c.take(vp_ * N);
    losses_ = c.take(N);
    lse_ = c.take(N);
    if (hyper) {
      lanes_final_ = c.take(L * d * N);
      pooled_ = c.take(d * N);
    }
    pre_a_.clear();
    blk_a_.clear();
    coda_a_.clear();
    for (int64 i = 0; i < spec_.prelude.size(); ++i) pre_a_.push_back(carve_layer(c, ic, pre_shape(i), spec_.prelude[i]));
    for (int64 i = 0; i < spec_.coda.size(); ++i) coda_a_.push_back(carve_layer(c, ic, coda_shape(i), spec_.coda[i]));
    for (int64 i = 0; i < kb_ * k_; ++i) blk_a_.push_back(carve_layer(c, ic, blk_shape(i % k_), spec_.recur.block[i % k_]));
    rec_u_.clear();
    rec_lanes_.clear();
    rec_z_.clear();
    rec_rstd_.clear();
    for (int64 i = 0; i < kb_; ++i) {
      rec_u_.push_back(c.take(d * N));
      rec_lanes_.push_back(hyper ? c.take(L * d * N) : nullptr);
      rec_z_.push_back(per_rec_ ? c.take(d * N) : nullptr);  // the per-recurrence state norm's output and 1/rms
      rec_rstd_.push_back(per_rec_ ? c.take(N) : nullptr);
    }
    // Scratch for recurrences without kept activations: truncated BPTT's first r - k_bwd, or every
    // recurrence of a forward-only model (whose r may change per call, so it is always there).
    if (r_ > kb_) {
      scratch_a_.clear();
      for (int64 j = 0; j < k_; ++j)
        if (blk_distinct_[j] == static_cast<int64>(scratch_a_.size()))
          scratch_a_.push_back(carve_layer(c, ic, blk_shape(j), spec_.recur.block[j]));
      scratch_u_ = c.take(d * N);
      if (hyper) {
        scratch_lanes_[0] = c.take(L * d * N);
        scratch_lanes_[1] = c.take(L * d * N);
      }
      if (per_rec_) {
        scratch_z_ = c.take(d * N);
        scratch_rstd_ = c.take(N);
      }
    }
    if (train_) carve_backward(c);  // a forward-only model has none of the backward's buffers
    // One MoE workspace for all MoE layers, sized to the largest; each layer views it with its shape.
    int64 mv = 0, mi = 0;
    for (const MoeLayer& m : moe_) {
      const kernels::MoeSizes z = kernels::moe_sizes(m.shape->ms, N);
      mv = std::max(mv, z.scratch);
      mi = std::max(mi, z.scratch_index);
    }
    T* mscratch = c.take(mv);
    kernels::int32* miscratch = ic.take(mi);
    if (mscratch && miscratch)
      for (MoeLayer& m : moe_) m.scratch = kernels::moe_scratch(m.shape->ms, N, mscratch, miscratch);
    // Attention's dP: T x T per thread (task form) or per sequence (device form).
    if (train_) dP_ = c.take(seq_ * seq_ * kernels::attention_scratch_matrices<B>(batch_, threads_));
  }

  // The backward's gradient buffers (in the arena's order, between the activations and the MoE
  // workspace).
  void carve_backward(Carver& c) {
    const int64 N = n_, d = d_, L = lanes_;
    const bool hyper = is_hyper(inject_);
    int64 C = 0, hq = 0, H = 0, H1 = 0;
    for (const LayerShape& s : shapes_) {
      C = std::max(C, s.C);
      hq = std::max(hq, s.hq);
      H = std::max(H, s.H);
      H1 = std::max(H1, s.H1);
    }
    g_ = c.take(d * N);
    dxn_ = c.take(d * N);
    de_ = c.take(d * N);
    ds_ = c.take(d * N);
    dqkv_ = c.take(C * N);
    datt_ = c.take(hq * N);
    dhact_ = c.take(H * N);
    dhpre_ = c.take(H1 * N);
    if (hyper) {
      dlanes_[0] = c.take(L * d * N);
      dlanes_[1] = c.take(L * d * N);
      ddelta_ = c.take(d * N);
    }
  }

  void layout_activations() {
    threads_ = thread_lane_ ? 1 : B::threads();
    Carver count;
    IndexCarver icount;
    carve(count, icount);
    arena_ = Buffer<T>(static_cast<std::size_t>(count.used));
    index_arena_ = Buffer<kernels::int32>(static_cast<std::size_t>(icount.used));
    Carver real{arena_.data(), 0};
    IndexCarver ireal{index_arena_.data(), 0};
    carve(real, ireal);
  }

  // The shape of layer i of the prelude, j of the block, i of the coda.
  const LayerShape& pre_shape(int64 i) const { return shapes_[static_cast<std::size_t>(i)]; }
  const LayerShape& blk_shape(int64 j) const { return shapes_[static_cast<std::size_t>(spec_.prelude.size() + j)]; }
  const LayerShape& coda_shape(int64 i) const { return shapes_[static_cast<std::size_t>(spec_.prelude.size() + k_ + i)]; }

  void ensure_tables() {
    if (tables_ready_) return;
    // One table for the head dimension every layer shares.
    for (const LayerShape& s : shapes_)
      if (s.rope && s.q != max_q_) throw spec_error("train: all layers must share one head dimension");
    std::vector<T> c(rope_cos_.size()), s(rope_sin_.size());  // computed on the host, uploaded once
    kernels::rope_tables(seq_, max_q_, c.data(), s.data());
    B::upload(rope_cos_.data(), c.data(), static_cast<int64>(c.size()));
    B::upload(rope_sin_.data(), s.data(), static_cast<int64>(s.size()));
    tables_ready_ = true;
  }

  // Token ids in backend memory: the caller's own where the backend shares the host's memory,
  // else uploaded into the model's buffer.
  const std::int32_t* stage(const std::int32_t* ids, Buffer<std::int32_t>& buf) {
    if constexpr (B::host_memory) {
      return ids;
    } else {
      B::upload(buf.data(), ids, n_);
      return buf.data();
    }
  }
  static void check_size(const char* what, std::size_t got, int64 want) {
    if (static_cast<int64>(got) != want)
      throw std::invalid_argument(concat("train: ", what, ": the buffer holds ", got, " values, the model needs ", want));
  }

  kernels::LossShape loss_shape() const { return {n_, vp_, spec_.vocab, softcap_}; }
  kernels::AttentionShape attn_shape(const LayerShape& s) const { return {batch_, seq_, s.h, s.kv, s.q}; }

  // ---- one layer ----------------------------------------------------------------------------
  // x_out = x_mid + mlp(norm2(x_mid)), x_mid = x_in + attn(norm1(x_in)). x_in may equal a.out
  // (forward-only scratch): x_in is last read before a.out is first written.
  void layer_forward(const LayerOffsets& w, const LayerShape& s, const T* x_in, const Acts& a) {
    const T* P = P_;
    const int64 N = n_, d = d_;
    // The residual copies (x_mid = x_in, out = x_mid, which the GEMMs then add into) ride on the
    // norms' reads of the same rows, and the copy of the QKV rows on the rotation's.
    kernels::rmsnorm_forward<B>(x_in, P + w.g1, a.xn1, a.rstd1, N, d, a.x_mid);
    kernels::linear_forward<B>(a.xn1, P + w.wqkv, a.qkv_n, N, d, s.C);
    if (s.qk_norm) kernels::rmsnorm_forward_strided<B>(a.qkv_n, a.qkv_n, a.rstd_qk, N, s.q, s.C, s.h + s.kv);
    if (s.rope) kernels::rope_apply<B>(a.qkv_n, a.qkv, rope_cos_.data(), rope_sin_.data(), N, seq_, s.h + s.kv, s.q, s.C, false, true);
    else kernels::copy<B>(a.qkv, a.qkv_n, N * s.C);
    kernels::attention_forward<B>(a.qkv, a.P, a.att, attn_shape(s));
    kernels::linear_forward<B>(a.att, P + w.wo, a.x_mid, N, s.hq, d, true);
    kernels::rmsnorm_forward<B>(a.x_mid, P + w.g2, a.xn2, a.rstd2, N, d, a.out);
    if (s.moe) {
      MoeLayer& m = moe_[w.moe];
      kernels::moe_forward<B>(s.ms, N, a.xn2, P + w.w1, m.bias.data(), a.out, true, a.moe, m.scratch, m.stats);
    } else {
      kernels::mlp_forward<B>(a.xn2, P + w.w1, P + w.w2, a.hpre, a.hact, a.out, {N, d, s.H, s.act}, true);
    }
  }

  // g holds d x_out on entry and d x_in on return (residual connections make this in place).
  void layer_backward(const LayerOffsets& w, const LayerShape& s, const T* x_in, const Acts& a, T* g) {
    const T* P = P_;
    T* G = grads_.data();
    const int64 N = n_, d = d_;
    if (s.moe) {
      const MoeLayer& m = moe_[w.moe];
      kernels::moe_backward<B>(s.ms, N, a.xn2, P + w.w1, a.moe, m.stats, g, dxn_, G + w.w1, m.scratch);
    } else {
      kernels::mlp_backward<B>(a.xn2, P + w.w1, P + w.w2, a.hpre, a.hact, g, dxn_, G + w.w1, G + w.w2, dhact_, dhpre_,
                               {N, d, s.H, s.act});
    }
    kernels::rmsnorm_backward<B>(a.x_mid, P + w.g2, a.rstd2, dxn_, g, G + w.g2, N, d, true);
    kernels::linear_backward<B>(a.att, P + w.wo, g, datt_, G + w.wo, N, s.hq, d);
    kernels::attention_backward<B>(a.qkv, a.P, datt_, dqkv_, dP_, attn_shape(s));
    if (s.rope) kernels::rope_apply<B>(dqkv_, rope_cos_.data(), rope_sin_.data(), N, seq_, s.h + s.kv, s.q, s.C, true);
    if (s.qk_norm) kernels::rmsnorm_backward_from_output<B>(a.qkv_n, a.rstd_qk, dqkv_, dqkv_, N, s.q, s.C, s.h + s.kv);
    kernels::linear_backward<B>(a.xn1, P + w.wqkv, dqkv_, dxn_, G + w.wqkv, N, d, s.C);
    kernels::rmsnorm_backward<B>(x_in, P + w.g1, a.rstd1, dxn_, g, G + w.g1, N, d, true);
  }

  // ---- the recurrence -------------------------------------------------------------------------
  // Runs the block on u; kept recurrences use their own activations, the others the scratch.
  // Returns the block output.
  const T* block_forward(const T* u, int64 kept_index) {
    const T* x = u;
    for (int64 j = 0; j < k_; ++j) {
      const Acts& a = kept_index >= 0 ? blk_a_[kept_index * k_ + j] : scratch_a_[blk_distinct_[j]];
      layer_forward(blk_w_[j], blk_shape(j), x, a);
      x = a.out;
    }
    return x;
  }

  T* hyper_grad(int64 i) { return grads_.data() + inj_ + (inject_ == Inject::hyper ? i * kernels::HyperParams::count(lanes_) : 0); }

  // The recurrence's new state from the block output y: the per-recurrence state norm writes
  // norm(y) into kept recurrence ki's buffer (ki < 0: the forward-only scratch); after the loop, y.
  const T* new_state(const T* y, int64 ki) {
    if (!per_rec_) return y;
    T* z = ki >= 0 ? rec_z_[ki] : scratch_z_;
    kernels::rmsnorm_forward<B>(y, P_ + norm1_, z, ki >= 0 ? rec_rstd_[ki] : scratch_rstd_, n_, d_);
    return z;
  }

  const T* recur_forward() {
    const int64 nd = n_ * d_;
    const T* P = P_;
    const T* e = e_;
    if (k_ == 0) return new_state(e, kb_ > 0 ? 0 : -1);  // no block: the recurrence is the identity (r = 1)
    const int64 first_kept = r_ - kb_;
    if (is_hyper(inject_)) {
      const int64 L = lanes_;  // hyperconnection lanes
      const bool shared = inject_ == Inject::hyper_shared;
      const bool skip = frozen_ && first_kept > 0;
      if (!skip)
        for (int64 l = 0; l < L; ++l) kernels::copy<B>(s_start_ + l * nd, e, nd);
      const T* lanes = skip ? rec_lanes_[0] : s_start_;
      forward_only_stats(skip ? 2 : 0);
      for (int64 i = skip ? first_kept : 0; i < r_; ++i) {
        const int64 ki = i - first_kept;
        if (i == first_kept && !skip) forward_only_stats(1);
        const HyperSet h = hyper_set(i);
        T* x = ki >= 0 ? rec_u_[ki] : scratch_u_;
        if (ki >= 0 && lanes != rec_lanes_[ki]) {  // the lanes this recurrence reads are kept for its backward
          kernels::copy<B>(rec_lanes_[ki], lanes, L * nd);
          lanes = rec_lanes_[ki];
        }
        kernels::hyper_aggregate<B>(lanes, h.alpha, x, L, nd);
        const T* z = new_state(block_forward(x, ki), ki);
        T* out = i == r_ - 1 ? lanes_final_ : (ki >= 0 ? (ki + 1 < kb_ ? rec_lanes_[ki + 1] : lanes_final_)
                                                       : scratch_lanes_[i % 2]);
        kernels::hyper_update<B>(lanes, h.M, h.beta, shared ? x : nullptr, z, out, L, nd);
        lanes = out;
      }
      // Sum-pool the lanes into the state the coda reads.
      kernels::copy<B>(pooled_, lanes_final_, nd);
      for (int64 l = 1; l < L; ++l) kernels::add_into<B>(pooled_, lanes_final_ + l * nd, nd);
      return pooled_;
    }
    // linear / additive / passthrough (and none, which is passthrough with r = 1)
    const bool skip = frozen_ && first_kept > 0;
    if (!skip) {
      if (inject_ == Inject::additive) kernels::fill<B>(s_start_, T(0), nd);
      else kernels::copy<B>(s_start_, e, nd);
    }
    const T* s = s_start_;
    forward_only_stats(skip ? 2 : 0);
    for (int64 i = skip ? first_kept : 0; i < r_; ++i) {
      const int64 ki = i - first_kept;
      if (i == first_kept && !skip) forward_only_stats(1);
      if (ki == 0 && s != s_start_) {  // the state entering the first kept recurrence is a constant
        kernels::copy<B>(s_start_, s, nd);
        s = s_start_;
      }
      T* u = ki >= 0 ? rec_u_[ki] : scratch_u_;
      switch (inject_) {
        case Inject::linear: kernels::inject_linear_forward<B>(e, s, P + inj_, u, n_, d_); break;
        case Inject::additive: kernels::sum2<B>(u, s, e, nd); break;
        default: kernels::copy<B>(u, s, nd); break;
      }
      s = new_state(block_forward(u, ki), ki);
    }
    return s;
  }

  // The forward-only recurrences' share of the block's MoE statistics. Their routing counts in the
  // step's balancing, but no gradient flows through them; while frozen (gradient checks) they are
  // skipped, so their share from the last unfrozen forward is added back as the constant it is.
  // phase 0: before the recurrences (remember the statistics so far); 1: at the first kept
  // recurrence (the difference is the forward-only share); 2: frozen, add the share back.
  void forward_only_stats(int phase) {
    for (const LayerOffsets& w : blk_w_) {
      if (w.moe < 0) continue;
      MoeLayer& m = moe_[w.moe];
      if (phase == 0) m.forward_only = m.stats;
      if (phase == 1) m.forward_only.combine(-1.0, m.stats);  // now - before
      if (phase == 2) m.stats.combine(1.0, m.forward_only);
    }
  }

  // The block output of kept recurrence ki.
  const T* kept_output(int64 ki) const { return blk_a_[ki * k_ + (k_ - 1)].out; }
  // The state entering kept recurrence ki (what its injection read as s).
  const T* kept_state(int64 ki) const {
    if (ki == 0) return s_start_;
    return per_rec_ ? rec_z_[ki - 1] : kept_output(ki - 1);
  }

  void block_backward(int64 ki, T* g) {
    for (int64 j = k_ - 1; j >= 0; --j) {
      const T* x_in = j == 0 ? rec_u_[ki] : blk_a_[ki * k_ + j - 1].out;
      layer_backward(blk_w_[j], blk_shape(j), x_in, blk_a_[ki * k_ + j], g);
    }
  }

  // dy from dz through kept recurrence ki's state norm (dz and dy distinct); the norm's scale
  // gradient accumulates over the recurrences.
  void new_state_backward(int64 ki, const T* y, const T* dz, T* dy) {
    kernels::rmsnorm_backward<B>(y, P_ + norm1_, rec_rstd_[ki], dz, dy, grads_.data() + norm1_, n_, d_, false);
  }

  // On entry ds_ holds the gradient of the recurrence's output state; on return de_ holds the
  // gradient of the prelude output e.
  void recur_backward() {
    const int64 nd = n_ * d_;
    const T* P = P_;
    T* G = grads_.data();
    if (k_ == 0) {
      if (per_rec_) new_state_backward(0, e_, ds_, de_);
      else kernels::copy<B>(de_, ds_, nd);
      return;
    }
    kernels::fill<B>(de_, T(0), nd);
    const int64 first_kept = r_ - kb_;
    if (is_hyper(inject_)) {
      const int64 L = lanes_;  // hyperconnection lanes
      const bool shared = inject_ == Inject::hyper_shared;
      T* dout = dlanes_[0];
      T* din = dlanes_[1];
      for (int64 l = 0; l < L; ++l) kernels::copy<B>(dout + l * nd, ds_, nd);  // pooling
      for (int64 ki = kb_ - 1; ki >= 0; --ki) {
        const HyperSet h = hyper_set(first_kept + ki);
        T* dp = hyper_grad(first_kept + ki);
        const T* x = rec_u_[ki];
        const T* y = kept_output(ki);
        const T* z = per_rec_ ? rec_z_[ki] : y;
        kernels::hyper_update_backward<B>(rec_lanes_[ki], h.M, h.beta, shared ? x : nullptr, z, dout, din, ddelta_,
                                          dp + kernels::HyperParams::M(L), dp + kernels::HyperParams::beta(L), L, nd);
        if (per_rec_) new_state_backward(ki, y, ddelta_, g_);  // dy
        else kernels::copy<B>(g_, ddelta_, nd);
        block_backward(ki, g_);                                   // d x through the block
        if (shared) kernels::add_scaled<B>(g_, ddelta_, T(-1), nd);  // x also enters z - x
        kernels::hyper_aggregate_backward<B>(rec_lanes_[ki], h.alpha, g_, din, dp + kernels::HyperParams::alpha(L), L, nd);
        std::swap(dout, din);
      }
      if (kb_ == r_)  // full BPTT: the lanes started as copies of e
        for (int64 l = 0; l < L; ++l) kernels::add_into<B>(de_, dout + l * nd, nd);
      return;
    }
    T* g = ds_;
    T* other = g_;
    for (int64 ki = kb_ - 1; ki >= 0; --ki) {
      if (per_rec_) {  // g: d z -> d y
        new_state_backward(ki, kept_output(ki), g, other);
        std::swap(g, other);
      }
      block_backward(ki, g);  // g: d u
      const T* s = kept_state(ki);
      switch (inject_) {
        case Inject::linear:
          kernels::inject_linear_backward<B>(e_, s, P + inj_, g, de_, other, G + inj_, n_, d_);
          std::swap(g, other);
          break;
        case Inject::additive: kernels::add_into<B>(de_, g, nd); break;  // d s = d u (in place)
        default: break;                                                     // passthrough: d s = d u
      }
    }
    // Full BPTT: the initial state was e (linear, passthrough) or zero (additive).
    if (kb_ == r_ && inject_ != Inject::additive) kernels::add_into<B>(de_, g, nd);
  }

  // ---- state ----------------------------------------------------------------------------------
  ModelSpec spec_;
  int64 batch_, seq_, n_;
  double softcap_;
  kernels::MoeRouting routing_;
  std::vector<MoeLayer> moe_;
  Buffer<kernels::int32> index_arena_;
  Buffer<std::int32_t> tokens_, targets_;  // uploaded ids (backends that do not share the host's memory)
  double aux_ = 0;
  int64 d_ = 0, vp_ = 0, r_ = 1, k_ = 0, kb_ = 1, lanes_ = 0, max_q_ = 2;
  int threads_ = 1;  // threads the attention scratch is laid out for
  Inject inject_ = Inject::none;
  int64 n_params_ = 0;
  std::vector<ParamTensor> tensors_;
  Buffer<T> params_, grads_, arena_, rope_cos_, rope_sin_;
  bool tables_ready_ = false, frozen_ = false;
  bool train_ = true;      // gradients and backward buffers (else forward only)
  bool thread_lane_ = false;  // runs on one thread in a thread lane (the thread_lane constructor)
  bool external_ = false;  // the parameters are the caller's buffer (forward only)
  const T* P_ = nullptr;   // the parameters every pass reads: params_ or the caller's buffer
  bool per_rec_ = true;  // the recurrence's norm at the end of every recurrence (else once after the loop)
  int64 emb_ = 0, head_ = 0, norm0_ = 0, norm1_ = 0, norm2_ = 0, inj_ = 0;
  std::vector<LayerShape> shapes_;     // per unique layer: prelude, block, coda
  std::vector<int64> blk_distinct_;    // block layer j -> its distinct layer (scratch_a_ index)
  std::vector<LayerOffsets> pre_w_, blk_w_, coda_w_;
  std::vector<Acts> pre_a_, blk_a_, coda_a_;
  std::vector<Acts> scratch_a_;
  std::vector<T*> rec_u_, rec_lanes_, rec_z_, rec_rstd_;
  T *x0_ = nullptr, *rstd0_ = nullptr, *st0_ = nullptr, *s_start_ = nullptr, *rstd_r_ = nullptr, *c0_ = nullptr;
  T *xf_ = nullptr, *rstd_f_ = nullptr, *logits_ = nullptr, *losses_ = nullptr, *lse_ = nullptr;
  T *lanes_final_ = nullptr, *pooled_ = nullptr, *scratch_u_ = nullptr, *scratch_z_ = nullptr, *scratch_rstd_ = nullptr;
  T* scratch_lanes_[2] = {nullptr, nullptr};
  T *g_ = nullptr, *dxn_ = nullptr, *de_ = nullptr, *ds_ = nullptr, *dqkv_ = nullptr, *datt_ = nullptr;
  T *dhact_ = nullptr, *dhpre_ = nullptr, *ddelta_ = nullptr, *dP_ = nullptr;
  T* dlanes_[2] = {nullptr, nullptr};
  const T* e_ = nullptr;
  const T* final_state_ = nullptr;
  const T* coda_in_ = nullptr;  // the coda's input: the final state, or its norm after the loop
  const T* coda_out_ = nullptr;
};

#ifdef LOOPSCALE_TRAIN_INSTANCE  // util/extern_templates.hpp: compiled once, in train/instances.cpp
LOOPSCALE_TRAIN_INSTANCE class Transformer<float, HostBackend>;
#endif

}  // namespace loopscale::train
