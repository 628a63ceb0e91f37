// SPDX-License-Identifier: Apache-2.0
// SegOps: the segment descriptor, built once per element->segment map and reused by every op.
#pragma once

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <segops/error.hpp>
#include <segops/impl/segments_build.hpp>
#include <segops/impl/views.hpp>
#include <sstream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace segops {

/// Whether a descriptor over unsorted ids prepares the bucketed schedule of host backends' sums
/// (docs/determinism.md): automatic where it pays (many segments), always, or never.
enum class Buckets { automatic, always, never };

/// Options of a Segments descriptor (C++20 designated initialisers read well:
/// `Segments seg(idx, M, {.deterministic = true})`).
struct SegmentsOptions {
  /// Skip the range check. Out-of-range ids are then dropped by every op (reductions ignore them,
  /// per-element outputs get 0) instead of making construction throw.
  bool trusted = false;
  /// For unsorted ids, build a stable permutation so every reduction runs in a fixed order without
  /// floating-point atomics (bitwise reproducible, independent of the thread count).
  bool deterministic = false;
  /// Number of partial-result slots (in doubles) kept for reductions that cross tile boundaries;
  /// 0 picks the backend default. Bigger means smaller tiles (more parallelism) for wide rows.
  std::int64_t carry_capacity = 0;
  /// Host backends, unsorted ids: sums whose output outgrows the caches first write each element's
  /// row to a bucket of segments, then sum bucket by bucket (in element order within a segment,
  /// whatever the thread count). `automatic` prepares this for more than 349,525 segments (174,762
  /// with `deterministic`); it costs about 26 bytes per element of descriptor memory. Ignored on
  /// GPUs and for sorted ids.
  Buckets buckets = Buckets::automatic;
};

/// Describes one element->segment map: idx(i) in [0, M) is the segment of element i.
///
/// Building it is the only SegOps step that synchronises with the host. It checks the ids on the
/// device in one pass (unless trusted), detects sortedness, and precomputes counts(M), offsets(M+1)
/// (64-bit) and, for unsorted ids with the deterministic option, a stable permutation. The ids view
/// is kept by reference (Kokkos reference counting); do not modify it while the descriptor is used.
///
/// \tparam IdT int32_t or int64_t.  \tparam ExecSpace where the ops run.
/// \throws segops::Error if M < 0, or (checked mode) naming the first out-of-range position and id.
/// Complexity: O(N) work, O(N log N) for the deterministic permutation of unsorted ids.
template <class IdT, class ExecSpace = Kokkos::DefaultExecutionSpace>
class Segments {
  static_assert(std::is_same_v<IdT, std::int32_t> || std::is_same_v<IdT, std::int64_t>,
                "segops::Segments: segment ids must be int32_t or int64_t");

 public:
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;
  using id_type = IdT;
  using index_type = std::int64_t;
  using ids_view = Kokkos::View<const IdT*, Kokkos::LayoutStride, memory_space>;
  using index_view = Kokkos::View<index_type*, memory_space>;

  template <class IdView>
  Segments(const ExecSpace& exec, const IdView& idx, index_type num_segments,
           SegmentsOptions opt = {})
      : m_(num_segments), opt_(opt) {
    static_assert(
        Kokkos::is_view_v<IdView> && IdView::rank() == 1 &&
            std::is_same_v<typename IdView::non_const_value_type, IdT>,
        "segops::Segments: 'idx' must be a rank-1 Kokkos::View of the descriptor's id type");
    static_assert(std::is_constructible_v<ids_view, IdView>,
                  "segops::Segments: 'idx' must live in the execution space's memory space (any "
                  "layout of rank 1; copy it there first)");
    if (num_segments < 0)
      impl::fail("Segments", "M", "number of segments must be >= 0", 0, num_segments);
    if (num_segments > (index_type(1) << 46))
      impl::fail("Segments", "M", "number of segments is beyond any addressable size; at most",
                 index_type(1) << 46, num_segments);
    ids_ = ids_view(idx);
    build(exec);
  }
  template <class IdView>
  Segments(const IdView& idx, index_type num_segments, SegmentsOptions opt = {})
      : Segments(ExecSpace(), idx, num_segments, opt) {}

  index_type num_elements() const { return n_; }
  index_type num_segments() const { return m_; }
  /// Number of elements with an in-range id (N minus the dropped ones; N in checked mode).
  index_type num_valid() const { return n_valid_; }
  bool sorted() const { return sorted_; }
  bool trusted() const { return opt_.trusted; }
  /// True when reductions run in a fixed order (sorted ids, or the permutation was built).
  bool deterministic() const { return sorted_ || perm_.extent(0) > 0 || n_valid_ == 0; }
  /// Largest segment size (a cheap statistic for picking kernels).
  index_type max_count() const { return max_count_; }

  ids_view ids() const { return ids_; }
  Kokkos::View<const index_type*, memory_space> counts() const { return counts_; }
  /// offsets(s) = first position of segment s in sorted order; offsets(M) = num_valid().
  Kokkos::View<const index_type*, memory_space> offsets() const { return offsets_; }
  /// Element at sorted position j (only for unsorted ids with the deterministic option).
  Kokkos::View<const index_type*, memory_space> permutation() const { return perm_; }

  /// First segment starting at or after each multiple of the tile quantum (internal).
  Kokkos::View<const index_type*, memory_space> tile_first() const { return tile_first_; }
  /// Scratch for reductions (internal): partial results of segments that cross tiles.
  Kokkos::View<double*, memory_space> carry() const { return carry_; }
  Kokkos::View<index_type*, memory_space> carry_index() const { return carry_idx_; }
  /// Scratch for sums over unsorted ids on host backends (internal): per-thread output copies,
  /// the deterministic option's staged values, the bucketed sums' staged rows. Empty on GPUs, for
  /// sorted ids, or when it would exceed the budget (see the constructor).
  Kokkos::View<double*, memory_space> workspace() const { return workspace_; }
  /// Bucketed sums (internal; host backends, unsorted ids): elements are cut into chunks of
  /// bucket_chunk() positions; bucket b holds segments [b << bucket_shift(), (b + 1) <<
  /// bucket_shift()). bucket_starts()(c * num_buckets() + b) is where the valid elements of chunk c
  /// in bucket b start in bucket-major order (the last entry is num_valid()), bucket_local()(p)
  /// the segment of position p less its bucket's first. Empty unless built.
  Kokkos::View<const index_type*, memory_space> bucket_starts() const { return bucket_starts_; }
  Kokkos::View<const std::uint16_t*, memory_space> bucket_local() const { return bucket_local_; }
  int bucket_shift() const { return bucket_shift_; }
  index_type bucket_chunk() const { return bucket_chunk_; }
  index_type num_buckets() const { return num_buckets_; }
  /// Whether a sum whose output rows hold row_bytes each takes the bucketed schedule: buckets
  /// built, rows that fit, and the output beyond the caches (or Buckets::always). Independent of
  /// the thread count, as the order of the additions must be for the deterministic option.
  bool bucketed(index_type row_bytes) const {
    return num_buckets_ > 0 && row_bytes <= impl::kBucketRowBytes && wants_buckets(row_bytes);
  }

 private:
  /// Allocation of a view that is written whole before it is read: not cleared.
  static auto uninit(const char* label) {
    return Kokkos::view_alloc(Kokkos::WithoutInitializing, std::string(label));
  }

  void build(const ExecSpace& exec) {
    using range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<index_type>>;
    n_ = static_cast<index_type>(ids_.extent(0));
    Kokkos::Profiling::ScopedRegion region("segops::Segments");

    using Scan = impl::ScanIds<ids_view>;
    typename Scan::value_type scan{std::numeric_limits<index_type>::max(), 0, 0};
    if (n_ > 0) {
      const Scan f{ids_, n_, m_, host_backend ? impl::kIdChunk : index_type(1)};
      Kokkos::parallel_reduce("segops::Segments::scan_ids", range(exec, 0, f.chunks()), f, scan);
    }
    if (scan.n_bad > 0 && !opt_.trusted) {
      IdT bad = 0;
      Kokkos::deep_copy(exec, Kokkos::View<IdT, Kokkos::HostSpace>(&bad),
                        Kokkos::subview(ids_, scan.first_bad));
      exec.fence();
      std::ostringstream os;
      os << "segops::Segments: argument 'idx': id at position " << scan.first_bad << " is " << bad
         << ", outside [0, " << m_ << ") (" << scan.n_bad << " out-of-range ids in total)";
      throw Error(os.str());
    }
    n_valid_ = n_ - scan.n_bad;
    sorted_ = scan.n_bad == 0 && scan.n_descents == 0;

    // Every view below is written whole before it is read (counts_ is zeroed where it is counted
    // into), so none is cleared on allocation: clearing counts, offsets, tile starts and the carry
    // was a kernel and a fence each, and a write of every page (N = 1e6, M = N / 3: 6.4 MB).
    counts_ = index_view(uninit("segops::Segments::counts"), m_);
    offsets_ = index_view(uninit("segops::Segments::offsets"), m_ + 1);
    max_count_ = 0;
    if (sorted_) {
      if constexpr (host_backend) {
        const impl::SortedOffsetsLinear<ids_view, index_view> f{ids_, offsets_, n_, m_};
        Kokkos::parallel_for("segops::Segments::sorted_offsets", range(exec, 0, f.chunks()), f);
      } else
        Kokkos::parallel_for("segops::Segments::sorted_offsets", range(exec, 0, m_ + 1),
                             impl::SortedOffsets<ids_view, index_view>{ids_, offsets_, n_});
      if (m_ > 0) {
        const impl::CountsFromOffsets<index_view, index_view> f{
            offsets_, counts_, m_, host_backend ? impl::kIdChunk : index_type(1)};
        Kokkos::parallel_reduce("segops::Segments::counts", range(exec, 0, f.chunks()), f,
                                Kokkos::Max<index_type>(max_count_));
      }
    } else {
      count_ids(exec);
      if (opt_.deterministic && n_valid_ > 0 && perm_.extent(0) == 0) build_permutation(exec);
    }
    const index_type quanta = (n_valid_ + impl::kTileQuantum - 1) / impl::kTileQuantum;
    tile_first_ = index_view(uninit("segops::Segments::tile_first"), quanta + 1);
    Kokkos::parallel_for(
        "segops::Segments::tile_first", range(exec, 0, quanta + 1),
        impl::TileFirstSegments<index_view, index_view>{offsets_, tile_first_, m_});

    // The carry holds a tile's partial result only after the tile has written it (TileReduce).
    index_type cap = opt_.carry_capacity;
    if (cap <= 0) cap = host_backend ? (1 << 16) : (1 << 20);
    carry_ = Kokkos::View<double*, memory_space>(uninit("segops::Segments::carry"), cap);
    carry_idx_ = index_view(uninit("segops::Segments::carry_index"), cap);
    // Host backends, unsorted ids, default options: room for (threads - 1) output copies of rows
    // of 36 bytes (4 doubles, or a 3x3 float matrix: sums over unsorted ids give each thread its
    // own copy), unless there are more copied rows than elements (then sums take the
    // segment-owner schedule, which needs none).
    // With the deterministic option instead: 8 bytes per element, where sums of dot products
    // stage each element's value before the tiles over the permutation gather it.
    if constexpr (host_backend) {
      const index_type copies = static_cast<index_type>(exec.concurrency()) - 1;
      index_type bytes = 0;
      if (!sorted_ && !opt_.deterministic && copies > 0 && m_ > 0 && copies_fit(copies, n_valid_))
        bytes = copies * m_ * kWorkspaceRowBytes;
      if (!sorted_ && opt_.deterministic && n_valid_ > 0) bytes = n_ * kStagedElementBytes;
      // Bucketed sums: rows of kBucketRowBytes per valid element, staged in bucket order.
      if (!sorted_ && n_valid_ > 0 && opt_.buckets != Buckets::never &&
          wants_buckets(impl::kBucketRowBytes))
        build_buckets(exec);
      if (num_buckets_ > 0) bytes = std::max(bytes, n_valid_ * impl::kBucketRowBytes);
      if (bytes > 0)
        workspace_ = Kokkos::View<double*, memory_space>(uninit("segops::Segments::workspace"),
                                                         (bytes + 7) / 8);
    }
    exec.fence("segops::Segments: descriptor ready");
  }

  /// counts_, offsets_ and max_count_ from unsorted ids. Host backends where (threads - 1) copies
  /// of the M counts take no more than N (the rule of the workspace's output copies): each thread
  /// counts a slice of the positions into its own copy, without atomics (whole unsorted builds,
  /// M = N / 3, 2 threads: N = 1e6 5.8-6.2 -> 4.6-5.0 ms), and sum_counts adds the copies, writes
  /// counts and offsets and finds the largest count. Else counts_ is zeroed and takes an atomic
  /// increment per element before the scan to offsets (sum_counts of the one array on host
  /// backends, CountsScan on CUDA).
  void count_ids(const ExecSpace& exec) {
    using range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<index_type>>;
    if constexpr (host_backend) {
      const index_type parts = std::max<index_type>(1, exec.concurrency());
      if (copies_fit(parts - 1, n_)) {
        auto count = [&](auto counter) {
          using C = decltype(counter);
          using F = impl::PrivateCounts<ids_view, C>;
          // Each part's arrays on lines of their own (Kokkos aligns allocations to 64 bytes).
          constexpr index_type line = 64 / sizeof(C);  // counters per cache line
          const index_type stride = (m_ + line - 1) / line * line;
          // The deterministic option places each part's elements from its own cursors, which
          // must hold any place in a segment: one array per part.
          const bool place =
              opt_.deterministic && n_valid_ > 0 && index_type(std::numeric_limits<C>::max()) >= n_;
          const index_type lanes = place ? 1 : F::lanes_for(m_);
          Kokkos::View<C*, memory_space> copies(uninit("segops::Segments::count_copies"),
                                                parts * lanes * stride);
          Kokkos::parallel_for(
              "segops::Segments::counts",
              Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Static>,
                                  Kokkos::IndexType<index_type>>(exec, 0, parts),
              F{ids_, copies.data(), n_, m_, stride, parts, lanes, n_valid_ == n_});
          sum_counts(exec, copies.data(), stride, parts * lanes, place);
          if (place) permute_by_part(exec, copies.data(), stride, parts);
        };
        if (n_ / parts < std::numeric_limits<std::uint32_t>::max())
          count(std::uint32_t{});
        else
          count(index_type{});
        return;
      }
    }
    Kokkos::deep_copy(exec, counts_, index_type(0));
    Kokkos::parallel_for("segops::Segments::counts", range(exec, 0, n_),
                         impl::CountIds<ids_view, index_view>{ids_, counts_, m_});
    if constexpr (host_backend) {
      sum_counts(exec, counts_.data(), m_, 1, false);  // one array: counts_ is rewritten as it is
    } else {
      using F = impl::CountsScan<index_view, index_view>;
      typename F::value_type total{0, 0};
      Kokkos::parallel_scan("segops::Segments::offsets", range(exec, 0, m_ + 1),
                            F{counts_, offsets_, m_}, total);
      max_count_ = total.max;
    }
  }

  /// Host backends: counts_ = the sum of the `parts` arrays of M counters at `copies`, `stride`
  /// apart, offsets_ its exclusive prefix sum, max_count_ its largest (CountsBlockScan; with
  /// `cursors`, each part's counts become its first places within the segments, for PermByPart).
  template <class C>
  void sum_counts(const ExecSpace& exec, C* copies, index_type stride, index_type parts,
                  bool cursors) {
    using F = impl::CountsBlockScan<index_view, index_view, C>;
    std::vector<index_type> blocks(2 * ((m_ + impl::kIdChunk - 1) / impl::kIdChunk));
    const F f{copies, counts_, offsets_, blocks.data(), m_, stride, parts, cursors};
    Kokkos::parallel_for(
        "segops::Segments::counts_sum",
        Kokkos::RangePolicy<ExecSpace, typename F::SumTag, Kokkos::IndexType<index_type>>(exec, 0,
                                                                                          f.size()),
        f);
    exec.fence("segops::Segments: block sums");
    index_type p = 0;
    for (index_type b = 0; b < f.size(); ++b) {
      const index_type sum = blocks[2 * b];
      blocks[2 * b] = p;
      p += sum;
      max_count_ = std::max(max_count_, blocks[2 * b + 1]);
    }
    if (m_ == 0) offsets_(0) = 0;
    Kokkos::parallel_for(
        "segops::Segments::offsets",
        Kokkos::RangePolicy<ExecSpace, typename F::OffsetTag, Kokkos::IndexType<index_type>>(
            exec, 0, f.size()),
        f);
    exec.fence("segops::Segments: offsets");  // blocks lives on this stack
  }

  /// The deterministic option's stable permutation on host backends after per-thread counting:
  /// each thread places the elements it counted (PermByPart), then the dropped ids, if any, fill
  /// the end in element order (one serial pass; trusted descriptors only). Whole deterministic
  /// builds of unsorted ids, N = 1e6, M = N / 3, 2 threads (PermByOwner before, fastest of 41,
  /// 3 interleaved runs): 10.3-12.6 -> 5.5-5.8 ms, without the buckets 8.3-8.4 -> 3.4-3.8 ms.
  template <class C>
  void permute_by_part(const ExecSpace& exec, C* cursors, index_type stride, index_type parts) {
    perm_ = index_view(uninit("segops::Segments::permutation"), n_);
    Kokkos::parallel_for("segops::Segments::perm",
                         Kokkos::RangePolicy<ExecSpace, Kokkos::Schedule<Kokkos::Static>,
                                             Kokkos::IndexType<index_type>>(exec, 0, parts),
                         impl::PermByPart<ids_view, index_view, C, index_view>{
                             ids_, offsets_, cursors, perm_, n_, m_, stride, parts});
    if (n_valid_ < n_) {
      exec.fence("segops::Segments: permutation of the valid ids");
      index_type j = n_valid_;
      for (index_type i = 0; i < n_; ++i) {
        const index_type s = static_cast<index_type>(ids_(i));
        if (s < 0 || s >= m_) perm_(j++) = i;
      }
    }
  }

  /// The deterministic option's stable permutation: host backends count-sort by segment (O(N + M),
  /// PermByOwner); CUDA sorts keys id * N + i with Kokkos::sort.
  void build_permutation(const ExecSpace& exec) {
    using range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<index_type>>;
    perm_ = index_view(uninit("segops::Segments::permutation"), n_);
    if constexpr (host_backend) {
      index_view cursor(uninit("segops::Segments::perm_cursor"), m_ + 1);
      Kokkos::deep_copy(exec, cursor, offsets_);
      const index_type parts =
          std::min<index_type>(kPermParts, std::max<index_type>(1, exec.concurrency()));
      Kokkos::parallel_for(
          "segops::Segments::perm", range(exec, 0, parts),
          impl::PermByOwner<ids_view, index_view, index_view>{ids_, cursor, perm_, n_, m_, parts});
    } else {
      if (n_ > 0 && m_ + 1 > std::numeric_limits<index_type>::max() / n_)
        impl::fail("Segments", "idx",
                   "number of elements too large for the deterministic option with this M "
                   "((M + 1) * N must fit in int64); largest allowed",
                   std::numeric_limits<index_type>::max() / (m_ + 1), n_);
      Kokkos::parallel_for("segops::Segments::perm_keys", range(exec, 0, n_),
                           impl::PermKeys<ids_view, index_view>{ids_, perm_, n_, m_});
      Kokkos::sort(exec, perm_);
      Kokkos::parallel_for("segops::Segments::perm", range(exec, 0, n_),
                           impl::KeysToPerm<index_view>{perm_, n_});
    }
  }

  /// Host backends: the bucket layout of BucketReduce (see bucket_starts()). Slices of
  /// 2^kBucketMinShift segments, larger only to keep at most kMaxBuckets buckets (none where
  /// slices of 2^kBucketMaxShift would not). The layout depends on N and M only.
  void build_buckets(const ExecSpace& exec) {
    using range = Kokkos::RangePolicy<ExecSpace, Kokkos::IndexType<index_type>>;
    int shift = impl::kBucketMinShift;
    while (shift < impl::kBucketMaxShift && ((m_ - 1) >> shift) + 1 > impl::kMaxBuckets) ++shift;
    const index_type nb = ((m_ - 1) >> shift) + 1;
    if (nb > impl::kMaxBuckets) return;
    const index_type q = impl::kTileQuantum;
    const index_type chunk = ((n_ + impl::kBucketChunks - 1) / impl::kBucketChunks + q - 1) / q * q;
    const index_type nc = (n_ + chunk - 1) / chunk;
    index_view starts("segops::Segments::bucket_starts", nc * nb + 1);
    Kokkos::parallel_for(
        "segops::Segments::bucket_counts", range(exec, 0, nc),
        impl::BucketCounts<ids_view, index_view>{ids_, starts, n_, m_, chunk, nb, shift});
    exec.fence("segops::Segments: bucket counts");
    index_type p = 0;  // exclusive scan in bucket-major order (host memory)
    for (index_type b = 0; b < nb; ++b)
      for (index_type c = 0; c < nc; ++c) {
        const index_type k = c * nb + b, count = starts(k);
        starts(k) = p;
        p += count;
      }
    starts(nc * nb) = p;
    index_view cursor(uninit("segops::Segments::bucket_cursor"), nc * nb);
    Kokkos::deep_copy(exec, cursor,
                      Kokkos::subview(starts, std::make_pair(index_type(0), nc * nb)));
    bucket_local_ = Kokkos::View<std::uint16_t*, memory_space>(
        uninit("segops::Segments::bucket_local"), n_valid_);
    Kokkos::parallel_for("segops::Segments::bucket_local", range(exec, 0, nc),
                         impl::BucketLocal<ids_view, index_view, decltype(bucket_local_)>{
                             ids_, cursor, bucket_local_, n_, m_, chunk, nb, shift});
    bucket_starts_ = starts;
    bucket_shift_ = shift;
    bucket_chunk_ = chunk;
    num_buckets_ = nb;
  }

  /// The rule of host backends' per-thread copies over unsorted ids: `copies` extra copies of M
  /// rows (the counts; the output rows of sums, in the workspace) are worth their memory and
  /// their combine pass where they hold no more rows than there are elements, `n`.
  bool copies_fit(index_type copies, index_type n) const { return copies <= 0 || m_ <= n / copies; }

  /// Whether the buckets option asks for the bucketed schedule for sums with output rows of
  /// row_bytes: always, or (automatic) where the output would exceed kBucketOutputBytes
  /// (kBucketOutputBytesDeterministic with the deterministic option).
  bool wants_buckets(index_type row_bytes) const {
    const index_type beyond =
        opt_.deterministic ? impl::kBucketOutputBytesDeterministic : impl::kBucketOutputBytes;
    return opt_.buckets == Buckets::always ||
           (opt_.buckets == Buckets::automatic && m_ * row_bytes > beyond);
  }

  static constexpr bool host_backend =
      Kokkos::SpaceAccessibility<ExecSpace, Kokkos::HostSpace>::accessible;
  /// Owners of the host permutation's counting sort: each reads all N ids, so a few.
  static constexpr index_type kPermParts = 8;
  static constexpr index_type kWorkspaceRowBytes = 36;  // per segment and output copy
  static constexpr index_type kStagedElementBytes = 8;  // per element (deterministic option)
  ids_view ids_;
  index_type n_ = 0, m_ = 0, n_valid_ = 0, max_count_ = 0;
  SegmentsOptions opt_;
  bool sorted_ = true;
  index_view counts_, offsets_, perm_, tile_first_;
  Kokkos::View<double*, memory_space> carry_;
  index_view carry_idx_;
  Kokkos::View<double*, memory_space> workspace_;
  index_view bucket_starts_;
  Kokkos::View<std::uint16_t*, memory_space> bucket_local_;
  int bucket_shift_ = 0;
  index_type bucket_chunk_ = 0, num_buckets_ = 0;
};

template <class T>
inline constexpr bool is_segments_v = false;
template <class IdT, class ExecSpace>
inline constexpr bool is_segments_v<Segments<IdT, ExecSpace>> = true;

/// Defines NAME(seg, args...) running on a default-constructed instance of the descriptor's space.
#define SEGOPS_DEFAULT_EXEC_OVERLOAD(NAME)               \
  template <class Seg, class... Args>                    \
  requires ::segops::is_segments_v<Seg>                  \
  void NAME(const Seg& seg, const Args&... args) {       \
    NAME(typename Seg::execution_space{}, seg, args...); \
  }

/// Constrains an op's first two parameters to an execution-space instance and a descriptor.
#define SEGOPS_REQUIRES_EXEC(Exec, Seg) \
  requires Kokkos::is_execution_space_v<Exec> && ::segops::is_segments_v<Seg>
#define SEGOPS_CHECK_EXEC(OP, Exec, Seg)                             \
  static_assert(std::is_same_v<Exec, typename Seg::execution_space>, \
                "segops::" OP                                        \
                ": the execution space instance must be of the descriptor's execution space")

template <class IdView>
Segments(const IdView&, std::int64_t, SegmentsOptions = {})
    -> Segments<typename IdView::non_const_value_type, typename IdView::execution_space>;
template <class ExecSpace, class IdView>
requires Kokkos::is_execution_space_v<ExecSpace> Segments(const ExecSpace&, const IdView&,
                                                          std::int64_t, SegmentsOptions = {})
->Segments<typename IdView::non_const_value_type, ExecSpace>;

}  // namespace segops
