// SPDX-License-Identifier: Apache-2.0
// The CPU benchmark's component_sum, count, max, min, max_norm and the descriptor build (see
// bench_segops.cpp). Inputs come from fixed streams (x=1, g=3, u=4; perf_tests/README.md).
#include "bench_harness.hpp"

namespace bench {

template <class T, class I>
void bench_component_sum(Case<T, I>& c, const std::string& order) {
  const i64 n = c.n, m = c.m, D = c.d;
  const I* id = c.id();
  if (order == "bwd") {
    Arr<T> g = c.segv(3, 1), gx = c.elem_out(D);
    const T* gp = g.p();
    Ref r(n * D);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) r.add(i * D + k, gp[id[i]]);
    c.begin("component_sum", "bwd", {&g}, {{&gx, &r}});
    c.segops([&](auto& seg, auto) -> bool {
      SEGOPS_BENCH_CALL(segmented_component_sum_backward(c.exec, seg, g.v(R1{}), gx.v(R2{})))
    });
    T* gxp = gx.p();
    c.peers(false, [&](auto tag) {
      return [=] {
        peer_for<decltype(tag)::value>(n, [=](i64 i) {
          const T gs = gp[id[i]];
          for (i64 k = 0; k < D; ++k) gxp[i * D + k] = gs;
        });
      };
    });
    return;
  }
  // fwd: o_s = sum of x's components; dbl: gg_s = sum of u's components (the same kernel)
  const bool fwd = order == "fwd";
  Arr<T> x = c.elem(fwd ? 1 : 4, D), o = c.seg_out(1);
  const T* xp = x.p();
  Ref r(m);
  for (i64 i = 0; i < n; ++i)
    for (i64 k = 0; k < D; ++k) r.add(id[i], xp[i * D + k]);
  c.begin("component_sum", order.c_str(), {&x}, {{&o, &r}});
  c.segops([&](auto& seg, auto) -> bool {
    if (fwd) {
      SEGOPS_BENCH_CALL(segmented_component_sum(c.exec, seg, x.v(R2{}), o.v(R1{})))
    } else {
      SEGOPS_BENCH_CALL(segmented_component_sum_double_backward(c.exec, seg, x.v(R2{}), o.v(R1{})))
    }
  });
  c.peers(true, [&](auto tag) {
    return [=, red = PeerReduce<decltype(tag)::value, T>(o)] {
      red(id, n, [=](i64 i, auto&& add) {
        T t = 0;
        for (i64 k = 0; k < D; ++k) t += xp[i * D + k];
        add(0, t);
      });
    };
  });
}

/// The count op's peers: out(s) = the number of elements with id s, as each peer would count them
/// (ScatterView: the duplicated one, built once as a user keeps it).
template <Peer P, class I>
struct PeerCount {
  using Counts = Kokkos::View<i64*, Host>;
  using Sv = Kokkos::Experimental::ScatterView<
      i64*, Kokkos::LayoutRight, Exec, Kokkos::Experimental::ScatterSum,
      Kokkos::Experimental::ScatterDuplicated, Kokkos::Experimental::ScatterNonAtomic>;
  Counts out;
  Sv sv;
  explicit PeerCount(Counts o) : out(o) {
    if constexpr (P == Peer::sv_dup) sv = Sv(out);
  }
  void operator()(const I* id, i64 n) const {
    const i64 m = i64(out.extent(0));
    i64* op = out.data();
    if constexpr (P == Peer::sv_dup) {
      Kokkos::deep_copy(Exec(), out, i64(0));
      Sv s_view = sv;
      s_view.reset();
      Kokkos::parallel_for("bench::count", Kokkos::RangePolicy<Exec, Kokkos::IndexType<i64>>(0, n),
                           [=](i64 i) { s_view.access()(id[i]) += 1; });
      Counts o = out;
      Kokkos::Experimental::contribute(o, s_view);
    } else {
      peer_for<P>(m, [=](i64 s) { op[s] = 0; });
      peer_for<P>(n, [=](i64 i) {
        if constexpr (P == Peer::omp_atomic) {
#pragma omp atomic
          op[id[i]] += 1;
        } else {
          op[id[i]] += 1;
        }
      });
    }
  }
};

template <class T, class I>
void bench_count(Case<T, I>& c) {
  const i64 n = c.n, m = c.m;
  const I* id = c.id();
  using Counts = Kokkos::View<i64*, Host>;
  Counts out(Kokkos::view_alloc(Kokkos::WithoutInitializing, "bench::counts"), m);
  i64* op = out.data();
  c.begin("count", "fwd", {}, {}, double(m) * sizeof(i64));
  c.prepare = [&] { std::fill(op, op + m, i64(-1)); };
  c.extra_checks.push_back([&] {
    for (i64 s = 0; s < m; ++s)
      if (op[s] != c.cnt[s]) return std::numeric_limits<double>::infinity();
    return 0.0;
  });
  c.segops([&](auto& seg, auto) -> bool { SEGOPS_BENCH_CALL(segmented_count(c.exec, seg, out)) });
  c.peers(true, [&](auto tag) {
    return [=, count = PeerCount<decltype(tag)::value, I>(out)] { count(id, n); };
  });
}

/// The descriptor itself (op "segments", order "build"): a new segops::Segments from the ids, as a
/// code whose ids change every step builds one (the old one freed in the call); row segops_det
/// with the deterministic option (unsorted ids: its stable permutation too). Checked: counts,
/// offsets and (segops_det) the permutation. Minimal bytes: the ids read, counts (M) and offsets
/// (M + 1) written as int64 (a permutation would add 8 N). Peers build the same counts and offsets
/// as a user would for CSR: the count op's loops, then an exclusive scan.
template <class T, class I>
void bench_segments_build(Case<T, I>& c) {
  const i64 n = c.n, m = c.m;
  const I* id = c.id();
  using Counts = Kokkos::View<i64*, Host>;
  Counts counts(Kokkos::view_alloc(Kokkos::WithoutInitializing, "bench::counts"), m),
      offsets(Kokkos::view_alloc(Kokkos::WithoutInitializing, "bench::offsets"), m + 1);
  c.begin("segments", "build", {}, {}, double(2 * m + 1) * sizeof(i64));
  std::optional<segops::Segments<I, Exec>> built;
  const i64 *got_c = nullptr, *got_o = nullptr, *got_p = nullptr;  // the call's results
  c.prepare = [&] {
    std::fill(counts.data(), counts.data() + m, i64(-1));
    std::fill(offsets.data(), offsets.data() + m + 1, i64(-1));
    built.reset();
    got_c = got_o = got_p = nullptr;
  };
  c.extra_checks.push_back([&] {
    const double bad = std::numeric_limits<double>::infinity();
    if (!got_c || !got_o) return bad;
    i64 p = 0;
    for (i64 s = 0; s < m; ++s) {
      if (got_c[s] != c.cnt[s] || got_o[s] != p) return bad;
      p += c.cnt[s];
    }
    if (got_o[m] != p) return bad;
    if (got_p)  // stable: each segment's elements in ascending index order
      for (i64 s = 0; s < m; ++s)
        for (i64 j = got_o[s]; j < got_o[s + 1]; ++j)
          if (id[got_p[j]] != s || (j > got_o[s] && got_p[j] <= got_p[j - 1])) return bad;
    return 0.0;
  });
  c.segops([&](auto& seg, auto) -> bool {
    const bool det = c.seg_det && &seg == &*c.seg_det;
    built.emplace(c.exec, c.ids, m, segops::SegmentsOptions{.deterministic = det});
    got_c = built->counts().data();
    got_o = built->offsets().data();
    if (det && !built->sorted()) got_p = built->permutation().data();
    return true;
  });
  built.reset();
  c.peers(true, [&](auto tag) {
    return [&, count = PeerCount<decltype(tag)::value, I>(counts)] {
      count(id, n);
      i64* o = offsets.data();
      const i64* k = counts.data();
      i64 p = 0;
      for (i64 s = 0; s < m; ++s) {
        o[s] = p;
        p += k[s];
      }
      o[m] = p;
      got_c = k;
      got_o = o;
    };
  });
}

/// Row segops_arg of a max, min or max_norm forward: the call with an arg, the one a training
/// step makes (the backward orders take the arg), SegOps alone (no peer returns one) on the
/// default descriptor. Besides the values (the case's outputs), its int64 indices (M, w) are
/// checked: is_arg(s, k, a) for every non-empty segment s (a an element of s whose value is the
/// result; for max and min per component also the first such), -1 for an empty one. call(arg)
/// makes the call; the row's bytes are the case's (the indices written are not counted).
template <class T, class I, class Call, class IsArg>
void measure_with_arg(Case<T, I>& c, i64 w, const Call& call, const IsArg& is_arg) {
  using Args = Kokkos::View<i64**, Kokkos::LayoutRight, Host>;
  Args arg("bench::arg_out", c.m, w);
  i64* ap = arg.data();
  c.prepare = [=, m = c.m] { std::fill(ap, ap + m * w, i64(-2)); };
  c.extra_checks.push_back([&] {
    for (i64 s = 0; s < c.m; ++s)
      for (i64 k = 0; k < w; ++k) {
        const i64 a = ap[s * w + k];
        if (c.cnt[s] == 0 ? a != -1 : !(a >= 0 && a < c.n && c.id()[a] == I(s) && is_arg(s, k, a)))
          return std::numeric_limits<double>::infinity();
      }
    return 0.0;
  });
  c.measure("segops_arg", [&c, call, arg]() -> bool {
    call(arg);
    c.exec.fence();
    return true;
  });
  c.extra_checks.pop_back();
  c.prepare = nullptr;
}

/// The index of each segment's max or min per component (D of them per row of x): the lowest on
/// ties, -1 for an empty segment. The reference for the forward's segops_arg row, and the arg the
/// backward orders take.
template <class T, class I>
std::vector<i64> extremum_arg(const I* id, const T* xp, i64 n, i64 m, i64 D, bool is_max) {
  std::vector<i64> arg(m * D, -1);
  for (i64 i = 0; i < n; ++i)
    for (i64 k = 0; k < D; ++k) {
      i64& a = arg[id[i] * D + k];
      const T t = xp[i * D + k];
      if (a < 0 || (is_max ? t > xp[a * D + k] : t < xp[a * D + k])) a = i;
    }
  return arg;
}

/// max and min per component; the backward orders take the arg of the forward (extremum_arg).
template <class T, class I>
void bench_extremum(Case<T, I>& c, const std::string& op, const std::string& order) {
  const i64 n = c.n, m = c.m, D = c.d;
  const I* id = c.id();
  const bool is_max = op == "max";
  Arr<T> x = c.elem(1, D);
  const T* xp = x.p();
  const double empty = (is_max ? -1 : 1) * std::numeric_limits<double>::infinity();
  if (order == "fwd") {
    Arr<T> o = c.seg_out(D);
    Ref r(m * D);
    std::fill(r.val.begin(), r.val.end(), empty);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        double& v = r.val[id[i] * D + k];
        const double t = xp[i * D + k];
        v = is_max ? std::max(v, t) : std::min(v, t);
      }
    for (i64 k = 0; k < m * D; ++k) r.mag[k] = std::abs(r.val[k]);
    c.begin(op.c_str(), "fwd", {&x}, {{&o, &r}});
    c.segops([&](auto& seg, auto rk) -> bool {
      if (is_max) {
        SEGOPS_BENCH_CALL(segmented_max(c.exec, seg, x.v(rk), o.v(rk)))
      } else {
        SEGOPS_BENCH_CALL(segmented_min(c.exec, seg, x.v(rk), o.v(rk)))
      }
    });
    // with an arg: the first element attaining each result
    const std::vector<i64> first = extremum_arg(id, xp, n, m, D, is_max);
    measure_with_arg(
        c, D,
        [&c, is_max, xv = x.v(R2{}), ov = o.v(R2{})](const auto& arg) {
          if (is_max)
            segops::segmented_max(c.exec, *c.seg, xv, ov, arg);
          else
            segops::segmented_min(c.exec, *c.seg, xv, ov, arg);
        },
        [&](i64 s, i64 k, i64 a) { return first[s * D + k] == a; });
    auto peers = [&](auto op_tag) {
      using Op = decltype(op_tag);
      c.peers(true, [&](auto tag) {
        return [=, red = PeerReduce<decltype(tag)::value, T, Op>(o)] {
          red(id, n, [=](i64 i, auto&& add) {
            for (i64 k = 0; k < D; ++k) add(k, xp[i * D + k]);
          });
        };
      });
    };
    if (is_max)
      peers(Kokkos::Experimental::ScatterMax{});
    else
      peers(Kokkos::Experimental::ScatterMin{});
    return;
  }
  using Args = Kokkos::View<i64**, Kokkos::LayoutRight, Host>;
  Args arg("bench::arg", m, D);
  i64* argp = arg.data();
  const std::vector<i64> ref_arg = extremum_arg(id, xp, n, m, D, is_max);
  std::copy(ref_arg.begin(), ref_arg.end(), argp);
  auto arg_v = [&](auto rk) {
    if constexpr (std::is_same_v<decltype(rk), R1>)
      return Kokkos::View<i64*, Host, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(argp, m);
    else
      return Kokkos::View<i64**, Kokkos::LayoutRight, Host,
                          Kokkos::MemoryTraits<Kokkos::Unmanaged>>(argp, m, D);
  };
  const double arg_bytes = double(m) * D * sizeof(i64);
  if (order == "bwd") {  // gx(i, k) = g(s, k) at i = arg(s, k), else 0
    Arr<T> g = c.segv(3, D), gx = c.elem_out(D);
    const T* gp = g.p();
    Ref r(n * D);
    for (i64 s = 0; s < m; ++s)
      for (i64 k = 0; k < D; ++k)
        if (argp[s * D + k] >= 0) r.add(argp[s * D + k] * D + k, gp[s * D + k]);
    c.begin(op.c_str(), "bwd", {&g}, {{&gx, &r}}, arg_bytes);
    c.segops([&](auto& seg, auto rk) -> bool {
      if (is_max) {
        SEGOPS_BENCH_CALL(segmented_max_backward(c.exec, seg, arg_v(rk), g.v(rk), gx.v(rk)))
      } else {
        SEGOPS_BENCH_CALL(segmented_min_backward(c.exec, seg, arg_v(rk), g.v(rk), gx.v(rk)))
      }
    });
    T* gxp = gx.p();
    c.peers(false, [&](auto tag) {
      constexpr Peer P = decltype(tag)::value;
      return [=] {  // zero the gradient, then scatter g to the args
        peer_for<P>(n * D, [=](i64 e) { gxp[e] = 0; });
        peer_for<P>(m, [=](i64 s) {
          for (i64 k = 0; k < D; ++k)
            if (argp[s * D + k] >= 0) gxp[argp[s * D + k] * D + k] = gp[s * D + k];
        });
      };
    });
    return;
  }
  // dbl: gg(s, k) = u(arg(s, k), k), 0 for an empty segment
  Arr<T> u = c.elem(4, D), gg = c.seg_out(D);
  const T* up = u.p();
  Ref r(m * D);
  for (i64 s = 0; s < m; ++s)
    for (i64 k = 0; k < D; ++k)
      if (argp[s * D + k] >= 0) r.add(s * D + k, up[argp[s * D + k] * D + k]);
  c.begin(op.c_str(), "dbl", {&u}, {{&gg, &r}}, arg_bytes);
  c.segops([&](auto& seg, auto rk) -> bool {
    if (is_max) {
      SEGOPS_BENCH_CALL(segmented_max_double_backward(c.exec, seg, arg_v(rk), u.v(rk), gg.v(rk)))
    } else {
      SEGOPS_BENCH_CALL(segmented_min_double_backward(c.exec, seg, arg_v(rk), u.v(rk), gg.v(rk)))
    }
  });
  T* ggp = gg.p();
  c.peers(false, [&](auto tag) {
    return [=] {
      peer_for<decltype(tag)::value>(m, [=](i64 s) {
        for (i64 k = 0; k < D; ++k) {
          const i64 a = argp[s * D + k];
          ggp[s * D + k] = a >= 0 ? up[a * D + k] : T(0);
        }
      });
    };
  });
}

/// max_norm: out(s) = the largest row norm of the segment (0 if empty); the backward orders take
/// the argmax of the forward (computed here from the norms in double, lowest index on ties).
template <class T, class I>
void bench_max_norm(Case<T, I>& c, const std::string& order) {
  const i64 n = c.n, m = c.m, D = c.d;
  const I* id = c.id();
  Arr<T> x = c.elem(1, D);
  const T* xp = x.p();
  auto norm = [=](i64 i) {
    double t = 0;
    for (i64 k = 0; k < D; ++k) t += double(xp[i * D + k]) * xp[i * D + k];
    return std::sqrt(t);
  };
  if (order == "fwd") {
    Arr<T> o = c.seg_out(1);
    Ref r(m);
    for (i64 i = 0; i < n; ++i) r.val[id[i]] = std::max(r.val[id[i]], norm(i));
    r.mag = r.val;
    c.begin("max_norm", "fwd", {&x}, {{&o, &r}});
    c.segops([&](auto& seg, auto rk) -> bool {
      SEGOPS_BENCH_CALL(segmented_max_norm(c.exec, seg, x.v(rk), o.v(R1{})))
    });
    // with an arg: the norm at it (in double) is the result, to the checks' tolerance
    const T* op_ = o.p();
    const double tol = std::is_same_v<T, float> ? 2e-3 : 1e-9;
    measure_with_arg(
        c, 1,
        [&c, xv = x.v(R2{}), ov = o.v(R1{})](const auto& arg) {
          segops::segmented_max_norm(c.exec, *c.seg, xv, ov, Kokkos::subview(arg, Kokkos::ALL, 0));
        },
        [&](i64 s, i64, i64 a) { return std::abs(norm(a) - op_[s]) <= tol * std::abs(op_[s]); });
    c.peers(true, [&](auto tag) {
      using Max = Kokkos::Experimental::ScatterMax;
      return [=, red = PeerReduce<decltype(tag)::value, T, Max>(o, T(0))] {
        red(id, n, [=](i64 i, auto&& add) {
          T t = 0;
          for (i64 k = 0; k < D; ++k) t += xp[i * D + k] * xp[i * D + k];
          add(0, std::sqrt(t));
        });
      };
    });
    return;
  }
  std::vector<i64> argv(m, -1);
  std::vector<double> best(m, -1.0);
  for (i64 i = 0; i < n; ++i) {
    const double t = norm(i);
    if (t > best[id[i]]) best[id[i]] = t, argv[id[i]] = i;
  }
  const Kokkos::View<i64*, Host, Kokkos::MemoryTraits<Kokkos::Unmanaged>> arg(argv.data(), m);
  const i64* argp = argv.data();
  const double arg_bytes = double(m) * sizeof(i64);
  Arr<T> g = c.segv(3, 1);
  const T* gp = g.p();
  if (order == "bwd") {  // gx_i = g_s x_i / |x_i| at i = argmax(s), else 0
    Arr<T> gx = c.elem_out(D);
    Ref r(n * D);
    for (i64 s = 0; s < m; ++s) {
      const i64 i = argp[s];
      if (i < 0 || best[s] == 0) continue;
      for (i64 k = 0; k < D; ++k) r.add(i * D + k, gp[s] * xp[i * D + k] / best[s]);
    }
    c.begin("max_norm", "bwd", {&x, &g}, {{&gx, &r}}, arg_bytes);
    c.segops([&](auto& seg, auto rk) -> bool {
      SEGOPS_BENCH_CALL(segmented_max_norm_backward(c.exec, seg, x.v(rk), arg, g.v(R1{}), gx.v(rk)))
    });
    T* gxp = gx.p();
    c.peers(false, [&](auto tag) {
      constexpr Peer P = decltype(tag)::value;
      return [=] {
        peer_for<P>(n * D, [=](i64 e) { gxp[e] = 0; });
        peer_for<P>(m, [=](i64 s) {
          const i64 i = argp[s];
          if (i < 0) return;
          T t = 0;
          for (i64 k = 0; k < D; ++k) t += xp[i * D + k] * xp[i * D + k];
          const T f = t > 0 ? gp[s] / std::sqrt(t) : T(0);
          for (i64 k = 0; k < D; ++k) gxp[i * D + k] = f * xp[i * D + k];
        });
      };
    });
    return;
  }
  // dbl: with i = argmax(s), xh = x_i / |x_i|, p = <xh, u_i>: gg_s = p,
  // x+_i = (g_s / |x_i|) (u_i - xh p), 0 elsewhere
  Arr<T> u = c.elem(4, D), gg = c.seg_out(1), xq = c.elem_out(D);
  const T* up = u.p();
  Ref rg(m), rx(n * D);
  for (i64 s = 0; s < m; ++s) {
    const i64 i = argp[s];
    if (i < 0 || best[s] == 0) continue;
    double pm = 0;
    for (i64 k = 0; k < D; ++k) {
      rg.add(s, xp[i * D + k] / best[s] * up[i * D + k]);
      pm += std::abs(xp[i * D + k] / best[s] * up[i * D + k]);
    }
    const double p = rg.val[s], f = gp[s] / best[s];
    for (i64 k = 0; k < D; ++k) {
      const double xh = xp[i * D + k] / best[s];
      rx.val[i * D + k] = f * (up[i * D + k] - xh * p);
      rx.mag[i * D + k] = std::abs(f) * (std::abs(up[i * D + k]) + std::abs(xh) * pm);
    }
  }
  c.begin("max_norm", "dbl", {&x, &g, &u}, {{&gg, &rg}, {&xq, &rx}}, arg_bytes);
  c.segops([&](auto& seg, auto rk) -> bool {
    SEGOPS_BENCH_CALL(segmented_max_norm_double_backward(c.exec, seg, x.v(rk), arg, g.v(R1{}),
                                                         u.v(rk), gg.v(R1{}), xq.v(rk)))
  });
  T *ggp = gg.p(), *xqp = xq.p();
  c.peers(false, [&](auto tag) {
    constexpr Peer P = decltype(tag)::value;
    return [=] {
      peer_for<P>(n * D, [=](i64 e) { xqp[e] = 0; });
      peer_for<P>(m, [=](i64 s) {
        const i64 i = argp[s];
        ggp[s] = 0;
        if (i < 0) return;
        T t = 0, p = 0;
        for (i64 k = 0; k < D; ++k) {
          t += xp[i * D + k] * xp[i * D + k];
          p += xp[i * D + k] * up[i * D + k];
        }
        if (!(t > 0)) return;
        const T r = 1 / std::sqrt(t);
        p *= r;
        ggp[s] = p;
        for (i64 k = 0; k < D; ++k)
          xqp[i * D + k] = gp[s] * r * (up[i * D + k] - xp[i * D + k] * r * p);
      });
    };
  });
}

template <class T, class I>
bool bench_reductions(Case<T, I>& c, const std::string& op, const std::string& order) {
  if (op == "component_sum")
    bench_component_sum(c, order);
  else if (op == "count")
    bench_count(c);
  else if (op == "segments")
    bench_segments_build(c);
  else if (op == "max" || op == "min")
    bench_extremum(c, op, order);
  else if (op == "max_norm")
    bench_max_norm(c, order);
  else
    return false;
  return true;
}
SEGOPS_BENCH_FAMILY_INSTANCES(bench_reductions)

}  // namespace bench
