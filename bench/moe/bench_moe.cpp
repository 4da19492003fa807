// E = 8, K = 2 MoE layer vs a dense MLP with the same active FLOPs: d = 256, 4096 tokens, relu2,
// dense hidden 1024 and expert hidden 512 (K * 512 = 1024 per token). One iteration is a forward
// and a backward of the layer over once-allocated buffers, as in a training step; tokens/s is the
// figure to compare (the target for the whole model is >= 60% of dense).
//
// The machine is shared, so BM_moe_vs_dense also runs the two alternately inside one benchmark and
// reports the ratio of their rates: load that comes and goes hits both sides alike.
//
// BM_model_moe_vs_dense does the same for whole looped models (the target): a training
// step (forward, backward, AdamW) of a dense model and of the same model with every FFN an E = 8,
// K = 2 MoE of expert hidden 2d (so K x 2d = the dense 4d: the same active size but the router),
// alternately.
#include <benchmark/benchmark.h>

#include <chrono>
#include <random>
#include <vector>

#include "loopscale/account/params.hpp"
#include "loopscale/train/kernels/mlp.hpp"
#include "loopscale/train/kernels/moe.hpp"
#include "loopscale/train/model.hpp"
#include "loopscale/train/optim.hpp"

using namespace loopscale;
using namespace loopscale::train::kernels;
using HB = loopscale::train::HostBackend;

namespace {

constexpr int64 N = 4096, D = 256, DENSE_H = 1024, E = 8, K = 2, EXPERT_H = DENSE_H / K;

std::vector<float> random(std::size_t n, unsigned seed, float scale) {
  std::mt19937 g(seed);
  std::normal_distribution<float> d(0.f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(g);
  return v;
}

// Forward + backward GEMM FLOPs of an MLP over `rows` rows: six GEMMs of 2 rows d H FLOPs each (two
// in the forward; the input and weight gradients of both matrices in the backward).
double mlp_flops(double rows, int64 H) { return 2.0 * 6.0 * rows * D * H; }

struct Dense {
  MlpShape s{N, D, DENSE_H, Activation::relu2};
  std::vector<float> x = random(N * D, 1, 1.f), dy = random(N * D, 2, 1e-3f);
  std::vector<float> W1 = random(DENSE_H * D, 3, 0.06f), W2 = random(D * DENSE_H, 4, 0.03f);
  std::vector<float> G1 = std::vector<float>(W1.size()), G2 = std::vector<float>(W2.size());
  std::vector<float> hpre = std::vector<float>(N * DENSE_H), hact = hpre, dh = hpre, dhp = hpre;
  std::vector<float> y = std::vector<float>(N * D), dx = y;
  void step() {
    mlp_forward<HB>(x.data(), W1.data(), W2.data(), hpre.data(), hact.data(), y.data(), s, false);
    mlp_backward<HB>(x.data(), W1.data(), W2.data(), hpre.data(), hact.data(), dy.data(), dx.data(), G1.data(), G2.data(),
                     dh.data(), dhp.data(), s);
  }
  double flops() const { return mlp_flops(N, DENSE_H); }
};

struct Moe {
  MoeShape s;
  MoeSizes z;
  std::vector<float> x, dy, P, G, y, dx, av, sv, bias;
  std::vector<int32> ai, si;
  MoeActs<float> a;
  MoeScratch<float> w;
  MoeStats stats{E};
  // sigmoid: sigmoid router with the aux-loss-free bias; else softmax with the Switch aux loss.
  Moe(bool sigmoid, double capacity) {
    s.d = D, s.hidden = EXPERT_H, s.experts = E, s.top_k = K, s.act = Activation::relu2;
    s.router = sigmoid ? RouterKind::sigmoid : RouterKind::softmax;
    s.balance = sigmoid ? Balance::bias : Balance::aux_loss;
    s.z_coef = 1e-3;
    s.capacity_factor = capacity;
    validate(s);
    z = moe_sizes(s, N);
    x = random(N * D, 1, 1.f), dy = random(N * D, 2, 1e-3f), P = random(moe_param_count(s), 3, 0.05f);
    G.assign(P.size(), 0.f), y.assign(N * D, 0.f), dx = y, av.assign(z.acts, 0.f), sv.assign(z.scratch, 0.f);
    bias.assign(E, 0.f), ai.assign(z.acts_index, 0), si.assign(z.scratch_index, 0);
    a = moe_acts<float>(s, N, av.data(), ai.data());
    w = moe_scratch<float>(s, N, sv.data(), si.data());
  }
  void step() {
    stats.reset();
    moe_forward<HB>(s, N, x.data(), P.data(), bias.data(), y.data(), false, a, w, stats);
    moe_backward<HB>(s, N, x.data(), P.data(), a, stats, dy.data(), dx.data(), G.data(), w);
    moe_update_bias(s, stats, bias.data());
  }
  // Expert GEMMs over the rows that ran, plus the router's three (N x d x E) products.
  double flops() const { return mlp_flops(stats.slots - stats.dropped, EXPERT_H) + 6.0 * N * D * E; }
};

void counters(benchmark::State& st, double flops) {
  st.counters["tokens/s"] = benchmark::Counter(static_cast<double>(N), benchmark::Counter::kIsIterationInvariantRate);
  st.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  st.counters["threads"] = HB::threads();
}

void BM_dense_mlp(benchmark::State& st) {
  HB::set_threads(static_cast<int>(st.range(0)));
  Dense m;
  for (auto _ : st) {
    m.step();
    benchmark::DoNotOptimize(m.dx.data());
  }
  counters(st, m.flops());
}

// Arguments: threads, router (0 softmax + aux loss, 1 sigmoid + bias), capacity factor x 100.
void BM_moe(benchmark::State& st) {
  HB::set_threads(static_cast<int>(st.range(0)));
  Moe m(st.range(1) != 0, static_cast<double>(st.range(2)) / 100.0);
  for (auto _ : st) {
    m.step();
    benchmark::DoNotOptimize(m.dx.data());
  }
  counters(st, m.flops());
  st.counters["max/min load"] = m.stats.max_min_ratio();
  st.counters["drop rate"] = m.stats.drop_rate();
}

// One step of `dense` then one of `moe`, each timed, per iteration; their tokens/s and the ratio.
template <class D, class M>
void alternate(benchmark::State& st, D& dense, M& moe, double tokens) {
  using clock = std::chrono::steady_clock;
  double td = 0, tm = 0;
  for (auto _ : st) {
    const auto t0 = clock::now();
    dense.step();
    const auto t1 = clock::now();
    moe.step();
    const auto t2 = clock::now();
    td += std::chrono::duration<double>(t1 - t0).count();
    tm += std::chrono::duration<double>(t2 - t1).count();
    st.SetIterationTime(std::chrono::duration<double>(t2 - t0).count());
  }
  const double it = static_cast<double>(st.iterations());
  st.counters["dense tokens/s"] = tokens * it / td;
  st.counters["moe tokens/s"] = tokens * it / tm;
  st.counters["moe/dense"] = td / tm;
  st.counters["threads"] = HB::threads();
}

// Dense and MoE (softmax, aux loss, dropless) alternately; the ratio of MoE to dense tokens/s.
void BM_moe_vs_dense(benchmark::State& st) {
  HB::set_threads(static_cast<int>(st.range(0)));
  Dense dense;
  Moe moe(false, 0.0);
  alternate(st, dense, moe, N);
}

// The whole-model pair: d 256, 2 heads, depth 6 = prelude 1 + recur 2 layers x r 2 + coda 1,
// linear injection, byte vocabulary, seq 256, batch 8 (2048 tokens a step).
ModelSpec model_spec(bool moe) {
  ModelSpec m;
  m.d_model = 256;
  m.vocab = 256;
  LayerSpec l;
  l.attn.heads = 2;
  if (moe) {
    l.ffn.experts = 8;
    l.ffn.top_k = 2;
    l.ffn.hidden = 512;
  }
  m.prelude = {1, l};
  m.coda = {1, l};
  m.recur.block = {2, l};
  m.recur.r = 2;
  m.recur.inject = {Inject::linear, 0};
  return m;
}

struct Trainee {
  static constexpr int64 B = 8, T = 256;
  loopscale::train::Transformer<float> model;
  loopscale::train::AdamW<float> opt;
  std::vector<std::int32_t> in, tgt;
  explicit Trainee(bool moe) : model(model_spec(moe), B, T), opt(model.num_params(), loopscale::train::AdamWConfig{}), in(B * T), tgt(B * T) {
    model.init(1);
    std::mt19937 rng(3);
    for (auto& t : in) t = static_cast<std::int32_t>(rng() % 256);
    for (auto& t : tgt) t = static_cast<std::int32_t>(rng() % 256);
  }
  void step() {
    model.forward_backward(in.data(), tgt.data());
    const auto g = model.grads();
    const double norm = loopscale::train::AdamW<float>::grad_norm(std::span<const float>(g.data(), g.size()));
    opt.step(model.params(), std::span<const float>(g.data(), g.size()), model.tensors(), 1e-3, norm);
    model.update_moe_bias();
  }
};

void BM_model_moe_vs_dense(benchmark::State& st) {
  HB::set_threads(static_cast<int>(st.range(0)));
  Trainee dense(false), moe(true);
  alternate(st, dense, moe, static_cast<double>(Trainee::B * Trainee::T));
  st.counters["dense active"] = static_cast<double>(count_params(model_spec(false)).active);
  st.counters["moe active"] = static_cast<double>(count_params(model_spec(true)).active);
}

}  // namespace

BENCHMARK(BM_model_moe_vs_dense)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseManualTime()->MinTime(5);
BENCHMARK(BM_dense_mlp)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_moe)
    ->Args({1, 0, 0})
    ->Args({2, 0, 0})
    ->Args({2, 1, 0})
    ->Args({2, 0, 125})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_moe_vs_dense)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseManualTime();

BENCHMARK_MAIN();
