// SPDX-License-Identifier: Apache-2.0
// Host ops in a CUDA build (CUDA executable only): a LAMMPS-style code built with Kokkos' CUDA
// backend may run some segment ops on host copies (Kokkos::DefaultHostExecutionSpace). Their host
// kernels must compile under nvcc too (ElementTransform's four-element path once did not).
#include <gtest/gtest.h>

#include <segops/segops.hpp>

namespace {

using Host = Kokkos::DefaultHostExecutionSpace;
template <class T>
using HView = Kokkos::View<T*, Kokkos::HostSpace>;
template <class T>
using HRows = Kokkos::View<T**, Kokkos::LayoutRight, Kokkos::HostSpace>;

TEST(HostOpsInCudaBuild, SortedGathersAndInnerProducts) {
  const int n = 9, m = 3;  // segments {0, 1}, {2, 3, 4}, {5, .., 8}
  HView<int> ids("ids", n);
  HView<float> x("x", n), y("y", n), g("g", n), xy("xy", m), xx("xx", m), yy("yy", m);
  HRows<float> v("v", m, 3), rows("rows", n, 3);
  const int seg_of[n] = {0, 0, 1, 1, 1, 2, 2, 2, 2};
  for (int i = 0; i < n; ++i) {
    ids(i) = seg_of[i];
    x(i) = float(i + 1);
    y(i) = 2.0f;
  }
  for (int s = 0; s < m; ++s)
    for (int d = 0; d < 3; ++d) v(s, d) = float(10 * s + d);
  segops::Segments seg(Host(), ids, m);
  segops::segmented_sum_backward(Host(), seg, xy, g);  // xy = 0 here: g = 0
  segops::segmented_inner_products(Host(), seg, x, y, xy, xx, yy);
  segops::segmented_broadcast(Host(), seg, v, rows);
  segops::segmented_sum_backward(Host(), seg, xy, g);
  Host().fence();
  const float want_xy[m] = {2 * (1 + 2), 2 * (3 + 4 + 5), 2 * (6 + 7 + 8 + 9)};
  const float want_xx[m] = {1 + 4, 9 + 16 + 25, 36 + 49 + 64 + 81};
  for (int s = 0; s < m; ++s) {
    EXPECT_EQ(xy(s), want_xy[s]);
    EXPECT_EQ(xx(s), want_xx[s]);
    EXPECT_EQ(yy(s), 4.0f * float(s == 0 ? 2 : s == 1 ? 3 : 4));
  }
  for (int i = 0; i < n; ++i) {
    EXPECT_EQ(g(i), want_xy[seg_of[i]]);
    for (int d = 0; d < 3; ++d) EXPECT_EQ(rows(i, d), float(10 * seg_of[i] + d));
  }
}

}  // namespace
