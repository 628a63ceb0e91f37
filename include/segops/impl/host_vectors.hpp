// SPDX-License-Identifier: Apache-2.0
// Short contiguous runs summed with 16-byte vectors (host builds with GCC or Clang; SSE2 on the
// x86-64 baseline, NEON on AArch64). A sorted segment of a few elements is one run: summing it
// with a fixed number of masked vector loads costs the same whatever its length, so consecutive
// segments neither wait on each other nor mispredict a loop exit.
#pragma once

#include <cstdint>
#include <segops/impl/views.hpp>
#include <type_traits>

#ifdef SEGOPS_HOST_GNU
#define SEGOPS_HOST_VECTORS 1
#ifdef __SSE2__
#include <emmintrin.h>
#else
#include <cmath>
#endif
#endif

namespace segops::impl {

/// Whether the build's masked runs are all of 32-byte vectors (SEGOPS_HOST_WIDE, below).
#if defined(SEGOPS_HOST_VECTORS) && defined(__x86_64__) && defined(__AVX2__)
inline constexpr bool kWideBuild = true;
#else
inline constexpr bool kWideBuild = false;
#endif

/// Runs of up to kRunVectors vectors (24 floats, 12 doubles) take the masked path; tiles of
/// shorter runs ask for kNarrowRunVectors (TileReduce::runs).
inline constexpr int kRunVectors = 6;
inline constexpr int kNarrowRunVectors = 2;

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

/// 32-byte vectors for the masked runs of single values (x86-64): one holds a run's 16-byte vectors
/// 2i and 2i + 1, so its low and high halves are masked_run_vec's two accumulators, added in the
/// same order, and the sums are the same bits as with 16-byte vectors, from half the loads, masks
/// and additions (TileReduce::batch_loops has the times). A build for AVX2 (-mavx2, -march=native
/// on a CPU that has it) takes them everywhere (kWideBuild); a baseline x86-64 build compiles the
/// loop of TileReduce::runs' batches a second time for AVX2 (SEGOPS_WIDE_TARGET, flattened: the
/// runs are compiled into it) and calls that one where the CPU has it (host_has_avx2), unless
/// SEGOPS_NO_WIDE_DISPATCH is defined. The functions that hold 32-byte vectors are always inlined
/// (SEGOPS_WIDE_INLINE), take them by reference and return 16-byte ones, so that no 32-byte value
/// crosses a call (whose convention differs with AVX); outside that loop the compiler makes them of
/// 16-byte operations, correct and slower.
#define SEGOPS_WIDE_INLINE inline __attribute__((always_inline))
/// w = the vector at p, 16 or 32 bytes (taken by reference: no function returns or takes a 32-byte
/// one by value, as GCC warns that the convention differs without AVX, -Wpsabi).
template <class W, class S>
SEGOPS_WIDE_INLINE void load_wide(W& w, const S* p) {
  __builtin_memcpy(&w, p, sizeof(W));
}
#if defined(__x86_64__)
#define SEGOPS_HOST_WIDE 1
#ifdef __AVX2__
#define SEGOPS_WIDE_TARGET
#else
#define SEGOPS_WIDE_TARGET __attribute__((target("avx2")))
#ifndef SEGOPS_NO_WIDE_DISPATCH
#define SEGOPS_WIDE_DISPATCH 1
/// Whether this CPU (and its OS) runs AVX2, asked once.
inline bool host_has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2");
  return has;
}
#endif
#endif
template <class T>
struct HostWide;
template <>
struct HostWide<float> {
  using type = float __attribute__((vector_size(32)));
  using bits = std::int32_t __attribute__((vector_size(32)));
};
template <>
struct HostWide<double> {
  using type = double __attribute__((vector_size(32)));
  using bits = std::int64_t __attribute__((vector_size(32)));
};
#endif

/// The longest masked run, in elements.
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

/// v, opaque to the optimizer: a product passed through it is rounded before it is added, even
/// where the compiler contracts multiply-adds into FMAs (-ffp-contract=fast with -mfma or
/// -march=native, AArch64), so that a scalar and a vector computation of one value (RowNorm) give
/// the same bits. No instruction on x86-64 and AArch64 (the value stays in its register).
template <class V>
inline V rounded(V v) {
#if defined(__SSE2__)
  asm("" : "+x"(v));
#elif defined(__aarch64__)
  asm("" : "+w"(v));
#else
  asm("" : "+m"(v));
#endif
  return v;
}

/// v = x in every lane, bit for bit (V{} + x would turn -0 into +0; x - V{} compiled to a lane
/// insert per lane where V has 32 bytes).
template <class V, class T>
SEGOPS_WIDE_INLINE void splat(V& v, T x) {
  constexpr int lanes = int(sizeof(V) / sizeof(T));
  V z = {};
  z[0] = x;
#if defined(__clang__) || __GNUC__ >= 12
  if constexpr (lanes == 8)
    v = __builtin_shufflevector(z, z, 0, 0, 0, 0, 0, 0, 0, 0);
  else if constexpr (lanes == 4)
    v = __builtin_shufflevector(z, z, 0, 0, 0, 0);
  else
    v = __builtin_shufflevector(z, z, 0, 0);
#else
  for (int l = 0; l < lanes; ++l) v[l] = x;
#endif
}

template <class V, class S>
inline V load_vec(const S* p) {
  V v;
  __builtin_memcpy(&v, p, sizeof(V));
  return v;
}

#ifdef SEGOPS_HOST_WIDE
/// Whether a run of T gives its values as 32-byte vectors (run.wide(k, w)).
template <class T, class Run>
inline constexpr bool has_wide = requires(const Run& run, typename HostWide<T>::type& w) {
  run.wide(index_t(0), w);
};

/// masked_run_vec with 32-byte vectors (run.wide(k, w): w = values k .. k + 2 lanes - 1), NV
/// even: the low and high halves of the sum, added (the same bits). FromZero: the sum starts from
/// zero as masked_run_vec's accumulators do (else as masked_pair_vec's, from the first vector).
template <class T, int NV, bool FromZero = true, class Run>
SEGOPS_WIDE_INLINE typename HostVec<T>::type masked_run_wide(index_t len, const Run& run) {
  using V = typename HostVec<T>::type;
  using W = typename HostWide<T>::type;
  using WB = typename HostWide<T>::bits;
  constexpr int lanes = 16 / sizeof(T);
  static_assert(NV % 2 == 0);
  const auto* win = kRunWindow<T>.w + (kRunLength<T> - len);
  W acc = {};
  for (int j = 0; j < NV; j += 2) {
    W v;
    WB m;
    run.wide(j * lanes, v);
    load_wide(m, win + j * lanes);
    v = (W)((WB)v & m);
    acc = j == 0 && !FromZero ? v : acc + v;
  }
  V lo, hi;
  __builtin_memcpy(&lo, &acc, sizeof(V));
  __builtin_memcpy(&hi, reinterpret_cast<const char*>(&acc) + sizeof(V), sizeof(V));
  return lo + hi;
}
#endif

/// Lane partial sums of the first `len` (<= NV vectors) elements of a run whose vector j is
/// run.vec(j * lanes) (two at a time, masked_run_wide, where the run has wide() and Wide); every
/// load must be readable, the lanes past `len` are masked off (whatever they hold). lane_sum of
/// the result is the run's sum; the order of the additions depends only on len and NV.
template <class T, int NV, bool Wide = kWideBuild, class Run>
inline typename HostVec<T>::type masked_run_vec(index_t len, const Run& run) {
  using V = typename HostVec<T>::type;
  using B = typename HostVec<T>::bits;
  constexpr int lanes = 16 / sizeof(T);
#ifdef SEGOPS_HOST_WIDE
  if constexpr (Wide && NV % 2 == 0 && has_wide<T, Run>) return masked_run_wide<T, NV>(len, run);
#endif
  const auto* win = kRunWindow<T>.w + (kRunLength<T> - len);
  auto load = [&](int k) { return run.vec(k); };
  V acc[2] = {};
  for (int j = 0; j < NV; ++j) {
    const B m = load_vec<B>(win + j * lanes);
    acc[j & 1] += (V)((B)load(j * lanes) & m);  // vector casts keep the bits
  }
  return acc[0] + acc[1];
}

/// masked_run_vec<T, 2> of a run shorter than two vectors (len < 2 lanes), without its additions
/// to zero: lane_sum of the result is the same bit for bit. (A lane differs only where both its
/// values are -0, giving -0 for +0; the last lane, masked in the second vector, is never -0, and
/// no sum of the lanes in lane_sum's order tells -0 from +0 then.)
template <class T, bool Wide = kWideBuild, class Run>
inline typename HostVec<T>::type masked_pair_vec(index_t len, const Run& run) {
  using V = typename HostVec<T>::type;
  using B = typename HostVec<T>::bits;
  constexpr int lanes = 16 / sizeof(T);
#ifdef SEGOPS_HOST_WIDE
  if constexpr (Wide && has_wide<T, Run>) return masked_run_wide<T, 2, false>(len, run);
#endif
  const auto* win = kRunWindow<T>.w + (kRunLength<T> - len);
  auto load = [&](int k) { return run.vec(k); };
  return (V)((B)load(0) & load_vec<B>(win)) + (V)((B)load(lanes) & load_vec<B>(win + lanes));
}

template <int... I, class V>
inline V shuffle(V a, V b) {
#if defined(__clang__) || __GNUC__ >= 12
  return __builtin_shufflevector(a, b, I...);
#else
  using B = typename HostVec<std::remove_cvref_t<decltype(a[0])> >::bits;
  return __builtin_shuffle(a, b, B{I...});
#endif
}

/// Lane j: the length p[j + 1] - p[j] of run j, at least 1 (SumReducer::divisor), as a float,
/// for the four runs between the offsets p[0], ..., p[4]: the divisors of their sums, in a few
/// vector operations instead of a conversion and an insert per lane. The lengths are converted
/// from their low 32 bits: runs shorter than 2^31 elements (the caller's check). (Doubles keep
/// the scalar conversions: SSE2 has no vector one from 64-bit integers, and GCC's emulation cost
/// 2 more instructions per element in mean of doubles, L = 3.)
inline HostVec<float>::type run_divisors(const index_t* p) {
  using F = HostVec<float>::type;
  using B = HostVec<float>::bits;
  using Q = std::int64_t __attribute__((vector_size(16)));
  auto lengths = [&](int i) { return (F)(load_vec<Q>(p + i + 1) - load_vec<Q>(p + i)); };
  constexpr int h = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__ ? 0 : 1;  // the low halves' lanes
  const B c = (B)shuffle<h, h + 2, h + 4, h + 6>(lengths(0), lengths(2));
  return __builtin_convertvector(c - (c == 0), F);  // a true lane compares as -1
}

/// The sum of a vector's lanes, in a fixed order.
template <class V>
inline auto lane_sum(V t) {
  if constexpr (sizeof(V) / sizeof(t[0]) == 4)
    return (t[0] + t[2]) + (t[1] + t[3]);
  else
    return t[0] + t[1];
}

/// Lane j of the result = lane_sum(t[j]), bit for bit, for one vector's worth of vectors t[j]
/// (a transpose by shuffles, then two vector additions, instead of a reduction per vector).
template <class V>
inline V lane_sums(const V* t) {
  if constexpr (sizeof(V) / sizeof(t[0][0]) == 4) {
    const V p01 = shuffle<0, 4, 1, 5>(t[0], t[1]) + shuffle<2, 6, 3, 7>(t[0], t[1]);
    const V p23 = shuffle<0, 4, 1, 5>(t[2], t[3]) + shuffle<2, 6, 3, 7>(t[2], t[3]);
    return shuffle<0, 1, 4, 5>(p01, p23) + shuffle<2, 3, 6, 7>(p01, p23);
  } else {
    return shuffle<0, 2>(t[0], t[1]) + shuffle<1, 3>(t[0], t[1]);
  }
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

/// Rows narrower than a vector (floats of 2 or 3) are summed as one flat masked run of len * W
/// values: the vectors' lanes repeat the columns every kRowPeriod vectors (of kRowPeriod * lanes
/// / W rows), so that many accumulators take the run and are folded into columns once. A run of
/// eight rows of 3 floats is six vector loads, not eight.
template <class T, int W>
inline constexpr int kRowPeriod = (16 / int(sizeof(T))) % W == 0 ? 1 : W;
template <class T, int W>
inline constexpr bool flat_rows =
    (W == 2 || W == 3) && W * sizeof(T) < 16 && kRowRun* W <= kRunLength<T>;
/// Values from a run's first row on that masked_rows_sum reads.
template <class T, int W>
inline constexpr index_t kRowRunReads = flat_rows<T, W>
                                            ? kRowRun* W
                                            : (kRowRun - 1) * W + 16 / index_t(sizeof(T));

/// Lanes 0 .. W of the result = column sums of the first `len` (<= kRowRun) rows of packed rows
/// of width W at p; kRowRunReads<T, W> values from p on must be readable. The order of the
/// additions depends only on len.
template <class T, int W>
inline typename HostVec<T>::type masked_rows_vec(const T* p, index_t len) {
  using V = typename HostVec<T>::type;
  using B = typename HostVec<T>::bits;
  V t;
  if constexpr (flat_rows<T, W>) {
    constexpr int lanes = 16 / sizeof(T), P = kRowPeriod<T, W>;
    const auto* win = kRunWindow<T>.w + (kRunLength<T> - len * W);
    V acc[P] = {};
    for (int j = 0; j < kRowRun * W / lanes; ++j)
      acc[j % P] += (V)(load_vec<B>(p + j * lanes) & load_vec<B>(win + j * lanes));
    if constexpr (W == 3) {
      // acc holds four rows packed (pack_rows3x4): lane l of acc[k] is column (l + k) % 3 for
      // l < 3. Lanes 0 to 2 of acc[0] + acc[1] and acc[2] turned to columns, plus acc[0 .. 3)'s
      // fourth lanes: the column sums, in four single shuffles (pshufd, unpckhps, shufps on SSE2).
      const V c1 = shuffle<2, 0, 1, 3>(acc[1], acc[1]), c2 = shuffle<1, 2, 0, 3>(acc[2], acc[2]);
      const V last = shuffle<2, 3, 7, 7>(shuffle<2, 6, 3, 7>(acc[0], acc[1]), acc[2]);
      t = (acc[0] + c1) + (c2 + last);
    } else  // W = 2: two rows per vector
      t = acc[0] + shuffle<2, 3, 0, 1>(acc[0], acc[0]);
  } else {  // one row per masked vector load
    const auto* win = kRowWindow<T, W>.w + (kRowRun - len);
    V acc[2] = {};
    for (int k = 0; k < kRowRun; ++k)
      acc[k & 1] += (V)(load_vec<B>(p + k * W) & load_vec<B>(win[k]));
    t = acc[0] + acc[1];
  }
  return t;
}

/// Rows of 3 floats r[0 .. 4) (lanes 0 to 2 each; lane 3 is ignored) packed into three vectors,
/// as the 12 floats of four consecutive rows. Every shuffle here takes its first two lanes from
/// one operand and its last two from the other: one shufps on the x86-64 baseline (SSE2), where
/// GCC 12 built v[0] = (r0 0, r0 1, r0 2, r1 0) and v[2] directly through a stack slot and
/// general registers. Sum's backward, rows of 3 floats, L = 3, N = 1e6, 2 threads: sorted
/// 0.40 -> 0.24 ms, unsorted 0.80 -> 0.62 ms (as with -msse4.1, whose blends did it in one).
inline void pack_rows3x4(const HostVec<float>::type (&r)[4], HostVec<float>::type (&v)[3]) {
  const auto a = shuffle<2, 2, 4, 4>(r[0], r[1]), c = shuffle<2, 2, 4, 4>(r[2], r[3]);
  v[0] = shuffle<0, 1, 4, 6>(r[0], a);
  v[1] = shuffle<1, 2, 4, 5>(r[1], r[2]);
  v[2] = shuffle<0, 2, 5, 6>(c, r[3]);
}

/// The inverse of pack_rows3x4 by columns: c[k] = component k of the four packed rows of 3 floats
/// at p (12 floats), in two or three shuffles of one shufps each on SSE2 (shuffles with lanes of
/// both operands in their first half went through the stack: max_norm sorted, N = 1e6, 0.75 ->
/// 0.65 ms).
inline void columns3x4(const float* p, HostVec<float>::type (&c)[3]) {
  using F = HostVec<float>::type;
  const F a = load_vec<F>(p), b = load_vec<F>(p + 4), d = load_vec<F>(p + 8);
  // rows 0 1 2 0 | 1 2 0 1 | 2 0 1 2
  c[0] = shuffle<0, 3, 4, 6>(a, shuffle<2, 2, 5, 5>(b, d));
  c[1] = shuffle<0, 2, 4, 6>(shuffle<1, 1, 4, 4>(a, b), shuffle<3, 3, 6, 6>(b, d));
  c[2] = shuffle<0, 2, 4, 7>(shuffle<2, 2, 5, 5>(a, b), d);
}

/// The 12 floats of three vectors stored at o, one vector store each. (One 48-byte copy of the
/// three compiled to `rep movs` where they were on the stack.)
inline void store_packed3(float* o, const HostVec<float>::type (&v)[3]) {
  for (int k = 0; k < 3; ++k) __builtin_memcpy(o + 4 * k, &v[k], sizeof(v[k]));
}

/// Rows r (as pack_rows3x4) stored packed at o: three vector stores where a row at a time takes
/// twelve scalar ones.
inline void store_rows3x4(float* o, const HostVec<float>::type (&r)[4]) {
  HostVec<float>::type v[3];
  pack_rows3x4(r, v);
  store_packed3(o, v);
}

/// Whether s[0 .. 4) all lie in [0, n).
inline bool all_below(const index_t (&s)[4], index_t n) {
  using U = std::make_unsigned_t<index_t>;
  bool in = true;
  for (int k = 0; k < 4; ++k) in &= static_cast<U>(s[k]) < static_cast<U>(n);
  return in;
}

/// Row e of v's n packed rows of 3 floats as a vector, lane 3 zero: one vector load, but for the
/// last row, read value by value (16 bytes from it on are not all v's).
inline HostVec<float>::type load_row3(const float* v, index_t n, index_t e) {
  using V = HostVec<float>::type;
  using B = HostVec<float>::bits;
  const float* p = v + e * 3;
  if (e + 1 < n) return (V)(load_vec<B>(p) & B{-1, -1, -1, 0});
  return V{p[0], p[1], p[2], 0.f};
}

/// Rows of 3 floats of v (packed) at rows s[0 .. 4), one vector load each, or false where one of
/// them is dropped (s < 0) or the last row (16 bytes from it on are not all v's); n: v's rows.
inline bool load_rows3x4(const float* v, index_t n, const index_t (&s)[4],
                         HostVec<float>::type (&r)[4]) {
  if (!all_below(s, n - 1)) return false;
  for (int k = 0; k < 4; ++k) r[k] = load_vec<HostVec<float>::type>(v + s[k] * 3);
  return true;
}

/// Four rows of 3 floats, row k all p[k], packed into three vectors (the 12 floats of the rows).
inline void splat_rows3x4(HostVec<float>::type p, HostVec<float>::type (&v)[3]) {
  v[0] = shuffle<0, 0, 0, 1>(p, p);
  v[1] = shuffle<1, 1, 2, 2>(p, p);
  v[2] = shuffle<2, 3, 3, 3>(p, p);
}

/// Four rows of 3 floats, row k all v(s[k]) (a per-segment value), as splat_rows3x4; false where
/// one of s[0 .. 4) is not one of v's rows.
inline bool load_splat3x4(const Mat<const float>& v, const index_t (&s)[4],
                          HostVec<float>::type (&r)[3]) {
  if (!all_below(s, v.n)) return false;
  splat_rows3x4(HostVec<float>::type{v.ptr[s[0] * v.s0], v.ptr[s[1] * v.s0], v.ptr[s[2] * v.s0],
                                     v.ptr[s[3] * v.s0]},
                r);
  return true;
}

/// Whether any lane of a vector compare's result (all ones or zero per lane) is set.
template <class B>
inline bool any_lane(B m) {
#ifdef __SSE2__
  return _mm_movemask_epi8((__m128i)m) != 0;
#else
  bool any = false;
  for (int l = 0; l < int(sizeof(B) / sizeof(m[0])); ++l) any |= m[l] != 0;
  return any;
#endif
}

/// Whether any of the NV vectors of T at p (NV * 16 bytes, all readable) holds a NaN: one
/// unordered compare per vector and one test.
template <class T, int NV>
inline bool any_nan(const T* p) {
  using B = typename HostVec<T>::bits;
  B m{};
  for (int k = 0; k < NV; ++k) {
    const auto v = load_vec<typename HostVec<T>::type>(p + k * (16 / sizeof(T)));
    m |= (B)(v != v);
  }
  return any_lane(m);
}

/// Lane-wise v > o ? v : o (IsMax) or v < o ? v : o: one maxps / minps (ties, and a NaN in
/// either, keep o).
template <bool IsMax, class V>
inline V vec_better(V v, V o) {
#ifdef __SSE2__
  if constexpr (sizeof(v[0]) == 4)
    return (V)(IsMax ? _mm_max_ps((__m128)v, (__m128)o) : _mm_min_ps((__m128)v, (__m128)o));
  else
    return (V)(IsMax ? _mm_max_pd((__m128d)v, (__m128d)o) : _mm_min_pd((__m128d)v, (__m128d)o));
#else
  for (int l = 0; l < int(sizeof(V) / sizeof(v[0])); ++l)
    o[l] = IsMax ? (v[l] > o[l] ? v[l] : o[l]) : (v[l] < o[l] ? v[l] : o[l]);
  return o;
#endif
}

/// Lane-wise square root (correctly rounded, as std::sqrt).
template <class V>
inline V vec_sqrt(V v) {
#ifdef __SSE2__
  if constexpr (sizeof(v[0]) == 4)
    return (V)_mm_sqrt_ps((__m128)v);
  else
    return (V)_mm_sqrt_pd((__m128d)v);
#else
  for (int l = 0; l < int(sizeof(V) / sizeof(v[0])); ++l) v[l] = std::sqrt(v[l]);
  return v;
#endif
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

/// Contiguous runs of a map's values, summed by run_sum / run_vec: value k of a run is at(k), and
/// on host vectors (where `vectors`) vec(k) holds values k .. k + lanes - 1.
template <class Acc, class T>
struct SumRun {  // p[k]
  const T* p;
  KOKKOS_FUNCTION Acc at(index_t k) const { return static_cast<Acc>(p[k]); }
#ifdef SEGOPS_HOST_VECTORS
  static constexpr bool vectors = std::is_same_v<Acc, T> && HostVec<Acc>::ok;
  /// Batches of short runs take masked_pair_vec (SumReducer::batch_runs; measured to pay for plain
  /// sums, not for DotRun's products: dot of single floats, N = 1e6, L = 3, ran 0.318 -> 0.355 ms).
  static constexpr bool pairs = vectors;
  auto vec(index_t k) const { return load_vec<typename HostVec<Acc>::type>(p + k); }
#ifdef SEGOPS_HOST_WIDE
  SEGOPS_WIDE_INLINE void wide(index_t k, typename HostWide<Acc>::type& w) const {
    load_wide(w, p + k);
  }
#endif
#endif
};
template <class Acc, class A, class B>
struct DotRun {  // p[k] * q[k]
  const A* p;
  const B* q;
  KOKKOS_FUNCTION Acc at(index_t k) const {
    return static_cast<Acc>(p[k]) * static_cast<Acc>(q[k]);
  }
#ifdef SEGOPS_HOST_VECTORS
  static constexpr bool vectors =
      std::is_same_v<Acc, A> && std::is_same_v<Acc, B> && HostVec<Acc>::ok;
  auto vec(index_t k) const {
    using V = typename HostVec<Acc>::type;
    return load_vec<V>(p + k) * load_vec<V>(q + k);
  }
#ifdef SEGOPS_HOST_WIDE
  SEGOPS_WIDE_INLINE void wide(index_t k, typename HostWide<Acc>::type& w) const {
    typename HostWide<Acc>::type v;
    load_wide(w, p + k);
    load_wide(v, q + k);
    w *= v;
  }
#endif
#endif
};
template <class Acc, class T>
struct SquareRun {  // p[k] * p[k]: DotRun's values with one load each
  const T* p;
  KOKKOS_FUNCTION Acc at(index_t k) const {
    return static_cast<Acc>(p[k]) * static_cast<Acc>(p[k]);
  }
#ifdef SEGOPS_HOST_VECTORS
  static constexpr bool vectors = std::is_same_v<Acc, T> && HostVec<Acc>::ok;
  auto vec(index_t k) const {
    const auto v = load_vec<typename HostVec<Acc>::type>(p + k);
    return v * v;
  }
#ifdef SEGOPS_HOST_WIDE
  SEGOPS_WIDE_INLINE void wide(index_t k, typename HostWide<Acc>::type& w) const {
    load_wide(w, p + k);
    w *= w;
  }
#endif
#endif
};
/// A run of len values, room of which (from its start on) are readable.
template <class Run>
struct Flat {
  Run run;
  index_t len, room;
};
template <class Run>
KOKKOS_FUNCTION Flat<Run> flat(Run run, index_t len, index_t room) {
  return {run, len, room};
}

#ifdef SEGOPS_HOST_VECTORS
/// The sum of a run's values as a vector whose lane_sum is the sum. Short runs take the masked
/// vector path (NV vectors, else kRunVectors) where the run's vectors are readable; other runs the
/// scalar loop, its sum in lane 0.
template <class Acc, int NV = kRunVectors, bool Wide = kWideBuild, class Run>
inline typename HostVec<Acc>::type run_vec(const Flat<Run>& f) {
  if constexpr (Run::vectors) {
    constexpr index_t K = NV * index_t(16 / sizeof(Acc));
    if (f.len <= K && f.room >= K) return masked_run_vec<Acc, NV, Wide>(f.len, f.run);
    if constexpr (NV < kRunVectors) return run_vec<Acc, kRunVectors, Wide>(f);
  }
  typename HostVec<Acc>::type r = {};
  r[0] = flat_sum8<Acc>(f.len, [&](index_t k) { return f.run.at(k); });
  return r;
}
#endif

/// The sum of a run's values: run_vec's lane_sum on host vectors (for the scalar loop's sum that
/// adds zeros to it, which changes no bit: the loop never returns -0).
template <class Acc, int NV = kRunVectors, class Run>
KOKKOS_FUNCTION Acc run_sum(const Flat<Run>& f) {
#ifdef SEGOPS_HOST_VECTORS
  if constexpr (Run::vectors) return lane_sum(run_vec<Acc, NV>(f));
#endif
  return flat_sum8<Acc>(f.len, [&](index_t k) { return f.run.at(k); });
}

}  // namespace segops::impl

namespace segops::impl {

/// a[0 .. W) = column sums of rows [0, len) of packed rows of width W at p; `room` rows from p on
/// are readable. Short runs of rows that fit one vector take the masked path.
template <class Acc, int W, class T>
KOKKOS_FUNCTION void run_rows(const T* p, index_t len, index_t room, Acc (&a)[W]) {
#ifdef SEGOPS_HOST_VECTORS
  if constexpr (std::is_same_v<Acc, T> && row_fits_vector<T, W>) {
    if (len <= kRowRun && room * W >= kRowRunReads<T, W>) {
      const auto t = masked_rows_vec<T, W>(p, len);
      for (int c = 0; c < W; ++c) a[c] = t[c];
      return;
    }
  }
#else
  (void)room;
#endif
  for (int c = 0; c < W; ++c) a[c] = Acc(0);
  for (index_t k = 0; k < len; ++k)
    for (int c = 0; c < W; ++c) a[c] += static_cast<Acc>(p[k * W + c]);
}

#ifdef SEGOPS_HOST_VECTORS
/// run_rows for rows that fit one vector, as a vector: lanes 0 .. W hold the column sums (the row
/// stays in a register for a vector finisher or store).
template <int W, class T>
inline typename HostVec<T>::type run_rows_vec(const T* p, index_t len, index_t room) {
  static_assert(row_fits_vector<T, W>);
  if (len <= kRowRun && room * W >= kRowRunReads<T, W>) return masked_rows_vec<T, W>(p, len);
  T a[W];
  run_rows<T, W>(p, len, room, a);
  typename HostVec<T>::type v = {};
  for (int c = 0; c < W; ++c) v[c] = a[c];
  return v;
}
#endif

}  // namespace segops::impl
