// Runs the `loopscale` program built beside the tests and captures its output and exit code.
#pragma once

#include <cstdio>
#include <string>
#include <sys/wait.h>

namespace loopscale::test {

struct CliResult {
  int rc = -1;
  std::string out;  // stdout and stderr together
};

inline CliResult run_cli(const std::string& args) {
  const std::string cmd = std::string(LOOPSCALE_CLI) + " " + args + " 2>&1";
  CliResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  std::size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, n);
  const int status = pclose(p);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace loopscale::test
