// A model type: width, vocabulary, prelude, recurrence, coda. With a static width and vocabulary the
// type carries its spec as a constexpr value (checked while compiling); with loopscale::dynamic in
// either, `with(d, vocab)` builds the same spec at run time through the same function.
#pragma once

#include "loopscale/account/account.hpp"
#include "loopscale/arch/stacks.hpp"

namespace loopscale {

template <int64 D>
struct Width {
  static_assert(D >= 1 || D == dynamic, "Width<D>: D must be positive (or loopscale::dynamic)");
  static constexpr int64 value = D;
};

template <int64 V, int64 Multiple = 64>
struct Vocab {
  static_assert(V >= 1 || V == dynamic, "Vocab<V>: V must be positive (or loopscale::dynamic)");
  static_assert(Multiple >= 1, "Vocab<V, Multiple>: Multiple (padding) must be positive");
  static constexpr int64 value = V;
  static constexpr int64 multiple = Multiple;
};

namespace detail {
template <class W, class V, class P, class R, class C>
struct ModelShape {
  static_assert(stack_type<P>, "Model<Width, Vocab, Prelude, Recur, Coda>: the third argument must be a Prelude<N, Layer>");
  static_assert(recur_type<R>, "Model<Width, Vocab, Prelude, Recur, Coda>: the fourth argument must be a Recur<Block, R, Inject>");
  static_assert(stack_type<C>, "Model<Width, Vocab, Prelude, Recur, Coda>: the fifth argument must be a Coda<N, Layer>");
  static constexpr ModelSpec with(int64 d, int64 vocab = V::value) {
    ModelSpec m{d, vocab, V::multiple, P::spec, R::spec, C::spec};
    validate(m);
    return m;
  }
};
// Evaluating validate() here makes an invalid static model a compile error at the throw that names
// the problem (e.g. "attention: d_model must be divisible by heads").
template <class Shape, int64 D, int64 V, bool Static = (D != dynamic && V != dynamic)>
struct StaticSpec {};
template <class Shape, int64 D, int64 V>
struct StaticSpec<Shape, D, V, true> {
  static constexpr ModelSpec spec = Shape::with(D, V);
};
}  // namespace detail

template <class W, class V, class P, class R, class C = Coda<0>>
struct Model : detail::ModelShape<W, V, P, R, C>, detail::StaticSpec<detail::ModelShape<W, V, P, R, C>, W::value, V::value> {
  static constexpr bool is_static = W::value != dynamic && V::value != dynamic;
};

template <class M>
concept static_model = M::is_static;

template <static_model M>
inline constexpr ModelSpec spec_of = M::spec;

template <static_model M>
constexpr Accounting account_of(int64 seq_len, Convention c = Convention::paper) {
  return account(M::spec, seq_len, c);
}

}  // namespace loopscale
