// Shared helpers for the CUDA kernels of ops/cuda/*.cu (internal).
//  - device element types: half_t/bfloat16_t storage maps to __half/__nv_bfloat16 (same bits),
//    and kernels compute in float for both (dcompute_t), as the CPU kernels do;
//  - TF_CUDA_DISPATCH_ALL_TYPES binds `T` to the device element type of a DType;
//  - launch geometry (grid-stride loops) and the broadcast index helper.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "core/cuda/context.h"
#include "core/dtype.h"
#include "core/shape.h"
#include "core/tensor.h"

namespace tapeflow::cuda {

// Device element type of a host element type.
template <class T>
struct device_type {
  using type = T;
};
template <>
struct device_type<half_t> {
  using type = __half;
};
template <>
struct device_type<bfloat16_t> {
  using type = __nv_bfloat16;
};
template <class T>
using device_t = typename device_type<T>::type;

// Arithmetic type: float for the half types, the type itself otherwise.
template <class T>
using dcompute_t =
    std::conditional_t<std::is_same_v<T, __half> || std::is_same_v<T, __nv_bfloat16>, float, T>;

template <class T>
__device__ __forceinline__ dcompute_t<T> load(T v) {
  if constexpr (std::is_same_v<T, __half>) return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(v);
  else return v;
}
template <class T, class C>
__device__ __forceinline__ T store(C v) {
  if constexpr (std::is_same_v<T, __half>) return __float2half_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(static_cast<float>(v));
  else if constexpr (std::is_same_v<T, bool>) return v != C(0);
  else return static_cast<T>(v);
}

// Typed device pointers of a tensor (the storage offset is applied).
template <class T>
inline T* dptr(Tensor& t) {
  return static_cast<T*>(t.raw_data());
}
template <class T>
inline const T* dptr(const Tensor& t) {
  return static_cast<const T*>(t.raw_data());
}

// Grid-stride launch geometry: 256 threads, enough blocks to fill the device a few times over.
inline constexpr int kThreads = 256;
inline unsigned grid_for(int64_t n, Device device, int threads = kThreads) {
  const int64_t want = (n + threads - 1) / threads;
  const int64_t cap = int64_t{::tapeflow::detail::cuda::properties(device).multiProcessorCount} * 32;
  const int64_t g = want < cap ? want : cap;
  return static_cast<unsigned>(g < 1 ? 1 : g);
}

// Up to 8 dimensions of sizes and element strides (0 for broadcast dimensions), passed by value
// to kernels, to map an output's linear index to an input's offset.
struct Strides {
  int rank = 0;
  int64_t size[8] = {};
  int64_t stride[8] = {};
};
__device__ __forceinline__ int64_t offset_of(int64_t linear, const Strides& s) {
  int64_t off = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    const int64_t i = linear % s.size[d];
    linear /= s.size[d];
    off += i * s.stride[d];
  }
  return off;
}

}  // namespace tapeflow::cuda

// Runs BODY with `T` bound to the DEVICE element type of DTYPE (every dtype).
#define TF_CUDA_DTYPE_CASE(ID, TYPE, ...) \
  case ::tapeflow::DTypeId::ID: {         \
    using T = TYPE;                       \
    __VA_ARGS__;                          \
    break;                                \
  }
#define TF_CUDA_DISPATCH_ALL_TYPES(DTYPE, ...)                 \
  switch ((DTYPE).id) {                                        \
    TF_CUDA_DTYPE_CASE(Float16, __half, __VA_ARGS__)           \
    TF_CUDA_DTYPE_CASE(BFloat16, __nv_bfloat16, __VA_ARGS__)   \
    TF_CUDA_DTYPE_CASE(Float32, float, __VA_ARGS__)            \
    TF_CUDA_DTYPE_CASE(Float64, double, __VA_ARGS__)           \
    TF_CUDA_DTYPE_CASE(Int32, int32_t, __VA_ARGS__)            \
    TF_CUDA_DTYPE_CASE(Int64, int64_t, __VA_ARGS__)            \
    TF_CUDA_DTYPE_CASE(UInt8, uint8_t, __VA_ARGS__)            \
    TF_CUDA_DTYPE_CASE(Bool, bool, __VA_ARGS__)                \
  }
#define TF_CUDA_DISPATCH_FLOAT_TYPES(DTYPE, ...)               \
  switch ((DTYPE).id) {                                        \
    TF_CUDA_DTYPE_CASE(Float16, __half, __VA_ARGS__)           \
    TF_CUDA_DTYPE_CASE(BFloat16, __nv_bfloat16, __VA_ARGS__)   \
    TF_CUDA_DTYPE_CASE(Float32, float, __VA_ARGS__)            \
    TF_CUDA_DTYPE_CASE(Float64, double, __VA_ARGS__)           \
    default: break;                                            \
  }
