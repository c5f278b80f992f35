// Fused optimizer kernels; see ops/cuda/training_kernels.h.
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "core/error.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/training_kernels.h"

namespace tapeflow::detail::cuda_training {

namespace {

namespace tcu = ::tapeflow::cuda;

// Correctly rounded operations that the compiler never contracts into fused multiply-adds.
#define TF_RN_BINARY(NAME, F32, F64)                                      \
  template <class T>                                                      \
  __device__ __forceinline__ T NAME(T a, T b) {                           \
    if constexpr (std::is_same_v<T, float>) return F32(a, b);             \
    else return F64(a, b);                                                \
  }
TF_RN_BINARY(add_rn, __fadd_rn, __dadd_rn)
TF_RN_BINARY(sub_rn, __fsub_rn, __dsub_rn)
TF_RN_BINARY(mul_rn, __fmul_rn, __dmul_rn)
TF_RN_BINARY(div_rn, __fdiv_rn, __ddiv_rn)
#undef TF_RN_BINARY
template <class T>
__device__ __forceinline__ T sqrt_rn(T a) {
  if constexpr (std::is_same_v<T, float>) return __fsqrt_rn(a);
  else return __dsqrt_rn(a);
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
