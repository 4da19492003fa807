// A separate project using the installed CUDA backend through loopscale::cuda: one training step
// of a small looped model with Transformer<float, CudaBackend>. Exit 77 and "no device" without a
// usable CUDA device (the program still builds, which is the point of the check there).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include <loopscale/train/backend/cuda.hpp>
#include <loopscale/train/model.hpp>

using namespace loopscale;
using train::CudaBackend;

int main() {
  ModelSpec m;
  m.d_model = 32;
  m.vocab = 50;
  m.vocab_multiple = 16;
  LayerSpec l;
  l.attn.heads = 2;
  m.prelude = {1, l};
  m.coda = {1, l};
  m.recur.block = {1, l};
  m.recur.r = 2;
  m.recur.inject = {Inject::linear, 0};
  const bool device = CudaBackend::available();
  if (!device) std::printf("no device: CUDA consumer built, not run\n");
  if (!device) return 77;
  const std::int64_t batch = 2, seq = 16;
  train::Transformer<float, CudaBackend> model(m, batch, seq);
  model.init(1);
  std::vector<std::int32_t> in(batch * seq), tgt(batch * seq);
  for (std::int64_t i = 0; i < batch * seq; ++i) {
    in[i] = static_cast<std::int32_t>((i * 7) % m.vocab);
    tgt[i] = static_cast<std::int32_t>((i * 13 + 1) % m.vocab);
  }
  const double loss = model.forward_backward(in.data(), tgt.data());
  std::vector<float> g(static_cast<std::size_t>(model.num_params()));
  model.read_grads(g);
  double norm = 0;
  for (float x : g) norm += static_cast<double>(x) * x;
  // lm_head starts near zero: the loss is near log(vocab), and the gradients are not all zero.
  const bool ok = std::isfinite(loss) && std::abs(loss - std::log(50.0)) < 0.5 && norm > 0;
  std::printf("consumer cuda %s: loss %.4f on %s, |gradient| %.3g\n", ok ? "ok" : "FAILED", loss, CudaBackend::device_name().c_str(),
              std::sqrt(norm));
  return ok ? 0 : 1;
}
