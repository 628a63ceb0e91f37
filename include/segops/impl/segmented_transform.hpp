// SPDX-License-Identifier: Apache-2.0
// The per-element building block: out_i = f(i, s(i)) for every element, with s = -1 for a dropped
// (out-of-range, trusted) id so that f writes zeros there.
#pragma once

#include <Kokkos_Core.hpp>
#include <segops/impl/host_vectors.hpp>
#include <segops/impl/views.hpp>

namespace segops::impl {

/// F names the per-segment inputs it reads (segment_rows, below).
template <class F>
concept NamesSegmentRows = requires(const F& f) {
  f.segment_rows([](const auto&...) {});
};

/// Elements in blocks of Block: on host backends each call runs one block with the functor and the
/// id accessor copied into locals, so their fields stay in registers across the loop (a per-element
/// call reloads them after every store through an output pointer). On GPUs a block is one element.
///
/// A functor that reads per-segment inputs names them with segment_rows(f), calling f(views...)
/// (Mat, Mat3 or Kokkos Views, one row per segment). With unsorted ids, where those rows outgrow
/// the cache, the host loop prefetches the segment of the element kAhead positions on: the rows are
/// read at random, and a functor of a few dozen instructions per element leaves too few misses in
/// flight on its own (unsorted, rows of 3 floats, L = 3, 2 threads: matvec N = 1e6 2.7-5.6 ->
/// 1.8 ms, N = 2^25 478 -> 131 ms; mul N = 2^25 174 -> 67 ms; broadcast N = 2^25 153 -> 116 ms).

/// F's per-element call computes costly per-segment coefficients (divisions, square roots), and
/// F names them: coeffs(s) returns those of segment s, apply(i, s, c) writes element i from them
/// (operator()(i, s) is apply(i, s, coeffs(s))), packed_apply<W>(i, s, c) likewise where
/// packed_width() == W, and applied_rows(f) names the per-segment inputs apply reads besides c
/// (as segment_rows does). ElementTransform then computes them once per segment: for sorted ids
/// per block, for unsorted ids in a pass over the segments before the elements.
template <class F>
concept StagesCoefficients = NamesSegmentRows<F> && requires(const F& f) {
  f.apply(index_t(0), index_t(0), f.coeffs(index_t(0)));
  f.applied_rows([](const auto&...) {});
};

/// A StagesCoefficients functor whose coefficients are per-segment inputs read (times constants),
/// not computed (F::kReadsCoefficients): staging them pays only where an element would read
/// several of those inputs at random (unsorted ids); a sorted block reads them in order anyway,
/// and takes them into its local array only where block_reads says so.
template <class F>
concept ReadsCoefficients = StagesCoefficients<F> && F::kReadsCoefficients;

/// How many terms (an element row times a coefficient) F's apply adds per element, where F says
/// (F::kTerms: the bilinear family's Combinations), else 0.
template <class F>
constexpr int terms_of() {
  if constexpr (requires { F::kTerms; })
    return F::kTerms;
  else
    return 0;
}
template <class F>
inline constexpr int terms_v = terms_of<F>();

/// Sorted ids, short segments: whether ElementTransform::rows takes coefficients only read
/// (ReadsCoefficients) into the block's local array too, as it does those computed at a cost:
/// where elements are single values (W = 1) and compute three terms or more, or rows of 3 floats
/// and more than four terms. Read per element instead, each scaled by its term's constant, they
/// cost more than the element's own work there: the functor's fields are reloaded past every
/// store (they may alias). The ops before and after, called alternately in one process (the old
/// headers compiled in a namespace of their own), N = 1e6, L = 3, 2 threads, median new/old of
/// 200-300 pairs, for axpby_double_backward (6 terms), axpy_double_backward (4),
/// mul_double_backward (3), inner_products_backward (4) and its double backward (4): single
/// floats 0.73-0.76, 0.80-0.90, 0.73-0.77, 0.66-0.71, 0.82-0.85 (three runs); single doubles
/// 0.86, 0.88 and 1.03, 0.94, 0.89, 0.96; N = 2^25, single floats 0.76, 0.92, 0.69, 0.71, 0.82;
/// rows of 3 floats (3-4 runs) 0.87-0.93 for axpby_double_backward, but 0.97-1.09, 0.98-1.07,
/// 0.81-0.98, 0.91-1.02 for the others (slower where this VM's cores ran undisturbed); rows of 3
/// doubles 0.98, 1.06, 1.06, 1.02, 1.02. Fewer terms did not pay (single floats: axpby, two
/// terms, 1.05-1.09: its constants stayed in registers).
template <class F, int W>
constexpr bool block_reads() {
  if constexpr (!ReadsCoefficients<F>)
    return false;
  else if constexpr (W == 1)
    return terms_v<F> >= 3;
  else
    return W == 3 && sizeof(typename F::value_type) == 4 && terms_v<F> > 4;
}
template <class F, int W>
inline constexpr bool block_reads_v = block_reads<F, W>();

/// The coefficients of a StagesCoefficients functor (a placeholder type for the others).
template <class F>
struct coeffs_of {
  using type = char;
};
template <StagesCoefficients F>
struct coeffs_of<F> {
  using type = std::remove_cvref_t<decltype(std::declval<const F&>().coeffs(index_t(0)))>;
};

/// f.packed_apply<W>(i, s, c), or f.apply(i, s, c) for W = 0 (a template, instantiated only for
/// functors that stage coefficients).
template <int W, class F, class C>
KOKKOS_FORCEINLINE_FUNCTION void apply_coeffs(const F& f, index_t i, index_t s, const C& c) {
  if constexpr (W == 0)
    f.apply(i, s, c);
  else
    f.template packed_apply<W>(i, s, c);
}

/// Functors that write four elements of packed rows of width W at once (packed_quad, host
/// vectors), and the call, as ElementTransform's rows take it. Not a lambda in ElementTransform's
/// generic lambda: nvcc compiled that lambda's body for functors without packed_quad too (in the
/// branch an `if constexpr` discards), so host ops (Serial, OpenMP) did not compile in CUDA builds.
template <class F, int W>
concept PacksQuads = requires(const F& f, index_t i, const index_t (&q)[4]) {
  f.template packed_quad<W>(i, q);
};
template <class F, int W>
struct PackedQuad {
  const F* f;
  KOKKOS_FORCEINLINE_FUNCTION bool operator()(index_t i, const index_t (&q)[4]) const {
    return f->template packed_quad<W>(i, q);
  }
};

template <class Exec>
inline constexpr index_t element_block_v =
    Kokkos::SpaceAccessibility<Exec, Kokkos::HostSpace>::accessible ? kTileQuantum : 1;

#ifdef SEGOPS_HOST_VECTORS
/// Values past a segment's end that vector_segment may write: the default Spill (rows of 1).
inline constexpr index_t kVectorSpill = 8;
/// Values [b, e) of segment s (element i's packed row of W at positions i W .. i W + W - 1) of a
/// functor with vector runs (F::kVectorRuns), as whole vectors V from b on, the coefficients
/// splat once (vector_coeffs): Spill / lanes vectors where the segment has up to Spill values (a
/// fixed count, no loop exit to mispredict), else a loop of them. Writes positions [b, e + Spill)
/// at most: those past e hold values of no meaning until the segments after s are written
/// (ElementTransform's segment_vectors). Exact (e - b at least a vector's lanes): [b, e) only,
/// the last vector ending at e. AllSegment: every coefficient is a per-segment value
/// (F::segment_coeffs()), so that none is tested per segment.
template <class V, bool AllSegment, index_t Spill = kVectorSpill, bool Exact = false, class F>
SEGOPS_WIDE_INLINE void vector_segment(const F& fl, index_t s, index_t b, index_t e) {
  constexpr index_t lanes = index_t(sizeof(V) / sizeof(typename F::value_type));
  constexpr int NV = int(Spill / lanes);
  typename F::template Splat<V> kv;
  fl.template vector_coeffs<AllSegment>(s, kv);
  auto at = [&](index_t i) SEGOPS_INLINE {
    typename F::template Values<V> r;
    fl.vector_values(i, kv, r);
    fl.vector_store(i, r);
  };
  if constexpr (Exact) {  // e - b >= lanes
    for (; b + lanes < e; b += lanes) at(b);
    at(e - lanes);  // the last vector ends at e (over values of this segment written already)
  } else if (e - b <= Spill) {
    for (int q = 0; q < NV; ++q) at(b + q * lanes);
  } else {
    for (index_t i = b; i < e; i += lanes) at(i);
  }
}
#endif

template <class F, class IdT, class Offsets, index_t Block, bool Staged = false>
struct ElementTransform {
  F f;
  const IdT* ids;
  index_t stride, n, m;
  /// Sorted ids (host blocks): a block whose segments average kRunMin elements or more is walked
  /// segment by segment, each a loop with a constant segment (its per-segment values loaded and
  /// its divisions done once, the loop free to vectorise). Empty views otherwise.
  Offsets offsets, tile_first;
  bool ahead;  // prefetch the per-segment rows of the element kAhead positions on
  bool far;    // they are beyond the last-level cache too: no loop of four elements at a time
  /// Staged (unsorted ids, functors that stage coefficients, host backends): each segment's,
  /// computed by StageSegmentCoefficients into the descriptor's workspace. A kernel of its own:
  /// with both element loops in one, the unstaged one ran 15% slower (mul, unsorted N = 1e6).
  using Coeffs = typename coeffs_of<F>::type;
  const Coeffs* staged;
  static constexpr index_t kRunMin = 16;

  KOKKOS_FUNCTION SEGOPS_FLATTEN void operator()(index_t blk) const {
    const F fl = f;
    // h(i, s, c): element i from segment s's coefficients c (called only for StagesCoefficients)
    if constexpr (Block > 1 && requires { fl.packed_width(); }) {
      if (with_packed_width(fl.packed_width(), [&](auto w) {
            constexpr int W = decltype(w)::value;
            if constexpr (Block == kTileQuantum && !Staged &&
                          requires { fl.template packed_run<W>(index_t(0), index_t(0), 0); })
              if (segment_runs<W>(blk, fl)) return;
            if constexpr (Block == kTileQuantum && !Staged && requires { requires F::kVectorRuns; })
              if (segment_vectors<W>(blk, fl)) return;
            if constexpr (Block == kTileQuantum && !Staged && W == 1 &&
                          requires { fl.segment_value(index_t(0)); })
              if (segment_values(blk, fl)) return;
            auto each = [&](index_t i, index_t s) SEGOPS_INLINE { fl.template packed<W>(i, s); };
            auto staged = [&](index_t i, index_t s, const auto& c)
                              SEGOPS_INLINE { apply_coeffs<W>(fl, i, s, c); };
            if constexpr (PacksQuads<F, W>)
              rows<W>(blk, fl, each, staged, PackedQuad<F, W>{&fl});
            else
              rows<W>(blk, fl, each, staged, NoQuad{});
          }))
        return;
    }
    rows<0>(
        blk, fl, fl,
        [&](index_t i, index_t s, const auto& c) SEGOPS_INLINE { apply_coeffs<0>(fl, i, s, c); },
        NoQuad{});
  }
  /// Sorted ids, host blocks: the segment holding the block's first element lo where the block's
  /// segments average kRunMin elements or more (the block is then walked segment by segment),
  /// else -1.
  KOKKOS_FORCEINLINE_FUNCTION index_t run_start(index_t blk, index_t lo, index_t hi) const {
    if (offsets.extent(0) == 0) return -1;
    const index_t s = tile_first(blk);  // first segment starting at lo or later
    if ((hi - lo) < kRunMin * (tile_first(blk + 1) - s + 1)) return -1;
    return offsets(s) > lo ? s - 1 : s;
  }
  /// Where run_start: each segment's elements of the block at once, by a functor that offers
  /// packed_run<W>(b, e, s) (a gather of one row per segment, say), and true. A function of its
  /// own, so that operator()'s per-element loops are compiled as without it. (Their speed still
  /// depends on where they land: broadcast of single floats, N = 1e6, L = 3, 1 thread, ran 0.30
  /// or 0.38 ms with the same instructions at another address, 0.49 ms with -falign-loops=64;
  /// of the placements tried, this one cost the least.)
  template <int W>
  SEGOPS_NOINLINE KOKKOS_FUNCTION bool segment_runs(index_t blk, const F& fl) const {
    const index_t lo = blk * Block, hi = Kokkos::min(n, lo + Block);
    index_t s = run_start(blk, lo, hi);
    if (s < 0) return false;
    for (index_t b = lo; b < hi; ++s) {
      const index_t e = Kokkos::min(offsets(s + 1), hi);
      if (e > b) fl.template packed_run<W>(b, e, s);
      b = e;
    }
    return true;
  }
  /// Sorted ids: the segment of element lo and the number of segments from it to that of
  /// element hi - 1.
  struct SegmentSpan {
    index_t s0, ns;
  };
  KOKKOS_FORCEINLINE_FUNCTION SegmentSpan block_segments(index_t lo, index_t hi) const {
    const index_t s0 = static_cast<index_t>(ids[lo * stride]);
    return {s0, static_cast<index_t>(ids[(hi - 1) * stride]) - s0 + 1};
  }
  /// Sorted ids, single values that are one value per segment computed at a cost (a mean's
  /// gradient: a division), from a functor with segment_values4(s, x) (segments s .. s + 3),
  /// segment_value(s) and out_ptr(), in blocks of short segments: the block's segment values
  /// first, into a local array (four divisions at a time), then each element copies its own.
  /// The same values as before (a local array of each segment's factor, which every element
  /// read along with its segment's row, a load and a multiply more per element). mean_backward,
  /// single floats, 2 threads, against a plain loop dividing per element in the same process:
  /// N = 1e6, L = 3 0.53-0.56 -> 0.30-0.32 ms (the loop 0.36-0.42), L = 1 1.01-1.09 -> 0.41-0.43
  /// ms (0.38-0.49); N = 2^25, L = 3 1.1-1.6x the loop -> 0.7-1.4x (noisy). False where the ids
  /// are not sorted or the block's ids span more than Block segments (empty ones between them).
  template <class FF>
  SEGOPS_NOINLINE KOKKOS_FUNCTION bool segment_values(index_t blk, const FF& fl) const {
    if (offsets.extent(0) == 0) return false;
    using T = std::remove_pointer_t<decltype(fl.out_ptr())>;
    const IdT* id = ids;
    const index_t st = stride, lo = blk * Block, hi = Kokkos::min(n, lo + Block);
    const SegmentSpan span = block_segments(lo, hi);
    const index_t s0 = span.s0, ns = span.ns;  // (s0 is captured below: no structured binding)
    if (ns > Block) return false;
    T d[Block];
    index_t k = 0;
    for (; k + 4 <= ns; k += 4) {
      T x[4];
      fl.segment_values4(s0 + k, x);
      for (int j = 0; j < 4; ++j) d[k + j] = x[j];
    }
    for (; k < ns; ++k) d[k] = fl.segment_value(s0 + k);
    T* const o = fl.out_ptr();
    auto copy = [&](auto unit) SEGOPS_INLINE {
      for (index_t i = lo; i < hi; ++i)
        o[i] = d[static_cast<index_t>(id[decltype(unit)::value ? i : i * st]) - s0];
    };
    if (st == 1)
      copy(std::true_type{});
    else
      copy(std::false_type{});
    return true;
  }
  /// Sorted ids, single values or packed rows of 3 (W), a functor of vector runs (F::kVectorRuns:
  /// Combinations of values of one type, each coefficient one value per segment, so that a
  /// segment's rows are one run of values), in blocks whose segments average 2.5 elements or
  /// more: offsets, not ids, are read, and each segment of the block is written as whole vectors
  /// from its first value on, its coefficients splat once (vector_coeffs): a fixed count of
  /// vectors where it has up to 8 values (rows of 1) or 16 (rows of 3), no loop exit to
  /// mispredict, else a loop of them. The lanes past a segment's end are written too and then
  /// rewritten by the segments after it, in order (the ops check that no output aliases an input,
  /// so none of them is read after it is written). The block's last segments, whose vectors would
  /// pass its end (another work item's elements), are written by vectors of which the last ends
  /// at the segment's end (or the block's) where they have a vector's worth of values, else
  /// element by element. The same operations per value (the same bits). On a baseline x86-64 build
  /// the loop is compiled a second time for AVX2, 32-byte vectors, and taken where the CPU has it
  /// (as TileReduce::batch_loops). Against the element loop, scripts/ab.sh, L = 3, single values, 2
  /// threads, a Zen 5 VM (both sides built with 64-byte aligned functions, loops and jumps: this
  /// loop's time moved 0.8-1.3x with its placement otherwise): floats N = 1e6 mul 0.90,
  /// mul_backward 0.93, dot_backward 0.81, axpby 0.96, axpy_backward 0.98, axpby_backward 0.92,
  /// mul_double_backward 0.77, inner_products_backward 0.65; N = 2^25 mul 0.96, mul_backward 0.95,
  /// dot_backward 0.97, mul_double_backward 0.82; doubles N = 1e6 0.82-0.88 for dot_backward,
  /// mul_double_backward and inner_products_backward, 0.98-1.03 for the others. (Splat by a lane
  /// loop, not a broadcast, made dot_backward 1.4x slower.) Those runs had L = 3 only: blocks of
  /// shorter segments lost, single floats L = 1, N = 1e6, 1.03-2.55 for the same ops, 0.76-1.31 at
  /// L = 2, whence the 2.5. Gated so, against that ungated loop (mul, mul_backward, dot_backward,
  /// axpby, inner_products_backward, mul_double_backward, axpy_backward): single floats L = 1, N =
  /// 1e6 0.41-0.95, 2^25 0.64-0.99; doubles 0.56-0.94; L = 3 0.92-1.03. Rows of 3 (16 values in the
  /// fixed count: with 8 mul took 2.2x the element loop's time, with 24 no better than 16), against
  /// the loop of four elements (packed_quad) and the element loop: floats L = 3, N = 1e6 0.54-0.99
  /// (axpby 0.69, inner_products_backward 0.54), 2^25 0.85-1.01; L = 30 0.71-1.01; L = 1 (not
  /// taken) 0.97-1.01; doubles L = 3 0.91-1.00. At L = 1000 most blocks end inside a segment:
  /// that part went element by element at first (rows of 3, N = 1e6: 0.98-1.28 against the old
  /// loops), in vectors ending at the block's end 0.90-0.99 (2^25 0.99-1.03); single floats
  /// N = 1e6 0.47 (inner_products_backward), 0.71 (mul_double_backward), 0.98-1.11 for the rest,
  /// 2^25 0.87-1.01.
  template <int W, class FF>
  KOKKOS_FUNCTION bool segment_vectors(index_t blk, const FF& fl) const {
#ifndef SEGOPS_HOST_VECTORS
    (void)blk;
    (void)fl;
    return false;  // (no caller: F::kVectorRuns is declared with host vectors only)
#else
    if (offsets.extent(0) == 0) return false;
    // blocks whose segments average fewer than 2.5 elements: the element loop
    const index_t lo = blk * Block, hi = Kokkos::min(n, lo + Block);
    if (2 * (hi - lo) < 5 * (tile_first(blk + 1) - tile_first(blk))) return false;
#ifdef SEGOPS_WIDE_DISPATCH
    if (host_has_avx2()) return segment_vectors_wide<W>(blk, fl);
#endif
#if defined(SEGOPS_HOST_WIDE) && defined(__AVX2__)
    vector_block<typename HostWide<typename FF::value_type>::type, W>(blk, fl);
#else
    vector_block<typename HostVec<typename FF::value_type>::type, W>(blk, fl);
#endif
    return true;
#endif
  }
#ifdef SEGOPS_HOST_VECTORS
#ifdef SEGOPS_WIDE_DISPATCH
  template <int W, class FF>
  SEGOPS_NOINLINE SEGOPS_WIDE_TARGET bool segment_vectors_wide(index_t blk, const FF& fl) const {
    vector_block<typename HostWide<typename FF::value_type>::type, W>(blk, fl);
    return true;
  }
#endif
  template <class V, int W, class FF>
  SEGOPS_WIDE_INLINE void vector_block(index_t blk, const FF& fl) const {
    // one loop where every coefficient is a per-segment value (no test per segment), one for the
    // others
    if (fl.segment_coeffs())
      vector_loop<V, W, true>(blk, fl);
    else
      vector_loop<V, W, false>(blk, fl);
  }
  template <class V, int W, bool AllSegment, class FF>
  SEGOPS_WIDE_INLINE void vector_loop(index_t blk, const FF& f_in) const {
    const FF fl = f_in;  // a local: its fields stay in registers across the stores
    const Offsets off = offsets;
    const index_t lo = blk * Block, hi = Kokkos::min(n, lo + Block);
    index_t s = tile_first(blk);
    if (off(s) > lo) --s;  // the segment that started before the block
    index_t b = lo;
    // segments ending Spill values or more before the block's end: all they write lies in it
    // (positions of values: element times W)
    constexpr index_t Spill = W == 1 ? kVectorSpill : 2 * kVectorSpill;
    for (index_t e; (e = off(s + 1)) * W + Spill <= hi * W; ++s) {
      vector_segment<V, AllSegment, Spill>(fl, s, b * W, e * W);
      b = e;
    }
    // the rest: vectors that end at the segment's end or the block's where they hold a vector,
    // else element by element
    constexpr index_t lanes = index_t(sizeof(V) / sizeof(typename FF::value_type));
    for (; b < hi; ++s) {
      const index_t e = Kokkos::min(off(s + 1), hi);
      if ((e - b) * W >= lanes)
        vector_segment<V, AllSegment, Spill, true>(fl, s, b * W, e * W);
      else
        for (index_t i = b; i < e; ++i) fl.template packed<W>(i, s);
      b = e;
    }
  }
#endif
  /// Where a functor writes four consecutive elements at once (quad(i, s), below): none.
  struct NoQuad {};
  /// g(i, s(i)) over the block, s = -1 for a dropped id (fl: the functor, for its segment rows;
  /// h: g with the segment's coefficients given; quad(i, s): elements i .. i + 3 of segments
  /// s[0 .. 4) in range, or false where it cannot (nothing written), unless NoQuad; W: the packed
  /// width of the rows g writes, 0 for rows of any width).
  template <int W, class G, class H, class Q>
  KOKKOS_FORCEINLINE_FUNCTION void rows(index_t blk, const F& fl, const G& g, const H& h,
                                        const Q& quad) const {
    const IdT* id = ids;
    const index_t st = stride, mm = m, lo = blk * Block, hi = Kokkos::min(n, lo + Block);
    const bool far_rows = far;
    if constexpr (Block == kTileQuantum && !Staged) {
      if (offsets.extent(0) > 0) {
        if (index_t s = run_start(blk, lo, hi); s >= 0) {
          for (index_t b = lo; b < hi; ++s) {
            const index_t e = Kokkos::min(offsets(s + 1), hi);
            // Functors that name their coefficients get them once per segment, in registers: the
            // compiler cannot keep what g(i, s) reloads past the stores (they may alias), nor
            // vectorise a loop that reloads it (dot_backward, 2^25 single floats, L = 1000).
            if constexpr (StagesCoefficients<F>) {
              if (s >= 0 && e > b) {
                const Coeffs c = fl.coeffs(s);
                for (index_t i = b; i < e; ++i) h(i, s, c);
                b = e;
                continue;
              }
            }
            for (index_t i = b; i < e; ++i) g(i, s);
            b = e;
          }
          return;
        }
        // Short segments: each segment's coefficients computed once into a local array, which
        // the elements then read. Where they cost divisions or square roots (L = 3, 2^25
        // elements of 1 float, 2 threads: mean_backward 11.4 -> 9.8 ms, rms_norm_backward
        // 13.7-15.0 -> 12.1 ms; rows of 3 floats are bound by memory either way), and where they
        // are only read (block_reads). Not for functors that go four elements at a time (quad),
        // which would give that up.
        constexpr bool kLocal =
            StagesCoefficients<F> && (!ReadsCoefficients<F> || block_reads_v<F, W>);
        if constexpr (kLocal && std::is_same_v<Q, NoQuad>) {
          if (const auto [s0, ns] = block_segments(lo, hi); ns <= Block) {
            Coeffs c[Block];
            for (index_t k = 0; k < ns; ++k) c[k] = fl.coeffs(s0 + k);
            for (index_t i = lo; i < hi; ++i) {
              const index_t t = static_cast<index_t>(id[i * st]);
              h(i, t, c[t - s0]);
            }
            return;
          }
        }
      }
    }
    // Sorted ids (offsets given: host blocks) are all in range (Segments::sorted excludes dropped
    // ids), so the elements go without the range check, and the functor's test for a dropped
    // element (s < 0) folds away.
    const bool in_range = offsets.extent(0) > 0;
    // each(i, s) writes element i; ahead_rows(t), where prefetching, prefetches what segment t's
    // elements will read.
    auto elements = [&](const auto& each, const auto& ahead_rows, auto prefetches, const auto& q4) {
      auto run = [&](auto unit, auto prefetching, auto valid) {
        auto id_at = [&](index_t i) SEGOPS_INLINE {
          return static_cast<index_t>(id[decltype(unit)::value ? i : i * st]);
        };
        auto checked = [&](index_t s) SEGOPS_INLINE {  // s, or -1 for a dropped id
          if constexpr (decltype(valid)::value) {
            if (s < 0 || s >= mm) SEGOPS_UNREACHABLE();
            return s;
          } else {
            return s >= 0 && s < mm ? s : index_t(-1);
          }
        };
        auto ahead_of = [&](index_t i) SEGOPS_INLINE {
          if constexpr (decltype(prefetching)::value) {
            if (i + kAhead < hi) {
              const index_t t = id_at(i + kAhead);
              ahead_rows(t >= 0 && t < mm ? t : 0);
            }
          }
        };
        index_t i = lo;
        if constexpr (!std::is_same_v<std::remove_cvref_t<decltype(q4)>, NoQuad>) {
          if (!far_rows)
            for (; i + 4 <= hi; i += 4) {
              index_t s[4];
              for (int k = 0; k < 4; ++k) s[k] = id_at(i + k);
              if (!q4(i, s))
                for (int k = 0; k < 4; ++k) each(i + k, checked(s[k]));
            }
        }
        for (; i < hi; ++i) {
          ahead_of(i);
          each(i, checked(id_at(i)));
        }
      };
      auto ids_run = [&](auto prefetching) {
        if constexpr (Block == kTileQuantum && !Staged && !decltype(prefetching)::value &&
                      std::is_same_v<std::remove_cvref_t<decltype(q4)>, NoQuad>)
          if (in_range && st == 1) return run(std::true_type{}, prefetching, std::true_type{});
        if (st == 1)  // contiguous ids (the usual case): no stride multiply in the loop
          run(std::true_type{}, prefetching, std::false_type{});
        else
          run(std::false_type{}, prefetching, std::false_type{});
      };
      if constexpr (Block > 1 && kPrefetches && decltype(prefetches)::value)
        if (ahead) return ids_run(std::true_type{});
      ids_run(std::false_type{});
    };
    if constexpr (Staged) {
      // Unsorted ids: each segment's coefficients computed before, read per element and
      // prefetched kAhead elements on. (A chunk's coefficients gathered into a local array
      // first, then its elements computed, had paid for four terms or more when 7809b93 added
      // it. On a 2-vCPU Zen 5 it cost more; without it against with it, scripts/ab.sh, rows of 3
      // floats, L = 3, 2 threads: N = 1e6 axpy_double_backward 0.69, axpby_double_backward 0.76,
      // inner_products_backward 0.61 and its double backward 0.75; N = 2^25 0.75, 0.86, 0.71,
      // 0.84; single floats N = 1e7 0.60-0.76; rows of 3 doubles N = 1e6 0.67-0.99.)
      const Coeffs* c = staged;
      elements(
          [&](index_t i, index_t s) SEGOPS_INLINE {
            if (s < 0) return g(i, s);  // dropped ids: rare, predictable
            h(i, s, c[s]);
          },
          [&](index_t t) SEGOPS_INLINE {
            prefetch(c + t);
            if constexpr (sizeof(Coeffs) > 8)  // may straddle two lines
              prefetch(reinterpret_cast<const char*>(c + t + 1) - 1);
            fl.applied_rows([&](const auto&... v) { prefetch_rows(t, v...); });
          },
          std::true_type{}, NoQuad{});
    } else if constexpr (NamesSegmentRows<F>) {
      elements(
          g,
          [&](index_t t)
              SEGOPS_INLINE { fl.segment_rows([&](const auto&... v) { prefetch_rows(t, v...); }); },
          std::true_type{}, quad);
    } else {
      elements(
          g, [](index_t) {}, std::false_type{}, quad);
    }
  }
};

/// Coefficients of segments [0, m) into c (ElementTransform::staged).
template <class F>
struct StageSegmentCoefficients {
  F f;
  typename coeffs_of<F>::type* c;
  KOKKOS_FUNCTION void operator()(index_t s) const { c[s] = f.coeffs(s); }
};

/// Bytes per segment of the per-segment inputs that f's elements read (its segment_rows).
template <class F>
index_t segment_row_bytes(const F& f) {
  index_t row = 0;
  if constexpr (NamesSegmentRows<F>)
    f.segment_rows([&](const auto&... v) { row += row_bytes(v...); });
  return row;
}
/// How many distinct per-segment inputs f's elements read (a view named twice counts once).
template <class F>
int distinct_segment_rows(const F& f) {
  constexpr int kMax = 16;
  const void* seen[kMax];
  int n = 0;
  f.segment_rows([&](const auto&... v) {
    auto one = [&](const auto& x) {
      const void* p;
      if constexpr (requires { x.ptr; })
        p = x.ptr;
      else
        p = x.data();
      for (int k = 0; k < n; ++k)
        if (seen[k] == p) return;
      if (n < kMax) seen[n++] = p;
    };
    (one(v), ...);
  });
  return n;
}
/// Unsorted ids whose per-segment inputs (row bytes each) take more than half a core's cache, the
/// element rows streaming through the rest: each element would read them at random, so a pass
/// that computes what the elements need once per segment pays (segmented_transform, gather_rows).
/// Below that size it does not (mean_backward, rows of 3 floats, L = 3, N = 1e5: 61 -> 78 us).
template <class Seg>
bool stage_per_segment(const Seg& seg, index_t row) {
  return !seg.sorted() && 2 * seg.num_segments() * row > kCacheBytes;
}

/// The element pass of f over seg in blocks of Block (ElementTransform; ahead, far and staged as
/// segmented_transform picks them).
template <index_t Block, bool Staged, class Seg, class F>
auto element_transform(const Seg& seg, const F& f, bool ahead, bool far,
                       const typename coeffs_of<F>::type* staged) {
  using IdT = std::remove_const_t<typename Seg::ids_view::value_type>;
  using Offsets = decltype(seg.offsets());
  const auto ids = seg.ids();
  const index_t n = seg.num_elements(), m = seg.num_segments();
  const bool runs = Block == kTileQuantum && seg.sorted();  // sorted runs need the offsets
  const Offsets off = runs ? seg.offsets() : Offsets(), first = runs ? seg.tile_first() : Offsets();
  return ElementTransform<F, IdT, Offsets, Block, Staged>{
      f, ids.data(), static_cast<index_t>(ids.stride(0)), n, m, off, first, ahead, far, staged};
}

template <class Exec, class Seg, class F>
void segmented_transform(const Exec& exec, const Seg& seg, const F& f, const char* label) {
  constexpr index_t block = element_block_v<Exec>;
  const index_t n = seg.num_elements();
  const index_t m = seg.num_segments();
  index_t row = 0;  // bytes per segment of the per-segment inputs the elements read
  if constexpr (block > 1) row = segment_row_bytes(f);
  using Coeffs = typename coeffs_of<F>::type;
  Coeffs* staged = nullptr;
  if constexpr (block > 1 && StagesCoefficients<F>) {
    // Where stage_per_segment: the coefficients are computed once per segment into the
    // workspace, leaving one random read of them per element (and what apply reads). Rows of 3
    // floats, L = 3, 2 threads: rms_norm_backward N = 3e5 418 -> 261 us, N = 1e6 2.6 -> 1.3 ms,
    // N = 2^25 600 -> 150 ms; its double backward N = 1e6 5.3 -> 3.2 ms. (mean_backward stages
    // its scaled rows instead, gather_rows, and comes here only where they do not fit.)
    // Coefficients that are only read (the bilinear family's) are staged where an element would
    // read two per-segment inputs or more at random, so that it reads one line instead. Same
    // cases: inner_products_backward (3 inputs) 7.4-8.2 -> 4.1-4.9 ms, single floats 5.1 ->
    // 2.2-2.4 ms; axpby (2) 2.4-2.7 -> 2.0-2.2 ms, single floats 2.0-2.1 -> 1.4-1.5 ms;
    // mul_double_backward's element pass, single floats 2.8 -> 2.2 ms (rows of 3 floats: 3.8-4.1
    // ms either way, bound by its five streams).
    const auto ws = workspace_of<Coeffs>(seg);
    bool pays = ws.room >= m && stage_per_segment(seg, row);
    if constexpr (ReadsCoefficients<F>) pays = pays && distinct_segment_rows(f) > 1;
    if (pays) {
      staged = ws.data;
      Kokkos::parallel_for(label, Kokkos::RangePolicy<Exec, Kokkos::IndexType<index_t>>(exec, 0, m),
                           StageSegmentCoefficients<F>{f, staged});
      row = index_t(sizeof(Coeffs));
      f.applied_rows([&](const auto&... v) { row += row_bytes(v...); });
    }
  }
  const bool ahead = !seg.sorted() && m * row > kCacheBytes;
  // The loop of four elements at a time (packed_quad) does not prefetch: where the per-segment
  // rows outgrow the last-level cache too, the elements go one at a time with prefetches instead.
  // Sum's backward, rows of 3 floats, L = 3, unsorted, 2 threads: N = 1e6 (4 MB of rows) 0.61 ms
  // one at a time, 0.52 ms in fours, 0.63 ms in fours with prefetches; N = 3e6 2.2-3.8 ms one at
  // a time, 4.2-7.7 ms in fours (with prefetches 3.3 ms).
  const bool far = ahead && 4 * m * row > kLastLevelBytes;
  auto run = [&](auto staging) {
    Kokkos::parallel_for(
        label, WorkItems<Exec>(exec, 0, (n + block - 1) / block),
        element_transform<block, decltype(staging)::value>(seg, f, ahead, far, staged));
  };
  if constexpr (block > 1 && StagesCoefficients<F>)
    if (staged) return run(std::true_type{});
  run(std::false_type{});
}

/// o = 0 in every element row: packed rows as one flat loop (2 threads zero 1e6 rows of 3 floats
/// in 0.22 ms, where Kokkos::deep_copy of the rank-2 view took 0.43 ms), other layouts row by row.
template <class T>
struct ZeroFlat {
  T* p;
  KOKKOS_FUNCTION void operator()(index_t k) const { p[k] = T(0); }
};
template <class T>
struct ZeroRow {
  Mat<T> o;
  KOKKOS_FUNCTION void operator()(index_t i) const {
    for (index_t d = 0; d < o.d; ++d) o(i, d) = T(0);
  }
};
template <class Exec, class T>
void zero_rows(const Exec& exec, Mat<T> o, const char* label) {
  using Policy = Kokkos::RangePolicy<Exec, Kokkos::IndexType<index_t>>;
  if (packed(o))
    Kokkos::parallel_for(label, Policy(exec, 0, o.n * o.d), ZeroFlat<T>{o.ptr});
  else
    Kokkos::parallel_for(label, Policy(exec, 0, o.n), ZeroRow<T>{o});
}

/// Segments in blocks of Block, the functor copied into a local (as ElementTransform does: a call
/// per segment reloads its fields after every store through an output pointer; max_backward, rows
/// of 3 floats, 1e6 elements, L = 3, 2 threads, zeroing and scatter: 1.63 -> 1.44 ms). A functor
/// with packed_width() and row(s, at, width) (an accessor, views.hpp's StridedAt / PackedAt<W>,
/// and a row width) gets the width and the strides as constants where its rows are packed (host
/// blocks); elsewhere its operator()(s), row through StridedAt. For unsorted ids, the arg element
/// of each segment lies anywhere: a functor with prefetch_segment(s) fetches the rows segment s
/// reads and writes, kSegmentsAhead segments before it gets there (max_norm of rows of 3 floats,
/// N = 1e6, L = 3, 2 threads: backward 3.6-4.3 -> 2.0-2.6 ms, double backward 9.0-10.1 -> 4.8-5.9
/// ms; in a noisier hour 6.4-7.8 -> 3.4-4.5 and 16.7-17.6 -> 7.0-8.9 ms; per-component max, three
/// arg elements a segment, within the noise. Sorted ids, whose arg elements come in order, took
/// 1.12-1.16 -> 1.25-1.29 ms with it, so not there).
inline constexpr index_t kSegmentsAhead = 16;
template <class F, index_t Block>
struct SegmentBlocks {
  F f;
  index_t m;
  bool fetch;  // prefetch_segment kSegmentsAhead segments on (functors that have it)
  KOKKOS_FUNCTION SEGOPS_FLATTEN void operator()(index_t blk) const {
    const F fl = f;
    const index_t lo = blk * Block, hi = Kokkos::min(m, lo + Block);
    constexpr bool fetches = Block > 1 && kPrefetches && requires { fl.prefetch_segment(lo); };
    const index_t end = fetch ? Kokkos::min(m, hi + kSegmentsAhead) : 0;
    auto ahead = [&](index_t s) SEGOPS_INLINE {
      if constexpr (fetches)
        if (s + kSegmentsAhead < end) fl.prefetch_segment(s + kSegmentsAhead);
    };
    if constexpr (fetches)
      for (index_t s = lo; s < Kokkos::min(end, lo + kSegmentsAhead); ++s) fl.prefetch_segment(s);
    if constexpr (Block > 1 && requires { fl.packed_width(); }) {
      if (with_packed_width(fl.packed_width(), [&](auto w) {
            constexpr int W = decltype(w)::value;
            for (index_t s = lo; s < hi; ++s) {
              ahead(s);
              fl.row(s, PackedAt<W>{}, std::integral_constant<index_t, W>{});
            }
          }))
        return;
    }
    for (index_t s = lo; s < hi; ++s) {
      ahead(s);
      fl(s);
    }
  }
};

/// Whether SegmentBlocks prefetches f's rows (unsorted ids): where f says (prefetch_pays()), else
/// always.
template <class F>
bool prefetch_pays(const F& f) {
  if constexpr (requires { f.prefetch_pays(); })
    return f.prefetch_pays();
  else
    return true;
}

/// The per-segment counterpart: f(s) for every segment (gathers from an arg element, say).
template <class Exec, class Seg, class F>
void segment_transform(const Exec& exec, const Seg& seg, const F& f, const char* label) {
  constexpr index_t block = element_block_v<Exec>;
  const index_t m = seg.num_segments();
  Kokkos::parallel_for(
      label,
      Kokkos::RangePolicy<Exec, Kokkos::IndexType<index_t>>(exec, 0, (m + block - 1) / block),
      SegmentBlocks<F, block>{f, m, !seg.sorted() && prefetch_pays(f)});
}

/// No scaling of gathered rows.
struct Unscaled {
  static constexpr bool identity = true;
  KOKKOS_FUNCTION int operator()(index_t) const { return 1; }
};
/// Gathered rows divided by the segment's count (mean's backward).
template <class Counts>
struct DividedByCount {
  static constexpr bool identity = false;
  Counts counts;
  KOKKOS_FUNCTION index_t operator()(index_t s) const { return counts(s); }
};

/// o(i, d) = v(s(i), d) [/ scale(s(i))], computed in o's value type. Splat: v is one scalar per
/// segment (M), copied to every component (component_sum's backward).
template <class T, class S, class Scale = Unscaled, bool Splat = false>
struct GatherRows {
  Mat<T> o;
  Mat<const S> v;
  Scale scale;
  struct NoFactor {};  // a plain gather: rows copied, not multiplied
  KOKKOS_FORCEINLINE_FUNCTION void operator()(index_t i, index_t s) const {
    apply(i, s, factor(s));
  }
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed(index_t i, index_t s) const {
    packed_apply<W>(i, s, factor(s));
  }
  /// Scaled rows: the factor of segment s, one division per row (the coefficient that
  /// segmented_transform stages for sorted ids).
  KOKKOS_FUNCTION T coeffs(index_t s) const requires(!Scale::identity) {
    return T(1) / static_cast<T>(scale(s));
  }
  KOKKOS_FORCEINLINE_FUNCTION auto factor(index_t s) const {
    if constexpr (Scale::identity)
      return NoFactor{};
    else
      return s < 0 ? T(0) : coeffs(s);
  }
  /// Sorted ids, packed rows: elements [b, e) of segment s >= 0, the (scaled) row formed once
  /// and stored as a repeating pattern (fill_rows). Rows of 3 floats, N = 1e6, 2 threads,
  /// broadcast: L = 1000 0.21 -> 0.065 ms, L = 30 0.29 -> 0.21 ms (the rows were copied element by
  /// element, reloaded after every store).
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION void packed_run(index_t b, index_t e, index_t s) const {
    const auto k = factor(s);
    T r[W];
    for (int d = 0; d < W; ++d) r[d] = scaled(Splat ? v.ptr[s * v.s0] : v.ptr[s * W + d], k);
    fill_rows<W>(o.ptr + b * W, e - b, r);
  }
  /// o(i, :) = v(s, :) [* k]; zeros for a dropped element (s < 0).
  template <class K>
  KOKKOS_FORCEINLINE_FUNCTION void apply(index_t i, index_t s, K k) const {
    if (s < 0) return for_cols(o.d, [&](index_t d) SEGOPS_INLINE { o(i, d) = T(0); });
    for_cols(o.d, [&](index_t d) SEGOPS_INLINE { o(i, d) = scaled(v(s, Splat ? 0 : d), k); });
  }
  template <int W, class K>
  KOKKOS_FORCEINLINE_FUNCTION void packed_apply(index_t i, index_t s, K k) const {
    T* op = o.ptr + i * W;
    if (s < 0) {
      for (int d = 0; d < W; ++d) op[d] = T(0);
      return;
    }
    if constexpr (Splat) {
      const T x = scaled(v.ptr[s * v.s0], k);
      for (int d = 0; d < W; ++d) op[d] = x;
    } else {
      const S* vp = v.ptr + s * W;
      for (int d = 0; d < W; ++d) op[d] = scaled(vp[d], k);
    }
  }
#ifdef SEGOPS_HOST_VECTORS
  /// Rows of 3 floats, not scaled: elements i .. i + 3 from segments s[0 .. 4) with one vector
  /// load per row and three vector stores (load_rows3x4, store_rows3x4); false (nothing written)
  /// where load_rows3x4 cannot. Sum's backward, rows of 3 floats, L = 3, N = 1e6, 2 threads:
  /// sorted 0.34 -> 0.30 ms, unsorted 0.61 -> 0.52 ms.
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION bool packed_quad(index_t i, const index_t (&s)[4]) const
      requires(W == 3 && Scale::identity && !Splat && std::is_same_v<T, float> &&
               std::is_same_v<S, float>) {
    HostVec<float>::type r[4];
    if (!load_rows3x4(v.ptr, v.n, s, r)) return false;
    store_rows3x4(o.ptr + i * 3, r);
    return true;
  }
  /// Rows of 3 floats divided by their segment's count (mean's backward): the plain gather's
  /// loads, the four factors one vector division (the same bits as coeffs), splat across the
  /// rows (splat_rows3x4).
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION bool packed_quad(index_t i, const index_t (&s)[4]) const
      requires(W == 3 && !Scale::identity && !Splat && std::is_same_v<T, float> &&
               std::is_same_v<S, float>) {
    using V = HostVec<float>::type;
    V r[4], p[3], k[3];
    if (!load_rows3x4(v.ptr, v.n, s, r)) return false;
    pack_rows3x4(r, p);
    splat_rows3x4(V{1, 1, 1, 1} / V{static_cast<T>(scale(s[0])), static_cast<T>(scale(s[1])),
                                    static_cast<T>(scale(s[2])), static_cast<T>(scale(s[3]))},
                  k);
    for (int d = 0; d < 3; ++d) p[d] *= k[d];
    store_packed3(o.ptr + i * 3, p);
    return true;
  }
  /// Splat, rows of 3 floats, not scaled: elements i .. i + 3 from four values, three vector
  /// stores (component_sum's backward, N = 1e6, L = 3, 2 threads: sorted 0.29 -> 0.21 ms, unsorted
  /// 0.45-0.55 -> 0.35 ms).
  template <int W>
  KOKKOS_FORCEINLINE_FUNCTION bool packed_quad(index_t i, const index_t (&s)[4]) const
      requires(W == 3 && Scale::identity && Splat && std::is_same_v<T, float> &&
               std::is_same_v<S, float>) {
    HostVec<float>::type r[3];
    if (!load_splat3x4(v, s, r)) return false;
    store_packed3(o.ptr + i * 3, r);
    return true;
  }
#endif
  /// Scaled rows of single values: the value of segment s >= 0's elements, and those of segments
  /// s .. s + 3 with their four divisions next to each other, which the compiler makes one vector
  /// division (the same bits). ElementTransform::segment_values.
  KOKKOS_FORCEINLINE_FUNCTION T segment_value(index_t s) const requires(!Scale::identity) {
    return scaled(v.ptr[s * v.s0], coeffs(s));
  }
  KOKKOS_FORCEINLINE_FUNCTION void segment_values4(index_t s, T (&x)[4]) const
      requires(!Scale::identity) {
    T c[4];
    for (int j = 0; j < 4; ++j) c[j] = static_cast<T>(scale(s + j));
    for (int j = 0; j < 4; ++j) x[j] = scaled(v.ptr[(s + j) * v.s0], T(1) / c[j]);
  }
  KOKKOS_FUNCTION T* out_ptr() const { return o.ptr; }
  KOKKOS_FORCEINLINE_FUNCTION static T scaled(S x, NoFactor) { return static_cast<T>(x); }
  KOKKOS_FORCEINLINE_FUNCTION static T scaled(S x, T k) { return static_cast<T>(x) * k; }
  KOKKOS_FUNCTION index_t packed_width() const {
    return Splat ? packed_width_of(o) : common_packed_width(o, v);
  }
  /// The per-segment inputs (segmented_transform prefetches them for unsorted ids).
  template <class F>
  KOKKOS_FUNCTION void segment_rows(F&& f) const {
    if constexpr (Scale::identity)
      f(v);
    else
      f(v, scale.counts);
  }
  template <class F>  // those that apply reads
  KOKKOS_FUNCTION void applied_rows(F&& f) const {
    f(v);
  }
};

}  // namespace segops::impl
