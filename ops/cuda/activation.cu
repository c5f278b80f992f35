// CUDA kernels of the activation primitives: grid-stride loops; the float32 path moves 16 bytes
// per load when the pointers allow it.
#include "ops/activation.h"
#include "ops/cuda/common.cuh"

namespace tapeflow::prims {

namespace {

template <class T>
__device__ __forceinline__ T relu_of(T v) {
  if constexpr (std::is_unsigned_v<T>) {
    return v;
  } else {
    const auto c = cuda::load(v);
    return cuda::store<T>(c < decltype(c)(0) ? decltype(c)(0) : c);
  }
}
template <class T>
__device__ __forceinline__ T mask_of(T y, T g) {
  if constexpr (std::is_same_v<T, bool>) {
    return y ? g : false;
  } else {
    const auto c = cuda::load(y);
    return c > decltype(c)(0) ? g : cuda::store<T>(decltype(c)(0));
  }
}

template <class T>
__global__ void relu_kernel(const T* x, T* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    y[i] = relu_of(x[i]);
}
__global__ void relu_kernel_vec4(const float4* x, float4* y, int64_t n4) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n4;
       i += int64_t{gridDim.x} * blockDim.x) {
    float4 v = x[i];
    // As the CPU kernel and relu_of: NaN < 0 is false, so NaN passes, and so does -0.0.
    v.x = v.x < 0.f ? 0.f : v.x;
    v.y = v.y < 0.f ? 0.f : v.y;
    v.z = v.z < 0.f ? 0.f : v.z;
    v.w = v.w < 0.f ? 0.f : v.w;
    y[i] = v;
  }
}
template <class T>
__global__ void relu_grad_kernel(const T* y, const T* g, T* dx, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n;
       i += int64_t{gridDim.x} * blockDim.x)
    dx[i] = mask_of(y[i], g[i]);
}

bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

}  // namespace

void Relu::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const int64_t n = in[0].num_elements();
  if (n == 0) return;
  const Device dev = out[0].placement();
  cudaStream_t s = detail::cuda::stream(dev);
  if (in[0].dtype() == float32 && n % 4 == 0 && aligned16(in[0].raw_data()) &&
      aligned16(out[0].raw_data())) {
    relu_kernel_vec4<<<cuda::grid_for(n / 4, dev), cuda::kThreads, 0, s>>>(
        static_cast<const float4*>(in[0].raw_data()), static_cast<float4*>(out[0].raw_data()),
        n / 4);
  } else {
    TF_CUDA_DISPATCH_ALL_TYPES(in[0].dtype(), {
      relu_kernel<T><<<cuda::grid_for(n, dev), cuda::kThreads, 0, s>>>(
          cuda::dptr<T>(in[0]), cuda::dptr<T>(out[0]), n);
    });
  }
  detail::cuda::check_launch(name());
}

void ReluGrad::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const int64_t n = in[0].num_elements();
  if (n == 0) return;
  const Device dev = out[0].placement();
  cudaStream_t s = detail::cuda::stream(dev);
  TF_CUDA_DISPATCH_ALL_TYPES(in[0].dtype(), {
    relu_grad_kernel<T><<<cuda::grid_for(n, dev), cuda::kThreads, 0, s>>>(
        cuda::dptr<T>(in[0]), cuda::dptr<T>(in[1]), cuda::dptr<T>(out[0]), n);
  });
  detail::cuda::check_launch(name());
}

}  // namespace tapeflow::prims
