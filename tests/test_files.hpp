// Scratch folders and whole-file reads for the test programs, defined once here rather than in each
// test file: a test program's files are compiled as one translation unit (LOOPSCALE_UNITY_BUILD,
// CMakeLists.txt), where two files' local helpers of the same name would collide.
#pragma once

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <unistd.h>

namespace loopscale::test {

namespace fs = std::filesystem;

// <system temp>/loopscale_test_<name>_<pid>, removed if it exists and not created: the pid keeps
// apart the test processes ctest runs at once.
inline fs::path temp_path(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / ("loopscale_test_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

// The same folder, created empty.
inline fs::path temp_dir(const std::string& name) {
  const fs::path p = temp_path(name);
  fs::create_directories(p);
  return p;
}

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Everything a pipe's read end gives until its writers close it (a forked child's message), then
// the end closed.
inline std::string drain_fd(int fd) {
  std::string s;
  char buf[512];
  ssize_t k;
  while ((k = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<std::size_t>(k));
  ::close(fd);
  return s;
}

inline void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
}

}  // namespace loopscale::test
