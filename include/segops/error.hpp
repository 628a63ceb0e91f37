// SPDX-License-Identifier: Apache-2.0
// SegOps: the exception thrown for host-checkable mistakes.
#pragma once

#include <stdexcept>
#include <string>

namespace segops {

/// Thrown for every host-checkable misuse (extent or width mismatch, wrong segment count, negative
/// M, an output aliasing an input, out-of-range ids in a checked descriptor). The message names the
/// op, the argument, and the expected and actual values. When it is thrown, no output has been
/// modified.
class Error : public std::invalid_argument {
 public:
  explicit Error(const std::string& what) : std::invalid_argument(what) {}
};

}  // namespace segops
