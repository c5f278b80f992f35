// CUDA kernel of ImageProjectiveTransform: one thread per output element (grid-stride), the
// per-pixel body shared with the CPU kernel (ops/image_kernels.h), so both devices compute the
// same float32 coordinates and weights.
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

// bool images never get here (infer rejects them); the branch inside a template keeps the
// kernel from being instantiated for bool.
template <class T>
void launch(const Tensor& x, const Tensor& t, Tensor& y, int64_t total, int64_t oh, int64_t ow,
            bool shared, int interpolation, int fill_mode, float fill_value, unsigned grid,
            cudaStream_t st) {
  if constexpr (!std::is_same_v<T, bool>)
    transform_kernel<T><<<grid, cuda::kThreads, 0, st>>>(
        cuda::dptr<T>(x), cuda::dptr<float>(t), cuda::dptr<T>(y), total, x.shape()[1], x.shape()[2],
        oh, ow, x.shape()[3], shared, interpolation, fill_mode, fill_value);
}

}  // namespace

void ImageProjectiveTransform::eval_cuda(std::span<const Tensor> in, std::span<Tensor> out) const {
  detail::check_transform_batch(name(), in[0], in[1]);
  Tensor& y = out[0];
  const int64_t total = y.num_elements();
  if (total == 0) return;
  const Tensor& x = in[0];
  const Device dev = y.placement();
  cudaStream_t st = detail::cuda::stream(dev);
  const unsigned grid = cuda::grid_for(total, dev);
  const bool shared = in[1].shape()[0] == 1;
  const auto fv = static_cast<float>(fill_value);
  TF_CUDA_DISPATCH_ALL_TYPES(x.dtype(), launch<T>(x, in[1], y, total, out_height, out_width, shared,
                                                  interpolation, fill_mode, fv, grid, st))
  detail::cuda::check_launch(name());
}

}  // namespace tapeflow::prims
