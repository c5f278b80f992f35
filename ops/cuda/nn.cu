// CUDA kernels of the nn family: the 4-D gather that pads and transposes around cuDNN's
// convolution (ops/cuda/nn.cpp), and direct max/average pooling kernels. Pooling is memory-bound:
// one thread per output element, channels fastest so that neighbouring threads read neighbouring
// addresses; each output reduces the valid part of its window exactly as ops/cpu/pool.cpp does.
#include <string>
#include <type_traits>

#include "ops/cuda/common.cuh"
#include "ops/cuda/nn_kernels.h"

namespace tapeflow::detail::cuda::nn {

namespace {

using ::tapeflow::cuda::dcompute_t;
using ::tapeflow::cuda::grid_for;
using ::tapeflow::cuda::kThreads;
using ::tapeflow::cuda::load;
using ::tapeflow::cuda::store;

// E: an unsigned integer type of the element's size (the gather moves bits).
template <class E>
__global__ void gather4_kernel(const E* __restrict__ src, E* __restrict__ dst, Gather4 g,
                               int64_t total) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    int64_t r = i;
    const int64_t i3 = r % g.size[3];
    r /= g.size[3];
    const int64_t i2 = r % g.size[2];
    r /= g.size[2];
    const int64_t i1 = r % g.size[1];
    const int64_t i0 = r / g.size[1];
    if (i0 < g.limit[0] && i1 < g.limit[1] && i2 < g.limit[2] && i3 < g.limit[3]) {
      dst[i] = src[i0 * g.stride[0] + i1 * g.stride[1] + i2 * g.stride[2] + i3 * g.stride[3]];
    } else {
      dst[i] = E(0);
    }
  }
}

template <class T, bool kMax>
__global__ void pool_kernel(const T* __restrict__ x, T* __restrict__ y, PoolGeom g,
                            int64_t total) {
  using A = dcompute_t<T>;  // float for the half types, T itself otherwise
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    int64_t r = i;
    const int64_t c = r % g.c;
    r /= g.c;
    const int64_t ow = r % g.ow;
    r /= g.ow;
    const int64_t oh = r % g.oh;
    const int64_t n = r / g.oh;
    const int64_t h0 = oh * g.sh - g.pt, w0 = ow * g.sw - g.pl;
    const int64_t hs = h0 > 0 ? h0 : 0, he = h0 + g.kh < g.h ? h0 + g.kh : g.h;
    const int64_t ws = w0 > 0 ? w0 : 0, we = w0 + g.kw < g.w ? w0 + g.kw : g.w;
    const T* xn = x + n * g.h * g.w * g.c + c;
    // Every window holds at least one valid element (TF's SAME padding is smaller than the
    // window), so the first one seeds the maximum, as in the CPU loop (same NaN behaviour).
    A acc = kMax ? load(xn[(hs * g.w + ws) * g.c]) : A(0);
    for (int64_t ih = hs; ih < he; ++ih) {
      for (int64_t iw = ws; iw < we; ++iw) {
        const A v = load(xn[(ih * g.w + iw) * g.c]);
        if constexpr (kMax)
          acc = acc < v ? v : acc;
        else
          acc += v;
      }
    }
    if constexpr (!kMax) acc /= static_cast<A>((he - hs) * (we - ws));
    y[i] = store<T>(acc);
  }
}

template <class T, bool kMax>
void launch_pool(const Tensor& x, Tensor& y, const PoolGeom& g, const char* op) {
  const int64_t total = y.num_elements();
  if (total == 0) return;
  const Device dev = y.placement();
  cudaStream_t s = stream(dev);
  pool_kernel<T, kMax><<<grid_for(total, dev), kThreads, 0, s>>>(
      static_cast<const T*>(x.raw_data()), static_cast<T*>(y.raw_data()), g, total);
  check_launch(op);
}

}  // namespace

void gather4(const void* src, void* dst, const Gather4& g, size_t elem_bytes, Device device,
             const char* op) {
  const int64_t total = g.size[0] * g.size[1] * g.size[2] * g.size[3];
  if (total == 0) return;
  cudaStream_t s = stream(device);
  const unsigned grid = grid_for(total, device);
  switch (elem_bytes) {
    case 2:
      gather4_kernel<<<grid, kThreads, 0, s>>>(static_cast<const uint16_t*>(src),
                                               static_cast<uint16_t*>(dst), g, total);
      break;
    case 4:
      gather4_kernel<<<grid, kThreads, 0, s>>>(static_cast<const uint32_t*>(src),
                                               static_cast<uint32_t*>(dst), g, total);
      break;
    case 8:
      gather4_kernel<<<grid, kThreads, 0, s>>>(static_cast<const uint64_t*>(src),
                                               static_cast<uint64_t*>(dst), g, total);
      break;
    default:
      throw InternalError(std::string("[") + op + "] gather4: unsupported element size " +
                          std::to_string(elem_bytes));
  }
  check_launch(op);
}

void max_pool2d(const Tensor& x, Tensor& y, const PoolGeom& g) {
  TF_CUDA_DISPATCH_ALL_TYPES(x.dtype(), {
    if constexpr (!std::is_same_v<T, bool>) launch_pool<T, true>(x, y, g, "max_pool2d");
  });
}

void avg_pool2d(const Tensor& x, Tensor& y, const PoolGeom& g) {
  TF_CUDA_DISPATCH_FLOAT_TYPES(x.dtype(), launch_pool<T, false>(x, y, g, "avg_pool2d"));
}

}  // namespace tapeflow::detail::cuda::nn
