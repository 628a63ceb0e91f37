// SPDX-License-Identifier: Apache-2.0
// scripts/ab.sh's program: for each chosen op, checks that the baseline and the working tree give
// the same bits, then times them alternately, call by call, on the same data, and prints the
// medians and the quartiles of the per-pair ratios (working tree / baseline). On a shared VM whose
// speed drifts within seconds, pairs see the same drift; separate runs of the suite do not.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ab_common.hpp"

namespace {

using namespace ab;

std::uint64_t splitmix64(std::uint64_t z) {
  z += 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
template <class V>
void fill(const V& v, std::uint64_t seed) {  // uniform in [-1, 1)
  T* p = v.data();
  for (std::size_t i = 0; i < v.span(); ++i)
    p[i] = T(double(splitmix64(i + seed * 0x100000000ull) >> 11) * 0x1.0p-53 * 2 - 1);
}

struct Options {
  std::int64_t n = 1000000, l = 3, d = 3;
  bool sorted = true;
  int pairs = 200;
  std::vector<int> ops;
};

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "ab_compare [--n N] [--l L] [--d D] [--unsorted] [--pairs P] [--ops a,b,...]\n"
               "  N elements (default 1e6), M = N / L segments (L = 3), rows of D (3); ids\n"
               "  splitmix64(i) %% M, sorted unless --unsorted; P pairs of calls per op (200).\n"
               "  ops (default all):");
  for (const char* o : kOps) std::fprintf(stderr, " %s", o);
  std::fprintf(stderr, "\n");
  std::exit(2);
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) usage();
      return argv[++i];
    };
    if (a == "--n")
      o.n = std::int64_t(std::stod(next()));
    else if (a == "--l")
      o.l = std::stoll(next());
    else if (a == "--d")
      o.d = std::stoll(next());
    else if (a == "--unsorted")
      o.sorted = false;
    else if (a == "--pairs")
      o.pairs = std::stoi(next());
    else if (a == "--ops") {
      std::string list = next() + ",";
      for (std::size_t b = 0, e; (e = list.find(',', b)) != std::string::npos; b = e + 1) {
        const std::string name = list.substr(b, e - b);
        const auto* it = std::find_if(std::begin(kOps), std::end(kOps),
                                      [&](const char* k) { return name == k; });
        if (it == std::end(kOps)) {
          std::fprintf(stderr, "ab_compare: unknown op '%s'\n", name.c_str());
          usage();
        }
        o.ops.push_back(int(it - std::begin(kOps)));
      }
    } else if (a.rfind("--kokkos", 0) != 0)
      usage();
  }
  if (o.n < 1 || o.l < 1 || o.d < 1 || o.pairs < 4 || o.n / o.l < 1) usage();
  if (o.ops.empty())
    for (int k = 0; k < kNumOps; ++k) o.ops.push_back(k);
  return o;
}

Data make_data(const Options& o) {
  Data d;
  d.n = o.n;
  d.m = o.n / o.l;
  d.d = o.d;
  std::vector<std::int32_t> ids(d.n);
  for (std::int64_t i = 0; i < d.n; ++i) ids[i] = std::int32_t(splitmix64(i) % std::uint64_t(d.m));
  if (o.sorted) std::sort(ids.begin(), ids.end());
  d.ids = Kokkos::View<std::int32_t*, Host>("ids", d.n);
  std::copy(ids.begin(), ids.end(), d.ids.data());
  std::uint64_t seed = 1;
  for (Rows* r : {&d.x, &d.y, &d.g, &d.u, &d.v}) fill(*r = Rows("in", d.n, d.d), seed++);
  fill(d.gs = Rows("gs", d.m, d.d), seed++);
  for (Vals* v : {&d.a, &d.b, &d.c, &d.wa, &d.wb}) fill(*v = Vals("in", d.m), seed++);
  d.r = Vals("r", d.m);
  for (std::int64_t s = 0; s < d.m; ++s) d.r(s) = T(0.5) + std::abs(d.a(s));
  for (Rows* r : {&d.o1, &d.o2, &d.o3}) *r = Rows("out", d.n, d.d);
  d.os = Rows("os", d.m, d.d);
  for (Vals* v : {&d.p1, &d.p2, &d.p3}) *v = Vals("out", d.m);
  d.arg = decltype(d.arg)("arg", d.m, d.d);  // the first element of each segment's max, or -1
  Kokkos::deep_copy(d.arg, -1);
  for (std::int64_t i = 0; i < d.n; ++i)
    for (std::int64_t k = 0; k < d.d; ++k) {
      std::int64_t& a = d.arg(ids[i], k);
      if (a < 0 || d.x(i, k) > d.x(a, k)) a = i;
    }
  d.argn = decltype(d.argn)("argn", d.m);  // the first element of each segment's largest norm
  Kokkos::deep_copy(d.argn, -1);
  std::vector<T> norm2(d.n, T(0));
  for (std::int64_t i = 0; i < d.n; ++i) {
    for (std::int64_t k = 0; k < d.d; ++k) norm2[i] += d.x(i, k) * d.x(i, k);
    std::int64_t& a = d.argn(ids[i]);
    if (a < 0 || norm2[i] > norm2[a]) a = i;
  }
  return d;
}

/// Every output's bytes, after zeroing them and running op k on one side.
std::vector<char> outputs_of(void (*run)(int, Data&), int k, Data& d) {
  std::vector<Kokkos::View<T*, Kokkos::LayoutRight, Host, Kokkos::MemoryUnmanaged>> outs;
  for (Rows* r : {&d.o1, &d.o2, &d.o3, &d.os}) outs.emplace_back(r->data(), r->span());
  for (Vals* v : {&d.p1, &d.p2, &d.p3}) outs.emplace_back(v->data(), v->span());
  for (auto& o : outs) Kokkos::deep_copy(o, T(0));
  run(k, d);
  std::vector<char> bytes;
  for (auto& o : outs) {
    const char* p = reinterpret_cast<const char*>(o.data());
    bytes.insert(bytes.end(), p, p + o.span() * sizeof(T));
  }
  return bytes;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  return v[std::size_t(q * double(v.size() - 1) + 0.5)];
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  const Options o = parse(argc, argv);
  Data d = make_data(o);
  std::printf("%s, N = %lld, L = %lld, D = %lld, %s ids, %d threads, %d pairs per op\n",
              sizeof(T) == 4 ? "float" : "double", (long long)o.n, (long long)o.l, (long long)o.d,
              o.sorted ? "sorted" : "unsorted", Host().concurrency(), o.pairs);
  std::printf("%-31s %5s %11s %11s %8s %8s %8s\n", "op", "bits", "base ms", "work ms", "ratio q1",
              "median", "q3");
  int differ = 0;
  for (const int k : o.ops) {
    const bool same = outputs_of(run_base, k, d) == outputs_of(run_work, k, d);
    differ += !same;
    for (int w = 0; w < 3; ++w) {  // warm-up
      run_base(k, d);
      run_work(k, d);
    }
    std::vector<double> t[2], ratio;
    for (int p = 0; p < o.pairs; ++p) {
      double ms[2];
      for (int q = 0; q < 2; ++q) {
        const int side = (p + q) % 2;  // which goes first alternates pair by pair
        const auto a = std::chrono::steady_clock::now();
        side ? run_work(k, d) : run_base(k, d);
        ms[side] =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - a).count();
        t[side].push_back(ms[side]);
      }
      ratio.push_back(ms[1] / ms[0]);
    }
    std::printf("%-31s %5s %11.3f %11.3f %8.3f %8.3f %8.3f\n", kOps[k], same ? "same" : "DIFF",
                quantile(t[0], 0.5), quantile(t[1], 0.5), quantile(ratio, 0.25),
                quantile(ratio, 0.5), quantile(ratio, 0.75));
    std::fflush(stdout);
  }
  run_base(-1, d);
  run_work(-1, d);
  if (differ) std::printf("%d op(s) gave different bits (DIFF)\n", differ);
  return differ ? 1 : 0;
}
