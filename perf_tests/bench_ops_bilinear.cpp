// SPDX-License-Identifier: Apache-2.0
// The CPU benchmark's inner_products, axpby, axpy and add (see bench_segops.cpp). Inputs come from
// fixed streams (x=1, y/v/a/b=2, g=3, u=4, w=5, then 6-9 for the ops with more operands:
// perf_tests/README.md lists them, and peers.py builds the same arrays).
#include "bench_harness.hpp"

namespace bench {

/// Ops with several per-segment outputs (inner_products' three sums, axpby's two): SegOps takes
/// separate arrays (columns of one matrix count as overlapping outputs, docs/ops.md), the C++ peers
/// reduce rows of w into one array. Both are checked against the same reference, split into w
/// columns for SegOps; the bytes are the same.
struct SegOutputs {
  std::vector<Ref> refs;
  explicit SegOutputs(const Ref& rows, i64 w) : refs(w, Ref(rows.val.size() / w)) {
    for (std::size_t e = 0; e < rows.val.size(); ++e) {
      refs[e % w].val[e / w] = rows.val[e];
      refs[e % w].mag[e / w] = rows.mag[e];
    }
  }
};

template <class T, class I>
void bench_inner_products(Case<T, I>& c, const std::string& order) {
  const i64 n = c.n, m = c.m, D = c.d;
  const I* id = c.id();
  Arr<T> x = c.elem(1, D), y = c.elem(2, D);
  const T *xp = x.p(), *yp = y.p();
  if (order == "fwd") {
    Arr<T> o = c.seg_out(3);  // xy, xx, yy
    Ref r(m * 3);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        const double a = xp[i * D + k], b = yp[i * D + k];
        r.add(id[i] * 3, a * b);
        r.add(id[i] * 3 + 1, a * a);
        r.add(id[i] * 3 + 2, b * b);
      }
    const SegOutputs sr(r, 3);
    Arr<T> xy = c.seg_out(1), xx = c.seg_out(1), yy = c.seg_out(1);
    c.begin("inner_products", "fwd", {&x, &y},
            {{&xy, &sr.refs[0]}, {&xx, &sr.refs[1]}, {&yy, &sr.refs[2]}});
    c.segops([&](auto& seg, auto rk) -> bool {
      SEGOPS_BENCH_CALL(segmented_inner_products(c.exec, seg, x.v(rk), y.v(rk), xy.v(R1{}),
                                                 xx.v(R1{}), yy.v(R1{})))
    });
    c.outs = {{&o, &r}};
    c.peers(true, [&](auto tag) {
      return [=, red = PeerReduce<decltype(tag)::value, T>(o)] {
        red(id, n, [=](i64 i, auto&& add) {
          T xy = 0, xx = 0, yy = 0;
          for (i64 k = 0; k < D; ++k) {
            const T a = xp[i * D + k], b = yp[i * D + k];
            xy += a * b;
            xx += a * a;
            yy += b * b;
          }
          add(0, xy);
          add(1, xx);
          add(2, yy);
        });
      };
    });
    return;
  }
  Arr<T> gxy = c.segv(3, 1), gxx = c.segv(6, 1), gyy = c.segv(7, 1);
  const T *pxy = gxy.p(), *pxx = gxx.p(), *pyy = gyy.p();
  if (order == "bwd") {
    Arr<T> gx = c.elem_out(D), gy = c.elem_out(D);
    Ref rx(n * D), ry(n * D);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        const i64 e = i * D + k, s = id[i];
        rx.add(e, double(pxy[s]) * yp[e]);
        rx.add(e, 2.0 * pxx[s] * xp[e]);
        ry.add(e, double(pxy[s]) * xp[e]);
        ry.add(e, 2.0 * pyy[s] * yp[e]);
      }
    c.begin("inner_products", "bwd", {&x, &y, &gxy, &gxx, &gyy}, {{&gx, &rx}, {&gy, &ry}});
    c.segops([&](auto& seg, auto rk) -> bool {
      SEGOPS_BENCH_CALL(segmented_inner_products_backward(
          c.exec, seg, x.v(rk), y.v(rk), gxy.v(R1{}), gxx.v(R1{}), gyy.v(R1{}), gx.v(rk), gy.v(rk)))
    });
    T *gxp = gx.p(), *gyp = gy.p();
    c.peers(false, [&](auto tag) {
      return [=] {
        peer_for<decltype(tag)::value>(n, [=](i64 i) {
          const i64 s = id[i];
          const T a = pxy[s], b = 2 * pxx[s], d = 2 * pyy[s];
          for (i64 k = 0; k < D; ++k) {
            gxp[i * D + k] = a * yp[i * D + k] + b * xp[i * D + k];
            gyp[i * D + k] = a * xp[i * D + k] + d * yp[i * D + k];
          }
        });
      };
    });
    return;
  }
  Arr<T> u = c.elem(4, D), v = c.elem(5, D);
  Arr<T> gg = c.seg_out(3), xq = c.elem_out(D), yq = c.elem_out(D);
  const T *up = u.p(), *vp = v.p();
  Ref rg(m * 3), rx(n * D), ry(n * D);
  for (i64 i = 0; i < n; ++i)
    for (i64 k = 0; k < D; ++k) {
      const i64 e = i * D + k, s = id[i];
      rg.add(s * 3, double(up[e]) * yp[e]);
      rg.add(s * 3, double(vp[e]) * xp[e]);
      rg.add(s * 3 + 1, 2.0 * up[e] * xp[e]);
      rg.add(s * 3 + 2, 2.0 * vp[e] * yp[e]);
      rx.add(e, double(pxy[s]) * vp[e]);
      rx.add(e, 2.0 * pxx[s] * up[e]);
      ry.add(e, double(pxy[s]) * up[e]);
      ry.add(e, 2.0 * pyy[s] * vp[e]);
    }
  const SegOutputs sr(rg, 3);
  Arr<T> g0 = c.seg_out(1), g1 = c.seg_out(1), g2 = c.seg_out(1);
  c.begin("inner_products", "dbl", {&x, &y, &gxy, &gxx, &gyy, &u, &v},
          {{&g0, &sr.refs[0]}, {&g1, &sr.refs[1]}, {&g2, &sr.refs[2]}, {&xq, &rx}, {&yq, &ry}});
  c.segops([&](auto& seg, auto rk) -> bool {
    SEGOPS_BENCH_CALL(segmented_inner_products_double_backward(
        c.exec, seg, x.v(rk), y.v(rk), gxy.v(R1{}), gxx.v(R1{}), gyy.v(R1{}), u.v(rk), v.v(rk),
        g0.v(R1{}), g1.v(R1{}), g2.v(R1{}), xq.v(rk), yq.v(rk)))
  });
  c.outs = {{&gg, &rg}, {&xq, &rx}, {&yq, &ry}};
  T *xqp = xq.p(), *yqp = yq.p();
  c.peers(true, [&](auto tag) {
    return [=, red = PeerReduce<decltype(tag)::value, T>(gg)] {
      red(id, n, [=](i64 i, auto&& add) {
        const i64 s = id[i];
        const T a = pxy[s], b = 2 * pxx[s], d = 2 * pyy[s];
        T t0 = 0, t1 = 0, t2 = 0;
        for (i64 k = 0; k < D; ++k) {
          const i64 e = i * D + k;
          t0 += up[e] * yp[e] + vp[e] * xp[e];
          t1 += 2 * up[e] * xp[e];
          t2 += 2 * vp[e] * yp[e];
          xqp[e] = a * vp[e] + b * up[e];
          yqp[e] = a * up[e] + d * vp[e];
        }
        add(0, t0);
        add(1, t1);
        add(2, t2);
      });
    };
  });
}

template <class T, class I>
void bench_axpby(Case<T, I>& c, const std::string& order) {
  const i64 n = c.n, m = c.m, D = c.d;
  const I* id = c.id();
  Arr<T> a = c.segv(2, 1), x = c.elem(1, D), b = c.segv(6, 1), y = c.elem(7, D);
  const T *ap = a.p(), *xp = x.p(), *bp = b.p(), *yp = y.p();
  if (order == "fwd") {
    Arr<T> o = c.elem_out(D);
    Ref r(n * D);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        const i64 e = i * D + k;
        r.add(e, double(ap[id[i]]) * xp[e]);
        r.add(e, double(bp[id[i]]) * yp[e]);
      }
    c.begin("axpby", "fwd", {&a, &x, &b, &y}, {{&o, &r}});
    c.segops([&](auto& seg, auto rk) -> bool {
      SEGOPS_BENCH_CALL(
          segmented_axpby(c.exec, seg, a.v(R1{}), x.v(rk), b.v(R1{}), y.v(rk), o.v(rk)))
    });
    T* opp = o.p();
    c.peers(false, [&](auto tag) {
      return [=] {
        peer_for<decltype(tag)::value>(n, [=](i64 i) {
          const T as = ap[id[i]], bs = bp[id[i]];
          for (i64 k = 0; k < D; ++k) opp[i * D + k] = as * xp[i * D + k] + bs * yp[i * D + k];
        });
      };
    });
    return;
  }
  Arr<T> g = c.elem(3, D);
  const T* gp = g.p();
  if (order == "bwd") {
    Arr<T> gx = c.elem_out(D), gy = c.elem_out(D), gab = c.seg_out(2);
    Ref rx(n * D), ry(n * D), rab(m * 2);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        const i64 e = i * D + k, s = id[i];
        rx.add(e, double(ap[s]) * gp[e]);
        ry.add(e, double(bp[s]) * gp[e]);
        rab.add(s * 2, double(xp[e]) * gp[e]);
        rab.add(s * 2 + 1, double(yp[e]) * gp[e]);
      }
    const SegOutputs sr(rab, 2);
    Arr<T> ga = c.seg_out(1), gb = c.seg_out(1);
    c.begin("axpby", "bwd", {&a, &x, &b, &y, &g},
            {{&gx, &rx}, {&gy, &ry}, {&ga, &sr.refs[0]}, {&gb, &sr.refs[1]}});
    c.segops([&](auto& seg, auto rk) -> bool {
      SEGOPS_BENCH_CALL(segmented_axpby_backward(c.exec, seg, a.v(R1{}), x.v(rk), b.v(R1{}),
                                                 y.v(rk), g.v(rk), gx.v(rk), gy.v(rk), ga.v(R1{}),
                                                 gb.v(R1{})))
    });
    c.outs = {{&gx, &rx}, {&gy, &ry}, {&gab, &rab}};
    T *gxp = gx.p(), *gyp = gy.p();
    c.peers(true, [&](auto tag) {
      return [=, red = PeerReduce<decltype(tag)::value, T>(gab)] {
        red(id, n, [=](i64 i, auto&& add) {
          const T as = ap[id[i]], bs = bp[id[i]];
          T ta = 0, tb = 0;
          for (i64 k = 0; k < D; ++k) {
            const i64 e = i * D + k;
            gxp[e] = as * gp[e];
            gyp[e] = bs * gp[e];
            ta += xp[e] * gp[e];
            tb += yp[e] * gp[e];
          }
          add(0, ta);
          add(1, tb);
        });
      };
    });
    return;
  }
  Arr<T> ux = c.elem(4, D), uy = c.elem(8, D), wa = c.segv(5, 1), wb = c.segv(9, 1);
  Arr<T> gg = c.elem_out(D), xq = c.elem_out(D), yq = c.elem_out(D), ab = c.seg_out(2);
  const T *uxp = ux.p(), *uyp = uy.p(), *wap = wa.p(), *wbp = wb.p();
  Ref rg(n * D), rx(n * D), ry(n * D), rab(m * 2);
  for (i64 i = 0; i < n; ++i)
    for (i64 k = 0; k < D; ++k) {
      const i64 e = i * D + k, s = id[i];
      rg.add(e, double(ap[s]) * uxp[e]);
      rg.add(e, double(bp[s]) * uyp[e]);
      rg.add(e, double(wap[s]) * xp[e]);
      rg.add(e, double(wbp[s]) * yp[e]);
      rx.add(e, double(wap[s]) * gp[e]);
      ry.add(e, double(wbp[s]) * gp[e]);
      rab.add(s * 2, double(uxp[e]) * gp[e]);
      rab.add(s * 2 + 1, double(uyp[e]) * gp[e]);
    }
  const SegOutputs sr(rab, 2);
  Arr<T> aq = c.seg_out(1), bq = c.seg_out(1);
  c.begin("axpby", "dbl", {&a, &x, &b, &y, &g, &ux, &uy, &wa, &wb},
          {{&gg, &rg}, {&xq, &rx}, {&yq, &ry}, {&aq, &sr.refs[0]}, {&bq, &sr.refs[1]}});
  c.segops([&](auto& seg, auto rk) -> bool {
    SEGOPS_BENCH_CALL(segmented_axpby_double_backward(
        c.exec, seg, a.v(R1{}), x.v(rk), b.v(R1{}), y.v(rk), g.v(rk), ux.v(rk), uy.v(rk),
        wa.v(R1{}), wb.v(R1{}), gg.v(rk), xq.v(rk), yq.v(rk), aq.v(R1{}), bq.v(R1{})))
  });
  c.outs = {{&gg, &rg}, {&xq, &rx}, {&yq, &ry}, {&ab, &rab}};
  T *ggp = gg.p(), *xqp = xq.p(), *yqp = yq.p();
  c.peers(true, [&](auto tag) {
    return [=, red = PeerReduce<decltype(tag)::value, T>(ab)] {
      red(id, n, [=](i64 i, auto&& add) {
        const i64 s = id[i];
        const T as = ap[s], bs = bp[s], was = wap[s], wbs = wbp[s];
        T ta = 0, tb = 0;
        for (i64 k = 0; k < D; ++k) {
          const i64 e = i * D + k;
          ggp[e] = as * uxp[e] + bs * uyp[e] + was * xp[e] + wbs * yp[e];
          xqp[e] = was * gp[e];
          yqp[e] = wbs * gp[e];
          ta += uxp[e] * gp[e];
          tb += uyp[e] * gp[e];
        }
        add(0, ta);
        add(1, tb);
      });
    };
  });
}

template <class T, class I>
void bench_axpy(Case<T, I>& c, const std::string& order) {
  const i64 n = c.n, m = c.m, D = c.d;
  const I* id = c.id();
  Arr<T> a = c.segv(2, 1), x = c.elem(1, D);
  const T *ap = a.p(), *xp = x.p();
  if (order == "fwd") {
    // In place: y <- y + a x. Each timed call adds to the previous result (as a user's loop does);
    // the checked call starts from y0.
    Arr<T> y0 = c.elem(7, D), y = c.elem_out(D);
    Ref r(n * D);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        r.add(i * D + k, y0.p()[i * D + k]);
        r.add(i * D + k, double(ap[id[i]]) * xp[i * D + k]);
      }
    c.begin("axpy", "fwd", {&a, &x, &y0}, {{&y, &r}});
    c.prepare = [&] { std::copy(y0.p(), y0.p() + y0.size(), y.p()); };
    c.segops([&](auto& seg, auto rk) -> bool {
      SEGOPS_BENCH_CALL(segmented_axpy(c.exec, seg, a.v(R1{}), x.v(rk), y.v(rk)))
    });
    T* yp = y.p();
    c.peers(false, [&](auto tag) {
      return [=] {
        peer_for<decltype(tag)::value>(n, [=](i64 i) {
          const T as = ap[id[i]];
          for (i64 k = 0; k < D; ++k) yp[i * D + k] += as * xp[i * D + k];
        });
      };
    });
    return;
  }
  Arr<T> g = c.elem(3, D);
  const T* gp = g.p();
  if (order == "bwd") {
    Arr<T> gy = c.elem_out(D), gx = c.elem_out(D), ga = c.seg_out(1);
    Ref ry(n * D), rx(n * D), ra(m);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        const i64 e = i * D + k;
        ry.add(e, gp[e]);
        rx.add(e, double(ap[id[i]]) * gp[e]);
        ra.add(id[i], double(xp[e]) * gp[e]);
      }
    c.begin("axpy", "bwd", {&a, &x, &g}, {{&gy, &ry}, {&gx, &rx}, {&ga, &ra}});
    c.segops([&](auto& seg, auto rk) -> bool {
      SEGOPS_BENCH_CALL(segmented_axpy_backward(c.exec, seg, a.v(R1{}), x.v(rk), g.v(rk), gy.v(rk),
                                                gx.v(rk), ga.v(R1{})))
    });
    T *gyp = gy.p(), *gxp = gx.p();
    c.peers(true, [&](auto tag) {
      return [=, red = PeerReduce<decltype(tag)::value, T>(ga)] {
        red(id, n, [=](i64 i, auto&& add) {
          const T as = ap[id[i]];
          T t = 0;
          for (i64 k = 0; k < D; ++k) {
            const i64 e = i * D + k;
            gyp[e] = gp[e];
            gxp[e] = as * gp[e];
            t += xp[e] * gp[e];
          }
          add(0, t);
        });
      };
    });
    return;
  }
  Arr<T> uy = c.elem(8, D), ux = c.elem(4, D), w = c.segv(5, 1);
  Arr<T> gg = c.elem_out(D), xq = c.elem_out(D), aq = c.seg_out(1);
  const T *uyp = uy.p(), *uxp = ux.p(), *wp = w.p();
  Ref rg(n * D), rx(n * D), ra(m);
  for (i64 i = 0; i < n; ++i)
    for (i64 k = 0; k < D; ++k) {
      const i64 e = i * D + k, s = id[i];
      rg.add(e, uyp[e]);
      rg.add(e, double(ap[s]) * uxp[e]);
      rg.add(e, double(wp[s]) * xp[e]);
      rx.add(e, double(wp[s]) * gp[e]);
      ra.add(s, double(uxp[e]) * gp[e]);
    }
  c.begin("axpy", "dbl", {&a, &x, &g, &uy, &ux, &w}, {{&gg, &rg}, {&xq, &rx}, {&aq, &ra}});
  c.segops([&](auto& seg, auto rk) -> bool {
    SEGOPS_BENCH_CALL(segmented_axpy_double_backward(c.exec, seg, a.v(R1{}), x.v(rk), g.v(rk),
                                                     uy.v(rk), ux.v(rk), w.v(R1{}), gg.v(rk),
                                                     xq.v(rk), aq.v(R1{})))
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
          ggp[e] = uyp[e] + as * uxp[e] + ws * xp[e];
          xqp[e] = ws * gp[e];
          t += uxp[e] * gp[e];
        }
        add(0, t);
      });
    };
  });
}

template <class T, class I>
void bench_add(Case<T, I>& c, const std::string& order) {
  const i64 n = c.n, D = c.d;
  const I* id = c.id();
  if (order == "bwd") {
    Arr<T> g = c.elem(3, D), gx = c.elem_out(D), gb = c.seg_out(D);
    const T* gp = g.p();
    Ref rx(n * D), rb(c.m * D);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < D; ++k) {
        rx.add(i * D + k, gp[i * D + k]);
        rb.add(id[i] * D + k, gp[i * D + k]);
      }
    c.begin("add", "bwd", {&g}, {{&gx, &rx}, {&gb, &rb}});
    c.segops([&](auto& seg, auto rk) -> bool {
      SEGOPS_BENCH_CALL(segmented_add_backward(c.exec, seg, g.v(rk), gx.v(rk), gb.v(rk)))
    });
    T* gxp = gx.p();
    c.peers(true, [&](auto tag) {
      return [=, red = PeerReduce<decltype(tag)::value, T>(gb)] {
        red(id, n, [=](i64 i, auto&& add) {
          for (i64 k = 0; k < D; ++k) {
            gxp[i * D + k] = gp[i * D + k];
            add(k, gp[i * D + k]);
          }
        });
      };
    });
    return;
  }
  // fwd: o = x + b_s; dbl: gg = u + w_s (the same kernel)
  const bool fwd = order == "fwd";
  Arr<T> x = c.elem(fwd ? 1 : 4, D), b = c.segv(fwd ? 2 : 5, D), o = c.elem_out(D);
  const T *xp = x.p(), *bp = b.p();
  Ref r(n * D);
  for (i64 i = 0; i < n; ++i)
    for (i64 k = 0; k < D; ++k) {
      r.add(i * D + k, xp[i * D + k]);
      r.add(i * D + k, bp[id[i] * D + k]);
    }
  c.begin("add", order.c_str(), {&x, &b}, {{&o, &r}});
  c.segops([&](auto& seg, auto rk) -> bool {
    if (fwd) {
      SEGOPS_BENCH_CALL(segmented_add(c.exec, seg, x.v(rk), b.v(rk), o.v(rk)))
    } else {
      SEGOPS_BENCH_CALL(segmented_add_double_backward(c.exec, seg, x.v(rk), b.v(rk), o.v(rk)))
    }
  });
  T* opp = o.p();
  c.peers(false, [&](auto tag) {
    return [=] {
      peer_for<decltype(tag)::value>(n, [=](i64 i) {
        const i64 s = id[i];
        for (i64 k = 0; k < D; ++k) opp[i * D + k] = xp[i * D + k] + bp[s * D + k];
      });
    };
  });
}

template <class T, class I>
bool bench_bilinear(Case<T, I>& c, const std::string& op, const std::string& order) {
  if (op == "inner_products")
    bench_inner_products(c, order);
  else if (op == "axpby")
    bench_axpby(c, order);
  else if (op == "axpy")
    bench_axpy(c, order);
  else if (op == "add")
    bench_add(c, order);
  else
    return false;
  return true;
}
SEGOPS_BENCH_FAMILY_INSTANCES(bench_bilinear)

}  // namespace bench
