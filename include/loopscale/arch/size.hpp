// Sizes that are compile-time constants or run-time integers behind one interface, in the manner of
// CuTe's Int<N> and int: `Size<8>` is an empty type whose value is 8; `Size<dynamic>` holds its
// value. A model type mixes both (Width<dynamic> with Attention<4>, say); the same functions read
// either with `.get()`, and what is static folds while compiling.
//
// Every piece of the algebra also names its kind (a layer, a block, a prelude, ...), so a misplaced
// argument is caught by comparing kinds (hana::type_c) and reported with the fix.
#pragma once

#include <string>
#include <type_traits>

#include <boost/hana/equal.hpp>
#include <boost/hana/type.hpp>

#include "loopscale/spec/spec.hpp"

namespace loopscale {

template <int64 V>
struct Size {
  static constexpr bool is_static = true;
  static constexpr int64 value = V;
  constexpr int64 get() const { return V; }
};

template <>
struct Size<dynamic> {
  int64 value = dynamic;  // `dynamic` until given: the spec then names the missing size
  static constexpr bool is_static = false;
  constexpr int64 get() const { return value; }
};

// A layer count, which must have been given (an unset count would silently make an empty stack).
template <int64 V>
constexpr int64 count_of(const Size<V>& n, const char* what) {
  if (n.get() == dynamic) throw spec_error(concat(LOOPSCALE_MSG_SIZE_NOT_GIVEN, " (", what, ")"));
  return n.get();
}

// ---- kinds ---------------------------------------------------------------------------------------
namespace kinds {
struct none {};
struct attention {};
struct ffn {};
struct layer {};
struct layers {};  // expands to several layers: Repeat, Cycle, Layers
struct prelude {};
struct block {};
struct coda {};
struct recur {};
struct inject {};
struct width {};
struct vocab {};
struct model {};
}  // namespace kinds

// The kind of each template is declared by a specialization next to it (not by a member type), so
// asking for a kind never instantiates the type: a mistake inside one (MoE<4, 8>) is then reported
// where the user wrote it, not deep inside a check of another type.
template <class T>
struct kind_of {
  using type = kinds::none;
};

// The kind of T (kinds::none for anything that is not part of the algebra).
template <class T>
using kind_of_t = typename kind_of<T>::type;

template <class T, class K>
inline constexpr bool is_kind = decltype(boost::hana::type_c<kind_of_t<T>> == boost::hana::type_c<K>)::value;

// A piece of a stack: one layer, or an item that expands to layers.
template <class T>
inline constexpr bool layer_item = is_kind<T, kinds::layer> || is_kind<T, kinds::layers>;

}  // namespace loopscale
