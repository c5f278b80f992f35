// CUDA kernels of CropAndResize and its two gradients (ops/image.h), with the arithmetic the
// CPU kernels use (ops/image_kernels.h): positions and weights in C (float, double for float64
// images).
//  - forward: one thread per output element;
//  - image gradient: one thread per element of grads, adding into the zeroed image cotangent
//    with atomicAdd (as TF's GPU kernel; the order of the additions, and so the last bits of a
//    sum, may vary from run to run);
//  - boxes gradient: one thread per crop point, summing over the channels, then four atomicAdds
//    into its box's row.
#include <type_traits>

#include "ops/cuda/common.cuh"
#include "ops/image.h"
#include "ops/image_kernels.h"

namespace tapeflow::prims {

namespace {

using image_kernels::crop_inside;
using image_kernels::crop_position;
using image_kernels::crop_t;
using image_kernels::crop_taps;

__device__ __forceinline__ int64_t clip_index(int32_t b, int64_t batch) {
  return b < 0 ? 0 : (b >= batch ? batch - 1 : b);
}

template <class T, class C>
__global__ void crop_kernel(const T* in, const C* boxes, const int32_t* idx, C* out, int64_t total,
                            int64_t batch, int64_t h, int64_t w, int64_t ch, int64_t oh, int64_t ow,
                            int method, C extrapolation) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = i % ch, x = (i / ch) % ow, y = (i / (ch * ow)) % oh, k = i / (ch * ow * oh);
    const C* box = boxes + k * 4;
    const C in_y = crop_position(box[0], box[2], h, oh, y);
    const C in_x = crop_position(box[1], box[3], w, ow, x);
    if (batch <= 0 || !crop_inside(in_y, h) || !crop_inside(in_x, w)) {
      out[i] = extrapolation;
      continue;
    }
    const T* img = in + clip_index(idx[k], batch) * h * w * ch + c;
    const auto ty = crop_taps(in_y);
    const auto tx = crop_taps(in_x);
    if (method == image_kernels::kNearest) {
      out[i] = static_cast<C>(cuda::load(img[(ty.near * w + tx.near) * ch]));
      continue;
    }
    const C tl = static_cast<C>(cuda::load(img[(ty.lo * w + tx.lo) * ch]));
    const C tr = static_cast<C>(cuda::load(img[(ty.lo * w + tx.hi) * ch]));
    const C bl = static_cast<C>(cuda::load(img[(ty.hi * w + tx.lo) * ch]));
    const C br = static_cast<C>(cuda::load(img[(ty.hi * w + tx.hi) * ch]));
    const C top = tl + (tr - tl) * tx.lerp;
    const C bottom = bl + (br - bl) * tx.lerp;
    out[i] = top + (bottom - top) * ty.lerp;
  }
}

template <class C>
__global__ void crop_grad_image_kernel(const C* grads, const C* boxes, const int32_t* idx, C* out,
                                       int64_t total, int64_t batch, int64_t h, int64_t w,
                                       int64_t ch, int64_t oh, int64_t ow, int method) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = i % ch, x = (i / ch) % ow, y = (i / (ch * ow)) % oh, k = i / (ch * ow * oh);
    const C* box = boxes + k * 4;
    const C in_y = crop_position(box[0], box[2], h, oh, y);
    const C in_x = crop_position(box[1], box[3], w, ow, x);
    if (!crop_inside(in_y, h) || !crop_inside(in_x, w)) continue;
    C* img = out + clip_index(idx[k], batch) * h * w * ch + c;
    const auto ty = crop_taps(in_y);
    const auto tx = crop_taps(in_x);
    const C g = grads[i];
    if (method == image_kernels::kNearest) {
      atomicAdd(img + (ty.near * w + tx.near) * ch, g);
      continue;
    }
    const C top = (C(1) - ty.lerp) * g, bottom = ty.lerp * g;
    atomicAdd(img + (ty.lo * w + tx.lo) * ch, (C(1) - tx.lerp) * top);
    atomicAdd(img + (ty.lo * w + tx.hi) * ch, tx.lerp * top);
    atomicAdd(img + (ty.hi * w + tx.lo) * ch, (C(1) - tx.lerp) * bottom);
    atomicAdd(img + (ty.hi * w + tx.hi) * ch, tx.lerp * bottom);
  }
}

template <class T, class C>
__global__ void crop_grad_boxes_kernel(const C* grads, const T* in, const C* boxes,
                                       const int32_t* idx, C* out, int64_t points, int64_t batch,
                                       int64_t h, int64_t w, int64_t ch, int64_t oh, int64_t ow) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < points;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t x = i % ow, y = (i / ow) % oh, k = i / (ow * oh);
    const C* box = boxes + k * 4;
    const C in_y = crop_position(box[0], box[2], h, oh, y);
    const C in_x = crop_position(box[1], box[3], w, ow, x);
    if (batch <= 0 || !crop_inside(in_y, h) || !crop_inside(in_x, w)) continue;
    const T* img = in + clip_index(idx[k], batch) * h * w * ch;
    const auto ty = crop_taps(in_y);
    const auto tx = crop_taps(in_x);
    const T* tl = img + (ty.lo * w + tx.lo) * ch;
    const T* tr = img + (ty.lo * w + tx.hi) * ch;
    const T* bl = img + (ty.hi * w + tx.lo) * ch;
    const T* br = img + (ty.hi * w + tx.hi) * ch;
    const C* gp = grads + i * ch;
    C gy = 0, gx = 0;
    for (int64_t c = 0; c < ch; ++c) {
      const C vtl = static_cast<C>(cuda::load(tl[c])), vtr = static_cast<C>(cuda::load(tr[c]));
      const C vbl = static_cast<C>(cuda::load(bl[c])), vbr = static_cast<C>(cuda::load(br[c]));
      gy += ((C(1) - tx.lerp) * (vbl - vtl) + tx.lerp * (vbr - vtr)) * gp[c];
      gx += ((C(1) - ty.lerp) * (vtr - vtl) + ty.lerp * (vbr - vbl)) * gp[c];
    }
    // TF's factors (as the CPU kernel).
    const C hr = oh > 1 ? static_cast<C>(h - 1) / static_cast<C>(oh - 1) : C(0);
    const C wr = ow > 1 ? static_cast<C>(w - 1) / static_cast<C>(ow - 1) : C(0);
    const C fy2 = oh > 1 ? static_cast<C>(y) * hr : C(0.5) * static_cast<C>(h - 1);
    const C fy1 = oh > 1 ? static_cast<C>(h - 1) - fy2 : fy2;
    const C fx2 = ow > 1 ? static_cast<C>(x) * wr : C(0.5) * static_cast<C>(w - 1);
    const C fx1 = ow > 1 ? static_cast<C>(w - 1) - fx2 : fx2;
    atomicAdd(out + k * 4 + 0, gy * fy1);
    atomicAdd(out + k * 4 + 1, gx * fx1);
    atomicAdd(out + k * 4 + 2, gy * fy2);
    atomicAdd(out + k * 4 + 3, gx * fx2);
  }
}

template <class T>
void launch_forward(const Tensor& image, const Tensor& boxes, const Tensor& idx, Tensor& out,
                    int method, double extrapolation, unsigned grid, cudaStream_t st) {
  if constexpr (!std::is_same_v<T, bool>) {
    using C = crop_t<T>;
    const TensorShape& s = image.shape();
    crop_kernel<T, C><<<grid, cuda::kThreads, 0, st>>>(
        cuda::dptr<T>(image), cuda::dptr<C>(boxes), cuda::dptr<int32_t>(idx), cuda::dptr<C>(out),
        out.num_elements(), s[0], s[1], s[2], s[3], out.shape()[1], out.shape()[2], method,
        static_cast<C>(extrapolation));
  }
}

template <class T>
void launch_grad_boxes(const Tensor& grads, const Tensor& image, const Tensor& boxes,
                       const Tensor& idx, Tensor& out, unsigned grid, cudaStream_t st) {
  if constexpr (!std::is_same_v<T, bool>) {
    using C = crop_t<T>;
    const TensorShape& s = image.shape();
    const int64_t points = grads.shape()[0] * grads.shape()[1] * grads.shape()[2];
    crop_grad_boxes_kernel<T, C><<<grid, cuda::kThreads, 0, st>>>(
        cuda::dptr<C>(grads), cuda::dptr<T>(image), cuda::dptr<C>(boxes), cuda::dptr<int32_t>(idx),
        cuda::dptr<C>(out), points, s[0], s[1], s[2], s[3], grads.shape()[1], grads.shape()[2]);
  }
}

}  // namespace

void CropAndResize::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  detail::check_crop_inputs(name(), in[0], in[1], in[2], nullptr);
  Tensor& y = out[0];
  if (y.num_elements() == 0) return;
  const Device dev = y.placement();
  cudaStream_t st = detail::cuda::stream(dev);
  const unsigned grid = cuda::grid_for(y.num_elements(), dev);
  TF_CUDA_DISPATCH_ALL_TYPES(in[0].dtype(), launch_forward<T>(in[0], in[1], in[2], y, method,
                                                              extrapolation_value, grid, st))
  detail::cuda::check_launch(name());
}

void CropAndResizeGradImage::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  detail::check_crop_inputs(name(), in[1], in[2], in[3], &in[0]);
  Tensor& y = out[0];
  if (y.num_elements() == 0) return;
  const Device dev = y.placement();
  cudaStream_t st = detail::cuda::stream(dev);
  TF_CUDA_CHECK(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), st));
  const Tensor& g = in[0];
  const int64_t total = g.num_elements();
  if (total == 0) return;
  const unsigned grid = cuda::grid_for(total, dev);
  const TensorShape& s = y.shape();
  if (y.dtype() == float64)
    crop_grad_image_kernel<double><<<grid, cuda::kThreads, 0, st>>>(
        cuda::dptr<double>(g), cuda::dptr<double>(in[2]), cuda::dptr<int32_t>(in[3]),
        cuda::dptr<double>(y), total, s[0], s[1], s[2], s[3], g.shape()[1], g.shape()[2], method);
  else
    crop_grad_image_kernel<float><<<grid, cuda::kThreads, 0, st>>>(
        cuda::dptr<float>(g), cuda::dptr<float>(in[2]), cuda::dptr<int32_t>(in[3]),
        cuda::dptr<float>(y), total, s[0], s[1], s[2], s[3], g.shape()[1], g.shape()[2], method);
  detail::cuda::check_launch(name());
}

void CropAndResizeGradBoxes::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  detail::check_crop_inputs(name(), in[1], in[2], in[3], &in[0]);
  Tensor& y = out[0];
  if (y.num_elements() == 0) return;
  const Device dev = y.placement();
  cudaStream_t st = detail::cuda::stream(dev);
  TF_CUDA_CHECK(cudaMemsetAsync(y.raw_data(), 0, y.nbytes(), st));
  const int64_t points = in[0].shape()[0] * in[0].shape()[1] * in[0].shape()[2];
  if (points == 0) return;
  const unsigned grid = cuda::grid_for(points, dev);
  TF_CUDA_DISPATCH_ALL_TYPES(in[1].dtype(),
                             launch_grad_boxes<T>(in[0], in[1], in[2], in[3], y, grid, st))
  detail::cuda::check_launch(name());
}

}  // namespace tapeflow::prims
