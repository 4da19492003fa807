// A sweep spec and its plan. The spec names an iso-depth family (depth, prelude, coda, the r values,
// injection, BPTT), compute budgets C in FLOPs with the width multipliers s tried at each, and the
// training settings shared by every run. The plan turns it into runs using the accounting only:
// F = train FLOPs per token (account/flops.hpp), tokens D = C / F, steps = C / (F * batch tokens),
// the iso-depth paper's convention. Each run's model is the family's member at (r, d) from the
// one builder of family members (spec/family.hpp). A run that cannot be trained as planned (fewer tokens than one batch, memory
// above the limit) stays in the plan with its problem written next to it, so nobody mistakes a
// missing point for a finished sweep.
//
// Mixture of experts: a spec with `experts` (a list of expert counts E) makes the FFN of the layers
// `moe_layers`, `moe_every` and `moe_first_dense` pick a routed MoE of E experts, top_k per token,
// and sweeps E as one more axis: runs (C, E, r, s), ids "C1e11-E4-r2-s1". Without `experts` the
// spec, its JSON, its fingerprint and its run ids are exactly those of a dense sweep. The law-facing
// counts of an MoE run (the looped-MoE law's variables, law/looped_moe.hpp) come from the same
// accounting: N_act = once_active + rec_active, N_loop = rec_active, N_total = non-embedding params,
// m = N_act / N_total, all without embeddings, like N of the dense law.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "loopscale/account/account.hpp"
#include "loopscale/account/injection_convention.hpp"
#include "loopscale/account/memory.hpp"
#include "loopscale/spec/family.hpp"
#include "loopscale/spec/limits.hpp"
#include "loopscale/spec/spec.hpp"
#include "loopscale/spec/spec_json.hpp"
#include "loopscale/util/json_number.hpp"
#include "loopscale/util/json_parse.hpp"

namespace loopscale::sweep {

// Bad sweep input (spec file, preset name, results that do not belong together).
struct sweep_error : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct SweepSpec {
  std::string name = "sweep";
  // The iso-depth family: effective depth = prelude + k r + coda for every r.
  int64 depth = 20;
  int64 prelude = 2;
  int64 coda = 2;
  std::vector<int64> r = {1, 2, 4, 8};
  std::string inject = "linear";    // for r > 1 (r = 1 has none): linear | additive | passthrough | hyper:L (lanes)
  std::string bptt = "full";        // full | half | a count of recurrences
  std::string r1_layout = "split";  // the r = 1 member: split (prelude + k + coda) | flat (depth layers in one block, the paper's code); spec/family.hpp
  // Width rule d = ceil(width_per_s * s / width_round) * width_round; the paper: 64 s up to 128.
  int64 width_per_s = 64;
  int64 width_round = 128;
  int64 head_dim = 128;
  int64 vocab = 32000;
  int64 vocab_multiple = 64;
  int64 seq_len = 2048;
  int64 batch_tokens = 262144;      // tokens per optimiser step
  int64 micro_batch_tokens = 65536; // tokens per forward/backward pass (what activations hold): the batch by accumulation (engine.hpp, accum_for)
  double memory_limit_gib = 80;     // per device; a run above it is reported
  std::vector<ComputeBudget> budgets;  // widths: multipliers s; d_model = the width rule applied to s
  // Engine settings (train::TrainConfig keys: lr, warmup, weight_decay, eval_tokens, threads, ...)
  // shared by every run; the sweep sets spec, batch, accum, seq_len, flops, seed, data and out itself.
  nlohmann::json train = nlohmann::json::object();
  std::uint64_t seed = 0;
  std::string data = "data/corpus";
  // Mixture of experts; empty `experts`: a dense sweep (and the fields below must stay at their
  // defaults). E = 1 is a routed FFN of one expert: the dense MLP plus a router of d params.
  std::vector<int64> experts;
  int64 top_k = 1;                  // experts per token; at most min(experts)
  double expert_ff = 4;             // expert hidden width / d_model (4: the dense MLP's)
  bool shared_expert = false;       // plus one always-on expert of the same shape
  std::string moe_layers = "all";   // all: prelude, block and coda; recur: the shared block only
  int64 moe_every = 1;              // every N-th layer of moe_layers is MoE (2: dense, MoE, ... alternating)
  int64 moe_first_dense = 0;        // after this many dense layers (MoePlacement, spec/family.hpp)
  bool moe() const { return !experts.empty(); }
};

// ---- JSON ------------------------------------------------------------------------------------

inline void budget_to_json(nlohmann::json& j, const ComputeBudget& b) { j = {{"C", b.flops}, {"s", b.widths}}; }

inline void to_json(nlohmann::json& j, const SweepSpec& s) {
  j = {{"name", s.name},
       {"depth", s.depth},
       {"prelude", s.prelude},
       {"coda", s.coda},
       {"r", s.r},
       {"inject", s.inject},
       {"bptt", s.bptt},
       {"width_per_s", s.width_per_s},
       {"width_round", s.width_round},
       {"head_dim", s.head_dim},
       {"vocab", s.vocab},
       {"vocab_multiple", s.vocab_multiple},
       {"seq_len", s.seq_len},
       {"batch_tokens", s.batch_tokens},
       {"micro_batch_tokens", s.micro_batch_tokens},
       {"memory_limit_gib", s.memory_limit_gib},
       {"budgets", nlohmann::json::array()},
       {"train", s.train},
       {"seed", s.seed},
       {"data", s.data}};
  for (const ComputeBudget& b : s.budgets) budget_to_json(j["budgets"].emplace_back(), b);
  // Only where it is not the default, so the specs (and fingerprints) written before it existed keep theirs.
  if (s.r1_layout != SweepSpec{}.r1_layout) j["r1_layout"] = s.r1_layout;
  // Only MoE specs carry these, so a dense spec's JSON (and fingerprint) is what it always was; the
  // placement only when it is not every layer, so MoE specs written before it existed keep theirs.
  if (s.moe()) {
    j["experts"] = s.experts;
    j["top_k"] = s.top_k;
    j["expert_ff"] = s.expert_ff;
    j["shared_expert"] = s.shared_expert;
    j["moe_layers"] = s.moe_layers;
    if (s.moe_every != 1) j["moe_every"] = s.moe_every;
    if (s.moe_first_dense != 0) j["moe_first_dense"] = s.moe_first_dense;
  }
}

namespace detail {

// Reads one field if present, with the field's name in the error; the spec's default otherwise.
template <class T>
void read_field(const nlohmann::json& j, const char* key, T& out) {
  if (!j.contains(key)) return;
  if (!json_whole<T>(j.at(key)))  // get<T>() of 1e300 or 2.5 would be undefined or truncate
    throw sweep_error(fmt::format("sweep spec: field '{}' must be a whole number, got {}", key, json_brief(j.at(key))));
  try {
    out = j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw sweep_error(fmt::format("sweep spec: field '{}' has the wrong type ({})", key, json_brief(j.at(key))));
  }
}

}  // namespace detail

// Strict: an unknown key is an error, so a typo ("budget" for "budgets") cannot pass unnoticed.
inline void from_json(const nlohmann::json& j, SweepSpec& s) {
  if (!j.is_object()) throw sweep_error("sweep spec: expected a JSON object");
  static const std::set<std::string> known = {"name", "depth", "prelude", "coda", "r", "inject", "bptt", "r1_layout", "width_per_s",
                                              "width_round", "head_dim", "vocab", "vocab_multiple", "seq_len",
                                              "batch_tokens", "micro_batch_tokens", "memory_limit_gib", "budgets",
                                              "train", "seed", "data", "experts", "top_k", "expert_ff",
                                              "shared_expert", "moe_layers", "moe_every", "moe_first_dense"};
  for (const auto& [k, v] : j.items())
    if (!known.count(k)) throw sweep_error("sweep spec: unknown field '" + k + "'");
  using detail::read_field;
  read_field(j, "name", s.name);
  read_field(j, "depth", s.depth);
  read_field(j, "prelude", s.prelude);
  read_field(j, "coda", s.coda);
  read_field(j, "r", s.r);
  read_field(j, "inject", s.inject);
  if (j.contains("bptt") && j.at("bptt").is_number_integer()) s.bptt = std::to_string(j.at("bptt").get<int64>());
  else read_field(j, "bptt", s.bptt);
  read_field(j, "r1_layout", s.r1_layout);
  read_field(j, "width_per_s", s.width_per_s);
  read_field(j, "width_round", s.width_round);
  read_field(j, "head_dim", s.head_dim);
  read_field(j, "vocab", s.vocab);
  read_field(j, "vocab_multiple", s.vocab_multiple);
  read_field(j, "seq_len", s.seq_len);
  read_field(j, "batch_tokens", s.batch_tokens);
  read_field(j, "micro_batch_tokens", s.micro_batch_tokens);
  read_field(j, "memory_limit_gib", s.memory_limit_gib);
  read_field(j, "train", s.train);
  read_field(j, "seed", s.seed);
  read_field(j, "data", s.data);
  read_field(j, "experts", s.experts);
  for (const char* k : {"top_k", "expert_ff", "shared_expert", "moe_layers", "moe_every", "moe_first_dense"})
    if (j.contains(k) && !j.contains("experts"))
      throw sweep_error(std::string("sweep spec: '") + k + "' needs 'experts' (the expert counts to sweep)");
  read_field(j, "top_k", s.top_k);
  read_field(j, "expert_ff", s.expert_ff);
  read_field(j, "shared_expert", s.shared_expert);
  read_field(j, "moe_layers", s.moe_layers);
  read_field(j, "moe_every", s.moe_every);
  read_field(j, "moe_first_dense", s.moe_first_dense);
  if (j.contains("budgets")) {
    if (!j.at("budgets").is_array()) throw sweep_error("sweep spec: 'budgets' must be a list of {\"C\": flops, \"s\": [...]}");
    s.budgets.clear();
    for (const auto& b : j.at("budgets")) {
      if (!b.is_object() || !b.contains("C") || !b.contains("s") || !b.at("C").is_number() || !b.at("s").is_array())
        throw sweep_error("sweep spec: every budget needs \"C\" (FLOPs) and \"s\" (width multipliers), got " + json_brief(b));
      for (const auto& field : b.items())  // a misspelt key was ignored, its widths never planned
        if (field.key() != "C" && field.key() != "s")
          throw sweep_error("sweep spec: unknown field " + json_brief(nlohmann::json(field.key())) + " in a budget (a budget has \"C\" and \"s\")");
      ComputeBudget x;
      x.flops = b.at("C").get<double>();
      for (const auto& w : b.at("s")) {
        if (!w.is_number_integer()) throw sweep_error("sweep spec: width multipliers must be integers, got " + json_brief(w));
        x.widths.push_back(w.get<int64>());
      }
      s.budgets.push_back(std::move(x));
    }
  }
}

// A short stable fingerprint of the spec (FNV-1a of its canonical JSON), stored with every result
// so that results of different sweeps are never merged or fitted together.
inline std::string fingerprint(const SweepSpec& s) {
  const std::string text = nlohmann::json(s).dump();
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) h = (h ^ c) * 1099511628211ull;
  return fmt::format("{:016x}", h);
}

// ---- checks ----------------------------------------------------------------------------------

// The spec's injection ("linear", "hyper:4", ...; r = 1 members have none) and BPTT, by the names
// of spec/spec.hpp.
inline InjectSpec inject_of(const SweepSpec& s) {
  const auto i = loopscale::parse_inject(s.inject);
  if (!i || i->kind == Inject::none)
    throw sweep_error("sweep spec: inject must be linear, additive, passthrough or hyper:L (L lanes), not '" + s.inject + "'");
  return *i;
}

inline int64 bptt_of(const SweepSpec& s) {
  const auto b = loopscale::parse_bptt(s.bptt);
  if (!b) throw sweep_error(std::string("sweep spec: bptt must be ") + bptt_choices + ", not '" + s.bptt + "'");
  return *b;
}

// The spec's r = 1 layout (spec/family.hpp), and whether its r = 1 runs are built flat (what its
// plan and report say).
inline R1Layout r1_layout_of(const SweepSpec& s) {
  const std::optional<R1Layout> l = parse_name<R1Layout>(s.r1_layout);
  if (!l) throw sweep_error("sweep spec: r1_layout must be " + name_choices<R1Layout>() + ", not '" + s.r1_layout + "'");
  return *l;
}

inline bool flat_baseline(const SweepSpec& s) {
  return r1_layout_of(s) == R1Layout::flat && std::find(s.r.begin(), s.r.end(), 1) != s.r.end();
}

inline int64 width_of(const SweepSpec& s, int64 mult) {
  return ceil_div(s.width_per_s * mult, s.width_round) * s.width_round;
}

inline ModelSpec model_of(const SweepSpec& s, int64 r, int64 mult, int64 experts);

// Throws sweep_error naming the first problem with the spec as a whole.
inline void validate(const SweepSpec& s) {
  const auto need = [](bool ok, const std::string& msg) {
    if (!ok) throw sweep_error("sweep spec: " + msg);
  };
  need(!s.name.empty(), "name must not be empty");
  need(s.prelude >= 0 && s.coda >= 0, "prelude and coda must not be negative");
  // Sizes the planning can count (spec/limits.hpp), checked before anything is multiplied.
  using L = SpecLimits;
  need(s.depth <= L::depth && s.prelude <= L::depth && s.coda <= L::depth, fmt::format("depth, prelude and coda must be at most {}", L::depth));
  need(s.width_per_s >= 1 && s.width_round >= 1, "width_per_s and width_round must be positive");
  need(s.width_per_s <= L::width && s.width_round <= L::width && s.head_dim <= L::width,
       fmt::format("width_per_s, width_round and head_dim must be at most {}", L::width));
  for (const ComputeBudget& b : s.budgets)
    for (int64 m : b.widths)
      need(m < 1 || (m <= L::width && width_of(s, m) <= L::width), fmt::format("width s = {} gives a d_model above the limit {}", m, L::width));
  need(s.vocab <= L::vocab && s.vocab_multiple <= L::vocab, fmt::format("vocab and vocab_multiple must be at most {}", L::vocab));
  if (const std::string f = seq_len_fault(s.seq_len); !f.empty()) need(false, f);
  need(s.micro_batch_tokens <= L::batch_tokens, fmt::format("micro_batch_tokens {} is above the limit {}", s.micro_batch_tokens, L::batch_tokens));
  for (int64 e : s.experts) need(e <= L::multiplier, fmt::format("experts: E = {} is above the limit {}", e, L::multiplier));
  need(s.expert_ff <= static_cast<double>(L::multiplier), fmt::format("expert_ff {} is above the limit {}", s.expert_ff, L::multiplier));
  need(s.depth > s.prelude + s.coda, "depth must exceed prelude + coda");
  need(!s.r.empty(), "r needs at least one value");
  const int64 middle = s.depth - s.prelude - s.coda;
  for (int64 r : s.r)
    need(r >= 1 && middle % r == 0,
         fmt::format("r = {} does not divide depth - prelude - coda = {}; allowed r are the divisors of {}", r, middle, middle));
  need(std::set<int64>(s.r.begin(), s.r.end()).size() == s.r.size(), "r values must be distinct");
  inject_of(s);
  need(r1_layout_of(s) != R1Layout::flat || !s.moe(), "r1_layout flat is for dense sweeps (an MoE placement counts the prelude and coda)");
  const int64 bptt = bptt_of(s);
  for (int64 r : s.r)
    need(bptt <= r || r == 1, fmt::format("bptt {} exceeds r = {}", bptt, r));
  need(s.width_per_s >= 1 && s.width_round >= 1, "width_per_s and width_round must be positive");
  need(s.head_dim >= 2 && s.head_dim % 2 == 0, "head_dim must be a positive even number (RoPE)");
  need(s.vocab >= 1 && s.vocab_multiple >= 1, "vocab and vocab_multiple must be positive");
  need(s.seq_len >= 1, "seq_len must be positive");
  need(s.batch_tokens >= s.seq_len && s.batch_tokens % s.seq_len == 0, "batch_tokens must be a positive multiple of seq_len");
  need(s.micro_batch_tokens >= s.seq_len && s.micro_batch_tokens % s.seq_len == 0 && s.batch_tokens % s.micro_batch_tokens == 0,
       "micro_batch_tokens must be a multiple of seq_len that divides batch_tokens");
  need(s.memory_limit_gib > 0, "memory_limit_gib must be positive");
  need(!s.budgets.empty(), "budgets needs at least one {\"C\": flops, \"s\": [...]}");
  for (const ComputeBudget& b : s.budgets) {
    need(std::isfinite(b.flops) && b.flops > 0, fmt::format("budget C = {} must be a positive number of FLOPs", b.flops));
    need(!b.widths.empty(), fmt::format("budget C = {:g} has no widths", b.flops));
    for (int64 m : b.widths) {
      need(m >= 1, fmt::format("budget C = {:g}: width multiplier {} must be positive", b.flops, m));
      need(width_of(s, m) % s.head_dim == 0,
           fmt::format("width s = {} gives d_model {} which head_dim {} does not divide", m, width_of(s, m), s.head_dim));
    }
    need(std::set<int64>(b.widths.begin(), b.widths.end()).size() == b.widths.size(),
         fmt::format("budget C = {:g} lists a width twice", b.flops));
  }
  for (std::size_t i = 0; i < s.budgets.size(); ++i)
    for (std::size_t k = i + 1; k < s.budgets.size(); ++k)
      need(s.budgets[i].flops != s.budgets[k].flops, fmt::format("budget C = {:g} appears twice", s.budgets[i].flops));
  if (!s.train.is_object()) throw sweep_error("sweep spec: train must be a JSON object");
  if (s.moe()) {
    for (int64 e : s.experts) need(e >= 1, fmt::format("experts: E = {} must be at least 1", e));
    need(std::set<int64>(s.experts.begin(), s.experts.end()).size() == s.experts.size(), "experts values must be distinct");
    const int64 e_min = *std::min_element(s.experts.begin(), s.experts.end());
    need(s.top_k >= 1 && s.top_k <= e_min, fmt::format("top_k = {} must be in [1, {}] (the smallest E)", s.top_k, e_min));
    need(std::isfinite(s.expert_ff) && s.expert_ff > 0, "expert_ff must be positive");
    need(parse_name<MoeScope>(s.moe_layers).has_value(),
         "moe_layers must be " + name_choices<MoeScope>() + ", not '" + s.moe_layers + "'");
    need(s.moe_every >= 1, fmt::format("moe_every = {} must be at least 1", s.moe_every));
    need(s.moe_first_dense >= 0, fmt::format("moe_first_dense = {} must not be negative", s.moe_first_dense));
    for (const ComputeBudget& b : s.budgets)
      for (int64 m : b.widths) {
        const double h = s.expert_ff * static_cast<double>(width_of(s, m));
        need(h >= 1 && h == std::floor(h),
             fmt::format("expert_ff {} times d_model {} (s = {}) is not a whole hidden width", s.expert_ff, width_of(s, m), m));
      }
  } else {
    const SweepSpec dense{};
    need(s.top_k == dense.top_k && s.expert_ff == dense.expert_ff && s.shared_expert == dense.shared_expert &&
             s.moe_layers == dense.moe_layers && s.moe_every == dense.moe_every && s.moe_first_dense == dense.moe_first_dense,
         "top_k, expert_ff, shared_expert, moe_layers, moe_every and moe_first_dense need experts (the expert counts to sweep)");
  }
  // Every member within the limits, so that the plan can account it.
  for (int64 e : s.moe() ? s.experts : std::vector<int64>{0})
    for (int64 r : s.r)
      for (const ComputeBudget& b : s.budgets)
        for (int64 m : b.widths)
          if (const std::string f = size_fault(model_of(s, r, m, e)); !f.empty()) need(false, f);
}

// The sweep's family (spec/family.hpp) with E routed experts in the layers the MoE placement
// picks (experts 0: dense). The expert hidden width is expert_ff * d_model, kept as the fraction
// FfnSpec carries so the family stays free of widths.
inline FamilySpec family_of(const SweepSpec& s, int64 experts = 0) {
  FamilySpec f;
  f.depth = s.depth;
  f.prelude = s.prelude;
  f.coda = s.coda;
  f.inject = inject_of(s);
  f.bptt = bptt_of(s);
  f.vocab = s.vocab;
  f.vocab_multiple = s.vocab_multiple;
  f.r1_layout = r1_layout_of(s);
  f.layer.attn.head_dim = s.head_dim;
  if (experts > 0) {
    const auto [num, den] = expansion_fraction(s.expert_ff, "sweep spec: expert_ff");
    f.moe = {Activation::relu2, num, den, 0, experts, s.top_k, s.shared_expert};
    f.placement = {*parse_name<MoeScope>(s.moe_layers), s.moe_every, s.moe_first_dense};
  }
  return f;
}

// The model of one (r, s) point of the family; experts > 0 (an MoE spec): E routed experts.
inline ModelSpec model_of(const SweepSpec& s, int64 r, int64 mult, int64 experts = 0) {
  return family_member(family_of(s, experts), r, width_of(s, mult));
}

// ---- memory ----------------------------------------------------------------------------------

// Training memory from the engine's own buffer layout (account/memory.hpp): fp32 weights, grads,
// AdamW moments and the activations of one micro-batch, and where the batch is accumulated over
// several passes the gradient sum beside the gradient (train/lane_plan.hpp, training_memory). The
// engine allocates exactly these buffers, so a run the plan passes fits in memory up to the
// process overhead.
inline double training_memory_bytes(const ModelSpec& m, int64 seq_len, int64 micro_batch_tokens, int64 batch_tokens) {
  const MemoryEstimate e = count_memory(m, micro_batch_tokens / seq_len, seq_len);
  return static_cast<double>(e.total + (batch_tokens > micro_batch_tokens ? e.params : 0));
}

// Which memory model the plan used, printed with every plan.
inline constexpr const char* memory_model = "account/memory.hpp (fp32, one micro-batch)";

// ---- the plan --------------------------------------------------------------------------------

struct PlannedRun {
  std::string id;        // stable name, e.g. "C1e18-r4-s10"
  std::size_t index = 0; // position in the plan (shards take index % N == I)
  double budget = 0;     // C in FLOPs
  int64 r = 1;
  int64 s = 0;           // width multiplier
  int64 experts = 0;     // E; 0: a dense sweep
  int64 top_k = 0;       // K; 0: a dense sweep
  ModelSpec model{};
  Accounting acct{};
  double flops_per_token = 0;  // F (train)
  double tokens = 0;           // D = C / F
  int64 steps = 0;             // floor(C / (F * batch tokens))
  double memory_bytes = 0;
  std::string problem;         // empty: runnable; else why it is not run
  bool runnable() const { return problem.empty(); }
};

struct Plan {
  SweepSpec spec;
  std::string fingerprint;
  std::vector<PlannedRun> runs;
  std::size_t runnable() const {
    return static_cast<std::size_t>(std::count_if(runs.begin(), runs.end(), [](const PlannedRun& r) { return r.runnable(); }));
  }
};

// "4.64e17", "1e18": the budget as it is written in papers, for run ids and tables.
inline std::string budget_label(double c) {
  const int e = static_cast<int>(std::floor(std::log10(c) + 1e-9));
  const double mant = c / std::pow(10.0, e);
  std::string m = fmt::format("{:.3f}", mant);
  while (m.back() == '0') m.pop_back();
  if (m.back() == '.') m.pop_back();
  return m + "e" + std::to_string(e);
}

inline Plan make_plan(const SweepSpec& spec) {
  validate(spec);
  Plan plan;
  plan.spec = spec;
  plan.fingerprint = fingerprint(spec);
  std::vector<ComputeBudget> budgets = spec.budgets;
  std::sort(budgets.begin(), budgets.end(), [](const ComputeBudget& a, const ComputeBudget& b) { return a.flops < b.flops; });
  const double limit = spec.memory_limit_gib * 1024.0 * 1024.0 * 1024.0;
  // A dense sweep is one "E = 0" slice: its ids and order are those it always had.
  const std::vector<int64> experts = spec.moe() ? spec.experts : std::vector<int64>{0};
  for (const ComputeBudget& b : budgets)
    for (int64 e : experts)
      for (int64 r : spec.r)
        for (int64 mult : b.widths) {
          PlannedRun run;
          run.index = plan.runs.size();
          run.budget = b.flops;
          run.r = r;
          run.s = mult;
          run.experts = e;
          run.top_k = e > 0 ? spec.top_k : 0;
          run.id = e > 0 ? fmt::format("C{}-E{}-r{}-s{}", budget_label(b.flops), e, r, mult)
                         : fmt::format("C{}-r{}-s{}", budget_label(b.flops), r, mult);
          run.model = model_of(spec, r, mult, e);
          run.acct = account(run.model, spec.seq_len);
          run.flops_per_token = static_cast<double>(run.acct.flops_per_token.train);
          run.tokens = b.flops / run.flops_per_token;
          const double steps = std::floor(b.flops / (run.flops_per_token * static_cast<double>(spec.batch_tokens)));
          // Past 2^53 steps the count is inexact, and past 2^63 the cast undefined (tests/fuzz).
          run.steps = steps < 0x1p53 ? static_cast<int64>(steps) : 0;
          run.memory_bytes = training_memory_bytes(run.model, spec.seq_len, spec.micro_batch_tokens, spec.batch_tokens);
          if (steps >= 0x1p53)
            run.problem = fmt::format("D = {:.3g} tokens is more than 2^53 batches of {}", run.tokens, spec.batch_tokens);
          else if (run.steps < 1)
            run.problem = fmt::format("D = {:.3g} tokens is below one batch of {}", run.tokens, spec.batch_tokens);
          else if (run.memory_bytes > limit)
            run.problem = fmt::format("needs about {:.1f} GiB, above the {:g} GiB limit", run.memory_bytes / (1024.0 * 1024 * 1024),
                                      spec.memory_limit_gib);
          plan.runs.push_back(std::move(run));
        }
  return plan;
}

// The looped-MoE law's variables of a run (law/looped_moe.hpp), from the accounting, non-embedding:
// N_act = active params (top_k experts, router, shared expert), N_loop = the active params of the
// recurrent block (with the injection), N_total = all non-embedding params, m = N_act / N_total, R = r, E, K, and
// N_unroll = N_act + (R - 1) N_loop (F_train = 6 N_unroll D up to attention and the lm_head).
// Column names are the law library's (law/runs.hpp), so `loopscale fit --law looped-moe` reads a
// sweep's runs.csv without --map.
inline nlohmann::json moe_columns(const ParamCounts& p, int64 r, int64 experts, int64 top_k) {
  const int64 n_act = p.once_active + p.rec_active;
  return {{"E", experts},
          {"K", top_k},
          {"R", r},
          {"N_act", n_act},
          {"N_loop", p.rec_active},
          {"N_total", p.non_embedding},
          {"m", static_cast<double>(n_act) / static_cast<double>(p.non_embedding)},
          {"N_unroll", n_act + (r - 1) * p.rec_active}};
}

// What identifies a run and its size: the columns both the plan (run_json) and a finished run's
// results line (results.hpp) carry. N_once and N_rec (and an MoE run's N_act, N_loop) count the
// injection with the shared block, which `injection` records; N_inject is the injection's own count,
// so a reader can move it (law/runs.hpp, `loopscale fit --injection once|excluded`).
inline nlohmann::json run_columns(const PlannedRun& r) {
  const ParamCounts& p = r.acct.params;
  return {{"id", r.id},
          {"index", r.index},
          {"C", r.budget},
          {"r", r.r},
          {"s", r.s},
          {"d_model", r.model.d_model},
          {"N_once", p.once},
          {"N_rec", p.rec},
          {"N", p.non_embedding},
          {"N_unrolled", p.unrolled},
          {"N_inject", p.inject},
          {"injection", std::string(name_of(InjectionCount::rec))},
          {"F", r.flops_per_token}};
}

inline nlohmann::json run_json(const PlannedRun& r, const SweepSpec& spec) {
  const ParamCounts& p = r.acct.params;
  nlohmann::json j = run_columns(r);
  j.update({{"N_with_embeddings", p.total},  // not N_total, which the looped-MoE law uses for non-embedding params
            {"D", r.tokens},
            {"steps", r.steps},
            {"tokens_trained", static_cast<double>(r.steps) * static_cast<double>(spec.batch_tokens)},
            {"memory_gib", r.memory_bytes / (1024.0 * 1024 * 1024)},
            {"runnable", r.runnable()}});
  if (r.experts > 0) j.update(moe_columns(p, r.r, r.experts, r.top_k));
  if (!r.runnable()) j["problem"] = r.problem;
  return j;
}

inline nlohmann::json plan_json(const Plan& plan) {
  nlohmann::json runs = nlohmann::json::array();
  for (const PlannedRun& r : plan.runs) runs.push_back(run_json(r, plan.spec));
  return {{"sweep", plan.spec.name},
          {"fingerprint", plan.fingerprint},
          {"memory_model", memory_model},
          {"spec", plan.spec},
          {"runs", runs}};
}

}  // namespace loopscale::sweep
