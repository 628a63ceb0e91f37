// SPDX-License-Identifier: Apache-2.0
// Device benchmark (the H200 run of perf_tests/run_h200.sh; runs on any Kokkos backend, so it is
// dry-run against OpenMP here): SegOps forward/backward at sorted float ids over the L regimes,
// eager and Kokkos-Graph replay, against a device-to-device copy (the ceiling) and, on CUDA, CUB's
// DeviceSegmentedReduce::Sum on the same offsets. Results are checked against a double-precision
// host reference before anything is timed. CSV columns as the CPU suite.
//   bench_device [--n N,N,...] [--reps R] [--csv FILE]
#include <Kokkos_Core.hpp>
#include <segops/segops.hpp>

#if defined(KOKKOS_ENABLE_CUDA)
#include <cub/device/device_segmented_reduce.cuh>
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "bench_data.hpp"

namespace {

using Exec = Kokkos::DefaultExecutionSpace;
using Mem = Exec::memory_space;
using i64 = std::int64_t;
namespace sb = segops_bench;

struct Row {
  std::string op, order;
  i64 n, m, d;
  std::string impl;
  double seconds, bytes;
};
std::vector<Row> g_rows;
double g_copy_gbps = 0;
FILE* g_csv = nullptr;

/// Median seconds per call of f (fenced), after a warm-up, over max(reps, enough for 20 ms).
double time_median(const std::function<void()>& f, int reps) {
  Exec exec;
  f();
  exec.fence();
  std::vector<double> t;
  Kokkos::Timer total;
  for (int r = 0; r < reps || (total.seconds() < 0.02 && r < 10 * reps); ++r) {
    Kokkos::Timer timer;
    f();
    exec.fence();
    t.push_back(timer.seconds());
  }
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

void record(const std::string& op, const std::string& order, i64 n, i64 m, i64 d,
            const std::string& impl, double s, double bytes) {
  const double gbps = bytes / s / 1e9;
  std::fprintf(g_csv, "%s,%s,float,int32,%lld,%lld,%lld,sorted,%s,%.9g,%.0f,%.4f,%.4f\n",
               op.c_str(), order.c_str(), (long long)n, (long long)m, (long long)d, impl.c_str(), s,
               bytes, gbps, gbps / g_copy_gbps);
  std::fflush(g_csv);
  g_rows.push_back({op, order, n, m, d, impl, s, bytes});
}

template <class V>
auto host(const V& v) {
  return Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), v);
}

bool check(const char* what, double got, double ref, double scale) {
  if (std::abs(got - ref) <= 1e-3 * (1 + scale)) return true;
  std::printf("WRONG %s: got %g expected %g\n", what, got, ref);
  return false;
}

/// One (N, L, D) case: every op and order, eager and graph.
bool run_case(i64 n, i64 len, i64 d, int reps) {
  const i64 m = sb::num_segments(n, len, sb::Regime::uniform);
  auto idh = sb::make_ids<int>(n, m, sb::Regime::uniform, true);
  Kokkos::View<int*, Mem> ids("ids", n);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> x("x", n, d), y("y", n, d), gx("gx", n, d),
      gy("gy", n, d), o("o", n, d);
  Kokkos::View<float**, Kokkos::LayoutRight, Mem> out("out", m, d), gseg("gseg", m, d);
  Kokkos::View<float*, Mem> sc("sc", m), ga("ga", m);
  {
    Kokkos::View<int*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> hv(idh.data(),
                                                                                      n);
    Kokkos::deep_copy(ids, hv);
    auto xh = Kokkos::create_mirror_view(x);
    auto yh = Kokkos::create_mirror_view(y);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < d; ++k) {
        xh(i, k) = static_cast<float>(sb::value(i * d + k, 1));
        yh(i, k) = static_cast<float>(sb::value(i * d + k, 2));
      }
    Kokkos::deep_copy(x, xh);
    Kokkos::deep_copy(y, yh);
    Kokkos::deep_copy(gseg, 0.5f);
    Kokkos::deep_copy(sc, 1.5f);
  }
  segops::Segments seg(ids, m);
  Exec exec;
  // correctness first: sum and dot against the host reference
  segops::segmented_sum(exec, seg, x, out);
  segops::segmented_dot(exec, seg, x, y, ga);
  {
    auto xh = host(x), yh = host(y), oh = host(out);
    auto gh = host(ga);
    std::vector<double> rs(m * d, 0.0), rmag(m * d, 0.0), rd(m, 0.0), rdm(m, 0.0);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < d; ++k) {
        rs[idh[i] * d + k] += xh(i, k);
        rmag[idh[i] * d + k] += std::abs(xh(i, k));
        rd[idh[i]] += double(xh(i, k)) * yh(i, k);
        rdm[idh[i]] += std::abs(double(xh(i, k)) * yh(i, k));
      }
    bool ok = true;
    for (i64 s = 0; s < m && ok; ++s) {
      for (i64 k = 0; k < d && ok; ++k) ok = check("sum", oh(s, k), rs[s * d + k], rmag[s * d + k]);
      ok = ok && check("dot", gh(s), rd[s], rdm[s]);
    }
    if (!ok) return false;
  }
  const double N = double(n), M = double(m), D = double(d), idb = 4.0 * N;
  struct Op {
    const char *name, *order;
    double bytes;
    std::function<void(const Exec&)> call;
  };
  std::vector<Op> ops = {
      {"sum", "fwd", idb + 4 * N * D + 4 * M * D,
       [=](const Exec& e) { segops::segmented_sum(e, seg, x, out); }},
      {"sum", "bwd", idb + 4 * N * D + 4 * M * D,
       [=](const Exec& e) { segops::segmented_sum_backward(e, seg, gseg, gx); }},
      {"mean", "fwd", idb + 4 * N * D + 4 * M * D,
       [=](const Exec& e) { segops::segmented_mean(e, seg, x, out); }},
      {"mean", "bwd", idb + 4 * N * D + 12 * M * D,
       [=](const Exec& e) { segops::segmented_mean_backward(e, seg, gseg, gx); }},
      {"broadcast", "fwd", idb + 4 * N * D + 4 * M * D,
       [=](const Exec& e) { segops::segmented_broadcast(e, seg, gseg, o); }},
      {"broadcast", "bwd", idb + 4 * N * D + 4 * M * D,
       [=](const Exec& e) { segops::segmented_broadcast_backward(e, seg, x, out); }},
      {"dot", "fwd", idb + 8 * N * D + 4 * M,
       [=](const Exec& e) { segops::segmented_dot(e, seg, x, y, ga); }},
      {"dot", "bwd", idb + 16 * N * D + 4 * M,
       [=](const Exec& e) { segops::segmented_dot_backward(e, seg, x, y, sc, gx, gy); }},
      {"mul", "fwd", idb + 8 * N * D + 4 * M,
       [=](const Exec& e) { segops::segmented_mul(e, seg, sc, x, o); }},
      {"mul", "bwd", idb + 12 * N * D + 8 * M,
       [=](const Exec& e) { segops::segmented_mul_backward(e, seg, sc, x, y, gx, ga); }},
  };
  for (const auto& op : ops) {
    const double eager = time_median([&] { op.call(exec); }, reps);
    record(op.name, op.order, n, m, d, "segops_eager", eager, op.bytes);
    auto graph = Kokkos::Experimental::create_graph(
        exec, [&](const auto& root) { segops::then_ops(root, exec, op.call); });
    const double replay = time_median([&] { graph.submit(exec); }, reps);
    record(op.name, op.order, n, m, d, "segops_graph", replay, op.bytes);
  }
#if defined(KOKKOS_ENABLE_CUDA)
  if (d == 1) {  // CUB on the descriptor's own offsets
    auto offs = seg.offsets();
    Kokkos::View<float*, Mem> xs(x.data(), n), os(out.data(), m);
    std::size_t bytes = 0;
    cub::DeviceSegmentedReduce::Sum(nullptr, bytes, xs.data(), os.data(), m, offs.data(),
                                    offs.data() + 1, exec.cuda_stream());
    Kokkos::View<char*, Mem> tmp("cub_tmp", bytes + 1);
    auto f = [&] {
      cub::DeviceSegmentedReduce::Sum(tmp.data(), bytes, xs.data(), os.data(), m, offs.data(),
                                      offs.data() + 1, exec.cuda_stream());
    };
    record("sum", "fwd", n, m, d, "cub_segmented_reduce", time_median(f, reps),
           4 * N + 8 * M + 4 * M);
  }
#endif
  return true;
}

}  // namespace

int main(int argc, char* argv[]) {
  Kokkos::ScopeGuard guard(argc, argv);
  std::vector<i64> ns = {10000, 1 << 20};
  int reps = 20;
  std::string csv = "bench_device.csv";
  for (int a = 1; a < argc; ++a) {
    std::string s = argv[a];
    if (s == "--n" && a + 1 < argc) {
      ns.clear();
      std::string list = argv[++a];
      for (size_t p = 0; p < list.size();) {
        size_t q = list.find(',', p);
        ns.push_back(std::atoll(list.substr(p, q - p).c_str()));
        p = q == std::string::npos ? list.size() : q + 1;
      }
    } else if (s == "--reps" && a + 1 < argc) {
      reps = std::atoi(argv[++a]);
    } else if (s == "--csv" && a + 1 < argc) {
      csv = argv[++a];
    }
  }
  g_csv = std::fopen(csv.c_str(), "w");
  std::fprintf(g_csv,
               "op,order,dtype,index_type,N,M,D,sorted,impl,median_s,bytes,gbps,copy_fraction\n");
  {  // the ceiling: a large device-to-device copy, bytes read + written
    const i64 big = std::max<i64>(*std::max_element(ns.begin(), ns.end()), 1 << 26);
    Kokkos::View<float*, Mem> a("a", big), b("b", big);
    Kokkos::deep_copy(a, 1.0f);
    const double t = time_median([&] { Kokkos::deep_copy(Exec(), b, a); }, reps);
    g_copy_gbps = 8.0 * big / t / 1e9;
    std::printf("device copy bandwidth: %.1f GB/s (%s, %lld floats)\n", g_copy_gbps, Exec::name(),
                (long long)big);
  }
  bool ok = true;
  for (i64 n : ns)
    for (i64 len : {i64(1), i64(3), i64(30), i64(1000), n})
      for (i64 d : {1, 3}) {
        std::printf("case N=%lld L=%lld D=%lld\n", (long long)n, (long long)len, (long long)d);
        std::fflush(stdout);
        ok = run_case(n, len, d, reps) && ok;
      }
  std::fclose(g_csv);
  // Short table: per op/order/D, the worst and best L at the largest N (% of copy), and eager vs
  // graph replay per call at the smallest N, L = 3.
  std::printf("\n%-10s %-4s %3s %12s %12s %10s %10s\n", "op", "ord", "D", "min %copy", "max %copy",
              "eager us", "graph us");
  const i64 nmax = *std::max_element(ns.begin(), ns.end()),
            nmin = *std::min_element(ns.begin(), ns.end());
  for (const auto& r0 : g_rows) {
    if (r0.impl != "segops_eager" || r0.n != nmax || r0.m != 1) continue;  // one row per op/order/D
    double lo = 1e30, hi = 0, eag = 0, gr = 0;
    for (const auto& r : g_rows) {
      if (r.op != r0.op || r.order != r0.order || r.d != r0.d) continue;
      const double f = r.bytes / r.seconds / 1e9 / g_copy_gbps;
      if (r.n == nmax && r.impl == "segops_eager") lo = std::min(lo, f), hi = std::max(hi, f);
      if (r.n == nmin && r.m == sb::num_segments(nmin, 3, sb::Regime::uniform)) {  // L = 3
        if (r.impl == "segops_eager") eag = r.seconds;
        if (r.impl == "segops_graph") gr = r.seconds;
      }
    }
    std::printf("%-10s %-4s %3lld %11.0f%% %11.0f%% %10.1f %10.1f\n", r0.op.c_str(),
                r0.order.c_str(), (long long)r0.d, 100 * lo, 100 * hi, 1e6 * eag, 1e6 * gr);
  }
  std::printf("copy bandwidth %.1f GB/s; results in %s\n", g_copy_gbps, csv.c_str());
  return ok ? 0 : 1;
}
