// SPDX-License-Identifier: Apache-2.0
// The Segments descriptor: sortedness, counts, offsets, the deterministic permutation, id view
// kinds, empty descriptors, trusted ids, statistics.
#include "test_common.hpp"

namespace segtest {
namespace {

template <class V>
std::vector<i64> to_host_i64(const V& v) {
  const auto d = to_host(v);
  return std::vector<i64>(d.begin(), d.end());
}

std::vector<i64> exclusive_scan(const std::vector<i64>& counts) {
  std::vector<i64> off(counts.size() + 1, 0);
  for (size_t s = 0; s < counts.size(); ++s) off[s + 1] = off[s] + counts[s];
  return off;
}

/// Valid element indices ordered by (segment, element index): the stable counting-sort order.
std::vector<i64> stable_order(const Case& c) {
  std::vector<i64> order;
  for (i64 i = 0; i < c.n(); ++i)
    if (c.valid(i)) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](i64 a, i64 b) { return c.ids[a] < c.ids[b]; });
  return order;
}

/// Every accessor of `seg` against the host references for case `c`.
template <class Seg>
void check_descriptor(const Seg& seg, const Case& c, bool deterministic_option,
                      const std::string& what) {
  static_assert(std::is_same_v<typename Seg::index_type, std::int64_t>);
  static_assert(std::is_same_v<typename decltype(seg.offsets())::value_type, const std::int64_t>);
  static_assert(std::is_same_v<typename decltype(seg.counts())::value_type, const std::int64_t>);
  const auto counts = ref_counts(c);
  const i64 n_valid = std::accumulate(counts.begin(), counts.end(), i64(0));
  bool in_range_sorted = n_valid == c.n() && std::is_sorted(c.ids.begin(), c.ids.end());
  EXPECT_EQ(seg.num_elements(), c.n()) << what;
  EXPECT_EQ(seg.num_segments(), c.m) << what;
  EXPECT_EQ(seg.num_valid(), n_valid) << what;
  EXPECT_EQ(seg.sorted(), in_range_sorted) << what;
  EXPECT_EQ(seg.max_count(), counts.empty() ? 0 : *std::max_element(counts.begin(), counts.end()))
      << what;
  EXPECT_EQ(to_host_i64(seg.counts()), counts) << what;
  const auto offsets = to_host_i64(seg.offsets());
  EXPECT_EQ(offsets, exclusive_scan(counts)) << what;
  EXPECT_EQ(offsets.back(), n_valid) << what;
  EXPECT_EQ(to_host_i64(seg.ids()), c.ids) << what;

  const bool needs_perm = !in_range_sorted && deterministic_option && n_valid > 0;
  EXPECT_EQ(seg.deterministic(), in_range_sorted || deterministic_option || n_valid == 0) << what;
  if (!needs_perm) {
    EXPECT_EQ(seg.permutation().extent(0), 0u) << what << ": no permutation expected";
    return;
  }
  // Stable and covering exactly the valid elements: positions [offsets(s), offsets(s+1)) list
  // the elements of segment s in ascending index order.
  auto perm = to_host_i64(seg.permutation());
  ASSERT_EQ(static_cast<i64>(perm.size()), c.n()) << what;
  // the dropped elements last, in ascending index order
  std::vector<i64> dropped;
  for (i64 i = 0; i < c.n(); ++i)
    if (!c.valid(i)) dropped.push_back(i);
  EXPECT_EQ(std::vector<i64>(perm.begin() + n_valid, perm.end()), dropped) << what;
  perm.resize(n_valid);
  EXPECT_EQ(perm, stable_order(c)) << what;
}

/// The bucket layout of host backends' bucketed sums: built exactly where the option asks for it
/// (unsorted ids with a valid element; automatic: more than kBucketOutputBytes of rows of
/// kBucketRowBytes, kBucketOutputBytesDeterministic with the deterministic option), slices of
/// 2^shift segments, and the valid elements laid out bucket by bucket, in element order within a
/// bucket, each chunk's part of a bucket where bucket_starts says.
template <class Seg>
void check_buckets(const Seg& seg, const Case& c, segops::Buckets opt, bool det,
                   const std::string& what) {
  namespace si = segops::impl;
  const auto counts = ref_counts(c);
  const i64 n_valid = std::accumulate(counts.begin(), counts.end(), i64(0));
  const bool host = Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible;
  const bool wanted = opt == segops::Buckets::always ||
                      (opt == segops::Buckets::automatic &&
                       c.m * si::kBucketRowBytes >
                           (det ? si::kBucketOutputBytesDeterministic : si::kBucketOutputBytes));
  const bool built = host && !seg.sorted() && n_valid > 0 && wanted;
  EXPECT_EQ(seg.num_buckets() > 0, built) << what;
  if (!built) {
    EXPECT_EQ(seg.bucket_local().extent(0), 0u) << what;
    EXPECT_FALSE(seg.bucketed(4)) << what;
    return;
  }
  const int shift = seg.bucket_shift();
  const i64 nb = seg.num_buckets(), chunk = seg.bucket_chunk();
  EXPECT_GE(shift, si::kBucketMinShift) << what;
  EXPECT_EQ(nb, ((c.m - 1) >> shift) + 1) << what;
  EXPECT_EQ(chunk % si::kTileQuantum, 0) << what;
  const i64 nc = (c.n() + chunk - 1) / chunk;
  EXPECT_LE(nc, si::kBucketChunks) << what;
  EXPECT_TRUE(seg.bucketed(si::kBucketRowBytes)) << what;
  EXPECT_FALSE(seg.bucketed(si::kBucketRowBytes + 1)) << what;
  // expected: valid elements stably ordered by bucket
  std::vector<i64> order;
  for (i64 i = 0; i < c.n(); ++i)
    if (c.valid(i)) order.push_back(i);
  std::stable_sort(order.begin(), order.end(),
                   [&](i64 a, i64 b) { return (c.ids[a] >> shift) < (c.ids[b] >> shift); });
  const auto starts = to_host_i64(seg.bucket_starts());
  ASSERT_EQ(static_cast<i64>(starts.size()), nc * nb + 1) << what;
  EXPECT_EQ(starts.back(), n_valid) << what;
  for (i64 b = 0; b < nb; ++b)
    for (i64 ch = 0; ch < nc;
         ++ch) {  // before (b, ch): elements of earlier buckets, or of b in earlier chunks
      const auto before = std::count_if(order.begin(), order.end(), [&](i64 e) {
        const i64 eb = c.ids[e] >> shift;
        return eb < b || (eb == b && e < ch * chunk);
      });
      EXPECT_EQ(starts[ch * nb + b], before) << what << ": bucket " << b << " chunk " << ch;
    }
  const auto local = to_host_i64(seg.bucket_local());
  ASSERT_EQ(static_cast<i64>(local.size()), n_valid) << what;
  for (i64 p = 0; p < n_valid; ++p)
    if (local[p] != (c.ids[order[p]] & ((i64(1) << shift) - 1))) {
      ADD_FAILURE() << what << ": bucket_local(" << p << ") = " << local[p] << ", element "
                    << order[p] << " of segment " << c.ids[order[p]];
      return;
    }
}

template <class IdT>
void check_regimes(Mode mode) {
  for (const auto& c : regimes(7, mode)) {
    const auto seg = make_segments<IdT>(c, mode);
    const std::string what = std::string(mode_name(mode)) + " " + c.name;
    check_descriptor(seg, c, deterministic_option(mode), what);
    check_buckets(seg, c, buckets_option(mode), deterministic_option(mode), what);
  }
}

/// Many segments (several buckets), some ids dropped, each bucket option; and the automatic
/// option on either side of its threshold.
TEST(Segments, BucketLayout) {
  const Case c = with_dropped_ids(many_segments_case(13, 70000, 4), 14);
  for (auto opt : {segops::Buckets::always, segops::Buckets::never, segops::Buckets::automatic})
    for (bool det : {false, true}) {
      const segops::Segments<std::int32_t, Exec> seg(
          device_ids<std::int32_t>(c.ids), c.m,
          {.trusted = true, .deterministic = det, .buckets = opt});
      const std::string what = c.name + (det ? " deterministic" : "") + " option " +
                               std::to_string(static_cast<int>(opt));
      check_descriptor(seg, c, det, what);
      check_buckets(seg, c, opt, det, what);
      if (opt == segops::Buckets::always &&
          Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible)
        EXPECT_GE(seg.num_buckets(), 4) << what;
    }
  namespace si = segops::impl;
  for (Mode mode : {Mode::Unsorted, Mode::Deterministic}) {
    const bool det = deterministic_option(mode);
    const i64 at = (det ? si::kBucketOutputBytesDeterministic : si::kBucketOutputBytes) /
                   si::kBucketRowBytes;  // the largest M without buckets
    for (i64 m : {at, at + 1}) {
      const Case big = many_segments_case(15, m, 2);
      const auto seg = make_segments<std::int32_t>(big, mode);
      check_buckets(seg, big, segops::Buckets::automatic, det,
                    std::string(mode_name(mode)) + " automatic M = " + std::to_string(m));
      if (Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible)
        EXPECT_EQ(seg.num_buckets() > 0, m > at) << mode_name(mode) << " M = " << m;
    }
  }
}

TEST(Segments, RegimesInt32) {
  for (Mode mode : kModes) check_regimes<std::int32_t>(mode);
}
TEST(Segments, RegimesInt64) {
  for (Mode mode : kModes) check_regimes<std::int64_t>(mode);
}

TEST(Segments, SortednessDetection) {
  const struct {
    std::vector<i64> ids;
    i64 m;
    bool sorted;
  } cases[] = {
      {{0, 0, 1, 1, 0}, 2, false},
      {{0, 2, 2, 5}, 6, true},  // gaps: empty segments
      {{3, 3, 3}, 4, true},
      {{1, 0}, 2, false},
      {{0, 1, 2, 3, 4, 5, 6, 7, 6}, 8, false},  // one descent at the very end
      {{1, 0, 1, 2, 3, 4, 5, 6, 7}, 8, false},  // one descent at the start
      {{}, 3, true},
      {{0}, 1, true},
  };
  for (const auto& t : cases) {
    const Case c{"handmade", t.ids, t.m};
    for (Mode mode : {Mode::Unsorted, Mode::Deterministic}) {
      const auto seg = make_segments<std::int32_t>(c, mode);
      EXPECT_EQ(seg.sorted(), t.sorted) << ::testing::PrintToString(t.ids);
      check_descriptor(seg, c, deterministic_option(mode), ::testing::PrintToString(t.ids));
    }
  }
}

/// A permutation big enough for Kokkos::sort (CUDA) to take its parallel path and for the host
/// counting sort to split it among its owner threads, with many equal ids.
TEST(Segments, PermutationStableOnLargeInput) {
  std::mt19937_64 rng(8);
  Case c{"large", {}, 37};
  for (i64 i = 0; i < 200000; ++i) c.ids.push_back(static_cast<i64>(rng() % 37));
  const auto seg = make_segments<std::int64_t>(c, Mode::Deterministic);
  check_descriptor(seg, c, true, c.name);
}

/// Id views of every kind the descriptor accepts: LayoutStride subview, LayoutLeft, const,
/// unmanaged, const unmanaged strided; the descriptor reads them through their strides.
template <class IdT>
void check_id_views() {
  std::mt19937_64 rng(9);
  for (Mode mode : kModes)
    for (const auto& c : regimes(9, mode)) {
      if (c.name != "N0" && c.name != "empty_segments" && c.name != "mixed") continue;
      const bool det = deterministic_option(mode);
      const segops::SegmentsOptions opt{.deterministic = det, .buckets = buckets_option(mode)};
      const std::string what = std::string(mode_name(mode)) + " " + c.name;
      // (n, 3) LayoutRight array with the ids in column 1: a rank-1 view of stride 3
      auto big = uninit<Kokkos::View<IdT**, Kokkos::LayoutRight, Mem>>("big", c.n(), 3);
      auto h = Kokkos::create_mirror_view(big);
      for (i64 i = 0; i < c.n(); ++i) {
        h(i, 0) = static_cast<IdT>(-1);
        h(i, 1) = static_cast<IdT>(c.ids[i]);
        h(i, 2) = static_cast<IdT>(c.m + 1);
      }
      Kokkos::deep_copy(big, h);
      Kokkos::View<const IdT*, Kokkos::LayoutStride, Mem> strided =
          Kokkos::subview(big, Kokkos::ALL, 1);
      ASSERT_EQ(strided.stride(0), 3u);
      check_descriptor(segops::Segments<IdT, Exec>(strided, c.m, opt), c, det, what + " stride");
      check_descriptor(
          segops::Segments<IdT, Exec>(Exec(), Kokkos::subview(big, Kokkos::ALL, 1), c.m, opt), c,
          det, what + " subview");

      const auto plain = device_ids<IdT>(c.ids);
      auto left = uninit<Kokkos::View<IdT*, Kokkos::LayoutLeft, Mem>>("left", c.n());
      Kokkos::deep_copy(left, plain);
      check_descriptor(segops::Segments<IdT, Exec>(left, c.m, opt), c, det, what + " left");
      Kokkos::View<const IdT*, Mem> cview = plain;
      check_descriptor(segops::Segments<IdT, Exec>(cview, c.m, opt), c, det, what + " const");
      Kokkos::View<IdT*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>> unmanaged(plain.data(),
                                                                                 c.n());
      check_descriptor(segops::Segments<IdT, Exec>(unmanaged, c.m, opt), c, det,
                       what + " unmanaged");
      Kokkos::View<const IdT*, Kokkos::LayoutStride, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>
          cu(strided.data(), Kokkos::LayoutStride(c.n(), 3));
      check_descriptor(segops::Segments<IdT, Exec>(cu, c.m, opt), c, det,
                       what + " const unmanaged strided");
      // class template argument deduction: the execution space of the ids view's device type
      const Kokkos::View<IdT*, Kokkos::Device<Exec, Mem>> on_exec = plain;
      segops::Segments ctad(on_exec, c.m, opt);
      static_assert(std::is_same_v<decltype(ctad), segops::Segments<IdT, Exec>>);
      check_descriptor(ctad, c, det, what + " CTAD");
      if (::testing::Test::HasFatalFailure()) return;
    }
}
TEST(Segments, IdViewKindsInt32) { check_id_views<std::int32_t>(); }
TEST(Segments, IdViewKindsInt64) { check_id_views<std::int64_t>(); }

TEST(Segments, NoSegmentsNoElements) {
  for (Mode mode : kModes)
    for (bool trusted : {false, true}) {
      const Case c{"M0N0", {}, 0};
      const auto seg = make_segments<std::int64_t>(c, mode, trusted);
      check_descriptor(seg, c, deterministic_option(mode), "M0N0");
      EXPECT_EQ(seg.offsets().extent(0), 1u);
      EXPECT_EQ(seg.counts().extent(0), 0u);
      EXPECT_TRUE(seg.sorted());
      EXPECT_TRUE(seg.deterministic());
      EXPECT_EQ(seg.trusted(), trusted);
    }
}

TEST(Segments, SegmentsButNoElements) {
  const Case c{"M5N0", {}, 5};
  for (Mode mode : kModes) {
    const auto seg = make_segments<std::int32_t>(c, mode);
    check_descriptor(seg, c, deterministic_option(mode), c.name);
    EXPECT_EQ(seg.max_count(), 0);
  }
}

/// Host builds pass over the ids in chunks of kIdChunk positions, one work item each (the range
/// and sortedness scan, the sorted offsets): a segment start, a gap of empty segments, a descent
/// or an out-of-range id at a chunk's first or last position, and segments longer than a chunk,
/// come out as anywhere else.
TEST(Segments, ChunkBoundaries) {
  const i64 k = segops::impl::kIdChunk;
  for (const i64 at : {k - 1, k, k + 1, 2 * k}) {
    const std::string where = " at " + std::to_string(at);
    // segment 0 over [0, at), empty segments 1 and 2, segment 3 over 2k positions, then segments
    // of 1 to 3 elements and two trailing empty ones
    std::vector<i64> ids(at, 0);
    ids.insert(ids.end(), 2 * k, 3);
    for (i64 s = 4; static_cast<i64>(ids.size()) < 4 * k + 7; ++s)
      ids.insert(ids.end(), 1 + s % 3, s);
    const Case gap{"gap" + where, ids, ids.back() + 3};
    // the only descent is from position at - 1 (0 -> 4) to at (3)
    Case descent_ids{"descent" + where, ids, gap.m};
    descent_ids.ids[at - 1] = 4;
    const Case& descent = descent_ids;
    // N a whole number of chunks
    const Case whole{"whole chunks" + where, std::vector<i64>(ids.begin(), ids.begin() + 2 * k),
                     gap.m};
    for (Mode mode : {Mode::Unsorted, Mode::Deterministic})
      for (const Case* c : {&gap, &descent, &whole}) {
        const std::string what = c->name + " " + mode_name(mode);
        check_descriptor(make_segments<std::int32_t>(*c, mode), *c, deterministic_option(mode),
                         what);
        check_descriptor(make_segments<std::int64_t>(*c, mode), *c, deterministic_option(mode),
                         what + " int64");
      }
    // the first of two out-of-range ids is named
    Case bad = gap;
    bad.ids[at] = bad.m;
    bad.ids[at + 3] = -1;
    try {
      make_segments<std::int32_t>(bad, Mode::Unsorted);
      ADD_FAILURE() << "no error for an out-of-range id" << where;
    } catch (const segops::Error& e) {
      EXPECT_NE(std::string(e.what()).find("id at position " + std::to_string(at) + " is " +
                                           std::to_string(bad.m)),
                std::string::npos)
          << e.what();
      EXPECT_NE(std::string(e.what()).find("(2 out-of-range ids in total)"), std::string::npos)
          << e.what();
    }
  }
}

/// Sorted ids over several chunks, with segments of every length the host build's offset walk
/// tells apart (a chunk's mean length L: at most 2, with gaps of random lengths; between 2 and 24;
/// 24 or more, where runs of one id store nothing), runs of empty segments, and empty segments at
/// both ends.
TEST(Segments, SortedOffsetWalks) {
  std::mt19937_64 rng(11);
  const i64 n = 3 * segops::impl::kIdChunk + 123;
  for (int kind = 0; kind < 6; ++kind) {
    std::vector<i64> counts(rng() % 6, 0);
    for (i64 total = 0; total < n;) {
      const i64 r = static_cast<i64>(rng() % 1000);
      const i64 c = std::min(n - total, kind == 0   ? r % 3                  // L ~ 1, a third empty
                                        : kind == 1 ? (r % 10 == 0 ? 0 : 1)  // L ~ 1, few gaps
                                        : kind == 2 ? r % 7                  // L ~ 3
                                        : kind == 3 ? r % 49                 // L ~ 24
                                        : kind == 4 ? (r % 4 == 0 ? 1 + r % 100 : 0)
                                                    : (r % 100 == 0 ? 3000 : r % 2000));
      counts.push_back(c);
      total += c;
    }
    counts.insert(counts.end(), rng() % 4, 0);
    const Case c{"walk " + std::to_string(kind), ids_from_counts(counts),
                 static_cast<i64>(counts.size())};
    check_descriptor(make_segments<std::int32_t>(c, Mode::Sorted), c, false, c.name);
    check_descriptor(make_segments<std::int64_t>(c, Mode::Sorted), c, false, c.name + " int64");
  }
}

/// Trusted ids out of range are dropped: num_valid, counts, offsets and the permutation ignore
/// them; the descriptor never reports them as sorted.
TEST(Segments, TrustedOutOfRangeIds) {
  for (Mode mode : {Mode::Unsorted, Mode::Deterministic})
    for (bool sorted_base : {true, false})
      for (const auto& base : regimes(10, sorted_base)) {
        if (base.n() == 0) continue;
        const auto c = with_dropped_ids(base, 11, 4);
        const auto s32 = make_segments<std::int32_t>(c, mode, true);
        const auto s64 = make_segments<std::int64_t>(c, mode, true);
        EXPECT_TRUE(s32.trusted());
        EXPECT_LT(s32.num_valid(), s32.num_elements()) << c.name;
        check_descriptor(s32, c, mode == Mode::Deterministic,
                         std::string(mode_name(mode)) + " int32 " + c.name);
        check_descriptor(s64, c, mode == Mode::Deterministic,
                         std::string(mode_name(mode)) + " int64 " + c.name);
      }
}

/// Trusted ids that happen to be all in range behave exactly like checked ones.
TEST(Segments, TrustedInRangeIds) {
  for (Mode mode : kModes)
    for (const auto& c : regimes(12, mode)) {
      const auto seg = make_segments<std::int32_t>(c, mode, true);
      check_descriptor(seg, c, deterministic_option(mode), c.name);
    }
}

TEST(Segments, MaxCount) {
  const struct {
    std::vector<i64> counts;
  } cases[] = {{{0, 0, 0}}, {{1}}, {{3, 9, 2, 9}}, {{0, 0, 17}}, {{5000}}};
  for (const auto& t : cases)
    for (bool sorted : {true, false}) {
      Case c{"counts", ids_from_counts(t.counts), static_cast<i64>(t.counts.size())};
      if (!sorted) std::reverse(c.ids.begin(), c.ids.end());
      const auto seg = make_segments<std::int64_t>(c, sorted ? Mode::Sorted : Mode::Unsorted);
      EXPECT_EQ(seg.max_count(), *std::max_element(t.counts.begin(), t.counts.end()))
          << ::testing::PrintToString(t.counts);
    }
}

/// The carry scratch has the requested capacity (in doubles), and a backend default otherwise.
TEST(Segments, CarryCapacityOption) {
  const Case c{"small", {0, 1, 1, 2}, 3};
  const auto seg = make_segments<std::int32_t>(c, Mode::Sorted, false, 123);
  EXPECT_EQ(seg.carry().extent(0), 123u);
  const auto def = make_segments<std::int32_t>(c, Mode::Sorted);
  EXPECT_GT(def.carry().extent(0), 0u);
}

}  // namespace
}  // namespace segtest
