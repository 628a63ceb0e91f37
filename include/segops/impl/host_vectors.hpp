// SPDX-License-Identifier: Apache-2.0
// Short contiguous runs summed with 16-byte vectors (host builds with GCC or Clang; SSE2 on the
// x86-64 baseline, NEON on AArch64). A sorted segment of a few elements is one run: summing it
// with a fixed number of masked vector loads costs the same whatever its length, so consecutive
// segments neither wait on each other nor mispredict a loop exit.
#pragma once

#include <cstdint>
#include <segops/impl/views.hpp>
#include <type_traits>

#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && !defined(__HIPCC__) && \
    !defined(SYCL_LANGUAGE_VERSION)
#define SEGOPS_HOST_VECTORS 1
#endif

namespace segops::impl {

/// Runs of up to kRunVectors vectors (16 floats, 8 doubles) take the masked path; tiles of
/// shorter runs ask for fewer.
inline constexpr int kRunVectors = 4;

#ifdef SEGOPS_HOST_VECTORS
template <class T>
struct HostVec {
  static constexpr bool ok = false;
};
template <>
struct HostVec<float> {
  static constexpr bool ok = true;
  using type = float __attribute__((vector_size(16)));
  using bits = std::int32_t __attribute__((vector_size(16)));
  using scalar_bits = std::int32_t;
};
template <>
struct HostVec<double> {
  static constexpr bool ok = true;
  using type = double __attribute__((vector_size(16)));
  using bits = std::int64_t __attribute__((vector_size(16)));
  using scalar_bits = std::int64_t;
};

template <class T>
inline constexpr index_t kRunLength = index_t(kRunVectors) * index_t(16 / sizeof(T));

/// kRunLength all-ones words then as many zeros: the mask of the first `len` elements of a run is
/// the window starting kRunLength - len words in.
template <class T>
struct RunWindow {
  using B = typename HostVec<T>::scalar_bits;
  static constexpr int K = static_cast<int>(kRunLength<T>);
  alignas(16) B w[2 * K];
  constexpr RunWindow() : w{} {
    for (int k = 0; k < K; ++k) w[k] = B(-1);
  }
};
template <class T>
inline constexpr RunWindow<T> kRunWindow{};

template <class V, class S>
inline V load_vec(const S* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}

/// Sum of the first `len` (<= NV vectors) elements of a run whose vector j is load(j * lanes);
/// every load must be readable, the lanes past `len` are masked off (whatever they hold). The
/// order of the additions depends only on len and NV.
template <class T, int NV, class Load>
inline T masked_run_sum(index_t len, const Load& load) {
  using V = typename HostVec<T>::type;
  using B = typename HostVec<T>::bits;
  constexpr int lanes = 16 / sizeof(T);
  const auto* win = kRunWindow<T>.w + (kRunLength<T> - len);
  V acc[2] = {};
  for (int j = 0; j < NV; ++j) {
    const B m = load_vec<B>(win + j * lanes);
    acc[j & 1] += (V)((B)load(j * lanes) & m);  // vector casts keep the bits
  }
  const V t = acc[0] + acc[1];
  if constexpr (lanes == 4)
    return (t[0] + t[2]) + (t[1] + t[3]);
  else
    return t[0] + t[1];
}

/// Runs of up to kRowRun rows of a packed matrix whose row fits one vector (float rows of 2 to 4,
/// double rows of 2): one masked vector load per row.
inline constexpr int kRowRun = 8;
template <class T, int W>
inline constexpr bool row_fits_vector = (HostVec<T>::ok && W * sizeof(T) <= 16);

/// kRowRun rows whose lanes below W are set, then kRowRun empty rows: the masks of the rows of a
/// run of `len` rows start kRowRun - len rows in.
template <class T, int W>
struct RowWindow {
  using B = typename HostVec<T>::scalar_bits;
  static constexpr int lanes = 16 / sizeof(T);
  alignas(16) B w[2 * kRowRun][lanes];
  constexpr RowWindow() : w{} {
    for (int k = 0; k < kRowRun; ++k)
      for (int l = 0; l < W; ++l) w[k][l] = B(-1);
  }
};
template <class T, int W>
inline constexpr RowWindow<T, W> kRowWindow{};

/// a[0 .. W) = column sums of the first `len` (<= kRowRun) rows of packed rows of width W at p;
/// kRowRun - 1 rows and one vector past p must be readable. The order of the additions depends
/// only on len.
template <class T, int W>
inline void masked_rows_sum(const T* p, index_t len, T (&a)[W]) {
  using V = typename HostVec<T>::type;
  using B = typename HostVec<T>::bits;
  const auto* win = kRowWindow<T, W>.w + (kRowRun - len);
  V acc[2] = {};
  for (int k = 0; k < kRowRun; ++k) acc[k & 1] += (V)(load_vec<B>(p + k * W) & load_vec<B>(win[k]));
  const V t = acc[0] + acc[1];
  for (int c = 0; c < W; ++c) a[c] = t[c];
}
#endif

/// Sum of f(q) for q in [0, n) with eight interleaved partial sums (vectorisable, fixed order).
template <class Acc, class F>
KOKKOS_FUNCTION Acc flat_sum8(index_t n, const F& f) {
  if (n < 8) {  // short segments: no partial sums to combine
    Acc r = 0;
    for (index_t q = 0; q < n; ++q) r += f(q);
    return r;
  }
  Acc a[8] = {};
  index_t q = 0;
  for (; q + 8 <= n; q += 8)
    for (int j = 0; j < 8; ++j) a[j] += f(q + j);
  for (; q < n; ++q) a[0] += f(q);
  return ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]));
}

/// Sum of p[0 .. len); `room` elements from p on are readable. Short runs take the masked vector
/// path (NV vectors, else kRunVectors) where the run's vectors are readable.
template <class Acc, int NV = kRunVectors, class T>
KOKKOS_FUNCTION Acc run_sum(const T* p, index_t len, index_t room) {
#ifdef SEGOPS_HOST_VECTORS
  if constexpr (std::is_same_v<Acc, T> && HostVec<T>::ok) {
    using V = typename HostVec<T>::type;
    constexpr index_t K = NV * index_t(16 / sizeof(T));
    if (len <= K && room >= K)
      return masked_run_sum<T, NV>(len, [p](int k) { return load_vec<V>(p + k); });
    if constexpr (NV < kRunVectors) return run_sum<Acc, kRunVectors>(p, len, room);
  }
#else
  (void)room;
#endif
  return flat_sum8<Acc>(len, [p](index_t k) { return static_cast<Acc>(p[k]); });
}

/// Sum of p[k] * q[k] for k in [0, len), as run_sum.
template <class Acc, int NV = kRunVectors, class A, class B>
KOKKOS_FUNCTION Acc run_dot(const A* p, const B* q, index_t len, index_t room) {
#ifdef SEGOPS_HOST_VECTORS
  if constexpr (std::is_same_v<Acc, A> && std::is_same_v<Acc, B> && HostVec<Acc>::ok) {
    using V = typename HostVec<Acc>::type;
    constexpr index_t K = NV * index_t(16 / sizeof(Acc));
    if (len <= K && room >= K)
      return masked_run_sum<Acc, NV>(
          len, [p, q](int k) { return load_vec<V>(p + k) * load_vec<V>(q + k); });
    if constexpr (NV < kRunVectors) return run_dot<Acc, kRunVectors>(p, q, len, room);
  }
#else
  (void)room;
#endif
  return flat_sum8<Acc>(
      len, [p, q](index_t k) { return static_cast<Acc>(p[k]) * static_cast<Acc>(q[k]); });
}

}  // namespace segops::impl

namespace segops::impl {

/// a[0 .. W) = column sums of rows [0, len) of packed rows of width W at p; `room` rows from p on
/// are readable. Short runs of rows that fit one vector take the masked path.
template <class Acc, int W, class T>
KOKKOS_FUNCTION void run_rows(const T* p, index_t len, index_t room, Acc (&a)[W]) {
#ifdef SEGOPS_HOST_VECTORS
  if constexpr (std::is_same_v<Acc, T> && row_fits_vector<T, W>) {
    constexpr index_t lanes = 16 / sizeof(T);
    if (len <= kRowRun && room * W >= (kRowRun - 1) * W + lanes)
      return masked_rows_sum<T, W>(p, len, a);
  }
#else
  (void)room;
#endif
  for (int c = 0; c < W; ++c) a[c] = Acc(0);
  for (index_t k = 0; k < len; ++k)
    for (int c = 0; c < W; ++c) a[c] += static_cast<Acc>(p[k * W + c]);
}

}  // namespace segops::impl
