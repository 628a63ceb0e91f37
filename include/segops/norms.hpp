// SPDX-License-Identifier: Apache-2.0
// SegOps: per-segment norms, rms_norm and max_norm, with first and second order backward.
// x (and u) are (N) or (N, D) element views of one value type; per-segment views are (M). The
// backward orders take back the forward's state: rms_norm its output `out`, max_norm its `argmax`.
// A call enqueues work on `exec` and returns: no fence, no allocation, no host copy.
// \throws segops::Error on an extent mismatch (including state of the wrong shape) or aliasing.
#pragma once

#include <segops/impl/checks.hpp>
#include <segops/impl/nonlinear.hpp>
#include <segops/segments.hpp>

#define SEGOPS_CHECK_ARG(OP, ARG, RANK)                                         \
  static_assert(::segops::impl::is_arg_view_v<SEGOPS_T(ARG), SEGOPS_T(exec)> && \
                    SEGOPS_T(ARG)::rank() == RANK,                              \
                "segops::" OP ": argument '" #ARG                               \
                "' must be a Kokkos::View of int32_t or "                       \
                "int64_t of the per-segment output's shape, accessible from the execution space")
#define SEGOPS_CHECK_ARG_OUT(OP, ARG, RANK)                           \
  SEGOPS_CHECK_ARG(OP, ARG, RANK);                                    \
  static_assert(!std::is_const_v<typename SEGOPS_T(ARG)::value_type>, \
                "segops::" OP ": output '" #ARG "' must not be a const View")

namespace segops {

/// out(s) = sqrt(sum_i ||x_i||^2 / c_s), 0 for an empty segment.
template <class Exec, class Seg, class X, class Out>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_rms_norm(const Exec& exec, const Seg& seg, const X& x, const Out& out) {
  SEGOPS_OP_CHECKS("segmented_rms_norm", (x), (), (out), ());
  reduce_map(exec, seg, SquaresMap<value_t<Out>, T>{{rd(x), rd(x)}}, wr(out), 1, op.label,
             RmsFinalize<decltype(seg.counts())>{seg.counts()});
}
/// gx_i = g_s n_s x_i with n_s = 1 / (c_s out_s) (0 where out_s = 0). `out`: the forward's result.
template <class Exec, class Seg, class X, class Out, class G, class GX>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_rms_norm_backward(const Exec& exec, const Seg& seg, const X& x, const Out& out,
                                 const G& g, const GX& gx) {
  SEGOPS_OP_CHECKS("segmented_rms_norm_backward", (x), (out, g), (), (gx));
  segmented_transform(exec, seg,
                      RmsBackward<value_t<GX>, T, S, decltype(seg.counts())>{wr(gx), rd(x), rd(out),
                                                                             rd(g), seg.counts()},
                      op.label);
}
/// u: cotangent of gx. gg_s = n_s sum <u_i, x_i>; x+_i = g_s n_s u_i - g_s n_s^3 c_s (sum <u, x>)
/// x_i.
template <class Exec, class Seg, class X, class Out, class G, class U, class GG, class XP>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_rms_norm_double_backward(const Exec& exec, const Seg& seg, const X& x,
                                        const Out& out, const G& g, const U& u, const GG& gg,
                                        const XP& xp) {
  SEGOPS_OP_CHECKS("segmented_rms_norm_double_backward", (x, u), (out, g), (gg), (xp));
  using Counts = decltype(seg.counts());
  reduce_map(exec, seg, DotMap<value_t<GG>, T, T>{rd(u), rd(x)}, wr(gg), 1, op.label,
             RmsScaleByN<S, Counts>{rd(out), seg.counts()});
  segmented_transform(exec, seg,
                      RmsDoubleBackward<value_t<XP>, T, S, value_t<GG>, Counts>{
                          wr(xp), rd(x), rd(u), rd(out), rd(g), rd(gg), seg.counts()},
                      op.label);
}

/// out(s) = max_i ||x_i||_2 (|x_i| for rank 1), 0 for an empty segment; argmax(s) = the element
/// attaining it (lowest index on ties, -1 if empty). The overload without argmax skips it.
template <class Exec, class Seg, class X, class Out, class Arg>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_max_norm(const Exec& exec, const Seg& seg, const X& x, const Out& out,
                        const Arg& argmax) {
  SEGOPS_OP_CHECKS("segmented_max_norm", (x), (), (out), ());
  SEGOPS_CHECK_ARG_OUT("segmented_max_norm", argmax, 1);
  check_segments(op.name, "argmax", seg, argmax);
  check_disjoint(op.name, {SEGOPS_SPAN(argmax), SEGOPS_SPAN(out)}, {SEGOPS_SPAN(x)});
  with_row_norm<value_t<Out>, Exec>(rd(x), [&](const auto& norm) {
    reduce_maxloc<true, true>(exec, seg, norm, wr(out), wr(argmax), 1, op.label);
  });
}
template <class Exec, class Seg, class X, class Out>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_max_norm(const Exec& exec, const Seg& seg, const X& x, const Out& out) {
  SEGOPS_OP_CHECKS("segmented_max_norm", (x), (), (out), ());
  with_row_norm<value_t<Out>, Exec>(rd(x), [&](const auto& norm) {
    reduce_maxloc<true, true>(exec, seg, norm, wr(out), impl::Mat<std::int64_t>{}, 1, op.label);
  });
}
/// gx_i = g_s x_i / ||x_i|| at i = argmax(s) (0 if ||x|| = 0), 0 elsewhere.
template <class Exec, class Seg, class X, class Arg, class G, class GX>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_max_norm_backward(const Exec& exec, const Seg& seg, const X& x, const Arg& argmax,
                                 const G& g, const GX& gx) {
  SEGOPS_OP_CHECKS("segmented_max_norm_backward", (x), (g), (), (gx));
  SEGOPS_CHECK_ARG("segmented_max_norm_backward", argmax, 1);
  check_segments(op.name, "argmax", seg, argmax);
  check_disjoint(op.name, {SEGOPS_SPAN(gx)}, {SEGOPS_SPAN(argmax)});
  zero_rows(exec, wr(gx), op.label);  // then the argmax element's row, per segment
  using F = MaxNormScatter<value_t<GX>, T, S, value_t<Arg>, false>;
  segment_transform(exec, seg, F{wr(gx), rd(x), rd(x), rd(argmax), rd(g), {}}, op.label);
}
/// u: cotangent of gx. At i* = argmax(s), p = <x^_{i*}, u_{i*}>: gg_s = p,
/// x+_{i*} = (g_s / ||x_{i*}||)(u_{i*} - x^_{i*} p); 0 elsewhere and where ||x|| = 0.
template <class Exec, class Seg, class X, class Arg, class G, class U, class GG, class XP>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_max_norm_double_backward(const Exec& exec, const Seg& seg, const X& x,
                                        const Arg& argmax, const G& g, const U& u, const GG& gg,
                                        const XP& xp) {
  SEGOPS_OP_CHECKS("segmented_max_norm_double_backward", (x, u), (g), (gg), (xp));
  SEGOPS_CHECK_ARG("segmented_max_norm_double_backward", argmax, 1);
  check_segments(op.name, "argmax", seg, argmax);
  check_disjoint(op.name, {SEGOPS_SPAN(gg), SEGOPS_SPAN(xp)}, {SEGOPS_SPAN(argmax)});
  zero_rows(exec, wr(xp), op.label);  // then gg_s and the argmax element's row, per segment
  using F = MaxNormScatter<value_t<XP>, T, S, value_t<Arg>, true, value_t<GG>>;
  segment_transform(exec, seg, F{wr(xp), rd(x), rd(u), rd(argmax), rd(g), wr(gg)}, op.label);
}

SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_rms_norm)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_rms_norm_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_rms_norm_double_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_max_norm)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_max_norm_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_max_norm_double_backward)

}  // namespace segops
