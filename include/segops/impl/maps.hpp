// SPDX-License-Identifier: Apache-2.0
// Per-element maps reduced by SumReducer (see segmented_reduce.hpp): each calls f(k, value) for its
// accumulators k. Products are formed in the accumulation type Acc.
#pragma once

#include <Kokkos_Core.hpp>
#include <segops/impl/segmented_reduce.hpp>
#include <segops/impl/views.hpp>

namespace segops::impl {

template <class Acc, class A, class B>
KOKKOS_FUNCTION Acc row_dot(const Mat<const A>& a, const Mat<const B>& b, index_t e) {
  Acc r = 0;
  for_cols(a.d, [&](index_t d) { r += static_cast<Acc>(a(e, d)) * static_cast<Acc>(b(e, d)); });
  return r;
}

/// f(0, <a_e, b_e>)
template <class Acc, class A, class B>
struct DotMap {
  Mat<const A> a;
  Mat<const B> b;
  /// Bytes of the rows of several views that an element reads (SumReducer::stage); 0 for <x, x>.
  KOKKOS_FUNCTION index_t gather_bytes() const {
    if (static_cast<const void*>(a.ptr) == static_cast<const void*>(b.ptr)) return 0;
    return a.d * index_t(sizeof(A) + sizeof(B));
  }
  template <class F>
  KOKKOS_FUNCTION void operator()(index_t e, F&& f) const {
    f(0, row_dot<Acc>(a, b, e));
  }
  KOKKOS_FUNCTION bool contiguous() const { return packed(a) && packed(b); }
  KOKKOS_FUNCTION void prefetch_row(index_t e) const { prefetch_rows(e, a, b); }
  KOKKOS_FUNCTION index_t packed_width() const { return common_packed_width(a, b); }
  template <int W, class F>  // where packed_width() == W: the same sum, constant strides
  KOKKOS_FUNCTION void packed_row(index_t e, F&& f) const {
    const A* ap = a.ptr + e * W;
    const B* bp = b.ptr + e * W;
    Acc r = 0;
    for (int d = 0; d < W; ++d) r += static_cast<Acc>(ap[d]) * static_cast<Acc>(bp[d]);
    f(0, r);
  }
  KOKKOS_FUNCTION index_t flat_width() const { return a.d; }
  KOKKOS_FUNCTION auto flat_run(index_t lo, index_t hi) const {  // where contiguous()
    const index_t room = Kokkos::min(a.n, b.n) - lo;
    return flat(DotRun<Acc, A, B>{a.ptr + lo * a.d, b.ptr + lo * b.d}, (hi - lo) * a.d, room * a.d);
  }
};

/// f(0, <a_e, b_e> + <c_e, d_e>)
template <class Acc, class A, class B, class C, class D>
struct DotSumMap {
  KOKKOS_FUNCTION index_t gather_bytes() const {  // SumReducer::stage
    return a.d * index_t(sizeof(A) + sizeof(B) + sizeof(C) + sizeof(D));
  }
  Mat<const A> a;
  Mat<const B> b;
  Mat<const C> c;
  Mat<const D> d;
  template <class F>
  KOKKOS_FUNCTION void operator()(index_t e, F&& f) const {
    f(0, row_dot<Acc>(a, b, e) + row_dot<Acc>(c, d, e));
  }
};

/// f(0, <a_e, b_e>), f(1, <c_e, d_e>)
template <class Acc, class A, class B, class C, class D>
struct TwoDotsMap {
  KOKKOS_FUNCTION index_t gather_bytes() const {  // SumReducer::stage
    return a.d * index_t(sizeof(A) + sizeof(B) + sizeof(C) + sizeof(D));
  }
  Mat<const A> a;
  Mat<const B> b;
  Mat<const C> c;
  Mat<const D> d;
  template <class F>
  KOKKOS_FUNCTION void operator()(index_t e, F&& f) const {
    f(0, row_dot<Acc>(a, b, e));
    f(1, row_dot<Acc>(c, d, e));
  }
};

/// f(0, <x,y>), f(1, <x,x>), f(2, <y,y>): the three inner products in one pass.
template <class Acc, class X, class Y>
struct InnerProductsMap {
  Mat<const X> x;
  Mat<const Y> y;
  template <class F>
  KOKKOS_FUNCTION void operator()(index_t e, F&& f) const {
    f(0, row_dot<Acc>(x, y, e));
    f(1, row_dot<Acc>(x, x, e));
    f(2, row_dot<Acc>(y, y, e));
  }
};

/// inner_products' double backward: f(0, <u,y>+<v,x>), f(1, 2<u,x>), f(2, 2<v,y>).
template <class Acc, class X, class Y, class U, class V>
struct InnerProductsAdjointMap {
  Mat<const X> x;
  Mat<const Y> y;
  Mat<const U> u;
  Mat<const V> v;
  template <class F>
  KOKKOS_FUNCTION void operator()(index_t e, F&& f) const {
    f(0, row_dot<Acc>(u, y, e) + row_dot<Acc>(v, x, e));
    f(1, Acc(2) * row_dot<Acc>(u, x, e));
    f(2, Acc(2) * row_dot<Acc>(v, y, e));
  }
};

/// f(r * C + c, a(e, r) * b(e, c)): the outer product a_e b_e^T, flattened row-major.
template <class Acc, class A, class B>
struct OuterMap {
  Mat<const A> a;
  Mat<const B> b;
  template <class F>
  KOKKOS_FUNCTION void operator()(index_t e, F&& f) const {
    for (index_t r = 0; r < a.d; ++r) {
      const Acc ar = static_cast<Acc>(a(e, r));
      for (index_t c = 0; c < b.d; ++c) f(r * b.d + c, ar * static_cast<Acc>(b(e, c)));
    }
  }
  KOKKOS_FUNCTION void prefetch_row(index_t e) const { prefetch_rows(e, a, b); }
  KOKKOS_FUNCTION index_t packed_width() const { return common_packed_width(a, b); }
  template <int W, class F>  // where packed_width() == W: W x W products, constant indices
  KOKKOS_FUNCTION void packed_row(index_t e, F&& f) const {
    const A* ap = a.ptr + e * W;
    const B* bp = b.ptr + e * W;
    square<W>([&](int r) { return ap[r]; }, [&](int c) { return bp[c]; }, f);
  }
  /// f(r * D + c, a_r b_c) for the D x D products of the rows read by ra and rb.
  template <int D, class RA, class RB, class F>
  KOKKOS_FORCEINLINE_FUNCTION static void square(const RA& ra, const RB& rb, F&& f) {
    for (int r = 0; r < D; ++r) {
      const Acc ar = static_cast<Acc>(ra(r));
      for (int c = 0; c < D; ++c) f(r * D + c, ar * static_cast<Acc>(rb(c)));
    }
  }
  /// Width W = a.d * b.d known at compile time (SumReducer::reduce_fixed): every accumulator index
  /// a constant, so the row stays in registers; square rows (3x3 above all) fully unrolled.
  static constexpr bool kSquareRows = true;
  template <int W, class F>
  KOKKOS_FUNCTION void fixed(index_t e, F&& f) const {
    constexpr int D = W == 9 ? 3 : W == 4 ? 2 : W == 1 ? 1 : 0;
    if constexpr (D > 0) {
      if (a.d == D && b.d == D)
        return square<D>([&](int r) { return a(e, r); }, [&](int c) { return b(e, c); }, f);
    }
    for (int k = 0; k < W; ++k) {
      const index_t r = k / b.d, c = k % b.d;
      f(k, static_cast<Acc>(a(e, r)) * static_cast<Acc>(b(e, c)));
    }
  }
};

/// Several per-segment scalar outputs (M) seen as one (M, K) accumulator row.
template <class Acc, int K>
struct OutTuple {
  static constexpr int static_width = K;
  Kokkos::Array<Mat<Acc>, K> outs;
  KOKKOS_FUNCTION Acc& operator()(index_t s, index_t k) const { return outs[k](s); }
};

/// A per-segment matrix output (M, R, C) seen as an (M, R*C) accumulator row.
template <class Acc>
struct MatrixOut {
  Mat3<Acc> a;
  /// Rows of w = R*C stored back to back, or null (SumReducer::dense_rows)
  KOKKOS_FUNCTION Acc* dense_rows(index_t w) const {
    return a.s2 == 1 && a.s1 == a.c && a.s0 == w ? a.ptr : nullptr;
  }
  KOKKOS_FUNCTION Acc& operator()(index_t s, index_t k) const {
    // rows stored back to back (LayoutRight, the usual case): k is the offset, no division
    if (a.s2 == 1 && a.s1 == a.c) return a.ptr[s * a.s0 + k];
    return a(s, k / a.c, k % a.c);
  }
};

}  // namespace segops::impl
