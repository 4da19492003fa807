// Runs the `loopscale` program built beside the tests and captures its output and exit code.
#pragma once

#include <cstdio>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace loopscale::test {

struct CliResult {
  int rc = -1;
  std::string out;  // stdout and stderr together
};

// `prefix` goes before the program: "timeout 60 " makes a refusal that regresses into a read of a
// pipe fail (rc 124) instead of hanging the test program.
inline CliResult run_cli(const std::string& args, const std::string& prefix = "") {
  const std::string cmd = prefix + std::string(LOOPSCALE_CLI) + " " + args + " 2>&1";
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

// Starts `loopscale ARGS` in a child with its output in the file ERR and returns its pid, for a
// test that signals the run or waits for it.
inline pid_t start_cli(const std::string& args, const std::string& err) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string cmd = "exec " + std::string(LOOPSCALE_CLI) + " " + args + " > '" + err + "' 2>&1";
    execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

}  // namespace loopscale::test
