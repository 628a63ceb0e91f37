// SPDX-License-Identifier: Apache-2.0
// SegOps: per-segment matrix-vector products o_i = A_s x_i and o_i = A_s^T x_i, with first and
// second order backward. A (M, R, C) per segment; x (N, C) -> o (N, R) for the plain form and
// x (N, R) -> o (N, C) for the transposed form. Element views share one value type, as do A and W.
// A call enqueues work on `exec` and returns: no fence, no allocation, no host copy.
// \throws segops::Error on an extent mismatch (A of the wrong (M, R, C)) or aliasing.
#pragma once

#include <segops/impl/checks.hpp>
#include <segops/impl/matvec.hpp>
#include <segops/segments.hpp>

#define SEGOPS_CHECK_MATRIX(OP, ARG, OUTPUT)                                  \
  SEGOPS_CHECK_VIEW(OP, #ARG, SEGOPS_T(ARG), SEGOPS_T(exec),                  \
                    SEGOPS_PP_CAT(is_, SEGOPS_PP_CAT(OUTPUT, _view_v)), 3, 3, \
                    "a rank-3 (M, R, C)")

#define SEGOPS_DEFINE_MATVEC(NAME, TR)                                                             \
  /** o_i = A_s x_i (TR: A_s^T x_i). */                                                            \
  template <class Exec, class Seg, class A, class X, class O>                                      \
  SEGOPS_REQUIRES_EXEC(Exec, Seg)                                                                  \
  void segmented_##NAME(const Exec& exec, const Seg& seg, const A& a, const X& x, const O& o) {    \
    SEGOPS_CHECK_MATRIX("segmented_" #NAME, a, data);                                              \
    SEGOPS_OP_CHECKS("segmented_" #NAME, (x), (), (), ());                                         \
    SEGOPS_ELEM_OUT("segmented_" #NAME, o);                                                        \
    check_elements(op.name, "o", seg, o);                                                          \
    check_matrices(op, "a", seg, a, width_of(o), width_of(x), TR);                                 \
    check_disjoint(op.name, {SEGOPS_SPAN(o)}, {SEGOPS_SPAN(x), SEGOPS_SPAN(a)});                   \
    auto A_ = TR ? transposed(rd3(a)) : rd3(a);                                                    \
    segmented_transform(exec, seg,                                                                 \
                        MatVec<value_t<O>, T, value_t<A>, false>{wr(o), A_, A_, rd(x), rd(x)},     \
                        op.label);                                                                 \
  }                                                                                                \
  /** gx_i = A_s^T g_i; gA_s = sum_i g_i x_i^T (TR: A_s g_i and x_i g_i^T). */                     \
  template <class Exec, class Seg, class A, class X, class G, class GX, class GA>                  \
  SEGOPS_REQUIRES_EXEC(Exec, Seg)                                                                  \
  void segmented_##NAME##_backward(const Exec& exec, const Seg& seg, const A& a, const X& x,       \
                                   const G& g, const GX& gx, const GA& ga) {                       \
    SEGOPS_CHECK_MATRIX("segmented_" #NAME "_backward", a, data);                                  \
    SEGOPS_CHECK_MATRIX("segmented_" #NAME "_backward", ga, output);                               \
    SEGOPS_OP_CHECKS("segmented_" #NAME "_backward", (x), (), (), (gx));                           \
    SEGOPS_ELEM_IN("segmented_" #NAME "_backward", g);                                             \
    SEGOPS_SAME_TYPE("segmented_" #NAME "_backward", g, x);                                        \
    check_elements(op.name, "g", seg, g);                                                          \
    check_matrices(op, "a", seg, a, width_of(g), width_of(x), TR);                                 \
    check_matrices(op, "ga", seg, ga, width_of(g), width_of(x), TR);                               \
    check_disjoint(op.name, {SEGOPS_SPAN(gx), SEGOPS_SPAN(ga)},                                    \
                   {SEGOPS_SPAN(x), SEGOPS_SPAN(a), SEGOPS_SPAN(g)});                              \
    auto At = TR ? rd3(a) : transposed(rd3(a));                                                    \
    segmented_transform(exec, seg,                                                                 \
                        MatVec<value_t<GX>, T, value_t<A>, false>{wr(gx), At, At, rd(g), rd(g)},   \
                        op.label);                                                                 \
    auto gA = TR ? transposed(wr3(ga)) : wr3(ga);                                                  \
    reduce_map(exec, seg, OuterMap<value_t<GA>, T, T>{rd(g), rd(x)}, MatrixOut<value_t<GA>>{gA},   \
               gA.r* gA.c, op.label);                                                              \
  }                                                                                                \
  /** u, W: cotangents of gx, gA. gg_i = A_s u_i + W_s x_i; x+_i = W_s^T g_i;                      \
      A+_s = sum_i g_i u_i^T (TR: transposed throughout). */                                       \
  template <class Exec, class Seg, class A, class X, class G, class U, class W, class GG,          \
            class XP, class AP>                                                                    \
  SEGOPS_REQUIRES_EXEC(Exec, Seg)                                                                  \
  void segmented_##NAME##_double_backward(const Exec& exec, const Seg& seg, const A& a,            \
                                          const X& x, const G& g, const U& u, const W& w,          \
                                          const GG& gg, const XP& xp, const AP& ap) {              \
    SEGOPS_CHECK_MATRIX("segmented_" #NAME "_double_backward", a, data);                           \
    SEGOPS_CHECK_MATRIX("segmented_" #NAME "_double_backward", w, data);                           \
    SEGOPS_CHECK_MATRIX("segmented_" #NAME "_double_backward", ap, output);                        \
    SEGOPS_SAME_TYPE("segmented_" #NAME "_double_backward", w, a);                                 \
    SEGOPS_OP_CHECKS("segmented_" #NAME "_double_backward", (x, u), (), (), (xp));                 \
    SEGOPS_ELEM_IN("segmented_" #NAME "_double_backward", g);                                      \
    SEGOPS_SAME_TYPE("segmented_" #NAME "_double_backward", g, x);                                 \
    SEGOPS_ELEM_OUT("segmented_" #NAME "_double_backward", gg);                                    \
    check_elements(op.name, "g", seg, g);                                                          \
    check_elements(op.name, "gg", seg, gg);                                                        \
    check_width(op.name, "gg", width_of(g), gg);                                                   \
    check_matrices(op, "a", seg, a, width_of(g), width_of(x), TR);                                 \
    check_matrices(op, "w", seg, w, width_of(g), width_of(x), TR);                                 \
    check_matrices(op, "ap", seg, ap, width_of(g), width_of(x), TR);                               \
    check_disjoint(                                                                                \
        op.name, {SEGOPS_SPAN(gg), SEGOPS_SPAN(xp), SEGOPS_SPAN(ap)},                              \
        {SEGOPS_SPAN(x), SEGOPS_SPAN(a), SEGOPS_SPAN(g), SEGOPS_SPAN(u), SEGOPS_SPAN(w)});         \
    using SA = value_t<A>;                                                                         \
    auto A_ = TR ? transposed(rd3(a)) : rd3(a);                                                    \
    auto W_ = TR ? transposed(rd3(w)) : rd3(w);                                                    \
    segmented_transform(exec, seg, MatVec<value_t<GG>, T, SA, true>{wr(gg), A_, W_, rd(u), rd(x)}, \
                        op.label);                                                                 \
    auto Wt = TR ? rd3(w) : transposed(rd3(w));                                                    \
    segmented_transform(                                                                           \
        exec, seg, MatVec<value_t<XP>, T, SA, false>{wr(xp), Wt, Wt, rd(g), rd(g)}, op.label);     \
    auto Ap = TR ? transposed(wr3(ap)) : wr3(ap);                                                  \
    reduce_map(exec, seg, OuterMap<value_t<AP>, T, T>{rd(g), rd(u)}, MatrixOut<value_t<AP>>{Ap},   \
               Ap.r* Ap.c, op.label);                                                              \
  }                                                                                                \
  SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_##NAME)                                                   \
  SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_##NAME##_backward)                                        \
  SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_##NAME##_double_backward)

namespace segops {

/// segmented_matvec(exec, seg, A, x, o): o_i = A_s x_i, A (M, R, C), x (N, C), o (N, R).
SEGOPS_DEFINE_MATVEC(matvec, false)
/// segmented_matvec_transposed(exec, seg, A, x, o): o_i = A_s^T x_i, x (N, R), o (N, C).
SEGOPS_DEFINE_MATVEC(matvec_transposed, true)

}  // namespace segops
