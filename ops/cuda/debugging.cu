// tf.debugging's count of NaN and Inf elements on a GPU (ops/debugging.h): one grid-stride pass,
// a block-level sum in shared memory, three 64-bit atomics per block; the host reads the counts
// back (a stream synchronisation).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/allocator.h"
#include "core/error.h"
#include "ops/cuda/common.cuh"
#include "ops/debugging.h"

namespace tapeflow::detail {

namespace {

namespace tc = ::tapeflow::cuda;
namespace dc = ::tapeflow::detail::cuda;

// 0 finite, 1 NaN, 2 +Inf, 3 -Inf.
template <class T>
__device__ __forceinline__ int kind(T v) {
  const auto x = tc::load(v);
  if (isfinite(x)) return 0;
  if (isnan(x)) return 1;
  return x > 0 ? 2 : 3;
}

template <class T>
__global__ void count_kernel(const T* __restrict__ p, int64_t n,
                             unsigned long long* __restrict__ counts) {
  __shared__ unsigned long long block[3];
  if (threadIdx.x < 3) block[threadIdx.x] = 0;
  __syncthreads();
  unsigned long long local[3] = {0, 0, 0};
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int k = kind(p[i]);
    if (k != 0) ++local[k - 1];
  }
  for (int k = 0; k < 3; ++k)
    if (local[k] != 0) atomicAdd(&block[k], local[k]);
  __syncthreads();
  if (threadIdx.x < 3 && block[threadIdx.x] != 0)
    atomicAdd(&counts[threadIdx.x], block[threadIdx.x]);
}

}  // namespace

NonFiniteCounts count_nonfinite_cuda(const Tensor& t) {
  const Device dev = t.placement();
  const int64_t n = t.num_elements();
  if (n == 0) return {};
  cudaStream_t s = dc::stream(dev);
  Tensor scratch = detail::empty(TensorShape{3}, int64, dev);
  auto* counts = static_cast<unsigned long long*>(scratch.raw_data());
  TF_CUDA_CHECK(cudaMemsetAsync(counts, 0, 3 * sizeof(unsigned long long), s));
  const unsigned grid = tc::grid_for(n, dev);
  switch (t.dtype().id) {
    case DTypeId::Float16:
      count_kernel<<<grid, tc::kThreads, 0, s>>>(static_cast<const __half*>(t.raw_data()), n,
                                                 counts);
      break;
    case DTypeId::BFloat16:
      count_kernel<<<grid, tc::kThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(t.raw_data()), n,
                                                 counts);
      break;
    case DTypeId::Float32:
      count_kernel<<<grid, tc::kThreads, 0, s>>>(static_cast<const float*>(t.raw_data()), n,
                                                 counts);
      break;
    case DTypeId::Float64:
      count_kernel<<<grid, tc::kThreads, 0, s>>>(static_cast<const double*>(t.raw_data()), n,
                                                 counts);
      break;
    default:
      return {};
  }
  dc::check_launch("check_numerics");
  unsigned long long host[3] = {0, 0, 0};
  detail::copy_bytes(host, Device{}, counts, dev, sizeof(host));
  NonFiniteCounts c;
  c.nan = static_cast<int64_t>(host[0]);
  c.pos_inf = static_cast<int64_t>(host[1]);
  c.neg_inf = static_cast<int64_t>(host[2]);
  return c;
}

}  // namespace tapeflow::detail
