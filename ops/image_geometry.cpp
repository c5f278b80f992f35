// tf.image.rot90 and transpose (movement ops), extract_glimpse (gathers and elementwise ops)
// and crop_and_resize (ops/image_more.h): the CropAndResize primitive and its two gradient
// primitives (ops/image.h) are defined here, their kernels are in ops/cpu/image_crop.cpp and
// ops/cuda/image_crop.cu.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/context.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/image.h"
#include "ops/image_kernels.h"
#include "ops/image_more.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/unary.h"

namespace tapeflow::image_detail {

void check_image(const char* op, const Tensor& images) {
  TF_CHECK_ARG(images.defined(), op, "images is an undefined tensor (TF's None)");
  TF_CHECK_ARG(images.rank() == 3 || images.rank() == 4, op,
               "images must have rank 3 (height, width, channels) or 4 (batch, height, width, "
               "channels), got shape {}",
               images.shape().to_string());
}

Tensor i32(int64_t v) {
  return constant(std::vector<int32_t>{static_cast<int32_t>(v)}, TensorShape{});
}

}  // namespace tapeflow::image_detail

namespace tapeflow::image {

namespace {

using image_detail::check_image;
using image_detail::i32;

// images with the height and width axes swapped.
Tensor swap_hw(const Tensor& images) {
  return images.rank() == 3 ? tapeflow::transpose(images, {1, 0, 2})
                            : tapeflow::transpose(images, {0, 2, 1, 3});
}

}  // namespace

Tensor transpose(const Tensor& images) {
  check_image("transpose", images);
  return swap_hw(images);
}

Tensor rot90(const Tensor& images, int k) {
  check_image("rot90", images);
  const int h = images.rank() - 3, w = images.rank() - 2;
  switch (((k % 4) + 4) % 4) {
    case 1:  // counter-clockwise: the columns, last first, become the rows
      return swap_hw(reverse(images, {w}));
    case 2:
      return reverse(images, {h, w});
    case 3:
      return reverse(swap_hw(images), {w});
    default:
      return images;
  }
}

Tensor crop_and_resize(const Tensor& image, const Tensor& boxes, const Tensor& box_indices,
                       const std::vector<int64_t>& crop_size, const std::string& method,
                       double extrapolation_value) {
  const char* op = "crop_and_resize";
  TF_CHECK_ARG(image.defined() && boxes.defined() && box_indices.defined(), op,
               "image, boxes and box_indices must be defined");
  const TensorShape& s = image.shape();
  TF_CHECK_ARG(s.rank() == 4 && s[1] >= 1 && s[2] >= 1 && s[3] >= 1, op,
               "image must be (batch, height, width, channels) with known, non-zero height, "
               "width and channels, got shape {}",
               s.to_string());
  TF_CHECK_ARG(boxes.rank() == 2 && boxes.shape()[1] == 4 && is_floating(boxes.dtype()), op,
               "boxes must be a floating (num_boxes, 4) tensor of [y1, x1, y2, x2] rows, got {} {}",
               dtype_name(boxes.dtype()), boxes.shape().to_string());
  TF_CHECK_ARG(box_indices.rank() == 1 && is_integer(box_indices.dtype()), op,
               "box_indices must be an integer (num_boxes,) tensor, got {} {}",
               dtype_name(box_indices.dtype()), box_indices.shape().to_string());
  TF_CHECK_ARG(box_indices.shape()[0] == boxes.shape()[0] || box_indices.shape()[0] < 0 ||
                   boxes.shape()[0] < 0,
               op, "boxes {} and box_indices {} must have one row per box",
               boxes.shape().to_string(), box_indices.shape().to_string());
  TF_CHECK_ARG(crop_size.size() == 2 && crop_size[0] >= 1 && crop_size[1] >= 1, op,
               "crop_size must be two positive sizes {{crop_height, crop_width}}, got {} values",
               crop_size.size());
  TF_CHECK_ARG(method == "bilinear" || method == "nearest", op,
               "method must be \"bilinear\" or \"nearest\", got \"{}\"", method);
  // TF raises InvalidArgumentError for an index outside the batch; eagerly so does tapeflow
  // (traced, an index is clipped into the batch).
  if (detail::thread_context().trace == nullptr && s[0] >= 0 && box_indices.shape()[0] > 0) {
    const int64_t lo = cast(reduce_min(box_indices), int64).item<int64_t>();
    const int64_t hi = cast(reduce_max(box_indices), int64).item<int64_t>();
    TF_CHECK_ARG(lo >= 0 && hi < s[0], op,
                 "box_indices must be in [0, {}) (the image batch), got values in [{}, {}]", s[0],
                 lo, hi);
  }
  TF_CHECK_ARG(image.dtype() != bool_, op, "image must be numeric, got {}",
               dtype_name(image.dtype()));
  // Computed in float32 as TF (float64 stays float64, so that gradients can be checked there).
  const DType cd = image.dtype() == float64 ? float64 : float32;
  const int m = method == "nearest" ? image_kernels::kNearest : image_kernels::kBilinear;
  return detail::dispatch(prims::CropAndResize(crop_size[0], crop_size[1], m, extrapolation_value),
                          {image, boxes.dtype() == cd ? boxes : cast(boxes, cd),
                           box_indices.dtype() == int32 ? box_indices : cast(box_indices, int32)});
}

Tensor extract_glimpse(const Tensor& input, const std::vector<int64_t>& size, const Tensor& offsets,
                       bool centered, bool normalized, const std::string& noise,
                       std::optional<int64_t> seed) {
  const char* op = "extract_glimpse";
  TF_CHECK_ARG(input.defined() && offsets.defined(), op, "input and offsets must be defined");
  const TensorShape& s = input.shape();
  TF_CHECK_ARG(s.rank() == 4 && s[1] >= 1 && s[2] >= 1 && s[3] >= 1 && input.dtype() == float32, op,
               "input must be a float32 (batch, height, width, channels) tensor with known, "
               "non-zero height, width and channels, got {} {}",
               dtype_name(input.dtype()), s.to_string());
  TF_CHECK_ARG(size.size() == 2 && size[0] >= 1 && size[1] >= 1, op,
               "size must be two positive sizes {{glimpse_height, glimpse_width}}, got {} values",
               size.size());
  TF_CHECK_ARG(offsets.rank() == 2 && offsets.shape()[1] == 2 && is_floating(offsets.dtype()), op,
               "offsets must be a floating (batch, 2) tensor of (y, x) rows, got {} {}",
               dtype_name(offsets.dtype()), offsets.shape().to_string());
  TF_CHECK_ARG(noise == "uniform" || noise == "gaussian" || noise == "zero", op,
               "noise must be \"uniform\", \"gaussian\" or \"zero\", got \"{}\"", noise);
  const int64_t H = s[1], W = s[2], C = s[3], gh = size[0], gw = size[1];
  TF_CHECK_ARG(s[0] < 0 || s[0] * H * W <= int64_t{1} << 31, op,
               "inputs of more than 2^31 pixels are not supported, got {}", s.to_string());
  // The glimpse's top-left pixel, in float32 as TF's kernel computes it: normalised offsets are
  // scaled by the image size and, centred, halved, moved to the image centre and by half the
  // glimpse; pixel offsets, centred, move to the centre only. Truncated toward zero.
  const Tensor off = cast(offsets, float32);
  const auto corner = [&](int64_t j, int64_t image, int64_t glimpse) {
    Tensor v = slice(off, {0, j}, {-1, 1});
    const auto half_image = static_cast<float>(image) / 2.0f;
    if (normalized) {
      v = v * static_cast<float>(image);
      if (centered) v = v / 2.0f + half_image - static_cast<float>(glimpse) / 2.0f;
    } else if (centered) {
      v = v + half_image;
    }
    return cast(v, int32);  // (batch, 1)
  };
  const Tensor oy = reshape(corner(0, H, gh), {-1, 1, 1}),
               ox = reshape(corner(1, W, gw), {-1, 1, 1});
  std::vector<int32_t> ry(static_cast<size_t>(gh)), rx(static_cast<size_t>(gw));
  for (int64_t i = 0; i < gh; ++i) ry[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  for (int64_t i = 0; i < gw; ++i) rx[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  const Tensor rows = oy + constant(ry, TensorShape{1, gh, 1});
  const Tensor cols = ox + constant(rx, TensorShape{1, 1, gw});
  const Tensor inside =
      logical_and(logical_and(greater_equal(rows, i32(0)), less(rows, i32(H))),
                  logical_and(greater_equal(cols, i32(0)), less(cols, i32(W))));  // (batch, gh, gw)
  const Tensor images =
      cast(cumsum(ones_like(reshape(slice(off, {0, 0}, {-1, 1}), {-1, 1, 1})), 0), int32) - i32(1);
  const Tensor index = images * i32(H * W) + clip_by_value(rows, i32(0), i32(H - 1)) * i32(W) +
                       clip_by_value(cols, i32(0), i32(W - 1));
  const Tensor pixels = reshape(gather(reshape(input, {-1, C}), index, 0), {-1, gh, gw, C});
  const Tensor keep = reshape(inside, {-1, gh, gw, 1});
  if (noise == "zero") return where(keep, pixels, zeros_like(pixels));
  // Outside the image: uniform between the image's smallest and largest value (all channels),
  // or normal with each channel's mean and standard deviation clipped to its range, as TF.
  Tensor fill;
  if (noise == "uniform") {
    const Tensor lo = reduce_min(input, {1, 2, 3}, true), hi = reduce_max(input, {1, 2, 3}, true);
    fill = lo + detail::random_uniform_like(pixels, 0.0, 1.0, float32, seed) * (hi - lo);
  } else {
    const Tensor mean = reduce_mean(input, {1, 2}, true);
    const Tensor sd = sqrt(reduce_mean(square(input - mean), {1, 2}, true));
    const Tensor lo = reduce_min(input, {1, 2}, true), hi = reduce_max(input, {1, 2}, true);
    fill = minimum(
        maximum(mean + detail::random_normal_like(pixels, 0.0, 1.0, float32, seed) * sd, lo), hi);
  }
  return where(keep, pixels, fill);
}

}  // namespace tapeflow::image

namespace tapeflow::prims {

namespace {

const char* method_name(int method) {
  return method == image_kernels::kNearest ? "nearest" : "bilinear";
}

// The checks CropAndResize and its gradients share: image (batch, height, width, channels) with
// known height and width, boxes (num_boxes, 4) of the compute dtype, box_indices (num_boxes,)
// int32.
void check_crop(const char* op, const Tensor& image, const Tensor& boxes, const Tensor& box_indices,
                DType cd) {
  const TensorShape& s = image.shape();
  TF_CHECK_ARG(s.rank() == 4 && s[1] >= 1 && s[2] >= 1 && image.dtype() != bool_, op,
               "image must be a numeric (batch, height, width, channels) tensor with known, "
               "non-zero height and width, got {} {}",
               dtype_name(image.dtype()), s.to_string());
  TF_CHECK_ARG(boxes.rank() == 2 && boxes.shape()[1] == 4 && boxes.dtype() == cd, op,
               "boxes must be a {} (num_boxes, 4) tensor, got {} {}", dtype_name(cd),
               dtype_name(boxes.dtype()), boxes.shape().to_string());
  TF_CHECK_ARG(box_indices.rank() == 1 && box_indices.dtype() == int32, op,
               "box_indices must be an int32 (num_boxes,) tensor, got {} {}",
               dtype_name(box_indices.dtype()), box_indices.shape().to_string());
  const int64_t n = boxes.shape()[0], ni = box_indices.shape()[0];
  TF_CHECK_ARG(n < 0 || ni < 0 || n == ni, op,
               "boxes {} and box_indices {} must have one row per box", boxes.shape().to_string(),
               box_indices.shape().to_string());
}

DType crop_dtype(const Tensor& image) {
  return image.dtype() == float64 ? float64 : float32;
}

// grads (num_boxes, crop_height, crop_width, channels) of the gradient kernels.
void check_grads(const char* op, const Tensor& grads, const Tensor& image, const Tensor& boxes) {
  const TensorShape& g = grads.shape();
  TF_CHECK_ARG(grads.rank() == 4 && grads.dtype() == boxes.dtype(), op,
               "grads must be a {} (num_boxes, crop_height, crop_width, channels) tensor, got {} "
               "{}",
               dtype_name(boxes.dtype()), dtype_name(grads.dtype()), g.to_string());
  TF_CHECK_ARG(g[1] >= 1 && g[2] >= 1, op, "grads must have a known, non-zero crop size, got {}",
               g.to_string());
  const int64_t c = image.shape()[3], n = boxes.shape()[0];
  TF_CHECK_ARG((g[3] < 0 || c < 0 || g[3] == c) && (g[0] < 0 || n < 0 || g[0] == n), op,
               "grads {} must have one crop per box of boxes {} and the channels of image {}",
               g.to_string(), boxes.shape().to_string(), image.shape().to_string());
}

}  // namespace

void CropAndResize::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const DType cd = crop_dtype(in[0]);
  check_crop(name(), in[0], in[1], in[2], cd);
  TF_CHECK_ARG(crop_height >= 1 && crop_width >= 1, name(),
               "crop_size must be positive, got ({}, {})", crop_height, crop_width);
  const int64_t n = in[1].shape()[0] >= 0 ? in[1].shape()[0] : in[2].shape()[0];
  out[0] = {TensorShape{n, crop_height, crop_width, in[0].shape()[3]}, cd};
}

uint32_t CropAndResize::vjp_saves() const {
  return save_input(0) | save_input(1) | save_input(2);
}

// TF's _CropAndResizeGrad: the image's cotangent for floating images (integer images get none),
// the boxes' through the bilinear formula for both methods.
std::vector<Tensor> CropAndResize::vjp(std::span<const Tensor> primals, std::span<const Tensor> cts,
                                       std::span<const int> argnums,
                                       std::span<const Tensor>) const {
  std::vector<Tensor> out;
  for (int k : argnums) {
    if (k == 0 && is_floating(primals[0].dtype())) {
      Tensor g = detail::dispatch(CropAndResizeGradImage(method),
                                  {cts[0], primals[0], primals[1], primals[2]});
      out.push_back(g.dtype() == primals[0].dtype() ? g : cast(g, primals[0].dtype()));
    } else if (k == 1) {
      out.push_back(
          detail::dispatch(CropAndResizeGradBoxes(), {cts[0], primals[0], primals[1], primals[2]}));
    } else {
      out.emplace_back();
    }
  }
  return out;
}

std::string CropAndResize::attributes() const {
  return fmt::format("crop_size=[{}, {}], method={}, extrapolation_value={}", crop_height,
                     crop_width, method_name(method), extrapolation_value);
}

void CropAndResizeGradImage::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_crop(name(), in[1], in[2], in[3], crop_dtype(in[1]));
  check_grads(name(), in[0], in[1], in[2]);
  out[0] = {in[1].shape(), in[0].dtype()};
}

uint32_t CropAndResizeGradImage::vjp_saves() const {
  return save_input(2) | save_input(3);
}

// Linear in grads: the cotangent's own crops. The image is read for its shape only (no
// gradient); the boxes' second derivative is not implemented (nor is it in TF).
std::vector<Tensor> CropAndResizeGradImage::vjp(std::span<const Tensor> primals,
                                                std::span<const Tensor> cts,
                                                std::span<const int> argnums,
                                                std::span<const Tensor>) const {
  std::vector<Tensor> out;
  for (int k : argnums) {
    if (k == 0) {
      const TensorShape& g = primals[0].shape();
      out.push_back(detail::dispatch(CropAndResize(g[1], g[2], method, 0.0),
                                     {cts[0], primals[2], primals[3]}));
    } else {
      TF_CHECK_T(UnimplementedError, k != 2, name(),
                 "the second derivative of crop_and_resize with respect to the boxes is not "
                 "implemented (TF has none either); watch the image only, or stop_gradient the "
                 "boxes");
      out.emplace_back();
    }
  }
  return out;
}

std::string CropAndResizeGradImage::attributes() const {
  return fmt::format("method={}", method_name(method));
}

void CropAndResizeGradBoxes::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  check_crop(name(), in[1], in[2], in[3], crop_dtype(in[1]));
  check_grads(name(), in[0], in[1], in[2]);
  out[0] = {in[2].shape(), in[2].dtype()};
}

}  // namespace tapeflow::prims

namespace tapeflow::detail {

void check_crop_inputs(const char* op, const Tensor& image, const Tensor& boxes,
                       const Tensor& box_indices, const Tensor* grads) {
  TF_CHECK_ARG(boxes.shape()[0] == box_indices.shape()[0], op,
               "boxes {} and box_indices {} must have one row per box", boxes.shape().to_string(),
               box_indices.shape().to_string());
  if (grads != nullptr)
    TF_CHECK_ARG(grads->shape()[0] == boxes.shape()[0] && grads->shape()[3] == image.shape()[3], op,
                 "grads {} must have one crop per box of boxes {} and the channels of image {}",
                 grads->shape().to_string(), boxes.shape().to_string(), image.shape().to_string());
}

}  // namespace tapeflow::detail
