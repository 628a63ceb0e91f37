// SPDX-License-Identifier: Apache-2.0
// The bilinear family's sweeps over 64-bit ids and double values, and over float inputs
// accumulated into double outputs (test_bilinear.cpp has the rest; apart so that the two largest
// halves of the family compile in parallel).
#include "test_ops_common.hpp"

namespace segtest::ops {
namespace {

TEST(Bilinear, AllOpsInt64DoubleDouble) {
  for (Mode mode : kModes) sweep<Bilinear, std::int64_t, double, double, i64>(mode, 102);
}
TEST(Bilinear, AllOpsInt32FloatIntoDouble) {
  for (Mode mode : kModes) sweep<Bilinear, std::int32_t, float, double, i64>(mode, 103);
}

}  // namespace
}  // namespace segtest::ops
