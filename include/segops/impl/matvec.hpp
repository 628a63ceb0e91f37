// SPDX-License-Identifier: Apache-2.0
// matvec with per-segment matrices. The transposed form o_i = A_s^T x_i is the plain form on a
// transposed accessor of A (strides swapped), and so are its gradients, so one set of functors
// serves both.
#pragma once

#include <Kokkos_Core.hpp>
#include <segops/impl/bilinear.hpp>
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
  /// the products unrolled and the row strides constant.
  KOKKOS_FUNCTION index_t packed_width() const {
    const bool three =
        packed_width_of(o) == 3 && packed_width_of(x) == 3 && (!Two || packed_width_of(y) == 3);
    return three ? 3 : 0;
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed(index_t i, index_t s) const {
    O* op = o.ptr + i * W;
    const T* xp = x.ptr + i * W;
    const T* yp = y.ptr + i * W;
    product(
        s, W, W, [&](index_t p) -> O& { return op[p]; }, [&](index_t q) { return xp[q]; },
        [&](index_t q) { return yp[q]; });
  }
  /// out(p) = sum_q A_s(p, q) xi(q) (+ B_s(p, q) yi(q)) for p < rows, q < cols; 0 for a dropped
  /// element (s < 0). Constant rows and cols (packed<W>) unroll both loops.
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
