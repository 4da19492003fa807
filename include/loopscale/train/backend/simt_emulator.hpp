// A CPU emulator of CUDA's execution model, enough of it to run the CUDA backend's own kernels
// (backend/cuda_kernels.hpp) on a machine without a GPU. The CUDA tests (tests/cuda/) check those
// kernels against their host twins only where a device is lent; compiled against this header they
// run in every build, so a wrong index, a missing barrier or a warp reduction over the wrong lanes
// is caught where it is written (tests/simt/).
//
// What is emulated: a launch runs its blocks one after another; the threads of a block are
// fibers (Boost.Context, a stack each) on the calling thread, each running until it waits at
// __syncthreads() or a warp shuffle, so every thread of the block has done its part before any
// goes past the barrier, as on the device. Shared memory is a function's static (one block runs
// at a time). Warps are 32 consecutive threads of the block; __shfl_xor_sync exchanges values
// through a slot per lane, the named lanes waiting for each other once.
// The fibers of a block run in an order shuffled per block, under one of two schedules drawn per
// block (run_block): warps in step, or one warp running ahead to its next __syncthreads. So a
// kernel that reads shared memory another warp writes without a barrier between, or writes
// shared memory again before a slower warp has read it, gets wrong values here too, on some blocks.
//
// What is refused, each with an exception naming the kernel and the block: a configuration a
// device refuses (no threads, more than 1024 a block, a grid side past its limit); a shuffle whose
// mask names a lane that has returned or does not exist, or that reads a lane its mask leaves out
// (undefined on a device); threads that wait for each other at barriers not all of them reach (a
// device hangs); a launch from inside a kernel, or while another thread's launch runs (the
// kernels' shared memory is a static). Narrower than CUDA, and stated here: the lanes of a warp shuffle with one mask at
// a time (two disjoint sub-warp groups shuffling at once are refused; the kernels shuffle whole
// warps), and __syncthreads counts the threads still running, so threads that returned before it
// are not waited for (the programming guide leaves that undefined; the kernels here return whole
// blocks before a barrier, or threads after the last one). Not emulated: memory ordering beyond
// barriers, atomics, streams, timing, and anything the kernels do not use.
//
// Under AddressSanitizer, every switch between stacks is announced to it (below), so the kernels'
// memory accesses are checked to the byte (tests/sanitize, over SimtHeapBackend's heap buffers).
//
// Use: define LOOPSCALE_SIMT_EMULATION and include backend/cuda_kernels.hpp with the host compiler
// (backend/simt.hpp does both). The CUDA names the kernels use are this header's: threadIdx,
// blockIdx, blockDim, gridDim, dim3, __syncthreads and __shfl_xor_sync in simt::builtins (which
// the kernels' namespace uses), __global__, __device__, __host__ and __shared__ as macros; and
// LOOPSCALE_LAUNCH(kernel, grid, block)(args...) runs kernel<<<grid, block>>>(args...).
#pragma once

#if defined(__CUDACC__)
#error "loopscale/train/backend/simt_emulator.hpp emulates CUDA on the CPU: compile it with the host compiler, not nvcc"
#endif

#include <sys/mman.h>
#include <unistd.h>

#include <boost/context/fiber.hpp>

// Under AddressSanitizer the emulator tells it of every switch between the scheduler's stack and a
// fiber's (its fiber API), so ASan checks the kernels' memory accesses to the byte without taking
// a switch for a stack overflow (tests/sanitize runs the kernel checks so).
#if defined(__SANITIZE_ADDRESS__)
#define LOOPSCALE_SIMT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define LOOPSCALE_SIMT_ASAN 1
#endif
#endif
#if defined(LOOPSCALE_SIMT_ASAN)
#include <sanitizer/common_interface_defs.h>
#endif

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <map>
#include <new>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace loopscale::train::simt {

struct uint3 {
  unsigned x = 0, y = 0, z = 0;
};
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
};

inline constexpr int warp_size = 32;
inline constexpr unsigned max_threads_per_block = 1024;
inline constexpr unsigned max_grid_x = 2147483647u, max_grid_y = 65535, max_grid_z = 65535;

namespace builtins {
inline thread_local uint3 threadIdx, blockIdx;
inline thread_local dim3 blockDim, gridDim;
}  // namespace builtins

namespace detail {

// Threads waiting for each other: released when `arrived` reaches the number expected.
struct Barrier {
  int arrived = 0;
  std::uint64_t generation = 0;
};

struct Fiber {
  boost::context::fiber handle;  // the thread, while it waits or has not started (empty once it has returned)
  boost::context::fiber sink;    // the scheduler, while the thread runs
  uint3 thread_idx;
  int lane = 0, warp = 0;
  bool done = false;
  const Barrier* waiting_on = nullptr;  // released once its generation moves past waiting_generation
  std::uint64_t waiting_generation = 0;
  const char* stack = nullptr;  // the lowest address of its stack (StackPool::bytes), for ASan
  void* fake_stack = nullptr;   // ASan's fake frames of the thread while the scheduler runs
};

struct Warp {
  std::uint32_t live = 0;  // lanes that exist and have not returned
  std::uint32_t mask = 0;  // the mask of the shuffle lanes now wait at (meaningful while barrier.arrived > 0)
  Barrier barrier;
  std::uint64_t slot[warp_size] = {};    // each lane's value of the shuffle now waited at
  int source[warp_size] = {};            // the lane each lane reads
  std::uint64_t result[warp_size] = {};  // what each lane reads: written by the last lane to arrive
};

// The block now running on this thread.
struct Block {
  const char* kernel = "";
  dim3 grid_dim, block_dim;
  uint3 block_idx;
  std::vector<Fiber> fibers;
  std::vector<Warp> warps;
  int live = 0;  // threads that have not returned
  Barrier block_barrier;
  Fiber* current = nullptr;
  bool aborting = false;  // the block failed: threads resumed now unwind instead of going on
  const std::function<void()>* body = nullptr;
  std::exception_ptr error;
  const void* scheduler_stack = nullptr;  // the launching thread's stack, as ASan gives it to a fiber
  std::size_t scheduler_stack_size = 0;

  [[noreturn]] void fail(const std::string& what) const {
    throw std::logic_error("simt: kernel " + std::string(kernel) + ", block (" + std::to_string(block_idx.x) + ", " +
                           std::to_string(block_idx.y) + ", " + std::to_string(block_idx.z) + "): " + what);
  }
};

inline Block*& running() {
  static thread_local Block* b = nullptr;
  return b;
}

inline Block& block() {
  Block* b = running();
  if (!b) throw std::logic_error("simt: a CUDA built-in (threadIdx, __syncthreads, a shuffle) used outside an emulated kernel");
  return *b;
}

// Stacks for the fibers, kept between launches: 64 KiB each with a guard page below, so a
// kernel that overflows its stack stops with SIGSEGV instead of writing over its neighbour's.
class StackPool {
 public:
  static constexpr std::size_t bytes = 64 * 1024;
  static StackPool& get() {
    static thread_local StackPool p;
    return p;
  }
  char* stack(std::size_t i) {
    while (stacks_.size() <= i) {
      const std::size_t page = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
      void* p = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      if (mprotect(p, page, PROT_NONE) != 0) throw std::runtime_error("simt: mprotect of a stack's guard page failed");
      stacks_.push_back(static_cast<char*>(p));
      page_ = page;
    }
    return stacks_[i] + page_;
  }
  StackPool() = default;
  StackPool(const StackPool&) = delete;
  StackPool& operator=(const StackPool&) = delete;
  ~StackPool() {
    for (char* p : stacks_) munmap(p, bytes + page_);
  }

 private:
  std::vector<char*> stacks_;
  std::size_t page_ = 0;
};

// One of StackPool's stacks for a fiber (Boost.Context's stack allocator); it stays with the pool.
struct PooledStack {
  char* base;
  boost::context::stack_context allocate() const {
    boost::context::stack_context sc;
    sc.size = StackPool::bytes;
    sc.sp = base + StackPool::bytes;  // stacks grow down: the top
    return sc;
  }
  void deallocate(boost::context::stack_context&) const noexcept {}
};

struct Aborted {};  // thrown where a thread waits, when its block has failed

// ASan's side of a switch (no-ops without it): start_switch before leaving a stack, naming the
// one entered; finish_switch first thing on the stack entered. A fiber's last switch passes no
// save slot, so ASan drops its fake frames.
inline void asan_start_switch([[maybe_unused]] void** fake_stack_save, [[maybe_unused]] const void* bottom,
                              [[maybe_unused]] std::size_t size) {
#if defined(LOOPSCALE_SIMT_ASAN)
  __sanitizer_start_switch_fiber(fake_stack_save, bottom, size);
#endif
}
inline void asan_finish_switch([[maybe_unused]] void* fake_stack_save, [[maybe_unused]] const void** bottom_old,
                               [[maybe_unused]] std::size_t* size_old) {
#if defined(LOOPSCALE_SIMT_ASAN)
  __sanitizer_finish_switch_fiber(fake_stack_save, bottom_old, size_old);
#endif
}

inline void resume(Block& b, Fiber& f) {  // run f until it waits or returns
  b.current = &f;
  builtins::threadIdx = f.thread_idx;
  void* scheduler_fake = nullptr;
  asan_start_switch(&scheduler_fake, f.stack, StackPool::bytes);
  f.handle = std::move(f.handle).resume();
  asan_finish_switch(scheduler_fake, nullptr, nullptr);
  b.current = nullptr;
}
inline void suspend(Block& b, Fiber& f) {  // back to the scheduler, until it resumes this thread
  asan_start_switch(&f.fake_stack, b.scheduler_stack, b.scheduler_stack_size);
  f.sink = std::move(f.sink).resume();
  asan_finish_switch(f.fake_stack, &b.scheduler_stack, &b.scheduler_stack_size);
  if (b.aborting) throw Aborted{};
}

// Wait at `bar` until `expected` threads have arrived (this one included).
inline void wait(Block& b, Barrier& bar, int expected) {
  if (++bar.arrived >= expected) {
    bar.arrived = 0;
    ++bar.generation;
    return;
  }
  Fiber& f = *b.current;
  f.waiting_on = &bar;
  f.waiting_generation = bar.generation;
  suspend(b, f);
}

// A thread returned: it no longer counts at barriers. A __syncthreads the others wait at may now
// be complete; a shuffle that names it never can.
inline void retire(Block& b, Fiber& f) {
  f.done = true;
  --b.live;
  Warp& w = b.warps[static_cast<std::size_t>(f.warp)];
  w.live &= ~(1u << f.lane);
  if (w.barrier.arrived > 0 && (w.mask & (1u << f.lane)))
    b.fail("lane " + std::to_string(f.lane) + " of warp " + std::to_string(f.warp) +
           " returned while other lanes wait for it at a shuffle (its mask names it)");
  if (b.block_barrier.arrived > 0 && b.block_barrier.arrived >= b.live) {
    b.block_barrier.arrived = 0;
    ++b.block_barrier.generation;
  }
}

inline void fiber_main(Block& b, Fiber& f) {
  try {
    (*b.body)();
    retire(b, f);
  } catch (const Aborted&) {
    f.done = true;
  } catch (const boost::context::detail::forced_unwind&) {
    throw;  // Boost.Context unwinding a fiber destroyed while it waits (abort_all makes that never happen)
  } catch (...) {
    f.done = true;
    if (!b.error) b.error = std::current_exception();
  }
}

// A fresh fiber for f, started by the scheduler's first resume; it runs the kernel for its thread
// and returns to the scheduler.
inline void prepare(Block& b, Fiber& f, char* stack) {
  f.done = false;
  f.waiting_on = nullptr;
  f.stack = stack;
  f.fake_stack = nullptr;
  f.handle = boost::context::fiber(std::allocator_arg, PooledStack{stack}, [&b, &f](boost::context::fiber&& sink) {
    asan_finish_switch(nullptr, &b.scheduler_stack, &b.scheduler_stack_size);
    f.sink = std::move(sink);
    if (!b.aborting) fiber_main(b, f);
    asan_start_switch(nullptr, b.scheduler_stack, b.scheduler_stack_size);
    return std::move(f.sink);
  });
}

// After a failure: every thread that waits (or has not started) is resumed to unwind and return,
// so no fiber is left suspended.
inline void abort_all(Block& b) {
  b.aborting = true;
  for (Fiber& f : b.fibers)
    if (f.handle) resume(b, f);
  b.aborting = false;
}

inline std::uint64_t& schedule_state() {
  static thread_local std::uint64_t s = 0x9E3779B97F4A7C15ull;
  return s;
}

inline std::map<std::string, std::int64_t>& launch_counts() {
  static thread_local std::map<std::string, std::int64_t> m;
  return m;
}

inline void run_block(Block& b, std::vector<std::size_t>& order) {
  const std::size_t n = b.fibers.size();
  b.live = static_cast<int>(n);
  b.block_barrier = {};
  for (std::size_t w = 0; w < b.warps.size(); ++w) {
    b.warps[w] = Warp{};
    const std::size_t lanes = n - w * warp_size < static_cast<std::size_t>(warp_size) ? n - w * warp_size : warp_size;
    b.warps[w].live = lanes == 32 ? ~0u : (1u << lanes) - 1u;
  }
  for (std::size_t i = 0; i < n; ++i) prepare(b, b.fibers[i], StackPool::get().stack(i));
  // A new order for each block (xorshift; Fisher-Yates), and one of two schedules. Round robin
  // resumes every runnable thread once a pass, so warps move through their shuffles in step, and a
  // thread that reads what another warp writes between two barriers, before that warp has written
  // it, is caught. Warp-greedy (every other block, by the same generator) runs a resumed thread's
  // warp on until each of its lanes waits at __syncthreads or has returned: one warp gets a whole
  // reduction ahead of the others, as a device allows, so a warp that writes shared memory a slower
  // warp has not yet read (a missing barrier before the memory is reused) is caught too.
  std::uint64_t& s = schedule_state();
  const auto next = [&s] { return s ^= s << 13, s ^= s >> 7, s ^= s << 17; };
  for (std::size_t i = n; i > 1; --i) std::swap(order[i - 1], order[next() % i]);
  const bool warp_greedy = (next() >> 32) & 1u;
  const auto runnable = [](const Fiber& f) { return !f.done && !(f.waiting_on && f.waiting_on->generation == f.waiting_generation); };
  const auto step = [&](Fiber& f) {
    f.waiting_on = nullptr;
    resume(b, f);
    if (b.error) {
      abort_all(b);
      std::rethrow_exception(b.error);
    }
  };
  while (b.live > 0) {  // retire() counts the threads that return; a failure leaves through the rethrow above
    bool progress = false;
    for (std::size_t k = 0; k < n; ++k) {
      Fiber& f = b.fibers[order[k]];
      if (!runnable(f)) continue;
      step(f);
      progress = true;
      if (!warp_greedy) continue;
      const std::size_t first = static_cast<std::size_t>(f.warp) * warp_size, last = std::min(n, first + warp_size);
      for (bool again = true; again;) {
        again = false;
        for (std::size_t i = first; i < last; ++i)
          if (runnable(b.fibers[i])) {
            step(b.fibers[i]);
            again = true;
          }
      }
    }
    if (!progress && b.live > 0) {
      abort_all(b);
      b.fail(std::to_string(b.live) + " threads wait at barriers (__syncthreads or shuffles) that the block's other threads never reach");
    }
  }
}

inline void run(const char* kernel, dim3 grid, dim3 block_dim, const std::function<void()>& body) {
  const auto bad = [&](const std::string& what) {
    throw std::invalid_argument("simt: kernel " + std::string(kernel) + ": invalid configuration, " + what);
  };
  const std::uint64_t threads = std::uint64_t{block_dim.x} * block_dim.y * block_dim.z;
  if (threads == 0 || threads > max_threads_per_block)
    bad("blocks of " + std::to_string(block_dim.x) + " x " + std::to_string(block_dim.y) + " x " + std::to_string(block_dim.z) +
        " threads (1 to 1024)");
  if (block_dim.z > 64) bad("block z side " + std::to_string(block_dim.z) + " (at most 64)");
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > max_grid_x || grid.y > max_grid_y || grid.z > max_grid_z)
    bad("a grid of " + std::to_string(grid.x) + " x " + std::to_string(grid.y) + " x " + std::to_string(grid.z) +
        " blocks (each side at least 1; x at most 2^31 - 1, y and z at most 65535)");
  if (running()) throw std::logic_error("simt: kernel " + std::string(kernel) + " launched from inside an emulated kernel");
  // One launch at a time in the process: shared memory is a static, which two blocks running on
  // two threads would share (a device backend's kernels are launched from one host thread).
  static std::atomic<int> active{0};
  if (active.fetch_add(1) != 0) {
    active.fetch_sub(1);
    throw std::logic_error("simt: kernel " + std::string(kernel) + " launched while another thread runs a launch");
  }
  struct Leave {  // `running` and `active` are cleared however the launch ends
    ~Leave() {
      running() = nullptr;
      active.fetch_sub(1);
    }
  } leave;
  ++launch_counts()[kernel];

  Block b;
  b.kernel = kernel;
  b.grid_dim = grid;
  b.block_dim = block_dim;
  b.body = &body;
  b.fibers.resize(static_cast<std::size_t>(threads));
  b.warps.resize((static_cast<std::size_t>(threads) + warp_size - 1) / warp_size);
  for (std::size_t i = 0; i < b.fibers.size(); ++i) {
    Fiber& f = b.fibers[i];
    f.thread_idx = {static_cast<unsigned>(i % block_dim.x), static_cast<unsigned>(i / block_dim.x % block_dim.y),
                    static_cast<unsigned>(i / (std::size_t{block_dim.x} * block_dim.y))};
    f.lane = static_cast<int>(i % warp_size);
    f.warp = static_cast<int>(i / warp_size);
  }
  std::vector<std::size_t> order(b.fibers.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;

  running() = &b;
  builtins::blockDim = block_dim;
  builtins::gridDim = grid;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        b.block_idx = {x, y, z};
        builtins::blockIdx = b.block_idx;
        run_block(b, order);
      }
}

}  // namespace detail

// CUDA's names for the kernels: `using namespace simt::builtins;` where they are written.
// threadIdx is the running fiber's: the scheduler sets it before it resumes one (one fiber runs
// at a time on the launching thread), as it sets blockIdx before each block.
namespace builtins {

using simt::dim3;
using simt::uint3;

inline void __syncthreads() {
  detail::Block& b = detail::block();
  detail::wait(b, b.block_barrier, b.live);
}

// __shfl_xor_sync(mask, v, lane_mask) over the lanes `mask` names, which must all be live and
// include the caller: each gets the value of lane (its lane ^ lane_mask) if that lane is named,
// its own otherwise.
template <class T>
T __shfl_xor_sync(unsigned mask, T v, int lane_mask) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "simt: shuffles move values of at most 8 bytes");
  detail::Block& b = detail::block();
  detail::Fiber& f = *b.current;
  detail::Warp& w = b.warps[static_cast<std::size_t>(f.warp)];
  const auto where = [&] { return "warp " + std::to_string(f.warp) + ", lane " + std::to_string(f.lane); };
  if (!(mask & (1u << f.lane))) b.fail(where() + ": a shuffle whose mask leaves out the calling lane");
  if ((mask & w.live) != mask) b.fail(where() + ": a shuffle whose mask names lanes that have returned or do not exist");
  if (w.barrier.arrived > 0 && w.mask != mask) b.fail(where() + ": lanes of one warp shuffle with different masks");
  const int src = f.lane ^ (lane_mask & (warp_size - 1));
  if (!(mask & (1u << src)))
    b.fail(where() + ": a shuffle reads lane " + std::to_string(src) + ", which its mask leaves out (undefined on a device)");
  w.mask = mask;
  std::memcpy(&w.slot[f.lane], &v, sizeof(T));
  w.source[f.lane] = src;
  const int lanes = std::popcount(mask);
  // One wait: the last named lane to arrive hands every named lane its value before any goes on,
  // so a lane that runs ahead into the next shuffle overwrites no value another has yet to read
  // (its own result is written again only when it has arrived at a later shuffle).
  if (w.barrier.arrived + 1 >= lanes)
    for (int l = 0; l < warp_size; ++l)
      if (mask & (1u << l)) w.result[l] = w.slot[w.source[l]];
  detail::wait(b, w.barrier, lanes);
  T out;
  std::memcpy(&out, &w.result[f.lane], sizeof(T));
  return out;
}

}  // namespace builtins

// Launches of each kernel (by the name LOOPSCALE_LAUNCH was given) on this thread since it began:
// a test asks this to know the emulated kernel ran, not a fallback.
inline std::int64_t launches(const std::string& kernel) {
  const auto it = detail::launch_counts().find(kernel);
  return it == detail::launch_counts().end() ? 0 : it->second;
}

// kernel<<<grid, block>>>(args...): the arguments converted to the kernel's parameter types (as a
// launch does), then the grid run to the end before the call returns.
template <class... P>
struct Launch {
  void (*kernel)(P...);
  const char* name;
  dim3 grid, block;
  template <class... A>
  void operator()(A&&... args) const {
    static_assert(sizeof...(A) == sizeof...(P), "simt: a kernel launched with the wrong number of arguments");
    const std::function<void()> body = [&] { kernel(static_cast<P>(args)...); };
    detail::run(name, grid, block, body);
  }
};
template <class... P>
Launch<P...> launch(void (*kernel)(P...), const char* name, dim3 grid, dim3 block) {
  return {kernel, name, grid, block};
}

}  // namespace loopscale::train::simt

// A launch, and CUDA's attribute keywords, for the kernels compiled against this header (the
// built-in variables and functions are in simt::builtins, above).
#define LOOPSCALE_LAUNCH(kernel, grid, block) ::loopscale::train::simt::launch(kernel, #kernel, grid, block)
#define __global__
#define __device__
#define __host__
#define __shared__ static
