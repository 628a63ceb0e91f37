// SPDX-License-Identifier: Apache-2.0
// Kernels that build a Segments descriptor: range/sortedness scan, counts, offsets, permutation.
#pragma once

#include <Kokkos_Core.hpp>
#include <Kokkos_Profiling_ScopedRegion.hpp>
#include <Kokkos_Sort.hpp>
#include <cstdint>
#include <segops/impl/views.hpp>
#include <type_traits>

namespace segops::impl {

/// Positions per work item of the host builds' passes over the ids (ScanIds, SortedOffsetsLinear).
inline constexpr index_t kIdChunk = 4096;

/// One pass over the ids: first out-of-range position, number of such ids, number of descents.
/// Run over chunks of `chunk` positions (host backends: kIdChunk; CUDA: 1, a thread per position):
/// each chunk counts in 32-bit locals, over a raw pointer with the view's stride (a constant 1 for
/// contiguous ids), a loop the compiler vectorises: a position is out of range where its id, as
/// the unsigned type of its width, is at least min(m, 2^(bits - 1)) (negative ids wrap above),
/// and a descent is compared with the position before it in the same pass. The first bad
/// position is searched for only in a chunk that has one. (The per-position reduction over a
/// LayoutStride view ran at a third of a whole unsorted build of N = 1e6 int ids, M = N / 3,
/// 2 threads: 4.6-5.0 -> 2.5-2.7 ms; the chunked loop with 64-bit counters and the previous id
/// carried between positions still ran scalar, 30% of a sorted build.)
template <class IdView>
struct ScanIds {
  struct value_type {
    index_t first_bad, n_bad, n_descents;
  };
  using id_type = std::remove_const_t<typename IdView::value_type>;
  using unsigned_id = std::make_unsigned_t<id_type>;
  IdView idx;
  index_t n, m, chunk;

  /// The number of chunks to run over.
  index_t chunks() const { return (n + chunk - 1) / chunk; }
  KOKKOS_FUNCTION void init(value_type& v) const {
    v.first_bad = Kokkos::reduction_identity<index_t>::min();
    v.n_bad = 0;
    v.n_descents = 0;
  }
  KOKKOS_FUNCTION void join(value_type& a, const value_type& b) const {
    if (b.first_bad < a.first_bad) a.first_bad = b.first_bad;
    a.n_bad += b.n_bad;
    a.n_descents += b.n_descents;
  }
  KOKKOS_FUNCTION void operator()(index_t c, value_type& v) const {
    const index_t lo = c * chunk, hi = Kokkos::min(n, lo + chunk);
    constexpr index_t kIdMax = Kokkos::Experimental::finite_max_v<id_type>;
    const unsigned_id bound = m > kIdMax ? unsigned_id(kIdMax) + 1 : static_cast<unsigned_id>(m);
    const id_type* p = idx.data();
    with_unit_stride(idx, [&](auto unit) {
      const index_t st = stride_of(unit, idx);
      std::uint32_t bad = 0, descents = 0;  // a chunk has at most 2^32 - 1 positions
      const index_t first = lo > 0 ? lo : index_t(1);
      if (lo == 0) bad += static_cast<unsigned_id>(p[0]) >= bound;
      for (index_t i = first; i < hi; ++i) {
        const id_type s = p[i * st];
        bad += static_cast<unsigned_id>(s) >= bound;
        descents += p[(i - 1) * st] > s;
      }
      if (bad > 0)
        for (index_t i = lo; i < hi; ++i)
          if (static_cast<unsigned_id>(p[i * st]) >= bound) {
            if (i < v.first_bad) v.first_bad = i;
            break;
          }
      v.n_bad += bad;
      v.n_descents += descents;
    });
  }
};

/// First position p in [0, n) with v(p) >= value (n if none), for a non-decreasing v.
template <class V>
KOKKOS_FUNCTION index_t lower_bound(const V& v, index_t n, index_t value) {
  index_t lo = 0, hi = n;
  while (lo < hi) {
    const index_t mid = lo + (hi - lo) / 2;
    if (static_cast<index_t>(v(mid)) < value)
      lo = mid + 1;
    else
      hi = mid;
  }
  return lo;
}

/// The sum and the largest (at least 0) of c[0 .. len), the largest by four running maxima: one
/// would chain a compare and a select per value (the host builds' counts: CountsBlockScan,
/// CountsFromOffsets). In one loop: a loop of its own for the sum cost CountsBlockScan's whole
/// unsorted builds 5% (N = 1e6, L = 3, 2 threads: 0.46-0.48 -> 0.49 ms).
struct SumMax {
  index_t sum, max;
};
KOKKOS_INLINE_FUNCTION SumMax sum_and_largest(const index_t* c, index_t len) {
  index_t sum = 0, m0 = 0, m1 = 0, m2 = 0, m3 = 0, s = 0;
  for (; s + 4 <= len; s += 4) {
    sum += (c[s] + c[s + 1]) + (c[s + 2] + c[s + 3]);
    m0 = Kokkos::max(m0, c[s]);
    m1 = Kokkos::max(m1, c[s + 1]);
    m2 = Kokkos::max(m2, c[s + 2]);
    m3 = Kokkos::max(m3, c[s + 3]);
  }
  for (; s < len; ++s) {
    sum += c[s];
    m0 = Kokkos::max(m0, c[s]);
  }
  return {sum, Kokkos::max(Kokkos::max(m0, m1), Kokkos::max(m2, m3))};
}

/// Sorted ids on CUDA: offsets(s) = first position whose id is >= s, by binary search (no atomics).
template <class IdView, class Offsets>
struct SortedOffsets {
  IdView idx;
  Offsets offsets;
  index_t n;
  KOKKOS_FUNCTION void operator()(index_t s) const { offsets(s) = lower_bound(idx, n, s); }
};

/// Sorted ids on host backends: position i (0 <= i <= n) starts the segments (id(i - 1), id(i)],
/// taking id(-1) = -1 and id(n) = m; their offsets are i. O(N + M) (the binary searches of
/// SortedOffsets cost O(M log N): 92.8 M instructions for N = 1e6, M = 333,333). Run over chunks
/// of kIdChunk positions with the fields in locals (stores to offsets could alias a functor's
/// fields, which were reloaded at every position; with the branch-free stores below, sorted
/// builds of N = 1e6, 2 threads, 6.9-7.0 -> 5.3-5.6 ms in a noisy hour). A chunk skips the
/// positions that continue the segment of the position before it, then walks its positions
/// backwards storing offsets(id(i)) = i at every one: the last store to a segment's offset is its
/// first position, without a branch on whether a segment starts (random for short segments). Its
/// stores follow the chunk's mean segment length L, so that its branches are predicted: for
/// L <= 2.5 each position fills a gap of up to 3 empty segments without a branch on its length
/// (gap_store); for L >= 24 a run of one id stores nothing. Whole sorted builds, N = 1e6, int ids,
/// 2 threads, Zen 5, before (a store per position, a loop for a gap) -> after, with
/// CountsFromOffsets' loop: L = 1 1.85-1.89 -> 0.70-0.75 ms, L = 3 0.45-0.47 -> 0.39-0.42,
/// L = 30 0.32-0.33 -> 0.26-0.27, L = 1000 0.29-0.31 -> 0.16-0.17 (a serial count-and-scan:
/// 0.68-0.71, 0.44-0.48, 0.73-0.77, 0.26-0.27). gap_store up to L = 2.5, not 2: L = 2
/// 0.61-0.63 -> 0.54 ms (serial 0.52-0.53); up to L = 4 lost at L = 3 and 4 (0.46-0.48 -> 0.51-0.52
/// and 0.36 -> 0.42 ms, beside a compile). Four positions at a time for L < 24 ran slower (L = 5:
/// 0.38 -> 0.57 ms). The descriptor takes this only where the execution space can access host
/// memory (one thread per chunk, and a gap of G empty segments is G stores by one thread).
template <class IdView, class Offsets>
struct SortedOffsetsLinear {
  IdView idx;
  Offsets offsets;
  index_t n, m;
  /// The number of chunks to run over (positions 0 .. n).
  index_t chunks() const { return n / kIdChunk + 1; }
  void operator()(index_t c) const {
    const index_t lo = c * kIdChunk, hi = Kokkos::min(n + 1, lo + kIdChunk), nn = n, mm = m;
    const auto* p = idx.data();
    index_t* off = offsets.data();
    with_unit_stride(idx, [&](auto unit) {
      const index_t st = stride_of(unit, idx);
      auto id = [&](index_t i) { return i < nn ? static_cast<index_t>(p[i * st]) : mm; };
      index_t k = lo;
      const index_t before = lo > 0 ? id(lo - 1) : index_t(-1);
      if (lo > 0)
        while (k < hi && id(k) == before) ++k;
      if (k == hi) return;
      // Positions [k, hi) from the last: i = n (id m) first, then the ids' positions down to
      // max(k, 1), whose previous id is p[i - 1], then position 0 (previous id -1).
      index_t i = hi - 1;
      if (i == nn) {
        gap_store(off, i, mm, i > 0 ? static_cast<index_t>(p[(i - 1) * st]) : index_t(-1), before);
        --i;
      }
      const index_t stop = k > 0 ? k : index_t(1);
      // How the walk stores depends on the chunk's mean segment length L (its positions over its
      // segments), so that its branches are predicted:
      const index_t segs = id(hi - 1) - before, len = hi - k;
      if (2 * len <= 5 * segs) {
        // L <= 2.5: many gaps, of random lengths; each position as gap_store.
        for (; i >= stop; --i) gap_store(off, i, p[i * st], p[(i - 1) * st], before);
      } else if (24 * segs > len) {
        // 2.5 < L < 24: a store per position, a loop for a gap.
        for (; i >= stop; --i) store(off, i, p[i * st], p[(i - 1) * st]);
      } else {
        // L >= 24: four positions at a time, none storing where the four and the one below them
        // have one id (a position below stores it), a gap out of line.
        for (; i - 3 >= stop; i -= 4) {
          const index_t a = p[i * st], b = p[(i - 1) * st], c = p[(i - 2) * st],
                        d = p[(i - 3) * st], e = p[(i - 4) * st];
          if (a == e) continue;
          off[a] = i;
          off[b] = i - 1;
          off[c] = i - 2;
          off[d] = i - 3;
          if (((a - b) | (b - c) | (c - d) | (d - e)) > 1) gaps4(off, i, a, b, c, d, e, before);
        }
        for (; i >= stop; --i) gap_store(off, i, p[i * st], p[(i - 1) * st], before);
      }
      if (k == 0 && i == 0) gap_store(off, 0, p[0], -1, before);
    });
  }
  /// offsets(cur) = i and the gap (prev, cur) = i. A gap of up to 3 is filled by storing i into
  /// offsets(cur - 3 .. cur) where those are the chunk's (above `before`): no branch on its length
  /// (ids with about one element per segment leave a third empty); offsets(s) for s <= prev are
  /// stored again by the positions below (the last store into a segment is its first position).
  static void gap_store(index_t* off, index_t i, index_t cur, index_t prev, index_t before) {
    if (cur <= prev + 4 && cur >= before + 4) {
      off[cur - 3] = i;
      off[cur - 2] = i;
      off[cur - 1] = i;
      off[cur] = i;
    } else {
      store(off, i, cur, prev);
    }
  }
  /// offsets(cur) = i, and a loop over the gap (prev, cur).
  static void store(index_t* off, index_t i, index_t cur, index_t prev) {
    off[cur] = i;
    for (index_t s = prev + 1; s < cur; ++s) off[s] = i;
  }
  /// The gaps of positions i - 3 .. i (ids d .. a, e below them), out of the walk's loop.
  [[gnu::noinline]] static void gaps4(index_t* off, index_t i, index_t a, index_t b, index_t c,
                                      index_t d, index_t e, index_t before) {
    gap_store(off, i, a, b, before);
    gap_store(off, i - 1, b, c, before);
    gap_store(off, i - 2, c, d, before);
    gap_store(off, i - 3, d, e, before);
  }
};

/// tile_first(q) = first segment s with offsets(s) >= q * kTileQuantum (m if none).
template <class Offsets, class TileFirst>
struct TileFirstSegments {
  Offsets offsets;
  TileFirst tile_first;
  index_t m;
  KOKKOS_FUNCTION void operator()(index_t q) const {
    tile_first(q) = lower_bound(offsets, m, q * kTileQuantum);
  }
};

template <class IdView, class Counts>
struct CountIds {
  IdView idx;
  Counts counts;
  index_t m;
  KOKKOS_FUNCTION void operator()(index_t i) const {
    const index_t s = static_cast<index_t>(idx(i));
    if (s >= 0 && s < m) Kokkos::atomic_inc(&counts(s));
  }
};

/// Unsorted ids on host backends: part t of `parts` counts the ids of positions
/// [n t / parts, n (t + 1) / parts) into its own array of m counters (copies + t stride, zeroed by
/// its thread), without atomics; CountsBlockScan then adds the arrays. Counter is std::uint32_t
/// where a part's positions fit it (half the footprint of the randomly updated arrays: whole
/// unsorted builds of N = 1e6, M = N / 3, 2 threads, 2.3-2.9 -> 1.1-1.6 ms), else index_t.
///
/// The stride is m rounded up to whole cache lines: with arrays back to back, the two parts'
/// increments of the segments at either end of a line they shared fought over it (M = 1000,
/// N = 1e6, 2 threads: whole builds 0.44-0.45 -> 0.27 ms; a serial count-and-scan 0.26-0.27).
/// With few segments each part counts into kCountLanes arrays in turn, so that consecutive
/// increments of one counter do not wait on each other (a single-thread loop, N = 5e5, M = 1000:
/// 0.17 -> 0.12 ms; M = 2e4 0.19 -> 0.17, M = 1e5 0.21 -> 0.24), and ids the scan found all in
/// range are not tested again (0.17 -> 0.15). Whole builds with both, against the padding alone
/// (alternating runs, N = 1e6): M = 1000 0.26-0.27 -> 0.20-0.22 ms, M = 1e4 0.27 -> 0.24-0.27,
/// M = N / 3 0.48-0.53 -> 0.44-0.49.
template <class IdView, class Counter>
struct PrivateCounts {
  IdView idx;
  Counter* copies;
  index_t n, m, stride, parts;
  index_t lanes;   // 1, or kCountLanes arrays per part (lanes_for)
  bool all_valid;  // every id is in [0, m): no range test
  /// Arrays per part for M segments: kCountLanes where they fit kCountLanesMaxM counters, else 1.
  static constexpr index_t kCountLanes = 4, kCountLanesMaxM = 16384;
  static index_t lanes_for(index_t m) { return m <= kCountLanesMaxM ? kCountLanes : 1; }
  KOKKOS_FUNCTION void operator()(index_t t) const {
    Counter* mine = copies + t * lanes * stride;
    for (index_t s = 0; s < lanes * stride; ++s) mine[s] = 0;
    const index_t lo = n * t / parts, hi = n * (t + 1) / parts, mm = m, st = stride;
    auto count = [&](auto valid, auto lanes4) {
      auto add = [&](Counter* c, index_t i) {
        const index_t s = static_cast<index_t>(idx(i));
        if (decltype(valid)::value || (s >= 0 && s < mm)) ++c[s];
      };
      index_t i = lo;
      if constexpr (decltype(lanes4)::value)
        for (; i + 4 <= hi; i += 4) {
          add(mine, i);
          add(mine + st, i + 1);
          add(mine + 2 * st, i + 2);
          add(mine + 3 * st, i + 3);
        }
      for (; i < hi; ++i) add(mine, i);
    };
    const bool four = lanes == kCountLanes;
    if (all_valid && four)
      count(std::true_type{}, std::true_type{});
    else if (all_valid)
      count(std::true_type{}, std::false_type{});
    else if (four)
      count(std::false_type{}, std::true_type{});
    else
      count(std::false_type{}, std::false_type{});
  }
};

/// Unsorted ids on CUDA, after atomic counting: one scan over s in [0, m] writes the exclusive
/// prefix sum of counts to offsets(s); the scan's total carries the largest count.
template <class Counts, class Offsets>
struct CountsScan {
  struct value_type {
    index_t sum, max;
  };
  Counts counts;
  Offsets offsets;
  index_t m;
  KOKKOS_FUNCTION void init(value_type& v) const { v.sum = v.max = 0; }
  KOKKOS_FUNCTION void join(value_type& a, const value_type& b) const {
    a.sum += b.sum;
    if (b.max > a.max) a.max = b.max;
  }
  KOKKOS_FUNCTION void operator()(index_t s, value_type& v, bool final) const {
    const index_t c = s < m ? counts(s) : 0;
    if (final) offsets(s) = v.sum;
    v.sum += c;
    if (c > v.max) v.max = c;
  }
};

/// Unsorted ids on host backends: the count of segment s is the sum of `parts` arrays of m
/// counters, `stride` apart (PrivateCounts' copies, or counts itself with parts = 1 after atomic
/// counting), and offsets its exclusive prefix sum, in two passes over blocks of kIdChunk segments
/// instead of a parallel_scan (which reads its input in both of its passes, and kept the pair of
/// sums in memory): SumTag adds the arrays into counts and writes each block's sum and largest
/// count to `blocks`; the caller turns the sums into exclusive prefixes; OffsetTag writes the
/// offsets from counts. (Whole unsorted builds, N = 1e6, M = N / 3, 2 threads: 1.09 ms with the
/// parallel_scan, 0.99 with the copies added before a scan of counts, 0.86-0.90 ms like this. On a
/// later machine, 0.61 -> 0.50 ms with SumTag's loops over one part at a time and four running
/// maxima, where it had added the parts segment by segment, its largest count a compare-and-select
/// chain.)
///
/// With `cursors`, SumTag also turns each part's counts into that part's first place within the
/// segment (the counts of the parts before it), for PermByPart.
template <class Counts, class Offsets, class Counter>
struct CountsBlockScan {
  struct SumTag {};
  struct OffsetTag {};
  Counter* copies;
  Counts counts;
  Offsets offsets;
  index_t* blocks;  // 2 per block: the sum (then its exclusive prefix) and the largest count
  index_t m, stride, parts;
  bool cursors;
  /// The number of blocks.
  index_t size() const { return (m + kIdChunk - 1) / kIdChunk; }
  KOKKOS_FUNCTION void operator()(SumTag, index_t b) const {
    const index_t lo = b * kIdChunk, len = Kokkos::min(m, lo + kIdChunk) - lo;
    index_t* c = counts.data() + lo;
    // A loop over the block's segments per part, adding into counts (in L1 between passes), so
    // each loop vectorises. Part 0 is copied first: copies may be counts itself (parts = 1).
    Counter* k0 = copies + lo;
    for (index_t s = 0; s < len; ++s) {
      c[s] = static_cast<index_t>(k0[s]);
      if (cursors) k0[s] = 0;
    }
    for (index_t t = 1; t < parts; ++t) {
      Counter* k = copies + t * stride + lo;
      if (cursors)
        for (index_t s = 0; s < len; ++s) {
          const index_t v = static_cast<index_t>(k[s]);
          k[s] = static_cast<Counter>(c[s]);
          c[s] += v;
        }
      else
        for (index_t s = 0; s < len; ++s) c[s] += static_cast<index_t>(k[s]);
    }
    const SumMax t = sum_and_largest(c, len);
    blocks[2 * b] = t.sum;
    blocks[2 * b + 1] = t.max;
  }
  KOKKOS_FUNCTION void operator()(OffsetTag, index_t b) const {
    const index_t lo = b * kIdChunk, hi = Kokkos::min(m, lo + kIdChunk);
    index_t p = blocks[2 * b];
    for (index_t s = lo; s < hi; ++s) {
      offsets(s) = p;
      p += counts(s);
    }
    if (hi == m) offsets(m) = p;
  }
};

/// counts(s) from sorted ids' offsets, reducing the largest; over chunks of `chunk` segments
/// (host backends: kIdChunk, the counts' loop, then sum_and_largest; CUDA: 1). (The reduction per
/// segment, into the reducer's reference, chained a compare and a select per segment.)
template <class Offsets, class Counts>
struct CountsFromOffsets {
  Offsets offsets;
  Counts counts;
  index_t m, chunk;
  /// The number of chunks to run over.
  index_t chunks() const { return (m + chunk - 1) / chunk; }
  KOKKOS_FUNCTION void operator()(index_t c, index_t& mx) const {
    const index_t lo = c * chunk, hi = Kokkos::min(m, lo + chunk);
    const index_t* off = offsets.data();
    index_t* cnt = counts.data();
    for (index_t s = lo; s < hi; ++s) cnt[s] = off[s + 1] - off[s];
    mx = Kokkos::max(mx, sum_and_largest(cnt + lo, hi - lo).max);
  }
};

/// Stable order key: segment-major, element index minor; dropped ids sort after every valid one.
template <class IdView, class Keys>
struct PermKeys {
  IdView idx;
  Keys keys;
  index_t n, m;
  KOKKOS_FUNCTION void operator()(index_t i) const {
    index_t s = static_cast<index_t>(idx(i));
    if (s < 0 || s >= m) s = m;
    keys(i) = s * n + i;
  }
};

/// The deterministic option's stable permutation on host backends, by counting sort: part k of
/// `parts` owns the segments [m k / parts, m (k + 1) / parts) (the last part also the dropped ids,
/// slot m), reads every id in element order and places each of its elements at its segment's
/// cursor (cursor: the offsets, advanced as elements are placed; cursor(m) starts at num_valid).
/// Parts write disjoint cursors and positions, and the result does not depend on `parts`.
template <class IdView, class Cursor, class Perm>
struct PermByOwner {
  IdView idx;
  Cursor cursor;
  Perm perm;
  index_t n, m, parts;
  void operator()(index_t k) const {
    const index_t lo = m * k / parts, hi = k + 1 == parts ? m + 1 : m * (k + 1) / parts;
    for (index_t i = 0; i < n; ++i) {
      index_t s = static_cast<index_t>(idx(i));
      if (s < 0 || s >= m) s = m;
      if (s >= lo && s < hi) perm(cursor(s)++) = i;
    }
  }
};

/// The deterministic option's stable permutation on host backends where PrivateCounts counted:
/// part t walks its positions in order (the slice it counted) and places each valid element at
/// offsets(s) + its own cursor for s (CountsBlockScan with cursors: the elements of s in earlier
/// parts come first), each element read once instead of once per part as in PermByOwner. The
/// result is the unique stable order, whatever `parts` is. Dropped ids are placed by the caller.
/// (Prefetching the offset and cursor of the segment kAhead positions on, and the place of that
/// element, changed nothing measurable.)
template <class IdView, class Offsets, class Counter, class Perm>
struct PermByPart {
  IdView idx;
  Offsets offsets;
  Counter* cursors;  // `stride` apart
  Perm perm;
  index_t n, m, stride, parts;
  void operator()(index_t t) const {
    Counter* mine = cursors + t * stride;
    const index_t hi = n * (t + 1) / parts;
    for (index_t i = n * t / parts; i < hi; ++i) {
      const index_t s = static_cast<index_t>(idx(i));
      if (s >= 0 && s < m) perm(offsets(s) + static_cast<index_t>(mine[s]++)) = i;
    }
  }
};

template <class Keys>
struct KeysToPerm {
  Keys keys;
  index_t n;
  KOKKOS_FUNCTION void operator()(index_t j) const { keys(j) = keys(j) % n; }
};

/// Bucketed sums (host backends): starts(c * nb + b) = the number of valid elements of chunk c
/// whose segment lies in bucket b (segment >> shift). Chunk c owns its row: no atomics.
template <class IdView, class Starts>
struct BucketCounts {
  IdView idx;
  Starts starts;
  index_t n, m, chunk, nb;
  int shift;
  void operator()(index_t c) const {
    for (index_t i = c * chunk; i < Kokkos::min(n, (c + 1) * chunk); ++i) {
      const index_t s = static_cast<index_t>(idx(i));
      if (s >= 0 && s < m) ++starts(c * nb + (s >> shift));
    }
  }
};

/// local(p) for the valid elements of chunk c, each at its bucket's cursor (cursor: the starts,
/// advanced as elements are placed): the segment less its bucket's first segment.
template <class IdView, class Cursor, class Local>
struct BucketLocal {
  IdView idx;
  Cursor cursor;
  Local local;
  index_t n, m, chunk, nb;
  int shift;
  void operator()(index_t c) const {
    const index_t mask = (index_t(1) << shift) - 1;
    for (index_t i = c * chunk; i < Kokkos::min(n, (c + 1) * chunk); ++i) {
      const index_t s = static_cast<index_t>(idx(i));
      if (s >= 0 && s < m)
        local(cursor(c * nb + (s >> shift))++) = static_cast<std::uint16_t>(s & mask);
    }
  }
};

}  // namespace segops::impl
