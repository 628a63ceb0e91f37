// SPDX-License-Identifier: Apache-2.0
// SegOps: bilinear ops (dot, inner_products, mul, add, axpy, axpby) with first and second order
// backward. Element views (x, y, g, u, ...) are (N) or (N, D), all of one rank, width and value
// type; per-segment scalars (a, b, w, g of dot, ...) are (M) of one value type. Each output
// accumulates in its own value type. A call enqueues work on `exec` and returns: no fence, no
// allocation, no host copy. Every op \throws segops::Error on an extent mismatch or an output
// aliasing an input, before touching any output. Complexity O(N D) each.
#pragma once

#include <segops/impl/bilinear.hpp>
#include <segops/impl/checks.hpp>
#include <segops/segments.hpp>

namespace segops {

/// out(s) = sum_i <x_i, y_i>.
template <class Exec, class Seg, class X, class Y, class Out>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_dot(const Exec& exec, const Seg& seg, const X& x, const Y& y, const Out& out) {
  SEGOPS_OP_CHECKS("segmented_dot", (x, y), (), (out), ());
  reduce_map(exec, seg, DotMap<value_t<Out>, T, T>{rd(x), rd(y)}, wr(out), 1, op.label);
}
/// gx_i = g_s y_i, gy_i = g_s x_i (one pass).
template <class Exec, class Seg, class X, class Y, class G, class GX, class GY>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_dot_backward(const Exec& exec, const Seg& seg, const X& x, const Y& y, const G& g,
                            const GX& gx, const GY& gy) {
  SEGOPS_OP_CHECKS("segmented_dot_backward", (x, y), (g), (), (gx, gy));
  segmented_transform(
      exec, seg,
      Combinations{combination<value_t<GX>, T, S>(wr(gx), term<T, S>(rd(y), rd(g))),
                   combination<value_t<GY>, T, S>(wr(gy), term<T, S>(rd(x), rd(g)))},
      op.label);
}
/// u, v: cotangents of gx, gy. gg_s = sum_i <u_i, y_i> + <v_i, x_i>; x+_i = g_s v_i; y+_i = g_s
/// u_i.
template <class Exec, class Seg, class X, class Y, class G, class U, class V, class GG, class XP,
          class YP>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_dot_double_backward(const Exec& exec, const Seg& seg, const X& x, const Y& y,
                                   const G& g, const U& u, const V& v, const GG& gg, const XP& xp,
                                   const YP& yp) {
  SEGOPS_OP_CHECKS("segmented_dot_double_backward", (x, y, u, v), (g), (gg), (xp, yp));
  transform_reduce_map(
      exec, seg,
      Combinations{combination<value_t<XP>, T, S>(wr(xp), term<T, S>(rd(v), rd(g))),
                   combination<value_t<YP>, T, S>(wr(yp), term<T, S>(rd(u), rd(g)))},
      DotSumMap<value_t<GG>, T>{rd(u), rd(y), rd(v), rd(x)}, wr(gg), 1, op.label);
}

/// The three sums xy(s) = sum <x_i, y_i>, xx(s) = sum <x_i, x_i>, yy(s) = sum <y_i, y_i> in one
/// pass.
template <class Exec, class Seg, class X, class Y, class XY, class XX, class YY>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_inner_products(const Exec& exec, const Seg& seg, const X& x, const Y& y,
                              const XY& xy, const XX& xx, const YY& yy) {
  SEGOPS_OP_CHECKS("segmented_inner_products", (x, y), (), (xy, xx, yy), ());
  SEGOPS_SAME_TYPE("segmented_inner_products", xy, xx);
  SEGOPS_SAME_TYPE("segmented_inner_products", xy, yy);
  using Acc = value_t<XY>;
  reduce_map(exec, seg, InnerProductsMap<Acc, T>{rd(x), rd(y)},
             OutTuple<Acc, 3>{{wr(xy), wr(xx), wr(yy)}}, 3, op.label);
}
/// gx_i = gxy_s y_i + 2 gxx_s x_i, gy_i = gxy_s x_i + 2 gyy_s y_i (one pass).
template <class Exec, class Seg, class X, class Y, class GXY, class GXX, class GYY, class GX,
          class GY>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_inner_products_backward(const Exec& exec, const Seg& seg, const X& x, const Y& y,
                                       const GXY& gxy, const GXX& gxx, const GYY& gyy, const GX& gx,
                                       const GY& gy) {
  SEGOPS_OP_CHECKS("segmented_inner_products_backward", (x, y), (gxy, gxx, gyy), (), (gx, gy));
  segmented_transform(
      exec, seg,
      Combinations{combination<value_t<GX>, T, S>(wr(gx), term<T, S>(rd(y), rd(gxy)),
                                                  term<T, S>(rd(x), rd(gxx), 2.0)),
                   combination<value_t<GY>, T, S>(wr(gy), term<T, S>(rd(x), rd(gxy)),
                                                  term<T, S>(rd(y), rd(gyy), 2.0))},
      op.label);
}
/// u, v: cotangents of gx, gy. ggxy_s = sum <u,y> + <v,x>, ggxx_s = 2 sum <u,x>, ggyy_s = 2 sum
/// <v,y>; x+_i = gxy_s v_i + 2 gxx_s u_i, y+_i = gxy_s u_i + 2 gyy_s v_i.
template <class Exec, class Seg, class X, class Y, class GXY, class GXX, class GYY, class U,
          class V, class GGXY, class GGXX, class GGYY, class XP, class YP>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_inner_products_double_backward(const Exec& exec, const Seg& seg, const X& x,
                                              const Y& y, const GXY& gxy, const GXX& gxx,
                                              const GYY& gyy, const U& u, const V& v,
                                              const GGXY& ggxy, const GGXX& ggxx, const GGYY& ggyy,
                                              const XP& xp, const YP& yp) {
  SEGOPS_OP_CHECKS("segmented_inner_products_double_backward", (x, y, u, v), (gxy, gxx, gyy),
                   (ggxy, ggxx, ggyy), (xp, yp));
  SEGOPS_SAME_TYPE("segmented_inner_products_double_backward", ggxy, ggxx);
  SEGOPS_SAME_TYPE("segmented_inner_products_double_backward", ggxy, ggyy);
  using Acc = value_t<GGXY>;
  transform_reduce_map(
      exec, seg,
      Combinations{combination<value_t<XP>, T, S>(wr(xp), term<T, S>(rd(v), rd(gxy)),
                                                  term<T, S>(rd(u), rd(gxx), 2.0)),
                   combination<value_t<YP>, T, S>(wr(yp), term<T, S>(rd(u), rd(gxy)),
                                                  term<T, S>(rd(v), rd(gyy), 2.0))},
      InnerProductsAdjointMap<Acc, T>{rd(x), rd(y), rd(u), rd(v)},
      OutTuple<Acc, 3>{{wr(ggxy), wr(ggxx), wr(ggyy)}}, 3, op.label);
}

/// o_i = a_s x_i (a scaled broadcast).
template <class Exec, class Seg, class A, class X, class O>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_mul(const Exec& exec, const Seg& seg, const A& a, const X& x, const O& o) {
  SEGOPS_OP_CHECKS("segmented_mul", (x), (a), (), (o));
  segmented_transform(exec, seg,
                      Combinations{combination<value_t<O>, T, S>(wr(o), term<T, S>(rd(x), rd(a)))},
                      op.label);
}
/// gx_i = a_s g_i; ga_s = sum_i <g_i, x_i>.
template <class Exec, class Seg, class A, class X, class G, class GX, class GA>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_mul_backward(const Exec& exec, const Seg& seg, const A& a, const X& x, const G& g,
                            const GX& gx, const GA& ga) {
  SEGOPS_OP_CHECKS("segmented_mul_backward", (x, g), (a), (ga), (gx));
  transform_reduce_map(
      exec, seg, Combinations{combination<value_t<GX>, T, S>(wr(gx), term<T, S>(rd(g), rd(a)))},
      DotMap<value_t<GA>, T, T>{rd(g), rd(x)}, wr(ga), 1, op.label);
}
/// u, w: cotangents of gx, ga. gg_i = a_s u_i + w_s x_i; x+_i = w_s g_i; a+_s = sum_i <u_i, g_i>.
template <class Exec, class Seg, class A, class X, class G, class U, class W, class GG, class XP,
          class AP>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_mul_double_backward(const Exec& exec, const Seg& seg, const A& a, const X& x,
                                   const G& g, const U& u, const W& w, const GG& gg, const XP& xp,
                                   const AP& ap) {
  SEGOPS_OP_CHECKS("segmented_mul_double_backward", (x, g, u), (a, w), (ap), (gg, xp));
  transform_reduce_map(
      exec, seg,
      Combinations{combination<value_t<GG>, T, S>(wr(gg), term<T, S>(rd(u), rd(a)),
                                                  term<T, S>(rd(x), rd(w))),
                   combination<value_t<XP>, T, S>(wr(xp), term<T, S>(rd(g), rd(w)))},
      DotMap<value_t<AP>, T, T>{rd(u), rd(g)}, wr(ap), 1, op.label);
}

/// y_i <- y_i + a_s x_i, in place (y is read and written; dropped ids leave y_i unchanged).
template <class Exec, class Seg, class A, class X, class Y>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_axpy(const Exec& exec, const Seg& seg, const A& a, const X& x, const Y& y) {
  SEGOPS_OP_CHECKS("segmented_axpy", (x), (a), (), ());
  Extents<Seg>{op.name, seg, width_of(x)}.rows("y", y);
  SEGOPS_ELEM_OUT("segmented_axpy", y);
  SEGOPS_CHECK_SAME_RANK("segmented_axpy", y, x);
  check_disjoint(op.name, {SEGOPS_SPAN(y)}, {SEGOPS_SPAN(x), SEGOPS_SPAN(a)});
  segmented_transform(exec, seg, AxpyInPlace<value_t<Y>, T, S>{wr(y), rd(x), rd(a)}, op.label);
}
/// gy_i = g_i; gx_i = a_s g_i; ga_s = sum_i <x_i, g_i>.
template <class Exec, class Seg, class A, class X, class G, class GY, class GX, class GA>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_axpy_backward(const Exec& exec, const Seg& seg, const A& a, const X& x, const G& g,
                             const GY& gy, const GX& gx, const GA& ga) {
  SEGOPS_OP_CHECKS("segmented_axpy_backward", (x, g), (a), (ga), (gy, gx));
  transform_reduce_map(
      exec, seg,
      Combinations{combination<value_t<GY>, T, S>(wr(gy), term<T, S>(rd(g), 1.0)),
                   combination<value_t<GX>, T, S>(wr(gx), term<T, S>(rd(g), rd(a)))},
      DotMap<value_t<GA>, T, T>{rd(x), rd(g)}, wr(ga), 1, op.label);
}
/// uy, ux, w: cotangents of gy, gx, ga. gg_i = uy_i + a_s ux_i + w_s x_i; x+_i = w_s g_i;
/// a+_s = sum_i <ux_i, g_i>.
template <class Exec, class Seg, class A, class X, class G, class UY, class UX, class W, class GG,
          class XP, class AP>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_axpy_double_backward(const Exec& exec, const Seg& seg, const A& a, const X& x,
                                    const G& g, const UY& uy, const UX& ux, const W& w,
                                    const GG& gg, const XP& xp, const AP& ap) {
  SEGOPS_OP_CHECKS("segmented_axpy_double_backward", (x, g, uy, ux), (a, w), (ap), (gg, xp));
  transform_reduce_map(
      exec, seg,
      Combinations{
          combination<value_t<GG>, T, S>(wr(gg), term<T, S>(rd(uy), 1.0), term<T, S>(rd(ux), rd(a)),
                                         term<T, S>(rd(x), rd(w))),
          combination<value_t<XP>, T, S>(wr(xp), term<T, S>(rd(g), rd(w)))},
      DotMap<value_t<AP>, T, T>{rd(ux), rd(g)}, wr(ap), 1, op.label);
}

/// o_i = a_s x_i + b_s y_i.
template <class Exec, class Seg, class A, class X, class B, class Y, class O>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_axpby(const Exec& exec, const Seg& seg, const A& a, const X& x, const B& b,
                     const Y& y, const O& o) {
  SEGOPS_OP_CHECKS("segmented_axpby", (x, y), (a, b), (), (o));
  segmented_transform(exec, seg,
                      Combinations{combination<value_t<O>, T, S>(wr(o), term<T, S>(rd(x), rd(a)),
                                                                 term<T, S>(rd(y), rd(b)))},
                      op.label);
}
/// gx_i = a_s g_i, gy_i = b_s g_i; ga_s = sum <x_i, g_i>, gb_s = sum <y_i, g_i> (one reduction).
template <class Exec, class Seg, class A, class X, class B, class Y, class G, class GX, class GY,
          class GA, class GB>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_axpby_backward(const Exec& exec, const Seg& seg, const A& a, const X& x, const B& b,
                              const Y& y, const G& g, const GX& gx, const GY& gy, const GA& ga,
                              const GB& gb) {
  SEGOPS_OP_CHECKS("segmented_axpby_backward", (x, y, g), (a, b), (ga, gb), (gx, gy));
  SEGOPS_SAME_TYPE("segmented_axpby_backward", ga, gb);
  using Acc = value_t<GA>;
  transform_reduce_map(
      exec, seg,
      Combinations{combination<value_t<GX>, T, S>(wr(gx), term<T, S>(rd(g), rd(a))),
                   combination<value_t<GY>, T, S>(wr(gy), term<T, S>(rd(g), rd(b)))},
      TwoDotsMap<Acc, T>{rd(x), rd(g), rd(y)}, OutTuple<Acc, 2>{{wr(ga), wr(gb)}}, 2, op.label);
}
/// ux, uy, wa, wb: cotangents of gx, gy, ga, gb. gg_i = a_s ux_i + b_s uy_i + wa_s x_i + wb_s y_i;
/// x+_i = wa_s g_i; y+_i = wb_s g_i; a+_s = sum <ux_i, g_i>; b+_s = sum <uy_i, g_i>.
template <class Exec, class Seg, class A, class X, class B, class Y, class G, class UX, class UY,
          class WA, class WB, class GG, class XP, class YP, class AP, class BP>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_axpby_double_backward(const Exec& exec, const Seg& seg, const A& a, const X& x,
                                     const B& b, const Y& y, const G& g, const UX& ux, const UY& uy,
                                     const WA& wa, const WB& wb, const GG& gg, const XP& xp,
                                     const YP& yp, const AP& ap, const BP& bp) {
  SEGOPS_OP_CHECKS("segmented_axpby_double_backward", (x, y, g, ux, uy), (a, b, wa, wb), (ap, bp),
                   (gg, xp, yp));
  SEGOPS_SAME_TYPE("segmented_axpby_double_backward", ap, bp);
  using Acc = value_t<AP>;
  transform_reduce_map(
      exec, seg,
      Combinations{combination<value_t<GG>, T, S>(
                       wr(gg), term<T, S>(rd(ux), rd(a)), term<T, S>(rd(uy), rd(b)),
                       term<T, S>(rd(x), rd(wa)), term<T, S>(rd(y), rd(wb))),
                   Combinations{combination<value_t<XP>, T, S>(wr(xp), term<T, S>(rd(g), rd(wa))),
                                combination<value_t<YP>, T, S>(wr(yp), term<T, S>(rd(g), rd(wb)))}},
      TwoDotsMap<Acc, T>{rd(ux), rd(g), rd(uy)}, OutTuple<Acc, 2>{{wr(ap), wr(bp)}}, 2, op.label);
}

/// o_i = x_i + b_s, with b (M, D) a row per segment or b (M) a scalar added to every component.
template <class Exec, class Seg, class X, class B, class O>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_add(const Exec& exec, const Seg& seg, const X& x, const B& b, const O& o) {
  SEGOPS_OP_CHECKS("segmented_add", (x), (), (), (o));
  SEGOPS_CHECK_IN("segmented_add", b, exec, 1, SEGOPS_T(x)::rank(), "a per-segment (M) or (M, D)");
  check_add_operand(op, seg, x, b, "b");
  check_disjoint(op.name, {SEGOPS_SPAN(o)}, {SEGOPS_SPAN(b)});
  segmented_transform(exec, seg,
                      AddRow<value_t<O>, T, value_t<B>>{wr(o), rd(x), segment_row(b, width_of(x))},
                      op.label);
}
/// gx_i = g_i; gb_s = sum_i g_i (rows), or sum_i sum_d g_id for a scalar b (gb of rank 1).
template <class Exec, class Seg, class G, class GX, class GB>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_add_backward(const Exec& exec, const Seg& seg, const G& g, const GX& gx,
                            const GB& gb) {
  SEGOPS_OP_CHECKS("segmented_add_backward", (g), (), (), (gx));
  SEGOPS_CHECK_OUT("segmented_add_backward", gb, exec, 1, SEGOPS_T(g)::rank(),
                   "per-segment (M) or (M, D)");
  check_add_operand(op, seg, g, gb, "gb");
  check_disjoint(op.name, {SEGOPS_SPAN(gx), SEGOPS_SPAN(gb)}, {SEGOPS_SPAN(g)});
  segmented_transform(exec, seg,
                      Combinations{combination<value_t<GX>, T, T>(wr(gx), term<T, T>(rd(g), 1.0))},
                      op.label);
  if constexpr (GB::rank() == G::rank())
    reduce_rows(exec, seg, rd(g), wr(gb), op.label);
  else
    reduce_row_sums(exec, seg, rd(g), wr(gb), op.label);
}
/// u, w: cotangents of gx, gb. gg_i = u_i + w_s(i) (w a row, or a scalar added to every component).
template <class Exec, class Seg, class U, class W, class GG>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_add_double_backward(const Exec& exec, const Seg& seg, const U& u, const W& w,
                                   const GG& gg) {
  SEGOPS_OP_CHECKS("segmented_add_double_backward", (u), (), (), (gg));
  SEGOPS_CHECK_IN("segmented_add_double_backward", w, exec, 1, SEGOPS_T(u)::rank(),
                  "a per-segment (M) or (M, D)");
  check_add_operand(op, seg, u, w, "w");
  check_disjoint(op.name, {SEGOPS_SPAN(gg)}, {SEGOPS_SPAN(w)});
  segmented_transform(
      exec, seg, AddRow<value_t<GG>, T, value_t<W>>{wr(gg), rd(u), segment_row(w, width_of(u))},
      op.label);
}

SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_dot)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_dot_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_dot_double_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_inner_products)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_inner_products_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_inner_products_double_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_mul)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_mul_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_mul_double_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_axpy)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_axpy_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_axpy_double_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_axpby)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_axpby_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_axpby_double_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_add)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_add_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_add_double_backward)

}  // namespace segops
