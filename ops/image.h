// TF's tf.image ops on NHWC images: a rank-3 (height, width, channels) image or a rank-4
// (batch, height, width, channels) batch. Height and width must be known (a traced function may
// leave the batch dimension None).
//
// resize, the flips, the crops and pads and the colour adjustments are composites of gather,
// slice, pad and elementwise ops, so they run on every device and their gradients come from
// those ops (resize's equal TF's ResizeBilinearGrad and ResizeNearestNeighborGrad). transform is
// the primitive ImageProjectiveTransform (TF's ImageProjectiveTransformV3) with CPU and CUDA
// kernels. Everything here is stateless and thread-safe. See docs/ops.md.
#pragma once

#include <string>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow::image {

// TF's tf.image.resize(images, size, method, antialias): "bilinear" (half-pixel centres, as
// TF2), "nearest" (half-pixel centres, rounding down, as TF2's ResizeNearestNeighbor),
// "bicubic" (TF's ResizeBicubic: Keys' cubic, a = -0.5), "area" (TF's ResizeArea), "lanczos3",
// "lanczos5", "gaussian" and "mitchellcubic" (TF's ScaleAndTranslate kernels). antialias widens
// the kernel of bilinear, bicubic, lanczos, gaussian and mitchellcubic when downscaling (TF's
// ScaleAndTranslate with antialias); nearest and area ignore it. size = {new_height, new_width},
// both positive. Every method but nearest returns float32 (float64 stays float64, where TF gives
// float32); nearest keeps the dtype. The methods besides bilinear and nearest are in
// ops/image_more.cpp.
Tensor resize(const Tensor& images, const std::vector<int64_t>& size,
              const std::string& method = "bilinear", bool antialias = false);

// Mirror images along the width (left_right) or the height (up_down) axis.
Tensor flip_left_right(const Tensor& images);
Tensor flip_up_down(const Tensor& images);

// TF's tf.image.central_crop: the central region of each image keeping central_fraction
// (in (0, 1]) of its height and width; the start offsets are truncated as TF's.
Tensor central_crop(const Tensor& images, double central_fraction);
// The target_height x target_width window whose top-left corner is (offset_height,
// offset_width); it must lie inside the image.
Tensor crop_to_bounding_box(const Tensor& images, int64_t offset_height, int64_t offset_width,
                            int64_t target_height, int64_t target_width);
// Pads with zeros to target_height x target_width, the image's top-left corner at
// (offset_height, offset_width).
Tensor pad_to_bounding_box(const Tensor& images, int64_t offset_height, int64_t offset_width,
                           int64_t target_height, int64_t target_width);

// (x - mean) * contrast_factor + mean, with the mean over height and width of each image and
// channel. Floating dtypes (TF also converts integer images; cast them first here).
Tensor adjust_contrast(const Tensor& images, double contrast_factor);
// images + delta. Floating dtypes (as adjust_contrast).
Tensor adjust_brightness(const Tensor& images, double delta);
// The weighted sum 0.2989 R + 0.5870 G + 0.1140 B over a last axis of 3, kept as a last axis of
// 1. Floating dtypes (as adjust_contrast).
Tensor rgb_to_grayscale(const Tensor& images);

// TF's ImageProjectiveTransformV3 (the op behind Keras' RandomRotation, RandomZoom and
// RandomTranslation): output pixel (y, x) of image b reads input point
//   (x', y') = ((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k),  k = c0 x + c1 y + 1
// from transforms[b] = [a0, a1, a2, b0, b1, b2, c0, c1] (transforms is (batch, 8), or (1, 8)
// for every image; float32). A point outside the image is mapped back by fill_mode: "reflect"
// (d c b a | a b c d | d c b a), "wrap" (a b c d | a b c d), "nearest" (a a a a | a b c d) or
// "constant" (fill_value); interpolation "bilinear" or "nearest". Interpolation reads pixels
// outside the image as fill_value in "constant" mode, as TF's kernel does. images must be rank
// 4; output_shape {height, width} defaults to the input's. The gradient with respect to images
// is TF's registered one: the cotangent transformed by the inverse matrices (fill_value 0), which
// is exact for pixel permutations (whole-pixel translations, flips, quarter turns) and an
// approximation of the adjoint otherwise; transforms get no gradient (TF's None).
Tensor transform(const Tensor& images, const Tensor& transforms,
                 const std::string& interpolation = "bilinear",
                 const std::string& fill_mode = "constant", double fill_value = 0.0,
                 const std::vector<int64_t>& output_shape = {});

}  // namespace tapeflow::image

namespace tapeflow::prims {

// Inputs: images (batch, height, width, channels) of a numeric dtype, transforms (batch or 1, 8)
// float32. interpolation: 0 nearest, 1 bilinear; fill_mode: 0 reflect, 1 wrap, 2 constant,
// 3 nearest.
struct ImageProjectiveTransform final : PrimitiveBase<ImageProjectiveTransform> {
  int64_t out_height, out_width;
  int interpolation, fill_mode;
  double fill_value;
  ImageProjectiveTransform(int64_t h, int64_t w, int interp, int fill, double value)
      : out_height(h), out_width(w), interpolation(interp), fill_mode(fill), fill_value(value) {}
  const char* name() const override { return "image_projective_transform"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override;
};

// TF's CropAndResize (tf::image::crop_and_resize, ops/image_more.h) and its two gradient
// kernels. Inputs: image (batch, height, width, channels) of a real dtype, boxes (num_boxes, 4)
// of the compute dtype (float64 for a float64 image, float32 otherwise), box_indices
// (num_boxes,) int32 (clipped into the batch by the kernels; the frontend checks it eagerly).
// method: 0 nearest, 1 bilinear (image_kernels::Interpolation). The result has the compute dtype.
struct CropAndResize final : PrimitiveBase<CropAndResize> {
  int64_t crop_height, crop_width;
  int method;
  double extrapolation_value;
  CropAndResize(int64_t h, int64_t w, int m, double value)
      : crop_height(h), crop_width(w), method(m), extrapolation_value(value) {}
  const char* name() const override { return "crop_and_resize"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override;
};

// The cotangent of CropAndResize's image (TF's CropAndResizeGradImage): inputs grads
// (num_boxes, crop_height, crop_width, channels) of the compute dtype, image (read for its
// shape only), boxes, box_indices; the result has the image's shape and the compute dtype. Its
// own gradient with respect to grads is crop_and_resize of the cotangent (it is linear in grads).
struct CropAndResizeGradImage final : PrimitiveBase<CropAndResizeGradImage> {
  int method;
  explicit CropAndResizeGradImage(int m) : method(m) {}
  const char* name() const override { return "crop_and_resize_grad_image"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  TF_DECLARE_VJP
  std::string attributes() const override;
};

// The cotangent of CropAndResize's boxes (TF's CropAndResizeGradBoxes, bilinear for both
// methods as TF: nearest sampling has no gradient with respect to the boxes, and TF uses the
// bilinear one in its place): inputs grads, image, boxes, box_indices; the result is
// (num_boxes, 4) of the compute dtype. No gradient of its own (TF registers none).
struct CropAndResizeGradBoxes final : PrimitiveBase<CropAndResizeGradBoxes> {
  const char* name() const override { return "crop_and_resize_grad_boxes"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
};

}  // namespace tapeflow::prims

namespace tapeflow::detail {
// The kernels' run-time check that transforms has one row per image or one for all (a traced
// graph may have left the batch None when infer ran); InvalidArgumentError naming both shapes.
void check_transform_batch(const char* op, const Tensor& images, const Tensor& transforms);
// The kernels' run-time check that boxes and box_indices have one row per box, and for the
// gradients that grads has one crop per box and the image's channels (a traced graph may have
// left them None when infer ran).
void check_crop_inputs(const char* op, const Tensor& image, const Tensor& boxes,
                       const Tensor& box_indices, const Tensor* grads);
}  // namespace tapeflow::detail
