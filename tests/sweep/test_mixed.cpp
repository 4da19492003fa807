// The mixed-moe preset: the sweep of examples/static_verification.cpp's mixed-stack family (dense and
// MoE layers alternating in the shared block). Its planned models are the static family's members,
// built by the same builder, iso-depth and matched in compute.
#include <catch2/catch.hpp>

#include <fmt/format.h>
#include <loopscale/loopscale.hpp>

#include "loopscale/sweep/plan.hpp"
#include "loopscale/sweep/presets.hpp"

using namespace loopscale;
using namespace loopscale::sweep;

namespace {
template <int64 D>
using Mixed = IsoDepthFamily<10, 1, 1, Rs<1, 2, 4>, Width<D>, Vocab<256>, Linear, Layer<Attention<0, 4>>, full_bptt,
                             MoeEvery<MoE<4, 1>, 2, 1, MoeScope::recur>>;
}  // namespace

TEST_CASE("mixed-moe preset: planned models are the static family's members", "[sweep][mixed]") {
  const SweepSpec s = preset("mixed-moe");
  const Plan plan = make_plan(s);
  REQUIRE(plan.runs.size() == 27);
  CHECK(plan.runnable() == 27);
  for (const PlannedRun& r : plan.runs) {
    INFO(r.id);
    CHECK(r.id == fmt::format("C{}-E4-r{}-s{}", budget_label(r.budget), r.r, r.s));
    CHECK(r.model == family_member(Mixed<dynamic>::spec, r.r, r.model.d_model));
    CHECK(effective_depth(r.model) == 10);
    // Every member unrolls to dense, MoE, dense, MoE, ...: half the block's layers are MoE.
    int64 moe = 0;
    for (const LayerSpec& l : r.model.recur.block.layers) moe += l.ffn.moe();
    CHECK(moe * 2 == r.model.recur.block.size());
    CHECK(!r.model.prelude[0].ffn.moe());
    CHECK(!r.model.coda[0].ffn.moe());
  }
  // At d = 12 (s = 3) the planned models equal the static types' specs...
  for (const PlannedRun& r : plan.runs)
    if (r.s == 3) {
      if (r.r == 1) CHECK(r.model == spec_of<Mixed<12>::member<1>>());
      if (r.r == 2) CHECK(r.model == spec_of<Mixed<12>::member<2>>());
      if (r.r == 4) CHECK(r.model == spec_of<Mixed<12>::member<4>>());
    }
  // ...which the compiler proves iso-depth and matched in compute (the linear injection is all that
  // separates them).
  STATIC_REQUIRE(require_iso_depth<Mixed<12>::member<1>, Mixed<12>::member<4>>());
  STATIC_REQUIRE(require_matched_compute<Mixed<12>::member<1>, Mixed<12>::member<4>, 64, 0.04>());
  // The looped-MoE law's columns come with every run: N_act counts one expert of four per MoE layer.
  for (const PlannedRun& r : plan.runs) {
    const auto j = run_json(r, s);
    CHECK(j["E"] == 4);
    CHECK(j["K"] == 1);
    CHECK(j["N_act"].get<int64>() < j["N_total"].get<int64>());
  }
  // The spec's JSON carries the placement, and reads back to the same fingerprint.
  const nlohmann::json js = s;
  CHECK(js["moe_every"] == 2);
  CHECK(js["moe_first_dense"] == 1);
  CHECK(js["moe_layers"] == "recur");
  CHECK(fingerprint(js.get<SweepSpec>()) == fingerprint(s));
}

TEST_CASE("sweep spec: MoE placement fields are checked", "[sweep][mixed]") {
  SweepSpec s = preset("mixed-moe");
  s.moe_every = 0;
  CHECK_THROWS_WITH(validate(s), Catch::Contains("moe_every = 0 must be at least 1"));
  s = preset("mixed-moe");
  s.moe_first_dense = -1;
  CHECK_THROWS_WITH(validate(s), Catch::Contains("moe_first_dense = -1 must not be negative"));
  s = preset("mixed-moe");
  s.moe_layers = "coda";
  CHECK_THROWS_WITH(validate(s), Catch::Contains("moe_layers must be all or recur"));
  SweepSpec dense = preset("cpu-mini");
  dense.moe_every = 2;
  CHECK_THROWS_WITH(validate(dense), Catch::Contains("need experts"));
  nlohmann::json j = preset("cpu-mini");
  j["moe_every"] = 2;
  CHECK_THROWS_WITH(j.get<SweepSpec>(), Catch::Contains("'moe_every' needs 'experts'"));
}
