// The accounting against the iso-depth paper's published per-width tables (tests/data): total
// non-embedding params N exactly, training FLOPs per token F to the published precision.
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
  using Family = IsoDepthFamily<20, 2, 2, Rs<1, 2, 4, 8>, Width<dynamic>, Vocab<32064>>;
  const std::array<int64, 4> rs{1, 2, 4, 8};
  int checked = 0;
  double worst_f = 0;
  for (std::size_t i = 0; i < rs.size(); ++i) {
    const auto& t = page["width_tables"][std::to_string(rs[i])];
    for (std::size_t j = 0; j < t["log_s"].size(); ++j) {
      const int64 s = std::llround(std::exp(t["log_s"][j].get<double>()));
      const int64 d = ceil_div(64 * s, 128) * 128;  // the paper's width rule
      const ModelSpec m = Family::specs(d)[i];
      const Accounting a = account(m, 2048);
      const double n = std::exp(t["log_N"][j].get<double>());
      const double f = std::exp(t["log_F"][j].get<double>());
      INFO("r=" << rs[i] << " s=" << s << " d=" << d);
      CHECK(std::abs(static_cast<double>(a.params.non_embedding) / n - 1) < 1e-12);
      worst_f = std::max(worst_f, std::abs(static_cast<double>(a.flops_per_token.train) / f - 1));
      ++checked;
    }
  }
  CHECK(checked == 44);
  CHECK(worst_f < 1e-4);  // the published logs carry about five significant digits of F
}
