// Kernels of the nn gradient family (ops/cuda/nn_grad.cu), called from ops/cuda/nn_grad.cpp.
// No CUDA types here, so the host file (g++) and the .cu file (nvcc) share this header. Every
// launcher queues its work on cuda::stream(dev) and checks the launch; pointers are device
// pointers to contiguous NHWC activations, HWIO filters (or OHWI where said).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"
#include "core/dtype.h"

namespace tapeflow::cuda::nngrad {

struct ConvGeom {
  int64_t n, h, w, c;      // input
  int64_t kh, kw, o;       // filters (kh, kw, c / groups, o)
  int64_t oh, ow;          // dy
  int64_t sh, sw, dh, dw;  // strides, dilations
  int64_t pt, pl;          // padding before (top, left); the rest follows from the sizes
  int64_t groups = 1;      // input channels [q c/G, (q+1) c/G) feed outputs [q o/G, (q+1) o/G)
};

struct PoolGeom {
  int64_t n, h, w, c, oh, ow;
  int64_t kh, kw, sh, sw, pt, pl;
};

// dst (cols x rows) = transpose of src (rows x cols); elements of elem_bytes = 2, 4 or 8.
void transpose(const char* op, const void* src, void* dst, int64_t rows, int64_t cols,
               size_t elem_bytes, Device dev);
// dst (n, dst_h, dst_w, c) from src (n, src_h, src_w, c): dst[h][w] = src[h][w] where
// h < src_h and w < src_w, zero elsewhere (pads or crops at the bottom and right).
void resize_nhwc(const char* op, const void* src, int64_t n, int64_t src_h, int64_t src_w,
                 int64_t c, void* dst, int64_t dst_h, int64_t dst_w, size_t elem_bytes, Device dev);

// Direct kernels (float64, and any case cuDNN cannot run); HWIO filters; floating dtypes.
void conv_backprop_input_direct(DType dtype, const ConvGeom& g, const void* f, const void* dy,
                                void* dx, Device dev);
void conv_backprop_filter_direct(DType dtype, const ConvGeom& g, const void* x, const void* dy,
                                 void* df, Device dev);

// Pooling gradients, one thread per dx element gathering from the windows that cover it.
void max_pool_grad(DType dtype, const PoolGeom& g, const void* x, const void* dy, void* dx,
                   Device dev);
void avg_pool_grad(DType dtype, const PoolGeom& g, const void* dy, void* dx, Device dev);
// max_pool2d_grad_grad: one thread per output element, g at its window's argmax.
void max_pool_grad_grad(DType dtype, const PoolGeom& geom, const void* x, const void* g, void* out,
                        Device dev);

}  // namespace tapeflow::cuda::nngrad
