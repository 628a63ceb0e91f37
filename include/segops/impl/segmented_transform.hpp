// SPDX-License-Identifier: Apache-2.0
// The per-element building block: out_i = f(i, s(i)) for every element, with s = -1 for a dropped
// (out-of-range, trusted) id so that f writes zeros there.
#pragma once

#include <Kokkos_Core.hpp>
#include <segops/impl/views.hpp>

namespace segops::impl {

template <class F, class Ids>
struct ElementTransform {
  F f;
  Ids ids;
  index_t m;
  KOKKOS_FUNCTION void operator()(index_t i) const {
    const index_t s = static_cast<index_t>(ids(i));
    f(i, s >= 0 && s < m ? s : index_t(-1));
  }
};

template <class Exec, class Seg, class F>
void segmented_transform(const Exec& exec, const Seg& seg, const F& f, const char* label) {
  using Functor = ElementTransform<F, typename Seg::ids_view>;
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<Exec, Kokkos::IndexType<index_t>>(exec, 0, seg.num_elements()),
      Functor{f, seg.ids(), seg.num_segments()});
}

/// The per-segment counterpart: f(s) for every segment (gathers from an arg element, say).
template <class Exec, class Seg, class F>
void segment_transform(const Exec& exec, const Seg& seg, const F& f, const char* label) {
  Kokkos::parallel_for(
      label, Kokkos::RangePolicy<Exec, Kokkos::IndexType<index_t>>(exec, 0, seg.num_segments()), f);
}

/// No scaling of gathered rows.
struct Unscaled {
  static constexpr bool identity = true;
  KOKKOS_FUNCTION int operator()(index_t) const { return 1; }
};
/// Gathered rows divided by the segment's count (mean's backward).
template <class Counts>
struct DividedByCount {
  static constexpr bool identity = false;
  Counts counts;
  KOKKOS_FUNCTION index_t operator()(index_t s) const { return counts(s); }
};

/// o(i, d) = v(s(i), d) [/ scale(s(i))], computed in o's value type. A source with column stride 0
/// broadcasts one per-segment scalar to every component.
template <class T, class S, class Scale = Unscaled>
struct GatherRows {
  Mat<T> o;
  Mat<const S> v;
  Scale scale;
  KOKKOS_FUNCTION void operator()(index_t i, index_t s) const {
    if (s < 0) {
      for (index_t d = 0; d < o.d; ++d) o(i, d) = T(0);
      return;
    }
    if constexpr (Scale::identity) {
      if (o.d == 1) {
        o(i, 0) = static_cast<T>(v(s, 0));
        return;
      }
      for (index_t d = 0; d < o.d; ++d) o(i, d) = static_cast<T>(v(s, d));
    } else {
      const T c = static_cast<T>(scale(s));
      for (index_t d = 0; d < o.d; ++d) o(i, d) = static_cast<T>(v(s, d)) / c;
    }
  }
};

}  // namespace segops::impl
