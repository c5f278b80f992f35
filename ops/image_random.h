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

}  // namespace tapeflow::image
