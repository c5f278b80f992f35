// CUDA kernels of the nn gradient family (launchers declared in ops/cuda/nn_grad_kernels.h):
// layout helpers for the cuDNN path (filter transpose, bottom/right zero padding and cropping)
// and direct kernels: the convolution gradients for float64 (and shapes cuDNN cannot run) and
// both pooling gradients. Every kernel writes each output element from one thread (gathers, no
// atomics), so results are deterministic; the half types accumulate in float.
#include "ops/cuda/common.cuh"
#include "ops/cuda/nn_grad_element.h"
#include "ops/cuda/nn_grad_kernels.h"

namespace tapeflow::cuda::nngrad {

namespace {

namespace cu = ::tapeflow::detail::cuda;

__device__ __forceinline__ int64_t global_index() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ __forceinline__ int64_t grid_stride() {
  return static_cast<int64_t>(gridDim.x) * blockDim.x;
}

// ---------------------------------------------------------------- layout helpers

template <class E>
__global__ void transpose_kernel(const E* __restrict__ src, E* __restrict__ dst, int64_t rows,
                                 int64_t cols) {
  const int64_t total = rows * cols;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t r = i / cols, c = i % cols;
    dst[c * rows + r] = src[i];
  }
}

template <class E>
__global__ void resize_kernel(const E* __restrict__ src, int64_t src_h, int64_t src_w, int64_t c,
                              E* __restrict__ dst, int64_t n, int64_t dst_h, int64_t dst_w) {
  const int64_t total = n * dst_h * dst_w * c;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t s = resize_source(i, src_h, src_w, c, dst_h, dst_w);
    dst[i] = s >= 0 ? src[s] : E(0);
  }
}

// Runs BODY with E bound to an unsigned type of elem_bytes bytes (bit copies).
template <class F>
void by_size(size_t elem_bytes, F body) {
  switch (elem_bytes) {
    case 2:
      body(uint16_t{});
      break;
    case 4:
      body(uint32_t{});
      break;
    case 8:
      body(uint64_t{});
      break;
    default:
      throw InternalError("nn_grad: unexpected element size");
  }
}

// ---------------------------------------------------------------- gradients
// One thread per output element; the bodies live in ops/cuda/nn_grad_element.h.

template <class T>
__global__ void conv_input_kernel(ConvGeom g, const T* __restrict__ f, const T* __restrict__ dy,
                                  T* __restrict__ dx) {
  const int64_t total = g.n * g.h * g.w * g.c;
  for (int64_t i = global_index(); i < total; i += grid_stride())
    dx[i] = store<T>(conv_input_element<dcompute_t<T>>(g, f, dy, i));
}

template <class T>
__global__ void conv_filter_kernel(ConvGeom g, const T* __restrict__ x, const T* __restrict__ dy,
                                   T* __restrict__ df) {
  const int64_t total = g.kh * g.kw * (g.c / g.groups) * g.o;
  for (int64_t i = global_index(); i < total; i += grid_stride())
    df[i] = store<T>(conv_filter_element<dcompute_t<T>>(g, x, dy, i));
}

template <class T>
__global__ void max_pool_grad_kernel(PoolGeom g, const T* __restrict__ x, const T* __restrict__ dy,
                                     T* __restrict__ dx) {
  const int64_t total = g.n * g.h * g.w * g.c;
  for (int64_t i = global_index(); i < total; i += grid_stride())
    dx[i] = store<T>(max_pool_grad_element<dcompute_t<T>>(g, x, dy, i));
}

template <class T>
__global__ void max_pool_grad_grad_kernel(PoolGeom geom, const T* __restrict__ x,
                                          const T* __restrict__ g, T* __restrict__ out) {
  const int64_t total = geom.n * geom.oh * geom.ow * geom.c;
  for (int64_t i = global_index(); i < total; i += grid_stride())
    out[i] = store<T>(max_pool_grad_grad_element<dcompute_t<T>>(geom, x, g, i));
}

template <class T>
__global__ void avg_pool_grad_kernel(PoolGeom g, const T* __restrict__ dy, T* __restrict__ dx) {
  const int64_t total = g.n * g.h * g.w * g.c;
  for (int64_t i = global_index(); i < total; i += grid_stride())
    dx[i] = store<T>(avg_pool_grad_element<dcompute_t<T>>(g, dy, i));
}

}  // namespace

void transpose(const char* op, const void* src, void* dst, int64_t rows, int64_t cols,
               size_t elem_bytes, Device dev) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  cudaStream_t s = cu::stream(dev);
  by_size(elem_bytes, [&](auto tag) {
    using E = decltype(tag);
    transpose_kernel<E><<<grid_for(total, dev), kThreads, 0, s>>>(static_cast<const E*>(src),
                                                                  static_cast<E*>(dst), rows, cols);
  });
  cu::check_launch(op);
}

void resize_nhwc(const char* op, const void* src, int64_t n, int64_t src_h, int64_t src_w,
                 int64_t c, void* dst, int64_t dst_h, int64_t dst_w, size_t elem_bytes,
                 Device dev) {
  const int64_t total = n * dst_h * dst_w * c;
  if (total == 0) return;
  cudaStream_t s = cu::stream(dev);
  by_size(elem_bytes, [&](auto tag) {
    using E = decltype(tag);
    resize_kernel<E><<<grid_for(total, dev), kThreads, 0, s>>>(
        static_cast<const E*>(src), src_h, src_w, c, static_cast<E*>(dst), n, dst_h, dst_w);
  });
  cu::check_launch(op);
}

void conv_backprop_input_direct(DType dtype, const ConvGeom& g, const void* f, const void* dy,
                                void* dx, Device dev) {
  const int64_t total = g.n * g.h * g.w * g.c;
  if (total == 0) return;
  cudaStream_t s = cu::stream(dev);
  TF_CUDA_DISPATCH_FLOAT_TYPES(dtype, {
    conv_input_kernel<T><<<grid_for(total, dev), kThreads, 0, s>>>(
        g, static_cast<const T*>(f), static_cast<const T*>(dy), static_cast<T*>(dx));
  });
  cu::check_launch("conv2d_backprop_input");
}

void conv_backprop_filter_direct(DType dtype, const ConvGeom& g, const void* x, const void* dy,
                                 void* df, Device dev) {
  const int64_t total = g.kh * g.kw * (g.c / g.groups) * g.o;  // HWIO elements
  if (total == 0) return;
  cudaStream_t s = cu::stream(dev);
  // Few threads with long sums: 128 per block spreads them over more multiprocessors.
  constexpr int kFilterThreads = 128;
  TF_CUDA_DISPATCH_FLOAT_TYPES(dtype, {
    conv_filter_kernel<T><<<grid_for(total, dev, kFilterThreads), kFilterThreads, 0, s>>>(
        g, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(df));
  });
  cu::check_launch("conv2d_backprop_filter");
}

void max_pool_grad(DType dtype, const PoolGeom& g, const void* x, const void* dy, void* dx,
                   Device dev) {
  const int64_t total = g.n * g.h * g.w * g.c;
  if (total == 0) return;
  cudaStream_t s = cu::stream(dev);
  TF_CUDA_DISPATCH_FLOAT_TYPES(dtype, {
    max_pool_grad_kernel<T><<<grid_for(total, dev), kThreads, 0, s>>>(
        g, static_cast<const T*>(x), static_cast<const T*>(dy), static_cast<T*>(dx));
  });
  cu::check_launch("max_pool2d_grad");
}

void max_pool_grad_grad(DType dtype, const PoolGeom& geom, const void* x, const void* g,
                        void* out, Device dev) {
  const int64_t total = geom.n * geom.oh * geom.ow * geom.c;
  if (total == 0) return;
  cudaStream_t s = cu::stream(dev);
  TF_CUDA_DISPATCH_FLOAT_TYPES(dtype, {
    max_pool_grad_grad_kernel<T><<<grid_for(total, dev), kThreads, 0, s>>>(
        geom, static_cast<const T*>(x), static_cast<const T*>(g), static_cast<T*>(out));
  });
  cu::check_launch("max_pool2d_grad_grad");
}

void avg_pool_grad(DType dtype, const PoolGeom& g, const void* dy, void* dx, Device dev) {
  const int64_t total = g.n * g.h * g.w * g.c;
  if (total == 0) return;
  cudaStream_t s = cu::stream(dev);
  TF_CUDA_DISPATCH_FLOAT_TYPES(dtype, {
    avg_pool_grad_kernel<T><<<grid_for(total, dev), kThreads, 0, s>>>(g, static_cast<const T*>(dy),
                                                                      static_cast<T*>(dx));
  });
  cu::check_launch("avg_pool2d_grad");
}

}  // namespace tapeflow::cuda::nngrad
