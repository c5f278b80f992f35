// CUDA kernel of UnsortedSegmentSum: one thread per data element, atomicAdd into the segment
// row (float16/bfloat16 atomics are native on sm_80+). The sum order is not fixed, as on TF's GPU.
#include "ops/cuda/common.cuh"
#include "ops/scatter.h"

namespace tapeflow::prims {

namespace {
// Ids outside [0, segments) are dropped (as TF's GPU kernel does): the public op checks them on
// the host, but inside a captured CUDA graph (gather's gradient after an unchecked gather)
// nothing is checked, and the kernel must not write out of bounds.
template <class T, class I>
__global__ void segment_sum_kernel(const T* data, const I* ids, T* out, int64_t n, int64_t d,
                                   int64_t segments) {
  const int64_t total = n * d;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / d, col = i - row * d;
    const int64_t id = static_cast<int64_t>(ids[row]);
    if (id >= 0 && id < segments) atomicAdd(out + id * d + col, data[i]);
  }
}
}  // namespace

void UnsortedSegmentSum::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Device dev = out[0].placement();
  cudaStream_t s = detail::cuda::stream(dev);
  if (out[0].nbytes() > 0)
    TF_CUDA_CHECK(cudaMemsetAsync(out[0].raw_data(), 0, out[0].nbytes(), s));
  const int64_t n = in[0].shape()[0], d = in[0].shape()[1];
  const int64_t segments = out[0].shape()[0];
  if (n * d == 0) return;
  const unsigned grid = cuda::grid_for(n * d, dev);
  TF_CUDA_DISPATCH_FLOAT_TYPES(in[0].dtype(), {
    if (in[1].dtype() == int32)
      segment_sum_kernel<T, int32_t><<<grid, cuda::kThreads, 0, s>>>(
          cuda::dptr<T>(in[0]), cuda::dptr<int32_t>(in[1]), cuda::dptr<T>(out[0]), n, d,
          segments);
    else
      segment_sum_kernel<T, int64_t><<<grid, cuda::kThreads, 0, s>>>(
          cuda::dptr<T>(in[0]), cuda::dptr<int64_t>(in[1]), cuda::dptr<T>(out[0]), n, d,
          segments);
  });
  detail::cuda::check_launch(name());
}

}  // namespace tapeflow::prims
