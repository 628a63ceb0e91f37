# SPDX-License-Identifier: Apache-2.0
# A downstream project using SegOps, as a user would write it.
cmake_minimum_required(VERSION 3.25)
project(segops_consumer LANGUAGES CXX)
if(SEGOPS_CONSUMER_MODE STREQUAL "add_subdirectory")
  find_package(Kokkos 5.0 REQUIRED)  # the host project's own Kokkos, found before SegOps
  add_subdirectory(${SEGOPS_SOURCE_DIR} segops)
else()
  find_package(SegOps REQUIRED)
endif()
add_executable(readme_example readme_example.cpp)
target_link_libraries(readme_example PRIVATE SegOps::segops)
