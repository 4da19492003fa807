// MuonH, the matrix optimiser of the iso-depth paper's recipe (its nanochat fork, nanochat/optim.py,
// muon_step_fused): Muon whose weights live on a Frobenius sphere. For one weight matrix W with
// gradient G, momentum buffer M, momentum mu, learning rate lr and n0 = ||W||_F at the first step:
//
//   M <- mu M + (1 - mu) G                       momentum (an exponential average)
//   U <- (1 - mu) G + mu M                       Nesterov's look-ahead
//   O <- polar_express(U)                        about U's orthogonal polar factor (below)
//   W <- W - lr (n0 / ||O||_F) O                 the update rescaled to the matrix's initial norm
//   W <- W (n0 / ||W||_F)                        projected back onto the sphere ||W||_F = n0
//
// so there is no weight decay: on the sphere it would be a first-order no-op. Norms below 1e-10
// are clamped as the paper's code does (a zero update leaves W unchanged).
//
// polar_express: X = U / (1.02 ||U||_F + 1e-6), then 5 iterations of the quintic
//   X <- a_k X + b_k (X X^T) X + c_k (X X^T)^2 X
// with the per-iteration coefficients of Polar Express (Amsel, Persson, Musco, Gower,
// arXiv 2505.16932), the set the paper's code uses (computed for 5 iterations, safety factor 2e-2,
// cushion 2). Each iteration is an odd polynomial of X, so the result is U_svd p(S') V_svd^T for
// the SVD U_svd S V_svd^T of the input, S' = S / (1.02 ||U||_F + 1e-6) and p the composition of the
// five scalar quintics: every normalised singular value in [1e-3, 1] ends in [0.8589, 1.1412]
// (tests/train/test_optim.cpp checks both statements against an SVD in double precision). A tall
// matrix (rows > cols) iterates on the cols x cols Gram matrix X^T X instead, which is the same
// polynomial. The iteration is GEMMs through the backend (B::gemm), element-wise loops
// (B::parallel_for) and fixed-order sums (B::sum), so a device backend supplies its own; its
// workspace is allocated once, sized for the largest matrix. loopscale runs it in fp32 (the
// paper's code in bf16).
//
// Which matrices: one per linear map, as the paper's model has them. loopscale stores the q, k and
// v projections of a layer as one wqkv tensor, the gate and up projections of a SwiGLU MLP as one
// w1 and the experts of an MoE layer as one stack; muon_matrices() cuts such a tensor into its
// maps (q, k, v; gate, up; one per expert), each with its own orthogonalisation and its own
// initial norm. Everything else of the matrix group (wo, w2, the router, the shared expert) and
// the linear injection W (d x 2d) is one matrix each.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "loopscale/spec/spec.hpp"
#include "loopscale/train/backend/host.hpp"
#include "loopscale/train/backend/vector_ops.hpp"
#include "loopscale/train/param_tensor.hpp"

namespace loopscale::train {

// Polar Express coefficients (a, b, c) of each iteration; the paper runs all five.
inline constexpr int polar_express_steps = 5;
inline constexpr double polar_express_coeffs[polar_express_steps][3] = {
    {8.156554524902461, -22.48329292557795, 15.878769915207462},
    {4.042929935166739, -2.808917465908714, 0.5000178451051316},
    {3.8916678022926607, -2.772484153217685, 0.5060648178503393},
    {3.285753657755655, -2.3681294933425376, 0.46449024233003106},
    {2.3465413258596377, -1.7097828382687081, 0.42323551169305323},
};
// The input is divided by polar_express_margin * ||X||_F + polar_express_eps, so that every
// singular value starts below 1.
inline constexpr double polar_express_margin = 1.02, polar_express_eps = 1e-6;

// The scalar map the iteration applies to each singular value of the normalised input.
constexpr double polar_express_scalar(double x, int steps = polar_express_steps) {
  for (int k = 0; k < steps; ++k) {
    const double a = polar_express_coeffs[k][0], b = polar_express_coeffs[k][1], c = polar_express_coeffs[k][2];
    const double x2 = x * x;
    x = x * (a + x2 * (b + c * x2));
  }
  return x;
}

// One matrix of the flat parameter buffer that MuonH treats as one linear map: rows x cols,
// row-major, at `offset`.
struct MuonMatrix {
  std::string name;  // the tensor's name, with the part in brackets when it is cut: "recur.0.wqkv[k]"
  int64 offset = 0, rows = 0, cols = 0;
  int64 size() const { return rows * cols; }
};

namespace detail {

inline bool ends_with(const std::string& s, const std::string& x) {
  return s.size() >= x.size() && s.compare(s.size() - x.size(), x.size(), x) == 0;
}

// The layer a tensor named "prelude.3.wqkv" (recur, coda) belongs to, or null.
inline const LayerSpec* layer_of(const ModelSpec& spec, const std::string& name) {
  const std::pair<const char*, const StackSpec*> stacks[] = {
      {"prelude.", &spec.prelude}, {"recur.", &spec.recur.block}, {"coda.", &spec.coda}};
  for (const auto& [prefix, stack] : stacks) {
    const std::string p(prefix);
    if (name.compare(0, p.size(), p) != 0) continue;
    const std::size_t dot = name.find('.', p.size());
    if (dot == std::string::npos) return nullptr;
    const int64 i = std::stoll(name.substr(p.size(), dot - p.size()));
    return i >= 0 && i < stack->size() ? &(*stack)[i] : nullptr;
  }
  return nullptr;
}

}  // namespace detail

// The linear maps of one parameter tensor (see the top of this file), in buffer order; they tile
// the tensor exactly. Throws std::invalid_argument for a tensor that is not a matrix.
inline std::vector<MuonMatrix> muon_matrices(const ParamTensor& t, const ModelSpec& spec) {
  using detail::ends_with;
  const int64 d = spec.d_model;
  std::vector<MuonMatrix> out;
  int64 at = t.offset;
  const auto add = [&](const std::string& part, int64 rows, int64 cols) {
    out.push_back({part.empty() ? t.name : t.name + "[" + part + "]", at, rows, cols});
    at += rows * cols;
  };
  // A W1 of `rows` rows: gate and up halves for SwiGLU, else one matrix; `tag` prefixes the parts.
  const auto mlp_in = [&](const LayerSpec& l, int64 rows, const std::string& tag) {
    if (l.ffn.act == Activation::swiglu) {
      add(tag + (tag.empty() ? "" : ",") + "gate", rows / 2, d);
      add(tag + (tag.empty() ? "" : ",") + "up", rows / 2, d);
    } else {
      add(tag, rows, d);
    }
  };
  const LayerSpec* l = detail::layer_of(spec, t.name);
  if (t.name == "inject.W") {
    add("", d, 2 * d);
  } else if (l && ends_with(t.name, ".wqkv")) {
    const int64 q = attn_head_dim(l->attn, d), h = attn_heads(l->attn, d), kv = attn_kv_heads(l->attn, d);
    add("q", h * q, d);
    add("k", kv * q, d);
    add("v", kv * q, d);
  } else if (l && ends_with(t.name, ".experts.w1")) {
    const int64 E = l->ffn.experts, rows = t.size / (E * d);
    for (int64 e = 0; e < E; ++e) mlp_in(*l, rows, std::to_string(e));
  } else if (l && ends_with(t.name, ".experts.w2")) {
    const int64 E = l->ffn.experts, H = t.size / (E * d);
    for (int64 e = 0; e < E; ++e) add(std::to_string(e), d, H);
  } else if (l && ends_with(t.name, ".w1")) {  // a dense MLP's or the shared expert's
    mlp_in(*l, t.size / d, "");
  } else if (t.fan_in > 0 && t.size % t.fan_in == 0) {
    add("", t.size / t.fan_in, t.fan_in);
  } else {
    throw std::invalid_argument("muon: tensor " + t.name + " is not a matrix");
  }
  if (at != t.offset + t.size)
    throw std::invalid_argument("muon: the matrices of " + t.name + " do not tile its " + std::to_string(t.size) + " values");
  return out;
}


// The Polar Express iteration with its workspace (two matrices and two Gram-sized squares),
// allocated by reserve() for the largest shape it will see and never again.
template <class T, class B = HostBackend>
class PolarExpress {
 public:
  void reserve(int64 rows, int64 cols) {
    const auto n = static_cast<std::size_t>(rows * cols), s = static_cast<std::size_t>(std::min(rows, cols));
    // Backend buffers: a larger shape replaces them (the contents are scratch).
    if (x_.size() < n) {
      x_ = Buffer(n);
      y_ = Buffer(n);
    }
    if (a_.size() < s * s) {
      a_ = Buffer(s * s);
      b_ = Buffer(s * s);
    }
  }

  // The buffer the input goes in (rows x cols, row-major), valid after reserve(rows, cols).
  T* input() { return x_.data(); }

  // Orthogonalises the matrix in input() (rows x cols); returns the result, which lives in the
  // workspace until the next call. The input buffer is overwritten.
  const T* run(int64 rows, int64 cols, int steps = polar_express_steps) {
    const int64 n = rows * cols;
    if (static_cast<int64>(x_.size()) < n || static_cast<int64>(a_.size()) < std::min(rows, cols) * std::min(rows, cols))
      throw std::logic_error("polar express: workspace not reserved for this shape");
    T* X = x_.data();
    T* Y = y_.data();
    const double norm = std::sqrt(detail::sum_squares<B>(X, n));
    scale(X, X, static_cast<T>(1.0 / (polar_express_margin * norm + polar_express_eps)), n);
    const bool tall = rows > cols;
    const int64 s = tall ? cols : rows;
    T* A = a_.data();
    T* Bm = b_.data();
    for (int k = 0; k < steps; ++k) {
      const T a = static_cast<T>(polar_express_coeffs[k][0]), b = static_cast<T>(polar_express_coeffs[k][1]),
              c = static_cast<T>(polar_express_coeffs[k][2]);
      // A = X^T X (tall) or X X^T; Bm = b A + c A A; Y = a X + X Bm (tall) or a X + Bm X.
      if (tall) B::gemm(true, false, s, s, rows, T(1), X, cols, X, cols, T(0), A, s);
      else B::gemm(false, true, s, s, cols, T(1), X, cols, X, cols, T(0), A, s);
      scale(A, Bm, b, s * s);
      B::gemm(false, false, s, s, s, c, A, s, A, s, T(1), Bm, s);
      scale(X, Y, a, n);
      if (tall) B::gemm(false, false, rows, cols, cols, T(1), X, cols, Bm, cols, T(1), Y, cols);
      else B::gemm(false, false, rows, cols, rows, T(1), Bm, rows, X, cols, T(1), Y, cols);
      std::swap(X, Y);
    }
    return X;
  }

  // Convenience for a matrix outside the workspace, in the backend's memory: out = polar_express(G).
  void orthogonalize(const T* G, T* out, int64 rows, int64 cols, int steps = polar_express_steps) {
    reserve(rows, cols);
    scale(G, x_.data(), T(1), rows * cols);
    const T* r = run(rows, cols, steps);
    scale(r, out, T(1), rows * cols);
  }

  // Values the workspace holds (for the memory accounting of a caller).
  int64 workspace_values() const { return static_cast<int64>(x_.size() + y_.size() + a_.size() + b_.size()); }

 private:
  static void scale(const T* x, T* y, T f, int64 n) { detail::scale_into<B>(x, y, f, n); }  // y = f x

  using Buffer = typename B::template buffer<T>;
  Buffer x_, y_, a_, b_;
};

// One MuonH step on one matrix (see the top of this file): W, its gradient G (scaled by `clip`)
// and momentum buffer M, all `m.size()` values at the matrix's offset of their buffers; n0 its
// initial Frobenius norm. The workspace must be reserved for the matrix's shape.
template <class T, class B>
void muonh_step(T* W, const T* G, T* M, int64 rows, int64 cols, double n0, double lr, double momentum, double clip,
                PolarExpress<T, B>& pe) {
  const int64 n = rows * cols;
  T* U = pe.input();
  const T mu = static_cast<T>(momentum), omu = static_cast<T>(1 - momentum), c = static_cast<T>(clip);
  B::parallel_for((n + 4095) / 4096, [=] LOOPSCALE_HD(int64 ch) {
    const int64 hi = (ch + 1) * 4096 < n ? (ch + 1) * 4096 : n;
    for (int64 i = ch * 4096; i < hi; ++i) {
      const T g = G[i] * c;
      M[i] = mu * M[i] + omu * g;
      U[i] = omu * g + mu * M[i];
    }
  });
  const T* O = pe.run(rows, cols);
  const double on = std::sqrt(detail::sum_squares<B>(O, n));
  const T f = static_cast<T>(lr * n0 / std::max(on, 1e-10));
  B::parallel_for((n + 4095) / 4096, [=] LOOPSCALE_HD(int64 ch) {
    const int64 hi = (ch + 1) * 4096 < n ? (ch + 1) * 4096 : n;
    for (int64 i = ch * 4096; i < hi; ++i) W[i] -= f * O[i];
  });
  const double wn = std::sqrt(detail::sum_squares<B>(static_cast<const T*>(W), n));
  const T r = static_cast<T>(n0 / std::max(wn, 1e-10));
  B::parallel_for((n + 4095) / 4096, [=] LOOPSCALE_HD(int64 ch) {
    const int64 hi = (ch + 1) * 4096 < n ? (ch + 1) * 4096 : n;
    for (int64 i = ch * 4096; i < hi; ++i) W[i] *= r;
  });
}

}  // namespace loopscale::train
