// The whole looped model: parameter count against the static accounting, activation buffers
// against the memory estimate, and gradients against finite differences in double for r = 1, 2, 4,
// every injection mode (both forms of hyperconnections), both placements of the recurrence's norm,
// truncated BPTT, each activation and grouped KV heads; the same for models whose FFNs are mixtures
// of experts (looped MoE: the shared block's MoE layer runs r times) and for mixed stacks.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <exception>
#include <set>
#include <span>
#include <vector>

#include "loopscale/account/memory.hpp"
#include "loopscale/account/params.hpp"
#include "loopscale/train/model.hpp"
#include "loopscale/train/thread_lanes.hpp"
#include "model_specs.hpp"
#include "reference.hpp"

using namespace loopscale;
using namespace loopscale::test;
using loopscale::train::Transformer;

namespace {

constexpr StateNorm placements[] = {StateNorm::per_recurrence, StateNorm::after_loop};
constexpr Inject injections[] = {Inject::linear, Inject::additive, Inject::passthrough, Inject::hyper, Inject::hyper_shared};

// Lanes for an injection: `lanes` for either form of hyperconnections, else 0.
int64 lanes_of(Inject inj, int64 lanes) { return is_hyper(inj) ? lanes : 0; }
// The combinations the spec accepts: the paper's hyperconnections need full BPTT and the
// per-recurrence state norm.
bool accepted(Inject inj, StateNorm n, int64 bptt, int64 r) {
  ModelSpec m;
  m.recur.r = r;
  m.recur.bptt = bptt;
  m.recur.inject = {inj, 1};
  m.recur.state_norm = n;
  return !(inj == Inject::hyper && (bptt_recurrences(m.recur) < r || n != StateNorm::per_recurrence));
}

// Finite differences of the objective (mean loss plus the MoE balance and z-losses) against
// forward_backward's gradients, on a sample of entries of every parameter tensor.
void grad_check(const ModelSpec& spec, const train::kernels::MoeRouting& routing = {}) {
  const int64 B = 2, T = 5;
  Transformer<double> model(spec, B, T, 15.0, routing);
  model.init(7);
  auto p = model.params();
  const vecd noise = randn(p.size(), 8, 0.3);  // away from the structured start (zeros, identities)
  for (std::size_t i = 0; i < p.size(); ++i) p[i] += noise[i];
  const auto in = tokens(B * T, spec.vocab, 1), tgt = tokens(B * T, spec.vocab, 2);
  model.forward_backward(in.data(), tgt.data());
  const std::vector<double> g(model.grads().begin(), model.grads().end());
  model.freeze_truncated_state(true);  // truncated BPTT: the state at the cut is a constant
  const auto f = [&] { return model.forward(in.data(), tgt.data()) + model.aux_loss(); };
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
  for (Inject inj : injections) {
    for (Activation a : {Activation::relu2, Activation::swiglu}) {
      for (StateNorm n : placements) {
        if (!accepted(inj, n, full_bptt, 4)) continue;
        const ModelSpec m = with_norm(small_spec(4, inj, lanes_of(inj, 3), full_bptt, a, 1), n);
        Transformer<float> model(m, 2, 4);
        REQUIRE(model.num_params() == count_params(m).total);
        int64 sum = 0;
        for (const auto& t : model.tensors()) sum += t.size;
        REQUIRE(sum == model.num_params());
      }
    }
  }
  // The paper's hyperconnections keep a set of 3^2 + 2 * 3 lane parameters per recurrence, the
  // shared form one.
  Transformer<float> paper(small_spec(4, Inject::hyper, 3), 1, 4), shared(small_spec(4, Inject::hyper_shared, 3), 1, 4);
  for (const auto& t : paper.tensors())
    if (t.name == "inject.hyper") CHECK(t.size == 4 * 15);
  for (const auto& t : shared.tensors())
    if (t.name == "inject.hyper") CHECK(t.size == 15);
  CHECK(paper.num_params() - shared.num_params() == 3 * 15);
  // The benchmark shape of the paper family: d 256, 2 heads, depth 20, r 4.
  ModelSpec m = small_spec(4, Inject::linear);
  m.d_model = 256;
  m.vocab = 256;
  LayerSpec wide = m.prelude[0];
  wide.ffn.mult_num = 4;
  m.prelude = m.coda = StackSpec(2, wide);
  m.recur.block = StackSpec(4, wide);
  Transformer<float> big(m, 1, 8);
  REQUIRE(big.num_params() == count_params(m).total);
}

TEST_CASE("model: a thread-lane model keeps one attention scratch matrix and runs its backward only inside its lanes' region",
          "[train][model][lanes]") {
  using train::HostBackend;
  HostBackend::set_threads(2);
  const ModelSpec m = small_spec(2, Inject::linear);
  const int64 B = 2, T = 8;
  const ActivationPlan plan = activation_plan(m, T);
  Transformer<float> whole(m, 2 * B, T);
  whole.init(3);
  const std::span<const float> params(whole.params_data(), static_cast<std::size_t>(whole.num_params()));
  Transformer<float> lane0(train::thread_lane, m, B, T, 15.0, {}, params), lane1(train::thread_lane, m, B, T, 15.0, {}, params);
  REQUIRE(whole.activation_values() == plan.per_token() * 2 * B * T + plan.per_thread * 2);
  REQUIRE(lane0.activation_values() == plan.per_token() * B * T + plan.per_thread);
  REQUIRE(count_lane_memory(m, 2 * B, T, 2, 2).activations == 2 * lane0.activation_values() * 4);
  REQUIRE(count_lane_memory(m, 2 * B, T, 2, 1).activations == whole.activation_values() * 4);
  // thread_id: a parallel_for's own threads by their index, tasks run inline (inside another
  // region: a lane) as 0, whichever thread of that region runs them.
  std::vector<int> ids(4, -1), inline_ids(4, -1);
  HostBackend::parallel_for(4, [&](int64 i) { ids[static_cast<std::size_t>(i)] = HostBackend::thread_id(); });
  CHECK(*std::max_element(ids.begin(), ids.end()) <= 1);
#pragma omp parallel num_threads(2)
  {
    const int t = omp_get_thread_num();
    HostBackend::parallel_for(2, [&](int64 i) { inline_ids[static_cast<std::size_t>(2 * t + i)] = HostBackend::thread_id(); });
  }
  CHECK(inline_ids == std::vector<int>(4, 0));
  // Two lanes side by side on two threads: each what one thread computes for its sequences, bit for
  // bit, though both use their scratch slot 0.
  const auto in = tokens(2 * B * T, m.vocab, 1), tgt = tokens(2 * B * T, m.vocab, 2);
  double lane_loss[2] = {0, 0};
  std::exception_ptr failed;
#pragma omp parallel for num_threads(2)
  for (int l = 0; l < 2; ++l) {
    try {
      Transformer<float>& lm = l == 0 ? lane0 : lane1;
      lane_loss[l] = lm.forward_backward(in.data() + l * B * T, tgt.data() + l * B * T);
    } catch (...) {
#pragma omp critical
      failed = std::current_exception();
    }
  }
  REQUIRE(!failed);
  HostBackend::set_threads(1);
  Transformer<float> one(m, B, T);
  one.write_params(params);
  for (int l = 0; l < 2; ++l) {
    INFO("lane " << l);
    CHECK(one.forward_backward(in.data() + l * B * T, tgt.data() + l * B * T) == lane_loss[l]);
    Transformer<float>& lm = l == 0 ? lane0 : lane1;
    CHECK(std::equal(one.grads().begin(), one.grads().end(), lm.grads().begin()));
  }
  // Outside a region on two threads its backward would give two threads one scratch matrix.
  HostBackend::set_threads(2);
  REQUIRE_THROWS_WITH(lane0.forward_backward(in.data(), tgt.data()),
                      Catch::Contains("a thread-lane model's backward runs on one thread inside its lanes' parallel region") &&
                          Catch::Contains("not on 2 threads"));
  HostBackend::set_threads(1);
  CHECK(lane0.forward_backward(in.data(), tgt.data()) == lane_loss[0]);  // one thread: fine anywhere
  HostBackend::set_threads(0);
}

TEST_CASE("model: thread lanes of unequal shares give the micro-batch's mean loss and gradient", "[train][model][lanes]") {
  using train::HostBackend;
  const ModelSpec m = small_spec(2, Inject::linear);
  const int64 micro = 5, T = 8;  // three sequences in lane 0, two in lane 1
  const auto in = tokens(micro * T, m.vocab, 1), tgt = tokens(micro * T, m.vocab, 2);
  HostBackend::set_threads(1);
  Transformer<float> whole(m, micro, T);
  whole.init(4);
  const double loss = whole.forward_backward(in.data(), tgt.data());
  const std::vector<float> grad(whole.grads().begin(), whole.grads().end());
  HostBackend::set_threads(2);
  const std::span<const float> params(whole.params_data(), static_cast<std::size_t>(whole.num_params()));
  Transformer<float> lane0(train::thread_lane, m, 3, T, 15.0, {});  // lane 0 owns the parameters, as the trainer's model does
  lane0.write_params(params);
  train::ThreadLanes<float, HostBackend> lanes(lane0, 2, micro);
  CHECK(lanes.batch() == micro);
  CHECK(lanes.pass(in.data(), tgt.data(), true) == Approx(loss).epsilon(1e-6));
  float scale = 0, worst = 0;
  for (std::size_t i = 0; i < grad.size(); ++i) {
    scale = std::max(scale, std::abs(grad[i]));
    worst = std::max(worst, std::abs(grad[i] - lane0.grads()[i]));
  }
  CHECK(scale > 0);
  CHECK(worst <= 1e-5f * scale);
  CHECK(lanes.pass(in.data(), tgt.data(), false) == Approx(loss).epsilon(1e-6));  // a validation pass
  // Lane 0 must hold the largest share, and every lane a sequence.
  REQUIRE_THROWS_WITH((train::ThreadLanes<float, HostBackend>(lane0, 2, 4)), Catch::Contains("lane 0's model takes 3 sequences, not the 2 of its share"));
  REQUIRE_THROWS_WITH((train::ThreadLanes<float, HostBackend>(lane0, 4, 3)), Catch::Contains("fewer sequences than lanes"));
  HostBackend::set_threads(0);
}

TEST_CASE("model: activation buffers equal the accounting's memory plan", "[train][model]") {
  for (int64 bptt : {full_bptt, half_bptt, int64{1}}) {
    for (Inject inj : injections) {
      for (StateNorm n : placements) {
        if (!accepted(inj, n, bptt, 4)) continue;
        INFO("inject " << to_string(inj) << " norm " << to_string(n) << " bptt " << bptt);
        const ModelSpec m = with_norm(small_spec(4, inj, lanes_of(inj, 2), bptt), n);
        const int64 B = 3, T = 7;
        Transformer<float> model(m, B, T);
        const ActivationPlan plan = activation_plan(m, T);
        REQUIRE(model.activation_values() == plan.per_token() * B * T + plan.per_thread * train::HostBackend::threads());
        const MemoryEstimate e = count_memory(m, B, T, train::HostBackend::threads());
        REQUIRE(e.activations == model.activation_values() * 4);
      }
    }
  }
  // The per-recurrence state norm keeps its output and 1/rms per kept recurrence (and one pair of
  // scratch for the forward-only ones) instead of one pair after the loop.
  for (int64 bptt : {full_bptt, int64{1}}) {
    const ModelSpec per = small_spec(4, Inject::linear, 0, bptt), after = with_norm(per, StateNorm::after_loop);
    const int64 kept = bptt == full_bptt ? 4 : 1, scratch = bptt == full_bptt ? 0 : 1;
    CHECK(activation_plan(per, 16).per_token() - activation_plan(after, 16).per_token() == (kept + scratch - 1) * (8 + 1));
  }
  // Truncated BPTT keeps fewer layers.
  const ModelSpec full = small_spec(4, Inject::linear), half = small_spec(4, Inject::linear, 0, half_bptt);
  REQUIRE(activation_plan(half, 64).kept_layers == activation_plan(full, 64).kept_layers - 2 * 2);
  REQUIRE(count_memory(half, 8, 64).activations < count_memory(full, 8, 64).activations);
}

TEST_CASE("model: MoE parameters, activations and active size equal the accounting", "[train][model][moe]") {
  for (int64 r : {1, 2, 4}) {
    for (bool shared : {false, true}) {
      for (Activation a : {Activation::relu2, Activation::swiglu}) {
        const ModelSpec m = moe_spec(r, 4, 2, shared, full_bptt, a);
        Transformer<float> model(m, 2, 4);
        const ParamCounts pc = count_params(m);
        REQUIRE(model.num_params() == pc.total);
        REQUIRE(model.moe_layers() == 2 + m.recur.block.size());
        // Active: every tensor but the E - K experts a token does not visit, in every MoE layer.
        int64 unvisited = 0;
        for (const auto& t : model.tensors())
          if (t.name.find(".experts.") != std::string::npos) unvisited += t.size / 4 * (4 - 2);
        REQUIRE(pc.active == pc.total - unvisited);
      }
    }
  }
  for (int64 bptt : {full_bptt, half_bptt}) {
    const ModelSpec m = moe_spec(4, 4, 2, true, bptt);
    const int64 B = 3, T = 7;
    Transformer<float> model(m, B, T);
    const ActivationPlan plan = activation_plan(m, T);
    REQUIRE(model.activation_values() == plan.per_token() * B * T + plan.per_thread * train::HostBackend::threads());
    REQUIRE(count_memory(m, B, T, train::HostBackend::threads()).activations == model.activation_values() * 4);
    // Routing indices: 3 per slot as planned, plus a few counters per call and the grouping's.
    REQUIRE(model.index_values() >= plan.index * B * T);
    REQUIRE(model.index_values() <= plan.index * B * T + 200 * model.moe_layers());
  }
  // Bad router options are one line.
  train::kernels::MoeRouting bad;
  bad.capacity_factor = -1;
  REQUIRE_THROWS_WITH((Transformer<float>(moe_spec(2, 4, 2), 1, 4, 15.0, bad)), Catch::Contains("capacity"));
  ModelSpec k_over_e = moe_spec(2, 2, 3);
  REQUIRE_THROWS_WITH((Transformer<float>(k_over_e, 1, 4)), Catch::Contains("top-k") || Catch::Contains("top_k"));
}

TEST_CASE("model: a looped MoE layer routes every token K times per recurrence, statistics over all r", "[train][model][moe]") {
  for (int64 r : {1, 2, 4}) {
    const ModelSpec m = moe_spec(r, 4, 2);
    const int64 B = 2, T = 6, N = B * T;
    Transformer<float> model(m, B, T);
    model.init(3);
    const auto in = tokens(N, m.vocab, 1), tgt = tokens(N, m.vocab, 2);
    const double loss = model.forward(in.data(), tgt.data());
    REQUIRE(std::isfinite(loss));
    REQUIRE(model.aux_loss() > 0);  // the default routing has the Switch aux loss
    for (int64 i = 0; i < model.moe_layers(); ++i) {
      const auto& st = model.moe_stats(i);
      const int64 calls = model.moe_name(i).rfind("recur.", 0) == 0 ? r : 1;
      INFO(model.moe_name(i));
      REQUIRE(st.calls == calls);
      REQUIRE(st.tokens == static_cast<double>(calls * N));
      REQUIRE(st.slots == static_cast<double>(calls * N * 2));
      REQUIRE(st.dropped == 0);  // dropless by default
    }
    // A second forward starts the statistics afresh.
    model.forward(in.data(), tgt.data());
    REQUIRE(model.moe_stats(0).calls == 1);
  }
}

TEST_CASE("model gradients: looped MoE, r = 1, 2, 4", "[train][model][gradcheck][moe]") {
  train::kernels::MoeRouting routing;
  routing.z_coef = 1e-2;
  routing.aux_coef = 0.05;
  for (int64 r : {1, 2, 4}) {
    INFO("r = " << r);
    grad_check(moe_spec(r, 4, 2), routing);
  }
}

TEST_CASE("model gradients: MoE variants (shared expert, swiglu, sigmoid + bias, capacity, top-1, truncated BPTT)",
          "[train][model][gradcheck][moe]") {
  train::kernels::MoeRouting sig;
  sig.router = train::kernels::RouterKind::sigmoid;
  sig.balance = train::kernels::Balance::bias;
  sig.z_coef = 1e-2;
  grad_check(moe_spec(2, 4, 2, true, full_bptt, Activation::swiglu), sig);
  train::kernels::MoeRouting cap;
  cap.capacity_factor = 1.0;
  cap.renormalize = false;
  grad_check(moe_spec(2, 4, 1), cap);
  grad_check(moe_spec(4, 4, 2, false, half_bptt));
  grad_check(moe_spec(2, 1, 1));  // E = 1: a routed dense MLP
}

TEST_CASE("model: MoE selection bias moves towards the underloaded experts", "[train][model][moe]") {
  train::kernels::MoeRouting bias;
  bias.balance = train::kernels::Balance::bias;
  bias.bias_rate = 0.5;
  const ModelSpec m = moe_spec(2, 4, 1);
  Transformer<float> model(m, 2, 6, 15.0, bias);
  model.init(5);
  const auto in = tokens(12, m.vocab, 1), tgt = tokens(12, m.vocab, 2);
  model.forward(in.data(), tgt.data());
  REQUIRE(model.aux_loss() == 0);  // no aux loss, no z-loss
  const auto& st = model.moe_stats(0);
  model.update_moe_bias();
  const auto b = model.moe_bias(0);
  const double mean = st.slots / 4;
  for (int64 e = 0; e < 4; ++e) {
    INFO("expert " << e << " routed " << st.routed[e]);
    if (st.routed[e] < mean) REQUIRE(b[e] == 0.5f);
    if (st.routed[e] > mean) REQUIRE(b[e] == -0.5f);
  }
}

TEST_CASE("model gradients: r = 1 (no recurrence)", "[train][model][gradcheck]") { grad_check(small_spec(1, Inject::none)); }

TEST_CASE("model gradients: r = 1 under either placement of the recurrence's norm", "[train][model][gradcheck]") {
  grad_check(with_norm(small_spec(1, Inject::none), StateNorm::after_loop));
  ModelSpec empty = small_spec(1, Inject::none);  // no shared block: the norm acts on the prelude's output
  empty.recur.block = {};
  for (StateNorm n : placements) grad_check(with_norm(empty, n));
  // Flat (the paper's 0 + k + 0 baseline): no prelude or coda, the norm after the last layer.
  for (StateNorm n : placements) grad_check(with_norm(flat_spec(), n));
}

TEST_CASE("model gradients: r = 2 and r = 4, every injection mode, both norm placements", "[train][model][gradcheck]") {
  for (int64 r : {2, 4}) {
    for (Inject inj : injections) {
      for (StateNorm n : placements) {
        if (!accepted(inj, n, full_bptt, r)) continue;
        INFO("r " << r << " inject " << to_string(inj) << " norm " << to_string(n));
        grad_check(with_norm(small_spec(r, inj, lanes_of(inj, 2)), n));
      }
    }
  }
}

TEST_CASE("model gradients: truncated BPTT, both norm placements", "[train][model][gradcheck]") {
  for (Inject inj : injections) {
    for (StateNorm n : placements) {
      for (int64 bptt : {half_bptt, int64{1}}) {
        if (!accepted(inj, n, bptt, 4)) continue;
        INFO("inject " << to_string(inj) << " norm " << to_string(n) << " bptt " << bptt);
        grad_check(with_norm(small_spec(4, inj, lanes_of(inj, 3), bptt), n));
      }
    }
  }
  // The paper's hyperconnections refuse truncated BPTT (their forward-only recurrences' lane
  // parameters would never learn) and the norm after the loop (their update adds beta_r norm(y)).
  REQUIRE_THROWS_WITH((Transformer<float>(small_spec(4, Inject::hyper, 2, half_bptt), 1, 4)),
                      std::string(LOOPSCALE_MSG_HYPER_TRUNCATED));
  REQUIRE_THROWS_WITH((Transformer<float>(with_norm(small_spec(4, Inject::hyper, 2), StateNorm::after_loop), 1, 4)),
                      std::string(LOOPSCALE_MSG_HYPER_AFTER_LOOP));
}

TEST_CASE("model gradients: gelu, swiglu and grouped KV heads", "[train][model][gradcheck]") {
  grad_check(small_spec(2, Inject::linear, 0, full_bptt, Activation::gelu));
  grad_check(small_spec(2, Inject::linear, 0, full_bptt, Activation::swiglu, 1));
}

TEST_CASE("model: truncated gradients differ from full ones, and frozen state is what makes FD agree", "[train][model]") {
  // Guards the gradient check itself: without freezing, finite differences of the full loss must
  // disagree with the truncated gradient of a shared-block weight.
  const ModelSpec m = small_spec(4, Inject::linear, 0, 1);
  Transformer<double> model(m, 2, 5);
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
 for (const ModelSpec& m : {small_spec(2, Inject::hyper, 2), moe_spec(2, 4, 2, true), small_spec(4, Inject::hyper_shared, 2, 1)}) {
  const auto in = tokens(4 * 16, m.vocab, 9), tgt = tokens(4 * 16, m.vocab, 10);
  std::vector<float> g1;
  double l1 = 0;
  for (int run = 0; run < 2; ++run) {
    Transformer<float> model(m, 4, 16);
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
}

namespace {
// The small spec with a mixed shared block: dense, MoE (4 experts, top 2, hidden 12), dense, MoE;
// prelude dense, coda MoE; the MoE layers' attention differs too (one shared KV head), so every
// layer's shape is its own.
ModelSpec mixed_spec(int64 r, int64 bptt = full_bptt, Inject inj = Inject::linear, int64 lanes = 0) {
  ModelSpec m = small_spec(r, inj, lanes, bptt);
  LayerSpec dense = m.prelude[0], moe = dense;
  moe.ffn = {Activation::relu2, 2, 1, 12, 4, 2, false};
  moe.attn.kv_heads = 1;
  m.recur.block = StackSpec({dense, moe, dense, moe});
  m.coda = StackSpec(1, moe);
  return m;
}
}  // namespace

TEST_CASE("model: mixed stacks lay out every layer with its own shape, as the accounting says", "[train][model][mixed]") {
  for (int64 bptt : {full_bptt, int64{1}}) {
    const ModelSpec m = mixed_spec(2, bptt);
    const int64 B = 3, T = 7;
    Transformer<float> model(m, B, T);
    REQUIRE(model.num_params() == count_params(m).total);
    REQUIRE(model.moe_layers() == 3);  // recur.1, recur.3, coda.0
    CHECK(model.moe_name(0) == "recur.1");
    CHECK(model.moe_name(2) == "coda.0");
    const ActivationPlan plan = activation_plan(m, T);
    REQUIRE(model.activation_values() == plan.per_token() * B * T + plan.per_thread * train::HostBackend::threads());
    REQUIRE(model.index_values() >= plan.index * B * T);
    int64 moe_tensors = 0;
    for (const auto& t : model.tensors()) moe_tensors += t.name.find(".router") != std::string::npos;
    CHECK(moe_tensors == 3);
  }
}

TEST_CASE("model gradients: mixed dense and MoE layers in the shared block", "[train][model][gradcheck][mixed]") {
  for (int64 r : {1, 2, 3}) {
    INFO("r = " << r);
    grad_check(mixed_spec(r, full_bptt, r == 1 ? Inject::none : Inject::linear));
  }
  grad_check(mixed_spec(3, 1));                              // truncated: one scratch set per distinct layer
  grad_check(with_norm(mixed_spec(3, 1), StateNorm::after_loop));
  // Hyperconnections around a mixed block: both forms, both placements, full and (shared form) truncated.
  for (StateNorm n : placements) {
    INFO("norm " << to_string(n));
    if (n == StateNorm::per_recurrence) grad_check(mixed_spec(2, full_bptt, Inject::hyper, 2));
    grad_check(with_norm(mixed_spec(2, full_bptt, Inject::hyper_shared, 2), n));
    grad_check(with_norm(mixed_spec(3, 1, Inject::hyper_shared, 2), n));
  }
}

TEST_CASE("model: the paper's initialisation draws each tensor at its documented scale", "[train][model][init]") {
  // d 64, a 4x relu^2 MLP (hidden 256), the paper's linear injection; every layer shape the paper has.
  ModelSpec m = small_spec(2, Inject::linear);
  m.d_model = 64;
  for (StackSpec* st : {&m.prelude, &m.recur.block, &m.coda})
    for (LayerSpec& l : st->layers) l.ffn.mult_num = 4;
  Transformer<double> model(m, 1, 4);
  REQUIRE(parse_name<train::InitScheme>("paper") == train::InitScheme::paper);
  REQUIRE(name_of(train::InitScheme::scaled_normal) == "scaled-normal");
  model.init(21, train::InitScheme::paper);
  const auto p = model.params();
  const auto ends = [](const std::string& s, const std::string& x) {
    return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  int seen = 0;
  for (const auto& t : model.tensors()) {
    double sum = 0, ss = 0, amax = 0;
    for (int64 i = 0; i < t.size; ++i) {
      const double v = p[t.offset + i];
      sum += v;
      ss += v * v;
      amax = std::max(amax, std::abs(v));
    }
    const double mean = sum / t.size, sd = std::sqrt(ss / t.size - mean * mean);
    INFO(t.name << " std " << sd << " max " << amax);
    double want = 0;
    bool uniform = false;
    if (t.name == "embedding") want = 1.0;
    else if (t.name == "lm_head") want = 0.001;
    else if (ends(t.name, ".wqkv") || ends(t.name, ".wo") || ends(t.name, ".w1")) want = 1.0 / 8, uniform = true;
    else if (ends(t.name, ".w2")) want = 1.0 / 16, uniform = true;  // 1 / sqrt(4 d)
    if (want > 0) {
      ++seen;
      REQUIRE(std::abs(sd / want - 1) < 0.08);
      REQUIRE(std::abs(mean) < 0.1 * want);
      if (uniform) {
        REQUIRE(amax <= std::sqrt(3.0) * want);           // the uniform's bound
        REQUIRE(amax > 0.95 * std::sqrt(3.0) * want);     // and it reaches it: not a normal's tail
      } else {
        REQUIRE(amax > 2.5 * want);  // normal draws have tails beyond the uniform's bound
      }
    } else if (t.name == "inject.W") {
      for (int64 i = 0; i < 64; ++i)
        for (int64 j = 0; j < 128; ++j) REQUIRE(p[t.offset + i * 128 + j] == (i == j ? 1.0 : 0.0));
    } else {
      REQUIRE(t.name.find("norm") != std::string::npos);
      for (int64 i = 0; i < t.size; ++i) REQUIRE(p[t.offset + i] == 1.0);
    }
  }
  CHECK(seen == 2 + 4 * 4);
  // The default scheme is today's: normal draws with the output projections scaled down.
  Transformer<double> other(m, 1, 4);
  other.init(21);
  REQUIRE(!std::equal(p.begin(), p.end(), other.params().begin()));
}

TEST_CASE("hyperconnection kernels: both updates against finite differences, and the cyclic start", "[train][kernels][hyper]") {
  // L = <w, x> + <wl, update(H, x, z)>, x = aggregate(H): the shared form's update uses z - x, the
  // paper's (x null) beta z.
  namespace k = train::kernels;
  using HB = train::HostBackend;
  const int64 K = 3, nd = 12;
  for (const bool paper : {true, false}) {
    INFO((paper ? "paper" : "shared"));
    vecd H = randn(K * nd, 24), p = randn(k::HyperParams::count(K), 25), z = randn(nd, 26), wl = randn(K * nd, 27),
         w = randn(nd, 28);
    const auto f = [&] {
      vecd x(nd), Ho(K * nd);
      k::hyper_aggregate<HB>(H.data(), p.data() + k::HyperParams::alpha(K), x.data(), K, nd);
      k::hyper_update<HB>(H.data(), p.data(), p.data() + k::HyperParams::beta(K), paper ? nullptr : x.data(), z.data(),
                          Ho.data(), K, nd);
      double v = 0;
      for (int64 i = 0; i < nd; ++i) v += w[i] * x[i];
      for (int64 i = 0; i < K * nd; ++i) v += wl[i] * Ho[i];
      return v;
    };
    vecd x(nd), dH(K * nd), dz(nd), dp(p.size(), 0.0);
    k::hyper_aggregate<HB>(H.data(), p.data() + k::HyperParams::alpha(K), x.data(), K, nd);
    k::hyper_update_backward<HB>(H.data(), p.data(), p.data() + k::HyperParams::beta(K), paper ? nullptr : x.data(),
                                 z.data(), wl.data(), dH.data(), dz.data(), dp.data(), dp.data() + k::HyperParams::beta(K), K, nd);
    vecd dx = w;
    if (!paper)
      for (int64 i = 0; i < nd; ++i) dx[i] -= dz[i];  // x enters z - x
    k::hyper_aggregate_backward<HB>(H.data(), p.data() + k::HyperParams::alpha(K), dx.data(), dH.data(),
                                    dp.data() + k::HyperParams::alpha(K), K, nd);
    const auto check = [&](vecd& v, const vecd& g, const char* what) {
      for (std::size_t i = 0; i < v.size(); ++i) {
        INFO(what << "[" << i << "]");
        REQUIRE(close(g[i], finite_diff(f, v[i]), 1e-6, 1e-8));
      }
    };
    check(H, dH, "dH");
    check(p, dp, "d(M, alpha, beta)");
    check(z, dz, "dz");
  }
  // The cyclic start of 5 sets of 2 lanes: M = I, alpha = e_{i mod 2}, beta = 1.
  vecd q(5 * k::HyperParams::count(2), -7.0);
  k::hyper_init(q.data(), 2, 5);
  for (int64 i = 0; i < 5; ++i) {
    const double* s = q.data() + i * k::HyperParams::count(2);
    CHECK((s[0] == 1 && s[1] == 0 && s[2] == 0 && s[3] == 1));
    CHECK(s[k::HyperParams::alpha(2) + i % 2] == 1);
    CHECK(s[k::HyperParams::alpha(2) + (i + 1) % 2] == 0);
    CHECK((s[k::HyperParams::beta(2)] == 1 && s[k::HyperParams::beta(2) + 1] == 1));
  }
}

TEST_CASE("model: r = 1 is one model under either norm placement, one shared lane is the plain loop", "[train][model]") {
  const int64 B = 2, T = 5;
  const auto in = tokens(B * T, 11, 3), tgt = tokens(B * T, 11, 4);
  // Loss (and gradients) after init and a perturbation of every tensor but the lane parameters,
  // keyed by the tensor's name, so two models with the same tensors get the same weights.
  const auto run = [&](const ModelSpec& m, std::vector<double>* grads = nullptr) {
    Transformer<double> model(m, B, T);
    model.init(13);
    auto p = model.params();
    for (const auto& t : model.tensors()) {
      if (t.name == "inject.hyper") continue;
      const vecd noise = randn(static_cast<std::size_t>(t.size), std::hash<std::string>{}(t.name), 0.3);
      for (int64 i = 0; i < t.size; ++i) p[t.offset + i] += noise[i];
    }
    const double loss = model.forward_backward(in.data(), tgt.data());
    if (grads) grads->assign(model.grads().begin(), model.grads().end());
    return loss;
  };
  // r = 1: the norm at the end of the one recurrence is the norm after the loop.
  std::vector<double> ga, gb;
  const double la = run(small_spec(1, Inject::none), &ga), lb = run(with_norm(small_spec(1, Inject::none), StateNorm::after_loop), &gb);
  REQUIRE(la == lb);
  REQUIRE(ga == gb);
  // The placements differ once the block runs twice.
  CHECK(std::abs(run(small_spec(2, Inject::linear)) - run(with_norm(small_spec(2, Inject::linear), StateNorm::after_loop))) > 1e-6);
  // hyper-shared with one lane at its start (alpha = M = beta = 1) is H' = H + (z - x) = z: the plain
  // loop (passthrough), under either placement.
  for (StateNorm n : placements) {
    const double l1 = run(with_norm(small_spec(4, Inject::hyper_shared, 1), n)), l2 = run(with_norm(small_spec(4, Inject::passthrough), n));
    INFO("norm " << to_string(n) << " " << l1 << " vs " << l2);
    REQUIRE(std::abs(l1 - l2) < 1e-12);
    REQUIRE(std::abs(l1 - std::log(11.0)) > 1e-3);  // the perturbed model is far from uniform
  }
}
