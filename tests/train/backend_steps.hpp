// A small model's training steps on any backend, for the tests that compare backends with
// HostBackend: the guard backends (tests/train/test_guard_backend.cpp) and the SIMT backend
// (tests/simt/).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "loopscale/train/model.hpp"
#include "loopscale/train/optim.hpp"

namespace loopscale::test {

inline ModelSpec spec_of(int64 r, Inject inj, int64 lanes, int64 bptt, StateNorm norm, int64 experts) {
  ModelSpec m;
  m.d_model = 16;
  m.vocab = 23;
  m.vocab_multiple = 8;
  LayerSpec l;
  l.attn.heads = 2;
  l.attn.kv_heads = experts > 0 ? 1 : 0;
  l.ffn.mult_num = 2;
  if (experts > 0) {
    l.ffn.experts = experts;
    l.ffn.top_k = 2;
    l.ffn.hidden = 12;
    l.ffn.shared_expert = true;
  }
  m.prelude = {1, l};
  m.coda = {1, l};
  m.recur.block = {2, l};
  m.recur.r = r;
  m.recur.inject = {inj, lanes};
  m.recur.bptt = bptt;
  m.recur.state_norm = norm;
  return m;
}

inline std::vector<std::int32_t> ids(int64 n, int64 vocab, std::uint64_t seed) {
  std::vector<std::int32_t> t(static_cast<std::size_t>(n));
  std::uint64_t s = seed;
  for (auto& v : t) v = static_cast<std::int32_t>((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33) % vocab;
  return t;
}

// Softmax routing balanced by the aux loss, with a z-loss.
inline train::kernels::MoeRouting aux_routing() {
  train::kernels::MoeRouting r;
  r.aux_coef = 0.05;
  r.z_coef = 1e-2;
  return r;
}
// Sigmoid routing balanced by the selection bias, with a capacity that drops slots.
inline train::kernels::MoeRouting bias_routing() {
  train::kernels::MoeRouting r;
  r.router = train::kernels::RouterKind::sigmoid;
  r.balance = train::kernels::Balance::bias;
  r.bias_rate = 0.01;
  r.capacity_factor = 1.0;
  return r;
}

// Losses of `steps` training steps (forward_backward, AdamW, MoE bias update) on backend B, and the
// final parameters, gradients and selection biases, all read through the host copies.
template <class B>
struct Trace {
  std::vector<double> losses;
  std::vector<float> params, grads, bias;
};

template <class B>
Trace<B> train_steps(const ModelSpec& m, const train::kernels::MoeRouting& routing, int steps) {
  constexpr int64 batch = 2, seq = 12;
  train::Transformer<float, B> model(m, batch, seq, 15.0, routing);
  model.init(3, train::InitScheme::paper);
  train::AdamW<float, B> opt(model.num_params(), {});
  Trace<B> t;
  for (int s = 0; s < steps; ++s) {
    const auto in = ids(batch * seq, m.vocab, 10 + s), tgt = ids(batch * seq, m.vocab, 20 + s);
    t.losses.push_back(model.forward_backward(in.data(), tgt.data()) + model.aux_loss());
    const std::span<const float> g(model.grads_data(), static_cast<std::size_t>(model.num_params()));
    const double norm = train::AdamW<float, B>::grad_norm(g);
    opt.step(std::span<float>(model.params_data(), static_cast<std::size_t>(model.num_params())), g, model.tensors(), 1e-2, norm);
    model.update_moe_bias();
  }
  t.params.resize(static_cast<std::size_t>(model.num_params()));
  t.grads.resize(t.params.size());
  model.read_params(t.params);
  model.read_grads(t.grads);
  for (int64 i = 0; i < model.moe_layers(); ++i) {
    const auto b = model.read_moe_bias(i);
    t.bias.insert(t.bias.end(), b.begin(), b.end());
  }
  return t;
}


}  // namespace loopscale::test
