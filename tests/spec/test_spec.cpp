// The run-time spec: validation sentences, JSON (both stack forms), names, and the one builder of
// family members with its MoE placement.
#include <catch2/catch.hpp>

#include <loopscale/account/injection_convention.hpp>
#include <loopscale/loopscale.hpp>
#include <loopscale/spec/spec_json.hpp>
#include <loopscale/util/json_parse.hpp>

using namespace loopscale;

namespace {
ModelSpec paper_r4() { return family_member(paper::family(), 4, 384); }
}  // namespace

TEST_CASE("validate names the problem and where it is", "[spec]") {
  const auto error_of = [](auto mutate) {
    ModelSpec m = paper_r4();
    mutate(m);
    return validation_error(m);
  };
  CHECK(error_of([](ModelSpec&) {}).empty());
  CHECK(error_of([](ModelSpec& m) { m.d_model = 0; }) == LOOPSCALE_MSG_D_MODEL);
  CHECK(error_of([](ModelSpec& m) { m.recur.r = 0; }) == LOOPSCALE_MSG_R);
  CHECK(error_of([](ModelSpec& m) { m.recur.bptt = 5; }) == LOOPSCALE_MSG_BPTT);
  CHECK(error_of([](ModelSpec& m) { m.recur.inject = {Inject::none, 0}; }) == LOOPSCALE_MSG_INJECT_NEEDED);
  CHECK(error_of([](ModelSpec& m) { m.recur.block.layers[1].attn.heads = 5; }) ==
        "attention: d_model must be divisible by heads (recur layer 1)");
  CHECK(error_of([](ModelSpec& m) { m.recur.block.layers[0].ffn.experts = 2, m.recur.block.layers[0].ffn.top_k = 3; }) ==
        std::string(LOOPSCALE_MSG_MOE_TOPK_EXCEEDS) + " (recur layer 0)");
  CHECK(error_of([](ModelSpec& m) { m.coda.layers[1].attn.kv_heads = 2; }) ==
        "attention: kv_heads must divide heads (coda layer 1)");
  CHECK(error_of([](ModelSpec& m) { m.recur.inject = {Inject::hyper, 0}; }) == LOOPSCALE_MSG_HYPER_LANES);
  CHECK(error_of([](ModelSpec& m) { m.recur.inject = {Inject::hyper_shared, 0}; }) == LOOPSCALE_MSG_HYPER_LANES);
  CHECK(error_of([](ModelSpec& m) { m.recur.inject = {Inject::linear, 2}; }) == LOOPSCALE_MSG_LANES_WITHOUT_HYPER);
  CHECK(error_of([](ModelSpec& m) { m.recur.inject = {static_cast<Inject>(9), 0}; }) == LOOPSCALE_MSG_INJECT_KIND);
  CHECK(error_of([](ModelSpec& m) { m.recur.state_norm = static_cast<StateNorm>(7); }) == LOOPSCALE_MSG_STATE_NORM);
  // The paper's hyperconnections: full BPTT and the per-recurrence state norm; the shared form
  // takes either.
  CHECK(error_of([](ModelSpec& m) { m.recur.inject = {Inject::hyper, 2}; }).empty());
  CHECK(error_of([](ModelSpec& m) { m.recur.inject = {Inject::hyper, 2}, m.recur.bptt = half_bptt; }) == LOOPSCALE_MSG_HYPER_TRUNCATED);
  CHECK(error_of([](ModelSpec& m) { m.recur.inject = {Inject::hyper, 2}, m.recur.bptt = 3; }) == LOOPSCALE_MSG_HYPER_TRUNCATED);
  CHECK(error_of([](ModelSpec& m) { m.recur.inject = {Inject::hyper, 2}, m.recur.bptt = 4; }).empty());
  CHECK(error_of([](ModelSpec& m) { m.recur.inject = {Inject::hyper, 2}, m.recur.state_norm = StateNorm::after_loop; }) ==
        LOOPSCALE_MSG_HYPER_AFTER_LOOP);
  CHECK(error_of([](ModelSpec& m) {
          m.recur.inject = {Inject::hyper_shared, 2}, m.recur.bptt = half_bptt, m.recur.state_norm = StateNorm::after_loop;
        }).empty());
  CHECK(error_of([](ModelSpec& m) { m.vocab = -3; }) == LOOPSCALE_MSG_VOCAB);
  CHECK(error_of([](ModelSpec& m) { m.d_model = dynamic; }) == LOOPSCALE_MSG_SIZE_NOT_GIVEN);
  CHECK(error_of([](ModelSpec& m) { m.recur.block.layers.clear(); }) == LOOPSCALE_MSG_R_NEEDS_BLOCK);
  CHECK_THROWS_AS(count_params([] { ModelSpec m = paper_r4(); m.d_model = 100; return m; }()), spec_error);
  CHECK_THROWS_WITH(validate([] { ModelSpec m = paper_r4(); m.prelude.layers[0].ffn.mult_num = 0; return m; }()),
                    std::string(LOOPSCALE_MSG_MLP_EXPANSION) + " (prelude layer 0)");
}

TEST_CASE("vocabulary padding", "[spec]") {
  ModelSpec m = paper_r4();
  m.vocab = 50257;
  CHECK(padded_vocab(m) == 50304);
  m.vocab_multiple = 1;
  CHECK(padded_vocab(m) == 50257);
  m.vocab = 256;
  m.vocab_multiple = 64;
  CHECK(padded_vocab(m) == 256);
}

TEST_CASE("spec JSON: uniform stacks keep their form, mixed stacks list their layers", "[spec][json]") {
  ModelSpec m = paper_r4();
  m.recur.inject = {Inject::hyper_shared, 4};
  m.recur.bptt = half_bptt;
  m.recur.state_norm = StateNorm::after_loop;
  for (LayerSpec& l : m.coda.layers) l.ffn = {Activation::swiglu, 8, 3, 0, 8, 2, true};
  const nlohmann::json j = m;
  CHECK(j["prelude"]["layers"] == 2);  // {"layers": N, "layer": {...}}: files from before mixed stacks read as they did
  CHECK(j["recur"]["state_norm"] == "after-loop");
  CHECK(j["recur"]["inject"]["kind"] == "hyper-shared");
  CHECK(j["coda"]["layer"]["ffn"]["experts"] == 8);
  const ModelSpec back = j.get<ModelSpec>();
  CHECK(back == m);
  CHECK(account(back, 2048).flops_per_token.train == account(m, 2048).flops_per_token.train);

  ModelSpec mixed = m;
  mixed.recur.block.layers[1].ffn = {Activation::relu2, 4, 1, 0, 8, 2, false};
  const nlohmann::json k = mixed;
  REQUIRE(k["recur"]["block"]["layers"].is_array());
  CHECK(k["recur"]["block"]["layers"].size() == 4);
  CHECK(k["recur"]["block"]["layers"][1]["ffn"]["experts"] == 8);
  CHECK_FALSE(k["recur"]["block"].contains("layer"));
  CHECK(k.get<ModelSpec>() == mixed);

  nlohmann::json bad = j;
  bad["recur"]["inject"]["kind"] = "sideways";
  CHECK_THROWS_AS(bad.get<ModelSpec>(), spec_error);
  bad = j;
  bad["prelude"] = {{"layers", -1}};
  CHECK_THROWS_WITH(bad.get<ModelSpec>(), Catch::Contains("'layers' must be a count >= 0 or a list"));
  bad = j;
  bad["prelude"]["depth"] = 3;
  CHECK_THROWS_WITH(bad.get<ModelSpec>(), Catch::Contains("unknown stack field 'depth'"));
  // A misspelt field anywhere in the spec is an error, not a default (4 Dec 2026: "qknorm" in an
  // attn object, "d_modl", "stat_norm" were read as the defaults).
  bad = j;
  bad["d_modl"] = 64;
  CHECK_THROWS_WITH(bad.get<ModelSpec>(), Catch::Contains("unknown model field 'd_modl'"));
  bad = j;
  bad["recur"]["stat_norm"] = "per_recurrence";
  CHECK_THROWS_WITH(bad.get<ModelSpec>(), Catch::Contains("unknown recur field 'stat_norm'"));
  bad = j;
  bad["recur"]["inject"]["lane"] = 2;
  CHECK_THROWS_WITH(bad.get<ModelSpec>(), Catch::Contains("unknown inject field 'lane'"));
  bad = j;
  bad["prelude"]["layer"]["attn"]["qknorm"] = false;
  CHECK_THROWS_WITH(bad.get<ModelSpec>(), Catch::Contains("unknown attn field 'qknorm'"));
  bad = j;
  bad["prelude"]["layer"]["mlp"] = nlohmann::json::object();
  CHECK_THROWS_WITH(bad.get<ModelSpec>(), Catch::Contains("unknown layer field 'mlp' (attn, ffn)"));
  bad = k;
  bad["recur"]["block"]["layer"] = nlohmann::json::object();
  CHECK_THROWS_WITH(bad.get<ModelSpec>(), Catch::Contains("takes no 'layer'"));
}

TEST_CASE("spec JSON: the recurrence's state norm, and files written before it", "[spec][json]") {
  const ModelSpec m = paper_r4();
  REQUIRE(m.recur.state_norm == StateNorm::per_recurrence);  // the paper's placement is the default
  nlohmann::json j = m;
  CHECK(j["recur"]["state_norm"] == "per-recurrence");
  CHECK(j.get<ModelSpec>() == m);
  // A file without the field (written before it existed) is the model it described then: the norm
  // after the loop, and "hyper" the shared hyperconnections.
  nlohmann::json old = j;
  old["recur"].erase("state_norm");
  ModelSpec was = old.get<ModelSpec>();
  CHECK(was.recur.state_norm == StateNorm::after_loop);
  CHECK(was.recur.inject.kind == Inject::linear);
  old["recur"]["inject"] = {{"kind", "hyper"}, {"lanes", 2}};
  was = old.get<ModelSpec>();
  CHECK(was.recur.inject == InjectSpec{Inject::hyper_shared, 2});
  CHECK(was.recur.state_norm == StateNorm::after_loop);
  CHECK(validation_error(was).empty());
  // With the field, "hyper" is the paper's form.
  ModelSpec paper = m;
  paper.recur.inject = {Inject::hyper, 2};
  j = paper;
  CHECK(j["recur"]["inject"]["kind"] == "hyper");
  CHECK(j.get<ModelSpec>() == paper);
  CHECK(count_params(j.get<ModelSpec>()).rec == count_params(m).rec - 2 * 384 * 384 + 4 * 8);
  nlohmann::json bad = j;
  bad["recur"]["state_norm"] = "sometimes";
  CHECK_THROWS_WITH(bad.get<ModelSpec>(), "spec: unknown state_norm 'sometimes' (per-recurrence or after-loop)");
}

TEST_CASE("names: one table per option, printing and parsing agree", "[spec][names]") {
  for (Activation a : {Activation::relu2, Activation::gelu, Activation::swiglu}) CHECK(parse_name<Activation>(name_of(a)) == a);
  CHECK(name_choices<Activation>() == "relu2, gelu or swiglu");
  CHECK_FALSE(parse_name<Inject>("sideways").has_value());
  for (const InjectSpec i : {InjectSpec{Inject::none, 0}, InjectSpec{Inject::linear, 0}, InjectSpec{Inject::additive, 0},
                             InjectSpec{Inject::passthrough, 0}, InjectSpec{Inject::hyper, 4}, InjectSpec{Inject::hyper_shared, 2}})
    CHECK(parse_inject(inject_name(i)) == i);
  CHECK(inject_name({Inject::hyper_shared, 3}) == "hyper-shared:3");
  CHECK(parse_inject("hyper:2") == InjectSpec{Inject::hyper, 2});
  for (const char* bad : {"hyper", "hyper:", "hyper:0", "hyper:-2", "hyper:2x", "Linear", "", "hyper-shared", "hyper-shared:0",
                          "hyper_shared:2", "linear:2", "none:1", ":2"})
    CHECK_FALSE(parse_inject(bad).has_value());
  for (StateNorm n : {StateNorm::per_recurrence, StateNorm::after_loop}) CHECK(parse_name<StateNorm>(name_of(n)) == n);
  CHECK(name_choices<StateNorm>() == "per-recurrence or after-loop");
  for (const int64 b : {full_bptt, half_bptt, int64{1}, int64{7}}) CHECK(parse_bptt(bptt_name(b)) == b);
  for (const char* bad : {"0", "-1", "all", "", "2.5"}) CHECK_FALSE(parse_bptt(bad).has_value());
  CHECK(name_of(MoeScope::recur) == "recur");
}

TEST_CASE("the family builder: members, block size, BPTT, MoE placement", "[spec][family]") {
  const FamilySpec f = paper::family();
  for (const int64 r : paper::rs) {
    const ModelSpec m = family_member(f, r, 512);
    CHECK(effective_depth(m) == 20);
    CHECK(m.recur.block.size() == 16 / r);
    CHECK(m.recur.inject.kind == (r == 1 ? Inject::none : Inject::linear));
  }
  CHECK_THROWS_WITH(family_member(f, 3, 512), Catch::Contains(LOOPSCALE_MSG_FAMILY_R_DIVIDES) && Catch::Contains("r = 3"));
  // The message lists the r that do divide the recurrent depth (it said "choose r among its divisors" and named none).
  CHECK_THROWS_WITH(family_member(f, 3, 512), Catch::EndsWith("r = 3, recurrent depth 16, whose divisors are 1, 2, 4, 8, 16"));
  FamilySpec deep = f;
  deep.depth = 10004;  // recurrent depth 10000: r is at most 4096, so no divisor past it is listed
  CHECK_THROWS_WITH(family_member(deep, 3, 512), Catch::EndsWith("recurrent depth 10000, whose divisors up to the limit 4096 are "
                                                                 "1, 2, 4, 5, 8, 10, 16, 20, 25, 40, 50, 80, 100, 125, 200, 250, 400, 500, 625, 1000, 1250, 2000, 2500"));
  FamilySpec after = f;  // the family's state norm reaches every member
  after.state_norm = StateNorm::after_loop;
  for (const int64 r : paper::rs) {
    CHECK(family_member(f, r, 512).recur.state_norm == StateNorm::per_recurrence);
    CHECK(family_member(after, r, 512).recur.state_norm == StateNorm::after_loop);
  }
  FamilySpec hyper = f;  // the paper's hyperconnections refuse a truncated family's looped members
  hyper.inject = {Inject::hyper, 2};
  hyper.bptt = half_bptt;
  CHECK(family_member(hyper, 1, 512).recur.inject.kind == Inject::none);
  CHECK_THROWS_WITH(family_member(hyper, 2, 512), LOOPSCALE_MSG_HYPER_TRUNCATED);
  CHECK_THROWS_AS(family_member(f, 2, 500), spec_error);  // 500 is not a multiple of head dim 128
  FamilySpec t = f;
  t.bptt = 3;  // at most r
  CHECK(family_member(t, 2, 512).recur.bptt == 2);
  CHECK(family_member(t, 8, 512).recur.bptt == 3);
  CHECK(family_member(t, 1, 512).recur.bptt == full_bptt);
  FamilySpec fixed = f;
  fixed.block_layers = 3;  // k given: the depth follows r
  CHECK(effective_depth(family_member(fixed, 5, 512)) == 2 + 15 + 2);

  // MoE placement: which layers carry the experts.
  FamilySpec moe = f;
  moe.moe = {Activation::relu2, 4, 1, 0, 8, 2, false};
  const auto pattern = [](const StackSpec& s) {
    std::string p;
    for (const LayerSpec& l : s.layers) p += l.ffn.moe() ? 'M' : 'd';
    return p;
  };
  ModelSpec m = family_member(moe, 4, 512);  // every layer
  CHECK(pattern(m.prelude) + "|" + pattern(m.recur.block) + "|" + pattern(m.coda) == "MM|MMMM|MM");
  moe.placement = {MoeScope::all, 2, 1};  // GShard / Switch: dense, MoE, ... over the unique layers
  m = family_member(moe, 4, 512);
  CHECK(pattern(m.prelude) + "|" + pattern(m.recur.block) + "|" + pattern(m.coda) == "dM|dMdM|dM");
  moe.placement = {MoeScope::all, 1, 3};  // DeepSeek: the first 3 dense
  m = family_member(moe, 4, 512);
  CHECK(pattern(m.prelude) + "|" + pattern(m.recur.block) + "|" + pattern(m.coda) == "dd|dMMM|MM");
  moe.placement = {MoeScope::recur, 2, 1};  // alternating inside the shared block only
  for (const int64 r : {1, 2, 4, 8}) {
    m = family_member(moe, r, 512);
    CHECK(pattern(m.prelude) + pattern(m.coda) == "dddd");
    CHECK(pattern(m.recur.block) == std::string("dMdMdMdMdMdMdMdM").substr(0, static_cast<std::size_t>(16 / r)));
  }
  moe.placement = {MoeScope::recur, 0, 0};
  CHECK_THROWS_WITH(family_member(moe, 2, 512), Catch::Contains("every >= 1"));
}

TEST_CASE("the family builder: a flat r = 1 member is the paper's 0 + 20 + 0, counted as the split one, the looped members unchanged",
          "[spec][family]") {
  const FamilySpec split = paper::family();
  FamilySpec flat = split;
  flat.r1_layout = R1Layout::flat;
  const ModelSpec one = family_member(flat, 1, 768), two = family_member(split, 1, 768);
  CHECK(one.prelude.empty());
  CHECK(one.coda.empty());
  CHECK(one.recur.block.size() == 20);
  CHECK(one.recur.r == 1);
  CHECK(one.recur.inject.kind == Inject::none);
  CHECK(effective_depth(one) == 20);
  CHECK(two.recur.block.size() == 16);
  // The same parameters and FLOPs in all (what an r = 1 law point reads: N_once + N_rec), split
  // differently between once and rec.
  const ParamCounts p1 = count_params(one), p2 = count_params(two);
  CHECK(p1.non_embedding == p2.non_embedding);
  CHECK(p1.total == p2.total);
  CHECK(p1.once == outer_norms * 768);
  CHECK(count_flops(one, 2048).train == count_flops(two, 2048).train);
  for (const int64 r : {2, 4, 8}) CHECK(family_member(flat, r, 768) == family_member(split, r, 768));
  CHECK(name_choices<R1Layout>() == "split or flat");
  // Where the prelude and coda mean something else, flat is refused.
  FamilySpec moe = flat;
  moe.moe = {Activation::relu2, 4, 1, 0, 8, 2, false};
  CHECK_THROWS_WITH(family_member(moe, 1, 768), Catch::Contains("r1_layout flat is for dense families"));
  FamilySpec fixed = flat;
  fixed.block_layers = 4;
  CHECK_THROWS_WITH(family_member(fixed, 2, 768), Catch::Contains("r1_layout flat needs the block derived from the depth"));
  // The family's own checks hold for a flat r = 1 member as for the others.
  FamilySpec negative = flat;
  negative.prelude = -2;
  CHECK_THROWS_WITH(family_member(negative, 1, 768), Catch::Contains("prelude and coda must not be negative"));
  FamilySpec shallow = flat;
  shallow.depth = 4;
  CHECK_THROWS_WITH(family_member(shallow, 1, 768), Catch::Contains("depth must exceed prelude + coda"));
  // The once/block regression is a line over one prelude and coda.
  CHECK_THROWS_WITH(regress_once_block(flat, 768, paper::rs), Catch::Contains("split"));
}

TEST_CASE("expansions as fractions", "[spec][family]") {
  CHECK(expansion_fraction(4) == std::pair<int64, int64>{4, 1});
  CHECK(expansion_fraction(0.5) == std::pair<int64, int64>{1, 2});
  CHECK(expansion_fraction(2.75) == std::pair<int64, int64>{11, 4});
  CHECK(expansion_fraction(0.1 + 0.2) == std::pair<int64, int64>{3, 10});  // 0.30000000000000004: within the tolerance
  CHECK_THROWS_AS(expansion_fraction(0), spec_error);
  CHECK_THROWS_AS(expansion_fraction(0.0001), spec_error);
}

TEST_CASE("expansions off the 0.001 grid or past the fraction limit are refused, naming the value", "[spec][family]") {
  // 2.0004 was rounded to 2 silently; 2.667 = 2667/1000 was returned and refused later as
  // "mult_num = 2667 is above the limit", naming neither the value given nor the rule.
  CHECK_THROWS_WITH(expansion_fraction(2.0004, "--mlp-mult"), Catch::Contains("--mlp-mult 2.0004 must be a multiple of 0.001"));
  CHECK_THROWS_WITH(expansion_fraction(2.667), Catch::Contains("2.667 must be a multiple of 0.001 whose fraction in lowest terms"));
  CHECK_THROWS_WITH(expansion_fraction(0.003), Catch::Contains("at most 256"));  // 3/1000
}

TEST_CASE("spec JSON: an integer field given a fraction or a number past int64 is refused, naming the field", "[spec][json]") {
  // get<int64>() of a JSON float is a cast: 256.5 read as 256, r 2.99 as 2, 1e300 undefined.
  const nlohmann::json good = paper_r4();
  const auto refused = [&](const nlohmann::json::json_pointer& at, const nlohmann::json& v, const std::string& field) {
    nlohmann::json j = good;
    j[at] = v;
    INFO(at.to_string());
    CHECK_THROWS_WITH(j.get<ModelSpec>(), Catch::Contains("field '" + field + "' must be a whole number"));
  };
  refused("/d_model"_json_pointer, 256.5, "d_model");
  refused("/vocab"_json_pointer, 1e300, "vocab");
  refused("/vocab_multiple"_json_pointer, nlohmann::json::parse("9223372036854775808"), "vocab_multiple");
  refused("/recur/r"_json_pointer, 2.99, "r");
  refused("/recur/bptt"_json_pointer, 0.5, "bptt");
  refused("/recur/inject/lanes"_json_pointer, 1.5, "lanes");
  refused("/prelude/layer/ffn/mult_num"_json_pointer, 3.7, "mult_num");
  refused("/coda/layer/attn/kv_heads"_json_pointer, -1.5, "kv_heads");
  nlohmann::json whole = good;
  whole["d_model"] = 384.0;  // a whole number written as a float is that number
  CHECK(whole.get<ModelSpec>() == paper_r4());
}

// Found 5 Dec 2026: nlohmann's get said "[json.exception.type_error.302] type must be number, but
// is string", naming no field, for a field of another kind than its type's.
TEST_CASE("spec JSON: a field of the wrong kind is refused, naming the field and the kind it must be", "[spec][json]") {
  const nlohmann::json good = paper_r4();
  const auto refused = [&](const nlohmann::json::json_pointer& at, const nlohmann::json& v, const std::string& text) {
    nlohmann::json j = good;
    j[at] = v;
    INFO(at.to_string());
    CHECK_THROWS_AS(j.get<ModelSpec>(), spec_error);
    CHECK_THROWS_WITH(j.get<ModelSpec>(), Catch::Contains(text));
  };
  refused("/d_model"_json_pointer, "384", "spec: model field 'd_model' must be a number, not \"384\"");
  refused("/vocab"_json_pointer, true, "field 'vocab' must be a number, not true");
  refused("/recur/r"_json_pointer, nullptr, "spec: recur field 'r' must be a number, not null");
  refused("/recur/state_norm"_json_pointer, 1, "spec: recur field 'state_norm' must be a string, not 1");
  refused("/recur/inject/kind"_json_pointer, 2, "spec: inject field 'kind' must be a string, not 2");
  refused("/prelude/layer/ffn/act"_json_pointer, 5, "spec: ffn field 'act' must be a string, not 5");
  refused("/prelude/layer/ffn/shared_expert"_json_pointer, 0, "spec: ffn field 'shared_expert' must be true or false, not 0");
  refused("/coda/layer/attn/rope"_json_pointer, 1, "spec: attn field 'rope' must be true or false, not 1");
  refused("/coda/layer/attn/heads"_json_pointer, nlohmann::json::array({3}), "spec: attn field 'heads' must be a number, not [3]");
  // An object field of the wrong kind is its own reader's to name, as before.
  refused("/recur"_json_pointer, 5, "recur must be an object, got 5");
  refused("/prelude"_json_pointer, 2, "a stack must be an object");
  CHECK(good.get<ModelSpec>() == paper_r4());
}

TEST_CASE("JSON nested past the depth limit is refused at parse time, and a deep bad value is described without dumping it",
          "[spec][json]") {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  CHECK_THROWS_WITH(parse_json_bounded<spec_error>(deep, "f.json"), "f.json: JSON nested deeper than 128 levels");
  CHECK_THROWS_WITH(parse_json_bounded<spec_error>("{\"spec\":" + deep + "}", "f.json"), Catch::Contains("deeper than 128"));
  const std::string at_limit = std::string(json_depth_limit, '[') + std::string(json_depth_limit, ']');
  CHECK(parse_json_bounded<spec_error>(at_limit, "f.json").is_array());
  CHECK_THROWS_AS(parse_json_bounded<spec_error>("[" + at_limit + "]", "f.json"), spec_error);
  // nlohmann parses and frees such a value iteratively; a dump in an error message recursed
  // (SIGSEGV). Held where it was parsed: a copy would recurse too.
  const nlohmann::json v = nlohmann::json::parse(deep);
  CHECK_THROWS_WITH(v.get<ModelSpec>(), Catch::Contains("must be an object, got a deeply nested array"));
  CHECK(json_brief(nlohmann::json(std::string(200, '7'))).size() == 60);  // cut to 57 characters and "..."
}
