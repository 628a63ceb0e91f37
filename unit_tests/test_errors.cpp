// SPDX-License-Identifier: Apache-2.0
// Bad input: every host-checkable mistake throws segops::Error naming the op, the argument and
// the expected and actual values, and leaves every output untouched.
#include "linear_common.hpp"

namespace segtest {
namespace {

static_assert(std::is_base_of_v<std::invalid_argument, segops::Error>);

/// The message of the segops::Error that f() throws (a test failure if it throws nothing or
/// something else).
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const segops::Error& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "expected segops::Error, got another exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "expected segops::Error, nothing was thrown";
  return {};
}

void expect_contains(const std::string& msg, const std::vector<std::string>& parts,
                     const std::string& what = {}) {
  for (const auto& p : parts)
    EXPECT_NE(msg.find(p), std::string::npos)
        << what << ": message \"" << msg << "\" lacks \"" << p << "\"";
}

/// Small descriptor shared by the extent tests: N = 10, M = 5, one empty segment.
Case small_case() { return {"small", ids_from_counts({2, 0, 3, 1, 4}), 5}; }

// ---- checked ids ----

template <class IdT>
void check_bad_id(std::vector<i64> ids, i64 m, i64 pos, i64 value) {
  for (Mode mode : {Mode::Sorted, Mode::Deterministic}) {
    const Case c{"bad", ids, m};
    const auto msg = error_of([&] { make_segments<IdT>(c, mode); });
    expect_contains(msg, {"segops::Segments", "'idx'",
                          "position " + std::to_string(pos) + " is " + std::to_string(value)});
  }
}

TEST(Errors, CheckedIdTooLarge) {
  std::vector<i64> ids(50);
  for (i64 i = 0; i < 50; ++i) ids[i] = i % 10;
  ids[17] = 42;
  ids[30] = 10;  // a later bad id must not be the one reported
  check_bad_id<std::int32_t>(ids, 10, 17, 42);
  check_bad_id<std::int64_t>(ids, 10, 17, 42);
}

TEST(Errors, CheckedIdNegative) {
  std::vector<i64> ids = ids_from_counts({4, 4, 4, 4});
  ids[5] = -3;
  ids[12] = -1;
  check_bad_id<std::int32_t>(ids, 4, 5, -3);
  check_bad_id<std::int64_t>(ids, 4, 5, -3);
}

TEST(Errors, CheckedIdEqualToM) { check_bad_id<std::int64_t>({0, 1, 2, 3, 3}, 3, 3, 3); }

TEST(Errors, CheckedIdsWithNoSegments) { check_bad_id<std::int32_t>({0, 0, 0, 0}, 0, 0, 0); }

/// The first bad position wins even when bad ids are spread over a parallel reduction.
TEST(Errors, CheckedIdFirstBadPositionOnLargeInput) {
  std::vector<i64> ids(200000);
  for (i64 i = 0; i < 200000; ++i) ids[i] = i / 1000;
  ids[199999] = -7;
  ids[150001] = 900;
  ids[150500] = 901;
  check_bad_id<std::int32_t>(ids, 200, 150001, 900);
}

/// In a strided ids view the reported position is the view index, not the memory offset.
TEST(Errors, CheckedIdInStridedView) {
  auto big = uninit<Kokkos::View<std::int32_t**, Kokkos::LayoutRight, Mem>>("big", 20, 3);
  auto h = Kokkos::create_mirror_view(big);
  for (i64 i = 0; i < 20; ++i) {
    h(i, 0) = 99;  // out of range, but not part of the view
    h(i, 1) = static_cast<std::int32_t>(i % 4);
    h(i, 2) = 99;
  }
  h(8, 1) = 4;
  Kokkos::deep_copy(big, h);
  const auto msg = error_of(
      [&] { segops::Segments<std::int32_t, Exec> seg(Kokkos::subview(big, Kokkos::ALL, 1), 4); });
  expect_contains(msg, {"position 8 is 4"});
}

TEST(Errors, NegativeM) {
  for (const Case& c : {Case{"N0", {}, -1}, Case{"N3", {0, 0, 0}, -1}}) {
    const auto msg = error_of([&] { make_segments<std::int64_t>(c, Mode::Sorted); });
    expect_contains(msg, {"segops::Segments", "'M'", "-1"}, c.name);
    const auto msg_trusted = error_of([&] { make_segments<std::int32_t>(c, Mode::Sorted, true); });
    expect_contains(msg_trusted, {"segops::Segments", "'M'", "-1"}, c.name + " trusted");
  }
}

/// A segment count no allocation could hold is rejected up front, before any allocation.
TEST(Errors, HugeM) {
  const Case c{"huge", {0, 1, 2}, i64(1) << 50};
  const auto msg = error_of([&] { make_segments<std::int64_t>(c, Mode::Sorted); });
  expect_contains(msg, {"segops::Segments", "'M'", std::to_string(i64(1) << 50)});
}

// ---- extents and widths ----

/// Calls `op` with the given shapes: it must throw naming the op, `arg`, and "expected E, got A",
/// and leave its output (poisoned) and its input unchanged.
template <int RIn, int ROut, class Seg>
void expect_shape_error(const LinOpInfo& op, const Seg& seg, i64 ri, i64 wi, i64 ro, i64 wo,
                        const char* arg, i64 expected, i64 actual) {
  std::mt19937_64 rng(ri * 131 + wi * 17 + ro * 7 + wo);
  const auto in_h = random_vector<double>(rng, ri * wi);
  const auto in = device_view<double, RIn>(in_h, ri, wi);
  const auto out = poisoned_view<double, ROut>(ro, wo);
  const std::string what =
      std::string(op.name) + " rank " + std::to_string(RIn) + "->" + std::to_string(ROut);
  const auto msg = error_of([&] { run_linear(Exec(), op.op, seg, in, out); });
  expect_contains(msg,
                  {std::string("segops::") + op.name + ":", std::string("'") + arg + "'",
                   "expected " + std::to_string(expected), "got " + std::to_string(actual)},
                  what);
  expect_all_equal(to_host(out), kPoison, what + ": output modified");
  EXPECT_EQ(to_host(in), as_double(in_h)) << what << ": input modified";
}

/// Element-side view with N + 1 rows (the input of a reduction, the output of a gather).
TEST(Errors, WrongElementCount) {
  const auto c = small_case();
  const auto seg = make_segments<std::int32_t>(c, Mode::Sorted);
  const i64 n = c.n(), m = c.m, d = 3;
  for (const auto& op : kLinearOps)
    for (int rank : {1, 2}) {
      if (op.component && rank == 1) continue;
      const i64 dd = rank == 1 ? 1 : d;
      with_ranks(op, rank, [&](auto ri, auto ro) {
        if (op.reduces)
          expect_shape_error<decltype(ri)::value, decltype(ro)::value>(
              op, seg, n + 1, op.in_width(dd), m, op.out_width(dd), op.in_arg, n, n + 1);
        else
          expect_shape_error<decltype(ri)::value, decltype(ro)::value>(
              op, seg, m, op.in_width(dd), n + 1, op.out_width(dd), op.out_arg, n, n + 1);
      });
    }
}

/// Segment-side view with M + 2 rows (the output of a reduction, the input of a gather).
TEST(Errors, WrongSegmentCount) {
  const auto c = small_case();
  const auto seg = make_segments<std::int64_t>(c, Mode::Deterministic);
  const i64 n = c.n(), m = c.m, d = 3;
  for (const auto& op : kLinearOps)
    for (int rank : {1, 2}) {
      if (op.component && rank == 1) continue;
      const i64 dd = rank == 1 ? 1 : d;
      with_ranks(op, rank, [&](auto ri, auto ro) {
        if (op.reduces)
          expect_shape_error<decltype(ri)::value, decltype(ro)::value>(
              op, seg, n, op.in_width(dd), m + 2, op.out_width(dd), op.out_arg, m, m + 2);
        else
          expect_shape_error<decltype(ri)::value, decltype(ro)::value>(
              op, seg, m + 2, op.in_width(dd), n, op.out_width(dd), op.in_arg, m, m + 2);
      });
    }
}

/// Rank-2 output whose width differs from the input's: D + 1 columns instead of D.
TEST(Errors, WrongWidth) {
  const auto c = small_case();
  const auto seg = make_segments<std::int32_t>(c, Mode::Unsorted);
  const i64 d = 3;
  for (const auto& op : kLinearOps) {
    if (op.component) continue;  // one side is rank 1: no width to mismatch
    expect_shape_error<2, 2>(op, seg, op.in_rows(c), d, op.out_rows(c), d + 1, op.out_arg, d,
                             d + 1);
    expect_shape_error<2, 2>(op, seg, op.in_rows(c), 7, op.out_rows(c), 1, op.out_arg, 7, 1);
  }
}

TEST(Errors, CountWrongSegmentCount) {
  const auto c = small_case();
  const auto seg = make_segments<std::int32_t>(c, Mode::Sorted);
  const auto out = poisoned_view<std::int64_t, 1>(c.m + 1, 1);
  const auto msg = error_of([&] { segops::segmented_count(Exec(), seg, out); });
  expect_contains(msg, {"segops::segmented_count:", "'out'", "expected 5", "got 6"});
  expect_all_equal(to_host(out), kPoison, "segmented_count output modified");
}

// ---- aliasing ----

template <int R>
auto unmanaged_view(double* p, i64 rows, i64 width) {
  using U = Kokkos::MemoryTraits<Kokkos::Unmanaged>;
  if constexpr (R == 1)
    return Kokkos::View<double*, Mem, U>(p, rows);
  else
    return Kokkos::View<double**, Mem, U>(p, rows, width);
}

/// Input and output are views into one allocation whose memory overlaps (output shifted by
/// `shift` elements); nothing in the allocation may change.
template <int RIn, int ROut, class Seg>
void expect_alias_error(const LinOpInfo& op, const Seg& seg, const Case& c, i64 d, i64 shift) {
  std::mt19937_64 rng(shift);
  const i64 in_size = op.in_rows(c) * op.in_width(d), out_size = op.out_rows(c) * op.out_width(d);
  const auto buf_h = random_vector<double>(rng, std::max(in_size, out_size) + shift);
  const auto buf = device_vector(buf_h);
  const auto in = unmanaged_view<RIn>(buf.data(), op.in_rows(c), op.in_width(d));
  const auto out = unmanaged_view<ROut>(buf.data() + shift, op.out_rows(c), op.out_width(d));
  const std::string what = std::string(op.name) + " shift " + std::to_string(shift);
  const auto msg = error_of([&] { run_linear(Exec(), op.op, seg, in, out); });
  expect_contains(msg,
                  {std::string("segops::") + op.name + ":",
                   std::string("output '") + op.out_arg + "' aliases input '" + op.in_arg + "'"},
                  what);
  EXPECT_EQ(to_host(buf), buf_h) << what << ": memory modified";
}

TEST(Errors, OutputOverlapsInput) {
  const auto c = small_case();
  const auto seg = make_segments<std::int32_t>(c, Mode::Sorted);
  for (const auto& op : kLinearOps)
    for (int rank : {1, 2}) {
      if (op.component && rank == 1) continue;
      const i64 d = rank == 1 ? 1 : 3;
      for (i64 shift : {0, 1, 4})
        with_ranks(op, rank, [&](auto ri, auto ro) {
          expect_alias_error<decltype(ri)::value, decltype(ro)::value>(op, seg, c, d, shift);
        });
    }
}

/// The same view passed as input and output (possible when N == M).
TEST(Errors, OutputIsInput) {
  const Case c{"N=M", {0, 1, 2, 3}, 4};
  const auto seg = make_segments<std::int64_t>(c, Mode::Sorted);
  const std::vector<double> h = {1, 2, 3, 4};
  const auto v = device_vector(h);
  for (const auto& op : kLinearOps) {
    if (op.component) continue;
    const auto msg = error_of([&] { run_linear(Exec(), op.op, seg, v, v); });
    expect_contains(msg, {std::string("segops::") + op.name + ":", "aliases"}, op.name);
    EXPECT_EQ(to_host(v), h) << op.name;
  }
}

/// Managed subviews of one allocation: x = buf(0:N), out = buf(N-2 : N-2+M) overlap by two.
TEST(Errors, OutputSubviewOfInputAllocation) {
  const auto c = small_case();
  const auto seg = make_segments<std::int32_t>(c, Mode::Unsorted);
  std::mt19937_64 rng(5);
  const auto buf_h = random_vector<double>(rng, c.n() + c.m);
  const auto buf = device_vector(buf_h);
  const auto x = Kokkos::subview(buf, Kokkos::pair<i64, i64>(0, c.n()));
  const auto out = Kokkos::subview(buf, Kokkos::pair<i64, i64>(c.n() - 2, c.n() - 2 + c.m));
  const auto msg = error_of([&] { segops::segmented_sum(Exec(), seg, x, out); });
  expect_contains(msg, {"segops::segmented_sum:", "output 'out' aliases input 'x'"});
  EXPECT_EQ(to_host(buf), buf_h);
  // Adjacent, non-overlapping subviews of the same allocation are fine.
  const auto out_ok = Kokkos::subview(buf, Kokkos::pair<i64, i64>(c.n(), c.n() + c.m));
  segops::segmented_sum(Exec(), seg, x, out_ok);
  const auto ref = ref_sum(c, std::vector<double>(buf_h.begin(), buf_h.begin() + c.n()), 1);
  expect_close(to_host(out_ok), ref, std::vector<double>(c.m, 10.0), 1e-12, "adjacent subviews");
}

}  // namespace
}  // namespace segtest
