// SPDX-License-Identifier: Apache-2.0
// The bilinear family: dot, inner_products, mul, add, axpy, axpby. Each order is a segmented
// reduction of a map from maps.hpp and/or one per-element pass with a functor below.
// T = value type of the element inputs, S = of the per-segment inputs, O = of an output.
// For a dropped (trusted, out-of-range) id every gathered per-segment value is taken as 0.
#pragma once

#include <Kokkos_Core.hpp>
#include <segops/impl/checks.hpp>
#include <segops/impl/linear.hpp>
#include <segops/impl/maps.hpp>
#include <segops/impl/segmented_reduce.hpp>
#include <segops/impl/segmented_transform.hpp>
#include <segops/impl/transform_reduce.hpp>
#include <segops/impl/views.hpp>

namespace segops::impl {

template <class V>
using value_t = typename V::non_const_value_type;

/// a(s), or 0 for a dropped element (s < 0).
template <class R, class T>
KOKKOS_FUNCTION R seg_value(const Mat<const T>& a, index_t s) {
  return s < 0 ? R(0) : static_cast<R>(a(s));
}

/// The reducer that sums `map` (width w) into `out`, accumulating in out's value type.
template <class Seg, class Map, class Out, class Fin = NoFinalize>
auto map_reducer(const Seg& seg, const Map& map, const Out& out, index_t w, Fin fin = {}) {
  using Acc = std::remove_reference_t<decltype(out(0, 0))>;
  return make_sum_reducer<Acc>(map, out, carry_of<Acc>(seg), w, fin);
}

/// Sum-reduce `map` (width w) into `out`, accumulating in out's value type.
template <class Exec, class Seg, class Map, class Out, class Fin = NoFinalize>
void reduce_map(const Exec& exec, const Seg& seg, const Map& map, const Out& out, index_t w,
                const char* label, Fin fin = {}) {
  segmented_reduce(exec, seg, map_reducer(seg, map, out, w, fin), label);
}

/// segmented_transform(f) and reduce_map(map) (sums of dot products, a DotMap or DotsMap), in one
/// sweep where segmented_transform_reduce takes one.
template <class Exec, class Seg, class F, class Map, class Out>
void transform_reduce_map(const Exec& exec, const Seg& seg, const F& f, const Map& map,
                          const Out& out, index_t w, const char* label) {
  segmented_transform_reduce(exec, seg, f, map_reducer(seg, map, out, w), map.gather_bytes(),
                             label);
}

/// One output row as a linear combination of up to four element rows t_k with per-segment
/// coefficients: o_i = sum_k k_k(s) t_k(i), k_k(s) = f_k c_k(s) for a term with per-segment values
/// c_k, else the constant w_k (f_k = 0). mul's forward/backward/double backward, dot's and
/// inner_products' backward, axpy and axpby are all this one pass. The sum starts at the first
/// term, not at 0, so a product that is -0 stays -0 (and the loop has one add less per term).
/// The coefficients are only read, not computed (kReadsCoefficients): segmented_transform stages
/// them in the workspace for unsorted ids only, where an element would read several per-segment
/// inputs at random; a block of sorted ids takes them once per segment where block_reads says so.
template <class O, class T, class S, int K>
struct Combination {
  static_assert(K >= 1);
  static constexpr bool kReadsCoefficients = true;
  static constexpr int kTerms = K;  // per element (segmented_transform's terms_v)
  using value_type = O;             // of the output rows and the coefficients
  using Coeffs = Kokkos::Array<O, K>;
  Mat<O> o;
  Kokkos::Array<Mat<const T>, K> t;
  Kokkos::Array<Mat<const S>, K> c;
  Kokkos::Array<O, K> w, f;
  KOKKOS_FORCEINLINE_FUNCTION Coeffs coeffs(index_t s) const {
    Coeffs k;
    for (int j = 0; j < K; ++j) k[j] = f[j] != O(0) ? f[j] * seg_value<O>(c[j], s) : w[j];
    return k;
  }
  KOKKOS_FORCEINLINE_FUNCTION void apply(index_t i, index_t, const Coeffs& k) const {
    for_cols(o.d, [&](index_t d) SEGOPS_INLINE {
      O r = k[0] * static_cast<O>(t[0](i, d));
      for (int j = 1; j < K; ++j) r += k[j] * static_cast<O>(t[j](i, d));
      o(i, d) = r;
    });
  }
  KOKKOS_FORCEINLINE_FUNCTION void row(index_t i, index_t s) const { apply(i, s, coeffs(s)); }
  /// The per-segment coefficients in use (segmented_transform prefetches them for unsorted ids).
  template <class G>
  KOKKOS_FUNCTION void segment_rows(G&& g) const {
    for (int j = 0; j < K; ++j)
      if (f[j] != O(0)) g(c[j]);
  }
  template <class G>  // those that apply reads: none besides the coefficients
  KOKKOS_FUNCTION void applied_rows(G&& g) const {
    g();
  }
  KOKKOS_FUNCTION index_t packed_width() const {
    const index_t pw = packed_width_of(o);
    for (int j = 0; j < K; ++j)
      if (packed_width_of(t[j]) != pw) return 0;
    return pw;
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed(index_t i, index_t s) const {
    packed_apply<W>(i, s, coeffs(s));
  }
  /// Packed rows: element i's W results, computed from loads only, then stored (packed_store;
  /// Combinations loads both combinations' inputs before storing either). The compiler cannot
  /// move a load above a store to an array that may alias it, and a load that follows a store at
  /// the same page offset (arrays allocated alike) waits for it. axpby_backward (gx = a g,
  /// gy = b g, then its reduction), rows of 3 floats, 1e6 elements, L = 3, 2 threads: sorted
  /// 4.1 -> 3.9-4.0 ms, unsorted 8.8-8.9 -> 8.1-8.2 ms.
  template <int W>
  struct Row {
    O v[W];
  };
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION Row<W> packed_values(index_t i, const Coeffs& k) const {
    Row<W> r;
    for (int d = 0; d < W; ++d) {
      r.v[d] = k[0] * static_cast<O>(t[0].ptr[i * W + d]);
      for (int j = 1; j < K; ++j) r.v[d] += k[j] * static_cast<O>(t[j].ptr[i * W + d]);
    }
    return r;
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed_store(index_t i, const Row<W>& r) const {
    for (int d = 0; d < W; ++d) o.ptr[i * W + d] = r.v[d];
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed_apply(index_t i, index_t, const Coeffs& k) const {
    packed_store<W>(i, packed_values<W>(i, k));
  }
#ifdef SEGOPS_HOST_VECTORS
  /// Rows of 3 floats, one term (mul's forward, its gradient of x): elements i .. i + 3 with
  /// vectors, the four coefficients splat across their rows (splat_rows3x4); false where a segment
  /// whose values the term reads is dropped. N = 1e6, L = 3, 2 threads: mul sorted 0.49 -> 0.30 ms,
  /// unsorted 0.56 -> 0.53 ms; mul_backward sorted 1.10 -> 0.93 ms. (Two terms, or two
  /// combinations in one pass, ran slower so: axpby sorted 0.59 -> 0.67 ms, dot_backward unsorted
  /// 1.05 -> 1.29 ms.)
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION bool packed_quad(index_t i, const index_t (&s)[4]) const
      requires(W == 3 && K == 1 && std::is_same_v<O, float> && std::is_same_v<T, float>) {
    using V = HostVec<float>::type;
    if (f[0] != O(0) && !all_below(s, c[0].n)) return false;
    V k[3], r[3];
    splat_rows3x4(V{coeffs(s[0])[0], coeffs(s[1])[0], coeffs(s[2])[0], coeffs(s[3])[0]}, k);
    for (int d = 0; d < 3; ++d) r[d] = k[d] * load_vec<V>(t[0].ptr + i * 3 + 4 * d);
    store_packed3(o.ptr + i * 3, r);
    return true;
  }
  /// Values in whole vectors V (16 or 32 bytes; ElementTransform::segment_vectors, single values
  /// or packed rows): the coefficients of a segment splat across V, then the lanes' values from
  /// position i on (element i / W, component i % W), in apply's operations (the same bits),
  /// computed from loads only and then stored.
  static constexpr bool kVectorRuns = std::is_same_v<O, T> && HostVec<T>::ok;
  template <class V>
  struct Splat {
    V k[K];
  };
  /// Whether every term reads per-segment values (f != 0): vector_coeffs<true> then tests none.
  KOKKOS_FUNCTION bool segment_coeffs() const {
    bool all = true;
    for (int j = 0; j < K; ++j) all &= f[j] != O(0);
    return all;
  }
  template <bool AllSegment, class V>
  SEGOPS_WIDE_INLINE void vector_coeffs(index_t s, Splat<V>& kv) const {
    for (int j = 0; j < K; ++j)  // coeffs(s)
      splat(kv.k[j], AllSegment || f[j] != O(0) ? f[j] * static_cast<O>(c[j](s)) : w[j]);
  }
  template <class V>
  using Values = V;
  template <class V>
  SEGOPS_WIDE_INLINE void vector_values(index_t i, const Splat<V>& kv, V& r) const {
    V x;
    load_wide(r, t[0].ptr + i);
    r = kv.k[0] * r;
    for (int j = 1; j < K; ++j) {
      load_wide(x, t[j].ptr + i);
      r += kv.k[j] * x;
    }
  }
  template <class V>
  SEGOPS_WIDE_INLINE void vector_store(index_t i, const V& r) const {
    __builtin_memcpy(o.ptr + i, &r, sizeof(V));
  }
#endif
};

/// Runs one or two Combinations (or nested Combinations) in a single pass over the elements.
template <class C1, class C2 = void>
struct Combinations {
  static constexpr bool kReadsCoefficients = true;
  static constexpr int kTerms = C1::kTerms + C2::kTerms;
  using value_type = typename C1::value_type;
  struct Coeffs {
    typename C1::Coeffs a;
    typename C2::Coeffs b;
  };
  C1 a;
  C2 b;
  KOKKOS_FORCEINLINE_FUNCTION Coeffs coeffs(index_t s) const { return {a.coeffs(s), b.coeffs(s)}; }
  KOKKOS_FORCEINLINE_FUNCTION void apply(index_t i, index_t s, const Coeffs& k) const {
    a.apply(i, s, k.a);
    b.apply(i, s, k.b);
  }
  KOKKOS_FORCEINLINE_FUNCTION void row(index_t i, index_t s) const {
    a.row(i, s);
    b.row(i, s);
  }
  KOKKOS_FORCEINLINE_FUNCTION void operator()(index_t i, index_t s) const { row(i, s); }
  KOKKOS_FUNCTION index_t packed_width() const {
    return a.packed_width() == b.packed_width() ? a.packed_width() : 0;
  }
  template <class F>
  KOKKOS_FUNCTION void segment_rows(F&& f) const {
    a.segment_rows(f);
    b.segment_rows(f);
  }
  template <class F>
  KOKKOS_FUNCTION void applied_rows(F&& f) const {
    a.applied_rows(f);
    b.applied_rows(f);
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed(index_t i, index_t s) const {
    packed_apply<W>(i, s, coeffs(s));
  }
  /// Both combinations' results before either is stored (Combination::packed_values).
  template <int W>
  struct Row {
    decltype(std::declval<const C1&>().template packed_values<W>(0, {})) x;
    decltype(std::declval<const C2&>().template packed_values<W>(0, {})) y;
  };
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION Row<W> packed_values(index_t i, const Coeffs& k) const {
    return {a.template packed_values<W>(i, k.a), b.template packed_values<W>(i, k.b)};
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed_store(index_t i, const Row<W>& r) const {
    a.template packed_store<W>(i, r.x);
    b.template packed_store<W>(i, r.y);
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed_apply(index_t i, index_t, const Coeffs& k) const {
    packed_store<W>(i, packed_values<W>(i, k));
  }
#ifdef SEGOPS_HOST_VECTORS
  /// Combination's vector_* for both (values of both before either is stored, as packed_values).
  static constexpr bool kVectorRuns = C1::kVectorRuns && C2::kVectorRuns;
  template <class V>
  struct Splat {
    typename C1::template Splat<V> a;
    typename C2::template Splat<V> b;
  };
  template <class V>
  struct Values {
    typename C1::template Values<V> a;
    typename C2::template Values<V> b;
  };
  KOKKOS_FUNCTION bool segment_coeffs() const { return a.segment_coeffs() && b.segment_coeffs(); }
  template <bool AllSegment, class V>
  SEGOPS_WIDE_INLINE void vector_coeffs(index_t s, Splat<V>& kv) const {
    a.template vector_coeffs<AllSegment>(s, kv.a);
    b.template vector_coeffs<AllSegment>(s, kv.b);
  }
  template <class V>
  SEGOPS_WIDE_INLINE void vector_values(index_t i, const Splat<V>& kv, Values<V>& r) const {
    a.vector_values(i, kv.a, r.a);
    b.vector_values(i, kv.b, r.b);
  }
  template <class V>
  SEGOPS_WIDE_INLINE void vector_store(index_t i, const Values<V>& r) const {
    a.vector_store(i, r.a);
    b.vector_store(i, r.b);
  }
#endif
};
template <class C1>
struct Combinations<C1, void> {
  static constexpr bool kReadsCoefficients = true;
  static constexpr int kTerms = C1::kTerms;
  using value_type = typename C1::value_type;
  using Coeffs = typename C1::Coeffs;
  C1 a;
  KOKKOS_FORCEINLINE_FUNCTION Coeffs coeffs(index_t s) const { return a.coeffs(s); }
  KOKKOS_FORCEINLINE_FUNCTION void apply(index_t i, index_t s, const Coeffs& k) const {
    a.apply(i, s, k);
  }
  KOKKOS_FORCEINLINE_FUNCTION void row(index_t i, index_t s) const { a.row(i, s); }
  KOKKOS_FORCEINLINE_FUNCTION void operator()(index_t i, index_t s) const { row(i, s); }
  KOKKOS_FUNCTION index_t packed_width() const { return a.packed_width(); }
  template <class F>
  KOKKOS_FUNCTION void segment_rows(F&& f) const {
    a.segment_rows(f);
  }
  template <class F>
  KOKKOS_FUNCTION void applied_rows(F&& f) const {
    a.applied_rows(f);
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed(index_t i, index_t s) const {
    a.template packed<W>(i, s);
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed_apply(index_t i, index_t s, const Coeffs& k) const {
    a.template packed_apply<W>(i, s, k);
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION auto packed_values(index_t i, const Coeffs& k) const {
    return a.template packed_values<W>(i, k);
  }
  template <int W, class R>
  KOKKOS_FORCEINLINE_FUNCTION void packed_store(index_t i, const R& r) const {
    a.template packed_store<W>(i, r);
  }
#ifdef SEGOPS_HOST_VECTORS
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION bool packed_quad(index_t i,
                                               const index_t (&s)[4]) const requires requires {
    a.template packed_quad<W>(i, s);
  }
  { return a.template packed_quad<W>(i, s); }
  static constexpr bool kVectorRuns = C1::kVectorRuns;
  template <class V>
  using Splat = typename C1::template Splat<V>;
  template <class V>
  using Values = typename C1::template Values<V>;
  KOKKOS_FUNCTION bool segment_coeffs() const { return a.segment_coeffs(); }
  template <bool AllSegment, class V>
  SEGOPS_WIDE_INLINE void vector_coeffs(index_t s, Splat<V>& kv) const {
    a.template vector_coeffs<AllSegment>(s, kv);
  }
  template <class V>
  SEGOPS_WIDE_INLINE void vector_values(index_t i, const Splat<V>& kv, Values<V>& r) const {
    a.vector_values(i, kv, r);
  }
  template <class V>
  SEGOPS_WIDE_INLINE void vector_store(index_t i, const Values<V>& r) const {
    a.vector_store(i, r);
  }
#endif
};

/// Term k of a Combination: element row t times f * c(s), or times the constant w (no c).
template <class T, class S>
struct Term {
  Mat<const T> t;
  Mat<const S> c;
  double w, f;
};
template <class T, class S>
Term<T, S> term(Mat<const T> t, double w) {
  return {t, Mat<const S>{}, w, 0.0};
}
template <class T, class S>
Term<T, S> term(Mat<const T> t, Mat<const S> c, double f = 1.0) {
  return {t, c, 0.0, f};
}

template <class O, class T, class S, class... Terms>
Combination<O, T, S, sizeof...(Terms)> combination(Mat<O> o, const Terms&... terms) {
  Combination<O, T, S, sizeof...(Terms)> r{
      o, {terms.t...}, {terms.c...}, {static_cast<O>(terms.w)...}, {static_cast<O>(terms.f)...}};
  return r;
}

/// y_i += a_s x_i in place.
template <class Y, class T, class S>
struct AxpyInPlace {
  Mat<Y> y;
  Mat<const T> x;
  Mat<const S> a;
  KOKKOS_FUNCTION void operator()(index_t i, index_t s) const {
    const Y k = seg_value<Y>(a, s);
    for_cols(y.d, [&](index_t d) SEGOPS_INLINE { y(i, d) += k * static_cast<Y>(x(i, d)); });
  }
  KOKKOS_FUNCTION index_t packed_width() const { return common_packed_width(y, x); }
  template <int W>  // where packed_width() == W: the width and strides as constants
  KOKKOS_FORCEINLINE_FUNCTION void packed(index_t i, index_t s) const {
    const Y k = seg_value<Y>(a, s);
    for (int d = 0; d < W; ++d) y.ptr[i * W + d] += k * static_cast<Y>(x.ptr[i * W + d]);
  }
#ifdef SEGOPS_HOST_VECTORS
  /// Rows of 3 floats: elements i .. i + 3 with vectors, the four coefficients splat across their
  /// rows; false where a segment is dropped. N = 1e6, L = 3, 2 threads: sorted 0.51 -> 0.28 ms,
  /// unsorted 0.67 -> 0.49 ms.
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION bool packed_quad(index_t i, const index_t (&s)[4]) const
      requires(W == 3 && std::is_same_v<Y, float> && std::is_same_v<T, float> &&
               std::is_same_v<S, float>) {
    using V = HostVec<float>::type;
    V k[3], r[3];
    if (!load_splat3x4(a, s, k)) return false;
    for (int d = 0; d < 3; ++d)
      r[d] = load_vec<V>(y.ptr + i * 3 + 4 * d) + k[d] * load_vec<V>(x.ptr + i * 3 + 4 * d);
    store_packed3(y.ptr + i * 3, r);
    return true;
  }
#endif
  /// The per-segment inputs (segmented_transform prefetches them for unsorted ids).
  template <class F>
  KOKKOS_FUNCTION void segment_rows(F&& f) const {
    f(a);
  }
};

/// o_i = x_i + b_s, with b a row (M, D) or a per-segment scalar (M) added to every component.
template <class O, class X, class B>
struct AddRow {
  Mat<O> o;
  Mat<const X> x;
  Mat<const B> b;  // column stride 0 for a scalar b
  KOKKOS_FUNCTION void operator()(index_t i, index_t s) const {
    for (index_t d = 0; d < o.d; ++d)
      o(i, d) = static_cast<O>(x(i, d)) + (s < 0 ? O(0) : static_cast<O>(b(s, d)));
  }
  /// Packed rows, b included (rows of b, or b (M) with single values).
  KOKKOS_FUNCTION index_t packed_width() const { return common_packed_width(o, x, b); }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed(index_t i, index_t s) const {
    const bool in = s >= 0;
    const B* bp = b.ptr + (in ? s : 0) * W;
    for (int d = 0; d < W; ++d)
      o.ptr[i * W + d] = static_cast<O>(x.ptr[i * W + d]) + (in ? static_cast<O>(bp[d]) : O(0));
  }
#ifdef SEGOPS_HOST_VECTORS
  /// Rows of 3 floats: elements i .. i + 3 with vectors (as GatherRows::packed_quad). N = 1e6,
  /// L = 3, 2 threads: sorted 0.52 -> 0.46 ms, unsorted 0.80 -> 0.76 ms.
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION bool packed_quad(index_t i, const index_t (&s)[4]) const
      requires(W == 3 && std::is_same_v<O, float> && std::is_same_v<X, float> &&
               std::is_same_v<B, float>) {
    using V = HostVec<float>::type;
    V r[4], v[3];
    if (!load_rows3x4(b.ptr, b.n, s, r)) return false;
    pack_rows3x4(r, v);
    for (int k = 0; k < 3; ++k) v[k] += load_vec<V>(x.ptr + i * 3 + 4 * k);
    store_packed3(o.ptr + i * 3, v);
    return true;
  }
#endif
  /// The per-segment inputs (segmented_transform prefetches them for unsorted ids).
  template <class F>
  KOKKOS_FUNCTION void segment_rows(F&& f) const {
    f(b);
  }
};

/// An input view as a read-only accessor, an output view as a writable one.
template <class V>
Mat<const value_t<V>> rd(const V& v) {
  return as_const_mat(v);
}
template <class V>
Mat<value_t<V>> wr(const V& v) {
  return as_mat(v);
}
/// A per-segment (M, D) row view, or an (M) scalar view broadcast to width d (column stride 0).
template <class V>
Mat<const value_t<V>> segment_row(const V& v, index_t d) {
  auto m = as_const_mat(v);
  if constexpr (V::rank() == 1) {
    m.d = d;
    m.s1 = 0;
  }
  return m;
}

/// add's per-segment operand b (M) or (M, D): extents against the descriptor and x's width.
template <class Seg, class X, class B>
void check_add_operand(OpName op, const Seg& seg, const X& x, const B& b, const char* bname) {
  check_segments(op.name, bname, seg, b);
  if constexpr (B::rank() == 2) check_width(op.name, bname, width_of(x), b);
}

}  // namespace segops::impl
