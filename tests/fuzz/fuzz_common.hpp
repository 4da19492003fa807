// Shared by the libFuzzer harnesses of tests/fuzz/ and their replay program (replay_main.cpp).
//
// A harness feeds one input to one reader of outside input and lets through only the error type
// the reader documents for bad input: any other exception escapes (libFuzzer reports it as a
// crash, the replay test aborts), as do sanitizer reports, hangs and absurd allocations.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace loopscale_fuzz {

inline std::string text_of(const std::uint8_t* data, std::size_t size) {
  return std::string(reinterpret_cast<const char*>(data), size);
}

// The input as a file, for readers that take a path. One per process (libFuzzer's -jobs and
// -fork run several at once), under $TMPDIR or /tmp, never in the source tree; removed afterwards.
class TempFile {
 public:
  TempFile(const std::uint8_t* data, std::size_t size, const char* suffix) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/loopscale-fuzz-" + std::to_string(::getpid()) + suffix;
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    // A harness that cannot write its input tests nothing: stop loudly rather than pass.
    if (!f || std::fwrite(data, 1, size, f) != size || std::fclose(f) != 0) {
      std::fprintf(stderr, "fuzz: cannot write %s\n", path_.c_str());
      std::abort();
    }
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace loopscale_fuzz
