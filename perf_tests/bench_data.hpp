// SPDX-License-Identifier: Apache-2.0
// Reproducible benchmark data, defined so that perf_tests/peers.py (numpy) builds bit-identical
// arrays. Keep the two definitions in step: perf_tests/peers.py, functions
// splitmix64/make_ids/values.
#pragma once

#include <cstdint>
#include <vector>

namespace segops_bench {

inline constexpr std::uint64_t kGamma = 0x9E3779B97F4A7C15ull;

/// Standard splitmix64 applied to k: z = k + gamma, then the two xor-shift-multiply rounds.
inline std::uint64_t splitmix64(std::uint64_t k) {
  std::uint64_t z = k + kGamma;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// Value number i of stream `seed` (seed >= 1), uniform in [-1, 1):
///   x_i = ((splitmix64(i + gamma * seed) >> 11) * 2^-53) * 2 - 1, computed in double, then
///   rounded to the array's value type. i is the flat row-major index into an (n, w) array.
inline double value(std::uint64_t i, std::uint64_t seed) {
  return static_cast<double>(splitmix64(i + kGamma * seed) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
}

/// Segment-id regimes.
///  - uniform with average segment length L: M = max(1, N / L) (L = N gives M = 1);
///    id_i = splitmix64(i) % M.
///  - skew: M = max(4, N / 3). With h = splitmix64(i): if h % 8 < 4 the element goes to one of the
///    four giant segments {0, M/4, M/2, 3M/4}, picked by (h >> 3) % 4; otherwise id_i = (h >> 5) %
///    M. So about half the elements land in 4 giant segments, the rest spread over ~N/3 tiny ones.
///  - sorted: the same multiset of ids in ascending order (counts laid out in segment order);
///    values are then indexed by position, exactly as for unsorted ids.
enum class Regime { uniform, skew };

inline std::int64_t num_segments(std::int64_t n, std::int64_t len, Regime r) {
  if (r == Regime::skew) return n / 3 > 4 ? n / 3 : 4;
  return n / len > 1 ? n / len : 1;
}

inline std::int64_t raw_id(std::uint64_t i, std::int64_t m, Regime r) {
  const std::uint64_t h = splitmix64(i), um = static_cast<std::uint64_t>(m);
  if (r == Regime::skew) {
    if (h % 8 < 4) {
      const std::uint64_t giant[4] = {0, um / 4, um / 2, 3 * um / 4};
      return static_cast<std::int64_t>(giant[(h >> 3) % 4]);
    }
    return static_cast<std::int64_t>((h >> 5) % um);
  }
  return static_cast<std::int64_t>(h % um);
}

/// ids(N) for the regime; sorted = counting sort of the same multiset.
template <class IdT>
std::vector<IdT> make_ids(std::int64_t n, std::int64_t m, Regime r, bool sorted) {
  std::vector<IdT> ids(static_cast<std::size_t>(n));
#pragma omp parallel for schedule(static)
  for (std::int64_t i = 0; i < n; ++i) ids[i] = static_cast<IdT>(raw_id(i, m, r));
  if (sorted) {
    std::vector<std::int64_t> counts(static_cast<std::size_t>(m), 0);
    for (auto s : ids) ++counts[s];
    std::int64_t p = 0;
    for (std::int64_t s = 0; s < m; ++s)
      for (std::int64_t c = 0; c < counts[s]; ++c) ids[p++] = static_cast<IdT>(s);
  }
  return ids;
}

}  // namespace segops_bench
