// The configuration of a training run: TrainConfig (every setting of `loopscale train`, a sweep's
// runs and a user's own program, with its JSON form), the recipes and their defaults, strict
// reading from JSON (config_from_json), the checks that need no data (detail::check_config), and
// the steps and tokens a budget gives (training_length). trainer.hpp runs a config; lane_plan.hpp
// splits its threads.
//
// A run follows a recipe (TrainConfig::recipe), which chooses the optimiser, the initialisation and
// the defaults of every optimiser setting the config does not give (recipe_defaults):
//   adamw  AdamW on every tensor, normal initialisation with scaled-down output projections
//          (InitScheme::scaled_normal), cosine decay; loopscale's recipe before the paper's, and the
//          default, so existing configs, sweeps and checkpoints train and resume as they did
//   paper  the iso-depth paper's (its nanochat fork): MuonH (muon.hpp) on the block, prelude, coda
//          and injection matrices at lr 0.02; AdamW (betas 0.8, 0.95, eps 1e-10, no weight decay)
//          on the embedding (0.2), lm_head (0.004), norms (0.005) and hyperconnection lanes (0.01),
//          those four times (d_model / 512)^-0.5; no gradient clipping, no warmup, linear decay
//          to 0.1; InitScheme::paper
// docs/training.md lists where the paper recipe differs from the paper's code. The paper's scaling
// runs also correct their rates by batch size and training tokens (lr_transfer hyperp,
// lr_transfer.hpp), which the `paper` sweep preset turns on with those runs' base rates.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "loopscale/account/flops.hpp"
#include "loopscale/spec/limits.hpp"
#include "loopscale/spec/spec_json.hpp"
#include "loopscale/train/backend/precision.hpp"
#include "loopscale/train/dist/communicator.hpp"
#include "loopscale/train/lr_transfer.hpp"
#include "loopscale/train/model.hpp"
#include "loopscale/train/optim.hpp"
#include "loopscale/util/json_number.hpp"
#include "loopscale/util/json_parse.hpp"
#include "loopscale/util/names.hpp"
#include "loopscale/util/text.hpp"
#include "loopscale/util/thread_limit.hpp"

namespace loopscale::train {

struct config_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

// The training recipes (above).
enum class Recipe : std::uint8_t { adamw, paper };

constexpr auto names_of(Recipe) { return make_names<Recipe>({{Recipe::adamw, "adamw"}, {Recipe::paper, "paper"}}); }

struct TrainConfig {
  std::string recipe = "adamw";  // adamw | paper: the optimiser, the initialisation and the defaults below
  std::string init = "scaled-normal";  // scaled-normal | paper (model.hpp's InitScheme)
  ModelSpec spec{};
  int64 batch = 16;       // sequences per step
  int64 seq_len = 256;    // tokens per sequence (T)
  int64 tokens = 0;       // training tokens; 0: derived from flops
  double flops = 0;       // training FLOPs, paper convention (account/flops.hpp): tokens = flops / F_train
  double lr = 3e-3;       // peak learning rate (matrices; the other groups scale it)
  double lr_embedding = 1.0, lr_lm_head = 1.0, lr_norm = 1.0;  // multipliers per group
  double lr_lanes = 1.0;      // paper recipe: multiplier of the hyperconnection lanes (adamw: they follow lr_norm)
  double lr_width_ref = 0;    // > 0: the AdamW multipliers outside the matrices times (d_model / lr_width_ref)^-0.5
  // none | hyperp (paper recipe only): the rates of the matrices, embedding and lm_head corrected
  // for the step's tokens, the matrices' also for the run's training tokens, as the paper's
  // scaling runs do (lr_transfer.hpp); lr and the multipliers are the rates before correction.
  std::string lr_transfer = "none";
  double weight_decay = 0.1;  // adamw recipe: matrices only (decoupled); the paper recipe has none
  double beta1 = 0.9, beta2 = 0.95, eps = 1e-8;  // AdamW
  double muon_momentum = 0.95;  // paper recipe: MuonH's Nesterov momentum
  double grad_clip = 1.0;     // global gradient-norm clipping; 0: off
  double warmup = 0.02;       // fraction of the steps spent in linear warmup
  std::string decay = "cosine";  // cosine | linear | constant
  double final_lr_frac = 0.1;    // learning-rate floor at the last step, as a fraction of lr
  double softcap = 15.0;         // logit softcap; 0: off
  std::string data;              // corpus folder: train.bin and val.bin (scripts/corpus.sh), or a manifest and its shards (data prepare)
  std::string out;               // run folder
  std::uint64_t seed = 1;        // initialisation and data order
  int threads = 0;               // 0: every core
  // Where the program trains (examples/cli: `loopscale train --device`): auto (a usable CUDA
  // device when the program was built with one, else the host) | host | cuda. train<B>() itself
  // trains on its backend B whatever this says; a run may resume on another device.
  std::string device = "auto";
  // The GEMM arithmetic of a device run (backend/precision.hpp): bf16 (the default: bf16 inputs,
  // fp32 accumulation and master weights) | tf32 | fp32. The host's GEMMs are fp32 whatever it says.
  std::string precision = "bf16";
  int64 eval_every = 0;          // steps between evaluations; 0: only at the end
  int64 eval_tokens = 1 << 17;   // size of the fixed validation sample
  int64 checkpoint_every = 0;    // steps between checkpoints; 0: only at the end
  bool resume = false;           // continue from out/checkpoint.bin (a fresh start when there is none)
  double peak_flops = 0;         // FLOP/s the MFU is relative to; 0: measured at the start
  // Mixture-of-experts routing (only read when the spec has experts > 0); docs/moe.md.
  std::string moe_router = "softmax";    // softmax | sigmoid
  bool moe_renormalize = true;           // gates renormalised over the chosen experts
  std::string moe_balance = "aux:0.01";  // none | aux:COEF (Switch aux loss) | bias:RATE (aux-loss-free)
  double moe_z_loss = 0;                 // router z-loss coefficient
  double moe_capacity = 0;               // capacity factor; 0: dropless
  // A second token file mixed into training: each training window comes from it with probability
  // mix_frac (drawn per (step, sequence), so resumes stay exact), else from the corpus. The
  // validation sample stays the corpus's. `loopscale train --mix-probes FRAC` writes the built-in
  // probes' training text there (docs/eval.md).
  double mix_frac = 0;
  std::string mix_data;
  // 0: a window from mix_data starts at any token. S > 0: only at multiples of S, for a file laid
  // out in windows of S tokens that each begin with a whole item (--mix-probes writes its text so,
  // with S = seq_len + 1): a window drawn anywhere would mostly cut an item's context from its
  // answer, and a lookup whose key was cut off teaches nothing.
  int64 mix_stride = 0;
  // Data parallelism (train/dist/): each optimiser step's batch is cut into ranks x accum chunks of
  // batch / (ranks x accum) sequences; rank k computes chunks k*accum .. k*accum + accum - 1 one
  // after the other (gradient accumulation), and the chunks' gradients are summed over the ranks
  // as `reduction` says (allreduce | ordered, communicator.hpp) and divided by their count. How the
  // batch is split is not part of the run's identity: a run may resume with another split.
  int64 accum = 1;
  std::string reduction = "allreduce";
  // How a process's threads share a micro-batch's forward and backward pass (train/thread_lanes.hpp):
  // batch: each thread takes its share of the micro-batch's sequences (equal shares, one more in
  // the first threads where they do not divide) through a model of its own over the one set of
  // parameters (a gradient buffer each, summed in thread order), so the threads meet once per
  // pass instead of at every kernel; kernels: one model, all threads on each of its kernels; auto:
  // batch where it applies and pays (the host backend, more than one thread, at least a sequence
  // a thread, shares that keep the threads at least min_lane_balance busy), kernels elsewhere.
  // Not part of the run's identity.
  std::string thread_split = "auto";
};

NLOHMANN_DEFINE_TYPE_NON_INTRUSIVE_WITH_DEFAULT(TrainConfig, recipe, init, spec, batch, seq_len, tokens, flops, lr,
                                                lr_embedding, lr_lm_head, lr_norm, lr_lanes, lr_width_ref, lr_transfer,
                                                weight_decay, beta1, beta2, eps, muon_momentum, grad_clip, warmup, decay, final_lr_frac,
                                                softcap, data, out, seed, threads, device, precision, eval_every, eval_tokens,
                                                checkpoint_every, resume, peak_flops, moe_router, moe_renormalize,
                                                moe_balance, moe_z_loss, moe_capacity, mix_frac, mix_data, mix_stride, accum,
                                                reduction, thread_split)

inline Recipe parse_recipe(const std::string& s) {
  if (const std::optional<Recipe> r = parse_name<Recipe>(s)) return *r;
  throw config_error("config: recipe must be " + name_choices<Recipe>() + ", not '" + s + "'");
}

// A config with the recipe's defaults: what a config naming the recipe gets for every key it does
// not give. The adamw recipe's are TrainConfig{}'s.
inline TrainConfig recipe_defaults(Recipe r) {
  TrainConfig c;
  c.recipe = std::string(name_of(r));
  if (r == Recipe::paper) {
    // The paper's learning rates (nanochat's setup_optimizer defaults) as multipliers of the
    // matrices' 0.02: embedding 0.2, lm_head 0.004, norms 0.005, hyperconnection lanes 0.01.
    c.init = std::string(name_of(InitScheme::paper));
    c.lr = 0.02;
    c.lr_embedding = 10;
    c.lr_lm_head = 0.2;
    c.lr_norm = 0.25;
    c.lr_lanes = 0.5;
    c.lr_width_ref = 512;
    c.weight_decay = 0;
    c.beta1 = 0.8;
    c.beta2 = 0.95;
    c.eps = 1e-10;
    c.muon_momentum = 0.95;
    c.grad_clip = 0;
    c.warmup = 0;
    c.decay = "linear";
    c.final_lr_frac = 0.1;
  }
  return c;
}
inline TrainConfig recipe_defaults(const std::string& recipe) { return recipe_defaults(parse_recipe(recipe)); }

// Strict reading of a config: an unknown key is an error (a typo must not train the default). The
// recipe is read first; every key not given takes the recipe's default.
inline TrainConfig config_from_json(const nlohmann::json& j) {
  if (!j.is_object()) throw config_error("config: expected a JSON object");
  Recipe r = Recipe::adamw;
  if (const auto it = j.find("recipe"); it != j.end()) {
    if (!it->is_string()) throw config_error("config: recipe must be " + name_choices<Recipe>());
    r = parse_recipe(it->get<std::string>());
  }
  nlohmann::json full = recipe_defaults(r);  // its keys are the known ones
  for (const auto& [k, v] : j.items()) {
    if (k == "tokenizer" || k == "corpus") continue;  // config.json's records of the corpus (its tokenizer, its digest), not settings
    if (!full.contains(k)) throw config_error("config: unknown key '" + k + "'");
    // A value of another kind than the setting's ("lr": "0.1") said "type must be number, but is
    // string", naming neither the key nor the value.
    if (!full[k].is_null() && std::string_view(json_kind(full[k])) != json_kind(v))
      throw config_error("config: " + k + " must be " + json_kind(full[k]) + ", not " + json_brief(v));
    // A float where a whole number belongs: get<int64>() of 1e300 would be undefined (json_number.hpp).
    const nlohmann::json& d = full[k];
    const bool whole = k == "spec"               ? json_all_whole(v)
                       : k == "threads"          ? json_whole<int>(v)
                       : d.is_number_unsigned()  ? json_whole<std::uint64_t>(v)
                       : d.is_number_integer()   ? json_whole<int64>(v)
                                                 : true;
    if (!whole) throw config_error("config: " + k + " must hold whole numbers that fit, got " + v.dump().substr(0, 200));
    full[k] = v;
  }
  try {
    TrainConfig c;
    from_json(full, c);
    return c;
  } catch (const nlohmann::json::exception& e) {
    throw config_error(std::string("config: ") + e.what());
  }
}

// The length of a run: its optimiser steps, the tokens they train on (the config's tokens or FLOPs
// rounded down to whole steps, at least one) and the training FLOPs per token that convert them.
struct TrainingLength {
  int64 steps = 0, tokens = 0;
  double flops_per_token = 0;
};

inline TrainingLength training_length(const TrainConfig& c) {
  TrainingLength b;
  b.flops_per_token = static_cast<double>(count_flops(c.spec, c.seq_len).train);
  const int64 per_step = c.batch * c.seq_len;
  const double tokens = c.tokens > 0 ? static_cast<double>(c.tokens) : c.flops / b.flops_per_token;
  b.steps = std::max<int64>(1, static_cast<int64>(tokens / static_cast<double>(per_step)));
  b.tokens = b.steps * per_step;
  return b;
}

inline LrTransfer parse_lr_transfer(const std::string& s) {
  if (const std::optional<LrTransfer> t = parse_name<LrTransfer>(s)) return *t;
  throw config_error("config: lr_transfer must be " + name_choices<LrTransfer>() + ", not '" + s + "'");
}

// The rate corrections of a run (lr_transfer.hpp): D is the budget's tokens before they are rounded
// to whole steps, as the paper's code takes int(target FLOPs / FLOPs per token).
inline LrScales lr_scales_of(const TrainConfig& c) {
  const double tokens = c.tokens > 0 ? static_cast<double>(c.tokens)
                                     : std::floor(c.flops / static_cast<double>(count_flops(c.spec, c.seq_len).train));
  return lr_scales(parse_lr_transfer(c.lr_transfer), c.spec, static_cast<double>(c.batch * c.seq_len), tokens);
}

namespace detail {

inline Decay parse_decay(const std::string& s) {
  if (const std::optional<Decay> d = parse_name<Decay>(s)) return *d;
  throw config_error("config: decay must be " + name_choices<Decay>() + ", not '" + s + "'");
}

inline InitScheme parse_init(const std::string& s) {
  if (const std::optional<InitScheme> i = parse_name<InitScheme>(s)) return *i;
  throw config_error("config: init must be " + name_choices<InitScheme>() + ", not '" + s + "'");
}

inline void check(bool ok, const std::string& msg) {
  if (!ok) throw config_error("config: " + msg);
}

// The MoE routing options of a config.
inline kernels::MoeRouting routing_of(const TrainConfig& c) {
  kernels::MoeRouting r;
  r.router = parse_router(c.moe_router);
  r.renormalize = c.moe_renormalize;
  parse_balance(c.moe_balance, r);
  r.z_coef = c.moe_z_loss;
  r.capacity_factor = c.moe_capacity;
  kernels::validate(r);
  return r;
}

// Every check that needs no data: numbers, spec, budget.
inline void check_config(const TrainConfig& c) {
  const Recipe recipe = parse_recipe(c.recipe);
  parse_init(c.init);
  // Before validate: a spec too large to count is not checked further (spec/limits.hpp).
  if (const std::string f = size_fault(c.spec); !f.empty()) throw config_error("config: spec: " + f);
  validate(c.spec);
  routing_of(c);
  check(c.batch >= 1, "batch must be at least 1");
  check(c.seq_len >= 2, "seq_len must be at least 2");
  // Sizes the accounting can count without overflow (spec/limits.hpp).
  check(c.seq_len <= SpecLimits::seq_len && c.batch <= SpecLimits::batch_tokens / c.seq_len,
        "seq_len must be at most 2^20 and batch x seq_len at most 2^26 tokens (spec/limits.hpp)");
  check((c.tokens > 0) != (c.flops > 0), "give exactly one budget: tokens or flops");
  check(c.tokens >= 0 && c.flops >= 0 && std::isfinite(c.flops), "the budget must be positive");
  // training_length's step count must be a whole int64 (a cast of more is undefined).
  check((c.tokens > 0 ? static_cast<double>(c.tokens) : c.flops / static_cast<double>(count_flops(c.spec, c.seq_len).train)) /
                static_cast<double>(c.batch * c.seq_len) < 0x1p53,
        "the budget is more than 2^53 steps");
  check(c.lr > 0 && std::isfinite(c.lr), "lr must be positive");
  // Every float setting finite: an infinite one is accepted by a ">= 0" test and makes the loss
  // NaN a step or two in (--lr-embedding inf, --weight-decay inf, --softcap inf: "lower --lr"),
  // which blames the wrong setting. Each is named by its field and its train flag.
  for (const auto& [v, name] : {std::pair{c.lr_embedding, "lr_embedding (--lr-embedding)"}, {c.lr_lm_head, "lr_lm_head (--lr-lm-head)"},
                                {c.lr_norm, "lr_norm (--lr-norm)"}})
    check(v >= 0 && std::isfinite(v), concat(name, " = ", v, ": learning-rate multipliers must be finite numbers >= 0"));
  check(c.weight_decay >= 0 && std::isfinite(c.weight_decay), concat("weight_decay (--weight-decay) = ", c.weight_decay, ": must be a finite number >= 0"));
  check(c.lr_lanes >= 0 && std::isfinite(c.lr_lanes), "lr_lanes must not be negative");
  check(c.lr_width_ref >= 0 && std::isfinite(c.lr_width_ref), "lr_width_ref must not be negative (0: no width scaling)");
  check(c.muon_momentum >= 0 && c.muon_momentum < 1, "muon_momentum must be in [0, 1)");
  if (parse_lr_transfer(c.lr_transfer) == LrTransfer::hyperp) {
    check(recipe == Recipe::paper, "lr_transfer hyperp corrects the paper recipe's MuonH rates; the adamw recipe has none (use --recipe paper)");
    if (const std::string f = hyperp_fault(c.spec); !f.empty()) throw config_error("config: " + f);
    check(lr_scales_of(c).tokens >= 1, "lr_transfer hyperp needs a budget of at least one token (its rate correction divides by it)");
  }
  if (recipe == Recipe::paper) {
    check(c.weight_decay == 0, "the paper recipe has no weight decay (MuonH keeps each matrix at its initial norm); weight_decay must be 0");
  } else {
    const TrainConfig d = recipe_defaults(Recipe::adamw);
    check(c.muon_momentum == d.muon_momentum && c.lr_lanes == d.lr_lanes,
          "muon_momentum and lr_lanes are settings of the paper recipe; the adamw recipe does not read them");
  }
  check(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1, "beta1 and beta2 must be in [0, 1)");
  check(c.eps > 0 && std::isfinite(c.eps), "eps must be a finite positive number");
  // 0 turns clipping off; inf would too, in a way config.json cannot hold (JSON has no inf).
  check(c.grad_clip >= 0 && std::isfinite(c.grad_clip), concat("grad_clip (--grad-clip) = ", c.grad_clip, ": must be a finite number >= 0 (0: no clipping)"));
  check(c.warmup >= 0 && c.warmup < 1, "warmup is a fraction of the steps in [0, 1)");
  check(c.final_lr_frac >= 0 && c.final_lr_frac <= 1, "final_lr_frac must be in [0, 1]");
  // The kernels cap the logits in float (cap * tanh(x / cap)): a cap below float's smallest normal
  // number is a denormal or rounds to 0, and 0 turns the cap off, so --softcap 1e-320 trained
  // uncapped while config.json said 1e-320. Such caps are refused; 0 is the way to turn it off.
  check(c.softcap == 0 || (c.softcap >= std::numeric_limits<float>::min() && std::isfinite(c.softcap)),
        concat("softcap (--softcap) = ", c.softcap, ": must be 0 (off) or a finite number >= ", std::numeric_limits<float>::min(),
               " (the smallest normal float)"));
  // 0 measures the peak; a NaN would be written to config.json as null, which no reader takes back.
  check(c.peak_flops >= 0 && std::isfinite(c.peak_flops), "peak_flops must be a finite number >= 0 (0: measure the peak)");
  check(c.threads >= 0 && c.threads <= max_threads, "threads must be between 0 (every core) and " + std::to_string(max_threads));
  check(c.device == "auto" || c.device == "host" || c.device == "cuda", "device must be auto, host or cuda, not '" + c.device + "'");
  check(parse_precision(c.precision).has_value(), "precision must be bf16, tf32 or fp32, not '" + c.precision + "'");
  check(c.eval_every >= 0 && c.checkpoint_every >= 0, "eval_every and checkpoint_every must not be negative");
  check(c.eval_tokens >= c.seq_len, "eval_tokens (" + std::to_string(c.eval_tokens) + ") must hold at least one sequence of seq_len " +
                                         std::to_string(c.seq_len) + " tokens; raise --eval-tokens or lower --seq-len");
  check(!c.data.empty(), "no data folder given");
  check(!c.out.empty(), "no output folder given");
  check(c.mix_frac >= 0 && c.mix_frac < 1, "mix_frac must be in [0, 1)");
  check(c.mix_frac == 0 || !c.mix_data.empty(), "mix_frac needs mix_data, the token file to mix in");
  check(c.mix_data.empty() || c.mix_frac > 0, "mix_data is given but mix_frac is 0");
  check(c.mix_stride == 0 || (c.mix_frac > 0 && c.mix_stride >= c.seq_len + 1),
        "mix_stride must be 0, or at least seq_len + 1 (a whole window) with mix_frac > 0");
  parse_decay(c.decay);
  check(c.accum >= 1, "accum (micro-batches per rank and step) must be at least 1");
  check(parse_name<Reduction>(c.reduction).has_value(), "reduction must be " + std::string(names_of(Reduction{}).choices()) + ", not '" + c.reduction + "'");
  check(c.thread_split == "auto" || c.thread_split == "batch" || c.thread_split == "kernels",
        "thread_split must be auto, batch or kernels, not '" + c.thread_split + "'");
}

// Sequences each forward pass of a rank computes: batch / (ranks x accum), which must be whole.
inline int64 micro_batch(const TrainConfig& c, int ranks) {
  const int64 chunks = static_cast<int64>(ranks) * c.accum;
  if (c.batch % chunks != 0)
    throw config_error("config: batch " + std::to_string(c.batch) + " does not split evenly over " + std::to_string(ranks) +
                       (ranks == 1 ? " rank" : " ranks") + " x " + std::to_string(c.accum) +
                       " micro-batches (accum); give a batch that is a multiple of " + std::to_string(chunks));
  return c.batch / chunks;
}

}  // namespace detail
}  // namespace loopscale::train
