// SPDX-License-Identifier: Apache-2.0
// SegOps: per-component segment max and min with first and second order backward.
// x is (N) or (N, D); out and arg are (M) or (M, D) of the same rank. Empty segments give -inf
// (max) / +inf (min) and arg -1; ties go to the lowest element index; NaN propagates. The backward
// orders take back the forward's `arg` (int32 or int64).
// A call enqueues work on `exec` and returns: no fence, no allocation, no host copy.
// \throws segops::Error on an extent mismatch (including `arg` of the wrong shape) or aliasing.
#pragma once

#include <segops/impl/checks.hpp>
#include <segops/impl/nonlinear.hpp>
#include <segops/norms.hpp>
#include <segops/segments.hpp>

namespace segops::impl {

template <bool IsMax, class Exec, class Seg, class X, class Out, class I>
void extremum(const Exec& exec, const Seg& seg, const X& x, const Out& out, Mat<I> arg, OpName op) {
  check_segments(op.name, "out", seg, out);
  check_width(op.name, "out", width_of(x), out);
  reduce_maxloc<IsMax, false>(exec, seg, ComponentValue<value_t<Out>, value_t<X>>{rd(x)}, wr(out),
                              arg, width_of(x), op.label);
}

}  // namespace segops::impl

/// Defines segmented_NAME(exec, seg, x, out[, arg]), its backward (arg, g, gx) and its double
/// backward (arg, u, gg) for max (IS_MAX true) and min.
#define SEGOPS_DEFINE_EXTREMUM(NAME, IS_MAX)                                                      \
  template <class Exec, class Seg, class X, class Out, class Arg>                                 \
  SEGOPS_REQUIRES_EXEC(Exec, Seg)                                                                 \
  void segmented_##NAME(const Exec& exec, const Seg& seg, const X& x, const Out& out,             \
                        const Arg& arg) {                                                         \
    SEGOPS_OP_CHECKS("segmented_" #NAME, (x), (), (), ());                                        \
    SEGOPS_ELEM_OUT("segmented_" #NAME, out);                                                     \
    SEGOPS_CHECK_SAME_RANK("segmented_" #NAME, out, x);                                           \
    SEGOPS_CHECK_ARG_OUT("segmented_" #NAME, arg, SEGOPS_T(x)::rank());                           \
    check_segments(op.name, "arg", seg, arg);                                                     \
    check_width(op.name, "arg", width_of(x), arg);                                                \
    check_disjoint(op.name, {SEGOPS_SPAN(out), SEGOPS_SPAN(arg)}, {SEGOPS_SPAN(x)});              \
    extremum<IS_MAX>(exec, seg, x, out, wr(arg), op);                                             \
  }                                                                                               \
  template <class Exec, class Seg, class X, class Out>                                            \
  SEGOPS_REQUIRES_EXEC(Exec, Seg)                                                                 \
  void segmented_##NAME(const Exec& exec, const Seg& seg, const X& x, const Out& out) {           \
    SEGOPS_OP_CHECKS("segmented_" #NAME, (x), (), (), ());                                        \
    SEGOPS_ELEM_OUT("segmented_" #NAME, out);                                                     \
    SEGOPS_CHECK_SAME_RANK("segmented_" #NAME, out, x);                                           \
    check_disjoint(op.name, {SEGOPS_SPAN(out)}, {SEGOPS_SPAN(x)});                                \
    extremum<IS_MAX>(exec, seg, x, out, Mat<std::int64_t>{}, op);                                 \
  }                                                                                               \
  /** gx(i, d) = g(s, d) where arg(s, d) = i, else 0. */                                          \
  template <class Exec, class Seg, class Arg, class G, class GX>                                  \
  SEGOPS_REQUIRES_EXEC(Exec, Seg)                                                                 \
  void segmented_##NAME##_backward(const Exec& exec, const Seg& seg, const Arg& arg, const G& g,  \
                                   const GX& gx) {                                                \
    SEGOPS_CHECK_EXEC("segmented_" #NAME "_backward", Exec, Seg);                                 \
    SEGOPS_ELEM_IN("segmented_" #NAME "_backward", g);                                            \
    SEGOPS_ELEM_OUT("segmented_" #NAME "_backward", gx);                                          \
    SEGOPS_OP_BEGIN("segmented_" #NAME "_backward", g);                                           \
    SEGOPS_CHECK_SAME_RANK("segmented_" #NAME "_backward", g, gx);                                \
    SEGOPS_CHECK_ARG("segmented_" #NAME "_backward", arg, SEGOPS_T(gx)::rank());                  \
    check_segments(op.name, "g", seg, g);                                                         \
    check_elements(op.name, "gx", seg, gx);                                                       \
    check_width(op.name, "gx", width_of(g), gx);                                                  \
    check_segments(op.name, "arg", seg, arg);                                                     \
    check_width(op.name, "arg", width_of(g), arg);                                                \
    check_disjoint(op.name, {SEGOPS_SPAN(gx)}, {SEGOPS_SPAN(arg), SEGOPS_SPAN(g)});               \
    zero_rows(exec, wr(gx), op.label); /* then each arg element's component, per segment */       \
    using F = ArgScatter<value_t<GX>, T, value_t<Arg>>;                                           \
    segment_transform(exec, seg, F{wr(gx), rd(g), rd(arg)}, op.label);                            \
  }                                                                                               \
  /** u: cotangent of gx. gg(s, d) = u(arg(s, d), d), 0 for an empty segment. */                  \
  template <class Exec, class Seg, class Arg, class U, class GG>                                  \
  SEGOPS_REQUIRES_EXEC(Exec, Seg)                                                                 \
  void segmented_##NAME##_double_backward(const Exec& exec, const Seg& seg, const Arg& arg,       \
                                          const U& u, const GG& gg) {                             \
    SEGOPS_OP_CHECKS("segmented_" #NAME "_double_backward", (u), (), (), ());                     \
    SEGOPS_ELEM_OUT("segmented_" #NAME "_double_backward", gg);                                   \
    SEGOPS_CHECK_SAME_RANK("segmented_" #NAME "_double_backward", gg, u);                         \
    SEGOPS_CHECK_ARG("segmented_" #NAME "_double_backward", arg, SEGOPS_T(u)::rank());            \
    Extents<Seg>{op.name, seg, width_of(u)}.segment_rows("arg", arg).segment_rows("gg", gg);      \
    check_disjoint(op.name, {SEGOPS_SPAN(gg)}, {SEGOPS_SPAN(arg), SEGOPS_SPAN(u)});               \
    segment_transform(exec, seg, ArgGather<value_t<GG>, T, value_t<Arg>>{wr(gg), rd(u), rd(arg)}, \
                      op.label);                                                                  \
  }                                                                                               \
  SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_##NAME)                                                  \
  SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_##NAME##_backward)                                       \
  SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_##NAME##_double_backward)

namespace segops {

/// segmented_max(exec, seg, x, out[, arg]): out(s, d) = max over segment s of x(i, d).
SEGOPS_DEFINE_EXTREMUM(max, true)
/// segmented_min(exec, seg, x, out[, arg]): out(s, d) = min over segment s of x(i, d).
SEGOPS_DEFINE_EXTREMUM(min, false)

}  // namespace segops
