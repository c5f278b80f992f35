// TF's tf.image random augmentations on NHWC images (rank 3 or 4). They draw from tf::random's
// uniform with `seed` as the op seed (tf::random's seed rules: a seeded op repeats its sequence
// after tf::random::set_seed and draws new values on every call), so they cannot reproduce TF's
// own random streams. Composites of the adjust_* ops; gradients flow to the images.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow::image {

// Mirrors each image (one coin per image of a batch, as TF) with probability 1/2 along the width
// (left_right) or the height (up_down). Keeps the dtype.
Tensor random_flip_left_right(const Tensor& images, std::optional<int64_t> seed = std::nullopt);
Tensor random_flip_up_down(const Tensor& images, std::optional<int64_t> seed = std::nullopt);

// One draw for the whole call, as TF: adjust_brightness by delta uniform in [-max_delta,
// max_delta) (max_delta >= 0); adjust_contrast and adjust_saturation by a factor uniform in
// [lower, upper) (0 <= lower < upper); adjust_hue by delta uniform in [-max_delta, max_delta)
// (0 <= max_delta <= 0.5). Dtypes as the adjust_* ops.
Tensor random_brightness(const Tensor& images, double max_delta,
                         std::optional<int64_t> seed = std::nullopt);
Tensor random_contrast(const Tensor& images, double lower, double upper,
                       std::optional<int64_t> seed = std::nullopt);
Tensor random_saturation(const Tensor& images, double lower, double upper,
                         std::optional<int64_t> seed = std::nullopt);
Tensor random_hue(const Tensor& images, double max_delta,
                  std::optional<int64_t> seed = std::nullopt);

// TF's tf.image.random_crop: value (any rank, known sizes) cropped to `size` at one offset per
// axis drawn uniformly from [0, shape - size]; keeps the dtype.
Tensor random_crop(const Tensor& value, const std::vector<int64_t>& size,
                   std::optional<int64_t> seed = std::nullopt);

// TF's tf.image.stateless_random_*: the ops above drawing from tf::random::stateless_uniform
// with the seed pair, so the same pair gives the same result (also at every call of a traced
// function). The numbers are tapeflow's stateless stream, not TF's.
Tensor stateless_random_flip_left_right(const Tensor& images, std::array<int64_t, 2> seed);
Tensor stateless_random_flip_up_down(const Tensor& images, std::array<int64_t, 2> seed);
Tensor stateless_random_brightness(const Tensor& images, double max_delta,
                                   std::array<int64_t, 2> seed);
Tensor stateless_random_contrast(const Tensor& images, double lower, double upper,
                                 std::array<int64_t, 2> seed);
Tensor stateless_random_saturation(const Tensor& images, double lower, double upper,
                                   std::array<int64_t, 2> seed);
Tensor stateless_random_hue(const Tensor& images, double max_delta, std::array<int64_t, 2> seed);
Tensor stateless_random_crop(const Tensor& value, const std::vector<int64_t>& size,
                             std::array<int64_t, 2> seed);

// TF's tf.image.sample_distorted_bounding_box and stateless_sample_distorted_bounding_box: a
// random crop of an image of image_size (height, width, channels; a 1-D integer tensor) that
// covers at least min_object_covered of one of bounding_boxes (batch, N, 4), [y1, x1, y2, x2]
// normalised (eagerly, a coordinate outside [0, 1] is an InvalidArgumentError, as TF), with an
// aspect ratio (width / height) drawn from aspect_ratio_range and an area in area_range times the
// image's. TF's sampling: up to max_attempts candidate crops (a ratio, then a height between the
// bounds the area range gives, the width rounded from it, offsets drawn below height - crop
// height and width - crop width); the first that satisfies the constraints wins, else the whole
// image. Boxes are pixel rectangles truncated from box * size; boxes of area under one pixel do
// not count. With no boxes, use_image_if_no_bounding_boxes takes the whole image as the box (else
// an InvalidArgumentError, as TF). The result: begin (offset_height, offset_width, 0) and size
// (target_height, target_width, -1) in image_size's dtype, for slice(image, begin, size), and
// bboxes (1, 1, 4) float32, the crop normalised (for draw_bounding_boxes). All attempts are drawn
// at once as tensor ops, so it runs on every device and in traced functions. The numbers are
// tapeflow's stream (the stateless form: the same seed pair, the same crop), not TF's.
struct DistortedBoundingBox {
  Tensor begin, size, bboxes;
};
DistortedBoundingBox sample_distorted_bounding_box(
    const Tensor& image_size, const Tensor& bounding_boxes,
    std::optional<int64_t> seed = std::nullopt, double min_object_covered = 0.1,
    std::array<double, 2> aspect_ratio_range = {0.75, 1.33},
    std::array<double, 2> area_range = {0.05, 1.0}, int64_t max_attempts = 100,
    bool use_image_if_no_bounding_boxes = false);
DistortedBoundingBox stateless_sample_distorted_bounding_box(
    const Tensor& image_size, const Tensor& bounding_boxes, std::array<int64_t, 2> seed,
    double min_object_covered = 0.1, std::array<double, 2> aspect_ratio_range = {0.75, 1.33},
    std::array<double, 2> area_range = {0.05, 1.0}, int64_t max_attempts = 100,
    bool use_image_if_no_bounding_boxes = false);

}  // namespace tapeflow::image
