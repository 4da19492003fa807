// Token files (LSTOKENS), corpora of shards, and the foreign formats: round trips and bad files.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "cli/run_cli.hpp"
#include "corpus/helpers.hpp"
#include "loopscale/data/convert.hpp"
#include "loopscale/data/corpus.hpp"
#include "loopscale/data/foreign_formats.hpp"
#include "loopscale/data/token_file.hpp"
#include "loopscale/data/verify.hpp"

using namespace loopscale;
using namespace loopscale::data;
using namespace loopscale::test;

TEST_CASE("token files: 1, 2 and 4 bytes per token round-trip, mapped", "[corpus][format]") {
  const fs::path dir = temp_dir("tokenfile");
  for (const std::uint32_t vocab : {200u, 50000u, 100000u}) {
    std::vector<std::int32_t> t;
    for (std::uint32_t i = 0; i < 5000; ++i) t.push_back(static_cast<std::int32_t>((i * 2654435761u) % vocab));
    // Names built by appending: "v" + std::string trips GCC 12's false -Wrestrict (PR 105329).
    std::string name = "v";
    name += std::to_string(vocab) + ".bin";
    const std::string p = (dir / name).string();
    // Vocab 200 is byte-level (one byte per token, each one byte of text): its text bytes are its count.
    const std::uint64_t text = vocab <= 256 ? t.size() : 12345;
    write_token_file(p, t, vocab, token_bytes_for(vocab), static_cast<std::int64_t>(text));
    const TokenFile f = read_token_file(p);
    REQUIRE(f.token_bytes == token_bytes_for(vocab));
    REQUIRE(f.vocab == vocab);
    REQUIRE(f.count == t.size());
    REQUIRE(f.text_bytes == text);
    REQUIRE(fs::file_size(p) == token_header_bytes + t.size() * f.token_bytes);
    std::vector<std::int32_t> back(t.size());
    f.read(0, back.size(), back.data());
    REQUIRE(back == t);
    REQUIRE(f[4999] == t[4999]);
  }
  // A token outside the vocabulary is refused when writing.
  REQUIRE_THROWS_WITH(write_token_file((dir / "bad.bin").string(), std::vector<std::int32_t>{1, 256}, 256), Catch::Contains("does not fit vocab 256"));
  fs::remove_all(dir);
}

TEST_CASE("token files: bad magic, truncation, padding, version and width are errors naming the file", "[corpus][format]") {
  const fs::path dir = temp_dir("badfiles");
  const std::string p = (dir / "a.bin").string();
  write_token_file(p, std::vector<std::int32_t>{1, 2, 3, 4}, 256);
  std::string bytes = slurp(p);
  const auto expect_error = [&](const std::string& content, const std::string& what) {
    write_text(dir / "x.bin", content);
    REQUIRE_THROWS_WITH(read_token_file((dir / "x.bin").string()), Catch::Contains(what) && Catch::Contains((dir / "x.bin").string()));
  };
  expect_error(bytes.substr(0, bytes.size() - 1), "truncated");
  expect_error(bytes + "x", "padded");
  expect_error(bytes.substr(0, 20), "shorter than its header");
  std::string magic = bytes;
  magic[0] = 'X';
  expect_error(magic, "bad magic");
  std::string version = bytes;
  version[8] = 3;
  expect_error(version, "version 3");
  // A version 1 header (no header check, which would speak first) with a bad width.
  std::string width = bytes.substr(0, 40) + bytes.substr(48);
  width[8] = 1;
  width[20] = width[21] = width[22] = width[23] = 0;
  width[12] = 3;
  expect_error(width, "3 bytes per token");
  REQUIRE_THROWS_WITH(read_token_file((dir / "missing.bin").string()), Catch::Contains("cannot open"));
  fs::remove_all(dir);
}

namespace {
// A version 1 file of 4000 tokens (no header check, which would speak first) declaring `text` text bytes.
std::string v1_text_bytes_file(const fs::path& dir, const std::string& name, std::uint32_t vocab, std::uint32_t width, std::uint64_t text) {
  const fs::path p = dir / name;
  write_token_file(p.string(), std::vector<std::int32_t>(4000, 7), vocab, width, 0);
  std::string b = slurp(p);
  b = b.substr(0, 40) + b.substr(48);
  const std::uint32_t one = 1, zero = 0;
  std::memcpy(b.data() + 8, &one, 4);
  std::memcpy(b.data() + 20, &zero, 4);
  std::memcpy(b.data() + 32, &text, 8);
  write_text(p, b);
  return p.string();
}
}  // namespace

TEST_CASE("token files: text bytes are 0, the count of a byte-level file, or at most 64 per token", "[corpus][format]") {
  const fs::path dir = temp_dir("textbytes");
  const auto v1 = [&](const std::string& name, std::uint32_t vocab, std::uint32_t width, std::uint64_t text) {
    return v1_text_bytes_file(dir, name, vocab, width, text);
  };
  // Byte-level: 1 gave val_bpb 15999.37, 2^63 gave 0.0000; 0 is unknown (NaN, reported as such).
  REQUIRE_THROWS_WITH(read_token_file(v1("b1.bin", 256, 1, 1)),
                      "data: " + (dir / "b1.bin").string() + " declares 1 text bytes for 4000 tokens (a byte-level file has one per token, or 0: "
                      "unknown); its header is corrupt or was written wrong");
  REQUIRE_THROWS_WITH(read_token_file(v1("bhuge.bin", 256, 1, std::uint64_t{1} << 63)), Catch::Contains("declares 9223372036854775808 text bytes for 4000 tokens"));
  REQUIRE_THROWS_WITH(read_token_file(v1("b4001.bin", 200, 1, 4001)), Catch::Contains("a byte-level file has one per token"));
  REQUIRE(read_token_file(v1("b4000.bin", 256, 1, 4000)).bits_per_byte(0.6931471805599453) == Approx(1.0));
  REQUIRE(std::isnan(read_token_file(v1("b0.bin", 256, 1, 0)).bits_per_byte(1.0)));
  // Other files: up to 64 text bytes per token; the bound is exact.
  REQUIRE(read_token_file(v1("w64.bin", 4096, 2, 64 * 4000)).text_bytes == 64 * 4000);
  REQUIRE(read_token_file(v1("w1.bin", 4096, 2, 1)).text_bytes == 1);
  REQUIRE_THROWS_WITH(read_token_file(v1("w65.bin", 4096, 2, 64 * 4000 + 1)),
                      Catch::Contains("declares 256001 text bytes for 4000 tokens (more than 64 per token, or 0: unknown)"));
  REQUIRE_THROWS_WITH(read_token_file(v1("w2.bin", 100000, 4, ~std::uint64_t{0})), Catch::Contains("more than 64 per token"));
  // The writer refuses to write such a header.
  REQUIRE_THROWS_WITH(write_token_file((dir / "wr.bin").string(), std::vector<std::int32_t>{1, 2, 3}, 256, 1, 1),
                      Catch::Contains("declares 1 text bytes for 3 tokens"));
  REQUIRE_FALSE(fs::exists(dir / "wr.bin"));
  fs::remove_all(dir);
}

// Named "cli: ..." so the sanitizer stage, which does not build the program, leaves it out.
TEST_CASE("cli: wrong text bytes in a token file are one line for data verify and train, before a run folder", "[corpus][format][cli]") {
  const fs::path dir = temp_dir("textbytes_cli");
  fs::create_directories(dir / "c");
  fs::copy_file(v1_text_bytes_file(dir, "b1.bin", 256, 1, 1), dir / "c" / "train.bin");
  fs::copy_file(v1_text_bytes_file(dir, "b4000.bin", 256, 1, 4000), dir / "c" / "val.bin");
  for (const std::string& args : {"data verify " + (dir / "c").string(),
                                  "train --d-model 16 --heads 2 --depth 6 --r 2 --tokens 1e4 --data " + (dir / "c").string() + " --out " + (dir / "run").string()}) {
    const CliResult r = run_cli(args);
    INFO(args << "\n" << r.out);
    REQUIRE(r.rc == 2);
    REQUIRE(count_lines(r.out) == 1);
    REQUIRE_THAT(r.out, Catch::Contains("declares 1 text bytes for 4000 tokens"));
  }
  REQUIRE_FALSE(fs::exists(dir / "run"));
  fs::remove_all(dir);
}

TEST_CASE("import and export: a --shard-tokens that would write more than 100000 files per split is refused before anything is written", "[corpus][format]") {
  const fs::path dir = temp_dir("shardlimit");
  const fs::path c = dir / "c";
  fs::create_directories(c);
  // --shard-tokens 1 wrote a file per token (25M for the project's corpus; names past 999999 sort
  // out of order in llm.c's glob).
  write_token_file((c / "train.bin").string(), std::vector<std::int32_t>(100001, 65), 256);
  write_token_file((c / "val.bin").string(), std::vector<std::int32_t>(10, 66), 256);
  const std::string says = "data: --shard-tokens 1 would write 100001 files for the train split; at most 100000 per split: give a larger --shard-tokens, or 0 for one file per split";
  ExportOptions e;
  e.data = c;
  e.out = dir / "x";
  e.shard_tokens = 1;
  REQUIRE_THROWS_WITH(export_corpus(e), says);
  REQUIRE_FALSE(fs::exists(dir / "x"));
  std::string raw(2 * 100001, '\0');
  write_text(dir / "t.raw", raw);
  ImportOptions o;
  o.format = ForeignFormat::raw16;
  o.train = {(dir / "t.raw").string()};
  o.vocab = 256;
  o.out = dir / "i";
  o.shard_tokens = 1;
  REQUIRE_THROWS_WITH(import_tokens(o), says);
  REQUIRE_FALSE(fs::exists(dir / "i"));
  // The bound is exact; 0 is one file.
  REQUIRE(shard_count(100001, 1) == 100001);
  REQUIRE(shard_count(100000, 1) == max_shards_per_split);
  REQUIRE(shard_count(7, 0) == 1);
  REQUIRE_NOTHROW(check_shard_count(shard_count(200000, 2), 2, "train"));
  // prepare learns its count as it encodes: its writer refuses the shard past the limit (here a
  // test's limit of 3, the real one would write 100000 files first), and prepare's undo removes
  // what was written.
  fs::create_directories(dir / "p");
  ShardWriter w(dir / "p", "train", 2, 256, nullptr, 3);
  const std::vector<std::int32_t> seven(7, 1);
  REQUIRE_THROWS_WITH(w.append(seven), "data: --shard-tokens 2 would write more than 3 files for the train split; at most 3 per split: give a "
                                       "larger --shard-tokens, or 0 for one file per split");
  REQUIRE(fs::exists(dir / "p" / "train_00002.bin"));
  REQUIRE_FALSE(fs::exists(dir / "p" / "train_00003.bin"));
  fs::remove_all(dir);
}

// Named "cli: ..." so the sanitizer stage, which does not build the program, leaves it out.
TEST_CASE("cli: data export and import refuse a --shard-tokens past 100000 files per split, one line, nothing written", "[corpus][format][cli]") {
  const fs::path dir = temp_dir("shardlimit_cli");
  const fs::path c = dir / "c";
  fs::create_directories(c);
  write_token_file((c / "train.bin").string(), std::vector<std::int32_t>(100001, 65), 256);
  write_token_file((c / "val.bin").string(), std::vector<std::int32_t>(10, 66), 256);
  write_text(dir / "t.raw", std::string(2 * 100001, '\0'));
  for (const std::string& args : {"data export --format llmc --data " + c.string() + " --out " + (dir / "x").string() + " --shard-tokens 1",
                                  "data import --format raw16 --train " + (dir / "t.raw").string() + " --vocab 256 --out " + (dir / "i").string() + " --shard-tokens 1"}) {
    const CliResult r = run_cli(args);
    INFO(args << "\n" << r.out);
    REQUIRE(r.rc == 2);
    REQUIRE(count_lines(r.out) == 1);
    REQUIRE_THAT(r.out, Catch::Contains("data: --shard-tokens 1 would write 100001 files for the train split; at most 100000 per split"));
  }
  REQUIRE_FALSE(fs::exists(dir / "x"));
  REQUIRE_FALSE(fs::exists(dir / "i"));
  fs::remove_all(dir);
}

TEST_CASE("corpus: a split is the concatenation of its shards, read across boundaries", "[corpus][format]") {
  const fs::path dir = temp_dir("concat");
  std::vector<std::int32_t> all;
  std::vector<TokenFile> shards;
  for (int s = 0; s < 3; ++s) {
    std::vector<std::int32_t> t;
    for (int i = 0; i < 100 + 37 * s; ++i) t.push_back((s * 1000 + i) % 300);
    all.insert(all.end(), t.begin(), t.end());
    std::string name = "s";  // appended, not "s" + std::string: GCC 12's false -Wrestrict
    name += std::to_string(s) + ".bin";
    write_token_file((dir / name).string(), t, 300, 2, static_cast<std::int64_t>(t.size() * 3));
    shards.push_back(read_token_file((dir / name).string()));
  }
  const Corpus c(shards, "three shards");
  REQUIRE(c.tokens() == all.size());
  REQUIRE(c.text_bytes() == 3 * all.size());
  REQUIRE(c.bits_per_byte(0.6931471805599453) == Approx(1.0 / 3));
  for (std::uint64_t pos : {0ull, 90ull, 99ull, 100ull, 230ull, 236ull}) {
    std::vector<std::int32_t> w(50);
    c.read(pos, 50, w.data());
    REQUIRE(std::equal(w.begin(), w.end(), all.begin() + static_cast<std::ptrdiff_t>(pos)));
  }
  std::vector<std::int32_t> w(10);
  REQUIRE_THROWS_WITH(c.read(all.size() - 5, 10, w.data()), Catch::Contains("outside"));
  fs::remove_all(dir);
}

namespace {

// An llm.c file written byte by byte as llm.c's own writer does: 256 int32 header, uint16 tokens.
void write_llmc_fixture(const fs::path& p, const std::vector<std::uint16_t>& tokens, std::int32_t magic = 20240520) {
  std::vector<std::int32_t> h(256, 0);
  h[0] = magic;
  h[1] = 1;
  h[2] = static_cast<std::int32_t>(tokens.size());
  std::ofstream f(p, std::ios::binary);
  f.write(reinterpret_cast<const char*>(h.data()), 1024);
  f.write(reinterpret_cast<const char*>(tokens.data()), static_cast<std::streamsize>(2 * tokens.size()));
}

std::vector<std::int32_t> tokens_of(const fs::path& dir, Split s) { return all_tokens(open_corpus(dir, s)); }

}  // namespace

TEST_CASE("import: llm.c fixtures become a corpus with the same tokens, export writes them back byte for byte", "[corpus][format]") {
  const fs::path dir = temp_dir("llmc");
  std::vector<std::uint16_t> a, b, v;
  for (int i = 0; i < 3000; ++i) a.push_back(static_cast<std::uint16_t>((i * 31) % 50257));
  for (int i = 0; i < 1234; ++i) b.push_back(static_cast<std::uint16_t>(50256 - i % 50));
  for (int i = 0; i < 700; ++i) v.push_back(static_cast<std::uint16_t>(i));
  write_llmc_fixture(dir / "fineweb_train_000001.bin", a);
  write_llmc_fixture(dir / "fineweb_train_000002.bin", b);
  write_llmc_fixture(dir / "fineweb_val_000000.bin", v);
  ImportOptions o;
  o.format = ForeignFormat::llmc;
  o.train = {(dir / "fineweb_train_000001.bin").string(), (dir / "fineweb_train_000002.bin").string()};
  o.val = {(dir / "fineweb_val_000000.bin").string()};
  o.vocab = 50257;
  o.out = dir / "corpus";
  o.shard_tokens = 1000;  // cuts across the input files
  const Manifest m = import_tokens(o);
  REQUIRE(m.train.tokens == 4234);
  REQUIRE(m.train.shards.size() == 5);
  REQUIRE(m.token_bytes == 2);
  REQUIRE(m.tokenizer.kind == "external");
  std::vector<std::int32_t> expect(a.begin(), a.end());
  expect.insert(expect.end(), b.begin(), b.end());
  REQUIRE(tokens_of(o.out, Split::train) == expect);
  REQUIRE(tokens_of(o.out, Split::val) == std::vector<std::int32_t>(v.begin(), v.end()));
  REQUIRE(std::isnan(open_corpus(o.out, Split::train).bits_per_byte(1.0)));  // no text: unknown
  REQUIRE(verify_corpus(o.out).files == 6);

  // Export with one file per split's 3000 tokens: the first training file comes back identical.
  ExportOptions e;
  e.format = ForeignFormat::llmc;
  e.data = o.out;
  e.out = dir / "exported";
  e.shard_tokens = 3000;
  const auto files = export_corpus(e);
  REQUIRE(files.size() == 3);  // train_000000 (3000), train_000001 (1234), val_000000
  REQUIRE(slurp(dir / "exported" / "train_000000.bin") == slurp(dir / "fineweb_train_000001.bin"));
  REQUIRE(slurp(dir / "exported" / "train_000001.bin") == slurp(dir / "fineweb_train_000002.bin"));
  REQUIRE(slurp(dir / "exported" / "val_000000.bin") == slurp(dir / "fineweb_val_000000.bin"));
  fs::remove_all(dir);
}

TEST_CASE("import and export: raw uint16 and uint32 arrays round-trip", "[corpus][format]") {
  const fs::path dir = temp_dir("raw");
  for (const ForeignFormat fmt : {ForeignFormat::raw16, ForeignFormat::raw32}) {
    const std::uint32_t vocab = fmt == ForeignFormat::raw16 ? 65536 : 200000;
    std::vector<std::int32_t> t, v;
    for (std::uint32_t i = 0; i < 5000; ++i) t.push_back(static_cast<std::int32_t>((i * 40503u) % vocab));
    for (std::uint32_t i = 0; i < 900; ++i) v.push_back(static_cast<std::int32_t>(vocab - 1 - i));
    // Fixtures: bare little-endian arrays, as numpy's tofile writes them.
    const auto write_raw = [&](const fs::path& p, const std::vector<std::int32_t>& x) {
      std::ofstream f(p, std::ios::binary);
      for (const std::int32_t k : x) {
        const auto u = static_cast<std::uint32_t>(k);
        f.write(reinterpret_cast<const char*>(&u), fmt == ForeignFormat::raw16 ? 2 : 4);
      }
    };
    write_raw(dir / "train.raw", t);
    write_raw(dir / "val.raw", v);
    ImportOptions o;
    o.format = fmt;
    o.train = {(dir / "train.raw").string()};
    o.val = {(dir / "val.raw").string()};
    o.vocab = vocab;
    o.out = dir / "corpus";
    o.shard_tokens = 0;
    o.force = true;
    import_tokens(o);
    REQUIRE(tokens_of(o.out, Split::train) == t);
    REQUIRE(tokens_of(o.out, Split::val) == v);
    REQUIRE(open_corpus(o.out, Split::train).shards().front().token_bytes == token_bytes_for(vocab));
    ExportOptions e;
    e.format = fmt;
    e.data = o.out;
    e.out = dir / "exported";
    e.shard_tokens = 0;
    export_corpus(e);
    REQUIRE(slurp(dir / "exported" / "train.bin") == slurp(dir / "train.raw"));
    REQUIRE(slurp(dir / "exported" / "val.bin") == slurp(dir / "val.raw"));
    fs::remove_all(dir / "exported");
  }
  // A token at or above the vocabulary given is a vocab mismatch; an odd size is a truncation.
  write_text(dir / "odd.raw", std::string("\x01\x00\x02", 3));
  REQUIRE_THROWS_WITH(ForeignFile(dir / "odd.raw", ForeignFormat::raw16), Catch::Contains("truncated") && Catch::Contains("odd.raw"));
  write_text(dir / "big.raw", std::string("\x01\x00\xff\x7f", 4));
  ImportOptions o;
  o.format = ForeignFormat::raw16;
  o.train = {(dir / "big.raw").string()};
  o.vocab = 1000;
  o.out = dir / "c2";
  REQUIRE_THROWS_WITH(import_tokens(o), Catch::Contains("outside the vocab 1000") && Catch::Contains("big.raw"));
  fs::remove_all(dir);
}

TEST_CASE("verify: a flipped byte fails the shard's checksum, a missing shard is named", "[corpus][format]") {
  const fs::path dir = temp_dir("verify");
  std::vector<std::uint16_t> a(5000);
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = static_cast<std::uint16_t>(i % 999);
  write_llmc_fixture(dir / "t.bin", a);
  ImportOptions o;
  o.train = {(dir / "t.bin").string()};
  o.vocab = 1000;
  o.out = dir / "c";
  o.shard_tokens = 2000;
  import_tokens(o);
  REQUIRE(verify_corpus(o.out).tokens == 5000);
  std::string s = slurp(o.out / "train_00001.bin");
  s[100] ^= 1;
  write_text(o.out / "train_00001.bin", s);
  // Its own header's checksum speaks first (token_file.hpp, version 2); the manifest's is the same check.
  REQUIRE_THROWS_WITH(verify_corpus(o.out), Catch::Contains("train_00001.bin is corrupt: its tokens' checksum"));
  s[100] ^= 1;
  write_text(o.out / "train_00001.bin", s);
  // A manifest whose training list was emptied by hand: verify says what training says (it passed).
  const std::string manifest = slurp(o.out / "manifest.json");
  nlohmann::json mj = nlohmann::json::parse(manifest);
  mj["train"]["shards"] = nlohmann::json::array();
  mj["train"]["tokens"] = 0;
  mj["train"]["text_bytes"] = 0;
  write_text(o.out / "manifest.json", mj.dump());
  REQUIRE_THROWS_WITH(verify_corpus(o.out), Catch::Contains("manifest.json lists no train shard"));
  write_text(o.out / "manifest.json", manifest);
  fs::remove(o.out / "train_00002.bin");
  REQUIRE_THROWS_WITH(open_corpus(o.out, Split::train), Catch::Contains("train_00002.bin"));
  fs::remove_all(dir);
}
