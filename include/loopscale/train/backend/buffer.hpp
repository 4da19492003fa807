// An owning array of n values in memory a backend allocates: the one buffer type of the backends
// whose memory is not a std::vector (guard.hpp: protected pages; cuda.hpp: device memory). The
// backend's Memory policy allocates n zero-initialised values and frees them:
//   static void* allocate(std::size_t bytes);          // zeroed; throws on failure
//   static void release(void* p, std::size_t bytes);   // never throws
// Movable, not copyable: copies between buffers and the host go through the backend's upload and
// download.
#pragma once

#include <cstddef>
#include <utility>

namespace loopscale::train {

template <class T, class Memory>
class OwnedBuffer {
 public:
  OwnedBuffer() = default;
  explicit OwnedBuffer(std::size_t n) : n_(n) {
    if (n > 0) data_ = static_cast<T*>(Memory::allocate(n * sizeof(T)));
  }
  OwnedBuffer(OwnedBuffer&& o) noexcept { swap(o); }
  OwnedBuffer& operator=(OwnedBuffer&& o) noexcept {
    OwnedBuffer t(std::move(o));
    swap(t);
    return *this;
  }
  OwnedBuffer(const OwnedBuffer&) = delete;
  OwnedBuffer& operator=(const OwnedBuffer&) = delete;
  ~OwnedBuffer() {
    if (data_) Memory::release(data_, n_ * sizeof(T));
  }

  T* data() { return data_; }
  const T* data() const { return data_; }
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  T* begin() { return data_; }
  T* end() { return data_ + n_; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + n_; }

 private:
  void swap(OwnedBuffer& o) noexcept {
    std::swap(data_, o.data_);
    std::swap(n_, o.n_);
  }
  T* data_ = nullptr;
  std::size_t n_ = 0;
};

}  // namespace loopscale::train
