// CPU kernels of CropAndResize and its two gradients (ops/image.h), with TF's arithmetic
// (ops/image_kernels.h): positions and weights in C (float, double for float64 images), pixels
// read as whole channel vectors so that the inner loops run over contiguous channels.
//  - forward: split over output rows (box, crop row);
//  - image gradient: split over (image, band of rows), each part walking every box of its
//    image and adding only into its rows, so no two threads add into the same element;
//  - boxes gradient: split over boxes.
#include <algorithm>
#include <type_traits>
#include <vector>

#include "core/parallel.h"
#include "ops/image.h"
#include "ops/image_kernels.h"

namespace tapeflow::prims {

namespace {

using image_kernels::crop_inside;
using image_kernels::crop_position;
using image_kernels::crop_t;
using image_kernels::crop_taps;

int64_t clip_index(int32_t b, int64_t batch) {
  return std::clamp<int64_t>(b, 0, batch - 1);
}

template <class T, class C>
void crop_forward(const Tensor& image, const Tensor& boxes, const Tensor& indices, Tensor& out,
                  int method, C extrapolation) {
  const int64_t batch = image.shape()[0], h = image.shape()[1], w = image.shape()[2];
  const int64_t ch = image.shape()[3];
  const int64_t n = out.shape()[0], oh = out.shape()[1], ow = out.shape()[2];
  const T* in = image.data<T>();
  const C* bx = boxes.data<C>();
  const int32_t* idx = indices.data<int32_t>();
  C* o = out.data<C>();
  const int64_t grain = std::max<int64_t>(1, 4096 / std::max<int64_t>(1, ow * ch));
  detail::parallel_for(n * oh, grain, [=](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t k = row / oh, y = row % oh;
      const C* box = bx + k * 4;
      C* orow = o + row * ow * ch;
      const C in_y = crop_position(box[0], box[2], h, oh, y);
      if (batch <= 0 || !crop_inside(in_y, h)) {
        std::fill(orow, orow + ow * ch, extrapolation);
        continue;
      }
      const T* img = in + clip_index(idx[k], batch) * h * w * ch;
      const auto ty = crop_taps(in_y);
      for (int64_t x = 0; x < ow; ++x) {
        C* op = orow + x * ch;
        const C in_x = crop_position(box[1], box[3], w, ow, x);
        if (!crop_inside(in_x, w)) {
          std::fill(op, op + ch, extrapolation);
          continue;
        }
        const auto tx = crop_taps(in_x);
        if (method == image_kernels::kNearest) {
          const T* p = img + (ty.near * w + tx.near) * ch;
          for (int64_t c = 0; c < ch; ++c) op[c] = static_cast<C>(p[c]);
          continue;
        }
        const T* tl = img + (ty.lo * w + tx.lo) * ch;
        const T* tr = img + (ty.lo * w + tx.hi) * ch;
        const T* bl = img + (ty.hi * w + tx.lo) * ch;
        const T* br = img + (ty.hi * w + tx.hi) * ch;
        const C xl = tx.lerp, yl = ty.lerp;
        for (int64_t c = 0; c < ch; ++c) {
          const C top =
              static_cast<C>(tl[c]) + (static_cast<C>(tr[c]) - static_cast<C>(tl[c])) * xl;
          const C bottom =
              static_cast<C>(bl[c]) + (static_cast<C>(br[c]) - static_cast<C>(bl[c])) * xl;
          op[c] = top + (bottom - top) * yl;
        }
      }
    }
  });
}

// dst += a src over n channels (dst is the image cotangent, src the crop's: never the same).
template <class C>
inline void add_scaled(C* __restrict dst, const C* __restrict src, C a, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dst[i] += a * src[i];
}

template <class C>
void crop_grad_image(const Tensor& grads, const Tensor& boxes, const Tensor& indices, Tensor& out,
                     int method) {
  const int64_t batch = out.shape()[0], h = out.shape()[1], w = out.shape()[2];
  const int64_t ch = out.shape()[3];
  const int64_t n = grads.shape()[0], oh = grads.shape()[1], ow = grads.shape()[2];
  const C* g = grads.data<C>();
  const C* bx = boxes.data<C>();
  const int32_t* idx = indices.data<int32_t>();
  C* o = out.data<C>();
  detail::parallel_for(out.num_elements(), int64_t{1} << 16,
                       [=](int64_t begin, int64_t end) { std::fill(o + begin, o + end, C(0)); });
  if (batch <= 0) return;
  // The boxes of each image, in order (a box's additions land in the order TF makes them).
  std::vector<std::vector<int64_t>> of_image(static_cast<size_t>(batch));
  for (int64_t k = 0; k < n; ++k)
    of_image[static_cast<size_t>(clip_index(idx[k], batch))].push_back(k);
  // Bands of image rows: a part adds only into its rows, whole channel vectors at a time.
  const int64_t bands = std::clamp<int64_t>(2 * detail::num_threads(), 1, h);
  detail::parallel_for(batch * bands, 1, [&](int64_t begin, int64_t end) {
    for (int64_t unit = begin; unit < end; ++unit) {
      const int64_t b = unit / bands, band = unit % bands;
      const int64_t r0 = band * h / bands, r1 = (band + 1) * h / bands;
      C* img = o + b * h * w * ch;
      for (int64_t k : of_image[static_cast<size_t>(b)]) {
        const C* box = bx + k * 4;
        for (int64_t y = 0; y < oh; ++y) {
          const C in_y = crop_position(box[0], box[2], h, oh, y);
          if (!crop_inside(in_y, h)) continue;
          const auto ty = crop_taps(in_y);
          // The rows this crop row adds into, within the band: on a grid line the far tap has
          // weight 0 and is the near one, so it is skipped (each pixel gets one add).
          int64_t ys[2];
          C wy[2];
          int rows = 0;
          if (method == image_kernels::kNearest) {
            if (ty.near >= r0 && ty.near < r1) {
              ys[rows] = ty.near;
              wy[rows++] = C(1);
            }
          } else {
            if (ty.lo >= r0 && ty.lo < r1) {
              ys[rows] = ty.lo;
              wy[rows++] = C(1) - ty.lerp;
            }
            if (ty.hi != ty.lo && ty.hi >= r0 && ty.hi < r1) {
              ys[rows] = ty.hi;
              wy[rows++] = ty.lerp;
            }
          }
          if (rows == 0) continue;
          for (int64_t x = 0; x < ow; ++x) {
            const C in_x = crop_position(box[1], box[3], w, ow, x);
            if (!crop_inside(in_x, w)) continue;
            const auto tx = crop_taps(in_x);
            const C* gp = g + ((k * oh + y) * ow + x) * ch;
            for (int i = 0; i < rows; ++i) {
              C* row = img + ys[i] * w * ch;
              if (method == image_kernels::kNearest) {
                add_scaled(row + tx.near * ch, gp, wy[i], ch);
                continue;
              }
              add_scaled(row + tx.lo * ch, gp, wy[i] * (C(1) - tx.lerp), ch);
              if (tx.hi != tx.lo) add_scaled(row + tx.hi * ch, gp, wy[i] * tx.lerp, ch);
            }
          }
        }
      }
    }
  });
}

template <class T, class C>
void crop_grad_boxes(const Tensor& grads, const Tensor& image, const Tensor& boxes,
                     const Tensor& indices, Tensor& out) {
  const int64_t batch = image.shape()[0], h = image.shape()[1], w = image.shape()[2];
  const int64_t ch = image.shape()[3];
  const int64_t n = grads.shape()[0], oh = grads.shape()[1], ow = grads.shape()[2];
  const C* g = grads.data<C>();
  const T* in = image.data<T>();
  const C* bx = boxes.data<C>();
  const int32_t* idx = indices.data<int32_t>();
  C* o = out.data<C>();
  // TF's factors: d in_y / d y1 = (h - 1) - y (h - 1) / (oh - 1), d in_y / d y2 = y (h - 1) /
  // (oh - 1), each (h - 1) / 2 for a crop of one row.
  const C hr = oh > 1 ? static_cast<C>(h - 1) / static_cast<C>(oh - 1) : C(0);
  const C wr = ow > 1 ? static_cast<C>(w - 1) / static_cast<C>(ow - 1) : C(0);
  detail::parallel_for(n, 1, [=](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const C* box = bx + k * 4;
      C dy1 = 0, dx1 = 0, dy2 = 0, dx2 = 0;
      if (batch > 0) {
        const T* img = in + clip_index(idx[k], batch) * h * w * ch;
        for (int64_t y = 0; y < oh; ++y) {
          const C in_y = crop_position(box[0], box[2], h, oh, y);
          if (!crop_inside(in_y, h)) continue;
          const auto ty = crop_taps(in_y);
          const C fy2 = oh > 1 ? static_cast<C>(y) * hr : C(0.5) * static_cast<C>(h - 1);
          const C fy1 = oh > 1 ? static_cast<C>(h - 1) - fy2 : fy2;
          for (int64_t x = 0; x < ow; ++x) {
            const C in_x = crop_position(box[1], box[3], w, ow, x);
            if (!crop_inside(in_x, w)) continue;
            const auto tx = crop_taps(in_x);
            const C fx2 = ow > 1 ? static_cast<C>(x) * wr : C(0.5) * static_cast<C>(w - 1);
            const C fx1 = ow > 1 ? static_cast<C>(w - 1) - fx2 : fx2;
            const T* tl = img + (ty.lo * w + tx.lo) * ch;
            const T* tr = img + (ty.lo * w + tx.hi) * ch;
            const T* bl = img + (ty.hi * w + tx.lo) * ch;
            const T* br = img + (ty.hi * w + tx.hi) * ch;
            const C* gp = g + ((k * oh + y) * ow + x) * ch;
            const C xl = tx.lerp, yl = ty.lerp;
            C gy = 0, gx = 0;
#pragma omp simd reduction(+ : gy, gx)
            for (int64_t c = 0; c < ch; ++c) {
              const C vtl = static_cast<C>(tl[c]), vtr = static_cast<C>(tr[c]);
              const C vbl = static_cast<C>(bl[c]), vbr = static_cast<C>(br[c]);
              gy += ((C(1) - xl) * (vbl - vtl) + xl * (vbr - vtr)) * gp[c];
              gx += ((C(1) - yl) * (vtr - vtl) + yl * (vbr - vbl)) * gp[c];
            }
            dy1 += gy * fy1;
            dy2 += gy * fy2;
            dx1 += gx * fx1;
            dx2 += gx * fx2;
          }
        }
      }
      o[k * 4 + 0] = dy1;
      o[k * 4 + 1] = dx1;
      o[k * 4 + 2] = dy2;
      o[k * 4 + 3] = dx2;
    }
  });
}

}  // namespace

void CropAndResize::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  detail::check_crop_inputs(name(), in[0], in[1], in[2], nullptr);
  if (out[0].num_elements() == 0) return;
  TF_DISPATCH_ALL_TYPES(in[0].dtype(), {
    if constexpr (!std::is_same_v<T, bool>)
      crop_forward<T, crop_t<T>>(in[0], in[1], in[2], out[0], method,
                                 static_cast<crop_t<T>>(extrapolation_value));
  });
}

void CropAndResizeGradImage::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  detail::check_crop_inputs(name(), in[1], in[2], in[3], &in[0]);
  if (out[0].num_elements() == 0) return;
  if (out[0].dtype() == float64)
    crop_grad_image<double>(in[0], in[2], in[3], out[0], method);
  else
    crop_grad_image<float>(in[0], in[2], in[3], out[0], method);
}

void CropAndResizeGradBoxes::eval_cpu(std::span<const Tensor> in, std::span<Tensor> out) const {
  detail::check_crop_inputs(name(), in[1], in[2], in[3], &in[0]);
  if (out[0].num_elements() == 0) return;
  TF_DISPATCH_ALL_TYPES(in[1].dtype(), {
    if constexpr (!std::is_same_v<T, bool>)
      crop_grad_boxes<T, crop_t<T>>(in[0], in[1], in[2], in[3], out[0]);
  });
}

}  // namespace tapeflow::prims
