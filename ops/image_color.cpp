// tf::image colour ops as composites (see ops/image_color.h).
#include "ops/image_color.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image_more.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::image {

namespace {

using image_detail::check_image;

// A floating image whose last axis is `channels`.
void check_channels(const char* op, const Tensor& images, int64_t channels, bool floating = true) {
  check_image(op, images);
  TF_CHECK_ARG(images.shape()[images.rank() - 1] == channels, op,
               "images must have {} channel{} in the last axis, got shape {}", channels,
               channels == 1 ? "" : "s", images.shape().to_string());
  if (floating)
    TF_CHECK_ARG(is_floating(images.dtype()), op,
                 "images must be float16, bfloat16, float32 or float64, got {}",
                 dtype_name(images.dtype()));
}

Tensor scalar(double v, DType d) {
  return tapeflow::detail::from_doubles({v}, TensorShape{}, d);
}

// Channel c of the last axis, kept as a last axis of 1.
Tensor channel(const Tensor& x, int64_t c) {
  std::vector<int64_t> begin(static_cast<size_t>(x.rank()), 0), size(begin.size(), -1);
  begin.back() = c;
  size.back() = 1;
  return slice(x, begin, size);
}

// The largest value of an image dtype's range: 1 for floating dtypes.
double dtype_max(DType d) {
  if (d == uint8) return 255.0;
  if (d == int32) return 2147483647.0;
  if (d == int64) return 9223372036854775807.0;
  return 1.0;
}

bool image_dtype(DType d) {
  return is_floating(d) || d == uint8 || d == int32 || d == int64;
}

// Runs f on the image as TF's adjust_* do: float16 and float32 as they are (and float64 here,
// where TF computes in float32), other dtypes converted to float32 and back.
template <class F>
Tensor in_float(const Tensor& images, bool saturate, F&& f) {
  const DType d = images.dtype();
  if (is_floating(d) && d != bfloat16) return f(images);
  return convert_image_dtype(f(convert_image_dtype(images, float32)), d, saturate);
}

}  // namespace

Tensor convert_image_dtype(const Tensor& images, DType dtype, bool saturate) {
  const char* op = "convert_image_dtype";
  TF_CHECK_ARG(images.defined(), op, "images is an undefined tensor (TF's None)");
  const DType in = images.dtype();
  TF_CHECK_ARG(image_dtype(in) && image_dtype(dtype), op,
               "images and dtype must be floating, uint8, int32 or int64, got {} to {}",
               dtype_name(in), dtype_name(dtype));
  if (in == dtype) return images;
  if (is_floating(in) && is_floating(dtype)) return cast(images, dtype);
  if (!is_floating(in) && !is_floating(dtype)) {
    // The ranges (max + 1) are powers of two, so their ratio is exact.
    const double rin = dtype_max(in) + 1.0, rout = dtype_max(dtype) + 1.0;
    // Dividing maps the input's range onto the output's, so no saturation is needed.
    if (rin > rout) return cast(floordiv(images, scalar(rin / rout, in)), dtype);
    return cast(images, dtype) * scalar(rout / rin, dtype);
  }
  if (!is_floating(in)) return cast(images, dtype) * scalar(1.0 / dtype_max(in), dtype);
  // Float to integer: + 0.5 in the scale so that 1.0 reaches max after truncation.
  Tensor scaled = images * scalar(dtype_max(dtype) + 0.5, in);
  if (saturate) {
    const double lo = dtype == uint8 ? 0.0 : -dtype_max(dtype) - 1.0;
    scaled = clip_by_value(scaled, scalar(lo, in), scalar(dtype_max(dtype), in));
  }
  return cast(scaled, dtype);
}

Tensor rgb_to_hsv(const Tensor& images) {
  check_channels("rgb_to_hsv", images, 3);
  const DType d = images.dtype();
  const int last = images.rank() - 1;
  const Tensor r = channel(images, 0), g = channel(images, 1), b = channel(images, 2);
  const Tensor v = reduce_max(images, last, true);
  const Tensor range = v - reduce_min(images, last, true);
  const Tensor zero = scalar(0, d), one = scalar(1, d);
  // Safe denominators keep the unselected branches (and their gradients) finite.
  const Tensor s = where(greater(v, zero), range / where(greater(v, zero), v, one), zero);
  const Tensor norm = one / (scalar(6, d) * where(greater(range, zero), range, one));
  Tensor hue = where(equal(r, v), norm * (g - b),
                     where(equal(g, v), norm * (b - r) + scalar(2.0 / 6.0, d),
                           norm * (r - g) + scalar(4.0 / 6.0, d)));
  hue = where(greater(range, zero), hue, zero);
  hue = where(less(hue, zero), hue + one, hue);
  return concat({hue, s, v}, last);
}

Tensor hsv_to_rgb(const Tensor& images) {
  check_channels("hsv_to_rgb", images, 3);
  const DType d = images.dtype();
  const Tensor h = channel(images, 0), s = channel(images, 1), v = channel(images, 2);
  const Tensor dh = h * scalar(6, d);
  const Tensor zero = scalar(0, d), one = scalar(1, d), two = scalar(2, d);
  const auto clip01 = [&](const Tensor& t) { return clip_by_value(t, zero, one); };
  const Tensor dr = clip01(abs(dh - scalar(3, d)) - one);
  const Tensor dg = clip01(two - abs(dh - two));
  const Tensor db = clip01(two - abs(dh - scalar(4, d)));
  const Tensor one_minus_s = one - s;
  return concat(
      {(one_minus_s + s * dr) * v, (one_minus_s + s * dg) * v, (one_minus_s + s * db) * v},
      images.rank() - 1);
}

namespace {
// TF's YUV matrices (rows: input channel, columns: output channel).
const std::vector<double> kRgbToYuv = {0.299, -0.14714119, 0.61497538,
                                       0.587, -0.28886916, -0.51496512,
                                       0.114, 0.43601035,  -0.10001026};
const std::vector<double> kYuvToRgb = {1,          1,          1,           0, -0.394642334,
                                       2.03206185, 1.13988303, -0.58062185, 0};
// TF's _rgb_to_yiq_kernel and _yiq_to_rgb_kernel (rows: input channels).
const std::vector<double> kRgbToYiq = {0.299,       0.59590059, 0.2115,      0.587,     -0.27455667,
                                       -0.52273617, 0.114,      -0.32134392, 0.31119955};
const std::vector<double> kYiqToRgb = {1,           1,         1,           0.95598634, -0.27201283,
                                       -1.10674021, 0.6208248, -0.64720424, 1.70423049};

// images (last axis 3, floating) times a row-major 3 x 3 colour matrix.
Tensor colour_matrix(const char* op, const Tensor& images, const std::vector<double>& m) {
  check_channels(op, images, 3);
  return matmul(images, tapeflow::detail::from_doubles(m, {3, 3}, images.dtype()));
}
}  // namespace

Tensor rgb_to_yuv(const Tensor& images) {
  return colour_matrix("rgb_to_yuv", images, kRgbToYuv);
}
Tensor yuv_to_rgb(const Tensor& images) {
  return colour_matrix("yuv_to_rgb", images, kYuvToRgb);
}
Tensor rgb_to_yiq(const Tensor& images) {
  return colour_matrix("rgb_to_yiq", images, kRgbToYiq);
}
Tensor yiq_to_rgb(const Tensor& images) {
  return colour_matrix("yiq_to_rgb", images, kYiqToRgb);
}

Tensor grayscale_to_rgb(const Tensor& images) {
  check_channels("grayscale_to_rgb", images, 1, false);
  return concat({images, images, images}, images.rank() - 1);
}

Tensor adjust_saturation(const Tensor& images, double saturation_factor) {
  return image_detail::adjust_saturation_by(images, scalar(saturation_factor, float64));
}

Tensor adjust_hue(const Tensor& images, double delta) {
  TF_CHECK_ARG(delta >= -1.0 && delta <= 1.0, "adjust_hue", "delta must be in [-1, 1], got {}",
               delta);
  return image_detail::adjust_hue_by(images, scalar(delta, float64));
}

Tensor adjust_gamma(const Tensor& images, double gamma, double gain) {
  check_image("adjust_gamma", images);
  TF_CHECK_ARG(image_dtype(images.dtype()), "adjust_gamma",
               "images must be floating, uint8, int32 or int64, got {}",
               dtype_name(images.dtype()));
  TF_CHECK_ARG(gamma >= 0, "adjust_gamma", "gamma must be a non-negative real number, got {}",
               gamma);
  return in_float(images, true, [&](const Tensor& x) {
    return scalar(gain, x.dtype()) * pow(x, scalar(gamma, x.dtype()));
  });
}

Tensor per_image_standardization(const Tensor& images) {
  check_image("per_image_standardization", images);
  TF_CHECK_ARG(images.dtype() != bool_, "per_image_standardization",
               "images must be numeric, got {}", dtype_name(images.dtype()));
  const Tensor x = is_floating(images.dtype()) ? images : cast(images, float32);
  const int r = x.rank();
  const TensorShape& s = x.shape();
  const int64_t n = s[r - 3] * s[r - 2] * s[r - 1];
  TF_CHECK_ARG(s[r - 3] >= 0 && s[r - 2] >= 0 && s[r - 1] >= 0, "per_image_standardization",
               "the height, width and channels of images must be known, got shape {}",
               s.to_string());
  const std::vector<int> axes = {r - 3, r - 2, r - 1};
  const Tensor mean = reduce_mean(x, axes, true);
  const Tensor centred = x - mean;
  const Tensor stddev = sqrt(reduce_mean(square(centred), axes, true));
  const Tensor floor_std = scalar(1.0 / std::sqrt(static_cast<double>(n)), x.dtype());
  return centred / maximum(stddev, floor_std);
}

}  // namespace tapeflow::image

namespace tapeflow::image_detail {

Tensor adjust_saturation_by(const Tensor& images, const Tensor& saturation_factor) {
  using namespace image;  // the helpers above
  check_channels("adjust_saturation", images, 3, false);
  TF_CHECK_ARG(image_dtype(images.dtype()), "adjust_saturation",
               "images must be floating, uint8, int32 or int64, got {}",
               dtype_name(images.dtype()));
  return in_float(images, false, [&](const Tensor& x) {
    const Tensor hsv = rgb_to_hsv(x);
    const DType d = x.dtype();
    const Tensor s =
        clip_by_value(channel(hsv, 1) * cast(saturation_factor, d), scalar(0, d), scalar(1, d));
    return hsv_to_rgb(concat({channel(hsv, 0), s, channel(hsv, 2)}, x.rank() - 1));
  });
}

Tensor adjust_hue_by(const Tensor& images, const Tensor& delta) {
  using namespace image;
  check_channels("adjust_hue", images, 3, false);
  TF_CHECK_ARG(image_dtype(images.dtype()), "adjust_hue",
               "images must be floating, uint8, int32 or int64, got {}",
               dtype_name(images.dtype()));
  return in_float(images, false, [&](const Tensor& x) {
    const Tensor hsv = rgb_to_hsv(x);
    const DType d = x.dtype();
    const Tensor h = floormod(channel(hsv, 0) + cast(delta, d), scalar(1, d));
    return hsv_to_rgb(concat({h, channel(hsv, 1), channel(hsv, 2)}, x.rank() - 1));
  });
}

}  // namespace tapeflow::image_detail
