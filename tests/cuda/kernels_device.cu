// Every kernel the CUDA backend runs, against its host twin on the same inputs (llm.c's dev/cuda
// way): the same template instantiated with HostBackend over host vectors and with the device
// backend over its buffers, results compared with |device - host| <= tol + eps |host| (integer
// results, such as the MoE grouping, exactly), and each device result computed twice and compared
// bit for bit (run-to-run determinism on one GPU).
//
// One source, two programs: built by nvcc it checks CudaBackend on a GPU (test_cuda_kernels; exit
// 77, ctest: skipped, without a usable device); included by tests/simt/kernels_simt.cpp after
// backend/simt.hpp, the host compiler builds it against SimtBackend, which runs the CUDA backend's
// own kernels (cuda_kernels.hpp) under the SIMT emulator, so those run on every build machine. Only
// the bf16 packing, which is cublaslt.hpp's own device code, is left out there.
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#if defined(LOOPSCALE_SIMT_EMULATION)
#include "loopscale/train/backend/simt.hpp"
#else
#include "loopscale/train/backend/cuda.hpp"
#endif
#include "loopscale/train/backend/host.hpp"
#include "loopscale/train/kernels/attention.hpp"
#include "loopscale/train/kernels/embedding.hpp"
#include "loopscale/train/kernels/inject.hpp"
#include "loopscale/train/kernels/loss.hpp"
#include "loopscale/train/kernels/mlp.hpp"
#include "loopscale/train/kernels/moe_router.hpp"
#include "loopscale/train/kernels/rmsnorm.hpp"
#include "loopscale/train/kernels/rope.hpp"
#include "loopscale/train/optim.hpp"

namespace {

using loopscale::Activation;
#if defined(LOOPSCALE_SIMT_HEAP)  // the sanitizer stage's build (tests/sanitize): heap memory, which ASan bounds to the byte
using Device = loopscale::train::SimtHeapBackend;
#elif defined(LOOPSCALE_SIMT_EMULATION)
using Device = loopscale::train::SimtBackend;
#else
using Device = loopscale::train::CudaBackend;
#endif
using loopscale::train::HostBackend;
namespace k = loopscale::train::kernels;
using int64 = std::int64_t;
using Dev = Device::buffer<float>;
using DevI = Device::buffer<std::int32_t>;

int failures = 0, checks = 0;

std::vector<float> randn(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  std::vector<float> v(n);
  std::uint64_t s = seed * 0x9E3779B97F4A7C15ull + 1;
  for (float& x : v) {
    s ^= s << 13, s ^= s >> 7, s ^= s << 17;
    x = scale * (static_cast<float>(s >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f);
  }
  return v;
}
Dev up(const std::vector<float>& h) {
  Dev d(h.size());
  Device::upload(d.data(), h.data(), static_cast<int64>(h.size()));
  return d;
}
DevI up(const std::vector<std::int32_t>& h) {
  DevI d(h.size());
  Device::upload(d.data(), h.data(), static_cast<int64>(h.size()));
  return d;
}
std::vector<float> down(const Dev& d) {
  std::vector<float> h(d.size());
  Device::download(h.data(), d.data(), static_cast<int64>(h.size()));
  return h;
}

void compare(const std::string& what, const std::vector<float>& host, const std::vector<float>& dev, double tol = 1e-5, double eps = 1e-4) {
  ++checks;
  if (host.size() != dev.size()) {
    std::printf("FAIL %s: %zu host values, %zu device values\n", what.c_str(), host.size(), dev.size());
    ++failures;
    return;
  }
  for (std::size_t i = 0; i < host.size(); ++i) {
    const double h = host[i], d = dev[i];
    if (h != d && !(std::abs(h - d) <= tol + eps * std::abs(h))) {  // h != d: equal infinities agree
      std::printf("FAIL %s: [%zu] host %.9g device %.9g\n", what.c_str(), i, h, d);
      ++failures;
      return;
    }
  }
  std::printf("ok   %s (%zu values)\n", what.c_str(), host.size());
}

// Runs `device` twice on fresh copies of the inputs and checks the two results are identical.
void deterministic(const std::string& what, const std::function<std::vector<float>()>& device) {
  ++checks;
  const auto a = device(), b = device();
  if (a != b) {
    std::printf("FAIL %s: two device runs differ\n", what.c_str());
    ++failures;
  }
}

}  // namespace

int main() {
#if !defined(LOOPSCALE_SIMT_EMULATION)
  if (!Device::available()) {
    std::printf("no CUDA device usable: skipped\n");
    return 77;
  }
  Device::set_precision(loopscale::train::Precision::fp32);  // compared with the host: no bf16 or TF32 rounding
#endif
  HostBackend::set_threads(1);
  const int64 rows = 96, d = 64, H = 80, vocab = 50, vp = 56, seq = 24, heads = 4, q = 16;

  // ---- GEMM: all four transpositions, beta 0 and 1, leading dimensions wider than the rows ----
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const int64 M = 37, N = 29, K = 41, lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 2;
    const auto A = randn(static_cast<std::size_t>((ta ? K : M) * lda), 1), B = randn(static_cast<std::size_t>((tb ? N : K) * ldb), 2);
    for (float beta : {0.0f, 1.0f}) {
      auto C = randn(static_cast<std::size_t>(M * ldc), 3);
      Dev dA = up(A), dB = up(B), dC = up(C);
      HostBackend::gemm(ta, tb, M, N, K, 0.5f, A.data(), lda, B.data(), ldb, beta, C.data(), ldc);
      Device::gemm(ta, tb, M, N, K, 0.5f, dA.data(), lda, dB.data(), ldb, beta, dC.data(), ldc);
      compare("gemm ta " + std::to_string(ta) + " tb " + std::to_string(tb) + " beta " + std::to_string(beta), C, down(dC));
    }
  }

  // ---- strided-batched GEMM (attention's device form): all four transpositions, beta 0 and 0.75,
  // strides wider than the matrices; the gaps between them must stay as they were ----
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const int64 M = 24, N = 19, K = 16, count = 6, lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 1, ldc = N + 2;
    const int64 sA = (ta ? K : M) * lda + 5, sB = (tb ? N : K) * ldb + 2, sC = M * ldc + 7;
    const auto A = randn(static_cast<std::size_t>(count * sA), 31), B = randn(static_cast<std::size_t>(count * sB), 32);
    for (float beta : {0.0f, 0.75f}) {
      auto C = randn(static_cast<std::size_t>(count * sC), 33);
      const auto C0 = C;
      for (int64 i = 0; i < count; ++i)
        HostBackend::gemm(ta, tb, M, N, K, 0.5f, A.data() + i * sA, lda, B.data() + i * sB, ldb, beta, C.data() + i * sC, ldc);
      const auto run = [&] {
        Dev dA = up(A), dB = up(B), dC = up(C0);
        Device::gemm_batched(ta, tb, M, N, K, 0.5f, dA.data(), lda, sA, dB.data(), ldb, sB, beta, dC.data(), ldc, sC, count);
        return down(dC);
      };
      const std::string what = "gemm_batched ta " + std::to_string(ta) + " tb " + std::to_string(tb) + " beta " + std::to_string(beta);
      compare(what, C, run());
      deterministic(what, run);
    }
  }

  // ---- attention's device form (a gemm_batched per head, the softmax a warp per row) against the
  // host's task form, grouped KV heads (four query heads over two; two over one with rows longer
  // than a warp) ----
  for (const int64 shape : {0, 1}) {
    const k::AttentionShape sh = shape == 0 ? k::AttentionShape{3, seq, heads, 2, q} : k::AttentionShape{2, 100, 2, 1, 16};
    const int64 N = sh.batch * sh.seq;
    const auto qkv = randn(static_cast<std::size_t>(N * sh.row()), 40), dout = randn(static_cast<std::size_t>(N * sh.out_row()), 41);
    std::vector<float> P(sh.probs()), out(N * sh.out_row()), dqkv(qkv.size()),
        scratch(sh.seq * sh.seq * k::attention_scratch_matrices<HostBackend>(sh.batch, HostBackend::threads()));
    k::attention_forward<HostBackend>(qkv.data(), P.data(), out.data(), sh);
    k::attention_backward<HostBackend>(qkv.data(), P.data(), dout.data(), dqkv.data(), scratch.data(), sh);
    const auto run = [&](int what) {
      Dev X = up(qkv), PP(sh.probs()), O(N * sh.out_row()), DO = up(dout), DX(qkv.size()),
          S(sh.seq * sh.seq * k::attention_scratch_matrices<Device>(sh.batch, Device::threads()));
      k::attention_forward<Device>(X.data(), PP.data(), O.data(), sh);
      k::attention_backward<Device>(X.data(), PP.data(), DO.data(), DX.data(), S.data(), sh);
      return down(what == 0 ? PP : what == 1 ? O : DX);
    };
    const std::string w = " (T " + std::to_string(sh.seq) + ")";
    compare("attention probabilities" + w, P, run(0));
    compare("attention forward" + w, out, run(1));
    compare("attention backward dqkv" + w, dqkv, run(2));
    deterministic("attention backward dqkv" + w, [&] { return run(2); });
  }

  // ---- RMSNorm (the CUDA backend's own kernels: one warp per row, dg from per-block partials) ----
  {
    const auto x = randn(rows * d, 4), g = randn(d, 5), dy = randn(rows * d, 6);
    std::vector<float> y(rows * d), rstd(rows), dx(rows * d), dg(d, 0.0f);
    k::rmsnorm_forward<HostBackend>(x.data(), g.data(), y.data(), rstd.data(), rows, d);
    k::rmsnorm_backward<HostBackend>(x.data(), g.data(), rstd.data(), dy.data(), dx.data(), dg.data(), rows, d, false);
    const auto run = [&](int what) {
      Dev X = up(x), G = up(g), Y(rows * d), R(rows), DY = up(dy), DX(rows * d), DG(d);
      k::rmsnorm_forward<Device>(X.data(), G.data(), Y.data(), R.data(), rows, d);
      k::rmsnorm_backward<Device>(X.data(), G.data(), R.data(), DY.data(), DX.data(), DG.data(), rows, d, false);
      return down(what == 0 ? Y : what == 1 ? DX : DG);
    };
    compare("rmsnorm forward", y, run(0));
    compare("rmsnorm backward dx", dx, run(1));
    compare("rmsnorm backward dg", dg, run(2));
    deterministic("rmsnorm backward dg", [&] { return run(2); });
    // The strided, parameter-free form (QK-norm): heads of q inside rows of stride heads * q.
    std::vector<float> ys(rows * d), rs(rows * heads), dxs(rows * d);
    k::rmsnorm_forward_strided<HostBackend>(x.data(), ys.data(), rs.data(), rows, q, d, heads);
    k::rmsnorm_backward_from_output<HostBackend>(ys.data(), rs.data(), dy.data(), dxs.data(), rows, q, d, heads);
    Dev X = up(x), Y(rows * d), R(rows * heads), DY = up(dy), DX(rows * d);
    k::rmsnorm_forward_strided<Device>(X.data(), Y.data(), R.data(), rows, q, d, heads);
    k::rmsnorm_backward_from_output<Device>(Y.data(), R.data(), DY.data(), DX.data(), rows, q, d, heads);
    compare("rmsnorm strided forward", ys, down(Y));
    compare("rmsnorm backward from output", dxs, down(DX));
  }
  // Widths that are not a multiple of the warp (and wider than several warps), rows that do not
  // fill the last block, enough rows for several chunks of dg partials, no scale (QK-norm's form
  // with dg unused), and accumulate into dx.
  for (const int64 dd : {int64{70}, int64{1000}}) {
    const int64 rr = 1001;
    const std::string w = " (d " + std::to_string(dd) + ", " + std::to_string(rr) + " rows)";
    const auto x = randn(rr * dd, 34), g = randn(dd, 35), dy = randn(rr * dd, 36), dx0 = randn(rr * dd, 37), dg0 = randn(dd, 38);
    for (const bool scaled : {true, false}) {
      const float* gp = scaled ? g.data() : nullptr;
      std::vector<float> y(rr * dd), rstd(rr), dx = dx0, dg = dg0;
      k::rmsnorm_forward<HostBackend>(x.data(), gp, y.data(), rstd.data(), rr, dd);
      k::rmsnorm_backward<HostBackend>(x.data(), gp, rstd.data(), dy.data(), dx.data(), dg.data(), rr, dd, true);
      const auto run = [&](int what) {
        Dev X = up(x), G = up(g), Y(rr * dd), R(rr), DY = up(dy), DX = up(dx0), DG = up(dg0);
        const float* Gp = scaled ? G.data() : nullptr;
        k::rmsnorm_forward<Device>(X.data(), Gp, Y.data(), R.data(), rr, dd);
        k::rmsnorm_backward<Device>(X.data(), Gp, R.data(), DY.data(), DX.data(), DG.data(), rr, dd, true);
        return down(what == 0 ? Y : what == 1 ? R : what == 2 ? DX : DG);
      };
      const std::string n = scaled ? "rmsnorm" : "rmsnorm without scale";
      compare(n + " forward" + w, y, run(0));
      compare(n + " 1/rms" + w, rstd, run(1));
      compare(n + " backward dx, accumulated" + w, dx, run(2));
      compare(n + " backward dg over " + std::to_string(rr) + " rows" + w, dg, run(3), 1e-4, 1e-4);
      deterministic(n + " forward" + w, [&] { return run(0); });
      deterministic(n + " backward dx" + w, [&] { return run(2); });
      deterministic(n + " backward dg" + w, [&] { return run(3); });
    }
    // In place, as the hook allows without accumulate and without dg: dx aliases dy.
    std::vector<float> y(rr * dd), rstd(rr), dxy = dy;
    k::rmsnorm_forward<HostBackend>(x.data(), g.data(), y.data(), rstd.data(), rr, dd);
    k::rmsnorm_backward<HostBackend>(x.data(), g.data(), rstd.data(), dxy.data(), dxy.data(), static_cast<float*>(nullptr), rr, dd, false);
    Dev X = up(x), G = up(g), Y(rr * dd), R(rr), DXY = up(dy);
    k::rmsnorm_forward<Device>(X.data(), G.data(), Y.data(), R.data(), rr, dd);
    k::rmsnorm_backward<Device>(X.data(), G.data(), R.data(), DXY.data(), DXY.data(), static_cast<float*>(nullptr), rr, dd, false);
    compare("rmsnorm backward in place (dx == dy)" + w, dxy, down(DXY));
  }

  // QK-norm's strided form at a real head width (q 128: four values a lane), 1,001 tokens (the last
  // block part full), 3 heads of q and k inside rows of stride 3 * 2 * 128 + 5, and in place as
  // the model runs it (y == x, dx == dy).
  {
    const int64 rr = 1001, qq = 128, hh = 6, stride = 3 * 2 * qq + 5, n = rr * stride;
    const auto x = randn(static_cast<std::size_t>(n), 60), dy = randn(static_cast<std::size_t>(n), 61);
    std::vector<float> y = x, rs(rr * hh), dx = dy;
    k::rmsnorm_forward_strided<HostBackend>(y.data(), y.data(), rs.data(), rr, qq, stride, hh);
    k::rmsnorm_backward_from_output<HostBackend>(y.data(), rs.data(), dx.data(), dx.data(), rr, qq, stride, hh);
    const auto run = [&](int what) {
      Dev Y = up(x), R(rr * hh), DX = up(dy);
      k::rmsnorm_forward_strided<Device>(Y.data(), Y.data(), R.data(), rr, qq, stride, hh);
      k::rmsnorm_backward_from_output<Device>(Y.data(), R.data(), DX.data(), DX.data(), rr, qq, stride, hh);
      return down(what == 0 ? Y : what == 1 ? R : DX);
    };
    const std::string w = " (q 128, 6 vectors a row, 1001 rows, in place)";
    compare("rmsnorm strided forward" + w, y, run(0));
    compare("rmsnorm strided 1/rms" + w, rs, run(1));
    compare("rmsnorm backward from output" + w, dx, run(2));
    deterministic("rmsnorm strided forward" + w, [&] { return run(0); });
    deterministic("rmsnorm backward from output" + w, [&] { return run(2); });
  }

  // ---- embedding (repeated tokens: the backward's scatter-add) ----
  {
    std::vector<std::int32_t> tok(rows);
    for (int64 i = 0; i < rows; ++i) tok[i] = static_cast<std::int32_t>((i * 7) % 11);
    const auto E = randn(vp * d, 7), dout = randn(rows * d, 8);
    std::vector<float> out(rows * d), dE(vp * d, 0.0f);
    k::embedding_forward<HostBackend>(tok.data(), E.data(), out.data(), rows, d);
    k::embedding_backward<HostBackend>(tok.data(), dout.data(), dE.data(), rows, d);
    const auto run = [&](bool back) {
      DevI T = up(tok);
      Dev DE = up(E), O(rows * d), DO = up(dout), G(vp * d);
      k::embedding_forward<Device>(T.data(), DE.data(), O.data(), rows, d);
      k::embedding_backward<Device>(T.data(), DO.data(), G.data(), rows, d);
      return down(back ? G : O);
    };
    compare("embedding forward", out, run(false));
    compare("embedding backward", dE, run(true));
    deterministic("embedding backward", [&] { return run(true); });
  }

  // The embedding gradient at the sizes a step has: 4,096 tokens over a vocabulary of 300 with
  // one id in six the same (a byte-level corpus's spaces), widths 64 and 1,000, into a gradient
  // that already holds values (the sum over a step's micro-batches). The device kernel adds the
  // same values in the same order as the host: the same bits, not just close.
  for (const int64 dd : {int64{64}, int64{1000}}) {
    const int64 n = 4096, V = 300;
    std::vector<std::int32_t> tok(n);
    for (int64 i = 0; i < n; ++i) tok[i] = static_cast<std::int32_t>(i % 6 == 0 ? 32 : (i * 2654435761u) % V);
    const auto dout = randn(static_cast<std::size_t>(n * dd), 62), dE0 = randn(static_cast<std::size_t>(V * dd), 63);
    std::vector<float> dE = dE0;
    k::embedding_backward<HostBackend>(tok.data(), dout.data(), dE.data(), n, dd);
    const auto run = [&] {
      DevI T = up(tok);
      Dev DO = up(dout), G = up(dE0);
      k::embedding_backward<Device>(T.data(), DO.data(), G.data(), n, dd);
      return down(G);
    };
    const std::string w = " (4096 tokens, vocabulary 300, d " + std::to_string(dd) + ", bit for bit)";
    compare("embedding backward" + w, dE, run(), 0.0, 0.0);
    deterministic("embedding backward" + w, run);
  }

  // ---- softcapped cross-entropy ----
  {
    std::vector<std::int32_t> tgt(rows);
    for (int64 i = 0; i < rows; ++i) tgt[i] = static_cast<std::int32_t>((i * 5 + 3) % vocab);
    const auto logits0 = randn(rows * vp, 9, 20.0f);
    const k::LossShape ls{rows, vp, vocab, 15.0};
    auto logits = logits0;
    std::vector<float> loss(rows), lse(rows);
    k::softcap_ce_forward<HostBackend>(logits.data(), tgt.data(), loss.data(), lse.data(), ls);
    const auto capped = logits;
    k::softcap_ce_backward<HostBackend>(logits.data(), tgt.data(), lse.data(), 1.0f / rows, ls);
    DevI T = up(tgt);
    Dev L = up(logits0), LO(rows), LSE(rows);
    k::softcap_ce_forward<Device>(L.data(), T.data(), LO.data(), LSE.data(), ls);
    compare("softcap cross-entropy: capped logits", capped, down(L));
    compare("softcap cross-entropy: losses", loss, down(LO));
    k::softcap_ce_backward<Device>(L.data(), T.data(), LSE.data(), 1.0f / rows, ls);
    compare("softcap cross-entropy: gradient", logits, down(L), 1e-7, 1e-4);
    const double hs = HostBackend::sum(rows, [p = loss.data()](int64 i) { return p[i]; });
    const float* lo = LO.data();
    const double ds = Device::sum(rows, [=] LOOPSCALE_HD(int64 i) { return lo[i]; });
    compare("sum of the losses", {static_cast<float>(hs)}, {static_cast<float>(ds)}, 1e-6, 1e-6);
    // The fused loss and gradient (vocabulary narrower than the block: most threads see no logit).
    Dev F = up(logits0), FO(rows), FL(rows);
    k::softcap_ce_forward_backward<Device>(F.data(), T.data(), FO.data(), FL.data(), 1.0f / rows, ls);
    compare("softcap cross-entropy fused: losses", loss, down(FO));
    compare("softcap cross-entropy fused: logsumexp", lse, down(FL));
    compare("softcap cross-entropy fused: gradient", logits, down(F), 1e-7, 1e-4);
  }
  // The CUDA backend's own kernels (one block per row) over a vocabulary wider than the block, padded
  // to a multiple of 128, with and without the softcap; each result twice, bit for bit.
  for (const double cap : {15.0, 0.0}) {
    const int64 rr = 37, vv = 1531, vpad = 1536;
    const std::string w = " (vocab " + std::to_string(vv) + " of " + std::to_string(vpad) + ", cap " + std::to_string(cap) + ")";
    std::vector<std::int32_t> tgt(rr);
    for (int64 i = 0; i < rr; ++i) tgt[i] = static_cast<std::int32_t>((i * 613 + 5) % vv);
    tgt[0] = static_cast<std::int32_t>(vv - 1);  // the last real column
    auto logits0 = randn(rr * vpad, 39, 20.0f);
    if (cap == 0.0)  // -inf logits (a masked vocabulary) where a thread starts: they add exp(-inf) = 0
      for (int64 i = 0; i < rr; ++i)
        for (const int64 j : {int64{0}, int64{1}, int64{512}})
          if (tgt[i] != j) logits0[i * vpad + j] = -std::numeric_limits<float>::infinity();
    const k::LossShape ls{rr, vpad, vv, cap};
    auto logits = logits0;
    std::vector<float> loss(rr), lse(rr);
    k::softcap_ce_forward<HostBackend>(logits.data(), tgt.data(), loss.data(), lse.data(), ls);
    const auto capped = logits;
    k::softcap_ce_backward<HostBackend>(logits.data(), tgt.data(), lse.data(), 1.0f / rr, ls);
    const auto run = [&](int what) {
      DevI T = up(tgt);
      Dev L = up(logits0), LO(rr), LSE(rr);
      k::softcap_ce_forward<Device>(L.data(), T.data(), LO.data(), LSE.data(), ls);
      if (what == 0) return down(L);
      if (what == 1) return down(LO);
      if (what == 2) return down(LSE);
      k::softcap_ce_backward<Device>(L.data(), T.data(), LSE.data(), 1.0f / rr, ls);
      return down(L);
    };
    compare("softcap cross-entropy: logits after the forward" + w, capped, run(0));
    compare("softcap cross-entropy: losses" + w, loss, run(1));
    compare("softcap cross-entropy: logsumexp" + w, lse, run(2));
    compare("softcap cross-entropy: gradient, padding zeroed" + w, logits, run(3), 1e-7, 1e-4);
    for (int what = 0; what < 4; ++what) deterministic("softcap cross-entropy, result " + std::to_string(what) + w, [&] { return run(what); });
    const auto fused = [&](int what) {  // the training step's fused kernel: losses, logsumexp, gradient
      DevI T = up(tgt);
      Dev L = up(logits0), LO(rr), LSE(rr);
      k::softcap_ce_forward_backward<Device>(L.data(), T.data(), LO.data(), LSE.data(), 1.0f / rr, ls);
      return down(what == 0 ? LO : what == 1 ? LSE : L);
    };
    compare("softcap cross-entropy fused: losses" + w, loss, fused(0));
    compare("softcap cross-entropy fused: logsumexp" + w, lse, fused(1));
    compare("softcap cross-entropy fused: gradient, padding zeroed" + w, logits, fused(2), 1e-7, 1e-4);
    for (int what = 0; what < 3; ++what)
      deterministic("softcap cross-entropy fused, result " + std::to_string(what) + w, [&] { return fused(what); });
  }

  // ---- RoPE, forward and inverse ----
  {
    std::vector<float> c(seq * q / 2), s(seq * q / 2);
    k::rope_tables(seq, q, c.data(), s.data());
    const auto x0 = randn(rows * d, 10);
    auto x = x0;
    k::rope_apply<HostBackend>(x.data(), c.data(), s.data(), rows, seq, heads, q, d, false);
    Dev X = up(x0), C = up(c), S = up(s);
    k::rope_apply<Device>(X.data(), C.data(), S.data(), rows, seq, heads, q, d, false);
    compare("rope", x, down(X));
    k::rope_apply<Device>(X.data(), C.data(), S.data(), rows, seq, heads, q, d, true);
    compare("rope inverse returns the input", x0, down(X));
  }

  // ---- activations ----
  for (Activation a : {Activation::relu2, Activation::gelu, Activation::swiglu}) {
    const int64 H1 = k::mlp_in_rows(a, H);
    const auto hpre = randn(rows * H1, 11, 2.0f), dh = randn(rows * H, 12);
    std::vector<float> hact(rows * H), dhp(rows * H1);
    k::activation_forward<HostBackend>(a, hpre.data(), hact.data(), rows, H);
    k::activation_backward<HostBackend>(a, hpre.data(), dh.data(), dhp.data(), rows, H);
    Dev P = up(hpre), A(rows * H), D = up(dh), DP(rows * H1);
    k::activation_forward<Device>(a, P.data(), A.data(), rows, H);
    k::activation_backward<Device>(a, P.data(), D.data(), DP.data(), rows, H);
    const std::string n(loopscale::name_of(a));
    compare("activation forward " + n, hact, down(A));
    compare("activation backward " + n, dhp, down(DP));
  }

  // ---- MLP (GEMMs and activation together) ----
  {
    const k::MlpShape ms{rows, d, H, Activation::relu2};
    const auto x = randn(rows * d, 13), W1 = randn(H * d, 14, 0.2f), W2 = randn(d * H, 15, 0.2f), dy = randn(rows * d, 16);
    std::vector<float> hpre(rows * H), hact(rows * H), y(rows * d), dx(rows * d), dW1(H * d, 0.0f), dW2(d * H, 0.0f), s1(rows * H), s2(rows * H);
    k::mlp_forward<HostBackend>(x.data(), W1.data(), W2.data(), hpre.data(), hact.data(), y.data(), ms, false);
    k::mlp_backward<HostBackend>(x.data(), W1.data(), W2.data(), hpre.data(), hact.data(), dy.data(), dx.data(), dW1.data(), dW2.data(),
                                 s1.data(), s2.data(), ms);
    Dev X = up(x), A = up(W1), B = up(W2), HP(rows * H), HA(rows * H), Y(rows * d), DY = up(dy), DX(rows * d), G1(H * d), G2(d * H),
        S1(rows * H), S2(rows * H);
    k::mlp_forward<Device>(X.data(), A.data(), B.data(), HP.data(), HA.data(), Y.data(), ms, false);
    k::mlp_backward<Device>(X.data(), A.data(), B.data(), HP.data(), HA.data(), DY.data(), DX.data(), G1.data(), G2.data(), S1.data(),
                                 S2.data(), ms);
    compare("mlp forward", y, down(Y));
    compare("mlp backward dx", dx, down(DX));
    compare("mlp backward dW1", dW1, down(G1));
    compare("mlp backward dW2", dW2, down(G2));
  }

  // ---- injections and hyperconnections (their parameter gradients reduce on the device) ----
  {
    const int64 L = 3, n = rows * d;
    const auto Hl = randn(L * n, 17), alpha = randn(L, 18), M = randn(L * L, 19), beta = randn(L, 20), xv = randn(n, 21),
               yv = randn(n, 22), dx = randn(n, 23), dHo = randn(L * n, 24);
    std::vector<float> agg(n), upd(L * n), dH(L * n, 0.0f), dalpha(L, 0.0f), dH2(L * n), dd(n), dM(L * L, 0.0f), dbeta(L, 0.0f);
    k::hyper_aggregate<HostBackend>(Hl.data(), alpha.data(), agg.data(), L, n);
    k::hyper_update<HostBackend>(Hl.data(), M.data(), beta.data(), xv.data(), yv.data(), upd.data(), L, n);
    k::hyper_aggregate_backward<HostBackend>(Hl.data(), alpha.data(), dx.data(), dH.data(), dalpha.data(), L, n);
    k::hyper_update_backward<HostBackend>(Hl.data(), M.data(), beta.data(), xv.data(), yv.data(), dHo.data(), dH2.data(), dd.data(), dM.data(),
                                          dbeta.data(), L, n);
    Dev dHl = up(Hl), dAl = up(alpha), dMm = up(M), dBe = up(beta), dX = up(xv), dY = up(yv), dDx = up(dx), dDHo = up(dHo);
    Dev AGG(n), UPD(L * n), DH(L * n), DAL(L), DH2(L * n), DD(n), DM(L * L), DB(L);
    k::hyper_aggregate<Device>(dHl.data(), dAl.data(), AGG.data(), L, n);
    k::hyper_update<Device>(dHl.data(), dMm.data(), dBe.data(), dX.data(), dY.data(), UPD.data(), L, n);
    k::hyper_aggregate_backward<Device>(dHl.data(), dAl.data(), dDx.data(), DH.data(), DAL.data(), L, n);
    k::hyper_update_backward<Device>(dHl.data(), dMm.data(), dBe.data(), dX.data(), dY.data(), dDHo.data(), DH2.data(), DD.data(),
                                          DM.data(), DB.data(), L, n);
    compare("hyper aggregate", agg, down(AGG));
    compare("hyper update", upd, down(UPD));
    compare("hyper aggregate backward dH", dH, down(DH));
    compare("hyper aggregate backward dalpha", dalpha, down(DAL), 1e-4, 1e-4);
    compare("hyper update backward dH", dH2, down(DH2));
    compare("hyper update backward ddelta", dd, down(DD));
    compare("hyper update backward dM", dM, down(DM), 1e-4, 1e-4);
    compare("hyper update backward dbeta", dbeta, down(DB), 1e-4, 1e-4);
    // The linear injection (two GEMMs each way) and the element-wise helpers.
    const auto W = randn(2 * d * d, 25, 0.2f), e = randn(n, 26), s = randn(n, 27), du = randn(n, 28);
    std::vector<float> u(n), de(n, 0.0f), ds(n), dW(2 * d * d, 0.0f);
    k::inject_linear_forward<HostBackend>(e.data(), s.data(), W.data(), u.data(), rows, d);
    k::inject_linear_backward<HostBackend>(e.data(), s.data(), W.data(), du.data(), de.data(), ds.data(), dW.data(), rows, d);
    Dev DW = up(W), E = up(e), S = up(s), DU = up(du), U(n), DE(n), DS(n), GW(2 * d * d);
    k::inject_linear_forward<Device>(E.data(), S.data(), DW.data(), U.data(), rows, d);
    k::inject_linear_backward<Device>(E.data(), S.data(), DW.data(), DU.data(), DE.data(), DS.data(), GW.data(), rows, d);
    compare("inject linear forward", u, down(U));
    compare("inject linear backward de", de, down(DE));
    compare("inject linear backward ds", ds, down(DS));
    compare("inject linear backward dW", dW, down(GW));
    std::vector<float> h = e;
    k::add_scaled<HostBackend>(h.data(), s.data(), -0.5f, n);
    k::add_into<HostBackend>(h.data(), du.data(), n);
    k::add_scalar<HostBackend>(h.data() + 5, 2.5f);
    k::add_scaled<Device>(E.data(), S.data(), -0.5f, n);
    k::add_into<Device>(E.data(), DU.data(), n);
    k::add_scalar<Device>(E.data() + 5, 2.5f);
    compare("add_scaled, add_into, add_scalar", h, down(E));
  }

  // ---- MoE grouping: CUDA's radix-sort form against the host's counting sort (exact) ----
  for (const int64 E : {int64{3}, int64{8}, int64{64}}) {
    const int64 N = 5000, K = 2, S = N * K, cap = N * K / E;  // capacity: the skew below drops slots
    std::vector<std::int32_t> expert(S);
    std::uint64_t st = 77 + E;
    for (int64 t = 0; t < N; ++t) {
      st ^= st << 13, st ^= st >> 7, st ^= st << 17;
      const auto a = static_cast<std::int32_t>((st >> 33) % E / ((st >> 20) % 3 == 0 ? 1 : 2));  // low experts favoured
      expert[t * K] = a;
      expert[t * K + 1] = static_cast<std::int32_t>((a + 1 + (st >> 40) % (E - 1)) % E);  // distinct from the first
    }
    const std::size_t scratch = static_cast<std::size_t>(k::moe_group_scratch(E, S));
    std::vector<std::int32_t> order(S), pos(S), offset(E + 1), kept(E), hist(scratch);
    k::group_slots<HostBackend>(N, K, E, cap, expert.data(), order.data(), pos.data(), offset.data(), kept.data(), hist.data());
    const auto run = [&] {
      DevI X = up(expert), O(S), P(S), OF(E + 1), KE(E), H(scratch);
      k::group_slots<Device>(N, K, E, cap, X.data(), O.data(), P.data(), OF.data(), KE.data(), H.data());
      std::vector<std::int32_t> all;
      const auto append = [&all](const DevI& b) {
        std::vector<std::int32_t> h(b.size());
        Device::download(h.data(), b.data(), static_cast<int64>(h.size()));
        all.insert(all.end(), h.begin(), h.end());
      };
      append(O), append(P), append(OF), append(KE);
      return all;
    };
    std::vector<std::int32_t> want = order;
    want.insert(want.end(), pos.begin(), pos.end());
    want.insert(want.end(), offset.begin(), offset.end());
    want.insert(want.end(), kept.begin(), kept.end());
    ++checks;
    const auto got = run();
    if (got != want || run() != got) {
      std::printf("FAIL moe grouping, %lld experts: the device's order, positions, offsets or kept counts differ from the host's (or between two runs)\n",
                  static_cast<long long>(E));
      ++failures;
    } else {
      std::printf("ok   moe grouping, %lld experts (%lld slots, the same groups as the host, twice)\n", static_cast<long long>(E),
                  static_cast<long long>(S));
    }
  }

  // ---- dots of row pairs written through an index (the MoE experts' gate gradients) ----
  {
    const int64 R = 77, C = 200;  // rows longer than a warp's stride, not a multiple of it
    const auto x = randn(static_cast<std::size_t>(R * C), 50), y = randn(static_cast<std::size_t>(R * C), 51);
    std::vector<std::int32_t> idx(R);
    for (int64 r = 0; r < R; ++r) idx[r] = static_cast<std::int32_t>((r * 31) % R);  // a permutation: 31 and 77 are coprime
    std::vector<float> want(R);
    for (int64 r = 0; r < R; ++r) {
      float dot = 0;
      for (int64 c = 0; c < C; ++c) dot += x[r * C + c] * y[r * C + c];
      want[idx[r]] = dot;
    }
    const auto run = [&] {
      Dev X = up(x), Y = up(y), O(R);
      DevI I = up(idx);
      Device::row_dots(X.data(), Y.data(), C, I.data(), O.data(), R);
      return down(O);
    };
    compare("row dots through an index", want, run(), 1e-5, 1e-4);
    deterministic("row dots", run);
  }

#if !defined(LOOPSCALE_SIMT_EMULATION)
  // ---- bf16 packing of GEMM operands (cublaslt.hpp's packed form) against its host twin, bit for
  // bit: ties to even both ways, values that round up into the next binade and past the largest
  // bf16 (to infinity), subnormals, infinities and a NaN; a strided batch with a leading dimension
  // wider than the rows, a batch that reads one matrix (stride 0), and rows wider than a block ----
  {
    namespace pk = loopscale::train::bf16_pack;
    const float specials[] = {1.0f + 0x1p-8f, 1.0f + 0x3p-8f, -(1.0f + 0x1p-8f), 1.0f + 0x1p-8f + 0x1p-20f, 0x1.fffffep0f, 0x1.ffp127f,
                              3.4e38f, 0x1p-130f, -0x1p-149f, 0.0f, -0.0f, std::numeric_limits<float>::infinity(),
                              -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()};
    struct Case {
      int64 rows, cols, ld, stride, count;
    };
    // The last two run the grid's row and matrix loops past CUDA's 65,535 blocks in y and z.
    for (const Case c : {Case{7, 33, 40, 7 * 40 + 3, 3}, Case{5, 16, 16, 0, 4}, Case{3, 300, 301, 3 * 301, 2}, Case{1, 1, 1, 0, 1},
                         Case{70000, 3, 5, 0, 1}, Case{2, 3, 3, 7, 66000}}) {
      const int64 n = c.stride > 0 ? c.count * c.stride : c.rows * c.ld;
      std::vector<float> src = randn(static_cast<std::size_t>(n), 70 + c.cols, 3.0f);
      for (std::size_t i = 0; i < sizeof specials / sizeof specials[0] && i < src.size(); ++i) src[i] = specials[i];
      const pk::Layout to = pk::layout(c.rows, c.cols, c.count, c.stride);
      const std::string what = "bf16 pack " + std::to_string(c.count) + " x " + std::to_string(c.rows) + " x " + std::to_string(c.cols) +
                               " ld " + std::to_string(c.ld) + " stride " + std::to_string(c.stride);
      ++checks;
      const bool aligned = to.ld % pk::row_align == 0 && to.stride % pk::matrix_align == 0 && to.ld >= c.cols &&
                           (c.stride == 0 ? to.matrices == 1 && to.stride == 0 : to.matrices == c.count && to.stride >= c.rows * to.ld);
      if (!aligned) {
        std::printf("FAIL %s: layout ld %lld stride %lld matrices %lld\n", what.c_str(), static_cast<long long>(to.ld),
                    static_cast<long long>(to.stride), static_cast<long long>(to.matrices));
        ++failures;
        continue;
      }
      Dev dsrc = up(src);
      loopscale::train::CudaBackend::buffer<__nv_bfloat16> packed(static_cast<std::size_t>(to.values()));
      pk::pack(dsrc.data(), c.ld, c.stride, packed.data(), to);
      std::vector<std::uint16_t> got(static_cast<std::size_t>(to.values()));
      loopscale::train::cuda_detail::check(cudaMemcpy(got.data(), packed.data(), got.size() * sizeof(std::uint16_t), cudaMemcpyDeviceToHost),
                                           "cudaMemcpy (packed bf16)");
      std::string bad;
      for (int64 m = 0; m < to.matrices && bad.empty(); ++m)
        for (int64 r = 0; r < c.rows && bad.empty(); ++r)
          for (int64 j = 0; j < c.cols; ++j) {
            const float x = src[static_cast<std::size_t>(m * c.stride + r * c.ld + j)];
            const std::uint16_t want = pk::round_bits(x), have = got[static_cast<std::size_t>(m * to.stride + r * to.ld + j)];
            const bool nan_both = std::isnan(x) && (have & 0x7F80u) == 0x7F80u && (have & 0x007Fu) != 0;
            if (want != have && !nan_both) {
              char buf[160];
              std::snprintf(buf, sizeof buf, "matrix %lld row %lld column %lld: %a gave 0x%04x, the host twin 0x%04x", static_cast<long long>(m),
                            static_cast<long long>(r), static_cast<long long>(j), static_cast<double>(x), have, want);
              bad = buf;
              break;
            }
          }
      if (!bad.empty()) {
        std::printf("FAIL %s: %s\n", what.c_str(), bad.c_str());
        ++failures;
      } else {
        std::printf("ok   %s\n", what.c_str());
      }
    }
  }

#endif

  // ---- AdamW over backend buffers, two steps, clipped ----
  {
    const int64 n = 5000;
    const std::vector<loopscale::train::ParamTensor> tensors = {{"a", 0, 3000, loopscale::train::ParamGroup::matrix, 64},
                                                                {"b", 3000, 2000, loopscale::train::ParamGroup::norm_inject, 0}};
    auto p = randn(n, 29);
    const auto g = randn(n, 30, 3.0f);
    loopscale::train::AdamW<float, HostBackend> host(n, {});
    loopscale::train::AdamW<float, Device> dev(n, {});
    Dev P = up(p), G = up(g);
    for (int step = 0; step < 2; ++step) {
      const double hn = loopscale::train::AdamW<float, HostBackend>::grad_norm(g);
      const double dn = loopscale::train::AdamW<float, Device>::grad_norm({G.data(), G.size()});
      compare("grad norm, step " + std::to_string(step), {static_cast<float>(hn)}, {static_cast<float>(dn)}, 1e-6, 1e-6);
      host.step(p, g, tensors, 1e-2, hn);
      dev.step({P.data(), P.size()}, {G.data(), G.size()}, tensors, 1e-2, dn);
    }
    compare("adamw parameters after two steps", p, down(P));
  }

  std::printf("%d of %d device checks failed\n", failures, checks);
  return failures == 0 ? 0 : 1;
}
