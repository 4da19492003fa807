// `loopscale account`: the static accounting of a runtime spec, as a table or JSON.
#include <cstdio>
#include <iostream>

#include <fmt/core.h>

#include "cli.hpp"
#include "loopscale/account/account.hpp"
#include "loopscale/arch/spec_json.hpp"
#include "spec_flags.hpp"

namespace loopscale::cli {
namespace {

struct AccountArgs {
  SpecFlags spec;
  MoeFlags moe;
  int64 seq_len = 2048;
  std::string convention = "paper";
  bool json = false;
};

std::string human(double v) {
  const char* unit[] = {"", "K", "M", "G", "T", "P"};
  int i = 0;
  while (v >= 1000 && i < 5) v /= 1000, ++i;
  return i == 0 ? fmt::format("{:.0f}", v) : fmt::format("{:.2f}{}", v, unit[i]);
}

void print_table(const ModelSpec& m, const Accounting& a) {
  const ParamCounts& p = a.params;
  fmt::print("model   d_model {}  vocab {} (padded {})  prelude {}  recur {} x {} ({} inject, bptt {})  coda {}\n",
             m.d_model, m.vocab, padded_vocab(m), m.prelude.layers, m.recur.block.layers, m.recur.r,
             to_string(m.recur.inject.kind), bptt_recurrences(m.recur), m.coda.layers);
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
  row("unrolled", p.unrolled, "once + r * rec: dense size of the same training cost");
  fmt::print("flops per token\n");
  row("forward", a.flops_per_token.forward, "");
  row("train", a.flops_per_token.train, "forward + backward");
}

const bool registered = add_command([](CLI::App& app) {
  auto args = std::make_shared<AccountArgs>();
  CLI::App* sub = app.add_subcommand("account", "print the parameter and FLOP accounting of a model spec");
  args->spec.add_to(*sub);
  sub->add_option("--seq-len", args->seq_len, "context length T")->capture_default_str();
  sub->add_option("--convention", args->convention, "FLOP convention: paper | causal | kaplan | chinchilla")->capture_default_str();
  sub->add_flag("--json", args->json, "print JSON");
  args->moe.add_to(*sub);
  sub->callback([args] {
    const ModelSpec m = args->spec.build();
    args->moe.routing(m);  // checked only: routing changes no count
    if (args->seq_len < 1) throw usage_error("--seq-len must be at least 1");
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
