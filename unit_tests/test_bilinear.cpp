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
TEST(Bilinear, ManySegmentsUnsorted) { many_segments_sweep<Bilinear>(127); }
// Two 4-byte per-segment inputs per element stage from M = 131073 on: every op with two or more.
TEST(Bilinear, StagedCoefficientsUnsorted) { staged_coefficients_sweep<Bilinear>(129, "", 150000); }
TEST(Bilinear, FiniteDifferences) { fd_sweep<Bilinear>(131); }
TEST(Bilinear, SmallCarryTiles) { carry_sweep<Bilinear>(133); }
// The backward orders of mul, axpy and axpby and the double backward of dot and inner_products
// (a per-element pass and a reduction, fused on host) over sorted ids in work items of tiles.
TEST(Bilinear, FusedSweepSorted) { fused_sweep<Bilinear>(135, "backward"); }

/// Products keep IEEE signed zeros: a_s = -1 times x_i = +0 is -0 in every component (a sum that
/// started at +0 would turn it into +0), for rows of 1, 3 and 5, on every mode.
TEST(Bilinear, MulKeepsNegativeZero) {
  for (Mode mode : kModes)
    for (const auto& c : regimes(127, mode)) {
      const auto seg = make_segments<std::int32_t>(c, mode);
      for (i64 d : {1, 3, 5}) {
        const Kokkos::View<const double*, Mem> a =
            device_vector<double>(std::vector<double>(c.m, -1.0));
        const Kokkos::View<const double**, Kokkos::LayoutRight, Mem> x =
            device_matrix<double>(std::vector<double>(c.n() * d, 0.0), c.n(), d);
        const auto o = poisoned_view<double, 2>(c.n(), d);
        segops::segmented_mul(Exec(), seg, a, x, o);
        const auto oh = to_host(o);
        i64 positive = 0;
        for (double v : oh) positive += !(v == 0.0 && std::signbit(v));
        EXPECT_EQ(positive, 0) << mode_name(mode) << " " << c.name << ", D = " << d;
      }
    }
}

/// Sorted single values and rows of 3: the per-element passes write each segment as whole vectors
/// from its first value, past its end, and the segments after it write over that
/// (segment_vectors), in blocks whose segments average 2.5 elements or more; the others go
/// element by element. Outputs that are windows of a larger array keep every value outside the
/// window, and each value is its own product, bit for bit: mul, dot_backward and axpy_backward, in
/// floats and doubles, over stretches of segments of 0 to 12 elements and of 0 to 2 (blocks of
/// either kind side by side, N not a multiple of a block), ending in segments whose vectors would
/// pass the end of the window.
TEST(Bilinear, VectorRunsStayInsideTheOutput) {
  std::mt19937_64 rng(149);
  std::vector<i64> counts(3500);
  for (std::size_t k = 0; k < counts.size(); ++k)
    counts[k] = static_cast<i64>(rng() % ((k / 500) % 2 ? 3 : 13));
  // the last rows: one segment of 1, then 4 (a vector from the first would pass the rows' end)
  counts.push_back(1);
  counts.push_back(4);
  const Case c{"vector_runs", ids_from_counts(counts), static_cast<i64>(counts.size())};
  const auto seg = make_segments<std::int32_t>(c, Mode::Sorted);
  const i64 n = c.n(), m = c.m, pad = 40;
  auto run = [&](auto zero, i64 d) {
    using T = decltype(zero);
    const auto xv = random_vector<T>(rng, n * d), gv = random_vector<T>(rng, n * d);
    const auto av = random_vector<T>(rng, m);
    const auto x = device_matrix<T>(xv, n, d), g = device_matrix<T>(gv, n, d);
    const auto a = device_vector<T>(av);
    // window k of buf: rows [pad + k (n + pad), pad + k (n + pad) + n); kSentinel around them
    const i64 rows = 2 * (n + pad) + pad;
    const auto buf =
        device_matrix<T>(std::vector<T>(static_cast<std::size_t>(rows * d), T(kSentinel)), rows, d);
    auto window = [&](i64 k) {
      const i64 b = pad + k * (n + pad);
      return Kokkos::subview(buf, std::make_pair(b, b + n), Kokkos::ALL);
    };
    const auto ga = device_vector<T>(std::vector<T>(static_cast<std::size_t>(m), T(0)));
    // want(k, v): what window k's value v (element v / d, component v % d) must hold
    auto check = [&](const char* op, auto want0, auto want1, bool two) {
      const auto h = to_host(buf);
      i64 bad = 0;
      for (i64 r = 0; r < static_cast<i64>(h.size()); ++r) {
        const i64 k = r / d < n + pad ? 0 : 1, v = r - (pad + k * (n + pad)) * d;
        const bool inside = v >= 0 && v < n * d && (k == 0 || two);
        const T expect = !inside ? T(kSentinel) : k == 0 ? want0(v) : want1(v);
        bad += static_cast<T>(h[r]) != expect;
      }
      EXPECT_EQ(bad, 0) << op << (sizeof(T) == 4 ? " float" : " double") << ", D = " << d;
    };
    auto as = [&](i64 v) { return av[c.ids[v / d]]; };
    segops::segmented_mul(Exec(), seg, a, x, window(0));
    check(
        "mul", [&](i64 v) { return T(as(v) * xv[v]); }, [](i64) { return T(0); }, false);
    segops::segmented_dot_backward(Exec(), seg, x, g, a, window(0), window(1));
    check(
        "dot_backward", [&](i64 v) { return T(as(v) * gv[v]); },
        [&](i64 v) { return T(as(v) * xv[v]); }, true);
    segops::segmented_axpy_backward(Exec(), seg, a, x, g, window(0), window(1), ga);
    check(
        "axpy_backward", [&](i64 v) { return gv[v]; }, [&](i64 v) { return T(as(v) * gv[v]); },
        true);
  };
  for (i64 d : {1, 3}) {
    run(float(0), d);
    run(double(0), d);
  }
}

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
  return concat_bytes(out, ga);
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

#ifndef SEGOPS_TEST_CUDA
/// Host backends, deterministic option: a segment's dot product adds its elements' products in the
/// order segmented_sum adds their values, so dot(x, y) equals, bit for bit, the sum of the element
/// dots <x_e, y_e> (formed in float, column by column). Past the cache, the tiles over the
/// permutation sum dot products that a pass in element order computed first (SumReducer::stage):
/// the 200000-element case (rows of 3 or 5 floats: 4.8 or 8 MB of x and y) pins those.
TEST(BilinearDeterminism, DeterministicDotIsTheSumOfElementDots) {
  std::mt19937_64 rng(154);  // the values (153: the ids)
  for_unsorted_deterministic(153, 200000, 60000, [&](const Case& c, const auto& seg) {
    for (i64 d : {1, 3, 5}) {
      const i64 n = c.n();
      const auto xh = random_vector<float>(rng, n * d), yh = random_vector<float>(rng, n * d);
      std::vector<float> vh(n);
      for (i64 e = 0; e < n; ++e) {
        float r = 0;
        for (i64 k = 0; k < d; ++k) r += xh[e * d + k] * yh[e * d + k];
        vh[e] = r;
      }
      using Rows = Kokkos::View<const float**, Kokkos::LayoutRight, Mem>;
      const Rows x = device_matrix<float>(xh, n, d), y = device_matrix<float>(yh, n, d);
      const Kokkos::View<const float*, Mem> v = device_vector<float>(vh);
      const auto dot = poisoned_view<float, 1>(c.m, 1), sum = poisoned_view<float, 1>(c.m, 1);
      segops::segmented_dot(Exec(), seg, x, y, dot);
      segops::segmented_sum(Exec(), seg, v, sum);
      EXPECT_TRUE(host_bytes(dot) == host_bytes(sum)) << c.name << ", D = " << d;
    }
  });
}

/// The staged rows' other shapes, past the cache: two accumulators (axpby_backward's ga and gb sum
/// <x_e, g_e> and <y_e, g_e>) equal the column sums of those element dots, and dot into a double
/// output equals the sum of the element dots formed in double.
TEST(BilinearDeterminism, DeterministicStagedPairsAndDoubles) {
  std::mt19937_64 rng(157);
  const i64 n = 200000, m = 60000, d = 3;
  Case c{"big_unsorted", std::vector<i64>(n), m};
  for (auto& id : c.ids) id = static_cast<i64>(rng() % m);
  const auto seg = make_segments<std::int32_t>(c, Mode::Deterministic);
  ASSERT_FALSE(seg.sorted());
  const auto xh = random_vector<float>(rng, n * d), yh = random_vector<float>(rng, n * d),
             gh = random_vector<float>(rng, n * d);
  std::vector<float> pairs(n * 2);
  std::vector<double> dots(n);
  for (i64 e = 0; e < n; ++e) {
    float xg = 0, yg = 0;
    double xy = 0;
    for (i64 k = 0; k < d; ++k) {
      const i64 j = e * d + k;
      xg += xh[j] * gh[j];
      yg += yh[j] * gh[j];
      xy += static_cast<double>(xh[j]) * static_cast<double>(yh[j]);
    }
    pairs[e * 2] = xg;
    pairs[e * 2 + 1] = yg;
    dots[e] = xy;
  }
  using Rows = Kokkos::View<const float**, Kokkos::LayoutRight, Mem>;
  const Rows x = device_matrix<float>(xh, n, d), y = device_matrix<float>(yh, n, d),
             g = device_matrix<float>(gh, n, d), p = device_matrix<float>(pairs, n, 2);
  const Kokkos::View<const float*, Mem> a = device_vector<float>(random_vector<float>(rng, m)),
                                        b = device_vector<float>(random_vector<float>(rng, m));
  const auto gx = poisoned_view<float, 2>(n, d), gy = poisoned_view<float, 2>(n, d);
  const auto ga = poisoned_view<float, 1>(m, 1), gb = poisoned_view<float, 1>(m, 1);
  const auto psum = poisoned_view<float, 2>(m, 2);
  segops::segmented_axpby_backward(Exec(), seg, a, x, b, y, g, gx, gy, ga, gb);
  segops::segmented_sum(Exec(), seg, p, psum);
  const auto ga_h = to_host(ga), gb_h = to_host(gb), psum_h = to_host(psum);
  i64 differ = 0;
  for (i64 s = 0; s < m; ++s) differ += ga_h[s] != psum_h[s * 2] || gb_h[s] != psum_h[s * 2 + 1];
  EXPECT_EQ(differ, 0) << "segments whose (ga, gb) differ from the column sums";

  const Kokkos::View<const double*, Mem> v = device_vector<double>(dots);
  const auto dot = poisoned_view<double, 1>(m, 1), sum = poisoned_view<double, 1>(m, 1);
  segops::segmented_dot(Exec(), seg, x, y, dot);
  segops::segmented_sum(Exec(), seg, v, sum);
  EXPECT_TRUE(host_bytes(dot) == host_bytes(sum));
}
#endif

}  // namespace
}  // namespace segtest::ops
