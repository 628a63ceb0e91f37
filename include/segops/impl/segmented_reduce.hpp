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
#include <concepts>
#include <cstdint>
#include <segops/impl/host_vectors.hpp>
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
  KOKKOS_FUNCTION SEGOPS_FLATTEN void operator()(SweepTag, index_t t) const {
    const index_t lo = t * tile, hi = Kokkos::min(n, lo + tile);
    index_t s = first_segment_at(lo);
    const index_t head_end = s < m ? Kokkos::min(offsets(s), hi) : hi;
    if (lo < head_end) r.reduce(CarrySlot{t}, elem, lo, head_end);
    const index_t s_end = t == ntiles - 1 ? m : first_segment_at(hi);
    if constexpr (std::is_same_v<Elem, IdentityElem> && R::can_walk) {
      // Rows of 1 to 4 accumulators. Maps that sum a segment as one contiguous run with masked
      // vectors (host builds) take one pass over the segments, with no dependency between them.
      // Otherwise short segments (under 8 positions on average) take a branch-free pass over the
      // positions reading the ids, which beats one loop per segment reading offsets (whose exits
      // mispredict when lengths vary). Only widths the output can have are instantiated.
      constexpr bool can_run = requires { r.vector_runs(); };
      const bool vector_runs = [&] {
        if constexpr (can_run)
          return r.vector_runs();
        else
          return false;
      }();
      if (vector_runs || (s_end - s) * 8 > hi - head_end) {
        auto short_rows = [&](auto width) {
          constexpr int W = decltype(width)::value;
          if constexpr (can_run)
            if (vector_runs) return runs<W>(head_end, hi, s, s_end);
          walk<W>(head_end, hi, s, s_end);
        };
        switch (r.width()) {
          case 1:
            return short_rows(std::integral_constant<int, 1>{});
          case 2:
            if constexpr (R::max_walk_width >= 2)
              return short_rows(std::integral_constant<int, 2>{});
            break;
          case 3:
            if constexpr (R::max_walk_width >= 3)
              return short_rows(std::integral_constant<int, 3>{});
            break;
          case 4:
            if constexpr (R::max_walk_width >= 4)
              return short_rows(std::integral_constant<int, 4>{});
            break;
          case 9:  // 3x3 matrices summed as runs (OuterMap::run_sums); no walk for them
            if constexpr (can_run && requires { requires R::square_rows; })
              if (vector_runs) return runs<9>(head_end, hi, s, s_end);
            break;
          default:
            break;
        }
      }
    }
    // Positions through the permutation (deterministic option) read rows at random: each is
    // prefetched kAhead positions before the segment that reads it (N = 2^25, rows of 3 floats,
    // L = 3: sum 240 -> 164 ms, dot 375 -> 223 ms).
    constexpr bool gathers = !std::is_same_v<Elem, IdentityElem> && kPrefetches && requires {
      r.prefetch_row(index_t(0));
    };
    index_t ahead = head_end;  // rows of positions [head_end, ahead) prefetched
    for (; s < s_end; ++s) {
      const index_t e = offsets(s + 1);
      if constexpr (gathers)
        for (; ahead < Kokkos::min(e + kAhead, hi); ++ahead) r.prefetch_row(elem(ahead));
      r.reduce(OutSlot{s}, elem, offsets(s), Kokkos::min(e, hi));
      if (e <= hi) r.finalize(s);
    }
  }
  /// Segments s .. s_end-1 (s starting at b) of a tile ending at hi, each summed as one run by the
  /// reducer (SumReducer::run); one that crosses the tile end is completed and finalized by the
  /// fixup.
  template <int W>
  KOKKOS_FUNCTION void runs(index_t b, index_t hi, index_t s, index_t s_end) const {
    // Tiles whose runs average at most one vector sum them with two vectors, not six.
    if constexpr (requires { requires R::template narrow_width<W>; }) {
      if (r.narrow_runs(hi - b, s_end - s)) {
        if constexpr (W == 1)
          return runs<W, kNarrowRunVectors>(b, hi, s, s_end);
        else
          return narrow_rows<W>(b, hi, s, s_end);
      }
    }
    runs<W, kRunVectors>(b, hi, s, s_end);
  }
  /// runs<W, kNarrowRunVectors> for rows (W > 1), out of line: inlined next to runs<W,
  /// kRunVectors>, it made that one's code slower (inner_products, rows of 3 floats, N = 2^20,
  /// L = 3: 62.6 -> 66.7 instructions per element, callgrind; out of line 63.6).
  template <int W>
  SEGOPS_NOINLINE KOKKOS_FUNCTION void narrow_rows(index_t b, index_t hi, index_t s,
                                                   index_t s_end) const {
    runs<W, kNarrowRunVectors>(b, hi, s, s_end);
  }
  template <int W, int NV>
  KOKKOS_FUNCTION void runs(index_t b, index_t hi, index_t s, index_t s_end) const {
    const R rl = r;  // locals: the fields stay in registers across the stores
    const Offsets off = offsets;
    if constexpr (R::template batches<W>) {
      // Where the rows are beyond the last-level cache, the rows and offsets kStreamAheadBytes
      // on are prefetched once per batch (in cache the prefetches cost: sum of 1e6 single floats,
      // L = 3, 0.42 -> 0.43 ms; beyond it, 2^25: sum 15.3 -> 12.3 ms, mean 18.5 -> 14.4 ms, dot
      // 21.8 -> 17.0 ms, 2 threads, a Xeon whose copy ran 25 GB/s).
      const bool short_span = hi - b < (index_t(1) << 31);  // run lengths fit 32 bits
      // Two loops out of line (batch_loop): the first prefetches without clamping, up to where
      // a prefetch would pass the last row or offset; the second takes what is left. One loop
      // inline, testing `far` and clamping both prefetches in every batch, kept more registers
      // live and spilled (single floats, L = 3, 2 threads: N = 1e6 sum 248 -> 223 us, mean 300
      // -> 277 us; N = 2^25 sum 11.2 -> 9.8-9.9 ms, mean 13.6 -> 11.5-11.7 ms). Each loop is
      // flattened as the sweep is (not flattened, dot took 19.4 instead of 17.1 instructions
      // per element, single floats, N = 1e6, callgrind; flattened 16.7).
      if (kPrefetches && n * rl.template stream_row_bytes<W>() > kLastLevelBytes)
        s = batch_loops<W, NV, true>(b, hi, s_end, s, short_span);
      s = batch_loops<W, NV, false>(b, hi, s_end, s, short_span);
    }
    for (; s < s_end; ++s) {
      const index_t e = off(s + 1);
      if (e > hi) return rl.reduce(OutSlot{s}, IdentityElem{}, b, hi);
      rl.template run<W, NV>(s, b, e);
      if constexpr (R::has_finalize) rl.finalize(s, e - b);
      b = e;
    }
  }
  /// runs' batches from segment s (starting at b, updated) while segment s + kBatch - 1 ends by
  /// hi and s + kBatch <= s_stop; returns the next segment. Far: prefetching rows and offsets
  /// kStreamAheadBytes on, and stopping earlier, where a prefetch would pass the last row or
  /// offset (b <= off(s + kBatch) <= n - 1 - rows_ahead, s + kBatch <= m - offsets_ahead).
  template <int W, int NV, bool Far>
  KOKKOS_FUNCTION index_t batch_loops(index_t& b_io, index_t hi, index_t s_stop, index_t s,
                                      bool short_span) const {
#ifdef SEGOPS_WIDE_DISPATCH
    // Single values: the clone with 32-byte runs on CPUs with AVX2 (a baseline x86-64 build, 2
    // threads, L = 3, scripts/ab.sh: floats N = 1e6 sum 0.85, mean 0.89, dot 0.88, mul_backward
    // 0.80 of the time, N = 2^25 0.88-0.92; doubles N = 1e6 0.67-0.85; dot of rows of 3 floats
    // 0.71, mul_backward 0.84; a Zen 5 VM).
    if constexpr (W == 1)
      if (host_has_avx2()) return batch_loop_wide<W, NV, Far>(b_io, hi, s_stop, s, short_span);
#endif
    return batch_loop<W, NV, Far>(b_io, hi, s_stop, s, short_span);
  }
  template <int W, int NV, bool Far>
  SEGOPS_NOINLINE SEGOPS_FLATTEN KOKKOS_FUNCTION index_t batch_loop(index_t& b_io, index_t hi,
                                                                    index_t s_stop, index_t s,
                                                                    bool short_span) const {
    return batches<W, NV, Far, kWideBuild>(b_io, hi, s_stop, s, short_span);
  }
#ifdef SEGOPS_WIDE_DISPATCH
  /// batch_loop compiled for AVX2, its masked runs of 32-byte vectors (host_vectors.hpp).
  template <int W, int NV, bool Far>
  SEGOPS_NOINLINE SEGOPS_FLATTEN SEGOPS_WIDE_TARGET index_t
  batch_loop_wide(index_t& b_io, index_t hi, index_t s_stop, index_t s, bool short_span) const {
    return batches<W, NV, Far, true>(b_io, hi, s_stop, s, short_span);
  }
#endif
  /// The loop of batch_loop and batch_loop_wide (not forced inline: then the flattened loops
  /// left the scalar sums of long runs out of line and ran dot at N = 2^25 1.07-1.38x slower).
  template <int W, int NV, bool Far, bool Wide>
  KOKKOS_FUNCTION index_t batches(index_t& b_io, index_t hi, index_t s_stop, index_t s,
                                  bool short_span) const {
    const R rl = r;
    const Offsets off = offsets;
    constexpr index_t B = R::kBatch;
    const index_t rows_ahead = kStreamAheadBytes / rl.template stream_row_bytes<W>();
    constexpr index_t offsets_ahead = kStreamAheadBytes / index_t(sizeof(off(0)));
    if constexpr (Far) {
      hi = Kokkos::min(hi, n - 1 - rows_ahead);
      s_stop = Kokkos::min(s_stop, m - offsets_ahead);
    }
    index_t b = b_io;
    for (; s + B <= s_stop && off(s + B) <= hi; s += B) {
      if constexpr (Far) {
        rl.prefetch_row(b + rows_ahead);
        prefetch(&off(s + offsets_ahead));
      }
      b = rl.template batch_runs<W, NV, Wide>(s, b, off, short_span);
    }
    b_io = b;
    return s;
  }
  /// Positions [b, hi) hold segments s .. s_end-1 (s starting at b). A running row sum, restarted
  /// where the id changes, is stored to the element's segment at every position, so the last store
  /// of a segment leaves its sum, added in position order (the reducer's walk_step; MaxLocReducer
  /// instead improves its rows in memory, set to the identity first by walk_init). The range is
  /// cut at segment starts into kStreams streams walked in lockstep: the running sums are
  /// dependency chains, and independent chains overlap. Empty segments are zeroed as they are
  /// passed; finalize runs afterwards over the segments that end inside the tile (one that crosses
  /// the tile end is completed and finalized by the fixup). The cuts depend only on the ids and
  /// the tiling, so results stay reproducible. A reducer with walk_positions (MaxLocReducer, host
  /// builds) walks the positions itself. finalize_range: the reducer's own loop (one over packed
  /// indices, a vector of finished sums at a time).
  static constexpr int kStreams = 4;
  template <int W>
  KOKKOS_FUNCTION void walk(index_t b, index_t hi, index_t s, index_t s_end) const {
    const R rl = r;  // locals: the fields stay in registers across the stores
    index_t last;    // the segment of the last position (s - 1 for none)
    if constexpr (requires { rl.template walk_positions<W>(b, hi, ids); }) {
      const Ids id = ids;
      rl.walk_init(s, s_end);  // a reducer that walks the positions itself (MaxLocReducer)
      rl.template walk_positions<W>(b, hi, id);
      last = hi > b ? static_cast<index_t>(id(hi - 1)) : s - 1;
    } else {
      last = walk_streams<W>(rl, b, hi, s, s_end);
    }
    // trailing empty segments (only the last tile has segments after its last position)
    if (last + 1 < s_end) rl.zero_rows(last + 1, s_end);
    if constexpr (R::has_finalize) {
      const index_t done = last >= s && offsets(last + 1) > hi ? last : s_end;
      rl.finalize_range(s, done);
    }
  }
  /// walk's streams; returns the segment of the last position (s - 1 for none).
  template <int W>
  KOKKOS_FUNCTION index_t walk_streams(const R& rl, index_t b, index_t hi, index_t s,
                                       index_t s_end) const {
    constexpr int K = kStreams;
    const Ids id = ids;
    if constexpr (requires { rl.walk_init(s, s_end); }) rl.walk_init(s, s_end);
    struct Stream {
      index_t prev;
      typename R::template WalkState<W> row;
    };
    index_t q[K + 1];
    Stream st[K];
    q[0] = b;
    q[K] = hi;
    st[0] = Stream{s - 1, {}};
    for (int k = 1; k < K; ++k) {
      index_t p = Kokkos::max(q[k - 1], b + (hi - b) * k / K);
      if (p > b && p < hi) {
        const index_t sp = static_cast<index_t>(id(p));
        if (static_cast<index_t>(id(p - 1)) == sp) p = Kokkos::min(offsets(sp + 1), hi);
      }
      q[k] = p;
      st[k] = Stream{p > b ? static_cast<index_t>(id(p - 1)) : s - 1, {}};
    }
    auto step = [&](Stream& x, index_t p) {
      const index_t sp = static_cast<index_t>(id(p));
      if (sp > x.prev + 1) rl.zero_rows(x.prev + 1, sp);  // empty segments (rare: predictable)
      rl.template walk_step<W>(x.row, sp == x.prev, p, sp);
      x.prev = sp;
    };
    index_t common = hi - b;
    for (int k = 0; k < K; ++k) common = Kokkos::min(common, q[k + 1] - q[k]);
    {
      static_assert(K == 4, "the lockstep loop below names four streams");
      Stream s0 = st[0], s1 = st[1], s2 = st[2], s3 = st[3];  // in registers
      const index_t q0 = q[0], q1 = q[1], q2 = q[2], q3 = q[3];
      for (index_t j = 0; j < common; ++j) {
        step(s0, q0 + j);
        step(s1, q1 + j);
        step(s2, q2 + j);
        step(s3, q3 + j);
      }
      st[0] = s0;
      st[1] = s1;
      st[2] = s2;
      st[3] = s3;
    }
    for (int k = 0; k < K; ++k)
      for (index_t p = q[k] + common; p < q[k + 1]; ++p) step(st[k], p);
    return st[K - 1].prev;
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

/// Host backends, unsorted ids, sums (default mode; also max and min without arg): part q of P
/// adds the elements [n q / P, n (q + 1) / P) (cut at multiples of 4: part_start) into its own copy
/// of the output (part 0 into the output itself, the others into scratch set to the identity) with
/// plain adds; a pass over the segments then adds the copies into the output in part order and
/// finalizes. Branch-free per element, every element read once; the result of sums depends on P
/// (the thread count), as the default mode allows; that of max and min does not (exact_merge_v).
template <class R, class Ids>
struct PrivateReduce {
  struct SumTag {};
  struct CombineTag {};
  using Acc = typename R::acc_type;
  R r;
  Ids ids;
  Acc* scratch;
  index_t n, m, w, parts;
  // Output rows that are not packed (several outputs, strided views) or copies whose rows are
  // padded (pw > w, SumReducer::copy_stride), and room for P copies: part 0 too sums into a copy
  // (with prefetches and constant widths), which the combine pass copies out. Unsorted, rows of 3
  // floats, L = 3, N = 1e6, 2 threads: inner_products (3 outputs) 4.9 -> 3.5 ms, axpby_backward
  // (2) 7.1-7.3 -> 5.3 ms.
  bool all_copies;
  index_t pw;  // the copies' row stride: w, or copy_stride()
  /// Part q's first element: n q / P rounded down to a multiple of 4, so that an element whose
  /// value the reducer forms four at a time (max_norm's norms, MaxLocReducer::improve_positions)
  /// is formed by the same instructions whatever P is (the scalar path can give another NaN of a
  /// row holding several).
  KOKKOS_FUNCTION index_t part_start(index_t q) const {
    return q == parts ? n : n * q / parts / 4 * 4;
  }
  KOKKOS_FUNCTION SEGOPS_FLATTEN void operator()(SumTag, index_t q) const {
    const R rl = r;  // locals: the fields stay in registers across the stores
    const Ids id = ids;
    const index_t lo = part_start(q), hi = part_start(q + 1), mm = m, ww = pw;
    Acc* rows = all_copies ? scratch + q * mm * ww
                : q == 0   ? rl.dense_rows()
                           : scratch + (q - 1) * mm * ww;
    if (rows) {
      for (index_t k = 0; k < mm * ww; ++k) rows[k] = rl.identity();
      return rl.scatter(rows, ww, id.data(), static_cast<index_t>(id.stride(0)), lo, hi, mm);
    }
    for (index_t s = 0; s < mm; ++s) rl.init(OutSlot{s});  // part 0, output rows not packed
    for (index_t i = lo; i < hi; ++i) {
      const index_t s = static_cast<index_t>(id(i));
      if (s >= 0 && s < mm) rl.template accumulate<false>(s, i);
    }
  }
  /// Segments [b * kCombine, (b + 1) * kCombine): the copies added in, then finalized.
  static constexpr index_t kCombine = 256;
  KOKKOS_FUNCTION SEGOPS_FLATTEN void operator()(CombineTag, index_t b) const {
    const R rl = r;
    const index_t lo = b * kCombine, hi = Kokkos::min(m, lo + kCombine);
    if (all_copies) {
      if constexpr (requires { rl.add_copies(scratch, pw, lo, hi, m, parts); })
        if (rl.add_copies(scratch, pw, lo, hi, m, parts)) return;  // finalized too
      for (index_t s = lo; s < hi; ++s) {
        rl.set_row(OutSlot{s}, scratch + s * pw);
        for (index_t q = 1; q < parts; ++q) rl.add_row(OutSlot{s}, scratch + (q * m + s) * pw);
      }
    } else if (Acc* rows = rl.dense_rows()) {  // packed rows: one flat loop per copy
      for (index_t q = 1; q < parts; ++q) {
        const Acc* copy = scratch + (q - 1) * m * w;
        for (index_t k = lo * w; k < hi * w; ++k) rl.merge(rows[k], copy[k]);
      }
    } else {
      for (index_t s = lo; s < hi; ++s)
        for (index_t q = 1; q < parts; ++q) rl.add_row(OutSlot{s}, scratch + ((q - 1) * m + s) * w);
    }
    rl.finalize_range(lo, hi);
  }
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
  KOKKOS_FUNCTION SEGOPS_FLATTEN void operator()(index_t q) const {
    const index_t lo = m * q / parts, hi = m * (q + 1) / parts;
    for (index_t s = lo; s < hi; ++s) r.init(OutSlot{s});
    if constexpr (requires { R::owner_selects; }) {
      // Reducers that update by selects (max, min): every element goes through the same
      // instructions, into a scratch row where another partition owns its segment; the owner
      // test on random ids would mispredict about every other element with 2 partitions.
      constexpr index_t kScratch = 16;
      if (r.width() <= kScratch) {
        typename R::acc_type vs[kScratch];
        typename R::index_type is[kScratch];
        for (index_t k = 0; k < kScratch; ++k) vs[k] = r.identity(), is[k] = 0;
        auto pass = [&](auto p) {
          for (index_t i = 0; i < n; ++i) {
            const index_t s = static_cast<index_t>(ids(i));
            r.template owner_step<decltype(p)::value>(s >= lo && s < hi, s, i, vs, is);
          }
        };
        pass(std::integral_constant<int, 0>{});
        if (r.wants_arg()) pass(std::integral_constant<int, 1>{});
        for (index_t s = lo; s < hi; ++s) r.finalize(s);
        return;
      }
    }
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

/// Host backends, unsorted ids, sums of rows of up to kBucketRowBytes where the descriptor's
/// bucketed(row bytes) holds (both options): the descriptor cut the elements into chunks and the
/// segments into buckets (slices of consecutive ids), and laid the valid elements out bucket by
/// bucket, in element order within each (Segments::bucket_starts). StageTag, one work item per
/// chunk: each element's row of the map is written to its place in that layout (a write to one of
/// a few hundred streams). SumTag, one work item per bucket: its rows are added into its slice of
/// the output, which stays in a core's L2 cache, and the slice is finished. Rows that would
/// otherwise be added at random into outputs beyond the caches (two to three times the time, see
/// kBucketOutputBytes) are written and read in order. Each segment is summed in element order,
/// whatever the thread count or the chunks: bitwise reproducible.
template <class R, class Ids>
struct BucketReduce {
  struct StageTag {};
  struct SumTag {};
  using Acc = typename R::acc_type;
  R r;
  Ids ids;
  const index_t* starts;
  const std::uint16_t* local;
  Acc* rows;
  index_t n, m, chunk, nb, nc;
  int shift;
  SEGOPS_FLATTEN void operator()(StageTag, index_t c) const {
    index_t cur[kMaxBuckets];  // chunk c's write positions, one per bucket
    for (index_t b = 0; b < nb; ++b) cur[b] = starts[c * nb + b];
    r.bucket_rows(rows, cur, ids.data(), static_cast<index_t>(ids.stride(0)), c * chunk,
                  Kokkos::min(n, (c + 1) * chunk), m, shift);
  }
  SEGOPS_FLATTEN void operator()(SumTag, index_t b) const {
    const index_t end = b + 1 < nb ? starts[b + 1] : starts[nc * nb];
    const index_t s0 = b << shift;
    r.bucket_sums(rows, local, starts[b], end, s0, Kokkos::min(m, s0 + (index_t(1) << shift)));
  }
};

/// Element rows [c kChunk, (c + 1) kChunk) of the map, computed into rows (SumReducer::stage).
template <class R>
struct StageRows {
  static constexpr index_t kChunk = 4096;
  R r;
  typename R::acc_type* rows;
  index_t n;
  KOKKOS_FUNCTION SEGOPS_FLATTEN void operator()(index_t c) const {
    r.stage(rows, c * kChunk, Kokkos::min(n, (c + 1) * kChunk));
  }
};

/// Whether R's partial results merge exactly (R::exact_merge: a selection, as max and min, not a
/// rounded add): PrivateReduce then gives, for any thread count, the value of the first best
/// element in element order, as the tiles do (the same bits, but for max_norm's NaN from a row with
/// several NaNs, which depends on the instructions that add its squares).
template <class R>
inline constexpr bool exact_merge_v = requires {
  requires R::exact_merge;
};

/// Whether rows of w accumulators can be reduced in tiles: their partials fit seg's carry.
template <class Seg>
bool tiles_fit(const Seg& seg, index_t w) {
  return w <= static_cast<index_t>(seg.carry().extent(0));
}

/// The tiles of reducer r over seg's valid elements, taken through elem (TileReduce). Tiles are
/// the smallest multiple of the quantum whose partials fit the carry: the tiling depends only on
/// N, the width and the capacity, never on the thread count.
template <class Seg, class R, class Elem>
auto tile_reduce(const Seg& seg, const R& r, Elem elem) {
  const index_t n = seg.num_valid(), m = seg.num_segments();
  const index_t slots = static_cast<index_t>(seg.carry().extent(0)) / r.width();
  const index_t quantum = kTileQuantum;
  const index_t tile =
      Kokkos::max<index_t>(1, ((n + slots - 1) / slots + quantum - 1) / quantum) * quantum;
  const index_t ntiles = n > 0 ? (n + tile - 1) / tile : 1;
  using F = TileReduce<R, decltype(seg.offsets()), Elem, typename Seg::ids_view>;
  return F{r, seg.offsets(), seg.tile_first(), elem, seg.ids(), n, m, tile, ntiles};
}

/// The sweep of f over `items` work items, then, where there are several tiles, the fixup of the
/// segments that cross tile ends (f: a TileReduce, items = its tiles, or a functor with its tags).
template <class Exec, class F>
void run_tiles(const Exec& exec, const F& f, index_t items, index_t ntiles, const char* label) {
  using Sweep = WorkItems<Exec, typename F::SweepTag>;
  using Fixup = Kokkos::RangePolicy<Exec, typename F::FixupTag, Kokkos::IndexType<index_t>>;
  Kokkos::parallel_for(label, Sweep(exec, 0, items), f);
  if (ntiles > 1) Kokkos::parallel_for(label, Fixup(exec, 0, ntiles), f);
}

/// Runs reducer `r` over `seg`. R provides width(), reduce(slot, elem, b, e), join(OutSlot,
/// CarrySlot), finalize(s), init(OutSlot), accumulate<Atomic>(s, i), has_finalize, and, where the
/// atomic schedule needs a second pass over the elements (arg of a max), has_arg_pass with
/// wants_arg() and arg_pass<Atomic>(s, i).
template <class Exec, class Seg, class R>
void segmented_reduce(const Exec& exec, const Seg& seg, const R& r, const char* label) {
  const index_t m = seg.num_segments(), w = r.width();
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible &&
                requires { requires R::can_bucket; }) {
    using Acc = typename R::acc_type;
    const auto ws = workspace_of<Acc>(seg);
    if (w <= R::kMaxBucketWidth && seg.bucketed(w * index_t(sizeof(Acc))) &&
        seg.num_valid() * w <= ws.room) {
      const index_t nb = seg.num_buckets(), chunk = seg.bucket_chunk(), n = seg.num_elements();
      using F = BucketReduce<R, typename Seg::ids_view>;
      F f{r,     seg.ids(), seg.bucket_starts().data(), seg.bucket_local().data(), ws.data, n, m,
          chunk, nb,        (n + chunk - 1) / chunk,    seg.bucket_shift()};
      using Stage = Kokkos::RangePolicy<Exec, typename F::StageTag, Kokkos::IndexType<index_t>>;
      using Sum = WorkItems<Exec, typename F::SumTag>;
      Kokkos::parallel_for(label, Stage(exec, 0, f.nc), f);
      Kokkos::parallel_for(label, Sum(exec, 0, nb), f);
      return;
    }
  }
  // Host backends: one output copy per thread where the descriptor holds room for them (see its
  // workspace). A deterministic descriptor, whose results must not depend on the threads, takes
  // them only where the copies merge exactly (max, min, max_norm without arg: exact_merge_v) and
  // the ids are unsorted (the tiles over the permutation read every row at random: max_norm, rows
  // of 3 floats, N = 2^25, 927 -> 360 ms).
  if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible &&
                R::can_privatize) {
    using Acc = typename R::acc_type;
    const index_t n = seg.num_elements(), parts = Kokkos::max<index_t>(1, exec.concurrency());
    const auto ws = workspace_of<Acc>(seg);
    const bool fit = parts == 1 || (parts - 1) * m * w <= ws.room;
    if (fit && (!seg.deterministic() || (exact_merge_v<R> && !seg.sorted()))) {
      Acc* scratch = parts > 1 ? ws.data : nullptr;
      // Padded copies (copy_stride) only while they take at most a third of the last-level
      // cache: beyond, the extra third of copy bytes costs more than the vector adds save (rows
      // of 3 floats, L = 3, 2 threads: N = 1e6, 10.7 MB of copies, 1460 -> 1230 us; 1.25e6, 13.3
      // MB, 1917-2013 vs 1941-1966 us; 2e6, 21 MB, 4713-4838 -> 6226-7075 us).
      index_t pw = w;
      if constexpr (requires { r.copy_stride(); }) pw = r.copy_stride();
      if (parts == 1 || parts * m * pw > ws.room ||
          parts * m * pw * index_t(sizeof(Acc)) > kLastLevelBytes / 3)
        pw = w;
      const bool all_copies =
          parts > 1 && (!r.dense_rows() || pw != w) && parts * m * pw <= ws.room;
      using F = PrivateReduce<R, typename Seg::ids_view>;
      F f{r, seg.ids(), scratch, n, m, w, parts, all_copies, pw};
      Kokkos::parallel_for(
          label,
          Kokkos::RangePolicy<Exec, typename F::SumTag, Kokkos::Schedule<Kokkos::Static>,
                              Kokkos::IndexType<index_t>>(exec, 0, parts),
          f);
      if (parts > 1 || R::has_finalize)
        Kokkos::parallel_for(
            label,
            Kokkos::RangePolicy<Exec, typename F::CombineTag, Kokkos::IndexType<index_t>>(
                exec, 0, (m + F::kCombine - 1) / F::kCombine),
            f);
      return;
    }
  }
  // Rows wider than the carry cannot be tiled; they take the schedule for unsorted ids below.
  if (seg.deterministic() && tiles_fit(seg, w)) {
    auto run = [&](const auto& rr, auto elem) {
      const auto f = tile_reduce(seg, rr, elem);
      run_tiles(exec, f, f.ntiles, f.ntiles, label);
    };
    if (seg.sorted()) return run(r, IdentityElem{});
    const PermElem<typename Seg::memory_space> perm{seg.permutation()};
    if constexpr (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible &&
                  requires { requires R::can_stage; }) {
      // Maps that read rows of several views or several columns into one or two accumulators:
      // one pass in element order stages each element's row of accumulators in the descriptor's
      // workspace, and the tiles gather that row (SumReducer::stage).
      const index_t ne = seg.num_elements();
      const auto ws = workspace_of<typename R::acc_type>(seg);
      if (ne > 0 && r.stages(ne, ws.room)) {
        auto* rows = ws.data;
        using F = StageRows<R>;
        Kokkos::parallel_for(label,
                             Kokkos::RangePolicy<Exec, Kokkos::IndexType<index_t>>(
                                 exec, 0, (ne + F::kChunk - 1) / F::kChunk),
                             F{r, rows, ne});
        return run(r.staged(rows, ne), perm);
      }
    }
    return run(r, perm);
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
struct NoFinalize {
  static constexpr bool has_finalize = false;
  template <class Out>
  KOKKOS_FUNCTION void operator()(index_t, const Out&, index_t) const {}
};

/// Accumulator k = component k of the element's row.
template <class Acc, class T>
struct RowMap {
  Mat<const T> x;
  template <class F>
  KOKKOS_FUNCTION void operator()(index_t e, F&& f) const {
    for_cols(x.d, [&](index_t d) SEGOPS_INLINE { f(d, static_cast<Acc>(x(e, d))); });
  }
  template <int W, class F>  // x.d == W known at compile time: unrolled, accumulators in registers
  KOKKOS_FUNCTION void fixed(index_t e, F&& f) const {
    for (int d = 0; d < W; ++d) f(d, static_cast<Acc>(x(e, d)));
  }
  KOKKOS_FUNCTION bool contiguous() const { return x.d == 1 && x.s0 == 1; }
  KOKKOS_FUNCTION void prefetch_row(index_t e) const { prefetch_rows(e, x); }
  KOKKOS_FUNCTION index_t packed_width() const { return packed_width_of(x); }
  template <int W, class F>  // where packed_width() == W
  KOKKOS_FUNCTION void packed_row(index_t e, F&& f) const {
    for (int d = 0; d < W; ++d) f(d, static_cast<Acc>(x.ptr[e * W + d]));
  }
  /// Packed rows of 2 to 4 that host vectors sum a row at a time (sorted positions).
  KOKKOS_FUNCTION bool vector_rows() const {
#ifdef SEGOPS_HOST_VECTORS
    if constexpr (std::is_same_v<Acc, T> && HostVec<T>::ok)
      return packed(x) && x.d >= 2 && x.d * index_t(sizeof(T)) <= 16;
#endif
    return false;
  }
  template <int W>
  KOKKOS_FUNCTION void rows_sum(index_t b, index_t e, Acc (&a)[W]) const {
    run_rows<Acc, W>(x.ptr + b * W, e - b, x.n - b, a);
  }
#ifdef SEGOPS_HOST_VECTORS
  template <int W>  // rows_sum as one vector (where vector_rows())
  requires(std::is_same_v<Acc, T>&& row_fits_vector<T, W>) auto rows_vec(index_t b,
                                                                         index_t e) const {
    return run_rows_vec<W>(x.ptr + b * W, e - b, x.n - b);
  }
#endif
  KOKKOS_FUNCTION index_t flat_width() const { return 1; }
  KOKKOS_FUNCTION auto flat_run(index_t b, index_t e) const {  // where contiguous()
    return flat(SumRun<Acc, T>{x.ptr + b}, e - b, x.n - b);
  }
#ifdef SEGOPS_HOST_VECTORS
  /// Row e of packed rows of 3 floats as a vector, lane 3 zero (SumReducer::scatter); the last row
  /// is read value by value.
  KOKKOS_FUNCTION auto row_vec3(index_t e) const
      requires(std::is_same_v<Acc, float>&& std::is_same_v<T, float>) {
    return load_row3(x.ptr, x.n, e);
  }
#endif
};

template <class Acc, class Map, class Out, class Fin = NoFinalize>
struct SumReducer {
  using acc_type = Acc;
  static constexpr bool has_finalize = Fin::has_finalize;
  static constexpr bool has_arg_pass = false;
  static constexpr bool can_walk = true;
  static KOKKOS_FUNCTION Acc identity() { return Acc(0); }
  static KOKKOS_FORCEINLINE_FUNCTION void merge(Acc& a, Acc b) { a += b; }  // PrivateReduce
  static constexpr int max_walk_width = [] {
    if constexpr (requires { Out::static_width; })
      return Out::static_width;
    else
      return 4;
  }();
  static constexpr int kLocal = 16;  // rows up to this width (3x3 matrices too) accumulate locally
  /// Maps of 3x3 matrices (outer products) unroll rows of 9 (reduce), and sum sorted runs of them
  /// (TileReduce) where vector_runs().
  static constexpr bool square_rows = requires { Map::kSquareRows; };
  /// Whether the map can have W accumulators: a map of a fixed width (Map::kWidth) has only that
  /// one. The loops instantiated for the other widths are never run, and are left empty (they
  /// would index past their rows).
  template <int W>
  static constexpr bool map_width = [] {
    if constexpr (requires { Map::kWidth; })
      return Map::kWidth == W;
    else
      return true;
  }();
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
      case 9:  // 3x3 matrices (instantiated only for maps that unroll them)
        if constexpr (square_rows) return reduce_fixed<9>(d, elem, b, e);
        break;
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
  /// TileReduce::runs: out(s, :) = the sum of positions [b, e), one contiguous run of the map.
  template <int W, int NV>
  KOKKOS_FUNCTION void run(index_t s, index_t b, index_t e) const {
    Acc a[W];
    run_row<W, NV>(b, e, a);
    store_row<W>(s, a);
  }
  /// a = the sum of positions [b, e) (instantiated for every width; runs only where vector_runs()
  /// holds, so for maps with flat_run (W = 1) or rows_sum)
  template <int W, int NV>
  KOKKOS_FUNCTION void run_row(index_t b, index_t e, Acc (&a)[W]) const {
    if constexpr (W == 1 && requires { map.flat_run(b, e); })
      a[0] = run_sum<Acc, NV>(map.flat_run(b, e));
    else if constexpr (W > 1 && requires { map.vector_rows(); })
      map.template rows_sum<W>(b, e, a);
    else if constexpr (requires { map.template run_sums<W, NV>(b, e, a); })
      map.template run_sums<W, NV>(b, e, a);
    else
      for (int k = 0; k < W; ++k) a[k] = Acc(0);
  }
  /// TileReduce::runs takes kBatch segments at a time where batches<W> holds: single values
  /// (W = 1), whose runs' lane partials are added across segments with shuffles, and rows of 2
  /// to 4 that fit a vector, summed, finished (if at all by a finisher that works on whole
  /// vectors) and stored as one (sum of rows of 3 floats, L = 3, N = 1e6, 2 threads: 0.69 ->
  /// 0.60 ms, mean 0.92 -> 0.70 ms with masked_rows_vec's six loads per run). A finisher with
  /// finish(x, n) applies f(x, n) lane-wise to sums x of n elements (n = 1 for an empty segment,
  /// whose sum is 0): mean's divisions and rms_norm's square roots, a few cycles each as scalars.
  /// One with finish_at(s, x, n) finishes the single values of segments s, s + 1, ... in x's lanes
  /// (it reads per-segment inputs).
  static constexpr int kBatch = 4;
#ifdef SEGOPS_HOST_VECTORS
  static constexpr bool vector_finish = requires(const Fin& f, typename HostVec<Acc>::type x) {
    f.finish(x, x);
  };
  static constexpr bool segments_finish =
      vector_finish || requires(const Fin& f, typename HostVec<Acc>::type x) {
    f.finish_at(index_t(0), x, x);
  };
  template <class V>
  KOKKOS_FUNCTION V finish_segments(index_t s, V x, V n) const {
    if constexpr (vector_finish)
      return fin.finish(x, n);
    else
      return fin.finish_at(s, x, n);
  }
  static constexpr bool flat_runs = requires(const Map& m) { m.flat_run(0, 0); };
  template <int W>  // rows of W summed into one vector (RowMap::rows_vec)
  static constexpr bool row_vectors = requires(const Map& m) {
    { m.template rows_vec<W>(0, 0) } -> std::same_as<typename HostVec<Acc>::type>;
  };
  template <int W>
  static constexpr bool batches = HostVec<Acc>::ok && (!has_finalize || segments_finish) &&
                                  (W == 1 ? flat_runs
                                          : (!has_finalize || vector_finish) && row_vectors<W>);
#else
  template <int W>
  static constexpr bool batches = false;
#endif
  /// Segments s .. s + kBatch - 1, starting at b and all ending in the tile; returns where the
  /// last one ends. Lanes are filled in registers (a vector built through memory stalls its load).
  /// short_span: the tile's segments are shorter than 2^31 elements.
  template <int W, int NV, bool Wide, class Offsets>
  KOKKOS_FUNCTION index_t batch_runs(index_t s, index_t b, const Offsets& off,
                                     bool short_span) const {
#ifdef SEGOPS_HOST_VECTORS
    using V = typename HostVec<Acc>::type;
    auto count = [](index_t b, index_t e) { return divisor(e - b); };
    if constexpr (W == 1) {
      constexpr int lanes = 16 / sizeof(Acc);
      V t[kBatch], n[kBatch / lanes];
      index_t at[kBatch + 1];  // the segments' bounds
      at[0] = b;
#pragma GCC unroll 4
      for (int j = 0; j < kBatch; ++j) at[j + 1] = off(s + j + 1);
      // run j of the batch (formed where used: an array of them stayed in memory, +0.24
      // instructions per element for sums of single floats at L = 3)
      auto f = [&](int j) SEGOPS_INLINE { return map.flat_run(at[j], at[j + 1]); };
      // Narrow tiles of plain sums (SumRun::pairs) whose kBatch runs are all shorter than two
      // vectors, with the last run's vectors readable (and so every earlier run's: room only
      // shrinks along x): masked_pair_vec, without run_vec's checks per run. The same bits.
      // Single floats, L = 3, N = 1e6, 2 threads: sum 0.228-0.239 -> 0.198-0.202 ms, mean
      // 0.273-0.278 -> 0.248-0.254 ms (callgrind: 11.1 -> 8.9 instructions per element for sum).
      bool pairs = false;
      if constexpr (NV == 2 && requires { requires decltype(f(0).run)::pairs; }) {
        index_t lens = 0;  // all run lengths < 2 lanes (a power of 2) iff their OR is
#pragma GCC unroll 4
        for (int j = 0; j < kBatch; ++j) lens |= f(j).len;
        pairs = lens < 2 * lanes && f(kBatch - 1).room >= index_t(2 * lanes);
        if (pairs) {
#pragma GCC unroll 4
          for (int j = 0; j < kBatch; ++j) {
            const auto r = f(j);
            t[j] = masked_pair_vec<Acc, Wide>(r.len, r.run);
          }
        }
      }
      if (!pairs) {
#pragma GCC unroll 4
        for (int j = 0; j < kBatch; ++j) t[j] = run_vec<Acc, NV, Wide>(f(j));
      }
      if constexpr (has_finalize) {
        // Floats: the divisors from the batch's offsets in memory (at[0] = b = off(s),
        // TileReduce::runs) where they are contiguous.
        bool counted = false;
        if constexpr (std::is_same_v<Acc, float> && kBatch == 4 && requires { off.data(); } &&
                      !std::is_same_v<typename Offsets::array_layout, Kokkos::LayoutStride>) {
          if (short_span) {
            n[0] = run_divisors(&off(s));
            counted = true;
          }
        }
        if (!counted) {
#pragma GCC unroll 4
          for (int j = 0; j < kBatch; ++j) n[j / lanes][j % lanes] = count(at[j], at[j + 1]);
        }
      }
      b = at[kBatch];
      for (int i = 0; i < kBatch / lanes; ++i) {
        V v = lane_sums(t + i * lanes);
        if constexpr (has_finalize) v = finish_segments(s + i * lanes, v, n[i]);
        if constexpr (requires { out.s0; }) {
          if (out.s0 == 1) {  // consecutive outputs: one vector store
            __builtin_memcpy(&out(s + i * lanes, 0), &v, sizeof(V));
            continue;
          }
        }
        for (int l = 0; l < lanes; ++l) out(s + i * lanes + l, 0) = v[l];
      }
    } else {  // a row of W <= lanes, finished as one vector
      // Packed rows: all but the last row are stored as whole vectors, whose lanes past W land
      // on the next row, stored after them.
      bool packed = false;
      if constexpr (requires { out.s0; }) packed = out.s0 == W && out.s1 == 1;
#pragma GCC unroll 4
      for (int j = 0; j < kBatch; ++j) {
        const index_t e = off(s + j + 1);
        V v = map.template rows_vec<W>(b, e);
        if constexpr (has_finalize) v = fin.finish(v, V{} + count(b, e));
        if (packed && j + 1 < kBatch)
          __builtin_memcpy(&out(s + j, 0), &v, sizeof(V));
        else
          for (int k = 0; k < W; ++k) out(s + j, k) = v[k];
        b = e;
      }
    }
#endif
    return b;
  }
  /// The finisher's f(x, n) divides by n: an empty segment's sums (0) by 1.
  KOKKOS_FUNCTION static Acc divisor(index_t count) {
    return static_cast<Acc>(count > 0 ? count : 1);
  }
#ifdef SEGOPS_HOST_VECTORS
  /// out(s, :) = the finished row a of W <= lanes sums of n elements, one vector operation.
  template <int W>
  KOKKOS_FUNCTION void finish_row(index_t s, const Acc (&a)[W], Acc n) const {
    using V = typename HostVec<Acc>::type;
    V v = {};
    for (int k = 0; k < W; ++k) v[k] = a[k];
    v = fin.finish(v, V{} + n);
    for (int k = 0; k < W; ++k) out(s, k) = v[k];
  }
#endif
  /// Bytes per position of a sorted stream of rows of W sums (of flat_width() values each for
  /// W = 1), which TileReduce::runs prefetches.
  template <int W>
  KOKKOS_FUNCTION index_t stream_row_bytes() const {
    index_t w = W;
    if constexpr (W == 1 && requires { map.flat_width(); }) w = map.flat_width();
    return w * index_t(sizeof(Acc));
  }
  /// Whether `segments` runs over `positions` average at most one vector (TileReduce::runs), for
  /// the widths whose runs take fewer vectors there: single sums, and rows of W sums of products
  /// that the map sums as runs (DotsMap::run_sums; inner_products of single floats, N = 2^20,
  /// L = 3: 62 -> 36 instructions per element (callgrind), 220-247 -> 127 ms at N = 2^25, 2
  /// threads; each run's masked vectors were 24 floats long).
  template <int W>
  static constexpr bool narrow_width = W == 1 || requires(const Map& mp, index_t i, Acc (&a)[W]) {
    mp.template run_sums<W, kNarrowRunVectors>(i, i, a);
  };
  KOKKOS_FUNCTION bool narrow_runs(index_t positions, index_t segments) const {
    if constexpr (requires { map.flat_width(); })
      return positions * map.flat_width() * index_t(sizeof(Acc)) <= segments * 16;
    else
      return false;
  }
  /// Sorted segments that the map sums as contiguous runs with host vectors: one accumulator over
  /// contiguous elements, packed rows of 2 to 4 that fit a vector, or dot products of packed rows
  /// (DotsMap::run_sums).
  KOKKOS_FUNCTION bool vector_runs() const {
#ifdef SEGOPS_HOST_VECTORS
    if constexpr (requires { map.vector_rows(); })
      if (map.vector_rows()) return true;
    if constexpr (requires { map.packed_runs(); }) return map.packed_runs();
    if constexpr (requires { map.contiguous(); }) return w == 1 && map.contiguous();
#endif
    return false;
  }
  template <class Slot, class Elem>
  KOKKOS_FUNCTION void reduce_scalar(Slot d, const Elem& elem, index_t b, index_t e) const {
    if constexpr (std::is_same_v<Elem, IdentityElem> && requires { map.contiguous(); }) {
      if (map.contiguous()) {  // sorted positions over packed rows: one flat vectorisable loop
        ref(d, 0) = run_sum<Acc>(map.flat_run(b, e));
        return;
      }
    }
    auto sums = [&](const auto& row) {
      Acc a0 = 0, a1 = 0, a2 = 0, a3 = 0;
      index_t p = b;
      for (; p + 4 <= e; p += 4) {
        row(elem(p), [&](auto, Acc v) { a0 += v; });
        row(elem(p + 1), [&](auto, Acc v) { a1 += v; });
        row(elem(p + 2), [&](auto, Acc v) { a2 += v; });
        row(elem(p + 3), [&](auto, Acc v) { a3 += v; });
      }
      for (; p < e; ++p) row(elem(p), [&](auto, Acc v) { a0 += v; });
      ref(d, 0) = (a0 + a1) + (a2 + a3);
    };
    if (!gathered_packed<Elem>(sums)) sums(map);
  }
  /// Positions through the permutation (deterministic option) over packed rows: f(row), row(e, g)
  /// the map's packed_row, whose widths and strides are constants (a generic row re-reads them
  /// at every element, and a map of several views calls a row product per pair: inner_products of
  /// 3-vectors, unsorted N = 1e6, 2 threads: 15.9-16.2 -> 9.3-9.8 ms). False, and no call,
  /// otherwise.
  template <class Elem, class F>
  KOKKOS_FUNCTION bool gathered_packed(const F& f) const {
    if constexpr (!std::is_same_v<Elem, IdentityElem> && requires { map.packed_width(); }) {
      const Map mp = map;
      return with_packed_width(mp.packed_width(), [&](auto width) {
        constexpr int PW = decltype(width)::value;
        f([&](index_t e, const auto& g) { mp.template packed_row<PW>(e, g); });
      });
    }
    return false;
  }
  template <int W, class Slot, class Elem>
  KOKKOS_FUNCTION void reduce_fixed(Slot d, const Elem& elem, index_t b, index_t e) const {
    if constexpr (!map_width<W>) return;
    Acc a[W] = {};
    if constexpr (std::is_same_v<Elem, IdentityElem> && requires { map.vector_rows(); }) {
      if (map.vector_rows()) {  // sorted positions over packed rows
        map.template rows_sum<W>(b, e, a);
        for (int k = 0; k < W; ++k) ref(d, k) = a[k];
        return;
      }
    }
    // A packed row's columns may outnumber W where this is instantiated but never runs (RowMap's
    // packed_row<3> at W = 2): those contributions are never added.
    const bool packed = gathered_packed<Elem>([&](const auto& row) {
      for (index_t p = b; p < e; ++p)
        row(elem(p), [&](auto k, Acc v) {
          if (k < W) a[k] += v;
        });
    });
    if (!packed)
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
  /// finalize(s) for s in [lo, hi) (PrivateReduce's combine pass). Where the finisher works on
  /// vectors and exposes the counts: single values a vector of segments at a time, rows of 2 to 4
  /// (3-vectors above all) a row vector at a time.
  KOKKOS_FUNCTION void finalize_range(index_t lo, index_t hi) const {
#ifdef SEGOPS_HOST_VECTORS
    if constexpr (has_finalize && HostVec<Acc>::ok && segments_finish &&
                  requires { fin.counts(lo); }) {
      using V = typename HostVec<Acc>::type;
      constexpr int lanes = 16 / sizeof(Acc);
      auto rows = [&](auto width) {
        constexpr int W = decltype(width)::value;
        for (; lo < hi; ++lo) {
          Acc a[W];
          for (int k = 0; k < W; ++k) a[k] = out(lo, k);
          finish_row<W>(lo, a, divisor(static_cast<index_t>(fin.counts(lo))));
        }
      };
      switch (w) {
        case 1:
          for (; lo + lanes <= hi; lo += lanes) {
            V v, n;
            for (int l = 0; l < lanes; ++l) {
              v[l] = out(lo + l, 0);
              n[l] = divisor(static_cast<index_t>(fin.counts(lo + l)));
            }
            v = finish_segments(lo, v, n);
            for (int l = 0; l < lanes; ++l) out(lo + l, 0) = v[l];
          }
          break;
        case 2:
          if constexpr (vector_finish) rows(std::integral_constant<int, 2>{});
          break;
        case 3:
          if constexpr (vector_finish && lanes >= 3) rows(std::integral_constant<int, 3>{});
          break;
        case 4:
          if constexpr (vector_finish && lanes >= 4) rows(std::integral_constant<int, 4>{});
          break;
        default:
          break;
      }
    }
#endif
    if constexpr (has_finalize)
      for (; lo < hi; ++lo) finalize(lo);
  }
  /// finalize for a segment of c elements, where the caller knows c (finishers that take it then
  /// skip reading the descriptor's counts)
  KOKKOS_FUNCTION void finalize(index_t s, index_t c) const {
    if constexpr (requires { fin(s, out, w, c); })
      fin(s, out, w, c);
    else
      fin(s, out, w);
  }
  // TileReduce::walk: the running row, one position's step, and zero rows for the empty segments
  // [b, e).
  template <int W>
  struct WalkState {
    Acc acc[W];
  };
  /// Adds position p's contributions to the running row (restarted unless `same`: the previous
  /// position is in the same segment s) and stores it to out(s, :). The restart is a bit mask, not
  /// a branch (a ternary compiles to a jump that mispredicts whenever segment lengths vary).
  template <int W>
  KOKKOS_FUNCTION void walk_step(WalkState<W>& x, bool same, index_t p, index_t s) const {
    using Bits = std::conditional_t<sizeof(Acc) == 8, std::uint64_t, std::uint32_t>;
    static_assert(sizeof(Acc) == sizeof(Bits));
    const Bits keep = Bits(0) - Bits(same);
    Acc v[W] = {};
    contribution<W>(p, v);
    for (int j = 0; j < W; ++j)
      x.acc[j] = v[j] + Kokkos::bit_cast<Acc>(Kokkos::bit_cast<Bits>(x.acc[j]) & keep);
    store_row<W>(s, x.acc);
  }
  template <int W>
  KOKKOS_FUNCTION void contribution(index_t e, Acc (&v)[W]) const {
    if constexpr (!map_width<W>)
      return;
    else if constexpr (requires { map.template fixed<W>(e, [](index_t, Acc) {}); })
      map.template fixed<W>(e, [&](index_t k, Acc x) { v[k] += x; });
    else
      map(e, [&](index_t k, Acc x) { v[k] += x; });
  }
  template <int W>
  KOKKOS_FUNCTION void store_row(index_t s, const Acc (&a)[W]) const {
    for (int k = 0; k < W; ++k) out(s, k) = a[k];
  }
  KOKKOS_FUNCTION void zero_rows(index_t b, index_t e) const {
    for (index_t s = b; s < e; ++s)
      for (index_t k = 0; k < w; ++k) out(s, k) = Acc(0);
  }
  KOKKOS_FUNCTION void init(OutSlot d) const {
    for (index_t k = 0; k < w; ++k) ref(d, k) = Acc(0);
  }
  // Deterministic option, unsorted ids, host backends: through the permutation, a map that reads
  // rows of several views (dot products) gathers a random row of each, one that sums a row's
  // columns (component_sum) a random row of several values. Where those rows outgrow
  // the cache, the map's rows (one or two accumulators) are computed first in element order,
  // streaming the views, into the descriptor's workspace, and the tiles gather one staged row per
  // position. The sums add the same values in the same order (rows of 3 floats, L = 3, 2 threads:
  // N = 2^25 270 -> 125 ms, N = 1e5 210 -> 187 us; N = 1e4 12 -> 15 us, so not there).
  static constexpr bool can_stage = requires(const Map& mp) { mp.gather_bytes(); };
  /// Whether to stage n rows, given room for that many accumulators: rows past a core's L2, or past
  /// the map's own kStageFromBytes.
  KOKKOS_FUNCTION bool stages(index_t n, index_t room) const {
    index_t from = kCacheBytes;
    if constexpr (requires { Map::kStageFromBytes; }) from = Map::kStageFromBytes;
    return w <= 2 && n * w <= room && n * map.gather_bytes() > from;
  }
  /// rows + e * w = the map's row of element e, for e in [lo, hi) (where stages()).
  KOKKOS_FUNCTION void stage(Acc* rows, index_t lo, index_t hi) const {
    auto store = [&](auto width) {
      constexpr int W = decltype(width)::value;
      map_rows<W>(lo, hi, [&](index_t e, const Acc* v) {
        for (int k = 0; k < W; ++k) rows[e * W + k] = v[k];
      });
    };
    if (w == 1)
      store(std::integral_constant<int, 1>{});
    else
      store(std::integral_constant<int, 2>{});
  }
  /// sink(e, v) for e in [lo, hi), v[0 .. W) the map's row of W accumulators of element e; packed
  /// element rows with constant strides (with_packed_width). A packed row of PW columns may have
  /// other than W accumulators (RowMap's PW, OuterMap's PW^2) where this is instantiated but never
  /// runs (the map's width is W where it runs): its array holds kLocal, as many as any map has.
  template <int W, class Sink>
  KOKKOS_FUNCTION void map_rows(index_t lo, index_t hi, const Sink& sink) const {
    if constexpr (map_width<W>) {
      const Map mp = map;
      if constexpr (requires { mp.packed_width(); }) {
        auto packed_rows = [&](auto width) {
          constexpr int PW = decltype(width)::value;
          for (index_t e = lo; e < hi; ++e) {
            Acc v[kLocal] = {};
            mp.template packed_row<PW>(e, [&](int k, Acc x) { v[k] += x; });
            sink(e, v);
          }
        };
        if (with_packed_width(mp.packed_width(), packed_rows)) return;
      }
      for (index_t e = lo; e < hi; ++e) {
        Acc v[W] = {};
        contribution<W>(e, v);
        sink(e, v);
      }
    }
  }
  /// This reduction over the rows stage() computed for elements [0, n).
  auto staged(const Acc* rows, index_t n) const {
    using Staged = RowMap<Acc, Acc>;
    return SumReducer<Acc, Staged, Out, Fin>{Staged{Mat<const Acc>{rows, n, w, w, 1}}, out, fin,
                                             carry, w};
  }
  // BucketReduce: each element's row written to its bucket, then each bucket summed into its
  // slice of the output.
  static constexpr bool can_bucket = true;
  static constexpr int kMaxBucketWidth = 4;
  /// The rows of the valid elements of [lo, hi), element by element, each to rows + W * cur[b]++
  /// for its segment's bucket b = s >> shift. Host-only (BucketReduce), yet KOKKOS_FUNCTION, as
  /// is bucket_sums: their lambdas, passed to the host-device map_rows and with_width, are then
  /// host-device too; nvcc warned of each call of a host lambda there (#20013, #20015) when a CUDA
  /// build ran the op on a host space (test_host_in_cuda.cpp).
  template <class IdT>
  KOKKOS_FUNCTION void bucket_rows(Acc* rows, index_t* cur, const IdT* id, index_t st, index_t lo,
                                   index_t hi, index_t m, int shift) const {
    auto each = [&](auto width) {
      constexpr int W = decltype(width)::value;
      map_rows<W>(lo, hi, [&](index_t e, const Acc* v) {
        const index_t s = static_cast<index_t>(id[e * st]);
        if (s < 0 || s >= m) return;  // dropped ids: predictable
        Acc* d = rows + W * cur[s >> shift]++;
        for (int k = 0; k < W; ++k) d[k] = v[k];
      });
    };
    with_width(each);
  }
  /// Segments [s0, s1) = the sums of rows [p0, p1) (staged by bucket_rows), row p adding into
  /// segment s0 + local[p], in position order (element order within a segment); then finished.
  KOKKOS_FUNCTION void bucket_sums(const Acc* rows, const std::uint16_t* local, index_t p0,
                                   index_t p1, index_t s0, index_t s1) const {
    for (index_t s = s0; s < s1; ++s) init(OutSlot{s});
    if (Acc* o = dense_rows()) {  // packed output rows: widths and strides as constants
      auto each = [&](auto width) {
        constexpr int W = decltype(width)::value;
        Acc* slice = o + s0 * W;
        for (index_t p = p0; p < p1; ++p)
          for (int k = 0; k < W; ++k) slice[local[p] * W + k] += rows[p * W + k];
      };
      with_width(each);
    } else {
      for (index_t p = p0; p < p1; ++p) add_row(OutSlot{s0 + local[p]}, rows + p * w);
    }
    finalize_range(s0, s1);
  }
  /// f(integral_constant<int, W>) for w = W in 1 .. kMaxBucketWidth that the map can have.
  template <class F>
  KOKKOS_FUNCTION void with_width(const F& f) const {
    with_width_of<1, 2, 3, 4>(w, [&](auto width) {
      if constexpr (map_width<decltype(width)::value>) f(width);
    });
  }
  // PrivateReduce: elements added into rows of a copy; a copy's row added into an output row.
  static constexpr bool can_privatize = true;
  /// The output as packed rows (row s at dense_rows() + s * w), or null.
  KOKKOS_FUNCTION Acc* dense_rows() const {
    if constexpr (std::is_same_v<Out, Mat<Acc>>) {
      if (out.d == w && packed(out)) return out.ptr;
    } else if constexpr (requires { out.dense_rows(w); }) {
      return out.dense_rows(w);
    }
    return nullptr;
  }
  KOKKOS_FUNCTION void prefetch_row(index_t e) const {
    if constexpr (requires { map.prefetch_row(e); }) map.prefetch_row(e);
  }
  /// Row stride of PrivateReduce's copies: 4 for sums of packed rows of 3 floats (RowMap::row_vec3;
  /// the fourth lane stays 0) and for inner_products' three sums of them (DotsMap::row_vec3),
  /// whose scatter then adds an element's row with one vector load, add and store instead of
  /// three of each, and whose combine pass adds rows as vectors; else w.
  /// Unsorted sums of rows of 3 floats, N = 1e6, 2 threads: L = 30 (0.4 MB of output) 884-887 ->
  /// 638-697 us, L = 3 (4 MB) 1460-1478 -> 1226-1233 us, though the copies take 4/3 the memory;
  /// ids sorted but for every 64th swapped with a random one, L = 3: 1177-1300 -> 1032-1126 us.
  /// Copies of rows 3 floats apart added as overlapping vectors (lane 3 adding 0 to the next row)
  /// stalled there on store-to-load forwarding: 2415-2553 us.
  KOKKOS_FUNCTION index_t copy_stride() const {
    if constexpr (kPadsRows)
      if (w == 3 && map.packed_width() == 3) return 4;
    return w;
  }
  /// Whether this reducer's copies can have rows of 3 floats 4 apart (copy_stride): float sums
  /// whose map reads a row as one vector. scatter and add_copies take a row stride other than w
  /// as that padding (the only stride PrivateReduce passes besides w).
  static constexpr bool kPadsRows = [] {
#ifdef SEGOPS_HOST_VECTORS
    return std::is_same_v<Acc, float> && HostVec<float>::ok && requires(const Map& mp) {
      mp.row_vec3(0);
    };
#else
    return false;
#endif
  }();
  /// PrivateReduce's combine where the copies' rows are copy_stride() = 4 floats apart: output
  /// rows [lo, hi) = the copies' rows added in part order (the order of the packed copies' flat
  /// loop), as vectors, then finalized: a finisher that works on vectors and exposes the counts
  /// (mean's divisions) finishes each row's vector before it is stored, the same operation as
  /// finalize_range's, which read the stored rows back one value at a time (unsorted mean of
  /// rows of 3 floats, L = 3, N = 1e6, 2 threads, Zen 5: 0.96-1.05 -> 0.81-0.92 ms, the sum
  /// 0.81-0.91 ms). False, and nothing done, for other strides.
  KOKKOS_FUNCTION bool add_copies(const Acc* copies, index_t cs, index_t lo, index_t hi, index_t m,
                                  index_t parts) const {
#ifdef SEGOPS_HOST_VECTORS
    if constexpr (kPadsRows)
      if (cs != w) {
        using V = HostVec<float>::type;
        constexpr bool fused = has_finalize && vector_finish && requires { fin.counts(lo); };
        Acc* o = dense_rows();
        for (index_t s = lo; s < hi; ++s) {
          V v = load_vec<V>(copies + s * 4);
          for (index_t q = 1; q < parts; ++q) v += load_vec<V>(copies + (q * m + s) * 4);
          if constexpr (fused)
            v = fin.finish(v, V{} + divisor(static_cast<index_t>(fin.counts(s))));
          if (o && s + 1 < hi) {  // lane 3 lands on the next row, stored next
            __builtin_memcpy(o + s * 3, &v, sizeof(V));
          } else {
            const Acc a[3] = {v[0], v[1], v[2]};
            set_row(OutSlot{s}, a);
          }
        }
        if constexpr (!fused) finalize_range(lo, hi);
        return true;
      }
#endif
    if constexpr (requires { Out::static_width; }) {
      // Several outputs (OutTuple: inner_products' three sums): a segment's copies added in
      // registers, in part order, and each output stored once (set_row and add_row stored and
      // read back every value; unsorted, L = 3, 2 threads, Zen 5: inner_products of rows of 3
      // floats, N = 1e6 1.58-1.62 -> 1.42-1.44 ms before DotsMap::row_vec3 padded its copies
      // there, N = 2e6 (copies not padded) 3.2 -> 2.8-2.9 ms; inner_products_double_backward and
      // axpby_backward 0.92-0.99 of the time at N = 1e5 and 1e6, rows of 1 and 3).
      constexpr int K = Out::static_width;
      if (cs == K) {
        for (index_t s = lo; s < hi; ++s) {
          Acc a[K];
          for (int k = 0; k < K; ++k) a[k] = copies[s * K + k];
          for (index_t q = 1; q < parts; ++q)
            for (int k = 0; k < K; ++k) a[k] += copies[(q * m + s) * K + k];
          for (int k = 0; k < K; ++k) out(s, k) = a[k];
        }
        finalize_range(lo, hi);
        return true;
      }
    }
    (void)copies, (void)cs, (void)lo, (void)hi, (void)m, (void)parts;
    return false;
  }
  /// Adds the elements [lo, hi) whose ids lie in [0, m) into rows (row s at rows + s * rs: rs = w,
  /// or copy_stride()). Maps over packed element rows of 1 or 3 with contiguous ids take a loop
  /// whose widths and strides are constants (with_packed_width).
  template <class IdT>
  KOKKOS_FUNCTION void scatter(Acc* rows, index_t rs, const IdT* id, index_t st, index_t lo,
                               index_t hi, index_t m) const {
    const Map mp = map;
    const index_t ww = rs;
    // Copies larger than a core's L2 cache miss on most adds: the row of the element kAhead
    // positions on is prefetched (N = 2^25, rows of 3 floats, L = 3: 215 -> 143 ms).
    const bool far = kPrefetches && m * ww * index_t(sizeof(Acc)) > kCacheBytes;
    // element i added by add(its row, i) (unit: ids with stride 1)
    auto element = [&](auto unit, index_t i, const auto& add) {
      auto id_at = [&](index_t j) {
        const index_t s = static_cast<index_t>(id[decltype(unit)::value ? j : j * st]);
        return s >= 0 && s < m ? s : index_t(-1);  // dropped ids: predictable
      };
      if (far && i + kAhead < hi)
        prefetch<true>(rows + Kokkos::max(id_at(i + kAhead), index_t(0)) * ww);
      const index_t s = id_at(i);
      if (s >= 0) add(rows + s * ww, i);
    };
    auto loop = [&](auto unit, const auto& add) {
      for (index_t i = lo; i < hi; ++i) element(unit, i, add);
    };
    auto packed_rows = [&](auto width) {
      loop(std::true_type{}, [&](Acc* row, index_t e) {
        mp.template packed_row<decltype(width)::value>(e, [&](int k, Acc v) { row[k] += v; });
      });
    };
#ifdef SEGOPS_HOST_VECTORS
    if constexpr (requires { mp.row_sums4(index_t(0)); })
      if (ww == 1 && mp.packed_width() == 3) {
        // Single sums of packed rows of 3 floats (component_sum): four elements' sums formed at
        // once (RowSumMap::row_sums4), then added one by one. Unsorted, L = 3, 2 threads, Zen 5:
        // N = 1e5 0.034 -> 0.027-0.028 ms, 1e6 0.44 -> 0.41-0.42 ms (the random adds into the
        // copies bound it there).
        auto quads = [&](auto unit) {
          index_t i = lo;
          for (; i + 4 <= hi; i += 4) {
            const auto v = mp.row_sums4(i);
            for (int k = 0; k < 4; ++k)
              element(unit, i + k, [&](Acc* row, index_t) { *row += v[k]; });
          }
          for (; i < hi; ++i)
            element(unit, i, [&](Acc* row, index_t e) {
              mp.template packed_row<3>(e, [&](int, Acc v) { *row += v; });
            });
        };
        return st == 1 ? quads(std::true_type{}) : quads(std::false_type{});
      }
    if constexpr (kPadsRows) {
      if (rs != w) {  // copy_stride()'s padding: rows of 3 as vectors, lane 3 added 0
        using V = HostVec<float>::type;
        auto vec_rows = [&](auto unit) {
          loop(unit, [&](Acc* row, index_t e) {
            const V t = load_vec<V>(row) + mp.row_vec3(e);
            __builtin_memcpy(row, &t, sizeof(V));
          });
        };
        return st == 1 ? vec_rows(std::true_type{}) : vec_rows(std::false_type{});
      }
    }
#endif
    if constexpr (requires { mp.packed_width(); })
      if (st == 1 && with_packed_width(mp.packed_width(), packed_rows)) return;
    loop(std::false_type{},
         [&](Acc* row, index_t e) { mp(e, [&](index_t k, Acc v) { row[k] += v; }); });
  }
  KOKKOS_FUNCTION void add_row(OutSlot d, const Acc* row) const {
    for (index_t k = 0; k < w; ++k) ref(d, k) += row[k];
  }
  KOKKOS_FUNCTION void set_row(OutSlot d, const Acc* row) const {
    for (index_t k = 0; k < w; ++k) ref(d, k) = row[k];
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
    (*this)(s, out, w, counts(s));
  }
  template <class Out>
  KOKKOS_FUNCTION void operator()(index_t s, const Out& out, index_t w, index_t c) const {
    for (index_t k = 0; k < w; ++k) {
      auto& o = out(s, k);
      o = c > 0 ? o / static_cast<std::remove_reference_t<decltype(o)>>(c) : 0;
    }
  }
#ifdef SEGOPS_HOST_VECTORS
  template <class V>
  V finish(V x, V n) const {  // SumReducer::batch_runs
    return x / n;
  }
#endif
};

}  // namespace segops::impl
