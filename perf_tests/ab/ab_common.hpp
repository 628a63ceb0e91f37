// SPDX-License-Identifier: Apache-2.0
// A/B timing of two versions of the SegOps headers in one process (scripts/ab.sh): ab_ops.cpp is
// compiled twice, once against a baseline revision's headers (their namespace renamed) and once
// against the working tree's; ab_main.cpp calls the two alternately on the same data.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>

namespace ab {

#ifdef SEGOPS_AB_DOUBLE
using T = double;
#else
using T = float;
#endif
using Host = Kokkos::DefaultHostExecutionSpace;
using Rows = Kokkos::View<T**, Kokkos::LayoutRight, Host>;  // (N, D) or (M, D)
using Vals = Kokkos::View<T*, Host>;                        // (M): one value per segment

/// The inputs and outputs of every op in kOps (which reads what: ab_ops.cpp).
struct Data {
  std::int64_t n = 0, m = 0, d = 1;
  Kokkos::View<std::int32_t*, Host> ids;
  Rows x, y, g, u, v, gs;   // element rows; gs: a row per segment (a cotangent)
  Vals a, b, c, wa, wb, r;  // per-segment values (r > 0: rms_norm's output)
  Rows o1, o2, o3, os;      // element outputs; os: a row per segment
  Vals p1, p2, p3;          // per-segment outputs
  Kokkos::View<std::int64_t**, Kokkos::LayoutRight, Host> arg;  // (M, D): x's max per segment
  Kokkos::View<std::int64_t*, Host> argn;  // (M): the row of x of largest norm per segment
};

/// The ops both sides run (segops::segmented_<name>), in ab_ops.cpp's order.
inline constexpr const char* kOps[] = {"sum",
                                       "sum_backward",
                                       "mean_backward",
                                       "mul",
                                       "mul_backward",
                                       "mul_double_backward",
                                       "dot_backward",
                                       "dot_double_backward",
                                       "inner_products_backward",
                                       "inner_products_double_backward",
                                       "axpby",
                                       "axpby_backward",
                                       "axpby_double_backward",
                                       "axpy_backward",
                                       "axpy_double_backward",
                                       "rms_norm_backward",
                                       "max_backward",
                                       "max_double_backward",
                                       "max_norm_backward",
                                       "max_norm_double_backward",
                                       "mean",
                                       "dot"};
inline constexpr int kNumOps = sizeof(kOps) / sizeof(kOps[0]);

/// Runs op k of kOps on d with the baseline's headers or the working tree's; k < 0 releases the
/// descriptor each keeps.
void run_base(int k, Data& d);
void run_work(int k, Data& d);

}  // namespace ab
