// Token file integrity: the header records the XXH3-64 of the tokens and a check of its own; every
// flipped byte and every truncation is refused when a corpus is opened (either layout); version 1
// files still open (a manifest's checksum stands in for theirs; without one `data verify` says
// "no checksum recorded"); a corrupt corpus given to training is one line and exit code 2; a token
// file that cannot be written (a full disk) leaves the old one and no temporary.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstring>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/run_cli.hpp"
#include "test_files.hpp"
#include "corpus/helpers.hpp"
#include "loopscale/data/convert.hpp"
#include "loopscale/data/corpus.hpp"
#include "loopscale/data/manifest.hpp"
#include "loopscale/data/token_file.hpp"
#include "loopscale/data/verify.hpp"

using namespace loopscale;
using namespace loopscale::data;
using namespace loopscale::test;

namespace {

std::vector<std::int32_t> tokens_of(std::size_t n, std::uint32_t vocab) {
  std::vector<std::int32_t> t;
  for (std::size_t i = 0; i < n; ++i) t.push_back(static_cast<std::int32_t>((i * 2654435761u) % vocab));
  return t;
}

// The same file as version 1 wrote it: a 40-byte header, reserved 0, no checksum.
std::string as_version_1(const std::string& v2) {
  std::string b = v2.substr(0, 40) + v2.substr(48);
  const std::uint32_t one = 1, zero = 0;
  std::memcpy(b.data() + 8, &one, 4);
  std::memcpy(b.data() + 20, &zero, 4);
  return b;
}

}  // namespace

TEST_CASE("token file integrity: the header records the tokens' XXH3-64 and a check of itself", "[corpus][integrity]") {
  const fs::path dir = temp_dir("integrity_header");
  const std::string p = (dir / "a.bin").string();
  const auto t = tokens_of(1000, 300);
  write_token_file(p, t, 300, 2, 2500);
  const std::string bytes = slurp(p);
  REQUIRE(bytes.size() == 48 + 2 * t.size());
  const TokenFile f = read_token_file(p);
  REQUIRE(f.version == 2);
  REQUIRE(f.has_checksum());
  REQUIRE(f.checksum == xxh3(std::string_view(bytes).substr(48)));  // `tail -c +49 FILE | xxhsum -H3`
  REQUIRE(verify_tokens(f));
  REQUIRE(f.text_bytes == 2500);
  std::vector<std::int32_t> back(t.size());
  f.read(0, back.size(), back.data());
  REQUIRE(back == t);
  // An empty file has a checksum too (of no bytes).
  write_token_file((dir / "e.bin").string(), std::vector<std::int32_t>{}, 256);
  REQUIRE(verify_tokens(read_token_file((dir / "e.bin").string())));
  fs::remove_all(dir);
}

TEST_CASE("token file integrity: every flipped byte and every truncation is refused when a corpus is opened", "[corpus][integrity]") {
  const fs::path dir = temp_dir("integrity_flip");
  write_token_file((dir / "train.bin").string(), tokens_of(200, 300), 300, 2, 600);
  write_token_file((dir / "val.bin").string(), tokens_of(50, 300), 300, 2, 150);
  const std::string good = slurp(dir / "train.bin");
  REQUIRE(open_corpus(dir, Split::train).tokens() == 200);
  for (std::size_t at = 0; at < good.size(); ++at)
    for (const unsigned char mask : {0x01, 0x80}) {
      std::string b = good;
      b[at] = static_cast<char>(static_cast<unsigned char>(b[at]) ^ mask);
      write_text(dir / "train.bin", b);
      INFO("byte " << at << " of " << good.size() << " xor " << int(mask));
      REQUIRE_THROWS_AS(open_corpus(dir, Split::train), corpus_error);
    }
  // The message names the file and what failed.
  std::string b = good;
  b[100] ^= 1;
  write_text(dir / "train.bin", b);
  REQUIRE_THROWS_WITH(open_corpus(dir, Split::train), Catch::StartsWith("data: " + (dir / "train.bin").string() + " is corrupt: its tokens' checksum is xxh3-64:") &&
                                                          Catch::Contains(", its header records xxh3-64:"));
  b = good;
  b[33] ^= 1;  // the text bytes: only the header check sees it
  write_text(dir / "train.bin", b);
  REQUIRE_THROWS_WITH(open_corpus(dir, Split::train), Catch::Contains("is corrupt: its header does not match its header check"));
  for (std::size_t len = 0; len < good.size(); ++len) {
    write_text(dir / "train.bin", good.substr(0, len));
    INFO("truncated to " << len << " of " << good.size());
    REQUIRE_THROWS_AS(open_corpus(dir, Split::train), corpus_error);
  }
  // Opening without reading the tokens (Verify::headers) misses a flipped token; verify_corpus
  // reads them.
  b = good;
  b[100] ^= 1;
  write_text(dir / "train.bin", b);
  REQUIRE(open_corpus(dir, Split::train, Verify::headers).tokens() == 200);
  REQUIRE_THROWS_WITH(verify_corpus(dir), Catch::Contains("train.bin is corrupt"));
  fs::remove_all(dir);
}

TEST_CASE("token file integrity: shards of a manifest corpus are verified on open, version 1 against the manifest", "[corpus][integrity]") {
  const fs::path dir = temp_dir("integrity_manifest");
  std::string raw;
  for (std::uint16_t i = 0; i < 5000; ++i) {
    const std::uint16_t v = static_cast<std::uint16_t>(i % 999);
    raw.append(reinterpret_cast<const char*>(&v), 2);
  }
  write_text(dir / "t.raw", raw);
  write_text(dir / "v.raw", raw);  // a copy: import refuses one file as both splits
  ImportOptions o;
  o.format = ForeignFormat::raw16;
  o.train = {(dir / "t.raw").string()};
  o.val = {(dir / "v.raw").string()};
  o.vocab = 1000;
  o.out = dir / "c";
  o.shard_tokens = 2000;
  import_tokens(o);
  const fs::path shard = o.out / "train_00001.bin";
  const std::string good = slurp(shard);
  REQUIRE(open_corpus(o.out, Split::train).tokens() == 5000);
  std::string b = good;
  b[200] ^= 4;
  write_text(shard, b);
  REQUIRE_THROWS_WITH(open_corpus(o.out, Split::train), Catch::Contains(shard.string() + " is corrupt"));
  REQUIRE_THROWS_WITH(verify_corpus(o.out), Catch::Contains(shard.string() + " is corrupt"));
  // A version 1 shard (written before checksums were in the header) with its manifest's checksum:
  // opens, and a flipped byte in it is caught by the manifest's checksum.
  const std::string v1 = as_version_1(good);
  write_text(shard, v1);
  Manifest m = read_manifest(o.out);
  m.train.shards[1].checksum = file_checksum(shard);
  write_manifest(o.out, m);
  REQUIRE(read_token_file(shard.string()).version == 1);
  REQUIRE(open_corpus(o.out, Split::train).tokens() == 5000);
  REQUIRE(verify_corpus(o.out).unchecked.empty());
  b = v1;
  b[200] ^= 4;
  write_text(shard, b);
  REQUIRE_THROWS_WITH(open_corpus(o.out, Split::train),
                      Catch::Contains(shard.string() + " is corrupt: it does not match its checksum in " + (o.out / "manifest.json").string()));
  // A manifest whose val lists a train shard: training read it and validation scored the tokens it
  // trained on, silently (data verify alone objected).
  write_text(shard, good);
  m = read_manifest(o.out);
  m.train.shards[1].checksum = file_checksum(shard);
  m.val.shards.push_back(m.train.shards[0]);
  write_manifest(o.out, m);
  REQUIRE_THROWS_WITH(open_corpus(o.out, Split::val), Catch::Contains("lists the shard train_00000.bin twice (in val as well as in train"));
  REQUIRE_THROWS_WITH(open_corpus(o.out, Split::train), Catch::Contains("lists the shard train_00000.bin twice"));
  fs::remove_all(dir);
}

TEST_CASE("token file integrity: version 1 files without a manifest still open, verify says no checksum recorded", "[corpus][integrity][cli]") {
  const fs::path dir = temp_dir("integrity_v1");
  write_token_file((dir / "train.bin").string(), tokens_of(3000, 256), 256);
  write_token_file((dir / "val.bin").string(), tokens_of(500, 256), 256);
  write_text(dir / "train.bin", as_version_1(slurp(dir / "train.bin")));
  const TokenFile f = read_token_file((dir / "train.bin").string());
  REQUIRE(f.version == 1);
  REQUIRE_FALSE(verify_tokens(f));
  REQUIRE(open_corpus(dir, Split::train).tokens() == 3000);
  const VerifyReport r = verify_corpus(dir);
  REQUIRE(r.unchecked == std::vector<std::string>{(dir / "train.bin").string()});
  const CliResult out = run_cli("data verify " + dir.string());
  INFO(out.out);
  REQUIRE(out.rc == 0);
  REQUIRE_THAT(out.out, Catch::Contains((dir / "train.bin").string() + ": no checksum recorded"));
  REQUIRE_THAT(out.out, !Catch::Contains((dir / "val.bin").string() + ": no checksum recorded"));
  fs::remove_all(dir);
}

TEST_CASE("token file integrity: a count whose size in bytes wraps around 2^64 is refused, not read past the file", "[corpus][integrity]") {
  // Found by fuzz_token_file: a version 1 header (no header check) declaring 2^63 four-byte tokens
  // in a 40-byte file; 40 + 2^63 x 4 wraps to 40, so a size check by multiplication let it through.
  // Here 16 tokens (64 bytes) and counts whose 4 x count wraps to exactly 64.
  const fs::path dir = temp_dir("integrity_wrap");
  write_token_file((dir / "train.bin").string(), tokens_of(16, 100000), 100000, 4);
  for (const std::uint64_t count : {(std::uint64_t{1} << 62) + 16, (std::uint64_t{1} << 63) + 16}) {
    std::string b = as_version_1(slurp(dir / "train.bin"));
    std::memcpy(b.data() + 24, &count, 8);
    write_text(dir / "train.bin.v1", b);
    INFO("count " << count << ", file " << b.size() << " bytes");
    REQUIRE_THROWS_WITH(read_token_file((dir / "train.bin.v1").string()), Catch::Contains("is truncated or padded"));
  }
  fs::remove_all(dir);
}

TEST_CASE("token file integrity: a corrupt corpus is one line and exit 2 for training and verify", "[corpus][integrity][cli]") {
  const fs::path dir = temp_dir("integrity_cli");
  write_token_file((dir / "train.bin").string(), tokens_of(20000, 256), 256);
  write_token_file((dir / "val.bin").string(), tokens_of(4000, 256), 256);
  std::string b = slurp(dir / "val.bin");
  b[1000] ^= 0x20;
  write_text(dir / "val.bin", b);
  for (const std::string& args : {"data verify " + dir.string(),
                                  "train --d-model 16 --heads 2 --depth 6 --r 2 --tokens 1e4 --data " + dir.string() + " --out " + (dir / "run").string()}) {
    const CliResult r = run_cli(args);
    INFO(args << "\n" << r.out);
    REQUIRE(r.rc == 2);
    REQUIRE(count_lines(r.out) == 1);
    REQUIRE_THAT(r.out, Catch::Contains("loopscale: error: data: " + (dir / "val.bin").string() + " is corrupt: its tokens' checksum"));
  }
  REQUIRE_FALSE(fs::exists(dir / "run" / "log.jsonl"));  // refused before anything was written
  fs::remove_all(dir);
}

TEST_CASE("token file integrity: a token outside the vocabulary is refused when a corpus is opened, before train writes anything", "[corpus][integrity][cli]") {
  const fs::path dir = temp_dir("integrity_vocab");
  const fs::path train = dir / "train.bin";
  // Two-byte tokens of vocab 256: a token of 300 fits the width but not the vocabulary.
  write_token_file(train.string(), tokens_of(20000, 256), 256, 2);
  write_token_file((dir / "val.bin").string(), tokens_of(4000, 256), 256, 2);
  const std::string good = slurp(train);
  const auto put_300 = [](std::string& b, std::size_t header, std::size_t at) {
    const std::uint16_t v = 300;
    std::memcpy(b.data() + header + 2 * at, &v, 2);
  };
  const std::string says = "data: " + train.string() + ": token 300 at 15000 is outside its vocab 256";
  // Version 2 with a checksum that matches the bad token (a writer's fault, not a flipped bit).
  std::string b = good;
  put_300(b, 48, 15000);
  TokenHeader h = decode_header(reinterpret_cast<const unsigned char*>(b.data()), b.size(), train.string());
  h.checksum = xxh3(std::string_view(b).substr(48));
  unsigned char head[token_header_bytes];
  encode_header(h, head);
  std::memcpy(b.data(), head, sizeof head);
  write_text(train, b);
  REQUIRE_THROWS_WITH(open_corpus(dir, Split::train), says);
  REQUIRE_THROWS_WITH(verify_corpus(dir), says);
  // Version 1 without a manifest: no checksum, the tokens are still read on open.
  b = as_version_1(good);
  put_300(b, 40, 15000);
  write_text(train, b);
  REQUIRE_THROWS_WITH(open_corpus(dir, Split::train), says);
  REQUIRE(open_corpus(dir, Split::train, Verify::headers).tokens() == 20000);  // headers only: the lazy check in read() remains
  // `train` stops before the run folder exists (it left .lock, config.json and an empty log.jsonl,
  // or trained steps until it read the token).
  const fs::path run = dir / "run";
  const CliResult r = run_cli("train --d-model 16 --heads 2 --depth 6 --r 2 --tokens 1e4 --data " + dir.string() + " --out " + run.string());
  INFO(r.out);
  REQUIRE(r.rc == 2);
  REQUIRE(count_lines(r.out) == 1);
  REQUIRE_THAT(r.out, Catch::Contains("loopscale: error: " + says));
  REQUIRE_FALSE(fs::exists(run));
  fs::remove_all(dir);
}

TEST_CASE("token file integrity: a full disk while writing leaves the old file and no temporary", "[corpus][integrity]") {
  const fs::path dir = temp_dir("integrity_full");
  const fs::path p = dir / "train.bin";
  write_token_file(p.string(), tokens_of(1000, 256), 256);
  const std::string old = slurp(p);
  // A file size limit in a child (SIGXFSZ ignored): write() fails with EFBIG as a full disk fails
  // with ENOSPC.
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{256 << 10, 256 << 10};
    setrlimit(RLIMIT_FSIZE, &lim);
    std::string msg = "no error";
    int rc = 1;
    try {
      write_token_file(p.string(), tokens_of(1 << 20, 65536), 65536, 2);  // 2 MiB
    } catch (const corpus_error& e) {
      msg = e.what();
      rc = 0;
    }
    (void)!write(fds[1], msg.data(), msg.size());
    _exit(rc);
  }
  close(fds[1]);
  const std::string msg = loopscale::test::drain_fd(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  INFO(msg);
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  REQUIRE(msg == "data: cannot write " + p.string() + ": " + std::strerror(EFBIG));
  REQUIRE(slurp(p) == old);
  for (const auto& e : fs::directory_iterator(dir)) REQUIRE(e.path().filename().string().find(".tmp.") == std::string::npos);
  fs::remove_all(dir);
}
