// `loopscale account`: the static accounting of a runtime spec, as a table or JSON; with
// `--compare A B`, the relations between two specs (iso-depth, matched compute and parameters),
// the run-time twins of the static checks (account/compare.hpp), exit 2 when a required one fails.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <iostream>

#include <fmt/core.h>

#include "cli.hpp"
#include "loopscale/account/account.hpp"
#include "loopscale/account/account_json.hpp"
#include "loopscale/account/compare.hpp"
#include "loopscale/spec/spec_json.hpp"
#include "loopscale/util/json_parse.hpp"
#include "spec_flags.hpp"

namespace loopscale::cli {
namespace {

struct AccountArgs {
  SpecFlags spec;
  MoeFlags moe;
  int64 seq_len = 2048;
  std::string convention = "paper";
  bool json = false;
  std::vector<std::string> compare;
  std::vector<std::string> require = {"iso-depth", "compute"};
  double tolerance = 0.02;
};

std::string human(double v) {
  const char* unit[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (v >= 1000 && i < 5) v /= 1000, ++i;
  return i == 0 ? fmt::format("{:.0f}", v) : fmt::format("{:.2f}{}", v, unit[i]);
}

// "4" for a uniform dense stack, "4 MoE(E8 K2)" for a uniform MoE one, "4 [dense, MoE(E8 K2), ...]"
// for a mixed one.
std::string describe(const StackSpec& s) {
  const auto layer = [](const LayerSpec& l) {
    return l.ffn.moe() ? fmt::format("MoE(E{} K{}{})", l.ffn.experts, l.ffn.top_k, l.ffn.shared_expert ? " +shared" : "")
                       : std::string("dense");
  };
  if (s.empty()) return "0";
  if (s.uniform()) return s.layers.front().ffn.moe() ? fmt::format("{} {}", s.size(), layer(s.layers.front())) : std::to_string(s.size());
  std::string out = fmt::format("{} [", s.size());
  for (int64 i = 0; i < s.size(); ++i) out += (i ? ", " : "") + layer(s[i]);
  return out + "]";
}

void print_table(const ModelSpec& m, const Accounting& a) {
  const ParamCounts& p = a.params;
  fmt::print("model   d_model {}  vocab {} (padded {})  prelude {}  recur {} x {} ({} inject, bptt {})  coda {}\n",
             m.d_model, m.vocab, padded_vocab(m), describe(m.prelude), describe(m.recur.block), m.recur.r,
             to_string(m.recur.inject.kind), bptt_recurrences(m.recur), describe(m.coda));
  fmt::print("effective depth {}   seq_len {}   convention {}\n\n", a.effective_depth, a.seq_len, to_string(a.convention));
  const auto row = [](const char* name, int64 v, const char* note) {
    fmt::print("  {:<15} {:>16} {:>9}  {}\n", name, v, human(static_cast<double>(v)), note);
  };
  fmt::print("params\n");
  row("embedding", p.embedding, "");
  row("unembedding", p.unembedding, "lm_head (untied)");
  row("once", p.once, "prelude + coda + outer norms");
  row("rec", p.rec, "shared block + injection, stored once");
  row("non_embedding", p.non_embedding, "once + rec");
  row("total", p.total, "");
  row("active", p.active, "what one token touches (MoE)");
  row("unrolled", p.unrolled, "once + r * rec: stored params of every recurrence");
  row("unrolled_active", p.unrolled_active, "once_active + r * rec_active: dense size of the same training cost");
  row("inject", p.inject, "the injection, a part of rec");
  fmt::print("flops per token\n");
  row("forward", a.flops_per_token.forward, "");
  row("train", a.flops_per_token.train, "forward + backward");
}

// A spec from a file: a ModelSpec as JSON, a train config (its "spec"), or a run folder (its
// config.json); with the context length a train config or run records (0 where the file has none).
struct SpecFile {
  ModelSpec spec;
  int64 seq_len = 0;
};
SpecFile read_spec(const std::string& arg) {
  std::filesystem::path path = arg;
  if (std::filesystem::is_directory(path)) path /= "config.json";
  const std::string text = read_input(path.string(), "--compare:", "a model spec");
  nlohmann::json j;
  std::string key;
  try {
    j = parse_json_bounded<usage_error>(text, "--compare: " + path.string(), &key);
  } catch (const nlohmann::json::exception& e) {
    throw usage_error("--compare: " + path.string() + " is not JSON (" + json_parse_fault(text, e, key) + ")");
  }
  try {
    const bool config = j.is_object() && j.contains("spec");
    const ModelSpec m = (config ? j.at("spec") : j).get<ModelSpec>();
    // Sizes too large to count first (spec/limits.hpp): int64 accounting past them is undefined.
    if (const std::string f = size_fault(m); !f.empty()) throw spec_error(f);
    validate(m);
    int64 T = 0;
    if (config && j.contains("seq_len")) {
      // A train config's seq_len as the config reader takes it: 4096.5 was read as 4096 and 1e300
      // (an undefined cast) refused as "at least 1"; "4096" gave nlohmann's type_error.
      const nlohmann::json& t = j.at("seq_len");
      if (!t.is_number() || !json_whole<int64>(t))
        throw usage_error("--compare: " + path.string() + ": seq_len must be a whole number that fits in 64 bits, not " + json_brief(t));
      T = t.get<int64>();
      if (T < 1) throw usage_error("--compare: " + path.string() + ": seq_len must be at least 1, not " + std::to_string(T));
    }
    if (const std::string f = seq_len_fault(T); !f.empty()) throw usage_error("--compare: " + path.string() + ": " + f);
    return {m, T};
  } catch (const nlohmann::json::exception& e) {
    // The spec reader names the field of a wrong kind (spec/spec_json.hpp); this is what it did not foresee.
    throw usage_error("--compare: " + path.string() + " is not a model spec: " + json_error_text(e));
  } catch (const spec_error& e) {
    throw usage_error("--compare: " + path.string() + ": " + e.what());
  }
}

// The context length the comparison counts FLOPs at: --seq-len where given, else the one the
// files record (train configs and runs: their seq_len; where they record different ones, the
// user must choose, or two runs of different contexts would be compared at neither), else
// --seq-len's default.
int64 compare_seq_len(const AccountArgs& args, const SpecFile& a, const SpecFile& b, bool seq_len_given) {
  if (seq_len_given) return args.seq_len;
  if (a.seq_len > 0 && b.seq_len > 0 && a.seq_len != b.seq_len)
    throw usage_error("--compare: the two record different context lengths (seq_len " + std::to_string(a.seq_len) + " and " +
                      std::to_string(b.seq_len) + "); give --seq-len to compare both at one");
  return a.seq_len > 0 ? a.seq_len : b.seq_len > 0 ? b.seq_len : args.seq_len;
}

void compare(const AccountArgs& args, bool seq_len_given) {
  const Convention c = parse_convention_flag(args.convention);
  const SpecFile fa = read_spec(args.compare[0]), fb = read_spec(args.compare[1]);
  const ModelSpec &a = fa.spec, &b = fb.spec;
  // inf passed `>= 0` and matched every count ("compute yes" for a model of twice the FLOPs).
  if (!(args.tolerance >= 0) || !std::isfinite(args.tolerance))
    throw usage_error(concat("--tolerance must be a finite number >= 0, not ", args.tolerance));
  const int64 T = compare_seq_len(args, fa, fb, seq_len_given);
  const Accounting x = account(a, T, c), y = account(b, T, c);
  struct Check {
    std::string name;
    bool ok;
    std::function<void()> require;
  };
  const double tol = args.tolerance;
  const std::vector<Check> checks = {
      {"iso-depth", iso_depth(a, b), [&] { require_iso_depth(a, b); }},
      {"width", same_width(a, b), [&] { require_same_width(a, b); }},
      {"compute", matched_compute(a, b, T, tol, c), [&] { require_matched_compute(a, b, T, tol, c); }},
      {"params", matched_params(a, b, tol), [&] { require_matched_params(a, b, tol); }}};
  // The list has no empty entry and no repeat (add_distinct_list): `--require ''` checked nothing.
  const std::vector<std::string>& required = args.require;
  for (const std::string& item : required) {
    bool known = false;
    for (const Check& k : checks) known = known || k.name == item;
    if (!known) throw usage_error("--require: unknown check '" + item + "' (iso-depth, width, compute, params)");
  }
  if (args.json) {
    nlohmann::json j = {{"A", accounting_json(x)}, {"B", accounting_json(y)}, {"seq_len", T}, {"tolerance", tol}, {"required", required}};
    for (const Check& k : checks) j["checks"][k.name] = k.ok;
    std::cout << j.dump(2) << "\n";
  } else {
    const auto ratio = [](int64 p, int64 q) { return static_cast<double>(q) / static_cast<double>(p); };
    fmt::print("seq_len {}   compute and params matched where |A - B| <= {} x max(A, B)\n\n", T, tol);
    fmt::print("{:<22} {:>16} {:>16} {:>9}\n", "", "A", "B", "B / A");
    fmt::print("{:<22} {:>16} {:>16}\n", "effective depth", x.effective_depth, y.effective_depth);
    fmt::print("{:<22} {:>16} {:>16}\n", "d_model", a.d_model, b.d_model);
    fmt::print("{:<22} {:>16} {:>16} {:>9.4f}\n", "non-embedding params", x.params.non_embedding, y.params.non_embedding,
               ratio(x.params.non_embedding, y.params.non_embedding));
    fmt::print("{:<22} {:>16} {:>16} {:>9.4f}\n", "unrolled active params", x.params.unrolled_active, y.params.unrolled_active,
               ratio(x.params.unrolled_active, y.params.unrolled_active));
    fmt::print("{:<22} {:>16} {:>16} {:>9.4f}\n", "train FLOPs / token", x.flops_per_token.train, y.flops_per_token.train,
               ratio(x.flops_per_token.train, y.flops_per_token.train));
    fmt::print("\n");
    for (const Check& k : checks)
      fmt::print("{:<10} {:<5} {}\n", k.name, k.ok ? "yes" : "no",
                 std::find(required.begin(), required.end(), k.name) != required.end() ? "(required)" : "");
  }
  for (const std::string& name : required)
    for (const Check& k : checks)
      if (k.name == name) try {
          k.require();
        } catch (const spec_error& e) {
          throw usage_error(e.what());
        }
}

const bool registered_account = add_command([](CLI::App& app) {
  auto args = std::make_shared<AccountArgs>();
  CLI::App* sub = app.add_subcommand("account", "print the parameter and FLOP accounting of a model spec, or compare two");
  args->spec.add_to(*sub);
  sub->add_option("--seq-len", args->seq_len,
                  "context length T (with --compare: by default the one the train configs or runs record)")
      ->capture_default_str();
  sub->add_option("--convention", args->convention, "FLOP convention: " + name_choices<Convention>(" | "))->capture_default_str();
  sub->add_flag("--json", args->json, "print JSON");
  sub->add_option("--compare", args->compare,
                  "compare two specs (each a model-spec JSON file, a train config or a run folder) instead of the flags")
      ->expected(2);
  add_distinct_list(*sub, "--require", args->require, "with --compare: the checks that must hold (iso-depth, width, compute, params)", ',');
  sub->add_option("--tolerance", args->tolerance, "with --compare: relative tolerance of compute and params (|A - B| <= tolerance x max(A, B))")->capture_default_str();
  args->moe.add_to(*sub);
  sub->callback([args, sub] {
    if (args->seq_len < 1) throw usage_error("--seq-len must be at least 1");
    if (const std::string f = seq_len_fault(args->seq_len); !f.empty()) throw usage_error("--seq-len: " + f);
    if (!args->compare.empty()) {
      // Every spec and routing flag describes the one spec the flags build; with --compare they
      // were ignored without a word (--depth 40, --vocab 5, --router sigmoid).
      if (const std::vector<std::string> given = given_spec_flags(*sub); !given.empty())
        throw usage_error("--compare reads both specs from files; drop " + given.front());
      compare(*args, sub->count("--seq-len") > 0);
      return;
    }
    for (const char* flag : {"--require", "--tolerance"})  // checks of a comparison: without one they checked nothing
      if (sub->count(flag) > 0) throw usage_error(std::string(flag) + " is used with --compare A B only");
    const ModelSpec m = args->spec.build();
    args->moe.routing(m);  // checked only: routing changes no count
    const Accounting a = account(m, args->seq_len, parse_convention_flag(args->convention));
    if (args->json) {
      nlohmann::json j = accounting_json(a);
      j["spec"] = m;
      std::cout << j.dump(2) << "\n";
    } else {
      print_table(m, a);
    }
  });
});

}  // namespace
}  // namespace loopscale::cli
