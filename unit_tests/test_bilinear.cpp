// SPDX-License-Identifier: Apache-2.0
// The bilinear family (dot, inner_products, mul, add with a row or a scalar, axpy, axpby; forward,
// backward, double backward) against double-precision references over every regime, mode, width
// and layout; against finite differences; on bad input; and for bitwise determinism.
#include "test_ops_common.hpp"

namespace segtest::ops {
namespace {

TEST(Bilinear, AllOpsInt32FloatFloat) {
  for (Mode mode : kModes) sweep<Bilinear, std::int32_t, float, float, std::int32_t>(mode, 101);
}
TEST(Bilinear, AllOpsInt64DoubleDouble) {
  for (Mode mode : kModes) sweep<Bilinear, std::int64_t, double, double, i64>(mode, 102);
}
TEST(Bilinear, AllOpsInt32FloatIntoDouble) {
  for (Mode mode : kModes) sweep<Bilinear, std::int32_t, float, double, i64>(mode, 103);
}
TEST(Bilinear, LayoutLeftAndStride) { layout_sweep<Bilinear>(111); }
TEST(Bilinear, TrustedDropsOutOfRangeIds) { dropped_sweep<Bilinear>(121); }
TEST(Bilinear, NoSegmentsOrAllIdsDropped) { degenerate_sweep<Bilinear>(125); }
TEST(Bilinear, FiniteDifferences) { fd_sweep<Bilinear>(131); }

// ---- bad input: each throws segops::Error naming the op and the argument, outputs untouched ----

struct Small {
  Case c = small_case();
  segops::Segments<std::int32_t, Exec> seg = make_segments<std::int32_t>(c, Mode::Sorted);
  std::mt19937_64 rng{141};
  i64 n = c.n(), m = c.m, d = 3;
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> rows(i64 r, i64 w) {
    return device_matrix<double>(random_vector<double>(rng, r * w), r, w);
  }
  Kokkos::View<double*, Mem> scalars(i64 r) {
    return device_vector<double>(random_vector<double>(rng, r));
  }
};

TEST(BilinearErrors, DotElementCountMismatch) {
  Small t;
  const auto x = t.rows(t.n, t.d), y = t.rows(t.n + 1, t.d);
  const auto out = poisoned_view<double, 1>(t.m, 1);
  expect_error([&] { segops::segmented_dot(Exec(), t.seg, x, y, out); }, "segmented_dot", "y", out);
}
TEST(BilinearErrors, DotWidthMismatch) {
  Small t;
  const auto x = t.rows(t.n, t.d), y = t.rows(t.n, t.d + 1);
  const auto out = poisoned_view<double, 1>(t.m, 1);
  expect_error([&] { segops::segmented_dot(t.seg, x, y, out); }, "segmented_dot", "y", out);
}
TEST(BilinearErrors, DotBackwardGradientOfWrongSegmentCount) {
  Small t;
  const auto x = t.rows(t.n, t.d), y = t.rows(t.n, t.d);
  const auto g = t.scalars(t.m + 1);
  const auto gx = poisoned_view<double, 2>(t.n, t.d), gy = poisoned_view<double, 2>(t.n, t.d);
  expect_error([&] { segops::segmented_dot_backward(Exec(), t.seg, x, y, g, gx, gy); },
               "segmented_dot_backward", "g", gx, gy);
}
TEST(BilinearErrors, DotDoubleBackwardCotangentWidthMismatch) {
  Small t;
  const auto x = t.rows(t.n, t.d), y = t.rows(t.n, t.d), u = t.rows(t.n, t.d), v = t.rows(t.n, 2);
  const auto g = t.scalars(t.m);
  const auto gg = poisoned_view<double, 1>(t.m, 1);
  const auto xp = poisoned_view<double, 2>(t.n, t.d), yp = poisoned_view<double, 2>(t.n, t.d);
  expect_error(
      [&] { segops::segmented_dot_double_backward(Exec(), t.seg, x, y, g, u, v, gg, xp, yp); },
      "segmented_dot_double_backward", "v", gg, xp, yp);
}
TEST(BilinearErrors, InnerProductsOutputOfWrongSegmentCount) {
  Small t;
  const auto x = t.rows(t.n, t.d), y = t.rows(t.n, t.d);
  const auto xy = poisoned_view<double, 1>(t.m, 1), xx = poisoned_view<double, 1>(t.m - 1, 1),
             yy = poisoned_view<double, 1>(t.m, 1);
  expect_error([&] { segops::segmented_inner_products(Exec(), t.seg, x, y, xy, xx, yy); },
               "segmented_inner_products", "xx", xy, xx, yy);
}
TEST(BilinearErrors, MulOutputAliasesInput) {
  Small t;
  const auto h = random_vector<double>(t.rng, t.n * t.d);
  const auto x = device_matrix<double>(h, t.n, t.d);
  const auto a = t.scalars(t.m);
  expect_error([&] { segops::segmented_mul(Exec(), t.seg, a, x, x); }, "segmented_mul", "o");
  EXPECT_EQ(to_host(x), h) << "the aliased input was modified";
}
TEST(BilinearErrors, MulBackwardScaleOfWrongSegmentCount) {
  Small t;
  const auto x = t.rows(t.n, t.d), g = t.rows(t.n, t.d);
  const auto a = t.scalars(t.m + 2);
  const auto gx = poisoned_view<double, 2>(t.n, t.d);
  const auto ga = poisoned_view<double, 1>(t.m, 1);
  expect_error([&] { segops::segmented_mul_backward(Exec(), t.seg, a, x, g, gx, ga); },
               "segmented_mul_backward", "a", gx, ga);
}
TEST(BilinearErrors, AddRowOfWrongWidth) {
  Small t;
  const auto x = t.rows(t.n, t.d), b = t.rows(t.m, t.d + 1);
  const auto o = poisoned_view<double, 2>(t.n, t.d);
  expect_error([&] { segops::segmented_add(Exec(), t.seg, x, b, o); }, "segmented_add", "b", o);
}
TEST(BilinearErrors, AddBackwardRowGradientOfWrongSegmentCount) {
  Small t;
  const auto g = t.rows(t.n, t.d);
  const auto gx = poisoned_view<double, 2>(t.n, t.d), gb = poisoned_view<double, 2>(t.m + 1, t.d);
  expect_error([&] { segops::segmented_add_backward(Exec(), t.seg, g, gx, gb); },
               "segmented_add_backward", "gb", gx, gb);
}
TEST(BilinearErrors, AxpyYAliasesX) {
  Small t;
  const auto h = random_vector<double>(t.rng, t.n * t.d);
  const auto x = device_matrix<double>(h, t.n, t.d);
  const auto a = t.scalars(t.m);
  expect_error([&] { segops::segmented_axpy(Exec(), t.seg, a, x, x); }, "segmented_axpy", "y");
  EXPECT_EQ(to_host(x), h) << "the aliased input was modified";
}
TEST(BilinearErrors, AxpyYOfWrongLength) {
  Small t;
  const auto x = t.rows(t.n, t.d);
  const auto a = t.scalars(t.m);
  const auto y = poisoned_view<double, 2>(t.n - 1, t.d);
  expect_error([&] { segops::segmented_axpy(Exec(), t.seg, a, x, y); }, "segmented_axpy", "y", y);
}
TEST(BilinearErrors, AxpbyBackwardOverlappingGradientOutputs) {
  Small t;
  const auto x = t.rows(t.n, t.d), y = t.rows(t.n, t.d), g = t.rows(t.n, t.d);
  const auto a = t.scalars(t.m), b = t.scalars(t.m);
  const auto gx = poisoned_view<double, 2>(t.n, t.d), gy = poisoned_view<double, 2>(t.n, t.d);
  const auto gab = poisoned_view<double, 1>(t.m, 1);
  expect_error(
      [&] { segops::segmented_axpby_backward(Exec(), t.seg, a, x, b, y, g, gx, gy, gab, gab); },
      "segmented_axpby_backward", "gb", gx, gy, gab);
}
TEST(BilinearErrors, AxpbyDoubleBackwardCotangentOfWrongLength) {
  Small t;
  const auto x = t.rows(t.n, t.d), y = t.rows(t.n, t.d), g = t.rows(t.n, t.d);
  const auto ux = t.rows(t.n, t.d), uy = t.rows(t.n + 1, t.d);
  const auto a = t.scalars(t.m), b = t.scalars(t.m), wa = t.scalars(t.m), wb = t.scalars(t.m);
  const auto gg = poisoned_view<double, 2>(t.n, t.d), xp = poisoned_view<double, 2>(t.n, t.d),
             yp = poisoned_view<double, 2>(t.n, t.d);
  const auto ap = poisoned_view<double, 1>(t.m, 1), bp = poisoned_view<double, 1>(t.m, 1);
  expect_error(
      [&] {
        segops::segmented_axpby_double_backward(Exec(), t.seg, a, x, b, y, g, ux, uy, wa, wb, gg,
                                                xp, yp, ap, bp);
      },
      "segmented_axpby_double_backward", "uy", gg, xp, yp, ap, bp);
}

// ---- determinism ----

/// dot and mul_backward's ga (the per-segment reductions of the family) in float, as raw bytes.
template <class Seg>
std::vector<unsigned char> reductions_bytes(
    const Seg& seg, const Kokkos::View<const float**, Kokkos::LayoutRight, Mem>& x,
    const Kokkos::View<const float**, Kokkos::LayoutRight, Mem>& y,
    const Kokkos::View<const float*, Mem>& a) {
  const typename Seg::execution_space exec;
  const i64 n = seg.num_elements(), m = seg.num_segments();
  const auto out = poisoned_view<float, 1>(m, 1), ga = poisoned_view<float, 1>(m, 1);
  const auto gx = poisoned_view<float, 2>(n, x.extent(1));
  segops::segmented_dot(exec, seg, x, y, out);
  segops::segmented_mul_backward(exec, seg, a, x, y, gx, ga);
  auto bytes = host_bytes(out);
  const auto more = host_bytes(ga);
  bytes.insert(bytes.end(), more.begin(), more.end());
  return bytes;
}

/// Sorted ids and the deterministic option: bitwise identical across runs (and, in the OpenMP
/// executable, equal to the Serial backend's result).
TEST(BilinearDeterminism, SortedAndDeterministicAreBitwiseReproducible) {
  std::mt19937_64 rng(151);
  for (Mode mode : {Mode::Sorted, Mode::Deterministic})
    for (const auto& c : regimes(151, mode)) {
      if (c.name != "giant" && c.name != "mixed" && c.name != "whole_array") continue;
      const auto seg = make_segments<std::int32_t>(c, mode);
      const i64 d = 7;
      const Kokkos::View<const float**, Kokkos::LayoutRight, Mem> x =
          device_matrix<float>(random_vector<float>(rng, c.n() * d), c.n(), d);
      const Kokkos::View<const float**, Kokkos::LayoutRight, Mem> y =
          device_matrix<float>(random_vector<float>(rng, c.n() * d), c.n(), d);
      const Kokkos::View<const float*, Mem> a =
          device_vector<float>(random_vector<float>(rng, c.m));
      const auto first = reductions_bytes(seg, x, y, a);
      for (int rep = 0; rep < 3; ++rep)
        EXPECT_EQ(reductions_bytes(seg, x, y, a), first)
            << mode_name(mode) << " " << c.name << " run " << rep;
#if defined(SEGOPS_TEST_OPENMP) && defined(KOKKOS_ENABLE_SERIAL)
      const segops::Segments<std::int32_t, Kokkos::Serial> serial(
          Kokkos::Serial(), device_ids<std::int32_t>(c.ids), c.m,
          {.deterministic = mode == Mode::Deterministic});
      EXPECT_EQ(reductions_bytes(serial, x, y, a), first)
          << mode_name(mode) << " " << c.name << ": Serial != OpenMP";
#endif
    }
}

}  // namespace
}  // namespace segtest::ops
