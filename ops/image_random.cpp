// tf::image random augmentations (see ops/image_random.h).
#include "ops/image_random.h"

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

#include "core/check.h"
#include "core/context.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
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
  // An image without pixels or channels is its own flip (the coin's slice needs one of each).
  for (int d = images.rank() - 3; d < images.rank(); ++d)
    if (images.shape()[d] == 0) return images;
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

// sample_distorted_bounding_box's attempts, all at once (see ops/image_random.h): TF's
// GenerateRandomCrop and SatisfiesOverlapConstraints as elementwise ops over the attempts (and
// the attempts x boxes overlaps), lrint as round half to even, then the first attempt that
// passes (argmax's first maximum) or the whole image.
DistortedBoundingBox distorted_box(const char* op, const Tensor& image_size,
                                   const Tensor& bounding_boxes, double min_object_covered,
                                   std::array<double, 2> ratio, std::array<double, 2> area,
                                   int64_t attempts, bool use_image, const Source& src) {
  TF_CHECK_ARG(image_size.defined() && bounding_boxes.defined(), op,
               "image_size and bounding_boxes must be defined");
  TF_CHECK_ARG(
      image_size.rank() == 1 && image_size.shape()[0] == 3 && is_integer(image_size.dtype()), op,
      "image_size must be an integer tensor of 3 values (height, width, channels), "
      "got {} {}",
      dtype_name(image_size.dtype()), image_size.shape().to_string());
  const TensorShape& bs = bounding_boxes.shape();
  TF_CHECK_ARG(bounding_boxes.rank() == 3 && bs[2] == 4 && bs[0] >= 0 && bs[1] >= 0 &&
                   is_floating(bounding_boxes.dtype()),
               op,
               "bounding_boxes must be a floating (batch, N, 4) tensor of known shape, got {} {}",
               dtype_name(bounding_boxes.dtype()), bs.to_string());
  TF_CHECK_ARG(min_object_covered >= 0.0, op, "min_object_covered must be non-negative, got {}",
               min_object_covered);
  TF_CHECK_ARG(ratio[0] > 0.0 && ratio[0] <= ratio[1], op,
               "aspect_ratio_range must be (lower, upper) with 0 < lower <= upper, got ({}, {})",
               ratio[0], ratio[1]);
  TF_CHECK_ARG(area[0] > 0.0 && area[0] <= area[1] && area[1] <= 1.0, op,
               "area_range must be (lower, upper) with 0 < lower <= upper <= 1, got ({}, {})",
               area[0], area[1]);
  TF_CHECK_ARG(attempts >= 1, op, "max_attempts must be positive, got {}", attempts);
  const int64_t m = bs[0] * bs[1];
  TF_CHECK_ARG(m > 0 || use_image, op,
               "No bounding boxes provided as input. One must enable "
               "use_image_if_no_bounding_boxes if you wish to not provide any bounding boxes.");
  Tensor boxes = m > 0 ? reshape(cast(bounding_boxes, float32), {m, 4})
                       : tapeflow::detail::from_doubles({0, 0, 1, 1}, {1, 4}, float32);
  if (m > 0 && tapeflow::detail::thread_context().trace == nullptr) {
    const double lo = reduce_min(boxes).item<float>(), hi = reduce_max(boxes).item<float>();
    TF_CHECK_ARG(lo >= 0.0 && hi <= 1.0, op,
                 "All bounding box coordinates must be in [0.0, 1.0]: {}", lo < 0.0 ? lo : hi);
  }
  const auto f64 = [](double v) { return Tensor(v); };
  const Tensor size = cast(image_size, float64);
  const Tensor h_img = reshape(slice(size, {0}, {1}), {}),
               w_img = reshape(slice(size, {1}, {1}), {});
  // Four uniforms per attempt: the ratio, the height, the two offsets.
  const Tensor u = cast(src.uniform(TensorShape{4, attempts}, Tensor(), 0.0, 1.0), float64);
  const auto row = [&](int64_t i) { return reshape(slice(u, {i, 0}, {1, -1}), {attempts}); };
  const Tensor ar = row(0) * f64(ratio[1] - ratio[0]) + f64(ratio[0]);
  const Tensor min_area = h_img * w_img * f64(area[0]), max_area = h_img * w_img * f64(area[1]);
  Tensor min_h = round(sqrt(min_area / ar)), max_h = round(sqrt(max_area / ar));
  // The largest height whose rounded width still fits.
  Tensor fit = floor((w_img + f64(0.5 - 1e-7)) / ar);
  fit = where(greater(round(fit * ar), w_img), fit - f64(1.0), fit);
  max_h = minimum(where(greater(round(max_h * ar), w_img), fit, max_h), h_img);
  min_h = minimum(min_h, max_h);
  Tensor h = min_h + minimum(floor(row(1) * (max_h - min_h + f64(1.0))), max_h - min_h);
  Tensor w = round(h * ar);
  const Tensor small = less(w * h, min_area);
  h = where(small, h + f64(1.0), h);
  w = where(small, round(h * ar), w);
  const Tensor a = w * h;
  const Tensor fits =
      logical_not(logical_or(logical_or(logical_or(less(a, min_area), greater(a, max_area)),
                                        logical_or(greater(w, w_img), greater(h, h_img))),
                             logical_or(less_equal(w, f64(0.0)), less_equal(h, f64(0.0)))));
  // Offsets below image - crop (TF's Uniform(n) draws from [0, n)), 0 for a full axis.
  const auto offset = [&](const Tensor& uu, const Tensor& crop, const Tensor& full) {
    const Tensor room = full - crop;
    return where(less(crop, full), minimum(floor(uu * room), room - f64(1.0)), zeros_like(crop));
  };
  const Tensor y = offset(row(2), h, h_img), x = offset(row(3), w, w_img);
  // The boxes as pixel rectangles, truncated from float32 products as TF's kernel.
  const auto edge = [&](int64_t j, const Tensor& len) {
    return reshape(cast(floor(slice(boxes, {0, j}, {-1, 1}) * cast(len, float32)), float64),
                   {1, -1});  // (1, boxes)
  };
  const Tensor by1 = edge(0, h_img), bx1 = edge(1, w_img), by2 = edge(2, h_img),
               bx2 = edge(3, w_img);
  const auto col = [&](const Tensor& t) { return reshape(t, {attempts, 1}); };
  const Tensor zero = f64(0.0);
  const Tensor ih = maximum(minimum(col(y + h), by2) - maximum(col(y), by1), zero);
  const Tensor iw = maximum(minimum(col(x + w), bx2) - maximum(col(x), bx1), zero);
  const Tensor box_area = (by2 - by1) * (bx2 - bx1);
  const Tensor counts = greater_equal(box_area, f64(1.0));
  const Tensor covered =
      logical_and(counts, greater_equal(ih * iw / where(counts, box_area, ones_like(box_area)),
                                        f64(min_object_covered)));
  const Tensor good =
      logical_and(logical_and(fits, greater_equal(a, f64(1.0))), reduce_any(covered, {1}));
  const Tensor first = argmax(cast(good, int32), 0);
  const Tensor found = reduce_any(good);
  const auto pick = [&](const Tensor& v, const Tensor& fallback) {
    return where(found, reshape(gather(v, reshape(first, {1}), 0), {}), fallback);
  };
  const Tensor oy = pick(y, zero), ox = pick(x, zero), th = pick(h, h_img), tw = pick(w, w_img);
  const DType d = image_size.dtype();
  const auto ints = [&](const Tensor& p, const Tensor& q, double last) {
    return cast(stack({p, q, f64(last)}, 0), d);
  };
  const auto norm = [](const Tensor& v, const Tensor& len) {
    return cast(v, float32) / cast(len, float32);
  };
  const Tensor bboxes = reshape(
      stack({norm(oy, h_img), norm(ox, w_img), norm(oy + th, h_img), norm(ox + tw, w_img)}, 0),
      {1, 1, 4});
  return {ints(oy, ox, 0.0), ints(th, tw, -1.0), bboxes};
}

}  // namespace

Tensor random_flip_left_right(const Tensor& images, std::optional<int64_t> seed) {
  return detail::naming_errors("random_flip_left_right", [&] {
    return random_flip("random_flip_left_right", images, 1, {seed, std::nullopt});
  });
}
Tensor random_flip_up_down(const Tensor& images, std::optional<int64_t> seed) {
  return detail::naming_errors("random_flip_up_down", [&] {
    return random_flip("random_flip_up_down", images, 0, {seed, std::nullopt});
  });
}
Tensor random_brightness(const Tensor& images, double max_delta, std::optional<int64_t> seed) {
  return detail::naming_errors("random_brightness", [&] {
    return brightness("random_brightness", images, max_delta, {seed, std::nullopt});
  });
}
Tensor random_contrast(const Tensor& images, double lower, double upper,
                       std::optional<int64_t> seed) {
  return detail::naming_errors("random_contrast", [&] {
    return contrast("random_contrast", images, lower, upper, {seed, std::nullopt});
  });
}
Tensor random_saturation(const Tensor& images, double lower, double upper,
                         std::optional<int64_t> seed) {
  return detail::naming_errors("random_saturation", [&] {
    return saturation("random_saturation", images, lower, upper, {seed, std::nullopt});
  });
}
Tensor random_hue(const Tensor& images, double max_delta, std::optional<int64_t> seed) {
  return detail::naming_errors("random_hue", [&] {
    return hue("random_hue", images, max_delta, {seed, std::nullopt});
  });
}
Tensor random_crop(const Tensor& value, const std::vector<int64_t>& size,
                   std::optional<int64_t> seed) {
  return detail::naming_errors("random_crop", [&] {
    return crop("random_crop", value, size, {seed, std::nullopt});
  });
}

Tensor stateless_random_flip_left_right(const Tensor& images, std::array<int64_t, 2> seed) {
  return detail::naming_errors("stateless_random_flip_left_right", [&] {
    return random_flip("stateless_random_flip_left_right", images, 1, {std::nullopt, seed});
  });
}
Tensor stateless_random_flip_up_down(const Tensor& images, std::array<int64_t, 2> seed) {
  return detail::naming_errors("stateless_random_flip_up_down", [&] {
    return random_flip("stateless_random_flip_up_down", images, 0, {std::nullopt, seed});
  });
}
Tensor stateless_random_brightness(const Tensor& images, double max_delta,
                                   std::array<int64_t, 2> seed) {
  return detail::naming_errors("stateless_random_brightness", [&] {
    return brightness("stateless_random_brightness", images, max_delta, {std::nullopt, seed});
  });
}
Tensor stateless_random_contrast(const Tensor& images, double lower, double upper,
                                 std::array<int64_t, 2> seed) {
  return detail::naming_errors("stateless_random_contrast", [&] {
    return contrast("stateless_random_contrast", images, lower, upper, {std::nullopt, seed});
  });
}
Tensor stateless_random_saturation(const Tensor& images, double lower, double upper,
                                   std::array<int64_t, 2> seed) {
  return detail::naming_errors("stateless_random_saturation", [&] {
    return saturation("stateless_random_saturation", images, lower, upper, {std::nullopt, seed});
  });
}
Tensor stateless_random_hue(const Tensor& images, double max_delta, std::array<int64_t, 2> seed) {
  return detail::naming_errors("stateless_random_hue", [&] {
    return hue("stateless_random_hue", images, max_delta, {std::nullopt, seed});
  });
}
Tensor stateless_random_crop(const Tensor& value, const std::vector<int64_t>& size,
                             std::array<int64_t, 2> seed) {
  return detail::naming_errors("stateless_random_crop", [&] {
    return crop("stateless_random_crop", value, size, {std::nullopt, seed});
  });
}

DistortedBoundingBox sample_distorted_bounding_box(
    const Tensor& image_size, const Tensor& bounding_boxes, std::optional<int64_t> seed,
    double min_object_covered, std::array<double, 2> aspect_ratio_range,
    std::array<double, 2> area_range, int64_t max_attempts, bool use_image_if_no_bounding_boxes) {
  return detail::naming_errors("sample_distorted_bounding_box", [&] {
    return distorted_box("sample_distorted_bounding_box", image_size, bounding_boxes,
                         min_object_covered, aspect_ratio_range, area_range, max_attempts,
                         use_image_if_no_bounding_boxes, {seed, std::nullopt});
  });
}

DistortedBoundingBox stateless_sample_distorted_bounding_box(
    const Tensor& image_size, const Tensor& bounding_boxes, std::array<int64_t, 2> seed,
    double min_object_covered, std::array<double, 2> aspect_ratio_range,
    std::array<double, 2> area_range, int64_t max_attempts, bool use_image_if_no_bounding_boxes) {
  return detail::naming_errors("stateless_sample_distorted_bounding_box", [&] {
    return distorted_box("stateless_sample_distorted_bounding_box", image_size, bounding_boxes,
                         min_object_covered, aspect_ratio_range, area_range, max_attempts,
                         use_image_if_no_bounding_boxes, {std::nullopt, seed});
  });
}

}  // namespace tapeflow::image
