// SPDX-License-Identifier: Apache-2.0
// SegOps CPU benchmark: every op against C++ peers (serial loop, OpenMP atomics, Kokkos ScatterView
// duplicated/atomic) on the same data, plus a STREAM-style copy measured in the same run.
// Writes CSV rows op,order,dtype,index_type,N,M,D,sorted,impl,median_s,bytes,gbps,copy_fraction.
// Run with --help for the options; scripts/bench.sh is the usual driver. The shared harness is
// bench_harness.hpp; the other op families are in bench_ops_*.cpp (compiled in parallel).
#include "bench_harness.hpp"

namespace bench {

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
// The rest of the catalogue (bench_ops_bilinear.cpp, bench_ops_reductions.cpp): in the quick sweep
// at N = 1e6, L = 3, rows of 3 only; everywhere in the full sweep.
const std::vector<OpOrder> kMoreOps = {{"inner_products", "fwd"},
                                       {"inner_products", "bwd"},
                                       {"inner_products", "dbl"},
                                       {"axpby", "fwd"},
                                       {"axpby", "bwd"},
                                       {"axpby", "dbl"},
                                       {"axpy", "fwd"},
                                       {"axpy", "bwd"},
                                       {"axpy", "dbl"},
                                       {"add", "fwd"},
                                       {"add", "bwd"},
                                       {"add", "dbl"},
                                       {"component_sum", "fwd"},
                                       {"component_sum", "bwd"},
                                       {"component_sum", "dbl"},
                                       {"count", "fwd"},
                                       {"segments", "build"},
                                       {"max", "fwd"},
                                       {"max", "bwd"},
                                       {"max", "dbl"},
                                       {"min", "fwd"},
                                       {"min", "bwd"},
                                       {"min", "dbl"},
                                       {"max_norm", "fwd"},
                                       {"max_norm", "bwd"},
                                       {"max_norm", "dbl"}};

template <class T, class I>
void bench_one(Case<T, I>& c, const OpOrder& oo) {
  const std::string op = oo.op, order = oo.order;
  if (op == "sum" || op == "mean" || op == "broadcast")
    bench_linear(c, op, order);
  else if (op == "dot")
    bench_dot(c, order);
  else if (!bench_scaled(c, op, order) && !bench_bilinear(c, op, order) &&
           !bench_reductions(c, op, order))
    note("bench_segops: no benchmark for " + op + " " + order);
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

/// The comma-separated fields of an option's value (--ops, --case).
std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> f;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');) f.push_back(t);
  return f;
}

/// The case named by --case (its CSV key, spelled as the CSV spells it), SegOps only; exits with a
/// message on a key that names no op-order or no case of the uniform or skewed regime.
CaseSpec named_case(const std::string& key) {
  const auto f = split_commas(key);
  auto fail = [&](const char* why) {
    std::fprintf(stderr, "--case %s: %s (expected op,order,dtype,index_type,N,M,D,sorted)\n",
                 key.c_str(), why);
    std::exit(2);
  };
  if (f.size() != 8) fail("eight comma-separated fields");
  std::vector<OpOrder> ops;
  for (const auto* list : {&kQuickOps, &kExtraFullOps, &kMoreOps})
    for (const auto& o : *list)
      if (f[0] == o.op && f[1] == o.order) ops.push_back(o);
  if (ops.empty()) fail("no such op and order");
  if (f[2] != "float" && f[2] != "double") fail("dtype is float or double");
  if (f[3] != "int32" && f[3] != "int64") fail("index_type is int32 or int64");
  const std::set<std::string> orders = {"sorted", "unsorted", "skew-sorted", "skew-unsorted"};
  if (!orders.count(f[7])) fail("sorted is sorted, unsorted, skew-sorted or skew-unsorted");
  auto count = [&](const std::string& t) -> i64 {
    char* end = nullptr;
    const long long v = std::strtoll(t.c_str(), &end, 10);
    if (t.empty() || *end != '\0' || v < 1) fail("N, M and D are positive integers");
    return v;
  };
  const i64 n = count(f[4]), m = count(f[5]), d = count(f[6]);
  const auto regime = f[7].rfind("skew-", 0) == 0 ? sb::Regime::skew : sb::Regime::uniform;
  const bool sorted = f[7] == "sorted" || f[7] == "skew-sorted";
  const i64 len = m > 0 ? n / m : 0;
  if (len < 1 || sb::num_segments(n, len, regime) != m) fail("N and M of no regime");
  return {f[2] == "double", f[3] == "int64", n, len, regime, sorted, d, false, false, {ops[0]}};
}

std::vector<CaseSpec> make_sweep(const Options& opt) {
  std::vector<CaseSpec> specs;
  if (!opt.only_case.empty()) return {named_case(opt.only_case)};
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
      // (unsorted: SegOps with the deterministic option too, its descriptor build among them)
      add({false, false, 1000000, 3, sb::Regime::uniform, sorted, 3, !sorted, true,
           filter(opt, kMoreOps)});
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
    // (L = 1000 there, a few thousand atoms per system, runs in --full: the 5-minute budget.)
    // Deterministic vs default on unsorted ids at the largest N (reductions only: sums, which
    // take the bucketed schedule there, and max_norm, whose deterministic tiles gather rows
    // through the permutation); its peers run in --full (Case::full_only).
    const std::set<std::string> det = {"sum/fwd", "dot/fwd", "max_norm/fwd"};
    auto det_ops = filter(opt, kQuickOps, det);
    for (auto& o : filter(opt, kMoreOps, det)) det_ops.push_back(o);
    add({false, false, big, 3, sb::Regime::uniform, false, 3, true, true, det_ops});
    return specs;
  }
  std::vector<OpOrder> all = filter(opt, kQuickOps);
  for (auto& o : filter(opt, kExtraFullOps)) all.push_back(o);
  for (auto& o : filter(opt, kMoreOps)) all.push_back(o);
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
      "             [--case op,order,dtype,index_type,N,M,D,sorted [--serve]]\n"
      "  quick sweep by default (a few minutes); --full runs the whole sweep (hours);\n"
      "  --case times SegOps alone on that one case (no copy, overhead or peers);\n"
      "  --serve samples it on request (\"sample RUNS SECONDS [WARM]\" lines on stdin; peers.py);\n"
      "  without --csv and --notes the results go to bench_cpp.csv and bench_notes.txt in the\n"
      "  working directory.\n");
}

}  // namespace bench

int main(int argc, char** argv) {
  using namespace bench;
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
    else if (a == "--case")
      opt.only_case = next();
    else if (a == "--serve")
      opt.serve = true;
    else if (a == "--ops") {
      for (const auto& t : split_commas(next())) opt.ops.insert(t);
    } else if (a == "--help" || a == "-h") {
      usage();
      return 0;
    } else if (a.rfind("--kokkos", 0) != 0) {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      usage();
      return 2;
    }
  }
  if (opt.serve && opt.only_case.empty()) {
    std::fprintf(stderr, "--serve needs --case\n");
    usage();
    return 2;
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
  const bool one_case = !opt.only_case.empty();
  if (!one_case) measure_copy(opt);
  if (opt.overhead && !one_case) measure_overhead(opt);
  const auto specs = make_sweep(opt);
  for (auto& s : specs) g_out.total += int(s.ops.size());
  for (auto& s : specs) {
    // This machine's memory bandwidth drifts over a run (a shared VM: copy 38-86 GB/s on one
    // day), so the copy is measured again right before each sorted N = 2^25 case (the
    // copy-bandwidth targets), and every SegOps measurement of that case times it alternately with
    // the op: such a row's copy_fraction is against the copy timed with it (time_median_paired).
    g_paired = s.n >= (i64(1) << 25) && s.sorted && !one_case;
    if (g_paired) measure_copy(opt);
    run_spec(s, opt);
  }
  g_copy.reset();
  g_same_bytes = {};
  std::fclose(g_out.csv);
  std::fclose(g_out.notes);
  std::fprintf(stderr, "bench_segops: done (%d op-cases, %d wrong results)\n", g_out.done,
               g_out.wrong);
  return g_out.wrong ? 1 : 0;
}
