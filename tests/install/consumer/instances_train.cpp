// The other file of the two-file program of instances_fit.cpp: trains the host engine's
// Transformer<float> for a few steps, as a user's own training loop does, while the engine itself
// is compiled once, in train/instances.cpp. run.cmake checks that this file's object code calls
// Transformer<float, HostBackend>::backward_from_logits (the backward pass, which forward_backward,
// inlined here, calls) and does not define it.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <span>
#include <vector>

#include <loopscale/loopscale.hpp>
#include <loopscale/train/model.hpp>
#include <loopscale/train/optim.hpp>

using namespace loopscale;

double fitted_phi();  // instances_fit.cpp

using Dense = Layer<Attention<2>>;
using Tiny = Model<Width<32>, Vocab<16>, Prelude<1, Dense>, Recur<Block<Dense>, 2>, Coda<1, Dense>>;

int main() {
  const double phi = fitted_phi();
  const int64 batch = 4, T = 32, steps = 40;
  train::Transformer<float> model(spec_of<Tiny>(), batch, T);
  model.init(/*seed=*/1);
  train::AdamW<float> opt(model.num_params(), train::AdamWConfig{});
  const train::Schedule schedule{3e-3, 4, steps};
  // A sequence of period 5: after a few steps the next token is certain.
  std::vector<std::int32_t> x(batch * T), y(batch * T);
  for (int64 i = 0; i < batch * T; ++i) x[i] = static_cast<std::int32_t>(i % 5), y[i] = static_cast<std::int32_t>((i + 1) % 5);
  double first = 0, last = 0;
  for (int64 step = 0; step < steps; ++step) {
    const double loss = model.forward_backward(x.data(), y.data());
    const auto grads = std::span<const float>(model.grads().data(), model.grads().size());
    opt.step(model.params(), grads, model.tensors(), schedule.at(step), train::AdamW<float>::grad_norm(grads));
    if (step == 0) first = loss;
    last = loss;
  }
  const bool ok = std::abs(phi - 0.459) < 0.05 && last < 0.5 * first;
  std::printf("consumer instances %s: phi %.4f (published 0.459), loss %.4f -> %.4f in %lld steps\n", ok ? "ok" : "failed", phi,
              first, last, static_cast<long long>(steps));
  return ok ? 0 : 1;
}
