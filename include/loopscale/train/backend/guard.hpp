// The guard backend: HostBackend's kernels over memory the host cannot touch. Every buffer it
// allocates is mapped with no access (PROT_NONE) except while one of the backend's own calls runs
// (gemm, gemm_batched, parallel_for, sum, single, sort_pairs, upload, download), so host code that
// reads or writes model memory outside the backend, which on a GPU would dereference a device
// pointer on the host, stops with SIGSEGV at the line that does it. A model whose training step runs under
// this backend with the same results as under HostBackend has a seam a device backend can plug
// into; tests do that (tests/train/test_guard_backend.cpp).
//
// Only for tests: every backend call changes the protection of every live buffer (two mprotect
// calls per buffer), so it is slow. Calls nest (a gemm inside a parallel_for's task, from any
// thread); only the outermost opens and closes the memory.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "loopscale/train/backend/buffer.hpp"
#include "loopscale/train/backend/host.hpp"
#include "loopscale/train/backend/sort_pairs_host.hpp"

namespace loopscale::train {

namespace guard_detail {

// Every live guarded mapping and the number of backend calls now running.
struct Registry {
  std::mutex mutex;
  std::map<void*, std::size_t> regions;  // start -> length in bytes (whole pages)
  std::atomic<int> depth{0};

  static Registry& get() {
    static Registry r;
    return r;
  }
  void protect_all(int prot) {
    const std::lock_guard<std::mutex> lock(mutex);
    for (const auto& [p, len] : regions) protect(p, len, prot);
  }
  static void protect(void* p, std::size_t len, int prot) {
    if (mprotect(p, len, prot) != 0) {
      std::perror("loopscale guard backend: mprotect");
      std::abort();
    }
  }
};

// The memory of the backend calls now running is open; the outermost call closes it on return.
struct Open {
  Open() {
    Registry& r = Registry::get();
    if (r.depth.fetch_add(1) == 0) r.protect_all(PROT_READ | PROT_WRITE);
  }
  ~Open() {
    Registry& r = Registry::get();
    if (r.depth.fetch_sub(1) == 1) r.protect_all(PROT_NONE);
  }
  Open(const Open&) = delete;
  Open& operator=(const Open&) = delete;
};

}  // namespace guard_detail

// Whole pages of their own for each buffer, closed to the host outside backend calls.
struct GuardMemory {
  static std::size_t pages(std::size_t bytes) {
    const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    return (bytes + page - 1) / page * page;
  }
  static void* allocate(std::size_t bytes) {
    const std::size_t len = pages(bytes);
    void* p = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);  // zero-filled
    if (p == MAP_FAILED) throw std::bad_alloc();
    guard_detail::Registry& r = guard_detail::Registry::get();
    const std::lock_guard<std::mutex> lock(r.mutex);
    r.regions.emplace(p, len);
    if (r.depth.load() == 0) guard_detail::Registry::protect(p, len, PROT_NONE);
    return p;
  }
  static void release(void* p, std::size_t bytes) {
    guard_detail::Registry& r = guard_detail::Registry::get();
    {
      const std::lock_guard<std::mutex> lock(r.mutex);
      r.regions.erase(p);
    }
    munmap(p, pages(bytes));
  }
};

template <class T>
using GuardBuffer = OwnedBuffer<T, GuardMemory>;

// NestedGemm: true runs the host backend's forms of attention and the MoE experts (a GEMM inside
// a parallel task), so results equal HostBackend's bit for bit; false runs the device forms, the
// code path of a GPU backend, on the CPU (GuardDeviceBackend).
template <bool NestedGemm>
struct GuardBackendOf {
  static constexpr const char* name = NestedGemm ? "guard" : "guard-device";
  static constexpr const char* gemm_library = HostBackend::gemm_library;
  static std::string gemm_kernels() { return HostBackend::gemm_kernels(); }
  static constexpr bool host_memory = false;
  static constexpr bool nested_gemm = NestedGemm;
  template <class T>
  using buffer = GuardBuffer<T>;

  static void set_threads(int n) { HostBackend::set_threads(n); }
  static int threads() { return HostBackend::threads(); }
  static int thread_id() { return HostBackend::thread_id(); }

  template <class F>
  static void parallel_for(int64 n, F f) {
    const guard_detail::Open open;
    HostBackend::parallel_for(n, f);
  }
  template <class F>
  static double sum(int64 n, F f) {
    const guard_detail::Open open;
    return HostBackend::sum(n, f);
  }
  template <class F>
  static void single(F f) {
    const guard_detail::Open open;
    HostBackend::single(f);
  }
  template <class T>
  static void gemm(bool ta, bool tb, int64 M, int64 N, int64 K, T alpha, const T* A, int64 lda, const T* B, int64 ldb,
                   T beta, T* C, int64 ldc) {
    const guard_detail::Open open;
    HostBackend::gemm(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
  template <class T>
  static void gemm_batched(bool ta, bool tb, int64 M, int64 N, int64 K, T alpha, const T* A, int64 lda, int64 strideA, const T* B,
                           int64 ldb, int64 strideB, T beta, T* C, int64 ldc, int64 strideC, int64 count) {
    const guard_detail::Open open;
    HostBackend::gemm_batched(ta, tb, M, N, K, alpha, A, lda, strideA, B, ldb, strideB, beta, C, ldc, strideC, count);
  }
  // The device forms sort (kernels/moe_router.hpp groups MoE slots by a sort where the backend
  // has one); the host forms keep the host's counting sort.
  static void sort_pairs(const std::int32_t* keys_in, std::int32_t* keys_out, const std::int32_t* vals_in, std::int32_t* vals_out,
                         int64 n, int key_bits)
    requires(!NestedGemm)
  {
    const guard_detail::Open open;
    stable_sort_pairs_host(keys_in, keys_out, vals_in, vals_out, n, key_bits);
  }
  template <class T>
  static void upload(T* dst, const T* src, int64 n) {
    const guard_detail::Open open;
    HostBackend::upload(dst, src, n);
  }
  template <class T>
  static void download(T* dst, const T* src, int64 n) {
    const guard_detail::Open open;
    HostBackend::download(dst, src, n);
  }
};

using GuardBackend = GuardBackendOf<true>;
using GuardDeviceBackend = GuardBackendOf<false>;

}  // namespace loopscale::train
