// SPDX-License-Identifier: Apache-2.0
// Shared test harness: backend selection, segment regimes and descriptor modes, host<->device
// helpers for every view layout the library accepts, comparison helpers and reference loops.
#pragma once

#include <gtest/gtest.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <segops/segops.hpp>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace segtest {

#if defined(SEGOPS_TEST_SERIAL)
using Exec = Kokkos::Serial;
#elif defined(SEGOPS_TEST_OPENMP)
using Exec = Kokkos::OpenMP;
#elif defined(SEGOPS_TEST_CUDA)
using Exec = Kokkos::Cuda;
#else
#error "define one of SEGOPS_TEST_SERIAL, SEGOPS_TEST_OPENMP, SEGOPS_TEST_CUDA"
#endif
using Mem = Exec::memory_space;
using i64 = std::int64_t;

/// SEGOPS_TEST_TYPE_SUBSET (scripts/test.sh's CUDA compile check, an executable that is built but
/// never run): the table-driven harnesses (run_lib, run_linear) call the library only with float
/// elements and double per-segment values in LayoutRight views, and throw on any other call;
/// main() refuses to run such an executable. Every other build calls the library with every type.
/// Measured under nvcc: test_matvec.cpp 146 -> 122 s, 912 -> 762 kernel stubs (most of the rest are
/// the harness's own Kokkos copies and fills).
template <class Elem, class PerSeg, class Layout>
inline constexpr bool kTypesBuilt =
#ifdef SEGOPS_TEST_TYPE_SUBSET
    (std::is_same_v<Elem, float> && std::is_same_v<PerSeg, double> &&
     std::is_same_v<Layout, Kokkos::LayoutRight>);
#else
    true;
#endif

[[noreturn]] inline void types_not_built() {
  throw std::logic_error("segtest: these types are not built (SEGOPS_TEST_TYPE_SUBSET)");
}

// ---- segment regimes ----

/// One element->segment map of a named regime. Ids outside [0, m) are "dropped" ids (only valid
/// with a trusted descriptor).
struct Case {
  std::string name;
  std::vector<i64> ids;
  i64 m = 0;
  i64 n() const { return static_cast<i64>(ids.size()); }
  bool valid(i64 i) const { return ids[i] >= 0 && ids[i] < m; }
};

inline std::vector<i64> ids_from_counts(const std::vector<i64>& counts) {
  std::vector<i64> ids;
  for (i64 s = 0; s < static_cast<i64>(counts.size()); ++s) ids.insert(ids.end(), counts[s], s);
  return ids;
}

/// The segment regimes every op is tested on; `sorted` = false shuffles the same ids.
inline std::vector<Case> regimes(std::uint64_t seed, bool sorted) {
  std::mt19937_64 rng(seed);
  std::vector<Case> cases;
  auto add = [&](std::string name, std::vector<i64> counts) {
    Case c{std::move(name), ids_from_counts(counts), static_cast<i64>(counts.size())};
    if (!sorted) std::shuffle(c.ids.begin(), c.ids.end(), rng);
    cases.push_back(std::move(c));
  };
  add("N0", std::vector<i64>(5, 0));
  add("M1", {257});
  {  // every other segment empty, plus empty ones at both ends
    std::vector<i64> c(41, 0);
    for (size_t s = 1; s + 1 < c.size(); s += 2) c[s] = 1 + rng() % 9;
    add("empty_segments", c);
  }
  add("length1", std::vector<i64>(193, 1));
  {  // one giant segment (crossing many reduction tiles) among tiny ones
    std::vector<i64> c(60);
    for (auto& x : c) x = rng() % 4;
    c[23] = 9000;
    add("giant", c);
  }
  {  // random mix of lengths 0..40
    std::vector<i64> c(150);
    for (auto& x : c) x = rng() % 41;
    add("mixed", c);
  }
  add("whole_array", {5000});
  {  // many tiles of short segments (lengths 0..5): the position walk, its stream cuts, empty
     // segments and segments crossing tile ends
    std::vector<i64> c(2400);
    for (auto& x : c) x = rng() % 6;
    add("short_many_tiles", c);
  }
  {  // more segments than elements (one in ten non-empty): unsorted ids take the schedules for
     // more copied rows than elements (the build's shared counters, sums' segment owners)
    std::vector<i64> c(500, 0);
    for (auto& x : c) x = rng() % 10 == 0 ? 1 + rng() % 3 : 0;
    add("sparse", c);
  }
  return cases;
}

/// The same case with about one id in `every` replaced by an out-of-range one (negative, M, or
/// far above M), in a fixed pseudo-random pattern. Needs a trusted descriptor.
inline Case with_dropped_ids(Case c, std::uint64_t seed, i64 every = 7) {
  std::mt19937_64 rng(seed);
  const i64 bad[] = {-1, c.m, c.m + 3, -1000, std::numeric_limits<std::int32_t>::max()};
  for (auto& s : c.ids)
    if (static_cast<i64>(rng() % every) == 0) s = bad[rng() % 5];
  c.name += "+dropped";
  return c;
}

/// Unsorted ids over many segments: M = 300000 segments of lengths 0 and 1 in random order, so
/// per-segment scalars (in double) and rows outgrow a core's L2 cache (2 MiB, the library's
/// kCacheBytes) and the host passes prefetch the random rows they read or add into.
/// With other arguments: m segments of lengths 0 to max_count - 1.
inline Case many_segments_case(std::uint64_t seed, i64 m = 300000, i64 max_count = 2) {
  std::mt19937_64 rng(seed);
  std::vector<i64> counts(static_cast<std::size_t>(m));
  for (auto& x : counts) x = static_cast<i64>(rng() % static_cast<std::uint64_t>(max_count));
  Case c{"many_segments", ids_from_counts(counts), m};
  std::shuffle(c.ids.begin(), c.ids.end(), rng);
  return c;
}

/// How a descriptor is built: sorted ids; shuffled ids with default options (the schedule that
/// may use atomics); shuffled ids with the deterministic option (stable permutation); and the
/// last two with Buckets::always, so that host backends' sums take the bucketed schedule (which
/// Buckets::automatic keeps for outputs beyond the caches, far larger than these cases).
enum class Mode { Sorted, Unsorted, Deterministic, Bucketed, DeterministicBucketed };
inline constexpr Mode kModes[] = {Mode::Sorted, Mode::Unsorted, Mode::Deterministic, Mode::Bucketed,
                                  Mode::DeterministicBucketed};
inline const char* mode_name(Mode m) {
  switch (m) {
    case Mode::Sorted:
      return "sorted";
    case Mode::Unsorted:
      return "unsorted";
    case Mode::Deterministic:
      return "unsorted+deterministic";
    case Mode::Bucketed:
      return "unsorted+buckets";
    default:
      return "unsorted+deterministic+buckets";
  }
}
/// Whether the mode asks for the deterministic option.
inline bool deterministic_option(Mode m) {
  return m == Mode::Deterministic || m == Mode::DeterministicBucketed;
}
/// The unsorted modes: default options and the deterministic option, each with and without buckets.
inline constexpr Mode kUnsortedModes[] = {Mode::Unsorted, Mode::Deterministic, Mode::Bucketed,
                                          Mode::DeterministicBucketed};
inline segops::Buckets buckets_option(Mode m) {
  return m == Mode::Bucketed || m == Mode::DeterministicBucketed ? segops::Buckets::always
                                                                 : segops::Buckets::automatic;
}
inline std::vector<Case> regimes(std::uint64_t seed, Mode mode) {
  return regimes(seed, mode == Mode::Sorted);
}

// ---- random data and device views ----

template <class T>
std::vector<T> random_vector(std::mt19937_64& rng, size_t n, double lo = -1, double hi = 1) {
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<T> v(n);
  for (auto& x : v) x = static_cast<T>(u(rng));
  return v;
}
template <class T>
std::vector<double> as_double(const std::vector<T>& v) {
  return std::vector<double>(v.begin(), v.end());
}

/// A view allocated without initialisation: the tests fill every view they allocate, and a
/// labelled allocation would initialise on the memory space's default execution space (OpenMP
/// even in the Serial executable).
template <class V, class... Extents>
V uninit(const std::string& label, Extents... extents) {
  return V(Kokkos::view_alloc(Kokkos::WithoutInitializing, label), extents...);
}

/// Device copy of host ids in the requested id type.
template <class IdT>
Kokkos::View<IdT*, Mem> device_ids(const std::vector<i64>& ids) {
  auto d = uninit<Kokkos::View<IdT*, Mem>>("ids", ids.size());
  auto h = Kokkos::create_mirror_view(d);
  for (size_t i = 0; i < ids.size(); ++i) h(i) = static_cast<IdT>(ids[i]);
  Kokkos::deep_copy(d, h);
  return d;
}

/// A descriptor for case `c` in `mode` (the descriptor keeps its ids view alive).
template <class IdT>
segops::Segments<IdT, Exec> make_segments(const Case& c, Mode mode, bool trusted = false,
                                          i64 carry_capacity = 0) {
  return segops::Segments<IdT, Exec>(device_ids<IdT>(c.ids), c.m,
                                     {.trusted = trusted,
                                      .deterministic = deterministic_option(mode),
                                      .carry_capacity = carry_capacity,
                                      .buckets = buckets_option(mode)});
}

/// f(c, seg) for each case c of the regimes under the deterministic option, and a case of n random
/// ids over m segments (sized by the caller past a cache), whose ids are unsorted; seg is c's
/// deterministic int32 descriptor. Expects at least 6 such cases (some regimes' ids come out
/// sorted, whose tiles sum runs instead).
template <class F>
void for_unsorted_deterministic(std::uint64_t seed, i64 n, i64 m, F&& f) {
  std::mt19937_64 rng(seed);
  std::vector<Case> cases = regimes(seed, Mode::Deterministic);
  Case big{"big_unsorted", std::vector<i64>(n), m};
  for (auto& id : big.ids) id = static_cast<i64>(rng() % m);
  cases.push_back(big);
  int unsorted = 0;
  for (const auto& c : cases) {
    const auto seg = make_segments<std::int32_t>(c, Mode::Deterministic);
    if (seg.sorted()) continue;
    ++unsorted;
    f(c, seg);
  }
  EXPECT_GE(unsorted, 6);
}

/// An uninitialised rank-1 (n) or rank-2 (n, d) device view.
template <class T, int Rank, class Layout = Kokkos::LayoutRight>
auto uninit_view(const std::string& label, i64 n, i64 d) {
  using V =
      std::conditional_t<Rank == 1, Kokkos::View<T*, Layout, Mem>, Kokkos::View<T**, Layout, Mem>>;
  if constexpr (Rank == 1)
    return uninit<V>(label, n);
  else
    return uninit<V>(label, n, d);
}

/// Device view of rank 1 (n) or rank 2 (n, d) filled from a row-major host vector of n*d values.
template <class T, int Rank, class Layout = Kokkos::LayoutRight>
auto device_view(const std::vector<T>& v, i64 n, i64 d) {
  static_assert(Rank == 1 || Rank == 2);
  auto out = uninit_view<T, Rank, Layout>("in", n, d);
  auto h = Kokkos::create_mirror_view(out);
  for (i64 i = 0; i < n; ++i)
    for (i64 j = 0; j < d; ++j) {
      if constexpr (Rank == 1)
        h(i) = v[i];
      else
        h(i, j) = v[i * d + j];
    }
  Kokkos::deep_copy(out, h);
  return out;
}
template <class T, class Layout = Kokkos::LayoutRight>
Kokkos::View<T**, Layout, Mem> device_matrix(const std::vector<T>& v, i64 n, i64 d) {
  return device_view<T, 2, Layout>(v, n, d);
}
template <class T>
Kokkos::View<T*, Mem> device_vector(const std::vector<T>& v) {
  return device_view<T, 1>(v, static_cast<i64>(v.size()), 1);
}

/// Value written into the gaps of a strided view's allocation, to catch writes outside the view.
inline constexpr double kSentinel = -777.0;

/// A LayoutStride view of rank 1 (n) or rank 2 (n, d) in which no stride is 1: `view` is
/// big(1, :, 0:d) of a (2, n, d + 1) LayoutLeft array, so strides are (2, 2n) (rank 1: 2). The
/// rest of `big` holds kSentinel.
template <class T, int Rank>
struct Strided {
  using view_type = std::conditional_t<Rank == 1, Kokkos::View<T*, Kokkos::LayoutStride, Mem>,
                                       Kokkos::View<T**, Kokkos::LayoutStride, Mem>>;
  Kokkos::View<T***, Kokkos::LayoutLeft, Mem> big;
  view_type view;
  i64 n = 0, d = 1;

  /// True when every element of `big` outside `view` still holds kSentinel.
  bool gaps_intact() const {
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), big);
    for (i64 a = 0; a < 2; ++a)
      for (i64 i = 0; i < n; ++i)
        for (i64 j = 0; j <= d; ++j)
          if (!(a == 1 && j < d) && h(a, i, j) != static_cast<T>(kSentinel)) return false;
    return true;
  }
};
template <class T, int Rank>
Strided<T, Rank> device_strided(const std::vector<T>& v, i64 n, i64 d) {
  Strided<T, Rank> s;
  s.n = n;
  s.d = d;
  s.big = uninit<Kokkos::View<T***, Kokkos::LayoutLeft, Mem>>("big", 2, n, d + 1);
  auto h = Kokkos::create_mirror_view(s.big);
  for (i64 a = 0; a < 2; ++a)
    for (i64 i = 0; i < n; ++i)
      for (i64 j = 0; j <= d; ++j)
        h(a, i, j) = a == 1 && j < d ? v[i * d + j] : static_cast<T>(kSentinel);
  Kokkos::deep_copy(s.big, h);
  if constexpr (Rank == 1)
    s.view = Kokkos::subview(s.big, 1, Kokkos::ALL, 0);
  else
    s.view = Kokkos::subview(s.big, 1, Kokkos::ALL, Kokkos::pair<i64, i64>(0, d));
  return s;
}

/// Row-major host copy (as double) of a rank-1 or rank-2 view of any layout. Fences first.
template <class V>
std::vector<double> to_host(const V& v) {
  static_assert(V::rank() == 1 || V::rank() == 2);
  Kokkos::fence("segtest::to_host");
  using T = typename V::non_const_value_type;
  const i64 n = static_cast<i64>(v.extent(0));
  const i64 d = V::rank() == 2 ? static_cast<i64>(v.extent(1)) : 1;
  std::vector<double> out(n * d);
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace,
                                           typename V::memory_space>::accessible) {
    for (i64 i = 0; i < n; ++i)
      for (i64 j = 0; j < d; ++j) {
        if constexpr (V::rank() == 1)
          out[i] = static_cast<double>(v(i));
        else
          out[i * d + j] = static_cast<double>(v(i, j));
      }
  } else {  // contiguous copy on the device first: cross-space deep_copy needs contiguous views
    using Tmp = std::conditional_t<V::rank() == 1, Kokkos::View<T*, typename V::memory_space>,
                                   Kokkos::View<T**, typename V::memory_space>>;
    Tmp tmp;
    if constexpr (V::rank() == 1)
      tmp = uninit<Tmp>("to_host", n);
    else
      tmp = uninit<Tmp>("to_host", n, d);
    Kokkos::deep_copy(tmp, v);
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), tmp);
    const T* p = h.data();
    for (i64 k = 0; k < n * d; ++k) out[k] = static_cast<double>(p[k]);
  }
  return out;
}

/// Raw bytes of a view's elements in row-major order (for bitwise comparisons).
template <class V>
std::vector<unsigned char> host_bytes(const V& v) {
  using T = typename V::non_const_value_type;
  auto d = to_host(v);  // exact: float and double values round-trip through double
  std::vector<unsigned char> bytes(d.size() * sizeof(T));
  for (size_t k = 0; k < d.size(); ++k) {
    const T x = static_cast<T>(d[k]);
    std::memcpy(bytes.data() + k * sizeof(T), &x, sizeof(T));
  }
  return bytes;
}

/// host_bytes of each view, one after another (several outputs as one byte string).
template <class... V>
std::vector<unsigned char> concat_bytes(const V&... v) {
  std::vector<unsigned char> bytes;
  for (const auto& b : {host_bytes(v)...}) bytes.insert(bytes.end(), b.begin(), b.end());
  return bytes;
}

/// FNV-1a hash of a byte string.
inline std::uint64_t fnv1a(const std::vector<unsigned char>& bytes) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char b : bytes) {
    h ^= b;
    h *= 1099511628211ull;
  }
  return h;
}

/// Fills an output with a poison value so unwritten elements are caught. Host-accessible views
/// are filled by a host loop (a kernel per poison would dominate the OpenMP runs on a busy
/// machine), device views by a fill on `exec`.
inline constexpr double kPoison = -12345.0;
template <class V, class ExecSpace = Exec>
void poison(const V& v, const ExecSpace& exec = ExecSpace()) {
  using T = typename V::value_type;
  if constexpr (Kokkos::SpaceAccessibility<Kokkos::HostSpace,
                                           typename V::memory_space>::accessible) {
    exec.fence("segtest::poison");
    for (size_t i = 0; i < v.extent(0); ++i) {
      if constexpr (V::rank() == 1)
        v(i) = static_cast<T>(kPoison);
      else
        for (size_t j = 0; j < v.extent(1); ++j) v(i, j) = static_cast<T>(kPoison);
    }
  } else {
    Kokkos::deep_copy(exec, v, static_cast<T>(kPoison));
  }
}

/// A poisoned rank-1 (n) or rank-2 (n, d) device view.
template <class T, int Rank, class Layout = Kokkos::LayoutRight>
auto poisoned_view(i64 n, i64 d) {
  auto v = uninit_view<T, Rank, Layout>("out", n, d);
  poison(v);
  return v;
}

// ---- comparisons ----

/// Relative tolerance by the precision of the value that was computed (the output's type).
template <class T>
double tol() {
  return std::is_same_v<T, float> ? 2e-4 : 1e-11;
}

/// |got - ref| <= rtol * (1 + scale) for every element, where scale is the sum of |terms| that
/// made the reference (sums cancel, so the rounding error follows the magnitude sum).
inline void expect_close(const std::vector<double>& got, const std::vector<double>& ref,
                         const std::vector<double>& scale, double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  for (size_t k = 0; k < ref.size(); ++k) {
    const double bound = rtol * (1.0 + scale[k]);
    ASSERT_TRUE(std::abs(got[k] - ref[k]) <= bound)
        << what << ": element " << k << " got " << got[k] << " expected " << ref[k] << " (bound "
        << bound << ")";
  }
}

/// Every element equals `value` exactly (e.g. an output left untouched after a throw).
inline void expect_all_equal(const std::vector<double>& got, double value,
                             const std::string& what) {
  for (size_t k = 0; k < got.size(); ++k) ASSERT_EQ(got[k], value) << what << ": element " << k;
}

// ---- double-precision serial references (dropped ids are skipped) ----

/// out(s, d) = sum over valid i in s of x(i, d); also returns sum of |x| in `mag`.
inline std::vector<double> ref_sum(const Case& c, const std::vector<double>& x, i64 d,
                                   std::vector<double>* mag = nullptr) {
  std::vector<double> out(c.m * d, 0.0);
  if (mag) mag->assign(c.m * d, 0.0);
  for (i64 i = 0; i < c.n(); ++i) {
    if (!c.valid(i)) continue;
    for (i64 j = 0; j < d; ++j) {
      out[c.ids[i] * d + j] += x[i * d + j];
      if (mag) (*mag)[c.ids[i] * d + j] += std::abs(x[i * d + j]);
    }
  }
  return out;
}

/// Number of valid elements per segment.
inline std::vector<i64> ref_counts(const Case& c) {
  std::vector<i64> counts(c.m, 0);
  for (i64 i = 0; i < c.n(); ++i)
    if (c.valid(i)) ++counts[c.ids[i]];
  return counts;
}

}  // namespace segtest
