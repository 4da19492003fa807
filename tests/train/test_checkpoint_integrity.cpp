// Checkpoint integrity: every flipped byte and every truncation of a version 3 checkpoint is
// detected on load; versions 1 and 2 still load; the previous checkpoint is kept and a resume falls
// back to it when the newest is corrupt (bit for bit); a full disk or a read-only folder leaves both
// checkpoints as they were; the `loopscale` program reports an unusable checkpoint in one line with
// exit code 2.
#include <catch2/catch.hpp>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../cli/run_cli.hpp"
#include "loopscale/train/trainer.hpp"
#include "test_files.hpp"

using namespace loopscale;
using namespace loopscale::train;
using loopscale::test::slurp;
using loopscale::test::temp_dir;
using loopscale::test::write_text;
namespace fs = std::filesystem;

namespace {

// Flips the bits of `mask` in the byte at `offset`.
void flip(const fs::path& p, std::uint64_t offset, unsigned char mask = 0x10) {
  std::string b = slurp(p);
  b[offset] = static_cast<char>(static_cast<unsigned char>(b[offset]) ^ mask);
  write_text(p, b);
}

// A corpus like test_trainer.cpp's: a repeated sentence with varying numbers.
fs::path integrity_corpus(const std::string& name) {
  const fs::path dir = temp_dir(name);
  const auto text = [](std::size_t n, unsigned seed) {
    std::vector<std::int32_t> t;
    unsigned s = seed;
    while (t.size() < n) {
      s = s * 1103515245u + 12345u;
      const std::string line = "the cat number " + std::to_string(s >> 20) + " sat on the mat.\n";
      for (char c : line) t.push_back(static_cast<unsigned char>(c));
    }
    t.resize(n);
    return t;
  };
  write_token_file((dir / "train.bin").string(), text(60000, 1), 256);
  write_token_file((dir / "val.bin").string(), text(8000, 2), 256);
  return dir;
}

TrainConfig integrity_config(const fs::path& data, const fs::path& out) {
  TrainConfig c;
  LayerSpec l;
  l.attn.heads = 2;
  c.spec.d_model = 32;
  c.spec.vocab = 256;
  c.spec.prelude = {1, l};
  c.spec.coda = {1, l};
  c.spec.recur.block = {1, l};
  c.spec.recur.r = 2;
  c.spec.recur.inject = {Inject::linear, 0};
  c.batch = 4;
  c.seq_len = 16;
  c.tokens = 4 * 16 * 12;  // 12 steps
  c.data = data.string();
  c.out = out.string();
  c.threads = 2;
  c.eval_every = 4;
  c.eval_tokens = 128;
  c.checkpoint_every = 3;
  c.peak_flops = 1e11;
  return c;
}

std::vector<double> integrity_losses(const fs::path& log) {
  std::vector<double> v;
  std::ifstream f(log);
  std::string line;
  while (std::getline(f, line))
    if (!line.empty()) {
      const auto j = nlohmann::json::parse(line);
      if (!j.contains("loss")) continue;  // an event line, not a step
      v.push_back(j.at("loss").get<double>());
      v.push_back(j.value("val_loss", -1.0));
    }
  return v;
}

// Offset of the parameters' first byte in a checkpoint whose JSON is `json_bytes` long.
std::uint64_t params_offset(std::uint64_t json_bytes) { return 8 + 4 + 4 + 8 + json_bytes + 8; }

bool no_temporaries(const fs::path& dir) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return false;
  return true;
}

}  // namespace

TEST_CASE("checkpoint integrity: every flipped byte and every truncation of a version 3 checkpoint is refused", "[train][checkpoint][integrity]") {
  const fs::path dir = temp_dir("flip");
  const fs::path p = dir / "c.bin", q = dir / "x.bin";
  const std::vector<float> params{1.5f, -2, 3, 4, 5}, m{0.1f, 0.2f, 0.3f, 0.4f, 0.5f}, v{7, 8, 9, 10, 11};
  const nlohmann::json meta = {{"step", 5}, {"recipe", "adamw"}, {"seed", 7}};
  save_checkpoint<float>(p, meta, params, m, v);
  const std::string good = slurp(p);
  const std::uint64_t jl = meta.dump().size(), n = params.size(), size = good.size();
  const std::uint64_t at_params = params_offset(jl), at_m = at_params + 4 * n, at_v = at_m + 4 * n, at_trailer = at_v + 4 * n;
  REQUIRE(size == at_trailer + 8 + 8);  // "LSCKPTOK" and the checksum
  const auto c = load_checkpoint<float>(p);
  REQUIRE(c.version == 3);
  REQUIRE(c.params == params);
  REQUIRE(c.m == m);
  REQUIRE(c.v == v);
  REQUIRE(c.meta == meta);

  // Every byte of every section (header, JSON, n, params, m, v, trailer, checksum), flipped in
  // its low bit, a middle bit and all bits.
  int cases = 0;
  for (std::uint64_t at = 0; at < size; ++at)
    for (const unsigned char mask : {0x01, 0x10, 0xff}) {
      write_text(q, good);
      flip(q, at, mask);
      INFO("byte " << at << " of " << size << " xor " << int(mask));
      REQUIRE_THROWS_AS(load_checkpoint<float>(q), checkpoint_error);
      ++cases;
    }
  REQUIRE(cases == 3 * static_cast<int>(size));
  // The message names the file and what failed.
  for (const std::uint64_t at : {24 + jl / 2, at_params, at_m + 5, at_v + 4 * n - 1, at_trailer + 12}) {
    write_text(q, good);
    flip(q, at);
    REQUIRE_THROWS_WITH(load_checkpoint<float>(q), Catch::Contains("checkpoint " + q.string() + " is corrupt: checksum mismatch (stored xxh3-64:") &&
                                                       Catch::Contains(", computed xxh3-64:"));
  }

  // Every length short of the whole file: 0, inside each section, one byte short.
  for (std::uint64_t len = 0; len < size; ++len) {
    write_text(q, good.substr(0, len));
    INFO("truncated to " << len << " of " << size);
    REQUIRE_THROWS_AS(load_checkpoint<float>(q), checkpoint_error);
  }
  write_text(q, good.substr(0, size - 1));
  REQUIRE_THROWS_WITH(load_checkpoint<float>(q), Catch::Equals("checkpoint " + q.string() + " is truncated at byte " +
                                                               std::to_string(size - 1) + " of " + std::to_string(size)));
  write_text(q, good.substr(0, at_v));
  REQUIRE_THROWS_WITH(load_checkpoint<float>(q), Catch::Contains("is truncated at byte " + std::to_string(at_v) + " of " + std::to_string(size)));
  write_text(q, good + "x");
  REQUIRE_THROWS_WITH(load_checkpoint<float>(q), Catch::Contains("is corrupt: 1 bytes more than its header announces"));
  REQUIRE_THROWS_WITH(load_checkpoint<float>(dir / "missing.bin"), Catch::Contains("cannot open checkpoint " + (dir / "missing.bin").string()));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint integrity: an absurd value count is refused before anything is allocated", "[train][checkpoint][integrity]") {
  const fs::path dir = temp_dir("absurd");
  const fs::path p = dir / "c.bin";
  const std::vector<float> x{1, 2, 3};
  const nlohmann::json meta = {{"step", 1}};
  save_checkpoint<float>(p, meta, x, x, x);
  const std::string good = slurp(p);
  const std::uint64_t at_n = params_offset(meta.dump().size()) - 8;
  for (const std::uint64_t n : {std::uint64_t{1} << 40, std::uint64_t{1} << 62, ~std::uint64_t{0}, ~std::uint64_t{0} / 12 + 1}) {
    std::string b = good;
    std::memcpy(b.data() + at_n, &n, 8);
    write_text(p, b);
    INFO("n = " << n);
    REQUIRE_THROWS_AS(load_checkpoint<float>(p), checkpoint_error);  // not std::bad_alloc, not std::length_error
  }
  // A JSON length beyond the file.
  std::string b = good;
  const std::uint64_t huge = std::uint64_t{1} << 50;
  std::memcpy(b.data() + 16, &huge, 8);
  write_text(p, b);
  REQUIRE_THROWS_WITH(load_checkpoint<float>(p), Catch::Contains("its JSON length"));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint integrity: versions 1 and 2 (no checksum) still load, and a truncated one is refused", "[train][checkpoint][integrity]") {
  const fs::path dir = temp_dir("old");
  const fs::path p = dir / "c.bin";
  const std::vector<float> x{1, 2, 3}, y{4, 5, 6}, z{7, 8, 9};
  save_checkpoint<float>(p, {{"step", 3}}, x, y, z);
  const std::string v3 = slurp(p);
  for (const std::uint32_t version : {1u, 2u}) {
    std::string b = v3.substr(0, v3.size() - 8);  // versions 1 and 2 end at "LSCKPTOK"
    std::memcpy(b.data() + 8, &version, 4);
    write_text(p, b);
    const auto c = load_checkpoint<float>(p);
    REQUIRE(c.version == version);
    REQUIRE(c.params == x);
    REQUIRE(c.v == z);
    write_text(p, b.substr(0, b.size() - 3));
    REQUIRE_THROWS_WITH(load_checkpoint<float>(p), Catch::Contains("truncated"));
    std::string t = b;
    t[t.size() - 1] = 'X';
    write_text(p, t);
    REQUIRE_THROWS_WITH(load_checkpoint<float>(p), Catch::Contains("bad trailer"));
  }
  fs::remove_all(dir);
}

TEST_CASE("checkpoint integrity: a NaN, an infinity or a negative second moment is refused in every version", "[train][checkpoint][integrity]") {
  const fs::path dir = temp_dir("nonfinite");
  const fs::path p = dir / "c.bin";
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  struct Case {
    std::vector<float> params, m, v;
    const char* says;
  };
  const std::vector<Case> cases{{{1, nan, 3}, {0, 0, 0}, {0, 0, 0}, "parameter value 1 of 3 is NaN"},
                                {{1, 2, 3}, {0, 0, -inf}, {0, 0, 0}, "first-moment value 2 of 3 is infinite"},
                                {{1, 2, 3}, {0, 0, 0}, {-1e-3f, 0, 0}, "second-moment value 0 of 3 is negative"}};
  for (const Case& k : cases) {
    save_checkpoint<float>(p, {{"step", 3}}, k.params, k.m, k.v);  // version 3: the checksum matches
    REQUIRE_THROWS_WITH(load_checkpoint<float>(p), Catch::Contains("c.bin is corrupt: its " + std::string(k.says)));
    std::string b = slurp(p);
    b.resize(b.size() - 8);  // version 2: no checksum, the value check is all there is
    const std::uint32_t two = 2;
    std::memcpy(b.data() + 8, &two, 4);
    write_text(p, b);
    REQUIRE_THROWS_WITH(load_checkpoint<float>(p), Catch::Contains(k.says));
  }
  save_checkpoint<float>(p, {{"step", 3}}, std::vector<float>{1, -2, 3}, std::vector<float>{-1, 0, 1}, std::vector<float>{0, 0, 5});
  REQUIRE(load_checkpoint<float>(p).params[1] == -2);  // negative parameters and first moments are values
  fs::remove_all(dir);
}

TEST_CASE("checkpoint integrity: a new checkpoint keeps the one it replaces as the previous one", "[train][checkpoint][integrity]") {
  const fs::path dir = temp_dir("prev");
  const fs::path cur = dir / "checkpoint.bin", prev = dir / "checkpoint.prev.bin";
  const std::vector<float> a{1, 1}, b{2, 2}, c{3, 3};
  save_checkpoint<float>(cur, {{"step", 1}}, a, a, a, prev);
  REQUIRE_FALSE(fs::exists(prev));  // nothing to keep yet
  save_checkpoint<float>(cur, {{"step", 2}}, b, b, b, prev);
  REQUIRE(load_checkpoint<float>(prev).params == a);
  REQUIRE(load_checkpoint<float>(cur).params == b);
  save_checkpoint<float>(cur, {{"step", 3}}, c, c, c, prev);
  REQUIRE(load_checkpoint<float>(prev).params == b);
  REQUIRE(load_checkpoint<float>(cur).params == c);
  REQUIRE(no_temporaries(dir));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint integrity: a full disk keeps both checkpoints and names the file", "[train][checkpoint][integrity]") {
  const fs::path dir = temp_dir("full");
  const fs::path cur = dir / "checkpoint.bin", prev = dir / "checkpoint.prev.bin";
  const std::vector<float> a(16, 1.0f), b(16, 2.0f), big(1 << 16, 3.0f);  // big: 3 x 256 KiB
  save_checkpoint<float>(cur, {{"step", 1}}, a, a, a, prev);
  save_checkpoint<float>(cur, {{"step", 2}}, b, b, b, prev);
  const std::string cur_bytes = slurp(cur), prev_bytes = slurp(prev);
  // A file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes write() fail with EFBIG as a full disk
  // fails with ENOSPC, without root or a small file system; in a child, so the limit stays there.
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::signal(SIGXFSZ, SIG_IGN);
    const rlimit lim{64 << 10, 64 << 10};
    setrlimit(RLIMIT_FSIZE, &lim);
    std::string msg = "no error";
    int rc = 1;
    try {
      save_checkpoint<float>(cur, {{"step", 3}}, big, big, big, prev);
    } catch (const file_write_error& e) {
      msg = e.what();
      rc = 0;
    } catch (const std::exception& e) {
      msg = std::string("another error: ") + e.what();
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
  REQUIRE(msg == "cannot write " + cur.string() + ": " + std::strerror(EFBIG));  // "File too large"
  REQUIRE(slurp(cur) == cur_bytes);
  REQUIRE(slurp(prev) == prev_bytes);
  REQUIRE(no_temporaries(dir));
  fs::remove_all(dir);
}

TEST_CASE("checkpoint integrity: a read-only run folder keeps both checkpoints and names the file", "[train][checkpoint][integrity]") {
  const fs::path dir = temp_dir("readonly");
  const fs::path cur = dir / "checkpoint.bin", prev = dir / "checkpoint.prev.bin";
  const std::vector<float> a(4, 1.0f), b(4, 2.0f), c(4, 3.0f);
  save_checkpoint<float>(cur, {{"step", 1}}, a, a, a, prev);
  save_checkpoint<float>(cur, {{"step", 2}}, b, b, b, prev);
  const std::string cur_bytes = slurp(cur), prev_bytes = slurp(prev);
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec | fs::perms::group_read | fs::perms::group_exec |
                           fs::perms::others_read | fs::perms::others_exec);
  // Root (CAP_DAC_OVERRIDE) writes into a 0555 folder regardless: then the write is tried in a
  // child that drops to the user nobody (65534); where it cannot, the check is skipped, saying so.
  const std::string expected = "cannot write " + cur.string() + ": " + std::strerror(EACCES);
  if (access(dir.c_str(), W_OK) != 0) {
    REQUIRE_THROWS_WITH(save_checkpoint<float>(cur, {{"step", 3}}, c, c, c, prev), Catch::Equals(expected));
  } else {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      std::string msg = "cannot drop to nobody";
      int rc = 3;
      // The child enters the folder while still root and names the files relative to it, so the
      // folders above need not be open to nobody (one it could not pass would refuse the write with
      // "Permission denied" as well, for another reason); nobody must then be refused the folder.
      if (chdir(dir.c_str()) == 0 && setgid(65534) == 0 && setuid(65534) == 0 && access(".", W_OK) != 0) {
        rc = 1;
        msg = "no error";
        try {
          save_checkpoint<float>(cur.filename(), {{"step", 3}}, c, c, c, prev.filename());
        } catch (const std::exception& e) {
          msg = e.what();
          rc = 0;
        }
      }
      (void)!write(fds[1], msg.data(), msg.size());
      _exit(rc);
    }
    close(fds[1]);
    const std::string msg = loopscale::test::drain_fd(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    REQUIRE(WIFEXITED(status));
    if (WEXITSTATUS(status) == 3) {
      WARN("the read-only folder check is skipped: this process writes into a 0555 folder (root) and cannot drop to the user nobody");
      SUCCEED("skipped: permissions are not enforced for this user");
    } else {
      INFO(msg);
      REQUIRE(WEXITSTATUS(status) == 0);
      REQUIRE(msg == "cannot write " + cur.filename().string() + ": " + std::strerror(EACCES));
    }
  }
  REQUIRE(slurp(cur) == cur_bytes);
  REQUIRE(slurp(prev) == prev_bytes);
  fs::permissions(dir, fs::perms::owner_all);
  fs::remove_all(dir);
}

TEST_CASE("checkpoint integrity: a corrupt checkpoint.bin resumes from checkpoint.prev.bin, bit for bit", "[train][checkpoint][integrity][trainer]") {
  const fs::path data = integrity_corpus("fallback_data");
  const fs::path full = temp_dir("fallback_full"), part = temp_dir("fallback_part");
  for (const auto& p : {full, part}) fs::remove_all(p);
  TrainConfig c = integrity_config(data, full);
  const TrainResult whole = train::train(c);
  c.out = part.string();
  // Checkpoints at steps 3 and 6, and 7 where the caller stops it: checkpoint.bin is step 7,
  // checkpoint.prev.bin step 6.
  REQUIRE(train::train(c, [](const TrainProgress& p) { return p.step < 7; }).status == "stopped");
  REQUIRE(load_checkpoint<float>(part / "checkpoint.prev.bin").meta.at("step") == 6);
  const fs::path cur = part / "checkpoint.bin";
  flip(cur, fs::file_size(cur) / 2);  // inside the parameters or moments
  c.resume = true;
  const TrainResult resumed = train::train(c);
  REQUIRE(resumed.resumed_from == 6);
  REQUIRE(resumed.status == "done");
  REQUIRE(resumed.val_loss == whole.val_loss);
  REQUIRE(integrity_losses(part / "log.jsonl") == integrity_losses(full / "log.jsonl"));
  REQUIRE(load_checkpoint<float>(part / "checkpoint.bin").params == load_checkpoint<float>(full / "checkpoint.bin").params);
  // The corrupt file was replaced at step 9 without becoming the previous one; step 12 then kept 9.
  REQUIRE(load_checkpoint<float>(part / "checkpoint.prev.bin").meta.at("step") == 9);
  for (const auto& p : {full, part, data}) fs::remove_all(p);
}

TEST_CASE("checkpoint integrity: only checkpoint.prev.bin, or both checkpoints unusable", "[train][checkpoint][integrity][trainer]") {
  const fs::path data = integrity_corpus("both_data");
  const fs::path part = temp_dir("both_part");
  fs::remove_all(part);
  TrainConfig c = integrity_config(data, part);
  REQUIRE(train::train(c, [](const TrainProgress& p) { return p.step < 7; }).status == "stopped");
  const fs::path cur = part / "checkpoint.bin", prev = part / "checkpoint.prev.bin";
  const std::string cur_bytes = slurp(cur), prev_bytes = slurp(prev);
  // Only the previous one (a crash mid-replacement where hard links are not supported): a run
  // exists, and it resumes from it.
  fs::remove(cur);
  REQUIRE_THROWS_WITH(train::train(c), Catch::Contains("already holds a run; pass --resume"));
  c.resume = true;
  REQUIRE(train::train(c).resumed_from == 6);
  // Both unusable: one error naming both files, and nothing is written.
  write_text(cur, cur_bytes.substr(0, cur_bytes.size() / 3));
  write_text(prev, prev_bytes);
  flip(prev, 30);
  REQUIRE_THROWS_AS(train::train(c), checkpoint_error);
  REQUIRE_THROWS_WITH(train::train(c), Catch::Contains("no usable checkpoint") && Catch::Contains(cur.string() + " is truncated at byte") &&
                                           Catch::Contains(prev.string() + " is corrupt: checksum mismatch"));
  for (const auto& p : {part, data}) fs::remove_all(p);
}

TEST_CASE("loopscale train: a corrupt checkpoint falls back with a warning, or is one line and exit 2", "[train][checkpoint][integrity][cli]") {
  const fs::path data = integrity_corpus("cli_data");
  const fs::path out = temp_dir("cli_out");
  fs::remove_all(out);
  const std::string args = "train --d-model 32 --heads 2 --depth 4 --prelude 1 --coda 1 --r 2 --seq-len 16 --threads 2 --batch 2 "
                           "--tokens 224 --eval-tokens 64 --checkpoint-every 3 --peak-flops 1e11 --data " + data.string() + " --out " + out.string();
  const auto first = test::run_cli(args);  // 7 steps: checkpoints at 3, 6, 7
  INFO(first.out);
  REQUIRE(first.rc == 0);
  const fs::path cur = out / "checkpoint.bin", prev = out / "checkpoint.prev.bin";
  const std::string cur_bytes = slurp(cur), prev_bytes = slurp(prev);
  // checkpoint.bin corrupt, checkpoint.prev.bin good: a one-line warning, then the run continues.
  flip(cur, 100);
  const auto warned = test::run_cli(args + " --resume");
  INFO(warned.out);
  REQUIRE(warned.rc == 0);
  REQUIRE_THAT(warned.out, Catch::Contains("loopscale: warning: checkpoint " + cur.string() + " is corrupt: checksum mismatch (stored xxh3-64:") &&
                               Catch::Contains("; resuming from " + prev.string() + " (step 6)\n"));
  // checkpoint.bin corrupt and no previous one: one line, exit 2.
  write_text(cur, cur_bytes);
  flip(cur, 100);
  fs::remove(prev);
  const auto bad = test::run_cli(args + " --resume");
  INFO(bad.out);
  REQUIRE(bad.rc == 2);
  REQUIRE(test::count_lines(bad.out) == 1);
  REQUIRE_THAT(bad.out, Catch::StartsWith("loopscale: error: checkpoint " + cur.string() + " is corrupt: checksum mismatch"));
  // Both unusable: one line naming both, exit 2.
  write_text(prev, prev_bytes.substr(0, 40));
  const auto both = test::run_cli(args + " --resume");
  INFO(both.out);
  REQUIRE(both.rc == 2);
  REQUIRE(test::count_lines(both.out) == 1);
  REQUIRE_THAT(both.out, Catch::Contains(cur.string()) && Catch::Contains(prev.string() + " is truncated at byte 40"));
  fs::remove_all(out);
  fs::remove_all(data);
}

TEST_CASE("checkpoint integrity: a full disk while training keeps both checkpoints and the log, and the run resumes", "[train][checkpoint][integrity][trainer]") {
  const fs::path data = integrity_corpus("disk_data");
  const fs::path full = temp_dir("disk_full"), part = temp_dir("disk_part");
  for (const auto& p : {full, part}) fs::remove_all(p);
  TrainConfig c = integrity_config(data, full);
  const TrainResult whole = train::train(c);
  c.out = part.string();
  REQUIRE(train::train(c, [](const TrainProgress& p) { return p.step < 7; }).status == "stopped");
  const fs::path cur = part / "checkpoint.bin", prev = part / "checkpoint.prev.bin";
  const std::string cur_bytes = slurp(cur), prev_bytes = slurp(prev);
  c.resume = true;
  // A file size limit (RLIMIT_FSIZE, SIGXFSZ ignored) makes write() fail with EFBIG as a full disk
  // makes it fail with ENOSPC, without root or a small file system. Below a checkpoint's size, far
  // above the log's: the steps train and are logged, the checkpoint at step 9 fails. Only the soft
  // limit is lowered, so it can be raised back.
  rlimit old{};
  REQUIRE(getrlimit(RLIMIT_FSIZE, &old) == 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  rlimit lim = old;
  lim.rlim_cur = fs::file_size(cur) / 2;
  REQUIRE(fs::file_size(part / "log.jsonl") < lim.rlim_cur / 4);
  REQUIRE(setrlimit(RLIMIT_FSIZE, &lim) == 0);
  std::string error = "no error";
  try {
    train::train(c);
  } catch (const std::exception& e) {
    error = e.what();
  }
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  REQUIRE_THAT(error, Catch::Contains("cannot write " + cur.string() + ": " + std::strerror(EFBIG)));  // "File too large"
  REQUIRE(slurp(cur) == cur_bytes);
  REQUIRE(slurp(prev) == prev_bytes);
  REQUIRE(no_temporaries(part));
  REQUIRE(integrity_losses(part / "log.jsonl").size() == 2 * 9);  // steps 8 and 9 were logged before checkpoint 9 failed
  // Nothing finished is lost: the resume cuts the log to step 7 and ends as the uninterrupted run.
  const TrainResult resumed = train::train(c);
  REQUIRE(resumed.resumed_from == 7);
  REQUIRE(resumed.val_loss == whole.val_loss);
  REQUIRE(integrity_losses(part / "log.jsonl") == integrity_losses(full / "log.jsonl"));
  for (const auto& d : {full, part, data}) fs::remove_all(d);
}
