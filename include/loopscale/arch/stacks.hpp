// Stacks of layers: the unshared prelude and coda, and the recurrence of a shared block.
#pragma once

#include "loopscale/arch/layers.hpp"

namespace loopscale {

template <int64 N, class L = Layer<>>
struct Prelude {
  static_assert(N >= 0, "Prelude<N, Layer>: N (layers) must not be negative");
  static_assert(layer_type<L>, "Prelude<N, Layer>: the second argument must be a Layer<...>");
  static constexpr StackSpec spec{N, L::spec};
};

template <int64 N, class L = Layer<>>
struct Coda {
  static_assert(N >= 0, "Coda<N, Layer>: N (layers) must not be negative");
  static_assert(layer_type<L>, "Coda<N, Layer>: the second argument must be a Layer<...>");
  static constexpr StackSpec spec{N, L::spec};
};

// The k layers whose weights are shared across recurrences.
template <int64 K, class L = Layer<>>
struct Block {
  static_assert(K >= 0, "Block<K, Layer>: K (layers) must not be negative");
  static_assert(layer_type<L>, "Block<K, Layer>: the second argument must be a Layer<...>");
  static constexpr StackSpec spec{K, L::spec};
};

// How the prelude output e re-enters each recurrence with state s (REFERENCE s.1).
struct NoInject { static constexpr InjectSpec spec{Inject::none, 0}; };     // r = 1 only
struct Linear { static constexpr InjectSpec spec{Inject::linear, 0}; };     // W [e ; s], W = [I | 0] at init
struct Additive { static constexpr InjectSpec spec{Inject::additive, 0}; }; // s + e
struct Passthrough { static constexpr InjectSpec spec{Inject::passthrough, 0}; };  // s
template <int64 Lanes>
struct Hyper {  // hyperconnections with Lanes parallel lane states
  static_assert(Lanes >= 1, "Hyper<K>: hyperconnections need at least one lane");
  static constexpr InjectSpec spec{Inject::hyper, Lanes};
};

template <int64 Lanes>
using Hyperconnections = Hyper<Lanes>;

template <class T>
concept inject_type = std::is_same_v<std::remove_cv_t<decltype(T::spec)>, InjectSpec>;
template <class T>
concept stack_type = std::is_same_v<std::remove_cv_t<decltype(T::spec)>, StackSpec>;

// Block run R times. Bptt: recurrences that get gradients (full_bptt, half_bptt or a count <= R).
template <class B, int64 R, class I = Linear, int64 Bptt = full_bptt>
struct Recur {
  static_assert(stack_type<B>, "Recur<Block, R, Inject>: the first argument must be a Block<K, Layer>");
  static_assert(R >= 1, "Recur<Block, R, Inject>: R (recurrences) must be at least 1");
  static_assert(inject_type<I>, "Recur<Block, R, Inject>: Inject must be NoInject, Linear, Additive, Passthrough or Hyper<K>");
  static_assert(R == 1 || I::spec.kind != Inject::none,
                "Recur<Block, R, NoInject>: R > 1 needs an injection (Linear, Additive, Passthrough or Hyper<K>)");
  static_assert(Bptt >= half_bptt && Bptt <= R,
                "Recur<Block, R, Inject, Bptt>: Bptt must be full_bptt, half_bptt or a count between 1 and R");
  static constexpr RecurSpec spec{B::spec, R, I::spec, Bptt};
};

// A model without recurrence (the r = 1 baseline is Recur<Block<k>, 1, NoInject>).
using NoRecur = Recur<Block<0>, 1, NoInject>;

template <class T>
concept recur_type = std::is_same_v<std::remove_cv_t<decltype(T::spec)>, RecurSpec>;

}  // namespace loopscale
