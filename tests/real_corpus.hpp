// The real English corpus (scripts/corpus.sh) that the learning, MoE balancing and evaluation tests
// read, built at its fixed place data/corpus/ when this checkout has none, so that those tests always
// run instead of skipping. Built once and then kept: the script is idempotent and every later call
// only finds meta.json, which the script writes last. Needs LOOPSCALE_SOURCE_DIR; with LOOPSCALE_CLI
// the script's `data prepare` is the program built beside the tests (the script would otherwise
// configure and build one in build/).
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace loopscale::test {

// data/corpus/ of the source tree, built first if it is missing. ctest runs tests side by side, so
// the build holds a lock (data/.corpus.lock): a second test waits for it and then finds the corpus
// built, rather than writing the same files at the same time.
inline std::filesystem::path real_corpus() {
  namespace fs = std::filesystem;
  const fs::path root = LOOPSCALE_SOURCE_DIR;
  const fs::path dir = root / "data" / "corpus";
  if (fs::exists(dir / "meta.json")) return dir;
  fs::create_directories(root / "data");
  const int lock = ::open((root / "data" / ".corpus.lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  REQUIRE(lock >= 0);
  REQUIRE(::flock(lock, LOCK_EX) == 0);
  int rc = 0;
  if (!fs::exists(dir / "meta.json")) {
    // The paths go through the shell, in single quotes.
    const auto quote = [](const std::string& s) {
      std::string q = "'";
      for (const char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
      return q + "'";
    };
    std::string cmd = "bash " + quote((root / "scripts" / "corpus.sh").string());
#ifdef LOOPSCALE_CLI
    cmd = "LOOPSCALE=" + quote(LOOPSCALE_CLI) + " " + cmd;
#endif
    rc = std::system(cmd.c_str());
  }
  ::close(lock);  // and with it the lock
  INFO("bash scripts/corpus.sh builds data/corpus from the packages scripts/setup.sh installs");
  REQUIRE(rc == 0);
  REQUIRE(fs::exists(dir / "meta.json"));
  return dir;
}

}  // namespace loopscale::test
