// tf::image random augmentations (see ops/image_random.h).
#include "ops/image_random.h"

#include <vector>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image.h"
#include "ops/image_color.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::image {

namespace {

void check_image(const char* op, const Tensor& images) {
  TF_CHECK_ARG(images.defined(), op, "images is an undefined tensor (TF's None)");
  TF_CHECK_ARG(images.rank() == 3 || images.rank() == 4, op,
               "images must have rank 3 (height, width, channels) or 4 (batch, height, width, "
               "channels), got shape {}",
               images.shape().to_string());
}

void check_floating(const char* op, const Tensor& images) {
  TF_CHECK_ARG(is_floating(images.dtype()), op,
               "images must be float16, bfloat16, float32 or float64, got {} (cast integer "
               "images to a floating dtype first)",
               dtype_name(images.dtype()));
}

void check_range(const char* op, double lower, double upper) {
  TF_CHECK_ARG(upper > lower, op, "upper must be > lower, got lower={}, upper={}", lower, upper);
  TF_CHECK_ARG(lower >= 0, op, "lower must be non-negative, got {}", lower);
}

// A float32 scalar uniform in [lo, hi).
Tensor draw(double lo, double hi, std::optional<int64_t> seed) {
  return random::uniform(TensorShape{}, lo, hi, float32, seed);
}

// Flips each image along `axis` (of a single image: 0 height, 1 width) where its coin is < 0.5.
Tensor random_flip(const char* op, const Tensor& images, int axis, std::optional<int64_t> seed) {
  check_image(op, images);
  const Tensor flipped = axis == 0 ? flip_up_down(images) : flip_left_right(images);
  if (images.rank() == 3)
    return where(less(draw(0, 1, seed), constant(Tensor(0.5f))), flipped, images);
  // One coin per image, shaped (batch, 1, 1, 1) from the images so that a None batch works.
  const Tensor like = slice(images, {0, 0, 0, 0}, {-1, 1, 1, 1});
  const Tensor coins = tapeflow::detail::random_uniform_like(like, 0.0, 1.0, float32, seed);
  return where(less(coins, constant(Tensor(0.5f))), flipped, images);
}

}  // namespace

Tensor random_flip_left_right(const Tensor& images, std::optional<int64_t> seed) {
  return random_flip("random_flip_left_right", images, 1, seed);
}

Tensor random_flip_up_down(const Tensor& images, std::optional<int64_t> seed) {
  return random_flip("random_flip_up_down", images, 0, seed);
}

Tensor random_brightness(const Tensor& images, double max_delta, std::optional<int64_t> seed) {
  const char* op = "random_brightness";
  check_image(op, images);
  check_floating(op, images);
  TF_CHECK_ARG(max_delta >= 0, op, "max_delta must be non-negative, got {}", max_delta);
  return images + cast(draw(-max_delta, max_delta, seed), images.dtype());
}

Tensor random_contrast(const Tensor& images, double lower, double upper,
                       std::optional<int64_t> seed) {
  const char* op = "random_contrast";
  check_image(op, images);
  check_floating(op, images);
  check_range(op, lower, upper);
  const int h = images.rank() - 3;
  const Tensor mean = reduce_mean(images, {h, h + 1}, true);
  return (images - mean) * cast(draw(lower, upper, seed), images.dtype()) + mean;
}

Tensor random_saturation(const Tensor& images, double lower, double upper,
                         std::optional<int64_t> seed) {
  check_image("random_saturation", images);
  check_range("random_saturation", lower, upper);
  return image_detail::adjust_saturation_by(images, draw(lower, upper, seed));
}

Tensor random_hue(const Tensor& images, double max_delta, std::optional<int64_t> seed) {
  check_image("random_hue", images);
  TF_CHECK_ARG(max_delta >= 0 && max_delta <= 0.5, "random_hue",
               "max_delta must be in [0, 0.5], got {}", max_delta);
  return image_detail::adjust_hue_by(images, draw(-max_delta, max_delta, seed));
}

}  // namespace tapeflow::image
