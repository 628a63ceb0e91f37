// SPDX-License-Identifier: Apache-2.0
// Test main: registers a Kokkos Tools settings callback that turns off the global fencing Kokkos
// adds around kernels once a tool is attached, so the hygiene test sees the library's own fences.
#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <cstdio>

namespace {
void no_global_fencing(std::uint32_t, Kokkos_Tools_ToolSettings* settings) {
  settings->requires_global_fencing = false;
}
}  // namespace

int main(int argc, char* argv[]) {
#ifdef SEGOPS_TEST_TYPE_SUBSET
  std::fprintf(stderr,
               "this executable is a compile check built with SegOps_TEST_TYPE_SUBSET=ON: most of "
               "its tests would throw; rebuild without it to run the tests\n");
  return 2;
#endif
  Kokkos::Tools::Experimental::set_request_tool_settings_callback(no_global_fencing);
  Kokkos::ScopeGuard guard(argc, argv);
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
