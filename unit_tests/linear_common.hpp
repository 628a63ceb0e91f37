// SPDX-License-Identifier: Apache-2.0
// The linear family (sum, mean, component_sum, broadcast; forward, backward, double backward) as
// a table the tests iterate over: a runtime dispatcher to the library and a double-precision
// serial reference for each entry.
#pragma once

#include "test_common.hpp"

namespace segtest {

enum class LinOp {
  SumFwd,
  SumBwd,
  SumDbl,
  MeanFwd,
  MeanBwd,
  MeanDbl,
  CompFwd,
  CompBwd,
  CompDbl,
  BcastFwd,
  BcastBwd,
  BcastDbl
};

/// Shape of one linear op. Element-side views are (N[, D]), segment-side views (M[, D]);
/// component ops have an (N, D) element side and an (M) segment side.
struct LinOpInfo {
  LinOp op;
  const char* name;    // the library function, as its error messages and labels spell it
  const char* in_arg;  // its parameter names, as its error messages spell them
  const char* out_arg;
  bool reduces;    // element-side input -> segment-side output; otherwise a gather
  bool by_count;   // divides by c_s
  bool component;  // the component form: rank-2 element side, rank-1 segment side

  i64 in_rows(const Case& c) const { return reduces ? c.n() : c.m; }
  i64 out_rows(const Case& c) const { return reduces ? c.m : c.n(); }
  i64 in_width(i64 d) const { return component && !reduces ? 1 : d; }
  i64 out_width(i64 d) const { return component && reduces ? 1 : d; }
};

// clang-format off
inline constexpr LinOpInfo kLinearOps[] = {
  {LinOp::SumFwd,   "segmented_sum",                           "x", "out", true,  false, false},
  {LinOp::SumBwd,   "segmented_sum_backward",                  "g", "gx",  false, false, false},
  {LinOp::SumDbl,   "segmented_sum_double_backward",           "u", "gg",  true,  false, false},
  {LinOp::MeanFwd,  "segmented_mean",                          "x", "out", true,  true,  false},
  {LinOp::MeanBwd,  "segmented_mean_backward",                 "g", "gx",  false, true,  false},
  {LinOp::MeanDbl,  "segmented_mean_double_backward",          "u", "gg",  true,  true,  false},
  {LinOp::CompFwd,  "segmented_component_sum",                 "x", "out", true,  false, true},
  {LinOp::CompBwd,  "segmented_component_sum_backward",        "g", "gx",  false, false, true},
  {LinOp::CompDbl,  "segmented_component_sum_double_backward", "u", "gg",  true,  false, true},
  {LinOp::BcastFwd, "segmented_broadcast",                     "v", "o",   false, false, false},
  {LinOp::BcastBwd, "segmented_broadcast_backward",            "g", "gv",  true,  false, false},
  {LinOp::BcastDbl, "segmented_broadcast_double_backward",     "u", "gg",  false, false, false},
};
// clang-format on
static_assert(
    [] {
      for (int k = 0; k < 12; ++k)
        if (static_cast<int>(kLinearOps[k].op) != k) return false;
      return true;
    }(),
    "kLinearOps must be indexed by LinOp");

/// The table entry of `op`.
inline const LinOpInfo& info(LinOp op) { return kLinearOps[static_cast<int>(op)]; }

/// Calls the library op `op` (on `exec`, or through the overload without an instance when
/// `with_instance` is false). Ranks of `in` and `out` must fit the op.
template <class ExecSpace, class Seg, class In, class Out>
void call_linear(const ExecSpace& exec, LinOp op, const Seg& seg, const In& in, const Out& out,
                 bool with_instance) {
  using namespace segops;
#define SEGTEST_CALL(F)      \
  do {                       \
    if (with_instance)       \
      F(exec, seg, in, out); \
    else                     \
      F(seg, in, out);       \
    return;                  \
  } while (false)
  if constexpr (In::rank() == Out::rank()) {
    switch (op) {
      case LinOp::SumFwd:
        SEGTEST_CALL(segmented_sum);
      case LinOp::SumBwd:
        SEGTEST_CALL(segmented_sum_backward);
      case LinOp::SumDbl:
        SEGTEST_CALL(segmented_sum_double_backward);
      case LinOp::MeanFwd:
        SEGTEST_CALL(segmented_mean);
      case LinOp::MeanBwd:
        SEGTEST_CALL(segmented_mean_backward);
      case LinOp::MeanDbl:
        SEGTEST_CALL(segmented_mean_double_backward);
      case LinOp::BcastFwd:
        SEGTEST_CALL(segmented_broadcast);
      case LinOp::BcastBwd:
        SEGTEST_CALL(segmented_broadcast_backward);
      case LinOp::BcastDbl:
        SEGTEST_CALL(segmented_broadcast_double_backward);
      default:
        break;
    }
  } else if constexpr (In::rank() == 2 && Out::rank() == 1) {
    if (op == LinOp::CompFwd) SEGTEST_CALL(segmented_component_sum);
    if (op == LinOp::CompDbl) SEGTEST_CALL(segmented_component_sum_double_backward);
  } else if constexpr (In::rank() == 1 && Out::rank() == 2) {
    if (op == LinOp::CompBwd) SEGTEST_CALL(segmented_component_sum_backward);
  }
#undef SEGTEST_CALL
  ADD_FAILURE() << "run_linear: op " << static_cast<int>(op) << " does not take ranks "
                << In::rank() << " -> " << Out::rank();
}

/// call_linear where the build calls the library with these types (kTypesBuilt: element side
/// float, segment side double, both LayoutRight under SEGOPS_TEST_TYPE_SUBSET; every call
/// otherwise); types_not_built() where it does not.
template <class ExecSpace, class Seg, class In, class Out>
void run_linear(const ExecSpace& exec, LinOp op, const Seg& seg, const In& in, const Out& out,
                bool with_instance = true) {
  using InV = typename In::non_const_value_type;
  using OutV = typename Out::non_const_value_type;
  using InL = typename In::array_layout;
  using OutL = typename Out::array_layout;
  if constexpr ((kTypesBuilt<InV, OutV, InL> && kTypesBuilt<InV, OutV, OutL>) ||
                (kTypesBuilt<OutV, InV, InL> && kTypesBuilt<OutV, InV, OutL>))
    call_linear(exec, op, seg, in, out, with_instance);
  else
    types_not_built();
}

/// Calls f(std::integral_constant<int, RIn>, std::integral_constant<int, ROut>) with the view
/// ranks `op` takes when its element side has rank `rank` (component ops ignore `rank`).
template <class F>
void with_ranks(const LinOpInfo& op, int rank, F&& f) {
  using One = std::integral_constant<int, 1>;
  using Two = std::integral_constant<int, 2>;
  if (op.component) {
    if (op.reduces)
      f(Two{}, One{});
    else
      f(One{}, Two{});
  } else if (rank == 1) {
    f(One{}, One{});
  } else {
    f(Two{}, Two{});
  }
}

/// Calls f.template operator()<InT, OutT, RIn, ROut>() with the value types and ranks of `op`'s
/// input and output when element-side views hold T and segment-side views hold Acc.
template <class T, class Acc, class F>
void with_shape(const LinOpInfo& op, int rank, F&& f) {
  if (op.component) {
    if (op.reduces)
      f.template operator()<T, Acc, 2, 1>();
    else
      f.template operator()<Acc, T, 1, 2>();
  } else if (rank == 1) {
    if (op.reduces)
      f.template operator()<T, Acc, 1, 1>();
    else
      f.template operator()<Acc, T, 1, 1>();
  } else {
    if (op.reduces)
      f.template operator()<T, Acc, 2, 2>();
    else
      f.template operator()<Acc, T, 2, 2>();
  }
}

/// Reference output of `op` and, per element, the sum of |terms| that made it.
struct Ref {
  std::vector<double> val, mag;
};

/// `in` is row-major of shape (op.in_rows, op.in_width(d)); d is the element-side row width.
inline Ref ref_linear(const LinOpInfo& op, const Case& c, const std::vector<double>& in, i64 d) {
  const auto counts = ref_counts(c);
  const i64 wi = op.in_width(d), wo = op.out_width(d);
  Ref r;
  r.val.assign(op.out_rows(c) * wo, 0.0);
  r.mag.assign(r.val.size(), 0.0);
  for (i64 i = 0; i < c.n(); ++i) {
    if (!c.valid(i)) continue;  // reductions ignore dropped ids, gathers leave their 0
    const i64 s = c.ids[i];
    for (i64 j = 0; j < d; ++j) {
      if (op.reduces) {
        const double x = in[i * wi + j];
        r.val[s * wo + (op.component ? 0 : j)] += x;
        r.mag[s * wo + (op.component ? 0 : j)] += std::abs(x);
      } else {
        const double v = in[s * wi + (op.component ? 0 : j)];
        r.val[i * wo + j] = op.by_count ? v / counts[s] : v;
        r.mag[i * wo + j] = std::abs(r.val[i * wo + j]);
      }
    }
  }
  if (op.reduces && op.by_count)
    for (i64 s = 0; s < c.m; ++s)
      for (i64 k = 0; k < wo; ++k) {
        r.val[s * wo + k] = counts[s] > 0 ? r.val[s * wo + k] / counts[s] : 0.0;
        r.mag[s * wo + k] = counts[s] > 0 ? r.mag[s * wo + k] / counts[s] : 0.0;
      }
  return r;
}

}  // namespace segtest
