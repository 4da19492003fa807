// The model-spec flags shared by `account`, `train` and the sweep commands, and their translation
// into a ModelSpec: the flags describe a family (spec/family.hpp) and --r and --d-model pick its
// member, through the same builder the sweep planner uses. Defaults are the iso-depth paper's family
// (depth 20, prelude 2, coda 2).
#pragma once

#include <cmath>
#include <numeric>
#include <optional>
#include <tuple>
#include <string>

#include "cli.hpp"
#include "loopscale/account/conventions.hpp"
#include "loopscale/spec/family.hpp"
#include "loopscale/spec/limits.hpp"
#include "loopscale/spec/spec.hpp"
#include "loopscale/train/moe_routing.hpp"

namespace loopscale::cli {

struct SpecFlags {
  int64 d_model = 0;
  int64 heads = 0;
  int64 head_dim = 0;
  int64 kv_heads = 0;
  int64 vocab = 32064;
  int64 vocab_multiple = 64;
  int64 prelude = 2;
  int64 coda = 2;
  int64 depth = 20;
  std::optional<int64> recur_layers;
  int64 r = 1;
  std::string inject;  // empty: linear for r > 1, none for r = 1
  std::string bptt = "full";
  std::string activation = "relu2";
  double mlp_mult = 4.0;
  int64 experts = 0;
  int64 top_k = 0;
  int64 expert_ff = 0;
  bool shared_expert = false;
  int64 moe_every = 1;
  int64 moe_first_dense = 0;
  std::string moe_layers = "all";

  void add_to(CLI::App& app) {
    app.add_option("--d-model", d_model, "model width (required)");
    app.add_option("--heads", heads, "attention heads (default: d_model / head_dim)");
    app.add_option("--head-dim", head_dim, "head dimension (default 128, or d_model / heads)");
    app.add_option("--kv-heads", kv_heads, "key/value heads for grouped attention (default: heads)");
    app.add_option("--vocab", vocab, "vocabulary size")->capture_default_str();
    app.add_option("--vocab-multiple", vocab_multiple, "pad the vocabulary to a multiple of this")->capture_default_str();
    app.add_option("--prelude", prelude, "unshared layers before the recurrence")->capture_default_str();
    app.add_option("--coda", coda, "unshared layers after the recurrence")->capture_default_str();
    app.add_option("--depth", depth, "effective depth; sets --recur-layers = (depth - prelude - coda) / r when that is not given")
        ->capture_default_str();
    app.add_option("--recur-layers", recur_layers, "layers k of the shared block");
    app.add_option("--r", r, "recurrences of the shared block")->capture_default_str();
    app.add_option("--inject", inject, "none | linear | additive | passthrough | hyper:L | hyper-shared:L (L lanes) (default: linear for r > 1, none for r = 1)");
    app.add_option("--bptt", bptt, "recurrences that get gradients: full | half | K")->capture_default_str();
    app.add_option("--activation", activation, "relu2 | gelu | swiglu")->capture_default_str();
    app.add_option("--mlp-mult", mlp_mult, "MLP expansion (hidden = mult * d_model)")->capture_default_str();
    app.add_option("--experts", experts, "routed experts per MoE layer (0: dense MLP)")->capture_default_str();
    app.add_option("--top-k", top_k, "experts per token (default 1)")->check(at_least(1));
    app.add_option("--expert-ff", expert_ff, "hidden width of one expert (default: mlp-mult * d_model)")->check(at_least(1));
    app.add_flag("--shared-expert", shared_expert, "add one always-on expert");
    app.add_option("--moe-every", moe_every, "every N-th layer is MoE (2: dense and MoE layers alternate)")->capture_default_str();
    app.add_option("--moe-first-dense", moe_first_dense, "the first K layers stay dense (DeepSeek style)")->capture_default_str();
    app.add_option("--moe-layers", moe_layers, "where MoE layers may go: all (prelude, block, coda) | recur (the shared block)")
        ->capture_default_str();
  }

  // The family the flags describe (vocab, layers, MoE placement, injection, BPTT).
  FamilySpec family() const {
    FamilySpec f;
    f.vocab = vocab;
    f.vocab_multiple = vocab_multiple;
    if (prelude < 0 || coda < 0) throw usage_error("--prelude and --coda must not be negative");
    f.prelude = prelude;
    f.coda = coda;
    f.depth = depth;
    if (recur_layers) {
      if (*recur_layers < 0) throw usage_error("--recur-layers must not be negative");
      f.block_layers = *recur_layers;
    } else if (depth < prelude + coda) {
      throw usage_error("--depth must be at least --prelude + --coda");
    }
    if (heads < 0 || head_dim < 0 || kv_heads < 0) throw usage_error("--heads, --head-dim and --kv-heads must not be negative");
    f.layer.attn.heads = heads;
    f.layer.attn.head_dim = head_dim;
    f.layer.attn.kv_heads = kv_heads;
    const auto act = parse_name<Activation>(activation);
    if (!act) throw usage_error("--activation must be " + name_choices<Activation>() + ", not '" + activation + "'");
    f.layer.ffn.act = *act;
    if (!(mlp_mult > 0) || !std::isfinite(mlp_mult)) throw usage_error("--mlp-mult must be positive");
    std::tie(f.layer.ffn.mult_num, f.layer.ffn.mult_den) = expansion_fraction(mlp_mult);
    if (experts < 0) throw usage_error("--experts must not be negative");
    if (expert_ff < 0) throw usage_error("--expert-ff must not be negative");
    if (top_k < 0) throw usage_error("--top-k must not be negative");
    const bool placed = moe_every != 1 || moe_first_dense != 0 || moe_layers != "all";
    if (experts == 0 && (top_k > 0 || expert_ff > 0 || shared_expert || placed))
      throw usage_error("--top-k, --expert-ff, --shared-expert, --moe-every, --moe-first-dense and --moe-layers need --experts >= 1");
    if (experts > 0) {
      f.moe = f.layer.ffn;  // the dense MLP's activation and expansion, unless --expert-ff gives the width
      f.moe.experts = experts;
      f.moe.top_k = top_k == 0 ? 1 : top_k;
      f.moe.hidden = expert_ff;
      f.moe.shared_expert = shared_expert;
      if (moe_every < 1) throw usage_error("--moe-every must be at least 1");
      if (moe_first_dense < 0) throw usage_error("--moe-first-dense must not be negative");
      const auto scope = parse_name<MoeScope>(moe_layers);
      if (!scope) throw usage_error("--moe-layers must be " + name_choices<MoeScope>() + ", not '" + moe_layers + "'");
      f.placement = {*scope, moe_every, moe_first_dense};
    }
    const auto inj = loopscale::parse_inject(inject.empty() ? "linear" : inject);
    if (!inj) throw usage_error(std::string("--inject must be ") + inject_choices + ", not '" + inject + "'");
    f.inject = *inj;
    const auto b = loopscale::parse_bptt(bptt);
    if (!b) throw usage_error(std::string("--bptt must be ") + bptt_choices + ", not '" + bptt + "'");
    f.bptt = *b;
    return f;
  }

  ModelSpec build() const {
    if (d_model == 0) throw usage_error("--d-model is required");
    if (r < 1) throw usage_error("--r must be at least 1");
    // Before anything multiplies them: sizes the accounting's int64 arithmetic cannot count
    // (spec/limits.hpp) would overflow silently (--d-model 4294967296 once counted 184.68G parameters).
    if (d_model > SpecLimits::width) throw usage_error(concat("--d-model ", d_model, " is above the limit ", SpecLimits::width, " (spec/limits.hpp)"));
    if (r > SpecLimits::depth || depth > SpecLimits::depth)
      throw usage_error(concat("--r and --depth must be at most ", SpecLimits::depth, " (spec/limits.hpp)"));
    const ModelSpec m = build_checked();
    if (const std::string f = size_fault(m); !f.empty()) throw usage_error(f);
    // Experts asked for but placed nowhere (--moe-first-dense at or past the depth, say) would be
    // counted as the dense model they leave.
    if (experts > 0 && !has_moe(m))
      throw usage_error("--experts " + std::to_string(experts) + ": the placement (--moe-every, --moe-first-dense, --moe-layers) puts no MoE layer in the model");
    return m;
  }

 private:
  ModelSpec build_checked() const {
    const FamilySpec f = family();
    if (f.bptt > r) throw usage_error("--bptt " + bptt + " exceeds --r " + std::to_string(r));
    if (r == 1 && !inject.empty() && inject != "none") {
      // An explicit injection on a one-recurrence model is kept (it is trained and counted).
      ModelSpec m = build_member(f);
      m.recur.inject = f.inject;
      validate(m);
      return m;
    }
    if (r > 1 && inject == "none") throw usage_error("--inject none needs --r 1 (r > 1 needs an injection)");
    return build_member(f);
  }

  ModelSpec build_member(const FamilySpec& f) const {
    try {
      return family_member(f, r, d_model);
    } catch (const spec_error& e) {
      if (!recur_layers && std::string(e.what()).find("r does not divide") != std::string::npos)
        throw usage_error("--r " + std::to_string(r) + " does not divide depth - prelude - coda = " +
                          std::to_string(depth - prelude - coda) + "; pass --recur-layers or choose another r");
      throw;
    }
  }
};

inline Convention parse_convention_flag(const std::string& s) {
  if (auto c = parse_convention(s)) return *c;
  throw usage_error("--convention must be paper, causal, kaplan or chinchilla, not '" + s + "'");
}

// The MoE routing flags of `account` and `train`. They change neither the parameter count nor the
// accounting's FLOPs (capacity drops aside), so `account` only checks them; `train` passes them on.
struct MoeFlags {
  std::optional<std::string> router, balance;
  std::optional<double> z_loss, capacity;
  bool no_renormalize = false;

  void add_to(CLI::App& app) {
    app.add_option("--router", router, "MoE router scores: softmax | sigmoid (default softmax)");
    app.add_option("--balance", balance, "MoE load balancing: none | aux:COEF (Switch aux loss) | bias:RATE (aux-loss-free); default aux:0.01");
    app.add_option("--z-loss", z_loss, "router z-loss coefficient (default 0: off)");
    app.add_option("--capacity", capacity, "expert capacity factor > 0; tokens beyond it are dropped (default: dropless)");
    app.add_flag("--no-renormalize", no_renormalize, "use the chosen experts' scores as gates without renormalising them");
  }

  bool any() const { return router || balance || z_loss || capacity || no_renormalize; }

  // Checks the values (one line, exit 2) and that the spec has experts to route to.
  train::MoeRouting routing(const ModelSpec& m) const {
    if (any() && !has_moe(m)) throw usage_error("--router, --balance, --z-loss, --capacity and --no-renormalize need --experts >= 1");
    train::MoeRouting r;
    if (router) r.router = train::parse_router(*router);
    if (balance) train::parse_balance(*balance, r);
    if (z_loss) {
      if (!(*z_loss >= 0) || !std::isfinite(*z_loss)) throw usage_error("--z-loss must not be negative");
      r.z_coef = *z_loss;
    }
    if (capacity) {
      if (!(*capacity > 0) || !std::isfinite(*capacity)) throw usage_error("--capacity must be positive (leave it out for dropless routing)");
      r.capacity_factor = *capacity;
    }
    r.renormalize = !no_renormalize;
    return r;
  }
};

}  // namespace loopscale::cli
