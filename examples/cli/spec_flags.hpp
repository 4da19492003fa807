// The model-spec flags shared by `account`, `train` and the sweep commands, and their translation
// into a ModelSpec. Defaults are the iso-depth paper's family (depth 20, prelude 2, coda 2).
#pragma once

#include <cmath>
#include <numeric>
#include <optional>
#include <string>

#include "cli.hpp"
#include "loopscale/account/conventions.hpp"
#include "loopscale/arch/spec.hpp"
#include "loopscale/train/kernels/moe_router.hpp"

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

  void add_to(CLI::App& app) {
    app.add_option("--d-model", d_model, "model width")->required();
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
    app.add_option("--inject", inject, "linear | additive | passthrough | hyper:K (default: linear for r > 1, none for r = 1)");
    app.add_option("--bptt", bptt, "recurrences that get gradients: full | half | K")->capture_default_str();
    app.add_option("--activation", activation, "relu2 | gelu | swiglu")->capture_default_str();
    app.add_option("--mlp-mult", mlp_mult, "MLP expansion (hidden = mult * d_model)")->capture_default_str();
    app.add_option("--experts", experts, "routed experts per MoE layer (0: dense MLP)")->capture_default_str();
    app.add_option("--top-k", top_k, "experts per token");
    app.add_option("--expert-ff", expert_ff, "hidden width of one expert (default: mlp-mult * d_model)");
    app.add_flag("--shared-expert", shared_expert, "add one always-on expert");
  }

  ModelSpec build() const {
    ModelSpec m;
    m.d_model = d_model;
    m.vocab = vocab;
    m.vocab_multiple = vocab_multiple;
    if (r < 1) throw usage_error("--r must be at least 1");
    if (prelude < 0 || coda < 0) throw usage_error("--prelude and --coda must not be negative");
    int64 k = 0;
    if (recur_layers) {
      k = *recur_layers;
      if (k < 0) throw usage_error("--recur-layers must not be negative");
    } else {
      const int64 rest = depth - prelude - coda;
      if (rest < 0) throw usage_error("--depth must be at least --prelude + --coda");
      if (rest % r != 0)
        throw usage_error("--r " + std::to_string(r) + " does not divide depth - prelude - coda = " + std::to_string(rest) +
                          "; pass --recur-layers or choose another r");
      k = rest / r;
    }
    LayerSpec layer;
    if (heads < 0 || head_dim < 0 || kv_heads < 0) throw usage_error("--heads, --head-dim and --kv-heads must not be negative");
    layer.attn.heads = heads;
    layer.attn.head_dim = head_dim;
    layer.attn.kv_heads = kv_heads;
    if (activation == "relu2") layer.ffn.act = Activation::relu2;
    else if (activation == "gelu") layer.ffn.act = Activation::gelu;
    else if (activation == "swiglu") layer.ffn.act = Activation::swiglu;
    else throw usage_error("--activation must be relu2, gelu or swiglu, not '" + activation + "'");
    if (!(mlp_mult > 0) || !std::isfinite(mlp_mult)) throw usage_error("--mlp-mult must be positive");
    // The expansion as a fraction (three decimals) so hidden = d * num / den stays integral.
    int64 num = std::llround(mlp_mult * 1000), den = 1000;
    const int64 g = std::gcd(num, den);
    layer.ffn.mult_num = num / g;
    layer.ffn.mult_den = den / g;
    if (experts < 0) throw usage_error("--experts must not be negative");
    if (expert_ff < 0) throw usage_error("--expert-ff must not be negative");
    if (top_k < 0) throw usage_error("--top-k must not be negative");
    layer.ffn.experts = experts;
    layer.ffn.top_k = experts > 0 && top_k == 0 ? 1 : top_k;
    layer.ffn.hidden = expert_ff;
    layer.ffn.shared_expert = shared_expert;
    if (experts == 0 && (top_k > 0 || expert_ff > 0 || shared_expert))
      throw usage_error("--top-k, --expert-ff and --shared-expert need --experts >= 1");
    m.prelude = {prelude, layer};
    m.coda = {coda, layer};
    m.recur.block = {k, layer};
    m.recur.r = r;
    m.recur.inject = parse_inject(inject.empty() ? (r > 1 ? "linear" : "none") : inject);
    m.recur.bptt = parse_bptt(bptt);
    validate(m);
    return m;
  }

  static InjectSpec parse_inject(const std::string& s) {
    if (s == "none") return {Inject::none, 0};
    if (s == "linear") return {Inject::linear, 0};
    if (s == "additive") return {Inject::additive, 0};
    if (s == "passthrough") return {Inject::passthrough, 0};
    if (s.rfind("hyper:", 0) == 0) {
      const std::string k = s.substr(6);
      char* end = nullptr;
      const long long lanes = std::strtoll(k.c_str(), &end, 10);
      if (k.empty() || *end != '\0' || lanes < 1) throw usage_error("--inject hyper:K needs a lane count K >= 1, not '" + k + "'");
      return {Inject::hyper, lanes};
    }
    throw usage_error("--inject must be linear, additive, passthrough, hyper:K or none, not '" + s + "'");
  }

  static int64 parse_bptt(const std::string& s) {
    if (s == "full") return full_bptt;
    if (s == "half") return half_bptt;
    char* end = nullptr;
    const long long k = std::strtoll(s.c_str(), &end, 10);
    if (s.empty() || *end != '\0' || k < 1) throw usage_error("--bptt must be full, half or a positive count, not '" + s + "'");
    return k;
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
  train::kernels::MoeRouting routing(const ModelSpec& m) const {
    bool moe = false;
    for (const StackSpec* s : {&m.prelude, &m.recur.block, &m.coda}) moe |= s->layers > 0 && s->layer.ffn.experts > 0;
    if (any() && !moe) throw usage_error("--router, --balance, --z-loss, --capacity and --no-renormalize need --experts >= 1");
    train::kernels::MoeRouting r;
    if (router) r.router = train::kernels::parse_router(*router);
    if (balance) train::kernels::parse_balance(*balance, r);
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
