// Signals caught while HostBackend::gemm runs must not harm the heap. oneDNN's JIT sgemm kernels
// (up to oneDNN 3.11.1, issue #4845) run with rsp pointing into a heap workspace, so a handler
// invoked during the call had its signal frame written into the heap; glibc then aborted ("corrupted
// size vs. prev_size", "free(): invalid pointer"), which is how a `loopscale train` stopped by
// SIGUSR1 once died instead of writing its checkpoint. host.hpp holds signals off around the call.
// Here a second thread signals the one multiplying every 20 us for a second, with heap churn
// between the products: before the fix, with Debian's oneDNN 2.6, this aborted ("corrupted size vs.
// prev_size while consolidating", "double free or corruption") or hung in malloc on a clobbered
// arena lock within about two seconds, every time; a pass is no abort, exact products, and signals
// still handled (between the products).
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>
#include <vector>

#include <pthread.h>

#include "loopscale/train/backend/host.hpp"

namespace {

volatile std::sig_atomic_t handled = 0;
extern "C" void count_signal(int) { handled = handled + 1; }

}  // namespace

TEST_CASE("gemm: signals caught during the products leave the heap and the results intact", "[train][kernels][signals]") {
  using HB = loopscale::train::HostBackend;
  struct sigaction sa {}, old {};
  sa.sa_handler = count_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  REQUIRE(sigaction(SIGUSR1, &sa, &old) == 0);
  handled = 0;
  const int threads = HB::threads();
  HB::set_threads(1);

  // The transposed-A weight gradient of the engine's LM head (d 32, vocab 256, 128 rows), exact
  // in float: every product of these small multiples of 1/4 and their sums are representable.
  const std::int64_t M = 256, N = 32, K = 128;
  std::vector<float> A(static_cast<std::size_t>(K * M), 0.5f), B(static_cast<std::size_t>(K * N), 0.25f), C(static_cast<std::size_t>(M * N));
  std::atomic<bool> done{false};
  const pthread_t target = pthread_self();
  std::thread pinger([&] {
    while (!done) {
      pthread_kill(target, SIGUSR1);
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  });
  bool exact = true;
  long products = 0;
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1)) {
    HB::gemm<float>(true, false, M, N, K, 1.f, A.data(), M, B.data(), N, 0.f, C.data(), N);
    for (const float c : C) exact = exact && c == 0.125f * static_cast<float>(K);
    std::vector<char> churn(static_cast<std::size_t>(1000 + products % 5000), 1);  // frees and allocations between products
    exact = exact && churn.back() == 1;
    ++products;
  }
  done = true;
  pinger.join();
  sigaction(SIGUSR1, &old, nullptr);
  HB::set_threads(threads);
  INFO(products << " products, " << static_cast<int>(handled) << " signals handled");
  CHECK(exact);
  CHECK(products > 0);
  CHECK(handled > 0);
}
