// SPDX-License-Identifier: Apache-2.0
// Kernels that build a Segments descriptor: range/sortedness scan, counts, offsets, permutation.
#pragma once

#include <Kokkos_Core.hpp>
#include <Kokkos_Profiling_ScopedRegion.hpp>
#include <Kokkos_Sort.hpp>
#include <cstdint>
#include <segops/impl/views.hpp>

namespace segops::impl {

/// Positions per work item of the host builds' passes over the ids (ScanIds, SortedOffsetsLinear).
inline constexpr index_t kIdChunk = 4096;

/// One pass over the ids: first out-of-range position, number of such ids, number of descents.
/// Run over chunks of `chunk` positions (host backends: kIdChunk; CUDA: 1, a thread per position):
/// each chunk counts in locals, over a raw pointer with the view's stride (a constant 1 for
/// contiguous ids), a loop the compiler vectorises; the first bad position is searched for only
/// in a chunk that has one (the per-position reduction over a LayoutStride view ran at a third
/// of a whole unsorted build of N = 1e6 int ids, M = N / 3, 2 threads: 4.6-5.0 -> 2.5-2.7 ms).
template <class IdView>
struct ScanIds {
  struct value_type {
    index_t first_bad, n_bad, n_descents;
  };
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
    const auto* p = idx.data();
    auto scan = [&](auto unit) {  // unit: std::true_type where the stride is 1 (a constant)
      const index_t st = decltype(unit)::value ? index_t(1) : static_cast<index_t>(idx.stride(0));
      index_t bad = 0, descents = 0;
      index_t prev = static_cast<index_t>(p[(lo > 0 ? lo - 1 : lo) * st]);
      for (index_t i = lo; i < hi; ++i) {
        const index_t s = static_cast<index_t>(p[i * st]);
        bad += (s < 0) | (s >= m);
        descents += prev > s;
        prev = s;
      }
      if (bad > 0)
        for (index_t i = lo; i < hi; ++i) {
          const index_t s = static_cast<index_t>(p[i * st]);
          if (s < 0 || s >= m) {
            if (i < v.first_bad) v.first_bad = i;
            break;
          }
        }
      v.n_bad += bad;
      v.n_descents += descents;
    };
    if (idx.stride(0) == 1)
      scan(std::true_type{});
    else
      scan(std::false_type{});
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

/// Sorted ids: offsets(s) = first position whose id is >= s, found by binary search (no atomics).
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
/// first position, without a branch on whether a segment starts (random for short segments). Only a
/// gap (empty segments) takes a loop. The descriptor takes this only where the execution space can
/// access host memory (one thread per chunk, and a gap of G empty segments is G stores by one
/// thread).
template <class IdView, class Offsets>
struct SortedOffsetsLinear {
  IdView idx;
  Offsets offsets;
  index_t n, m;
  /// The number of chunks to run over (positions 0 .. n).
  index_t chunks() const { return n / kIdChunk + 1; }
  KOKKOS_FUNCTION void operator()(index_t c) const {
    const index_t lo = c * kIdChunk, hi = Kokkos::min(n + 1, lo + kIdChunk), nn = n, mm = m;
    const auto* p = idx.data();
    index_t* off = offsets.data();
    auto walk = [&](auto unit) {  // unit: std::true_type where the stride is 1 (a constant)
      const index_t st = decltype(unit)::value ? index_t(1) : static_cast<index_t>(idx.stride(0));
      auto id = [&](index_t i) { return i < nn ? static_cast<index_t>(p[i * st]) : mm; };
      index_t k = lo;
      if (lo > 0) {
        const index_t before = id(lo - 1);
        while (k < hi && id(k) == before) ++k;
      }
      if (k == hi) return;
      index_t cur = id(hi - 1);
      for (index_t i = hi - 1; i >= k; --i) {
        const index_t prev = i > 0 ? id(i - 1) : index_t(-1);
        off[cur] = i;
        if (cur > prev + 1)
          for (index_t s = prev + 1; s < cur; ++s) off[s] = i;
        cur = prev;
      }
    };
    if (idx.stride(0) == 1)
      walk(std::true_type{});
    else
      walk(std::false_type{});
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
/// [n t / parts, n (t + 1) / parts) into its own array, without atomics (part 0 into counts,
/// zeroed by the caller; part t > 0 into copies + (t - 1) m, zeroed here by its thread); AddTag
/// then adds the copies into counts. Counts are integers: the result does not depend on `parts`.
template <class IdView, class Counts>
struct PrivateCounts {
  struct CountTag {};
  struct AddTag {};
  IdView idx;
  Counts counts;
  index_t* copies;
  index_t n, m, parts;
  KOKKOS_FUNCTION void operator()(CountTag, index_t t) const {
    index_t* mine = t == 0 ? counts.data() : copies + (t - 1) * m;
    if (t > 0)
      for (index_t s = 0; s < m; ++s) mine[s] = 0;
    const index_t hi = n * (t + 1) / parts;
    for (index_t i = n * t / parts; i < hi; ++i) {
      const index_t s = static_cast<index_t>(idx(i));
      if (s >= 0 && s < m) ++mine[s];
    }
  }
  KOKKOS_FUNCTION void operator()(AddTag, index_t s) const {
    index_t c = counts(s);
    for (index_t t = 1; t < parts; ++t) c += copies[(t - 1) * m + s];
    counts(s) = c;
  }
};

template <class Counts, class Offsets>
struct ExclusiveScan {
  Counts counts;
  Offsets offsets;
  index_t m;
  KOKKOS_FUNCTION void operator()(index_t s, index_t& partial, bool final) const {
    if (final) offsets(s) = partial;
    if (s < m) partial += counts(s);
  }
};

template <class Offsets, class Counts>
struct CountsFromOffsets {
  Offsets offsets;
  Counts counts;
  KOKKOS_FUNCTION void operator()(index_t s) const { counts(s) = offsets(s + 1) - offsets(s); }
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

template <class Counts>
struct MaxCount {
  Counts counts;
  KOKKOS_FUNCTION void operator()(index_t s, index_t& mx) const {
    if (counts(s) > mx) mx = counts(s);
  }
};

}  // namespace segops::impl
