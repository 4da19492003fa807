// Reading runs: CSV quoting, JSONL, column maps, derived variables, and one clear message per kind
// of bad data.
#include <catch2/catch.hpp>

#include <filesystem>
#include <sstream>

#include <sys/stat.h>

#include "loopscale/law/resample.hpp"
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
  // A number past a double is said to be one (it read "not a JSON object").
  std::istringstream huge("{\"N\": 1e400, \"D\": 4e9, \"loss\": 3.0}\n");
  CHECK_THROWS_WITH(read_jsonl(huge, "x.jsonl"), "data: x.jsonl line 1: a number beyond the range of a double");
}

TEST_CASE("a carriage return inside a line, a newline inside a bad value, a pipe as the runs file", "[law][io]") {
  // CRLF line ends are read as before.
  CHECK(RunReader(csv("N,D,loss\r\n1e8,1e10,3\r\n"), {}).read({"N", "D", "loss"})["loss"][0] == 3);
  // A CR anywhere else was dropped: "3<CR>5" read as the loss 35.
  CHECK_THROWS_WITH(csv("N,D,loss\n1e8,1e10,3\r5\n"), Catch::Contains("runs.csv line 2: a carriage return inside a line"));
  // A quoted value holding a newline is named on one line, escaped.
  const std::string e = error_of(csv("N,D,loss\n1e8,1e10,\"3\n5\"\n"), {}, {"N", "D", "loss"});
  CHECK(e.find("\"3\\n5\" is not a number") != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
  CHECK_THROWS_WITH(csv("N,D,loss\n1e8,1e10,\"3\n"), "data: runs.csv line 2: a quote that never closes");
  // A pipe nobody writes to blocked the reader, /dev/zero filled memory: refused.
  const std::string fifo = std::filesystem::temp_directory_path() / "loopscale_runs_io_fifo.csv";
  std::filesystem::remove(fifo);
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  CHECK_THROWS_WITH(read_table(fifo), Catch::Contains("is a pipe that no process writes to"));
  std::filesystem::remove(fifo);
  CHECK_THROWS_WITH(read_table("/dev/zero"), Catch::Contains("/dev/zero is not a regular file"));
}

TEST_CASE("a UTF-8 byte-order mark before the header or the first line is not part of a name", "[law][io]") {
  // Spreadsheets write one; the first column then read as "\xEF\xBB\xBFN", and N was missing.
  const Runs r = RunReader(csv("\xEF\xBB\xBFN,D,loss\n1e8,1e10,3\n"), {}).read({"N", "D", "loss"});
  CHECK(r["N"][0] == 1e8);
  std::istringstream in("\xEF\xBB\xBF{\"N\": 1e8, \"D\": 1e10, \"loss\": 3}\n");
  CHECK(RunReader(read_jsonl(in, "x.jsonl"), {}).read({"N", "D", "loss"})["loss"][0] == 3);
}

TEST_CASE("dropping the highest losses keeps the order of the rest", "[law][io]") {
  const Runs r = RunReader(csv("N,D,loss\n1,1,3\n2,2,5\n3,3,4\n4,4,2\n"), {}).read({"N", "D", "loss"});
  const Runs kept = drop_highest_loss(r, 2);
  REQUIRE(kept.size() == 2);
  CHECK(kept["N"][0] == 1);
  CHECK(kept["N"][1] == 4);
  CHECK_THROWS_AS(drop_highest_loss(r, 4), data_error);
}

TEST_CASE("tokens from compute: D = C / F, and C / 6N only for dense runs", "[law][io]") {
  // Looped rows with their training FLOPs per token.
  const RunTable t = csv("C,F,N_once,N_rec,r,loss\n1e18,4.7598e8,7082112,7375872,4,2.9\n1e18,4.8e8,7082112,3835392,8,3.0\n");
  const Runs r = RunReader(t, {}).read({"N_once", "N_rec", "r", "D", "loss"});
  CHECK(r["D"][0] == 1e18 / 4.7598e8);
  CHECK(r["D"][1] == 1e18 / 4.8e8);
  // The same rows without F: refused (C / 6 (N_once + r N_rec) would leave out attention and the lm_head).
  const std::string e = error_of(csv("C,N_once,N_rec,N,r,loss\n1e18,7082112,7375872,14457984,4,2.9\n"), {}, {"N_once", "N_rec", "r", "D", "loss"});
  CHECK(e.find("runs.csv line 2") != std::string::npos);
  CHECK(e.find("r = 4") != std::string::npos);
  CHECK(e.find("needs the F column") != std::string::npos);
  CHECK(e.find('\n') == std::string::npos);
  CHECK(error_of(csv("C,N,R,loss\n1e18,1e8,2,2.9\n"), {}, {"N", "D", "loss"}).find("R = 2") != std::string::npos);
  // Dense rows: Chinchilla's and Epoch's C / 6N, with or without an r column of ones.
  CHECK(RunReader(csv("C,N,r,loss\n6e18,1e8,1,2.9\n"), {}).read({"N", "D", "loss"})["D"][0] == Approx(1e10));
  CHECK(RunReader(csv("C,N,loss\n6e18,1e8,2.9\n"), {}).read({"N", "D", "loss"})["D"][0] == Approx(1e10));
  // F wins over 6N when both could apply; F must be positive.
  CHECK(RunReader(csv("C,N,F,loss\n6e18,1e8,1e9,2.9\n"), {}).read({"N", "D", "loss"})["D"][0] == Approx(6e9));
  CHECK(error_of(csv("C,N,F,loss\n6e18,1e8,0,2.9\n"), {}, {"N", "D", "loss"}).find("F = 0 must be > 0") != std::string::npos);
}

TEST_CASE("where the injection counts: read from the file, converted on request, recorded", "[law][io][injection]") {
  // Two runs as a sweep's runs.csv has them: counts with the injection in N_rec, its own count beside.
  const RunTable t = csv("N_once,N_rec,N_inject,injection,r,D,loss\n1000,500,100,rec,4,1e9,3\n1000,400,0,rec,1,1e9,3\n");
  RunReader as_is(t, {});
  const Runs a = as_is.read({"N_once", "N_rec", "r", "D", "loss"});
  CHECK(a.injection == "rec");
  CHECK(a["N_rec"][0] == 500);
  RunReader excluded(t, {});
  excluded.count_injection(loopscale::InjectionCount::excluded);
  const Runs x = excluded.read({"N_once", "N_rec", "N_act", "N_loop", "r", "D", "loss"});
  CHECK(x.injection == "excluded");
  CHECK(x["N_once"][0] == 1000);
  CHECK(x["N_rec"][0] == 400);
  CHECK(x["N_loop"][0] == 400);
  CHECK(x["N_act"][0] == 1400);
  CHECK(x["N_rec"][1] == 400);  // no injection at r = 1
  RunReader once(t, {});
  once.count_injection(loopscale::InjectionCount::once);
  const Runs o = once.read({"N_once", "N_rec", "N_act", "r", "D", "loss"});
  CHECK(o["N_once"][0] == 1100);
  CHECK(o["N_rec"][0] == 400);
  CHECK(o["N_act"][0] == 1500);
  CHECK(o.subset({0}).injection == "once");
  // From a file counted another way, back to rec.
  const RunTable u = csv("N_act,N_loop,N_inject,injection,R,D,loss\n1400,400,100,excluded,4,1e9,3\n1500,400,100,once,4,1e9,3\n");
  RunReader back(u, {});
  back.count_injection(loopscale::InjectionCount::rec);
  const Runs b = back.read({"N_once", "N_rec", "N_act", "N_loop", "r", "D", "loss"});
  CHECK(b["N_once"][0] == 1000);
  CHECK(b["N_rec"][0] == 500);
  CHECK(b["N_act"][1] == 1500);
  CHECK(b["N_loop"][1] == 500);
  CHECK(b["N_once"][1] == 1000);
  // A file of mixed conventions read as it is says nothing; converted, it says the target.
  CHECK(RunReader(u, {}).read({"N_act", "N_loop", "R", "D", "loss"}).injection.empty());
  // Without the columns: refused in one line; a bad word: named.
  const RunTable plain_table = csv("N_once,N_rec,r,D,loss\n1,1,2,1,3\n");  // a reader keeps a reference to its table
  RunReader plain(plain_table, {});
  try {
    plain.count_injection(loopscale::InjectionCount::excluded);
    FAIL("no error");
  } catch (const data_error& e) {
    CHECK(std::string(e.what()).find("'injection' column") != std::string::npos);
  }
  CHECK(plain.read({"N_once", "N_rec", "r", "D", "loss"}).injection.empty());
  const RunTable bad_table = csv("N_once,N_rec,N_inject,injection,r,D,loss\n1,1,0,shared,2,1,3\n");
  RunReader bad(bad_table, {});
  bad.count_injection(loopscale::InjectionCount::excluded);
  CHECK_THROWS_WITH(bad.read({"N_once", "N_rec", "r", "D", "loss"}), Catch::Contains("'shared' is not rec, once or excluded"));
  // A conversion that leaves nothing in the block is an error, not a zero.
  const RunTable empty_table = csv("N_once,N_rec,N_inject,injection,r,D,loss\n10,5,5,rec,2,1,3\n");
  RunReader empty(empty_table, {});
  empty.count_injection(loopscale::InjectionCount::excluded);
  CHECK_THROWS_WITH(empty.read({"N_once", "N_rec", "r", "D", "loss"}), Catch::Contains("must be > 0"));
}

TEST_CASE("held-out slices by value, extreme and range", "[law][io][holdout]") {
  const std::vector<std::string> d{"1e11", "2e11", "4e11", "4.5e11", "5e11", "6e11"};
  const auto picked = [&](const std::string& v) {
    std::string s;
    for (const bool b : slice_rows(d, v, "D")) s += b ? '1' : '0';
    return s;
  };
  CHECK(picked("(4e11,5e11]") == "000110");
  CHECK(picked("[4e11,5e11)") == "001100");
  CHECK(picked("[4e11,5e11]") == "001110");
  CHECK(picked("(4e11,5e11)") == "000100");
  CHECK(picked("(5e11,]") == "000001");
  CHECK(picked("(,2e11]") == "110000");
  CHECK(picked("max") == "000001");
  CHECK(picked("2e11") == "010000");
  CHECK_THROWS_WITH(slice_rows(d, "(5e11,4e11]", "D"), Catch::Contains("is empty"));
  CHECK_THROWS_WITH(slice_rows(d, "(1,2,3]", "D"), Catch::Contains("one comma"));
  CHECK_THROWS_WITH(slice_rows(d, "(a,2]", "D"), Catch::Contains("'a' in '(a,2]' is not a number"));
  CHECK_THROWS_WITH(slice_rows({"x", "1"}, "(0,2]", "cell"), Catch::Contains("column 'cell' is not numeric"));
}
