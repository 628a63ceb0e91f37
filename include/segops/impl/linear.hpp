// SPDX-License-Identifier: Apache-2.0
// The linear family (sum, mean, component_sum, broadcast) in terms of the two building blocks.
// Forward, backward and double backward of each op are listed side by side:
//   sum            fwd: reduce rows          bwd: gather rows           dbl: reduce rows
//   mean           fwd: reduce rows / c      bwd: gather rows / c       dbl: reduce rows / c
//   component_sum  fwd: reduce row sums      bwd: gather scalar to row  dbl: reduce row sums
//   broadcast      fwd: gather rows          bwd: reduce rows           dbl: gather rows
#pragma once

#include <Kokkos_Core.hpp>
#include <segops/impl/segmented_reduce.hpp>
#include <segops/impl/segmented_transform.hpp>
#include <segops/impl/views.hpp>

namespace segops::impl {

/// One accumulator: the sum of the element's components.
template <class Acc, class T>
struct RowSumMap {
  Mat<const T> x;
  /// Bytes of the row an element reads (SumReducer::stage): the deterministic option's tiles over
  /// the permutation then gather one staged row sum per position instead of a random row. A single
  /// column is its own sum: nothing to stage.
  KOKKOS_FUNCTION index_t gather_bytes() const { return x.d > 1 ? x.d * index_t(sizeof(T)) : 0; }
  /// ... from 8 MiB of rows on, not from a core's L2 as for maps over several views: staging keeps
  /// one random read per position, only smaller, and pays where the rows leave the last-level
  /// cache. Rows of 3 floats, L = 3, 2 threads (32 MiB L3): N = 2e6 8.1-12.2 -> 5.2-6.4 ms, 1.5e6
  /// 4.2-5.7 -> 3.6-3.7 ms, 1e6 2.4 -> 2.3-2.4 ms (8 MiB L3: 8.4-10.6 -> 5.1-6.2 ms), but 5e5
  /// 1.09-1.12 -> 1.12-1.18 ms and 3e5 0.83-0.85 -> 0.89-1.15 ms.
  static constexpr index_t kStageFromBytes = 4 * kCacheBytes;
  template <class F>
  KOKKOS_FUNCTION void operator()(index_t e, F&& f) const {
    Acc a = 0;
    for (index_t d = 0; d < x.d; ++d) a += static_cast<Acc>(x(e, d));
    f(0, a);
  }
  KOKKOS_FUNCTION bool contiguous() const { return packed(x); }
  KOKKOS_FUNCTION void prefetch_row(index_t e) const { prefetch_rows(e, x); }
  KOKKOS_FUNCTION index_t packed_width() const { return packed_width_of(x); }
  template <int W, class F>  // where packed_width() == W: the same sum, constant strides
  KOKKOS_FUNCTION void packed_row(index_t e, F&& f) const {
    Acc a = 0;
    for (int d = 0; d < W; ++d) a += static_cast<Acc>(x.ptr[e * W + d]);
    f(0, a);
  }
#ifdef SEGOPS_HOST_VECTORS
  /// The sums of elements e .. e + 3 over packed rows of 3 floats as one vector (where
  /// packed_width() == 3; SumReducer::scatter): their components gathered by columns3x4 and
  /// added as packed_row adds them, the same bits.
  HostVec<float>::type row_sums4(index_t e) const
      requires(std::is_same_v<Acc, float>&& std::is_same_v<T, float>) {
    using F = HostVec<float>::type;
    F c[3];
    columns3x4(x.ptr + e * 3, c);
    return ((F{} + c[0]) + c[1]) + c[2];
  }
#endif
  KOKKOS_FUNCTION index_t flat_width() const { return x.d; }
  KOKKOS_FUNCTION auto flat_run(index_t b, index_t e) const {  // where contiguous()
    return flat(SumRun<Acc, T>{x.ptr + b * x.d}, (e - b) * x.d, (x.n - b) * x.d);
  }
};

template <class Acc, class Seg>
Acc* carry_of(const Seg& seg) {
  return reinterpret_cast<Acc*>(seg.carry().data());
}

/// out(s, :) = sum of x(i, :) over segment s, then `fin`.
template <class Exec, class Seg, class T, class Acc, class Fin = NoFinalize>
void reduce_rows(const Exec& exec, const Seg& seg, Mat<const T> x, Mat<Acc> out, const char* label,
                 Fin fin = {}) {
  segmented_reduce(exec, seg,
                   make_sum_reducer<Acc>(RowMap<Acc, T>{x}, out, carry_of<Acc>(seg), out.d, fin),
                   label);
}

/// out(s) = sum of all components of x(i, :) over segment s, then `fin`.
template <class Exec, class Seg, class T, class Acc, class Fin = NoFinalize>
void reduce_row_sums(const Exec& exec, const Seg& seg, Mat<const T> x, Mat<Acc> out,
                     const char* label, Fin fin = {}) {
  segmented_reduce(exec, seg,
                   make_sum_reducer<Acc>(RowSumMap<Acc, T>{x}, out, carry_of<Acc>(seg), 1, fin),
                   label);
}

/// w(s, :) = the scaled row that `g` gathers for segment s, in the same operations.
template <class G, class T>
struct ScaledRows {
  G g;
  Mat<T> w;
  KOKKOS_FUNCTION void operator()(index_t s) const {
    const T k = g.coeffs(s);
    for_cols(w.d, [&](index_t d) SEGOPS_INLINE { w(s, d) = G::scaled(g.v(s, d), k); });
  }
};

/// o(i, :) = v(s(i), :) [/ c_s]; zeros for dropped ids. Splat: v(s(i)) in every component.
template <bool Splat = false, class Exec, class Seg, class T, class S, class Scale = Unscaled>
void gather_rows(const Exec& exec, const Seg& seg, Mat<const S> v, Mat<T> o, const char* label,
                 Scale scale = {}) {
  using G = GatherRows<T, S, Scale, Splat>;
  const G g{o, v, scale};
  if constexpr (!Scale::identity) {
    // Where stage_per_segment: the scaled rows are computed once per segment into the
    // workspace, and the elements gather one row (as jax's vjp of a mean does), instead of a row
    // and a count and a division. mean_backward, L = 3, 2 threads: rows of 3 floats N = 1e6
    // 2.25-2.29 -> 1.92-1.97 ms, N = 2^25 448-507 -> 223-229 ms; single floats N = 1e6 1.51 ->
    // 0.81-0.84 ms.
    const index_t m = seg.num_segments();
    const auto ws = workspace_of<T>(seg);
    if (ws.room >= m * o.d && stage_per_segment(seg, segment_row_bytes(g))) {
      const Mat<T> w{ws.data, m, o.d, o.d, 1};
      segment_transform(exec, seg, ScaledRows<G, T>{g, w}, label);
      return segmented_transform(
          exec, seg, GatherRows<T, T>{o, Mat<const T>{w.ptr, m, o.d, o.d, 1}, {}}, label);
    }
  }
  segmented_transform(exec, seg, g, label);
}

template <class Seg>
auto divide_by_count(const Seg& seg) {
  return DivideByCount<decltype(seg.counts())>{seg.counts()};
}
template <class Seg>
auto divided_by_count(const Seg& seg) {
  return DividedByCount<decltype(seg.counts())>{seg.counts()};
}

template <class V>
auto as_const_mat(const V& v) {
  auto m = as_mat(v);
  return Mat<const typename V::non_const_value_type>{m.ptr, m.n, m.d, m.s0, m.s1};
}

}  // namespace segops::impl
