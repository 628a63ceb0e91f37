// SPDX-License-Identifier: Apache-2.0
// The nonlinear family: rms_norm, max_norm, max, min. Forward reductions use SumReducer (rms) or
// MaxLocReducer (max_norm, max, min); the backward orders are the per-element and per-segment
// functors below, side by side with their math.
#pragma once

#include <Kokkos_Core.hpp>
#include <segops/impl/bilinear.hpp>
#include <segops/impl/maxloc.hpp>
#include <segops/impl/views.hpp>
#include <type_traits>

namespace segops::impl {

// ---- rms_norm: o_s = sqrt(sum ||x_i||^2 / c_s); n_s = 1 / (c_s o_s), 0 if o_s = 0 ----

template <class R, class O, class Counts>
KOKKOS_FUNCTION R rms_n(const Mat<const O>& o, const Counts& counts, index_t s) {
  const R os = static_cast<R>(o(s));
  return os != R(0) ? R(1) / (static_cast<R>(counts(s)) * os) : R(0);
}

/// Forward finalize: o_s = sqrt(o_s / c_s), 0 for an empty segment.
template <class Counts>
struct RmsFinalize {
  static constexpr bool has_finalize = true;
  Counts counts;
  template <class Out>
  KOKKOS_FUNCTION void operator()(index_t s, const Out& out, index_t w) const {
    (*this)(s, out, w, counts(s));
  }
  template <class Out>
  KOKKOS_FUNCTION void operator()(index_t s, const Out& out, index_t, index_t c) const {
    using R = std::remove_reference_t<decltype(out(s, 0))>;
    out(s, 0) = c > 0 ? Kokkos::sqrt(out(s, 0) / static_cast<R>(c)) : R(0);
  }
#ifdef SEGOPS_HOST_VECTORS
  template <class V>
  V finish(V x, V n) const {  // SumReducer::batch_runs
    return vec_sqrt(x / n);
  }
#endif
};

/// Backward: gx_i = g_s n_s x_i.
template <class GX, class T, class S, class Counts>
struct RmsBackward {
  Mat<GX> gx;
  Mat<const T> x;
  Mat<const S> o, g;
  Counts counts;
  /// g_s n_s (0 for a dropped element), and element i from it (segmented_transform).
  KOKKOS_FUNCTION GX coeffs(index_t s) const {
    return s < 0 ? GX(0) : static_cast<GX>(g(s)) * rms_n<GX>(o, counts, s);
  }
  KOKKOS_FORCEINLINE_FUNCTION void apply(index_t i, index_t, GX k) const {
    for_cols(gx.d, [&](index_t d) SEGOPS_INLINE { gx(i, d) = k * static_cast<GX>(x(i, d)); });
  }
  KOKKOS_FORCEINLINE_FUNCTION void operator()(index_t i, index_t s) const {
    apply(i, s, coeffs(s));
  }
  KOKKOS_FUNCTION index_t packed_width() const { return common_packed_width(gx, x); }
  /// The per-segment inputs (segmented_transform prefetches them for unsorted ids).
  template <class F>
  KOKKOS_FUNCTION void segment_rows(F&& f) const {
    f(o, g, counts);
  }
  template <class F>  // those that apply reads: none besides the coefficients
  KOKKOS_FUNCTION void applied_rows(F&& f) const {
    f();
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed(index_t i, index_t s) const {
    packed_apply<W>(i, s, coeffs(s));
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed_apply(index_t i, index_t, GX k) const {
    for (int d = 0; d < W; ++d) gx.ptr[i * W + d] = k * static_cast<GX>(x.ptr[i * W + d]);
  }
};

/// Double backward, reduction finalize: gg_s = n_s sum <u_i, x_i>.
template <class S, class Counts>
struct RmsScaleByN {
  static constexpr bool has_finalize = true;
  Mat<const S> o;
  Counts counts;
  template <class Out>
  KOKKOS_FUNCTION void operator()(index_t s, const Out& out, index_t) const {
    using R = std::remove_reference_t<decltype(out(s, 0))>;
    out(s, 0) *= rms_n<R>(o, counts, s);
  }
#ifdef SEGOPS_HOST_VECTORS
  /// The same for segments s, s + 1, ... in x's lanes (SumReducer's batches), lane for lane.
  template <class V>
  V finish_at(index_t s, V x, V) const {
    using R = std::remove_cvref_t<decltype(x[0])>;
    using B = typename HostVec<R>::bits;
    V os, c;
    for (int l = 0; l < int(sizeof(V) / sizeof(R)); ++l) {
      os[l] = static_cast<R>(o(s + l));
      c[l] = static_cast<R>(counts(s + l));
    }
    const V n = (V)((B)((V{} + R(1)) / (c * os)) & (B)(os != V{}));  // rms_n: 0 where o_s = 0
    return x * n;
  }
#endif
};

/// Double backward, per element: x+_i = g_s n_s u_i - g_s n_s^3 c_s p_s x_i with p_s = gg_s / n_s,
/// i.e. x+_i = g_s n_s (u_i - n_s c_s gg_s x_i).
template <class XP, class T, class S, class GG, class Counts>
struct RmsDoubleBackward {
  Mat<XP> xp;
  Mat<const T> x, u;
  Mat<const S> o, g;
  Mat<const GG> gg;
  Counts counts;
  struct Coeffs {
    XP k, l;  // x+_i = k (u_i - l x_i); zeros (value-initialised) for a dropped element
  };
  KOKKOS_FUNCTION Coeffs coeffs(index_t s) const {
    if (s < 0) return {};
    const XP n = rms_n<XP>(o, counts, s);
    return {static_cast<XP>(g(s)) * n, n * static_cast<XP>(counts(s)) * static_cast<XP>(gg(s))};
  }
  KOKKOS_FORCEINLINE_FUNCTION void apply(index_t i, index_t, const Coeffs& c) const {
    for_cols(xp.d, [&](index_t d) SEGOPS_INLINE {
      xp(i, d) = c.k * (static_cast<XP>(u(i, d)) - c.l * static_cast<XP>(x(i, d)));
    });
  }
  KOKKOS_FORCEINLINE_FUNCTION void operator()(index_t i, index_t s) const {
    apply(i, s, coeffs(s));
  }
  KOKKOS_FUNCTION index_t packed_width() const { return common_packed_width(xp, x, u); }
  /// The per-segment inputs (segmented_transform prefetches them for unsorted ids).
  template <class F>
  KOKKOS_FUNCTION void segment_rows(F&& f) const {
    f(o, g, gg, counts);
  }
  template <class F>  // those that apply reads: none besides the coefficients
  KOKKOS_FUNCTION void applied_rows(F&& f) const {
    f();
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed(index_t i, index_t s) const {
    packed_apply<W>(i, s, coeffs(s));
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed_apply(index_t i, index_t, const Coeffs& c) const {
    for (int d = 0; d < W; ++d)
      xp.ptr[i * W + d] =
          c.k * (static_cast<XP>(u.ptr[i * W + d]) - c.l * static_cast<XP>(x.ptr[i * W + d]));
  }
};

// ---- max_norm: o_s = max ||x_i||, arg i*; gradient flows through i* only ----

/// The backward orders of max_norm, per segment, once the element output is zeroed (the gradient
/// reaches one element per segment: zeroing all and writing that one row beats a select per
/// element, and with unsorted ids it reads no per-segment row per element). With i = argmax(s)
/// (trusted to be the forward's: only its range is checked), when ||x_i|| > 0:
///   backward:        gx_i = g_s x_i / ||x_i||;
///   double backward: gg_s = p = <x^_i, u_i>, x+_i = (g_s / ||x_i||)(u_i - x^_i p); gg_s = 0
///   otherwise.
template <class GX, class T, class S, class I, bool Double, class GG = GX>
struct MaxNormScatter {
  Mat<GX> gx;
  Mat<const T> x, u;
  Mat<const I> arg;
  Mat<const S> g;
  Mat<GG> gg;  // Double only
  KOKKOS_FUNCTION void operator()(index_t s) const { row(s, StridedAt{}, x.d); }
  /// Prefetched at every size (no prefetch_pays): the row's norm waits on the load of x_i, which
  /// the prefetch takes out of the way. Unsorted ids, L = 3, rows of 3 floats, 2 threads, on a
  /// 2-vCPU Zen 5 (scripts/ab.sh, without the prefetch against with it, medians of the pair
  /// ratios): backward 1.25-1.53 at N = 1e6, 1.61 at 1e7 and 2^25; double backward 2.00, 1.98,
  /// 1.94. ArgScatter, which only stores, is another matter.
  KOKKOS_FUNCTION void prefetch_segment(index_t s) const {  // SegmentBlocks
    const index_t i = static_cast<index_t>(arg(s));
    if (i < 0 || i >= x.n) return;
    prefetch_row_of<true>(i, x);  // kept (prefetch_kept): GCC 12 dropped these
    if constexpr (Double) prefetch_row_of<true>(i, u);
    prefetch_kept<true>(&gx(i, 0));
  }
  /// Rows packed this wide: segment_transform runs row with PackedAt (constant strides).
  KOKKOS_FUNCTION index_t packed_width() const {
    if constexpr (Double)
      return common_packed_width(gx, x, u);
    else
      return common_packed_width(gx, x);
  }
  /// Segment s, with element (r, d) of a view m read as at(m, r, d) and rows dw wide.
  template <class At, class Width>
  KOKKOS_FORCEINLINE_FUNCTION void row(index_t s, const At& at, Width dw) const {
    using R = decltype(GX() + GG());  // the wider of the two outputs' types
    const index_t i = static_cast<index_t>(arg(s));
    const bool in = i >= 0 && i < x.n;
    R nrm = 0, p = 0;
    if (in) {
      for (index_t d = 0; d < dw; ++d) {
        nrm += static_cast<R>(at(x, i, d)) * static_cast<R>(at(x, i, d));
        if constexpr (Double) p += static_cast<R>(at(x, i, d)) * static_cast<R>(at(u, i, d));
      }
      nrm = Kokkos::sqrt(nrm);
    }
    if constexpr (Double) gg(s) = nrm > R(0) ? static_cast<GG>(p / nrm) : GG(0);
    if (!(nrm > R(0))) return;
    const GX k = static_cast<GX>(static_cast<R>(g(s)) / nrm);
    if constexpr (!Double) {
      for (index_t d = 0; d < dw; ++d) at(gx, i, d) = k * static_cast<GX>(at(x, i, d));
    } else {
      const GX xn = static_cast<GX>(R(1) / nrm), ph = static_cast<GX>(p / nrm);
      for (index_t d = 0; d < dw; ++d)
        at(gx, i, d) = k * (static_cast<GX>(at(u, i, d)) - static_cast<GX>(at(x, i, d)) * xn * ph);
    }
  }
};

// ---- max, min per component: the gradient goes to the arg element of each component ----

/// Backward, per segment, once gx is zeroed: gx(a, d) = g(s, d) at a = arg(s, d) (trusted to be
/// the forward's: only its range is checked; see MaxNormScatter for why).
template <class GX, class S, class I>
struct ArgScatter {
  Mat<GX> gx;
  Mat<const S> g;
  Mat<const I> arg;
  KOKKOS_FUNCTION void operator()(index_t s) const { row(s, StridedAt{}, gx.d); }
  // No prefetch_segment: stores retire into the store buffer without waiting for their lines (the
  // gathers' loads below do wait), so fetching the lines ahead only added work. Without the
  // prefetch against with it (scripts/ab.sh, medians of the pair ratios), unsorted ids, L = 3,
  // 2 threads, on a 2-vCPU Zen 5: rows of 3 floats N = 1e5 0.56, 3e5 0.58, 1e6 0.63-0.69, 2e6
  // 0.97; single floats N = 1e6 0.81, 3e6 0.77. (On a 2-vCPU Xeon it had paid: 0.78-0.84 with it.)
  KOKKOS_FUNCTION index_t packed_width() const { return common_packed_width(gx, g, arg); }
  template <class At, class Width>
  KOKKOS_FORCEINLINE_FUNCTION void row(index_t s, const At& at, Width dw) const {
    for (index_t d = 0; d < dw; ++d) {
      const index_t a = static_cast<index_t>(at(arg, s, d));
      if (a >= 0 && a < gx.n) at(gx, a, d) = static_cast<GX>(at(g, s, d));
    }
  }
};

/// Double backward: gg(s, d) = u(arg(s, d), d), 0 for an empty segment.
template <class GG, class T, class I>
struct ArgGather {
  Mat<GG> gg;
  Mat<const T> u;
  Mat<const I> arg;
  KOKKOS_FUNCTION void operator()(index_t s) const { row(s, StridedAt{}, gg.d); }
  KOKKOS_FUNCTION void prefetch_segment(index_t s) const {  // SegmentBlocks
    for (index_t d = 0; d < gg.d; ++d) {
      const index_t i = static_cast<index_t>(arg(s, d));
      if (i >= 0 && i < u.n) prefetch_kept(&u(i, d));
    }
  }
  /// Where u outgrows half the last-level cache (what the other cores leave of it): the gathers'
  /// loads do wait in the pipeline, for lines farther away there. Unsorted ids, L = 3, 2 threads,
  /// Zen 5 as above, without the prefetch against with it: u of 12 MB 0.55 (L = 1), 0.73-0.85
  /// (L = 3), 0.84 (L = 30); 14-16 MB 0.83; 18 MB 1.02; 24 MB 1.02-1.34; 40 MB 1.13; 400 MB (2^25
  /// rows of 3) 1.36.
  bool prefetch_pays() const { return u.n * u.d * index_t(sizeof(T)) > kLastLevelBytes / 2; }
  KOKKOS_FUNCTION index_t packed_width() const { return common_packed_width(gg, u, arg); }
  template <class At, class Width>
  KOKKOS_FORCEINLINE_FUNCTION void row(index_t s, const At& at, Width dw) const {
    for (index_t d = 0; d < dw; ++d) {
      const index_t i = static_cast<index_t>(at(arg, s, d));
      at(gg, s, d) = i >= 0 && i < u.n ? static_cast<GG>(at(u, i, d)) : GG(0);
    }
  }
};

template <class V, class Exec>
inline constexpr bool is_arg_view_v = [] {
  if constexpr (is_accessible_view_v<V, Exec>)
    return (std::is_same_v<typename V::non_const_value_type, std::int32_t> ||
            std::is_same_v<typename V::non_const_value_type, std::int64_t>);
  else
    return false;
}();

/// Runs MaxLocReducer; `arg` may be an empty Mat (n = 0) when no index output is wanted.
template <bool IsMax, bool ZeroIfEmpty, class Exec, class Seg, class V, class I, class Value>
void reduce_maxloc(const Exec& exec, const Seg& seg, const Value& value, Mat<V> out, Mat<I> arg,
                   index_t w, const char* label) {
  auto run = [&](auto with_arg) {
    using R = MaxLocReducer<V, I, Value, decltype(seg.counts()), IsMax, ZeroIfEmpty,
                            decltype(with_arg)::value>;
    segmented_reduce(
        exec, seg, R{value, out, arg, seg.counts(), carry_of<V>(seg), seg.carry_index().data(), w},
        label);
  };
  if (arg.n > 0) {
    if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible) {
      const index_t m = seg.num_segments(), parts = Kokkos::max<index_t>(1, exec.concurrency());
      const auto ws = workspace_of<I>(seg);
      if (!seg.deterministic() && (parts - 1) * m * w <= ws.room) {
        run(std::false_type{});  // the values, then their first elements (PrivateArg)
        using R = MaxLocReducer<V, I, Value, decltype(seg.counts()), IsMax, ZeroIfEmpty, true>;
        using F = PrivateArg<R, typename Seg::ids_view>;
        const F f{R{value, out, arg, seg.counts(), nullptr, nullptr, w},
                  seg.ids(),
                  ws.data,
                  seg.num_elements(),
                  m,
                  w,
                  parts};
        using Static = Kokkos::Schedule<Kokkos::Static>;
        Kokkos::parallel_for(
            label,
            Kokkos::RangePolicy<Exec, typename F::FindTag, Static, Kokkos::IndexType<index_t>>(
                exec, 0, parts),
            f);
        Kokkos::parallel_for(
            label,
            Kokkos::RangePolicy<Exec, typename F::CombineTag, Kokkos::IndexType<index_t>>(
                exec, 0, (m + F::kCombine - 1) / F::kCombine),
            f);
        return;
      }
    }
    run(std::true_type{});
  } else {
    run(std::false_type{});
  }
}

}  // namespace segops::impl
