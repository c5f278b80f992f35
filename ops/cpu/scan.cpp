// CPU kernels of Cumsum, Cumprod and CumulativeLogsumexp. The input is read as (outer, n, inner)
// around the scanned axis; each outer slice keeps a running row of `inner` accumulators (in float
// for the half types), so the inner loop runs over contiguous memory and vectorises. Outer slices
// are split over the thread pool. Integers wrap around on overflow, as TF's.
#include "ops/scan.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/parallel.h"
#include "ops/cpu/unary_ops.h"

namespace tapeflow::prims {

namespace {

struct SumStep {
  template <class C>
  static C identity() {
    return C(0);
  }
  template <class C>
  static C apply(C a, C b) {
    return cpu::wrap_add(a, b);
  }
};
struct ProdStep {
  template <class C>
  static C identity() {
    return C(1);
  }
  template <class C>
  static C apply(C a, C b) {
    return cpu::wrap_mul(a, b);
  }
};

// max + log1p(exp(min - max)), or max itself while max is -inf (both -inf), as TF's step; a NaN
// operand gives NaN (TF's kernel drops it: [1, NaN, 2] gives [1, 1.69, 2.55] there).
struct LogSumExpStep {
  template <class C>
  static C identity() {
    return -std::numeric_limits<C>::infinity();
  }
  template <class C>
  static C apply(C a, C b) {
    if (a != a || b != b) return a + b;
    const C hi = std::max(a, b), lo = std::min(a, b);
    if (hi == -std::numeric_limits<C>::infinity()) return hi;
    return hi + std::log1p(std::exp(lo - hi));
  }
};

template <class Step, class T>
void scan_typed(const Tensor& x, Tensor& y, int axis, bool exclusive, bool reverse) {
  using C = compute_t<T>;
  const TensorShape& s = x.shape();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
  const int64_t n = s[axis];
  if (outer * n * inner == 0) return;
  const T* src = x.data<T>();
  T* dst = y.data<T>();
  const int64_t slice = n * inner;
  detail::parallel_for(outer, std::max<int64_t>(1, 16384 / slice), [&](int64_t b, int64_t e) {
    std::vector<C> acc(static_cast<size_t>(inner));
    for (int64_t o = b; o < e; ++o) {
      for (auto& a : acc) a = Step::template identity<C>();
      const T* in = src + o * slice;
      T* out = dst + o * slice;
      for (int64_t step = 0; step < n; ++step) {
        const int64_t i = reverse ? n - 1 - step : step;
        const T* xi = in + i * inner;
        T* yi = out + i * inner;
        C* a = acc.data();
        if (exclusive) {
          for (int64_t j = 0; j < inner; ++j) {
            yi[j] = cpu::store<T>(a[j]);
            a[j] = Step::apply(a[j], cpu::load<C>(xi[j]));
          }
        } else {
          for (int64_t j = 0; j < inner; ++j) {
            a[j] = Step::apply(a[j], cpu::load<C>(xi[j]));
            yi[j] = cpu::store<T>(a[j]);
          }
        }
      }
    }
  });
}

template <class Step>
void scan_eval(const Tensor& x, Tensor& y, int axis, bool exclusive, bool reverse) {
  TF_DISPATCH_ALL_TYPES(x.dtype(), {
    if constexpr (!std::is_same_v<T, bool>) scan_typed<Step, T>(x, y, axis, exclusive, reverse);
  })
}

}  // namespace

void Cumsum::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  scan_eval<SumStep>(in[0], out[0], axis, exclusive, reverse);
}

void Cumprod::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  scan_eval<ProdStep>(in[0], out[0], axis, exclusive, reverse);
}

void CumulativeLogsumexp::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  TF_DISPATCH_ALL_TYPES(in[0].dtype(), {
    if constexpr (cpu::is_float_v<T>)
      scan_typed<LogSumExpStep, T>(in[0], out[0], axis, exclusive, reverse);
  })
}

}  // namespace tapeflow::prims
