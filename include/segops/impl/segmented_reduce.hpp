// SPDX-License-Identifier: Apache-2.0
// The reduction building block: every per-segment output of SegOps is a reduction of a per-element
// map, run by one of three schedules chosen from the descriptor:
//  - sorted ids: fixed-size tiles over positions, atomic-free; a segment that crosses tiles is
//    combined from per-tile partials in tile order (deterministic, independent of thread count);
//  - unsorted ids with the deterministic option: the same tiles over the stable permutation;
//  - unsorted ids otherwise: on host backends, a few partitions that each own a range of segment
//    ids and scan all elements (atomic-free, still in element order); on GPUs, one pass over the
//    elements with atomics.
#pragma once

#include <Kokkos_Core.hpp>
#include <segops/impl/views.hpp>
#include <type_traits>

namespace segops::impl {

/// Destinations of a partial reduction: the output row of segment s, or the carry slot of tile t.
struct OutSlot {
  index_t s;
};
struct CarrySlot {
  index_t t;
};

template <class Exec>
inline constexpr bool concurrent_v =
#ifdef KOKKOS_ENABLE_SERIAL
    !std::is_same_v<Exec, Kokkos::Serial>;
#else
    true;
#endif

struct IdentityElem {
  KOKKOS_FUNCTION index_t operator()(index_t p) const { return p; }
};
template <class MemSpace>
struct PermElem {
  Kokkos::View<const index_t*, MemSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> perm;
  KOKKOS_FUNCTION index_t operator()(index_t p) const { return perm(p); }
};

/// Tiles of `tile` consecutive positions. Tile t reduces the part of a segment that started in an
/// earlier tile into its carry slot (the "head"), and every segment that starts inside it into
/// that segment's output row; `fixup` then folds the heads of later tiles into segments that
/// cross tile ends, in tile order.
template <class R, class Offsets, class Elem, class Ids>
struct TileReduce {
  struct SweepTag {};
  struct FixupTag {};
  R r;
  Offsets offsets, tile_first;
  Elem elem;
  Ids ids;  // sorted ids: lets a tile of short segments walk positions instead of segments
  index_t n, m, tile, ntiles;

  /// First s with offsets(s) >= pos, for pos a multiple of kTileQuantum.
  KOKKOS_FUNCTION index_t first_segment_at(index_t pos) const {
    return tile_first(pos / kTileQuantum);
  }
  KOKKOS_FUNCTION void operator()(SweepTag, index_t t) const {
    const index_t lo = t * tile, hi = Kokkos::min(n, lo + tile);
    index_t s = first_segment_at(lo);
    const index_t head_end = s < m ? Kokkos::min(offsets(s), hi) : hi;
    if (lo < head_end) r.reduce(CarrySlot{t}, elem, lo, head_end);
    const index_t s_end = t == ntiles - 1 ? m : first_segment_at(hi);
    if constexpr (std::is_same_v<Elem, IdentityElem> && R::can_walk) {
      // Short segments (under 8 positions on average): one pass over positions reading the ids
      // (4 or 8 bytes each) beats one loop per segment reading offsets.
      if (r.width() == 1 && (s_end - s) * 8 > hi - head_end) return walk(head_end, hi, s, s_end);
    }
    for (; s < s_end; ++s) {
      const index_t e = offsets(s + 1);
      r.reduce(OutSlot{s}, elem, offsets(s), Kokkos::min(e, hi));
      if (e <= hi) r.finalize(s);
    }
  }
  /// Positions [b, hi) hold segments s .. s_end-1 (s starting at b); sums each in position order.
  KOKKOS_FUNCTION void walk(index_t b, index_t hi, index_t s, index_t s_end) const {
    typename R::acc_type acc = 0;
    for (index_t p = b; p < hi; ++p) {
      const index_t sp = static_cast<index_t>(ids(p));
      if (sp != s) {
        r.store_final(s, acc);
        while (++s < sp) r.store_final(s, 0);  // empty segments in between
        acc = 0;
      }
      r.add_scalar(acc, p);
    }
    if (s < s_end) {
      if (offsets(s + 1) <= hi)
        r.store_final(s, acc);
      else
        r.store_partial(s, acc);  // crosses the tile end: fixup completes it
      while (++s < s_end) r.store_final(s, 0);
    }
  }
  KOKKOS_FUNCTION void operator()(FixupTag, index_t t) const {
    const index_t hi = Kokkos::min(n, (t + 1) * tile);
    const index_t s_end = first_segment_at(hi);
    if (t == ntiles - 1 || s_end == first_segment_at(t * tile)) return;
    const index_t s = s_end - 1, e = offsets(s + 1);
    if (e <= hi) return;
    for (index_t u = t + 1; u < ntiles && u * tile < e; ++u) r.join(OutSlot{s}, CarrySlot{u});
    r.finalize(s);
  }
};

template <class R, class Ids, bool Atomic>
struct ElementReduce {
  struct InitTag {};
  struct AccumulateTag {};
  struct ArgTag {};
  struct FinalizeTag {};
  R r;
  Ids ids;
  index_t m;
  KOKKOS_FUNCTION void operator()(InitTag, index_t s) const { r.init(OutSlot{s}); }
  KOKKOS_FUNCTION void operator()(AccumulateTag, index_t i) const {
    const index_t s = static_cast<index_t>(ids(i));
    if (s >= 0 && s < m) r.template accumulate<Atomic>(s, i);
  }
  KOKKOS_FUNCTION void operator()(ArgTag, index_t i) const {
    const index_t s = static_cast<index_t>(ids(i));
    if (s >= 0 && s < m) r.template arg_pass<Atomic>(s, i);
  }
  KOKKOS_FUNCTION void operator()(FinalizeTag, index_t s) const { r.finalize(s); }
};

/// Host backends, unsorted ids: partition q owns the segment ids [m q / P, m (q + 1) / P) and scans
/// every element, adding those it owns with plain adds. No atomics (a locked add stalls the core on
/// every cache miss of a random scatter), and each segment is summed in element order whatever P
/// is.
template <class R, class Ids>
struct OwnerReduce {
  R r;
  Ids ids;
  index_t n, m, parts;
  KOKKOS_FUNCTION void operator()(index_t q) const {
    const index_t lo = m * q / parts, hi = m * (q + 1) / parts;
    for (index_t s = lo; s < hi; ++s) r.init(OutSlot{s});
    for (index_t i = 0; i < n; ++i) {
      const index_t s = static_cast<index_t>(ids(i));
      if (s >= lo && s < hi) r.template accumulate<false>(s, i);
    }
    if constexpr (R::has_arg_pass) {
      if (r.wants_arg())
        for (index_t i = 0; i < n; ++i) {
          const index_t s = static_cast<index_t>(ids(i));
          if (s >= lo && s < hi) r.template arg_pass<false>(s, i);
        }
    }
    for (index_t s = lo; s < hi; ++s) r.finalize(s);
  }
};

/// Runs reducer `r` over `seg`. R provides width(), reduce(slot, elem, b, e), join(OutSlot,
/// CarrySlot), finalize(s), init(OutSlot), accumulate<Atomic>(s, i), has_finalize, and, where the
/// atomic schedule needs a second pass over the elements (arg of a max), has_arg_pass with
/// wants_arg() and arg_pass<Atomic>(s, i).
template <class Exec, class Seg, class R>
void segmented_reduce(const Exec& exec, const Seg& seg, const R& r, const char* label) {
  const index_t m = seg.num_segments(), w = r.width();
  const index_t cap = static_cast<index_t>(seg.carry().extent(0));
  // Rows wider than the carry cannot be tiled; they take the schedule for unsorted ids below.
  if (seg.deterministic() && w <= cap) {
    const index_t n = seg.num_valid();
    // Tiles are the smallest multiple of the quantum whose partials fit the carry: the tiling
    // depends only on N, w and the capacity, never on the thread count.
    const index_t slots = cap / w, quantum = kTileQuantum;
    const index_t tile =
        Kokkos::max<index_t>(1, ((n + slots - 1) / slots + quantum - 1) / quantum) * quantum;
    const index_t ntiles = n > 0 ? (n + tile - 1) / tile : 1;
    auto run = [&](auto elem) {
      using F = TileReduce<R, decltype(seg.offsets()), decltype(elem), typename Seg::ids_view>;
      F f{r, seg.offsets(), seg.tile_first(), elem, seg.ids(), n, m, tile, ntiles};
      using Sweep = Kokkos::RangePolicy<Exec, typename F::SweepTag, Kokkos::IndexType<index_t>>;
      using Fixup = Kokkos::RangePolicy<Exec, typename F::FixupTag, Kokkos::IndexType<index_t>>;
      Kokkos::parallel_for(label, Sweep(exec, 0, ntiles), f);
      if (ntiles > 1) Kokkos::parallel_for(label, Fixup(exec, 0, ntiles), f);
    };
    if (seg.sorted())
      run(IdentityElem{});
    else
      run(PermElem<typename Seg::memory_space>{seg.permutation()});
    return;
  }
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible) {
    const index_t parts = Kokkos::min<index_t>(8, Kokkos::max<index_t>(1, exec.concurrency()));
    Kokkos::parallel_for(
        label,
        Kokkos::RangePolicy<Exec, Kokkos::Schedule<Kokkos::Static>, Kokkos::IndexType<index_t>>(
            exec, 0, parts),
        OwnerReduce<R, typename Seg::ids_view>{r, seg.ids(), seg.num_elements(), m, parts});
    return;
  }
  using F = ElementReduce<R, typename Seg::ids_view, concurrent_v<Exec>>;
  F f{r, seg.ids(), m};
  using Init = Kokkos::RangePolicy<Exec, typename F::InitTag, Kokkos::IndexType<index_t>>;
  using Acc = Kokkos::RangePolicy<Exec, typename F::AccumulateTag, Kokkos::IndexType<index_t>>;
  using Fin = Kokkos::RangePolicy<Exec, typename F::FinalizeTag, Kokkos::IndexType<index_t>>;
  using Arg = Kokkos::RangePolicy<Exec, typename F::ArgTag, Kokkos::IndexType<index_t>>;
  Kokkos::parallel_for(label, Init(exec, 0, m), f);
  Kokkos::parallel_for(label, Acc(exec, 0, seg.num_elements()), f);
  if constexpr (R::has_arg_pass)
    if (r.wants_arg()) Kokkos::parallel_for(label, Arg(exec, 0, seg.num_elements()), f);
  if constexpr (R::has_finalize) Kokkos::parallel_for(label, Fin(exec, 0, m), f);
}

// ---- sums of a per-element map: the reducer behind sum, mean, dot, norms, gradients of scales
// ----

/// Map concept: width() accumulators; map(e, f) calls f(w, value) for each contribution of element
/// e. Out concept: out(s, w) -> acc&. Fin concept: has_finalize; fin(s, out, width).
/// Sum of f(q) for q in [0, n) with eight interleaved partial sums (vectorisable, fixed order).
template <class Acc, class F>
KOKKOS_FUNCTION Acc flat_sum8(index_t n, const F& f) {
  if (n < 8) {  // short segments: no partial sums to combine
    Acc r = 0;
    for (index_t q = 0; q < n; ++q) r += f(q);
    return r;
  }
  Acc a[8] = {};
  index_t q = 0;
  for (; q + 8 <= n; q += 8)
    for (int j = 0; j < 8; ++j) a[j] += f(q + j);
  for (; q < n; ++q) a[0] += f(q);
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

struct NoFinalize {
  static constexpr bool has_finalize = false;
  template <class Out>
  KOKKOS_FUNCTION void operator()(index_t, const Out&, index_t) const {}
};

template <class Acc, class Map, class Out, class Fin = NoFinalize>
struct SumReducer {
  using acc_type = Acc;
  static constexpr bool has_finalize = Fin::has_finalize;
  static constexpr bool has_arg_pass = false;
  static constexpr bool can_walk = true;
  static constexpr int kLocal = 8;  // rows up to this width accumulate in registers
  Map map;
  Out out;
  Fin fin;
  Acc* carry;
  index_t w;

  KOKKOS_FUNCTION index_t width() const { return w; }
  KOKKOS_FUNCTION Acc& ref(OutSlot d, index_t k) const { return out(d.s, k); }
  KOKKOS_FUNCTION Acc& ref(CarrySlot d, index_t k) const { return carry[d.t * w + k]; }

  /// Reduces positions [b, e) into slot d. Widths 1 to 4 keep their accumulators in registers
  /// (width 1 with four interleaved partial sums, for instruction-level parallelism); the order of
  /// additions depends only on b and e, so results stay reproducible.
  template <class Slot, class Elem>
  KOKKOS_FUNCTION void reduce(Slot d, const Elem& elem, index_t b, index_t e) const {
    switch (w) {
      case 1:
        return reduce_scalar(d, elem, b, e);
      case 2:
        return reduce_fixed<2>(d, elem, b, e);
      case 3:
        return reduce_fixed<3>(d, elem, b, e);
      case 4:
        return reduce_fixed<4>(d, elem, b, e);
      default:
        break;
    }
    if (w <= kLocal) {
      Acc a[kLocal] = {};
      for (index_t p = b; p < e; ++p) map(elem(p), [&](index_t k, Acc v) { a[k] += v; });
      for (index_t k = 0; k < w; ++k) ref(d, k) = a[k];
    } else {
      for (index_t k = 0; k < w; ++k) ref(d, k) = Acc(0);
      for (index_t p = b; p < e; ++p) map(elem(p), [&](index_t k, Acc v) { ref(d, k) += v; });
    }
  }
  template <class Slot, class Elem>
  KOKKOS_FUNCTION void reduce_scalar(Slot d, const Elem& elem, index_t b, index_t e) const {
    if constexpr (std::is_same_v<Elem, IdentityElem> && requires { map.contiguous(); }) {
      if (map.contiguous()) {  // sorted positions over packed rows: one flat vectorisable loop
        ref(d, 0) = map.flat_sum(b, e);
        return;
      }
    }
    Acc a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    index_t p = b;
    for (; p + 4 <= e; p += 4) {
      map(elem(p), [&](index_t, Acc v) { a0 += v; });
      map(elem(p + 1), [&](index_t, Acc v) { a1 += v; });
      map(elem(p + 2), [&](index_t, Acc v) { a2 += v; });
      map(elem(p + 3), [&](index_t, Acc v) { a3 += v; });
    }
    for (; p < e; ++p) map(elem(p), [&](index_t, Acc v) { a0 += v; });
    ref(d, 0) = (a0 + a1) + (a2 + a3);
  }
  template <int W, class Slot, class Elem>
  KOKKOS_FUNCTION void reduce_fixed(Slot d, const Elem& elem, index_t b, index_t e) const {
    Acc a[W] = {};
    for (index_t p = b; p < e; ++p) {
      if constexpr (requires { map.template fixed<W>(p, [](index_t, Acc) {}); })
        map.template fixed<W>(elem(p), [&](index_t k, Acc v) { a[k] += v; });
      else
        map(elem(p), [&](index_t k, Acc v) { a[k] += v; });
    }
    for (int k = 0; k < W; ++k) ref(d, k) = a[k];
  }
  KOKKOS_FUNCTION void join(OutSlot d, CarrySlot c) const {
    for (index_t k = 0; k < w; ++k) ref(d, k) += ref(c, k);
  }
  KOKKOS_FUNCTION void finalize(index_t s) const { fin(s, out, w); }
  // width-1 position walk (TileReduce::walk)
  KOKKOS_FUNCTION void add_scalar(Acc& acc, index_t e) const {
    map(e, [&](index_t, Acc v) { acc += v; });
  }
  KOKKOS_FUNCTION void store_partial(index_t s, Acc acc) const { out(s, 0) = acc; }
  KOKKOS_FUNCTION void store_final(index_t s, Acc acc) const {
    out(s, 0) = acc;
    fin(s, out, 1);
  }
  KOKKOS_FUNCTION void init(OutSlot d) const {
    for (index_t k = 0; k < w; ++k) ref(d, k) = Acc(0);
  }
  template <bool Atomic>
  KOKKOS_FUNCTION void accumulate(index_t s, index_t i) const {
    map(i, [&](index_t k, Acc v) {
      if constexpr (Atomic)
        Kokkos::atomic_add(&out(s, k), v);
      else
        out(s, k) += v;
    });
  }
};

template <class Acc, class Map, class Out, class Fin = NoFinalize>
SumReducer<Acc, Map, Out, Fin> make_sum_reducer(const Map& map, const Out& out, Acc* carry,
                                                index_t width, Fin fin = {}) {
  return {map, out, fin, carry, width};
}

/// Divides each accumulator by the segment's element count (0 for an empty segment).
template <class Counts>
struct DivideByCount {
  static constexpr bool has_finalize = true;
  Counts counts;
  template <class Out>
  KOKKOS_FUNCTION void operator()(index_t s, const Out& out, index_t w) const {
    const index_t c = counts(s);
    for (index_t k = 0; k < w; ++k) {
      auto& o = out(s, k);
      o = c > 0 ? o / static_cast<std::remove_reference_t<decltype(o)>>(c) : 0;
    }
  }
};

}  // namespace segops::impl
