// `loopscale account` against the compile-time types, and its handling of bad specs.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>
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
  CHECK(res.out.find("482132736") != std::string::npos);  // the r = 4 train FLOPs per token
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
  CHECK(nlohmann::json::parse(t.out)["flops_per_token"]["train"] == 372794112);
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
  };
  for (const char* args : bad) {
    INFO(args);
    const auto res = run_cli(args);
    CHECK(res.rc == 2);
    CHECK(loopscale::test::count_lines(res.out) == 1);
    CHECK(res.out.rfind("loopscale: error: ", 0) == 0);
  }
}
