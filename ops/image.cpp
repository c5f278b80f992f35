// tf::image: the composites (resize, flips, crops, pads, colour adjustments) and the
// ImageProjectiveTransform primitive's frontend and shape inference. Its kernels are in
// ops/cpu/image.cpp and ops/cuda/image.cu.
#include "ops/image.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/allocator.h"
#include "core/check.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/image_kernels.h"
#include "ops/image_more.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::image {

namespace {

// Checks an NHWC image or batch and returns the height axis (0 or 1); height and width must be
// known, as every composite here builds its indices from them.
int height_axis(const char* op, const Tensor& images) {
  TF_CHECK_ARG(images.defined(), op, "images is an undefined tensor (TF's None)");
  const TensorShape& s = images.shape();
  TF_CHECK_ARG(s.rank() == 3 || s.rank() == 4, op,
               "images must have rank 3 (height, width, channels) or 4 (batch, height, width, "
               "channels), got shape {}",
               s.to_string());
  const int h = s.rank() - 3;
  TF_CHECK_ARG(s[h] >= 0 && s[h + 1] >= 0, op,
               "the height and width of images must be known, got shape {}", s.to_string());
  return h;
}

void check_floating(const char* op, const Tensor& images) {
  TF_CHECK_ARG(is_floating(images.dtype()), op,
               "images must be float16, bfloat16, float32 or float64, got {} (cast integer "
               "images to a floating dtype first)",
               dtype_name(images.dtype()));
}

// Reverses `axis` with a gather of the reversed positions.
Tensor reverse_axis(const Tensor& x, int axis) {
  const int64_t n = x.shape()[axis];
  std::vector<int64_t> idx(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) idx[static_cast<size_t>(i)] = n - 1 - i;
  return gather(x, constant(idx), axis);
}

// The tables of one axis of TF's ResizeBilinear with half-pixel centres for an input of length
// in_size: output o reads input position (o + 0.5) * in / out - 0.5, between floor (which 0)
// and ceil (which 1; clamped to the image) with weight (which 2) position - floor, in float32
// as TF.
std::vector<double> bilinear_table(int64_t in_size, int64_t out_size, int which) {
  image_detail::check_resize_length(in_size);  // (a None trace's run checks it here)
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  std::vector<double> t(static_cast<size_t>(out_size));
  for (int64_t o = 0; o < out_size; ++o) {
    const float in = (static_cast<float>(o) + 0.5f) * scale - 0.5f;
    const float f = std::floor(in);
    const auto k = static_cast<size_t>(o);
    if (which == 0)
      t[k] = static_cast<double>(std::max<int64_t>(static_cast<int64_t>(f), 0));
    else if (which == 1)
      t[k] =
          static_cast<double>(std::min<int64_t>(static_cast<int64_t>(std::ceil(in)), in_size - 1));
    else
      t[k] = static_cast<double>(in - f);
  }
  return t;
}

// One of bilinear_table's tables for x's axis (made when the graph runs in a trace for None
// dimensions), shaped (out_size, 1, ...) to index or broadcast along `axis`.
Tensor bilinear(const Tensor& x, int axis, int64_t out_size, int which, DType dtype) {
  const int trailing = which == 2 ? x.rank() - axis - 1 : 0;
  return detail::axis_table(
      x, axis, "resize_bilinear", {static_cast<double>(out_size), static_cast<double>(which)},
      dtype, [out_size, which](int64_t n) { return bilinear_table(n, out_size, which); },
      [out_size, trailing](int64_t) {
        TensorShape s{out_size};
        for (int d = 0; d < trailing; ++d) s.push_back(1);
        return s;
      });
}

// One axis of TF's ResizeBilinear (bilinear_table).
Tensor resize_bilinear_axis(const Tensor& x, int axis, int64_t out_size) {
  // Every position falls on a pixel (in a trace for None dimensions the tables say so).
  if (x.shape()[axis] == out_size && !detail::open_shapes()) return x;
  const Tensor a = gather(x, bilinear(x, axis, out_size, 0, int64), axis);
  const Tensor b = gather(x, bilinear(x, axis, out_size, 1, int64), axis);
  return a + (b - a) * bilinear(x, axis, out_size, 2, x.dtype());
}

// One axis of TF's ResizeNearestNeighbor with half-pixel centres (align_corners false): output
// o reads floor((o + 0.5) * in / out), clamped to the image.
Tensor resize_nearest_axis(const Tensor& x, int axis, int64_t out_size) {
  if (x.shape()[axis] == out_size && !detail::open_shapes()) return x;
  auto table = [out_size](int64_t in_size) {
    image_detail::check_resize_length(in_size);
    const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
    std::vector<double> idx(static_cast<size_t>(out_size));
    for (int64_t o = 0; o < out_size; ++o) {
      const auto i = static_cast<int64_t>(std::floor((static_cast<float>(o) + 0.5f) * scale));
      idx[static_cast<size_t>(o)] = static_cast<double>(std::clamp<int64_t>(i, 0, in_size - 1));
    }
    return idx;
  };
  const Tensor idx =
      detail::axis_table(x, axis, "resize_nearest", {static_cast<double>(out_size)}, int64, table,
                         [out_size](int64_t) { return TensorShape{out_size}; });
  return gather(x, idx, axis);
}

// The slice sizes of a crop: -1 (everything) for the batch, so a None batch stays None.
std::vector<int64_t> window(const Tensor& images, int64_t h, int64_t w) {
  if (images.rank() == 3) return {h, w, -1};
  return {-1, h, w, -1};
}

}  // namespace

Tensor resize(const Tensor& images, const std::vector<int64_t>& size, const std::string& method,
              bool antialias) {
  const int h = height_axis("resize", images);
  TF_CHECK_ARG(size.size() == 2, "resize",
               "size must have 2 elements (new_height, new_width), got {}", size.size());
  TF_CHECK_ARG(size[0] > 0 && size[1] > 0, "resize",
               "size must be positive, got ({}, {}) for images of shape {}", size[0], size[1],
               images.shape().to_string());
  // (An unknown size, tf::None while tracing, is checked when the graph runs.)
  TF_CHECK_ARG(images.shape()[h] != 0 && images.shape()[h + 1] != 0, "resize",
               "images must have a positive height and width, got shape {}",
               images.shape().to_string());
  // The output and the per-axis index and weight tables grow with the new size: one larger than
  // this machine's memory is refused up front (a host table would throw std::bad_alloc).
  double per_image = static_cast<double>(size[0]) * static_cast<double>(size[1]) * 4.0;
  for (int a = 0; a < images.rank(); ++a)
    if (a != h && a != h + 1 && images.shape()[a] > 0)
      per_image *= static_cast<double>(images.shape()[a]);
  TF_CHECK_T(ResourceExhaustedError, per_image <= static_cast<double>(detail::host_memory_bytes()),
             "resize", "size ({}, {}) for images of shape {} needs more than this machine's memory",
             size[0], size[1], images.shape().to_string());
  const DType d = images.dtype();
  if (method == "nearest") {
    TF_CHECK_ARG(d != bool_, "resize", "images must be numeric, got {}", dtype_name(d));
    return resize_nearest_axis(resize_nearest_axis(images, h, size[0]), h + 1, size[1]);
  }
  TF_CHECK_ARG(d != bool_, "resize", "images must be numeric, got {}", dtype_name(d));
  if (method != "bilinear" || antialias)
    return image_detail::resize_resampled(images, h, size, method, antialias);
  // TF's ResizeBilinear computes and returns float32; float64 stays float64 here so that its
  // gradients can be checked in float64.
  const Tensor x = d == float64 || d == float32 ? images : cast(images, float32);
  // Width first, then height, as TF's kernel interpolates the rows before the columns.
  return resize_bilinear_axis(resize_bilinear_axis(x, h + 1, size[1]), h, size[0]);
}

Tensor flip_left_right(const Tensor& images) {
  return reverse_axis(images, height_axis("flip_left_right", images) + 1);
}

Tensor flip_up_down(const Tensor& images) {
  return reverse_axis(images, height_axis("flip_up_down", images));
}

Tensor crop_to_bounding_box(const Tensor& images, int64_t offset_height, int64_t offset_width,
                            int64_t target_height, int64_t target_width) {
  const char* op = "crop_to_bounding_box";
  const int h = height_axis(op, images);
  const int64_t H = images.shape()[h], W = images.shape()[h + 1];
  TF_CHECK_ARG(offset_height >= 0 && offset_width >= 0, op,
               "offsets must be >= 0, got offset_height={}, offset_width={}", offset_height,
               offset_width);
  TF_CHECK_ARG(target_height > 0 && target_width > 0, op,
               "target sizes must be > 0, got target_height={}, target_width={}", target_height,
               target_width);
  TF_CHECK_ARG(offset_height + target_height <= H && offset_width + target_width <= W, op,
               "the box at ({}, {}) of size ({}, {}) does not fit in images of shape {}",
               offset_height, offset_width, target_height, target_width,
               images.shape().to_string());
  std::vector<int64_t> begin(static_cast<size_t>(images.rank()), 0);
  begin[static_cast<size_t>(h)] = offset_height;
  begin[static_cast<size_t>(h + 1)] = offset_width;
  return slice(images, begin, window(images, target_height, target_width));
}

Tensor central_crop(const Tensor& images, double central_fraction) {
  const int h = height_axis("central_crop", images);
  TF_CHECK_ARG(central_fraction > 0.0 && central_fraction <= 1.0, "central_crop",
               "central_fraction must be in (0, 1], got {}", central_fraction);
  if (central_fraction == 1.0) return images;
  // TF computes the start in float64 and truncates it to int32.
  const int64_t H = images.shape()[h], W = images.shape()[h + 1];
  const auto start = [&](int64_t n) {
    const double d = static_cast<double>(n);
    return static_cast<int64_t>((d - d * central_fraction) / 2);
  };
  const int64_t sh = start(H), sw = start(W);
  TF_CHECK_ARG(H - 2 * sh > 0 && W - 2 * sw > 0, "central_crop",
               "central_fraction {} leaves nothing of images of shape {}", central_fraction,
               images.shape().to_string());
  std::vector<int64_t> begin(static_cast<size_t>(images.rank()), 0);
  begin[static_cast<size_t>(h)] = sh;
  begin[static_cast<size_t>(h + 1)] = sw;
  return slice(images, begin, window(images, H - 2 * sh, W - 2 * sw));
}

Tensor pad_to_bounding_box(const Tensor& images, int64_t offset_height, int64_t offset_width,
                           int64_t target_height, int64_t target_width) {
  const char* op = "pad_to_bounding_box";
  const int h = height_axis(op, images);
  const int64_t H = images.shape()[h], W = images.shape()[h + 1];
  TF_CHECK_ARG(offset_height >= 0 && offset_width >= 0, op,
               "offsets must be >= 0, got offset_height={}, offset_width={}", offset_height,
               offset_width);
  TF_CHECK_ARG(offset_height + H <= target_height && offset_width + W <= target_width, op,
               "images of shape {} at offset ({}, {}) do not fit in the target size ({}, {})",
               images.shape().to_string(), offset_height, offset_width, target_height,
               target_width);
  std::vector<std::pair<int64_t, int64_t>> p(static_cast<size_t>(images.rank()), {0, 0});
  p[static_cast<size_t>(h)] = {offset_height, target_height - H - offset_height};
  p[static_cast<size_t>(h + 1)] = {offset_width, target_width - W - offset_width};
  return pad(images, p);
}

Tensor adjust_contrast(const Tensor& images, double contrast_factor) {
  const int h = height_axis("adjust_contrast", images);
  check_floating("adjust_contrast", images);
  const Tensor mean = reduce_mean(images, {h, h + 1}, true);
  return (images - mean) * cast(constant(Tensor(contrast_factor)), images.dtype()) + mean;
}

Tensor adjust_brightness(const Tensor& images, double delta) {
  height_axis("adjust_brightness", images);
  check_floating("adjust_brightness", images);
  return images + cast(constant(Tensor(delta)), images.dtype());
}

Tensor rgb_to_grayscale(const Tensor& images) {
  const int h = height_axis("rgb_to_grayscale", images);
  check_floating("rgb_to_grayscale", images);
  TF_CHECK_ARG(images.shape()[h + 2] == 3, "rgb_to_grayscale",
               "images must have 3 channels (RGB) in the last axis, got shape {}",
               images.shape().to_string());
  // TF's weights (ITU-R BT.601 luma, rounded to 4 digits).
  const Tensor w = detail::from_doubles({0.2989, 0.5870, 0.1140}, {3}, images.dtype());
  return reduce_sum(images * w, -1, true);
}

Tensor transform(const Tensor& images, const Tensor& transforms, const std::string& interpolation,
                 const std::string& fill_mode, double fill_value,
                 const std::vector<int64_t>& output_shape) {
  const char* op = "transform";
  TF_CHECK_ARG(images.defined() && transforms.defined(), op,
               "an input is an undefined tensor (TF's None)");
  TF_CHECK_ARG(images.rank() == 4, op,
               "images must have rank 4 (batch, height, width, channels), got shape {}",
               images.shape().to_string());
  int interp = 0;
  if (interpolation == "bilinear")
    interp = image_kernels::kBilinear;
  else if (interpolation == "nearest")
    interp = image_kernels::kNearest;
  else
    TF_CHECK_ARG(false, op, "interpolation must be \"bilinear\" or \"nearest\", got \"{}\"",
                 interpolation);
  int fill = 0;
  if (fill_mode == "reflect")
    fill = image_kernels::kReflect;
  else if (fill_mode == "wrap")
    fill = image_kernels::kWrap;
  else if (fill_mode == "constant")
    fill = image_kernels::kConstant;
  else if (fill_mode == "nearest")
    fill = image_kernels::kNearestFill;
  else
    TF_CHECK_ARG(false, op,
                 "fill_mode must be \"reflect\", \"wrap\", \"constant\" or \"nearest\", got "
                 "\"{}\"",
                 fill_mode);
  TF_CHECK_ARG(output_shape.empty() || output_shape.size() == 2, op,
               "output_shape must be empty or {{height, width}}, got {} elements",
               output_shape.size());
  int64_t oh = images.shape()[1], ow = images.shape()[2];
  if (!output_shape.empty()) {
    oh = output_shape[0];
    ow = output_shape[1];
  }
  TF_CHECK_ARG(oh > 0 && ow > 0, op, "the output height and width must be positive, got ({}, {})",
               oh, ow);
  const Tensor t = transforms.dtype() == float32 ? transforms : cast(transforms, float32);
  return detail::dispatch(prims::ImageProjectiveTransform(oh, ow, interp, fill, fill_value),
                          {images, t});
}

}  // namespace tapeflow::image

namespace tapeflow::prims {

void ImageProjectiveTransform::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const Tensor& x = in[0];
  const Tensor& t = in[1];
  const DType d = x.dtype();
  TF_CHECK_ARG(d != bool_, name(), "images must be numeric, got {}", dtype_name(d));
  TF_CHECK_ARG(x.rank() == 4, name(),
               "images must have rank 4 (batch, height, width, channels), got shape {}",
               x.shape().to_string());
  TF_CHECK_ARG(t.dtype() == float32, name(), "transforms must be float32, got {}",
               dtype_name(t.dtype()));
  TF_CHECK_ARG(t.rank() == 2 && t.shape()[1] == 8, name(),
               "transforms must have shape (batch, 8) or (1, 8), got {}", t.shape().to_string());
  const int64_t b = x.shape()[0], tb = t.shape()[0];
  TF_CHECK_ARG(tb == 1 || tb < 0 || b < 0 || tb == b, name(),
               "transforms of shape {} do not match images of shape {} (one transform per image, "
               "or one for all)",
               t.shape().to_string(), x.shape().to_string());
  TF_CHECK_ARG(x.shape()[1] >= 0 && x.shape()[2] >= 0, name(),
               "the height and width of images must be known, got shape {}", x.shape().to_string());
  out[0] = {TensorShape{b, out_height, out_width, x.shape()[3]}, d};
}

uint32_t ImageProjectiveTransform::vjp_saves() const {
  return save_input(1);
}

// TF's _image_projective_transform_v3_grad: the transforms as 3 x 3 matrices (last entry 1),
// inverted, normalised by their last entry, and applied to the cotangent at the input's size.
std::vector<Tensor> ImageProjectiveTransform::vjp(std::span<const Tensor> primals,
                                                  std::span<const Tensor> cts,
                                                  std::span<const int> argnums,
                                                  std::span<const Tensor>) const {
  std::vector<Tensor> out;
  for (int k : argnums) {
    if (k != 0) {
      out.emplace_back();
      continue;
    }
    const Tensor& t = primals[1];
    const Tensor m =
        reshape(concat({t, ones_like(slice(t, {0, 0}, {-1, 1}))}, 1), TensorShape({-1, 3, 3}));
    const Tensor flat = reshape(linalg::inv(m), TensorShape({-1, 9}));
    const Tensor inv_t = slice(flat, {0, 0}, {-1, 8}) / slice(flat, {0, 8}, {-1, 1});
    const TensorShape& s = primals[0].shape();
    out.push_back(detail::dispatch(
        ImageProjectiveTransform(s[1], s[2], interpolation, fill_mode, 0.0), {cts[0], inv_t}));
  }
  return out;
}

std::string ImageProjectiveTransform::attributes() const {
  return fmt::format("output_shape=[{}, {}], interpolation={}, fill_mode={}, fill_value={}",
                     out_height, out_width, interpolation, fill_mode, fill_value);
}

}  // namespace tapeflow::prims

namespace tapeflow::detail {

void check_transform_batch(const char* op, const Tensor& images, const Tensor& transforms) {
  TF_CHECK_ARG(transforms.shape()[0] == 1 || transforms.shape()[0] == images.shape()[0], op,
               "transforms of shape {} do not match images of shape {} (one transform per image, "
               "or one for all)",
               transforms.shape().to_string(), images.shape().to_string());
}

}  // namespace tapeflow::detail
