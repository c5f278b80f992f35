// CPU kernel of ImageProjectiveTransform: every output element through the shared per-pixel
// body (ops/image_kernels.h), split over the thread pool by rows of output pixels.
#include "ops/image.h"

#include <algorithm>

#include "core/parallel.h"
#include "ops/image_kernels.h"

namespace tapeflow::prims {

namespace {

constexpr int64_t kRowGrain = 16;

template <class T>
void transform_cpu(const Tensor& x, const Tensor& t, Tensor& y, int interpolation, int fill_mode,
                   float fill_value) {
  using C = compute_t<T>;
  const int64_t n = y.shape()[0], oh = y.shape()[1], ow = y.shape()[2], ch = y.shape()[3];
  const int64_t h = x.shape()[1], w = x.shape()[2];
  const bool shared = t.shape()[0] == 1;
  const T* in = x.data<T>();
  const float* tr = t.data<float>();
  T* out = y.data<T>();
  const auto load = [](T v) { return static_cast<C>(v); };
  detail::parallel_for(n * oh, kRowGrain, [=](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t b = row / oh, yy = row % oh;
      const float* tb = tr + (shared ? 0 : b * 8);
      T* o = out + row * ow * ch;
      for (int64_t xx = 0; xx < ow; ++xx)
        for (int64_t c = 0; c < ch; ++c)
          o[xx * ch + c] = static_cast<T>(image_kernels::transform_pixel<C>(
              in, h, w, ch, b, yy, xx, c, tb, interpolation, fill_mode, fill_value, load));
    }
  });
}

}  // namespace

void ImageProjectiveTransform::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  detail::check_transform_batch(name(), in[0], in[1]);
  if (out[0].num_elements() == 0) return;
  const auto fv = static_cast<float>(fill_value);
  TF_DISPATCH_ALL_TYPES(in[0].dtype(), {
    if constexpr (!std::is_same_v<T, bool>)
      transform_cpu<T>(in[0], in[1], out[0], interpolation, fill_mode, fv);
  });
}

}  // namespace tapeflow::prims
