// SPDX-License-Identifier: Apache-2.0
// max, min and max_norm with the arg output on random floats (inexact squares), every path: each
// result bit for bit, each index the first element attaining its result. A max_norm value is the
// square root of the row's squares, each rounded to the output type, added in component order
// (docs/determinism.md): the passes that find the indices form each norm again, four rows at a time
// or one, and compare bits, so every path must round alike. CMake also builds this file alone with
// multiply-adds contracted into FMAs (segops_unit_tests_contracted), where the scalar norms once
// rounded differently from the vector ones and one unsorted argmax in ten was lost.
#include <cstring>

#include "test_common.hpp"

namespace segtest {
namespace {

#ifdef SEGOPS_TEST_CUDA
TEST(NormBits, ArgIsTheFirstElementAttainingTheResultBitForBit) {
  GTEST_SKIP() << "host paths: on a GPU the compiler contracts each norm's squares into FMAs (one "
                  "path forms every norm, so the arg is unaffected); test_nonlinear checks the "
                  "values to rounding there";
}
#else
/// v * v rounded to V: a volatile store, which no compiler contracts into a multiply-add.
template <class V>
V rounded_square(V v) {
  volatile V s = v * v;
  return s;
}

template <class V>
std::uint64_t bits_of(V v) {
  using U = std::conditional_t<sizeof(V) == 4, std::uint32_t, std::uint64_t>;
  return Kokkos::bit_cast<U>(v);
}

/// The value and index that reducing `key` (one value per element, into its segment) in element
/// order gives: a strictly better value, or the first NaN, replaces the best so far.
template <class V>
void first_best(const std::vector<V>& key, const Case& c, bool is_max, std::vector<V>& best,
                std::vector<i64>& arg) {
  best.assign(c.m,
              is_max ? -std::numeric_limits<V>::infinity() : std::numeric_limits<V>::infinity());
  arg.assign(c.m, -1);
  for (i64 i = 0; i < c.n(); ++i) {
    const i64 s = c.ids[i];
    const V v = key[i], o = best[s];
    const bool better = std::isnan(v) ? !std::isnan(o) : (is_max ? v > o : v < o);
    if (better || arg[s] < 0) {
      best[s] = v;
      arg[s] = i;
    }
  }
}

/// x (T) of width d into outputs of V: max_norm, and max and min of each component, with the arg,
/// against the first best elements. About one row in `nan_every` holds two NaNs of different
/// payloads (0: none): its norm is NaN, of either payload, and ends its segment's search.
template <class T, class V>
void check_case(const Case& c, Mode mode, i64 d, int nan_every, std::mt19937_64& rng) {
  const std::string what = c.name + " " + mode_name(mode) + " D=" + std::to_string(d) +
                           (sizeof(T) == 4 ? " float" : " double") + " into " +
                           (sizeof(V) == 4 ? "float" : "double") +
                           (nan_every ? " with NaN rows" : "");
  std::vector<T> x = random_vector<T>(rng, static_cast<size_t>(c.n() * d));
  for (i64 i = 0; nan_every > 0 && i < c.n(); ++i)
    if (rng() % static_cast<std::uint64_t>(nan_every) == 0)
      for (i64 k = 0; k < std::min<i64>(d, 2); ++k) {
        T nan = std::numeric_limits<T>::quiet_NaN();
        unsigned char bytes[sizeof(T)];
        std::memcpy(bytes, &nan, sizeof(T));
        bytes[0] = static_cast<unsigned char>(k + 1);  // payload 1 or 2 (little-endian)
        std::memcpy(&nan, bytes, sizeof(T));
        x[i * d + k] = nan;
      }
  // the norms as documented
  std::vector<V> norms(c.n());
  for (i64 i = 0; i < c.n(); ++i) {
    if (d == 1) {
      norms[i] = std::abs(static_cast<V>(x[i]));
      continue;
    }
    V r = 0;
    for (i64 k = 0; k < d; ++k) r += rounded_square(static_cast<V>(x[i * d + k]));
    norms[i] = std::sqrt(r);
  }
  std::vector<V> want_norm;
  std::vector<i64> want_arg;
  first_best(norms, c, true, want_norm, want_arg);

  const auto seg = make_segments<std::int32_t>(c, mode);
  const auto xv = device_matrix<T>(x, c.n(), d);
  const auto nrm = poisoned_view<V, 1>(c.m, 1);
  const auto anrm = poisoned_view<std::int64_t, 1>(c.m, 1);
  segops::segmented_max_norm(Exec(), seg, xv, nrm, anrm);
  const auto got_norm = to_host(nrm), got_arg = to_host(anrm);
  i64 wrong = 0;
  for (i64 s = 0; s < c.m; ++s) {
    const bool empty = want_arg[s] < 0;
    const V want = empty ? V(0) : want_norm[s], got = static_cast<V>(got_norm[s]);
    const bool value_ok = std::isnan(want) ? std::isnan(got) : bits_of(got) == bits_of(want);
    if ((!value_ok || got_arg[s] != static_cast<double>(want_arg[s])) && ++wrong <= 3)
      ADD_FAILURE() << what << ": max_norm of segment " << s << " " << got << " at " << got_arg[s]
                    << ", expected " << want << " at " << want_arg[s];
  }
  EXPECT_EQ(wrong, 0) << what << ": max_norm, segments wrong of " << c.m;

  // max and min of each component: x's entries, the first best's bits
  const auto mx = poisoned_view<V, 2>(c.m, d), mn = poisoned_view<V, 2>(c.m, d);
  const auto amx = poisoned_view<std::int64_t, 2>(c.m, d),
             amn = poisoned_view<std::int64_t, 2>(c.m, d);
  segops::segmented_max(Exec(), seg, xv, mx, amx);
  segops::segmented_min(Exec(), seg, xv, mn, amn);
  const auto hmx = to_host(mx), hmn = to_host(mn), hamx = to_host(amx), hamn = to_host(amn);
  for (bool is_max : {true, false}) {
    wrong = 0;
    for (i64 k = 0; k < d; ++k) {
      std::vector<V> key(c.n());
      for (i64 i = 0; i < c.n(); ++i) key[i] = static_cast<V>(x[i * d + k]);
      std::vector<V> want;
      first_best(key, c, is_max, want, want_arg);
      for (i64 s = 0; s < c.m; ++s) {
        const V got = static_cast<V>((is_max ? hmx : hmn)[s * d + k]);
        const double got_a = (is_max ? hamx : hamn)[s * d + k];
        const bool value_ok =
            std::isnan(want[s]) ? std::isnan(got) : bits_of(got) == bits_of(want[s]);
        if ((!value_ok || got_a != static_cast<double>(want_arg[s])) && ++wrong <= 3)
          ADD_FAILURE() << what << ": " << (is_max ? "max" : "min") << " of segment " << s
                        << " component " << k << " " << got << " at " << got_a << ", expected "
                        << want[s] << " at " << want_arg[s];
      }
    }
    EXPECT_EQ(wrong, 0) << what << ": " << (is_max ? "max" : "min");
  }
}

/// The regimes, and two cases that take the fast paths at sizes where they run many times: short
/// segments over many walked tiles (sorted), and about 3 elements per segment over 40,000
/// segments (unsorted: the per-thread copies, then the pass for the first elements).
std::vector<Case> cases(std::uint64_t seed, Mode mode) {
  std::mt19937_64 rng(seed);
  std::vector<Case> out = regimes(seed, mode);
  std::vector<i64> counts(40000);
  for (auto& n : counts) n = static_cast<i64>(rng() % 7);  // 3 on average, some empty
  Case c{"short_many", ids_from_counts(counts), static_cast<i64>(counts.size())};
  if (mode != Mode::Sorted) std::shuffle(c.ids.begin(), c.ids.end(), rng);
  out.push_back(std::move(c));
  return out;
}

TEST(NormBits, ArgIsTheFirstElementAttainingTheResultBitForBit) {
  std::mt19937_64 rng(401);
  for (Mode mode : kModes)
    for (const auto& c : cases(401, mode))
      for (i64 d : {1, 2, 3, 4, 7})
        for (int nan_every : {0, 50}) {
          check_case<float, float>(c, mode, d, nan_every, rng);
          if (d == 3) {  // the rows the vector norms take, and their wider neighbours
            check_case<float, double>(c, mode, d, nan_every, rng);
            check_case<double, double>(c, mode, d, nan_every, rng);
          }
          if (::testing::Test::HasFailure()) return;
        }
}
#endif  // SEGOPS_TEST_CUDA

}  // namespace
}  // namespace segtest
