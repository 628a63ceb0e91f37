// SPDX-License-Identifier: Apache-2.0
// SEGOPS_OP_CHECKS: the argument checks every op of the catalogue runs first, from four lists of
// argument names: element inputs, per-segment scalar inputs, per-segment scalar outputs, element
// outputs. Static checks name the op and the argument; runtime checks (extents against the
// descriptor and the row width of the first element input, no output aliasing an input) throw
// segops::Error before any work is enqueued. It also opens the op's Kokkos Tools region and
// defines `op`, T (element input value type) and S (per-segment input value type, T if none).
#pragma once

#include <Kokkos_Core.hpp>
#include <segops/impl/views.hpp>
#include <type_traits>

namespace segops::impl {
template <class Default, class... Ts>
struct first_or {
  using type = Default;
};
template <class Default, class T, class... Ts>
struct first_or<Default, T, Ts...> {
  using type = typename T::non_const_value_type;
};
}  // namespace segops::impl

#define SEGOPS_PP_CAT(a, b) SEGOPS_PP_CAT_(a, b)
#define SEGOPS_PP_CAT_(a, b) a##b
#define SEGOPS_PP_UNPAREN(...) __VA_ARGS__
#define SEGOPS_PP_FIRST(...) SEGOPS_PP_FIRST_(__VA_ARGS__, _)
#define SEGOPS_PP_FIRST_(a, ...) a
#define SEGOPS_PP_COUNT(...) SEGOPS_PP_COUNT_(__VA_OPT__(__VA_ARGS__, ) 5, 4, 3, 2, 1, 0)
#define SEGOPS_PP_COUNT_(a, b, c, d, e, N, ...) N
#define SEGOPS_PP_EACH(M, C, ...) \
  SEGOPS_PP_CAT(SEGOPS_PP_EACH_, SEGOPS_PP_COUNT(__VA_ARGS__))(M, C __VA_OPT__(, ) __VA_ARGS__)
#define SEGOPS_PP_EACH_0(M, C)
#define SEGOPS_PP_EACH_1(M, C, a) M(C, a)
#define SEGOPS_PP_EACH_2(M, C, a, b) M(C, a) M(C, b)
#define SEGOPS_PP_EACH_3(M, C, a, b, c) M(C, a) M(C, b) M(C, c)
#define SEGOPS_PP_EACH_4(M, C, a, b, c, d) M(C, a) M(C, b) M(C, c) M(C, d)
#define SEGOPS_PP_EACH_5(M, C, a, b, c, d, e) M(C, a) M(C, b) M(C, c) M(C, d) M(C, e)

// per-argument pieces; C is (NAME, first element input)
#define SEGOPS_C_NAME(C) SEGOPS_PP_FIRST C
#define SEGOPS_C_REF(C) SEGOPS_PP_CAT(SEGOPS_C_REF_, 1) C
#define SEGOPS_C_REF_1(name, ref) ref
#define SEGOPS_S_EIN(C, a)                                \
  SEGOPS_ELEM_IN(SEGOPS_C_NAME(C), a);                    \
  SEGOPS_SAME_TYPE(SEGOPS_C_NAME(C), a, SEGOPS_C_REF(C)); \
  SEGOPS_CHECK_SAME_RANK(SEGOPS_C_NAME(C), a, SEGOPS_C_REF(C));
#define SEGOPS_S_EOUT(C, a)             \
  SEGOPS_ELEM_OUT(SEGOPS_C_NAME(C), a); \
  SEGOPS_CHECK_SAME_RANK(SEGOPS_C_NAME(C), a, SEGOPS_C_REF(C));
#define SEGOPS_S_SIN(C, a)               \
  SEGOPS_SCALAR_IN(SEGOPS_C_NAME(C), a); \
  SEGOPS_SAME_TYPE(SEGOPS_C_NAME(C), a, SEGOPS_C_REF(C));
#define SEGOPS_S_SOUT(C, a) SEGOPS_SCALAR_OUT(SEGOPS_C_NAME(C), a);
#define SEGOPS_R_ROWS(C, a) .rows(#a, a)
#define SEGOPS_R_SCALARS(C, a) .segment_scalars(#a, a)
#define SEGOPS_R_SPAN(C, a) SEGOPS_SPAN(a),
#define SEGOPS_R_TYPE(C, a) , SEGOPS_T(a)

/// Opens the op: its name and Kokkos Tools region, and T = the value type of view REF.
#define SEGOPS_OP_BEGIN(NAME, REF)       \
  using namespace ::segops::impl;        \
  using T = value_t<SEGOPS_T(REF)>;      \
  constexpr OpName op = SEGOPS_OP(NAME); \
  Kokkos::Profiling::ScopedRegion segops_region(op.label)

#define SEGOPS_OP_CHECKS(NAME, EIN, SIN, SOUT, EOUT)                                      \
  SEGOPS_CHECK_EXEC(NAME, SEGOPS_T(exec), SEGOPS_T(seg));                                 \
  SEGOPS_PP_EACH(SEGOPS_S_EIN, (NAME, SEGOPS_PP_FIRST EIN), SEGOPS_PP_UNPAREN EIN)        \
  SEGOPS_PP_EACH(SEGOPS_S_SIN, (NAME, SEGOPS_PP_FIRST SIN), SEGOPS_PP_UNPAREN SIN)        \
  SEGOPS_PP_EACH(SEGOPS_S_SOUT, (NAME, _), SEGOPS_PP_UNPAREN SOUT)                        \
  SEGOPS_PP_EACH(SEGOPS_S_EOUT, (NAME, SEGOPS_PP_FIRST EIN), SEGOPS_PP_UNPAREN EOUT)      \
  SEGOPS_OP_BEGIN(NAME, SEGOPS_PP_FIRST EIN);                                             \
  using S [[maybe_unused]] =                                                              \
      typename first_or<T SEGOPS_PP_EACH(SEGOPS_R_TYPE, _, SEGOPS_PP_UNPAREN SIN)>::type; \
  Extents<SEGOPS_T(seg)>{op.name, seg, width_of(SEGOPS_PP_FIRST EIN)} SEGOPS_PP_EACH(     \
      SEGOPS_R_ROWS, _, SEGOPS_PP_UNPAREN EIN)                                            \
      SEGOPS_PP_EACH(SEGOPS_R_SCALARS, _, SEGOPS_PP_UNPAREN SIN)                          \
          SEGOPS_PP_EACH(SEGOPS_R_SCALARS, _, SEGOPS_PP_UNPAREN SOUT)                     \
              SEGOPS_PP_EACH(SEGOPS_R_ROWS, _, SEGOPS_PP_UNPAREN EOUT);                   \
  check_disjoint(op.name,                                                                 \
                 {SEGOPS_PP_EACH(SEGOPS_R_SPAN, _, SEGOPS_PP_UNPAREN SOUT)                \
                      SEGOPS_PP_EACH(SEGOPS_R_SPAN, _, SEGOPS_PP_UNPAREN EOUT)},          \
                 {SEGOPS_PP_EACH(SEGOPS_R_SPAN, _, SEGOPS_PP_UNPAREN EIN)                 \
                      SEGOPS_PP_EACH(SEGOPS_R_SPAN, _, SEGOPS_PP_UNPAREN SIN)})
