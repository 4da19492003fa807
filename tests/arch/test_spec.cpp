#include <catch2/catch.hpp>

#include <loopscale/arch/spec_json.hpp>
#include <loopscale/loopscale.hpp>

using namespace loopscale;

namespace {
ModelSpec paper_r4() { return IsoDepthFamily<20, 2, 2, Rs<4>, Width<384>, Vocab<32064>>::member<4>::spec; }
}  // namespace

TEST_CASE("validate names the problem", "[arch][spec]") {
  const auto error_of = [](auto mutate) {
    ModelSpec m = paper_r4();
    mutate(m);
    return validation_error(m);
  };
  CHECK(error_of([](ModelSpec&) {}).empty());
  CHECK(error_of([](ModelSpec& m) { m.d_model = 0; }) == "spec: d_model must be positive");
  CHECK(error_of([](ModelSpec& m) { m.recur.r = 0; }) == "recur: r must be at least 1");
  CHECK(error_of([](ModelSpec& m) { m.recur.bptt = 5; }) == "recur: bptt must not exceed r");
  CHECK(error_of([](ModelSpec& m) { m.recur.inject = {Inject::none, 0}; }).find("needs an injection") != std::string::npos);
  CHECK(error_of([](ModelSpec& m) { m.recur.block.layer.attn.heads = 5; }) == "attention: d_model must be divisible by heads");
  CHECK(error_of([](ModelSpec& m) { m.recur.block.layer.ffn.experts = 2, m.recur.block.layer.ffn.top_k = 3; }) ==
        "moe: top_k must not exceed experts");
  CHECK(error_of([](ModelSpec& m) { m.coda.layer.attn.kv_heads = 2; }) == "attention: kv_heads must divide heads");
  CHECK(error_of([](ModelSpec& m) { m.recur.inject = {Inject::hyper, 0}; }) == "recur: hyperconnections need at least one lane");
  CHECK(error_of([](ModelSpec& m) { m.vocab = -3; }) == "spec: vocab must be positive");
  CHECK_THROWS_AS(count_params([] { ModelSpec m = paper_r4(); m.d_model = 100; return m; }()), spec_error);
}

TEST_CASE("static and dynamic widths give the same spec", "[arch][spec]") {
  using Fam = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<dynamic>, Vocab<32064>>;
  using Static = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<512>, Vocab<32064>>;
  static_assert(!Fam::member<2>::is_static && Static::member<2>::is_static);
  const auto specs = Fam::specs(512);
  REQUIRE(specs.size() == 4);
  CHECK(account(specs[2], 2048).flops_per_token.train == account_of<Static::member<4>>(2048).flops_per_token.train);
  CHECK(specs[0].recur.inject.kind == Inject::none);
  CHECK(specs[3].recur.inject.kind == Inject::linear);
  CHECK(specs[3].recur.block.layers == 2);
  CHECK_THROWS_AS(Fam::member<2>::with(500), spec_error);  // 500 is not a multiple of head dim 128
}

TEST_CASE("vocabulary padding", "[arch][spec]") {
  ModelSpec m = paper_r4();
  m.vocab = 50257;
  CHECK(padded_vocab(m) == 50304);
  m.vocab_multiple = 1;
  CHECK(padded_vocab(m) == 50257);
  m.vocab = 256;
  m.vocab_multiple = 64;
  CHECK(padded_vocab(m) == 256);
}

TEST_CASE("spec JSON round trip", "[arch][json]") {
  ModelSpec m = paper_r4();
  m.recur.inject = {Inject::hyper, 4};
  m.recur.bptt = half_bptt;
  m.coda.layer.ffn = {Activation::swiglu, 8, 3, 0, 8, 2, true};
  const nlohmann::json j = m;
  const ModelSpec back = j.get<ModelSpec>();
  CHECK(nlohmann::json(back) == j);
  CHECK(account(back, 2048).flops_per_token.train == account(m, 2048).flops_per_token.train);
  nlohmann::json bad = j;
  bad["recur"]["inject"]["kind"] = "sideways";
  CHECK_THROWS_AS(bad.get<ModelSpec>(), spec_error);
}

TEST_CASE("predicates of the static checks", "[arch][iso_depth]") {
  using Fam = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<384>, Vocab<32064>>;
  using Other = Model<Width<384>, Vocab<32064>, Prelude<1>, Recur<Block<4>, 4, Additive>, Coda<1>>;  // depth 18
  STATIC_REQUIRE(iso_depth<Fam::at<0>, Fam::at<3>>);
  STATIC_REQUIRE_FALSE(iso_depth<Fam::at<0>, Other>);
  STATIC_REQUIRE(matched_compute<Fam::at<0>, Fam::at<1>>(2048, 0.01));
  STATIC_REQUIRE_FALSE(matched_params<Fam::at<0>, Fam::at<1>>(0.1));
  STATIC_REQUIRE(matched_unrolled<Fam::at<0>, Fam::at<1>>(0.02));  // 35,405,952 vs 35,995,776
  STATIC_REQUIRE(matched_active_params<Fam::at<2>, Fam::at<2>>(0.0));
  CHECK(within_tolerance(100, 101, 0.01));
  CHECK_FALSE(within_tolerance(100, 102, 0.01));
}
