// CUDA kernels of the loss family: one warp per row up to 1024 classes (8 rows per block of 256
// threads), one block per row beyond (any length: threads stride over the row, partial results
// meet through warp shuffles and 33 words of shared memory). Each row is read three times (max,
// sum of exponentials, outputs), from L1/L2 after the first pass; half types compute in float.
// The cross-entropy kernel checks its labels itself: an out-of-range label writes NaN to its row
// and records the smallest bad row in a device word, which the host reads back once per call
// (that read waits for the stream: the error must be thrown by the call, as on the CPU); only
// when a row is flagged does a second read fetch the label for the message. Inside a CUDA-graph
// capture the host read is left out: bad rows stay NaN (TF's GPU behaviour).
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <string>

#include "core/allocator.h"
#include "ops/cuda/common.cuh"
#include "ops/loss.h"

namespace tapeflow::prims {

namespace {

namespace tc = ::tapeflow::cuda;
namespace dc = ::tapeflow::detail::cuda;

enum class Kind { Softmax, LogSoftmax, Xent };

constexpr unsigned kFull = 0xffffffffu;
constexpr int kWarpRowsMaxC = 1024;  // above: one block per row
constexpr int kWarpBlock = 256;      // 8 rows per block on the warp path

__device__ __forceinline__ float dexp(float v) {
  return expf(v);
}
__device__ __forceinline__ double dexp(double v) {
  return ::exp(v);
}
__device__ __forceinline__ float dlog(float v) {
  return logf(v);
}
__device__ __forceinline__ double dlog(double v) {
  return ::log(v);
}
// fmax skips NaN on every lane alike, so all lanes agree on the row's maximum (a NaN reaches
// every output through the sum instead, as on the CPU).
__device__ __forceinline__ float dmax(float a, float b) {
  return fmaxf(a, b);
}
__device__ __forceinline__ double dmax(double a, double b) {
  return ::fmax(a, b);
}

template <class A>
__device__ __forceinline__ A warp_max(A v) {
  for (int o = 16; o > 0; o >>= 1) v = dmax(v, __shfl_xor_sync(kFull, v, o));
  return v;
}
template <class A>
__device__ __forceinline__ A warp_sum(A v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(kFull, v, o);
  return v;
}

// Whole-block reduction; every thread gets the result. sh holds 33 values; the trailing
// barrier lets the next reduction reuse it.
template <bool Max, class A>
__device__ __forceinline__ A block_reduce(A v, A* sh) {
  v = Max ? warp_max(v) : warp_sum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
  if (lane == 0) sh[warp] = v;
  __syncthreads();
  if (warp == 0) {
    A t = lane < warps ? sh[lane] : (Max ? -std::numeric_limits<A>::infinity() : A(0));
    t = Max ? warp_max(t) : warp_sum(t);
    if (lane == 0) sh[32] = t;
  }
  __syncthreads();
  const A r = sh[32];
  __syncthreads();
  return r;
}

template <bool Block, bool Max, class A>
__device__ __forceinline__ A group_reduce(A v, A* sh) {
  if constexpr (Block)
    return block_reduce<Max>(v, sh);
  else
    return Max ? warp_max(v) : warp_sum(v);
}

// x, y: [rows, C]; Xent: y is the backprop, loss [rows], labels [rows].
template <Kind K, bool Block, class T, class L>
__global__ void rows_kernel(const T* __restrict__ x, T* __restrict__ y, T* __restrict__ loss,
                            const L* __restrict__ labels, int64_t rows, int64_t C,
                            unsigned long long* __restrict__ bad) {
  using A = tc::dcompute_t<T>;
  __shared__ A sh[33];
  int tid, nthreads;
  int64_t r, rstride;
  if constexpr (Block) {
    tid = threadIdx.x;
    nthreads = blockDim.x;
    r = blockIdx.x;
    rstride = gridDim.x;
  } else {
    const int per_block = blockDim.x >> 5;
    tid = threadIdx.x & 31;
    nthreads = 32;
    r = static_cast<int64_t>(blockIdx.x) * per_block + (threadIdx.x >> 5);
    rstride = static_cast<int64_t>(gridDim.x) * per_block;
  }
  const A nan = std::numeric_limits<A>::quiet_NaN();
  // Every thread of a group (warp or block) walks the same rows, so the branches below and
  // the reductions' barriers are uniform within the group.
  for (; r < rows; r += rstride) {
    const T* xr = x + r * C;
    T* yr = y + r * C;
    int64_t l = 0;
    if constexpr (K == Kind::Xent) {
      l = static_cast<int64_t>(labels[r]);
      if (l < 0 || l >= C) {
        if (tid == 0) {
          atomicMin(bad, static_cast<unsigned long long>(r));
          loss[r] = tc::store<T>(nan);
        }
        for (int64_t j = tid; j < C; j += nthreads) yr[j] = tc::store<T>(nan);
        continue;
      }
    }
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t j = tid; j < C; j += nthreads) m = dmax(m, tc::load(xr[j]));
    m = group_reduce<Block, true>(m, sh);
    A s = 0;
    for (int64_t j = tid; j < C; j += nthreads) s += dexp(tc::load(xr[j]) - m);
    s = group_reduce<Block, false>(s, sh);
    if constexpr (K == Kind::LogSoftmax) {
      // (x - max) - log(sum), as the CPU kernel and TF (max + log(sum) rounds for large x).
      const A lse = dlog(s);
      for (int64_t j = tid; j < C; j += nthreads)
        yr[j] = tc::store<T>((tc::load(xr[j]) - m) - lse);
    } else {
      const A inv = A(1) / s;
      for (int64_t j = tid; j < C; j += nthreads) {
        A p = dexp(tc::load(xr[j]) - m) * inv;
        if constexpr (K == Kind::Xent) p = j == l ? p - A(1) : p;
        yr[j] = tc::store<T>(p);
      }
      // TF's kernel: log(sum) - (logits[label] - max).
      if constexpr (K == Kind::Xent)
        if (tid == 0) loss[r] = tc::store<T>(dlog(s) - (tc::load(xr[l]) - m));
    }
  }
}

template <Kind K, class T, class L>
void launch_rows(const T* x, T* y, T* loss, const L* labels, int64_t rows, int64_t C,
                 unsigned long long* bad, Device dev) {
  cudaStream_t s = dc::stream(dev);
  const int64_t sms = dc::properties(dev).multiProcessorCount;
  if (C <= kWarpRowsMaxC) {
    const int64_t per_block = kWarpBlock / 32;
    const int64_t want = (rows + per_block - 1) / per_block;
    const auto blocks = static_cast<unsigned>(want < sms * 32 ? want : sms * 32);
    rows_kernel<K, false, T, L><<<blocks, kWarpBlock, 0, s>>>(x, y, loss, labels, rows, C, bad);
  } else {
    const int threads = C >= 16384 ? 1024 : 256;
    const auto blocks = static_cast<unsigned>(rows < sms * 16 ? rows : sms * 16);
    rows_kernel<K, true, T, L><<<blocks, threads, 0, s>>>(x, y, loss, labels, rows, C, bad);
  }
}

template <Kind K>
void row_op(const char* op, const Tensor& x, Tensor& y) {
  const int64_t C = x.shape().dim(-1);
  const int64_t n = x.num_elements();
  if (n == 0 || C == 0) return;
  TF_CUDA_DISPATCH_FLOAT_TYPES(x.dtype(), {
    launch_rows<K, T, int32_t>(tc::dptr<T>(x), tc::dptr<T>(y), nullptr, nullptr, n / C, C, nullptr,
                               y.placement());
  });
  dc::check_launch(op);
}

template <class L>
void xent(const char* op, const Tensor& labels, const Tensor& logits, Tensor& loss,
          Tensor& backprop) {
  const int64_t C = logits.shape().dim(-1);
  const int64_t rows = labels.num_elements();
  if (rows == 0) return;
  const Device dev = loss.placement();
  Tensor flag = detail::empty(TensorShape{1}, int64, dev);
  auto* bad = static_cast<unsigned long long*>(flag.raw_data());
  TF_CUDA_CHECK(cudaMemsetAsync(bad, 0xff, sizeof(unsigned long long), dc::stream(dev)));
  const L* lab = tc::dptr<L>(labels);
  TF_CUDA_DISPATCH_FLOAT_TYPES(logits.dtype(), {
    launch_rows<Kind::Xent, T, L>(tc::dptr<T>(logits), tc::dptr<T>(backprop), tc::dptr<T>(loss),
                                  lab, rows, C, bad, dev);
  });
  dc::check_launch(op);
  // Recorded into a CUDA graph (a captured traced step), nothing may be read on the host: a bad
  // label leaves its row's loss and gradient NaN, as TF's GPU kernel does.
  if (dc::in_capture_scope(dev)) return;
  // The one host read per call: copy_bytes waits for the stream, so the error is thrown here,
  // by the call that got the bad label, as on the CPU.
  unsigned long long first = 0;
  detail::copy_bytes(&first, Device{}, bad, dev, sizeof(first));
  if (first != std::numeric_limits<unsigned long long>::max()) {
    L v{};
    detail::copy_bytes(&v, Device{}, lab + first, dev, sizeof(L));
    throw InvalidArgumentError(std::string("[") + op + "] Received a label value of " +
                               std::to_string(static_cast<int64_t>(v)) +
                               " which is outside the valid range of [0, " + std::to_string(C) +
                               ")");
  }
}

template <class T>
__global__ void xent_grad_kernel(const T* __restrict__ g, const T* __restrict__ b,
                                 T* __restrict__ out, int64_t n, int64_t C) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = tc::store<T>(tc::load(g[i / C]) * tc::load(b[i]));
}

}  // namespace

void SparseSoftmaxCrossEntropyGrad::eval_cuda(std::span<const Tensor> in,
                                              std::span<Tensor> out) const {
  const int64_t n = out[0].num_elements();
  const int64_t C = in[1].shape().dim(-1);
  if (n == 0 || C == 0) return;
  const Device dev = out[0].placement();
  cudaStream_t s = dc::stream(dev);
  TF_CUDA_DISPATCH_FLOAT_TYPES(in[1].dtype(), {
    xent_grad_kernel<T><<<tc::grid_for(n, dev), tc::kThreads, 0, s>>>(
        tc::dptr<T>(in[0]), tc::dptr<T>(in[1]), tc::dptr<T>(out[0]), n, C);
  });
  dc::check_launch(name());
}

void Softmax::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  row_op<Kind::Softmax>(name(), in[0], out[0]);
}

void LogSoftmax::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  row_op<Kind::LogSoftmax>(name(), in[0], out[0]);
}

void SparseSoftmaxCrossEntropy::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  if (in[0].dtype() == int32)
    xent<int32_t>(name(), in[0], in[1], out[0], out[1]);
  else
    xent<int64_t>(name(), in[0], in[1], out[0], out[1]);
}

}  // namespace tapeflow::prims
