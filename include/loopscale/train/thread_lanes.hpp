// Thread lanes: a micro-batch trained by several host threads, each taking its share of the
// sequences through a model of its own, single-threaded, over one set of parameters.
//
// Why: threads that share each kernel of one model meet at every parallel region of a step (about
// 700 for the acceptance model), and each region ends when its slowest thread does. On a 2-core
// virtual machine that waiting took 7% of the acceptance model's step, and for tiny models it made
// two threads slower than one (docs/benchmarks.md, "Threads over the batch"). Lanes meet once per
// pass. They are the chunks of gradient accumulation computed side by side: lane t takes the next
// lane_sequences(micro, lanes, t) sequences of the micro-batch (account/memory.hpp: equal shares,
// one more in the first micro % lanes lanes). Where the shares are equal the lanes' gradients are
// added to lane 0's in lane order and divided by the lane count, so two lanes give what two
// micro-batches on one thread give, bit for bit (the same single-threaded kernels on the same
// sequences, the same sums, an exact halving; tests/train/test_trainer.cpp). Where they differ
// (a micro-batch the threads do not divide), each lane's mean loss and gradient count in
// proportion to its sequences, so the pass still gives the micro-batch's mean loss and its
// gradient, to rounding, except for a Switch aux loss: like each micro-batch's under --accum, each
// lane's is of its own tokens' routing, not a share of the whole micro-batch's.
//
// Only for the host backend (B::host_memory): the guard backend opens and closes its memory
// around each call, which threads running calls side by side would do under each other, and a
// device runs one stream.
//
// MoE layers route in each lane as in a micro-batch of gradient accumulation: every lane selects
// with lane 0's selection biases (copied to the others at the start of each pass, so the trainer's
// bias update and a checkpoint's biases reach them), and after the pass the lanes' routing
// statistics are added to lane 0's in lane order, so the step's log line and the aux-loss-free bias
// update see the whole micro-batch, as the trainer's sum over micro-batches does. Each lane's
// Switch aux loss and z-loss are of its own tokens, as each micro-batch's are.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "loopscale/account/memory.hpp"
#include "loopscale/train/backend/vector_ops.hpp"
#include "loopscale/train/model.hpp"

namespace loopscale::train {

template <class T, class B>
class ThreadLanes {
 public:
  using Model = Transformer<T, B>;

  // `lanes` lanes over micro-batches of `micro` sequences, lane 0 `first` (a training model of
  // lane_sequences(micro, lanes, 0) sequences; built with Transformer's thread_lane constructor it
  // keeps one attention scratch matrix, as the others do), the others built here over its
  // parameters (read in place: `first` must outlive this and keep its parameters where they are).
  ThreadLanes(Model& first, int64 lanes, int64 micro)
      : first_(first), micro_(micro), loss_(static_cast<std::size_t>(lanes)), failure_(loss_.size()) {
    static_assert(B::host_memory, "ThreadLanes: lanes run whole passes through the backend side by side, which only the host backend allows");
    if (lanes < 1) throw std::invalid_argument("ThreadLanes: at least one lane");
    if (micro < lanes) throw std::invalid_argument("ThreadLanes: fewer sequences than lanes");
    if (first.batch() != lane_sequences(micro, lanes, 0))
      throw std::invalid_argument("ThreadLanes: lane 0's model takes " + std::to_string(first.batch()) + " sequences, not the " +
                                  std::to_string(lane_sequences(micro, lanes, 0)) + " of its share");
    const std::span<const T> params(static_cast<const T*>(first.params_data()), static_cast<std::size_t>(first.num_params()));
    for (int64 t = 1; t < lanes; ++t)
      others_.push_back(std::make_unique<Model>(thread_lane, first.spec(), lane_sequences(micro, lanes, t), first.seq_len(), first.softcap(),
                                                first.moe_routing(), params));
  }
  // Equal shares: `lanes` lanes of first.batch() sequences each.
  ThreadLanes(Model& first, int64 lanes) : ThreadLanes(first, lanes, lanes * first.batch()) {}

  int64 count() const { return static_cast<int64>(loss_.size()); }
  // Sequences of a whole micro-batch.
  int64 batch() const { return micro_; }

  // The mean loss over a micro-batch of batch() sequences; with `backward`, its gradient in lane
  // 0's model (first.grads_data()). One lane runs on the calling thread as the model would.
  double pass(const std::int32_t* tokens, const std::int32_t* targets, bool backward) {
    if (count() == 1) return backward ? first_.forward_backward(tokens, targets) : first_.forward(tokens, targets);
    share_moe_bias();
    // One lane a thread; should OpenMP give the region fewer threads, a thread takes several
    // lanes in turn, with the same result (each lane's model and scratch are its own).
#pragma omp parallel for schedule(static, 1) num_threads(static_cast<int>(count()))
    for (int64 lane = 0; lane < count(); ++lane) {
      const auto t = static_cast<std::size_t>(lane);
      // Nothing may leave an OpenMP region by an exception: each lane keeps what it threw.
      try {
        Model& m = t == 0 ? first_ : *others_[t - 1];
        // Lanes before this one took lane_sequences(micro_, count(), l) sequences each.
        const int64 start = (lane * (micro_ / count()) + std::min(lane, micro_ % count())) * first_.seq_len();
        const std::int32_t* in = tokens + start;
        const std::int32_t* tg = targets + start;
        loss_[t] = backward ? m.forward_backward(in, tg) : m.forward(in, tg);
      } catch (...) {
        failure_[t] = std::current_exception();
      }
    }
    for (std::exception_ptr& f : failure_)
      if (f) std::rethrow_exception(std::exchange(f, nullptr));
    gather_moe_stats();
    const bool equal = micro_ % count() == 0;
    if (backward) {
      const int64 n = first_.num_params();
      T* g = first_.grads_data();
      if (equal) {
        for (const auto& m : others_) detail::add_into<B>(static_cast<const T*>(m->grads_data()), g, n);
        detail::scale_into<B>(static_cast<const T*>(g), g, static_cast<T>(1.0 / static_cast<double>(count())), n);
      } else {
        detail::scale_into<B>(static_cast<const T*>(g), g, static_cast<T>(weight(0)), n);
        for (int64 t = 1; t < count(); ++t)
          detail::add_scaled_into<B>(static_cast<const T*>(others_[static_cast<std::size_t>(t - 1)]->grads_data()), g, static_cast<T>(weight(t)), n);
      }
    }
    double loss = 0;
    for (int64 t = 0; t < count(); ++t) loss += equal ? loss_[static_cast<std::size_t>(t)] : weight(t) * loss_[static_cast<std::size_t>(t)];
    return equal ? loss / static_cast<double>(count()) : loss;
  }

 private:
  // Lane t's share of the micro-batch's mean: its sequences over the micro-batch's.
  double weight(int64 t) const { return static_cast<double>(lane_sequences(micro_, count(), t)) / static_cast<double>(micro_); }

  void share_moe_bias() {
    for (int64 i = 0; i < first_.moe_layers(); ++i) {
      const std::span<const T> b = std::as_const(first_).moe_bias(i);
      for (const auto& m : others_) std::copy(b.begin(), b.end(), m->moe_bias(i).begin());
    }
  }
  // Lane 0's statistics become the sum over the lanes, in lane order (the copies reuse sums_'s
  // and the model's vectors after the first pass).
  void gather_moe_stats() {
    sums_.resize(static_cast<std::size_t>(first_.moe_layers()));
    for (int64 i = 0; i < first_.moe_layers(); ++i) {
      kernels::MoeStats& s = sums_[static_cast<std::size_t>(i)];
      s = first_.moe_stats(i);
      for (const auto& m : others_) s.combine(1, m->moe_stats(i));
      first_.set_moe_stats(i, s);
    }
  }

  Model& first_;
  int64 micro_;                                 // sequences of a micro-batch, over all lanes
  std::vector<std::unique_ptr<Model>> others_;  // lanes 1 .. count() - 1
  std::vector<double> loss_;                    // each lane's mean loss in the last pass
  std::vector<std::exception_ptr> failure_;     // what a lane threw in the last pass
  std::vector<kernels::MoeStats> sums_;         // gather_moe_stats' scratch, one per MoE layer
};

}  // namespace loopscale::train
