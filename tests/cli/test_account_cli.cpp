// `loopscale account` against the compile-time types, and its handling of bad specs.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>
#include <loopscale/spec/spec_json.hpp>
#include <loopscale/loopscale.hpp>

#include "run_cli.hpp"

using namespace loopscale;
using loopscale::test::run_cli;

namespace {
using Family = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<384>, Vocab<32064>>;

template <class M>
void check_same(const nlohmann::json& j) {
  constexpr Accounting a = account_of<M>(2048);
  CHECK(j["effective_depth"] == a.effective_depth);
  CHECK(j["params"]["embedding"] == a.params.embedding);
  CHECK(j["params"]["unembedding"] == a.params.unembedding);
  CHECK(j["params"]["once"] == a.params.once);
  CHECK(j["params"]["rec"] == a.params.rec);
  CHECK(j["params"]["non_embedding"] == a.params.non_embedding);
  CHECK(j["params"]["total"] == a.params.total);
  CHECK(j["params"]["active"] == a.params.active);
  CHECK(j["params"]["unrolled"] == a.params.unrolled);
  CHECK(j["params"]["unrolled_active"] == a.params.unrolled_active);
  CHECK(j["params"]["inject"] == a.params.inject);
  CHECK(j["flops_per_token"]["forward"] == a.flops_per_token.forward);
  CHECK(j["flops_per_token"]["train"] == a.flops_per_token.train);
}
}  // namespace

TEST_CASE("account --json equals the compile-time family", "[cli][account]") {
  const auto get = [](int r) {
    const std::string inject = r > 1 ? " --inject linear" : "";
    const auto res = run_cli("account --json --d-model 384 --heads 3 --vocab 32064 --seq-len 2048 --prelude 2 --coda 2"
                             " --recur-layers " + std::to_string(16 / r) + " --r " + std::to_string(r) + inject);
    REQUIRE(res.rc == 0);
    return nlohmann::json::parse(res.out);
  };
  check_same<Family::member<1>>(get(1));
  check_same<Family::member<2>>(get(2));
  check_same<Family::member<4>>(get(4));
  check_same<Family::member<8>>(get(8));
  // The integers are integers in the JSON.
  CHECK(get(4)["flops_per_token"]["train"].is_number_integer());
}

TEST_CASE("account derives the block from --depth and prints a table", "[cli][account]") {
  const auto res = run_cli("account --d-model 384 --r 4");
  REQUIRE(res.rc == 0);
  CHECK(res.out.find("482139648") != std::string::npos);  // the r = 4 train FLOPs per token (state norm in every recurrence)
  CHECK(res.out.find("effective depth 20") != std::string::npos);
}

TEST_CASE("account MoE and truncated BPTT flags", "[cli][account][moe]") {
  const auto res = run_cli("account --json --d-model 256 --vocab 256 --seq-len 256 --prelude 1 --coda 1 --recur-layers 2"
                           " --r 2 --inject linear --experts 8 --top-k 2 --expert-ff 512");
  REQUIRE(res.rc == 0);
  const auto j = nlohmann::json::parse(res.out);
  // Differs from the hand-computed MoE model only in the MoE in prelude and coda (the CLI uses one
  // layer type throughout): rec is the same.
  CHECK(j["params"]["rec"] == 4854784);
  // Routing options change no count.
  const auto routed = run_cli("account --json --d-model 256 --vocab 256 --seq-len 256 --prelude 1 --coda 1 --recur-layers 2"
                              " --r 2 --inject linear --experts 8 --top-k 2 --expert-ff 512 --router sigmoid --balance bias:0.001"
                              " --z-loss 1e-4 --capacity 1.5");
  REQUIRE(routed.rc == 0);
  CHECK(nlohmann::json::parse(routed.out) == j);
  const auto t = run_cli("account --json --d-model 384 --r 4 --bptt half");
  REQUIRE(t.rc == 0);
  CHECK(nlohmann::json::parse(t.out)["flops_per_token"]["train"] == 372797952);
}

TEST_CASE("account rejects bad specs with one line and exit 2", "[cli][account][errors]") {
  const char* bad[] = {
      "account --d-model 384 --heads 5",                     // not divisible
      "account --d-model 384 --r 0",                         // r < 1
      "account --d-model 384 --r 4 --bptt 5",                // bptt > r
      "account --d-model 384 --experts 2 --top-k 3",         // top-k > experts
      "account --d-model 384 --r 2 --inject sideways",       // unknown inject
      "account --d-model -384",                              // negative
      "account --r 2",                                       // missing d-model
      "account --d-model",                                   // missing value
      "account --d-model 384 --r 3",                         // 3 does not divide 16
      "account --d-model 384 --r 2 --inject hyper:0",        // no lanes
      "account --d-model 384 --seq-len 0",                   // T < 1
      "account --d-model 384 --convention 6nd",              // unknown convention
      "account --d-model abc",                               // not a number
      "account --d-model 384 --experts 0 --top-k 1",         // top-k without experts
      "account --d-model 384 --experts -2",                  // E < 1
      "account --d-model 384 --experts 4 --capacity 0",      // capacity <= 0
      "account --d-model 384 --experts 4 --router relu",     // unknown router
      "account --d-model 384 --experts 4 --balance aux",     // balance without a coefficient
      "account --d-model 384 --experts 4 --z-loss -1",       // negative z-loss
      "account --d-model 384 --balance bias:0.001",          // routing flags without experts
      "account --d-model 384 --moe-every 2",                 // placement without experts
      "account --d-model 384 --experts 4 --moe-every 0",     // every < 1
      "account --d-model 384 --experts 4 --moe-first-dense -1",  // negative
      "account --d-model 384 --experts 4 --moe-layers coda", // unknown scope
      "account --compare only_one.json",                     // --compare takes two
      "account --d-model 384 --seq-len 9000000000000000000", // T above 2^20: the FLOP count overflowed int64
      "account --d-model 384 --mlp-mult 1e300",              // above the limit (was "at least 0.001")
  };
  for (const char* args : bad) {
    INFO(args);
    const auto res = run_cli(args);
    CHECK(res.rc == 2);
    CHECK(loopscale::test::count_lines(res.out) == 1);
    CHECK(res.out.rfind("loopscale: error: ", 0) == 0);
  }
  // Sizes too large to count are named as such, not as another fault.
  for (const char* args : {"account --d-model 384 --seq-len 9000000000000000000", "account --d-model 384 --mlp-mult 1e300"}) {
    INFO(args);
    CHECK_THAT(run_cli(args).out, Catch::Contains("is above the limit"));
  }
}

TEST_CASE("account: mixed stacks from --moe-every / --moe-first-dense / --moe-layers", "[cli][account][moe]") {
  // The mixed family of examples/static_verification.cpp at r = 4: dense and MoE alternate in the block.
  const auto res = run_cli("account --json --d-model 12 --head-dim 4 --vocab 256 --depth 10 --prelude 1 --coda 1 --r 4"
                           " --seq-len 64 --experts 4 --top-k 1 --moe-every 2 --moe-first-dense 1 --moe-layers recur");
  REQUIRE(res.rc == 0);
  const auto j = nlohmann::json::parse(res.out);
  const auto& block = j["spec"]["recur"]["block"]["layers"];
  REQUIRE(block.is_array());
  REQUIRE(block.size() == 2);
  CHECK(block[0]["ffn"]["experts"] == 0);
  CHECK(block[1]["ffn"]["experts"] == 4);
  CHECK(j["spec"]["prelude"]["layer"]["ffn"]["experts"] == 0);
  using Mixed = IsoDepthFamily<10, 1, 1, Rs<1, 2, 4>, Width<12>, Vocab<256>, Linear, Layer<Attention<0, 4>>, full_bptt,
                               MoeEvery<MoE<4, 1>, 2, 1, MoeScope::recur>>;
  CHECK(j["spec"].get<ModelSpec>() == spec_of<Mixed::member<4>>());
  CHECK(j["flops_per_token"]["train"] == account_of<Mixed::member<4>>(64).flops_per_token.train);
  // DeepSeek style: the first two layers dense, then MoE everywhere.
  const auto ds = run_cli("account --json --d-model 256 --r 2 --depth 6 --prelude 1 --coda 1 --experts 8 --top-k 2 --moe-first-dense 2");
  REQUIRE(ds.rc == 0);
  const auto k = nlohmann::json::parse(ds.out)["spec"];
  CHECK(k["prelude"]["layer"]["ffn"]["experts"] == 0);
  CHECK(k["recur"]["block"]["layers"][0]["ffn"]["experts"] == 0);
  CHECK(k["recur"]["block"]["layers"][1]["ffn"]["experts"] == 8);
  CHECK(k["coda"]["layer"]["ffn"]["experts"] == 8);
}

TEST_CASE("account --compare: the run-time twins of the static checks", "[cli][account][compare]") {
  const std::string dir = (std::filesystem::temp_directory_path() / "loopscale_account_compare").string();
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, const ModelSpec& m) {
    std::ofstream(dir + "/" + name) << nlohmann::json(m).dump();
    return dir + "/" + name;
  };
  const std::string r1 = write("r1.json", spec_of<Family::member<1>>());
  const std::string r4 = write("r4.json", spec_of<Family::member<4>>());
  using Short = Model<Width<384>, Vocab<32064>, Prelude<1>, Recur<Block<Repeat<4, Layer<>>>, 4, Linear>, Coda<1>>;  // depth 18
  const std::string shallow = write("short.json", spec_of<Short>());
  // A train config holding the spec is read too.
  std::ofstream(dir + "/config.json") << nlohmann::json{{"spec", spec_of<Family::member<8>>()}, {"lr", 1e-3}}.dump();

  const auto ok = run_cli("account --compare " + r1 + " " + r4);
  CHECK(ok.rc == 0);
  CHECK_THAT(ok.out, Catch::Contains("iso-depth  yes   (required)"));
  const auto js = run_cli("account --json --compare " + r1 + " " + dir + " --require iso-depth,compute,width --tolerance 0.035");
  REQUIRE(js.rc == 0);
  const auto j = nlohmann::json::parse(js.out);
  CHECK(j["checks"]["iso-depth"] == true);
  CHECK(j["checks"]["params"] == false);
  CHECK(j["B"]["params"]["non_embedding"] == account_of<Family::member<8>>(2048).params.non_embedding);

  const auto depth = run_cli("account --compare " + r1 + " " + shallow);
  CHECK(depth.rc == 2);
  CHECK_THAT(depth.out, Catch::Contains(std::string("loopscale: error: ") + LOOPSCALE_MSG_ISO_DEPTH + " (A: 20, B: 18)\n"));
  const auto params = run_cli("account --compare " + r1 + " " + r4 + " --require params --tolerance 0.1");
  CHECK(params.rc == 2);
  CHECK_THAT(params.out, Catch::Contains(LOOPSCALE_MSG_MATCHED_PARAMS));
  const auto tight = run_cli("account --compare " + r1 + " " + dir + " --tolerance 0.001");
  CHECK(tight.rc == 2);
  CHECK_THAT(tight.out, Catch::Contains(LOOPSCALE_MSG_MATCHED_COMPUTE));

  // Train configs and runs record their context length, and the FLOPs per token are counted at it:
  // at 64 tokens the two members differ in compute by 1.2%, at the default 2048 by 0.75%, so at a
  // tolerance of 1% a comparison at 2048 would pass runs that are not matched.
  const auto config_at = [&](const std::string& name, const ModelSpec& m, int64 T) {
    std::filesystem::create_directories(dir + "/" + name);
    std::ofstream(dir + "/" + name + "/config.json") << nlohmann::json{{"spec", m}, {"seq_len", T}}.dump();
    return dir + "/" + name;
  };
  const std::string run1 = config_at("run1", spec_of<Family::member<1>>(), 64), run2 = config_at("run2", spec_of<Family::member<2>>(), 64);
  const std::string run2_long = config_at("run2_long", spec_of<Family::member<2>>(), 128);
  const auto at_run = run_cli("account --json --compare " + run1 + " " + run2 + " --tolerance 0.01");
  REQUIRE(at_run.rc == 2);  // the runs' 64 tokens: not matched at 1%
  CHECK_THAT(at_run.out, Catch::Contains(LOOPSCALE_MSG_MATCHED_COMPUTE));
  const auto at_flag = run_cli("account --json --compare " + run1 + " " + run2 + " --tolerance 0.01 --seq-len 2048 --require iso-depth");
  REQUIRE(at_flag.rc == 0);
  const auto jf = nlohmann::json::parse(at_flag.out);
  CHECK(jf["seq_len"] == 2048);
  CHECK(jf["checks"]["compute"] == true);
  const auto at_64 = run_cli("account --json --compare " + run1 + " " + run2 + " --require iso-depth");
  REQUIRE(at_64.rc == 0);
  const auto j64 = nlohmann::json::parse(at_64.out);
  CHECK(j64["seq_len"] == 64);
  CHECK(j64["A"]["flops_per_token"]["train"] == account_of<Family::member<1>>(64).flops_per_token.train);
  CHECK(j64["B"]["flops_per_token"]["train"] == account_of<Family::member<2>>(64).flops_per_token.train);
  const auto mixed = run_cli("account --compare " + run1 + " " + run2_long);
  CHECK(mixed.rc == 2);
  CHECK(mixed.out == "loopscale: error: --compare: the two record different context lengths (seq_len 64 and 128); give --seq-len to compare both at one\n");

  std::ofstream(dir + "/broken.json") << "{\"d_model\": 384";
  // Files are outside input: sizes too large to count are refused as the flags' are (spec/limits.hpp).
  ModelSpec wide = spec_of<Family::member<1>>();
  wide.d_model = int64{1} << 40;
  const std::string too_wide = write("too_wide.json", wide);
  const std::string too_long = config_at("too_long", spec_of<Family::member<2>>(), int64{1} << 40);
  for (const std::string& f : {too_wide, too_long}) {
    const auto res = run_cli("account --compare " + r1 + " " + f);
    INFO(f);
    CHECK(res.rc == 2);
    CHECK(loopscale::test::count_lines(res.out) == 1);
    CHECK_THAT(res.out, Catch::Contains("is above the limit"));
  }
  for (const std::string& args : {"account --compare " + r1 + " " + dir + "/missing.json", "account --compare " + r1 + " " + dir + "/broken.json",
                                  "account --compare " + r1 + " " + r4 + " --require sideways",
                                  "account --compare " + r1 + " " + r4 + " --require width,compute,width",  // a check named twice
                                  "account --compare " + r1 + " " + r4 + " --d-model 384"}) {
    INFO(args);
    const auto res = run_cli(args);
    CHECK(res.rc == 2);
    CHECK(loopscale::test::count_lines(res.out) == 1);
  }
  // A comparison's checks without a comparison checked nothing, rc 0.
  for (const char* flag : {"--require width", "--tolerance 0.1"}) {
    const auto res = run_cli(std::string("account --d-model 256 ") + flag);
    INFO(flag << " -> " << res.out);
    CHECK(res.rc == 2);
    CHECK(loopscale::test::count_lines(res.out) == 1);
    CHECK_THAT(res.out, Catch::Contains("is used with --compare A B only"));
  }
}

// `--require ''` and `--require 'width,,'` passed with nothing (or less) checked, rc 0; `--tolerance
// inf` passed `>= 0` and matched every count, so a model of twice the compute "matched".
TEST_CASE("account --compare: an empty --require entry and a --tolerance that is not a finite number >= 0 are refused",
          "[cli][account][compare]") {
  const std::string dir = (std::filesystem::temp_directory_path() / "loopscale_account_require").string();
  std::filesystem::create_directories(dir);
  const auto write = [&](const std::string& name, const ModelSpec& m) {
    std::ofstream(dir + "/" + name) << nlohmann::json(m).dump();
    return dir + "/" + name;
  };
  using Short = Model<Width<384>, Vocab<32064>, Prelude<1>, Recur<Block<Repeat<4, Layer<>>>, 4, Linear>, Coda<1>>;  // depth 18
  const std::string compare = "account --compare " + write("r4.json", spec_of<Family::member<4>>()) + " " + write("short.json", spec_of<Short>());
  const auto expect_error = [](const std::string& args, const std::string& text) {
    const auto r = run_cli(args);
    INFO(args << "\n-> " << r.out);
    CHECK(r.rc == 2);
    CHECK(loopscale::test::count_lines(r.out) == 1);
    CHECK_THAT(r.out, Catch::Contains(text));
  };
  expect_error(compare + " --require ''", "--require: an empty entry in ''");
  expect_error(compare + " --require width,,", "--require: an empty entry in 'width,,'");
  expect_error(compare + " --require ,width", "--require: an empty entry in ',width'");
  expect_error(compare + " --require width,width", "--require lists width twice");
  for (const char* t : {"inf", "nan", "-1"})
    expect_error(compare + " --require compute --tolerance " + t, std::string("--tolerance must be a finite number >= 0, not ") + t);
  // What is given is checked: the widths match, the depths (the default iso-depth) do not.
  CHECK(run_cli(compare + " --require width").rc == 0);
  CHECK(run_cli(compare + " --require width --tolerance 0").rc == 0);
  CHECK(run_cli(compare).rc == 2);
}
