// CUDA kernels of UnsortedSegmentSum (one thread per data element, atomicAdd into the segment
// row; float16/bfloat16 atomics are native on sm_80+; the sum order is not fixed, as on TF's
// GPU) and ScatterRowsUpdate (below).
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

namespace {
// ScatterRowsUpdate in two passes, so that the last update at a row wins as on the CPU: each
// update claims its row with atomicMax of its index, then each element of an update is written
// only by the claiming update. Rows outside [0, rows) are skipped (unchecked traced indices).
__global__ void claim_rows_kernel(const int64_t* pos, long long* winner, int64_t n, int64_t rows) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    if (pos[i] >= 0 && pos[i] < rows) atomicMax(winner + pos[i], static_cast<long long>(i));
}

template <class E>
__global__ void write_rows_kernel(const int64_t* pos, const long long* winner, const E* updates,
                                  E* out, int64_t n, int64_t d, int64_t rows) {
  const int64_t total = n * d;
  for (int64_t k = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; k < total;
       k += int64_t{gridDim.x} * blockDim.x) {
    const int64_t i = k / d, col = k - i * d;
    const int64_t r = pos[i];
    if (r >= 0 && r < rows && winner[r] == i) out[r * d + col] = updates[k];
  }
}
}  // namespace

void ScatterRowsUpdate::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Device dev = out[0].placement();
  cudaStream_t s = detail::cuda::stream(dev);
  if (in[0].nbytes() > 0)
    TF_CUDA_CHECK(cudaMemcpyAsync(out[0].raw_data(), in[0].raw_data(), in[0].nbytes(),
                                  cudaMemcpyDeviceToDevice, s));
  const int64_t rows = in[0].shape()[0], d = in[0].shape()[1], n = in[1].shape()[0];
  if (n == 0 || d == 0 || rows == 0) return;
  // Scratch from the device's caching allocator; all bytes 0xff is -1: no claim yet.
  Tensor winner = detail::empty(TensorShape{rows}, int64, dev);
  TF_CUDA_CHECK(cudaMemsetAsync(winner.raw_data(), 0xff, winner.nbytes(), s));
  const auto* pos = cuda::dptr<int64_t>(in[1]);
  auto* claims = static_cast<long long*>(winner.raw_data());
  claim_rows_kernel<<<cuda::grid_for(n, dev), cuda::kThreads, 0, s>>>(pos, claims, n, rows);
  detail::cuda::check_launch(name());
  const unsigned grid = cuda::grid_for(n * d, dev);
  TF_DISPATCH_BY_SIZE(dtype_size(in[0].dtype()), {
    write_rows_kernel<E>
        <<<grid, cuda::kThreads, 0, s>>>(pos, claims, static_cast<const E*>(in[2].raw_data()),
                                         static_cast<E*>(out[0].raw_data()), n, d, rows);
  });
  detail::cuda::check_launch(name());
}

}  // namespace tapeflow::prims
