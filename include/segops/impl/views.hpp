// SPDX-License-Identifier: Apache-2.0
// Argument normalisation and host-side checks shared by every op.
#pragma once

#include <Kokkos_Core.hpp>
#include <Kokkos_Profiling_ScopedRegion.hpp>
#include <cstdint>
#include <initializer_list>
#include <segops/error.hpp>
#include <sstream>
#include <string>
#include <type_traits>

namespace segops::impl {

using index_t = std::int64_t;

/// Reduction tiles are whole multiples of this many positions; the descriptor records the first
/// segment starting at or after each multiple, so a tile finds its segments without searching.
inline constexpr index_t kTileQuantum = 1024;

/// The range of work items (element blocks, reduction tiles, bucketed sums' buckets) of the main
/// kernels, in Kokkos' dynamic schedule: on host backends a thread that runs out of items takes the
/// next chunk (of Kokkos' automatic size, about 20 to 100 chunks a thread), so a thread that starts
/// late or runs on a slower core does not hold up the call, as it does with the static halves. Each
/// item writes outputs of its own, so which thread runs it changes no result. Device backends
/// ignore the schedule. Sorted ids, L = 3, 2 threads, static and dynamic alternated call by call in
/// one process, medians of the per-pair ratios over 2-6 runs. Rows of 3 floats: N = 1e6 sum
/// 0.81-1.01, axpby 0.91-1.01, dot_backward 0.88-1.01, mean_backward 0.88-1.00, sum_backward
/// 0.88-1.01, the double backwards of axpby, axpy and mul 0.93-1.03; N = 1e5 0.72-0.85 (sum, axpby,
/// dot_backward, mul and double backwards), mean_backward 0.99, sum_backward 0.89-1.07; N = 2^25
/// mul 0.93, dot_backward 0.92, axpby_double_backward 0.94, sum and sum_backward 1.00-1.01. Single
/// floats, N = 2^25: sum 0.87-0.99, mul_double_backward 0.90, sum_backward 1.03-1.11 (a pure
/// stream, which loses a little to the chunks). Unsorted ids, N = 1e6, rows of 3 floats (2 runs):
/// inner_products_backward 0.87-0.91, dot_backward 0.80-0.98, mul 0.89-0.95, the others 0.92-1.00;
/// sum, whose kernels this does not change, 1.05-1.09: the noise of such a measurement on this VM.
template <class Exec, class... Tag>
using WorkItems = Kokkos::RangePolicy<Exec, Tag..., Kokkos::Schedule<Kokkos::Dynamic>,
                                      Kokkos::IndexType<index_t>>;

/// Every element or segment view is normalised to this strided 2-D accessor before dispatch, so
/// LayoutLeft/Right/Stride, const, unmanaged, RandomAccess and compile-time extents all land on one
/// instantiation per value type. Rank-1 views become D = 1.
template <class T>
struct Mat {
  T* ptr = nullptr;
  index_t n = 0, d = 1, s0 = 0, s1 = 0;
  KOKKOS_FUNCTION T& operator()(index_t i, index_t j) const { return ptr[i * s0 + j * s1]; }
  KOKKOS_FUNCTION T& operator()(index_t i) const { return ptr[i * s0]; }
};

/// Host builds with GCC or Clang: inline every call in the marked function (a kernel body), so
/// per-element functors, maps and their column loops (for_cols) compile into one loop body. Off
/// under AddressSanitizer, where it would only cost compile time, and with SEGOPS_NO_FLATTEN
/// defined (faster builds, slower kernels).
/// SEGOPS_INLINE marks the lambdas that such a kernel calls once per element or per component
/// (for_cols): in a large translation unit GCC's flatten leaves some of them out of line
/// (bench_segops had 74 of ElementTransform's and 60 of Combination::apply's, a small program
/// none), which costs a call each time.
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && \
    !defined(__SANITIZE_ADDRESS__) && !defined(SEGOPS_NO_FLATTEN)
#define SEGOPS_FLATTEN __attribute__((flatten))
#define SEGOPS_INLINE __attribute__((always_inline))
#define SEGOPS_NOINLINE __attribute__((noinline))
#else
#define SEGOPS_FLATTEN
#define SEGOPS_INLINE
#define SEGOPS_NOINLINE
#endif

/// SEGOPS_UNREACHABLE(): a branch that cannot be taken (host builds with GCC or Clang tell the
/// compiler, which drops the tests that lead to it; elsewhere nothing).
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__)
#define SEGOPS_UNREACHABLE() __builtin_unreachable()
#else
#define SEGOPS_UNREACHABLE() ((void)0)
#endif

/// SEGOPS_HOST_GNU: a host-only translation unit compiled by GCC or Clang (no CUDA, HIP or SYCL
/// compiler), where GNU builtins, vector extensions and inline asm may be used.
#if (defined(__GNUC__) || defined(__clang__)) && !defined(__CUDACC__) && !defined(__HIPCC__) && \
    !defined(SYCL_LANGUAGE_VERSION)
#define SEGOPS_HOST_GNU 1
#endif

/// Host builds with GCC or Clang: prefetch<Write>(p) hints that the cache line at p is about to be
/// read (written); kernels that would compute addresses only for it test kPrefetches.
#ifdef SEGOPS_HOST_GNU
inline constexpr bool kPrefetches = true;
#else
inline constexpr bool kPrefetches = false;
#endif
/// A core's L2 cache on the host this was tuned on (Zen 5: 2 MiB): data beyond it is read from
/// farther away, where prefetching and staging start to pay.
inline constexpr index_t kCacheBytes = index_t(2) << 20;
/// The last-level cache a core shares on that host (32 MiB of L3).
inline constexpr index_t kLastLevelBytes = index_t(32) << 20;
/// Bucketed sums over unsorted ids (BucketReduce, host backends): each element's row of at most
/// kBucketRowBytes (3 doubles, 4 floats) is first written to the bucket of its segment id's high
/// bits, then each bucket is summed into its slice of 2^kBucketMinShift segments (192 KiB of rows
/// of 3 floats), which a core's L2 holds, instead of adding every row at random into outputs
/// beyond the caches. Taken where the output exceeds kBucketOutputBytes. Slices grow (up to
/// 2^kBucketMaxShift segments) only to keep at most kMaxBuckets buckets. Sum of 2^25 rows of 3
/// floats, L = 3, 2 threads (683 buckets of 2^14 segments): 126-130 ms against 350-404 ms for
/// the per-thread copies; slices of 2^15 (342 buckets) 135-150 ms, 2^16 152-165 ms.
inline constexpr index_t kBucketRowBytes = 24;
inline constexpr int kBucketMinShift = 14;
inline constexpr int kBucketMaxShift = 16;    // local ids within a slice are 16-bit
inline constexpr index_t kMaxBuckets = 4096;  // a chunk's write cursors live on its stack
inline constexpr index_t kBucketOutputBytes = kLastLevelBytes / 4;
/// With the deterministic option the alternative is the tiles over the permutation, which gather
/// rows at random: buckets pay from smaller outputs on (2e6 rows of 3 floats, L = 3: 7.5-11.3
/// against 12.8-14.1 ms; 1e6, 4 MB of output: 2.4-3.7 against 3.1-4.8 ms, no clear gain).
inline constexpr index_t kBucketOutputBytesDeterministic = kLastLevelBytes / 8;
/// A descriptor cuts its elements into at most this many chunks (BucketReduce's first pass: one
/// work item each).
inline constexpr index_t kBucketChunks = 64;
/// Elements between a random row's prefetch and its use. Unsorted ids, L = 3, 2 threads,
/// N = 2^25, 32 -> 64: sum of single floats 86 -> 64 ms, dot of rows of 3 95 -> 68 ms (its
/// deterministic option 126 -> 100 ms), mul 90 -> 67 ms, matvec 151 -> 131 ms; sum of rows of
/// 3 floats 147 -> 157 ms.
inline constexpr index_t kAhead = 64;
/// Bytes between the prefetch of a sorted stream and its use (TileReduce::runs: the element rows
/// and the offsets of tiles of short segments, read in order, which the hardware's prefetcher
/// alone left waiting for memory). Sum of 2^25 single floats, L = 3, 2 threads, on a Xeon whose
/// copy ran 24 GB/s: 16.7 ms without, 14.5 (512 B), 12.3 (2 KiB), 12.1 (4 KiB), 12.5 (8 KiB).
inline constexpr index_t kStreamAheadBytes = 4096;
template <bool Write = false>
KOKKOS_FORCEINLINE_FUNCTION void prefetch([[maybe_unused]] const void* p) {
  if constexpr (kPrefetches) __builtin_prefetch(p, Write);
}
/// prefetch(p) that the compiler keeps: on x86-64 an `asm volatile` prefetcht0 (what GCC emits
/// for either hint on the x86-64 baseline). GCC 12 deleted __builtin_prefetch from some loops of
/// some translation units and not others (its RTL passes): SegmentBlocks' prefetch per segment
/// was gone from the loop over packed rows in the benchmark's build, not in a small driver's.
/// Max_norm, rows of 3 floats, L = 3, N = 1e6, unsorted, 2 threads, in that build: backward
/// 5.2-5.3 -> 2.8-3.0 ms, double backward 9.4-10.2 -> 5.5-6.8 ms. Not the default: with every
/// prefetch kept, mul of single floats over unsorted ids ran 20% slower (0.57-0.59 -> 0.69-0.71
/// ms, 4 alternating pairs) on a path that prefetches nothing: the asm changed how GCC compiled
/// the function's other loops. Only loops measured case by case use it.
/// p must point into an object (the asm's operand is a read of *p).
template <bool Write = false>
KOKKOS_FORCEINLINE_FUNCTION void prefetch_kept([[maybe_unused]] const void* p) {
#if defined(__x86_64__) && defined(SEGOPS_HOST_GNU)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  prefetch<Write>(p);
#endif
}

/// prefetch_kept(p) if Kept, else prefetch(p).
template <bool Kept = false>
KOKKOS_FORCEINLINE_FUNCTION void prefetch_maybe_kept(const void* p) {
  if constexpr (Kept)
    prefetch_kept(p);
  else
    prefetch(p);
}
/// prefetch() of row e of a view: its first element, and its last where the row is a matrix
/// (3x3 floats span two cache lines as often as one); Kept: through prefetch_kept. A function,
/// not a generic lambda: inside the flattened kernels GCC emitted none of the lambda's
/// prefetches. A matrix's row is always kept: the benchmark's build had not one prefetch left in
/// any of matvec's eight element passes (objdump), whose rows of 3x3 floats are read at random for
/// unsorted ids. Kept there (only those functions' code changed), matvec of rows of 3 floats,
/// N = 1e6, L = 3, unsorted, 2 threads, old and new binaries alternating in a slow hour: forward
/// 7.2-29.8 -> 3.7-8.1 ms, backward 24-45 -> 16-26 ms, double backward 55-110 -> 30-45 ms.
template <bool Kept = false, class V>
KOKKOS_FORCEINLINE_FUNCTION void prefetch_row_of(index_t e, const V& v) {
  if constexpr (requires { v.r; }) {
    prefetch_kept(&v(e, 0, 0));
    prefetch_kept(&v(e, v.r - 1, v.c - 1));
  } else if constexpr (requires { v.s1; }) {
    prefetch_maybe_kept<Kept>(&v(e, 0));
  } else {
    prefetch_maybe_kept<Kept>(&v(e));
  }
}
/// prefetch_row_of each view.
template <class... M>
KOKKOS_FORCEINLINE_FUNCTION void prefetch_rows([[maybe_unused]] index_t e, const M&... m) {
  (prefetch_row_of(e, m), ...);
}

/// f(d) for every column d of a row of width w. Widths 1 to 4 (scalars and 3-vectors above all)
/// are unrolled with constant column indices, so a per-element loop carries no inner loop and
/// no trip-count checks; wider rows take a plain loop.
template <class F>
KOKKOS_FORCEINLINE_FUNCTION void for_cols(index_t w, const F& f) {
  switch (w) {
    case 1:
      f(index_t(0));
      return;
    case 2:
      f(index_t(0)), f(index_t(1));
      return;
    case 3:
      f(index_t(0)), f(index_t(1)), f(index_t(2));
      return;
    case 4:
      f(index_t(0)), f(index_t(1)), f(index_t(2)), f(index_t(3));
      return;
    default:
      for (index_t d = 0; d < w; ++d) f(d);
  }
}

/// Rows stored back to back (row-major, no padding): element (i, d) at ptr[i * d_count + d].
template <class T>
KOKKOS_FUNCTION bool packed(const Mat<T>& m) {
  return m.s0 == m.d && (m.d == 1 || m.s1 == 1);
}
/// Width of packed rows, or 0. Per-element functors that offer
/// packed_width() and packed<W>(i, s) get a loop with the width and the strides known at compile
/// time (segmented_transform) when all their element rows are packed.
template <class T>
KOKKOS_FUNCTION index_t packed_width_of(const Mat<T>& m) {
  return packed(m) ? m.d : 0;
}
/// The width all the given element views share as packed rows, or 0.
template <class T, class... Ts>
KOKKOS_FUNCTION index_t common_packed_width(const Mat<T>& m, const Mat<Ts>&... ms) {
  const index_t w = packed_width_of(m);
  return ((packed_width_of(ms) == w) && ...) ? w : 0;
}
/// Element (r, d) of a Mat: through its strides (StridedAt), or of rows packed W wide (PackedAt<W>,
/// the width and the strides as constants). Functors that serve both write their loop once over
/// an accessor and a width (index_t, or std::integral_constant for packed rows).
struct StridedAt {
  template <class M>
  KOKKOS_FORCEINLINE_FUNCTION auto& operator()(const M& m, index_t r, index_t d) const {
    return m(r, d);
  }
};
template <int W>
struct PackedAt {
  template <class M>
  KOKKOS_FORCEINLINE_FUNCTION auto& operator()(const M& m, index_t r, index_t d) const {
    return m.ptr[r * W + d];
  }
};

/// p[i * W + d] = r[d] for rows i in [0, n): the row copied into four local rows, stored four
/// rows at a time (for floats, W 16-byte vectors a step), the few left over one by one. The four
/// rows are a local array, so a store through p cannot change them: nothing is reloaded.
template <int W, class T>
KOKKOS_FORCEINLINE_FUNCTION void fill_rows(T* p, index_t n, const T (&r)[W]) {
  T four[4 * W];
  for (int k = 0; k < 4 * W; ++k) four[k] = r[k % W];
  index_t i = 0;
  for (; i + 4 <= n; i += 4)
    for (int k = 0; k < 4 * W; ++k) p[i * W + k] = four[k];
  for (; i < n; ++i)
    for (int d = 0; d < W; ++d) p[i * W + d] = r[d];
}

/// f(std::integral_constant<int, w>{}) and true where w is one of Ws, so that f's loops over rows
/// of width w take it as a constant; false, and no call, for other widths.
template <int... Ws, class F>
KOKKOS_FORCEINLINE_FUNCTION bool with_width_of(index_t w, const F& f) {
  return ((w == Ws && (static_cast<void>(f(std::integral_constant<int, Ws>{})), true)) || ...);
}
/// with_width_of<1, 3>: for packed rows of scalars and 3-vectors, loops with the width and the
/// strides as constants run about 2x faster than with them at run time (their fields spill).
template <class F>
KOKKOS_FORCEINLINE_FUNCTION bool with_packed_width(index_t w, const F& f) {
  return with_width_of<1, 3>(w, f);
}

/// Calls f(std::true_type{}) where the rank-1 view v has stride 1, else f(std::false_type{}):
/// loops over v.data() can then take the stride as the constant 1 (contiguous ids), which lets
/// the compiler vectorise them, and read v.stride(0) otherwise.
template <class V, class F>
KOKKOS_FORCEINLINE_FUNCTION void with_unit_stride(const V& v, const F& f) {
  if (v.stride(0) == 1)
    f(std::true_type{});
  else
    f(std::false_type{});
}
/// The stride of with_unit_stride's loops: 1 as a constant, or v's.
template <class Unit, class V>
KOKKOS_FORCEINLINE_FUNCTION index_t stride_of(Unit, const V& v) {
  return Unit::value ? index_t(1) : static_cast<index_t>(v.stride(0));
}

/// The descriptor's workspace (doubles) as an array of T (accumulators, per-segment coefficients):
/// where it starts, how many fit.
template <class T>
struct Workspace {
  T* data;
  index_t room;
};
template <class T, class Seg>
Workspace<T> workspace_of(const Seg& seg) {
  static_assert(alignof(T) <= alignof(double) && std::is_trivially_copyable_v<T>);
  const auto ws = seg.workspace();
  return {reinterpret_cast<T*>(ws.data()),
          static_cast<index_t>(ws.extent(0) * sizeof(double) / sizeof(T))};
}

/// Per-segment matrices A(M, R, C), normalised the same way.
template <class T>
struct Mat3 {
  T* ptr = nullptr;
  index_t n = 0, r = 0, c = 0, s0 = 0, s1 = 0, s2 = 0;
  KOKKOS_FUNCTION T& operator()(index_t i, index_t a, index_t b) const {
    return ptr[i * s0 + a * s1 + b * s2];
  }
};

/// Bytes of one row of each view that is set (a scalar per segment, a row, a matrix, a Kokkos
/// View of counts): what a per-element functor reads per segment.
template <class... M>
KOKKOS_FUNCTION index_t row_bytes(const M&... m) {
  [[maybe_unused]] auto one = [](const auto& v) -> index_t {
    if constexpr (requires { v.r; })
      return v.ptr ? v.r * v.c * index_t(sizeof(*v.ptr)) : 0;
    else if constexpr (requires { v.s1; })
      return v.ptr ? (v.s1 != 0 ? v.d : 1) * index_t(sizeof(*v.ptr)) : 0;
    else
      return index_t(sizeof(typename std::remove_cvref_t<decltype(v)>::value_type));
  };
  return (index_t(0) + ... + one(m));
}

template <class V>
auto as_mat(const V& v) {
  Mat<typename V::value_type> m;
  m.ptr = v.data();
  m.n = static_cast<index_t>(v.extent(0));
  m.s0 = static_cast<index_t>(v.stride(0));
  if constexpr (V::rank() == 2) {
    m.d = static_cast<index_t>(v.extent(1));
    m.s1 = static_cast<index_t>(v.stride(1));
  }
  return m;
}

template <class V>
auto as_mat3(const V& v) {
  Mat3<typename V::value_type> m{v.data(),
                                 static_cast<index_t>(v.extent(0)),
                                 static_cast<index_t>(v.extent(1)),
                                 static_cast<index_t>(v.extent(2)),
                                 static_cast<index_t>(v.stride(0)),
                                 static_cast<index_t>(v.stride(1)),
                                 static_cast<index_t>(v.stride(2))};
  return m;
}

// ---- static checks: one trait per argument kind, one readable message each ----

template <class T>
inline constexpr bool is_real_v =
    std::is_same_v<std::remove_cv_t<T>, float> || std::is_same_v<std::remove_cv_t<T>, double>;

template <class V, class Exec>
inline constexpr bool is_accessible_view_v = [] {
  if constexpr (Kokkos::is_view_v<V>)
    return Kokkos::SpaceAccessibility<Exec, typename V::memory_space>::accessible;
  else
    return false;
}();

/// A float/double View of rank 1 or 2 (rank 3 for per-segment matrices), accessible from Exec.
template <class V, class Exec, int MinRank = 1, int MaxRank = 2>
inline constexpr bool is_data_view_v = [] {
  if constexpr (is_accessible_view_v<V, Exec>)
    return is_real_v<typename V::value_type> && int(V::rank()) >= MinRank &&
           int(V::rank()) <= MaxRank;
  else
    return false;
}();

template <class V, class Exec, int MinRank = 1, int MaxRank = 2>
inline constexpr bool is_output_view_v = [] {
  if constexpr (is_data_view_v<V, Exec, MinRank, MaxRank>)
    return !std::is_const_v<typename V::value_type>;
  else
    return false;
}();

/// Static argument checks: one trait, one message naming the op, the argument and what it must be.
#define SEGOPS_T(v) std::remove_cvref_t<decltype(v)>
#define SEGOPS_CHECK_VIEW(OP, ARG, V, EXEC, TRAIT, MINR, MAXR, WHAT)                      \
  static_assert(::segops::impl::TRAIT<V, EXEC, MINR, MAXR>,                               \
                "segops::" OP ": argument '" ARG "' must be " WHAT                        \
                " Kokkos::View of float or double whose memory space is accessible from " \
                "the execution space")
#define SEGOPS_CHECK_IN(OP, ARG, EXEC, MINR, MAXR, WHAT) \
  SEGOPS_CHECK_VIEW(OP, #ARG, SEGOPS_T(ARG), SEGOPS_T(EXEC), is_data_view_v, MINR, MAXR, WHAT)
#define SEGOPS_CHECK_OUT(OP, ARG, EXEC, MINR, MAXR, WHAT)                                  \
  SEGOPS_CHECK_VIEW(OP, #ARG, SEGOPS_T(ARG), SEGOPS_T(EXEC), is_output_view_v, MINR, MAXR, \
                    "a non-const " WHAT)
#define SEGOPS_CHECK_SAME_RANK(OP, A, B)                              \
  static_assert(int(SEGOPS_T(A)::rank()) == int(SEGOPS_T(B)::rank()), \
                "segops::" OP ": arguments '" #A "' and '" #B         \
                "' must have the same rank "                          \
                "(both rank-1 or both rank-2)")

// ---- host-side checks, run before any kernel is enqueued ----

[[noreturn]] inline void fail(const char* op, const char* arg, const std::string& what,
                              index_t expected, index_t actual) {
  std::ostringstream os;
  os << "segops::" << op << ": argument '" << arg << "': " << what << ": expected " << expected
     << ", got " << actual;
  throw Error(os.str());
}

inline void check_extent(const char* op, const char* arg, const char* what, index_t expected,
                         index_t actual) {
  if (expected != actual) fail(op, arg, what, expected, actual);
}

template <class V>
index_t width_of(const V& v) {
  if constexpr (V::rank() >= 2)
    return static_cast<index_t>(v.extent(1));
  else
    return 1;
}

/// Throws when the memory spans of an output and an input overlap (they must not alias).
template <class O, class I>
void check_no_alias(const char* op, const char* out_name, const O& out, const char* in_name,
                    const I& in) {
  if (out.span() == 0 || in.span() == 0) return;
  auto ob = reinterpret_cast<std::uintptr_t>(out.data());
  auto oe = ob + out.span() * sizeof(typename O::value_type);
  auto ib = reinterpret_cast<std::uintptr_t>(in.data());
  auto ie = ib + in.span() * sizeof(typename I::value_type);
  if (ob < ie && ib < oe) {
    std::ostringstream os;
    os << "segops::" << op << ": output '" << out_name << "' aliases input '" << in_name
       << "' (their memory overlaps); pass a separate output";
    throw Error(os.str());
  }
}

}  // namespace segops::impl

namespace segops::impl {

template <class Seg, class V>
void check_elements(const char* op, const char* arg, const Seg& seg, const V& v) {
  check_extent(op, arg, "extent(0) must be the number of elements N", seg.num_elements(),
               static_cast<index_t>(v.extent(0)));
}
template <class Seg, class V>
void check_segments(const char* op, const char* arg, const Seg& seg, const V& v) {
  check_extent(op, arg, "extent(0) must be the number of segments M", seg.num_segments(),
               static_cast<index_t>(v.extent(0)));
}
template <class V>
void check_width(const char* op, const char* arg, index_t expected, const V& v) {
  check_extent(op, arg, "extent(1) must be the row width D", expected, width_of(v));
}

}  // namespace segops::impl

namespace segops::impl {

/// An op's name for error messages and its label for kernels and the Kokkos Tools region.
struct OpName {
  const char* name;   // "segmented_sum"
  const char* label;  // "segops::segmented_sum"
};
#define SEGOPS_OP(NAME) \
  ::segops::impl::OpName { NAME, "segops::" NAME }

}  // namespace segops::impl

namespace segops::impl {

/// The memory an argument covers, for aliasing checks.
struct Span {
  const char* name;
  std::uintptr_t begin, end;
};
template <class V>
Span span_of(const char* name, const V& v) {
  const auto b = reinterpret_cast<std::uintptr_t>(v.data());
  return {name, b, b + v.span() * sizeof(typename V::value_type)};
}

/// Throws if an output overlaps an input or another output.
inline void check_disjoint(const char* op, std::initializer_list<Span> outs,
                           std::initializer_list<Span> ins) {
  auto overlap = [](const Span& a, const Span& b) {
    return a.begin < a.end && b.begin < b.end && a.begin < b.end && b.begin < a.end;
  };
  for (auto o = outs.begin(); o != outs.end(); ++o) {
    for (const auto& i : ins)
      if (overlap(*o, i))
        throw Error(std::string("segops::") + op + ": output '" + o->name + "' aliases input '" +
                    i.name + "' (their memory overlaps); pass a separate output");
    for (auto p = outs.begin(); p != o; ++p)
      if (overlap(*o, *p))
        throw Error(std::string("segops::") + op + ": outputs '" + p->name + "' and '" + o->name +
                    "' overlap; pass separate outputs");
  }
}

/// Runtime extent checks of one op call against the descriptor and the row width d.
template <class Seg>
struct Extents {
  const char* op;
  const Seg& seg;
  index_t d;
  template <class V>  // (N[, d])
  const Extents& rows(const char* arg, const V& v) const {
    check_elements(op, arg, seg, v);
    check_width(op, arg, d, v);
    return *this;
  }
  template <class V>  // (M[, d])
  const Extents& segment_rows(const char* arg, const V& v) const {
    check_segments(op, arg, seg, v);
    check_width(op, arg, d, v);
    return *this;
  }
  template <class V>  // (M)
  const Extents& segment_scalars(const char* arg, const V& v) const {
    check_segments(op, arg, seg, v);
    return *this;
  }
};

}  // namespace segops::impl

#define SEGOPS_ELEM_IN(OP, ARG) SEGOPS_CHECK_IN(OP, ARG, exec, 1, 2, "a rank-1 or rank-2")
#define SEGOPS_ELEM_OUT(OP, ARG) SEGOPS_CHECK_OUT(OP, ARG, exec, 1, 2, "rank-1 or rank-2")
#define SEGOPS_SCALAR_IN(OP, ARG) SEGOPS_CHECK_IN(OP, ARG, exec, 1, 1, "a rank-1 (per-segment)")
#define SEGOPS_SCALAR_OUT(OP, ARG) SEGOPS_CHECK_OUT(OP, ARG, exec, 1, 1, "rank-1 (per-segment)")
#define SEGOPS_SPAN(ARG) ::segops::impl::span_of(#ARG, ARG)

/// Element inputs of one call share one value type, and so do per-segment inputs.
#define SEGOPS_SAME_TYPE(OP, A, B)                                          \
  static_assert(std::is_same_v<typename SEGOPS_T(A)::non_const_value_type,  \
                               typename SEGOPS_T(B)::non_const_value_type>, \
                "segops::" OP ": arguments '" #A "' and '" #B               \
                "' must have the same "                                     \
                "value type")
