// SPDX-License-Identifier: Apache-2.0
// The arg-max/arg-min reducer behind max, min and max_norm, run by segmented_reduce's schedules.
// Ties go to the lowest element index (positions are visited in element order, tile carries are
// joined left to right with a strict comparison, and the atomic schedule takes the smallest index
// whose value equals the result). NaN wins over every number, so it propagates.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <limits>
#include <segops/impl/host_vectors.hpp>
#include <segops/impl/segmented_reduce.hpp>
#include <segops/impl/views.hpp>
#include <type_traits>

namespace segops::impl {

template <class V, bool IsMax>
KOKKOS_FUNCTION bool better(V v, V cur) {
  // branch-free (v != v: v is NaN): whether an element improves on the best so far depends on its
  // value, and a branch on random values mispredicts about every other element
  return (IsMax ? v > cur : v < cur) | ((v != v) & (cur == cur));
}

/// c ? a : b for a value or an index, as bit masks (no branch whatever the compiler decides).
template <class V>
KOKKOS_FORCEINLINE_FUNCTION V select(bool c, V a, V b) {
  using U = std::conditional_t<sizeof(V) == 4, std::uint32_t, std::uint64_t>;
  static_assert(sizeof(V) == sizeof(U));
  const U m = U(0) - U(c);
  return Kokkos::bit_cast<V>((Kokkos::bit_cast<U>(a) & m) | (Kokkos::bit_cast<U>(b) & ~m));
}

template <class V>
KOKKOS_FORCEINLINE_FUNCTION bool same_bits(V a, V b) {
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
  static constexpr bool components = true;  // value(e, k) is x's entry: packed rows read directly
  Mat<const T> x;
  KOKKOS_FUNCTION V operator()(index_t e, index_t k) const { return static_cast<V>(x(e, k)); }
  KOKKOS_FUNCTION void prefetch_row(index_t e) const { prefetch_rows(e, x); }
};

/// value(e, 0) = ||x_e||_2 in V (|x_e| for width 1): the square root of the squares, each rounded
/// to V, added in component order. W: the width of x's packed rows as a constant (3), or 0 for any
/// width and layout (with_row_norm chooses). The index passes of max_norm with argmax compare a
/// norm formed again with the values pass's result, so every path must form a row's norm with the
/// same roundings: on host builds the squares pass through `rounded`, so that no compiler
/// contracts them into multiply-adds (-march=native, AArch64), which it did in the scalar loop
/// but not in values4: one unsorted argmax in ten was lost at N = 1e6.
template <class V, class T, int W = 0>
struct RowNorm {
  Mat<const T> x;
  KOKKOS_FUNCTION void prefetch_row(index_t e) const { prefetch_rows(e, x); }
  static KOKKOS_FORCEINLINE_FUNCTION V square(V v) {
#ifdef SEGOPS_HOST_VECTORS
    return rounded(v * v);
#else
    return v * v;  // device code: every path is this one
#endif
  }
  KOKKOS_FUNCTION V operator()(index_t e, index_t) const {
    if constexpr (W > 0) {
      const T* p = x.ptr + e * W;
      V r = 0;
      for (int d = 0; d < W; ++d) r += square(static_cast<V>(p[d]));
      return Kokkos::sqrt(r);
    } else {
      if (x.d == 1) return Kokkos::abs(static_cast<V>(x(e, 0)));
      V r = 0;
      for (index_t d = 0; d < x.d; ++d) r += square(static_cast<V>(x(e, d)));
      return Kokkos::sqrt(r);
    }
  }
#ifdef SEGOPS_HOST_VECTORS
  /// The values of elements e .. e + 3 (rows of 3 floats, packed): component k of each gathered
  /// into one vector (columns3x4), squared, added as operator() adds them, four square roots at
  /// once; the same bits (a NaN's payload aside: which NaN a row holding several gives
  /// depends on the order of each addition's operands: MaxLocReducer::attains).
  HostVec<float>::type values4(index_t e) const
      requires(W == 3 && std::is_same_v<V, float> && std::is_same_v<T, float>) {
    using F = HostVec<float>::type;
    F c[3];
    columns3x4(x.ptr + e * 3, c);
    return vec_sqrt(((F{} + rounded(c[0] * c[0])) + rounded(c[1] * c[1])) + rounded(c[2] * c[2]));
  }
#endif
};
/// f(RowNorm<V, T, W>{x}): on host backends, for packed 3-vectors (the MD case) W = 3, so the
/// reduction's loops (the walk over sorted positions above all) test no width per element (rows of
/// 3 floats, L = 3, N = 1e6, 2 threads: sorted 1.19 -> 0.81 ms, unsorted 1.34 -> 0.96 ms); else
/// W = 0. (Single floats test one width first; a third instantiation is not worth its compile
/// time.)
template <class V, class Exec, class T, class F>
void with_row_norm(Mat<const T> x, const F& f) {
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible)
    if (packed_width_of(x) == 3) return f(RowNorm<V, T, 3>{x});
  f(RowNorm<V, T>{x});
}

/// Value and (optional: Arg, and arg.n > 0) index of the best element per accumulator. Empty
/// segments: value -inf (max) / +inf (min), or 0 with ZeroIfEmpty; index -1. Without Arg the
/// index is not tracked at all (the walk over sorted positions then carries half the state).
template <class V, class I, class Value, class Counts, bool IsMax, bool ZeroIfEmpty, bool Arg>
struct MaxLocReducer {
  // finalize writes only zeros for empty segments (ZeroIfEmpty) and -1 for unset indices (Arg)
  static constexpr bool has_finalize = ZeroIfEmpty || Arg;
  static constexpr bool has_arg_pass = true;
  static constexpr bool can_walk = true;
  static constexpr int max_walk_width = 4;
  // PrivateReduce (unsorted ids; default mode, and the deterministic option since the merge below
  // is exact) without arg: a copy of the values per thread (tracking indices would take as many
  // again)
  static constexpr bool can_privatize = !Arg;
  // ... whose merge keeps the earlier copy's value on ties and its first NaN: the first best
  // element in element order for any number of copies (exact_merge_v)
  static constexpr bool exact_merge = true;
  using acc_type = V;
  using index_type = I;
  using value_type = Value;
  /// Whether an element's value v attains its segment's result o, for the passes that find the
  /// indices once the values are reduced. The first element attaining o is the one the values
  /// pass kept: an earlier one with o's value would have been kept (ties keep the first), and NaN
  /// wins every comparison, so a NaN o's first element attaining it is the first that is NaN.
  /// Per-component values are x's entries, which keep their bits through every path: the bits
  /// decide. A norm also attains a NaN o where it is NaN, whatever its payload: a row holding
  /// several NaNs gives the one the order of its additions' operands picks, which two passes may
  /// not share (values4 and the scalar operator(); the NaN test in the walk of single floats took
  /// 2.2x the time, so x's entries go without it).
  static KOKKOS_FORCEINLINE_FUNCTION bool attains(V v, V o) {
    if constexpr (requires { Value::components; })
      return same_bits(v, o);
    else
      return same_bits(v, o) | ((v != v) & (o != o));
  }
  static constexpr int kBlock = 8;
  static constexpr I kUnset = std::numeric_limits<I>::max();  // atomic schedule's "no index yet"
  /// An index as returned: -1 where no element was found (an empty segment).
  static KOKKOS_FORCEINLINE_FUNCTION I found_or_none(I a) { return select(a == kUnset, I(-1), a); }
  /// a if set, else b (no branch: which part of the elements found a segment's first is random).
  static KOKKOS_FORCEINLINE_FUNCTION I set_or(I a, I b) { return select(a == kUnset, b, a); }
  Value value;
  Mat<V> out;
  Mat<I> arg;
  Counts counts;
  V* carry;
  index_t* carry_idx;
  index_t w;

  KOKKOS_FUNCTION index_t width() const { return w; }
  KOKKOS_FUNCTION bool wants_arg() const { return Arg && arg.n > 0; }
  /// Element e's row, fetched ahead (TileReduce: positions through the permutation; rows of 3
  /// floats, unsorted, 2 threads: max N = 2^25 482 -> 317 ms, N = 1e6 4.3-5.8 -> 3.2-3.3 ms;
  /// max_norm N = 2^25 591 -> 376 ms).
  KOKKOS_FUNCTION void prefetch_row(index_t e) const { value.prefetch_row(e); }
  static KOKKOS_FUNCTION V identity() {
    return IsMax ? -Kokkos::Experimental::infinity<V>::value
                 : Kokkos::Experimental::infinity<V>::value;
  }
  KOKKOS_FUNCTION void store(OutSlot d, index_t k, V v, index_t i) const {
    out(d.s, k) = v;
    if (wants_arg()) arg(d.s, k) = static_cast<I>(i);
  }
  KOKKOS_FUNCTION void store(CarrySlot d, index_t k, V v, index_t i) const {
    carry[d.t * w + k] = v;
    carry_idx[d.t * w + k] = i;
  }
  /// Reduces positions [b, e) into slot d. Rows of 1 to 4 keep best values and indices in
  /// registers; every element updates them with selects, not branches.
  template <class Slot, class Elem>
  KOKKOS_FUNCTION void reduce(Slot d, const Elem& elem, index_t b, index_t e) const {
    switch (w) {
      case 1:
        return reduce_fixed<1>(d, elem, b, e);
      case 2:
        return reduce_fixed<2>(d, elem, b, e);
      case 3:
        return reduce_fixed<3>(d, elem, b, e);
      case 4:
        return reduce_fixed<4>(d, elem, b, e);
      default:
        break;
    }
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
          const bool take = at[j] < 0 || better<V, IsMax>(v, best[j]);
          best[j] = select(take, v, best[j]);
          at[j] = select(take, el, at[j]);
        }
      }
      for (int j = 0; j < kn; ++j) store(d, k0 + j, best[j], at[j]);
    }
  }
  template <int W, class Slot, class Elem>
  KOKKOS_FUNCTION void reduce_fixed(Slot d, const Elem& elem, index_t b, index_t e) const {
#ifdef SEGOPS_HOST_VECTORS
    if constexpr (!Arg)
      if (reduce_numbers<W>(d, elem, b, e)) return;
#endif
    V best[W];
    index_t at[W];
    if (b == e) {
      for (int j = 0; j < W; ++j) store(d, j, identity(), -1);
      return;
    }
    const index_t first = elem(b);  // the first element is the best so far, whatever its value
    for (int j = 0; j < W; ++j) {
      best[j] = value(first, j);
      at[j] = first;
    }
    for (index_t p = b + 1; p < e; ++p) {
      const index_t el = elem(p);
      for (int j = 0; j < W; ++j) {
        const V v = value(el, j);
        const bool take = better<V, IsMax>(v, best[j]);
        best[j] = select(take, v, best[j]);
        at[j] = select(take, el, at[j]);
      }
    }
    for (int j = 0; j < W; ++j) store(d, j, best[j], at[j]);
  }
#ifdef SEGOPS_HOST_VECTORS
  /// reduce_fixed without an arg (host builds): the bests kept as plain numbers, one max or min
  /// instruction per value in position order (ties keep the first, as improve does), with
  /// whether any value is NaN noted on the side. Where one is, nothing is stored, and false sends
  /// the range to reduce_fixed's loop (NaN wins there). Packed rows that fit one vector (1 to 4
  /// floats, 1 or 2 doubles, x in the accumulator's type) keep the bests in one vector: one
  /// instruction per row; x's last rows are read one value at a time (a vector load would
  /// read past x). Sorted, L = 1000, N = 1e6, 2 threads, median ms: max of rows of 3 floats
  /// 2.9 -> 0.28, of single floats 2.2 -> 0.27; max_norm of rows of 3 floats 2.5 -> 0.69.
  template <int W, class Slot, class Elem>
  KOKKOS_FUNCTION bool reduce_numbers(Slot d, const Elem& elem, index_t b, index_t e) const {
    if constexpr (std::is_same_v<Elem, IdentityElem> && requires { Value::components; }) {
      using T = std::remove_const_t<std::remove_pointer_t<decltype(value.x.ptr)>>;
      if constexpr (std::is_same_v<T, V> && row_fits_vector<T, W>)
        if (packed(value.x) && value.x.d == W) {
          using F = typename HostVec<T>::type;
          using B = typename HostVec<T>::bits;
          constexpr int lanes = 16 / sizeof(T);
          const T* xp = value.x.ptr;
          F best = F{} + identity();
          B nan{};
          auto row = [&](F v) {
            nan |= (B)(v != v);
            best = vec_better<IsMax>(v, best);
          };
          // rows p with p * W + lanes <= n * W: a vector load from them stays inside x
          constexpr index_t tail = (lanes + W - 1) / W - 1;
          const index_t whole = Kokkos::min(e, value.x.n - tail);
          index_t p = b;
          for (; p < whole; ++p) row(load_vec<F>(xp + p * W));
          for (; p < e; ++p) {  // x's last rows
            F v = F{} + identity();
            for (int j = 0; j < W; ++j) v[j] = xp[p * W + j];
            row(v);
          }
          if (any_lane(nan & load_vec<B>(kRowWindow<T, W>.w[0]))) return false;  // lanes < W
          for (int j = 0; j < W; ++j) store(d, j, best[j], -1);
          return true;
        }
    }
    V best[W];
    for (int j = 0; j < W; ++j) best[j] = identity();
    bool nan = false;
    for (index_t p = b; p < e; ++p) {
      const index_t el = elem(p);
      for (int j = 0; j < W; ++j) {
        const V v = value(el, j);
        nan |= v != v;
        best[j] = better_number(best[j], v);
      }
    }
    if (nan) return false;
    for (int j = 0; j < W; ++j) store(d, j, best[j], -1);
    return true;
  }
#endif
  /// TileReduce::walk (sorted ids, short segments): the rows of the tile's segments start at the
  /// identity (walk_init), and each position improves its segment's row in memory, as a plain loop
  /// does: a max or min instruction per component, no state carried between positions (carrying
  /// the running best in registers took a select on "same segment" per component, through the
  /// integer unit: 2x slower). Ties keep the first element, NaN the first NaN. (walk_step, with
  /// the arg's select per position, where walk_positions is not compiled: GPU builds.)
  template <int W>
  struct WalkState {};
  KOKKOS_FUNCTION void walk_init(index_t b, index_t e) const { zero_rows(b, e); }
  template <int W>
  KOKKOS_FUNCTION void walk_step(WalkState<W>&, bool, index_t p, index_t s) const {
    for (int j = 0; j < W; ++j) {
      const V v = value(p, j);
      V& o = out(s, j);
      if constexpr (Arg) {
        I& a = arg(s, j);
        a = select(better<V, IsMax>(v, o) | (a == kUnset), static_cast<I>(p), a);
      }
      improve(o, v);
    }
  }
  KOKKOS_FUNCTION void zero_rows(index_t b, index_t e) const {
    const bool args = wants_arg();
    if (packed(out) && out.d == w && (!args || (packed(arg) && arg.d == w))) {
      V* o = out.ptr;  // runs of identities and of kUnset (vector fills)
      for (index_t k = b * w; k < e * w; ++k) o[k] = identity();
      if (args)
        for (index_t k = b * w; k < e * w; ++k) arg.ptr[k] = kUnset;
      return;
    }
    for (index_t s = b; s < e; ++s) init(OutSlot{s});
  }
#ifdef SEGOPS_HOST_VECTORS
  /// TileReduce::walk (host builds): the rows set by walk_init, positions [b, hi) improve their
  /// segment's row one after the other, as a plain loop does (improve_positions where it
  /// applies); the lockstep streams bought nothing here. With an arg, first_positions then finds
  /// the indices, forming each value again (max_norm's norms: RowNorm forms them with the same
  /// roundings in every path).
  template <int W, class Ids>
  KOKKOS_FUNCTION void walk_positions(index_t b, index_t hi, const Ids& id) const {
    if (!(packed(out) && out.d == W && improve_positions<W, false>(out.ptr, b, hi, [&](index_t q) {
            return static_cast<index_t>(id(q));
          })))
      for (index_t p = b; p < hi; ++p) {
        const index_t s = static_cast<index_t>(id(p));
        for (int j = 0; j < W; ++j) improve(out(s, j), value(p, j));
      }
    if (wants_arg()) first_positions<W>(b, hi, id);
  }
  /// Once the rows of the segments of positions [b, hi) hold their results: each one's index, the
  /// first position whose value attains the result (the first element attaining it, ties and
  /// NaN alike, as PrivateArg finds it). The positions are walked backwards with a row of indices
  /// carried from one to the next: a component takes the position where it attains, and every
  /// position stores the whole row into its segment's indices, at an address the ids alone give.
  /// The last store into a segment's row is at its first position, and by then each component
  /// holds the first position of the segment that attains: every component of a segment in
  /// [b, hi) has one there (walk_positions made its result the value of one of them; b is the
  /// first segment's start), so what the row carried in from the segment after it is overwritten
  /// before that last store. The indices are never read, so a segment's positions do not wait on
  /// each other (walk_step's select per position and component read and wrote them in memory, a
  /// chain through the segment). Unmatched rows (empty segments) keep walk_init's kUnset. With
  /// the vector fills of walk_init and finalize_range, sorted ids, L = 3, N = 1e6, int64 arg, 2
  /// threads, against walk_step: max and min of rows of 3 floats 5.3-5.5 -> 3.6-3.8 ms, of single
  /// floats 2.2 -> 1.1 ms; max_norm of rows of 3 floats 2.6 -> 1.9 ms, its norms four at a time
  /// (without an arg: 0.9 ms; a ternary in place of select, where GCC made it a branch, took 5
  /// ms). Each match then stored its position into the index or into a sink, the address chosen
  /// by the compare; the carried row instead, on a Zen 5: max_norm 1.50-1.52 -> 1.41-1.45 ms,
  /// single floats 0.96-0.98 ms either way (rows of 2 to 4 floats: first_rows).
  template <int W, class Ids>
  KOKKOS_FUNCTION void first_positions(index_t b, index_t hi, const Ids& id) const {
    // value_of(p, j), result(s, j), index(s, j): packed rows through pointers with the width a
    // constant where they are packed (the strided accessors cost a third of the time)
    auto walk = [&](const auto& value_of, const auto& result, const auto& index) {
      I row[W] = {};
      auto position = [&](index_t p, const auto& v, const auto& match) {
        const index_t s = static_cast<index_t>(id(p));
        for (int j = 0; j < W; ++j) {
          row[j] = select(match(v(j), result(s, j)), static_cast<I>(p), row[j]);
          index(s, j) = row[j];
        }
      };
      auto attain = [](V v, V o) { return attains(v, o); };
      auto bits = [](V v, V o) { return same_bits(v, o); };
      index_t p = hi;
      if constexpr (W == 1 && requires(const Value& v) { v.values4(index_t(0)); })
        for (; p - 4 >= b; p -= 4) {  // four norms at once (RowNorm::values4)
          const auto v = value.values4(p - 4);
          // four numbers: their bits alone decide (attains' NaN test per position: 1.9 -> 3 ms)
          const bool nan = any_lane(v != v);
          for (int k = 3; k >= 0; --k) {
            auto lane = [&](int) { return v[k]; };
            if (nan) [[unlikely]]
              position(p - 4 + k, lane, attain);
            else
              position(p - 4 + k, lane, bits);
          }
        }
      auto at_p = [&](int j) { return value_of(p, j); };
      while (--p >= b) position(p, at_p, attain);
    };
    if (packed(out) && out.d == W && packed(arg) && arg.d == W) {
      const V* o = out.ptr;
      I* a = arg.ptr;
      auto result = [&](index_t s, int j) { return o[s * W + j]; };
      auto index = [&](index_t s, int j) -> I& { return a[s * W + j]; };
      if constexpr (requires { Value::components; }) {
        using T = std::remove_const_t<std::remove_pointer_t<decltype(value.x.ptr)>>;
        if (packed(value.x) && value.x.d == W) {
          const T* xp = value.x.ptr;
#ifdef SEGOPS_HOST_VECTORS
          if constexpr (std::is_same_v<T, float> && std::is_same_v<V, float> && W >= 2 && W <= 4)
            return first_rows<W>(b, hi, id, xp, o, a);
#endif
          return walk([&](index_t p, int j) { return static_cast<V>(xp[p * W + j]); }, result,
                      index);
        }
      }
      return walk(value, result, index);
    }
    walk(value, out, arg);
  }
  /// first_rows' compare of rows x and r of W floats (all ones where their bits are the same)
  /// value by value, for the last rows.
  template <int W>
  static HostVec<float>::bits last_rows_match(const float* x, const float* r) {
    std::int32_t m[4] = {};
    for (int j = 0; j < W; ++j) m[j] = same_bits(x[j], r[j]) ? -1 : 0;
    return load_vec<HostVec<float>::bits>(m);
  }
  /// first_positions over packed rows of 2 to 4 floats (x and the results): a position's row
  /// and its segment's result compared as one vector each (their bits: attains for x's
  /// entries), and the carried row of indices as one vector (two of 64-bit indices) blended
  /// with the position by that mask. The rows whose vector would pass the end of x or of the
  /// results compare value by value. Max of rows of 3 floats, sorted, L = 3, N = 1e6, int64 arg,
  /// 2 threads, Zen 5: 2.65-3.04 -> 1.98-2.16 ms (without an arg 0.83 ms). The vector compare
  /// with a store per matching component into the index or a sink had bought nothing (2.6-2.7
  /// ms: those stores' addresses waited on the compares); a row of 64-bit indices as one 32-byte
  /// vector lived on the stack on the x86-64 baseline (3.0-3.2 ms).
  template <int W, class Ids>
  KOKKOS_FUNCTION void first_rows(index_t b, index_t hi, const Ids& id, const float* xp,
                                  const float* o, I* a) const {
    using B = HostVec<float>::bits;
    using F = HostVec<float>::type;
    // the carried row: four 32-bit indices in one vector, or 64-bit ones in two (lanes 0 and 1,
    // 2 and 3), each lane taking p where its component's mask is set
    using L = std::conditional_t<sizeof(I) == 8, HostVec<double>::bits, B>;
    constexpr int NL = sizeof(I) == 8 ? 2 : 1, per = 16 / sizeof(I);
    L row[NL] = {};
    // positions p < xn and segments s < on: their rows' vectors stay inside x and the results
    const index_t xn = W == 4 ? value.x.n : value.x.n - 1, on = W == 4 ? out.n : out.n - 1;
    for (index_t p = hi - 1; p >= b; --p) {
      const index_t s = static_cast<index_t>(id(p));
      const B match = p < xn && s < on ? load_vec<B>(xp + p * W) == load_vec<B>(o + s * W)
                                       : last_rows_match<W>(xp + p * W, o + s * W);
      const L at = L{} + static_cast<std::remove_cvref_t<decltype(L{}[0])>>(p);
      for (int h = 0; h < NL; ++h) {
        L m;
        if constexpr (NL == 1)
          m = match;
        else  // lanes 2h and 2h + 1 of the 32-bit mask widened to 64 bits
          m = (L)(h == 0 ? shuffle<0, 0, 1, 1>(F(match), F(match))
                         : shuffle<2, 2, 3, 3>(F(match), F(match)));
        row[h] = (row[h] & ~m) | (at & m);
      }
      I* dst = a + s * W;
      for (int h = 0; h < NL && h * per < W; ++h) {
        const int n = Kokkos::min(per, W - h * per);
        if (n == per)
          __builtin_memcpy(dst + h * per, &row[h], sizeof(L));
        else
          for (int j = 0; j < n; ++j) dst[h * per + j] = static_cast<I>(row[h][j]);
      }
    }
  }
  /// Packed rows of width W at `rows` improved at positions [lo, hi) in order, position q's
  /// values into row row(q) (where Drops, row(q) < 0 skips the position), four positions at a
  /// time where the values come four at a time: packed rows of x (ComponentValue), or four norms
  /// with four square roots at once (RowNorm::values4: max_norm of rows of 3 floats). One vector
  /// test finds whether the four positions' values hold a NaN, and where none does (the common
  /// case) each value takes one max or min instruction, without improve's NaN test. False
  /// (nothing done) where the values do not come four at a time. max of rows of 3 floats, L = 3,
  /// N = 1e6: sorted, 1 thread, 34 -> 21 instructions per element (callgrind), 2.0 -> 1.6 ms;
  /// unsorted (scatter), 2 threads, 1.9 -> 1.3 ms.
  template <int W, bool Drops, class Row>
  KOKKOS_FUNCTION bool improve_positions(V* rows, index_t lo, index_t hi, const Row& row) const {
    // nan4(p): whether positions p .. p + 3 hold a NaN (and their values for four(p, k, j))
    auto walk = [&](const auto& nan4, const auto& four) {
      auto position = [&](index_t q, const auto& value_of, const auto& step) {
        const index_t r = row(q);
        if (Drops && r < 0) return;  // dropped ids: predictable
        for (int j = 0; j < W; ++j) step(rows[r * W + j], value_of(j));
      };
      auto with_nan = [](V& o, V v) { improve(o, v); };
      auto numbers = [](V& o, V v) { o = better_number(o, v); };
      index_t p = lo;
      for (; p + 4 <= hi; p += 4) {
        if (nan4(p)) [[unlikely]] {
          for (int k = 0; k < 4; ++k)
            position(
                p + k, [&](int j) { return four(p, k, j); }, with_nan);
          continue;
        }
        for (int k = 0; k < 4; ++k)
          position(
              p + k, [&](int j) { return four(p, k, j); }, numbers);
      }
      for (; p < hi; ++p)
        position(
            p, [&](int j) { return value(p, j); }, with_nan);
      return true;
    };
    if constexpr (W == 1 && requires(const Value& v) { v.values4(index_t(0)); }) {
      decltype(value.values4(0)) v{};  // the norms of the four positions nan4 saw last
      auto nan4 = [&](index_t p) {
        v = value.values4(p);
        return any_lane(v != v);
      };
      return walk(nan4, [&](index_t, int k, int) { return v[k]; });
    } else if constexpr (requires { Value::components; }) {
      using T = std::remove_const_t<std::remove_pointer_t<decltype(value.x.ptr)>>;
      if constexpr (HostVec<T>::ok)
        if (packed(value.x) && value.x.d == W) {
          const T* xp = value.x.ptr;
          constexpr int nv = W * int(sizeof(T)) / 4;  // the vectors of four rows
          return walk([&](index_t p) { return any_nan<T, nv>(xp + p * W); },
                      [&](index_t p, int k, int j) { return static_cast<V>(xp[(p + k) * W + j]); });
        }
    }
    return false;
  }
#endif
  /// The better of o and a number v: a max or min instruction (ties keep o, and so does a NaN o).
  static KOKKOS_FORCEINLINE_FUNCTION V better_number(V o, V v) {
    return IsMax ? (v > o ? v : o) : (v < o ? v : o);
  }
  /// o = the better of o and v: better_number, and the first NaN; the value
  /// select(better(v, o), v, o) gives, without the integer unit.
  static KOKKOS_FORCEINLINE_FUNCTION void improve(V& o, V v) {
    V m = better_number(o, v);
    if (v != v) [[unlikely]]  // v is NaN (rare): o == o is tested only then
      if (o == o) m = v;
    o = m;
  }
  // PrivateReduce: the output as packed rows, elements [lo, hi) improving rows of a copy, a
  // copy's row improving an output row (copies in part order: ties keep the earlier part's).
  KOKKOS_FUNCTION V* dense_rows() const { return packed(out) && out.d == w ? out.ptr : nullptr; }
  template <class IdT>
  KOKKOS_FUNCTION void scatter(V* rows, index_t /* rs: the copies' row stride, w here */,
                               const IdT* id, index_t st, index_t lo, index_t hi, index_t m) const {
    // Copies larger than a core's L2 cache miss on most updates: the row of the element kAhead
    // positions on is prefetched (as SumReducer::scatter).
    const bool far = kPrefetches && m * w * index_t(sizeof(V)) > kCacheBytes;
    auto rows_of = [&](auto width) {
      constexpr int W = decltype(width)::value;
      const index_t ww = W > 0 ? W : w;
      auto row = [&](index_t i) {  // -1 for dropped ids
        if (far && i + kAhead < hi) {
          const index_t t = static_cast<index_t>(id[(i + kAhead) * st]);
          prefetch<true>(rows + (t >= 0 && t < m ? t : 0) * ww);
        }
        const index_t s = static_cast<index_t>(id[i * st]);
        return s >= 0 && s < m ? s : index_t(-1);
      };
#ifdef SEGOPS_HOST_VECTORS
      if constexpr (W > 0)
        if (improve_positions<W, true>(rows, lo, hi, row)) return;
#endif
      for (index_t i = lo; i < hi; ++i) {
        const index_t s = row(i);
        if (s < 0) continue;  // dropped ids: predictable
        for (index_t k = 0; k < ww; ++k) improve(rows[s * ww + k], value(i, k));
      }
    };
    switch (w) {
      case 1:
        return rows_of(std::integral_constant<int, 1>{});
      case 3:
        return rows_of(std::integral_constant<int, 3>{});
      default:
        return rows_of(std::integral_constant<int, 0>{});
    }
  }
  static KOKKOS_FORCEINLINE_FUNCTION void merge(V& o, V v) { improve(o, v); }
  KOKKOS_FUNCTION void set_row(OutSlot d, const V* row) const {
    for (index_t k = 0; k < w; ++k) out(d.s, k) = row[k];
  }
  KOKKOS_FUNCTION void add_row(OutSlot d, const V* row) const {
    for (index_t k = 0; k < w; ++k) improve(out(d.s, k), row[k]);
  }
  /// finalize(s) for s in [lo, hi): packed indices as one run (a vector loop).
  KOKKOS_FUNCTION void finalize_range(index_t lo, index_t hi) const {
    if (wants_arg() && packed(arg) && arg.d == w) {
      if constexpr (ZeroIfEmpty)
        for (index_t s = lo; s < hi; ++s) zero_if_empty(s);
      I* a = arg.ptr;
      for (index_t k = lo * w; k < hi * w; ++k) a[k] = found_or_none(a[k]);
      return;
    }
    for (; lo < hi; ++lo) finalize(lo);
  }
  KOKKOS_FUNCTION void join(OutSlot d, CarrySlot c) const {
    for (index_t k = 0; k < w; ++k) {
      const V v = carry[c.t * w + k];
      if (better<V, IsMax>(v, out(d.s, k))) store(d, k, v, carry_idx[c.t * w + k]);
    }
  }
  KOKKOS_FUNCTION void zero_if_empty(index_t s) const {
    if (ZeroIfEmpty && counts(s) == 0)
      for (index_t k = 0; k < w; ++k) out(s, k) = V(0);
  }
  KOKKOS_FUNCTION void finalize(index_t s) const {
    zero_if_empty(s);
    if (wants_arg())
      for (index_t k = 0; k < w; ++k) arg(s, k) = found_or_none(arg(s, k));
  }
  KOKKOS_FUNCTION void init(OutSlot d) const {
    for (index_t k = 0; k < w; ++k) {
      out(d.s, k) = identity();
      if (wants_arg()) arg(d.s, k) = kUnset;
    }
  }
  template <bool Atomic>
  KOKKOS_FUNCTION void accumulate(index_t s, index_t i) const {
    for (index_t k = 0; k < w; ++k) {
      const V v = value(i, k);
      if constexpr (Atomic)
        atomic_improve<V, IsMax>(&out(s, k), v);
      else
        improve(out(s, k), v);
    }
  }
  template <bool Atomic>
  KOKKOS_FUNCTION void arg_pass(index_t s, index_t i) const {
    for (index_t k = 0; k < w; ++k) {
      const bool same = attains(value(i, k), out(s, k));
      if constexpr (Atomic) {
        if (same) Kokkos::atomic_min(&arg(s, k), static_cast<I>(i));
      } else {
        I& a = arg(s, k);
        a = select(same & (static_cast<I>(i) < a), static_cast<I>(i), a);
      }
    }
  }
  /// OwnerReduce: element i of segment s, whether this partition owns s or not (then into a
  /// scratch row: the owner test would be a branch on random ids). Pass 0 the values, pass 1
  /// the indices.
  static constexpr bool owner_selects = true;
  template <int Pass>
  KOKKOS_FUNCTION void owner_step(bool own, index_t s, index_t i, V* vs, I* is) const {
    const index_t t = own ? s : 0;
    for (index_t k = 0; k < w; ++k) {
      const V v = value(i, k);
      V& o = own ? out(t, k) : vs[k];
      if constexpr (Pass == 0) {
        improve(o, v);
      } else {
        I& a = own ? arg(t, k) : is[k];
        a = select(attains(v, o) & (static_cast<I>(i) < a), static_cast<I>(i), a);
      }
    }
  }
};

/// Host backends, unsorted ids, default mode, with arg: once the values are reduced (by
/// PrivateReduce, a copy per thread), part q of P finds in its elements [n q / P, n (q + 1) / P)
/// the first whose value attains its segment's result (MaxLocReducer::attains), into its own copy
/// of the indices (part 0 into arg, the others into the workspace); a pass over the segments takes
/// the first part's that found one. The result is the value of the first element attaining it
/// (ties keep the first, and so does a NaN), so this is the lowest index. The part walks its
/// elements from the last and stores the index of every element that attains (into a local sink
/// where one does not), so the last store, the first element, stays: the index row is only
/// written, never read (reading it to test for an index already found held each element up: rows
/// of 3 floats, L = 3, unsorted, 2 threads, N = 1e6 max with arg 12.9-13.2 -> 8.7-9.3 ms). The
/// copies start as kUnset, not -1: GCC turns a fill of -1 into a memset call, after which the
/// random stores that follow were slower (max_norm, same case: 3.9 -> 4.2-4.3 ms; glibc's memset
/// of large sizes presumably leaves the rows out of cache). Packed rows go through pointers with
/// the width a constant, and the combine as flat loops over blocks of segments, as
/// PrivateReduce's, without branches: which part found a segment's first is random, and the
/// branches of `a == kUnset ? copy : a` mispredicted (max_norm, same case: the combine's perf
/// samples over 101 calls 656-671 -> 187-229, the call 3.9-4.6 -> 3.3 ms; single floats 2.55 ->
/// 2.02 ms). Against every partition scanning every element for both (OwnerReduce), same case:
/// 28.8 ms.
template <class R, class Ids>
struct PrivateArg {
  struct FindTag {};
  struct CombineTag {};
  using I = typename R::index_type;
  using V = typename R::acc_type;
  static constexpr I kUnset = R::kUnset;
  static constexpr index_t kCombine = 256;  // segments per combine iteration
  R r;
  Ids ids;
  I* scratch;
  index_t n, m, w, parts;
  KOKKOS_FUNCTION I& slot(index_t q, index_t s, index_t k) const {
    return q == 0 ? r.arg(s, k) : scratch[((q - 1) * m + s) * w + k];
  }
  /// Part q's copy of the indices as packed rows, or nullptr (part 0: arg not packed).
  KOKKOS_FUNCTION I* packed_slots(index_t q) const {
    if (q > 0) return scratch + (q - 1) * m * w;
    return packed(r.arg) && r.arg.d == w ? r.arg.ptr : nullptr;
  }
  KOKKOS_FUNCTION SEGOPS_FLATTEN void operator()(FindTag, index_t q) const {
    const R rl = r;
    const Ids id = ids;
    const index_t lo = n * q / parts, hi = n * (q + 1) / parts, mm = m, ww = w;
    I* const flat = packed_slots(q);
    if (flat)
      for (index_t k = 0; k < mm * ww; ++k) flat[k] = kUnset;
    else
      for (index_t s = 0; s < mm; ++s)
        for (index_t k = 0; k < ww; ++k) slot(q, s, k) = kUnset;
    const bool far = kPrefetches && mm * ww * index_t(sizeof(I)) > kCacheBytes;
    // value_of(i, k), result(s, k), index(s, k) of W-wide rows (0: w, through the accessors)
    auto find = [&](auto width, const auto& value_of, const auto& result, const auto& index) {
      constexpr int W = decltype(width)::value;
      const index_t wk = W > 0 ? W : ww;
      I sink;
      for (index_t i = hi - 1; i >= lo; --i) {
        if (far && i - kAhead >= lo) {
          const index_t t = static_cast<index_t>(id(i - kAhead));
          if (t >= 0 && t < mm) {
            prefetch(&result(t, 0));
            prefetch<true>(&index(t, 0));
          }
        }
        const index_t s = static_cast<index_t>(id(i));
        if (s < 0 || s >= mm) continue;  // dropped ids: predictable
        for (index_t k = 0; k < wk; ++k)
          *select(R::attains(value_of(i, k), result(s, k)), &index(s, k), &sink) =
              static_cast<I>(i);
      }
    };
    auto value_at = [&](index_t i, index_t k) { return rl.value(i, k); };
    if (flat && packed(rl.out) && rl.out.d == ww) {
      const V* o = rl.out.ptr;
      auto rows = [&](auto width) {
        constexpr int W = decltype(width)::value;
        auto result = [&](index_t s, index_t k) -> const V& { return o[s * W + k]; };
        auto index = [&](index_t s, index_t k) -> I& { return flat[s * W + k]; };
        if constexpr (requires { R::value_type::components; })
          if (packed(rl.value.x) && rl.value.x.d == W) {
            const auto* xp = rl.value.x.ptr;
            return find(
                width, [&](index_t i, index_t k) { return static_cast<V>(xp[i * W + k]); }, result,
                index);
          }
        find(width, value_at, result, index);
      };
      if (with_width_of<1, 2, 3, 4>(ww, rows)) return;
    }
    find(
        std::integral_constant<int, 0>{}, value_at,
        [&](index_t s, index_t k) -> const V& { return rl.out(s, k); },
        [&](index_t s, index_t k) -> I& { return slot(q, s, k); });
  }
  /// Segments [b kCombine, (b + 1) kCombine): the first part's index that is set, else -1.
  KOKKOS_FUNCTION void operator()(CombineTag, index_t b) const {
    const index_t lo = b * kCombine, hi = Kokkos::min(m, lo + kCombine);
    if (I* a = packed_slots(0)) {  // flat loops, one per copy; the last one's finishes the rows
      const index_t kb = lo * w, ke = hi * w;  // locals: stores through a may alias the members
      for (index_t q = 1; q + 1 < parts; ++q) {
        const I* copy = packed_slots(q);
        for (index_t k = kb; k < ke; ++k) a[k] = R::set_or(a[k], copy[k]);
      }
      const I* last = parts > 1 ? packed_slots(parts - 1) : a;
      for (index_t k = kb; k < ke; ++k) a[k] = R::found_or_none(R::set_or(a[k], last[k]));
      return;
    }
    for (index_t s = lo; s < hi; ++s)
      for (index_t k = 0; k < w; ++k) {
        I a = r.arg(s, k);
        for (index_t q = 1; q < parts; ++q) a = R::set_or(a, slot(q, s, k));
        r.arg(s, k) = R::found_or_none(a);
      }
  }
};

}  // namespace segops::impl
