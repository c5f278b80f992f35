// CUDA kernels of the nn gradient family (launchers declared in ops/cuda/nn_grad_kernels.h):
// layout helpers for the cuDNN path (filter transpose, bottom/right zero padding and cropping)
// and direct kernels: the convolution gradients for float64 (and shapes cuDNN cannot run) and
// both pooling gradients. Every kernel writes each output element from one thread (gathers, no
// atomics), so results are deterministic; the half types accumulate in float.
#include "ops/cuda/common.cuh"
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
__global__ void resize_kernel(const E* __restrict__ src, int64_t src_h, int64_t src_w,
                              int64_t c, E* __restrict__ dst, int64_t n, int64_t dst_h,
                              int64_t dst_w) {
  const int64_t total = n * dst_h * dst_w * c;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t ch = i % c;
    int64_t t = i / c;
    const int64_t w = t % dst_w;
    t /= dst_w;
    const int64_t h = t % dst_h;
    const int64_t b = t / dst_h;
    dst[i] = (h < src_h && w < src_w) ? src[((b * src_h + h) * src_w + w) * c + ch] : E(0);
  }
}

// Runs BODY with E bound to an unsigned type of elem_bytes bytes (bit copies).
template <class F>
void by_size(size_t elem_bytes, F body) {
  switch (elem_bytes) {
    case 2: body(uint16_t{}); break;
    case 4: body(uint32_t{}); break;
    case 8: body(uint64_t{}); break;
    default: throw InternalError("nn_grad: unexpected element size");
  }
}

// ---------------------------------------------------------------- convolution (direct)

// dx[n, ih, iw, c] = sum over the taps (kh, kw) whose dy pixel exists and over o of
// dy[n, oh, ow, o] * f[kh, kw, c, o], with ih = oh * sh - pt + kh * dh (likewise w).
template <class T>
__global__ void conv_input_kernel(ConvGeom g, const T* __restrict__ f, const T* __restrict__ dy,
                                  T* __restrict__ dx) {
  using A = dcompute_t<T>;
  const int64_t total = g.n * g.h * g.w * g.c;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t c = i % g.c;
    int64_t t = i / g.c;
    const int64_t iw = t % g.w;
    t /= g.w;
    const int64_t ih = t % g.h;
    const int64_t n = t / g.h;
    A acc = A(0);
    for (int64_t kh = 0; kh < g.kh; ++kh) {
      const int64_t th = ih + g.pt - kh * g.dh;
      if (th < 0 || th % g.sh != 0 || th / g.sh >= g.oh) continue;
      const int64_t oh = th / g.sh;
      for (int64_t kw = 0; kw < g.kw; ++kw) {
        const int64_t tw = iw + g.pl - kw * g.dw;
        if (tw < 0 || tw % g.sw != 0 || tw / g.sw >= g.ow) continue;
        const int64_t ow = tw / g.sw;
        const T* dyv = dy + ((n * g.oh + oh) * g.ow + ow) * g.o;
        const T* fr = f + ((kh * g.kw + kw) * g.c + c) * g.o;
        for (int64_t o = 0; o < g.o; ++o) acc += load(fr[o]) * load(dyv[o]);
      }
    }
    dx[i] = store<T>(acc);
  }
}

// df[kh, kw, c, o] = sum over (n, oh, ow) with a valid input pixel of x * dy.
template <class T>
__global__ void conv_filter_kernel(ConvGeom g, const T* __restrict__ x, const T* __restrict__ dy,
                                   T* __restrict__ df) {
  using A = dcompute_t<T>;
  const int64_t total = g.kh * g.kw * g.c * g.o;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t o = i % g.o;
    int64_t t = i / g.o;
    const int64_t c = t % g.c;
    t /= g.c;
    const int64_t kw = t % g.kw;
    const int64_t kh = t / g.kw;
    A acc = A(0);
    for (int64_t n = 0; n < g.n; ++n) {
      for (int64_t oh = 0; oh < g.oh; ++oh) {
        const int64_t ih = oh * g.sh - g.pt + kh * g.dh;
        if (ih < 0 || ih >= g.h) continue;
        for (int64_t ow = 0; ow < g.ow; ++ow) {
          const int64_t iw = ow * g.sw - g.pl + kw * g.dw;
          if (iw < 0 || iw >= g.w) continue;
          acc += load(x[((n * g.h + ih) * g.w + iw) * g.c + c]) *
                 load(dy[((n * g.oh + oh) * g.ow + ow) * g.o + o]);
        }
      }
    }
    df[i] = store<T>(acc);
  }
}

// ---------------------------------------------------------------- pooling

// The dy rows [lo, hi] whose windows [o * s - p, o * s - p + k) cover input row i.
struct Range {
  int64_t lo, hi;
};
__device__ __forceinline__ Range covering(int64_t i, int64_t k, int64_t s, int64_t p,
                                          int64_t out) {
  const int64_t a = i + p - k + 1;
  const int64_t lo = a <= 0 ? 0 : (a + s - 1) / s;
  const int64_t hi = (i + p) / s < out - 1 ? (i + p) / s : out - 1;
  return {lo, hi};
}

// Each window sends its dy to its FIRST maximal valid element in row-major order (the CPU
// kernel's and TF's rule): every dx element re-derives the argmax of each window covering it.
template <class T>
__global__ void max_pool_grad_kernel(PoolGeom g, const T* __restrict__ x,
                                     const T* __restrict__ dy, T* __restrict__ dx) {
  using A = dcompute_t<T>;
  const int64_t total = g.n * g.h * g.w * g.c;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t c = i % g.c;
    int64_t t = i / g.c;
    const int64_t iw = t % g.w;
    t /= g.w;
    const int64_t ih = t % g.h;
    const int64_t n = t / g.h;
    const T* xn = x + n * g.h * g.w * g.c + c;
    const Range rh = covering(ih, g.kh, g.sh, g.pt, g.oh);
    const Range rw = covering(iw, g.kw, g.sw, g.pl, g.ow);
    A acc = A(0);
    for (int64_t oh = rh.lo; oh <= rh.hi; ++oh) {
      const int64_t h0 = oh * g.sh - g.pt;
      const int64_t hs = h0 > 0 ? h0 : 0, he = h0 + g.kh < g.h ? h0 + g.kh : g.h;
      for (int64_t ow = rw.lo; ow <= rw.hi; ++ow) {
        const int64_t w0 = ow * g.sw - g.pl;
        const int64_t ws = w0 > 0 ? w0 : 0, we = w0 + g.kw < g.w ? w0 + g.kw : g.w;
        A best = load(xn[(hs * g.w + ws) * g.c]);
        int64_t bh = hs, bw = ws;
        for (int64_t hh = hs; hh < he; ++hh) {
          for (int64_t ww = ws; ww < we; ++ww) {
            const A v = load(xn[(hh * g.w + ww) * g.c]);
            if (best < v) {
              best = v;
              bh = hh;
              bw = ww;
            }
          }
        }
        if (bh == ih && bw == iw) acc += load(dy[((n * g.oh + oh) * g.ow + ow) * g.c + c]);
      }
    }
    dx[i] = store<T>(acc);
  }
}

// dx = the sum of dy / (the window's count of valid elements) over the windows covering it.
template <class T>
__global__ void avg_pool_grad_kernel(PoolGeom g, const T* __restrict__ dy, T* __restrict__ dx) {
  using A = dcompute_t<T>;
  const int64_t total = g.n * g.h * g.w * g.c;
  for (int64_t i = global_index(); i < total; i += grid_stride()) {
    const int64_t c = i % g.c;
    int64_t t = i / g.c;
    const int64_t iw = t % g.w;
    t /= g.w;
    const int64_t ih = t % g.h;
    const int64_t n = t / g.h;
    const Range rh = covering(ih, g.kh, g.sh, g.pt, g.oh);
    const Range rw = covering(iw, g.kw, g.sw, g.pl, g.ow);
    A acc = A(0);
    for (int64_t oh = rh.lo; oh <= rh.hi; ++oh) {
      const int64_t h0 = oh * g.sh - g.pt;
      const int64_t ch = (h0 + g.kh < g.h ? h0 + g.kh : g.h) - (h0 > 0 ? h0 : 0);
      for (int64_t ow = rw.lo; ow <= rw.hi; ++ow) {
        const int64_t w0 = ow * g.sw - g.pl;
        const int64_t cw = (w0 + g.kw < g.w ? w0 + g.kw : g.w) - (w0 > 0 ? w0 : 0);
        acc += load(dy[((n * g.oh + oh) * g.ow + ow) * g.c + c]) / static_cast<A>(ch * cw);
      }
    }
    dx[i] = store<T>(acc);
  }
}

}  // namespace

void transpose(const char* op, const void* src, void* dst, int64_t rows, int64_t cols,
               size_t elem_bytes, Device dev) {
  const int64_t total = rows * cols;
  if (total == 0) return;
  cudaStream_t s = cu::stream(dev);
  by_size(elem_bytes, [&](auto tag) {
    using E = decltype(tag);
    transpose_kernel<E><<<grid_for(total, dev), kThreads, 0, s>>>(
        static_cast<const E*>(src), static_cast<E*>(dst), rows, cols);
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
  const int64_t total = g.kh * g.kw * g.c * g.o;
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

void avg_pool_grad(DType dtype, const PoolGeom& g, const void* dy, void* dx, Device dev) {
  const int64_t total = g.n * g.h * g.w * g.c;
  if (total == 0) return;
  cudaStream_t s = cu::stream(dev);
  TF_CUDA_DISPATCH_FLOAT_TYPES(dtype, {
    avg_pool_grad_kernel<T><<<grid_for(total, dev), kThreads, 0, s>>>(
        g, static_cast<const T*>(dy), static_cast<T*>(dx));
  });
  cu::check_launch("avg_pool2d_grad");
}

}  // namespace tapeflow::cuda::nngrad
