// CUDA kernel of ImageProjectiveTransform: one thread per output element (grid-stride), the
// per-pixel body shared with the CPU kernel (ops/image_kernels.h), so both devices compute the
// same float32 coordinates and weights.
#include "core/check.h"
#include "ops/cuda/common.cuh"
#include "ops/image.h"
#include "ops/image_kernels.h"

namespace tapeflow::prims {

namespace {

struct DeviceLoad {
  template <class T>
  __device__ cuda::dcompute_t<T> operator()(T v) const {
    return cuda::load(v);
  }
};

template <class T>
__global__ void transform_kernel(const T* in, const float* tr, T* out, int64_t total, int64_t h,
                                 int64_t w, int64_t oh, int64_t ow, int64_t ch, bool shared,
                                 int interpolation, int fill_mode, float fill_value) {
  using C = cuda::dcompute_t<T>;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < total;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t c = i % ch;
    const int64_t x = (i / ch) % ow;
    const int64_t y = (i / (ch * ow)) % oh;
    const int64_t b = i / (ch * ow * oh);
    const float* t = tr + (shared ? 0 : b * 8);
    out[i] = cuda::store<T>(image_kernels::transform_pixel<C>(
        in, h, w, ch, b, y, x, c, t, interpolation, fill_mode, fill_value, DeviceLoad{}));
  }
}

}  // namespace

void ImageProjectiveTransform::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  TF_CHECK_ARG(in[1].shape()[0] == 1 || in[1].shape()[0] == in[0].shape()[0], name(),
               "transforms of shape {} do not match images of shape {} (one transform per image, "
               "or one for all)",
               in[1].shape().to_string(), in[0].shape().to_string());
  Tensor& y = out[0];
  const int64_t total = y.num_elements();
  if (total == 0) return;
  const Tensor& x = in[0];
  const Device dev = y.placement();
  cudaStream_t st = detail::cuda::stream(dev);
  const unsigned grid = cuda::grid_for(total, dev);
  const bool shared = in[1].shape()[0] == 1;
  const auto fv = static_cast<float>(fill_value);
  TF_CUDA_DISPATCH_ALL_TYPES(x.dtype(), {
    if constexpr (!std::is_same_v<T, bool>)
      transform_kernel<T><<<grid, cuda::kThreads, 0, st>>>(
          cuda::dptr<T>(x), cuda::dptr<float>(in[1]), cuda::dptr<T>(y), total, x.shape()[1],
          x.shape()[2], out_height, out_width, x.shape()[3], shared, interpolation, fill_mode, fv);
  })
  detail::cuda::check_launch(name());
}

}  // namespace tapeflow::prims
