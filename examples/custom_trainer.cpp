// Your own training loop on the library: a static model type (dense and MoE layers alternating in
// the shared block), its accounting proven while compiling, and the engine's model, optimiser and
// data used directly -- no Trainer, no config files. The buffers the engine allocates are checked
// against the accounting before the first step.
//
//   custom_trainer CORPUS_DIR [STEPS]     (CORPUS_DIR holds train.bin and val.bin: scripts/corpus.sh)
//
// Prints the loss every 10 steps and the validation loss at the end; exits 0 when training lowered
// the loss, 1 when it did not, 2 on bad input.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include <loopscale/loopscale.hpp>
#include <loopscale/train/data.hpp>
#include <loopscale/train/model.hpp>
#include <loopscale/train/optim.hpp>

using namespace loopscale;

// d 64, two heads, byte vocabulary; 1 prelude layer, a block of 4 (dense, MoE of 4 experts top-1,
// dense, MoE) run twice, 1 coda layer: effective depth 10.
using Dense = Layer<Attention<2>>;
using Routed = Layer<Attention<2>, MoE<4, 1>>;
using Looped = Model<Width<64>, Vocab<256>, Prelude<1, Dense>, Recur<Block<Alternate<Dense, Routed, 4>>, 2, Linear>, Coda<1, Dense>>;
// Its dense twin of the same depth, for the static checks.
using Flat = Model<Width<64>, Vocab<256>, Prelude<1, Dense>, Recur<Block<Alternate<Dense, Routed, 8>>, 1, NoInject>, Coda<1, Dense>>;
static_assert(require_iso_depth<Looped, Flat>());
static_assert(require_matched_compute<Looped, Flat, 128, 0.05>());  // the injection is the difference
static_assert(account_of<Looped>(128).params.non_embedding < account_of<Flat>(128).params.non_embedding);

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: custom_trainer CORPUS_DIR [STEPS]\n");
    return 2;
  }
  const int64 steps = argc == 3 ? std::atoll(argv[2]) : 200;
  if (steps < 10) {
    std::fprintf(stderr, "custom_trainer: STEPS must be at least 10, not '%s'\n", argv[2]);
    return 2;
  }
  const int64 batch = 8, T = 128;
  train::TokenFile train_file, val_file;
  try {
    train_file = train::read_token_file(std::string(argv[1]) + "/train.bin");
    val_file = train::read_token_file(std::string(argv[1]) + "/val.bin");
    train::check_fits(train_file, 256, T);
    train::check_fits(val_file, 256, T);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "custom_trainer: %s\n", e.what());
    return 2;
  }

  // The engine's model, laid out from the spec; its buffers are the accounting's.
  train::Transformer<float> model(spec_of<Looped>(), batch, T);
  const ActivationPlan plan = activation_plan(model.spec(), T);
  if (model.num_params() != count_params(model.spec()).total ||
      model.activation_values() != plan.per_token() * batch * T + plan.per_thread * train::HostBackend::threads()) {
    std::fprintf(stderr, "custom_trainer: the engine's buffers disagree with the accounting\n");
    return 1;
  }
  std::printf("%lld parameters (%lld active per token), %lld MoE layers, %.3g training FLOPs per token\n",
              static_cast<long long>(model.num_params()), static_cast<long long>(count_params(model.spec()).active),
              static_cast<long long>(model.moe_layers()), static_cast<double>(count_flops(model.spec(), T).train));
  model.init(/*seed=*/1);

  train::AdamW<float> opt(model.num_params(), train::AdamWConfig{});
  const train::Schedule schedule{3e-3, steps / 10, steps};
  const train::TrainSampler sampler(train_file, /*seed=*/1, T);
  std::vector<std::int32_t> x(batch * T), y(batch * T);
  double first = 0, last = 0;
  for (int64 step = 0; step < steps; ++step) {
    sampler.batch(step, batch, x.data(), y.data());
    const double loss = model.forward_backward(x.data(), y.data());
    model.update_moe_bias();  // aux-loss-free balancing, if the routing asks for it (not by default)
    const auto grads = std::span<const float>(model.grads().data(), model.grads().size());
    opt.step(model.params(), grads, model.tensors(), schedule.at(step), train::AdamW<float>::grad_norm(grads));
    if (step < 10) first += loss / 10;
    if (step >= steps - 10) last += loss / 10;
    if (step % 10 == 0 || step == steps - 1)
      std::printf("step %4lld  loss %.4f  aux %.4f\n", static_cast<long long>(step), loss, model.aux_loss());
  }

  const train::ValidationSet val(val_file, T, 32);
  double val_loss = 0;
  for (int64 i = 0; i < val.windows(); i += batch) {
    val.batch(i, batch, x.data(), y.data());
    val_loss += model.forward(x.data(), y.data()) / static_cast<double>(val.windows() / batch);
  }
  std::printf("mean loss of the first 10 steps %.4f, of the last 10 %.4f; validation %.4f nats/token, %.4f bits/byte\n", first,
              last, val_loss, val_file.bits_per_byte(val_loss));
  return last < first ? 0 : 1;
}
