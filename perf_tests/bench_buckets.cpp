// SPDX-License-Identifier: Apache-2.0
// Which schedule of a sum over unsorted ids pays on this machine (host backends): the per-thread
// copies against the bucketed schedule (SegmentsOptions::buckets never / always), and with the
// deterministic option the tiles over the permutation against the buckets. The automatic choice
// rests on the caches of the machine SegOps was tuned on (docs/determinism.md, whose table for a
// smaller L3 this prints). Each result is checked against a double-precision reference first.
//   bench_buckets [--n N] [--d D] [--runs R] L [L ...]    (L: average segment length)
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <segops/segops.hpp>
#include <vector>

#include "bench_data.hpp"

namespace {

using Exec = Kokkos::DefaultHostExecutionSpace;
using i64 = std::int64_t;
using Rows = Kokkos::View<float**, Kokkos::LayoutRight, Kokkos::HostSpace>;
namespace sb = segops_bench;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Whether out is the sum of x's rows over ids, within float rounding of the terms' magnitudes.
bool matches(const Kokkos::View<int*, Kokkos::HostSpace>& ids, const Rows& x, const Rows& out) {
  const i64 n = x.extent(0), m = out.extent(0), d = x.extent(1);
  std::vector<double> ref(m * d, 0.0), mag(m * d, 0.0);
  for (i64 i = 0; i < n; ++i)
    for (i64 k = 0; k < d; ++k) {
      ref[ids(i) * d + k] += x(i, k);
      mag[ids(i) * d + k] += std::abs(x(i, k));
    }
  for (i64 s = 0; s < m; ++s)
    for (i64 k = 0; k < d; ++k)
      if (!(std::abs(out(s, k) - ref[s * d + k]) <= 2e-3 * mag[s * d + k])) return false;
  return true;
}

/// One line: medians of `runs` interleaved calls of the four schedules on the same data.
bool measure(i64 n, i64 d, i64 len, int runs) {
  const i64 m = std::max<i64>(1, n / len);
  Kokkos::View<int*, Kokkos::HostSpace> ids("bench_buckets::ids", n);
  Rows x("bench_buckets::x", n, d), out("bench_buckets::out", m, d);
  for (i64 i = 0; i < n; ++i) {
    ids(i) = static_cast<int>(sb::splitmix64(static_cast<std::uint64_t>(i)) % std::uint64_t(m));
    for (i64 k = 0; k < d; ++k) x(i, k) = static_cast<float>(sb::value(i * d + k, 1));
  }
  using B = segops::Buckets;
  const segops::Segments<int> segs[4] = {{ids, m, {.buckets = B::never}},
                                         {ids, m, {.buckets = B::always}},
                                         {ids, m, {.deterministic = true, .buckets = B::never}},
                                         {ids, m, {.deterministic = true, .buckets = B::always}}};
  const char* names[4] = {"copies", "buckets", "det. tiles", "det. buckets"};
  for (int k = 0; k < 4; ++k) {
    Kokkos::deep_copy(out, std::nanf(""));
    segops::segmented_sum(segs[k], x, out);
    Kokkos::fence();
    if (!matches(ids, x, out)) {
      std::fprintf(stderr, "bench_buckets: wrong sum (%s, N=%lld D=%lld L=%lld)\n", names[k],
                   (long long)n, (long long)d, (long long)len);
      return false;
    }
  }
  std::vector<double> t[4];
  for (int r = 0; r < runs; ++r)
    for (int k = 0; k < 4; ++k) {
      const auto t0 = std::chrono::steady_clock::now();
      segops::segmented_sum(segs[k], x, out);
      Kokkos::fence();
      t[k].push_back(seconds_since(t0));
    }
  std::printf("%10lld %3lld %6lld %9.2f", (long long)n, (long long)d, (long long)len,
              double(m * d * sizeof(float)) * 1e-6);
  for (auto& v : t) {
    std::sort(v.begin(), v.end());
    std::printf(" %13.3f", v[v.size() / 2] * 1e3);
  }
  std::printf("\n");
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  i64 n = 1000000, d = 3;
  int runs = 60;
  std::vector<i64> lengths;
  for (int a = 1; a < argc; ++a) {
    auto value = [&] { return a + 1 < argc ? std::atoll(argv[++a]) : 0; };
    if (!std::strcmp(argv[a], "--n"))
      n = value();
    else if (!std::strcmp(argv[a], "--d"))
      d = value();
    else if (!std::strcmp(argv[a], "--runs"))
      runs = static_cast<int>(value());
    else if (std::atoll(argv[a]) > 0)
      lengths.push_back(std::atoll(argv[a]));
    else {
      std::fprintf(stderr, "usage: bench_buckets [--n N] [--d D] [--runs R] L [L ...]\n");
      return 2;
    }
  }
  if (n < 1 || d < 1 || runs < 1) {
    std::fprintf(stderr, "bench_buckets: --n, --d and --runs take positive numbers\n");
    return 2;
  }
  if (lengths.empty()) lengths = {2, 3, 5, 10, 30};
  std::printf("segmented_sum over unsorted ids, %d threads, median of %d interleaved calls (ms)\n",
              Exec().concurrency(), runs);
  std::printf("%10s %3s %6s %9s %13s %13s %13s %13s\n", "N", "D", "L", "out MB", "copies",
              "buckets", "det. tiles", "det. buckets");
  for (const i64 len : lengths)
    if (!measure(n, d, len, runs)) return 1;
  return 0;
}
