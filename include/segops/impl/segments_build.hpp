// SPDX-License-Identifier: Apache-2.0
// Kernels that build a Segments descriptor: range/sortedness scan, counts, offsets, permutation.
#pragma once

#include <Kokkos_Core.hpp>
#include <Kokkos_Profiling_ScopedRegion.hpp>
#include <Kokkos_Sort.hpp>
#include <cstdint>
#include <segops/impl/views.hpp>

namespace segops::impl {

/// One pass over the ids: first out-of-range position, number of such ids, number of descents.
template <class IdView>
struct ScanIds {
  struct value_type {
    index_t first_bad, n_bad, n_descents;
  };
  IdView idx;
  index_t m;

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
  KOKKOS_FUNCTION void operator()(index_t i, value_type& v) const {
    const index_t s = static_cast<index_t>(idx(i));
    if (s < 0 || s >= m) {
      if (i < v.first_bad) v.first_bad = i;
      ++v.n_bad;
    }
    if (i > 0 && static_cast<index_t>(idx(i - 1)) > s) ++v.n_descents;
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
/// taking id(-1) = -1 and id(n) = m; their offsets are i. O(N + M) with each offset written once
/// (the binary searches of SortedOffsets cost O(M log N): 92.8 M instructions for N = 1e6,
/// M = 333,333). A gap of G empty segments is G stores by one thread, which a GPU would feel: the
/// descriptor takes this only where the execution space can access host memory.
template <class IdView, class Offsets>
struct SortedOffsetsLinear {
  IdView idx;
  Offsets offsets;
  index_t n, m;
  KOKKOS_FUNCTION void operator()(index_t i) const {
    const index_t prev = i > 0 ? static_cast<index_t>(idx(i - 1)) : index_t(-1);
    const index_t cur = i < n ? static_cast<index_t>(idx(i)) : m;
    for (index_t s = prev + 1; s <= cur; ++s) offsets(s) = i;
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
