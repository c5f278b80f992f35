// CPU kernels of the loss family: one pass per row of the last axis (max, sum of exponentials,
// then the outputs), rows split over the OpenMP pool. float32 and float64 rows use the
// vectorisable exp of ops/cpu/unary_ops.h and are compiled for the baseline ISA, AVX2 and AVX-512
// (picked at run time; float64 on the baseline x86-64 ISA calls the C library's exp);
// float16/bfloat16 compute in float. Reductions keep 8 partial results so that GCC vectorises
// them without reassociating a single accumulator.
#if defined(__GNUC__) && !defined(__clang__)
// Lets GCC vectorise the loops (see ops/cpu/unary_ops.h); first, so that every function of this
// file, inlined header code included, is compiled with the same options.
#pragma GCC optimize("no-math-errno", "no-trapping-math", "fp-contract=fast")
#endif

#include "ops/loss.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/check.h"
#include "core/parallel.h"
#include "ops/cpu/unary_ops.h"

namespace tapeflow::prims {

namespace {

// Elements per thread below which splitting does not pay (one exp per element: as the
// transcendental unary ops).
constexpr int64_t kGrain = 4096;
constexpr int kLanes = 8;  // partial maxima of the generic path

#define TF_AI inline __attribute__((always_inline))

enum class Kind { Softmax, LogSoftmax, Xent };

template <class T, class L>
struct Rows {
  const T* x;
  T* out;          // softmax / log_softmax / backprop, [rows, C]
  T* loss;         // Xent only, [rows]
  const L* label;  // Xent only, checked to lie in [0, C)
  int64_t C;
};

// Wide: the loop is compiled for AVX2 or AVX-512. float64 rows on the baseline ISA call the C
// library's exp (two-lane SSE2 vectors of exp_fast are slower than it, as for the exp op).
template <bool Wide, class C>
TF_AI C expc(C v) {
  if constexpr (std::is_same_v<C, double> && !Wide)
    return std::exp(v);
  else
    return cpu::exp_fast(v);
}

// max over the row; NaN is skipped here (it reaches every output through the sum).
template <class T>
TF_AI compute_t<T> row_max(const T* x, int64_t n) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<T, float>) {
    // GCC does not if-convert the select below across lanes; a vector of 8 does it (one
    // compare and blend per 8 elements, split into two SSE halves on the baseline ISA).
    // Four independent accumulators hide the compare's latency on long rows.
    using V8 = float __attribute__((vector_size(32)));
    constexpr float ninf = -std::numeric_limits<float>::infinity();
    const V8 lowest = {ninf, ninf, ninf, ninf, ninf, ninf, ninf, ninf};
    V8 acc[4] = {lowest, lowest, lowest, lowest};
    int64_t j = 0;
    for (; j + 4 * kLanes <= n; j += 4 * kLanes)
      for (int u = 0; u < 4; ++u) {
        V8 v;
        std::memcpy(&v, x + j + u * kLanes, sizeof(v));
        acc[u] = v > acc[u] ? v : acc[u];
      }
    for (; j + kLanes <= n; j += kLanes) {
      V8 v;
      std::memcpy(&v, x + j, sizeof(v));
      acc[0] = v > acc[0] ? v : acc[0];
    }
    float m = -std::numeric_limits<float>::infinity();
    for (; j < n; ++j) m = x[j] > m ? x[j] : m;
    const V8 a01 = acc[0] > acc[1] ? acc[0] : acc[1];
    const V8 a23 = acc[2] > acc[3] ? acc[2] : acc[3];
    const V8 t = a01 > a23 ? a01 : a23;
    for (int k = 0; k < kLanes; ++k) m = t[k] > m ? t[k] : m;
    return m;
  }
  C acc[kLanes];
  for (int k = 0; k < kLanes; ++k) acc[k] = -std::numeric_limits<C>::infinity();
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes)
    for (int k = 0; k < kLanes; ++k) {
      const C v = static_cast<C>(x[j + k]);
      acc[k] = v > acc[k] ? v : acc[k];
    }
  C m = -std::numeric_limits<C>::infinity();
  for (; j < n; ++j) {
    const C v = static_cast<C>(x[j]);
    m = v > m ? v : m;
  }
  for (int k = 0; k < kLanes; ++k) m = acc[k] > m ? acc[k] : m;
  return m;
}

// Sum of a contiguous run, 32 bytes of partial sums at a time (GCC will not reassociate a
// scalar accumulator).
template <class C>
TF_AI C sum_run(const C* p, int64_t n) {
  typedef C V __attribute__((vector_size(32)));
  constexpr int kW = static_cast<int>(32 / sizeof(C));
  V acc[4] = {};
  int64_t j = 0;
  for (; j + 4 * kW <= n; j += 4 * kW)
    for (int u = 0; u < 4; ++u) {
      V v;
      std::memcpy(&v, p + j + u * kW, sizeof(v));
      acc[u] += v;
    }
  for (; j + kW <= n; j += kW) {
    V v;
    std::memcpy(&v, p + j, sizeof(v));
    acc[0] += v;
  }
  C s = 0;
  for (; j < n; ++j) s += p[j];
  const V t = (acc[0] + acc[1]) + (acc[2] + acc[3]);
  for (int k = 0; k < kW; ++k) s += t[k];
  return s;
}

// Sum of exp(x - m), in chunks: the exponentials go to `e` (Store: the output row, read again
// by the last pass) or to a stack buffer, in a plain loop that vectorises as the unary exp
// kernel does, then sum_run adds them up.
template <bool Store, bool Wide, class T>
TF_AI compute_t<T> row_exp_sum(const T* x, compute_t<T> m, T* e, int64_t n) {
  using C = compute_t<T>;
  constexpr int64_t kChunk = 512;
  alignas(64) C buf[kChunk];
  C total = 0;
  for (int64_t j0 = 0; j0 < n; j0 += kChunk) {
    const int64_t len = n - j0 < kChunk ? n - j0 : kChunk;
    C* __restrict dst;
    if constexpr (Store)
      dst = e + j0;  // T == C
    else
      dst = buf;
    const T* __restrict src = x + j0;
    for (int64_t j = 0; j < len; ++j) dst[j] = expc<Wide>(static_cast<C>(src[j]) - m);
    total += sum_run(dst, len);
  }
  return total;
}

constexpr int64_t kBlock = 512;            // elements per exp loop on the short-row path
constexpr int64_t kShortRow = kBlock / 4;  // rows shorter than this take that path

// Short rows (MNIST's 10 classes): a row's exp loop would be all prologue and epilogue, so
// each block of rows is shifted by its maxima into one buffer, exponentiated in one long
// vectorised loop, and finished row by row.
template <Kind K, bool Wide, class T, class L>
TF_AI void rows_short(const Rows<T, L>& a, int64_t r0, int64_t r1) {
  using C = compute_t<T>;
  const int64_t n = a.C;
  const int64_t per = kBlock / n;
  alignas(64) C buf[kBlock];
  C mx[kBlock];
  for (int64_t b0 = r0; b0 < r1; b0 += per) {
    const int64_t rows = r1 - b0 < per ? r1 - b0 : per;
    const int64_t len = rows * n;
    const T* __restrict xb = a.x + b0 * n;
    for (int64_t i = 0; i < rows; ++i) {
      const C m = row_max(xb + i * n, n);
      mx[i] = m;
      for (int64_t j = 0; j < n; ++j) buf[i * n + j] = static_cast<C>(xb[i * n + j]) - m;
    }
    for (int64_t j = 0; j < len; ++j) buf[j] = expc<Wide>(buf[j]);
    for (int64_t i = 0; i < rows; ++i) {
      const C* e = buf + i * n;
      const T* __restrict x = xb + i * n;
      T* __restrict y = a.out + (b0 + i) * n;
      const C sum = sum_run(e, n);
      if constexpr (K == Kind::LogSoftmax) {
        // (x - max) - log(sum), as TF: x - (max + log(sum)) rounds max + log(sum) to the
        // grid of large logits (log_softmax([1000, 1000, -1000]) was off in the 5th digit).
        const C m = mx[i], lse = std::log(sum);
        for (int64_t j = 0; j < n; ++j) y[j] = static_cast<T>((static_cast<C>(x[j]) - m) - lse);
      } else {
        const C inv = C(1) / sum;
        for (int64_t j = 0; j < n; ++j) y[j] = static_cast<T>(e[j] * inv);
        if constexpr (K == Kind::Xent) {
          const int64_t l = static_cast<int64_t>(a.label[b0 + i]);
          a.loss[b0 + i] = static_cast<T>(std::log(sum) - (static_cast<C>(x[l]) - mx[i]));
          y[l] = static_cast<T>(e[l] * inv - C(1));
        }
      }
    }
  }
}

template <Kind K, bool Wide, class T, class L>
TF_AI void rows_body(const Rows<T, L>& a, int64_t r0, int64_t r1) {
  using C = compute_t<T>;
  constexpr bool stored = std::is_same_v<T, C>;
  const int64_t n = a.C;
  if (n < kShortRow) {
    rows_short<K, Wide, T, L>(a, r0, r1);
    return;
  }
  for (int64_t r = r0; r < r1; ++r) {
    const T* __restrict x = a.x + r * n;
    T* __restrict y = a.out + r * n;
    const C m = row_max(x, n);
    if constexpr (K == Kind::LogSoftmax) {
      const C sum = row_exp_sum<false, Wide>(x, m, y, n);
      const C lse = std::log(sum);  // (x - max) - log(sum), as rows_short
      for (int64_t j = 0; j < n; ++j) y[j] = static_cast<T>((static_cast<C>(x[j]) - m) - lse);
    } else {
      // float and double keep the exponentials in the output; half types recompute them.
      const C sum = row_exp_sum<stored, Wide>(x, m, y, n);
      const C inv = C(1) / sum;
      if constexpr (stored) {
        for (int64_t j = 0; j < n; ++j) y[j] = y[j] * inv;
      } else {
        for (int64_t j = 0; j < n; ++j)
          y[j] = static_cast<T>(expc<Wide>(static_cast<C>(x[j]) - m) * inv);
      }
      if constexpr (K == Kind::Xent) {
        const int64_t l = static_cast<int64_t>(a.label[r]);
        const C xl = static_cast<C>(x[l]) - m;
        // TF's kernel: log(sum) - (logits[label] - max); backprop = softmax - onehot.
        a.loss[r] = static_cast<T>(std::log(sum) - xl);
        y[l] = static_cast<T>(expc<Wide>(xl) * inv - C(1));
      }
    }
  }
}

#define TF_DEFINE_ROWS(NAME, TARGET, WIDE)                        \
  template <Kind K, class T, class L>                             \
  TARGET void NAME(const Rows<T, L>& a, int64_t r0, int64_t r1) { \
    rows_body<K, WIDE, T, L>(a, r0, r1);                          \
  }
TF_DEFINE_ROWS(rows_base, , !TF_CPU_MULTIVERSION)
#if TF_CPU_MULTIVERSION
TF_DEFINE_ROWS(rows_avx2, TF_TARGET_AVX2, true)
TF_DEFINE_ROWS(rows_avx512, TF_TARGET_AVX512, true)
#endif
#undef TF_DEFINE_ROWS

template <Kind K, class T, class L>
auto pick_rows() {
#if TF_CPU_MULTIVERSION
  // float32 and float64 rows gain from the wider ISAs (vectorised exp); the others stay baseline.
  if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
    switch (cpu::cpu_level()) {
      case cpu::CpuLevel::Avx512:
        return &rows_avx512<K, T, L>;
      case cpu::CpuLevel::Avx2:
        return &rows_avx2<K, T, L>;
      case cpu::CpuLevel::Baseline:
        break;
    }
  }
#endif
  return &rows_base<K, T, L>;
}

template <Kind K, class T, class L>
void run_rows(const Rows<T, L>& a, int64_t rows) {
  if (rows == 0 || a.C == 0) return;
  const auto fn = pick_rows<K, T, L>();
  const int64_t grain = std::max<int64_t>(1, kGrain / a.C);
  detail::parallel_for(rows, grain, [&](int64_t b, int64_t e) { fn(a, b, e); });
}

template <class T, class L>
void xent(const Tensor& labels, const Tensor& logits, Tensor& loss, Tensor& backprop) {
  const int64_t C = logits.shape().dim(-1);
  const int64_t rows = labels.num_elements();
  const L* lab = labels.data<L>();
  // Checked before any work (never throw inside the parallel region), as TF's CPU kernel.
  for (int64_t r = 0; r < rows; ++r) {
    const auto v = static_cast<int64_t>(lab[r]);
    TF_CHECK_ARG(v >= 0 && v < C, "sparse_softmax_cross_entropy_with_logits",
                 "Received a label value of {} which is outside the valid range of [0, {})", v, C);
  }
  const Rows<T, L> a{logits.data<T>(), backprop.data<T>(), loss.data<T>(), lab, C};
  run_rows<Kind::Xent, T, L>(a, rows);
}

template <Kind K, class T>
void row_op(const Tensor& x, Tensor& y) {
  const int64_t C = x.shape().dim(-1);
  if (C == 0) return;
  const Rows<T, int32_t> a{x.data<T>(), y.data<T>(), nullptr, nullptr, C};
  run_rows<K, T, int32_t>(a, x.num_elements() / C);
}

// g[r] * backprop[r, :] (compute in float for the half types).
template <class T>
void xent_grad(const Tensor& g, const Tensor& b, Tensor& out) {
  using C = compute_t<T>;
  const int64_t n = b.shape().dim(-1);
  const int64_t rows = g.num_elements();
  if (n == 0 || rows == 0) return;
  const T* gp = g.data<T>();
  const T* bp = b.data<T>();
  T* op = out.data<T>();
  detail::parallel_for(rows, std::max<int64_t>(1, 32768 / n), [=](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const C c = static_cast<C>(gp[r]);
      const T* __restrict src = bp + r * n;
      T* __restrict dst = op + r * n;
      for (int64_t j = 0; j < n; ++j) dst[j] = static_cast<T>(c * static_cast<C>(src[j]));
    }
  });
}

}  // namespace

void SparseSoftmaxCrossEntropyGrad::eval_cpu(std::span<const Tensor> in,
                                             std::span<Tensor> out) const {
  TF_DISPATCH_FLOAT_TYPES(in[1].dtype(), xent_grad<T>(in[0], in[1], out[0]));
}

void Softmax::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  TF_DISPATCH_FLOAT_TYPES(in[0].dtype(), row_op<Kind::Softmax, T>(in[0], out[0]));
}

void LogSoftmax::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  TF_DISPATCH_FLOAT_TYPES(in[0].dtype(), row_op<Kind::LogSoftmax, T>(in[0], out[0]));
}

void SparseSoftmaxCrossEntropy::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  TF_DISPATCH_FLOAT_TYPES(in[1].dtype(), {
    if (in[0].dtype() == int32)
      xent<T, int32_t>(in[0], in[1], out[0], out[1]);
    else
      xent<T, int64_t>(in[0], in[1], out[0], out[1]);
  });
}

}  // namespace tapeflow::prims
