// The accounting against the iso-depth paper's published per-width tables (tests/data), through the
// one paper grid (spec/paper_grid.hpp) that the `paper` preset and the law's grid also read: total
// non-embedding params N exactly, training FLOPs per token F within 1e-4 in log F. This is the one
// place the published tables are checked.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>
#include <loopscale/loopscale.hpp>

using namespace loopscale;

TEST_CASE("published width tables of the iso-depth paper", "[account][paper]") {
  std::ifstream in(LOOPSCALE_TEST_DATA "/isodepth_project_page.json");
  REQUIRE(in);
  const nlohmann::json page = nlohmann::json::parse(in);
  int checked = 0;
  double worst_log_f = 0;
  for (const int64 r : paper::rs) {
    const auto& t = page["width_tables"][std::to_string(r)];
    for (std::size_t j = 0; j < t["log_s"].size(); ++j) {
      const int64 s = std::llround(std::exp(t["log_s"][j].get<double>()));
      const ModelSpec m = family_member(paper::family(), r, paper::width(s));
      const Accounting a = account(m, paper::seq_len);
      INFO("r=" << r << " s=" << s << " d=" << m.d_model);
      CHECK(std::abs(static_cast<double>(a.params.non_embedding) / std::exp(t["log_N"][j].get<double>()) - 1) < 1e-12);
      worst_log_f = std::max(worst_log_f, std::abs(std::log(static_cast<double>(a.flops_per_token.train)) - t["log_F"][j].get<double>()));
      ++checked;
    }
  }
  CHECK(checked == 44);
  CHECK(worst_log_f <= 1e-4);  // the published logs carry about five significant digits of F
}

TEST_CASE("the paper grid: 116 runs, the vocabulary that reproduces the tables", "[account][paper]") {
  std::size_t points = 0;
  for (const ComputeBudget& b : paper::budgets()) points += b.widths.size();
  CHECK(points == 29);
  CHECK(points * paper::rs.size() == 116);
  CHECK(paper::vocab == 32064);
  CHECK(paper::width(6) == 384);
  CHECK(paper::width(34) == 2176);
  // With the unpadded 32000 the lm_head is smaller and log F misses the tables by up to 3e-4.
  FamilySpec f = paper::family();
  f.vocab = 32000;
  f.vocab_multiple = 1;
  const double drift = std::log(static_cast<double>(count_flops(family_member(paper::family(), 8, 384), 2048).train)) -
                       std::log(static_cast<double>(count_flops(family_member(f, 8, 384), 2048).train));
  CHECK(drift > 1e-4);
}
