// SPDX-License-Identifier: Apache-2.0
// The arg-max/arg-min reducer behind max, min and max_norm, run by segmented_reduce's schedules.
// Ties go to the lowest element index (positions are visited in element order, tile carries are
// joined left to right with a strict comparison, and the atomic schedule takes the smallest index
// whose value equals the result). NaN wins over every number, so it propagates.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <limits>
#include <segops/impl/segmented_reduce.hpp>
#include <segops/impl/views.hpp>
#include <type_traits>

namespace segops::impl {

template <class V, bool IsMax>
KOKKOS_FUNCTION bool better(V v, V cur) {
  if (Kokkos::isnan(v)) return !Kokkos::isnan(cur);
  return IsMax ? v > cur : v < cur;
}

template <class V>
KOKKOS_FUNCTION bool same_bits(V a, V b) {
  using U = std::conditional_t<sizeof(V) == 4, std::uint32_t, std::uint64_t>;
  return Kokkos::bit_cast<U>(a) == Kokkos::bit_cast<U>(b);
}

/// *p = v if v is better than *p, atomically (compare-and-swap on the bits, so NaN cannot loop).
template <class V, bool IsMax>
KOKKOS_FUNCTION void atomic_improve(V* p, V v) {
  using U = std::conditional_t<sizeof(V) == 4, std::uint32_t, std::uint64_t>;
  U* q = reinterpret_cast<U*>(p);
  U old = Kokkos::atomic_load(q);
  while (better<V, IsMax>(v, Kokkos::bit_cast<V>(old))) {
    const U prev = Kokkos::atomic_compare_exchange(q, old, Kokkos::bit_cast<U>(v));
    if (prev == old) return;
    old = prev;
  }
}

/// value(e, k) = x(e, k) in V: per-component max/min.
template <class V, class T>
struct ComponentValue {
  Mat<const T> x;
  KOKKOS_FUNCTION V operator()(index_t e, index_t k) const { return static_cast<V>(x(e, k)); }
};

/// value(e, 0) = ||x_e||_2 in V (|x_e| for width 1).
template <class V, class T>
struct RowNorm {
  Mat<const T> x;
  KOKKOS_FUNCTION V operator()(index_t e, index_t) const {
    if (x.d == 1) return Kokkos::abs(static_cast<V>(x(e, 0)));
    V r = 0;
    for (index_t d = 0; d < x.d; ++d) r += static_cast<V>(x(e, d)) * static_cast<V>(x(e, d));
    return Kokkos::sqrt(r);
  }
};

/// Value and (optional, arg.n == 0 when absent) index of the best element per accumulator.
/// Empty segments: value -inf (max) / +inf (min), or 0 with ZeroIfEmpty; index -1.
template <class V, class I, class Value, class Counts, bool IsMax, bool ZeroIfEmpty>
struct MaxLocReducer {
  static constexpr bool has_finalize = true;
  static constexpr bool has_arg_pass = true;
  static constexpr bool can_walk = false;
  static constexpr bool can_privatize = false;
  using acc_type = V;
  static constexpr int kBlock = 8;
  static constexpr I kUnset = std::numeric_limits<I>::max();  // atomic schedule's "no index yet"
  Value value;
  Mat<V> out;
  Mat<I> arg;
  Counts counts;
  V* carry;
  index_t* carry_idx;
  index_t w;

  KOKKOS_FUNCTION index_t width() const { return w; }
  KOKKOS_FUNCTION bool wants_arg() const { return arg.n > 0; }
  static KOKKOS_FUNCTION V identity() {
    return IsMax ? -Kokkos::Experimental::infinity<V>::value
                 : Kokkos::Experimental::infinity<V>::value;
  }
  KOKKOS_FUNCTION void store(OutSlot d, index_t k, V v, index_t i) const {
    out(d.s, k) = v;
    if (arg.n > 0) arg(d.s, k) = static_cast<I>(i);
  }
  KOKKOS_FUNCTION void store(CarrySlot d, index_t k, V v, index_t i) const {
    carry[d.t * w + k] = v;
    carry_idx[d.t * w + k] = i;
  }
  template <class Slot, class Elem>
  KOKKOS_FUNCTION void reduce(Slot d, const Elem& elem, index_t b, index_t e) const {
    for (index_t k0 = 0; k0 < w; k0 += kBlock) {
      const int kn = static_cast<int>(Kokkos::min<index_t>(kBlock, w - k0));
      V best[kBlock];
      index_t at[kBlock];
      for (int j = 0; j < kn; ++j) {
        best[j] = identity();
        at[j] = -1;
      }
      for (index_t p = b; p < e; ++p) {
        const index_t el = elem(p);
        for (int j = 0; j < kn; ++j) {
          const V v = value(el, k0 + j);
          if (at[j] < 0 || better<V, IsMax>(v, best[j])) {
            best[j] = v;
            at[j] = el;
          }
        }
      }
      for (int j = 0; j < kn; ++j) store(d, k0 + j, best[j], at[j]);
    }
  }
  KOKKOS_FUNCTION void join(OutSlot d, CarrySlot c) const {
    for (index_t k = 0; k < w; ++k) {
      const V v = carry[c.t * w + k];
      if (better<V, IsMax>(v, out(d.s, k))) store(d, k, v, carry_idx[c.t * w + k]);
    }
  }
  KOKKOS_FUNCTION void finalize(index_t s) const {
    for (index_t k = 0; k < w; ++k) {
      if (ZeroIfEmpty && counts(s) == 0) out(s, k) = V(0);
      if (arg.n > 0 && arg(s, k) == kUnset) arg(s, k) = I(-1);
    }
  }
  KOKKOS_FUNCTION void init(OutSlot d) const {
    for (index_t k = 0; k < w; ++k) {
      out(d.s, k) = identity();
      if (arg.n > 0) arg(d.s, k) = kUnset;
    }
  }
  template <bool Atomic>
  KOKKOS_FUNCTION void accumulate(index_t s, index_t i) const {
    for (index_t k = 0; k < w; ++k) {
      const V v = value(i, k);
      if constexpr (Atomic)
        atomic_improve<V, IsMax>(&out(s, k), v);
      else if (better<V, IsMax>(v, out(s, k)))
        out(s, k) = v;
    }
  }
  template <bool Atomic>
  KOKKOS_FUNCTION void arg_pass(index_t s, index_t i) const {
    for (index_t k = 0; k < w; ++k) {
      if (!same_bits(value(i, k), out(s, k))) continue;
      if constexpr (Atomic)
        Kokkos::atomic_min(&arg(s, k), static_cast<I>(i));
      else if (static_cast<I>(i) < arg(s, k))
        arg(s, k) = static_cast<I>(i);
    }
  }
};

}  // namespace segops::impl
