// Every kernel against its naive double reference (forward, in float as trained) and against
// finite differences (backward, in double): L = sum(w * y) with random w, so dy = w.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "loopscale/train/kernels/attention.hpp"
#include "loopscale/train/kernels/embedding.hpp"
#include "loopscale/train/kernels/inject.hpp"
#include "loopscale/train/kernels/loss.hpp"
#include "loopscale/train/kernels/mlp.hpp"
#include "loopscale/train/kernels/rmsnorm.hpp"
#include "loopscale/train/kernels/rope.hpp"
#include "loopscale/train/kernels/row_math.hpp"
#include "reference.hpp"

using namespace loopscale;
using namespace loopscale::test;
using namespace loopscale::train::kernels;
using HB = loopscale::train::HostBackend;

namespace {

double dot(const vecd& a, const vecd& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Checks analytic gradients `grad` of f with respect to the values in `x` at every index.
void check_all(const std::function<double()>& f, vecd& x, const vecd& grad, const char* what) {
  INFO(what);
  REQUIRE(x.size() == grad.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double fd = finite_diff(f, x[i]);
    INFO("index " << i << " analytic " << grad[i] << " numeric " << fd);
    REQUIRE(close(grad[i], fd, 1e-6, 1e-8));
  }
}

}  // namespace

TEST_CASE("linear: forward matches the reference, gradients match finite differences", "[train][kernels]") {
  const int64 rows = 5, in = 7, out = 6;
  vecd x = randn(rows * in, 1), W = randn(out * in, 2), w = randn(rows * out, 3);
  auto xf = cast<float>(x), Wf = cast<float>(W);
  std::vector<float> yf(rows * out);
  linear_forward<HB>(xf.data(), Wf.data(), yf.data(), rows, in, out);
  REQUIRE(max_abs_diff(vecd(yf.begin(), yf.end()), ref_linear(x, W, rows, in, out)) < 1e-5);
  vecd dx(x.size()), dW(W.size(), 0.0);
  linear_backward<HB>(x.data(), W.data(), w.data(), dx.data(), dW.data(), rows, in, out);
  const auto f = [&] { return dot(ref_linear(x, W, rows, in, out), w); };
  check_all(f, x, dx, "dx");
  check_all(f, W, dW, "dW");
}

TEST_CASE("row math: sums, dot products, max and exp against double, the same bits wherever the row sits, NaN kept",
          "[train][kernels]") {
  const auto v = cast<float>(randn(1200, 21));
  for (const int64 n : {1, 3, 15, 16, 17, 33, 128, 255, 256, 257}) {
    for (const int64 off : {0, 1, 5, 16}) {
      INFO("n " << n << ", offset " << off);
      const float* a = v.data() + off;
      const float* b = v.data() + 400 + off;
      const float* c = v.data() + 800 + off;
      double ss = 0, ab = 0, abc = 0, mx = -1e300;
      for (int64 j = 0; j < n; ++j) {
        ss += double(a[j]) * a[j];
        ab += double(a[j]) * b[j];
        abc += double(a[j]) * b[j] * c[j];
        mx = std::max(mx, double(a[j]));
      }
      CHECK(row_sum_squares(a, n) == Approx(ss).epsilon(1e-5));
      CHECK(row_dot(a, b, n) == Approx(ab).margin(1e-5 * n));
      CHECK(row_dot3(a, b, c, n) == Approx(abc).margin(1e-5 * n));
      CHECK(row_max(a, n) == float(mx));
      std::vector<float> e(a, a + n);
      const float sum = row_exp_shifted(e.data(), n, float(mx));
      double es = 0;
      for (int64 j = 0; j < n; ++j) {
        const double want = std::exp(double(a[j]) - mx);
        es += want;
        CHECK(e[j] == Approx(want).epsilon(1e-6).margin(1e-30));
      }
      CHECK(sum == Approx(es).epsilon(1e-6));
      // The same values at another address: the same bits (the guard backend's buffers are
      // placed differently from the host's, and its results must be the host's).
      std::vector<float> moved(n + 3);
      std::copy(a, a + n, moved.begin() + 3);
      CHECK(row_sum_squares(moved.data() + 3, n) == row_sum_squares(a, n));
      CHECK(row_dot(moved.data() + 3, b, n) == row_dot(a, b, n));
      std::vector<float> e2(moved.begin() + 3, moved.end());
      CHECK(row_exp_shifted(e2.data(), n, float(mx)) == sum);
      CHECK(e2 == e);
    }
  }
  // A NaN anywhere in a row makes its max, its sums and its softmax NaN.
  for (const int64 at : {0, 7, 16, 38}) {
    std::vector<float> r(40, 0.5f);
    r[at] = std::numeric_limits<float>::quiet_NaN();
    CHECK(std::isnan(row_max(r.data(), 40)));
    CHECK(std::isnan(row_sum_squares(r.data(), 40)));
    CHECK(std::isnan(row_exp_shifted(r.data(), 40, 0.5f)));
    std::vector<float> row(40, 0.5f);
    row[at] = std::numeric_limits<float>::quiet_NaN();
    causal_softmax_row(row.data(), 39, 40);
    CHECK(std::isnan(row[0]));
  }
}

TEST_CASE("rmsnorm: forward and backward, with and without a scale", "[train][kernels]") {
  const int64 rows = 4, d = 9;
  vecd x = randn(rows * d, 4), g = randn(d, 5), w = randn(rows * d, 6);
  auto xf = cast<float>(x), gf = cast<float>(g);
  std::vector<float> yf(rows * d), rf(rows);
  rmsnorm_forward<HB>(xf.data(), gf.data(), yf.data(), rf.data(), rows, d);
  REQUIRE(max_abs_diff(vecd(yf.begin(), yf.end()), ref_rmsnorm(x, g.data(), rows, d)) < 1e-5);
  // With a copy of x written in the same pass: the same y, and the copy equal to x.
  std::vector<float> yc(rows * d), rc(rows), xc(rows * d, -1.0f);
  rmsnorm_forward<HB>(xf.data(), gf.data(), yc.data(), rc.data(), rows, d, xc.data());
  REQUIRE(yc == yf);
  REQUIRE(rc == rf);
  REQUIRE(xc == xf);
  vecd y(rows * d), r(rows), dx(rows * d, 0.5), dg(d, 0.0);
  rmsnorm_forward<HB>(x.data(), g.data(), y.data(), r.data(), rows, d);
  const vecd dx0 = dx;
  rmsnorm_backward<HB>(x.data(), g.data(), r.data(), w.data(), dx.data(), dg.data(), rows, d, true);
  for (std::size_t i = 0; i < dx.size(); ++i) dx[i] -= dx0[i];  // accumulate mode added to 0.5
  const auto f = [&] { return dot(ref_rmsnorm(x, g.data(), rows, d), w); };
  check_all(f, x, dx, "dx");
  check_all(f, g, dg, "dg");
  // Parameter-free, strided, backward from the output (QK-norm), in place.
  const int64 heads = 3, q = 4, stride = 14;
  vecd xs = randn(rows * stride, 7), ws = randn(rows * stride, 8);
  for (int64 i = 0; i < rows; ++i)
    for (int64 j = heads * q; j < stride; ++j) ws[i * stride + j] = 0;  // columns outside the heads
  vecd ys(xs.size(), 0.0), rs(rows * heads);
  rmsnorm_forward_strided<HB>(xs.data(), ys.data(), rs.data(), rows, q, stride, heads);
  vecd gs = ws;
  rmsnorm_backward_from_output<HB>(ys.data(), rs.data(), gs.data(), gs.data(), rows, q, stride, heads);
  const auto fs = [&] {
    vecd y2(xs.size(), 0.0), r2(rows * heads);
    rmsnorm_forward_strided<HB>(xs.data(), y2.data(), r2.data(), rows, q, stride, heads);
    return dot(y2, ws);
  };
  for (int64 i = 0; i < rows; ++i)
    for (int64 j = heads * q; j < stride; ++j) gs[i * stride + j] = 0;
  check_all(fs, xs, gs, "qk-norm dx");
}

TEST_CASE("rope: matches the reference and its backward is the inverse rotation", "[train][kernels]") {
  const int64 seq = 5, rows = 10, heads = 2, q = 6, stride = 15;
  vecd x = randn(rows * stride, 9), w = randn(rows * stride, 10);
  std::vector<float> c(seq * q / 2), s(seq * q / 2);
  rope_tables(seq, q, c.data(), s.data());
  auto xf = cast<float>(x);
  rope_apply<HB>(xf.data(), c.data(), s.data(), rows, seq, heads, q, stride, false);
  REQUIRE(max_abs_diff(vecd(xf.begin(), xf.end()), ref_rope(x, rows, seq, heads, q, stride)) < 1e-5);
  vecd cd(seq * q / 2), sd(seq * q / 2);
  rope_tables(seq, q, cd.data(), sd.data());
  vecd g = w;
  rope_apply<HB>(g.data(), cd.data(), sd.data(), rows, seq, heads, q, stride, true);
  check_all([&] { return dot(ref_rope(x, rows, seq, heads, q, stride), w); }, x, g, "dx");
}

namespace {
struct DeviceFormSpans : HB {  // the device form of for_row_spans: one task per value
  static constexpr bool nested_gemm = false;
};
}  // namespace

TEST_CASE("rope: from a source row into another, the values after the heads copied in the same pass", "[train][kernels]") {
  const int64 seq = 5, rows = 10, heads = 2, q = 6, stride = 15;
  const auto x = cast<float>(randn(rows * stride, 11));
  std::vector<float> c(seq * q / 2), s(seq * q / 2);
  rope_tables(seq, q, c.data(), s.data());
  std::vector<float> in_place = x;
  rope_apply<HB>(in_place.data(), c.data(), s.data(), rows, seq, heads, q, stride, false);
  const auto run = [&]<class Backend>(Backend) {
    std::vector<float> out(x.size(), -7.0f);
    rope_apply<Backend>(x.data(), out.data(), c.data(), s.data(), rows, seq, heads, q, stride, false, true);
    return out;
  };
  // Rotated heads as in place, the V values (columns heads q .. stride) equal to the source's.
  REQUIRE(run(HB{}) == in_place);
  REQUIRE(run(DeviceFormSpans{}) == in_place);
  // Without copy_rest the values after the heads are left alone.
  std::vector<float> out(x.size(), -7.0f);
  rope_apply<HB>(x.data(), out.data(), c.data(), s.data(), rows, seq, heads, q, stride, false, false);
  for (int64 i = 0; i < rows; ++i)
    for (int64 j = 0; j < stride; ++j) REQUIRE(out[i * stride + j] == (j < heads * q ? in_place[i * stride + j] : -7.0f));
}

namespace {
// The host backend with the device form of attention (batched GEMMs issued from the host, the
// softmax element-wise) over plain host memory, so that form meets the same finite differences.
struct DeviceFormHost : HB {
  static constexpr bool nested_gemm = false;
};

template <class B>
void check_attention(const AttentionShape& sh, const char* what) {
  INFO(what << ", " << (B::nested_gemm ? "task form" : "device form"));
  const int64 N = sh.batch * sh.seq;
  vecd qkv = randn(N * sh.row(), 11 + sh.kv_heads), w = randn(N * sh.out_row(), 12);
  auto qf = cast<float>(qkv);
  std::vector<float> Pf(sh.probs()), of(N * sh.out_row());
  attention_forward<B>(qf.data(), Pf.data(), of.data(), sh);
  const vecd ref = ref_attention(qkv, sh.batch, sh.seq, sh.heads, sh.kv_heads, sh.head_dim);
  REQUIRE(max_abs_diff(vecd(of.begin(), of.end()), ref) < 1e-5);
  vecd P(sh.probs()), o(N * sh.out_row()), dqkv(qkv.size());
  vecd scratch(sh.seq * sh.seq * attention_scratch_matrices<B>(sh.batch, B::threads()));
  attention_forward<B>(qkv.data(), P.data(), o.data(), sh);
  attention_backward<B>(qkv.data(), P.data(), w.data(), dqkv.data(), scratch.data(), sh);
  check_all([&] { return dot(ref_attention(qkv, sh.batch, sh.seq, sh.heads, sh.kv_heads, sh.head_dim), w); }, qkv, dqkv, what);
}
}  // namespace

TEST_CASE("attention: causal softmax attention with grouped KV heads", "[train][kernels]") {
  static_assert(!DeviceFormHost::nested_gemm);
  for (int64 kv : {2, 1}) {
    const AttentionShape sh{2, 5, 2, kv, 4};
    check_attention<HB>(sh, kv == 1 ? "grouped dqkv" : "dqkv");
    check_attention<DeviceFormHost>(sh, kv == 1 ? "grouped dqkv" : "dqkv");
  }
  // Four query heads in two groups over three sequences: the device form's per-head batches.
  check_attention<HB>({3, 4, 4, 2, 2}, "4 heads, 2 KV heads, 3 sequences");
  check_attention<DeviceFormHost>({3, 4, 4, 2, 2}, "4 heads, 2 KV heads, 3 sequences");
}

TEST_CASE("attention: the task form's causal tiling equals the untiled device form past one block", "[train][kernels]") {
  // Three row blocks, the last one partial: the task form (the host's) skips the masked triangle
  // block by block, the device form multiplies whole T x T matrices; in double they agree to
  // rounding, and the forward matches the reference.
  const AttentionShape sh{2, 2 * causal_block_rows + 37, 2, 1, 3};
  const int64 N = sh.batch * sh.seq;
  const vecd qkv = randn(N * sh.row(), 31), w = randn(N * sh.out_row(), 32);
  vecd P1(sh.probs()), o1(N * sh.out_row()), d1(qkv.size()), P2(P1.size()), o2(o1.size()), d2(qkv.size());
  vecd s1(sh.seq * sh.seq * attention_scratch_matrices<HB>(sh.batch, HB::threads()));
  vecd s2(sh.seq * sh.seq * attention_scratch_matrices<DeviceFormHost>(sh.batch, DeviceFormHost::threads()));
  attention_forward<HB>(qkv.data(), P1.data(), o1.data(), sh);
  attention_forward<DeviceFormHost>(qkv.data(), P2.data(), o2.data(), sh);
  CHECK(max_abs_diff(o1, ref_attention(qkv, sh.batch, sh.seq, sh.heads, sh.kv_heads, sh.head_dim)) < 1e-12);
  CHECK(max_abs_diff(P1, P2) < 1e-14);  // the masked triangle included: zeros in both
  attention_backward<HB>(qkv.data(), P1.data(), w.data(), d1.data(), s1.data(), sh);
  attention_backward<DeviceFormHost>(qkv.data(), P2.data(), w.data(), d2.data(), s2.data(), sh);
  CHECK(max_abs_diff(d1, d2) < 1e-12);
  CHECK(max_abs_diff(d1, vecd(d1.size(), 0.0)) > 1e-3);  // a real gradient
}

TEST_CASE("mlp: relu2, gelu and swiglu", "[train][kernels]") {
  for (Activation a : {Activation::relu2, Activation::gelu, Activation::swiglu}) {
    INFO(to_string(a));
    const MlpShape s{4, 6, 5, a};
    vecd x = randn(s.rows * s.d, 13), W1 = randn(s.in_rows() * s.d, 14), W2 = randn(s.d * s.hidden, 15), w = randn(s.rows * s.d, 16);
    auto xf = cast<float>(x), W1f = cast<float>(W1), W2f = cast<float>(W2);
    std::vector<float> hp(s.rows * s.in_rows()), ha(s.rows * s.hidden), yf(s.rows * s.d);
    mlp_forward<HB>(xf.data(), W1f.data(), W2f.data(), hp.data(), ha.data(), yf.data(), s, false);
    const vecd ref = ref_mlp(x, W1, W2, s.rows, s.d, s.hidden, a);
    REQUIRE(max_abs_diff(vecd(yf.begin(), yf.end()), ref) < 1e-4);
    vecd hpd(hp.size()), had(ha.size()), y(s.rows * s.d), dx(x.size()), dW1(W1.size(), 0.0), dW2(W2.size(), 0.0);
    vecd s1(ha.size()), s2(hp.size());
    mlp_forward<HB>(x.data(), W1.data(), W2.data(), hpd.data(), had.data(), y.data(), s, false);
    mlp_backward<HB>(x.data(), W1.data(), W2.data(), hpd.data(), had.data(), w.data(), dx.data(), dW1.data(), dW2.data(),
                     s1.data(), s2.data(), s);
    const auto f = [&] { return dot(ref_mlp(x, W1, W2, s.rows, s.d, s.hidden, a), w); };
    check_all(f, x, dx, "dx");
    check_all(f, W1, dW1, "dW1");
    check_all(f, W2, dW2, "dW2");
  }
}

TEST_CASE("softcap cross-entropy masks the padded vocabulary", "[train][kernels]") {
  const LossShape s{6, 8, 7, 15.0};
  vecd l = randn(s.rows * s.padded_vocab, 17, 20.0);  // large logits so the cap matters
  const std::vector<std::int32_t> tgt{0, 3, 6, 2, 2, 5};
  vecd z = l, losses(s.rows), lse(s.rows);
  softcap_ce_forward<HB>(z.data(), tgt.data(), losses.data(), lse.data(), s);
  double mean = 0;
  for (double v : losses) mean += v / s.rows;
  REQUIRE(std::abs(mean - ref_softcap_ce(l, tgt, s.rows, s.padded_vocab, s.vocab, s.softcap)) < 1e-12);
  softcap_ce_backward<HB>(z.data(), tgt.data(), lse.data(), 1.0 / s.rows, s);
  for (int64 i = 0; i < s.rows; ++i) REQUIRE(z[i * s.padded_vocab + 7] == 0.0);  // padding: no gradient
  check_all([&] { return ref_softcap_ce(l, tgt, s.rows, s.padded_vocab, s.vocab, s.softcap); }, l, z, "dlogits");
}

TEST_CASE("embedding: lookup and scatter-add with repeated tokens", "[train][kernels]") {
  const int64 V = 5, d = 20, n = 7;
  vecd E = randn(V * d, 18), w = randn(n * d, 19);
  const std::vector<std::int32_t> tok{1, 4, 1, 0, 4, 4, 2};
  vecd out(n * d), dE(V * d, 0.0);
  embedding_forward<HB>(tok.data(), E.data(), out.data(), n, d);
  for (int64 i = 0; i < n; ++i) REQUIRE(out[i * d + 3] == E[tok[i] * d + 3]);
  embedding_backward<HB>(tok.data(), w.data(), dE.data(), n, d);
  check_all([&] {
    vecd o(n * d);
    embedding_forward<HB>(tok.data(), E.data(), o.data(), n, d);
    return dot(o, w);
  }, E, dE, "dE");
}

TEST_CASE("injection: linear [I|0] start and hyperconnection lane algebra", "[train][kernels]") {
  const int64 n = 3, d = 4, nd = n * d;
  vecd e = randn(nd, 20), s = randn(nd, 21), W = randn(2 * d * d, 22), w = randn(nd, 23);
  vecd I(2 * d * d);
  inject_linear_init(I.data(), d);
  vecd u(nd);
  inject_linear_forward<HB>(e.data(), s.data(), I.data(), u.data(), n, d);
  REQUIRE(max_abs_diff(u, e) == 0.0);  // [I | 0] passes e through
  vecd de(nd, 0.0), ds(nd), dW(W.size(), 0.0);
  inject_linear_forward<HB>(e.data(), s.data(), W.data(), u.data(), n, d);
  inject_linear_backward<HB>(e.data(), s.data(), W.data(), w.data(), de.data(), ds.data(), dW.data(), n, d);
  const auto f = [&] {
    vecd o(nd);
    inject_linear_forward<HB>(e.data(), s.data(), W.data(), o.data(), n, d);
    return dot(o, w);
  };
  check_all(f, e, de, "de");
  check_all(f, s, ds, "ds");
  check_all(f, W, dW, "dW");

  // Hyper: L = <w, x> + <wl, update(H, x, y)> with x = aggregate(H) and y an independent input.
  const int64 K = 3;
  vecd H = randn(K * nd, 24), p = randn(HyperParams::count(K), 25), y = randn(nd, 26), wl = randn(K * nd, 27);
  const auto hyper_f = [&] {
    vecd x(nd), Ho(K * nd);
    hyper_aggregate<HB>(H.data(), p.data() + HyperParams::alpha(K), x.data(), K, nd);
    hyper_update<HB>(H.data(), p.data(), p.data() + HyperParams::beta(K), x.data(), y.data(), Ho.data(), K, nd);
    return dot(x, w) + dot(Ho, wl);
  };
  vecd x(nd), dH(K * nd), ddelta(nd), dp(p.size(), 0.0);
  hyper_aggregate<HB>(H.data(), p.data() + HyperParams::alpha(K), x.data(), K, nd);
  hyper_update_backward<HB>(H.data(), p.data(), p.data() + HyperParams::beta(K), x.data(), y.data(), wl.data(), dH.data(),
                            ddelta.data(), dp.data(), dp.data() + HyperParams::beta(K), K, nd);
  vecd dx = w;  // d x: direct term minus the delta term
  for (int64 i = 0; i < nd; ++i) dx[i] -= ddelta[i];
  hyper_aggregate_backward<HB>(H.data(), p.data() + HyperParams::alpha(K), dx.data(), dH.data(),
                               dp.data() + HyperParams::alpha(K), K, nd);
  check_all(hyper_f, H, dH, "dH");
  check_all(hyper_f, p, dp, "d(M, alpha, beta)");
  check_all(hyper_f, y, ddelta, "dy");
}

TEST_CASE("HostBackend::gemm: every transposition, beta 0 over garbage and beta 1/2, against a double reference",
          "[train][kernels]") {
  // Shapes whose transposed operand has rows of 1,024, 512 and 256 floats: an AVX2 build with oneDNN
  // computes those A^T B products as (B^T A)^T (train/backend/host.hpp, swap_transposed_a), the
  // rest directly; an AVX-512 build on an Intel core does so for the one with K 2048 and rows of
  // 512. One thread and two (two panels per product) each.
  struct Shape {
    int64 M, N, K, lda, ldb;
  };
  const Shape shapes[] = {{1024, 256, 40, 1024, 256}, {512, 256, 24, 1024, 256}, {256, 256, 17, 256, 256},
                          {96, 160, 33, 128, 160}, {64, 512, 9, 64, 512}, {512, 48, 2048, 512, 48}};
  const int saved = HB::threads();
  for (const int threads : {1, 2}) {
    HB::set_threads(threads);
    for (const Shape& s : shapes)
      for (const bool ta : {false, true})
        for (const bool tb : {false, true})
          for (const float beta : {0.0f, 0.5f}) {
            // A holds op(A) (M x K) as K x lda (ta) or M x lda; B holds op(B) (K x N) as N x ldb or K x ldb.
            const int64 lda = ta ? s.lda : s.K + 3, ldb = tb ? s.K + 5 : s.ldb, ldc = s.N + 7;
            const int64 a_rows = ta ? s.K : s.M, b_rows = tb ? s.N : s.K;
            const std::uint64_t seed = static_cast<std::uint64_t>(s.M * 8 + s.N + ta * 2 + tb);
            const std::vector<float> A = cast<float>(randn(static_cast<std::size_t>(a_rows * lda), seed));
            const std::vector<float> B = cast<float>(randn(static_cast<std::size_t>(b_rows * ldb), seed + 1));
            std::vector<float> C = cast<float>(randn(static_cast<std::size_t>(s.M * ldc), seed + 2));
            if (beta == 0.0f) std::fill(C.begin(), C.end(), std::numeric_limits<float>::quiet_NaN());
            const std::vector<float> C0 = C;
            HB::gemm(ta, tb, s.M, s.N, s.K, 0.75f, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
            INFO("M " << s.M << " N " << s.N << " K " << s.K << " ta " << ta << " tb " << tb << " beta " << beta
                      << " threads " << threads);
            int64 bad = 0;
            for (int64 i = 0; i < s.M; ++i)
              for (int64 j = 0; j < s.N; ++j) {
                double ref = 0;
                for (int64 k = 0; k < s.K; ++k)
                  ref += static_cast<double>(ta ? A[k * lda + i] : A[i * lda + k]) * (tb ? B[j * ldb + k] : B[k * ldb + j]);
                ref = 0.75 * ref + (beta == 0.0f ? 0.0 : beta * static_cast<double>(C0[i * ldc + j]));
                bad += !close(C[i * ldc + j], ref, 1e-5, 1e-4);
              }
            CHECK(bad == 0);
            // Columns past N in C are untouched.
            int64 touched = 0;
            for (int64 i = 0; i < s.M; ++i)
              for (int64 j = s.N; j < ldc; ++j)
                touched += std::memcmp(&C[i * ldc + j], &C0[i * ldc + j], sizeof(float)) != 0;
            CHECK(touched == 0);
          }
  }
  HB::set_threads(saved);
}
