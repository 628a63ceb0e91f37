// SPDX-License-Identifier: Apache-2.0
// Hygiene (SPEC §3), observed through Kokkos Tools callbacks: an op call never fences, allocates
// or deep-copies; it launches at least one kernel, every kernel label and every region name
// starts with "segops::", and every call opens a region. (main.cpp turns off the global fencing
// Kokkos would otherwise add around kernels once callbacks are attached.)
#include <functional>

#include "linear_common.hpp"

namespace segtest {
namespace {

/// What the callbacks saw inside the measured window.
struct Events {
  int fences = 0, allocations = 0, deallocations = 0, deep_copies = 0, kernels = 0, regions = 0;
  std::vector<std::string> unexpected;  // names of fences, allocations, copies, bad labels
};
Events events;

bool has_prefix(const char* name) { return std::string(name).rfind("segops::", 0) == 0; }

void on_fence(const char* name, const std::uint32_t, std::uint64_t* id) {
  ++events.fences;
  events.unexpected.push_back(std::string("fence '") + name + "'");
  *id = 0;
}
void on_allocate(const Kokkos::Tools::SpaceHandle, const char* label, const void*,
                 const std::uint64_t size) {
  ++events.allocations;
  events.unexpected.push_back(std::string("allocation '") + label + "' of " + std::to_string(size) +
                              " bytes");
}
void on_deallocate(const Kokkos::Tools::SpaceHandle, const char* label, const void*,
                   const std::uint64_t) {
  ++events.deallocations;
  events.unexpected.push_back(std::string("deallocation '") + label + "'");
}
void on_deep_copy(Kokkos::Tools::SpaceHandle, const char* dst, const void*,
                  Kokkos::Tools::SpaceHandle, const char* src, const void*, std::uint64_t) {
  ++events.deep_copies;
  events.unexpected.push_back(std::string("deep copy '") + src + "' -> '" + dst + "'");
}
void on_kernel(const char* name, const std::uint32_t, std::uint64_t* id) {
  ++events.kernels;
  if (!has_prefix(name)) events.unexpected.push_back(std::string("kernel '") + name + "'");
  *id = 0;
}
void on_region(const char* name) {
  ++events.regions;
  if (!has_prefix(name)) events.unexpected.push_back(std::string("region '") + name + "'");
}

/// Attaches the callbacks for its lifetime (and detaches them even when a test assertion fails).
class Listening {
 public:
  Listening() {
    namespace E = Kokkos::Tools::Experimental;
    events = Events{};
    E::set_begin_fence_callback(on_fence);
    E::set_allocate_data_callback(on_allocate);
    E::set_deallocate_data_callback(on_deallocate);
    E::set_begin_deep_copy_callback(on_deep_copy);
    E::set_begin_parallel_for_callback(on_kernel);
    E::set_begin_parallel_reduce_callback(on_kernel);
    E::set_begin_parallel_scan_callback(on_kernel);
    E::set_push_region_callback(on_region);
  }
  ~Listening() {
    namespace E = Kokkos::Tools::Experimental;
    E::set_begin_fence_callback(nullptr);
    E::set_allocate_data_callback(nullptr);
    E::set_deallocate_data_callback(nullptr);
    E::set_begin_deep_copy_callback(nullptr);
    E::set_begin_parallel_for_callback(nullptr);
    E::set_begin_parallel_reduce_callback(nullptr);
    E::set_begin_parallel_scan_callback(nullptr);
    E::set_push_region_callback(nullptr);
  }
  Listening(const Listening&) = delete;
  Listening& operator=(const Listening&) = delete;
};

struct Call {
  std::string what;
  std::function<void()> run;
};

/// Every op x rank (with and without the instance argument) and count, on `seg`, with views
/// allocated here, outside the measured window.
template <class Seg>
void add_calls(std::vector<Call>& calls, const Seg& seg, const Case& c, const std::string& tag,
               std::mt19937_64& rng) {
  for (const auto& op : kLinearOps)
    for (int rank : {1, 2}) {
      if (op.component && rank == 1) continue;
      const i64 d = rank == 1 ? 1 : 3;
      with_ranks(op, rank, [&](auto ri, auto ro) {
        constexpr int RIn = decltype(ri)::value, ROut = decltype(ro)::value;
        const i64 rows = op.in_rows(c), width = op.in_width(d);
        const auto in =
            device_view<double, RIn>(random_vector<double>(rng, rows * width), rows, width);
        const auto out = poisoned_view<float, ROut>(op.out_rows(c), op.out_width(d));
        const LinOp id = op.op;
        for (bool inst : {true, false})
          calls.push_back({std::string(op.name) + " [" + tag + ", rank " + std::to_string(rank) +
                               (inst ? "" : ", no instance") + "]",
                           [=] { run_linear(Exec(), id, seg, in, out, inst); }});
      });
    }
  const auto c32 = poisoned_view<std::int32_t, 1>(c.m, 1);
  const auto c64 = poisoned_view<std::int64_t, 1>(c.m, 1);
  calls.push_back(
      {"segmented_count int32 [" + tag + "]", [=] { segops::segmented_count(Exec(), seg, c32); }});
  calls.push_back(
      {"segmented_count int64 [" + tag + "]", [=] { segops::segmented_count(seg, c64); }});
}

TEST(Hygiene, NoFenceAllocationOrCopyAndLabelledKernels) {
  std::mt19937_64 rng(71);
  Case mixed;
  for (const auto& c : regimes(71, false))
    if (c.name == "mixed") mixed = c;
  Case sorted = mixed;
  std::sort(sorted.ids.begin(), sorted.ids.end());
  const Case dropped = with_dropped_ids(mixed, 72);

  const auto s_sorted = make_segments<std::int32_t>(sorted, Mode::Sorted);
  const auto s_unsorted = make_segments<std::int32_t>(mixed, Mode::Unsorted);
  const auto s_det = make_segments<std::int64_t>(mixed, Mode::Deterministic);
  const auto s_dropped = make_segments<std::int32_t>(dropped, Mode::Unsorted, true);
  const auto s_dropped_det = make_segments<std::int64_t>(dropped, Mode::Deterministic, true);
  std::vector<Call> calls;
  add_calls(calls, s_sorted, sorted, "sorted", rng);
  add_calls(calls, s_unsorted, mixed, "unsorted", rng);
  add_calls(calls, s_det, mixed, "deterministic", rng);
  add_calls(calls, s_dropped, dropped, "trusted, dropped ids", rng);
  add_calls(calls, s_dropped_det, dropped, "trusted, dropped ids, deterministic", rng);
  Kokkos::fence("segtest: before the measured window");

  std::vector<std::string> silent;  // calls that launched no kernel or opened no region
  Events seen;
  {
    Listening listening;
    for (const auto& call : calls) {
      const int k0 = events.kernels, r0 = events.regions;
      call.run();
      if (events.kernels == k0 || events.regions == r0) silent.push_back(call.what);
    }
    seen = events;
  }
  Kokkos::fence("segtest: after the measured window");

  EXPECT_EQ(seen.fences, 0);
  EXPECT_EQ(seen.allocations, 0);
  EXPECT_EQ(seen.deallocations, 0);
  EXPECT_EQ(seen.deep_copies, 0);
  EXPECT_GE(seen.kernels, static_cast<int>(calls.size()));
  EXPECT_GE(seen.regions, static_cast<int>(calls.size()));
  EXPECT_TRUE(seen.unexpected.empty()) << ::testing::PrintToString(seen.unexpected);
  EXPECT_TRUE(silent.empty()) << "no kernel or no region: " << ::testing::PrintToString(silent);
}

/// Allocates, copies, launches, fences and opens a region, none of it named "segops::".
Events probe_events() {
  Listening listening;
  Kokkos::View<double*, Mem> v("segtest::probe", 10);
  auto h = Kokkos::create_mirror(v);
  Kokkos::deep_copy(h, v);
  Kokkos::parallel_for("probe", Kokkos::RangePolicy<Exec>(Exec(), 0, 10), KOKKOS_LAMBDA(int){});
  Exec().fence("segtest::probe");
  Kokkos::Profiling::pushRegion("probe");
  Kokkos::Profiling::popRegion();
  return events;
}

/// The callbacks do observe the events the test above counts, so its zeros mean something.
TEST(Hygiene, CallbacksObserveEvents) {
  const Events seen = probe_events();
  EXPECT_GE(seen.allocations, 2);
  EXPECT_GE(seen.deep_copies, 1);
  EXPECT_GE(seen.fences, 1);
  EXPECT_GE(seen.kernels, 1);
  EXPECT_EQ(seen.regions, 1);
  EXPECT_FALSE(seen.unexpected.empty());  // "probe" is not a segops:: name
}

}  // namespace
}  // namespace segtest
