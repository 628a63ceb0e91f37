// SPDX-License-Identifier: Apache-2.0
// Which schedule of a sum over unsorted ids pays on this machine (host backends): the per-thread
// copies against the bucketed schedule (SegmentsOptions::buckets never / always), and with the
// deterministic option the tiles over the permutation against the buckets. The automatic choice
// rests on the caches of the machine SegOps was tuned on (docs/determinism.md, whose table for a
// smaller L3 this prints). Each result is checked against a double-precision reference first.
//   bench_buckets [--n N] [--d D] [--runs R] L [L ...]    (L: average segment length)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "bench_harness.hpp"

namespace {

using namespace bench;

/// One line: medians of the four schedules on the same data, timed interleaved (as the suite
/// times a case's implementations), each result first checked against the double reference.
bool measure(i64 n, i64 d, i64 len, int runs) {
  const i64 m = sb::num_segments(n, len, sb::Regime::uniform);
  const auto id_v = sb::make_ids<int>(n, m, sb::Regime::uniform, false);
  Kokkos::View<int*, Host> ids("bench_buckets::ids", n);
  std::copy(id_v.begin(), id_v.end(), ids.data());
  Arr<float> x("bench_buckets::x", n, d), out("bench_buckets::out", m, d);
  Ref ref(m * d);
  for (i64 i = 0; i < n; ++i)
    for (i64 k = 0; k < d; ++k) {
      x.p()[i * d + k] = static_cast<float>(sb::value(i * d + k, 1));
      ref.add(ids(i) * d + k, x.p()[i * d + k]);
    }
  using B = segops::Buckets;
  const segops::Segments<int> segs[4] = {{ids, m, {.buckets = B::never}},
                                         {ids, m, {.buckets = B::always}},
                                         {ids, m, {.deterministic = true, .buckets = B::never}},
                                         {ids, m, {.deterministic = true, .buckets = B::always}}};
  const char* names[4] = {"copies", "buckets", "det. tiles", "det. buckets"};
  std::vector<std::pair<std::string, std::function<void()>>> calls;
  for (int k = 0; k < 4; ++k) {
    auto call = [&seg = segs[k], o = out.v(R2{}), xv = x.v(R2{})] {
      segops::segmented_sum(seg, xv, o);
    };
    Kokkos::deep_copy(out.view, std::nanf(""));
    call();
    Kokkos::fence();
    const double err = max_error(out, ref);
    if (!(err <= 2e-3)) {
      std::fprintf(stderr, "bench_buckets: wrong sum (%s, N=%lld D=%lld L=%lld): error %g\n",
                   names[k], (long long)n, (long long)d, (long long)len, err);
      return false;
    }
    calls.emplace_back(names[k], call);
  }
  Options opt;
  opt.min_runs = runs;
  opt.min_time = 0;
  std::printf("%10lld %3lld %6lld %9.2f", (long long)n, (long long)d, (long long)len,
              out.bytes() * 1e-6);
  for (const double t : time_medians_interleaved(calls, opt)) std::printf(" %13.3f", t * 1e3);
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
  // time_medians_interleaved: `runs` samples of each schedule, taken in kRounds rounds
  std::printf("segmented_sum over unsorted ids, %d threads, median of %d interleaved calls (ms)\n",
              Exec().concurrency(), runs);
  std::printf("%10s %3s %6s %9s %13s %13s %13s %13s\n", "N", "D", "L", "out MB", "copies",
              "buckets", "det. tiles", "det. buckets");
  for (const i64 len : lengths)
    if (!measure(n, d, len, runs)) return 1;
  return 0;
}
