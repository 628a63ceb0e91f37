// SPDX-License-Identifier: Apache-2.0
// The nonlinear family (rms_norm, max_norm, max, min; forward with and without the arg output,
// backward, double backward) against double-precision references over every regime, mode, width
// and layout; all-zero segments, exact ties and empty segments; finite differences away from the
// non-smooth points; bad input (including wrong state passed back); bitwise determinism.
#include "test_ops_common.hpp"

namespace segtest::ops {
namespace {

using NL = Nonlinear;

TEST(Nonlinear, AllOpsInt32FloatFloat) {
  for (Mode mode : kModes) sweep<NL, std::int32_t, float, float, std::int32_t>(mode, 301);
}
TEST(Nonlinear, AllOpsInt64DoubleDouble) {
  for (Mode mode : kModes) sweep<NL, std::int64_t, double, double, i64>(mode, 302);
}
TEST(Nonlinear, AllOpsInt32FloatIntoDouble) {
  for (Mode mode : kModes) sweep<NL, std::int32_t, float, double, i64>(mode, 303);
}
TEST(Nonlinear, LayoutLeftAndStride) { layout_sweep<NL>(311); }
TEST(Nonlinear, TrustedDropsOutOfRangeIds) { dropped_sweep<NL>(321); }
TEST(Nonlinear, NoSegmentsOrAllIdsDropped) { degenerate_sweep<NL>(325); }
TEST(Nonlinear, ManySegmentsUnsorted) { many_segments_sweep<NL>(327); }
TEST(Nonlinear, StagedCoefficientsUnsorted) { staged_coefficients_sweep<NL>(329, "rms_norm"); }
TEST(Nonlinear, FiniteDifferences) { fd_sweep<NL>(331); }

/// One case's descriptors for the (int32, float, float) and (int64, double, double) runs.
struct Descriptors {
  segops::Segments<std::int32_t, Exec> s32;
  segops::Segments<std::int64_t, Exec> s64;
  Descriptors(const Case& c, Mode mode)
      : s32(make_segments<std::int32_t>(c, mode)), s64(make_segments<std::int64_t>(c, mode)) {}
};

/// Runs `def` on inputs `in` (state recomputed by the reference) against the reference, for the
/// rank of `dm`, in (int32, float, float) or (int64, double, double).
template <class T>
Arrays check_given(const OpDef& def, const Case& c, const Descriptors& segs, const Dims& dm,
                   Arrays in, const std::string& what) {
  derive_state_ref<NL, T, T>(def, c, dm, in);
  if constexpr (std::is_same_v<T, float>) {
    if (dm.rank == 1)
      return check_inputs<NL, T, T, std::int32_t, 1>(def, segs.s32, c, dm, in, what);
    return check_inputs<NL, T, T, std::int32_t, 2>(def, segs.s32, c, dm, in, what);
  } else {
    if (dm.rank == 1) return check_inputs<NL, T, T, i64, 1>(def, segs.s64, c, dm, in, what);
    return check_inputs<NL, T, T, i64, 2>(def, segs.s64, c, dm, in, what);
  }
}

/// rms_norm and max_norm where every vector of a segment is zero (every third segment), and
/// where a zero vector sits among nonzero ones: values and gradients exactly 0 there, no NaN.
TEST(Nonlinear, AllZeroSegmentsGiveZeroGradientsWithoutNaN) {
  std::mt19937_64 rng(341);
  for (Mode mode : kModes)
    for (const auto& c : regimes(341, mode)) {
      if (c.n() == 0) continue;
      const Descriptors segs(c, mode);
      for (const Dims& dm : {Dims{1, 1, 1, 1}, Dims{2, 3, 1, 1}}) {
        const i64 w = dm.rank == 1 ? 1 : dm.d;
        std::vector<char> first_seen(c.m, 0);
        for (int op : {NL::RmsF, NL::RmsB, NL::RmsD, NL::NormF, NL::NormB, NL::NormD}) {
          const OpDef& def = def_of<NL>(op);
          for (bool single : {false, true}) {
            auto in = make_inputs<NL, float, float>(def, c, dm, rng);
            std::fill(first_seen.begin(), first_seen.end(), 0);
            // every third segment all zero, and the first element of every other one
            for (i64 i = 0; i < c.n(); ++i) {
              const i64 s = c.ids[i];
              if (s % 3 == 0 || !first_seen[s])
                for (i64 d = 0; d < w; ++d) in["x"][i * w + d] = 0.0;
              first_seen[s] = 1;
            }
            const auto what =
                describe(def, c, mode_name(mode), dm) + (single ? " float" : " double");
            const auto got = single ? check_given<float>(def, c, segs, dm, in, what)
                                    : check_given<double>(def, c, segs, dm, in, what);
            for (const auto& a : def.out) {
              const auto& v = got.at(a.name);
              const bool per_segment = !element_side(a.shape);
              for (size_t k = 0; k < v.size(); ++k) {
                ASSERT_FALSE(std::isnan(v[k])) << what << " output " << a.name << " element " << k;
                const i64 s = per_segment ? static_cast<i64>(k) : c.ids[k / w];
                if (s % 3 == 0 && !is_index(a.shape))
                  ASSERT_EQ(v[k], 0.0)
                      << what << " output " << a.name << " element " << k << " (zero segment)";
              }
            }
            if (::testing::Test::HasFailure()) return;
          }
        }
      }
    }
}

/// max and min of rows of 2 to 4 floats into int64 args, on small integers (exact ties): the sweeps
/// pair int64 args with doubles only, and sorted ids take a vector walk for rows of floats whose
/// 64-bit indices it blends two lanes at a time (MaxLocReducer::first_rows).
TEST(Nonlinear, FloatRowsIntoInt64Args) {
  std::mt19937_64 rng(361);
  for (Mode mode : kModes)
    for (const auto& c : regimes(361, mode)) {
      const Descriptors segs(c, mode);
      for (const i64 d : {2, 3, 4})
        for (int op : {NL::MaxF, NL::MinF}) {
          const OpDef& def = def_of<NL>(op);
          const Dims dm{2, d, 1, 1};
          Arrays in;
          std::uniform_int_distribution<int> small(-2, 2);
          in["x"].resize(c.n() * d);
          for (auto& v : in["x"]) v = small(rng);
          derive_state_ref<NL, float, float>(def, c, dm, in);
          check_inputs<NL, float, float, i64, 2>(def, segs.s32, c, dm, in,
                                                 describe(def, c, mode_name(mode), dm) + " float");
          if (::testing::Test::HasFailure()) return;
        }
    }
}

/// max_norm, max and min on small integers: many exact ties, which go to the lowest index.
TEST(Nonlinear, ExactTiesGoToTheLowestIndex) {
  std::mt19937_64 rng(351);
  i64 tied = 0;
  for (Mode mode : kModes)
    for (const auto& c : regimes(351, mode)) {
      const Descriptors segs(c, mode);
      for (const Dims& dm : {Dims{1, 1, 1, 1}, Dims{2, 3, 1, 1}, Dims{2, 9, 1, 1}})
        for (int op : {NL::NormF, NL::MaxF, NL::MinF}) {
          const OpDef& def = def_of<NL>(op);
          const i64 w = dm.rank == 1 ? 1 : dm.d;
          Arrays in;
          std::uniform_int_distribution<int> small(-2, 2);
          in["x"].resize(c.n() * w);
          for (auto& v : in["x"]) v = small(rng);
          for (bool single : {false, true}) {
            const auto what =
                describe(def, c, mode_name(mode), dm) + (single ? " float" : " double");
            if (single)
              check_given<float>(def, c, segs, dm, in, what);
            else
              check_given<double>(def, c, segs, dm, in, what);
            if (::testing::Test::HasFailure()) return;
          }
          // count segments (components) whose extremum is attained more than once
          const auto key = op == NL::NormF ? NL::row_norms(in["x"], c.n(), w) : in["x"];
          const i64 kw = op == NL::NormF ? 1 : w;
          const auto ref = NL::reference(op, c, dm, in);
          std::vector<int> hits(c.m * kw, 0);
          for (i64 i = 0; i < c.n(); ++i)
            for (i64 k = 0; k < kw; ++k)
              if (key[i * kw + k] == ref.val.at("out")[c.ids[i] * kw + k])
                ++hits[c.ids[i] * kw + k];
          for (int h : hits) tied += h > 1;
        }
    }
  EXPECT_GT(tied, 1000) << "the data did not produce exact ties";
}

/// Empty segments: max -inf, min +inf, max_norm and rms_norm 0, every arg -1; nothing flows back.
TEST(Nonlinear, EmptySegments) {
  const Case c{"empties", {1, 3, 1, 3, 3}, 5};  // segments 0, 2, 4 empty
  const double inf = std::numeric_limits<double>::infinity();
  for (Mode mode : kModes) {
    Case cc = c;
    if (mode == Mode::Sorted) std::sort(cc.ids.begin(), cc.ids.end());
    const auto seg = make_segments<std::int64_t>(cc, mode);
    const auto x = device_matrix<double>({1, -2, 3, -4, 5, -6, 7, -8, 9, -1}, 5, 2);
    const auto mx = poisoned_view<double, 2>(5, 2), mn = poisoned_view<double, 2>(5, 2);
    const auto amx = poisoned_view<std::int64_t, 2>(5, 2),
               amn = poisoned_view<std::int64_t, 2>(5, 2);
    const auto nrm = poisoned_view<double, 1>(5, 1), rms = poisoned_view<double, 1>(5, 1);
    const auto anrm = poisoned_view<std::int32_t, 1>(5, 1);
    segops::segmented_max(Exec(), seg, x, mx, amx);
    segops::segmented_min(Exec(), seg, x, mn, amn);
    segops::segmented_max_norm(Exec(), seg, x, nrm, anrm);
    segops::segmented_rms_norm(Exec(), seg, x, rms);
    const auto hmx = to_host(mx), hmn = to_host(mn), hamx = to_host(amx), hamn = to_host(amn);
    const auto hn = to_host(nrm), hr = to_host(rms), han = to_host(anrm);
    for (i64 s : {0, 2, 4}) {
      for (i64 k = 0; k < 2; ++k) {
        EXPECT_EQ(hmx[s * 2 + k], -inf) << mode_name(mode) << " segment " << s;
        EXPECT_EQ(hmn[s * 2 + k], inf) << mode_name(mode) << " segment " << s;
        EXPECT_EQ(hamx[s * 2 + k], -1) << mode_name(mode) << " segment " << s;
        EXPECT_EQ(hamn[s * 2 + k], -1) << mode_name(mode) << " segment " << s;
      }
      EXPECT_EQ(hn[s], 0.0) << mode_name(mode) << " segment " << s;
      EXPECT_EQ(hr[s], 0.0) << mode_name(mode) << " segment " << s;
      EXPECT_EQ(han[s], -1) << mode_name(mode) << " segment " << s;
    }
    for (i64 s : {1, 3}) EXPECT_GE(han[s], 0) << mode_name(mode) << " segment " << s;
    // the double backward of max gathers nothing for an empty segment
    const auto u = device_matrix<double>({1, 1, 1, 1, 1, 1, 1, 1, 1, 1}, 5, 2);
    const auto gg = poisoned_view<double, 2>(5, 2);
    segops::segmented_max_double_backward(Exec(), seg, amx, u, gg);
    const auto hgg = to_host(gg);
    for (i64 s = 0; s < 5; ++s)
      for (i64 k = 0; k < 2; ++k) EXPECT_EQ(hgg[s * 2 + k], s % 2 ? 1.0 : 0.0) << mode_name(mode);
  }
}

/// NaN wins every comparison of max, min and max_norm and poisons rms_norm, in its own segment
/// only (the arg names the first NaN); segments of only -inf or +inf name their lowest element.
TEST(Nonlinear, NanAndInfinity) {
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  // segment 0 holds a NaN, segment 1 only -inf, segment 2 only +inf, segment 3 ordinary values
  const std::vector<i64> ids0 = {0, 0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3};
  const std::vector<double> x0 = {1, 5, nan, 2, -inf, -inf, -inf, inf, inf, inf, 3, -4};
  std::mt19937_64 rng(381);
  for (Mode mode : kModes) {
    std::vector<size_t> perm(ids0.size());
    std::iota(perm.begin(), perm.end(), 0);
    if (mode != Mode::Sorted) std::shuffle(perm.begin(), perm.end(), rng);
    Case c{"nan_inf", {}, 4};
    std::vector<double> x;
    for (size_t p : perm) {
      c.ids.push_back(ids0[p]);
      x.push_back(x0[p]);
    }
    std::vector<i64> first(4, -1), first_nan(4, -1);  // lowest element of each segment, first NaN
    for (i64 i = c.n() - 1; i >= 0; --i) {
      first[c.ids[i]] = i;
      if (std::isnan(x[i])) first_nan[c.ids[i]] = i;
    }
    const auto seg = make_segments<std::int32_t>(c, mode);
    const auto xv = device_vector<double>(x);
    const auto mx = poisoned_view<double, 1>(4, 1), mn = poisoned_view<double, 1>(4, 1);
    const auto nrm = poisoned_view<double, 1>(4, 1), rms = poisoned_view<double, 1>(4, 1);
    const auto amx = poisoned_view<std::int32_t, 1>(4, 1),
               amn = poisoned_view<std::int32_t, 1>(4, 1);
    const auto anrm = poisoned_view<std::int64_t, 1>(4, 1);
    segops::segmented_max(Exec(), seg, xv, mx, amx);
    segops::segmented_min(Exec(), seg, xv, mn, amn);
    segops::segmented_max_norm(Exec(), seg, xv, nrm, anrm);
    segops::segmented_rms_norm(Exec(), seg, xv, rms);
    const auto hmx = to_host(mx), hmn = to_host(mn), hn = to_host(nrm), hr = to_host(rms);
    const auto hamx = to_host(amx), hamn = to_host(amn), han = to_host(anrm);
    const std::string m = mode_name(mode);
    EXPECT_TRUE(std::isnan(hmx[0]) && std::isnan(hmn[0]) && std::isnan(hn[0]) && std::isnan(hr[0]))
        << m;
    EXPECT_EQ(hamx[0], first_nan[0]) << m;
    EXPECT_EQ(hamn[0], first_nan[0]) << m;
    EXPECT_EQ(han[0], first_nan[0]) << m;
    EXPECT_EQ(hmx[1], -inf) << m;
    EXPECT_EQ(hmn[1], -inf) << m;
    EXPECT_EQ(hn[1], inf) << m;
    EXPECT_EQ(hr[1], inf) << m;
    EXPECT_EQ(hmx[2], inf) << m;
    EXPECT_EQ(hmn[2], inf) << m;
    EXPECT_EQ(hn[2], inf) << m;
    EXPECT_EQ(hr[2], inf) << m;
    for (i64 s : {1, 2}) {
      EXPECT_EQ(hamx[s], first[s]) << m << " segment " << s;
      EXPECT_EQ(hamn[s], first[s]) << m << " segment " << s;
      EXPECT_EQ(han[s], first[s]) << m << " segment " << s;
    }
    EXPECT_EQ(hmx[3], 3.0) << m;
    EXPECT_EQ(hmn[3], -4.0) << m;
    EXPECT_EQ(hn[3], 4.0) << m;
    EXPECT_NEAR(hr[3], std::sqrt(12.5), 1e-15) << m;
  }
}

/// max, min and max_norm without the arg output, rows of 1 to 4 in float and double, with NaN and
/// infinities scattered at random, over many tiles of short segments (the sorted walk, which
/// tests four positions at a time for NaN and skips improve's NaN rule where there is none) and
/// over long ones (one vector of bests per segment, which hands segments holding a NaN to
/// improve's loop; the last segment holds x's last row): every segment holding a NaN gives NaN,
/// the others their max or min exactly (max_norm to rounding), empty ones -inf / +inf (0).
template <class T>
void nan_without_arg_sweep(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<i64> short_counts(2400), long_counts(200);
  for (auto& x : short_counts) x = static_cast<i64>(rng() % 6);
  for (auto& x : long_counts) x = static_cast<i64>(rng() % 61);
  long_counts.back() = 100;
  const double nan = std::numeric_limits<double>::quiet_NaN(),
               inf = std::numeric_limits<double>::infinity();
  for (Mode mode : kModes)
    for (const auto* counts : {&short_counts, &long_counts})
      for (i64 d = 1; d <= 4; ++d)
        for (int every : {0, 5, 97, 1000}) {  // about one value in `every` is NaN (0: none)
          Case c{counts == &short_counts ? "short_many_tiles" : "long", ids_from_counts(*counts),
                 static_cast<i64>(counts->size())};
          if (mode != Mode::Sorted) std::shuffle(c.ids.begin(), c.ids.end(), rng);
          std::vector<T> x = random_vector<T>(rng, static_cast<size_t>(c.n() * d));
          for (auto& v : x) {
            const auto r = rng() % 200;
            if (every > 0 && static_cast<int>(rng() % static_cast<std::uint64_t>(every)) == 0)
              v = static_cast<T>(nan);
            else if (r == 0)
              v = static_cast<T>(inf);
            else if (r == 1)
              v = static_cast<T>(-inf);
          }
          std::vector<double> hi(c.m * d, -inf), lo(c.m * d, inf);
          std::vector<bool> has_nan(c.m * d, false);
          for (i64 i = 0; i < c.n(); ++i)
            for (i64 k = 0; k < d; ++k) {
              const i64 o = c.ids[i] * d + k;
              const double v = static_cast<double>(x[i * d + k]);
              if (std::isnan(v)) has_nan[o] = true;
              hi[o] = std::max(hi[o], v);
              lo[o] = std::min(lo[o], v);
            }
          const auto seg = make_segments<std::int32_t>(c, mode);
          const auto xv = device_matrix<T>(x, c.n(), d);
          std::vector<double> norm(c.m, 0);  // max_norm: 0 for empty segments
          std::vector<bool> row_nan(c.m, false);
          for (i64 i = 0; i < c.n(); ++i) {
            double q = 0;
            for (i64 k = 0; k < d; ++k) q += double(x[i * d + k]) * double(x[i * d + k]);
            if (std::isnan(q))
              row_nan[c.ids[i]] = true;
            else
              norm[c.ids[i]] = std::max(norm[c.ids[i]], std::sqrt(q));
          }
          const auto mx = poisoned_view<T, 2>(c.m, d), mn = poisoned_view<T, 2>(c.m, d);
          const auto nrm = poisoned_view<T, 1>(c.m, 1);
          segops::segmented_max(Exec(), seg, xv, mx);
          segops::segmented_min(Exec(), seg, xv, mn);
          segops::segmented_max_norm(Exec(), seg, xv, nrm);
          const auto hmx = to_host(mx), hmn = to_host(mn), hn = to_host(nrm);
          const std::string what = c.name + " " + mode_name(mode) + " D=" + std::to_string(d) +
                                   " every=" + std::to_string(every);
          i64 wrong = 0, nans = 0;
          for (i64 o = 0; o < c.m * d; ++o) {
            nans += has_nan[o];
            if (has_nan[o] ? !(std::isnan(hmx[o]) && std::isnan(hmn[o]))
                           : !(hmx[o] == hi[o] && hmn[o] == lo[o])) {
              if (++wrong <= 3)
                ADD_FAILURE() << what << " row " << o / d << " component " << o % d << ": max "
                              << hmx[o] << " min " << hmn[o] << ", expected "
                              << (has_nan[o] ? nan : hi[o]) << " and "
                              << (has_nan[o] ? nan : lo[o]);
            }
          }
          for (i64 g = 0; g < c.m; ++g) {
            const bool ok =
                row_nan[g] ? std::isnan(hn[g])
                           : hn[g] == norm[g] || std::abs(hn[g] - norm[g]) <= tol<T>() * norm[g];
            if (!ok && ++wrong <= 3)
              ADD_FAILURE() << what << " max_norm of segment " << g << ": " << hn[g]
                            << ", expected " << (row_nan[g] ? nan : norm[g]);
          }
          EXPECT_EQ(wrong, 0) << what;
          if (every > 0) EXPECT_GT(nans, 0) << what;  // the case holds NaN where it should
          if (every == 0) EXPECT_EQ(nans, 0) << what;
        }
}
TEST(Nonlinear, NanWithoutArgFloat) { nan_without_arg_sweep<float>(391); }
TEST(Nonlinear, NanWithoutArgDouble) { nan_without_arg_sweep<double>(392); }

// ---- bad input: each throws segops::Error naming the op and the argument, outputs untouched ----

struct Small {
  Case c = small_case();
  segops::Segments<std::int32_t, Exec> seg = make_segments<std::int32_t>(c, Mode::Sorted);
  std::mt19937_64 rng{361};
  i64 n = c.n(), m = c.m, d = 3;
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> rows(i64 r, i64 w) {
    return device_matrix<double>(random_vector<double>(rng, r * w), r, w);
  }
  Kokkos::View<double*, Mem> scalars(i64 r) {
    return device_vector<double>(random_vector<double>(rng, r));
  }
  template <class I>
  Kokkos::View<I*, Mem> indices(i64 r) {
    std::vector<I> v(r);
    for (i64 k = 0; k < r; ++k) v[k] = static_cast<I>(k % n);
    return device_vector<I>(v);
  }
};

TEST(NonlinearErrors, RmsNormBackwardStateOfExtentMPlusOne) {
  Small t;
  const auto x = t.rows(t.n, t.d);
  const auto out = t.scalars(t.m + 1), g = t.scalars(t.m);
  const auto gx = poisoned_view<double, 2>(t.n, t.d);
  expect_error([&] { segops::segmented_rms_norm_backward(Exec(), t.seg, x, out, g, gx); },
               "segmented_rms_norm_backward", "out", gx);
}
TEST(NonlinearErrors, RmsNormDoubleBackwardStateOfExtentMMinusOne) {
  Small t;
  const auto x = t.rows(t.n, t.d), u = t.rows(t.n, t.d);
  const auto out = t.scalars(t.m - 1), g = t.scalars(t.m);
  const auto gg = poisoned_view<double, 1>(t.m, 1);
  const auto xp = poisoned_view<double, 2>(t.n, t.d);
  expect_error(
      [&] { segops::segmented_rms_norm_double_backward(Exec(), t.seg, x, out, g, u, gg, xp); },
      "segmented_rms_norm_double_backward", "out", gg, xp);
}
TEST(NonlinearErrors, RmsNormOutputAliasesInput) {
  Small t;
  const auto h = random_vector<double>(t.rng, t.n);
  const auto x = device_vector<double>(h);
  const auto out = Kokkos::subview(x, Kokkos::pair<i64, i64>(2, 2 + t.m));
  expect_error([&] { segops::segmented_rms_norm(Exec(), t.seg, x, out); }, "segmented_rms_norm",
               "out");
  EXPECT_EQ(to_host(x), h) << "the aliased input was modified";
}
TEST(NonlinearErrors, MaxNormArgmaxOfWrongExtent) {
  Small t;
  const auto x = t.rows(t.n, t.d);
  const auto out = poisoned_view<double, 1>(t.m, 1);
  const auto argmax = poisoned_view<std::int64_t, 1>(t.m + 1, 1);
  expect_error([&] { segops::segmented_max_norm(Exec(), t.seg, x, out, argmax); },
               "segmented_max_norm", "argmax", out, argmax);
}
TEST(NonlinearErrors, MaxNormBackwardArgmaxOfWrongExtent) {
  Small t;
  const auto x = t.rows(t.n, t.d);
  const auto argmax = t.indices<std::int32_t>(t.m - 1);
  const auto g = t.scalars(t.m);
  const auto gx = poisoned_view<double, 2>(t.n, t.d);
  expect_error([&] { segops::segmented_max_norm_backward(Exec(), t.seg, x, argmax, g, gx); },
               "segmented_max_norm_backward", "argmax", gx);
}
TEST(NonlinearErrors, MaxNormDoubleBackwardCotangentOfWrongLength) {
  Small t;
  const auto x = t.rows(t.n, t.d), u = t.rows(t.n + 1, t.d);
  const auto argmax = t.indices<std::int64_t>(t.m);
  const auto g = t.scalars(t.m);
  const auto gg = poisoned_view<double, 1>(t.m, 1);
  const auto xp = poisoned_view<double, 2>(t.n, t.d);
  expect_error(
      [&] { segops::segmented_max_norm_double_backward(Exec(), t.seg, x, argmax, g, u, gg, xp); },
      "segmented_max_norm_double_backward", "u", gg, xp);
}
TEST(NonlinearErrors, MaxArgOfWrongWidth) {
  Small t;
  const auto x = t.rows(t.n, t.d);
  const auto out = poisoned_view<double, 2>(t.m, t.d);
  const auto arg = poisoned_view<std::int64_t, 2>(t.m, t.d + 1);
  expect_error([&] { segops::segmented_max(Exec(), t.seg, x, out, arg); }, "segmented_max", "arg",
               out, arg);
}
TEST(NonlinearErrors, MinOutputOfWrongWidth) {
  Small t;
  const auto x = t.rows(t.n, t.d);
  const auto out = poisoned_view<double, 2>(t.m, t.d + 1);
  expect_error([&] { segops::segmented_min(t.seg, x, out); }, "segmented_min", "out", out);
}
TEST(NonlinearErrors, MaxBackwardArgOfWrongWidth) {
  Small t;
  const auto arg = poisoned_view<std::int32_t, 2>(t.m, t.d - 1);
  const auto g = t.rows(t.m, t.d);
  const auto gx = poisoned_view<double, 2>(t.n, t.d);
  expect_error([&] { segops::segmented_max_backward(Exec(), t.seg, arg, g, gx); },
               "segmented_max_backward", "arg", gx);
}
TEST(NonlinearErrors, MaxBackwardGradientOfWrongSegmentCount) {
  Small t;
  const auto arg = poisoned_view<std::int64_t, 2>(t.m, t.d);
  const auto g = t.rows(t.m + 1, t.d);
  const auto gx = poisoned_view<double, 2>(t.n, t.d);
  expect_error([&] { segops::segmented_max_backward(Exec(), t.seg, arg, g, gx); },
               "segmented_max_backward", "g", gx);
}
TEST(NonlinearErrors, MinDoubleBackwardArgOfWrongSegmentCount) {
  Small t;
  const auto arg = poisoned_view<std::int64_t, 2>(t.m + 1, t.d);
  const auto u = t.rows(t.n, t.d);
  const auto gg = poisoned_view<double, 2>(t.m, t.d);
  expect_error([&] { segops::segmented_min_double_backward(Exec(), t.seg, arg, u, gg); },
               "segmented_min_double_backward", "arg", gg);
}

// ---- determinism ----

/// rms_norm, and max with its arg, in float, as raw bytes.
template <class Seg>
std::vector<unsigned char> reductions_bytes(
    const Seg& seg, const Kokkos::View<const float**, Kokkos::LayoutRight, Mem>& x) {
  const typename Seg::execution_space exec;
  const i64 m = seg.num_segments(), d = x.extent(1);
  const auto rms = poisoned_view<float, 1>(m, 1);
  const auto mx = poisoned_view<float, 2>(m, d);
  const auto arg = poisoned_view<std::int64_t, 2>(m, d);
  segops::segmented_rms_norm(exec, seg, x, rms);
  segops::segmented_max(exec, seg, x, mx, arg);
  return concat_bytes(rms, mx, arg);
}

/// Sorted ids and the deterministic option: bitwise identical across runs (and, in the OpenMP
/// executable, equal to the Serial backend's result).
TEST(NonlinearDeterminism, SortedAndDeterministicAreBitwiseReproducible) {
  std::mt19937_64 rng(371);
  for (Mode mode : {Mode::Sorted, Mode::Deterministic})
    for (const auto& c : regimes(371, mode)) {
      if (c.name != "giant" && c.name != "mixed" && c.name != "whole_array") continue;
      const auto seg = make_segments<std::int32_t>(c, mode);
      const i64 d = 11;
      // values from a small set: many ties, so the arg depends on the order of the reduction
      std::vector<float> h(c.n() * d);
      for (auto& v : h) v = static_cast<float>(rng() % 50) / 8.0f;
      const Kokkos::View<const float**, Kokkos::LayoutRight, Mem> x =
          device_matrix<float>(h, c.n(), d);
      const auto first = reductions_bytes(seg, x);
      for (int rep = 0; rep < 3; ++rep)
        EXPECT_EQ(reductions_bytes(seg, x), first)
            << mode_name(mode) << " " << c.name << " run " << rep;
#if defined(SEGOPS_TEST_OPENMP) && defined(KOKKOS_ENABLE_SERIAL)
      const segops::Segments<std::int32_t, Kokkos::Serial> serial(
          Kokkos::Serial(), device_ids<std::int32_t>(c.ids), c.m,
          {.deterministic = mode == Mode::Deterministic});
      EXPECT_EQ(reductions_bytes(serial, x), first)
          << mode_name(mode) << " " << c.name << ": Serial != OpenMP";
#endif
    }
}

/// max, min and max_norm without arg: with the deterministic option, host backends take the
/// per-thread copies (which merge exactly) instead of the tiles over the permutation. max and min
/// must give the bits the tiles give with arg (the first best element in element order: +0 and -0
/// tie, and NaNs of several payloads must give the first NaN's), max_norm the same values; all of
/// them the same bits run to run and, in the OpenMP executable, as the Serial backend's.
TEST(NonlinearDeterminism, WithoutArgTheBitsOfTheFirstBestElement) {
  std::mt19937_64 rng(375);
  std::vector<Case> cases = regimes(375, Mode::Deterministic);
  {  // output copies beyond a core's L2 cache (prefetched scatter), rows of 3 floats
    std::vector<i64> counts(200000);
    for (auto& x : counts) x = static_cast<i64>(rng() % 6);
    Case c{"large", ids_from_counts(counts), static_cast<i64>(counts.size())};
    std::shuffle(c.ids.begin(), c.ids.end(), rng);
    cases.push_back(std::move(c));
  }
  auto nan_with = [](std::uint32_t payload, bool negative) {
    return Kokkos::bit_cast<float>((negative ? 0xffc00000u : 0x7fc00000u) | payload);
  };
  for (const auto& c : cases) {
    const i64 d = 3, m = c.m;
    const auto seg = make_segments<std::int32_t>(c, Mode::Deterministic);
    ASSERT_TRUE(seg.deterministic()) << c.name;
    if (seg.sorted()) continue;  // no element, or one id throughout: the sorted tiles
    // a few values, many ties (+0 and -0 among them), and about one NaN in 300, of 8 payloads
    std::vector<float> h(c.n() * d);
    const float few[] = {-1.0f, -0.5f, 0.0f, -0.0f, 0.5f, 1.0f};
    for (auto& v : h) v = rng() % 300 == 0 ? nan_with(1 + rng() % 8, rng() % 2) : few[rng() % 6];
    const Kokkos::View<const float**, Kokkos::LayoutRight, Mem> x =
        device_matrix<float>(h, c.n(), d);
    auto without_arg = [&](const auto& s) {
      using S = std::decay_t<decltype(s)>;
      const typename S::execution_space exec;
      const auto mx = poisoned_view<float, 2>(m, d), mn = poisoned_view<float, 2>(m, d);
      const auto nrm = poisoned_view<float, 1>(m, 1);
      segops::segmented_max(exec, s, x, mx);
      segops::segmented_min(exec, s, x, mn);
      segops::segmented_max_norm(exec, s, x, nrm);
      return concat_bytes(mx, mn, nrm);
    };
    // with arg: the tiles over the permutation
    const auto mx = poisoned_view<float, 2>(m, d), mn = poisoned_view<float, 2>(m, d);
    const auto nrm = poisoned_view<float, 1>(m, 1);
    const auto amx = poisoned_view<std::int64_t, 2>(m, d),
               amn = poisoned_view<std::int64_t, 2>(m, d);
    const auto anrm = poisoned_view<std::int64_t, 1>(m, 1);
    segops::segmented_max(Exec(), seg, x, mx, amx);
    segops::segmented_min(Exec(), seg, x, mn, amn);
    segops::segmented_max_norm(Exec(), seg, x, nrm, anrm);
    const auto tiles = concat_bytes(mx, mn);
    // the case holds what it should: ties between +0 and -0 decided by order, and NaN results
    const auto hmx = to_host(mx), hmn = to_host(mn);
    i64 signed_zero = 0, nans = 0;
    for (i64 o = 0; o < m * d; ++o) {
      signed_zero += (hmx[o] == 0 && std::signbit(hmx[o])) + (hmn[o] == 0 && !std::signbit(hmn[o]));
      nans += std::isnan(hmx[o]);
    }
    if (c.name == "large") EXPECT_TRUE(signed_zero > 0 && nans > 0) << signed_zero << " " << nans;
    const auto first = without_arg(seg);
    EXPECT_TRUE(std::equal(tiles.begin(), tiles.end(), first.begin()))
        << c.name << ": max or min without arg != with arg (the tiles)";
    // max_norm: the same values; a NaN norm of a row holding several NaNs may carry another one
    const auto hn = to_host(nrm);
    i64 wrong = 0;
    for (i64 g = 0; g < m; ++g) {
      float v;
      std::memcpy(&v, first.data() + tiles.size() + g * sizeof(float), sizeof(float));
      if (!(std::isnan(v) ? std::isnan(hn[g])
                          : Kokkos::bit_cast<std::uint32_t>(v) ==
                                Kokkos::bit_cast<std::uint32_t>(static_cast<float>(hn[g]))))
        ++wrong;
    }
    EXPECT_EQ(wrong, 0) << c.name << ": max_norm without arg != with arg (the tiles)";
    for (int rep = 0; rep < 2; ++rep)
      EXPECT_TRUE(without_arg(seg) == first) << c.name << " run " << rep;
#if defined(SEGOPS_TEST_OPENMP) && defined(KOKKOS_ENABLE_SERIAL)
    const segops::Segments<std::int32_t, Kokkos::Serial> serial(
        Kokkos::Serial(), device_ids<std::int32_t>(c.ids), c.m, {.deterministic = true});
    EXPECT_TRUE(without_arg(serial) == first) << c.name << ": Serial != OpenMP";
#endif
  }
}

}  // namespace
}  // namespace segtest::ops
