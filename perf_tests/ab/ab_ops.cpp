// SPDX-License-Identifier: Apache-2.0
// Compiled twice (scripts/ab.sh): with SEGOPS_AB_BASE defined against the baseline's headers,
// whose namespace is renamed so that both versions link into one program, and without it against
// the working tree's.
#include "ab_common.hpp"
#ifdef SEGOPS_AB_BASE
#define segops segops_ab_base
#endif
#include <memory>
#include <segops/segops.hpp>

namespace ab {

#ifdef SEGOPS_AB_BASE
void run_base(int k, Data& d) {
#else
void run_work(int k, Data& d) {
#endif
  // One descriptor per side, built once for these ids (as a user's loop reuses it).
  static std::unique_ptr<segops::Segments<std::int32_t, Host>> seg;
  static const std::int32_t* built_for = nullptr;
  if (k < 0) {  // release it (before Kokkos is finalized)
    seg.reset();
    return;
  }
  if (!seg || built_for != d.ids.data()) {
    seg = std::make_unique<segops::Segments<std::int32_t, Host>>(d.ids, d.m);
    built_for = d.ids.data();
  }
  const auto& s = *seg;
  using namespace segops;
  switch (k) {
    case 0:
      segmented_sum(s, d.x, d.os);
      break;
    case 1:
      segmented_sum_backward(s, d.gs, d.o1);
      break;
    case 2:
      segmented_mean_backward(s, d.gs, d.o1);
      break;
    case 3:
      segmented_mul(s, d.a, d.x, d.o1);
      break;
    case 4:
      segmented_mul_backward(s, d.a, d.x, d.g, d.o1, d.p1);
      break;
    case 5:
      segmented_mul_double_backward(s, d.a, d.x, d.g, d.u, d.wa, d.o1, d.o2, d.p1);
      break;
    case 6:
      segmented_dot_backward(s, d.x, d.y, d.a, d.o1, d.o2);
      break;
    case 7:
      segmented_dot_double_backward(s, d.x, d.y, d.a, d.u, d.v, d.p1, d.o1, d.o2);
      break;
    case 8:
      segmented_inner_products_backward(s, d.x, d.y, d.a, d.b, d.c, d.o1, d.o2);
      break;
    case 9:
      segmented_inner_products_double_backward(s, d.x, d.y, d.a, d.b, d.c, d.u, d.v, d.p1, d.p2,
                                               d.p3, d.o1, d.o2);
      break;
    case 10:
      segmented_axpby(s, d.a, d.x, d.b, d.y, d.o1);
      break;
    case 11:
      segmented_axpby_backward(s, d.a, d.x, d.b, d.y, d.g, d.o1, d.o2, d.p1, d.p2);
      break;
    case 12:
      segmented_axpby_double_backward(s, d.a, d.x, d.b, d.y, d.g, d.u, d.v, d.wa, d.wb, d.o1, d.o2,
                                      d.o3, d.p1, d.p2);
      break;
    case 13:
      segmented_axpy_backward(s, d.a, d.x, d.g, d.o1, d.o2, d.p1);
      break;
    case 14:
      segmented_axpy_double_backward(s, d.a, d.x, d.g, d.u, d.v, d.wa, d.o1, d.o2, d.p1);
      break;
    case 15:
      segmented_rms_norm_backward(s, d.x, d.r, d.a, d.o1);
      break;
    case 16:
      segmented_max_backward(s, d.arg, d.gs, d.o1);
      break;
    case 17:
      segmented_max_double_backward(s, d.arg, d.u, d.os);
      break;
    case 18:
      segmented_max_norm_backward(s, d.x, d.argn, d.a, d.o1);
      break;
    case 19:
      segmented_max_norm_double_backward(s, d.x, d.argn, d.a, d.u, d.p1, d.o1);
      break;
    case 20:
      segmented_mean(s, d.x, d.os);
      break;
    case 21:
      segmented_dot(s, d.x, d.y, d.p1);
      break;
    default:
      break;
  }
  Kokkos::fence();
}

}  // namespace ab
