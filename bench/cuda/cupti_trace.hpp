// A timeline of what the device ran (kernels, copies, memsets) and of the host's CUDA calls between
// start() and stop(), through CUPTI's activity API: the record Nsight Systems makes, without it.
// The lent GPU machines' image has Nsight Compute but no Nsight Systems, and Nsight Compute cannot
// read its counters on every runtime they use; CUPTI's activity records (what PyTorch's profiler
// reads) need no counters, and cost little enough that the traced steps run at about their speed.
//
// CUPTI is loaded when a trace is asked for (dlopen of libcupti.so.13, found on the library path:
// bench/gpu_check.sh --collect copies the toolkit's beside the programs), so a program that includes
// this header runs on machines without it as long as it traces nothing. One trace at a time.
//
// Use: construct and start() before the program loads its kernels (CUPTI prepares its kernel
// timing as modules load; enabled later, that work lands in the first traced launches), run a
// warm-up, synchronise, restart() to drop what was recorded so far, run the traced work,
// synchronise, stop(). Records CUPTI could not complete or time, and those it dropped, are counted
// (incomplete(), untimed(), dropped()) rather than passed off as kernels.
#pragma once

#include <cupti.h>
#include <cxxabi.h>
#include <dlfcn.h>

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace loopscale::bench {

class CuptiTrace {
 public:
  struct Event {
    std::string kind;  // kernel, memcpy, memset, runtime (a CUDA runtime call), driver (a driver call)
    std::string name;  // the kernel's demangled name, the copy's direction, the call's name
    std::uint64_t start = 0, end = 0;  // ns, CUPTI's clock
    std::uint64_t bytes = 0;           // copies and memsets
  };

  CuptiTrace() {
    if (active_) throw std::runtime_error("cupti trace: one trace at a time");
    for (const char* name : {"libcupti.so.13", "libcupti.so"})
      if ((lib_ = dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib_) throw std::runtime_error("cupti trace: cannot load libcupti.so.13 (put the CUDA toolkit's CUPTI on LD_LIBRARY_PATH)");
    load(register_, "cuptiActivityRegisterCallbacks");
    load(enable_, "cuptiActivityEnable");
    load(disable_, "cuptiActivityDisable");
    load(flush_, "cuptiActivityFlushAll");
    load(next_, "cuptiActivityGetNextRecord");
    load(result_string_, "cuptiGetResultString");
    load(callback_name_, "cuptiGetCallbackName");
    load(dropped_records_, "cuptiActivityGetNumDroppedRecords");
    check(register_(&buffer_requested, &buffer_completed), "cuptiActivityRegisterCallbacks");
    active_ = this;  // only once registered: a constructor that throws leaves no trace behind
  }
  CuptiTrace(const CuptiTrace&) = delete;
  CuptiTrace& operator=(const CuptiTrace&) = delete;
  ~CuptiTrace() {
    if (enabled_) stop_quietly();
    active_ = nullptr;
    // libcupti stays loaded: CUPTI keeps threads and hooks in the driver for the process's life.
  }

  void start() {
    for (CUpti_ActivityKind k : kinds()) check(enable_(k), "cuptiActivityEnable");
    enabled_ = true;
  }
  // Drops everything recorded so far (a warm-up's) and goes on recording; the caller synchronises
  // the device first.
  void restart() {
    check(flush_(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
    std::lock_guard<std::mutex> lock(mutex_);
    events_.clear();
    incomplete_ = untimed_ = dropped_ = 0;
  }
  // Stops recording and waits for every record (the caller synchronises the device first).
  void stop() {
    for (CUpti_ActivityKind k : kinds()) check(disable_(k), "cuptiActivityDisable");
    enabled_ = false;
    check(flush_(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
  }
  std::size_t kernels() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return static_cast<std::size_t>(std::count_if(events_.begin(), events_.end(), [](const Event& e) { return e.kind == "kernel"; }));
  }
  // Records CUPTI handed back unfinished, records without timestamps, records it dropped.
  std::size_t incomplete() const { return counted(incomplete_); }
  std::size_t untimed() const { return counted(untimed_); }
  std::size_t dropped() const { return counted(dropped_); }

  std::vector<Event> events() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return events_;
  }

  // kind,name,start_ns,end_ns,bytes (names quoted: demangled names hold commas), after one comment
  // line that says what was traced; bench/cuda/kernel_times.py reads it.
  bool write_csv(const std::string& path, const std::string& comment) const {
    FILE* f = std::fopen(path.c_str(), "w");
    if (!f) return false;
    std::fprintf(f, "# %s, incomplete %zu, untimed %zu, dropped %zu\nkind,name,start_ns,end_ns,bytes\n", comment.c_str(), incomplete(), untimed(),
                 dropped());
    for (const Event& e : events()) {
      std::string quoted = "\"";
      for (char c : e.name) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
      quoted += '"';
      std::fprintf(f, "%s,%s,%llu,%llu,%llu\n", e.kind.c_str(), quoted.c_str(), static_cast<unsigned long long>(e.start),
                   static_cast<unsigned long long>(e.end), static_cast<unsigned long long>(e.bytes));
    }
    return std::fclose(f) == 0;
  }

 private:
  static constexpr std::size_t buffer_bytes = 8u << 20;

  static std::vector<CUpti_ActivityKind> kinds() {
    return {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_RUNTIME,
            CUPTI_ACTIVITY_KIND_DRIVER};
  }

  std::size_t counted(const std::size_t& n) const {
    std::lock_guard<std::mutex> lock(mutex_);
    return n;
  }
  template <class F>
  void load(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib_, name));
    if (!f) throw std::runtime_error(std::string("cupti trace: libcupti lacks ") + name);
  }
  void check(CUptiResult r, const char* call) const {
    if (r == CUPTI_SUCCESS) return;
    const char* what = nullptr;
    if (result_string_) result_string_(r, &what);
    throw std::runtime_error(std::string("cupti trace: ") + call + " failed: " + (what ? what : std::to_string(static_cast<int>(r))));
  }
  void stop_quietly() noexcept {
    for (CUpti_ActivityKind k : kinds()) disable_(k);
    enabled_ = false;
    flush_(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  }

  static void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, buffer_bytes));  // CUPTI wants 8-byte alignment
    *size = *buffer ? buffer_bytes : 0;
    *max_records = 0;  // as many as fit
  }
  static void CUPTIAPI buffer_completed(CUcontext context, std::uint32_t stream, std::uint8_t* buffer, std::size_t, std::size_t valid) {
    if (CuptiTrace* t = active_.load()) t->read(context, stream, buffer, valid);
    std::free(buffer);
  }

  void read(CUcontext context, std::uint32_t stream, std::uint8_t* buffer, std::size_t valid) {
    std::lock_guard<std::mutex> lock(mutex_);
    CUpti_Activity* r = nullptr;
    CUptiResult status;
    while ((status = next_(buffer, valid, &r)) == CUPTI_SUCCESS) {
      const auto timed = [&](std::uint64_t start, std::uint64_t end) {  // no timestamps: no device memory for them
        if (start != 0 && end >= start) return true;
        ++untimed_;
        return false;
      };
      switch (r->kind) {
        case CUPTI_ACTIVITY_KIND_KERNEL:
        case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
          const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(r);
          if (timed(k->start, k->end)) events_.push_back({"kernel", demangle(k->name), k->start, k->end, 0});
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMCPY: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(r);
          if (timed(m->start, m->end)) events_.push_back({"memcpy", copy_kind(m->copyKind), m->start, m->end, m->bytes});
          break;
        }
        case CUPTI_ACTIVITY_KIND_MEMSET: {
          const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(r);
          if (timed(m->start, m->end)) events_.push_back({"memset", "memset", m->start, m->end, m->bytes});
          break;
        }
        case CUPTI_ACTIVITY_KIND_RUNTIME:
        case CUPTI_ACTIVITY_KIND_DRIVER: {
          const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(r);
          const bool runtime = r->kind == CUPTI_ACTIVITY_KIND_RUNTIME;
          if (timed(a->start, a->end))
            events_.push_back({runtime ? "runtime" : "driver",
                               api_name(runtime ? CUPTI_CB_DOMAIN_RUNTIME_API : CUPTI_CB_DOMAIN_DRIVER_API, a->cbid), a->start, a->end, 0});
          break;
        }
        default:
          break;
      }
    }
    // The end of the buffer is CUPTI_ERROR_MAX_LIMIT_REACHED; anything else is a record a forced
    // flush handed back unfinished, and the rest of the buffer with it.
    if (status != CUPTI_ERROR_MAX_LIMIT_REACHED) ++incomplete_;
    std::size_t lost = 0;
    if (dropped_records_(context, stream, &lost) == CUPTI_SUCCESS) dropped_ += lost;
  }

  std::string api_name(CUpti_CallbackDomain domain, CUpti_CallbackId id) {
    const auto key = (static_cast<std::uint64_t>(domain) << 32) | id;
    auto it = api_names_.find(key);
    if (it != api_names_.end()) return it->second;
    const char* name = nullptr;
    std::string s = callback_name_(domain, id, &name) == CUPTI_SUCCESS && name ? name : "cbid " + std::to_string(id);
    api_names_.emplace(key, s);
    return s;
  }
  static std::string demangle(const char* name) {
    if (!name) return "?";
    int status = 0;
    std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(name, nullptr, nullptr, &status), std::free);
    return status == 0 && d ? std::string(d.get()) : std::string(name);
  }
  static std::string copy_kind(std::uint8_t k) {
    switch (k) {
      case CUPTI_ACTIVITY_MEMCPY_KIND_HTOD: return "memcpy HtoD";
      case CUPTI_ACTIVITY_MEMCPY_KIND_DTOH: return "memcpy DtoH";
      case CUPTI_ACTIVITY_MEMCPY_KIND_DTOD: return "memcpy DtoD";
      case CUPTI_ACTIVITY_MEMCPY_KIND_HTOH: return "memcpy HtoH";
      default: return "memcpy other";
    }
  }

  void* lib_ = nullptr;
  bool enabled_ = false;
  CUptiResult (*register_)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc) = nullptr;
  CUptiResult (*enable_)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*disable_)(CUpti_ActivityKind) = nullptr;
  CUptiResult (*flush_)(std::uint32_t) = nullptr;
  CUptiResult (*next_)(std::uint8_t*, std::size_t, CUpti_Activity**) = nullptr;
  CUptiResult (*result_string_)(CUptiResult, const char**) = nullptr;
  CUptiResult (*callback_name_)(CUpti_CallbackDomain, std::uint32_t, const char**) = nullptr;
  CUptiResult (*dropped_records_)(CUcontext, std::uint32_t, std::size_t*) = nullptr;
  mutable std::mutex mutex_;
  std::vector<Event> events_;
  std::size_t incomplete_ = 0, untimed_ = 0, dropped_ = 0;
  std::map<std::uint64_t, std::string> api_names_;
  static inline std::atomic<CuptiTrace*> active_{nullptr};  // read on CUPTI's own thread
};

}  // namespace loopscale::bench
