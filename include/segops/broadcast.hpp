// SPDX-License-Identifier: Apache-2.0
// SegOps: broadcast of per-segment values to the elements, with first and second order backward.
#pragma once

#include <segops/impl/linear_ops.hpp>
#include <segops/segments.hpp>

namespace segops {

/// o(i) = v(s(i)); v is (M[,D]), o is (N[,D]) of the same rank; 0 for dropped ids. O(N D).
/// \throws segops::Error on extent/width mismatch or aliasing.
template <class Exec, class Seg, class V, class O>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_broadcast(const Exec& exec, const Seg& seg, const V& v, const O& o) {
  SEGOPS_LINEAR_GATHER(exec, seg, "segmented_broadcast", v, o, impl::Unscaled{});
}
/// gv(s) = sum of g(i) over segment s (a segmented sum).
template <class Exec, class Seg, class G, class GV>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_broadcast_backward(const Exec& exec, const Seg& seg, const G& g, const GV& gv) {
  SEGOPS_LINEAR_REDUCE(exec, seg, "segmented_broadcast_backward", g, gv, impl::NoFinalize{});
}
/// gg(i) = u(s(i)) (the adjoint of g in the backward: a broadcast again).
template <class Exec, class Seg, class U, class GG>
SEGOPS_REQUIRES_EXEC(Exec, Seg)
void segmented_broadcast_double_backward(const Exec& exec, const Seg& seg, const U& u,
                                         const GG& gg) {
  SEGOPS_LINEAR_GATHER(exec, seg, "segmented_broadcast_double_backward", u, gg, impl::Unscaled{});
}

SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_broadcast)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_broadcast_backward)
SEGOPS_DEFAULT_EXEC_OVERLOAD(segmented_broadcast_double_backward)

}  // namespace segops
