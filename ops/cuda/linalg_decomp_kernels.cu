// Small CUDA kernels of the decompositions; see ops/cuda/linalg_decomp_kernels.h.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/linalg_decomp_kernels.h"

namespace tapeflow::detail::cuda_linalg {

namespace {

namespace tcu = ::tapeflow::cuda;
using tcu::grid_for;
using tcu::kThreads;

template <class T>
__global__ void zero_triangle_kernel(T* x, int64_t total, int64_t rows, int64_t cols, bool upper) {
  const int64_t mat = rows * cols;
  for (int64_t o = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; o < total;
       o += int64_t{gridDim.x} * blockDim.x) {
    const int64_t r = o % mat, i = r / cols, j = r % cols;
    if (upper ? j > i : j < i) x[o] = T(0);
  }
}

}  // namespace

void zero_triangle(Device dev, DType dt, void* x, int64_t batches, int64_t rows, int64_t cols,
                   bool upper) {
  const int64_t total = batches * rows * cols;
  if (total == 0) return;
  cudaStream_t s = cuda::stream(dev);
  if (dt == float32)
    zero_triangle_kernel<<<grid_for(total, dev), kThreads, 0, s>>>(static_cast<float*>(x), total,
                                                                   rows, cols, upper);
  else if (dt == float64)
    zero_triangle_kernel<<<grid_for(total, dev), kThreads, 0, s>>>(static_cast<double*>(x), total,
                                                                   rows, cols, upper);
  else
    throw InternalError("zero_triangle: unexpected dtype " + std::string(dtype_name(dt)));
  cuda::check_launch("linalg decomposition");
}

}  // namespace tapeflow::detail::cuda_linalg
