// SPDX-License-Identifier: Apache-2.0
// The CPU benchmark's harness, shared by its translation units (bench_segops.cpp: options, sweeps,
// copy bandwidth, overhead and the linear ops; bench_ops_*.cpp: the other op families, compiled in
// parallel): output rows, timing, arrays and double references, the C++ peers, and one case.
#pragma once
#include <Kokkos_Core.hpp>
#include <Kokkos_ScatterView.hpp>
#include <segops/segops.hpp>
// Op families that may not exist yet in this checkout: benchmarked when present, reported missing
// otherwise (each call is also detected with a requires-expression, see SEGOPS_BENCH_CALL).
// -DSEGOPS_BENCH_NO_<FAMILY> leaves a family out (e.g. while its header is being rewritten).
#if __has_include(<segops/bilinear.hpp>) && !defined(SEGOPS_BENCH_NO_BILINEAR)
#include <segops/bilinear.hpp>
#endif
#if __has_include(<segops/matvec.hpp>) && !defined(SEGOPS_BENCH_NO_MATVEC)
#include <segops/matvec.hpp>
#endif
#if __has_include(<segops/norms.hpp>) && !defined(SEGOPS_BENCH_NO_NORMS)
#include <segops/norms.hpp>
#endif

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "bench_data.hpp"

namespace bench {

namespace sb = segops_bench;
using Exec = Kokkos::DefaultExecutionSpace;
using Host = Kokkos::HostSpace;
using i64 = std::int64_t;
static_assert(Kokkos::SpaceAccessibility<Exec, Host>::accessible,
              "bench_segops is a CPU benchmark: build it against a host Kokkos (OpenMP/Serial)");

// ---------------------------------------------------------------- options and output

struct Options {
  bool full = false;
  double min_time = -1;  // seconds of timed calls per measurement; default 0.05 quick, 0.2 full
  int min_runs = 5;
  std::string csv = "bench_cpp.csv";
  std::string notes = "bench_notes.txt";
  std::set<std::string> ops;  // empty: all
  i64 max_n = std::numeric_limits<i64>::max();
  bool overhead = true;
  bool progress = true;
  /// --case: SegOps alone on this one case (the CSV key op,order,dtype,index_type,N,M,D,sorted),
  /// no copy, overhead or peers; peers.py times SegOps so alongside each case's Python peers.
  std::string only_case;
  /// --serve (with --case): the case's calls are sampled when peers.py asks (serve_calls).
  bool serve = false;
};

struct Output {
  FILE* csv = nullptr;
  FILE* notes = nullptr;
  double copy_gbps = 0;
  int done = 0, total = 0;
  int wrong = 0;
};
inline Output g_out;

inline std::set<std::string> g_noted;

inline void note(const std::string& line) {
  std::fprintf(stderr, "  %s\n", line.c_str());
  if (g_out.notes) {
    std::fprintf(g_out.notes, "%s\n", line.c_str());
    std::fflush(g_out.notes);
  }
}

struct Row {
  std::string op, order, dtype, itype, sorted;
  i64 n, m, d;
};

/// copy_gbps: the copy bandwidth the row is compared with (by default the latest measured).
inline void write_row(const Row& r, const std::string& impl, double median, double bytes,
                      double copy_gbps = g_out.copy_gbps) {
  const double gbps = bytes / median / 1e9;
  const double frac = copy_gbps > 0 ? gbps / copy_gbps : 0.0;
  std::fprintf(g_out.csv, "%s,%s,%s,%s,%lld,%lld,%lld,%s,%s,%.6e,%.0f,%.4f,%.4f\n", r.op.c_str(),
               r.order.c_str(), r.dtype.c_str(), r.itype.c_str(), (long long)r.n, (long long)r.m,
               (long long)r.d, r.sorted.c_str(), impl.c_str(), median, bytes, gbps, frac);
  std::fflush(g_out.csv);
}

inline double median(std::vector<double> v) {
  std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
  return v[v.size() / 2];
}

/// Seconds of `batch` calls, each fenced.
template <class F>
double time_calls(F&& call, int batch = 1) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int b = 0; b < batch; ++b) {
    call();
    Kokkos::fence();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

/// Calls per timed batch, after warm-up calls (batches amortise the clock for tiny calls). A call
/// of a millisecond or more runs in batches of one after a single warm-up call, which is its first
/// sample where the caller has just made the same call (`warmed`: the checked call, which paid the
/// first touches): at N = 2^25 each such call costs 0.2-2 s of the quick run's budget. A shorter
/// call makes a second warm-up call, which sizes the batch.
template <class F>
int warm_batch(F&& call, bool warmed, std::vector<double>& samples) {
  const double first = time_calls(call);
  if (first >= 1e-3) {
    if (warmed) samples.push_back(first);
    return 1;
  }
  const double one = time_calls(call);
  return std::clamp(int(20e-6 / std::max(one, 1e-9)), 1, 1000);
}

/// Appends seconds per call of batches of `batch` calls (one fence after every call) to samples
/// until there are at least `runs` of them and their seconds (`total`, updated) reach `seconds`.
template <class F>
void sample_calls(F&& call, int batch, int runs, double seconds, double& total,
                  std::vector<double>& samples) {
  while ((int(samples.size()) < runs || total < seconds) && samples.size() < 100000) {
    const double dt = time_calls(call, batch);
    samples.push_back(dt / batch);
    total += dt;
  }
}

/// Median seconds per call of a call not made before (the copies, the overhead rows): warm_batch,
/// then batches until at least min_runs samples and min_time seconds.
template <class F>
double time_median(F&& call, const Options& opt) {
  std::vector<double> samples;
  const int batch = warm_batch(call, false, samples);
  double total = 0;
  sample_calls(call, batch, opt.min_runs, opt.min_time, total, samples);
  return median(samples);
}

/// One implementation's samples, taken in turns with others': warm_batch first (the call just
/// made once and checked: `warmed`), then sample(runs, seconds) brings them up to those totals.
struct TurnSamples {
  const std::function<void()>& call;
  std::vector<double> samples;
  int batch;
  double total;
  explicit TurnSamples(const std::function<void()>& c)
      : call(c), batch(warm_batch(c, true, samples)), total(samples.empty() ? 0.0 : samples[0]) {}
  /// warm: seconds of untimed calls first (at least one where warm > 0).
  void sample(int runs, double seconds, double warm = 0) {
    for (double t = 0; t < warm;) t += time_calls(call, batch);
    sample_calls(call, batch, runs, seconds, total, samples);
  }
};

/// Rounds of time_medians_interleaved.
inline constexpr int kRounds = 5;

/// Median seconds per call of several implementations of one case, sampled in kRounds rounds
/// that take each in turn (min_runs and min_time shared among the rounds), so that all of them
/// sample the same stretches of this shared VM's drifting speed: timed one after the other, a
/// slow stretch of a second or two could fall on one implementation alone and turn a win into
/// a loss (the max and min backward of the same kernel, unsorted N = 1e6, lost and won against
/// the same OpenMP loop in turn).
/// calls: (implementation name, call) pairs, each just made once and checked (warm_batch's
/// `warmed`); the medians come back in their order.
inline std::vector<double> time_medians_interleaved(
    const std::vector<std::pair<std::string, std::function<void()>>>& calls, const Options& opt) {
  std::vector<TurnSamples> each;
  each.reserve(calls.size());
  for (const auto& c : calls) each.emplace_back(c.second);
  // round r brings each implementation up to (r + 1) / kRounds of min_runs samples and of
  // min_time seconds: as many calls in all as time_median takes
  for (int r = 0; r < kRounds; ++r)
    for (auto& e : each)
      e.sample((opt.min_runs * (r + 1) + kRounds - 1) / kRounds, opt.min_time * (r + 1) / kRounds);
  std::vector<double> medians;
  for (auto& e : each) medians.push_back(median(e.samples));
  return medians;
}

/// --serve: like time_medians_interleaved, but the rounds are peers.py's, which takes this process'
/// calls in turn with its Python peers', so that SegOps and they sample the same stretches of the
/// VM's speed. A line protocol: this writes "segops-serve ready" to stdout once the calls are
/// warm, then answers each line "sample RUNS SECONDS [WARM]" read from stdin by making untimed
/// calls for WARM seconds, then bringing every call up to RUNS samples and SECONDS timed seconds,
/// and writing "segops-serve ok". End of input (or any other line) ends the sampling; the medians
/// come back in the calls' order (of one sample where none was asked for).
inline std::vector<double> serve_calls(
    const std::vector<std::pair<std::string, std::function<void()>>>& calls) {
  if (calls.empty()) return {};  // nothing checked: no "ready", and the process ends
  std::vector<TurnSamples> each;
  each.reserve(calls.size());
  for (const auto& c : calls) each.emplace_back(c.second);
  std::printf("segops-serve ready\n");
  std::fflush(stdout);
  char line[256];
  int runs = 0;
  double seconds = 0, warm = 0;
  while (std::fgets(line, sizeof line, stdin) &&
         std::sscanf(line, "sample %d %lf %lf", &runs, &seconds, &warm) >= 2) {
    for (auto& e : each) e.sample(runs, seconds, warm);
    warm = 0;
    std::printf("segops-serve ok\n");
    std::fflush(stdout);
  }
  std::vector<double> medians;
  for (auto& e : each) {
    e.sample(1, 0.0);  // none asked for: one
    medians.push_back(median(e.samples));
  }
  return medians;
}

/// The STREAM-style copy of 2^25 floats (2 x 128 MiB, far beyond the caches).
struct StreamCopy {
  static constexpr i64 n = i64(1) << 25;
  static constexpr double bytes = 2.0 * n * sizeof(float);
  Kokkos::View<float*, Host> a, b;
  StreamCopy() : a("bench::copy_a", n), b("bench::copy_b", n) {
    const auto x = a;
    Kokkos::parallel_for(
        "bench::copy_init", Kokkos::RangePolicy<Exec>(0, n),
        KOKKOS_LAMBDA(i64 i) { x(i) = float(sb::value(i, 1)); });
    Kokkos::fence();
  }
  void deep() const { Kokkos::deep_copy(Exec(), b, a); }  // the same copy through Kokkos
  void operator()() const {
    const auto x = a, y = b;
    Kokkos::parallel_for(
        "bench::stream_copy", Kokkos::RangePolicy<Exec>(0, n),
        KOKKOS_LAMBDA(i64 i) { y(i) = x(i); });
  }
};

/// The arrays of time_copy_of, kept and grown (freed before Kokkos is finalized).
inline std::pair<Kokkos::View<float*, Host>, Kokkos::View<float*, Host>> g_same_bytes;

/// A copy that moves `bytes` (half read, half written) as floats, in the loop of StreamCopy: what
/// any implementation of an op with these minimal bytes pays at least, at this size and in this
/// cache (an N = 1e6 case's arrays are about the size of the L3).
inline void time_copy_of(const Row& row, double bytes, const Options& opt) {
  auto& [a, b] = g_same_bytes;
  const i64 n = i64(bytes / (2 * sizeof(float)));
  if (a.extent(0) < size_t(n)) {
    a = {};
    b = {};
    a = Kokkos::View<float*, Host>("bench::same_bytes_a", n);
    b = Kokkos::View<float*, Host>("bench::same_bytes_b", n);
  }
  const auto x = a, y = b;
  auto copy = [&] {
    Kokkos::parallel_for(
        "bench::same_bytes_copy", Kokkos::RangePolicy<Exec>(0, n),
        KOKKOS_LAMBDA(i64 i) { y(i) = x(i); });
  };
  write_row(row, "copy_same_bytes", time_median(copy, opt), bytes);
}

/// The copy's arrays (made at the first measurement, freed before Kokkos is finalized), and whether
/// the case being run times it alternately with every SegOps measurement (N = 2^25, sorted).
inline std::optional<StreamCopy> g_copy;
inline bool g_paired = false;

/// The N = 2^25 cases (the copy-bandwidth targets) time the copy too, call by call alternately
/// with the op (ms per call: no batches): median seconds of the op and the copy bandwidth, the
/// faster of the copy loop's and deep_copy's medians. This machine's memory bandwidth drifts within
/// seconds (a shared VM), so a copy measured before the case can differ from the one the op ran
/// under; alternating samples see the same drift. Each timed op call follows an untimed one, so
/// that it does not pay for writing back the cache lines the copies left dirty. These rows decide
/// the copy-bandwidth targets: at least kPairedRuns samples, whatever --min-runs asks.
inline constexpr int kPairedRuns = 5;
template <class F>
std::pair<double, double> time_median_paired(F&& call, const StreamCopy& copy, const Options& opt) {
  auto deep = [&] { copy.deep(); };
  time_calls(call);
  time_calls(copy);
  time_calls(deep);
  std::vector<double> op, c1, c2;
  double total = 0;
  while ((int)op.size() < std::max(opt.min_runs, kPairedRuns) || total < opt.min_time) {
    c1.push_back(time_calls(copy));
    c2.push_back(time_calls(deep));
    time_calls(call);
    op.push_back(time_calls(call));
    total += 2 * op.back() + c1.back() + c2.back();
    if (op.size() >= 100000) break;
  }
  return {median(op), StreamCopy::bytes / std::min(median(c1), median(c2)) / 1e9};
}

// ---------------------------------------------------------------- arrays and references

struct R1 {};
struct R2 {};

/// `count` elements in host memory (uninitialised), followed by one to four unused pages, in turn
/// by allocation. Back-to-back allocations of the same size otherwise lie exactly one page apart
/// beyond a power of two (2^25 floats: 128 MiB and the page of their header), and on the VM this
/// suite was run on (AMD EPYC, 2 vCPUs) streams through arrays so placed ran five times slower for
/// every implementation: a plain OpenMP loop gx = g[id] * y, gy = g[id] * x over 2^25 floats took
/// 130 ms at that spacing and 21-30 ms at one to 255 pages more (a copy of two such arrays was not
/// hit). The cases would measure that placement instead of the op; segops and the C++ peers share
/// these arrays.
template <class T>
Kokkos::View<T*, Host> staggered_alloc(const std::string& label, i64 count) {
  static int k = 0;
  const i64 pad = i64(4096) * (1 + k++ % 4) / i64(sizeof(T));
  Kokkos::View<T*, Host> full(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), count + pad);
  return Kokkos::subview(full, std::pair<i64, i64>(0, count));
}

/// An (n, w) row-major array in host memory, viewed as rank 1 (w == 1), rank 2 or rank 3.
template <class T>
struct Arr {
  Kokkos::View<T*, Host> mem;  // owns the elements (staggered_alloc)
  Kokkos::View<T**, Kokkos::LayoutRight, Host> view;
  i64 n = 0, w = 0;
  Arr() = default;
  Arr(const char* label, i64 n_, i64 w_)
      : mem(staggered_alloc<T>(label, n_ * w_)), view(mem.data(), n_, w_), n(n_), w(w_) {}
  T* p() const { return view.data(); }
  i64 size() const { return n * w; }
  double bytes() const { return double(size()) * sizeof(T); }
  auto v(R1) const {
    return Kokkos::View<T*, Host, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(view.data(), n * w);
  }
  auto v(R2) const {
    return Kokkos::View<T**, Kokkos::LayoutRight, Host, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
        view.data(), n, w);
  }
  auto v3(i64 r, i64 c) const {
    return Kokkos::View<T***, Kokkos::LayoutRight, Host, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
        view.data(), n, r, c);
  }
};

/// An allocator whose value-initialisation leaves doubles unset, so that Ref can zero its arrays in
/// parallel: a serial zeroing of an N = 2^25, D = 3 output (1.6 GB with its page faults) took 0.75
/// s, in parallel 0.5 s.
template <class V>
struct UninitAlloc : std::allocator<V> {
  template <class U>
  struct rebind {
    using other = UninitAlloc<U>;
  };
  UninitAlloc() = default;
  template <class U>
  UninitAlloc(const UninitAlloc<U>&) {}
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    if constexpr (sizeof...(A) == 0)
      ::new (static_cast<void*>(p)) U;
    else
      ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};

/// Sets n values to v in an OpenMP loop (references zeroed, outputs poisoned).
template <class V>
void parallel_fill(V* p, i64 n, V v) {
#pragma omp parallel for schedule(static)
  for (i64 k = 0; k < n; ++k) p[k] = v;
}

/// Reference output in double and, per element, the magnitude its rounding error scales with (the
/// sum of absolute values of the terms): a result passes when |got - val| <= tol * mag.
struct Ref {
  std::vector<double, UninitAlloc<double>> val, mag;
  explicit Ref(i64 size = 0) : val(size), mag(size) {
    parallel_fill(val.data(), size, 0.0);
    parallel_fill(mag.data(), size, 0.0);
  }
  void add(i64 k, double term) {  // entry k += term
    val[k] += term;
    mag[k] += std::abs(term);
  }
};

/// The largest relative error of a (infinity where a result is NaN), in an OpenMP loop.
template <class T>
double max_error(const Arr<T>& a, const Ref& r) {
  double worst = 0;
  const T* p = a.p();
  const double *val = r.val.data(), *mag = r.mag.data();
  const i64 size = a.size();
#pragma omp parallel for schedule(static) reduction(max : worst)
  for (i64 k = 0; k < size; ++k) {
    const double got = double(p[k]);
    // equal values pass, infinities too (the max of an empty segment is -inf)
    const double err = got == val[k] ? 0.0 : std::abs(got - val[k]) / (mag[k] + 1e-300);
    worst = std::max(worst, std::isnan(err) ? std::numeric_limits<double>::infinity() : err);
  }
  return worst;
}

// ---------------------------------------------------------------- C++ peers

enum class Peer { serial, omp_atomic, sv_dup, sv_atomic };
inline const char* peer_name(Peer p, bool reduces) {
  switch (p) {
    case Peer::serial:
      return "serial";
    case Peer::omp_atomic:
      return reduces ? "omp_atomic" : "omp_loop";
    case Peer::sv_dup:
      return "scatterview_dup";
    case Peer::sv_atomic:
      return "scatterview_atomic";
  }
  return "?";
}
template <Peer P>
using PeerTag = std::integral_constant<Peer, P>;

/// for i in [0, n): f(i) -- serially, in an OpenMP loop, or in a Kokkos parallel_for (ScatterView
/// peers use Kokkos for their element loops, as a Kokkos user would).
template <Peer P, class F>
void peer_for(i64 n, const F& f) {
  if constexpr (P == Peer::serial) {
    for (i64 i = 0; i < n; ++i) f(i);
  } else if constexpr (P == Peer::omp_atomic) {
#pragma omp parallel for schedule(static)
    for (i64 i = 0; i < n; ++i) f(i);
  } else {
    Kokkos::parallel_for("bench::peer_for", Kokkos::RangePolicy<Exec, Kokkos::IndexType<i64>>(0, n),
                         f);
  }
}

/// out(s, k) = sum (or max, min: Op) over i with ids[i] == s of the values `map(i, add)` passes to
/// add(k, value). Setting the output to the identity (0, -inf, +inf) is part of the call.
/// ScatterViews are built once (a user keeps them).
template <Peer P, class T, class Op = Kokkos::Experimental::ScatterSum>
struct PeerReduce {
  static constexpr bool sum = std::is_same_v<Op, Kokkos::Experimental::ScatterSum>;
  static constexpr bool is_max = std::is_same_v<Op, Kokkos::Experimental::ScatterMax>;
  static constexpr T identity = sum      ? T(0)
                                : is_max ? -std::numeric_limits<T>::infinity()
                                         : std::numeric_limits<T>::infinity();
  static void combine(T& o, T v) {
    if constexpr (sum)
      o += v;
    else
      o = is_max ? (v > o ? v : o) : (v < o ? v : o);
  }
  using Out = Kokkos::View<T**, Kokkos::LayoutRight, Host>;
  using SvDup = Kokkos::Experimental::ScatterView<T**, Kokkos::LayoutRight, Exec, Op,
                                                  Kokkos::Experimental::ScatterDuplicated,
                                                  Kokkos::Experimental::ScatterNonAtomic>;
  using SvAtomic = Kokkos::Experimental::ScatterView<T**, Kokkos::LayoutRight, Exec, Op,
                                                     Kokkos::Experimental::ScatterNonDuplicated,
                                                     Kokkos::Experimental::ScatterAtomic>;
  using Sv = std::conditional_t<P == Peer::sv_dup, SvDup, SvAtomic>;
  Out out;
  Sv sv;
  T init;  // what a segment without elements gets (the identity unless the user knows better)
  explicit PeerReduce(const Arr<T>& o, T init_ = identity) : out(o.view), init(init_) {
    if constexpr (P == Peer::sv_dup || P == Peer::sv_atomic) sv = Sv(out);
  }
  template <class I, class Map>
  void operator()(const I* ids, i64 n, const Map& map) const {
    Out o = out;
    if constexpr (P == Peer::serial) {
      std::fill(o.data(), o.data() + o.size(), init);
      for (i64 i = 0; i < n; ++i) {
        const i64 s = ids[i];
        map(i, [&](i64 k, T v) { combine(o(s, k), v); });
      }
    } else if constexpr (P == Peer::omp_atomic) {
      T* q = o.data();
      const i64 size = o.size(), w = o.extent(1);
#pragma omp parallel for schedule(static)
      for (i64 k = 0; k < size; ++k) q[k] = init;
#pragma omp parallel for schedule(static)
      for (i64 i = 0; i < n; ++i) {
        const i64 s = ids[i];
        map(i, [&](i64 k, T v) {
          if constexpr (sum) {
#pragma omp atomic
            q[s * w + k] += v;
          } else {  // OpenMP has no atomic max of floats before 5.1: a compare-and-swap loop
            T cur;
            __atomic_load(&q[s * w + k], &cur, __ATOMIC_RELAXED);
            while ((is_max ? v > cur : v < cur) &&
                   !__atomic_compare_exchange(&q[s * w + k], &cur, &v, true, __ATOMIC_RELAXED,
                                              __ATOMIC_RELAXED)) {
            }
          }
        });
      }
    } else {
      Sv s_view = sv;
      // contribute() combines into the destination (all duplicates when it is not one of them), so
      // the output is set to the identity first, as a ScatterView user computing out = sum must do.
      if constexpr (P == Peer::sv_dup) Kokkos::deep_copy(Exec(), o, init);
      s_view.reset();
      Kokkos::parallel_for("bench::scatter",
                           Kokkos::RangePolicy<Exec, Kokkos::IndexType<i64>>(0, n), [=](i64 i) {
                             auto a = s_view.access();
                             const i64 s = ids[i];
                             map(i, [&](i64 k, T v) {
                               if constexpr (sum)
                                 a(s, k) += v;
                               else
                                 a(s, k).update(v);
                             });
                           });
      Kokkos::Experimental::contribute(o, s_view);
    }
  }
};

// ---------------------------------------------------------------- one benchmark case

template <class T>
const char* dtype_name() {
  return std::is_same_v<T, float> ? "float" : "double";
}
template <class I>
const char* itype_name() {
  return sizeof(I) == 4 ? "int32" : "int64";
}

#define SEGOPS_BENCH_CALL(...)               \
  if constexpr (requires { __VA_ARGS__; }) { \
    __VA_ARGS__;                             \
    return true;                             \
  } else {                                   \
    return false;                            \
  }

using OutList = std::vector<std::pair<const void*, const Ref*>>;

template <class T, class I>
struct Case {
  const Options& opt;
  Exec exec;
  i64 n, m, d;
  sb::Regime regime;
  bool sorted, with_det, with_peers;
  std::vector<I> ids_v;
  Kokkos::View<I*, Host> ids;
  std::vector<i64> cnt;
  std::optional<segops::Segments<I, Exec>> seg, seg_det;
  Row row;

  Case(const Options& o, i64 n_, i64 len, sb::Regime r, bool sorted_, i64 d_, bool det, bool peers)
      : opt(o),
        n(n_),
        m(sb::num_segments(n_, len, r)),
        d(d_),
        regime(r),
        sorted(sorted_),
        with_det(det && !sorted_),
        with_peers(peers) {
    ids_v = sb::make_ids<I>(n, m, regime, sorted);
    ids = staggered_alloc<I>("bench::ids", n);
    std::copy(ids_v.begin(), ids_v.end(), ids.data());
    std::vector<I>().swap(ids_v);
    cnt.assign(m, 0);
    for (i64 i = 0; i < n; ++i) ++cnt[ids(i)];
    seg.emplace(exec, ids, m);
    if (with_det) seg_det.emplace(exec, ids, m, segops::SegmentsOptions{.deterministic = true});
    row.dtype = dtype_name<T>();
    row.itype = itype_name<I>();
    row.sorted =
        std::string(regime == sb::Regime::skew ? "skew-" : "") + (sorted ? "sorted" : "unsorted");
    row.n = n;
    row.m = m;
    row.d = d;
  }
  const I* id() const { return ids.data(); }

  Arr<T> elem(std::uint64_t seed, i64 w) const { return fill(Arr<T>("bench::elem", n, w), seed); }
  Arr<T> segv(std::uint64_t seed, i64 w) const { return fill(Arr<T>("bench::seg", m, w), seed); }
  Arr<T> elem_out(i64 w) const { return Arr<T>("bench::elem_out", n, w); }
  Arr<T> seg_out(i64 w) const { return Arr<T>("bench::seg_out", m, w); }
  static Arr<T> fill(Arr<T> a, std::uint64_t seed) {
    T* p = a.p();
    const i64 size = a.size();
#pragma omp parallel for schedule(static)
    for (i64 k = 0; k < size; ++k) p[k] = static_cast<T>(sb::value(k, seed));
    return a;
  }

  /// Checked calls of the op being measured, timed together by time_pending (at the end of
  /// peers()): implementation name and call.
  std::vector<std::pair<std::string, std::function<void()>>> pending;

  // The op being measured: name, order, and the minimal bytes it moves.
  std::string op, order;
  double bytes = 0;
  std::vector<std::pair<Arr<T>*, const Ref*>> outs;
  // Optional: before each checked call, after the outputs are poisoned (an in-place op restores its
  // operand; an integer output is poisoned); checks of outputs that are not Arr<T> (max errors).
  std::function<void()> prepare;
  std::vector<std::function<double()>> extra_checks;
  /// extra_bytes: inputs and outputs that are not Arr<T> (arg indices, integer counts).
  void begin(const char* op_, const char* order_, std::initializer_list<const Arr<T>*> in,
             std::vector<std::pair<Arr<T>*, const Ref*>> out, double extra_bytes = 0) {
    if (!pending.empty()) {  // a bench function that measured without calling peers()
      std::fprintf(stderr, "bench: %s %s left %zu untimed calls (peers() not called)\n", op.c_str(),
                   order.c_str(), pending.size());
      std::abort();
    }
    op = op_;
    order = order_;
    row.op = op;
    row.order = order;
    bytes = double(n) * sizeof(I);
    for (auto* a : in) bytes += a->bytes();
    for (auto& o : out) bytes += o.first->bytes();
    bytes += extra_bytes;
    outs = std::move(out);
    prepare = nullptr;
    extra_checks.clear();
    ++g_out.done;
    if (opt.progress)
      std::fprintf(stderr, "[%d/%d] %s %s %s %s N=%lld M=%lld D=%lld %s\n", g_out.done, g_out.total,
                   op_, order_, row.dtype.c_str(), row.itype.c_str(), (long long)n, (long long)m,
                   (long long)d, row.sorted.c_str());
  }
  std::string where() const {
    std::ostringstream os;
    os << op << " " << order << " " << row.dtype << " " << row.itype << " N=" << n << " M=" << m
       << " D=" << d << " " << row.sorted;
    return os.str();
  }

  /// Poison, call once, verify every output against the double reference, then time.
  template <class F>
  void measure(const std::string& impl, F&& call) {
    for (auto& o : outs)
      parallel_fill(o.first->p(), o.first->size(), std::numeric_limits<T>::quiet_NaN());
    if (prepare) prepare();
    if constexpr (std::is_same_v<decltype(call()), bool>) {
      if (!call()) {
        if (!g_noted.insert(op + "/" + order).second) return;  // said once per op-order
        note("missing: segops " + op + " " + order + " (no matching segops::segmented_" + op +
             (order == "fwd"   ? ""
              : order == "bwd" ? "_backward"
                               : "_double_backward") +
             " in this build) [" + where() + "]");
        return;
      }
    } else {
      call();
    }
    Kokkos::fence();
    const double tol = std::is_same_v<T, float> ? 2e-3 : 1e-9;
    std::vector<double> errs;
    for (auto& o : outs) errs.push_back(max_error(*o.first, *o.second));
    for (auto& f : extra_checks) errs.push_back(f());
    for (const double err : errs) {
      if (!(err <= tol)) {
        std::ostringstream os;
        os << "wrong: " << impl << " [" << where() << "] max relative error " << err << " > " << tol
           << "; not timed";
        note(os.str());
        ++g_out.wrong;
        return;
      }
    }
    // copy_fraction against the copy timed alternately with the op: SegOps' rows, whose targets
    // these are (a peer's alternate calls would only double its time)
    if (g_paired && impl.rfind("segops", 0) == 0) {
      const auto [t, copy_gbps] = time_median_paired(call, *g_copy, opt);
      write_row(row, impl, t, bytes, copy_gbps);
    } else {
      pending.emplace_back(impl, [call]() mutable { call(); });
    }
  }

  /// Times the pending calls interleaved (time_medians_interleaved; serve_calls with --serve) and
  /// writes their rows.
  void time_pending() {
    const auto t = opt.serve ? serve_calls(pending) : time_medians_interleaved(pending, opt);
    for (std::size_t k = 0; k < pending.size(); ++k) write_row(row, pending[k].first, t[k], bytes);
    pending.clear();
  }

  /// SegOps on the default descriptor and, for unsorted ids, on the deterministic one.
  template <class F>
  void segops(F&& f) {
    auto run = [&](const std::string& impl, auto& s) {
      // f is the caller's temporary: copied, as the call may be timed after it is gone
      measure(impl, [this, f, &s]() mutable -> bool {
        const bool ok = d == 1 ? f(s, R1{}) : f(s, R2{});
        exec.fence();
        return ok;
      });
    };
    run("segops", *seg);
    if (with_det) run("segops_det", *seg_det);
  }

  /// Whether the quick suite leaves peer P to --full on this case. At N = 2^25 these calls take
  /// 0.2-2.6 s each, 6 calls a measurement: the plain loop; on unsorted ids every peer (the OpenMP
  /// atomics over a second a call, ScatterView's duplicated sums 2.6 s; the peers meet unsorted
  /// ids at N = 1e5 and 1e6); on sorted ids the reductions' atomics, and at D = 1 their
  /// ScatterView. What stays there: ScatterView's duplicated reductions at D = 3, the gathers'
  /// OpenMP loop.
  bool full_only(Peer p, bool reduces) const {
    if (opt.full || n <= 10000000) return false;
    if (p == Peer::serial || !sorted) return true;
    return reduces && (p == Peer::omp_atomic || d == 1);
  }

  /// Each peer: `make(PeerTag<P>)` sets up (untimed) and returns the timed call. Then times
  /// every checked call of the case, SegOps' among them (time_pending): a bench function calls
  /// this last, after segops(), while everything the calls refer to is alive.
  template <class Make>
  void peers(bool reduces, Make&& make) {
    if (!with_peers) return time_pending();
    if (n <= 1000000) time_copy_of(row, bytes, opt);
    auto one = [&](auto tag) {
      if (full_only(decltype(tag)::value, reduces)) return;
      auto call = make(tag);
      measure(peer_name(decltype(tag)::value, reduces), call);
    };
    one(PeerTag<Peer::serial>{});
    one(PeerTag<Peer::omp_atomic>{});
    if (reduces) {
      one(PeerTag<Peer::sv_dup>{});
      if (opt.full)
        one(PeerTag<Peer::sv_atomic>{});  // on 2 CPU threads it tracks omp_atomic closely
    }
    time_pending();
  }
};

// Each op family's translation unit runs one op-order of a case: false when the op is not its.
#define SEGOPS_BENCH_FAMILY(NAME)                                                                 \
  template <class T, class I>                                                                     \
  bool NAME(Case<T, I>& c, const std::string& op, const std::string& order);                      \
  extern template bool NAME(Case<float, std::int32_t>&, const std::string&, const std::string&);  \
  extern template bool NAME(Case<float, std::int64_t>&, const std::string&, const std::string&);  \
  extern template bool NAME(Case<double, std::int32_t>&, const std::string&, const std::string&); \
  extern template bool NAME(Case<double, std::int64_t>&, const std::string&, const std::string&);
#define SEGOPS_BENCH_FAMILY_INSTANCES(NAME)                                                \
  template bool NAME(Case<float, std::int32_t>&, const std::string&, const std::string&);  \
  template bool NAME(Case<float, std::int64_t>&, const std::string&, const std::string&);  \
  template bool NAME(Case<double, std::int32_t>&, const std::string&, const std::string&); \
  template bool NAME(Case<double, std::int64_t>&, const std::string&, const std::string&);
SEGOPS_BENCH_FAMILY(bench_scaled)    // mul, rms_norm, matvec (bench_ops_scaled.cpp)
SEGOPS_BENCH_FAMILY(bench_bilinear)  // inner_products, axpby, axpy, add (bench_ops_bilinear.cpp)
SEGOPS_BENCH_FAMILY(
    bench_reductions)  // component_sum, count, max, min, max_norm (bench_ops_reductions.cpp)

}  // namespace bench
