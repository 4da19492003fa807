// OpenMP threads that finish a parallel region spin, by libgomp's default, before they sleep. On a
// machine shared with other work those spinning threads take the cores the others need, and a
// region waits for its slowest thread. Beside one busy process, two threads trained a 55.6k-
// parameter model 1.85x slower than one thread, and with OMP_WAIT_POLICY=passive 4% slower, while
// the acceptance model kept its idle speed (docs/benchmarks.md, "Threads against load"). Two test
// programs with two threads each on two cores (ctest -j2) fared far worse: a pair of the model's
// finite-difference gradient checks took 332 s instead of 2.6 s, once in four runs; with the
// passive policy 3.8-5.1 s (AMD EPYC Zen 3, 2 cores, 2 Dec 2026).
//
// libgomp reads the variable when it is loaded, before main, so a program started without it sets
// it and executes itself again, once (the variable is then set). A user's OMP_WAIT_POLICY is kept,
// and so is a GOMP_SPINCOUNT (libgomp's own spin limit, which applies only while the policy is
// unset). Call it first thing in main(); `loopscale` and the test programs do.
#pragma once

#include <cstdlib>

#include <unistd.h>

namespace loopscale {

inline void prefer_passive_openmp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") == nullptr && std::getenv("GOMP_SPINCOUNT") == nullptr && setenv("OMP_WAIT_POLICY", "passive", 1) == 0) {
    execv("/proc/self/exe", argv);
    unsetenv("OMP_WAIT_POLICY");  // exec failed: carry on as started, with the default policy
  }
}

}  // namespace loopscale
