// CUDA kernels of the random family: the same numbers as the CPU kernels (ops/cpu/random.cpp) for
// the same seeds. Each thread computes whole Philox blocks with the one implementation in
// ops/cpu/philox.h (element i from block i / 4 for 32-bit outputs, i / 2 for 64-bit ones) and
// converts them exactly as the CPU does. Float arithmetic goes through the round-to-nearest
// intrinsics (__fmul_rn, __fadd_rn, __fsqrt_rn, ...) so that nvcc never fuses a multiply-add:
// float16/bfloat16/float32 values are then the CPU's bits; float64 normals use CUDA's log/sin/cos,
// which may differ from the CPU's (tapeflow's own, ops/cpu/unary_ops.h) in the last bits.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "ops/cpu/philox.h"
#include "ops/cuda/common.cuh"
#include "ops/random.h"

namespace tapeflow::prims {

namespace {

namespace cu = ::tapeflow::detail::cuda;
using ::tapeflow::cuda::grid_for;
using ::tapeflow::cuda::kThreads;

constexpr double kTwoPi = 6.283185307179586476925286766559;

// ---- host-side parameters, computed as ops/cpu/random.cpp computes them ----

// One float16/bfloat16 ulp toward -inf (ops/cpu/random.cpp's below() for the half types).
uint16_t below_half_bits(uint16_t bits) {
  constexpr uint16_t sign = 0x8000;  // both formats keep the sign in the top bit
  if ((bits & 0x7fff) == 0) return static_cast<uint16_t>(sign | 1);  // +-0 -> -min
  if (bits & sign) return static_cast<uint16_t>(bits + 1);
  return static_cast<uint16_t>(bits - 1);
}

template <class T>
constexpr int mantissa_bits() {
  if constexpr (std::is_same_v<T, __half>)
    return 10;
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return 7;
  else
    return 23;
}

// ---- device helpers ----

template <class T>
__device__ __forceinline__ T from_float_rn(float v) {
  if constexpr (std::is_same_v<T, __half>)
    return __float2half_rn(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __float2bfloat16_rn(v);
  else
    return v;
}

template <class T>
__device__ __forceinline__ float to_float(T v) {
  if constexpr (std::is_same_v<T, __half>)
    return __half2float(v);
  else if constexpr (std::is_same_v<T, __nv_bfloat16>)
    return __bfloat162float(v);
  else
    return v;
}

template <class T>
__device__ __forceinline__ T from_bits(uint16_t b) {
  if constexpr (std::is_same_v<T, __half>)
    return __ushort_as_half(b);
  else
    return __ushort_as_bfloat16(b);
}

// ---- kernels: one Philox block per loop iteration, grid-stride over the blocks ----

// float32 uniform: lo + uniform_float(w) * range, rounded before the add; a value that reaches
// hi becomes top (the largest float below hi).
__global__ void uniform_f32_kernel(float* out, int64_t n, uint64_t seed, uint64_t seed2, float lo,
                                   float range, float hi, float top) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    const philox::Words w = philox::block(seed, seed2, static_cast<uint64_t>(b));
    for (int j = 0; j < 4; ++j) {
      const int64_t i = 4 * b + j;
      if (i >= n) break;
      const float v = __fadd_rn(lo, __fmul_rn(philox::uniform_float(w.v[j]), range));
      out[i] = v < hi ? v : top;
    }
  }
}

// float16/bfloat16 uniform: the top 10 (7) bits scaled, lo + u * range in float32, rounded to T;
// a value whose float is not below hi becomes top_bits.
template <class T>
__global__ void uniform_half_kernel(T* out, int64_t n, uint64_t seed, uint64_t seed2, float lo,
                                    float range, float hi, uint16_t top_bits) {
  constexpr int bits = mantissa_bits<T>();
  const T top = from_bits<T>(top_bits);
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    const philox::Words w = philox::block(seed, seed2, static_cast<uint64_t>(b));
    for (int j = 0; j < 4; ++j) {
      const int64_t i = 4 * b + j;
      if (i >= n) break;
      const T v = from_float_rn<T>(
          __fadd_rn(lo, __fmul_rn(philox::uniform_float_bits(w.v[j], bits), range)));
      out[i] = to_float(v) < hi ? v : top;
    }
  }
}

// float64 uniform: two words per element (block i / 2).
__global__ void uniform_f64_kernel(double* out, int64_t n, uint64_t seed, uint64_t seed2, double lo,
                                   double range, double hi, double top) {
  const int64_t blocks = (n + 1) / 2;
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    const philox::Words w = philox::block(seed, seed2, static_cast<uint64_t>(b));
    for (int j = 0; j < 2; ++j) {
      const int64_t i = 2 * b + j;
      if (i >= n) break;
      const double u = philox::uniform_double(w.v[2 * j], w.v[2 * j + 1]);
      const double v = __dadd_rn(lo, __dmul_rn(u, range));
      out[i] = v < hi ? v : top;
    }
  }
}

// int32 uniform: base + word % range (the word itself for the full 2^32 range), wrapping.
__global__ void uniform_i32_kernel(int32_t* out, int64_t n, uint64_t seed, uint64_t seed2,
                                   uint32_t base, uint32_t range, bool full) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    const philox::Words w = philox::block(seed, seed2, static_cast<uint64_t>(b));
    for (int j = 0; j < 4; ++j) {
      const int64_t i = 4 * b + j;
      if (i >= n) break;
      const uint32_t d = full ? w.v[j] : w.v[j] % range;
      out[i] = static_cast<int32_t>(base + d);
    }
  }
}

// int64 uniform: base + (hi:lo word pair) % range (the pair itself when range is 0, i.e. 2^64).
__global__ void uniform_i64_kernel(int64_t* out, int64_t n, uint64_t seed, uint64_t seed2,
                                   uint64_t base, uint64_t range) {
  const int64_t blocks = (n + 1) / 2;
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    const philox::Words w = philox::block(seed, seed2, static_cast<uint64_t>(b));
    for (int j = 0; j < 2; ++j) {
      const int64_t i = 2 * b + j;
      if (i >= n) break;
      const uint64_t d =
          (static_cast<uint64_t>(w.v[2 * j]) << 32) | static_cast<uint64_t>(w.v[2 * j + 1]);
      out[i] = static_cast<int64_t>(base + (range == 0 ? d : d % range));
    }
  }
}

// float16/bfloat16/float32 normal: Box-Muller on words (0, 1) and (2, 3) of block i / 4, as
// ops/cpu/random.cpp's box_muller_prepare and normal_kernel (cos for the even element of a
// pair, sin for the odd one).
template <class T>
__global__ void normal_f32_kernel(T* out, int64_t n, uint64_t seed, uint64_t seed2, float mean,
                                  float sd) {
  const int64_t blocks = (n + 3) / 4;
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    const philox::Words w = philox::block(seed, seed2, static_cast<uint64_t>(b));
    for (int k = 0; k < 2; ++k) {
      const int64_t i = 4 * b + 2 * k;
      if (i >= n) break;
      const float u1 = __fsub_rn(1.0f, philox::uniform_float(w.v[2 * k]));
      const float u2 = philox::uniform_float(w.v[2 * k + 1]);
      const float v = __fmul_rn(-2.0f, philox::log_unit(u1));
      float s, c;
      philox::sincos_2pi(u2, s, c);
      const float r = __fsqrt_rn(v);
      out[i] = from_float_rn<T>(__fadd_rn(mean, __fmul_rn(sd, __fmul_rn(r, c))));
      if (i + 1 < n) out[i + 1] = from_float_rn<T>(__fadd_rn(mean, __fmul_rn(sd, __fmul_rn(r, s))));
    }
  }
}

// float64 normal: one block per pair of outputs (u1 from words 0-1, u2 from words 2-3).
__global__ void normal_f64_kernel(double* out, int64_t n, uint64_t seed, uint64_t seed2,
                                  double mean, double sd) {
  const int64_t blocks = (n + 1) / 2;
  for (int64_t b = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; b < blocks;
       b += int64_t{gridDim.x} * blockDim.x) {
    const philox::Words w = philox::block(seed, seed2, static_cast<uint64_t>(b));
    const double u1 = __dsub_rn(1.0, philox::uniform_double(w.v[0], w.v[1]));  // (0, 1]
    const double u2 = philox::uniform_double(w.v[2], w.v[3]);
    const double r = __dsqrt_rn(__dmul_rn(-2.0, ::log(u1)));
    const double t = __dmul_rn(kTwoPi, u2);
    const int64_t i = 2 * b;
    out[i] = __dadd_rn(mean, __dmul_rn(sd, __dmul_rn(r, ::cos(t))));
    if (i + 1 < n) out[i + 1] = __dadd_rn(mean, __dmul_rn(sd, __dmul_rn(r, ::sin(t))));
  }
}

// Launch geometry: one thread per Philox block.
unsigned grid_for_blocks(int64_t n, int per_block, Device dev) {
  return grid_for((n + per_block - 1) / per_block, dev);
}

}  // namespace

void RandomNormal::eval_cuda(std::span<const Tensor>, std::span<Tensor> out) const {
  const int64_t n = out[0].num_elements();
  if (n == 0) return;
  const Device dev = out[0].placement();
  cudaStream_t s = cu::stream(dev);
  void* p = out[0].raw_data();
  if (dtype == float64) {
    normal_f64_kernel<<<grid_for_blocks(n, 2, dev), kThreads, 0, s>>>(static_cast<double*>(p), n,
                                                                      seed, seed2, mean, stddev);
  } else {
    const float m = static_cast<float>(mean), sd = static_cast<float>(stddev);
    const unsigned grid = grid_for_blocks(n, 4, dev);
    if (dtype == float32)
      normal_f32_kernel<float>
          <<<grid, kThreads, 0, s>>>(static_cast<float*>(p), n, seed, seed2, m, sd);
    else if (dtype == float16)
      normal_f32_kernel<__half>
          <<<grid, kThreads, 0, s>>>(static_cast<__half*>(p), n, seed, seed2, m, sd);
    else if (dtype == bfloat16)
      normal_f32_kernel<__nv_bfloat16>
          <<<grid, kThreads, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed, seed2, m, sd);
    else
      throw InvalidArgumentError(std::string("[random_normal] unsupported dtype ") +
                                 std::string(dtype_name(dtype)));
  }
  cu::check_launch(name());
}

void RandomUniform::eval_cuda(std::span<const Tensor>, std::span<Tensor> out) const {
  const int64_t n = out[0].num_elements();
  if (n == 0) return;
  const Device dev = out[0].placement();
  cudaStream_t s = cu::stream(dev);
  void* p = out[0].raw_data();
  if (dtype == int32 || dtype == int64) {
    const uint64_t range = static_cast<uint64_t>(imax) - static_cast<uint64_t>(imin);
    const uint64_t base = static_cast<uint64_t>(imin);
    if (dtype == int32) {
      // range <= 2^32; a full 2^32 range takes the draw as it is.
      uniform_i32_kernel<<<grid_for_blocks(n, 4, dev), kThreads, 0, s>>>(
          static_cast<int32_t*>(p), n, seed, seed2, static_cast<uint32_t>(base),
          static_cast<uint32_t>(range), range > 0xffffffffull);
    } else {
      uniform_i64_kernel<<<grid_for_blocks(n, 2, dev), kThreads, 0, s>>>(
          static_cast<int64_t*>(p), n, seed, seed2, base, range);
    }
  } else if (dtype == float64) {
    const double lo = minval, hi = maxval, range = hi - lo;
    const double top = std::nextafter(hi, -std::numeric_limits<double>::infinity());
    uniform_f64_kernel<<<grid_for_blocks(n, 2, dev), kThreads, 0, s>>>(
        static_cast<double*>(p), n, seed, seed2, lo, range, hi, top);
  } else {
    const float lo = static_cast<float>(minval), range = static_cast<float>(maxval - minval);
    const unsigned grid = grid_for_blocks(n, 4, dev);
    if (dtype == float32) {
      const float hi = static_cast<float>(maxval);
      const float top = std::nextafter(hi, -std::numeric_limits<float>::infinity());
      uniform_f32_kernel<<<grid, kThreads, 0, s>>>(static_cast<float*>(p), n, seed, seed2, lo,
                                                   range, hi, top);
    } else if (dtype == float16) {
      const half_t hi_t(static_cast<float>(maxval));
      uniform_half_kernel<__half><<<grid, kThreads, 0, s>>>(static_cast<__half*>(p), n, seed, seed2,
                                                            lo, range, static_cast<float>(hi_t),
                                                            below_half_bits(hi_t.bits));
    } else if (dtype == bfloat16) {
      const bfloat16_t hi_t(static_cast<float>(maxval));
      uniform_half_kernel<__nv_bfloat16>
          <<<grid, kThreads, 0, s>>>(static_cast<__nv_bfloat16*>(p), n, seed, seed2, lo, range,
                                     static_cast<float>(hi_t), below_half_bits(hi_t.bits));
    } else {
      throw InvalidArgumentError(std::string("[random_uniform] unsupported dtype ") +
                                 std::string(dtype_name(dtype)));
    }
  }
  cu::check_launch(name());
}

}  // namespace tapeflow::prims
