// tf::image random augmentations (see ops/image_random.h).
#include "ops/image_random.h"

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/check.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image.h"
#include "ops/image_color.h"
#include "ops/image_more.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::image {

namespace {

using image_detail::check_image;

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

// Where an op's random numbers come from: tf::random's stream with an op seed (the random_*
// ops) or a stateless seed pair (the stateless_random_* ops: the same pair, the same numbers).
struct Source {
  std::optional<int64_t> seed;
  std::optional<std::array<int64_t, 2>> pair;
  // float32 uniform in [lo, hi), shaped `shape` (stateless) or shaped as `like` (seeded, which
  // follows a None batch in traces).
  Tensor uniform(const TensorShape& shape, const Tensor& like, double lo, double hi) const {
    if (pair) return random::stateless_uniform(shape, *pair, lo, hi, float32);
    if (like.defined()) return tapeflow::detail::random_uniform_like(like, lo, hi, float32, seed);
    return random::uniform(shape, lo, hi, float32, seed);
  }
  // A float32 scalar uniform in [lo, hi).
  Tensor draw(double lo, double hi) const { return uniform(TensorShape{}, Tensor(), lo, hi); }
};

// Flips each image along `axis` (of a single image: 0 height, 1 width) where its coin is < 0.5.
Tensor random_flip(const char* op, const Tensor& images, int axis, const Source& src) {
  check_image(op, images);
  const Tensor flipped = axis == 0 ? flip_up_down(images) : flip_left_right(images);
  if (images.rank() == 3)
    return where(less(src.draw(0, 1), constant(Tensor(0.5f))), flipped, images);
  // One coin per image, shaped (batch, 1, 1, 1) from the images so that a None batch works.
  const Tensor like = slice(images, {0, 0, 0, 0}, {-1, 1, 1, 1});
  const Tensor coins = src.uniform(like.shape(), like, 0.0, 1.0);
  return where(less(coins, constant(Tensor(0.5f))), flipped, images);
}

Tensor brightness(const char* op, const Tensor& images, double max_delta, const Source& src) {
  check_image(op, images);
  check_floating(op, images);
  TF_CHECK_ARG(max_delta >= 0, op, "max_delta must be non-negative, got {}", max_delta);
  return images + cast(src.draw(-max_delta, max_delta), images.dtype());
}

Tensor contrast(const char* op, const Tensor& images, double lower, double upper,
                const Source& src) {
  check_image(op, images);
  check_floating(op, images);
  check_range(op, lower, upper);
  const int h = images.rank() - 3;
  const Tensor mean = reduce_mean(images, {h, h + 1}, true);
  return (images - mean) * cast(src.draw(lower, upper), images.dtype()) + mean;
}

Tensor saturation(const char* op, const Tensor& images, double lower, double upper,
                  const Source& src) {
  check_image(op, images);
  check_range(op, lower, upper);
  return image_detail::adjust_saturation_by(images, src.draw(lower, upper));
}

Tensor hue(const char* op, const Tensor& images, double max_delta, const Source& src) {
  check_image(op, images);
  TF_CHECK_ARG(max_delta >= 0 && max_delta <= 0.5, op, "max_delta must be in [0, 0.5], got {}",
               max_delta);
  return image_detail::adjust_hue_by(images, src.draw(-max_delta, max_delta));
}

// value cropped to `size` at one offset per axis drawn uniformly from [0, shape - size].
Tensor crop(const char* op, const Tensor& value, const std::vector<int64_t>& size,
            const Source& src) {
  TF_CHECK_ARG(value.defined(), op, "value is an undefined tensor");
  const TensorShape& s = value.shape();
  TF_CHECK_ARG(static_cast<int>(size.size()) == s.rank(), op,
               "size must hold one size per axis of value {}, got {} values", s.to_string(),
               size.size());
  std::vector<double> limits;
  for (int i = 0; i < s.rank(); ++i) {
    const int64_t want = size[static_cast<size_t>(i)];
    TF_CHECK_ARG(s[i] >= 0 && want >= 0 && want <= s[i], op,
                 "size ({}) must fit in value's shape {} (known sizes, each size at most the "
                 "axis')",
                 fmt::join(size, ", "), s.to_string());
    limits.push_back(static_cast<double>(s[i] - want + 1));
  }
  if (s.rank() == 0) return value;
  // Offsets floor(u * limit), u uniform in [0, 1): float64 so that large axes stay exact.
  const Tensor u = cast(src.uniform(TensorShape{s.rank()}, Tensor(), 0.0, 1.0), float64);
  const Tensor limit = tapeflow::detail::from_doubles(limits, {s.rank()}, float64);
  const Tensor offsets = cast(minimum(floor(u * limit), limit - 1.0), int32);
  Tensor out = value;
  for (int i = 0; i < s.rank(); ++i) {
    const int64_t want = size[static_cast<size_t>(i)];
    if (want == s[i]) continue;
    std::vector<int32_t> steps(static_cast<size_t>(want));
    for (int64_t k = 0; k < want; ++k) steps[static_cast<size_t>(k)] = static_cast<int32_t>(k);
    const Tensor start = reshape(slice(offsets, {i}, {1}), {});
    out = gather(out, start + constant(steps, TensorShape{want}), i);
  }
  return out;
}

}  // namespace

Tensor random_flip_left_right(const Tensor& images, std::optional<int64_t> seed) {
  return random_flip("random_flip_left_right", images, 1, {seed, std::nullopt});
}
Tensor random_flip_up_down(const Tensor& images, std::optional<int64_t> seed) {
  return random_flip("random_flip_up_down", images, 0, {seed, std::nullopt});
}
Tensor random_brightness(const Tensor& images, double max_delta, std::optional<int64_t> seed) {
  return brightness("random_brightness", images, max_delta, {seed, std::nullopt});
}
Tensor random_contrast(const Tensor& images, double lower, double upper,
                       std::optional<int64_t> seed) {
  return contrast("random_contrast", images, lower, upper, {seed, std::nullopt});
}
Tensor random_saturation(const Tensor& images, double lower, double upper,
                         std::optional<int64_t> seed) {
  return saturation("random_saturation", images, lower, upper, {seed, std::nullopt});
}
Tensor random_hue(const Tensor& images, double max_delta, std::optional<int64_t> seed) {
  return hue("random_hue", images, max_delta, {seed, std::nullopt});
}
Tensor random_crop(const Tensor& value, const std::vector<int64_t>& size,
                   std::optional<int64_t> seed) {
  return crop("random_crop", value, size, {seed, std::nullopt});
}

Tensor stateless_random_flip_left_right(const Tensor& images, std::array<int64_t, 2> seed) {
  return random_flip("stateless_random_flip_left_right", images, 1, {std::nullopt, seed});
}
Tensor stateless_random_flip_up_down(const Tensor& images, std::array<int64_t, 2> seed) {
  return random_flip("stateless_random_flip_up_down", images, 0, {std::nullopt, seed});
}
Tensor stateless_random_brightness(const Tensor& images, double max_delta,
                                   std::array<int64_t, 2> seed) {
  return brightness("stateless_random_brightness", images, max_delta, {std::nullopt, seed});
}
Tensor stateless_random_contrast(const Tensor& images, double lower, double upper,
                                 std::array<int64_t, 2> seed) {
  return contrast("stateless_random_contrast", images, lower, upper, {std::nullopt, seed});
}
Tensor stateless_random_saturation(const Tensor& images, double lower, double upper,
                                   std::array<int64_t, 2> seed) {
  return saturation("stateless_random_saturation", images, lower, upper, {std::nullopt, seed});
}
Tensor stateless_random_hue(const Tensor& images, double max_delta, std::array<int64_t, 2> seed) {
  return hue("stateless_random_hue", images, max_delta, {std::nullopt, seed});
}
Tensor stateless_random_crop(const Tensor& value, const std::vector<int64_t>& size,
                             std::array<int64_t, 2> seed) {
  return crop("stateless_random_crop", value, size, {std::nullopt, seed});
}

}  // namespace tapeflow::image
