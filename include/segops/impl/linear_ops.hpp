// SPDX-License-Identifier: Apache-2.0
// Checked entry points of the linear family, shared by its public functions.
#pragma once

#include <Kokkos_Core.hpp>
#include <segops/impl/linear.hpp>
#include <segops/impl/views.hpp>
#include <type_traits>

namespace segops::impl {

/// out(s, :) = fin(sum of x(i, :)); x (N[,D]) and out (M[,D]) of the same rank.
template <class Exec, class Seg, class X, class Out, class Fin>
void reduce_op(const Exec& exec, const Seg& seg, const X& x, const Out& out, OpName op,
               const char* xa, const char* oa, Fin fin) {
  Kokkos::Profiling::ScopedRegion region(op.label);
  check_elements(op.name, xa, seg, x);
  check_segments(op.name, oa, seg, out);
  check_width(op.name, oa, width_of(x), out);
  check_no_alias(op.name, oa, out, xa, x);
  reduce_rows(exec, seg, as_const_mat(x), as_mat(out), op.label, fin);
}

/// o(i, :) = v(s(i), :) [/ c]; v (M[,D]) and o (N[,D]) of the same rank.
template <class Exec, class Seg, class V, class O, class Scale>
void gather_op(const Exec& exec, const Seg& seg, const V& v, const O& o, OpName op, const char* va,
               const char* oa, Scale scale) {
  Kokkos::Profiling::ScopedRegion region(op.label);
  check_segments(op.name, va, seg, v);
  check_elements(op.name, oa, seg, o);
  check_width(op.name, oa, width_of(v), o);
  check_no_alias(op.name, oa, o, va, v);
  gather_rows(exec, seg, as_const_mat(v), as_mat(o), op.label, scale);
}

/// out(s) = sum over elements and components of x(i, d); x (N, D), out (M).
template <class Exec, class Seg, class X, class Out>
void component_reduce_op(const Exec& exec, const Seg& seg, const X& x, const Out& out, OpName op,
                         const char* xa, const char* oa) {
  Kokkos::Profiling::ScopedRegion region(op.label);
  check_elements(op.name, xa, seg, x);
  check_segments(op.name, oa, seg, out);
  check_no_alias(op.name, oa, out, xa, x);
  reduce_row_sums(exec, seg, as_const_mat(x), as_mat(out), op.label);
}

/// o(i, d) = g(s(i)) for every d; g (M), o (N, D).
template <class Exec, class Seg, class G, class O>
void component_gather_op(const Exec& exec, const Seg& seg, const G& g, const O& o, OpName op,
                         const char* ga, const char* oa) {
  Kokkos::Profiling::ScopedRegion region(op.label);
  check_segments(op.name, ga, seg, g);
  check_elements(op.name, oa, seg, o);
  check_no_alias(op.name, oa, o, ga, g);
  gather_rows<true>(exec, seg, as_const_mat(g), as_mat(o), op.label);  // g(s) in every component
}

template <class Counts, class Out>
struct CopyCounts {
  Counts counts;
  Out out;
  KOKKOS_FUNCTION void operator()(index_t s) const {
    out(s) = static_cast<typename Out::value_type>(counts(s));
  }
};

template <class Exec, class Seg, class Out>
void count_op(const Exec& exec, const Seg& seg, const Out& out) {
  static_assert(Kokkos::is_view_v<Out> && Out::rank() == 1 &&
                    (std::is_same_v<typename Out::value_type, std::int32_t> ||
                     std::is_same_v<typename Out::value_type, std::int64_t>)&&Kokkos::
                        SpaceAccessibility<Exec, typename Out::memory_space>::accessible,
                "segops::segmented_count: argument 'out' must be a non-const rank-1 Kokkos::View "
                "of int32_t or int64_t accessible from the execution space");
  static_assert(std::is_same_v<Exec, typename Seg::execution_space>,
                "segops::segmented_count: the execution space instance must be of the "
                "descriptor's execution space");
  constexpr OpName op = SEGOPS_OP("segmented_count");
  Kokkos::Profiling::ScopedRegion region(op.label);
  check_segments(op.name, "out", seg, out);
  Kokkos::parallel_for(
      op.label, Kokkos::RangePolicy<Exec, Kokkos::IndexType<index_t>>(exec, 0, seg.num_segments()),
      CopyCounts<decltype(seg.counts()), Out>{seg.counts(), out});
}

}  // namespace segops::impl

#define SEGOPS_LINEAR_REDUCE(EXEC, SEG, NAME, X, OUT, FIN)     \
  SEGOPS_CHECK_EXEC(NAME, SEGOPS_T(EXEC), SEGOPS_T(SEG));      \
  SEGOPS_CHECK_IN(NAME, X, EXEC, 1, 2, "a rank-1 or rank-2");  \
  SEGOPS_CHECK_OUT(NAME, OUT, EXEC, 1, 2, "rank-1 or rank-2"); \
  SEGOPS_CHECK_SAME_RANK(NAME, X, OUT);                        \
  ::segops::impl::reduce_op(EXEC, SEG, X, OUT, SEGOPS_OP(NAME), #X, #OUT, FIN)
#define SEGOPS_LINEAR_GATHER(EXEC, SEG, NAME, V, OUT, SCALE)   \
  SEGOPS_CHECK_EXEC(NAME, SEGOPS_T(EXEC), SEGOPS_T(SEG));      \
  SEGOPS_CHECK_IN(NAME, V, EXEC, 1, 2, "a rank-1 or rank-2");  \
  SEGOPS_CHECK_OUT(NAME, OUT, EXEC, 1, 2, "rank-1 or rank-2"); \
  SEGOPS_CHECK_SAME_RANK(NAME, V, OUT);                        \
  ::segops::impl::gather_op(EXEC, SEG, V, OUT, SEGOPS_OP(NAME), #V, #OUT, SCALE)
#define SEGOPS_COMPONENT_REDUCE(EXEC, SEG, NAME, X, OUT)  \
  SEGOPS_CHECK_EXEC(NAME, SEGOPS_T(EXEC), SEGOPS_T(SEG)); \
  SEGOPS_CHECK_IN(NAME, X, EXEC, 2, 2, "a rank-2");       \
  SEGOPS_CHECK_OUT(NAME, OUT, EXEC, 1, 1, "rank-1");      \
  ::segops::impl::component_reduce_op(EXEC, SEG, X, OUT, SEGOPS_OP(NAME), #X, #OUT)
#define SEGOPS_COMPONENT_GATHER(EXEC, SEG, NAME, G, OUT)  \
  SEGOPS_CHECK_EXEC(NAME, SEGOPS_T(EXEC), SEGOPS_T(SEG)); \
  SEGOPS_CHECK_IN(NAME, G, EXEC, 1, 1, "a rank-1");       \
  SEGOPS_CHECK_OUT(NAME, OUT, EXEC, 2, 2, "rank-2");      \
  ::segops::impl::component_gather_op(EXEC, SEG, G, OUT, SEGOPS_OP(NAME), #G, #OUT)
