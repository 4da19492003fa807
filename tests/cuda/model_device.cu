// The whole looped model on the CUDA backend against the host backend, in fp32: the same weights
// (drawn on the host, uploaded), the same batches; the loss, every gradient, and the parameters
// after AdamW steps agree within tolerances, for a dense model (linear injection, truncated BPTT),
// hyperconnections, and a looped MoE with a shared expert and bias balancing. Each device run is
// repeated and must give the same bits (run-to-run determinism on one GPU).
//
// Exit 77 (ctest: skipped) without a usable CUDA device. Like kernels_device.cu, one source for two
// programs: tests/simt/model_simt.cpp compiles it with the host compiler against SimtBackend, whose
// RMSNorm, QK-norm, loss, softmax and embedding-gradient kernels are this backend's own CUDA kernels
// run by the SIMT emulator (its GEMMs are the host's), so the same comparison runs on every build
// machine.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#if defined(LOOPSCALE_SIMT_EMULATION)
#include "loopscale/train/backend/simt.hpp"
#else
#include "loopscale/train/backend/cuda.hpp"
#endif
#include "loopscale/train/model.hpp"
#include "loopscale/train/optim.hpp"

namespace {

using namespace loopscale;
using train::HostBackend;
#if defined(LOOPSCALE_SIMT_EMULATION)
using Device = train::SimtBackend;
#else
using Device = train::CudaBackend;
#endif

struct Result {
  std::vector<double> losses;
  std::vector<float> grads, params;
};

ModelSpec spec_of(Inject inj, int64 lanes, int64 bptt, int64 experts) {
  ModelSpec m;
  m.d_model = 64;
  m.vocab = 97;
  m.vocab_multiple = 32;
  LayerSpec l;
  l.attn.heads = 4;
  l.attn.kv_heads = experts > 0 ? 2 : 0;
  if (experts > 0) {
    l.ffn.experts = experts;
    l.ffn.top_k = 2;
    l.ffn.hidden = 96;
    l.ffn.shared_expert = true;
  }
  m.prelude = {1, l};
  m.coda = {1, l};
  m.recur.block = {2, l};
  m.recur.r = 3;
  m.recur.inject = {inj, lanes};
  m.recur.bptt = bptt;
  return m;
}

template <class B>
Result run(const ModelSpec& m, const train::kernels::MoeRouting& routing, int steps) {
  constexpr int64 batch = 4, seq = 48;
  train::Transformer<float, B> model(m, batch, seq, 15.0, routing);
  model.init(5, train::InitScheme::paper);
  train::AdamW<float, B> opt(model.num_params(), {});
  Result r;
  for (int s = 0; s < steps; ++s) {
    std::vector<std::int32_t> in(batch * seq), tgt(batch * seq);
    for (int64 i = 0; i < batch * seq; ++i) {
      in[i] = static_cast<std::int32_t>((i * 31 + s * 7) % m.vocab);
      tgt[i] = static_cast<std::int32_t>((i * 17 + s * 11 + 3) % m.vocab);
    }
    r.losses.push_back(model.forward_backward(in.data(), tgt.data()) + model.aux_loss());
    if (s == 0) {
      r.grads.resize(static_cast<std::size_t>(model.num_params()));
      model.read_grads(r.grads);
    }
    const std::span<const float> g(model.grads_data(), static_cast<std::size_t>(model.num_params()));
    opt.step(std::span<float>(model.params_data(), static_cast<std::size_t>(model.num_params())), g, model.tensors(), 3e-3,
             train::AdamW<float, B>::grad_norm(g));
    model.update_moe_bias();
  }
  r.params.resize(static_cast<std::size_t>(model.num_params()));
  model.read_params(r.params);
  return r;
}

int failures = 0;

void expect(bool ok, const std::string& what) {
  std::printf("%s %s\n", ok ? "ok  " : "FAIL", what.c_str());
  failures += !ok;
}

// llm.c's comparison: |device - host| <= tol + eps |host|, reported at the worst element.
bool close(const std::vector<float>& host, const std::vector<float>& dev, double tol, double eps, std::string& worst) {
  double w = -1;
  std::size_t at = 0;
  for (std::size_t i = 0; i < host.size(); ++i) {
    const double excess = std::abs(static_cast<double>(host[i]) - dev[i]) - (tol + eps * std::abs(static_cast<double>(host[i])));
    if (excess > w || i == 0) w = excess, at = i;
  }
  worst = "worst [" + std::to_string(at) + "] host " + std::to_string(host[at]) + " device " + std::to_string(dev[at]);
  return host.size() == dev.size() && w <= 0;
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
  train::kernels::MoeRouting bias;
  bias.router = train::kernels::RouterKind::sigmoid;
  bias.balance = train::kernels::Balance::bias;
  bias.bias_rate = 1e-3;
  const struct {
    const char* name;
    ModelSpec spec;
    train::kernels::MoeRouting routing;
  } cases[] = {
      {"dense, linear injection, truncated BPTT", spec_of(Inject::linear, 0, 2, 0), {}},
      {"dense, hyperconnections", spec_of(Inject::hyper, 2, full_bptt, 0), {}},
      {"looped MoE E8 K2 + shared expert, sigmoid router, bias balancing", spec_of(Inject::linear, 0, full_bptt, 8), bias},
  };
  for (const auto& c : cases) {
    const Result host = run<HostBackend>(c.spec, c.routing, 3);
    const Result dev = run<Device>(c.spec, c.routing, 3);
    const Result again = run<Device>(c.spec, c.routing, 3);
    const std::string name = c.name;
    for (std::size_t s = 0; s < host.losses.size(); ++s)
      expect(std::abs(host.losses[s] - dev.losses[s]) <= 1e-4 * std::abs(host.losses[s]),
             name + ": loss at step " + std::to_string(s) + " host " + std::to_string(host.losses[s]) + " device " + std::to_string(dev.losses[s]));
    // close() fills `worst` before the message is built (as one call's arguments, the message was
    // built first and named the previous comparison's worst element).
    std::string worst;
    const bool grads_close = close(host.grads, dev.grads, 1e-5, 1e-2, worst);
    expect(grads_close, name + ": gradients of the first step, " + worst);
    const bool params_close = close(host.params, dev.params, 1e-4, 1e-3, worst);
    expect(params_close, name + ": parameters after three AdamW steps, " + worst);
    expect(dev.losses == again.losses && dev.grads == again.grads && dev.params == again.params, name + ": two device runs give the same bits");
  }
  std::printf("%d failed\n", failures);
  return failures == 0 ? 0 : 1;
}
