// CPU kernels of the reductions (ReduceSum/Prod/Max/Min) and ArgMax/ArgMin.
//
// A reduction first drops size-1 dimensions and merges adjacent dimensions that are all reduced
// or all kept, leaving alternating kept (K) and reduced (R) groups. Then it removes the last R
// group, pass after pass, until none is left:
//   [..., R]    -> rows: each output element reduces one contiguous row (vectorised lanes);
//   [..., R, K] -> columns: whole input rows are accumulated into an output row (vectorised
//                  over K).
// Every pass shrinks the data, so the general case costs little more than one read of the
// input. Intermediate results stay in the accumulator type.
//
// Accumulation: sums of float16, bfloat16 and float32 add into float32 lanes (32 independent
// lanes on the row path, one per column on the column path) for at most 4096 elements or 256
// rows, then add each block's total into a double; float64 sums stay in double. So the error
// does not grow with the length (float32: ~1e-7 of the sum of magnitudes). Long rows and columns
// are cut into chunks of a fixed size, combined in order, so results do not depend on the
// number of threads. Integer sums and products wrap around like TF's (computed in the unsigned
// type of the same width). Max/min propagate NaN (the result is NaN when any reduced element
// is NaN).
#include "ops/reduce.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/check.h"
#include "core/parallel.h"

namespace tapeflow::prims {

namespace {

enum class Kind { Sum, Prod, Max, Min };

// The element type kernels read: bool is read as its byte (0 or 1).
template <class T>
using kernel_t = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

template <class C, bool = std::is_integral_v<C>>
struct modular {
  using type = C;
};
template <class C>
struct modular<C, true> {
  using type = std::make_unsigned_t<C>;
};

// Accumulator type of reduction K over storage type T (see the file comment).
template <Kind K, class T>
struct acc_type {
  using C = compute_t<T>;
  using type = std::conditional_t<
      K == Kind::Sum,
      std::conditional_t<std::is_floating_point_v<C>, double, typename modular<C>::type>,
      std::conditional_t<K == Kind::Prod, typename modular<C>::type, C>>;
};
template <Kind K, class T>
using acc_t = typename acc_type<K, T>::type;

template <Kind K, class V>
inline V init() {
  if constexpr (K == Kind::Sum)
    return V(0);
  else if constexpr (K == Kind::Prod)
    return V(1);
  else if constexpr (K == Kind::Max)
    return std::is_floating_point_v<V> ? -std::numeric_limits<V>::infinity()
                                       : std::numeric_limits<V>::lowest();
  else
    return std::is_floating_point_v<V> ? std::numeric_limits<V>::infinity()
                                       : std::numeric_limits<V>::max();
}

// Written as two selects (a maxps/minps pattern, then the NaN check) because GCC if-converts
// and vectorises that form even when calls are nested; NaN sticks once it is in an accumulator
// (a NaN `a` fails the comparison and is kept).
template <Kind K, class V>
inline V apply(V a, V b) {
  if constexpr (K == Kind::Sum)
    return static_cast<V>(a + b);
  else if constexpr (K == Kind::Prod)
    return static_cast<V>(a * b);
  else if constexpr (std::is_floating_point_v<V>) {
    const V m = K == Kind::Max ? (b > a ? b : a) : (b < a ? b : a);
    return b != b ? b : m;
  } else {
    if constexpr (K == Kind::Max)
      return b > a ? b : a;
    else
      return b < a ? b : a;
  }
}

template <class L, class In>
inline L load(In v) {
  return static_cast<L>(static_cast<compute_t<In>>(v));
}
template <class Out, class A>
inline Out store(A a) {
  if constexpr (std::is_same_v<Out, half_t> || std::is_same_v<Out, bfloat16_t>)
    return Out(static_cast<float>(a));
  else
    return static_cast<Out>(a);
}

// The type the vectorised loops accumulate in: float32 lanes for float sums of 32-bit or
// 16-bit floats (flushed into the double accumulator every block), else the accumulator itself.
template <Kind K, class In, class A>
using lane_t = std::conditional_t<K == Kind::Sum && std::is_same_v<compute_t<In>, float>, float, A>;

constexpr int64_t kBlock = 4096;     // elements per block of the lane accumulators
constexpr int64_t kChunk = 1 << 16;  // elements per parallel chunk of a long row

// The two hot loops below are always inlined into two wrappers each: one compiled for the
// baseline ISA and one for AVX2 (picked at run time), so float32 rows use 256-bit lanes where
// the CPU has them without raising the library's baseline. TAPEFLOW_CPU_BASELINE=1 in the
// environment forces the baseline loops (as for the elementwise kernels), to test them.
#if defined(__x86_64__) && defined(__GNUC__)
#define TF_REDUCE_HAVE_AVX2 1
#define TF_TARGET_AVX2_REDUCE __attribute__((target("avx2")))
inline bool cpu_has_avx2() {
  static const bool has = [] {
    const char* env = std::getenv("TAPEFLOW_CPU_BASELINE");
    if (env && *env && *env != '0') return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
}
#endif

// Reduces x[0, n) (n <= kChunk) into one accumulator.
template <Kind K, class In, class A>
[[gnu::always_inline]] inline A reduce_contig_body(const In* x, int64_t n) {
  using L = lane_t<K, In, A>;
  constexpr int W = sizeof(L) >= 8 ? 16 : static_cast<int>(128 / sizeof(L));
  A total = init<K, A>();
  if (n < 2 * W) {  // short rows: no lanes to set up and combine
    L acc = init<K, L>();
    for (int64_t i = 0; i < n; ++i) acc = apply<K>(acc, load<L>(x[i]));
    return apply<K>(total, static_cast<A>(acc));
  }
  for (int64_t b = 0; b < n; b += kBlock) {
    const int64_t e = std::min(n, b + kBlock);
    L acc[W];
    for (int j = 0; j < W; ++j) acc[j] = init<K, L>();
    int64_t i = b;
    for (; i + W <= e; i += W)
      for (int j = 0; j < W; ++j) acc[j] = apply<K>(acc[j], load<L>(x[i + j]));
    for (; i < e; ++i) acc[0] = apply<K>(acc[0], load<L>(x[i]));
    for (int w = W / 2; w > 0; w /= 2)
      for (int j = 0; j < w; ++j) acc[j] = apply<K>(acc[j], acc[j + w]);
    total = apply<K>(total, static_cast<A>(acc[0]));
  }
  return total;
}

template <Kind K, class In, class A>
A reduce_contig_base(const In* x, int64_t n) {
  return reduce_contig_body<K, In, A>(x, n);
}
#ifdef TF_REDUCE_HAVE_AVX2
template <Kind K, class In, class A>
TF_TARGET_AVX2_REDUCE A reduce_contig_avx2(const In* x, int64_t n) {
  return reduce_contig_body<K, In, A>(x, n);
}
#endif
template <Kind K, class In, class A>
A reduce_contig(const In* x, int64_t n) {
#ifdef TF_REDUCE_HAVE_AVX2
  if (cpu_has_avx2()) return reduce_contig_avx2<K, In, A>(x, n);
#endif
  return reduce_contig_base<K, In, A>(x, n);
}

// y[r] = reduce(x[r * len, (r + 1) * len)) for r < rows.
template <Kind K, class In, class A, class Out>
void reduce_rows(const In* x, Out* y, int64_t rows, int64_t len) {
  if (len <= kChunk) {
    const int64_t grain = std::max<int64_t>(1, 32768 / std::max<int64_t>(len, 1));
    detail::parallel_for(rows, grain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) y[r] = store<Out>(reduce_contig<K, In, A>(x + r * len, len));
    });
    return;
  }
  // Long rows: fixed-size chunks reduced in parallel, then combined in order.
  const int64_t nc = (len + kChunk - 1) / kChunk;
  std::vector<A> part(static_cast<size_t>(rows * nc));
  detail::parallel_for(rows * nc, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t r = t / nc, s = (t % nc) * kChunk;
      part[t] = reduce_contig<K, In, A>(x + r * len + s, std::min(kChunk, len - s));
    }
  });
  for (int64_t r = 0; r < rows; ++r) {
    A acc = init<K, A>();
    for (int64_t c = 0; c < nc; ++c) acc = apply<K>(acc, part[r * nc + c]);
    y[r] = store<Out>(acc);
  }
}

constexpr int64_t kColTile = 1024;  // output columns per task (accumulators on the stack)
constexpr int64_t kRowChunk = 512;  // reduced rows per task when there are few column tiles

// total[0, kn) combined with rows [r0, r1) of the (R, Kn) block at x, columns [k0, k0 + kn).
// Four rows per sweep, so the accumulator row is loaded and stored once per four input rows.
template <Kind K, class In, class A>
[[gnu::always_inline]] inline void accumulate_cols_body(const In* x, A* total, int64_t r0,
                                                        int64_t r1, int64_t Kn, int64_t k0,
                                                        int64_t kn) {
  using L = lane_t<K, In, A>;
  constexpr int64_t kLaneRows = 256;  // rows per float32 block (a multiple of 4)
  L lanes[std::is_same_v<L, A> ? 1 : kColTile];
  L* acc;
  if constexpr (std::is_same_v<L, A>)
    acc = total;
  else
    acc = lanes;
  for (int64_t rb = r0; rb < r1; rb += kLaneRows) {
    const int64_t re = std::is_same_v<L, A> ? r1 : std::min(r1, rb + kLaneRows);
    if constexpr (!std::is_same_v<L, A>)
      for (int64_t k = 0; k < kn; ++k) acc[k] = init<K, L>();
    int64_t r = rb;
    for (; r + 4 <= re; r += 4) {
      const In* x0 = x + r * Kn + k0;
      const In* x1 = x0 + Kn;
      const In* x2 = x1 + Kn;
      const In* x3 = x2 + Kn;
      for (int64_t k = 0; k < kn; ++k)
        acc[k] = apply<K>(acc[k], apply<K>(apply<K>(load<L>(x0[k]), load<L>(x1[k])),
                                           apply<K>(load<L>(x2[k]), load<L>(x3[k]))));
    }
    for (; r < re; ++r) {
      const In* row = x + r * Kn + k0;
      for (int64_t k = 0; k < kn; ++k) acc[k] = apply<K>(acc[k], load<L>(row[k]));
    }
    if constexpr (!std::is_same_v<L, A>)
      for (int64_t k = 0; k < kn; ++k) total[k] = apply<K>(total[k], static_cast<A>(acc[k]));
    if constexpr (std::is_same_v<L, A>) break;
  }
}

template <Kind K, class In, class A>
void accumulate_cols_base(const In* x, A* total, int64_t r0, int64_t r1, int64_t Kn, int64_t k0,
                          int64_t kn) {
  accumulate_cols_body<K>(x, total, r0, r1, Kn, k0, kn);
}
#ifdef TF_REDUCE_HAVE_AVX2
template <Kind K, class In, class A>
TF_TARGET_AVX2_REDUCE void accumulate_cols_avx2(const In* x, A* total, int64_t r0, int64_t r1,
                                                int64_t Kn, int64_t k0, int64_t kn) {
  accumulate_cols_body<K>(x, total, r0, r1, Kn, k0, kn);
}
#endif
template <Kind K, class In, class A>
void accumulate_cols(const In* x, A* total, int64_t r0, int64_t r1, int64_t Kn, int64_t k0,
                     int64_t kn) {
#ifdef TF_REDUCE_HAVE_AVX2
  if (cpu_has_avx2()) return accumulate_cols_avx2<K>(x, total, r0, r1, Kn, k0, kn);
#endif
  accumulate_cols_base<K>(x, total, r0, r1, Kn, k0, kn);
}

// y[o, k] = reduce over r of x[o, r, k], for an (outer, R, Kn) input.
template <Kind K, class In, class A, class Out>
void reduce_cols(const In* x, Out* y, int64_t outer, int64_t R, int64_t Kn) {
  const int64_t tiles = (Kn + kColTile - 1) / kColTile;
  const int64_t tasks = outer * tiles;
  // The choice depends on the shape only, so results do not depend on the thread count.
  if (tasks >= 64 || R <= kRowChunk) {
    const int64_t grain =
        std::max<int64_t>(1, 32768 / std::max<int64_t>(R * std::min(Kn, kColTile), 1));
    detail::parallel_for(tasks, grain, [&](int64_t b, int64_t e) {
      A acc[kColTile];
      for (int64_t t = b; t < e; ++t) {
        const int64_t o = t / tiles, k0 = (t % tiles) * kColTile;
        const int64_t kn = std::min(kColTile, Kn - k0);
        for (int64_t k = 0; k < kn; ++k) acc[k] = init<K, A>();
        accumulate_cols<K>(x + o * R * Kn, acc, 0, R, Kn, k0, kn);
        Out* dst = y + o * Kn + k0;
        for (int64_t k = 0; k < kn; ++k) dst[k] = store<Out>(acc[k]);
      }
    });
    return;
  }
  // Few, long columns: also split the reduced rows into fixed chunks, combined in order.
  const int64_t nrc = (R + kRowChunk - 1) / kRowChunk;
  std::vector<A> part(static_cast<size_t>(outer * nrc * Kn));
  detail::parallel_for(tasks * nrc, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t rc = t % nrc, tile = t / nrc;
      const int64_t o = tile / tiles, k0 = (tile % tiles) * kColTile;
      const int64_t kn = std::min(kColTile, Kn - k0);
      A* acc = part.data() + (o * nrc + rc) * Kn + k0;
      for (int64_t k = 0; k < kn; ++k) acc[k] = init<K, A>();
      accumulate_cols<K>(x + o * R * Kn, acc, rc * kRowChunk, std::min(R, (rc + 1) * kRowChunk), Kn,
                         k0, kn);
    }
  });
  detail::parallel_for(outer * Kn, 32768, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      const int64_t o = i / Kn, k = i % Kn;
      A acc = part[static_cast<size_t>(o * nrc * Kn + k)];
      for (int64_t rc = 1; rc < nrc; ++rc) acc = apply<K>(acc, part[(o * nrc + rc) * Kn + k]);
      y[i] = store<Out>(acc);
    }
  });
}

using Group = detail::ReduceGroup;

template <Kind K, class T>
void run_reduce(const Tensor& in, Tensor& out, std::span<const int> axes) {
  using A = acc_t<K, T>;
  const T* x = static_cast<const T*>(in.raw_data());
  T* y = static_cast<T*>(out.raw_data());
  const int64_t n_in = in.num_elements(), n_out = out.num_elements();
  if (n_out == 0) return;
  if (n_in == 0) {
    // Reduction over an empty set: the identity (bool: any -> false, all -> true).
    T v = store<T>(init<K, A>());
    if constexpr (std::is_same_v<T, uint8_t>)
      if (is_bool(in.dtype())) v = K == Kind::Min ? 1 : 0;
    std::fill_n(y, n_out, v);
    return;
  }
  Group g[TensorShape::kMaxRank];
  int m = detail::merge_reduce_axes(in.shape(), axes, g);
  int n_red = 0;
  for (int i = 0; i < m; ++i) n_red += g[i].reduced;
  if (n_red == 0) {
    std::memcpy(y, x, static_cast<size_t>(n_in) * sizeof(T));
    return;
  }
  std::vector<A> bufs[2];
  const A* cur = nullptr;  // input of the current pass after the first
  for (int pass = 0; n_red > 0; ++pass) {
    const bool last = n_red == 1;
    // Work out the pass and the groups it leaves.
    bool rows;
    int64_t outer = 1, R, Kn = 1;
    if (g[m - 1].reduced) {
      rows = true;
      R = g[m - 1].n;
      for (int i = 0; i < m - 1; ++i) outer *= g[i].n;
      --m;
    } else {
      rows = false;
      Kn = g[m - 1].n;
      R = g[m - 2].n;
      for (int i = 0; i < m - 2; ++i) outer *= g[i].n;
      if (m >= 3) {
        g[m - 3].n *= Kn;
        m -= 2;
      } else {
        g[0] = g[1];
        m = 1;
      }
    }
    --n_red;
    auto run = [&](const auto* src, auto* dst) {
      using In = std::remove_cv_t<std::remove_pointer_t<decltype(src)>>;
      using Out = std::remove_pointer_t<decltype(dst)>;
      if (rows)
        reduce_rows<K, In, A, Out>(src, dst, outer, R);
      else
        reduce_cols<K, In, A, Out>(src, dst, outer, R, Kn);
    };
    A* next = nullptr;
    if (!last) {
      bufs[pass & 1].resize(static_cast<size_t>(outer * Kn));
      next = bufs[pass & 1].data();
    }
    if (pass == 0) {
      if (last)
        run(x, y);
      else
        run(x, next);
    } else {
      if (last)
        run(cur, y);
      else
        run(cur, next);
    }
    cur = next;
  }
}

template <Kind K>
void reduce_cpu(const char* op, const Tensor& in, Tensor& out, std::span<const int> axes) {
  TF_DISPATCH_ALL_TYPES(in.dtype(), {
    if constexpr (std::is_same_v<T, bool> && (K == Kind::Sum || K == Kind::Prod))
      TF_THROW(InvalidArgumentError, op, "is not defined for bool tensors");
    else
      run_reduce<K, kernel_t<T>>(in, out, axes);
  });
}

// a > b in the order where NaN is larger than every number (and equal to itself).
template <class C>
inline bool greater(C a, C b) {
  if constexpr (std::is_floating_point_v<C>)
    return a > b || (a != a && b == b);
  else
    return a > b;
}

template <bool IsMax, class T>
void run_arg(const Tensor& in, Tensor& out, int axis) {
  using C = compute_t<T>;
  const T* x = static_cast<const T*>(in.raw_data());
  int64_t* y = out.data<int64_t>();
  int64_t outer = 1, R = in.shape()[axis], inner = 1;
  for (int i = 0; i < axis; ++i) outer *= in.shape()[i];
  for (int i = axis + 1; i < in.rank(); ++i) inner *= in.shape()[i];
  if (outer * inner == 0) return;
  auto better = [](C a, C b) { return IsMax ? greater(a, b) : greater(b, a); };
  if (inner == 1) {
    detail::parallel_for(outer, std::max<int64_t>(1, 16384 / R), [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        const T* row = x + o * R;
        C best = static_cast<C>(row[0]);
        int64_t bi = 0;
        for (int64_t r = 1; r < R; ++r) {
          const C v = static_cast<C>(row[r]);
          if (better(v, best)) {
            best = v;
            bi = r;
          }
        }
        y[o] = bi;
      }
    });
    return;
  }
  constexpr int64_t kTile = 256;
  const int64_t tiles = (inner + kTile - 1) / kTile;
  detail::parallel_for(outer * tiles, std::max<int64_t>(1, 16384 / (R * std::min(inner, kTile))),
                       [&](int64_t b, int64_t e) {
                         C bv[kTile];
                         int64_t bi[kTile];
                         for (int64_t t = b; t < e; ++t) {
                           const int64_t o = t / tiles, k0 = (t % tiles) * kTile;
                           const int64_t kn = std::min(kTile, inner - k0);
                           const T* base = x + o * R * inner + k0;
                           for (int64_t k = 0; k < kn; ++k) {
                             bv[k] = static_cast<C>(base[k]);
                             bi[k] = 0;
                           }
                           for (int64_t r = 1; r < R; ++r) {
                             const T* row = base + r * inner;
                             for (int64_t k = 0; k < kn; ++k) {
                               const C v = static_cast<C>(row[k]);
                               if (better(v, bv[k])) {
                                 bv[k] = v;
                                 bi[k] = r;
                               }
                             }
                           }
                           int64_t* dst = y + o * inner + k0;
                           for (int64_t k = 0; k < kn; ++k) dst[k] = bi[k];
                         }
                       });
}

template <bool IsMax>
void arg_cpu(const Tensor& in, Tensor& out, int axis) {
  TF_DISPATCH_ALL_TYPES(in.dtype(), run_arg<IsMax, kernel_t<T>>(in, out, axis));
}

}  // namespace

void ReduceSum::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  reduce_cpu<Kind::Sum>(name(), in[0], out[0], axes);
}
void ReduceProd::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  reduce_cpu<Kind::Prod>(name(), in[0], out[0], axes);
}
void ReduceMax::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  reduce_cpu<Kind::Max>(name(), in[0], out[0], axes);
}
void ReduceMin::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  reduce_cpu<Kind::Min>(name(), in[0], out[0], axes);
}
void ArgMax::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  arg_cpu<true>(in[0], out[0], axis);
}
void ArgMin::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  arg_cpu<false>(in[0], out[0], axis);
}

}  // namespace tapeflow::prims
