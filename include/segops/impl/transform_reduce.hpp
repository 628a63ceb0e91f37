// SPDX-License-Identifier: Apache-2.0
// An element pass and a reduction over the same element rows in one sweep: the orders whose
// per-element outputs and per-segment sums read the same inputs (mul's gx and ga both read g).
#pragma once

#include <Kokkos_Core.hpp>
#include <segops/impl/segmented_reduce.hpp>
#include <segops/impl/segmented_transform.hpp>
#include <segops/impl/views.hpp>

namespace segops::impl {

/// Positions per work item of a fused sweep (TransformThenTiles), at least.
inline constexpr index_t kFusedPositions = index_t(1) << 15;

/// Rows (bytes) that a reduction reads beyond which segmented_transform_reduce fuses: four times
/// the last-level cache (kLastLevelBytes). The unit tests set SEGOPS_FUSED_ROW_BYTES=0 (fuse
/// whatever the size) so that every regime checks the fused sweep.
#ifndef SEGOPS_FUSED_ROW_BYTES
#define SEGOPS_FUSED_ROW_BYTES (index_t(128) << 20)
#endif
inline constexpr index_t kFusedRowBytes = SEGOPS_FUSED_ROW_BYTES;

/// Work item q: the element blocks (ET, an ElementTransform in blocks of kTileQuantum; a tile is a
/// whole number of them) of tiles [q group, (q + 1) group), then those tiles of the reduction (TR,
/// a TileReduce), whose rows are then still in cache. The fixup is the reduction's own.
template <class ET, class TR>
struct TransformThenTiles {
  using SweepTag = typename TR::SweepTag;
  using FixupTag = typename TR::FixupTag;
  ET et;
  TR tr;
  index_t group;  // tiles per work item
  KOKKOS_FUNCTION void operator()(SweepTag tag, index_t q) const {
    const index_t t0 = q * group, t1 = Kokkos::min(tr.ntiles, t0 + group);
    const index_t per_tile = tr.tile / kTileQuantum;
    const index_t end = Kokkos::min((et.n + kTileQuantum - 1) / kTileQuantum, t1 * per_tile);
    for (index_t b = t0 * per_tile; b < end; ++b) et(b);
    for (index_t t = t0; t < t1; ++t) tr(tag, t);
  }
  KOKKOS_FUNCTION void operator()(FixupTag tag, index_t t) const { tr(tag, t); }
};

/// segmented_transform(f), then segmented_reduce(r), where neither reads what the other writes
/// and row_bytes is what r reads per element. On host backends with sorted ids whose rows for r
/// exceed kFusedRowBytes: one sweep in work items of kFusedPositions positions or more
/// (TransformThenTiles), so that those rows come from memory once. The same kernels on the same
/// positions as the two passes, so the same results. Sorted, L = 3, rows of 3 floats, 2 threads,
/// the two ways alternated in one process (arrays staggered, as the benchmark allocates them),
/// N = 2^25: mul_backward 59-60 -> 54-56 ms, mul_double_backward 93-96 -> 88-91 ms,
/// axpby_backward 96-99 -> 92-95 ms, dot_double_backward within the noise; N = 1e7 3-9% less, N =
/// 4e6 0-14%; single floats at N = 2^25 within the noise (+-5%: not bound by memory). Rows within
/// a few times the last-level cache lost: N = 1e6 and 1.5e6 (24 to 72 MB of rows), 1-6% slower.
template <class Exec, class Seg, class F, class R>
void segmented_transform_reduce(const Exec& exec, const Seg& seg, const F& f, const R& r,
                                index_t row_bytes, const char* label) {
  if constexpr (element_block_v<Exec> == kTileQuantum) {
    const index_t n = seg.num_elements();
    if (seg.sorted() && n * row_bytes > kFusedRowBytes && tiles_fit(seg, r.width())) {
      const auto tr = tile_reduce(seg, r, IdentityElem{});
      const auto et = element_transform<kTileQuantum, false>(seg, f, false, false, nullptr);
      // tiles per work item: kFusedPositions' worth, but at least 4 work items per thread
      const index_t threads = Kokkos::max<index_t>(1, exec.concurrency());
      const index_t group = Kokkos::max<index_t>(
          1, Kokkos::min<index_t>(kFusedPositions / tr.tile, tr.ntiles / (4 * threads)));
      using Fused =
          TransformThenTiles<std::remove_const_t<decltype(et)>, std::remove_const_t<decltype(tr)>>;
      run_tiles(exec, Fused{et, tr, group}, (tr.ntiles + group - 1) / group, tr.ntiles, label);
      return;
    }
  }
  segmented_transform(exec, seg, f, label);
  segmented_reduce(exec, seg, r, label);
}

}  // namespace segops::impl
