// SPDX-License-Identifier: Apache-2.0
// Graph capture: op chains recorded with segops::then_ops into a Kokkos Graph and replayed give the
// same bits as the same chain run eagerly, and each replay reads the inputs' current values.
#include <cstring>

#include "test_common.hpp"

namespace segtest {
namespace {

template <class V>
std::vector<double> bits_of(const V& v) {
  return to_host(v);
}

TEST(Graph, TrainingStepChainMatchesEager) {
  std::mt19937_64 rng(7);
  auto c = regimes(5, true)[5];  // "mixed": empty and varied segments
  const i64 n = c.n(), m = c.m, d = 3;
  auto ids = device_ids<int>(c.ids);
  segops::Segments<int, Exec> seg(ids, m);
  auto x = device_matrix<double>(random_vector<double>(rng, n * d), n, d);
  auto u = device_matrix<double>(random_vector<double>(rng, n * d), n, d);
  Kokkos::View<double*, Mem> g("g", m), out("out", m), gg("gg", m);
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> gx("gx", n, d), xp("xp", n, d);
  Kokkos::deep_copy(g, 0.5);
  Exec exec;
  auto chain = [=](const Exec& e) {
    segops::segmented_rms_norm(e, seg, x, out);
    segops::segmented_rms_norm_backward(e, seg, x, out, g, gx);
    segops::segmented_rms_norm_double_backward(e, seg, x, out, g, u, gg, xp);
  };
  auto graph = Kokkos::Experimental::create_graph(
      exec, [&](const auto& root) { segops::then_ops(root, exec, chain); });
  for (int replay = 0; replay < 3; ++replay) {
    // fresh inputs before each replay: the graph must read them, not a snapshot
    auto xh = random_vector<double>(rng, n * d);
    Kokkos::deep_copy(x, device_matrix<double>(xh, n, d));
    poison(out);
    poison(gx);
    poison(gg);
    poison(xp);
    graph.submit(exec);
    exec.fence();
    auto replay_out = to_host(out), replay_gx = to_host(gx), replay_gg = to_host(gg),
         replay_xp = to_host(xp);
    chain(exec);
    exec.fence();
    EXPECT_EQ(replay_out, to_host(out)) << "replay " << replay;
    EXPECT_EQ(replay_gx, to_host(gx)) << "replay " << replay;
    EXPECT_EQ(replay_gg, to_host(gg)) << "replay " << replay;
    EXPECT_EQ(replay_xp, to_host(xp)) << "replay " << replay;
    // and the eager result is the right one: out = sqrt(sum ||x||^2 / c)
    auto counts = ref_counts(c);
    std::vector<double> ref(m, 0.0);
    for (i64 i = 0; i < n; ++i)
      for (i64 k = 0; k < d; ++k) ref[c.ids[i]] += xh[i * d + k] * xh[i * d + k];
    for (i64 s = 0; s < m; ++s) {
      const double r = counts[s] ? std::sqrt(ref[s] / counts[s]) : 0.0;
      EXPECT_NEAR(replay_out[s], r, 1e-12 * (1 + r)) << "segment " << s;
    }
  }
}

TEST(Graph, MdStepChainMatchesEager) {
  // per-system kinetic energy and a per-system thermostat scale applied to the velocities
  std::mt19937_64 rng(11);
  auto c = regimes(3, false)[4];  // "giant", unsorted
  const i64 n = c.n(), m = c.m;
  auto ids = device_ids<std::int64_t>(c.ids);
  segops::Segments<std::int64_t, Exec> seg(ids, m, {.deterministic = true});
  auto v = device_matrix<double>(random_vector<double>(rng, n * 3), n, 3);
  Kokkos::View<double*, Mem> ke("ke", m), scale("scale", m);
  Kokkos::View<double**, Kokkos::LayoutRight, Mem> v_new("v_new", n, 3);
  Kokkos::deep_copy(scale, 0.9);
  Exec exec;
  auto chain = [=](const Exec& e) {
    segops::segmented_dot(e, seg, v, v, ke);
    segops::segmented_mul(e, seg, scale, v, v_new);
  };
  auto graph = Kokkos::Experimental::create_graph(
      exec, [&](const auto& root) { segops::then_ops(root, exec, chain); });
  poison(ke);
  poison(v_new);
  graph.submit(exec);
  exec.fence();
  auto ke_graph = to_host(ke), v_graph = to_host(v_new);
  poison(ke);
  poison(v_new);
  chain(exec);
  exec.fence();
  EXPECT_EQ(ke_graph, to_host(ke));
  EXPECT_EQ(v_graph, to_host(v_new));
  auto vh = to_host(v);
  for (size_t k = 0; k < vh.size(); ++k) ASSERT_DOUBLE_EQ(v_graph[k], 0.9 * vh[k]);
}

}  // namespace
}  // namespace segtest
