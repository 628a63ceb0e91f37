// SPDX-License-Identifier: Apache-2.0
// Randomized property test of the bilinear, matvec and nonlinear ops: per op order, many seeds
// of random N (0..3000), M (1..200), D (1..9) (matvec: R, C in 1..5), rank, segment-size skew,
// descriptor regime (sorted, unsorted, deterministic, trusted with out-of-range ids), and a
// random memory arrangement per view (LayoutStride views, contiguous or padded, row- or
// column-major); every output against the double-precision reference. A failure prints the seed.
#include <chrono>

#include "test_ops_common.hpp"

namespace segtest::ops {
namespace {

constexpr int kMinSeeds = 8, kMaxSeeds = 100;
constexpr double kBudgetSeconds = 1.5;

enum class Regime { Sorted, Unsorted, Deterministic, TrustedDropped };
const char* regime_name(Regime r) {
  switch (r) {
    case Regime::Sorted:
      return "sorted";
    case Regime::Unsorted:
      return "unsorted";
    case Regime::Deterministic:
      return "unsorted+deterministic";
    case Regime::TrustedDropped:
      return "trusted with out-of-range ids";
  }
  return "?";
}

/// A random element->segment map: uniform ids, or half of them in one heavy segment.
Case random_case(std::mt19937_64& rng, Regime regime, std::uint64_t seed) {
  const i64 n = static_cast<i64>(rng() % 3001), m = 1 + static_cast<i64>(rng() % 200);
  Case c{"random", {}, m};
  const bool skew = rng() % 2;
  const i64 heavy = static_cast<i64>(rng() % m);
  for (i64 i = 0; i < n; ++i)
    c.ids.push_back(skew && rng() % 2 ? heavy : static_cast<i64>(rng() % m));
  if (regime == Regime::Sorted || (regime == Regime::TrustedDropped && rng() % 2))
    std::sort(c.ids.begin(), c.ids.end());
  if (regime == Regime::TrustedDropped)
    c = with_dropped_ids(c, seed, 2 + static_cast<i64>(rng() % 20));
  c.name = skew ? "random skewed" : "random uniform";
  return c;
}

/// Seed k of op `def`: a random case, descriptor, shape, rank and layout, checked against the
/// reference.
template <class Fam>
void check_seed(const OpDef& def, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const auto regime = static_cast<Regime>(rng() % 4);
  const Case c = random_case(rng, regime, seed);
  const Mode mode = regime == Regime::Sorted                       ? Mode::Sorted
                    : regime == Regime::Unsorted                   ? Mode::Unsorted
                    : regime == Regime::Deterministic || rng() % 2 ? Mode::Deterministic
                                                                   : Mode::Unsorted;
  const auto seg = make_segments<std::int32_t>(c, mode, regime == Regime::TrustedDropped);
  Dims dm{2, 1 + static_cast<i64>(rng() % 9), 1 + static_cast<i64>(rng() % 5),
          1 + static_cast<i64>(rng() % 5)};
  if constexpr (Fam::has_rank1) {  // R and C are matvec's only
    dm.r = dm.c = 1;
    if (rng() % 4 == 0) dm = {1, 1, 1, 1};
  }
  const bool inst = rng() % 2;
  const auto what = describe(def, c, regime_name(regime), dm) + " seed " + std::to_string(seed);
  if (dm.rank == 1) {
    if constexpr (Fam::has_rank1)
      check_op<Fam, float, double, std::int32_t, 1, Kokkos::LayoutStride>(
          def, seg, c, dm, rng, what, Arr::RowMajor, inst, &rng);
  } else {
    check_op<Fam, float, double, std::int32_t, 2, Kokkos::LayoutStride>(def, seg, c, dm, rng, what,
                                                                        Arr::RowMajor, inst, &rng);
  }
}

/// Seeds 0, 1, 2, ... of every op of the family in turn, until kBudgetSeconds have passed (at
/// least kMinSeeds, at most kMaxSeeds per op): a busy machine runs fewer seeds, never fewer than
/// kMinSeeds. The seed sequence is fixed, so a failure reproduces.
template <class Fam>
void property(std::uint64_t family_seed) {
  const auto start = std::chrono::steady_clock::now();
  int k = 0;
  for (; k < kMaxSeeds; ++k) {
    const std::chrono::duration<double> spent = std::chrono::steady_clock::now() - start;
    if (k >= kMinSeeds && spent.count() > kBudgetSeconds) break;
    for (const auto& def : Fam::ops()) {
      check_seed<Fam>(def, family_seed * 1000003u + static_cast<std::uint64_t>(def.id) * 1009u + k);
      if (::testing::Test::HasFailure()) return;
    }
  }
  ::testing::Test::RecordProperty("seeds_per_op", k);
}

TEST(Property, BilinearRandomShapesAndRegimes) { property<Bilinear>(401); }
TEST(Property, MatvecRandomShapesAndRegimes) { property<Matvec>(402); }
TEST(Property, NonlinearRandomShapesAndRegimes) { property<Nonlinear>(403); }

}  // namespace
}  // namespace segtest::ops
