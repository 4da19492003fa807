// The whole-model gradient checks of tests/train/test_model.cpp (grad_check) on the CUDA backend:
// Transformer<double, CudaBackend>, whose GEMMs go to cuBLAS in fp64 (cublasDgemm and its strided
// batched form) and whose RMSNorm and softcapped cross-entropy run the backend's own kernels
// (backend/cuda_kernels.hpp) instantiated for double. For each model, finite differences of the
// objective (mean loss plus the MoE balance and z-losses), computed on the device, against the
// gradients of forward_backward on the device, on a sample of entries of every parameter tensor,
// with test_model.cpp's tolerance (close(g, fd, 1e-5, 1e-9)). The models are test_model.cpp's own
// (tests/train/model_specs.hpp): r = 1, 2, 4 with linear injection, both forms of hyperconnections,
// truncated BPTT, and looped MoEs (E4 K2, with a shared expert).
//
// Device memory is not host-readable, so parameters and gradients go through read_params,
// write_params and read_grads. The check cannot pass on zeros: most sampled gradients must be
// nonzero, as in test_model.cpp. Each model's loss and gradients are also compared with the host
// backend's in double on the same weights and batch, which only summation order may separate.
//
// One line per model; exit 77 (ctest: skipped) without a usable CUDA device, 1 on any failure.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "../train/model_specs.hpp"
#include "../train/reference.hpp"
#include "loopscale/train/backend/cuda.hpp"
#include "loopscale/train/model.hpp"

namespace {

using namespace loopscale;
using namespace loopscale::test;
using train::CudaBackend;
using train::HostBackend;
using train::Transformer;

int failures = 0;

void report(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  std::fflush(stdout);
  failures += !ok;
}

// test_model.cpp's grad_check, on the device: the same batch (2 x 5), seed, perturbation, sample
// of entries, step and tolerance.
void grad_check(const std::string& name, const ModelSpec& spec, const train::kernels::MoeRouting& routing = {}) {
  const int64 B = 2, T = 5;
  Transformer<double, CudaBackend> model(spec, B, T, 15.0, routing);
  model.init(7);
  const auto n = static_cast<std::size_t>(model.num_params());
  std::vector<double> p(n);
  model.read_params(p);
  const vecd noise = randn(p.size(), 8, 0.3);  // away from the structured start (zeros, identities)
  for (std::size_t i = 0; i < p.size(); ++i) p[i] += noise[i];
  model.write_params(p);
  const auto in = tokens(B * T, spec.vocab, 1), tgt = tokens(B * T, spec.vocab, 2);
  const double loss = model.forward_backward(in.data(), tgt.data()) + model.aux_loss();
  std::vector<double> g(n);
  model.read_grads(g);

  // The host backend on the same weights and batch: the same arithmetic in double, summed in
  // another order, so the two agree far inside the finite differences' tolerance.
  {
    Transformer<double, HostBackend> host(spec, B, T, 15.0, routing);
    host.write_params(p);
    const double host_loss = host.forward_backward(in.data(), tgt.data()) + host.aux_loss();
    std::vector<double> hg(n);
    host.read_grads(hg);
    // The worst entry: the one furthest past (or least inside) its tolerance.
    const auto excess = [](double a, double b, double rel, double floor) {
      return std::abs(a - b) - (floor + rel * std::max(std::abs(a), std::abs(b)));
    };
    std::size_t worst = 0;
    for (std::size_t i = 1; i < n; ++i)
      if (excess(g[i], hg[i], 1e-8, 1e-11) > excess(g[worst], hg[worst], 1e-8, 1e-11)) worst = i;
    double diff = 0;
    for (std::size_t i = 0; i < n; ++i) diff = std::max(diff, std::abs(g[i] - hg[i]));
    const bool ok = close(loss, host_loss, 1e-10, 1e-12) && close(g[worst], hg[worst], 1e-8, 1e-11);
    char line[320];
    std::snprintf(line, sizeof line,
                  ": device equals host in double (loss %.15g vs %.15g; gradients: max |difference| %.3g, worst [%zu] %.12g vs %.12g)", loss,
                  host_loss, diff, worst, g[worst], hg[worst]);
    report(ok, name + line);
  }

  model.freeze_truncated_state(true);  // truncated BPTT: the state at the cut is a constant
  const auto f = [&] {
    model.write_params(p);
    return model.forward(in.data(), tgt.data()) + model.aux_loss();
  };
  int checked = 0, nonzero = 0, bad = 0;
  std::string first_bad;
  for (const auto& t : model.tensors()) {
    std::set<int64> idx;
    for (int64 j = 0; j < std::min<int64>(t.size, 6); ++j) idx.insert((j * 7919 + 13) % t.size);
    for (int64 j : idx) {
      const auto i = static_cast<std::size_t>(t.offset + j);
      const double fd = finite_diff(f, p[i], 1e-6);
      if (!close(g[i], fd, 1e-5, 1e-9) && bad++ == 0) {
        char line[256];
        std::snprintf(line, sizeof line, "[%lld] analytic %.12g numeric %.12g", static_cast<long long>(j), g[i], fd);
        first_bad = t.name + line;
      }
      ++checked;
      nonzero += std::abs(g[i]) > 1e-9;
    }
  }
  model.freeze_truncated_state(false);
  model.write_params(p);  // finite_diff restored p; the device holds it again
  const bool ok = bad == 0 && checked > 30 && nonzero > checked / 2;  // the last: the check is not passing on zeros
  std::string line = name + ": " + std::to_string(checked) + " entries against finite differences, " + std::to_string(nonzero) + " nonzero";
  if (bad > 0) line += ", " + std::to_string(bad) + " off, first " + first_bad;
  if (checked <= 30) line += ", too few entries checked";
  if (nonzero <= checked / 2) line += ", too few nonzero gradients";
  report(ok, line);
}

}  // namespace

int main() {
  if (!CudaBackend::available()) {
    std::printf("no CUDA device usable: skipped\n");
    return 77;
  }
  HostBackend::set_threads(1);
  try {
    // test_model.cpp: "model gradients: r = 1 (no recurrence)", "r = 2 and r = 4, every injection
    // mode", "truncated BPTT".
    grad_check("r = 1, no recurrence", small_spec(1, Inject::none));
    grad_check("r = 1 flat (no prelude or coda, the paper's baseline)", flat_spec());
    grad_check("r = 2, linear injection", small_spec(2, Inject::linear));
    grad_check("r = 4, linear injection", small_spec(4, Inject::linear));
    grad_check("r = 4, linear injection, norm after the loop", with_norm(small_spec(4, Inject::linear), StateNorm::after_loop));
    grad_check("r = 4, hyperconnections (2 lanes)", small_spec(4, Inject::hyper, 2));
    grad_check("r = 4, shared hyperconnections (2 lanes)", small_spec(4, Inject::hyper_shared, 2));
    grad_check("r = 4, linear injection, truncated BPTT (half)", small_spec(4, Inject::linear, 0, half_bptt));
    grad_check("r = 4, shared hyperconnections (3 lanes), truncated BPTT (1)", small_spec(4, Inject::hyper_shared, 3, 1));
    // "model gradients: looped MoE, r = 1, 2, 4" with a shared expert, and "MoE variants".
    train::kernels::MoeRouting routing;
    routing.z_coef = 1e-2;
    routing.aux_coef = 0.05;
    for (int64 r : {1, 2, 4})
      grad_check("looped MoE E4 K2 + shared expert, r = " + std::to_string(r), moe_spec(r, 4, 2, true), routing);
    train::kernels::MoeRouting sig;
    sig.router = train::kernels::RouterKind::sigmoid;
    sig.balance = train::kernels::Balance::bias;
    sig.z_coef = 1e-2;
    grad_check("looped MoE E4 K2 + shared expert, swiglu, sigmoid router + bias, r = 2",
               moe_spec(2, 4, 2, true, full_bptt, Activation::swiglu), sig);
    grad_check("looped MoE E4 K2, truncated BPTT (half), r = 4", moe_spec(4, 4, 2, false, half_bptt));
  } catch (const std::exception& e) {
    std::printf("FAIL %s\n", e.what());
    return 1;
  }
  std::printf("%d failed\n", failures);
  return failures == 0 ? 0 : 1;
}
