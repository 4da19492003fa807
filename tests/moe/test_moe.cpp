// The MoE layer against the naive double reference (forward, in float as trained, and with exact
// ties), against finite differences of the reference objective (backward, in double, over looped
// calls whose statistics are gathered together), the grouping against std::stable_sort, run-to-run
// determinism, the balancing methods on a skewed router, and the parameter count of the accounting.
#include <catch2/catch.hpp>

#include <cstring>

#include "loopscale/account/params.hpp"
#include "loopscale/train/backend/guard.hpp"
#include "moe_reference.hpp"

using namespace loopscale;
using namespace loopscale::test;
using namespace loopscale::train::kernels;
using HB = loopscale::train::HostBackend;

namespace {

// The host backend with a sort of its own, as CUDA has: group_slots then runs its sort form.
struct SortingHost : HB {
  static void sort_pairs(const int32* keys_in, int32* keys_out, const int32* vals_in, int32* vals_out, int64 n, int key_bits) {
    loopscale::train::stable_sort_pairs_host(keys_in, keys_out, vals_in, vals_out, n, key_bits);
  }
};

// Buffers of one layer for R calls of N tokens, allocated once as a model would.
template <class T>
struct Harness {
  MoeShape s;
  int64 N;
  MoeSizes z;
  std::vector<T> av, sv;
  std::vector<int32> ai, si;
  std::vector<MoeActs<T>> acts;
  MoeScratch<T> w;
  MoeStats st;

  Harness(const MoeShape& shape, int64 n, int64 R) : s(shape), N(n), z(moe_sizes(shape, n)), st(shape.experts) {
    validate(s);
    av.assign(z.acts * R, T(0));
    ai.assign(z.acts_index * R, 0);
    sv.assign(z.scratch, T(0));
    si.assign(z.scratch_index, 0);
    for (int64 c = 0; c < R; ++c) acts.push_back(moe_acts<T>(s, N, av.data() + c * z.acts, ai.data() + c * z.acts_index));
    w = moe_scratch<T>(s, N, sv.data(), si.data());
  }
  // Kept flag of every slot (t * K + k), from the grouping.
  std::vector<int> kept_flags(int64 c) const {
    const MoeActs<T>& a = acts[c];
    std::vector<int> f(N * s.top_k, 0);
    for (int64 e = 0; e < s.experts; ++e)
      for (int64 i = 0; i < a.kept[e]; ++i) f[a.order[a.offset[e] + i]] = 1;
    return f;
  }
};

MoeShape make_shape(int64 d, int64 H, int64 E, int64 K, Activation act, RouterKind router, bool renorm, bool shared,
                    Balance bal, double cap) {
  MoeShape s;
  s.d = d, s.hidden = H, s.experts = E, s.top_k = K, s.act = act, s.router = router, s.renormalize = renorm;
  s.shared_expert = shared, s.balance = bal, s.capacity_factor = cap;
  s.aux_coef = 0.05, s.bias_rate = 0.01, s.z_coef = 0.01;
  return s;
}

vecd random_params(const MoeShape& s, std::uint64_t seed) {
  vecd P = randn(moe_param_count(s), seed, 1.0 / std::sqrt(static_cast<double>(s.d)));
  // A wider router spreads the scores, so that near-ties are rare.
  for (int64 i = 0; i < s.experts * s.d; ++i) P[i] *= 3.0;
  return P;
}

double dot(const vecd& a, const vecd& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

const char* act_name(Activation a) { return a == Activation::relu2 ? "relu2" : a == Activation::gelu ? "gelu" : "swiglu"; }

}  // namespace

TEST_CASE("moe: parameter layout totals the accounting's ffn count, bad shapes are rejected", "[moe]") {
  for (Activation act : {Activation::relu2, Activation::gelu, Activation::swiglu})
    for (bool shared : {false, true})
      for (int64 E : {1, 4, 8}) {
        LayerSpec l;
        l.ffn.act = act;
        l.ffn.experts = E;
        l.ffn.top_k = std::min<int64>(2, E);
        l.ffn.shared_expert = shared;
        l.ffn.mult_num = 2;
        const MoeShape s = moe_shape(l.ffn, 256);
        CHECK(moe_param_count(s) == layer_params(l, 256).ffn);
        const MoeParamLayout L = moe_param_layout(s);
        CHECK(L.w1 == E * 256);
        CHECK(L.expert_w2(0) == L.w1 + E * s.in_rows() * 256);
      }
  MoeShape s = make_shape(8, 4, 4, 2, Activation::relu2, RouterKind::softmax, true, false, Balance::none, 0);
  validate(s);
  MoeShape bad = s;
  bad.top_k = 5;
  CHECK_THROWS_AS(validate(bad), spec_error);
  bad = s, bad.experts = 0;
  CHECK_THROWS_AS(validate(bad), spec_error);
  bad = s, bad.capacity_factor = -1;
  CHECK_THROWS_AS(validate(bad), spec_error);
  // Capacity: ceil(factor N K / E), at least 1, at most N.
  s.capacity_factor = 1.25;
  CHECK(s.capacity(100) == 63);
  s.capacity_factor = 100;
  CHECK(s.capacity(100) == 100);
  s.capacity_factor = 0;
  CHECK(s.capacity(100) == 100);
}

TEST_CASE("moe: forward (float) matches the double reference", "[moe]") {
  const auto router = GENERATE(RouterKind::softmax, RouterKind::sigmoid);
  const bool renorm = GENERATE(true, false);
  const auto act = GENERATE(Activation::relu2, Activation::gelu, Activation::swiglu);
  const bool shared = GENERATE(false, true);
  const double cap = GENERATE(0.0, 1.0);
  const auto bal = GENERATE(Balance::aux_loss, Balance::bias);
  const int64 N = 48, d = 16, H = 12, E = 6, K = 2;
  const MoeShape s = make_shape(d, H, E, K, act, router, renorm, shared, bal, cap);
  INFO(act_name(act) << " sigmoid " << (router == RouterKind::sigmoid) << " renorm " << renorm << " shared " << shared
                     << " capacity " << cap << " bias " << (bal == Balance::bias));
  // Inputs whose selection is decided by a clear margin, so float and double choose alike.
  vecd x, P, bias;
  RefMoe ref;
  bool found = false;
  for (std::uint64_t seed = 1; seed < 200 && !found; ++seed) {
    x = randn(N * d, seed * 7 + 1);
    P = random_params(s, seed * 7 + 2);
    bias = randn(E, seed * 7 + 3, 0.05);
    ref = ref_moe(s, N, x, P, &bias);
    found = ref.margin > 1e-3 && (cap == 0 || ref.dropped > 0);
  }
  REQUIRE(found);
  Harness<float> h(s, N, 1);
  auto xf = cast<float>(x), Pf = cast<float>(P), bf = cast<float>(bias);
  std::vector<float> y(N * d, 0.5f);
  const MoeCall call = moe_forward<HB>(s, N, xf.data(), Pf.data(), bf.data(), y.data(), false, h.acts[0], h.w, h.st);
  const MoeActs<float>& a = h.acts[0];
  for (int64 i = 0; i < N * K; ++i) {
    REQUIRE(a.expert[i] == ref.expert[i]);
    REQUIRE(std::abs(a.gates[i] - ref.gates[i]) < 1e-5);
  }
  REQUIRE(h.kept_flags(0) == ref.kept);
  REQUIRE(call.dropped == ref.dropped);
  REQUIRE(max_abs_diff(vecd(y.begin(), y.end()), ref.y) < 2e-5);
  // Statistics: exact counts, probabilities and z-loss to float accuracy.
  for (int64 e = 0; e < E; ++e) {
    REQUIRE(h.st.routed[e] == ref.routed[e]);
    REQUIRE(std::abs(h.st.prob[e] - ref.prob[e]) < 1e-4);
  }
  REQUIRE(std::abs(h.st.zsum - ref.zsum) < 1e-3 * ref.zsum);
  REQUIRE(h.st.drop_rate() == Approx(static_cast<double>(ref.dropped) / (N * K)));
  if (bal == Balance::aux_loss) {
    double acc = 0;
    for (int64 e = 0; e < E; ++e) acc += ref.routed[e] / (N * K) * ref.prob[e] / N;
    REQUIRE(call.balance_loss == Approx(s.aux_coef * E * acc).epsilon(1e-5));
    REQUIRE(h.st.balance_loss(s) == Approx(call.balance_loss).epsilon(1e-12));
  } else {
    REQUIRE(call.balance_loss == 0.0);
  }
  REQUIRE(call.z_loss == Approx(s.z_coef * ref.zsum / N).epsilon(1e-5));
  // accumulate mode adds onto y.
  std::vector<float> y2(N * d, 0.5f);
  moe_forward<HB>(s, N, xf.data(), Pf.data(), bf.data(), y2.data(), true, h.acts[0], h.w, h.st);
  for (int64 i = 0; i < N * d; ++i) REQUIRE(y2[i] == Approx(y[i] + 0.5f).margin(1e-5));
}

TEST_CASE("moe: exact ties in the top-K go to the lower expert index", "[moe]") {
  const auto router = GENERATE(RouterKind::softmax, RouterKind::sigmoid);
  const int64 N = 40, d = 4, H = 6, E = 6, K = 3;
  const MoeShape s = make_shape(d, H, E, K, Activation::relu2, router, true, false, Balance::none, 0.0);
  // Integer inputs and router rows: the logits are exact small integers, so equal logits are equal
  // bit for bit in float, and distinct ones differ by at least 1.
  std::mt19937_64 g(11);
  std::uniform_int_distribution<int> pick(-1, 1);
  vecd x(N * d), P = random_params(s, 12);
  for (double& v : x) v = pick(g);
  for (int64 j = 0; j < d; ++j) x[j] = 0;  // token 0: every logit 0, every expert tied
  for (int64 i = 0; i < E * d; ++i) P[i] = pick(g);
  for (int64 j = 0; j < d; ++j) P[3 * d + j] = P[1 * d + j];  // experts 1 and 3 always tie
  const RefMoe ref = ref_moe(s, N, x, P, nullptr);
  REQUIRE(ref.margin == 0.0);  // the test does contain ties
  Harness<float> h(s, N, 1);
  auto xf = cast<float>(x), Pf = cast<float>(P);
  std::vector<float> y(N * d);
  moe_forward<HB>(s, N, xf.data(), Pf.data(), static_cast<const float*>(nullptr), y.data(), false, h.acts[0], h.w, h.st);
  for (int64 i = 0; i < N * K; ++i) REQUIRE(h.acts[0].expert[i] == ref.expert[i]);
  for (int64 k = 0; k < K; ++k) REQUIRE(h.acts[0].expert[k] == k);
  int both = 0;
  for (int64 t = 0; t < N; ++t) {
    const int32* sel = h.acts[0].expert + t * K;
    const bool has1 = std::find(sel, sel + K, 1) != sel + K, has3 = std::find(sel, sel + K, 3) != sel + K;
    REQUIRE((!has3 || has1));  // 3 never wins over its twin 1
    both += has1 && !has3;
  }
  REQUIRE(both > 0);
  REQUIRE(max_abs_diff(vecd(y.begin(), y.end()), ref.y) < 1e-4);
}

TEST_CASE("moe: gradients match finite differences of the reference, over looped calls", "[moe]") {
  const auto router = GENERATE(RouterKind::softmax, RouterKind::sigmoid);
  const bool renorm = GENERATE(true, false);
  const auto act = GENERATE(Activation::relu2, Activation::gelu, Activation::swiglu);
  const bool shared = GENERATE(false, true);
  const int64 R = GENERATE(1, 3);
  // Capacity dropping in half of the cases; the aux loss and the z-loss always in the objective,
  // except with the bias method, which replaces the aux loss.
  const double cap = renorm == (R == 1) ? 1.0 : 0.0;
  const Balance bal = (shared && R == 3) ? Balance::bias : Balance::aux_loss;
  const int64 N = 10, d = 6, H = 4, E = 4, K = 2;
  const MoeShape s = make_shape(d, H, E, K, act, router, renorm, shared, bal, cap);
  INFO(act_name(act) << " sigmoid " << (router == RouterKind::sigmoid) << " renorm " << renorm << " shared " << shared
                     << " capacity " << cap << " R " << R << " bias " << (bal == Balance::bias));
  vecd x, P, bias;
  std::vector<vecd> w;
  bool found = false;
  for (std::uint64_t seed = 1; seed < 400 && !found; ++seed) {
    x = randn(N * d, seed * 11 + 1);
    P = random_params(s, seed * 11 + 2);
    // Smaller experts keep the residual chain x + y from growing over R calls (relu2 is cubic in
    // the weights), so that rounding in the objective stays far below the tolerance.
    for (std::size_t i = E * d; i < P.size(); ++i) P[i] *= 0.6;
    bias = randn(E, seed * 11 + 3, 0.1);
    w.clear();
    for (int64 c = 0; c < R; ++c) w.push_back(randn(N * d, seed * 11 + 4 + c));
    const RefChain rc = ref_chain(s, N, x, P, &bias, w);
    // A selection margin far above the finite-difference step keeps the routing fixed, and relu2
    // pre-activations away from 0 keep the second derivative continuous under the perturbation.
    found = rc.margin > 2e-3 && rc.kink > 1e-3 && std::abs(rc.objective) < 100 && (cap == 0 || rc.dropped > 0);
  }
  REQUIRE(found);

  // Analytic: R forwards, then R backwards in reverse with the step's statistics.
  Harness<double> h(s, N, R);
  std::vector<vecd> xs(R + 1, vecd(N * d)), ys(R, vecd(N * d));
  xs[0] = x;
  for (int64 c = 0; c < R; ++c) {
    moe_forward<HB>(s, N, xs[c].data(), P.data(), bias.data(), ys[c].data(), false, h.acts[c], h.w, h.st);
    for (int64 i = 0; i < N * d; ++i) xs[c + 1][i] = xs[c][i] + ys[c][i];
  }
  const RefChain base = ref_chain(s, N, x, P, &bias, w);
  double total = 0;
  for (int64 c = 0; c < R; ++c) total += dot(w[c], ys[c]);
  total += h.st.balance_loss(s) + h.st.z_loss(s);
  REQUIRE(total == Approx(base.objective).epsilon(1e-10));
  vecd G(P.size(), 0.0), gx(N * d, 0.0), dy(N * d), dx(N * d);
  for (int64 c = R - 1; c >= 0; --c) {
    for (int64 i = 0; i < N * d; ++i) dy[i] = w[c][i] + gx[i];
    moe_backward<HB>(s, N, xs[c].data(), P.data(), h.acts[c], h.st, dy.data(), dx.data(), G.data(), h.w);
    for (int64 i = 0; i < N * d; ++i) gx[i] += dx[i];
  }
  const auto f = [&] { return ref_chain(s, N, x, P, &bias, w).objective; };
  const auto check = [&](vecd& v, const vecd& grad, int64 lo, int64 hi, const char* what) {
    for (int64 i = lo; i < hi; ++i) {
      const double fd = finite_diff(f, v[i]);
      INFO(what << " index " << i << " analytic " << grad[i] << " numeric " << fd);
      REQUIRE(close(grad[i], fd, 1e-5, 1e-8));
    }
  };
  check(x, gx, 0, N * d, "dx");
  const MoeParamLayout L = moe_param_layout(s);
  check(P, G, L.router, L.w1, "router");
  check(P, G, L.w1, L.w2, "expert W1");
  check(P, G, L.w2, L.shared_w1, "expert W2");
  check(P, G, L.shared_w1, L.total, "shared expert");
  // The router gradient is not all gate: without the aux and z terms it changes.
  if (!shared && R == 1) {
    MoeShape plain = s;
    plain.balance = Balance::none;
    plain.z_coef = 0;
    Harness<double> h2(plain, N, 1);
    vecd y2(N * d), G2(P.size(), 0.0);
    moe_forward<HB>(plain, N, x.data(), P.data(), bias.data(), y2.data(), false, h2.acts[0], h2.w, h2.st);
    moe_backward<HB>(plain, N, x.data(), P.data(), h2.acts[0], h2.st, w[0].data(), dx.data(), G2.data(), h2.w);
    double diff = 0;
    for (int64 i = L.router; i < L.w1; ++i) diff = std::max(diff, std::abs(G2[i] - G[i]));
    REQUIRE(diff > 1e-6);
  }
}

TEST_CASE("moe: grouping is a stable sort of the slots by expert", "[moe]") {
  struct Case {
    int64 N, K, E;
    double cap;
  };
  for (const Case c : {Case{50, 1, 1, 0.0}, Case{7, 1, 3, 0.0}, Case{1000, 2, 8, 0.0}, Case{3001, 3, 7, 0.0}, Case{2500, 2, 8, 1.0},
                       Case{4096, 2, 8, 1.25}, Case{513, 4, 4, 0.5}}) {
    INFO("N " << c.N << " K " << c.K << " E " << c.E << " capacity " << c.cap);
    std::mt19937_64 g(c.N * 31 + c.K);
    // Random routing with a skew toward low experts; each token picks distinct experts.
    std::vector<int32> expert(c.N * c.K);
    for (int64 t = 0; t < c.N; ++t) {
      std::vector<int32> perm(c.E);
      std::iota(perm.begin(), perm.end(), 0);
      for (int64 k = 0; k < c.K; ++k) {
        const int64 j = k + static_cast<int64>(std::pow(std::uniform_real_distribution<double>(0, 1)(g), 2.0) * (c.E - k));
        std::swap(perm[k], perm[std::min(j, c.E - 1)]);
        expert[t * c.K + k] = perm[k];
      }
    }
    MoeShape s;
    s.experts = c.E, s.top_k = c.K, s.capacity_factor = c.cap;
    const int64 S = c.N * c.K, C = s.capacity(c.N);
    // The host's counting sort, and the sort form a GPU runs (SortingHost), must give the same.
    for (const bool sorting : {false, true}) {
      INFO((sorting ? "the backend's sort" : "the counting sort"));
      std::vector<int32> order(S, -1), pos(S, -1), offset(c.E + 1), kept(c.E), hist(moe_group_scratch(c.E, S), -7);
      const auto group = [&]<class Backend>() {
        group_slots<Backend>(c.N, c.K, c.E, C, expert.data(), order.data(), pos.data(), offset.data(), kept.data(), hist.data());
      };
      if (sorting) group.template operator()<SortingHost>();
      else group.template operator()<HB>();
      // Reference: priority positions j = k N + t, stably sorted by expert.
      std::vector<int32> ref(S);
      for (int64 j = 0; j < S; ++j) ref[j] = static_cast<int32>((j % c.N) * c.K + j / c.N);
      std::stable_sort(ref.begin(), ref.end(), [&](int32 a, int32 b) { return expert[a] < expert[b]; });
      REQUIRE(order == ref);
      std::vector<int> seen(S, 0);
      for (int32 v : order) ++seen[v];
      REQUIRE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
      for (int64 i = 0; i < S; ++i) REQUIRE(pos[order[i]] == i);
      REQUIRE(offset[0] == 0);
      REQUIRE(offset[c.E] == S);
      for (int64 e = 0; e < c.E; ++e) {
        const int64 n = std::count(expert.begin(), expert.end(), static_cast<int32>(e));
        REQUIRE(offset[e + 1] - offset[e] == n);
        REQUIRE(kept[e] == std::min(n, C));
        for (int64 i = offset[e]; i < offset[e + 1]; ++i) REQUIRE(expert[order[i]] == e);
      }
      if (c.cap > 0 && c.cap < 1.5) {
        int64 dropped = 0;
        for (int64 e = 0; e < c.E; ++e) dropped += offset[e + 1] - offset[e] - kept[e];
        REQUIRE(dropped > 0);  // the skew overloads the low experts
      }
    }
  }
}

TEST_CASE("moe: same inputs and threads give bit-identical outputs and gradients", "[moe]") {
  HB::set_threads(2);
  const int64 N = 1024, d = 64, H = 96, E = 8, K = 2;
  MoeShape s = make_shape(d, H, E, K, Activation::swiglu, RouterKind::sigmoid, true, true, Balance::aux_loss, 1.0);
  const auto x = cast<float>(randn(N * d, 21)), P = cast<float>(random_params(s, 22)), dy = cast<float>(randn(N * d, 23));
  const auto run = [&](std::vector<float>& y, std::vector<float>& dx, std::vector<float>& G, MoeCall& call) {
    Harness<float> h(s, N, 1);
    y.assign(N * d, 0.f), dx.assign(N * d, 0.f), G.assign(P.size(), 0.f);
    call = moe_forward<HB>(s, N, x.data(), P.data(), static_cast<const float*>(nullptr), y.data(), false, h.acts[0], h.w,
                           h.st);
    moe_backward<HB>(s, N, x.data(), P.data(), h.acts[0], h.st, dy.data(), dx.data(), G.data(), h.w);
  };
  std::vector<float> y1, dx1, G1, y2, dx2, G2;
  MoeCall c1, c2;
  run(y1, dx1, G1, c1);
  run(y2, dx2, G2, c2);
  REQUIRE(c1.dropped > 0);
  REQUIRE(std::memcmp(y1.data(), y2.data(), y1.size() * sizeof(float)) == 0);
  REQUIRE(std::memcmp(dx1.data(), dx2.data(), dx1.size() * sizeof(float)) == 0);
  REQUIRE(std::memcmp(G1.data(), G2.data(), G1.size() * sizeof(float)) == 0);
  REQUIRE(std::memcmp(&c1.balance_loss, &c2.balance_loss, sizeof(double)) == 0);
  REQUIRE(std::memcmp(&c1.z_loss, &c2.z_loss, sizeof(double)) == 0);
  HB::set_threads(0);
}

namespace {
// A router that sends most tokens to expert 0: every input has a constant component along
// dimension 0 and router row 0 (and 1, less so) reads it.
struct Skewed {
  int64 N = 512, d = 16, H = 8, E = 8, K = 2;
  std::vector<double> x, P;
  explicit Skewed(const MoeShape& s) {
    x = randn(N * d, 31);
    for (int64 t = 0; t < N; ++t) x[t * d] += 2.0;
    P = randn(moe_param_count(s), 32, 0.3);
    P[0 * d] = 3.0;
    P[1 * d] = 1.5;
  }
};
}  // namespace

TEST_CASE("moe: the Switch aux loss gradient moves load toward uniform", "[moe]") {
  const auto router = GENERATE(RouterKind::softmax, RouterKind::sigmoid);
  MoeShape s = make_shape(16, 8, 8, 2, Activation::relu2, router, true, false, Balance::aux_loss, 0.0);
  s.aux_coef = 1.0;
  s.z_coef = 0.0;
  Skewed k(s);
  Harness<double> h(s, k.N, 1);
  vecd y(k.N * k.d), dx(k.N * k.d), zero(k.N * k.d, 0.0), G(k.P.size());
  const auto step = [&] {
    h.st.reset();
    moe_forward<HB>(s, k.N, k.x.data(), k.P.data(), static_cast<const double*>(nullptr), y.data(), false, h.acts[0], h.w,
                    h.st);
  };
  step();
  const double ratio0 = h.st.max_min_ratio(), loss0 = h.st.balance_loss(s), load0 = h.st.load(0);
  INFO("initial max/min load " << ratio0 << " load of expert 0 " << load0);
  REQUIRE(load0 > 0.3);  // the skew is real
  // Gradient descent on the router alone, with the aux loss as the only objective (dy = 0).
  for (int it = 0; it < 300; ++it) {
    std::fill(G.begin(), G.end(), 0.0);
    moe_backward<HB>(s, k.N, k.x.data(), k.P.data(), h.acts[0], h.st, zero.data(), dx.data(), G.data(), h.w);
    for (int64 i = 0; i < s.experts * s.d; ++i) k.P[i] -= (router == RouterKind::softmax ? 0.5 : 5.0) * G[i];
    step();
  }
  INFO("final max/min load " << h.st.max_min_ratio() << " balance loss " << loss0 << " -> " << h.st.balance_loss(s));
  REQUIRE(h.st.balance_loss(s) < loss0);
  REQUIRE(h.st.load(0) < load0 / 2);
  REQUIRE(h.st.max_min_ratio() < 2.0);
}

TEST_CASE("moe: the aux-loss-free bias moves load toward uniform, outside the gradient", "[moe]") {
  const auto router = GENERATE(RouterKind::softmax, RouterKind::sigmoid);
  MoeShape s = make_shape(16, 8, 8, 2, Activation::relu2, router, true, false, Balance::bias, 0.0);
  s.bias_rate = 0.005;
  s.z_coef = 0.0;
  Skewed k(s);
  Harness<double> h(s, k.N, 1);
  vecd y(k.N * k.d), bias(s.experts, 0.0);
  const auto step = [&] {
    h.st.reset();
    moe_forward<HB>(s, k.N, k.x.data(), k.P.data(), bias.data(), y.data(), false, h.acts[0], h.w, h.st);
  };
  step();
  const double ratio0 = h.st.max_min_ratio(), load0 = h.st.load(0);
  REQUIRE(load0 > 0.3);
  REQUIRE(ratio0 > 10);
  // A fixed-size sign step oscillates around the balance point (by one step of every bias), so
  // the load is judged over the last 300 steps. With this skew the softmax scores of experts 2..7
  // are nearly equal and tiny, the bias alone decides among them, and they take turns: balanced
  // on average, not step by step. The sigmoid scores keep them apart and settle step by step.
  MoeStats tail(s.experts);
  double last = 0;
  for (int it = 0; it < 1000; ++it) {
    moe_update_bias(s, h.st, bias.data());
    step();
    if (it >= 700)
      for (int64 e = 0; e < s.experts; ++e) tail.routed[e] += h.st.routed[e];
    last = h.st.max_min_ratio();
  }
  INFO("max/min load " << ratio0 << " -> last " << last << ", over the last 300 steps " << tail.max_min_ratio()
                       << ", bias of expert 0 " << bias[0]);
  REQUIRE(tail.max_min_ratio() < 2.0);
  if (router == RouterKind::sigmoid) REQUIRE(last < 1.5);
  // The bias changes only the choice: a token routed to the same experts as without the bias has
  // exactly the same gates.
  Harness<double> h0(s, k.N, 1);
  const vecd nobias(s.experts, 0.0);
  moe_forward<HB>(s, k.N, k.x.data(), k.P.data(), nobias.data(), y.data(), false, h0.acts[0], h0.w, h0.st);
  int64 same = 0;
  for (int64 t = 0; t < k.N; ++t) {
    const int64 K = s.top_k;
    if (!std::equal(h.acts[0].expert + t * K, h.acts[0].expert + (t + 1) * K, h0.acts[0].expert + t * K)) continue;
    ++same;
    for (int64 j = 0; j < K; ++j) REQUIRE(h.acts[0].gates[t * K + j] == h0.acts[0].gates[t * K + j]);
  }
  REQUIRE(same > 0);
  REQUIRE(same < k.N);
  // With another method the update is a no-op.
  MoeShape aux = s;
  aux.balance = Balance::aux_loss;
  const vecd before = bias;
  moe_update_bias(aux, h.st, bias.data());
  REQUIRE(bias == before);
}

TEST_CASE("moe: the buffers carved from moe_sizes fill them exactly", "[moe]") {
  for (const bool shared : {false, true})
    for (const auto act : {Activation::relu2, Activation::swiglu})
      for (const int64 N : {1, 300, 4096}) {
        const MoeShape s = make_shape(32, 24, 8, 3, act, RouterKind::softmax, true, shared, Balance::none, 0.0);
        const MoeSizes z = moe_sizes(s, N);
        std::vector<float> v(z.acts), sv(z.scratch);
        std::vector<int32> iv(z.acts_index), siv(z.scratch_index);
        const MoeActs<float> a = moe_acts<float>(s, N, v.data(), iv.data());
        const float* end = shared ? a.shared_hact + N * s.hidden : a.hact + N * s.top_k * s.hidden;
        CHECK(end == v.data() + z.acts);
        CHECK(a.kept + s.experts == iv.data() + z.acts_index);
        const MoeScratch<float> w = moe_scratch<float>(s, N, sv.data(), siv.data());
        CHECK(w.dgate + N * s.top_k == sv.data() + z.scratch);
        CHECK(w.tasks + 3 * moe_max_row_tasks(s.experts, N * s.top_k) == siv.data() + z.scratch_index);
      }
}

TEST_CASE("moe: several row tasks per expert and several weight panels, against the reference", "[moe]") {
  // 700 tokens over 3 experts: every expert has more than one 256-row task; H1 = 160 and d = 72
  // give dW1 and dW2 three and two 64-row panels.
  const int64 N = 700, d = 72, H = 80, E = 3, K = 2;
  const MoeShape s = make_shape(d, H, E, K, Activation::swiglu, RouterKind::softmax, true, true, Balance::aux_loss, 0.9);
  vecd x, P, w;
  RefChain rc;
  bool found = false;
  for (std::uint64_t seed = 1; seed < 100 && !found; ++seed) {
    x = randn(N * d, seed * 5 + 1), P = random_params(s, seed * 5 + 2), w = randn(N * d, seed * 5 + 3);
    for (int64 i = 0; i < E * d; ++i) P[i] /= 3;  // moderate scores: with 3 experts, few near-ties
    rc = ref_chain(s, N, x, P, nullptr, {w});
    found = rc.margin > 1e-4 && rc.dropped > 0;
  }
  REQUIRE(found);
  Harness<double> h(s, N, 1);
  vecd y(N * d), dx(N * d), G(P.size(), 0.0);
  moe_forward<HB>(s, N, x.data(), P.data(), static_cast<const double*>(nullptr), y.data(), false, h.acts[0], h.w, h.st);
  for (int64 e = 0; e < E; ++e) REQUIRE(h.acts[0].kept[e] > moe_row_chunk);
  REQUIRE(max_abs_diff(y, rc.calls[0].y) < 1e-10);
  moe_backward<HB>(s, N, x.data(), P.data(), h.acts[0], h.st, w.data(), dx.data(), G.data(), h.w);
  // Finite differences on a random sample of the inputs and of every parameter block.
  const auto f = [&] { return ref_chain(s, N, x, P, nullptr, {w}).objective; };
  const MoeParamLayout L = moe_param_layout(s);
  std::mt19937_64 g(5);
  const auto sample = [&](vecd& v, const vecd& grad, int64 lo, int64 hi, const char* what) {
    for (int n = 0; n < 12; ++n) {
      const int64 i = lo + static_cast<int64>(g() % static_cast<std::uint64_t>(hi - lo));
      const double fd = finite_diff(f, v[i]);
      INFO(what << " index " << i << " analytic " << grad[i] << " numeric " << fd);
      REQUIRE(close(grad[i], fd, 1e-5, 1e-8));
    }
  };
  sample(x, dx, 0, N * d, "dx");
  sample(P, G, L.router, L.w1, "router");
  for (int64 e = 0; e < E; ++e) {
    sample(P, G, L.expert_w1(e), L.expert_w1(e) + L.w1_size, "expert W1");
    sample(P, G, L.expert_w2(e), L.expert_w2(e) + L.w2_size, "expert W2");
  }
  sample(P, G, L.shared_w1, L.total, "shared expert");
}

TEST_CASE("moe: one expert with top-1 is the dense MLP", "[moe]") {
  const int64 N = 600, d = 32, H = 48;
  const auto act = GENERATE(Activation::relu2, Activation::swiglu);
  const MoeShape s = make_shape(d, H, 1, 1, act, RouterKind::softmax, true, false, Balance::none, 0.0);
  const auto x = cast<float>(randn(N * d, 41)), P = cast<float>(random_params(s, 42));
  Harness<float> h(s, N, 1);
  std::vector<float> y(N * d), yd(N * d), hpre(N * s.in_rows()), hact(N * H);
  moe_forward<HB>(s, N, x.data(), P.data(), static_cast<const float*>(nullptr), y.data(), false, h.acts[0], h.w, h.st);
  const MoeParamLayout L = moe_param_layout(s);
  mlp_forward<HB>(x.data(), P.data() + L.expert_w1(0), P.data() + L.expert_w2(0), hpre.data(), hact.data(), yd.data(),
                  {N, d, H, act}, false);
  for (int64 i = 0; i < N; ++i) REQUIRE(h.acts[0].gates[i] == 1.0f);
  REQUIRE(max_abs_diff(vecd(y.begin(), y.end()), vecd(yd.begin(), yd.end())) < 1e-5);
  REQUIRE(h.st.load(0) == 1.0);
}
