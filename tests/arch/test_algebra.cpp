// The compile-time algebra: stacks of mixed layers, sizes static or dynamic in the same types, and
// the checks in their static and run-time forms, with the same sentences.
#include <catch2/catch.hpp>

#include <loopscale/loopscale.hpp>

using namespace loopscale;

namespace {
using Dense = Layer<>;
using Moe8 = Layer<Attention<>, MoE<8, 2>>;
using Paper = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<384>, Vocab<32064>>;

std::string pattern(const StackSpec& s) {
  std::string p;
  for (const LayerSpec& l : s.layers) p += l.ffn.moe() ? 'M' : 'd';
  return p;
}
}  // namespace

TEST_CASE("stack items expand to the layers they name", "[arch][stacks]") {
  STATIC_REQUIRE(Block<Repeat<3, Dense>>{}.spec().size() == 3);
  STATIC_REQUIRE(Block<Dense, Moe8>{}.spec()[1].ffn.experts == 8);
  CHECK(pattern(Block<Alternate<Dense, Moe8, 5>>{}.spec()) == "dMdMd");
  CHECK(pattern(Block<Cycle<7, Dense, Dense, Moe8>>{}.spec()) == "ddMddMd");
  CHECK(pattern(Block<Repeat<2, Dense>, Repeat<3, Moe8>>{}.spec()) == "ddMMM");  // DeepSeek: first k dense
  CHECK(pattern(Block<Layers<Dense, Moe8>, Repeat<2, Layers<Moe8, Dense>>>{}.spec()) == "dMMdMd");
  CHECK(pattern(Prelude<2, Layers<Dense, Moe8>>{}.spec()) == "dMdM");
  CHECK(Block<>{}.spec().empty());
  using M = Model<Width<256>, Vocab<256>, Prelude<1>, Recur<Block<Alternate<Dense, Moe8, 4>>, 2>, Coda<1, Moe8>>;
  constexpr int64 depth = effective_depth(spec_of<M>());
  STATIC_REQUIRE(depth == 10);
  CHECK(pattern(spec_of<M>().coda) == "M");
}

TEST_CASE("static and dynamic sizes give the same spec", "[arch][dynamic]") {
  using Static = Model<Width<512>, Vocab<256>, Prelude<1>, Recur<Block<Repeat<4, Layer<Attention<4>, MoE<8, 2>>>>, 2>, Coda<1>>;
  using Dynamic =
      Model<Width<dynamic>, Vocab<dynamic>, Prelude<1>,
            Recur<Block<Repeat<dynamic, Layer<Attention<dynamic>, MoE<dynamic, dynamic>>>>, dynamic>, Coda<1>>;
  STATIC_REQUIRE(Static::is_static);
  STATIC_REQUIRE_FALSE(Dynamic::is_static);
  const Dynamic d{.width = {512},
                  .vocab = {256},
                  .recur = {.block = {{{.n = {4}, .layer = {.attn = {.heads = {4}}, .ffn = {.experts = {8}, .top_k = {2}}}}}}, .r = {2}}};
  CHECK(spec_of(d) == spec_of<Static>());
  const ModelSpec converted = d;  // a model object is its spec wherever one is expected
  CHECK(count_params(converted).non_embedding == account_of<Static>(2048).params.non_embedding);
  CHECK(count_flops(d, 2048).train == account_of<Static>(2048).flops_per_token.train);

  // The paper family at a run-time width: the same builder, the same numbers.
  using Fam = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<dynamic>, Vocab<32064>>;
  const auto specs = Fam::specs(384);
  REQUIRE(specs.size() == 4);
  CHECK(specs[2] == spec_of<Paper::member<4>>());
  CHECK(spec_of(Fam::member<8>{.width = {384}}) == specs[3]);
  CHECK_THROWS_AS(Fam::specs(500), spec_error);  // 500 is not a multiple of head dim 128
}

TEST_CASE("a flat family: its r = 1 member is 0 + 20 + 0 from the same builder, iso-depth and matched with the looped ones",
          "[arch][family]") {
  using Flat = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<384>, Vocab<32064>, Linear, Layer<>, full_bptt, NoMoE, R1Layout::flat>;
  STATIC_REQUIRE(spec_of<Flat::member<1>>().prelude.empty());
  STATIC_REQUIRE(spec_of<Flat::member<1>>().recur.block.size() == 20);
  STATIC_REQUIRE(spec_of<Flat::member<1>>().coda.empty());
  STATIC_REQUIRE(require_iso_depth<Flat::member<1>, Flat::member<8>>());
  STATIC_REQUIRE(account_of<Flat::member<1>>(2048).params.non_embedding == account_of<Paper::member<1>>(2048).params.non_embedding);
  STATIC_REQUIRE(account_of<Flat::member<1>>(2048).flops_per_token.train == account_of<Paper::member<1>>(2048).flops_per_token.train);
  CHECK(spec_of<Flat::member<1>>() == family_member(Flat::spec, 1, 384));
  CHECK(spec_of<Flat::member<4>>() == spec_of<Paper::member<4>>());  // the looped members are the split family's
  CHECK(Flat::specs(384)[0] == spec_of<Flat::member<1>>());
}

TEST_CASE("a dynamic size left unset or out of range is the static sentence, thrown", "[arch][dynamic]") {
  using D = Model<Width<dynamic>, Vocab<256>, Prelude<1>, Recur<Block<Repeat<dynamic, Layer<Attention<>, MoE<dynamic, 2>>>>, 2>, Coda<1>>;
  CHECK_THROWS_WITH(spec_of(D{}), Catch::StartsWith(LOOPSCALE_MSG_SIZE_NOT_GIVEN));
  CHECK_THROWS_WITH(spec_of(D{.width = {256}}), Catch::StartsWith(LOOPSCALE_MSG_SIZE_NOT_GIVEN) && Catch::Contains("Repeat<dynamic"));
  // MoE<dynamic, 2> with one expert: the sentence MoE<1, 2> stops compilation with
  // (tests/compile_fail/moe_topk_exceeds_experts.cpp).
  const D one_expert{.width = {256}, .recur = {.block = {{{.n = {2}, .layer = {.ffn = {.experts = {1}}}}}}}};
  CHECK_THROWS_WITH(spec_of(one_expert), std::string(LOOPSCALE_MSG_MOE_TOPK_EXCEEDS) + " (recur layer 0)");
  const D fine{.width = {256}, .recur = {.block = {{{.n = {2}, .layer = {.ffn = {.experts = {4}}}}}}}};
  CHECK(spec_of(fine).recur.block[1].ffn.experts == 4);
}

TEST_CASE("requirements: static form, object form and run-time twin agree", "[arch][checks]") {
  using Other = Model<Width<384>, Vocab<32064>, Prelude<1>, Recur<Block<Repeat<4, Dense>>, 4, Additive>, Coda<1>>;  // depth 18
  STATIC_REQUIRE(require_iso_depth<Paper::at<0>, Paper::at<3>>());
  STATIC_REQUIRE(iso_depth(Paper::at<0>{}, Paper::at<3>{}));
  STATIC_REQUIRE_FALSE(iso_depth(Paper::at<0>{}, Other{}));
  STATIC_REQUIRE(matched_compute(Paper::at<0>{}, Paper::at<1>{}, 2048, 0.01));
  STATIC_REQUIRE_FALSE(matched_params(Paper::at<0>{}, Paper::at<1>{}, 0.1));
  STATIC_REQUIRE(matched_unrolled(Paper::at<0>{}, Paper::at<1>{}, 0.02));  // 35,405,952 vs 35,995,776
  STATIC_REQUIRE(matched_active_params(Paper::at<2>{}, Paper::at<2>{}, 0.0));
  CHECK(within_tolerance(100, 101, 0.01));
  CHECK_FALSE(within_tolerance(100, 102, 0.01));

  // The run-time twins throw the static_assert's sentence, with both numbers.
  const ModelSpec a = spec_of<Paper::at<0>>(), b = spec_of<Other>();
  CHECK_THROWS_WITH(require_iso_depth(a, b), std::string(LOOPSCALE_MSG_ISO_DEPTH) + " (A: 20, B: 18)");
  CHECK_NOTHROW(require_iso_depth(a, spec_of<Paper::at<3>>()));
  CHECK_THROWS_WITH(require_matched_params(a, spec_of<Paper::at<1>>(), 0.1),
                    std::string(LOOPSCALE_MSG_MATCHED_PARAMS) + " (A: 35405952, B: 21538944)");
  CHECK_THROWS_WITH(require_matched_compute(a, spec_of<Paper::at<3>>(), 2048, 0.001), Catch::StartsWith(LOOPSCALE_MSG_MATCHED_COMPUTE));
  CHECK_NOTHROW(require_matched_compute(a, spec_of<Paper::at<3>>(), 2048, 0.035));
  CHECK_THROWS_WITH(require_same_width(a, spec_of<IsoDepthFamily<20, 2, 2, Rs<1>, Width<512>, Vocab<32064>>::member<1>>()),
                    std::string(LOOPSCALE_MSG_SAME_WIDTH) + " (A: 384, B: 512)");

  // Object form: static types fold to the static check; a dynamic one runs the twin.
  STATIC_REQUIRE(require_iso_depth(Paper::at<0>{}, Paper::at<2>{}));
  using Fam = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<dynamic>, Vocab<32064>>;
  CHECK(require_iso_depth(Fam::member<4>{.width = {384}}, Paper::at<0>{}));
  CHECK_THROWS_WITH(require_iso_depth(Fam::member<4>{.width = {384}}, Other{}), std::string(LOOPSCALE_MSG_ISO_DEPTH) + " (A: 20, B: 18)");
  CHECK(require_matched_compute<2048, 0.02>(Fam::member<4>{.width = {384}}, Paper::at<0>{}));
  CHECK_THROWS_AS(require_matched_params<0.1>(Fam::member<4>{.width = {384}}, Paper::at<0>{}), spec_error);
}

TEST_CASE("a static family's members are the builder's members", "[arch][family]") {
  STATIC_REQUIRE(spec_of<Paper::member<2>>() == family_member(Paper::spec, 2, 384));
  using Mixed = IsoDepthFamily<10, 1, 1, Rs<1, 2, 4>, Width<16>, Vocab<256>, Linear, Layer<Attention<0, 4>>, half_bptt,
                               MoeEvery<MoE<4, 1>, 2, 1, MoeScope::recur>>;
  STATIC_REQUIRE(spec_of<Mixed::member<4>>() == family_member(Mixed::spec, 4, 16));
  CHECK(pattern(spec_of<Mixed::member<1>>().recur.block) == "dMdMdMdM");
  CHECK(pattern(spec_of<Mixed::member<4>>().recur.block) == "dM");
  CHECK(spec_of<Mixed::member<4>>().recur.bptt == half_bptt);
  CHECK(spec_of<Mixed::member<1>>().recur.bptt == full_bptt);
  CHECK(Mixed::specs(16) == std::vector<ModelSpec>{spec_of<Mixed::member<1>>(), spec_of<Mixed::member<2>>(), spec_of<Mixed::member<4>>()});
}

TEST_CASE("the recurrence's state norm and both forms of hyperconnections in the types", "[arch][recur]") {
  using PerRec = Model<Width<128>, Vocab<256>, Prelude<1>, Recur<Block<Dense>, 4>, Coda<1>>;
  using After = Model<Width<128>, Vocab<256>, Prelude<1>, Recur<Block<Dense>, 4, Linear, full_bptt, StateNorm::after_loop>, Coda<1>>;
  STATIC_REQUIRE(spec_of<PerRec>().recur.state_norm == StateNorm::per_recurrence);  // the paper's placement by default
  STATIC_REQUIRE(spec_of<After>().recur.state_norm == StateNorm::after_loop);
  STATIC_REQUIRE(account_of<PerRec>(64).params.total == account_of<After>(64).params.total);
  STATIC_REQUIRE(account_of<PerRec>(64).flops_per_token.train - account_of<After>(64).flops_per_token.train == 6 * 3 * 128);
  // The family builder's default is the types' default.
  STATIC_REQUIRE(Paper::spec.state_norm == StateNorm::per_recurrence);
  STATIC_REQUIRE(spec_of<Paper::member<4>>().recur.state_norm == StateNorm::per_recurrence);

  using HyperPaper = Model<Width<128>, Vocab<256>, Prelude<1>, Recur<Block<Dense>, 4, Hyper<2>>, Coda<1>>;
  using HyperOne = Model<Width<128>, Vocab<256>, Prelude<1>, Recur<Block<Dense>, 4, HyperShared<2>, 2, StateNorm::after_loop>, Coda<1>>;
  STATIC_REQUIRE(spec_of<HyperPaper>().recur.inject == InjectSpec{Inject::hyper, 2});
  STATIC_REQUIRE(spec_of<HyperOne>().recur.inject == InjectSpec{Inject::hyper_shared, 2});
  STATIC_REQUIRE(account_of<HyperPaper>(64).params.rec - account_of<HyperOne>(64).params.rec == 3 * 8);
  // The spec's sentences for the paper's form with truncated BPTT or the norm after the loop (a
  // static model stops compiling with them; a dynamic one throws them).
  using Truncated = Model<Width<128>, Vocab<256>, Prelude<1>, Recur<Block<Dense>, 4, Hyper<2>, half_bptt>, Coda<1>>;
  using HyperAfter = Model<Width<128>, Vocab<256>, Prelude<1>, Recur<Block<Dense>, 4, Hyper<2>, full_bptt, StateNorm::after_loop>, Coda<1>>;
  STATIC_REQUIRE(detail::fault_of<Truncated>().what == SpecFault::hyper_truncated);
  STATIC_REQUIRE(detail::fault_of<HyperAfter>().what == SpecFault::hyper_after_loop);
  using Lanes = Model<Width<128>, Vocab<256>, Prelude<1>, Recur<Block<Dense>, 4, Hyper<dynamic>, dynamic>, Coda<1>>;
  CHECK_THROWS_WITH(spec_of(Lanes{.recur = {.inject = {.lanes = {2}}, .bptt = {1}}}), LOOPSCALE_MSG_HYPER_TRUNCATED);
  CHECK(spec_of(Lanes{.recur = {.inject = {.lanes = {2}}, .bptt = {4}}}).recur.inject.lanes == 2);
}
