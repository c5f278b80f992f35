// CUDA kernels of Cumsum, Cumprod and CumulativeLogsumexp: the input is read as (outer, n, inner) around the scanned
// axis, one thread per (outer, inner) column runs the scan along n sequentially in the compute
// type (float for the half types), in the CPU kernel's order, so both devices add the same
// terms in the same order. Neighbouring threads read neighbouring columns (coalesced when inner
// is large); a scan along the last axis (inner = 1) has one thread per row, so a few long rows
// use few threads (no block-level parallel scan yet).
#include "ops/cuda/common.cuh"
#include "ops/cuda/elementwise_kernels.cuh"
#include "ops/scan.h"

namespace tapeflow::prims {

namespace {

namespace ew = cuda::ew;

struct SumStep {
  template <class C>
  __device__ static C identity() {
    return C(0);
  }
  template <class C>
  __device__ static C apply(C a, C b) {
    return ew::wrap_add(a, b);
  }
};
struct ProdStep {
  template <class C>
  __device__ static C identity() {
    return C(1);
  }
  template <class C>
  __device__ static C apply(C a, C b) {
    return ew::wrap_mul(a, b);
  }
};

// As the CPU kernel's: max + log1p(exp(min - max)), or max while it is -inf; NaN propagates.
struct LogSumExpStep {
  template <class C>
  __device__ static C identity() {
    return C(-INFINITY);
  }
  template <class C>
  __device__ static C apply(C a, C b) {
    if (a != a || b != b) return a + b;
    const C hi = a > b ? a : b, lo = a > b ? b : a;
    if (hi == C(-INFINITY)) return hi;
    return hi + ew::m_log1p(ew::m_exp(lo - hi));
  }
};

template <class Step, class T>
__global__ void __launch_bounds__(cuda::kThreads)
    scan_kernel(const T* __restrict__ x, T* __restrict__ y, int64_t outer, int64_t n,
                int64_t inner, bool exclusive, bool reverse) {
  using C = cuda::dcompute_t<T>;
  const int64_t columns = outer * inner;
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < columns;
       c += stride) {
    const int64_t o = c / inner, j = c - o * inner;
    const int64_t base = o * n * inner + j;
    C acc = Step::template identity<C>();
    for (int64_t step = 0; step < n; ++step) {
      const int64_t i = base + (reverse ? n - 1 - step : step) * inner;
      const C v = cuda::load(x[i]);
      if (exclusive) {
        y[i] = cuda::store<T>(acc);
        acc = Step::apply(acc, v);
      } else {
        acc = Step::apply(acc, v);
        y[i] = cuda::store<T>(acc);
      }
    }
  }
}

template <class Step, bool kFloatingOnly = false>
void scan_eval(const char* name, const Tensor& x, Tensor& y, int axis, bool exclusive,
               bool reverse) {
  const TensorShape& s = x.shape();
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
  const int64_t n = s[axis];
  if (outer * n * inner == 0) return;
  const Device dev = y.placement();
  cudaStream_t st = detail::cuda::stream(dev);
  const unsigned grid = cuda::grid_for(outer * inner, dev);
  TF_CUDA_DISPATCH_ALL_TYPES(x.dtype(), {
    if constexpr (kFloatingOnly ? ew::is_float_v<T> : !std::is_same_v<T, bool>)
      scan_kernel<Step, T><<<grid, cuda::kThreads, 0, st>>>(cuda::dptr<T>(x), cuda::dptr<T>(y),
                                                            outer, n, inner, exclusive, reverse);
  })
  detail::cuda::check_launch(name);
}

}  // namespace

void Cumsum::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  scan_eval<SumStep>(name(), in[0], out[0], axis, exclusive, reverse);
}

void Cumprod::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  scan_eval<ProdStep>(name(), in[0], out[0], axis, exclusive, reverse);
}

void CumulativeLogsumexp::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  scan_eval<LogSumExpStep, true>(name(), in[0], out[0], axis, exclusive, reverse);
}

}  // namespace tapeflow::prims
