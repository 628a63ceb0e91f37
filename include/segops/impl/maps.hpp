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
  for_cols(a.d, [&](index_t d)
                    SEGOPS_INLINE { r += static_cast<Acc>(a(e, d)) * static_cast<Acc>(b(e, d)); });
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
  /// Rows of one shape (as the ops check), so that flat_run scales by one width.
  KOKKOS_FUNCTION bool contiguous() const {
    return packed(a) && packed(b) && a.d == b.d && a.n == b.n;
  }
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
    const index_t d = a.d;
    return flat(DotRun<Acc, A, B>{a.ptr + lo * d, b.ptr + lo * d}, (hi - lo) * d, (a.n - lo) * d);
  }
};

/// <x, x> (rms_norm): DotMap's sums, in the same order, a sorted run's vectors loaded once each.
/// Rows of 3 floats, N = 1e6, 2 threads, sorted: rms_norm L = 3 0.60 -> 0.46 ms, L = 30 0.29 ->
/// 0.26 ms.
template <class Acc, class T>
struct SquaresMap : DotMap<Acc, T, T> {
  KOKKOS_FUNCTION auto flat_run(index_t lo, index_t hi) const {  // where contiguous()
    const Mat<const T>& x = this->a;
    return flat(SquareRun<Acc, T>{x.ptr + lo * x.d}, (hi - lo) * x.d, (x.n - lo) * x.d);
  }
};

/// Pair of a DotsMap: F <v_A, v_B> added to accumulator K.
template <int K, int A, int B, int F = 1>
struct Dot {
  enum : int { k = K, a = A, b = B, f = F };  // values, not variables (no device definition)
};

/// Sums of dot products of the element rows of NV views of one value type: accumulator k adds
/// F <v_A, v_B> for each pair Dot<k, A, B, F>, in pair order, each product sum formed column by
/// column (as row_dot). Every multi-product reduction of the bilinear family is one of these
/// (aliases below). Packed rows get constant strides (packed_row: PrivateReduce, the staged rows
/// of the deterministic option) and, for sorted segments, each pair's products summed as one flat
/// run (run_sums, as DotMap's flat_run); the rows of a generic walk re-read their strides and
/// widths at every element.
template <class Acc, class T, int NV, class... Pairs>
struct DotsMap {
  static constexpr int kWidth = [] {
    int w = 0;
    ((w = Pairs::k + 1 > w ? Pairs::k + 1 : w), ...);
    return w;
  }();
  Kokkos::Array<Mat<const T>, NV> v;

  KOKKOS_FUNCTION index_t gather_bytes() const {  // SumReducer::stage
    return NV * v[0].d * index_t(sizeof(T));
  }
  template <class F>
  KOKKOS_FUNCTION void operator()(index_t e, F&& f) const {
    sums([&](auto p) { return row_dot<Acc>(v[decltype(p)::a], v[decltype(p)::b], e); }, f);
  }
  KOKKOS_FUNCTION void prefetch_row(index_t e) const {
    for (int j = 0; j < NV; ++j) prefetch_rows(e, v[j]);
  }
  KOKKOS_FUNCTION index_t packed_width() const {
    const index_t w = packed_width_of(v[0]);
    for (int j = 1; j < NV; ++j)
      if (packed_width_of(v[j]) != w) return 0;
    return w;
  }
  template <int W, class F>  // where packed_width() == W: the same sums, constant strides
  KOKKOS_FUNCTION void packed_row(index_t e, F&& f) const {
    sums(
        [&](auto p) {
          const T* pa = v[decltype(p)::a].ptr + e * W;
          const T* pb = v[decltype(p)::b].ptr + e * W;
          Acc r = 0;
          for (int d = 0; d < W; ++d) r += static_cast<Acc>(pa[d]) * static_cast<Acc>(pb[d]);
          return r;
        },
        f);
  }
#ifdef SEGOPS_HOST_VECTORS
  /// Whether pair p adds <v_A, v_B> itself into accumulator p, for three pairs (inner_products).
  static constexpr bool kPairPerSum = [] {
    int p = 0;
    bool ok = sizeof...(Pairs) == 3;
    ((ok = ok && Pairs::k == p++ && Pairs::f == 1), ...);
    return ok;
  }();
  /// The three sums of element e over packed rows of 3 floats as one vector, lane 3 zero
  /// (SumReducer::scatter into copies whose rows are 4 floats apart, copy_stride): each pair's
  /// products as a vector, their lanes added across together (lane_sums), the way masked_sums
  /// adds a sorted run's. A view's last row is read value by value. Unsorted inner_products of
  /// rows of 3 floats, L = 3, 2 threads, Zen 5: N = 1e6 1.42-1.60 -> 1.07-1.10 ms, 3e5 0.44 ->
  /// 0.34 ms, 1e5 0.13 -> 0.08-0.10 ms (a vector built from the three scalar sums had gone
  /// through memory: N = 1e5, 212 -> 240 us).
  KOKKOS_FUNCTION auto row_vec3(index_t e) const
      requires(std::is_same_v<Acc, float>&& std::is_same_v<T, float>&& kPairPerSum) {
    using V = HostVec<float>::type;
    V x[NV];
    for (int q = 0; q < NV; ++q) x[q] = load_row3(v[q].ptr, v[q].n, e);
    V t[4] = {};
    int p = 0;
    ((t[p++] = x[Pairs::a] * x[Pairs::b]), ...);
    return lane_sums(t);
  }
#endif
  /// Values per element of each input (SumReducer::narrow_runs).
  KOKKOS_FUNCTION index_t flat_width() const { return v[0].d; }
  /// Sorted segments over packed rows, summed as runs (SumReducer::run_row).
  KOKKOS_FUNCTION bool packed_runs() const {
#ifdef SEGOPS_HOST_VECTORS
    if constexpr (DotRun<Acc, T, T>::vectors) return packed_width() > 0;
#endif
    return false;
  }
  /// a = the accumulators of elements [b, e) (where packed_runs()). A run that fits the masked
  /// vectors (a short segment) is summed pair by pair, its rows read again from L1 (in one pass
  /// where pairs share views: masked_sums, the same bits unless multiply-adds are contracted); a
  /// longer one in one pass over its elements, so that a long segment's rows are read from memory
  /// once.
  template <int W, int NVec>
  KOKKOS_FUNCTION void run_sums(index_t b, index_t e, Acc (&a)[W]) const {
    for (int k = 0; k < W; ++k) a[k] = Acc(0);
    if constexpr (W == kWidth) {
      const index_t d = v[0].d, len = (e - b) * d;
      index_t room = v[0].n;
      for (int j = 1; j < NV; ++j) room = Kokkos::min(room, v[j].n);
      room = (room - b) * d;
#ifdef SEGOPS_HOST_VECTORS
      constexpr index_t K = NVec * index_t(16 / sizeof(Acc));
      if (len <= K && room >= K) {
        if constexpr (kSharesViews && DotRun<Acc, T, T>::vectors)
          return masked_sums<NVec>(b * d, len, a);
        auto pair = [&](auto p) {
          const auto run =
              flat(DotRun<Acc, T, T>{v[decltype(p)::a].ptr + b * d, v[decltype(p)::b].ptr + b * d},
                   len, room);
          const Acc r = run_sum<Acc, NVec>(run);
          if constexpr (decltype(p)::f == 1)
            a[decltype(p)::k] += r;
          else
            a[decltype(p)::k] += Acc(decltype(p)::f) * r;
        };
        (pair(Pairs{}), ...);
        return;
      }
#endif
      auto rows = [&](const auto& row) {
        for (index_t q = b; q < e; ++q) row(q, [&](int k, Acc x) { a[k] += x; });
      };
      if (!with_packed_width(d, [&](auto pw) {
            rows([&](index_t q, auto&& f) { packed_row<decltype(pw)::value>(q, f); });
          }))
        rows([&](index_t q, auto&& f) { (*this)(q, f); });
    }
  }

 private:
  /// Whether pairs share views (inner_products: 3 pairs of 2 views), so that masked_sums' single
  /// pass loads fewer vectors than a run per pair.
  static constexpr bool kSharesViews = NV < 2 * int(sizeof...(Pairs));
#ifdef SEGOPS_HOST_VECTORS
  /// run_sums of a run of len <= NVec vectors at flat offset o: each pair's products summed as
  /// masked_run_vec sums them (vectors 0, 2, 4 and 1, 3, 5 into two accumulators, lanes past the
  /// run zero) and its lanes added across as lane_sum adds them, so the same bits as a masked run
  /// per pair (vectors 0 and 1 start the accumulators instead of being added to zero: that can
  /// change only the sign of a zero sum, and a[k] = 0 + r makes every zero +0). Where the compiler
  /// contracts multiply-adds (FMA with -ffp-contract=fast) the products, masked here before they
  /// are formed, may fuse with the additions, as the longer runs' scalar loop's do: other bits
  /// than a run per pair, as reproducible (keeping them apart, masking each product or passing it
  /// through rounded(), cost inner_products 7 and 3 more instructions per element). One loop over
  /// the vectors, each view's vector loaded and masked once for every pair, and the pairs' lanes
  /// added across together (lane_sums): a run per pair had the views' vectors all loaded up front,
  /// spilled, and a reduction per pair.
  template <int NVec, int W>
  KOKKOS_FUNCTION void masked_sums(index_t o, index_t len, Acc (&a)[W]) const {
    using V = typename HostVec<Acc>::type;
    using Bits = typename HostVec<Acc>::bits;
    constexpr int lanes = 16 / sizeof(Acc), NP = sizeof...(Pairs);
    constexpr int NT = (NP + lanes - 1) / lanes * lanes;  // whole vectors of pairs for lane_sums
    const auto* win = kRunWindow<Acc>.w + (kRunLength<Acc> - len);
    static_assert(NVec >= 2);
    V acc[2][NT] = {};
    for (int j = 0; j < NVec; ++j) {
      const Bits m = load_vec<Bits>(win + j * lanes);
      V x[NV];
      for (int q = 0; q < NV; ++q) x[q] = (V)(load_vec<Bits>(v[q].ptr + o + j * lanes) & m);
      int p = 0;
      if (j < 2)
        ((acc[j][p++] = x[Pairs::a] * x[Pairs::b]), ...);
      else
        ((acc[j & 1][p++] += x[Pairs::a] * x[Pairs::b]), ...);
    }
    Acc r[NT];
    for (int g = 0; g < NT; g += lanes) {
      V t[lanes];
      for (int i = 0; i < lanes; ++i) t[i] = acc[0][g + i] + acc[1][g + i];
      const V sums = lane_sums(t);
      for (int i = 0; i < lanes; ++i) r[g + i] = sums[i];
    }
    int p = 0;
    auto add = [&](auto pair) {
      using P = decltype(pair);
      if constexpr (P::f == 1)
        a[P::k] += r[p++];
      else
        a[P::k] += Acc(P::f) * r[p++];
    };
    (add(Pairs{}), ...);
  }
#endif
  /// f(k, accumulator k) for each k, from dot(p) = <v_A, v_B> of each pair p.
  template <class Dots, class F>
  KOKKOS_FORCEINLINE_FUNCTION void sums(const Dots& dot, F&& f) const {
    Acc acc[kWidth] = {};
    auto add = [&](auto p) {
      if constexpr (decltype(p)::f == 1)
        acc[decltype(p)::k] += dot(p);
      else
        acc[decltype(p)::k] += Acc(decltype(p)::f) * dot(p);
    };
    (add(Pairs{}), ...);
    for (int k = 0; k < kWidth; ++k) f(k, acc[k]);
  }
};

/// dot's double backward: f(0, <u,y> + <v,x>), views {u, y, v, x}.
template <class Acc, class T>
using DotSumMap = DotsMap<Acc, T, 4, Dot<0, 0, 1>, Dot<0, 2, 3>>;
/// axpby's backward orders: f(0, <x,g>), f(1, <y,g>), views {x, g, y}.
template <class Acc, class T>
using TwoDotsMap = DotsMap<Acc, T, 3, Dot<0, 0, 1>, Dot<1, 2, 1>>;
/// inner_products: f(0, <x,y>), f(1, <x,x>), f(2, <y,y>), views {x, y}.
template <class Acc, class T>
using InnerProductsMap = DotsMap<Acc, T, 2, Dot<0, 0, 1>, Dot<1, 0, 0>, Dot<2, 1, 1>>;
/// inner_products' double backward: f(0, <u,y> + <v,x>), f(1, 2<u,x>), f(2, 2<v,y>), views
/// {x, y, u, v}.
template <class Acc, class T>
using InnerProductsAdjointMap =
    DotsMap<Acc, T, 4, Dot<0, 2, 1>, Dot<0, 3, 0>, Dot<1, 2, 0, 2>, Dot<2, 3, 1, 2>>;

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
  /// Sorted segments over packed rows of 3 floats, summed as runs (SumReducer::run_row, TileReduce
  /// with rows of 9): run_sums adds each element's products as three vectors, a(e, r) times b's
  /// row.
  KOKKOS_FUNCTION bool packed_runs() const {
#ifdef SEGOPS_HOST_VECTORS
    if constexpr (std::is_same_v<Acc, float> && std::is_same_v<A, float> &&
                  std::is_same_v<B, float>)
      return packed_width_of(a) == 3 && packed_width_of(b) == 3;
#endif
    return false;
  }
  template <int W, int NV>
  KOKKOS_FUNCTION void run_sums(index_t lo, index_t hi, Acc (&s)[W]) const {
#ifdef SEGOPS_HOST_VECTORS
    if constexpr (W == 9 && std::is_same_v<Acc, float> && std::is_same_v<B, float>) {
      using V = HostVec<float>::type;
      V r[3] = {};
      const A* ap = a.ptr;
      const B* bp = b.ptr;
      const index_t bn = b.n;
      for (index_t p = lo; p < hi; ++p) {
        const B* row = bp + p * 3;
        const V x = p + 1 < bn ? load_vec<V>(row) : V{row[0], row[1], row[2], 0};
        for (int k = 0; k < 3; ++k) r[k] += ap[p * 3 + k] * x;
      }
      for (int k = 0; k < 3; ++k)
        for (int c = 0; c < 3; ++c) s[k * 3 + c] = r[k][c];
      return;
    }
#endif
    for (int k = 0; k < W; ++k) s[k] = Acc(0);
    for (index_t p = lo; p < hi; ++p) fixed<W>(p, [&](index_t k, Acc v) { s[k] += v; });
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
  KOKKOS_FUNCTION Acc& operator()(index_t s, index_t k) const {
    if (k < 0 || k >= K) SEGOPS_UNREACHABLE();  // k < K: no out-of-bounds path for the compiler
    return outs[k](s);
  }
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
