// The resampling resize methods of tf::image as per-axis weight matrices applied with matmul, and
// the resize-to-fit helpers. The weights follow TF's kernels: ResizeBicubic (half-pixel centres,
// Keys' cubic with a = -0.5 read from TF's 1024-entry table, taps outside the image dropped and
// the rest renormalised), ResizeArea (the overlap of each output cell with the input cells) and
// ScaleAndTranslate (the kernel sampled around each output centre, widened by 1 / scale when
// antialiasing a downscale, normalised to sum 1).
#include "ops/image_more.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/unary.h"

namespace tapeflow::image {

namespace {

// TF's ResizeBicubic weights with half-pixel centres.
std::vector<double> bicubic_weights(int64_t in_size, int64_t out_size) {
  // Keys' cubic (a = -0.5) tabulated at 1024 steps of the fractional offset, in float32.
  constexpr int kTable = 1024;
  static const std::vector<float> table = [] {
    std::vector<float> t(2 * (kTable + 1));
    const float a = -0.5f;
    for (int i = 0; i <= kTable; ++i) {
      float x = static_cast<float>(i * 1.0 / kTable);
      t[static_cast<size_t>(2 * i)] = ((a + 2) * x - (a + 3)) * x * x + 1;
      x += 1.0f;
      t[static_cast<size_t>(2 * i + 1)] = ((a * x - 5 * a) * x + 8 * a) * x - 4 * a;
    }
    return t;
  }();
  std::vector<double> w(static_cast<size_t>(out_size * in_size), 0.0);
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  for (int64_t o = 0; o < out_size; ++o) {
    const float in = (static_cast<float>(o) + 0.5f) * scale - 0.5f;
    const auto loc = static_cast<int64_t>(std::floor(in));
    const auto off = static_cast<int64_t>(std::lrintf((in - std::floor(in)) * kTable));
    float tap[4] = {table[static_cast<size_t>(off * 2 + 1)], table[static_cast<size_t>(off * 2)],
                    table[static_cast<size_t>((kTable - off) * 2)],
                    table[static_cast<size_t>((kTable - off) * 2 + 1)]};
    float sum = 0;
    for (int k = 0; k < 4; ++k) {
      const int64_t i = loc - 1 + k;
      if (i < 0 || i >= in_size) tap[k] = 0;
      sum += tap[k];
    }
    const float inv =
        std::abs(sum) >= 1000.0f * std::numeric_limits<float>::min() ? 1.0f / sum : 1.0f;
    for (int k = 0; k < 4; ++k) {
      const int64_t i = loc - 1 + k;
      if (i < 0 || i >= in_size) continue;
      w[static_cast<size_t>(o * in_size + i)] += static_cast<double>(tap[k] * inv);
    }
  }
  return w;
}

// TF's ResizeArea weights (no half-pixel centres): output cell o spans [o, o + 1) * scale of the
// input; each input cell weighs its overlap, divided by the cell size.
std::vector<double> area_weights(int64_t in_size, int64_t out_size) {
  std::vector<double> w(static_cast<size_t>(out_size * in_size), 0.0);
  const float scale = static_cast<float>(in_size) / static_cast<float>(out_size);
  for (int64_t o = 0; o < out_size; ++o) {
    const float lo = static_cast<float>(o) * scale;
    const float hi = static_cast<float>(o + 1) * scale;
    const auto start = static_cast<int64_t>(std::floor(lo));
    const auto end = static_cast<int64_t>(std::ceil(hi));
    for (int64_t i = start; i < end; ++i) {
      const auto fi = static_cast<float>(i);
      float part;
      if (fi < lo)
        part = fi + 1 > hi ? scale : fi + 1 - lo;
      else
        part = fi + 1 > hi ? hi - fi : 1.0f;
      const int64_t src = std::clamp<int64_t>(i, 0, in_size - 1);
      w[static_cast<size_t>(o * in_size + src)] += static_cast<double>(part / scale);
    }
  }
  return w;
}

// The kernels of TF's ScaleAndTranslate (sampling_kernels), evaluated at |x| in float32.
struct Kernel {
  enum Kind { kTriangle, kKeysCubic, kLanczos, kGaussian, kMitchell } kind;
  float radius;
  float operator()(float x) const {
    x = std::abs(x);
    switch (kind) {
      case kTriangle:
        return x < 1.0f ? 1.0f - x : 0.0f;
      case kKeysCubic:
        if (x >= 2.0f) return 0.0f;
        if (x >= 1.0f) return ((-0.5f * x + 2.5f) * x - 4.0f) * x + 2.0f;
        return ((1.5f * x - 2.5f) * x) * x + 1.0f;
      case kLanczos: {
        constexpr float kPi = 3.14159265359f;
        if (x > radius) return 0.0f;
        if (x <= 1e-3f) return 1.0f;  // the limit of sin(x) / x at 0
        return radius * std::sin(kPi * x) * std::sin(kPi * x / radius) / (kPi * kPi * x * x);
      }
      case kGaussian: {
        if (x >= radius) return 0.0f;
        const float sigma = radius / 3.0f;
        return static_cast<float>(std::exp(-x * x / (2.0 * sigma * sigma)));
      }
      case kMitchell:  // Mitchell-Netravali with B = C = 1/3
        if (x >= 2.0f) return 0.0f;
        if (x >= 1.0f) return (((-7.0f / 18.0f) * x + 2.0f) * x - 10.0f / 3.0f) * x + 16.0f / 9.0f;
        return (((7.0f / 6.0f) * x - 2.0f) * x) * x + 8.0f / 9.0f;
    }
    return 0.0f;
  }
};

// TF's ScaleAndTranslate weights with scale out / in and no translation (what tf.image.resize
// passes).
std::vector<double> scale_translate_weights(const Kernel& kernel, bool antialias, int64_t in_size,
                                            int64_t out_size) {
  std::vector<double> w(static_cast<size_t>(out_size * in_size), 0.0);
  const float scale = static_cast<float>(out_size) / static_cast<float>(in_size);
  const auto inv_scale = static_cast<float>(1.0 / scale);
  const float kernel_scale = antialias ? std::max(inv_scale, 1.0f) : 1.0f;
  const float reach = kernel.radius * kernel_scale;
  std::vector<float> taps;
  for (int64_t o = 0; o < out_size; ++o) {
    const float sample = (static_cast<float>(o) + 0.5f) * inv_scale;
    // (TF leaves the row empty when the sample falls outside the image, which needs a translation.)
    if (sample < 0 || sample > static_cast<float>(in_size)) continue;
    const int64_t start =
        std::clamp<int64_t>(static_cast<int64_t>(std::ceil(sample - reach - 0.5f)), 0, in_size - 1);
    const int64_t end = std::clamp<int64_t>(static_cast<int64_t>(std::floor(sample + reach - 0.5f)),
                                            0, in_size - 1) +
                        1;
    taps.clear();
    float sum = 0;
    for (int64_t i = start; i < end; ++i) {
      const float pos = static_cast<float>(i) + 0.5f - sample;
      const float v = kernel(std::abs(pos * (1.0f / kernel_scale)));
      sum += v;
      taps.push_back(v);
    }
    if (std::abs(sum) < 1000.0f * std::numeric_limits<float>::min()) continue;
    const float inv = 1.0f / sum;
    for (int64_t i = start; i < end; ++i)
      w[static_cast<size_t>(o * in_size + i)] =
          static_cast<double>(taps[static_cast<size_t>(i - start)] * inv);
  }
  return w;
}

// Applies the (out, in) weights along the height (rank - 3) or width (rank - 2) axis with a
// broadcast matmul: the width is the row axis of each (width, channels) matrix; the height is
// swapped into that place and back.
Tensor apply_axis(const Tensor& x, int axis, const Tensor& w) {
  return tapeflow::detail::matmul_along(w, x, axis);
}

}  // namespace

}  // namespace tapeflow::image

namespace tapeflow::image_detail {

std::vector<double> resize_weights(const std::string& method, bool antialias, int64_t in_size,
                                   int64_t out_size) {
  using namespace image;  // the weight builders
  if (method == "area") return area_weights(in_size, out_size);
  if (method == "bicubic" && !antialias) return bicubic_weights(in_size, out_size);
  Kernel k{Kernel::kTriangle, 1.0f};
  if (method == "bilinear")
    k = {Kernel::kTriangle, 1.0f};
  else if (method == "bicubic")
    k = {Kernel::kKeysCubic, 2.0f};
  else if (method == "lanczos3")
    k = {Kernel::kLanczos, 3.0f};
  else if (method == "lanczos5")
    k = {Kernel::kLanczos, 5.0f};
  else if (method == "gaussian")
    k = {Kernel::kGaussian, 1.5f};
  else if (method == "mitchellcubic")
    k = {Kernel::kMitchell, 2.0f};
  else
    TF_CHECK_ARG(false, "resize",
                 "method must be \"bilinear\", \"nearest\", \"bicubic\", \"area\", \"lanczos3\", "
                 "\"lanczos5\", \"gaussian\" or \"mitchellcubic\", got \"{}\"",
                 method);
  return scale_translate_weights(k, antialias, in_size, out_size);
}

void check_resize_length(int64_t n) {
  TF_CHECK_ARG(n > 0, "resize", "images must have a positive height and width, got {}", n);
}

Tensor apply_axis_weights(const Tensor& x, int axis, const std::vector<double>& weights,
                          int64_t out) {
  const int64_t in = x.shape()[axis];
  return image::apply_axis(x, axis, tapeflow::detail::from_doubles(weights, {out, in}, x.dtype()));
}

Tensor resize_resampled(const Tensor& images, int h, const std::vector<int64_t>& size,
                        const std::string& method, bool antialias) {
  const DType d = images.dtype();
  // TF's kernels return float32; float64 stays float64 (as bilinear) so that gradients can be
  // checked in float64.
  const Tensor x = d == float64 || d == float32 ? images : cast(images, float32);
  // The (out, in) weights of an axis, made from its length when the graph runs in a trace for
  // None dimensions.
  const auto weights = [&](const Tensor& t, int axis, int64_t out) {
    return tapeflow::detail::axis_table(
        t, axis, std::string("resize_") + method + (antialias ? "_antialias" : ""),
        {static_cast<double>(out)}, t.dtype(),
        [method, antialias, out](int64_t in) {
          check_resize_length(in);
          return resize_weights(method, antialias, in, out);
        },
        [out](int64_t in) {
          return TensorShape{out, in};
        });
  };
  const Tensor y = image::apply_axis(x, h + 1, weights(x, h + 1, size[1]));
  return image::apply_axis(y, h, weights(y, h, size[0]));
}

}  // namespace tapeflow::image_detail

namespace tapeflow::image {

namespace {
Tensor resize_with_pad_body(const Tensor& images, int64_t target_height, int64_t target_width,
                            const std::string& method, bool antialias) {
  const char* op = "resize_with_pad";
  TF_CHECK_ARG(images.defined(), op, "images is an undefined tensor (TF's None)");
  TF_CHECK_ARG(images.rank() == 3 || images.rank() == 4, op,
               "images must have rank 3 (height, width, channels) or 4 (batch, height, width, "
               "channels), got shape {}",
               images.shape().to_string());
  TF_CHECK_ARG(target_height > 0 && target_width > 0, op,
               "target sizes must be > 0, got target_height={}, target_width={}", target_height,
               target_width);
  const int h = images.rank() - 3;
  const int64_t H = images.shape()[h], W = images.shape()[h + 1];
  TF_CHECK_ARG(H > 0 && W > 0, op, "images must have a known positive height and width, got {}",
               images.shape().to_string());
  // TF's arithmetic, in float32: scale by the larger ratio, floor the new size and half the
  // remaining space.
  const auto fh = static_cast<float>(H), fw = static_cast<float>(W);
  const auto th = static_cast<float>(target_height), tw = static_cast<float>(target_width);
  const float ratio = std::max(fw / tw, fh / th);
  const float rh = fh / ratio, rw = fw / ratio;
  const auto new_h = static_cast<int64_t>(std::floor(rh));
  const auto new_w = static_cast<int64_t>(std::floor(rw));
  const auto pad_h = std::max<int64_t>(0, static_cast<int64_t>(std::floor((th - rh) / 2)));
  const auto pad_w = std::max<int64_t>(0, static_cast<int64_t>(std::floor((tw - rw) / 2)));
  TF_CHECK_ARG(new_h > 0 && new_w > 0, op, "images of shape {} shrink to nothing in ({}, {})",
               images.shape().to_string(), target_height, target_width);
  const Tensor resized = resize(images, {new_h, new_w}, method, antialias);
  return pad_to_bounding_box(resized, pad_h, pad_w, target_height, target_width);
}
}  // namespace

Tensor resize_with_pad(const Tensor& images, int64_t target_height, int64_t target_width,
                       const std::string& method, bool antialias) {
  return detail::naming_errors("resize_with_pad", [&] {
    return resize_with_pad_body(images, target_height, target_width, method, antialias);
  });
}

namespace {
Tensor resize_with_crop_or_pad_body(const Tensor& images, int64_t target_height,
                                    int64_t target_width) {
  const char* op = "resize_with_crop_or_pad";
  TF_CHECK_ARG(images.defined(), op, "images is an undefined tensor (TF's None)");
  TF_CHECK_ARG(images.rank() == 3 || images.rank() == 4, op,
               "images must have rank 3 (height, width, channels) or 4 (batch, height, width, "
               "channels), got shape {}",
               images.shape().to_string());
  TF_CHECK_ARG(target_height > 0 && target_width > 0, op,
               "target sizes must be > 0, got target_height={}, target_width={}", target_height,
               target_width);
  const int h = images.rank() - 3;
  const int64_t H = images.shape()[h], W = images.shape()[h + 1];
  TF_CHECK_ARG(H >= 0 && W >= 0, op, "the height and width of images must be known, got {}",
               images.shape().to_string());
  // Python's floor division, as TF: an odd surplus puts the extra row/column at the end.
  const auto floordiv2 = [](int64_t v) { return v >= 0 ? v / 2 : -((-v + 1) / 2); };
  const int64_t dh = target_height - H, dw = target_width - W;
  const int64_t crop_h = std::max<int64_t>(floordiv2(-dh), 0);
  const int64_t crop_w = std::max<int64_t>(floordiv2(-dw), 0);
  const int64_t pad_h = std::max<int64_t>(floordiv2(dh), 0);
  const int64_t pad_w = std::max<int64_t>(floordiv2(dw), 0);
  const Tensor cropped = crop_to_bounding_box(images, crop_h, crop_w, std::min(target_height, H),
                                              std::min(target_width, W));
  return pad_to_bounding_box(cropped, pad_h, pad_w, target_height, target_width);
}
}  // namespace

Tensor resize_with_crop_or_pad(const Tensor& images, int64_t target_height, int64_t target_width) {
  return detail::naming_errors("resize_with_crop_or_pad", [&] {
    return resize_with_crop_or_pad_body(images, target_height, target_width);
  });
}

Tensor extract_patches(const Tensor& images, const std::vector<int64_t>& sizes,
                       const std::vector<int64_t>& strides, const std::vector<int64_t>& rates,
                       const std::string& padding) {
  const char* op = "extract_patches";
  TF_CHECK_ARG(images.defined(), op, "images is an undefined tensor (TF's None)");
  TF_CHECK_ARG(images.rank() == 4, op,
               "images must have rank 4 (batch, height, width, channels), got shape {}",
               images.shape().to_string());
  const int64_t H = images.shape()[1], W = images.shape()[2];
  TF_CHECK_ARG(H >= 0 && W >= 0, op, "the height and width of images must be known, got {}",
               images.shape().to_string());
  const auto pair_ok = [](const std::vector<int64_t>& v) {
    return v.size() == 2 && v[0] > 0 && v[1] > 0;
  };
  TF_CHECK_ARG(pair_ok(sizes) && pair_ok(strides) && pair_ok(rates), op,
               "sizes, strides and rates must be 2 positive values {{height, width}}, got sizes "
               "of {} elements, strides of {}, rates of {}",
               sizes.size(), strides.size(), rates.size());
  TF_CHECK_ARG(padding == "VALID" || padding == "SAME", op,
               "padding must be \"VALID\" or \"SAME\", got \"{}\"", padding);
  // Per axis: the output size, the zeros before, and the input positions of tap k of output o.
  struct Axis {
    int64_t out = 0, before = 0, padded = 0;
  };
  const auto plan = [&](int64_t n, int64_t k, int64_t s, int64_t r) {
    const int64_t eff = (k - 1) * r + 1;
    Axis a;
    if (padding == "VALID") {
      a.out = n >= eff ? (n - eff) / s + 1 : 0;
    } else {
      a.out = (n + s - 1) / s;
      const int64_t total = std::max<int64_t>((a.out - 1) * s + eff - n, 0);
      a.before = total / 2;
      a.padded = total;
    }
    return a;
  };
  const Axis ah = plan(H, sizes[0], strides[0], rates[0]);
  const Axis aw = plan(W, sizes[1], strides[1], rates[1]);
  TF_CHECK_ARG(ah.out > 0 && aw.out > 0, op,
               "the windows ({}, {}) with rates ({}, {}) do not fit in images of shape {} "
               "(padding VALID)",
               sizes[0], sizes[1], rates[0], rates[1], images.shape().to_string());
  Tensor x = images;
  if (ah.padded > 0 || aw.padded > 0)
    x = pad(
        images,
        {{0, 0}, {ah.before, ah.padded - ah.before}, {aw.before, aw.padded - aw.before}, {0, 0}});
  std::vector<Tensor> taps;
  for (int64_t i = 0; i < sizes[0]; ++i) {
    std::vector<int64_t> rows(static_cast<size_t>(ah.out));
    for (int64_t o = 0; o < ah.out; ++o)
      rows[static_cast<size_t>(o)] = o * strides[0] + i * rates[0];
    const Tensor xr = gather(x, constant(rows), 1);
    for (int64_t j = 0; j < sizes[1]; ++j) {
      std::vector<int64_t> cols(static_cast<size_t>(aw.out));
      for (int64_t o = 0; o < aw.out; ++o)
        cols[static_cast<size_t>(o)] = o * strides[1] + j * rates[1];
      taps.push_back(gather(xr, constant(cols), 2));
    }
  }
  // Concatenating the taps along channels gives TF's (row, column, channel) order.
  return taps.size() == 1 ? taps[0] : concat(taps, 3);
}

namespace {
Tensor batched_points(const char* op, const Tensor& p, const char* what) {
  TF_CHECK_ARG(p.defined(), op, "{} is undefined", what);
  const TensorShape& s = p.shape();
  TF_CHECK_ARG((s.rank() == 2 || s.rank() == 3) && s[-2] == 4 && s[-1] == 2, op,
               "{} must be (4, 2) for every image or (batch, 4, 2), got shape {}", what,
               s.to_string());
  const Tensor f = p.dtype() == float32 ? p : cast(p, float32);
  return s.rank() == 2 ? expand_dims(f, 0) : f;
}
}  // namespace

Tensor homography_matrix(const Tensor& start_points, const Tensor& end_points) {
  const char* op = "perspective_transform";
  const Tensor start = batched_points(op, start_points, "start_points");
  const Tensor end = batched_points(op, end_points, "end_points");
  TF_CHECK_ARG(start.shape() == end.shape(), op,
               "start_points and end_points must have the same shape, got {} and {}",
               start_points.shape().to_string(), end_points.shape().to_string());
  // Coordinate j (0: x, 1: y) of point i, as (batch,).
  auto at = [](const Tensor& p, int64_t i, int64_t j) {
    return reshape(slice(p, {0, i, j}, {-1, 1, 1}), TensorShape{-1});
  };
  std::vector<Tensor> rows, target;
  for (int64_t i = 0; i < 4; ++i) {
    const Tensor ex = at(end, i, 0), ey = at(end, i, 1);
    const Tensor sx = at(start, i, 0), sy = at(start, i, 1);
    const Tensor one = ones_like(ex), zero = zeros_like(ex);
    rows.push_back(stack({ex, ey, one, zero, zero, zero, -sx * ex, -sx * ey}, -1));
    rows.push_back(stack({zero, zero, zero, ex, ey, one, -sy * ex, -sy * ey}, -1));
    target.push_back(sx);
    target.push_back(sy);
  }
  const Tensor a = stack(rows, 1);                      // (batch, 8, 8)
  const Tensor b = expand_dims(stack(target, -1), -1);  // (batch, 8, 1)
  return reshape(linalg::solve(a, b), TensorShape{-1, 8});
}

Tensor perspective_transform(const Tensor& images, const Tensor& start_points,
                             const Tensor& end_points, const std::string& interpolation,
                             double fill_value) {
  const char* op = "perspective_transform";
  TF_CHECK_ARG(images.defined() && (images.rank() == 3 || images.rank() == 4), op,
               "images must be (height, width, channels) or (batch, height, width, channels), "
               "got {}",
               images.defined() ? images.shape().to_string() : std::string("an undefined tensor"));
  TF_CHECK_ARG(interpolation == "bilinear" || interpolation == "nearest", op,
               "interpolation must be \"bilinear\" or \"nearest\", got \"{}\"", interpolation);
  const Tensor x4 = images.rank() == 3 ? expand_dims(images, 0) : images;
  const Tensor h = homography_matrix(start_points, end_points);
  const Tensor y = image::transform(x4, h, interpolation, "constant", fill_value);
  return images.rank() == 3 ? squeeze(y, {0}) : y;
}

}  // namespace tapeflow::image
