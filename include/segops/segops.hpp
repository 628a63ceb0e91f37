// SPDX-License-Identifier: Apache-2.0
// SegOps umbrella header: segment reductions and transforms with first and second derivatives.
#pragma once

#include <segops/bilinear.hpp>
#include <segops/broadcast.hpp>
#include <segops/error.hpp>
#include <segops/extrema.hpp>
#include <segops/graph.hpp>
#include <segops/matvec.hpp>
#include <segops/norms.hpp>
#include <segops/reductions.hpp>
#include <segops/segments.hpp>
