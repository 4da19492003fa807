// The model-spec flags shared by `account`, `train` and the sweep commands, and their translation
// into a ModelSpec: the flags describe a family (spec/family.hpp) and --r and --d-model pick its
// member, through the same builder the sweep planner uses. Defaults are the iso-depth paper's family
// (depth 20, prelude 2, coda 2).
#pragma once

#include <algorithm>
#include <cmath>
#include <numeric>
#include <optional>
#include <tuple>
#include <string>
#include <utility>
#include <vector>

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
  // --depth was given (on the command line, not the default nor read back from a spec): with
  // --recur-layers, which then sets the block, it must agree with prelude + recur-layers x r + coda.
  bool depth_given = false;
  std::optional<int64> recur_layers;
  int64 r = 1;
  std::string inject;  // empty: linear for r > 1, none for r = 1
  std::string bptt = "full";
  std::string activation = "relu2";
  double mlp_mult = 4.0;
  // The expansion as an exact fraction, read back from a spec (from_spec): 8/3 is no multiple of
  // 0.001, so as a double it would not pass --mlp-mult's rule. --mlp-mult given replaces it.
  std::optional<std::pair<int64, int64>> mlp_fraction;
  int64 experts = 0;
  int64 top_k = 0;
  int64 expert_ff = 0;
  bool shared_expert = false;
  int64 moe_every = 1;
  int64 moe_first_dense = 0;
  std::string moe_layers = "all";

  // The help's heading of the spec flags; a test reads the flags under it from `train --help`.
  static constexpr const char* group = "Model spec";

  void add_to(CLI::App& app) {
    const std::size_t before = app.get_options().size();
    app.add_option("--d-model", d_model, "model width (required)");
    app.add_option("--heads", heads, "attention heads (default: d_model / head_dim)");
    app.add_option("--head-dim", head_dim, "head dimension (default 128, or d_model / heads)");
    app.add_option("--kv-heads", kv_heads, "key/value heads for grouped attention (default: heads)");
    app.add_option("--vocab", vocab, "vocabulary size")->capture_default_str();
    app.add_option("--vocab-multiple", vocab_multiple, "pad the vocabulary to a multiple of this")->capture_default_str();
    app.add_option("--prelude", prelude, "unshared layers before the recurrence")->capture_default_str();
    app.add_option("--coda", coda, "unshared layers after the recurrence")->capture_default_str();
    app.add_option("--depth", depth, "effective depth; sets --recur-layers = (depth - prelude - coda) / r when that is not given")
        ->capture_default_str()
        ->each([this](const std::string&) { depth_given = true; });
    app.add_option("--recur-layers", recur_layers, "layers k of the shared block");
    app.add_option("--r", r, "recurrences of the shared block")->capture_default_str();
    app.add_option("--inject", inject, "none | linear | additive | passthrough | hyper:L | hyper-shared:L (L lanes) (default: linear for r > 1, none for r = 1)");
    app.add_option("--bptt", bptt, "recurrences that get gradients: full | half | K")->capture_default_str();
    app.add_option("--activation", activation, "relu2 | gelu | swiglu")->capture_default_str();
    app.add_option("--mlp-mult", mlp_mult, "MLP expansion (hidden = mult * d_model): a multiple of 0.001 whose fraction in lowest terms has terms <= 256 (2.5, 2.75)")->capture_default_str();
    app.add_option("--experts", experts, "routed experts per MoE layer (0: dense MLP)")->capture_default_str();
    app.add_option("--top-k", top_k, "experts per token (default 1)")->check(at_least(1));
    app.add_option("--expert-ff", expert_ff, "hidden width of one expert (default: mlp-mult * d_model)")->check(at_least(1));
    app.add_flag("--shared-expert", shared_expert, "add one always-on expert");
    app.add_option("--moe-every", moe_every, "every N-th layer is MoE (2: dense and MoE layers alternate)")->capture_default_str();
    app.add_option("--moe-first-dense", moe_first_dense, "the first K layers stay dense (DeepSeek style)")->capture_default_str();
    app.add_option("--moe-layers", moe_layers, "where MoE layers may go: all (prelude, block, coda) | recur (the shared block)")
        ->capture_default_str();
    const std::vector<CLI::Option*> options = app.get_options();
    for (std::size_t i = before; i < options.size(); ++i) options[i]->group(group);
  }

  // Every spec flag with the member it sets: the one list of them (add_to gives each its help).
  // train --config reads it to tell which flags were given and to lay them over the config's spec.
  template <class F>
  static void for_each_flag(F&& f) {
    f("--d-model", &SpecFlags::d_model), f("--heads", &SpecFlags::heads), f("--head-dim", &SpecFlags::head_dim);
    f("--kv-heads", &SpecFlags::kv_heads), f("--vocab", &SpecFlags::vocab), f("--vocab-multiple", &SpecFlags::vocab_multiple);
    f("--prelude", &SpecFlags::prelude), f("--coda", &SpecFlags::coda), f("--depth", &SpecFlags::depth);
    f("--recur-layers", &SpecFlags::recur_layers), f("--r", &SpecFlags::r), f("--inject", &SpecFlags::inject);
    f("--bptt", &SpecFlags::bptt), f("--activation", &SpecFlags::activation), f("--mlp-mult", &SpecFlags::mlp_mult);
    f("--experts", &SpecFlags::experts), f("--top-k", &SpecFlags::top_k), f("--expert-ff", &SpecFlags::expert_ff);
    f("--shared-expert", &SpecFlags::shared_expert), f("--moe-every", &SpecFlags::moe_every);
    f("--moe-first-dense", &SpecFlags::moe_first_dense), f("--moe-layers", &SpecFlags::moe_layers);
  }

  // Whether any spec flag was given on `app` (which add_to was called on).
  static bool any_given(const CLI::App& app) {
    bool any = false;
    for_each_flag([&](const char* name, auto) { any = any || app.get_option(name)->count() > 0; });
    return any;
  }

  // The flags given on `app` copied from `given` (the object add_to bound them to) onto these.
  void override_with(const SpecFlags& given, const CLI::App& app) {
    for_each_flag([&](const char* name, auto member) {
      if (app.get_option(name)->count() > 0) this->*member = given.*member;
    });
    if (app.get_option("--mlp-mult")->count() > 0) mlp_fraction.reset();
    depth_given = app.get_option("--depth")->count() > 0;
    // --experts 0 over an MoE spec makes it dense: the MoE settings read back from it go with the
    // experts (those given stay, and are refused as needing experts).
    if (experts == 0) {
      const SpecFlags d;
      const auto given_flag = [&](const char* name) { return app.get_option(name)->count() > 0; };
      if (!given_flag("--top-k")) top_k = d.top_k;
      if (!given_flag("--expert-ff")) expert_ff = d.expert_ff;
      if (!given_flag("--shared-expert")) shared_expert = d.shared_expert;
      if (!given_flag("--moe-every")) moe_every = d.moe_every;
      if (!given_flag("--moe-first-dense")) moe_first_dense = d.moe_first_dense;
      if (!given_flag("--moe-layers")) moe_layers = d.moe_layers;
    }
  }

  // The flags that build `m`, read back from it, so that flags given as well can replace some of
  // them (train --config). The rule where flags depend on each other: --depth is read back as the
  // effective depth, prelude + r x block + coda, and --recur-layers is left unset, so the block's
  // layer count follows from --depth and --r as on the command line: --r alone keeps the effective
  // depth (the iso-depth family; an r that does not divide it is refused), --recur-layers keeps the
  // block instead. MoE layers only in the shared block are read back as --moe-layers recur. A spec
  // the flags cannot build (layers that differ otherwise, rope or qk_norm off, a dense hidden
  // width, a per-layer norm placement) is refused: `what` names where it came from.
  static SpecFlags from_spec(const ModelSpec& m, const std::string& what) {
    SpecFlags f;
    f.d_model = m.d_model;
    f.vocab = m.vocab;
    f.vocab_multiple = m.vocab_multiple;
    f.prelude = m.prelude.size();
    f.coda = m.coda.size();
    f.r = m.recur.r;
    f.depth = effective_depth(m);
    f.recur_layers.reset();
    // The layers in order, and which are MoE: the dense layer (or, in an all-MoE model, an expert's
    // shape) gives attention, activation and expansion.
    std::vector<const LayerSpec*> all;
    for (const StackSpec* st : {&m.prelude, &m.recur.block, &m.coda})
      for (const LayerSpec& l : st->layers) all.push_back(&l);
    if (all.empty()) throw usage_error(what + ": the spec has no layers");
    const LayerSpec* dense = nullptr;
    const LayerSpec* moe = nullptr;
    for (const LayerSpec* l : all) {
      if (!l->ffn.moe()) dense = dense ? dense : l;
      else moe = moe ? moe : l;
    }
    const LayerSpec& base = dense ? *dense : *moe;
    f.heads = base.attn.heads;
    f.head_dim = base.attn.head_dim;
    f.kv_heads = base.attn.kv_heads;
    f.activation = std::string(name_of(base.ffn.act));
    f.mlp_mult = static_cast<double>(base.ffn.mult_num) / static_cast<double>(base.ffn.mult_den);
    f.mlp_fraction = std::pair<int64, int64>{base.ffn.mult_num, base.ffn.mult_den};
    if (moe) {
      f.experts = moe->ffn.experts;
      f.top_k = moe->ffn.top_k;
      f.expert_ff = moe->ffn.hidden;
      f.shared_expert = moe->ffn.shared_expert;
      const bool outside_block = std::any_of(m.prelude.layers.begin(), m.prelude.layers.end(), [](const LayerSpec& l) { return l.ffn.moe(); }) ||
                                 std::any_of(m.coda.layers.begin(), m.coda.layers.end(), [](const LayerSpec& l) { return l.ffn.moe(); });
      const bool recur = !outside_block && (f.prelude > 0 || f.coda > 0);
      f.moe_layers = recur ? "recur" : "all";
      // Positions of the MoE layers in the scope's order (the block's, or prelude, block, coda).
      const std::size_t from = recur ? m.prelude.layers.size() : 0;
      const std::size_t to = recur ? from + m.recur.block.layers.size() : all.size();
      std::vector<int64> at;
      for (std::size_t i = from; i < to; ++i)
        if (all[i]->ffn.moe()) at.push_back(static_cast<int64>(i - from));
      f.moe_first_dense = at.front();
      // One MoE layer: a period that reaches past the scope's end.
      f.moe_every = at.size() > 1 ? at[1] - at[0] : static_cast<int64>(to - from) - at.front();
    }
    // The default injection for its r (linear looped, none at r = 1) reads back as the default, so
    // that --r given changes it as on the command line; any other is kept as given.
    const bool looped = m.recur.r > 1;
    const Inject by_default = looped ? Inject::linear : Inject::none;
    f.inject = m.recur.inject == InjectSpec{by_default, 0} ? std::string() : inject_name(m.recur.inject);
    f.bptt = bptt_name(m.recur.bptt);
    // The flags must build the spec again, or some of it was not theirs to describe.
    ModelSpec again;
    try {
      again = f.build();
    } catch (const std::exception& e) {
      throw usage_error(what + ": its spec is not one the spec flags build (" + e.what() + "); give the whole spec by flags with --d-model, or drop the spec flags");
    }
    if (!(again == m))
      throw usage_error(what + ": its spec is not one the spec flags build (it holds a setting no flag sets); give the whole spec by flags with --d-model, or drop the spec flags");
    return f;
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
      // --recur-layers sets the block, so a --depth given beside it was ignored without a word
      // (`--depth 20 --recur-layers 3 --r 4` counted depth 16). Each term is at most --depth
      // (<= SpecLimits::depth, checked by build) before the sum is taken: no overflow.
      const bool fits = prelude <= depth && coda <= depth && *recur_layers <= depth;
      if (depth_given && !(fits && prelude + *recur_layers * r + coda == depth))
        throw usage_error(concat("--depth ", depth, " contradicts --recur-layers ", *recur_layers, ": the effective depth is prelude + recur-layers x r + coda = ",
                                 prelude, " + ", *recur_layers, " x ", r, " + ", coda, " = ",
                                 static_cast<double>(prelude) + static_cast<double>(*recur_layers) * static_cast<double>(r) + static_cast<double>(coda),
                                 " (give one of --depth and --recur-layers, or values that agree)"));
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
    if (mlp_fraction) std::tie(f.layer.ffn.mult_num, f.layer.ffn.mult_den) = *mlp_fraction;
    else std::tie(f.layer.ffn.mult_num, f.layer.ffn.mult_den) = expansion_fraction(mlp_mult, "--mlp-mult");
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

  // The help's heading of the routing flags.
  static constexpr const char* group = "MoE routing";

  void add_to(CLI::App& app) {
    const std::size_t before = app.get_options().size();
    app.add_option("--router", router, "MoE router scores: softmax | sigmoid (default softmax)");
    app.add_option("--balance", balance, "MoE load balancing: none | aux:COEF (Switch aux loss) | bias:RATE (aux-loss-free); default aux:0.01");
    app.add_option("--z-loss", z_loss, "router z-loss coefficient (default 0: off)");
    app.add_option("--capacity", capacity, "expert capacity factor > 0; tokens beyond it are dropped (default: dropless)");
    app.add_flag("--no-renormalize", no_renormalize, "use the chosen experts' scores as gates without renormalising them");
    const std::vector<CLI::Option*> options = app.get_options();
    for (std::size_t i = before; i < options.size(); ++i) options[i]->group(group);
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

// The spec and routing flags given on `app`, as named in the help: every option under the headings
// SpecFlags::group and MoeFlags::group. `account --compare` refuses them, for they describe the one
// spec the flags build, not the two it reads.
inline std::vector<std::string> given_spec_flags(const CLI::App& app) {
  std::vector<std::string> given;
  for (const CLI::Option* o : app.get_options())
    if ((o->get_group() == SpecFlags::group || o->get_group() == MoeFlags::group) && o->count() > 0) given.push_back(o->get_name());
  return given;
}

}  // namespace loopscale::cli
