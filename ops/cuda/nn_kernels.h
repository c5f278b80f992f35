// Kernels of the nn family's CUDA backend (private to ops/cuda/nn.cpp and ops/cuda/nn.cu): the
// layout gathers around cuDNN's convolution and the pooling kernels. No CUDA types here, so that
// the host code (compiled by g++) and the kernels (nvcc) share it. Every launcher queues its
// kernel on the stream of the tensors' device and checks the launch.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"
#include "core/tensor.h"

namespace tapeflow::detail::cuda::nn {

// A 4-D gather into a contiguous row-major destination of dims size[0..3]: the element at
// (i0, i1, i2, i3) is src[i0 * stride[0] + ... + i3 * stride[3]] (element strides), or zero
// (all bits clear: +0.0 in every floating dtype) where some i_k >= limit[k]. It transposes (NHWC
// to NCHW, HWIO filters to OHWI/OIHW) and pads at the high end of a dimension (limit < size).
struct Gather4 {
  int64_t size[4] = {};
  int64_t stride[4] = {};
  int64_t limit[4] = {};
};
// elem_bytes: 2, 4 or 8. `op` names the op in a launch failure.
void gather4(const void* src, void* dst, const Gather4& g, size_t elem_bytes, Device device,
             const char* op);

// One pooling window geometry (NHWC input (n, h, w, c), output (n, oh, ow, c)); pt and pl are the
// padding before the first row and column (TF's SAME: total / 2).
struct PoolGeom {
  int64_t n, h, w, c, oh, ow;
  int64_t kh, kw, sh, sw, pt, pl;
};
// Each output is the maximum (resp. the mean) of the valid elements of its window, reduced in the
// order of ops/cpu/pool.cpp's loop (rows, then columns): max over every dtype but bool, avg over
// the floating dtypes (accumulated in float for float16/bfloat16/float32, double for float64).
void max_pool2d(const Tensor& x, Tensor& y, const PoolGeom& g);
void avg_pool2d(const Tensor& x, Tensor& y, const PoolGeom& g);

}  // namespace tapeflow::detail::cuda::nn
