// The whole looped model: parameter count against the static accounting, activation buffers
// against the memory estimate, and gradients against finite differences in double for r = 1, 2, 4,
// every injection mode, truncated BPTT, each activation and grouped KV heads.
#include <catch2/catch.hpp>

#include <set>

#include "loopscale/account/memory.hpp"
#include "loopscale/account/params.hpp"
#include "loopscale/train/model.hpp"
#include "reference.hpp"

using namespace loopscale;
using namespace loopscale::test;
using loopscale::train::Model;

namespace {

ModelSpec small_spec(int64 r, Inject inj, int64 lanes = 0, int64 bptt = full_bptt, Activation act = Activation::relu2,
                     int64 kv = 0) {
  ModelSpec m;
  m.d_model = 8;
  m.vocab = 11;
  m.vocab_multiple = 8;  // padded to 16: the padding columns must stay out of the loss
  LayerSpec l;
  l.attn.heads = 2;
  l.attn.kv_heads = kv;
  l.ffn.act = act;
  l.ffn.mult_num = 2;
  m.prelude = {1, l};
  m.coda = {1, l};
  m.recur.block = {r == 1 ? 1 : 2, l};
  m.recur.r = r;
  m.recur.inject = {inj, lanes};
  m.recur.bptt = bptt;
  return m;
}

std::vector<std::int32_t> tokens(int64 n, int64 vocab, std::uint64_t seed) {
  std::vector<std::int32_t> t(n);
  std::uint64_t s = seed;
  for (auto& v : t) v = static_cast<std::int32_t>((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33) % vocab;
  return t;
}

// Finite differences of the mean loss against forward_backward's gradients, on a sample of
// entries of every parameter tensor.
void grad_check(const ModelSpec& spec) {
  const int64 B = 2, T = 5;
  Model<double> model(spec, B, T);
  model.init(7);
  auto p = model.params();
  const vecd noise = randn(p.size(), 8, 0.3);  // away from the structured start (zeros, identities)
  for (std::size_t i = 0; i < p.size(); ++i) p[i] += noise[i];
  const auto in = tokens(B * T, spec.vocab, 1), tgt = tokens(B * T, spec.vocab, 2);
  model.forward_backward(in.data(), tgt.data());
  const std::vector<double> g(model.grads().begin(), model.grads().end());
  model.freeze_truncated_state(true);  // truncated BPTT: the state at the cut is a constant
  const auto f = [&] { return model.forward(in.data(), tgt.data()); };
  int checked = 0, nonzero = 0;
  for (const auto& t : model.tensors()) {
    std::set<int64> idx;
    for (int64 j = 0; j < std::min<int64>(t.size, 6); ++j) idx.insert((j * 7919 + 13) % t.size);
    for (int64 j : idx) {
      const int64 i = t.offset + j;
      const double fd = finite_diff(f, p[i], 1e-6);
      INFO(t.name << "[" << j << "] analytic " << g[i] << " numeric " << fd);
      REQUIRE(close(g[i], fd, 1e-5, 1e-9));
      ++checked;
      nonzero += std::abs(g[i]) > 1e-9;
    }
  }
  model.freeze_truncated_state(false);
  CHECK(checked > 30);
  CHECK(nonzero > checked / 2);  // the check is not passing on zeros
}

}  // namespace

TEST_CASE("model: parameter count equals the static accounting", "[train][model]") {
  for (Inject inj : {Inject::linear, Inject::additive, Inject::passthrough, Inject::hyper}) {
    for (Activation a : {Activation::relu2, Activation::swiglu}) {
      const ModelSpec m = small_spec(2, inj, inj == Inject::hyper ? 3 : 0, full_bptt, a, 1);
      Model<float> model(m, 2, 4);
      REQUIRE(model.num_params() == count_params(m).total);
      int64 sum = 0;
      for (const auto& t : model.tensors()) sum += t.size;
      REQUIRE(sum == model.num_params());
    }
  }
  // The benchmark shape of the paper family: d 256, 2 heads, depth 20, r 4.
  ModelSpec m = small_spec(4, Inject::linear);
  m.d_model = 256;
  m.vocab = 256;
  m.prelude.layer.ffn.mult_num = m.coda.layer.ffn.mult_num = m.recur.block.layer.ffn.mult_num = 4;
  m.prelude.layers = m.coda.layers = 2;
  m.recur.block.layers = 4;
  Model<float> big(m, 1, 8);
  REQUIRE(big.num_params() == count_params(m).total);
}

TEST_CASE("model: activation buffers equal the accounting's memory plan", "[train][model]") {
  for (int64 bptt : {full_bptt, half_bptt, int64{1}}) {
    for (Inject inj : {Inject::linear, Inject::hyper}) {
      const ModelSpec m = small_spec(4, inj, inj == Inject::hyper ? 2 : 0, bptt);
      const int64 B = 3, T = 7;
      Model<float> model(m, B, T);
      const ActivationPlan plan = activation_plan(m, T);
      REQUIRE(model.activation_values() == plan.per_token() * B * T + plan.per_thread * train::HostBackend::threads());
      const MemoryEstimate e = count_memory(m, B, T, train::HostBackend::threads());
      REQUIRE(e.activations == model.activation_values() * 4);
    }
  }
  // Truncated BPTT keeps fewer layers.
  const ModelSpec full = small_spec(4, Inject::linear), half = small_spec(4, Inject::linear, 0, half_bptt);
  REQUIRE(activation_plan(half, 64).kept_layers == activation_plan(full, 64).kept_layers - 2 * 2);
  REQUIRE(count_memory(half, 8, 64).activations < count_memory(full, 8, 64).activations);
}

TEST_CASE("model: MoE layers are rejected until the MoE issue", "[train][model]") {
  ModelSpec m = small_spec(2, Inject::linear);
  m.recur.block.layer.ffn.experts = 4;
  m.recur.block.layer.ffn.top_k = 1;
  REQUIRE_THROWS_WITH((Model<float>(m, 1, 4)), Catch::Contains("mixture-of-experts"));
}

TEST_CASE("model gradients: r = 1 (no recurrence)", "[train][model][gradcheck]") { grad_check(small_spec(1, Inject::none)); }

TEST_CASE("model gradients: r = 2 and r = 4, every injection mode", "[train][model][gradcheck]") {
  for (int64 r : {2, 4}) {
    for (Inject inj : {Inject::linear, Inject::additive, Inject::passthrough, Inject::hyper}) {
      INFO("r " << r << " inject " << to_string(inj));
      grad_check(small_spec(r, inj, inj == Inject::hyper ? 2 : 0));
    }
  }
}

TEST_CASE("model gradients: truncated BPTT", "[train][model][gradcheck]") {
  for (Inject inj : {Inject::linear, Inject::additive, Inject::passthrough, Inject::hyper}) {
    INFO("inject " << to_string(inj));
    grad_check(small_spec(4, inj, inj == Inject::hyper ? 3 : 0, half_bptt));
    grad_check(small_spec(4, inj, inj == Inject::hyper ? 3 : 0, 1));
  }
}

TEST_CASE("model gradients: gelu, swiglu and grouped KV heads", "[train][model][gradcheck]") {
  grad_check(small_spec(2, Inject::linear, 0, full_bptt, Activation::gelu));
  grad_check(small_spec(2, Inject::linear, 0, full_bptt, Activation::swiglu, 1));
}

TEST_CASE("model: truncated gradients differ from full ones, and frozen state is what makes FD agree", "[train][model]") {
  // Guards the gradient check itself: without freezing, finite differences of the full loss must
  // disagree with the truncated gradient of a shared-block weight.
  const ModelSpec m = small_spec(4, Inject::linear, 0, 1);
  Model<double> model(m, 2, 5);
  model.init(3);
  auto p = model.params();
  const vecd noise = randn(p.size(), 4, 0.3);
  for (std::size_t i = 0; i < p.size(); ++i) p[i] += noise[i];
  const auto in = tokens(10, m.vocab, 5), tgt = tokens(10, m.vocab, 6);
  model.forward_backward(in.data(), tgt.data());
  const std::vector<double> g(model.grads().begin(), model.grads().end());
  int64 off = -1;
  for (const auto& t : model.tensors())
    if (t.name == "recur.0.w1") off = t.offset;
  REQUIRE(off >= 0);
  int disagree = 0;
  for (int64 j = 0; j < 5; ++j) {
    const double fd = finite_diff([&] { return model.forward(in.data(), tgt.data()); }, p[off + j]);
    disagree += !close(g[off + j], fd, 1e-5, 1e-9);
  }
  REQUIRE(disagree >= 3);
}

TEST_CASE("model: same seed and thread count give identical losses and gradients", "[train][model]") {
  const ModelSpec m = small_spec(2, Inject::hyper, 2);
  const auto in = tokens(4 * 16, m.vocab, 9), tgt = tokens(4 * 16, m.vocab, 10);
  std::vector<float> g1;
  double l1 = 0;
  for (int run = 0; run < 2; ++run) {
    Model<float> model(m, 4, 16);
    model.init(11);
    const double l = model.forward_backward(in.data(), tgt.data());
    if (run == 0) {
      l1 = l;
      g1.assign(model.grads().begin(), model.grads().end());
    } else {
      REQUIRE(l == l1);
      REQUIRE(std::equal(g1.begin(), g1.end(), model.grads().begin()));
    }
  }
  REQUIRE(std::isfinite(l1));
  REQUIRE(std::abs(l1 - std::log(11.0)) < 0.1);  // lm_head starts near zero: uniform over the vocabulary
}
