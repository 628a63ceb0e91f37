// SPDX-License-Identifier: Apache-2.0
// matvec with per-segment matrices. The transposed form o_i = A_s^T x_i is the plain form on a
// transposed accessor of A (strides swapped), and so are its gradients, so one set of functors
// serves both.
#pragma once

#include <Kokkos_Core.hpp>
#include <segops/impl/bilinear.hpp>
#include <segops/impl/host_vectors.hpp>
#include <segops/impl/views.hpp>

namespace segops::impl {

template <class T>
Mat3<T> transposed(Mat3<T> a) {
  return {a.ptr, a.n, a.c, a.r, a.s0, a.s2, a.s1};
}

/// o_i = A_s x_i (+ B_s y_i when Two): A, B (M, P, Q), x, y (N, Q), o (N, P).
template <class O, class T, class S, bool Two>
struct MatVec {
  Mat<O> o;
  Mat3<const S> a, b;
  Mat<const T> x, y;
  KOKKOS_FUNCTION void operator()(index_t i, index_t s) const {
    product(
        s, o.d, x.d, [&](index_t p) -> O& { return o(i, p); }, [&](index_t q) { return x(i, q); },
        [&](index_t q) { return y(i, q); });
  }
  /// The per-segment inputs (segmented_transform prefetches them for unsorted ids).
  template <class F>
  KOKKOS_FUNCTION void segment_rows(F&& f) const {
    if constexpr (Two)
      f(a, b);
    else
      f(a);
  }
  /// Packed rows of 3 in and out (3x3 matrices, the usual case): segmented_transform's loop with
  /// the products unrolled and the row strides constant; where A (and B) are packed 3x3 blocks,
  /// in either orientation, their strides too. The runtime strides of A cost an address
  /// computation per entry: rows of 3 floats, L = 3, 2 threads, matvec sorted N = 1e6 1.37 ->
  /// 0.94 ms, unsorted 1.87 -> 1.55 ms, sorted N = 2^25 42.5 -> 30.2 ms.
  KOKKOS_FUNCTION index_t packed_width() const {
    const bool three =
        packed_width_of(o) == 3 && packed_width_of(x) == 3 && (!Two || packed_width_of(y) == 3);
    return three ? 3 : 0;
  }
  /// The entries of a segment's matrix are a packed W x W block, rows contiguous (s2 == 1) or
  /// columns.
  template <int W>
  KOKKOS_FUNCTION static bool packed_block(const Mat3<const S>& m) {
    return m.r == W && m.c == W && m.s0 == W * W &&
           ((m.s1 == W && m.s2 == 1) || (m.s1 == 1 && m.s2 == W));
  }
  /// A (and B, in A's orientation) are packed W x W blocks.
  template <int W>
  KOKKOS_FUNCTION bool blocks_packed() const {
    return packed_block<W>(a) && (!Two || (packed_block<W>(b) && b.s1 == a.s1));
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed(index_t i, index_t s) const {
    if (blocks_packed<W>()) {
      if (a.s2 == 1)
        packed_as<W, W, 1>(i, s);
      else
        packed_as<W, 1, W>(i, s);
      return;
    }
    O* op = o.ptr + i * W;
    const T* xp = x.ptr + i * W;
    const T* yp = y.ptr + i * W;
    product(
        s, W, W, [&](index_t p) -> O& { return op[p]; }, [&](index_t q) { return xp[q]; },
        [&](index_t q) { return yp[q]; });
  }
  /// The same products as product(), in the same order, with W, S1 and S2 constant (for_cols
  /// unrolls the loops: left to the compiler, they stayed loops over an array on the stack).
  template <int W, int S1, int S2>
  KOKKOS_FORCEINLINE_FUNCTION void packed_as(index_t i, index_t s) const {
    O r[W] = {};
    if (s >= 0) {
      auto add = [&](const S* m, const T* v) SEGOPS_INLINE {
        for_cols(W, [&](index_t p) SEGOPS_INLINE {
          for_cols(W, [&](index_t q) SEGOPS_INLINE {
            r[p] += static_cast<O>(m[p * S1 + q * S2]) * static_cast<O>(v[q]);
          });
        });
      };
      add(a.ptr + s * (W * W), x.ptr + i * W);
      if constexpr (Two) add(b.ptr + s * (W * W), y.ptr + i * W);
    }
    for_cols(W, [&](index_t p) SEGOPS_INLINE { o.ptr[i * W + p] = r[p]; });
  }
  static constexpr bool kFloats =
      std::is_same_v<O, float> && std::is_same_v<T, float> && std::is_same_v<S, float>;
#ifdef SEGOPS_HOST_VECTORS
  /// Rows of 3 floats, A (and B) packed 3x3 blocks: elements i .. i + 3 with vectors
  /// (vec_product); false where a segment is dropped or the last one (its block's loads run 16
  /// bytes on), or where the rows of x (y) run to the array's end.
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION bool packed_quad(index_t i, const index_t (&s)[4]) const
      requires(W == 3 && kFloats) {
    if (!blocks_packed<3>() || !all_below(s, a.n - 1) || i + 4 >= x.n) return false;
    if constexpr (Two)
      if (!all_below(s, b.n - 1) || i + 4 >= y.n) return false;
    if (a.s2 == 1)
      quad_as<true>(i, s);
    else
      quad_as<false>(i, s);
    return true;
  }
  template <bool Rows>
  KOKKOS_FORCEINLINE_FUNCTION void quad_as(index_t i, const index_t (&s)[4]) const {
    HostVec<float>::type r[4];
    for_cols(4, [&](index_t k) SEGOPS_INLINE { r[k] = vec_product<Rows>(i + k, s[k]); });
    store_rows3x4(o.ptr + i * 3, r);
  }
  /// o_i of packed 3x3 blocks (rows contiguous where Rows, else columns) as a vector, lane p its
  /// o(p) (lane 3 unspecified), the products added as in product(). packed_as's scalar products
  /// compile to other code in other translation units (scalar in one, partly vectorised in
  /// another: matvec sorted N = 1e6, 0.90 against 1.29 ms); these do not. (One element at a
  /// time, where packed_as runs, they ran slower: L = 30 sorted 1.03 -> 1.37 ms.)
  template <bool Rows>
  KOKKOS_FORCEINLINE_FUNCTION HostVec<float>::type vec_product(index_t i, index_t s) const {
    HostVec<float>::type r{};
    add_products<Rows>(r, a.ptr + s * 9, x.ptr + i * 3);
    if constexpr (Two) add_products<Rows>(r, b.ptr + s * 9, y.ptr + i * 3);
    return r;
  }
  /// r(p) += m(p, 0) v(0), then m(p, 1) v(1), then m(p, 2) v(2), for the packed 3x3 block m (rows
  /// contiguous where Rows, else columns); 16 bytes from m + 6 and from v on are read.
  template <bool Rows>
  KOKKOS_FORCEINLINE_FUNCTION static void add_products(HostVec<float>::type& r, const float* m,
                                                       const float* v) {
    using V = HostVec<float>::type;
    const V x = load_vec<V>(v), m0 = load_vec<V>(m), m1 = load_vec<V>(m + 3),
            m2 = load_vec<V>(m + 6);
    // Rows: lane q of t_p is m(p, q) v(q); transposed, column q's products land in lane p.
    // Columns: m_q is column q.
    if constexpr (Rows) {
      const V t0 = m0 * x, t1 = m1 * x, t2 = m2 * x;
      const V lo = shuffle<0, 4, 1, 5>(t0, t1), hi = shuffle<2, 6, 3, 7>(t0, t1);
      r += shuffle<0, 1, 4, 4>(lo, t2);
      r += shuffle<2, 3, 5, 5>(lo, t2);
      r += shuffle<0, 1, 6, 6>(hi, t2);
    } else {
      r += m0 * shuffle<0, 0, 0, 0>(x, x);
      r += m1 * shuffle<1, 1, 1, 1>(x, x);
      r += m2 * shuffle<2, 2, 2, 2>(x, x);
    }
  }
#endif
  /// out(p) = sum_q A_s(p, q) xi(q) (+ B_s(p, q) yi(q)) for p < rows, q < cols; 0 for a dropped
  /// element (s < 0).
  template <class Out, class X, class Y>
  KOKKOS_FORCEINLINE_FUNCTION void product(index_t s, index_t rows, index_t cols, const Out& out,
                                           const X& xi, const Y& yi) const {
    for (index_t p = 0; p < rows; ++p) {
      O r = 0;
      if (s >= 0) {
        for (index_t q = 0; q < cols; ++q) r += static_cast<O>(a(s, p, q)) * static_cast<O>(xi(q));
        if constexpr (Two)
          for (index_t q = 0; q < cols; ++q)
            r += static_cast<O>(b(s, p, q)) * static_cast<O>(yi(q));
      }
      out(p) = r;
    }
  }
};

template <class V>
Mat3<const value_t<V>> rd3(const V& v) {
  auto m = as_mat3(v);
  return {m.ptr, m.n, m.r, m.c, m.s0, m.s1, m.s2};
}
template <class V>
Mat3<value_t<V>> wr3(const V& v) {
  return as_mat3(v);
}

/// A (M, R, C) against the descriptor, x of width C and o of width R (of the possibly transposed
/// matrix); throws naming the argument.
template <class Seg, class A>
void check_matrices(OpName op, const char* name, const Seg& seg, const A& a, index_t rows,
                    index_t cols, bool transposed) {
  check_segments(op.name, name, seg, a);
  const index_t r = static_cast<index_t>(a.extent(1)), c = static_cast<index_t>(a.extent(2));
  check_extent(op.name, name, "extent(1) must match the output row width", transposed ? cols : rows,
               r);
  check_extent(op.name, name, "extent(2) must match the input row width", transposed ? rows : cols,
               c);
}

}  // namespace segops::impl
