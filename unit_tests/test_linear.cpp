// SPDX-License-Identifier: Apache-2.0
// The linear family against double-precision serial references: every op and order, rank 1 and
// rank 2, three (id, data, accumulation) type combinations, every descriptor mode and segment
// regime, every view layout; then finite-difference checks of every backward and double backward.
//
// Type rule of these tests: element-side views hold T, segment-side views hold Acc (so the mixed
// combination reduces float into double and gathers double into float).
#include "linear_common.hpp"

namespace segtest {
namespace {

constexpr i64 kWidths[] = {1, 3, 7, 64};

std::string describe(const LinOpInfo& op, const Case& c, Mode mode, int rank, i64 d) {
  return std::string(op.name) + " [" + mode_name(mode) + ", " + c.name + ", rank " +
         std::to_string(rank) + ", D " + std::to_string(d) + "]";
}

/// One call of `op` with a const LayoutRight input and a poisoned LayoutRight output, compared
/// element by element (all of them) with the reference.
template <class InT, class OutT, int RIn, int ROut, class Seg>
void check_op(const LinOpInfo& op, const Seg& seg, const Case& c, i64 d, std::mt19937_64& rng,
              const std::string& what) {
  const i64 ri = op.in_rows(c), wi = op.in_width(d), ro = op.out_rows(c), wo = op.out_width(d);
  const auto in_h = random_vector<InT>(rng, ri * wi);
  const auto in = device_view<InT, RIn>(in_h, ri, wi);
  const auto out = poisoned_view<OutT, ROut>(ro, wo);
  using ConstIn = typename std::remove_cvref_t<decltype(in)>::const_type;
  run_linear(Exec(), op.op, seg, ConstIn(in), out);
  const auto ref = ref_linear(op, c, as_double(in_h), d);
  expect_close(to_host(out), ref.val, ref.mag, tol<OutT>(), what);
}

/// check_op for the op's shape: reductions take T and give Acc, gathers the other way round.
template <class T, class Acc, class Seg>
void check_any(const LinOpInfo& op, const Seg& seg, const Case& c, int rank, i64 d,
               std::mt19937_64& rng, const std::string& what) {
  with_shape<T, Acc>(op, rank, [&]<class InT, class OutT, int RIn, int ROut>() {
    check_op<InT, OutT, RIn, ROut>(op, seg, c, d, rng, what);
  });
}

/// Every op at rank 1 (D = 1) and rank 2 (D = d2), float elements and double segment values unless
/// told otherwise.
template <class T = float, class Acc = double, class Seg>
void check_all_ops(const Seg& seg, const Case& c, Mode mode, std::mt19937_64& rng, i64 d2 = 3) {
  for (const auto& op : kLinearOps)
    for (int rank : {1, 2}) {
      if (op.component && rank == 1) continue;
      const i64 d = rank == 1 ? 1 : d2;
      check_any<T, Acc>(op, seg, c, rank, d, rng, describe(op, c, mode, rank, d));
      if (::testing::Test::HasFatalFailure()) return;
    }
}

/// Every op x order x rank x D x regime, for one type combination and descriptor mode.
template <class IdT, class T, class Acc>
void sweep(Mode mode, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (const auto& c : regimes(seed, mode)) {
    const auto seg = make_segments<IdT>(c, mode);
    ASSERT_EQ(seg.sorted(), std::is_sorted(c.ids.begin(), c.ids.end())) << c.name;
    if (mode == Mode::Sorted || deterministic_option(mode))
      ASSERT_TRUE(seg.deterministic()) << c.name;
    for (int rank : {1, 2})
      for (i64 d : kWidths) {
        if (rank == 1 && d != 1) continue;
        for (const auto& op : kLinearOps) {
          if (op.component && rank == 1) continue;
          check_any<T, Acc>(op, seg, c, rank, d, rng, describe(op, c, mode, rank, d));
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
  }
}

TEST(Linear, AllOpsInt32FloatFloat) {
  for (Mode mode : kModes) sweep<std::int32_t, float, float>(mode, 11);
}
TEST(Linear, AllOpsInt64DoubleDouble) {
  for (Mode mode : kModes) sweep<std::int64_t, double, double>(mode, 12);
}
TEST(Linear, AllOpsInt32FloatIntoDouble) {
  for (Mode mode : kModes) sweep<std::int32_t, float, double>(mode, 13);
}

/// Rows of 2 and 4 over unsorted ids (the sweeps take widths 1, 3, 7 and 64): host backends finish
/// mean's rows of 2 to 4 accumulators one vector per segment after adding the per-thread copies.
TEST(Linear, UnsortedRowsOfTwoAndFour) {
  std::mt19937_64 rng(14);
  for (const auto& c : regimes(14, Mode::Unsorted)) {
    const auto s32 = make_segments<std::int32_t>(c, Mode::Unsorted);
    const auto s64 = make_segments<std::int64_t>(c, Mode::Unsorted);
    for (i64 d : {2, 4})
      for (const auto& op : kLinearOps) {
        check_any<float, float>(op, s32, c, 2, d, rng, describe(op, c, Mode::Unsorted, 2, d));
        check_any<double, double>(op, s64, c, 2, d, rng, describe(op, c, Mode::Unsorted, 2, d));
        if (::testing::Test::HasFatalFailure()) return;
      }
  }
}

TEST(Linear, Count) {
  for (Mode mode : kModes)
    for (const auto& c : regimes(21, mode)) {
      const auto ref = ref_counts(c);
      const std::vector<double> refd(ref.begin(), ref.end());
      const auto s32 = make_segments<std::int32_t>(c, mode);
      const auto s64 = make_segments<std::int64_t>(c, mode);
      const auto o32 = poisoned_view<std::int32_t, 1>(c.m, 1);
      const auto o64 = poisoned_view<std::int64_t, 1>(c.m, 1);
      segops::segmented_count(Exec(), s32, o32);
      segops::segmented_count(s64, o64);
      EXPECT_EQ(to_host(o32), refd) << mode_name(mode) << " " << c.name;
      EXPECT_EQ(to_host(o64), refd) << mode_name(mode) << " " << c.name;
    }
}

// ---- layouts ----

/// Calls body(name, const input view) for each input layout: LayoutRight, LayoutLeft,
/// LayoutStride (no unit stride), and an unmanaged view (for rank-2 D = 3 the LAMMPS-style
/// compile-time extent `const T*[3]`).
template <class T, int Rank, class Body>
void for_each_input_layout(const std::vector<T>& h, i64 n, i64 d, Body&& body) {
  const auto right = device_view<T, Rank, Kokkos::LayoutRight>(h, n, d);
  body("LayoutRight", typename std::remove_cvref_t<decltype(right)>::const_type(right));
  const auto left = device_view<T, Rank, Kokkos::LayoutLeft>(h, n, d);
  body("LayoutLeft",
       Kokkos::View<typename decltype(left)::const_data_type, Kokkos::LayoutLeft, Mem>(left));
  const auto strided = device_strided<T, Rank>(h, n, d);
  using Stride = typename Strided<T, Rank>::view_type;
  body("LayoutStride",
       Kokkos::View<typename Stride::const_data_type, Kokkos::LayoutStride, Mem>(strided.view));
  using Unmanaged = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  if constexpr (Rank == 2) {
    if (d == 3) {
      body("unmanaged const T*[3]",
           Kokkos::View<const T* [3], Kokkos::LayoutRight, Mem, Unmanaged>(right.data(), n));
      return;
    }
  }
  body("unmanaged const",
       Kokkos::View<typename decltype(right)::const_data_type, Kokkos::LayoutRight, Mem, Unmanaged>(
           right.data(), right.layout()));
}

/// Calls body(name, output view, check) for each output layout; check() verifies that nothing
/// outside the view's elements was written.
template <class T, int Rank, class Body>
void for_each_output_layout(i64 n, i64 d, Body&& body) {
  const std::vector<T> zeros(n * d);
  const auto always = [] { return true; };
  body("LayoutRight", device_view<T, Rank, Kokkos::LayoutRight>(zeros, n, d), always);
  body("LayoutLeft", device_view<T, Rank, Kokkos::LayoutLeft>(zeros, n, d), always);
  const auto strided = device_strided<T, Rank>(zeros, n, d);
  body("LayoutStride", strided.view, [&] { return strided.gaps_intact(); });
  if constexpr (Rank == 2) {
    if (d == 3) body("T*[3]", uninit<Kokkos::View<T* [3], Mem>>("fixed", n), always);
  }
}

/// Every input layout into a LayoutRight output, and a const LayoutRight input into every output
/// layout (the full cross product adds compile time, not coverage: inputs and outputs are
/// normalised independently).
template <class InT, class OutT, int RIn, int ROut, class Seg>
void check_layouts(const LinOpInfo& op, const Seg& seg, const Case& c, i64 d, std::mt19937_64& rng,
                   const std::string& what) {
  const i64 ri = op.in_rows(c), wi = op.in_width(d), ro = op.out_rows(c), wo = op.out_width(d);
  const auto in_h = random_vector<InT>(rng, ri * wi);
  const auto ref = ref_linear(op, c, as_double(in_h), d);
  const auto run = [&](const std::string& w, const auto& in, const auto& out, auto check) {
    poison(out);
    run_linear(Exec(), op.op, seg, in, out);
    expect_close(to_host(out), ref.val, ref.mag, tol<OutT>(), w);
    EXPECT_TRUE(check()) << w << ": wrote outside the strided output view";
  };
  const auto right_out = poisoned_view<OutT, ROut>(ro, wo);
  for_each_input_layout<InT, RIn>(in_h, ri, wi, [&](const char* iname, const auto& in) {
    run(what + " in " + iname + " out LayoutRight", in, right_out, [] { return true; });
  });
  const auto right_in = device_view<InT, RIn>(in_h, ri, wi);
  const typename std::remove_cvref_t<decltype(right_in)>::const_type const_in = right_in;
  for_each_output_layout<OutT, ROut>(ro, wo, [&](const char* oname, const auto& out, auto check) {
    run(what + " in const LayoutRight out " + oname, const_in, out, check);
  });
}

template <class IdT, class T, class Acc>
void layout_sweep(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (Mode mode : {Mode::Sorted, Mode::Unsorted})
    for (const auto& c : regimes(seed, mode)) {
      if (c.name != "mixed" && c.name != "giant") continue;
      const auto seg = make_segments<IdT>(c, mode);
      for (const auto& op : kLinearOps)
        for (int rank : {1, 2}) {
          if (op.component && rank == 1) continue;
          const i64 d = rank == 1 ? 1 : 3;
          with_shape<T, Acc>(op, rank, [&]<class InT, class OutT, int RIn, int ROut>() {
            check_layouts<InT, OutT, RIn, ROut>(op, seg, c, d, rng, describe(op, c, mode, rank, d));
          });
          if (::testing::Test::HasFatalFailure()) return;
        }
    }
}

TEST(Linear, LayoutsInt64DoubleDouble) { layout_sweep<std::int64_t, double, double>(31); }
TEST(Linear, LayoutsInt32FloatIntoDouble) { layout_sweep<std::int32_t, float, double>(32); }

// ---- descriptor variants ----

/// Trusted descriptors with out-of-range ids: reductions ignore them, gathers write 0 there.
TEST(Linear, TrustedDropsOutOfRangeIds) {
  std::mt19937_64 rng(41);
  for (Mode mode : kUnsortedModes)
    for (bool sorted_base : {true, false})
      for (const auto& base : regimes(41, sorted_base)) {
        if (base.m == 0 || base.n() == 0) continue;
        const auto c = with_dropped_ids(base, 42);
        const auto seg = make_segments<std::int32_t>(c, mode, /*trusted=*/true);
        ASSERT_LT(seg.num_valid(), seg.num_elements()) << c.name;
        check_all_ops(seg, c, mode, rng);
        if (::testing::Test::HasFatalFailure()) return;
        const auto cnt = poisoned_view<std::int64_t, 1>(c.m, 1);
        segops::segmented_count(Exec(), seg, cnt);
        const auto ref = ref_counts(c);
        EXPECT_EQ(to_host(cnt), std::vector<double>(ref.begin(), ref.end())) << c.name;
      }
}

/// Unsorted ids over many segments, some dropped (trusted): the gathers prefetch the rows of later
/// elements' segments, the reductions the rows they add into (or, with buckets, the reductions
/// run over 19 buckets).
TEST(Linear, ManySegmentsUnsorted) {
  std::mt19937_64 rng(45);
  const Case c = with_dropped_ids(many_segments_case(45), 46);
  for (Mode mode : {Mode::Unsorted, Mode::Bucketed, Mode::DeterministicBucketed}) {
    const auto seg = make_segments<std::int32_t>(c, mode, /*trusted=*/true);
    check_all_ops(seg, c, mode, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

/// Unsorted ids read through a LayoutStride view (stride 2), some dropped (trusted), float
/// accumulators: host backends keep the per-thread copies of rows of 3 floats 4 floats apart
/// (SumReducer::copy_stride) and read the ids through the stride; M = 300000 (copies beyond the
/// L2 cache: prefetched rows) and M = 1000. The last element has a valid id (its row is read
/// value by value, not as a vector that would pass the end of the values).
TEST(Linear, UnsortedRowsOfThreeStridedIds) {
  std::mt19937_64 rng(49);
  for (const i64 m : {i64(1000), i64(300000)}) {
    Case c = with_dropped_ids(many_segments_case(49 + m, m, 7), 50);
    c.ids.back() = m - 1;
    c.name += "+strided_ids";
    const std::vector<std::int32_t> id32(c.ids.begin(), c.ids.end());
    const auto ids = device_strided<std::int32_t, 1>(id32, c.n(), 1);
    const segops::Segments<std::int32_t, Exec> seg(ids.view, c.m, {.trusted = true});
    ASSERT_FALSE(seg.sorted());
    check_all_ops<float, float>(seg, c, Mode::Unsorted, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

/// Unsorted ids over M = 120000 segments of 0 to 5 elements, some dropped (trusted), default and
/// deterministic options: mean's backward computes each segment's scaled row g_s (1 / c_s) once in
/// the descriptor's workspace (where it has room) before the elements gather it.
TEST(Linear, StagedCoefficientsUnsorted) {
  std::mt19937_64 rng(47);
  Case c = with_dropped_ids(many_segments_case(47, 120000, 6), 48);
  c.name = "few_per_segment+dropped";
  for (Mode mode : kUnsortedModes) {
    const auto seg = make_segments<std::int32_t>(c, mode, /*trusted=*/true);
    check_all_ops(seg, c, mode, rng);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

/// A trusted descriptor whose ids are all out of range, including M = 0 with N > 0.
TEST(Linear, TrustedAllIdsDropped) {
  std::mt19937_64 rng(43);
  for (i64 m : {0, 4})
    for (Mode mode : {Mode::Unsorted, Mode::Deterministic}) {
      Case c{"all_dropped", {m, -1, m + 2, -5, m, 1000}, m};
      const auto seg = make_segments<std::int64_t>(c, mode, /*trusted=*/true);
      EXPECT_EQ(seg.num_valid(), 0);
      check_all_ops<double, double>(seg, c, mode, rng, 7);
      if (::testing::Test::HasFatalFailure()) return;
    }
}

/// M = 0 and N = 0: every op accepts the empty views and writes nothing.
TEST(Linear, NoSegmentsNoElements) {
  std::mt19937_64 rng(44);
  const Case c{"M0N0", {}, 0};
  for (Mode mode : kModes) {
    const auto seg = make_segments<std::int32_t>(c, mode);
    for (const auto& op : kLinearOps)
      for (int rank : {1, 2}) {
        if (op.component && rank == 1) continue;
        check_any<float, double>(op, seg, c, rank, 3, rng, describe(op, c, mode, rank, 3));
      }
    const auto cnt = poisoned_view<std::int32_t, 1>(0, 1);
    segops::segmented_count(seg, cnt);
  }
}

/// Small carry capacities force reduction tiles of unusual sizes (few slots per row width, so
/// tiles much longer than the default), one tile for the whole array, and rows wider than the
/// carry.
TEST(Linear, SmallCarryCapacity) {
  std::mt19937_64 rng(45);
  // (row width, carry capacity): one tile for everything, tiles of an odd length, rows wider
  // than the carry
  const std::pair<i64, i64> width_capacity[] = {{7, 7}, {3, 20}, {1, 5}, {7, 4}, {64, 16}};
  for (Mode mode : {Mode::Sorted, Mode::Deterministic})
    for (const auto& c : regimes(45, mode)) {
      if (c.name == "N0") continue;
      for (auto [d, cap] : width_capacity) {
        if (d == 64 && c.name != "giant") continue;  // wide rows: the tile-crossing case suffices
        const auto seg = make_segments<std::int64_t>(c, mode, false, cap);
        for (const auto& op : kLinearOps) {
          if (!op.reduces) continue;
          const int rank = d == 1 && !op.component ? 1 : 2;
          const auto what =
              describe(op, c, mode, rank, d) + " carry_capacity " + std::to_string(cap);
          check_any<float, float>(op, seg, c, rank, d, rng, what);  // float partials in the carry
          if (::testing::Test::HasFatalFailure()) return;
        }
      }
    }
}

/// The overloads without an execution space instance give bitwise the same results.
TEST(Linear, OverloadsWithoutInstanceMatch) {
  std::mt19937_64 rng(46);
  for (Mode mode : {Mode::Sorted, Mode::Deterministic})
    for (const auto& c : regimes(46, mode)) {
      const auto seg = make_segments<std::int32_t>(c, mode);
      for (const auto& op : kLinearOps) {
        const i64 d = 3;
        const auto in =
            device_view<double, 2>(random_vector<double>(rng, op.in_rows(c) * op.in_width(d)),
                                   op.in_rows(c), op.in_width(d));
        const auto a = poisoned_view<double, 2>(op.out_rows(c), op.out_width(d));
        const auto b = poisoned_view<double, 2>(op.out_rows(c), op.out_width(d));
        if (op.component) {  // rank-1 segment side
          const auto in1 = Kokkos::subview(in, Kokkos::ALL, 0);
          const auto a1 = Kokkos::subview(a, Kokkos::ALL, 0),
                     b1 = Kokkos::subview(b, Kokkos::ALL, 0);
          if (op.reduces) {
            run_linear(Exec(), op.op, seg, in, a1);
            run_linear(Exec(), op.op, seg, in, b1, /*with_instance=*/false);
          } else {
            run_linear(Exec(), op.op, seg, in1, a);
            run_linear(Exec(), op.op, seg, in1, b, /*with_instance=*/false);
          }
        } else {
          run_linear(Exec(), op.op, seg, in, a);
          run_linear(Exec(), op.op, seg, in, b, /*with_instance=*/false);
        }
        EXPECT_EQ(host_bytes(a), host_bytes(b)) << describe(op, c, mode, 2, d);
      }
    }
}

/// mean_backward of rows of 3 floats: packed rows take host vectors four elements at a time (one
/// vector division for their factors), rows of g in LayoutLeft the scalar path; the bits agree.
TEST(Linear, MeanBackwardPackedRowsGiveTheBitsOfOtherLayouts) {
  std::mt19937_64 rng(47);
  for (Mode mode : kModes)
    for (const auto& c : regimes(47, mode)) {
      const auto seg = make_segments<std::int32_t>(c, mode);
      const auto vals = random_vector<float>(rng, c.m * 3);
      const auto right = device_matrix<float>(vals, c.m, 3);
      const auto left = device_matrix<float, Kokkos::LayoutLeft>(vals, c.m, 3);
      auto gx = [&](const auto& g) {
        auto out = uninit<Kokkos::View<float**, Kokkos::LayoutRight, Mem>>("gx", c.n(), 3);
        segops::segmented_mean_backward(Exec(), seg, g, out);
        return host_bytes(out);
      };
      EXPECT_EQ(gx(right), gx(left)) << mode_name(mode) << " " << c.name;
    }
}

/// NaN and Inf propagate as plain arithmetic would, and only into their own segment or element.
TEST(Linear, NanAndInfPropagate) {
  const Case c{"nan", {0, 0, 1, 1, 2, 2}, 4};
  for (Mode mode : kModes) {
    Case cc = c;
    if (mode != Mode::Sorted) cc.ids = {1, 0, 2, 0, 1, 2};
    const auto seg = make_segments<std::int32_t>(cc, mode);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const double inf = std::numeric_limits<double>::infinity();
    // element 2 is NaN, element 4 is +Inf
    const auto x = device_vector<double>({1.0, 2.0, nan, 3.0, inf, 4.0});
    const auto out = poisoned_view<double, 1>(cc.m, 1);
    segops::segmented_sum(seg, x, out);
    const auto h = to_host(out);
    const i64 s_nan = cc.ids[2], s_inf = cc.ids[4];
    for (i64 s = 0; s < cc.m; ++s) {
      if (s == s_nan)
        EXPECT_TRUE(std::isnan(h[s])) << mode_name(mode);
      else if (s == s_inf)
        EXPECT_EQ(h[s], inf) << mode_name(mode);
      else
        EXPECT_TRUE(std::isfinite(h[s])) << mode_name(mode) << " segment " << s;
    }
    EXPECT_EQ(h[3], 0.0) << "empty segment";
    const auto v = device_vector<double>({nan, 1.0, inf, 2.0});
    const auto o = poisoned_view<double, 1>(cc.n(), 1);
    segops::segmented_mean_backward(seg, v, o);
    const auto ho = to_host(o);
    for (i64 i = 0; i < cc.n(); ++i) {
      if (cc.ids[i] == 0)
        EXPECT_TRUE(std::isnan(ho[i]));
      else if (cc.ids[i] == 2)
        EXPECT_EQ(ho[i], inf);
      else
        EXPECT_EQ(ho[i], 0.5);
    }
  }
}

/// Sorted segments of every length 0..40 (host builds sum short ones with masked vector loads that
/// read past the segment's end), each followed by a segment full of NaN and Inf: the reads past a
/// segment must not reach its sum, and each sum must match the double reference.
template <class T>
void short_runs_ignore_neighbours() {
  std::vector<i64> counts;
  for (i64 len = 0; len <= 40; ++len) counts.insert(counts.end(), {len, 1 + len % 5});
  for (int rep = 0; rep < 300; ++rep) counts.insert(counts.end(), {rep % 7, 1});  // short tiles
  const Case c{"short_runs", ids_from_counts(counts), static_cast<i64>(counts.size())};
  const auto seg = make_segments<std::int32_t>(c, Mode::Sorted);
  std::mt19937_64 rng(61);
  for (i64 d : {1, 2, 3}) {
    auto x = random_vector<T>(rng, c.n() * d), y = random_vector<T>(rng, c.n() * d);
    for (i64 i = 0; i < c.n(); ++i)
      if (c.ids[i] % 2 == 1)  // odd segments are poison
        for (i64 j = 0; j < d; ++j) {
          x[i * d + j] = (i + j) % 2 ? std::numeric_limits<T>::infinity()
                                     : std::numeric_limits<T>::quiet_NaN();
          y[i * d + j] = -x[i * d + j];
        }
    std::vector<double> sum(c.m * d, 0.0), comp(c.m, 0.0), dotv(c.m, 0.0);
    for (i64 i = 0; i < c.n(); ++i)
      for (i64 j = 0; j < d; ++j) {
        sum[c.ids[i] * d + j] += double(x[i * d + j]);
        comp[c.ids[i]] += double(x[i * d + j]);
        dotv[c.ids[i]] += double(x[i * d + j]) * double(y[i * d + j]);
      }
    const auto xv = device_matrix<T>(x, c.n(), d), yv = device_matrix<T>(y, c.n(), d);
    const auto o_sum = poisoned_view<T, 2>(c.m, d);
    const auto o_comp = poisoned_view<T, 1>(c.m, 1), o_dot = poisoned_view<T, 1>(c.m, 1);
    segops::segmented_sum(seg, xv, o_sum);
    segops::segmented_component_sum(seg, xv, o_comp);
    segops::segmented_dot(seg, xv, yv, o_dot);
    const auto h_sum = to_host(o_sum), h_comp = to_host(o_comp), h_dot = to_host(o_dot);
    const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
    for (i64 s = 0; s < c.m; ++s) {
      const std::string where = "D=" + std::to_string(d) + " segment " + std::to_string(s) +
                                " of length " + std::to_string(counts[s]);
      if (s % 2 == 1) {
        EXPECT_FALSE(std::isfinite(h_comp[s])) << where;
        continue;
      }
      for (i64 j = 0; j < d; ++j)
        EXPECT_NEAR(h_sum[s * d + j], sum[s * d + j], tol * (1 + std::abs(sum[s * d + j])))
            << "sum " << where;
      EXPECT_NEAR(h_comp[s], comp[s], tol * (1 + std::abs(comp[s]))) << "component_sum " << where;
      EXPECT_NEAR(h_dot[s], dotv[s], tol * (1 + std::abs(dotv[s]))) << "dot " << where;
    }
  }
}
TEST(Linear, ShortRunsIgnoreNeighboursFloat) { short_runs_ignore_neighbours<float>(); }
TEST(Linear, ShortRunsIgnoreNeighboursDouble) { short_runs_ignore_neighbours<double>(); }

/// Sorted rows beyond the last-level cache (n x D x 4 bytes > 32 MiB, kLastLevelBytes): host
/// builds sum batches of short segments in a loop that prefetches rows and offsets ahead, which
/// stops where a prefetch would pass the last row or offset and leaves the rest of the tile to
/// a loop without prefetches. sum, mean and dot of floats, short and some long segments, some
/// empty, against double references.
TEST(Linear, SortedBeyondTheLastLevelCache) {
  std::mt19937_64 rng(71);
  for (const i64 d : {1, 3}) {
    const i64 n_min = (i64(36) << 20) / (4 * d);  // 36 MiB of rows
    std::vector<i64> counts;
    for (i64 n = 0, k = 0; n < n_min; ++k) {
      counts.push_back(k % 997 == 0 ? 300 + k % 50 : k % 7);  // 0..6, and one long in 997
      n += counts.back();
    }
    const Case c{"beyond_llc", ids_from_counts(counts), static_cast<i64>(counts.size())};
    const auto seg = make_segments<std::int32_t>(c, Mode::Sorted);
    const auto x = random_vector<float>(rng, c.n() * d), y = random_vector<float>(rng, c.n() * d);
    std::vector<double> sum(c.m * d, 0.0), dotv(c.m, 0.0);
    for (i64 i = 0; i < c.n(); ++i)
      for (i64 j = 0; j < d; ++j) {
        sum[c.ids[i] * d + j] += double(x[i * d + j]);
        dotv[c.ids[i]] += double(x[i * d + j]) * double(y[i * d + j]);
      }
    // rank 1 for D = 1 (the single values' path), rank 2 for rows
    std::vector<double> h_sum, h_mean, h_dot;
    auto run = [&]<int Rank>() {
      const auto xv = device_view<float, Rank>(x, c.n(), d);
      const auto yv = device_view<float, Rank>(y, c.n(), d);
      const auto o_sum = poisoned_view<float, Rank>(c.m, d);
      const auto o_mean = poisoned_view<float, Rank>(c.m, d);
      const auto o_dot = poisoned_view<float, 1>(c.m, 1);
      segops::segmented_sum(seg, xv, o_sum);
      segops::segmented_mean(seg, xv, o_mean);
      segops::segmented_dot(seg, xv, yv, o_dot);
      h_sum = to_host(o_sum), h_mean = to_host(o_mean), h_dot = to_host(o_dot);
    };
    if (d == 1)
      run.template operator()<1>();
    else
      run.template operator()<2>();
    int wrong = 0;
    for (i64 s = 0; s < c.m && wrong < 10; ++s) {
      const std::string where = "D=" + std::to_string(d) + " segment " + std::to_string(s) +
                                " of " + std::to_string(c.m) + ", length " +
                                std::to_string(counts[s]);
      for (i64 j = 0; j < d; ++j) {
        const double ref = sum[s * d + j], mean = counts[s] > 0 ? ref / double(counts[s]) : 0.0;
        const bool ok = std::abs(h_sum[s * d + j] - ref) <= 1e-5 * (1 + std::abs(ref)) &&
                        std::abs(h_mean[s * d + j] - mean) <= 1e-5 * (1 + std::abs(mean));
        wrong += !ok;
        EXPECT_TRUE(ok) << where << " column " << j << ": sum " << h_sum[s * d + j] << " vs " << ref
                        << ", mean " << h_mean[s * d + j] << " vs " << mean;
      }
      const bool ok = std::abs(h_dot[s] - dotv[s]) <= 1e-5 * (1 + std::abs(dotv[s]));
      wrong += !ok;
      EXPECT_TRUE(ok) << "dot " << where << ": " << h_dot[s] << " vs " << dotv[s];
    }
  }
}

// ---- finite differences ----

/// Runs `op` on double LayoutRight views built from `in`; returns its output on the host.
template <int RIn, int ROut, class Seg>
std::vector<double> apply(const LinOpInfo& op, const Seg& seg, const Case& c,
                          const std::vector<double>& in, i64 d) {
  const i64 ri = op.in_rows(c), wi = op.in_width(d), ro = op.out_rows(c), wo = op.out_width(d);
  const auto x = device_view<double, RIn>(in, ri, wi);
  const auto out = poisoned_view<double, ROut>(ro, wo);
  run_linear(Exec(), op.op, seg, x, out);
  return to_host(out);
}
template <class Seg>
std::vector<double> apply_any(const LinOpInfo& op, const Seg& seg, const Case& c,
                              const std::vector<double>& in, int rank, i64 d) {
  if (op.component)
    return op.reduces ? apply<2, 1>(op, seg, c, in, d) : apply<1, 2>(op, seg, c, in, d);
  return rank == 1 ? apply<1, 1>(op, seg, c, in, d) : apply<2, 2>(op, seg, c, in, d);
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t k = 0; k < a.size(); ++k) s += a[k] * b[k];
  return s;
}

/// `adj` applied to a cotangent g must be the gradient of x -> <g, f(x)>, checked entry by entry
/// with central differences. With f a first backward and adj its double backward this is the
/// SPEC's rule: the double backward is the derivative of <u, first backward(g)> with respect to g.
template <class Seg>
void fd_check(const LinOpInfo& f, const LinOpInfo& adj, const Seg& seg, const Case& c, int rank,
              i64 d, std::mt19937_64& rng, const std::string& what) {
  const double h = 1e-6;
  auto x = random_vector<double>(rng, f.in_rows(c) * f.in_width(d));
  const auto g = random_vector<double>(rng, f.out_rows(c) * f.out_width(d));
  const auto analytic = apply_any(adj, seg, c, g, rank, d);
  ASSERT_EQ(analytic.size(), x.size()) << what;
  for (size_t j = 0; j < x.size(); ++j) {
    const double x0 = x[j];
    x[j] = x0 + h;
    const double lp = dot(g, apply_any(f, seg, c, x, rank, d));
    x[j] = x0 - h;
    const double lm = dot(g, apply_any(f, seg, c, x, rank, d));
    x[j] = x0;
    const double fd = (lp - lm) / (2 * h);
    ASSERT_NEAR(analytic[j], fd, 1e-6 * (1 + std::abs(fd))) << what << ": entry " << j;
  }
}

std::vector<Case> fd_cases() {
  std::vector<Case> cases;
  std::vector<i64> counts = {0, 3, 0, 0, 5, 1, 4, 0, 2, 3, 0, 2};  // empty segments at both ends
  cases.push_back({"fd_mixed", ids_from_counts(counts), static_cast<i64>(counts.size())});
  cases.push_back({"fd_M1", std::vector<i64>(13, 0), 1});
  return cases;
}

TEST(Linear, FiniteDifferences) {
  std::mt19937_64 rng(51);
  const LinOp pairs[][2] = {{LinOp::SumFwd, LinOp::SumBwd},     {LinOp::SumBwd, LinOp::SumDbl},
                            {LinOp::MeanFwd, LinOp::MeanBwd},   {LinOp::MeanBwd, LinOp::MeanDbl},
                            {LinOp::CompFwd, LinOp::CompBwd},   {LinOp::CompBwd, LinOp::CompDbl},
                            {LinOp::BcastFwd, LinOp::BcastBwd}, {LinOp::BcastBwd, LinOp::BcastDbl}};
  // Sorted ids, and shuffled ids with dropped ones (trusted) under the deterministic option: the
  // schedules differ, the math must not. (The default unsorted schedule is checked against the
  // references above.)
  for (Mode mode : {Mode::Sorted, Mode::Deterministic})
    for (Case c : fd_cases()) {
      const bool dropped = mode != Mode::Sorted;
      if (dropped) {
        std::shuffle(c.ids.begin(), c.ids.end(), rng);
        c = with_dropped_ids(c, 52, 5);
      }
      const auto seg = make_segments<std::int64_t>(c, mode, dropped);
      for (const auto& p : pairs)
        for (int rank : {1, 2}) {
          const auto f = info(p[0]), adj = info(p[1]);
          if (f.component && rank == 1) continue;
          const i64 d = rank == 1 ? 1 : 2;
          fd_check(f, adj, seg, c, rank, d, rng,
                   std::string(adj.name) + " vs FD of " + f.name + " [" + mode_name(mode) + ", " +
                       c.name + ", rank " + std::to_string(rank) + "]");
          if (::testing::Test::HasFatalFailure()) return;
        }
    }
}

#ifndef SEGOPS_TEST_CUDA
/// Host backends, deterministic option: component_sum adds each element's row sum (formed in the
/// output's type, column by column) in the order segmented_sum adds values, so it equals, bit for
/// bit, segmented_sum of those row sums; so does its double backward, which takes the same path.
/// Past 8 MiB of rows, the tiles over the permutation sum row sums that a pass in element order
/// computed first (SumReducer::stage): the 720000-element case (rows of 3 or 5 floats: 8.6 or
/// 14.4 MB) pins those, the regimes and its rows of 2 the rows gathered one by one.
TEST(LinearDeterminism, DeterministicComponentSumIsTheSumOfRowSums) {
  std::mt19937_64 rng(162);  // the values (161: the ids)
  for_unsorted_deterministic(161, 720000, 60000, [&](const Case& c, const auto& seg) {
    for (i64 d : {2, 3, 5}) {
      const i64 n = c.n();
      const auto xh = random_vector<float>(rng, n * d);
      std::vector<float> fsums(n);
      std::vector<double> dsums(n);
      for (i64 e = 0; e < n; ++e) {
        float f = 0;
        double g = 0;
        for (i64 k = 0; k < d; ++k) {
          f += xh[e * d + k];
          g += static_cast<double>(xh[e * d + k]);
        }
        fsums[e] = f;
        dsums[e] = g;
      }
      const Kokkos::View<const float**, Kokkos::LayoutRight, Mem> x =
          device_matrix<float>(xh, n, d);
      const Kokkos::View<const float*, Mem> fv = device_vector<float>(fsums);
      const Kokkos::View<const double*, Mem> dv = device_vector<double>(dsums);
      const auto comp = poisoned_view<float, 1>(c.m, 1), dbl = poisoned_view<float, 1>(c.m, 1),
                 sum = poisoned_view<float, 1>(c.m, 1);
      const auto comp_d = poisoned_view<double, 1>(c.m, 1),
                 sum_d = poisoned_view<double, 1>(c.m, 1);
      segops::segmented_component_sum(Exec(), seg, x, comp);
      segops::segmented_component_sum_double_backward(Exec(), seg, x, dbl);
      segops::segmented_sum(Exec(), seg, fv, sum);
      segops::segmented_component_sum(Exec(), seg, x, comp_d);
      segops::segmented_sum(Exec(), seg, dv, sum_d);
      const std::string where = c.name + ", D = " + std::to_string(d);
      EXPECT_TRUE(host_bytes(comp) == host_bytes(sum)) << "component_sum, " << where;
      EXPECT_TRUE(host_bytes(dbl) == host_bytes(sum)) << "double backward, " << where;
      EXPECT_TRUE(host_bytes(comp_d) == host_bytes(sum_d)) << "into double, " << where;
    }
  });
}
#endif

}  // namespace
}  // namespace segtest
