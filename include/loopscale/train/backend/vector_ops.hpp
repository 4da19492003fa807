// Element-wise operations over flat buffers in backend memory, for code outside the model's
// kernels (the optimisers, the trainer's gradient accumulation): free functions rather than
// members because nvcc refuses extended (device) lambdas inside private member functions. Each
// runs on any backend (backend/host.hpp's interface) and does the same float arithmetic in the
// same order on each, so the host's results stay bit for bit what they were.
#pragma once

#include <cstdint>

#include "loopscale/train/backend/portable.hpp"
#include "loopscale/train/backend/spans.hpp"

namespace loopscale::train::detail {

// y = f x over n values (y may be x), in chunks of 4096 values a host task.
template <class B, class T>
void scale_into(const T* x, T* y, T f, std::int64_t n) {
  for_spans<B, 4096>(n, [=] LOOPSCALE_HD(std::int64_t lo, std::int64_t hi) {
    for (std::int64_t i = lo; i < hi; ++i) y[i] = f * x[i];
  });
}

// y = x over n values.
template <class B, class T>
void copy_into(const T* x, T* y, std::int64_t n) {
  B::parallel_for(n, [=] LOOPSCALE_HD(std::int64_t i) { y[i] = x[i]; });
}

// y += x over n values.
template <class B, class T>
void add_into(const T* x, T* y, std::int64_t n) {
  B::parallel_for(n, [=] LOOPSCALE_HD(std::int64_t i) { y[i] += x[i]; });
}

// y += f x over n values.
template <class B, class T>
void add_scaled_into(const T* x, T* y, T f, std::int64_t n) {
  B::parallel_for(n, [=] LOOPSCALE_HD(std::int64_t i) { y[i] += f * x[i]; });
}

// The sum of n values, in double, in the backend's fixed order.
template <class B, class T>
double sum_values(const T* x, std::int64_t n) {
  return B::sum(n, [x] LOOPSCALE_HD(std::int64_t i) { return x[i]; });
}

// The sum of the squares of n values, in double, in the backend's fixed order.
template <class B, class T>
double sum_squares(const T* x, std::int64_t n) {
  return B::sum(n, [x] LOOPSCALE_HD(std::int64_t i) { return static_cast<double>(x[i]) * x[i]; });
}

}  // namespace loopscale::train::detail
