// SPDX-License-Identifier: Apache-2.0
// Determinism (SPEC §5): with sorted ids, or unsorted ids and the deterministic option, results
// are bitwise identical run to run and independent of the number of threads.
//
// Thread-count independence is checked in-process: each host executable computes every result
// on its own backend and on a second host backend and requires equal bits. The OpenMP executable
// (run by ctest with 1 and with 2 threads) compares against Kokkos::Serial; the Serial executable
// compares against the default host space (OpenMP when enabled). Without Kokkos::Serial, or on
// CUDA (whose tiling and arithmetic legitimately differ from the host's), only repeated runs are
// compared.
#include "linear_common.hpp"

namespace segtest {
namespace {

#if defined(KOKKOS_ENABLE_SERIAL) && !defined(SEGOPS_TEST_CUDA)
#define SEGTEST_HAVE_REFERENCE_BACKEND 1
using RefExec = std::conditional_t<std::is_same_v<Exec, Kokkos::Serial>,
                                   Kokkos::DefaultHostExecutionSpace, Kokkos::Serial>;
#endif

/// About 300000 elements: one giant segment of 150000 among ~15000 small ones (0..20 long),
/// so reductions cross many tiles, both inside one segment and between segments.
Case big_case(Mode mode, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<i64> counts(15001);
  for (auto& x : counts) x = static_cast<i64>(rng() % 21);
  counts[4000] = 150000;
  Case c{"big", ids_from_counts(counts), static_cast<i64>(counts.size())};
  if (mode != Mode::Sorted) std::shuffle(c.ids.begin(), c.ids.end(), rng);
  return c;
}

/// Runs `op` (float data) three times on `seg`, each into a freshly poisoned output, requires
/// identical bits, and returns them.
template <int RIn, int ROut, class Seg>
std::vector<unsigned char> repeated(const LinOpInfo& op, const Seg& seg, const Case& c, i64 d,
                                    const std::vector<float>& pool, const std::string& what) {
  const i64 ri = op.in_rows(c), wi = op.in_width(d), ro = op.out_rows(c), wo = op.out_width(d);
  const std::vector<float> in_h(pool.begin(), pool.begin() + ri * wi);
  const auto in = device_view<float, RIn>(in_h, ri, wi);
  std::vector<unsigned char> first;
  for (int run = 0; run < 3; ++run) {
    const auto out = poisoned_view<float, ROut>(ro, wo);
    run_linear(Exec(), op.op, seg, in, out);
    auto bytes = host_bytes(out);
    if (run == 0)
      first = std::move(bytes);
    else
      EXPECT_TRUE(bytes == first) << what << ": run " << run << " differs from run 0";
  }
  return first;
}

/// Every op (or only the reductions) at rank 1 and at rank 2 with width d (rank 2 only when
/// `wide_only`), with `carry_capacity` as given (0: the default).
template <class IdT>
void check_determinism(Mode mode, i64 d = 3, i64 carry_capacity = 0, bool wide_only = false) {
  const Case c = big_case(mode, 61);
  std::mt19937_64 rng(62);
  const auto pool = random_vector<float>(rng, c.n() * d);
  const auto ids = device_ids<IdT>(c.ids);
  const segops::SegmentsOptions opt{.deterministic = deterministic_option(mode),
                                    .carry_capacity = carry_capacity,
                                    .buckets = buckets_option(mode)};
  const segops::Segments<IdT, Exec> seg(ids, c.m, opt);
  // Bucketed sums run in element order without the deterministic option (host backends).
  ASSERT_TRUE(seg.deterministic() || mode == Mode::Bucketed);
  ASSERT_EQ(seg.sorted(), mode == Mode::Sorted);
#ifdef SEGTEST_HAVE_REFERENCE_BACKEND
  const segops::Segments<IdT, RefExec> ref_seg(ids, c.m, opt);
#endif
  std::uint64_t hash = 0;
  for (const auto& op : kLinearOps)
    for (int rank : {1, 2}) {
      if (op.component && rank == 1) continue;
      if (wide_only && (rank == 1 || !op.reduces)) continue;
      const i64 w = rank == 1 ? 1 : d;
      const std::string what =
          std::string(op.name) + " [" + mode_name(mode) + ", rank " + std::to_string(rank) + "]";
      with_ranks(op, rank, [&](auto ri_, auto ro_) {
        constexpr int RIn = decltype(ri_)::value, ROut = decltype(ro_)::value;
        const auto bytes = repeated<RIn, ROut>(op, seg, c, w, pool, what);
        hash = hash * 31 + fnv1a(bytes);
#ifdef SEGTEST_HAVE_REFERENCE_BACKEND
        const i64 ri = op.in_rows(c), wi = op.in_width(w);
        const auto in = device_view<float, RIn>(
            std::vector<float>(pool.begin(), pool.begin() + ri * wi), ri, wi);
        const auto out = uninit_view<float, ROut>("ref_out", op.out_rows(c), op.out_width(w));
        poison(out, RefExec());
        run_linear(RefExec(), op.op, ref_seg, in, out);
        RefExec().fence();
        EXPECT_TRUE(host_bytes(out) == bytes)
            << what << ": " << Exec::name() << " with concurrency " << Exec().concurrency()
            << " differs from " << RefExec::name() << " with concurrency "
            << RefExec().concurrency();
#endif
      });
    }
  ::testing::Test::RecordProperty(std::string("fnv1a_") + mode_name(mode) + "_D" +
                                      std::to_string(d) + "_carry" + std::to_string(carry_capacity),
                                  std::to_string(hash));
  ::testing::Test::RecordProperty("concurrency", Exec().concurrency());
}

TEST(Determinism, SortedIdsBitwiseReproducible) { check_determinism<std::int32_t>(Mode::Sorted); }
TEST(Determinism, DeterministicOptionBitwiseReproducible) {
  check_determinism<std::int64_t>(Mode::Deterministic);
  check_determinism<std::int64_t>(Mode::DeterministicBucketed);
}
/// On host backends, bucketed sums (rows of up to 24 bytes) are independent of the thread count
/// with default options too; on CUDA the option is ignored and sums use atomics.
#ifndef SEGOPS_TEST_CUDA
TEST(Determinism, BucketedSumsBitwiseReproducible) {
  check_determinism<std::int32_t>(Mode::Bucketed);
}
#endif

/// Rows wider than a small carry capacity (7 accumulators, room for 4) keep the guarantee.
/// (Component sums have one accumulator and stay tiled; they are checked here too.)
TEST(Determinism, RowsWiderThanCarryCapacity) {
  check_determinism<std::int32_t>(Mode::Sorted, 7, 4, true);
  check_determinism<std::int32_t>(Mode::Deterministic, 7, 4, true);
  check_determinism<std::int32_t>(Mode::DeterministicBucketed, 7, 4, true);
}

/// Trusted descriptors with dropped ids and the deterministic option are reproducible too.
TEST(Determinism, DeterministicOptionWithDroppedIds) {
  const Case c = with_dropped_ids(big_case(Mode::Deterministic, 63), 64, 9);
  std::mt19937_64 rng(65);
  const auto pool = random_vector<float>(rng, c.n() * 3);
  const auto seg = make_segments<std::int32_t>(c, Mode::Deterministic, /*trusted=*/true);
  ASSERT_TRUE(seg.deterministic());
  for (const auto& op : kLinearOps) {
    if (!op.reduces) continue;
    with_ranks(op, 2, [&](auto ri, auto ro) {
      repeated<decltype(ri)::value, decltype(ro)::value>(op, seg, c, 3, pool, op.name);
    });
  }
}

}  // namespace
}  // namespace segtest
