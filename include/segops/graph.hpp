// SPDX-License-Identifier: Apache-2.0
// SegOps in a Kokkos Graph: record a chain of op calls once, replay it every step.
#pragma once

#include <Kokkos_Core.hpp>
#include <Kokkos_Graph.hpp>
#include <utility>

namespace segops {

/// Appends to a Kokkos::Experimental::Graph node a node that runs `ops(exec)`, a callable making
/// SegOps calls on the execution space instance it receives. On CUDA the calls are captured into
/// the graph once (their kernels are replayed by every submit); on host backends they run as a host
/// node each time the graph is submitted. Either way the chain needs no fence, allocation or host
/// copy, which every SegOps call guarantees. Returns the new node, so nodes can be chained.
template <class Node, class Exec, class Ops>
auto then_ops(const Node& node, const Exec& exec, Ops&& ops) {
#if defined(KOKKOS_ENABLE_CUDA)
  if constexpr (std::is_same_v<Exec, Kokkos::Cuda>) {
    return node.cuda_capture(exec, std::forward<Ops>(ops));
  } else
#endif
  {
    return node.then_host("segops::then_ops",
                          [exec, ops = std::forward<Ops>(ops)]() { ops(exec); });
  }
}

}  // namespace segops
