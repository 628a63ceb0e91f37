// SPDX-License-Identifier: Apache-2.0
// SegOps CPU benchmark: every op against C++ peers (serial loop, OpenMP atomics, Kokkos ScatterView
// duplicated/atomic) on the same data, plus a STREAM-style copy measured in the same run.
// Writes CSV rows op,order,dtype,index_type,N,M,D,sorted,impl,median_s,bytes,gbps,copy_fraction.
// Run with --help for the options; scripts/bench.sh is the usual driver.
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
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "bench_data.hpp"

namespace {

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
};

struct Output {
  FILE* csv = nullptr;
  FILE* notes = nullptr;
  double copy_gbps = 0;
  int done = 0, total = 0;
  int wrong = 0;
};
Output g_out;

std::set<std::string> g_noted;

void note(const std::string& line) {
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
void write_row(const Row& r, const std::string& impl, double median, double bytes,
               double copy_gbps = g_out.copy_gbps) {
  const double gbps = bytes / median / 1e9;
  const double frac = copy_gbps > 0 ? gbps / copy_gbps : 0.0;
  std::fprintf(g_out.csv, "%s,%s,%s,%s,%lld,%lld,%lld,%s,%s,%.6e,%.0f,%.4f,%.4f\n", r.op.c_str(),
               r.order.c_str(), r.dtype.c_str(), r.itype.c_str(), (long long)r.n, (long long)r.m,
               (long long)r.d, r.sorted.c_str(), impl.c_str(), median, bytes, gbps, frac);
  std::fflush(g_out.csv);
}

double median(std::vector<double> v) {
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

/// Median seconds per call. Two warm-up calls, then batches of calls (one fence after every call)
/// until at least min_runs batches and min_time seconds; batches amortise the clock for tiny calls.
template <class F>
double time_median(F&& call, const Options& opt) {
  time_calls(call);
  const double one = time_calls(call);
  const int batch = std::clamp(int(20e-6 / std::max(one, 1e-9)), 1, 1000);
  std::vector<double> samples;
  double total = 0;
  while ((int)samples.size() < opt.min_runs || total < opt.min_time) {
    const double dt = time_calls(call, batch);
    samples.push_back(dt / batch);
    total += dt;
    if (samples.size() >= 100000) break;
  }
  return median(samples);
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

/// The copy's arrays (made at the first measurement, freed before Kokkos is finalized), and whether
/// the case being run times it alternately with every measurement (N = 2^25).
std::optional<StreamCopy> g_copy;
bool g_paired = false;

/// The N = 2^25 cases (the copy-bandwidth targets) time the copy too, call by call alternately
/// with the op (ms per call: no batches): median seconds of the op and the copy bandwidth, the
/// faster of the copy loop's and deep_copy's medians. This machine's memory bandwidth drifts within
/// seconds (a shared VM), so a copy measured before the case can differ from the one the op ran
/// under; alternating samples see the same drift. Each timed op call follows an untimed one, so
/// that it does not pay for writing back the cache lines the copies left dirty.
template <class F>
std::pair<double, double> time_median_paired(F&& call, const StreamCopy& copy, const Options& opt) {
  auto deep = [&] { copy.deep(); };
  time_calls(call);
  time_calls(copy);
  time_calls(deep);
  std::vector<double> op, c1, c2;
  double total = 0;
  while ((int)op.size() < opt.min_runs || total < opt.min_time) {
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

/// An (n, w) row-major array in host memory, viewed as rank 1 (w == 1), rank 2 or rank 3.
template <class T>
struct Arr {
  Kokkos::View<T**, Kokkos::LayoutRight, Host> view;
  i64 n = 0, w = 0;
  Arr() = default;
  Arr(const char* label, i64 n_, i64 w_)
      : view(Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label)), n_, w_),
        n(n_),
        w(w_) {}
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

/// Reference output in double and, per element, the magnitude its rounding error scales with (the
/// sum of absolute values of the terms): a result passes when |got - val| <= tol * mag.
struct Ref {
  std::vector<double> val, mag;
  explicit Ref(i64 size = 0) : val(size, 0.0), mag(size, 0.0) {}
};

template <class T>
double max_error(const Arr<T>& a, const Ref& r) {
  double worst = 0;
  for (i64 k = 0; k < a.size(); ++k) {
    const double got = double(a.p()[k]);
    const double err = std::abs(got - r.val[k]) / (r.mag[k] + 1e-300);
    if (!(err <= worst)) worst = std::isnan(err) ? std::numeric_limits<double>::infinity() : err;
  }
  return worst;
}

// ---------------------------------------------------------------- C++ peers

enum class Peer { serial, omp_atomic, sv_dup, sv_atomic };
const char* peer_name(Peer p, bool reduces) {
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

/// out(s, k) = sum over i with ids[i] == s of the values `map(i, add)` passes to add(k, value).
/// Output zeroing is part of the call. ScatterViews are built once (a user keeps them).
template <Peer P, class T>
struct PeerReduce {
  using Out = Kokkos::View<T**, Kokkos::LayoutRight, Host>;
  using SvDup = Kokkos::Experimental::ScatterView<
      T**, Kokkos::LayoutRight, Exec, Kokkos::Experimental::ScatterSum,
      Kokkos::Experimental::ScatterDuplicated, Kokkos::Experimental::ScatterNonAtomic>;
  using SvAtomic = Kokkos::Experimental::ScatterView<
      T**, Kokkos::LayoutRight, Exec, Kokkos::Experimental::ScatterSum,
      Kokkos::Experimental::ScatterNonDuplicated, Kokkos::Experimental::ScatterAtomic>;
  using Sv = std::conditional_t<P == Peer::sv_dup, SvDup, SvAtomic>;
  Out out;
  Sv sv;
  explicit PeerReduce(const Arr<T>& o) : out(o.view) {
    if constexpr (P == Peer::sv_dup || P == Peer::sv_atomic) sv = Sv(out);
  }
  template <class I, class Map>
  void operator()(const I* ids, i64 n, const Map& map) const {
    Out o = out;
    if constexpr (P == Peer::serial) {
      std::fill(o.data(), o.data() + o.size(), T(0));
      for (i64 i = 0; i < n; ++i) {
        const i64 s = ids[i];
        map(i, [&](i64 k, T v) { o(s, k) += v; });
      }
    } else if constexpr (P == Peer::omp_atomic) {
      T* q = o.data();
      const i64 size = o.size(), w = o.extent(1);
#pragma omp parallel for schedule(static)
      for (i64 k = 0; k < size; ++k) q[k] = T(0);
#pragma omp parallel for schedule(static)
      for (i64 i = 0; i < n; ++i) {
        const i64 s = ids[i];
        map(i, [&](i64 k, T v) {
#pragma omp atomic
          q[s * w + k] += v;
        });
      }
    } else {
      Sv s_view = sv;
      // contribute() adds into the destination (all duplicates when it is not one of them), so the
      // output is zeroed first, as a ScatterView user computing out = sum must do.
      if constexpr (P == Peer::sv_dup) Kokkos::deep_copy(Exec(), o, T(0));
      s_view.reset();
      Kokkos::parallel_for("bench::scatter",
                           Kokkos::RangePolicy<Exec, Kokkos::IndexType<i64>>(0, n), [=](i64 i) {
                             auto a = s_view.access();
                             const i64 s = ids[i];
                             map(i, [&](i64 k, T v) { a(s, k) += v; });
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
    ids = Kokkos::View<I*, Host>(Kokkos::view_alloc(Kokkos::WithoutInitializing, "bench::ids"), n);
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

  // The op being measured: name, order, and the minimal bytes it moves.
  std::string op, order;
  double bytes = 0;
  std::vector<std::pair<Arr<T>*, const Ref*>> outs;
  void begin(const char* op_, const char* order_, std::initializer_list<const Arr<T>*> in,
             std::vector<std::pair<Arr<T>*, const Ref*>> out) {
    op = op_;
    order = order_;
    row.op = op;
    row.order = order;
    bytes = double(n) * sizeof(I);
    for (auto* a : in) bytes += a->bytes();
    for (auto& o : out) bytes += o.first->bytes();
    outs = std::move(out);
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
      std::fill(o.first->p(), o.first->p() + o.first->size(), std::numeric_limits<T>::quiet_NaN());
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
    for (auto& o : outs) {
      const double err = max_error(*o.first, *o.second);
      if (!(err <= tol)) {
        std::ostringstream os;
        os << "wrong: " << impl << " [" << where() << "] max relative error " << err << " > " << tol
           << "; not timed";
        note(os.str());
        ++g_out.wrong;
        return;
      }
    }
    if (g_paired) {  // copy_fraction against the copy timed alternately with the op
      const auto [t, copy_gbps] = time_median_paired(call, *g_copy, opt);
      write_row(row, impl, t, bytes, copy_gbps);
    } else {
      write_row(row, impl, time_median(call, opt), bytes);
    }
  }

  /// SegOps on the default descriptor and, for unsorted ids, on the deterministic one.
  template <class F>
  void segops(F&& f) {
    auto run = [&](const std::string& impl, auto& s) {
      measure(impl, [&]() -> bool {
        const bool ok = d == 1 ? f(s, R1{}) : f(s, R2{});
        exec.fence();
        return ok;
      });
    };
    run("segops", *seg);
    if (with_det) run("segops_det", *seg_det);
  }

  /// Each peer: `make(PeerTag<P>)` sets up (untimed) and returns the timed call.
  template <class Make>
  void peers(bool reduces, Make&& make) {
    if (!with_peers) return;
    auto one = [&](auto tag) {
      // The plain loop at N = 2^25 costs more wall time than it tells in the quick suite.
      if (decltype(tag)::value == Peer::serial && !opt.full && n > 10000000) return;
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
  }
};

// ---------------------------------------------------------------- the ops
// Each op-order: inputs from fixed streams (x=1, y/v/a/A=2, g=3, u=4, w/W/v=5), the double
// reference with magnitudes, SegOps, and the peers. Peers fuse what a hand-written loop would fuse.

template <class T, class I>
void bench_linear(Case<T, I>& c, const std::string& op, const std::string& order) {
  const i64 n = c.n, m = c.m, D = c.d;
  const I* id = c.id();
  const bool mean = op == "mean";
  const std::vector<i64>& cnt = c.cnt;
  // Reductions: sum fwd/dbl, mean fwd/dbl, broadcast bwd. Gathers: the rest.
  const bool reduce = (op != "broadcast") == (order != "bwd");
  if (reduce) {
    const std::uint64_t seed = order == "fwd" ? 1 : order == "bwd" ? 3 : 4;
    Arr<T> x = c.elem(seed, D), o = c.seg_out(D);
    Ref ref(m * D);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        const double v = x.p()[i * D + k];
        ref.val[id[i] * D + k] += v;
        ref.mag[id[i] * D + k] += std::abs(v);
      }
    if (mean)
      for (i64 s = 0; s < m; ++s)
        for (i64 k = 0; k < D; ++k) {
          ref.val[s * D + k] = cnt[s] ? ref.val[s * D + k] / cnt[s] : 0.0;
          ref.mag[s * D + k] = cnt[s] ? ref.mag[s * D + k] / cnt[s] : 0.0;
        }
    c.begin(op.c_str(), order.c_str(), {&x}, {{&o, &ref}});
    c.segops([&](auto& seg, auto r) -> bool {
      if (op == "sum" && order == "fwd") {
        SEGOPS_BENCH_CALL(segmented_sum(c.exec, seg, x.v(r), o.v(r)))
      } else if (op == "sum") {
        SEGOPS_BENCH_CALL(segmented_sum_double_backward(c.exec, seg, x.v(r), o.v(r)))
      } else if (op == "mean" && order == "fwd") {
        SEGOPS_BENCH_CALL(segmented_mean(c.exec, seg, x.v(r), o.v(r)))
      } else if (op == "mean") {
        SEGOPS_BENCH_CALL(segmented_mean_double_backward(c.exec, seg, x.v(r), o.v(r)))
      } else {
        SEGOPS_BENCH_CALL(segmented_broadcast_backward(c.exec, seg, x.v(r), o.v(r)))
      }
    });
    const T* xp = x.p();
    T* op_ = o.p();
    const i64* cp = cnt.data();
    c.peers(true, [&](auto tag) {
      constexpr Peer P = decltype(tag)::value;
      return [=, red = PeerReduce<P, T>(o)] {
        red(id, n, [=](i64 i, auto&& add) {
          for (i64 k = 0; k < D; ++k) add(k, xp[i * D + k]);
        });
        if (mean)
          peer_for<P>(m, [=](i64 s) {
            for (i64 k = 0; k < D; ++k) op_[s * D + k] = cp[s] ? op_[s * D + k] / T(cp[s]) : T(0);
          });
      };
    });
  } else {
    const std::uint64_t seed = order == "fwd" ? 2 : order == "bwd" ? 3 : 4;
    Arr<T> v = c.segv(seed, D), o = c.elem_out(D);
    Ref ref(n * D);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        const double val = double(v.p()[id[i] * D + k]) / (mean ? double(cnt[id[i]]) : 1.0);
        ref.val[i * D + k] = val;
        ref.mag[i * D + k] = std::abs(val);
      }
    c.begin(op.c_str(), order.c_str(), {&v}, {{&o, &ref}});
    c.segops([&](auto& seg, auto r) -> bool {
      if (op == "sum" && order == "bwd") {
        SEGOPS_BENCH_CALL(segmented_sum_backward(c.exec, seg, v.v(r), o.v(r)))
      } else if (op == "mean" && order == "bwd") {
        SEGOPS_BENCH_CALL(segmented_mean_backward(c.exec, seg, v.v(r), o.v(r)))
      } else if (op == "broadcast" && order == "fwd") {
        SEGOPS_BENCH_CALL(segmented_broadcast(c.exec, seg, v.v(r), o.v(r)))
      } else {
        SEGOPS_BENCH_CALL(segmented_broadcast_double_backward(c.exec, seg, v.v(r), o.v(r)))
      }
    });
    const T* vp = v.p();
    T* opp = o.p();
    const i64* cp = cnt.data();
    c.peers(false, [&](auto tag) {
      constexpr Peer P = decltype(tag)::value;
      return [=] {
        if (mean)
          peer_for<P>(n, [=](i64 i) {
            const i64 s = id[i];
            const T cs = T(cp[s]);
            for (i64 k = 0; k < D; ++k) opp[i * D + k] = vp[s * D + k] / cs;
          });
        else
          peer_for<P>(n, [=](i64 i) {
            const i64 s = id[i];
            for (i64 k = 0; k < D; ++k) opp[i * D + k] = vp[s * D + k];
          });
      };
    });
  }
}

template <class T, class I>
void bench_dot(Case<T, I>& c, const std::string& order) {
  const i64 n = c.n, m = c.m, D = c.d;
  const I* id = c.id();
  Arr<T> x = c.elem(1, D), y = c.elem(2, D);
  const T *xp = x.p(), *yp = y.p();
  if (order == "fwd") {
    Arr<T> o = c.seg_out(1);
    Ref ref(m);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        const double t = double(xp[i * D + k]) * yp[i * D + k];
        ref.val[id[i]] += t;
        ref.mag[id[i]] += std::abs(t);
      }
    c.begin("dot", "fwd", {&x, &y}, {{&o, &ref}});
    c.segops([&](auto& seg, auto r) -> bool {
      SEGOPS_BENCH_CALL(segmented_dot(c.exec, seg, x.v(r), y.v(r), o.v(R1{})))
    });
    c.peers(true, [&](auto tag) {
      return [=, red = PeerReduce<decltype(tag)::value, T>(o)] {
        red(id, n, [=](i64 i, auto&& add) {
          T a = 0;
          for (i64 k = 0; k < D; ++k) a += xp[i * D + k] * yp[i * D + k];
          add(0, a);
        });
      };
    });
  } else if (order == "bwd") {
    Arr<T> g = c.segv(3, 1), gx = c.elem_out(D), gy = c.elem_out(D);
    Ref rx(n * D), ry(n * D);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        const double gs = g.p()[id[i]];
        rx.val[i * D + k] = gs * yp[i * D + k];
        ry.val[i * D + k] = gs * xp[i * D + k];
        rx.mag[i * D + k] = std::abs(rx.val[i * D + k]);
        ry.mag[i * D + k] = std::abs(ry.val[i * D + k]);
      }
    c.begin("dot", "bwd", {&x, &y, &g}, {{&gx, &rx}, {&gy, &ry}});
    c.segops([&](auto& seg, auto r) -> bool {
      SEGOPS_BENCH_CALL(
          segmented_dot_backward(c.exec, seg, x.v(r), y.v(r), g.v(R1{}), gx.v(r), gy.v(r)))
    });
    const T* gp = g.p();
    T *gxp = gx.p(), *gyp = gy.p();
    c.peers(false, [&](auto tag) {
      return [=] {
        peer_for<decltype(tag)::value>(n, [=](i64 i) {
          const T gs = gp[id[i]];
          for (i64 k = 0; k < D; ++k) {
            gxp[i * D + k] = gs * yp[i * D + k];
            gyp[i * D + k] = gs * xp[i * D + k];
          }
        });
      };
    });
  } else {
    Arr<T> g = c.segv(3, 1), u = c.elem(4, D), v = c.elem(5, D);
    Arr<T> gg = c.seg_out(1), xq = c.elem_out(D), yq = c.elem_out(D);
    const T *gp = g.p(), *up = u.p(), *vp = v.p();
    Ref rg(m), rx(n * D), ry(n * D);
    for (i64 i = 0; i < n; ++i) {
      const double gs = gp[id[i]];
      for (i64 k = 0; k < D; ++k) {
        const i64 e = i * D + k;
        const double a = double(up[e]) * yp[e], b = double(vp[e]) * xp[e];
        rg.val[id[i]] += a + b;
        rg.mag[id[i]] += std::abs(a) + std::abs(b);
        rx.val[e] = gs * vp[e];
        ry.val[e] = gs * up[e];
        rx.mag[e] = std::abs(rx.val[e]);
        ry.mag[e] = std::abs(ry.val[e]);
      }
    }
    c.begin("dot", "dbl", {&x, &y, &g, &u, &v}, {{&gg, &rg}, {&xq, &rx}, {&yq, &ry}});
    c.segops([&](auto& seg, auto r) -> bool {
      SEGOPS_BENCH_CALL(segmented_dot_double_backward(c.exec, seg, x.v(r), y.v(r), g.v(R1{}),
                                                      u.v(r), v.v(r), gg.v(R1{}), xq.v(r), yq.v(r)))
    });
    T *xqp = xq.p(), *yqp = yq.p();
    c.peers(true, [&](auto tag) {
      return [=, red = PeerReduce<decltype(tag)::value, T>(gg)] {
        red(id, n, [=](i64 i, auto&& add) {
          const T gs = gp[id[i]];
          T a = 0;
          for (i64 k = 0; k < D; ++k) {
            const i64 e = i * D + k;
            a += up[e] * yp[e] + vp[e] * xp[e];
            xqp[e] = gs * vp[e];
            yqp[e] = gs * up[e];
          }
          add(0, a);
        });
      };
    });
  }
}

template <class T, class I>
void bench_mul(Case<T, I>& c, const std::string& order) {
  const i64 n = c.n, m = c.m, D = c.d;
  const I* id = c.id();
  Arr<T> a = c.segv(2, 1), x = c.elem(1, D);
  const T *ap = a.p(), *xp = x.p();
  if (order == "fwd") {
    Arr<T> o = c.elem_out(D);
    Ref ref(n * D);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        ref.val[i * D + k] = double(ap[id[i]]) * xp[i * D + k];
        ref.mag[i * D + k] = std::abs(ref.val[i * D + k]);
      }
    c.begin("mul", "fwd", {&a, &x}, {{&o, &ref}});
    c.segops([&](auto& seg, auto r) -> bool {
      SEGOPS_BENCH_CALL(segmented_mul(c.exec, seg, a.v(R1{}), x.v(r), o.v(r)))
    });
    T* opp = o.p();
    c.peers(false, [&](auto tag) {
      return [=] {
        peer_for<decltype(tag)::value>(n, [=](i64 i) {
          const T as = ap[id[i]];
          for (i64 k = 0; k < D; ++k) opp[i * D + k] = as * xp[i * D + k];
        });
      };
    });
  } else if (order == "bwd") {
    Arr<T> g = c.elem(3, D), gx = c.elem_out(D), ga = c.seg_out(1);
    const T* gp = g.p();
    Ref rx(n * D), ra(m);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        const i64 e = i * D + k;
        rx.val[e] = double(ap[id[i]]) * gp[e];
        rx.mag[e] = std::abs(rx.val[e]);
        ra.val[id[i]] += double(gp[e]) * xp[e];
        ra.mag[id[i]] += std::abs(double(gp[e]) * xp[e]);
      }
    c.begin("mul", "bwd", {&a, &x, &g}, {{&gx, &rx}, {&ga, &ra}});
    c.segops([&](auto& seg, auto r) -> bool {
      SEGOPS_BENCH_CALL(
          segmented_mul_backward(c.exec, seg, a.v(R1{}), x.v(r), g.v(r), gx.v(r), ga.v(R1{})))
    });
    T* gxp = gx.p();
    c.peers(true, [&](auto tag) {
      return [=, red = PeerReduce<decltype(tag)::value, T>(ga)] {
        red(id, n, [=](i64 i, auto&& add) {
          const T as = ap[id[i]];
          T t = 0;
          for (i64 k = 0; k < D; ++k) {
            gxp[i * D + k] = as * gp[i * D + k];
            t += gp[i * D + k] * xp[i * D + k];
          }
          add(0, t);
        });
      };
    });
  } else {
    Arr<T> g = c.elem(3, D), u = c.elem(4, D), w = c.segv(5, 1);
    Arr<T> gg = c.elem_out(D), xq = c.elem_out(D), aq = c.seg_out(1);
    const T *gp = g.p(), *up = u.p(), *wp = w.p();
    Ref rg(n * D), rx(n * D), ra(m);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        const i64 e = i * D + k, s = id[i];
        rg.val[e] = double(ap[s]) * up[e] + double(wp[s]) * xp[e];
        rg.mag[e] = std::abs(double(ap[s]) * up[e]) + std::abs(double(wp[s]) * xp[e]);
        rx.val[e] = double(wp[s]) * gp[e];
        rx.mag[e] = std::abs(rx.val[e]);
        ra.val[s] += double(up[e]) * gp[e];
        ra.mag[s] += std::abs(double(up[e]) * gp[e]);
      }
    c.begin("mul", "dbl", {&a, &x, &g, &u, &w}, {{&gg, &rg}, {&xq, &rx}, {&aq, &ra}});
    c.segops([&](auto& seg, auto r) -> bool {
      SEGOPS_BENCH_CALL(segmented_mul_double_backward(
          c.exec, seg, a.v(R1{}), x.v(r), g.v(r), u.v(r), w.v(R1{}), gg.v(r), xq.v(r), aq.v(R1{})))
    });
    T *ggp = gg.p(), *xqp = xq.p();
    c.peers(true, [&](auto tag) {
      return [=, red = PeerReduce<decltype(tag)::value, T>(aq)] {
        red(id, n, [=](i64 i, auto&& add) {
          const i64 s = id[i];
          const T as = ap[s], ws = wp[s];
          T t = 0;
          for (i64 k = 0; k < D; ++k) {
            const i64 e = i * D + k;
            ggp[e] = as * up[e] + ws * xp[e];
            xqp[e] = ws * gp[e];
            t += up[e] * gp[e];
          }
          add(0, t);
        });
      };
    });
  }
}

template <class T, class I>
void bench_rms_norm(Case<T, I>& c, const std::string& order) {
  const i64 n = c.n, m = c.m, D = c.d;
  const I* id = c.id();
  const i64* cp = c.cnt.data();
  Arr<T> x = c.elem(1, D);
  const T* xp = x.p();
  // Forward in double (the reference), and its output rounded to T (an input of the backwards).
  std::vector<double> sq(m, 0.0);
  for (i64 i = 0; i < n; ++i)
    for (i64 k = 0; k < D; ++k) sq[id[i]] += double(xp[i * D + k]) * xp[i * D + k];
  Arr<T> o = c.seg_out(1);
  Ref rf(m);
  for (i64 s = 0; s < m; ++s) {
    rf.val[s] = cp[s] ? std::sqrt(sq[s] / cp[s]) : 0.0;
    rf.mag[s] = rf.val[s];
  }
  if (order == "fwd") {
    c.begin("rms_norm", "fwd", {&x}, {{&o, &rf}});
    c.segops([&](auto& seg, auto r) -> bool {
      SEGOPS_BENCH_CALL(segmented_rms_norm(c.exec, seg, x.v(r), o.v(R1{})))
    });
    T* opp = o.p();
    c.peers(true, [&](auto tag) {
      constexpr Peer P = decltype(tag)::value;
      return [=, red = PeerReduce<P, T>(o)] {
        red(id, n, [=](i64 i, auto&& add) {
          T a = 0;
          for (i64 k = 0; k < D; ++k) a += xp[i * D + k] * xp[i * D + k];
          add(0, a);
        });
        peer_for<P>(m, [=](i64 s) { opp[s] = cp[s] ? std::sqrt(opp[s] / T(cp[s])) : T(0); });
      };
    });
    return;
  }
  for (i64 s = 0; s < m; ++s) o.p()[s] = static_cast<T>(rf.val[s]);
  const T* op_ = o.p();
  auto nrm = [&](i64 s) {  // n_s = 1 / (c_s o_s), from the T-rounded forward output
    const double os = op_[s];
    return os != 0.0 ? 1.0 / (double(cp[s]) * os) : 0.0;
  };
  Arr<T> g = c.segv(3, 1);
  const T* gp = g.p();
  if (order == "bwd") {
    Arr<T> gx = c.elem_out(D);
    Ref rx(n * D);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        rx.val[i * D + k] = gp[id[i]] * nrm(id[i]) * xp[i * D + k];
        rx.mag[i * D + k] = std::abs(rx.val[i * D + k]);
      }
    c.begin("rms_norm", "bwd", {&x, &o, &g}, {{&gx, &rx}});
    c.segops([&](auto& seg, auto r) -> bool {
      SEGOPS_BENCH_CALL(
          segmented_rms_norm_backward(c.exec, seg, x.v(r), o.v(R1{}), g.v(R1{}), gx.v(r)))
    });
    T* gxp = gx.p();
    c.peers(false, [&](auto tag) {
      return [=] {
        peer_for<decltype(tag)::value>(n, [=](i64 i) {
          const i64 s = id[i];
          const T f = op_[s] != T(0) ? gp[s] / (T(cp[s]) * op_[s]) : T(0);
          for (i64 k = 0; k < D; ++k) gxp[i * D + k] = f * xp[i * D + k];
        });
      };
    });
    return;
  }
  Arr<T> u = c.elem(4, D), gg = c.seg_out(1), xq = c.elem_out(D), tmp = c.seg_out(1);
  const T* up = u.p();
  std::vector<double> ux(m, 0.0), uxa(m, 0.0);
  for (i64 i = 0; i < n; ++i)
    for (i64 k = 0; k < D; ++k) {
      ux[id[i]] += double(up[i * D + k]) * xp[i * D + k];
      uxa[id[i]] += std::abs(double(up[i * D + k]) * xp[i * D + k]);
    }
  Ref rg(m), rx(n * D);
  for (i64 s = 0; s < m; ++s) {
    rg.val[s] = nrm(s) * ux[s];
    rg.mag[s] = nrm(s) * uxa[s];
  }
  for (i64 i = 0; i < n; ++i) {
    const i64 s = id[i];
    const double gn = gp[s] * nrm(s), gn3c = gn * nrm(s) * nrm(s) * cp[s];
    for (i64 k = 0; k < D; ++k) {
      const i64 e = i * D + k;
      rx.val[e] = gn * up[e] - gn3c * ux[s] * xp[e];
      rx.mag[e] = std::abs(gn * up[e]) + std::abs(gn3c * xp[e]) * uxa[s];
    }
  }
  c.begin("rms_norm", "dbl", {&x, &o, &g, &u}, {{&gg, &rg}, {&xq, &rx}});
  c.segops([&](auto& seg, auto r) -> bool {
    SEGOPS_BENCH_CALL(segmented_rms_norm_double_backward(c.exec, seg, x.v(r), o.v(R1{}), g.v(R1{}),
                                                         u.v(r), gg.v(R1{}), xq.v(r)))
  });
  T *ggp = gg.p(), *xqp = xq.p(), *tp = tmp.p();
  c.peers(true, [&](auto tag) {
    constexpr Peer P = decltype(tag)::value;
    return [=, red = PeerReduce<P, T>(tmp)] {
      red(id, n, [=](i64 i, auto&& add) {
        T a = 0;
        for (i64 k = 0; k < D; ++k) a += up[i * D + k] * xp[i * D + k];
        add(0, a);
      });
      peer_for<P>(m, [=](i64 s) {
        const T ns = op_[s] != T(0) ? T(1) / (T(cp[s]) * op_[s]) : T(0);
        ggp[s] = ns * tp[s];
      });
      peer_for<P>(n, [=](i64 i) {
        const i64 s = id[i];
        const T ns = op_[s] != T(0) ? T(1) / (T(cp[s]) * op_[s]) : T(0);
        const T gn = gp[s] * ns, b = gn * ns * ns * T(cp[s]) * tp[s];
        for (i64 k = 0; k < D; ++k) xqp[i * D + k] = gn * up[i * D + k] - b * xp[i * D + k];
      });
    };
  });
}

/// matvec with square per-segment matrices: R = C = D.
template <class T, class I>
void bench_matvec(Case<T, I>& c, const std::string& order) {
  const i64 n = c.n, m = c.m, D = c.d, DD = D * D;
  const I* id = c.id();
  Arr<T> A = c.segv(2, DD), x = c.elem(1, D);
  const T *Ap = A.p(), *xp = x.p();
  // y_i[r] = sum_c M_s[r, c] v_i[c] (or the transpose), into double ref values and magnitudes.
  auto mv = [&](const T* Mp, const T* vp, bool trans, i64 i, Ref& ref, bool accumulate) {
    const i64 s = id[i];
    for (i64 r = 0; r < D; ++r) {
      double a = 0, b = 0;
      for (i64 cc = 0; cc < D; ++cc) {
        const double t =
            double(trans ? Mp[s * DD + cc * D + r] : Mp[s * DD + r * D + cc]) * vp[i * D + cc];
        a += t;
        b += std::abs(t);
      }
      if (accumulate) {
        ref.val[i * D + r] += a;
        ref.mag[i * D + r] += b;
      } else {
        ref.val[i * D + r] = a;
        ref.mag[i * D + r] = b;
      }
    }
  };
  if (order == "fwd") {
    Arr<T> o = c.elem_out(D);
    Ref ref(n * D);
    for (i64 i = 0; i < n; ++i) mv(Ap, xp, false, i, ref, false);
    c.begin("matvec", "fwd", {&A, &x}, {{&o, &ref}});
    c.segops([&](auto& seg, auto) -> bool {
      SEGOPS_BENCH_CALL(segmented_matvec(c.exec, seg, A.v3(D, D), x.v(R2{}), o.v(R2{})))
    });
    T* opp = o.p();
    c.peers(false, [&](auto tag) {
      return [=] {
        peer_for<decltype(tag)::value>(n, [=](i64 i) {
          const T* Ms = Ap + id[i] * DD;
          for (i64 r = 0; r < D; ++r) {
            T a = 0;
            for (i64 cc = 0; cc < D; ++cc) a += Ms[r * D + cc] * xp[i * D + cc];
            opp[i * D + r] = a;
          }
        });
      };
    });
  } else if (order == "bwd") {
    Arr<T> g = c.elem(3, D), gx = c.elem_out(D), gA = c.seg_out(DD);
    const T* gp = g.p();
    Ref rx(n * D), rA(m * DD);
    for (i64 i = 0; i < n; ++i) {
      mv(Ap, gp, true, i, rx, false);
      for (i64 r = 0; r < D; ++r)
        for (i64 cc = 0; cc < D; ++cc) {
          const double t = double(gp[i * D + r]) * xp[i * D + cc];
          rA.val[id[i] * DD + r * D + cc] += t;
          rA.mag[id[i] * DD + r * D + cc] += std::abs(t);
        }
    }
    c.begin("matvec", "bwd", {&A, &x, &g}, {{&gx, &rx}, {&gA, &rA}});
    c.segops([&](auto& seg, auto) -> bool {
      SEGOPS_BENCH_CALL(segmented_matvec_backward(c.exec, seg, A.v3(D, D), x.v(R2{}), g.v(R2{}),
                                                  gx.v(R2{}), gA.v3(D, D)))
    });
    T* gxp = gx.p();
    c.peers(true, [&](auto tag) {
      return [=, red = PeerReduce<decltype(tag)::value, T>(gA)] {
        red(id, n, [=](i64 i, auto&& add) {
          const T* Ms = Ap + id[i] * DD;
          for (i64 cc = 0; cc < D; ++cc) {
            T a = 0;
            for (i64 r = 0; r < D; ++r) a += Ms[r * D + cc] * gp[i * D + r];
            gxp[i * D + cc] = a;
          }
          for (i64 r = 0; r < D; ++r)
            for (i64 cc = 0; cc < D; ++cc) add(r * D + cc, gp[i * D + r] * xp[i * D + cc]);
        });
      };
    });
  } else {
    Arr<T> g = c.elem(3, D), u = c.elem(4, D), W = c.segv(5, DD);
    Arr<T> gg = c.elem_out(D), xq = c.elem_out(D), Aq = c.seg_out(DD);
    const T *gp = g.p(), *up = u.p(), *Wp = W.p();
    Ref rg(n * D), rx(n * D), rA(m * DD);
    for (i64 i = 0; i < n; ++i) {
      mv(Ap, up, false, i, rg, false);
      mv(Wp, xp, false, i, rg, true);
      mv(Wp, gp, true, i, rx, false);
      for (i64 r = 0; r < D; ++r)
        for (i64 cc = 0; cc < D; ++cc) {
          const double t = double(gp[i * D + r]) * up[i * D + cc];
          rA.val[id[i] * DD + r * D + cc] += t;
          rA.mag[id[i] * DD + r * D + cc] += std::abs(t);
        }
    }
    c.begin("matvec", "dbl", {&A, &x, &g, &u, &W}, {{&gg, &rg}, {&xq, &rx}, {&Aq, &rA}});
    c.segops([&](auto& seg, auto) -> bool {
      SEGOPS_BENCH_CALL(segmented_matvec_double_backward(c.exec, seg, A.v3(D, D), x.v(R2{}),
                                                         g.v(R2{}), u.v(R2{}), W.v3(D, D),
                                                         gg.v(R2{}), xq.v(R2{}), Aq.v3(D, D)))
    });
    T *ggp = gg.p(), *xqp = xq.p();
    c.peers(true, [&](auto tag) {
      return [=, red = PeerReduce<decltype(tag)::value, T>(Aq)] {
        red(id, n, [=](i64 i, auto&& add) {
          const T *As = Ap + id[i] * DD, *Ws = Wp + id[i] * DD;
          for (i64 r = 0; r < D; ++r) {
            T a = 0, b = 0;
            for (i64 cc = 0; cc < D; ++cc) {
              a += As[r * D + cc] * up[i * D + cc] + Ws[r * D + cc] * xp[i * D + cc];
              b += Ws[cc * D + r] * gp[i * D + cc];
            }
            ggp[i * D + r] = a;
            xqp[i * D + r] = b;
          }
          for (i64 r = 0; r < D; ++r)
            for (i64 cc = 0; cc < D; ++cc) add(r * D + cc, gp[i * D + r] * up[i * D + cc]);
        });
      };
    });
  }
}

// ---------------------------------------------------------------- sweeps

struct OpOrder {
  const char* op;
  const char* order;
};
// Double backward of the linear family runs the same kernels as a forward (sum's is a sum,
// broadcast's a broadcast); it is measured in the full sweep only.
const std::vector<OpOrder> kQuickOps = {
    {"sum", "fwd"},       {"sum", "bwd"},       {"mean", "fwd"},   {"mean", "bwd"},
    {"broadcast", "fwd"}, {"broadcast", "bwd"}, {"dot", "fwd"},    {"dot", "bwd"},
    {"mul", "fwd"},       {"mul", "bwd"},       {"mul", "dbl"},    {"rms_norm", "fwd"},
    {"rms_norm", "bwd"},  {"rms_norm", "dbl"},  {"matvec", "fwd"}, {"matvec", "bwd"},
    {"matvec", "dbl"}};
const std::vector<OpOrder> kExtraFullOps = {
    {"sum", "dbl"}, {"mean", "dbl"}, {"broadcast", "dbl"}, {"dot", "dbl"}};

template <class T, class I>
void bench_one(Case<T, I>& c, const OpOrder& oo) {
  const std::string op = oo.op, order = oo.order;
  if (op == "sum" || op == "mean" || op == "broadcast")
    bench_linear(c, op, order);
  else if (op == "dot")
    bench_dot(c, order);
  else if (op == "mul")
    bench_mul(c, order);
  else if (op == "rms_norm")
    bench_rms_norm(c, order);
  else if (op == "matvec")
    bench_matvec(c, order);
}

struct CaseSpec {
  bool dbl, i64ids;
  i64 n, len;
  sb::Regime regime;
  bool sorted;
  i64 d;
  bool det, peers;
  std::vector<OpOrder> ops;
};

template <class T, class I>
void run_spec(const CaseSpec& cs, const Options& opt) {
  Case<T, I> c(opt, cs.n, cs.len, cs.regime, cs.sorted, cs.d, cs.det, cs.peers);
  for (const auto& oo : cs.ops) bench_one(c, oo);
}

void run_spec(const CaseSpec& cs, const Options& opt) {
  if (cs.dbl) {
    if (cs.i64ids)
      run_spec<double, std::int64_t>(cs, opt);
    else
      run_spec<double, std::int32_t>(cs, opt);
  } else {
    if (cs.i64ids)
      run_spec<float, std::int64_t>(cs, opt);
    else
      run_spec<float, std::int32_t>(cs, opt);
  }
}

bool wanted(const Options& opt, const char* op) { return opt.ops.empty() || opt.ops.count(op); }

std::vector<OpOrder> filter(const Options& opt, const std::vector<OpOrder>& ops,
                            const std::set<std::string>& only = {}) {
  std::vector<OpOrder> r;
  for (auto& o : ops)
    if (wanted(opt, o.op) && (only.empty() || only.count(std::string(o.op) + "/" + o.order)))
      r.push_back(o);
  return r;
}

std::vector<CaseSpec> make_sweep(const Options& opt) {
  std::vector<CaseSpec> specs;
  const i64 big = i64(1) << 25;
  auto add = [&](CaseSpec s) {
    if (s.n > opt.max_n || s.ops.empty()) return;
    // Keep the largest case under ~8 GB: inputs, outputs and the double references.
    const double elem_bytes = double(s.n) * s.d * (s.dbl ? 8 : 4);
    if (elem_bytes * 12 > 8e9) {
      std::ostringstream os;
      os << "skipped: N=" << s.n << " D=" << s.d << " (" << (s.dbl ? "double" : "float")
         << ") needs more than 8 GB for inputs, outputs and references";
      note(os.str());
      return;
    }
    specs.push_back(std::move(s));
  };
  if (!opt.full) {
    // D = 1 for the ops whose natural data is scalar too; rms_norm and matvec at D = 3 only.
    const std::set<std::string> vec_only = {"rms_norm/fwd", "rms_norm/bwd", "rms_norm/dbl",
                                            "matvec/fwd",   "matvec/bwd",   "matvec/dbl"};
    std::set<std::string> scalar_ok;
    for (auto& o : kQuickOps)
      if (!vec_only.count(std::string(o.op) + "/" + o.order))
        scalar_ok.insert(std::string(o.op) + "/" + o.order);
    auto all = filter(opt, kQuickOps);
    auto scalar = filter(opt, kQuickOps, scalar_ok);
    for (bool sorted : {true, false}) {
      add({false, false, 100000, 3, sb::Regime::uniform, sorted, 3, false, true, all});
      add({false, false, 1000000, 3, sb::Regime::uniform, sorted, 1, false, true, scalar});
      add({false, false, 1000000, 3, sb::Regime::uniform, sorted, 3, false, true, all});
      // Long segments (L = 1000) at N = 1e6, sorted only: the unsorted ones go to --full (time
      // budget).
      if (sorted)
        add({false, false, 1000000, 1000, sb::Regime::uniform, sorted, 3, false, true, all});
    }
    // The copy-bandwidth targets: sorted float forward/backward of sum, mean, broadcast, dot, mul.
    const std::set<std::string> target = {"sum/fwd",       "sum/bwd",       "mean/fwd", "mean/bwd",
                                          "broadcast/fwd", "broadcast/bwd", "dot/fwd",  "dot/bwd",
                                          "mul/fwd",       "mul/bwd"};
    for (i64 d : {i64(1), i64(3)})
      add({false, false, big, 3, sb::Regime::uniform, true, d, false, true,
           filter(opt, kQuickOps, target)});
    // The same at L = 1000 (a few thousand atoms per system), SegOps only (time budget).
    for (i64 d : {i64(1), i64(3)})
      add({false, false, big, 1000, sb::Regime::uniform, true, d, false, false,
           filter(opt, kQuickOps, target)});
    // Deterministic vs default on unsorted ids at the largest N (reductions only; peers skipped).
    const std::set<std::string> det = {"sum/fwd", "dot/fwd"};
    add({false, false, big, 3, sb::Regime::uniform, false, 3, true, false,
         filter(opt, kQuickOps, det)});
    return specs;
  }
  std::vector<OpOrder> all = filter(opt, kQuickOps);
  for (auto& o : filter(opt, kExtraFullOps)) all.push_back(o);
  for (bool dbl : {false, true})
    for (bool i64ids : {false, true})
      for (i64 n : {i64(1000), i64(10000), i64(100000), i64(1000000), i64(10000000), big})
        for (i64 d : {i64(1), i64(3), i64(64)})
          for (bool sorted : {true, false}) {
            for (i64 len : {i64(1), i64(3), i64(30), i64(1000), n})
              add({dbl, i64ids, n, len, sb::Regime::uniform, sorted, d, true, true, all});
            add({dbl, i64ids, n, 3, sb::Regime::skew, sorted, d, true, true, all});
          }
  return specs;
}

// ---------------------------------------------------------------- copy bandwidth and overhead

void measure_copy(const Options& opt) {
  if (!g_copy) g_copy.emplace();
  const StreamCopy& copy = *g_copy;
  Row row{"copy", "fwd", "float", "none", "none", StreamCopy::n, 0, 1};
  const double t1 = time_median(copy, opt);
  const double t2 = time_median([&] { copy.deep(); }, opt);
  const double bytes = StreamCopy::bytes;
  g_out.copy_gbps = bytes / std::min(t1, t2) / 1e9;
  write_row(row, "stream_copy", t1, bytes);
  write_row(row, "deep_copy", t2, bytes);
  std::fprintf(stderr,
               "copy bandwidth: stream_copy %.2f GB/s, deep_copy %.2f GB/s (reference %.2f)\n",
               bytes / t1 / 1e9, bytes / t2 / 1e9, g_out.copy_gbps);
}

/// Per-call host overhead: sorted sum forward with N = 1000 on Kokkos::Serial, SegOps vs the
/// plain loop (whose time is the work itself).
void measure_overhead(const Options& opt) {
#ifdef KOKKOS_ENABLE_SERIAL
  using S = Kokkos::Serial;
  const i64 n = 1000, m = sb::num_segments(n, 3, sb::Regime::uniform);
  auto ids_v = sb::make_ids<std::int32_t>(n, m, sb::Regime::uniform, true);
  Kokkos::View<std::int32_t*, Host> ids("bench::ids", n);
  std::copy(ids_v.begin(), ids_v.end(), ids.data());
  Kokkos::View<float*, Host> x("bench::x", n), o("bench::o", m), p("bench::p", m);
  for (i64 i = 0; i < n; ++i) x(i) = float(sb::value(i, 1));
  S serial;
  segops::Segments<std::int32_t, S> seg(serial, ids, m);
  Row row{"sum", "fwd", "float", "int32", "sorted", n, m, 1};
  const double bytes = n * 4.0 + n * 4.0 + m * 4.0;
  const double t_segops = time_median([&] { segops::segmented_sum(serial, seg, x, o); }, opt);
  const double t_loop = time_median(
      [&] {
        std::fill(p.data(), p.data() + m, 0.f);
        for (i64 i = 0; i < n; ++i) p(ids(i)) += x(i);
      },
      opt);
  write_row(row, "segops_serial_space", t_segops, bytes);
  write_row(row, "serial", t_loop, bytes);
  std::ostringstream os;
  os << "overhead: segops sum fwd on Kokkos::Serial, N=1000: " << t_segops * 1e6
     << " us per call; plain serial loop " << t_loop * 1e6 << " us; difference "
     << (t_segops - t_loop) * 1e6 << " us";
  note(os.str());
#else
  (void)opt;
  note("missing: overhead measurement needs Kokkos::Serial in the Kokkos build");
#endif
}

void usage() {
  std::printf(
      "bench_segops [--full] [--min-time S] [--min-runs K] [--ops a,b] [--max-n N]\n"
      "             [--csv FILE] [--notes FILE] [--no-overhead] [--quiet] [Kokkos options]\n"
      "  quick sweep by default (a few minutes); --full runs the whole sweep (hours).\n");
}

}  // namespace

int main(int argc, char** argv) {
  Kokkos::ScopeGuard guard(argc, argv);
  Options opt;
  for (int k = 1; k < argc; ++k) {
    const std::string a = argv[k];
    auto next = [&]() -> std::string {
      if (k + 1 >= argc) {
        usage();
        std::exit(2);
      }
      return argv[++k];
    };
    if (a == "--full")
      opt.full = true;
    else if (a == "--min-time")
      opt.min_time = std::stod(next());
    else if (a == "--min-runs")
      opt.min_runs = std::stoi(next());
    else if (a == "--csv")
      opt.csv = next();
    else if (a == "--notes")
      opt.notes = next();
    else if (a == "--max-n")
      opt.max_n = std::stoll(next());
    else if (a == "--no-overhead")
      opt.overhead = false;
    else if (a == "--quiet")
      opt.progress = false;
    else if (a == "--ops") {
      std::stringstream ss(next());
      for (std::string t; std::getline(ss, t, ',');) opt.ops.insert(t);
    } else if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (a.rfind("--kokkos", 0) != 0) {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      usage();
      return 2;
    }
  }
  if (opt.min_time < 0) opt.min_time = opt.full ? 0.2 : 0.05;
  omp_set_num_threads(Exec().concurrency());
  g_out.csv = std::fopen(opt.csv.c_str(), "w");
  g_out.notes = std::fopen(opt.notes.c_str(), "w");
  if (!g_out.csv || !g_out.notes) {
    std::fprintf(stderr, "cannot open %s or %s\n", opt.csv.c_str(), opt.notes.c_str());
    return 2;
  }
  std::fprintf(g_out.csv,
               "op,order,dtype,index_type,N,M,D,sorted,impl,median_s,bytes,gbps,copy_fraction\n");
  std::fprintf(
      stderr,
      "bench_segops: %s sweep on %s with %d threads, min %.2f s and %d runs per measurement\n",
      opt.full ? "full" : "quick", Exec::name(), int(Exec().concurrency()), opt.min_time,
      opt.min_runs);
  measure_copy(opt);
  if (opt.overhead) measure_overhead(opt);
  const auto specs = make_sweep(opt);
  for (auto& s : specs) g_out.total += int(s.ops.size());
  for (auto& s : specs) {
    // This machine's memory bandwidth drifts over a run (a shared VM: copy 38-86 GB/s on one
    // day), so the copy is measured again right before each N = 2^25 case (the copy-bandwidth
    // targets), and every measurement of that case times it alternately with the op: each row's
    // copy_fraction is against the copy timed with it (time_median_paired).
    g_paired = s.n >= (i64(1) << 25);
    if (g_paired) measure_copy(opt);
    run_spec(s, opt);
  }
  g_copy.reset();
  std::fclose(g_out.csv);
  std::fclose(g_out.notes);
  std::fprintf(stderr, "bench_segops: done (%d op-cases, %d wrong results)\n", g_out.done,
               g_out.wrong);
  return g_out.wrong ? 1 : 0;
}
