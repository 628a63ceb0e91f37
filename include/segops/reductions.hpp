// SPDX-License-Identifier: Apache-2.0
// SegOps: linear per-segment reductions (sum, mean, component_sum, count), with first and second
// order backward. Element views are (N) or (N, D); per-segment views (M) or (M, D) of the same
// rank. Each call enqueues work on `exec` and returns: no fence, no allocation, no host copy.
#pragma once

#include <segops/impl/linear_ops.hpp>
#include <segops/segments.hpp>

namespace segops {

/// out(s) = sum of x(i) over the elements of segment s (0 for an empty segment), accumulated in
/// out's value type. Sorted ids or deterministic descriptors: atomic-free and bitwise reproducible;
/// otherwise floating-point atomics. \throws segops::Error on extent/width mismatch or aliasing.
/// Complexity O(N D).
template <class Exec, class Seg, class X, class Out>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_sum(const Exec& exec, const Seg& seg, const X& x, const Out& out) {
  SEGOPS_LINEAR_REDUCE(exec, seg, "segmented_sum", x, out, impl::NoFinalize{});
}
/// gx(i) = g(s(i)) (a broadcast); 0 for dropped ids.
template <class Exec, class Seg, class G, class GX>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_sum_backward(const Exec& exec, const Seg& seg, const G& g, const GX& gx) {
  SEGOPS_LINEAR_GATHER(exec, seg, "segmented_sum_backward", g, gx, impl::Unscaled{});
}
/// gg(s) = sum of u(i) over segment s (the adjoint of g in the backward).
template <class Exec, class Seg, class U, class GG>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_sum_double_backward(const Exec& exec, const Seg& seg, const U& u, const GG& gg) {
  SEGOPS_LINEAR_REDUCE(exec, seg, "segmented_sum_double_backward", u, gg, impl::NoFinalize{});
}

/// out(s) = sum of x(i) over segment s divided by c_s; 0 for an empty segment.
template <class Exec, class Seg, class X, class Out>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_mean(const Exec& exec, const Seg& seg, const X& x, const Out& out) {
  SEGOPS_LINEAR_REDUCE(exec, seg, "segmented_mean", x, out, impl::divide_by_count(seg));
}
/// gx(i) = g(s(i)) / c_s(i).
template <class Exec, class Seg, class G, class GX>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_mean_backward(const Exec& exec, const Seg& seg, const G& g, const GX& gx) {
  SEGOPS_LINEAR_GATHER(exec, seg, "segmented_mean_backward", g, gx, impl::divided_by_count(seg));
}
/// gg(s) = sum of u(i) over segment s divided by c_s.
template <class Exec, class Seg, class U, class GG>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_mean_double_backward(const Exec& exec, const Seg& seg, const U& u, const GG& gg) {
  SEGOPS_LINEAR_REDUCE(exec, seg, "segmented_mean_double_backward", u, gg,
                       impl::divide_by_count(seg));
}

/// out(s) = sum over the elements of s and all components of x(i, d); x is (N, D), out is (M).
template <class Exec, class Seg, class X, class Out>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_component_sum(const Exec& exec, const Seg& seg, const X& x, const Out& out) {
  SEGOPS_COMPONENT_REDUCE(exec, seg, "segmented_component_sum", x, out);
}
/// gx(i, d) = g(s(i)) for every component d; g is (M), gx is (N, D).
template <class Exec, class Seg, class G, class GX>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_component_sum_backward(const Exec& exec, const Seg& seg, const G& g, const GX& gx) {
  SEGOPS_COMPONENT_GATHER(exec, seg, "segmented_component_sum_backward", g, gx);
}
/// gg(s) = sum over the elements of s and all components of u(i, d).
template <class Exec, class Seg, class U, class GG>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_component_sum_double_backward(const Exec& exec, const Seg& seg, const U& u,
                                             const GG& gg) {
  SEGOPS_COMPONENT_REDUCE(exec, seg, "segmented_component_sum_double_backward", u, gg);
}

/// out(s) = c_s, the number of (in-range) elements of segment s; out is an int32 or int64 (M) view.
template <class Exec, class Seg, class Out>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_count(const Exec& exec, const Seg& seg, const Out& out) {
  impl::count_op(exec, seg, out);
}

SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_sum)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_sum_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_sum_double_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_mean)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_mean_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_mean_double_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_component_sum)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_component_sum_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_component_sum_double_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_count)

}  // namespace segops
