// SPDX-License-Identifier: Apache-2.0
// The CPU benchmark's mul, rms_norm and matvec (see bench_segops.cpp).
#include "bench_harness.hpp"

namespace bench {

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

template <class T, class I>
bool bench_scaled(Case<T, I>& c, const std::string& op, const std::string& order) {
  if (op == "mul")
    bench_mul(c, order);
  else if (op == "rms_norm")
    bench_rms_norm(c, order);
  else if (op == "matvec")
    bench_matvec(c, order);
  else
    return false;
  return true;
}
SEGOPS_BENCH_FAMILY_INSTANCES(bench_scaled)

}  // namespace bench
