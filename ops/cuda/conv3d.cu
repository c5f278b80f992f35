// CUDA kernels of conv3d and its gradients: the depth taps are folded into channels
// (ops/cuda/conv3d_element.h: X' (N * OD, H, W, KD * C), F' (KH, KW, KD * CI, O)) and the Conv2D
// primitive's kernels (cuDNN, with their layouts, padding, groups and algorithm cache) run on
// the folded tensors; the gradients unfold. X' costs KD times the input's memory (less with a
// depth stride); cuDNN's N-d convolution would not, which is left for a session with a GPU to
// measure. One thread per element in the fold/unfold kernels, channels fastest.
#include <cuda_runtime.h>

#include <climits>
#include <cstdint>
#include <string>

#include "ops/conv3d.h"
#include "ops/cuda/common.cuh"
#include "ops/cuda/conv3d_element.h"
#include "ops/nn.h"
#include "ops/nn_grad.h"

namespace tapeflow::prims {

namespace {

using ::tapeflow::cuda::dcompute_t;
using ::tapeflow::cuda::grid_for;
using ::tapeflow::cuda::kThreads;
using ::tapeflow::cuda::load;
using ::tapeflow::cuda::store;

// E: an unsigned integer type of the element's size (the fold moves bits; zero bits are +0.0).
template <class E>
__global__ void fold_input_kernel(const E* __restrict__ x, E* __restrict__ xf, detail::Conv3DFold g,
                                  int64_t total) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step) {
    const int64_t s = detail::conv3d_fold_source(g, i);
    xf[i] = s < 0 ? E(0) : x[s];
  }
}

template <class T>
__global__ void unfold_input_kernel(const T* __restrict__ dxf, T* __restrict__ dx,
                                    detail::Conv3DFold g, int64_t total) {
  using A = dcompute_t<T>;
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < total;
       j += step) {
    A sum = A(0);
    detail::conv3d_unfold_sources(g, j, [&](int64_t k) { sum += load(dxf[k]); });
    dx[j] = store<T>(sum);
  }
}

template <class E>
__global__ void move_taps_kernel(const E* __restrict__ src, E* __restrict__ dst, int64_t kd,
                                 int64_t khw, int64_t cio, bool to_folded, int64_t total) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += step)
    dst[i] = src[detail::conv3d_filter_source(kd, khw, cio, i, to_folded)];
}

// Runs body.template operator()<E>() with E the unsigned type of elem_bytes (2, 4 or 8).
template <class F>
void by_element_size(size_t elem_bytes, const char* op, F&& body) {
  switch (elem_bytes) {
    case 2:
      return body(uint16_t{});
    case 4:
      return body(uint32_t{});
    case 8:
      return body(uint64_t{});
    default:
      throw InternalError(std::string("[") + op + "] no fold kernel for " +
                          std::to_string(elem_bytes) + "-byte elements");
  }
}

Tensor fold_input(const detail::Conv3DFold& g, const Tensor& x, const char* op) {
  const TensorShape& xs = x.shape();
  const Device dev = x.placement();
  Tensor xf = detail::empty(TensorShape{g.n * g.od, xs[2], xs[3], g.kd * g.c}, x.dtype(), dev);
  const int64_t total = xf.num_elements();
  if (total == 0) return xf;
  cudaStream_t s = detail::cuda::stream(dev);
  by_element_size(dtype_size(x.dtype()), op, [&](auto e) {
    using E = decltype(e);
    fold_input_kernel<E><<<grid_for(total, dev), kThreads, 0, s>>>(
        static_cast<const E*>(x.raw_data()), static_cast<E*>(xf.raw_data()), g, total);
  });
  detail::cuda::check_launch(op);
  return xf;
}

void move_taps(const Tensor& src, Tensor& dst, const TensorShape& f, bool to_folded,
               const char* op) {
  const int64_t total = dst.num_elements();
  if (total == 0) return;
  const Device dev = dst.placement();
  cudaStream_t s = detail::cuda::stream(dev);
  by_element_size(dtype_size(dst.dtype()), op, [&](auto e) {
    using E = decltype(e);
    move_taps_kernel<E><<<grid_for(total, dev), kThreads, 0, s>>>(
        static_cast<const E*>(src.raw_data()), static_cast<E*>(dst.raw_data()), f[0], f[1] * f[2],
        f[3] * f[4], to_folded, total);
  });
  detail::cuda::check_launch(op);
}

TensorShape folded_filter_shape(const TensorShape& f) {
  return TensorShape{f[1], f[2], f[0] * f[3], f[4]};
}

Tensor fold_filter(const Tensor& f, const char* op) {
  Tensor ff = detail::empty(folded_filter_shape(f.shape()), f.dtype(), f.placement());
  move_taps(f, ff, f.shape(), true, op);
  return ff;
}

Conv2D conv2d_of(const detail::Conv3DWindow& w) {
  return Conv2D(w.strides[1], w.strides[2], w.dilations[1], w.dilations[2], w.same, w.groups);
}

void zero(Tensor& t) {
  TF_CUDA_CHECK(cudaMemsetAsync(t.raw_data(), 0, t.nbytes(), detail::cuda::stream(t.placement())));
}

}  // namespace

void Conv3D::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  const Tensor& f = in[1];
  Tensor& y = out[0];
  if (y.num_elements() == 0) return;
  if (x.shape()[4] == 0) return zero(y);  // no input channels: every output is an empty sum
  const detail::Conv3DFold g = detail::conv3d_fold(win, x.shape(), f.shape());
  // cuDNN takes fewer than 2^31 elements per tensor (the Conv2D kernel checks it too, naming
  // conv2d and the folded shapes).
  const int64_t folded = g.n * g.od * g.hw * g.kd * g.c;
  if (folded > INT_MAX) {
    throw UnimplementedError(
        std::string("[conv3d] the CUDA kernel folds the ") + std::to_string(g.kd) +
        " depth taps into channels, (N * OD, H, W, KD * C) = " + std::to_string(folded) +
        " elements for input " + x.shape().to_string() + " and filters " + f.shape().to_string() +
        ", and cuDNN takes fewer than 2^31");
  }
  const Tensor args[2] = {fold_input(g, x, name()), fold_filter(f, name())};
  const TensorShape& ys = y.shape();
  Tensor y2[1] = {detail::view(y, TensorShape{g.n * g.od, ys[2], ys[3], ys[4]})};
  conv2d_of(win).eval_cuda(args, y2);
}

void Conv3DBackpropInput::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& f = in[0];
  const Tensor& dy = in[1];
  Tensor& dx = out[0];
  if (dx.num_elements() == 0) return;
  if (dy.num_elements() == 0) return zero(dx);  // no output channels or no windows
  const detail::Conv3DFold g = detail::conv3d_fold(win, dx.shape(), f.shape());
  const TensorShape& xs = dx.shape();
  const TensorShape& ys = dy.shape();
  const TensorShape xs2{g.n * g.od, xs[2], xs[3], g.kd * g.c};
  const Tensor args[2] = {fold_filter(f, name()),
                          detail::view(dy, TensorShape{g.n * g.od, ys[2], ys[3], ys[4]})};
  Tensor dx2[1] = {detail::empty(xs2, dx.dtype(), dx.placement())};
  const Conv2D c = conv2d_of(win);
  Conv2DBackpropInput(xs2, c.stride_h, c.stride_w, c.dilation_h, c.dilation_w, c.same, c.groups)
      .eval_cuda(args, dx2);
  const Device dev = dx.placement();
  const int64_t total = dx.num_elements();
  cudaStream_t s = detail::cuda::stream(dev);
  TF_CUDA_DISPATCH_FLOAT_TYPES(dx.dtype(), {
    unfold_input_kernel<T><<<grid_for(total, dev), kThreads, 0, s>>>(cuda::dptr<T>(dx2[0]),
                                                                     cuda::dptr<T>(dx), g, total);
  });
  detail::cuda::check_launch(name());
}

void Conv3DBackpropFilter::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  const Tensor& x = in[0];
  const Tensor& dy = in[1];
  Tensor& df = out[0];
  if (df.num_elements() == 0) return;
  if (dy.num_elements() == 0) return zero(df);  // no batch or no windows: empty sums
  const detail::Conv3DFold g = detail::conv3d_fold(win, x.shape(), df.shape());
  const TensorShape& ys = dy.shape();
  const Tensor args[2] = {fold_input(g, x, name()),
                          detail::view(dy, TensorShape{g.n * g.od, ys[2], ys[3], ys[4]})};
  const TensorShape fs2 = folded_filter_shape(df.shape());
  Tensor df2[1] = {detail::empty(fs2, df.dtype(), df.placement())};
  const Conv2D c = conv2d_of(win);
  Conv2DBackpropFilter(fs2, c.stride_h, c.stride_w, c.dilation_h, c.dilation_w, c.same, c.groups)
      .eval_cuda(args, df2);
  move_taps(df2[0], df, df.shape(), false, name());
}

}  // namespace tapeflow::prims
