// SPDX-License-Identifier: Apache-2.0
// matvec and matvec_transposed (forward, backward, double backward) with per-segment matrices of
// shapes (R, C) = (3, 3), (2, 5), (1, 1) against double-precision references over every regime,
// mode and layout; against finite differences; on bad input; and for bitwise determinism.
#include "test_ops_common.hpp"

namespace segtest::ops {
namespace {

TEST(Matvec, AllOpsInt32FloatFloat) {
  for (Mode mode : kModes) sweep<Matvec, std::int32_t, float, float, std::int32_t>(mode, 201);
}
TEST(Matvec, AllOpsInt64DoubleDouble) {
  for (Mode mode : kModes) sweep<Matvec, std::int64_t, double, double, i64>(mode, 202);
}
TEST(Matvec, AllOpsInt32FloatIntoDouble) {
  for (Mode mode : kModes) sweep<Matvec, std::int32_t, float, double, i64>(mode, 203);
}
TEST(Matvec, LayoutLeftAndStride) { layout_sweep<Matvec>(211); }
TEST(Matvec, TrustedDropsOutOfRangeIds) { dropped_sweep<Matvec>(221); }
TEST(Matvec, NoSegmentsOrAllIdsDropped) { degenerate_sweep<Matvec>(225); }
TEST(Matvec, ManySegmentsUnsorted) { many_segments_sweep<Matvec>(227); }
TEST(Matvec, FiniteDifferences) { fd_sweep<Matvec>(231); }
TEST(Matvec, SmallCarryTiles) { carry_sweep<Matvec>(233); }

// ---- bad input: each throws segops::Error naming the op and the argument, outputs untouched ----

struct Small {
  Case c = small_case();
  segops::Segments<std::int32_t, Exec> seg = make_segments<std::int32_t>(c, Mode::Sorted);
  std::mt19937_64 rng{241};
  i64 n = c.n(), m = c.m, r = 2, k = 3;  // k: the column count C
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> rows(i64 nr, i64 w) {
    return device_matrix<double>(random_vector<double>(rng, nr * w), nr, w);
  }
  Kokkos::View<double***, Mem> matrices(i64 nm, i64 nr, i64 nc) {
    auto a = uninit<Kokkos::View<double***, Mem>>("A", nm, nr, nc);
    auto h = Kokkos::create_mirror_view(a);
    std::uniform_real_distribution<double> u(-1, 1);
    for (i64 s = 0; s < nm; ++s)
      for (i64 p = 0; p < nr; ++p)
        for (i64 q = 0; q < nc; ++q) h(s, p, q) = u(rng);
    Kokkos::deep_copy(a, h);
    return a;
  }
  auto poisoned_matrices(i64 nm, i64 nr, i64 nc) {
    Slot<double, 3, Kokkos::LayoutRight> a({3, {nm, nr, nc}}, Arr::RowMajor);
    a.fill(nullptr);
    return a.view;
  }
};

/// Every element of a rank-3 view still holds kPoison.
template <class V>
void expect_poisoned(const V& a, const std::string& what) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), a);
  for (size_t s = 0; s < h.extent(0); ++s)
    for (size_t p = 0; p < h.extent(1); ++p)
      for (size_t q = 0; q < h.extent(2); ++q) ASSERT_EQ(h(s, p, q), kPoison) << what;
}

TEST(MatvecErrors, MatrixOfWrongSegmentCount) {
  Small t;
  const auto A = t.matrices(t.m + 1, t.r, t.k);
  const auto x = t.rows(t.n, t.k);
  const auto o = poisoned_view<double, 2>(t.n, t.r);
  expect_error([&] { segops::segmented_matvec(Exec(), t.seg, A, x, o); }, "segmented_matvec", "a",
               o);
}
TEST(MatvecErrors, MatrixOfWrongRowCount) {
  Small t;
  const auto A = t.matrices(t.m, t.r + 1, t.k);
  const auto x = t.rows(t.n, t.k);
  const auto o = poisoned_view<double, 2>(t.n, t.r);
  expect_error([&] { segops::segmented_matvec(t.seg, A, x, o); }, "segmented_matvec", "a", o);
}
TEST(MatvecErrors, MatrixOfWrongColumnCount) {
  Small t;
  const auto A = t.matrices(t.m, t.r, t.k + 1);
  const auto x = t.rows(t.n, t.k);
  const auto o = poisoned_view<double, 2>(t.n, t.r);
  expect_error([&] { segops::segmented_matvec(Exec(), t.seg, A, x, o); }, "segmented_matvec", "a",
               o);
}
TEST(MatvecErrors, TransposedGivenThePlainShapes) {
  Small t;  // A (M, R, C) with x (N, C) and o (N, R): right for matvec, wrong for the transpose
  const auto A = t.matrices(t.m, t.r, t.k);
  const auto x = t.rows(t.n, t.k);
  const auto o = poisoned_view<double, 2>(t.n, t.r);
  expect_error([&] { segops::segmented_matvec_transposed(Exec(), t.seg, A, x, o); },
               "segmented_matvec_transposed", "a", o);
}
TEST(MatvecErrors, InputOfWrongElementCount) {
  Small t;
  const auto A = t.matrices(t.m, t.r, t.k);
  const auto x = t.rows(t.n + 1, t.k);
  const auto o = poisoned_view<double, 2>(t.n, t.r);
  expect_error([&] { segops::segmented_matvec(Exec(), t.seg, A, x, o); }, "segmented_matvec", "x",
               o);
}
TEST(MatvecErrors, OutputAliasesInput) {
  Small t;
  const auto A = t.matrices(t.m, t.k, t.k);
  const auto h = random_vector<double>(t.rng, t.n * t.k);
  const auto x = device_matrix<double>(h, t.n, t.k);
  expect_error([&] { segops::segmented_matvec(Exec(), t.seg, A, x, x); }, "segmented_matvec", "o");
  EXPECT_EQ(to_host(x), h) << "the aliased input was modified";
}
TEST(MatvecErrors, BackwardGradientOfWrongElementCount) {
  Small t;
  const auto A = t.matrices(t.m, t.r, t.k);
  const auto x = t.rows(t.n, t.k), g = t.rows(t.n - 1, t.r);
  const auto gx = poisoned_view<double, 2>(t.n, t.k);
  const auto gA = t.poisoned_matrices(t.m, t.r, t.k);
  expect_error([&] { segops::segmented_matvec_backward(Exec(), t.seg, A, x, g, gx, gA); },
               "segmented_matvec_backward", "g", gx);
  expect_poisoned(gA, "gA");
}
TEST(MatvecErrors, BackwardMatrixGradientOfWrongShape) {
  Small t;
  const auto A = t.matrices(t.m, t.r, t.k);
  const auto x = t.rows(t.n, t.k), g = t.rows(t.n, t.r);
  const auto gx = poisoned_view<double, 2>(t.n, t.k);
  const auto gA = t.poisoned_matrices(t.m, t.k, t.r);
  expect_error([&] { segops::segmented_matvec_backward(Exec(), t.seg, A, x, g, gx, gA); },
               "segmented_matvec_backward", "ga", gx);
  expect_poisoned(gA, "gA");
}
TEST(MatvecErrors, DoubleBackwardCotangentMatrixOfWrongShape) {
  Small t;
  const auto A = t.matrices(t.m, t.r, t.k), W = t.matrices(t.m, t.r, t.k + 1);
  const auto x = t.rows(t.n, t.k), g = t.rows(t.n, t.r), u = t.rows(t.n, t.k);
  const auto gg = poisoned_view<double, 2>(t.n, t.r), xp = poisoned_view<double, 2>(t.n, t.k);
  const auto Ap = t.poisoned_matrices(t.m, t.r, t.k);
  expect_error(
      [&] { segops::segmented_matvec_double_backward(Exec(), t.seg, A, x, g, u, W, gg, xp, Ap); },
      "segmented_matvec_double_backward", "w", gg, xp);
  expect_poisoned(Ap, "Ap");
}
TEST(MatvecErrors, TransposedDoubleBackwardOutputMatrixOfWrongSegmentCount) {
  Small t;  // transposed form: x, u (N, R), g (N, C)
  const auto A = t.matrices(t.m, t.r, t.k), W = t.matrices(t.m, t.r, t.k);
  const auto x = t.rows(t.n, t.r), g = t.rows(t.n, t.k), u = t.rows(t.n, t.r);
  const auto gg = poisoned_view<double, 2>(t.n, t.k), xp = poisoned_view<double, 2>(t.n, t.r);
  const auto Ap = t.poisoned_matrices(t.m - 1, t.r, t.k);
  expect_error(
      [&] {
        segops::segmented_matvec_transposed_double_backward(Exec(), t.seg, A, x, g, u, W, gg, xp,
                                                            Ap);
      },
      "segmented_matvec_transposed_double_backward", "ap", gg, xp);
  expect_poisoned(Ap, "Ap");
}

// ---- determinism ----

/// matvec_backward's gA (a reduction of width R C) in float, as raw bytes.
template <class Seg>
std::vector<unsigned char> gradient_bytes(
    const Seg& seg, const Kokkos::View<const float***, Mem>& A,
    const Kokkos::View<const float**, Kokkos::LayoutRight, Mem>& x,
    const Kokkos::View<const float**, Kokkos::LayoutRight, Mem>& g) {
  const typename Seg::execution_space exec;
  const i64 n = seg.num_elements(), m = seg.num_segments();
  const auto gx = poisoned_view<float, 2>(n, x.extent(1));
  Slot<float, 3, Kokkos::LayoutRight> poisoned({3, {m, i64(A.extent(1)), i64(A.extent(2))}},
                                               Arr::RowMajor);
  poisoned.fill(nullptr);
  const auto gA = poisoned.view;
  segops::segmented_matvec_backward(exec, seg, A, x, g, gx, gA);
  Kokkos::fence();
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), gA);
  std::vector<unsigned char> bytes(h.size() * sizeof(float));
  std::memcpy(bytes.data(), h.data(), bytes.size());
  return bytes;
}

/// Sorted ids and the deterministic option: bitwise identical across runs (and, in the OpenMP
/// executable, equal to the Serial backend's result).
TEST(MatvecDeterminism, SortedAndDeterministicAreBitwiseReproducible) {
  std::mt19937_64 rng(251);
  const i64 r = 3, k = 4;
  for (Mode mode : {Mode::Sorted, Mode::Deterministic})
    for (const auto& c : regimes(251, mode)) {
      if (c.name != "giant" && c.name != "mixed" && c.name != "whole_array") continue;
      const auto seg = make_segments<std::int32_t>(c, mode);
      auto Am = uninit<Kokkos::View<float***, Mem>>("A", c.m, r, k);
      auto h = Kokkos::create_mirror_view(Am);
      const auto vals = random_vector<float>(rng, c.m * r * k);
      std::memcpy(h.data(), vals.data(), vals.size() * sizeof(float));
      Kokkos::deep_copy(Am, h);
      const Kokkos::View<const float***, Mem> A = Am;
      const Kokkos::View<const float**, Kokkos::LayoutRight, Mem> x =
          device_matrix<float>(random_vector<float>(rng, c.n() * k), c.n(), k);
      const Kokkos::View<const float**, Kokkos::LayoutRight, Mem> g =
          device_matrix<float>(random_vector<float>(rng, c.n() * r), c.n(), r);
      const auto first = gradient_bytes(seg, A, x, g);
      for (int rep = 0; rep < 3; ++rep)
        EXPECT_EQ(gradient_bytes(seg, A, x, g), first)
            << mode_name(mode) << " " << c.name << " run " << rep;
#if defined(SEGOPS_TEST_OPENMP) && defined(KOKKOS_ENABLE_SERIAL)
      const segops::Segments<std::int32_t, Kokkos::Serial> serial(
          Kokkos::Serial(), device_ids<std::int32_t>(c.ids), c.m,
          {.deterministic = mode == Mode::Deterministic});
      EXPECT_EQ(gradient_bytes(serial, A, x, g), first)
          << mode_name(mode) << " " << c.name << ": Serial != OpenMP";
#endif
    }
}

/// Packed 3x3 float blocks with packed rows take host vectors, four elements at a time where they
/// can; the same matrices in LayoutLeft take the scalar products. Both add the products in one
/// order, so the bits agree: matvec and matvec_transposed (the two orientations of a block), and
/// matvec_backward's gx (the transposed product of g).
TEST(MatvecDeterminism, PackedBlocksGiveTheBitsOfOtherLayouts) {
  std::mt19937_64 rng(253);
  for (Mode mode : kModes)
    for (const auto& c : regimes(253, mode)) {
      const auto seg = make_segments<std::int32_t>(c, mode);
      const auto vals = random_vector<float>(rng, c.m * 9);
      auto right = uninit<Kokkos::View<float***, Kokkos::LayoutRight, Mem>>("A", c.m, 3, 3);
      auto left = uninit<Kokkos::View<float***, Kokkos::LayoutLeft, Mem>>("A", c.m, 3, 3);
      auto h = Kokkos::create_mirror_view(right);
      if (!vals.empty()) std::memcpy(h.data(), vals.data(), vals.size() * sizeof(float));
      Kokkos::deep_copy(right, h);
      Kokkos::deep_copy(left, right);
      const auto x = device_matrix<float>(random_vector<float>(rng, c.n() * 3), c.n(), 3);
      const auto g = device_matrix<float>(random_vector<float>(rng, c.n() * 3), c.n(), 3);
      auto outputs = [&](const auto& a) {
        const Kokkos::View<const float***, typename std::decay_t<decltype(a)>::array_layout, Mem>
            A = a;
        auto o = uninit<Kokkos::View<float**, Kokkos::LayoutRight, Mem>>("o", c.n(), 3);
        auto ot = uninit<Kokkos::View<float**, Kokkos::LayoutRight, Mem>>("ot", c.n(), 3);
        auto gx = uninit<Kokkos::View<float**, Kokkos::LayoutRight, Mem>>("gx", c.n(), 3);
        auto gA = uninit<Kokkos::View<float***, Kokkos::LayoutRight, Mem>>("gA", c.m, 3, 3);
        segops::segmented_matvec(Exec(), seg, A, x, o);
        segops::segmented_matvec_transposed(Exec(), seg, A, x, ot);
        segops::segmented_matvec_backward(Exec(), seg, A, x, g, gx, gA);
        return std::vector{host_bytes(o), host_bytes(ot), host_bytes(gx)};
      };
      const auto packed = outputs(right), other = outputs(left);
      const char* names[] = {"matvec o", "matvec_transposed o", "matvec_backward gx"};
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(packed[k], other[k]) << mode_name(mode) << " " << c.name << ": " << names[k];
    }
}

}  // namespace
}  // namespace segtest::ops
