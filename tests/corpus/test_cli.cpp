// `loopscale data` through the program: a working round (tokenizer train, prepare, verify, export,
// import) and every bad input as one line naming the file, exit code 2.
#include <catch2/catch.hpp>

#include <cstdio>

#include <sys/stat.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include "cli/run_cli.hpp"
#include "corpus/helpers.hpp"
#include "loopscale/data/corpus.hpp"

using namespace loopscale;
using namespace loopscale::test;

namespace {

// Exit code 2 and a single line that contains every one of `parts`, under `timeout 60` (run_cli.hpp).
void expect_bad(const std::string& args, const std::vector<std::string>& parts) {
  const CliResult r = run_cli(args, "timeout 60 ");
  INFO("loopscale " << args << "\n" << r.out);
  REQUIRE(r.rc == 2);
  REQUIRE(count_lines(r.out) == 1);
  for (const auto& p : parts) REQUIRE(r.out.find(p) != std::string::npos);
}

}  // namespace

TEST_CASE("data CLI: tokenizer train, prepare, verify, export and import", "[corpus][cli]") {
  const fs::path dir = temp_dir("cli_ok");
  std::ofstream f(dir / "docs.jsonl");
  for (int i = 0; i < 300; ++i) f << nlohmann::json{{"body", document(i)}}.dump() << "\n";
  f.close();
  const std::string d = dir.string();
  auto r = run_cli("data tokenizer train --input " + d + "/docs.jsonl --text-field body --vocab 400 --val-fraction 0.1 --out " + d + "/t.model");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  REQUIRE(r.out.find("xxh3-64:") != std::string::npos);
  r = run_cli("data prepare --quiet --input " + d + "/docs.jsonl --text-field body --tokenizer " + d + "/t.model --val-fraction 0.1 --shard-tokens 3000 --out " + d + "/c");
  INFO(r.out);
  REQUIRE(r.rc == 0);
  REQUIRE(r.out.find("bytes per token") != std::string::npos);
  r = run_cli("data verify " + d + "/c");
  REQUIRE(r.rc == 0);
  REQUIRE(r.out.find("every checksum matches") != std::string::npos);
  REQUIRE(run_cli("data export --format llmc --data " + d + "/c --out " + d + "/x --shard-tokens 0").rc == 0);
  REQUIRE(run_cli("data import --format llmc --train " + d + "/x/train.bin --val " + d + "/x/val.bin --tokenizer " + d + "/c/tokenizer.model --out " + d + "/c2").rc == 0);
  // Imported with its tokenizer: the same tokens and the same text bytes.
  for (const auto s : {data::Split::train, data::Split::val}) {
    const auto a = data::open_corpus(dir / "c", s), b = data::open_corpus(dir / "c2", s);
    REQUIRE(all_tokens(a) == all_tokens(b));
    REQUIRE(a.text_bytes() == b.text_bytes());
  }
  fs::remove_all(dir);
}

TEST_CASE("data CLI: every bad input is one line naming the file, exit code 2", "[corpus][cli]") {
  const fs::path dir = temp_dir("cli_bad");
  const std::string d = dir.string();
  // A valid corpus to damage.
  std::ofstream f(dir / "docs.txt");
  for (int i = 0; i < 200; ++i) f << document(i) << "\n";
  f.close();
  REQUIRE(run_cli("data prepare --quiet --input " + d + "/docs.txt --documents paragraph --val-fraction 0.2 --shard-tokens 4000 --out " + d + "/c").rc == 0);

  SECTION("wrong magic") {
    std::string s = slurp(dir / "c" / "train_00001.bin");
    s[0] = 'X';
    write_text(dir / "c" / "train_00001.bin", s);
    expect_bad("data verify " + d + "/c", {"train_00001.bin", "bad magic"});
    expect_bad("train --d-model 16 --heads 2 --depth 6 --r 2 --tokens 1e4 --data " + d + "/c --out " + d + "/run", {"train_00001.bin", "bad magic"});
    write_text(dir / "notllmc.bin", std::string(2048, 'a'));
    expect_bad("data import --format llmc --train " + d + "/notllmc.bin --vocab 100 --out " + d + "/i", {"notllmc.bin", "bad magic"});
  }
  SECTION("truncated shard") {
    fs::resize_file(dir / "c" / "train_00002.bin", fs::file_size(dir / "c" / "train_00002.bin") - 3);
    expect_bad("data verify " + d + "/c", {"train_00002.bin", "truncated"});
    expect_bad("train --d-model 16 --heads 2 --depth 6 --r 2 --tokens 1e4 --data " + d + "/c --out " + d + "/run", {"train_00002.bin", "truncated"});
    expect_bad("data export --format raw16 --data " + d + "/c --out " + d + "/x", {"train_00002.bin", "truncated"});
  }
  SECTION("vocab mismatch") {
    expect_bad("train --d-model 16 --heads 2 --depth 6 --r 2 --vocab 1000 --tokens 1e4 --data " + d + "/c --out " + d + "/run",
               {"manifest.json", "vocab 1000 does not match", "give the model vocab 256"});
    std::vector<std::uint16_t> t = {1, 2, 700};
    write_text(dir / "raw.bin", std::string(reinterpret_cast<const char*>(t.data()), 6));
    expect_bad("data import --format raw16 --train " + d + "/raw.bin --vocab 512 --out " + d + "/i", {"raw.bin", "outside the vocab 512"});
  }
  SECTION("empty input") {
    write_text(dir / "empty.txt", "");
    expect_bad("data prepare --input " + d + "/empty.txt --out " + d + "/e", {"empty.txt", "empty input"});
    fs::create_directories(dir / "nothing");
    expect_bad("data prepare --input " + d + "/nothing --out " + d + "/e", {"nothing", "empty input"});
    expect_bad("data tokenizer train --input " + d + "/empty.txt --vocab 300 --out " + d + "/t.model", {"empty.txt", "empty input"});
    write_text(dir / "empty.raw", "");
    expect_bad("data import --format raw32 --train " + d + "/empty.raw --vocab 10 --out " + d + "/e", {"empty.raw", "empty input"});
  }
  SECTION("values out of range (4 Dec 2026: NaN put every document in training, 200 threads reached SentencePiece's own check)") {
    expect_bad("data prepare --input " + d + "/docs.txt --val-fraction nan --out " + d + "/n", {"--val-fraction must be in [0, 1)"});
    expect_bad("data tokenizer train --input " + d + "/docs.txt --val-fraction -1 --vocab 300 --out " + d + "/t.model",
               {"--val-fraction must be in [0, 1)"});
    expect_bad("data tokenizer train --input " + d + "/docs.txt --threads 200 --vocab 300 --out " + d + "/t.model", {"at most 128"});
    expect_bad("data prepare --input " + d + "/docs.txt --out " + d + "/docs.txt", {"docs.txt is a file, not a folder"});
    // The same documents in training and validation (or counted twice) was accepted silently.
    expect_bad("data prepare --input " + d + "/docs.txt --val-input " + d + "/docs.txt --out " + d + "/v",
               {"--val-input", "is also read by --input", "in training and in validation"});
    expect_bad("data prepare --input " + d + " --val-input " + d + "/docs.txt --out " + d + "/v", {"is also read by --input " + d});
    expect_bad("data prepare --input " + d + "/docs.txt --input " + d + "/./docs.txt --out " + d + "/v", {"is read twice"});
    // An export into the corpus itself overwrote the files it was reading.
    expect_bad("data export --format raw16 --data " + d + "/c --out " + d + "/c", {"is the corpus itself"});
    REQUIRE(run_cli("data export --format raw16 --data " + d + "/c --out " + d + "/x").rc == 0);
    expect_bad("data export --format raw16 --data " + d + "/c --out " + d + "/x", {"already holds", "export into an empty folder"});
  }
  SECTION("missing text field") {
    write_text(dir / "docs.jsonl", "{\"text\": \"fine\"}\n{\"content\": \"no text here\"}\n");
    expect_bad("data prepare --input " + d + "/docs.jsonl --out " + d + "/j", {"docs.jsonl:2", "no text field 'text'"});
    expect_bad("data tokenizer train --input " + d + "/docs.jsonl --vocab 300 --out " + d + "/t.model", {"docs.jsonl:2", "no text field 'text'"});
    write_text(dir / "notjson.jsonl", "{\"text\": \"fine\"}\nnot json\n");
    expect_bad("data prepare --input " + d + "/notjson.jsonl --out " + d + "/j", {"notjson.jsonl:2", "not a JSON line"});
  }
  const auto fifo = [&](const fs::path& p) {
    fs::remove(p);
    REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
  };
  SECTION("a pipe or a folder where manifest.json is read (data verify and export waited for ever on a pipe, 5 Dec 2026)") {
    fs::copy(dir / "c", dir / "m", fs::copy_options::recursive);
    fifo(dir / "m" / "manifest.json");
    expect_bad("data verify " + d + "/m", {"m/manifest.json is not a regular file"});
    expect_bad("data export --format raw16 --data " + d + "/m --out " + d + "/x", {"m/manifest.json is not a regular file"});
    expect_bad("train --d-model 16 --heads 2 --depth 6 --r 2 --tokens 1e4 --data " + d + "/m --out " + d + "/run",
               {"m/manifest.json is not a regular file"});
    fs::remove(dir / "m" / "manifest.json");
    fs::create_directories(dir / "m" / "manifest.json");  // was a JSON parse error
    expect_bad("data verify " + d + "/m", {"m/manifest.json is a folder, not a file"});
  }
  SECTION("a pipe or a device where tokenizer.model or an input file is read (data verify waited for ever, or read /dev/zero for ever)") {
    // A SentencePiece corpus's tokenizer.model: a pipe, and a link to /dev/zero.
    auto mj = nlohmann::json::parse(slurp(dir / "c" / "manifest.json"));
    mj["tokenizer"]["kind"] = "sentencepiece";
    mj["tokenizer"]["file"] = "tokenizer.model";
    mj["tokenizer"]["checksum"] = "xxh3-64:0123456789abcdef";
    write_text(dir / "c" / "manifest.json", mj.dump());
    fifo(dir / "c" / "tokenizer.model");
    expect_bad("data verify " + d + "/c", {"c/tokenizer.model is not a regular file"});
    fs::remove(dir / "c" / "tokenizer.model");
    fs::create_symlink("/dev/zero", dir / "c" / "tokenizer.model");
    expect_bad("data verify " + d + "/c", {"c/tokenizer.model is not a regular file"});
    // The inputs of prepare and import given by name.
    fifo(dir / "in.jsonl");
    expect_bad("data prepare --input " + d + "/in.jsonl --out " + d + "/p", {"in.jsonl is not a regular file"});
    expect_bad("data prepare --input " + d + "/docs.txt --tokenizer " + d + "/in.jsonl --out " + d + "/p", {"in.jsonl is not a regular file"});
    expect_bad("data import --format raw16 --train " + d + "/in.jsonl --vocab 300 --out " + d + "/p", {"in.jsonl is not a regular file"});
    expect_bad("data tokenizer train --input /dev/zero --vocab 300 --out " + d + "/t.model", {"/dev/zero is not a regular file"});
    CHECK(!fs::exists(dir / "p"));
  }
  SECTION("documents that are all empty (a corpus of 0 tokens was written, exit 0, that data verify refused)") {
    write_text(dir / "e.jsonl", "{\"text\": \"\"}\n{\"text\": \"\"}\n");
    expect_bad("data prepare --input " + d + "/e.jsonl --out " + d + "/e", {"every document of --input " + d + "/e.jsonl is empty", "empty input"});
    expect_bad("data prepare --input " + d + "/docs.txt --val-input " + d + "/e.jsonl --out " + d + "/e",
               {"every document of --val-input " + d + "/e.jsonl is empty"});
    CHECK(!fs::exists(dir / "e"));
  }
  SECTION("a JSON line that names its text field twice (the last value was taken without a word)") {
    write_text(dir / "dup.jsonl", "{\"text\": \"fine\"}\n{\"text\": \"aaaa\", \"text\": \"b\"}\n");
    expect_bad("data prepare --input " + d + "/dup.jsonl --out " + d + "/j", {"dup.jsonl:2", "the key \"text\" appears twice"});
    expect_bad("data tokenizer train --input " + d + "/dup.jsonl --vocab 300 --out " + d + "/t.model", {"dup.jsonl:2", "appears twice"});
  }
  SECTION("a --pack past the longest sequence (2^64 - 1 wrapped to 0: an unpacked corpus, exit 0)") {
    expect_bad("data prepare --input " + d + "/docs.txt --pack 18446744073709551615 --out " + d + "/p", {"--pack 18446744073709551615", "1048576"});
    expect_bad("data prepare --input " + d + "/docs.txt --pack 1048577 --out " + d + "/p", {"--pack 1048577 is above 1048576"});
    CHECK(!fs::exists(dir / "p"));
  }
  SECTION("a --sample-lines that SentencePiece refuses is named (its own message named none)") {
    expect_bad("data tokenizer train --input " + d + "/docs.txt --vocab 300 --sample-lines 1 --out " + d + "/t.model",
               {"--sample-lines must be 0 (every line) or more than 100", "not 1"});
  }
  SECTION("train.bin and val.bin without a manifest that disagree in vocab, or hold no tokens (verify and export passed them)") {
    fs::create_directories(dir / "mix");
    data::write_token_file((dir / "mix" / "train.bin").string(), std::vector<std::int32_t>(500, 299), 300, 2);
    data::write_token_file((dir / "mix" / "val.bin").string(), std::vector<std::int32_t>(100, 7), 256);
    expect_bad("data verify " + d + "/mix", {"has vocab", "the two splits of a corpus share one vocabulary"});
    expect_bad("data export --format raw16 --data " + d + "/mix --out " + d + "/x", {"share one vocabulary"});
    CHECK(!fs::exists(dir / "x"));
    fs::create_directories(dir / "empty");
    data::write_token_file((dir / "empty" / "train.bin").string(), std::vector<std::int32_t>{}, 256);
    data::write_token_file((dir / "empty" / "val.bin").string(), std::vector<std::int32_t>{}, 256);
    expect_bad("data verify " + d + "/empty", {"empty/train.bin holds no tokens"});
    expect_bad("data export --format raw16 --data " + d + "/empty --out " + d + "/x", {"empty/train.bin holds no tokens"});
  }
  SECTION("a shard file the manifest does not list (verify said valid)") {
    fs::copy_file(dir / "c" / "train_00000.bin", dir / "c" / "train_00099.bin");
    expect_bad("data verify " + d + "/c", {"c/train_00099.bin is a shard file that", "manifest.json does not list"});
  }
  SECTION("manifest counts that are not whole numbers in range (-5 and 1e30 documents, 57174.4 tokens were valid)") {
    const std::string original = slurp(dir / "c" / "manifest.json");
    const auto with = [&](const std::string& split, const std::string& key, const nlohmann::json& v) {
      auto mj = nlohmann::json::parse(original);
      mj[split][key] = v;
      write_text(dir / "c" / "manifest.json", mj.dump());
    };
    with("train", "documents", -5);
    expect_bad("data verify " + d + "/c", {"manifest.json: 'train.documents' must be a whole number", "not -5"});
    with("train", "documents", 1e30);
    expect_bad("data verify " + d + "/c", {"'train.documents' must be a whole number"});
    const auto tokens = nlohmann::json::parse(original)["train"]["tokens"].get<std::uint64_t>();
    with("train", "tokens", static_cast<double>(tokens) + 0.4);
    expect_bad("data verify " + d + "/c", {"'train.tokens' must be a whole number"});
    with("val", "documents", tokens * 10);
    expect_bad("data verify " + d + "/c", {"'val.documents' = ", "is more than a split of"});
    with("val", "tokens", "many");
    expect_bad("data verify " + d + "/c", {"'val.tokens' must be a whole number", "not \"many\""});
    write_text(dir / "c" / "manifest.json", original);
    REQUIRE(run_cli("data verify " + d + "/c").rc == 0);
  }
  SECTION("missing files and folders") {
    expect_bad("data verify " + d + "/absent", {"absent"});
    expect_bad("data prepare --input " + d + "/absent.txt --out " + d + "/j", {"absent.txt"});
    expect_bad("data prepare --input " + d + "/docs.txt --tokenizer " + d + "/absent.model --out " + d + "/j", {"absent.model"});
  }
  fs::remove_all(dir);
}
