// Reading runs: CSV quoting, JSONL, column maps, derived variables, and one clear message per kind
// of bad data.
#include <catch2/catch.hpp>

#include <sstream>

#include "loopscale/law/runs_io.hpp"

using namespace loopscale::law;

namespace {
RunTable csv(const std::string& text) {
  std::istringstream in(text);
  return read_csv(in, "runs.csv");
}
std::string error_of(const RunTable& t, const ColumnMap& m, const std::vector<std::string>& need) {
  try {
    RunReader(t, m).read(need);
  } catch (const data_error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST_CASE("CSV with quoted fields, a column map and D = C / 6N", "[law][io]") {
  const RunTable t = csv("\"Model Size\",\"Training FLOP\",loss,note\n1e8,6e17,3.1,\"a, b\"\n2e8,1.2e18,2.9,\"say \"\"hi\"\"\"\n");
  REQUIRE(t.rows() == 2);
  CHECK(t.cells[3][0] == "a, b");
  CHECK(t.cells[3][1] == "say \"hi\"");
  const Runs r = RunReader(t, {{"N", "Model Size"}, {"C", "Training FLOP"}}).read({"N", "D", "loss"});
  CHECK(r["D"][0] == Approx(6e17 / (6 * 1e8)));
  CHECK(r["D"][1] == Approx(1.2e18 / (6 * 2e8)));
  CHECK(r.lines[1] == 3);
}

TEST_CASE("JSONL rows and looped variables derived both ways", "[law][io]") {
  std::istringstream in("{\"N_act\": 3e8, \"N_loop\": 1e8, \"R\": 4, \"N_total\": 6e8, \"D\": 1e11, \"loss\": 2.5, \"cell\": \"a\"}\n\n"
                        "{\"N_act\": 6e8, \"N_loop\": 2e8, \"R\": 2, \"N_total\": 6e8, \"D\": 2e11, \"loss\": 2.4, \"cell\": \"b\"}\n");
  const RunTable t = read_jsonl(in, "runs.jsonl");
  REQUIRE(t.rows() == 2);
  RunReader reader(t, {});
  const Runs r = reader.read({"N_once", "N_rec", "r", "m", "K", "D", "loss"});
  CHECK(r["N_once"][0] == Approx(2e8));
  CHECK(r["N_rec"][1] == Approx(2e8));
  CHECK(r["r"][0] == 4);
  CHECK(r["m"][0] == Approx(0.5));
  CHECK(r["m"][1] == Approx(1.0));
  CHECK(r["K"][0] == 1);
  CHECK(reader.labels("cell")[1] == "b");
  CHECK(r.lines[1] == 3);
}

TEST_CASE("bad data gets one line naming the file, line and column", "[law][io]") {
  const RunTable t = csv("N,D,loss\n1e8,1e10,3\n2e8,abc,2.9\n");
  const std::string e = error_of(t, {}, {"N", "D", "loss"});
  CHECK(e.find("runs.csv line 3, column 'D'") != std::string::npos);
  CHECK(e.find("not a number") != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
  CHECK(error_of(csv("N,D,loss\n1e8,1e10,inf\n"), {}, {"N", "D", "loss"}).find("not finite") != std::string::npos);
  CHECK(error_of(csv("N,D,loss\n1e8,1e10,0\n"), {}, {"N", "D", "loss"}).find("loss = 0 must be > 0") != std::string::npos);
  CHECK(error_of(csv("N,D,loss\n-1,1e10,3\n"), {}, {"N", "D", "loss"}).find("N = -1 must be > 0") != std::string::npos);
  CHECK(error_of(csv("N,D,loss\n1,0,3\n"), {}, {"N", "D", "loss"}).find("D = 0 must be > 0") != std::string::npos);
  const std::string missing = error_of(csv("size,D,loss\n1e8,1e10,3\n"), {}, {"N", "D", "loss"});
  CHECK(missing.find("no column 'N'") != std::string::npos);
  CHECK(missing.find("--map N=") != std::string::npos);
  CHECK(error_of(csv("N,loss\n1e8,3\n"), {}, {"N", "D", "loss"}).find("C with N") != std::string::npos);
  CHECK_THROWS_AS(RunReader(csv("N,D,loss\n1,1,1\n"), {{"N", "Model Size"}}), data_error);
  CHECK_THROWS_AS(csv("a,b\n1,2,3\n"), data_error);
  std::istringstream bad("{\"N\": 1}\n[1, 2]\n");
  CHECK_THROWS_AS(read_jsonl(bad, "x.jsonl"), data_error);
}

TEST_CASE("dropping the highest losses keeps the order of the rest", "[law][io]") {
  const Runs r = RunReader(csv("N,D,loss\n1,1,3\n2,2,5\n3,3,4\n4,4,2\n"), {}).read({"N", "D", "loss"});
  const Runs kept = drop_highest_loss(r, 2);
  REQUIRE(kept.size() == 2);
  CHECK(kept["N"][0] == 1);
  CHECK(kept["N"][1] == 4);
  CHECK_THROWS_AS(drop_highest_loss(r, 4), data_error);
}
