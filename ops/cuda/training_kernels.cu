// Fused optimizer kernels; see ops/cuda/training_kernels.h.
#include <cuda_runtime.h>

#include <string>

#include "core/error.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/training_kernels.h"

namespace tapeflow::detail::cuda_training {

namespace {

namespace tcu = ::tapeflow::cuda;

// Correctly rounded operations that the compiler never contracts into fused multiply-adds.
__device__ __forceinline__ float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ __forceinline__ float sub_rn(float a, float b) {
  return __fsub_rn(a, b);
}
__device__ __forceinline__ float mul_rn(float a, float b) {
  return __fmul_rn(a, b);
}
__device__ __forceinline__ float div_rn(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ __forceinline__ float sqrt_rn(float a) {
  return __fsqrt_rn(a);
}
__device__ __forceinline__ double add_rn(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ __forceinline__ double sub_rn(double a, double b) {
  return __dsub_rn(a, b);
}
__device__ __forceinline__ double mul_rn(double a, double b) {
  return __dmul_rn(a, b);
}
__device__ __forceinline__ double div_rn(double a, double b) {
  return __ddiv_rn(a, b);
}
__device__ __forceinline__ double sqrt_rn(double a) {
  return __dsqrt_rn(a);
}

template <class T>
__global__ void adam_kernel(T* __restrict__ w, T* __restrict__ m, T* __restrict__ v,
                            const T* __restrict__ g, const T* __restrict__ alpha_p, T c1, T c2,
                            T eps, int64_t n) {
  const T alpha = *alpha_p;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x) {
    const T gi = g[i];
    const T mi = add_rn(m[i], mul_rn(sub_rn(gi, m[i]), c1));
    const T vi = add_rn(v[i], mul_rn(sub_rn(mul_rn(gi, gi), v[i]), c2));
    m[i] = mi;
    v[i] = vi;
    w[i] = sub_rn(w[i], div_rn(mul_rn(mi, alpha), add_rn(sqrt_rn(vi), eps)));
  }
}

}  // namespace

void apply_adam(Device dev, DType dt, void* w, void* m, void* v, const void* g, const void* alpha,
                double c1, double c2, double eps, int64_t n) {
  if (n == 0) return;
  cudaStream_t s = cuda::stream(dev);
  const unsigned grid = tcu::grid_for(n, dev);
  if (dt == float32) {
    adam_kernel<<<grid, tcu::kThreads, 0, s>>>(
        static_cast<float*>(w), static_cast<float*>(m), static_cast<float*>(v),
        static_cast<const float*>(g), static_cast<const float*>(alpha), static_cast<float>(c1),
        static_cast<float>(c2), static_cast<float>(eps), n);
  } else if (dt == float64) {
    adam_kernel<<<grid, tcu::kThreads, 0, s>>>(
        static_cast<double*>(w), static_cast<double*>(m), static_cast<double*>(v),
        static_cast<const double*>(g), static_cast<const double*>(alpha), c1, c2, eps, n);
  } else {
    throw InternalError("apply_adam CUDA kernel: unexpected dtype " + std::string(dtype_name(dt)));
  }
  cuda::check_launch("apply_adam");
}

}  // namespace tapeflow::detail::cuda_training
