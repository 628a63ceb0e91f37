// SPDX-License-Identifier: Apache-2.0
// Harness of the bilinear, matvec and nonlinear op tests. Every op order is a table entry (its
// arguments by name and shape), a dispatcher to the library and a double-precision serial
// reference. Generic drivers compare the library with the reference over views of any layout, and
// every backward with central finite differences of the order it differentiates.
//
// Type rule of these tests: element inputs hold T; per-segment inputs (scalars, rows, matrices)
// and every floating-point output hold Acc; arg/argmax views hold I.
#pragma once

#include <array>
#include <functional>
#include <initializer_list>
#include <map>
#include <sstream>
#include <stdexcept>
#include <utility>

#include "test_common.hpp"

namespace segtest::ops {

// ---- argument shapes ----

/// E: element rows (N) or (N, D) by the call's rank; ER, EC: element rows (N, R), (N, C) of matvec;
/// S: per-segment scalars (M); SR: per-segment rows (M) or (M, D) by the call's rank; A: matrices
/// (M, R, C); I: per-segment indices (M); IR: per-segment index rows (M) or (M, D).
enum class Shp { E, ER, EC, S, SR, A, I, IR };

inline bool element_side(Shp s) { return s == Shp::E || s == Shp::ER || s == Shp::EC; }
inline bool is_index(Shp s) { return s == Shp::I || s == Shp::IR; }

/// Row widths of one call: rank of E/SR/IR (1 means D = 1), D, and matvec's R and C.
struct Dims {
  int rank = 2;
  i64 d = 3, r = 1, c = 1;
  std::string str() const {
    std::ostringstream os;
    os << "rank " << rank << ", D " << d;
    if (r != 1 || c != 1) os << ", R " << r << ", C " << c;
    return os.str();
  }
};

struct Ext {
  int rank;
  std::array<i64, 3> e;
  i64 size() const { return e[0] * e[1] * e[2]; }
};

inline Ext extents(Shp s, const Case& c, const Dims& dm) {
  switch (s) {
    case Shp::E:
      return dm.rank == 1 ? Ext{1, {c.n(), 1, 1}} : Ext{2, {c.n(), dm.d, 1}};
    case Shp::ER:
      return {2, {c.n(), dm.r, 1}};
    case Shp::EC:
      return {2, {c.n(), dm.c, 1}};
    case Shp::S:
    case Shp::I:
      return {1, {c.m, 1, 1}};
    case Shp::SR:
    case Shp::IR:
      return dm.rank == 1 ? Ext{1, {c.m, 1, 1}} : Ext{2, {c.m, dm.d, 1}};
    case Shp::A:
      return {3, {c.m, dm.r, dm.c}};
  }
  return {1, {0, 1, 1}};
}

struct Arg {
  std::string name;
  Shp shape;
};

/// One op order. An output with the name of an input is read and written (axpy's y). `state`
/// inputs are results of the forward op `state_from` (rms_norm's out, an argmax), computed from
/// the other inputs (or from `hidden` ones that are generated but not passed).
struct OpDef {
  int id;
  std::string fn;
  std::vector<Arg> in, out, hidden = {};
  int state_from = -1;
  std::vector<std::string> state = {};

  const Arg* find_in(const std::string& n) const {
    for (const auto& a : in)
      if (a.name == n) return &a;
    return nullptr;
  }
  bool is_out(const std::string& n) const {
    for (const auto& a : out)
      if (a.name == n) return true;
    return false;
  }
  bool is_state(const std::string& n) const {
    return std::find(state.begin(), state.end(), n) != state.end();
  }
};

/// Finite-difference pair: `b` is the gradient of <cotangents, outputs of f>, with `cot` naming
/// (output of f, input of b) and `grad` (input of f, output of b).
struct FdPair {
  int f, b;
  std::vector<std::pair<std::string, std::string>> cot, grad;
};

/// Host arrays by argument name, row-major, in double.
using Arrays = std::map<std::string, std::vector<double>>;

// ---- views of every layout ----

/// How the elements of a LayoutStride view lie in memory: contiguous row- or column-major, or
/// with a gap after every element and every row (no unit stride).
enum class Arr { RowMajor, ColMajor, PaddedRow, PaddedCol };
inline constexpr Arr kArrs[] = {Arr::RowMajor, Arr::ColMajor, Arr::PaddedRow, Arr::PaddedCol};
inline const char* arr_name(Arr a) {
  switch (a) {
    case Arr::RowMajor:
      return "row-major";
    case Arr::ColMajor:
      return "column-major";
    case Arr::PaddedRow:
      return "padded row-major";
    case Arr::PaddedCol:
      return "padded column-major";
  }
  return "?";
}

inline std::array<i64, 3> strides_of(Arr a, int rank, const std::array<i64, 3>& e) {
  std::array<i64, 3> s{0, 0, 0};
  const bool padded = a == Arr::PaddedRow || a == Arr::PaddedCol;
  const i64 unit = padded ? 2 : 1, pad = padded ? 1 : 0;
  if (a == Arr::RowMajor || a == Arr::PaddedRow) {
    s[rank - 1] = unit;
    for (int k = rank - 2; k >= 0; --k) s[k] = s[k + 1] * std::max<i64>(e[k + 1], 1) + pad;
  } else {
    s[0] = unit;
    for (int k = 1; k < rank; ++k) s[k] = s[k - 1] * std::max<i64>(e[k - 1], 1) + pad;
  }
  return s;
}

template <class T, int R>
struct data_of;
template <class T>
struct data_of<T, 1> {
  using type = T*;
};
template <class T>
struct data_of<T, 2> {
  using type = T**;
};
template <class T>
struct data_of<T, 3> {
  using type = T***;
};
template <class T, int R, class Layout>
using DView = Kokkos::View<typename data_of<T, R>::type, Layout, Mem>;

template <class V>
decltype(auto) at(const V& v, i64 i, i64 j, i64 k) {
  if constexpr (V::rank() == 1)
    return v(i);
  else if constexpr (V::rank() == 2)
    return v(i, j);
  else
    return v(i, j, k);
}

/// One argument's device view of rank R and layout Layout. A LayoutStride view is cut from a
/// separate allocation (so it is an unmanaged view) whose other elements hold kSentinel.
template <class T, int R, class Layout>
struct Slot {
  static constexpr bool strided = std::is_same_v<Layout, Kokkos::LayoutStride>;
  using view_type = DView<T, R, Layout>;
  using const_view = DView<const T, R, Layout>;
  view_type view;
  Kokkos::View<T*, Mem> buffer;
  std::array<i64, 3> e{1, 1, 1}, st{0, 0, 0};
  i64 span = 0;

  Slot() = default;
  Slot(const Ext& x, Arr arr) : e(x.e) {
    if constexpr (strided) {
      st = strides_of(arr, R, e);
      span = e[0] * e[1] * e[2] > 0 ? 1 : 0;
      for (int k = 0; k < R; ++k) span += e[k] > 0 ? (e[k] - 1) * st[k] : 0;
      buffer = uninit<Kokkos::View<T*, Mem>>("segtest::buffer", std::max<i64>(span, 1));
      Kokkos::LayoutStride ls;
      for (int k = 0; k < R; ++k) {
        ls.dimension[k] = e[k];
        ls.stride[k] = st[k];
      }
      view = view_type(buffer.data(), ls);
    } else if constexpr (R == 1) {
      view = uninit<view_type>("segtest::view", e[0]);
    } else if constexpr (R == 2) {
      view = uninit<view_type>("segtest::view", e[0], e[1]);
    } else {
      view = uninit<view_type>("segtest::view", e[0], e[1], e[2]);
    }
  }
  i64 offset(i64 i, i64 j, i64 k) const { return i * st[0] + j * st[1] + k * st[2]; }
  template <class F>
  void each(F&& f) const {  // f(i, j, k, row-major flat index)
    i64 q = 0;
    for (i64 i = 0; i < e[0]; ++i)
      for (i64 j = 0; j < (R >= 2 ? e[1] : 1); ++j)
        for (i64 k = 0; k < (R >= 3 ? e[2] : 1); ++k) f(i, j, k, q++);
  }
  /// Row-major `data`, or kPoison everywhere when `data` is null.
  void fill(const std::vector<double>* data) {
    auto value = [&](i64 q) { return static_cast<T>(data ? (*data)[q] : kPoison); };
    if constexpr (strided) {
      auto h = Kokkos::create_mirror_view(buffer);
      for (i64 p = 0; p < static_cast<i64>(h.extent(0)); ++p) h(p) = static_cast<T>(kSentinel);
      each([&](i64 i, i64 j, i64 k, i64 q) { h(offset(i, j, k)) = value(q); });
      Kokkos::deep_copy(buffer, h);
    } else {
      auto h = Kokkos::create_mirror_view(view);
      each([&](i64 i, i64 j, i64 k, i64 q) { at(h, i, j, k) = value(q); });
      Kokkos::deep_copy(view, h);
    }
  }
  /// Row-major host copy in double (fences first).
  std::vector<double> read() const {
    Kokkos::fence("segtest::Slot::read");
    std::vector<double> out(e[0] * (R >= 2 ? e[1] : 1) * (R >= 3 ? e[2] : 1));
    if constexpr (strided) {
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), buffer);
      each([&](i64 i, i64 j, i64 k, i64 q) { out[q] = static_cast<double>(h(offset(i, j, k))); });
    } else {
      auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), view);
      each([&](i64 i, i64 j, i64 k, i64 q) { out[q] = static_cast<double>(at(h, i, j, k)); });
    }
    return out;
  }
  /// True when no element of the allocation outside the view was written.
  bool gaps_intact() const {
    if constexpr (!strided) return true;
    Kokkos::fence("segtest::Slot::gaps_intact");
    auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), buffer);
    std::vector<char> inside(h.extent(0), 0);
    each([&](i64 i, i64 j, i64 k, i64) { inside[offset(i, j, k)] = 1; });
    for (size_t p = 0; p < inside.size(); ++p)
      if (!inside[p] && h(p) != static_cast<T>(kSentinel)) return false;
    return true;
  }
};

/// The device views of one call, by argument name: element inputs in T (const), per-segment inputs
/// and all outputs in Acc, indices in I. The dispatchers fetch them with the accessors below.
template <class T, class Acc, class I, int Rank, class Layout>
class ViewSet {
  template <class V, int R>
  using Map = std::map<std::string, Slot<V, R, Layout>>;
  Map<T, Rank> e_;
  Map<T, 2> e2_;
  Map<Acc, Rank> eo_, r_;
  Map<Acc, 2> e2o_;
  Map<Acc, 1> s_;
  Map<Acc, 3> a_;
  Map<I, 1> i_;
  Map<I, Rank> ir_;
  std::map<std::string, std::function<std::vector<double>()>> readers_;
  std::map<std::string, std::function<bool()>> gaps_;

  template <class V, int R>
  static const Slot<V, R, Layout>& get(const Map<V, R>& m, const std::string& n) {
    const auto it = m.find(n);
    if (it == m.end()) throw std::logic_error("segtest: no view '" + n + "' of this kind");
    return it->second;
  }

 public:
  /// Creates the view of `a`: filled with `data`, or poisoned when `data` is null.
  void add(const Arg& a, const Ext& x, const std::vector<double>* data, bool output, Arr arr) {
    auto put = [&](auto& m) {
      auto& slot = m[a.name];
      slot = std::remove_reference_t<decltype(slot)>(x, arr);
      slot.fill(data);
      if (output) {
        readers_[a.name] = [&slot] { return slot.read(); };
        gaps_[a.name] = [&slot] { return slot.gaps_intact(); };
      }
    };
    switch (a.shape) {
      case Shp::E:
        output ? put(eo_) : put(e_);
        break;
      case Shp::ER:
      case Shp::EC:
        output ? put(e2o_) : put(e2_);
        break;
      case Shp::S:
        put(s_);
        break;
      case Shp::SR:
        put(r_);
        break;
      case Shp::A:
        put(a_);
        break;
      case Shp::I:
        put(i_);
        break;
      case Shp::IR:
        put(ir_);
        break;
    }
  }
  std::vector<double> read(const std::string& n) const { return readers_.at(n)(); }
  bool gaps_intact(const std::string& n) const { return gaps_.at(n)(); }

  // inputs (const views) and outputs
  auto x(const std::string& n) const {
    return typename Slot<T, Rank, Layout>::const_view(get(e_, n).view);
  }
  auto xo(const std::string& n) const { return get(eo_, n).view; }
  auto x2(const std::string& n) const {
    return typename Slot<T, 2, Layout>::const_view(get(e2_, n).view);
  }
  auto x2o(const std::string& n) const { return get(e2o_, n).view; }
  auto s(const std::string& n) const {
    return typename Slot<Acc, 1, Layout>::const_view(get(s_, n).view);
  }
  auto so(const std::string& n) const { return get(s_, n).view; }
  auto r(const std::string& n) const {
    return typename Slot<Acc, Rank, Layout>::const_view(get(r_, n).view);
  }
  auto ro(const std::string& n) const { return get(r_, n).view; }
  auto a(const std::string& n) const {
    return typename Slot<Acc, 3, Layout>::const_view(get(a_, n).view);
  }
  auto ao(const std::string& n) const { return get(a_, n).view; }
  auto i(const std::string& n) const {
    return typename Slot<I, 1, Layout>::const_view(get(i_, n).view);
  }
  auto io(const std::string& n) const { return get(i_, n).view; }
  auto ir(const std::string& n) const {
    return typename Slot<I, Rank, Layout>::const_view(get(ir_, n).view);
  }
  auto iro(const std::string& n) const { return get(ir_, n).view; }
};

/// Calls F with the execution space instance of the descriptor, or through the overload without
/// one; used by the family dispatchers (which define `seg`, `inst` and `exec`).
#define SEGTEST_OP(F, ...)                 \
  do {                                     \
    if (inst)                              \
      ::segops::F(exec, seg, __VA_ARGS__); \
    else                                   \
      ::segops::F(seg, __VA_ARGS__);       \
    return;                                \
  } while (false)

// ---- double-precision references ----

struct Ref {
  Arrays val, mag;
};

/// Builds a reference: outputs are zero-initialised; each value is a sum of terms and its mag the
/// sum of their absolute values (the rounding error of the library follows it).
struct RefBuilder {
  const Case& c;
  const Dims& dm;
  const Arrays& in;
  Ref r;
  RefBuilder(const Case& c_, const Dims& dm_, const Arrays& in_) : c(c_), dm(dm_), in(in_) {}
  const std::vector<double>& operator[](const std::string& n) const {
    const auto it = in.find(n);
    if (it == in.end()) throw std::logic_error("segtest: reference input '" + n + "' missing");
    return it->second;
  }
  void out(const std::string& n, Shp s, double init = 0.0) {
    const i64 size = extents(s, c, dm).size();
    r.val[n].assign(size, init);
    r.mag[n].assign(size, 0.0);
  }
  std::vector<double>& val(const std::string& n) { return r.val.at(n); }
  std::vector<double>& mag(const std::string& n) { return r.mag.at(n); }
  void add(std::vector<double>& v, std::vector<double>& m, i64 k,
           std::initializer_list<double> terms) {
    for (double t : terms) {
      v[k] += t;
      m[k] += std::abs(t);
    }
  }
  /// f(i, s) for every element, s = -1 for a dropped id.
  template <class F>
  void elements(F&& f) const {
    for (i64 i = 0; i < c.n(); ++i) f(i, c.valid(i) ? c.ids[i] : i64(-1));
  }
  i64 w() const { return dm.rank == 1 ? 1 : dm.d; }
};

/// A per-segment value gathered for segment s, 0 for a dropped element (s < 0).
inline double seg_at(const std::vector<double>& v, i64 s, i64 k = 0, i64 width = 1) {
  return s < 0 ? 0.0 : v[s * width + k];
}

// ---- inputs ----

template <class T>
double round_to(double v) {
  return static_cast<double>(static_cast<T>(v));
}

template <class T, class Acc>
void round_inputs(const OpDef& def, Arrays& in) {
  auto round_arg = [&](const Arg& a) {
    auto it = in.find(a.name);
    if (it == in.end() || is_index(a.shape)) return;
    for (auto& v : it->second) v = element_side(a.shape) ? round_to<T>(v) : round_to<Acc>(v);
  };
  for (const auto& a : def.in) round_arg(a);
  for (const auto& a : def.hidden) round_arg(a);
}

/// Fresh random inputs of op `def` in [-1, 1] (rounded to their value types) after the family's
/// fix-ups (e.g. separating near-ties of a max); state inputs are left to derive_state_ref or to
/// the library forward.
template <class Fam, class T, class Acc>
Arrays make_inputs(const OpDef& def, const Case& c, const Dims& dm, std::mt19937_64& rng) {
  Arrays in;
  auto gen = [&](const Arg& a) {
    if (!def.is_state(a.name))
      in[a.name] = random_vector<double>(rng, extents(a.shape, c, dm).size());
  };
  for (const auto& a : def.in) gen(a);
  for (const auto& a : def.hidden) gen(a);
  round_inputs<T, Acc>(def, in);
  Fam::fix_inputs(def.id, c, dm, in);
  round_inputs<T, Acc>(def, in);
  return in;
}

/// Recomputes the state inputs of `def` from the others with the reference forward.
template <class Fam, class T, class Acc>
void derive_state_ref(const OpDef& def, const Case& c, const Dims& dm, Arrays& in) {
  if (def.state_from < 0) return;
  const auto fwd = Fam::reference(def.state_from, c, dm, in);
  for (const auto& n : def.state) in[n] = fwd.val.at(n);
  round_inputs<T, Acc>(def, in);
}

// ---- running the library ----

/// Runs op `def` on views of layout Layout built from `in` (outputs poisoned first), and returns
/// every output. Strided outputs must not have been written outside their elements. `arr` picks
/// the memory arrangement of LayoutStride views (`rng`, when given, picks one per view).
template <class Fam, class T, class Acc, class I, int Rank, class Layout, class Seg>
Arrays run_lib(const OpDef& def, const Seg& seg, const Case& c, const Dims& dm, const Arrays& in,
               Arr arr = Arr::PaddedRow, bool inst = true, std::mt19937_64* rng = nullptr) {
  if constexpr (!kTypesBuilt<T, Acc, Layout>) {
    types_not_built();
  } else {
    ViewSet<T, Acc, I, Rank, Layout> vs;
    auto pick = [&] { return rng ? kArrs[(*rng)() % 4] : arr; };
    for (const auto& a : def.in) {
      const auto it = in.find(a.name);
      if (it == in.end()) throw std::logic_error("segtest: input '" + a.name + "' missing");
      vs.add(a, extents(a.shape, c, dm), &it->second, def.is_out(a.name), pick());
    }
    for (const auto& a : def.out)
      if (!def.find_in(a.name)) vs.add(a, extents(a.shape, c, dm), nullptr, true, pick());
    Fam::call(def.id, seg, vs, inst);
    Arrays out;
    for (const auto& a : def.out) {
      out[a.name] = vs.read(a.name);
      EXPECT_TRUE(vs.gaps_intact(a.name))
          << def.fn << ": wrote outside strided output '" << a.name << "'";
    }
    return out;
  }
}

/// Every output of `got` against the reference: indices exactly, values within
/// rtol * (1 + magnitude); infinite reference values exactly. Reports at most 5 mismatches.
inline void compare(const OpDef& def, const Arrays& got, const Ref& ref, double rtol,
                    const std::string& what) {
  for (const auto& a : def.out) {
    const auto& g = got.at(a.name);
    const auto& v = ref.val.at(a.name);
    const auto& m = ref.mag.at(a.name);
    ASSERT_EQ(g.size(), v.size()) << what << " output " << a.name;
    int bad = 0;
    for (size_t k = 0; k < v.size() && bad < 5; ++k) {
      bool ok;
      if (is_index(a.shape) || !std::isfinite(v[k]))
        ok = g[k] == v[k] || (std::isnan(g[k]) && std::isnan(v[k]));
      else
        ok = std::abs(g[k] - v[k]) <= rtol * (1.0 + m[k]);
      if (!ok) {
        ++bad;
        ADD_FAILURE() << what << ": " << def.fn << " output '" << a.name << "' element " << k
                      << " got " << g[k] << " expected " << v[k] << " (bound "
                      << rtol * (1.0 + m[k]) << ")";
      }
    }
  }
}

/// The library against the reference for op `def` with inputs `in`; returns the library outputs.
template <class Fam, class T, class Acc, class I, int Rank, class Layout = Kokkos::LayoutRight,
          class Seg>
Arrays check_inputs(const OpDef& def, const Seg& seg, const Case& c, const Dims& dm,
                    const Arrays& in, const std::string& what, Arr arr = Arr::PaddedRow,
                    bool inst = true, std::mt19937_64* layout_rng = nullptr) {
  const auto got =
      run_lib<Fam, T, Acc, I, Rank, Layout>(def, seg, c, dm, in, arr, inst, layout_rng);
  compare(def, got, Fam::reference(def.id, c, dm, in), tol<Acc>(), what);
  return got;
}

/// Fresh inputs for `def` (state from the reference forward), then check_inputs.
template <class Fam, class T, class Acc, class I, int Rank, class Layout = Kokkos::LayoutRight,
          class Seg>
void check_op(const OpDef& def, const Seg& seg, const Case& c, const Dims& dm, std::mt19937_64& rng,
              const std::string& what, Arr arr = Arr::PaddedRow, bool inst = true,
              std::mt19937_64* layout_rng = nullptr) {
  auto in = make_inputs<Fam, T, Acc>(def, c, dm, rng);
  derive_state_ref<Fam, T, Acc>(def, c, dm, in);
  check_inputs<Fam, T, Acc, I, Rank, Layout>(def, seg, c, dm, in, what, arr, inst, layout_rng);
}

inline std::string describe(const OpDef& def, const Case& c, const std::string& mode,
                            const Dims& dm) {
  return def.fn + " [" + mode + ", " + c.name + " (N " + std::to_string(c.n()) + ", M " +
         std::to_string(c.m) + "), " + dm.str() + "]";
}

/// Widths of the regime sweeps: rank 1, and rank 2 with D = 1, 3, 7, 64.
inline std::vector<Dims> sweep_dims() {
  return {{1, 1, 1, 1}, {2, 1, 1, 1}, {2, 3, 1, 1}, {2, 7, 1, 1}, {2, 64, 1, 1}};
}

/// Every op of family Fam x regime x width for one (IdT, T, Acc, I) and descriptor mode, with
/// LayoutRight views; D = 64 only on regimes of at most 4000 elements (time).
template <class Fam, class IdT, class T, class Acc, class I>
void sweep(Mode mode, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  int call = 0;
  for (const auto& c : regimes(seed, mode)) {
    const auto seg = make_segments<IdT>(c, mode);
    ASSERT_EQ(seg.sorted(), std::is_sorted(c.ids.begin(), c.ids.end())) << c.name;
    for (const auto& dm : Fam::dims()) {
      if (dm.d * dm.r * dm.c >= 25 && c.n() > 4000) continue;
      for (const auto& def : Fam::ops()) {
        const auto what = describe(def, c, mode_name(mode), dm);
        const bool inst = ++call % 3 != 0;  // every third call through the overload without exec
        if (dm.rank == 1) {
          if constexpr (Fam::has_rank1)
            check_op<Fam, T, Acc, I, 1>(def, seg, c, dm, rng, what, Arr::PaddedRow, inst);
        } else {
          check_op<Fam, T, Acc, I, 2>(def, seg, c, dm, rng, what, Arr::PaddedRow, inst);
        }
        if (::testing::Test::HasFailure()) return;
      }
    }
  }
}

/// LayoutLeft and LayoutStride (contiguous and padded, row- and column-major) views, in double,
/// on the regimes where tiles and segment boundaries interact.
template <class Fam>
void layout_sweep(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (Mode mode : {Mode::Sorted, Mode::Unsorted})
    for (const auto& c : regimes(seed, mode)) {
      if (c.name != "mixed" && c.name != "giant" && c.name != "empty_segments") continue;
      const auto seg = make_segments<std::int64_t>(c, mode);
      for (const auto& def : Fam::ops()) {
        const Dims dm = Fam::layout_dims();
        check_op<Fam, double, double, i64, 2, Kokkos::LayoutLeft>(
            def, seg, c, dm, rng, describe(def, c, mode_name(mode), dm) + " LayoutLeft");
        for (Arr arr : kArrs)
          check_op<Fam, double, double, i64, 2, Kokkos::LayoutStride>(
              def, seg, c, dm, rng,
              describe(def, c, mode_name(mode), dm) + " LayoutStride " + arr_name(arr), arr);
        if constexpr (Fam::has_rank1) {
          const Dims d1{1, 1, 1, 1};
          check_op<Fam, double, double, i64, 1, Kokkos::LayoutStride>(
              def, seg, c, d1, rng, describe(def, c, mode_name(mode), d1) + " LayoutStride");
        }
        if (::testing::Test::HasFailure()) return;
      }
    }
}

/// Trusted descriptors with out-of-range ids: reductions ignore them, per-element outputs see 0
/// for every gathered per-segment value.
template <class Fam>
void dropped_sweep(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (Mode mode : kUnsortedModes)
    for (bool sorted_base : {true, false})
      for (const auto& base : regimes(seed, sorted_base)) {
        if (base.n() == 0) continue;
        const auto c = with_dropped_ids(base, seed + 1);
        const auto seg = make_segments<std::int32_t>(c, mode, /*trusted=*/true);
        ASSERT_LT(seg.num_valid(), seg.num_elements()) << c.name;
        for (const auto& def : Fam::ops()) {
          const Dims dm = Fam::layout_dims();
          const auto what = describe(def, c, std::string(mode_name(mode)) + "+trusted", dm);
          check_op<Fam, float, double, i64, 2>(def, seg, c, dm, rng, what);
          if constexpr (Fam::has_rank1)
            check_op<Fam, float, double, i64, 1>(def, seg, c, {1, 1, 1, 1}, rng, what + " rank 1");
          if (::testing::Test::HasFailure()) return;
        }
      }
}

/// Every op whose name contains `ops` on case c with trusted descriptors in each of `modes`.
template <class Fam>
void trusted_case_sweep(const Case& c, std::initializer_list<Mode> modes, std::mt19937_64& rng,
                        const std::string& ops = "") {
  for (Mode mode : modes) {
    const auto seg = make_segments<std::int32_t>(c, mode, /*trusted=*/true);
    for (const auto& def : Fam::ops()) {
      if (def.fn.find(ops) == std::string::npos) continue;
      const Dims dm = Fam::layout_dims();
      check_op<Fam, float, double, i64, 2>(def, seg, c, dm, rng,
                                           describe(def, c, mode_name(mode), dm));
      if (::testing::Test::HasFailure()) return;
    }
  }
}

/// Every op on many_segments_case with dropped ids (trusted): the passes that prefetch rows of
/// random segments, with ids of dropped elements among those looked ahead at.
template <class Fam>
void many_segments_sweep(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  trusted_case_sweep<Fam>(with_dropped_ids(many_segments_case(seed), seed + 1),
                          {Mode::Unsorted, Mode::Bucketed, Mode::DeterministicBucketed}, rng);
}

/// Every op on unsorted ids over M segments of 0 to 5 elements (N about 2.5 times M), some ids
/// dropped (trusted), default and deterministic options: the per-segment inputs outgrow a core's
/// cache, and where the descriptor has a workspace (default options with 2 threads or more, the
/// deterministic option always) the per-element passes that stage per-segment coefficients
/// (rms_norm's backward orders; the bilinear family's, from two per-segment inputs on) compute
/// them there once per segment before the elements read them. Only the ops whose name contains
/// `ops` run.
template <class Fam>
void staged_coefficients_sweep(std::uint64_t seed, const std::string& ops, i64 m = 120000) {
  std::mt19937_64 rng(seed);
  Case c = with_dropped_ids(many_segments_case(seed, m, 6), seed + 1);
  c.name = "few_per_segment+dropped";
  trusted_case_sweep<Fam>(c, {Mode::Unsorted, Mode::Deterministic, Mode::Bucketed}, rng, ops);
}

/// Every op whose name contains `ops` on sorted ids over M segments of 0 to 6 elements (N about
/// 3 M), rows of layout_dims(), float inputs. The unit tests fuse the per-element pass and the
/// reduction of the orders that have both (segmented_transform_reduce, SEGOPS_FUSED_ROW_BYTES=0):
/// with M = 20000, 59 tiles, work items of several tiles (7 with 2 threads, 14 with 1), the last
/// one partial.
template <class Fam>
void fused_sweep(std::uint64_t seed, const std::string& ops, i64 m = 20000) {
  std::mt19937_64 rng(seed);
  std::vector<i64> counts(static_cast<std::size_t>(m));
  for (auto& x : counts) x = static_cast<i64>(rng() % 7);
  const Case c{"fused_sorted", ids_from_counts(counts), m};
  const auto seg = make_segments<std::int32_t>(c, Mode::Sorted);
  for (const auto& def : Fam::ops()) {
    if (def.fn.find(ops) == std::string::npos) continue;
    const Dims dm = Fam::layout_dims();
    check_op<Fam, float, double, i64, 2>(def, seg, c, dm, rng, describe(def, c, "sorted", dm));
    if (::testing::Test::HasFailure()) return;
  }
}

/// Sorted and deterministic descriptors with carry capacities of 1, 3, 9 and 20 accumulators, on
/// the regimes of 2000 elements or more: reduction tiles of several kTileQuantum blocks, a single
/// tile, and rows wider than the carry (no tiles: those reductions take the schedule for unsorted
/// ids).
template <class Fam>
void carry_sweep(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (Mode mode : {Mode::Sorted, Mode::Deterministic})
    for (const auto& c : regimes(seed, mode)) {
      if (c.n() < 2000) continue;
      for (i64 cap : {1, 3, 9, 20}) {
        const auto seg = make_segments<std::int64_t>(c, mode, false, cap);
        for (const auto& def : Fam::ops()) {
          const Dims dm = Fam::layout_dims();
          check_op<Fam, float, double, i64, 2>(
              def, seg, c, dm, rng,
              describe(def, c, mode_name(mode), dm) + " carry_capacity " + std::to_string(cap));
          if (::testing::Test::HasFailure()) return;
        }
      }
    }
}

/// M = 0 with N = 0, and trusted descriptors whose ids are all out of range (M = 0 and M = 4):
/// reductions over nothing, per-element outputs of dropped elements only.
template <class Fam>
void degenerate_sweep(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  const std::pair<Case, bool> cases[] = {{{"M0N0", {}, 0}, false},
                                         {{"all_dropped_M0", {0, -1, 2, 7, 0}, 0}, true},
                                         {{"all_dropped_M4", {4, -1, 9, -3, 4, 1000}, 4}, true}};
  for (Mode mode : kModes)
    for (const auto& [c, trusted] : cases) {
      const auto seg = make_segments<std::int64_t>(c, mode, trusted);
      for (const auto& def : Fam::ops()) {
        const Dims dm = Fam::layout_dims();
        check_op<Fam, double, double, i64, 2>(def, seg, c, dm, rng,
                                              describe(def, c, mode_name(mode), dm));
        if constexpr (Fam::has_rank1)
          check_op<Fam, double, double, i64, 1>(def, seg, c, {1, 1, 1, 1}, rng,
                                                describe(def, c, mode_name(mode), {1, 1, 1, 1}));
        if (::testing::Test::HasFailure()) return;
      }
    }
}

// ---- finite differences ----

template <class Fam>
const OpDef& def_of(int id) {
  for (const auto& d : Fam::ops())
    if (d.id == id) return d;
  throw std::logic_error("segtest: no op " + std::to_string(id));
}

/// K copies of case c side by side (copy q's segment s is q M + s); dropped ids stay out of range.
inline Case replicate(const Case& c, i64 k) {
  Case r{c.name + " x" + std::to_string(k), {}, c.m * k};
  r.ids.reserve(c.n() * k);
  for (i64 q = 0; q < k; ++q)
    for (i64 id : c.ids) r.ids.push_back(id < 0 ? id : id < c.m ? id + q * c.m : r.m + id);
  return r;
}

/// `p.b` against central differences (h = 1e-6) of L = sum <cotangent, output of p.f>, entry by
/// entry of every differentiated input, all in double through the library. State inputs of p.f
/// (rms_norm's out, an argmax) are recomputed by the library forward at every evaluation. The
/// perturbations of one input run as one call on a replicated case (copy j moves entry j), so a
/// check costs a few kernel launches rather than thousands.
template <class Fam, int Rank>
void fd_check(const FdPair& p, const Case& c, Mode mode, bool trusted, const Dims& dm,
              std::mt19937_64& rng, const std::string& what) {
  const OpDef& f = def_of<Fam>(p.f);
  const OpDef& b = def_of<Fam>(p.b);
  auto run = [&](const OpDef& d, const Case& cc, const auto& seg, const Arrays& in) {
    return run_lib<Fam, double, double, i64, Rank, Kokkos::LayoutRight>(d, seg, cc, dm, in);
  };
  auto with_state = [&](const Case& cc, const auto& seg, Arrays in) {
    if (f.state_from >= 0) {
      const auto fwd = run(def_of<Fam>(f.state_from), cc, seg, in);
      for (const auto& n : f.state) in[n] = fwd.at(n);
    }
    return in;
  };
  const auto seg = make_segments<std::int64_t>(c, mode, trusted);
  const Arrays x = make_inputs<Fam, double, double>(f, c, dm, rng);
  const Arrays base = with_state(c, seg, x);
  const Arrays fout = run(f, c, seg, base);
  Arrays cot;
  for (const auto& [fo, bi] : p.cot) {
    cot[fo] = random_vector<double>(rng, fout.at(fo).size());
    for (size_t k = 0; k < cot[fo].size(); ++k)  // an empty segment's max is a constant -inf
      if (!std::isfinite(fout.at(fo)[k])) cot[fo][k] = 0;
  }
  Arrays bin;
  for (const auto& a : b.in) {
    for (const auto& [fo, bi] : p.cot)
      if (bi == a.name) bin[a.name] = cot.at(fo);
    if (bin.count(a.name)) continue;
    if (base.count(a.name))
      bin[a.name] = base.at(a.name);
    else if (fout.count(a.name))
      bin[a.name] = fout.at(a.name);
    else
      FAIL() << what << ": no value for input '" << a.name << "' of " << b.fn;
  }
  const Arrays analytic = run(b, c, seg, bin);
  // losses(fi, delta)[j]: the loss with entry j of input fi moved by delta
  auto losses = [&](const std::string& fi, double delta) {
    const i64 k = static_cast<i64>(x.at(fi).size());
    const Case rc = replicate(c, k);
    const auto rseg = make_segments<std::int64_t>(rc, mode, trusted);
    Arrays rin;
    for (const auto& [name, v] : x) {
      auto& r = rin[name];
      for (i64 q = 0; q < k; ++q) r.insert(r.end(), v.begin(), v.end());
    }
    for (i64 j = 0; j < k; ++j) rin[fi][j * k + j] += delta;
    const auto o = run(f, rc, rseg, with_state(rc, rseg, rin));
    std::vector<double> l(k, 0.0);
    for (const auto& [fo, bi] : p.cot) {
      const auto& w = cot.at(fo);
      for (i64 j = 0; j < k; ++j)
        for (size_t e = 0; e < w.size(); ++e)
          if (w[e] != 0) l[j] += w[e] * o.at(fo)[j * w.size() + e];
    }
    return l;
  };
  const double h = 1e-6;
  for (const auto& [fi, bo] : p.grad) {
    const auto& g = analytic.at(bo);
    ASSERT_EQ(g.size(), x.at(fi).size()) << what << ": " << bo;
    if (g.empty()) continue;
    const auto lp = losses(fi, h), lm = losses(fi, -h);
    for (size_t j = 0; j < g.size(); ++j) {
      const double fd = (lp[j] - lm[j]) / (2 * h);
      ASSERT_NEAR(g[j], fd, 1e-6 * (1 + std::abs(fd)))
          << what << ": " << b.fn << " output '" << bo << "' entry " << j << " vs d/d" << fi
          << " of " << f.fn;
    }
  }
}

/// Small cases for finite differences: empty segments at both ends and in the middle, M = 1.
inline std::vector<Case> fd_cases() {
  const std::vector<i64> counts = {0, 3, 0, 0, 5, 1, 8, 0, 2, 6, 0, 4};
  return {{"fd_mixed", ids_from_counts(counts), static_cast<i64>(counts.size())},
          {"fd_M1", std::vector<i64>(11, 0), 1}};
}

/// Every pair of family Fam in double: sorted ids, and shuffled trusted ids with dropped ones.
template <class Fam>
void fd_sweep(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (bool dropped : {false, true})
    for (Case c : fd_cases()) {
      if (dropped) c = with_dropped_ids(c, seed, 5);
      if (dropped) std::shuffle(c.ids.begin(), c.ids.end(), rng);
      const Mode mode = dropped ? Mode::Unsorted : Mode::Sorted;
      for (const auto& p : Fam::fd_pairs())
        for (const auto& dm : Fam::fd_dims()) {
          const auto what =
              describe(def_of<Fam>(p.b), c, dropped ? "trusted+dropped" : "sorted", dm);
          if (dm.rank == 1) {
            if constexpr (Fam::has_rank1) fd_check<Fam, 1>(p, c, mode, dropped, dm, rng, what);
          } else {
            fd_check<Fam, 2>(p, c, mode, dropped, dm, rng, what);
          }
          if (::testing::Test::HasFailure()) return;
        }
    }
}

// ---- bad input ----

/// `call` must throw segops::Error naming segops::<op> and the argument '<arg>'; `untouched` then
/// checks that no output was written.
template <class Call, class... Outs>
void expect_error(Call&& call, const std::string& op, const std::string& arg, const Outs&... outs) {
  try {
    call();
    ADD_FAILURE() << op << ": no segops::Error thrown for a bad '" << arg << "'";
  } catch (const segops::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("segops::" + op + ":"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'" + arg + "'"), std::string::npos) << msg;
  }
  (expect_all_equal(to_host(outs), kPoison, op + " output after a throw"), ...);
}

/// A small sorted descriptor for the bad-input tests: 20 elements in 5 segments, one empty.
inline Case small_case() { return {"small", ids_from_counts({4, 0, 7, 6, 3}), 5}; }

// ==== the bilinear family ====

struct Bilinear {
  enum Op : int {
    DotF,
    DotB,
    DotD,
    IpF,
    IpB,
    IpD,
    MulF,
    MulB,
    MulD,
    AddRowF,
    AddRowB,
    AddRowD,
    AddScalarF,
    AddScalarB,
    AddScalarD,
    AxpyF,
    AxpyB,
    AxpyD,
    AxpbyF,
    AxpbyB,
    AxpbyD
  };
  static constexpr bool has_rank1 = true;

  static const std::vector<OpDef>& ops() {
    constexpr Shp E = Shp::E, S = Shp::S, SR = Shp::SR;
    static const std::vector<OpDef> defs = {
        {DotF, "segmented_dot", {{"x", E}, {"y", E}}, {{"out", S}}},
        {DotB, "segmented_dot_backward", {{"x", E}, {"y", E}, {"g", S}}, {{"gx", E}, {"gy", E}}},
        {DotD,
         "segmented_dot_double_backward",
         {{"x", E}, {"y", E}, {"g", S}, {"u", E}, {"v", E}},
         {{"gg", S}, {"xp", E}, {"yp", E}}},
        {IpF, "segmented_inner_products", {{"x", E}, {"y", E}}, {{"xy", S}, {"xx", S}, {"yy", S}}},
        {IpB,
         "segmented_inner_products_backward",
         {{"x", E}, {"y", E}, {"gxy", S}, {"gxx", S}, {"gyy", S}},
         {{"gx", E}, {"gy", E}}},
        {IpD,
         "segmented_inner_products_double_backward",
         {{"x", E}, {"y", E}, {"gxy", S}, {"gxx", S}, {"gyy", S}, {"u", E}, {"v", E}},
         {{"ggxy", S}, {"ggxx", S}, {"ggyy", S}, {"xp", E}, {"yp", E}}},
        {MulF, "segmented_mul", {{"a", S}, {"x", E}}, {{"o", E}}},
        {MulB, "segmented_mul_backward", {{"a", S}, {"x", E}, {"g", E}}, {{"gx", E}, {"ga", S}}},
        {MulD,
         "segmented_mul_double_backward",
         {{"a", S}, {"x", E}, {"g", E}, {"u", E}, {"w", S}},
         {{"gg", E}, {"xp", E}, {"ap", S}}},
        {AddRowF, "segmented_add", {{"x", E}, {"b", SR}}, {{"o", E}}},
        {AddRowB, "segmented_add_backward", {{"g", E}}, {{"gx", E}, {"gb", SR}}},
        {AddRowD, "segmented_add_double_backward", {{"u", E}, {"w", SR}}, {{"gg", E}}},
        {AddScalarF, "segmented_add", {{"x", E}, {"b", S}}, {{"o", E}}},
        {AddScalarB, "segmented_add_backward", {{"g", E}}, {{"gx", E}, {"gb", S}}},
        {AddScalarD, "segmented_add_double_backward", {{"u", E}, {"w", S}}, {{"gg", E}}},
        {AxpyF, "segmented_axpy", {{"a", S}, {"x", E}, {"y", E}}, {{"y", E}}},
        {AxpyB,
         "segmented_axpy_backward",
         {{"a", S}, {"x", E}, {"g", E}},
         {{"gy", E}, {"gx", E}, {"ga", S}}},
        {AxpyD,
         "segmented_axpy_double_backward",
         {{"a", S}, {"x", E}, {"g", E}, {"uy", E}, {"ux", E}, {"w", S}},
         {{"gg", E}, {"xp", E}, {"ap", S}}},
        {AxpbyF, "segmented_axpby", {{"a", S}, {"x", E}, {"b", S}, {"y", E}}, {{"o", E}}},
        {AxpbyB,
         "segmented_axpby_backward",
         {{"a", S}, {"x", E}, {"b", S}, {"y", E}, {"g", E}},
         {{"gx", E}, {"gy", E}, {"ga", S}, {"gb", S}}},
        {AxpbyD,
         "segmented_axpby_double_backward",
         {{"a", S},
          {"x", E},
          {"b", S},
          {"y", E},
          {"g", E},
          {"ux", E},
          {"uy", E},
          {"wa", S},
          {"wb", S}},
         {{"gg", E}, {"xp", E}, {"yp", E}, {"ap", S}, {"bp", S}}},
    };
    return defs;
  }

  static std::vector<FdPair> fd_pairs() {
    return {
        {DotF, DotB, {{"out", "g"}}, {{"x", "gx"}, {"y", "gy"}}},
        {DotB, DotD, {{"gx", "u"}, {"gy", "v"}}, {{"x", "xp"}, {"y", "yp"}, {"g", "gg"}}},
        {IpF, IpB, {{"xy", "gxy"}, {"xx", "gxx"}, {"yy", "gyy"}}, {{"x", "gx"}, {"y", "gy"}}},
        {IpB,
         IpD,
         {{"gx", "u"}, {"gy", "v"}},
         {{"x", "xp"}, {"y", "yp"}, {"gxy", "ggxy"}, {"gxx", "ggxx"}, {"gyy", "ggyy"}}},
        {MulF, MulB, {{"o", "g"}}, {{"a", "ga"}, {"x", "gx"}}},
        {MulB, MulD, {{"gx", "u"}, {"ga", "w"}}, {{"a", "ap"}, {"x", "xp"}, {"g", "gg"}}},
        {AddRowF, AddRowB, {{"o", "g"}}, {{"x", "gx"}, {"b", "gb"}}},
        {AddRowB, AddRowD, {{"gx", "u"}, {"gb", "w"}}, {{"g", "gg"}}},
        {AddScalarF, AddScalarB, {{"o", "g"}}, {{"x", "gx"}, {"b", "gb"}}},
        {AddScalarB, AddScalarD, {{"gx", "u"}, {"gb", "w"}}, {{"g", "gg"}}},
        {AxpyF, AxpyB, {{"y", "g"}}, {{"y", "gy"}, {"x", "gx"}, {"a", "ga"}}},
        {AxpyB,
         AxpyD,
         {{"gy", "uy"}, {"gx", "ux"}, {"ga", "w"}},
         {{"a", "ap"}, {"x", "xp"}, {"g", "gg"}}},
        {AxpbyF, AxpbyB, {{"o", "g"}}, {{"a", "ga"}, {"x", "gx"}, {"b", "gb"}, {"y", "gy"}}},
        {AxpbyB,
         AxpbyD,
         {{"gx", "ux"}, {"gy", "uy"}, {"ga", "wa"}, {"gb", "wb"}},
         {{"a", "ap"}, {"x", "xp"}, {"b", "bp"}, {"y", "yp"}, {"g", "gg"}}},
    };
  }

  static std::vector<Dims> dims() { return sweep_dims(); }
  static Dims layout_dims() { return {2, 3, 1, 1}; }
  static std::vector<Dims> fd_dims() { return {{1, 1, 1, 1}, {2, 3, 1, 1}}; }
  static void fix_inputs(int, const Case&, const Dims&, Arrays&) {}

  template <class VS, class Seg>
  static void call(int op, const Seg& seg, const VS& v, bool inst) {
    const typename Seg::execution_space exec;
    switch (op) {
      case DotF:
        SEGTEST_OP(segmented_dot, v.x("x"), v.x("y"), v.so("out"));
      case DotB:
        SEGTEST_OP(segmented_dot_backward, v.x("x"), v.x("y"), v.s("g"), v.xo("gx"), v.xo("gy"));
      case DotD:
        SEGTEST_OP(segmented_dot_double_backward, v.x("x"), v.x("y"), v.s("g"), v.x("u"), v.x("v"),
                   v.so("gg"), v.xo("xp"), v.xo("yp"));
      case IpF:
        SEGTEST_OP(segmented_inner_products, v.x("x"), v.x("y"), v.so("xy"), v.so("xx"),
                   v.so("yy"));
      case IpB:
        SEGTEST_OP(segmented_inner_products_backward, v.x("x"), v.x("y"), v.s("gxy"), v.s("gxx"),
                   v.s("gyy"), v.xo("gx"), v.xo("gy"));
      case IpD:
        SEGTEST_OP(segmented_inner_products_double_backward, v.x("x"), v.x("y"), v.s("gxy"),
                   v.s("gxx"), v.s("gyy"), v.x("u"), v.x("v"), v.so("ggxy"), v.so("ggxx"),
                   v.so("ggyy"), v.xo("xp"), v.xo("yp"));
      case MulF:
        SEGTEST_OP(segmented_mul, v.s("a"), v.x("x"), v.xo("o"));
      case MulB:
        SEGTEST_OP(segmented_mul_backward, v.s("a"), v.x("x"), v.x("g"), v.xo("gx"), v.so("ga"));
      case MulD:
        SEGTEST_OP(segmented_mul_double_backward, v.s("a"), v.x("x"), v.x("g"), v.x("u"), v.s("w"),
                   v.xo("gg"), v.xo("xp"), v.so("ap"));
      case AddRowF:
        SEGTEST_OP(segmented_add, v.x("x"), v.r("b"), v.xo("o"));
      case AddRowB:
        SEGTEST_OP(segmented_add_backward, v.x("g"), v.xo("gx"), v.ro("gb"));
      case AddRowD:
        SEGTEST_OP(segmented_add_double_backward, v.x("u"), v.r("w"), v.xo("gg"));
      case AddScalarF:
        SEGTEST_OP(segmented_add, v.x("x"), v.s("b"), v.xo("o"));
      case AddScalarB:
        SEGTEST_OP(segmented_add_backward, v.x("g"), v.xo("gx"), v.so("gb"));
      case AddScalarD:
        SEGTEST_OP(segmented_add_double_backward, v.x("u"), v.s("w"), v.xo("gg"));
      case AxpyF:
        SEGTEST_OP(segmented_axpy, v.s("a"), v.x("x"), v.xo("y"));
      case AxpyB:
        SEGTEST_OP(segmented_axpy_backward, v.s("a"), v.x("x"), v.x("g"), v.xo("gy"), v.xo("gx"),
                   v.so("ga"));
      case AxpyD:
        SEGTEST_OP(segmented_axpy_double_backward, v.s("a"), v.x("x"), v.x("g"), v.x("uy"),
                   v.x("ux"), v.s("w"), v.xo("gg"), v.xo("xp"), v.so("ap"));
      case AxpbyF:
        SEGTEST_OP(segmented_axpby, v.s("a"), v.x("x"), v.s("b"), v.x("y"), v.xo("o"));
      case AxpbyB:
        SEGTEST_OP(segmented_axpby_backward, v.s("a"), v.x("x"), v.s("b"), v.x("y"), v.x("g"),
                   v.xo("gx"), v.xo("gy"), v.so("ga"), v.so("gb"));
      case AxpbyD:
        SEGTEST_OP(segmented_axpby_double_backward, v.s("a"), v.x("x"), v.s("b"), v.x("y"),
                   v.x("g"), v.x("ux"), v.x("uy"), v.s("wa"), v.s("wb"), v.xo("gg"), v.xo("xp"),
                   v.xo("yp"), v.so("ap"), v.so("bp"));
    }
    throw std::logic_error("segtest: unknown bilinear op");
  }

  static Ref reference(int op, const Case& c, const Dims& dm, const Arrays& in) {
    RefBuilder R(c, dm, in);
    const i64 w = R.w();
    // o_i = sum_k coef_k(s) t_k(i) over element outputs, with coefficients gathered per segment
    auto combo =
        [&](const std::string& o,
            std::vector<std::pair<const std::vector<double>*, std::function<double(i64)>>> terms) {
          R.out(o, Shp::E);
          auto& v = R.val(o);
          auto& m = R.mag(o);
          R.elements([&](i64 i, i64 s) {
            for (const auto& [t, coef] : terms) {
              const double k = coef(s);
              for (i64 d = 0; d < w; ++d) R.add(v, m, i * w + d, {k * (*t)[i * w + d]});
            }
          });
        };
    // out_s = sum_i sum_k factor * <a_k, b_k> (valid elements only)
    auto dots = [&](const std::string& o, std::vector<std::pair<const char*, const char*>> pairs,
                    double factor = 1.0) {
      R.out(o, Shp::S);
      auto& v = R.val(o);
      auto& m = R.mag(o);
      R.elements([&](i64 i, i64 s) {
        if (s < 0) return;
        for (const auto& [a, b] : pairs)
          for (i64 d = 0; d < w; ++d) R.add(v, m, s, {factor * R[a][i * w + d] * R[b][i * w + d]});
      });
    };
    auto seg = [&](const char* n) { return [&v = R[n]](i64 s) { return seg_at(v, s); }; };
    auto one = [](i64) { return 1.0; };
    auto twice = [&](const char* n) { return [&v = R[n]](i64 s) { return 2 * seg_at(v, s); }; };
    switch (op) {
      case DotF:
        dots("out", {{"x", "y"}});
        break;
      case DotB:
        combo("gx", {{&R["y"], seg("g")}});
        combo("gy", {{&R["x"], seg("g")}});
        break;
      case DotD:
        dots("gg", {{"u", "y"}, {"v", "x"}});
        combo("xp", {{&R["v"], seg("g")}});
        combo("yp", {{&R["u"], seg("g")}});
        break;
      case IpF:
        dots("xy", {{"x", "y"}});
        dots("xx", {{"x", "x"}});
        dots("yy", {{"y", "y"}});
        break;
      case IpB:
        combo("gx", {{&R["y"], seg("gxy")}, {&R["x"], twice("gxx")}});
        combo("gy", {{&R["x"], seg("gxy")}, {&R["y"], twice("gyy")}});
        break;
      case IpD:
        dots("ggxy", {{"u", "y"}, {"v", "x"}});
        dots("ggxx", {{"u", "x"}}, 2.0);
        dots("ggyy", {{"v", "y"}}, 2.0);
        combo("xp", {{&R["v"], seg("gxy")}, {&R["u"], twice("gxx")}});
        combo("yp", {{&R["u"], seg("gxy")}, {&R["v"], twice("gyy")}});
        break;
      case MulF:
        combo("o", {{&R["x"], seg("a")}});
        break;
      case MulB:
        combo("gx", {{&R["g"], seg("a")}});
        dots("ga", {{"g", "x"}});
        break;
      case MulD:
        combo("gg", {{&R["u"], seg("a")}, {&R["x"], seg("w")}});
        combo("xp", {{&R["g"], seg("w")}});
        dots("ap", {{"u", "g"}});
        break;
      case AddRowF:
      case AddScalarF:
      case AddRowD:
      case AddScalarD: {  // o_i = x_i + b_s (b a row, or a scalar added to every component)
        const bool fwd = op == AddRowF || op == AddScalarF;
        const bool row = op == AddRowF || op == AddRowD;
        const auto& x = R[fwd ? "x" : "u"];
        const auto& b = R[fwd ? "b" : "w"];
        const std::string o = fwd ? "o" : "gg";
        R.out(o, Shp::E);
        R.elements([&](i64 i, i64 s) {
          for (i64 d = 0; d < w; ++d)
            R.add(R.val(o), R.mag(o), i * w + d,
                  {x[i * w + d], row ? seg_at(b, s, d, w) : seg_at(b, s)});
        });
        break;
      }
      case AddRowB:
      case AddScalarB: {
        combo("gx", {{&R["g"], one}});
        const bool row = op == AddRowB;
        R.out("gb", row ? Shp::SR : Shp::S);
        R.elements([&](i64 i, i64 s) {
          if (s < 0) return;
          for (i64 d = 0; d < w; ++d)
            R.add(R.val("gb"), R.mag("gb"), row ? s * w + d : s, {R["g"][i * w + d]});
        });
        break;
      }
      case AxpyF:
        combo("y", {{&R["y"], one}, {&R["x"], seg("a")}});
        break;
      case AxpyB:
        combo("gy", {{&R["g"], one}});
        combo("gx", {{&R["g"], seg("a")}});
        dots("ga", {{"x", "g"}});
        break;
      case AxpyD:
        combo("gg", {{&R["uy"], one}, {&R["ux"], seg("a")}, {&R["x"], seg("w")}});
        combo("xp", {{&R["g"], seg("w")}});
        dots("ap", {{"ux", "g"}});
        break;
      case AxpbyF:
        combo("o", {{&R["x"], seg("a")}, {&R["y"], seg("b")}});
        break;
      case AxpbyB:
        combo("gx", {{&R["g"], seg("a")}});
        combo("gy", {{&R["g"], seg("b")}});
        dots("ga", {{"x", "g"}});
        dots("gb", {{"y", "g"}});
        break;
      case AxpbyD:
        combo("gg", {{&R["ux"], seg("a")},
                     {&R["uy"], seg("b")},
                     {&R["x"], seg("wa")},
                     {&R["y"], seg("wb")}});
        combo("xp", {{&R["g"], seg("wa")}});
        combo("yp", {{&R["g"], seg("wb")}});
        dots("ap", {{"ux", "g"}});
        dots("bp", {{"uy", "g"}});
        break;
      default:
        throw std::logic_error("segtest: unknown bilinear op");
    }
    return std::move(R.r);
  }
};

// ==== matvec: o_i = A_s x_i and the transposed form o_i = A_s^T x_i ====

struct Matvec {
  enum Op : int { MvF, MvB, MvD, MtF, MtB, MtD };
  static constexpr bool has_rank1 = false;

  static const std::vector<OpDef>& ops() {
    constexpr Shp A = Shp::A, R = Shp::ER, C = Shp::EC;
    static const std::vector<OpDef> defs = {
        {MvF, "segmented_matvec", {{"A", A}, {"x", C}}, {{"o", R}}},
        {MvB, "segmented_matvec_backward", {{"A", A}, {"x", C}, {"g", R}}, {{"gx", C}, {"gA", A}}},
        {MvD,
         "segmented_matvec_double_backward",
         {{"A", A}, {"x", C}, {"g", R}, {"u", C}, {"W", A}},
         {{"gg", R}, {"xp", C}, {"Ap", A}}},
        {MtF, "segmented_matvec_transposed", {{"A", A}, {"x", R}}, {{"o", C}}},
        {MtB,
         "segmented_matvec_transposed_backward",
         {{"A", A}, {"x", R}, {"g", C}},
         {{"gx", R}, {"gA", A}}},
        {MtD,
         "segmented_matvec_transposed_double_backward",
         {{"A", A}, {"x", R}, {"g", C}, {"u", R}, {"W", A}},
         {{"gg", C}, {"xp", R}, {"Ap", A}}},
    };
    return defs;
  }
  static std::vector<FdPair> fd_pairs() {
    std::vector<FdPair> p;
    for (int f : {MvF, MtF}) {
      p.push_back({f, f + 1, {{"o", "g"}}, {{"A", "gA"}, {"x", "gx"}}});
      p.push_back(
          {f + 1, f + 2, {{"gx", "u"}, {"gA", "W"}}, {{"A", "Ap"}, {"x", "xp"}, {"g", "gg"}}});
    }
    return p;
  }
  static std::vector<Dims> dims() { return {{2, 1, 3, 3}, {2, 1, 2, 5}, {2, 1, 1, 1}}; }
  static Dims layout_dims() { return {2, 1, 2, 5}; }
  static std::vector<Dims> fd_dims() { return {{2, 1, 2, 3}}; }
  static void fix_inputs(int, const Case&, const Dims&, Arrays&) {}

  template <class VS, class Seg>
  static void call(int op, const Seg& seg, const VS& v, bool inst) {
    const typename Seg::execution_space exec;
    switch (op) {
      case MvF:
        SEGTEST_OP(segmented_matvec, v.a("A"), v.x2("x"), v.x2o("o"));
      case MvB:
        SEGTEST_OP(segmented_matvec_backward, v.a("A"), v.x2("x"), v.x2("g"), v.x2o("gx"),
                   v.ao("gA"));
      case MvD:
        SEGTEST_OP(segmented_matvec_double_backward, v.a("A"), v.x2("x"), v.x2("g"), v.x2("u"),
                   v.a("W"), v.x2o("gg"), v.x2o("xp"), v.ao("Ap"));
      case MtF:
        SEGTEST_OP(segmented_matvec_transposed, v.a("A"), v.x2("x"), v.x2o("o"));
      case MtB:
        SEGTEST_OP(segmented_matvec_transposed_backward, v.a("A"), v.x2("x"), v.x2("g"),
                   v.x2o("gx"), v.ao("gA"));
      case MtD:
        SEGTEST_OP(segmented_matvec_transposed_double_backward, v.a("A"), v.x2("x"), v.x2("g"),
                   v.x2("u"), v.a("W"), v.x2o("gg"), v.x2o("xp"), v.ao("Ap"));
    }
    throw std::logic_error("segtest: unknown matvec op");
  }

  /// In terms of the effective P x Q matrix B_s (A_s, or A_s^T for the transposed form):
  /// o = B x; gx = B^T g, gB = sum g x^T; gg = B u + W x, x+ = W^T g, B+ = sum g u^T.
  static Ref reference(int op, const Case& c, const Dims& dm, const Arrays& in) {
    RefBuilder R(c, dm, in);
    const bool tr = op >= MtF;
    const int order = op - (tr ? MtF : MvF);
    const i64 P = tr ? dm.c : dm.r, Q = tr ? dm.r : dm.c, RC = dm.r * dm.c;
    const Shp sp = tr ? Shp::EC : Shp::ER, sq = tr ? Shp::ER : Shp::EC;
    auto idx = [&](i64 s, i64 p, i64 q) {
      return tr ? s * RC + q * dm.c + p : s * RC + p * dm.c + q;
    };
    auto mat = [&](const std::vector<double>& a, i64 s, i64 p, i64 q) {
      return s < 0 ? 0.0 : a[idx(s, p, q)];
    };
    // o(i, p) = sum_q B(s, p, q) v(i, q) [+ B2(s, p, q) v2(i, q)]
    auto apply = [&](const std::string& o, const std::vector<double>& b,
                     const std::vector<double>& v, const std::vector<double>* b2,
                     const std::vector<double>* v2) {
      R.out(o, sp);
      R.elements([&](i64 i, i64 s) {
        for (i64 p = 0; p < P; ++p)
          for (i64 q = 0; q < Q; ++q) {
            R.add(R.val(o), R.mag(o), i * P + p, {mat(b, s, p, q) * v[i * Q + q]});
            if (b2) R.add(R.val(o), R.mag(o), i * P + p, {mat(*b2, s, p, q) * (*v2)[i * Q + q]});
          }
      });
    };
    // o(i, q) = sum_p B(s, p, q) v(i, p)
    auto apply_t = [&](const std::string& o, const std::vector<double>& b,
                       const std::vector<double>& v) {
      R.out(o, sq);
      R.elements([&](i64 i, i64 s) {
        for (i64 q = 0; q < Q; ++q)
          for (i64 p = 0; p < P; ++p)
            R.add(R.val(o), R.mag(o), i * Q + q, {mat(b, s, p, q) * v[i * P + p]});
      });
    };
    // O(s, p, q) = sum_i a(i, p) b(i, q)
    auto outer = [&](const std::string& o, const std::vector<double>& a,
                     const std::vector<double>& b) {
      R.out(o, Shp::A);
      R.elements([&](i64 i, i64 s) {
        if (s < 0) return;
        for (i64 p = 0; p < P; ++p)
          for (i64 q = 0; q < Q; ++q)
            R.add(R.val(o), R.mag(o), idx(s, p, q), {a[i * P + p] * b[i * Q + q]});
      });
    };
    switch (order) {
      case 0:
        apply("o", R["A"], R["x"], nullptr, nullptr);
        break;
      case 1:
        apply_t("gx", R["A"], R["g"]);
        outer("gA", R["g"], R["x"]);
        break;
      case 2:
        apply("gg", R["A"], R["u"], &R["W"], &R["x"]);
        apply_t("xp", R["W"], R["g"]);
        outer("Ap", R["g"], R["u"]);
        break;
      default:
        throw std::logic_error("segtest: unknown matvec op");
    }
    return std::move(R.r);
  }
};

// ==== the nonlinear family: rms_norm, max_norm, max, min ====

struct Nonlinear {
  enum Op : int {
    RmsF,
    RmsB,
    RmsD,
    NormF,
    NormF0,
    NormB,
    NormD,
    MaxF,
    MaxF0,
    MaxB,
    MaxD,
    MinF,
    MinF0,
    MinB,
    MinD
  };
  static constexpr bool has_rank1 = true;

  static const std::vector<OpDef>& ops() {
    constexpr Shp E = Shp::E, S = Shp::S, SR = Shp::SR, I = Shp::I, IR = Shp::IR;
    static const std::vector<OpDef> defs = [&] {
      std::vector<OpDef> d = {
          {RmsF, "segmented_rms_norm", {{"x", E}}, {{"out", S}}},
          {RmsB,
           "segmented_rms_norm_backward",
           {{"x", E}, {"out", S}, {"g", S}},
           {{"gx", E}},
           {},
           RmsF,
           {"out"}},
          {RmsD,
           "segmented_rms_norm_double_backward",
           {{"x", E}, {"out", S}, {"g", S}, {"u", E}},
           {{"gg", S}, {"xp", E}},
           {},
           RmsF,
           {"out"}},
          {NormF, "segmented_max_norm", {{"x", E}}, {{"out", S}, {"argmax", I}}},
          {NormF0, "segmented_max_norm (without argmax)", {{"x", E}}, {{"out", S}}},
          {NormB,
           "segmented_max_norm_backward",
           {{"x", E}, {"argmax", I}, {"g", S}},
           {{"gx", E}},
           {},
           NormF,
           {"argmax"}},
          {NormD,
           "segmented_max_norm_double_backward",
           {{"x", E}, {"argmax", I}, {"g", S}, {"u", E}},
           {{"gg", S}, {"xp", E}},
           {},
           NormF,
           {"argmax"}},
      };
      for (bool mx : {true, false}) {
        const int o = mx ? 0 : MinF - MaxF;
        const std::string n = mx ? "segmented_max" : "segmented_min";
        d.push_back({MaxF + o, n, {{"x", E}}, {{"out", SR}, {"arg", IR}}});
        d.push_back({MaxF0 + o, n + " (without arg)", {{"x", E}}, {{"out", SR}}});
        d.push_back({MaxB + o,
                     n + "_backward",
                     {{"arg", IR}, {"g", SR}},
                     {{"gx", E}},
                     {{"x", E}},
                     MaxF + o,
                     {"arg"}});
        d.push_back({MaxD + o,
                     n + "_double_backward",
                     {{"arg", IR}, {"u", E}},
                     {{"gg", SR}},
                     {{"x", E}},
                     MaxF + o,
                     {"arg"}});
      }
      return d;
    }();
    return defs;
  }
  static std::vector<FdPair> fd_pairs() {
    std::vector<FdPair> p = {
        {RmsF, RmsB, {{"out", "g"}}, {{"x", "gx"}}},
        {RmsB, RmsD, {{"gx", "u"}}, {{"x", "xp"}, {"g", "gg"}}},
        {NormF, NormB, {{"out", "g"}}, {{"x", "gx"}}},
        {NormB, NormD, {{"gx", "u"}}, {{"x", "xp"}, {"g", "gg"}}},
    };
    for (int f : {MaxF, MinF}) {
      p.push_back({f, f + 2, {{"out", "g"}}, {{"x", "gx"}}});
      p.push_back({f + 2, f + 3, {{"gx", "u"}}, {{"g", "gg"}}});
    }
    return p;
  }
  static std::vector<Dims> dims() { return sweep_dims(); }
  static Dims layout_dims() { return {2, 3, 1, 1}; }
  static std::vector<Dims> fd_dims() { return {{1, 1, 1, 1}, {2, 3, 1, 1}}; }

  static bool is_norm(int op) { return op >= NormF && op <= NormD; }
  static bool is_max(int op) { return op >= MaxF && op <= MaxD; }
  static bool is_min(int op) { return op >= MinF && op <= MinD; }

  /// Separates near-ties from the extremum of each segment (and component) by far more than
  /// rounding and finite-difference steps, so the arg of the library and of the reference agree
  /// and stays put under a perturbation. Exact ties are left as they are.
  static void fix_inputs(int op, const Case& c, const Dims& dm, Arrays& in) {
    if (!is_norm(op) && !is_max(op) && !is_min(op)) return;
    auto& x = in.at("x");
    const i64 w = dm.rank == 1 ? 1 : dm.d;
    if (is_norm(op)) {
      const auto nrm = row_norms(x, c.n(), w);
      std::vector<double> best(c.m, 0.0);
      for (i64 i = 0; i < c.n(); ++i)
        if (c.valid(i)) best[c.ids[i]] = std::max(best[c.ids[i]], nrm[i]);
      for (i64 i = 0; i < c.n(); ++i)
        if (c.valid(i) && nrm[i] != best[c.ids[i]] && nrm[i] > best[c.ids[i]] * (1 - 1e-3))
          for (i64 d = 0; d < w; ++d) x[i * w + d] *= 0.99;
      return;
    }
    const double sign = is_max(op) ? 1.0 : -1.0;  // work on sign * x as a max
    std::vector<double> best(c.m * w, -std::numeric_limits<double>::infinity());
    for (i64 i = 0; i < c.n(); ++i)
      if (c.valid(i))
        for (i64 d = 0; d < w; ++d)
          best[c.ids[i] * w + d] = std::max(best[c.ids[i] * w + d], sign * x[i * w + d]);
    for (i64 i = 0; i < c.n(); ++i)
      if (c.valid(i))
        for (i64 d = 0; d < w; ++d) {
          const double v = sign * x[i * w + d], b = best[c.ids[i] * w + d];
          if (v != b && v > b - 1e-3) x[i * w + d] -= sign * 0.01;
        }
  }

  static std::vector<double> row_norms(const std::vector<double>& x, i64 n, i64 w) {
    std::vector<double> r(n);
    for (i64 i = 0; i < n; ++i) {
      double s = 0;
      for (i64 d = 0; d < w; ++d) s += x[i * w + d] * x[i * w + d];
      r[i] = w == 1 ? std::abs(x[i]) : std::sqrt(s);
    }
    return r;
  }

  template <class VS, class Seg>
  static void call(int op, const Seg& seg, const VS& v, bool inst) {
    const typename Seg::execution_space exec;
    switch (op) {
      case RmsF:
        SEGTEST_OP(segmented_rms_norm, v.x("x"), v.so("out"));
      case RmsB:
        SEGTEST_OP(segmented_rms_norm_backward, v.x("x"), v.s("out"), v.s("g"), v.xo("gx"));
      case RmsD:
        SEGTEST_OP(segmented_rms_norm_double_backward, v.x("x"), v.s("out"), v.s("g"), v.x("u"),
                   v.so("gg"), v.xo("xp"));
      case NormF:
        SEGTEST_OP(segmented_max_norm, v.x("x"), v.so("out"), v.io("argmax"));
      case NormF0:
        SEGTEST_OP(segmented_max_norm, v.x("x"), v.so("out"));
      case NormB:
        SEGTEST_OP(segmented_max_norm_backward, v.x("x"), v.i("argmax"), v.s("g"), v.xo("gx"));
      case NormD:
        SEGTEST_OP(segmented_max_norm_double_backward, v.x("x"), v.i("argmax"), v.s("g"), v.x("u"),
                   v.so("gg"), v.xo("xp"));
      case MaxF:
        SEGTEST_OP(segmented_max, v.x("x"), v.ro("out"), v.iro("arg"));
      case MaxF0:
        SEGTEST_OP(segmented_max, v.x("x"), v.ro("out"));
      case MaxB:
        SEGTEST_OP(segmented_max_backward, v.ir("arg"), v.r("g"), v.xo("gx"));
      case MaxD:
        SEGTEST_OP(segmented_max_double_backward, v.ir("arg"), v.x("u"), v.ro("gg"));
      case MinF:
        SEGTEST_OP(segmented_min, v.x("x"), v.ro("out"), v.iro("arg"));
      case MinF0:
        SEGTEST_OP(segmented_min, v.x("x"), v.ro("out"));
      case MinB:
        SEGTEST_OP(segmented_min_backward, v.ir("arg"), v.r("g"), v.xo("gx"));
      case MinD:
        SEGTEST_OP(segmented_min_double_backward, v.ir("arg"), v.x("u"), v.ro("gg"));
    }
    throw std::logic_error("segtest: unknown nonlinear op");
  }

  static Ref reference(int op, const Case& c, const Dims& dm, const Arrays& in) {
    RefBuilder R(c, dm, in);
    const i64 w = R.w(), n = c.n(), m = c.m;
    const auto counts = ref_counts(c);
    // n_s = 1 / (c_s out_s), 0 where out_s = 0
    auto rms_n = [&](i64 s) {
      const double o = R["out"][s];
      return o != 0 ? 1.0 / (static_cast<double>(counts[s]) * o) : 0.0;
    };
    switch (op) {
      case RmsF: {
        R.out("out", Shp::S);
        R.elements([&](i64 i, i64 s) {
          if (s >= 0)
            for (i64 d = 0; d < w; ++d) R.val("out")[s] += R["x"][i * w + d] * R["x"][i * w + d];
        });
        for (i64 s = 0; s < m; ++s) {
          auto& o = R.val("out")[s];
          o = counts[s] > 0 ? std::sqrt(o / static_cast<double>(counts[s])) : 0.0;
          R.mag("out")[s] = o;
        }
        break;
      }
      case RmsB:
        R.out("gx", Shp::E);
        R.elements([&](i64 i, i64 s) {
          const double k = s < 0 ? 0.0 : R["g"][s] * rms_n(s);
          for (i64 d = 0; d < w; ++d)
            R.add(R.val("gx"), R.mag("gx"), i * w + d, {k * R["x"][i * w + d]});
        });
        break;
      case RmsD: {
        R.out("gg", Shp::S);
        std::vector<double> ux(m, 0.0), uxm(m, 0.0);
        R.elements([&](i64 i, i64 s) {
          if (s >= 0)
            for (i64 d = 0; d < w; ++d) R.add(ux, uxm, s, {R["u"][i * w + d] * R["x"][i * w + d]});
        });
        for (i64 s = 0; s < m; ++s) {
          R.val("gg")[s] = rms_n(s) * ux[s];
          R.mag("gg")[s] = rms_n(s) * uxm[s];
        }
        R.out("xp", Shp::E);
        R.elements([&](i64 i, i64 s) {
          if (s < 0) return;
          const double k = R["g"][s] * rms_n(s), l = rms_n(s) * counts[s];
          for (i64 d = 0; d < w; ++d) {
            const double u = R["u"][i * w + d], x = R["x"][i * w + d];
            R.val("xp")[i * w + d] = k * (u - l * R.val("gg")[s] * x);
            R.mag("xp")[i * w + d] = std::abs(k) * (std::abs(u) + l * R.mag("gg")[s] * std::abs(x));
          }
        });
        break;
      }
      case NormF:
      case NormF0: {
        const auto nrm = row_norms(R["x"], n, w);
        R.out("out", Shp::S);
        std::vector<double> arg(m, -1.0);
        R.elements([&](i64 i, i64 s) {
          if (s >= 0 && (arg[s] < 0 || nrm[i] > R.val("out")[s])) {
            R.val("out")[s] = nrm[i];
            arg[s] = static_cast<double>(i);
          }
        });
        R.mag("out") = R.val("out");
        if (op == NormF) {
          R.out("argmax", Shp::I);
          R.val("argmax") = arg;
        }
        break;
      }
      case NormB:
      case NormD: {
        const auto nrm = row_norms(R["x"], n, w);
        const auto& am = R["argmax"];
        const std::string o = op == NormB ? "gx" : "xp";
        R.out(o, Shp::E);
        if (op == NormD) R.out("gg", Shp::S);
        for (i64 s = 0; s < m; ++s) {
          const i64 i = static_cast<i64>(am[s]);
          if (i < 0 || nrm[i] == 0) continue;
          const double k = R["g"][s] / nrm[i];
          if (op == NormB) {
            for (i64 d = 0; d < w; ++d) {
              R.val(o)[i * w + d] = k * R["x"][i * w + d];
              R.mag(o)[i * w + d] = std::abs(R.val(o)[i * w + d]);
            }
            continue;
          }
          const auto& x = R["x"];
          const auto& u = R["u"];
          double q = 0, qm = 0;
          for (i64 d = 0; d < w; ++d) {
            q += x[i * w + d] / nrm[i] * u[i * w + d];
            qm += std::abs(x[i * w + d] / nrm[i] * u[i * w + d]);
          }
          R.val("gg")[s] = q;
          R.mag("gg")[s] = qm;
          for (i64 d = 0; d < w; ++d) {
            const double xh = x[i * w + d] / nrm[i];
            R.val(o)[i * w + d] = k * (u[i * w + d] - xh * q);
            R.mag(o)[i * w + d] = std::abs(k) * (std::abs(u[i * w + d]) + std::abs(xh) * qm);
          }
        }
        break;
      }
      case MaxF:
      case MaxF0:
      case MinF:
      case MinF0: {
        const bool mx = op == MaxF || op == MaxF0;
        const double inf = std::numeric_limits<double>::infinity();
        R.out("out", Shp::SR, mx ? -inf : inf);
        std::vector<double> arg(m * w, -1.0);
        R.elements([&](i64 i, i64 s) {
          if (s < 0) return;
          for (i64 d = 0; d < w; ++d) {
            const double v = R["x"][i * w + d];
            auto& best = R.val("out")[s * w + d];
            if (arg[s * w + d] < 0 || (mx ? v > best : v < best)) {
              best = v;
              arg[s * w + d] = static_cast<double>(i);
            }
          }
        });
        if (op == MaxF || op == MinF) {
          R.out("arg", Shp::IR);
          R.val("arg") = arg;
        }
        break;
      }
      case MaxB:
      case MinB:
        R.out("gx", Shp::E);
        R.elements([&](i64 i, i64 s) {
          if (s < 0) return;
          for (i64 d = 0; d < w; ++d)
            if (static_cast<i64>(R["arg"][s * w + d]) == i)
              R.val("gx")[i * w + d] = R["g"][s * w + d];
        });
        break;
      case MaxD:
      case MinD:
        R.out("gg", Shp::SR);
        for (i64 s = 0; s < m; ++s)
          for (i64 d = 0; d < w; ++d) {
            const i64 i = static_cast<i64>(R["arg"][s * w + d]);
            if (i >= 0) R.val("gg")[s * w + d] = R["u"][i * w + d];
          }
        break;
      default:
        throw std::logic_error("segtest: unknown nonlinear op");
    }
    return std::move(R.r);
  }
};

}  // namespace segtest::ops
