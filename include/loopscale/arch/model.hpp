// A model type: width, vocabulary, prelude, recurrence, coda. Its sizes may be static (in the type)
// or dynamic (held in the object): with everything static `spec_of<M>()` is a constant expression,
// checked while compiling with the sentences of spec/faults.hpp; with something dynamic the same
// function reads the object and throws spec_error with the same sentences.
//
//   using M = Model<Width<384>, Vocab<32064>, Prelude<2>, Recur<Block<Repeat<4, Layer<>>>, 4>, Coda<2>>;
//   static_assert(count_params(spec_of<M>()).non_embedding == ...);
//   using D = Model<Width<dynamic>, Vocab<256>, Prelude<1>, Recur<Block<Repeat<dynamic, Layer<>>>, dynamic>, Coda<1>>;
//   ModelSpec s = spec_of(D{.width = {64}, .recur = {.block = {{{.n = {2}}}}, .r = {4}}});
//
// A model object converts to its ModelSpec, so every function of account/ takes one directly.
#pragma once

#include "loopscale/account/account.hpp"
#include "loopscale/arch/stacks.hpp"

namespace loopscale {

template <int64 D>
struct Width {
  static_assert(D >= 1 || D == dynamic, LOOPSCALE_MSG_D_MODEL);
  static constexpr bool is_static = D != dynamic;
  [[no_unique_address]] Size<D> d{};
  constexpr int64 get() const { return d.get(); }
};
template <int64 D>
struct kind_of<Width<D>> {
  using type = kinds::width;
};

template <int64 V, int64 Multiple = 64>
struct Vocab {
  static_assert(V >= 1 || V == dynamic, LOOPSCALE_MSG_VOCAB);
  static_assert(Multiple >= 1, LOOPSCALE_MSG_VOCAB_MULTIPLE);
  static constexpr bool is_static = V != dynamic;
  static constexpr int64 multiple = Multiple;
  [[no_unique_address]] Size<V> v{};
  constexpr int64 get() const { return v.get(); }
};
template <int64 V, int64 M>
struct kind_of<Vocab<V, M>> {
  using type = kinds::vocab;
};

#define LOOPSCALE_MSG_MODEL_ORDER(POS, WHAT)                                                          \
  "Model<Width, Vocab, Prelude, Recur, Coda>: the " POS " argument must be a " WHAT \
  "; the order is Width, Vocab, Prelude, Recur, Coda (are two stacks swapped?)"

template <class W, class V, class P, class R, class C = Coda<0>>
struct Model {
  static_assert(is_kind<W, kinds::width>, LOOPSCALE_MSG_MODEL_ORDER("first", "Width<D>"));
  static_assert(is_kind<V, kinds::vocab>, LOOPSCALE_MSG_MODEL_ORDER("second", "Vocab<V>"));
  static_assert(is_kind<P, kinds::prelude>, LOOPSCALE_MSG_MODEL_ORDER("third", "Prelude<N, Layer>"));
  static_assert(is_kind<R, kinds::recur>, LOOPSCALE_MSG_MODEL_ORDER("fourth", "Recur<Block<...>, R, Inject>"));
  static_assert(is_kind<C, kinds::coda>, LOOPSCALE_MSG_MODEL_ORDER("fifth", "Coda<N, Layer>"));
  static constexpr bool is_static = W::is_static && V::is_static && P::is_static && R::is_static && C::is_static;

  [[no_unique_address]] W width{};
  [[no_unique_address]] V vocab{};
  [[no_unique_address]] P prelude{};
  [[no_unique_address]] R recur{};
  [[no_unique_address]] C coda{};

  // The spec as the types and values say, not yet checked (spec_of checks it).
  constexpr ModelSpec unchecked_spec() const {
    return ModelSpec{width.get(), vocab.get(), V::multiple, prelude.spec(), recur.spec(), coda.spec()};
  }
  constexpr operator ModelSpec() const;  // = spec_of(*this)
};
template <class W, class V, class P, class R, class C>
struct kind_of<Model<W, V, P, R, C>> {
  using type = kinds::model;
};

namespace detail {
// What a Model's arguments are, read off the type without instantiating it.
template <class M>
struct model_args;
template <class W, class V, class P, class R, class C>
struct model_args<Model<W, V, P, R, C>> {
  static constexpr bool is_static = W::is_static && V::is_static && P::is_static && R::is_static && C::is_static;
  static constexpr bool in_order = is_kind<W, kinds::width> && is_kind<V, kinds::vocab> && is_kind<P, kinds::prelude> &&
                                   is_kind<R, kinds::recur> && is_kind<C, kinds::coda>;
  static constexpr bool prelude_third = is_kind<P, kinds::prelude>;
  static constexpr bool recur_fourth = is_kind<R, kinds::recur>;
  static constexpr bool coda_fifth = is_kind<C, kinds::coda>;
};

// The first fault of a static model's spec (none while its arguments are out of order: that is
// reported first).
template <class M>
constexpr Fault fault_of() {
  if constexpr (model_args<M>::in_order) return find_fault(M{}.unchecked_spec());
  else return {};
}

// Where a fault is: a stack of layers, or the model as a whole (Fault::stack, "" for the model).
enum class Where { model, prelude, recur, coda };
constexpr Where where_of(const Fault& f) {
  const std::string_view s = f.stack;
  return s == "prelude" ? Where::prelude : s == "recur" ? Where::recur : s == "coda" ? Where::coda : Where::model;
}

// A static model's fault as a type, so that the compiler's message names the layer as the run-time
// message does ("... (prelude layer 1)", fault_text): a static_assert's message must be a literal,
// but the line above it reads "In instantiation of 'struct ...::model_fault<...::attn_heads_divide,
// ...::Where::prelude, 1>'". Layer -1: a fault of the stack or the model, not of one layer.
template <SpecFault What, Where In, int64 Layer>
struct model_fault {
#define LOOPSCALE_X(name, msg) static_assert(What != SpecFault::name, msg);
  LOOPSCALE_SPEC_FAULTS(LOOPSCALE_X)
#undef LOOPSCALE_X
  static constexpr bool none = true;
};
}  // namespace detail

template <class M>
concept model_type = is_kind<M, kinds::model>;
template <class M>
concept static_model = model_type<M> && detail::model_args<M>::is_static;

// The checked spec of a static model type. A fault stops compilation with its sentence, reported at
// the line that asked for the spec (the order of the stacks first, then the spec's own faults).
template <static_model M>
constexpr ModelSpec spec_of() {
  using args = detail::model_args<M>;
  static_assert(args::prelude_third, LOOPSCALE_MSG_MODEL_ORDER("third", "Prelude<N, Layer>"));
  static_assert(args::recur_fourth, LOOPSCALE_MSG_MODEL_ORDER("fourth", "Recur<Block<...>, R, Inject>"));
  static_assert(args::coda_fifth, LOOPSCALE_MSG_MODEL_ORDER("fifth", "Coda<N, Layer>"));
  constexpr Fault f = detail::fault_of<M>();
  static_assert(detail::model_fault<f.what, detail::where_of(f), f.layer>::none);
  if constexpr (args::in_order) return M{}.unchecked_spec();
  else return {};
}

// The checked spec of a model object: static_asserts when the type is static, spec_error otherwise.
template <model_type M>
constexpr ModelSpec spec_of(const M& m) {
  if constexpr (M::is_static) {
    return spec_of<M>();
  } else {
    ModelSpec s = m.unchecked_spec();
    validate(s);
    return s;
  }
}

template <class W, class V, class P, class R, class C>
constexpr Model<W, V, P, R, C>::operator ModelSpec() const {
  return spec_of(*this);
}

template <static_model M>
constexpr Accounting account_of(int64 seq_len, Convention c = Convention::paper) {
  return account(spec_of<M>(), seq_len, c);
}

}  // namespace loopscale
