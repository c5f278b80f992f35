// tf.image.rot90, transpose and crop_and_resize (ops/image_more.h), composed of movement ops,
// gathers and elementwise ops: every device, traced functions, gradients.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/context.h"
#include "ops/binary.h"
#include "ops/factory.h"
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
  const int64_t H = s[1], W = s[2], C = s[3], ch = crop_size[0], cw = crop_size[1];
  TF_CHECK_ARG(s[0] < 0 || s[0] * H * W * C <= int64_t{1} << 31, op,
               "images of more than 2^31 elements are not supported, got {}", s.to_string());
  // TF raises InvalidArgumentError for an index outside the batch; eagerly so does tapeflow
  // (traced, an index is clipped into the batch).
  if (detail::thread_context().trace == nullptr && s[0] >= 0 && box_indices.shape()[0] > 0) {
    const int64_t lo = cast(reduce_min(box_indices), int64).item<int64_t>();
    const int64_t hi = cast(reduce_max(box_indices), int64).item<int64_t>();
    TF_CHECK_ARG(lo >= 0 && hi < s[0], op,
                 "box_indices must be in [0, {}) (the image batch), got values in [{}, {}]", s[0],
                 lo, hi);
  }
  // Computed in float32 as TF (float64 stays float64, so that gradients can be checked there).
  const DType cd = image.dtype() == float64 ? float64 : float32;
  const Tensor b = cast(boxes, cd);
  const auto col = [&](int64_t j) { return slice(b, {0, j}, {-1, 1}); };  // (N, 1)
  const Tensor y1 = col(0), x1 = col(1), y2 = col(2), x2 = col(3);
  // TF's sample positions: y1 (H - 1) + i (y2 - y1) (H - 1) / (crop_height - 1), the centre for
  // a crop of one row; likewise along the width.
  const auto positions = [&](const Tensor& a, const Tensor& z, int64_t size, int64_t n) {
    const auto span = static_cast<double>(size - 1);
    if (n == 1) return (a + z) * constant(Tensor(0.5 * span), cd);
    std::vector<double> steps(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) steps[static_cast<size_t>(i)] = static_cast<double>(i);
    const Tensor idx = detail::from_doubles(steps, {1, n}, cd);
    return a * constant(Tensor(span), cd) +
           idx * (z - a) * constant(Tensor(span / static_cast<double>(n - 1)), cd);
  };
  const Tensor in_y = reshape(positions(y1, y2, H, ch), {-1, ch, 1, 1});
  const Tensor in_x = reshape(positions(x1, x2, W, cw), {-1, 1, cw, 1});
  const Tensor zero = constant(Tensor(0.0), cd);
  const Tensor inside =
      logical_and(logical_and(greater_equal(in_y, zero),
                              less_equal(in_y, constant(Tensor(static_cast<double>(H - 1)), cd))),
                  logical_and(greater_equal(in_x, zero),
                              less_equal(in_x, constant(Tensor(static_cast<double>(W - 1)), cd))));
  // Pixel (b, y, x) is row (b H + y) W + x of the image seen as (pixels, channels): the index
  // arithmetic runs per sample point and each gather moves whole channel vectors.
  const Tensor rows = reshape(image, {-1, C});
  const Tensor base =
      reshape(clip_by_value(cast(box_indices, int32), i32(0), i32(s[0] < 0 ? 0 : s[0] - 1)),
              {-1, 1, 1}) *
      i32(H * W);
  // Sample indices clipped into the image (points outside are replaced below), as (N, ch, 1)
  // rows and (N, 1, cw) columns.
  const auto row_index = [&](const Tensor& f) {
    return reshape(clip_by_value(cast(f, int32), i32(0), i32(H - 1)), {-1, ch, 1});
  };
  const auto col_index = [&](const Tensor& f) {
    return reshape(clip_by_value(cast(f, int32), i32(0), i32(W - 1)), {-1, 1, cw});
  };
  const auto at = [&](const Tensor& yi, const Tensor& xi) {
    Tensor v = gather(rows, base + yi * i32(W) + xi, 0);
    return v.dtype() == cd ? v : cast(v, cd);
  };
  Tensor out;
  if (method == "nearest") {
    // TF rounds half away from zero (roundf); inside the image the positions are >= 0.
    const Tensor half = constant(Tensor(0.5), cd);
    out = at(row_index(floor(in_y + half)), col_index(floor(in_x + half)));
  } else {
    const Tensor top = floor(in_y), left = floor(in_x);
    const Tensor dy = in_y - top, dx = in_x - left;
    const Tensor t = row_index(top), bt = row_index(ceil(in_y));
    const Tensor l = col_index(left), r = col_index(ceil(in_x));
    const Tensor tl = at(t, l), bl = at(bt, l);
    const Tensor upper = tl + (at(t, r) - tl) * dx;
    const Tensor lower = bl + (at(bt, r) - bl) * dx;
    out = upper + (lower - upper) * dy;
  }
  return where(inside, out, constant(Tensor(extrapolation_value), cd));
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
