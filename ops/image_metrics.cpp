// tf::image metrics and filters as composites (see ops/image_metrics.h). The Gaussian window of
// ssim and the Sobel kernels are separable, so they are applied as one weight matrix per axis
// (ops/image_more.h's apply_axis_weights), which equals TF's depthwise convolution with their
// outer product.
#include "ops/image_metrics.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image_color.h"
#include "ops/image_more.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::image {

namespace {

Tensor scalar(double v, DType d) {
  return tapeflow::detail::from_doubles({v}, TensorShape{}, d);
}

void check_image(const char* op, const Tensor& images, bool rank4_only = false) {
  TF_CHECK_ARG(images.defined(), op, "images is an undefined tensor (TF's None)");
  if (rank4_only)
    TF_CHECK_ARG(images.rank() == 4, op,
                 "images must have rank 4 (batch, height, width, channels), got shape {}",
                 images.shape().to_string());
  else
    TF_CHECK_ARG(images.rank() == 3 || images.rank() == 4, op,
                 "images must have rank 3 (height, width, channels) or 4 (batch, height, width, "
                 "channels), got shape {}",
                 images.shape().to_string());
  const int h = images.rank() - 3;
  TF_CHECK_ARG(images.shape()[h] >= 0 && images.shape()[h + 1] >= 0 && images.shape()[h + 2] >= 0,
               op, "the height, width and channels of images must be known, got shape {}",
               images.shape().to_string());
}

// The pair of images of psnr and ssim, and max_val, in a floating dtype as TF: integer images
// through convert_image_dtype to float32 (max_val cast to their dtype and scaled alike).
struct FloatPair {
  Tensor a, b;
  double max_val;
};
FloatPair float_pair(const char* op, const Tensor& a, const Tensor& b, double max_val) {
  check_image(op, a);
  TF_CHECK_ARG(b.defined(), op, "b is an undefined tensor (TF's None)");
  TF_CHECK_ARG(a.shape() == b.shape() && a.dtype() == b.dtype(), op,
               "a and b must have the same shape and dtype, got {} {} and {} {}",
               a.shape().to_string(), dtype_name(a.dtype()), b.shape().to_string(),
               dtype_name(b.dtype()));
  const DType d = a.dtype();
  TF_CHECK_ARG(is_floating(d) || d == uint8 || d == int32 || d == int64, op,
               "images must be floating, uint8, int32 or int64, got {}", dtype_name(d));
  if (d == float32 || d == float64) return {a, b, max_val};
  double m = max_val;
  if (!is_floating(d)) {
    const double top = d == uint8 ? 255.0 : d == int32 ? 2147483647.0 : 9223372036854775807.0;
    m = static_cast<double>(static_cast<float>(std::trunc(max_val)) *
                            static_cast<float>(1.0 / top));
  }
  return {convert_image_dtype(a, float32), convert_image_dtype(b, float32), m};
}

// Forward differences along axis, shape - 1 along it.
Tensor diff(const Tensor& x, int axis) {
  const int64_t n = x.shape()[axis];
  std::vector<int64_t> b0(static_cast<size_t>(x.rank()), 0),
      b1 = b0, size(static_cast<size_t>(x.rank()), -1);
  // (An empty axis gives an empty difference.)
  b1[static_cast<size_t>(axis)] = std::min<int64_t>(1, n);
  size[static_cast<size_t>(axis)] = std::max<int64_t>(n - 1, 0);
  return slice(x, b1, size) - slice(x, b0, size);
}

// The (n - size + 1, n) matrix of a VALID 1-D filter.
std::vector<double> valid_filter(const std::vector<double>& taps, int64_t n) {
  const auto k = static_cast<int64_t>(taps.size());
  const int64_t out = n - k + 1;
  std::vector<double> w(static_cast<size_t>(out * n), 0.0);
  for (int64_t o = 0; o < out; ++o)
    for (int64_t j = 0; j < k; ++j)
      w[static_cast<size_t>(o * n + o + j)] = taps[static_cast<size_t>(j)];
  return w;
}

// The (n, n) matrix of the 3-tap filter {t0, t1, t2} after a reflect pad of 1 (index -1 reads 1,
// index n reads n - 2).
std::vector<double> reflect3(double t0, double t1, double t2, int64_t n) {
  std::vector<double> w(static_cast<size_t>(n * n), 0.0);
  const auto refl = [n](int64_t i) { return i < 0 ? -i : i >= n ? 2 * n - 2 - i : i; };
  for (int64_t o = 0; o < n; ++o) {
    w[static_cast<size_t>(o * n + refl(o - 1))] += t0;
    w[static_cast<size_t>(o * n + o)] += t1;
    w[static_cast<size_t>(o * n + refl(o + 1))] += t2;
  }
  return w;
}

}  // namespace

Tensor psnr(const Tensor& a, const Tensor& b, double max_val) {
  const FloatPair p = float_pair("psnr", a, b, max_val);
  const int r = p.a.rank();
  const DType d = p.a.dtype();
  const Tensor mse = reduce_mean(square(p.a - p.b), {r - 3, r - 2, r - 1});
  // TF's arithmetic: 20 ln(max) / ln(10) - (10 / ln(10)) ln(mse).
  return scalar(20 * std::log(p.max_val) / std::log(10.0), d) -
         scalar(10 / std::log(10.0), d) * log(mse);
}

namespace {

// TF's _ssim_per_channel: {ssim, contrast-structure} per channel, averaged over the valid
// positions of the filter_size x filter_size Gaussian window.
std::pair<Tensor, Tensor> ssim_per_channel(const char* op, const Tensor& a, const Tensor& b,
                                           const Tensor& shape_of, double max_val,
                                           int64_t filter_size, double filter_sigma, double k1,
                                           double k2) {
  const int r = a.rank(), h = r - 3;
  const int64_t H = a.shape()[h], W = a.shape()[h + 1];
  TF_CHECK_ARG(H >= filter_size && W >= filter_size, op,
               "the height and width of images must be >= filter_size {} at every scale, got {} "
               "for images of shape {}",
               filter_size, a.shape().to_string(), shape_of.shape().to_string());
  // The normalised 1-D Gaussian; TF's 2-D window is its outer product.
  std::vector<double> g(static_cast<size_t>(filter_size));
  double total = 0;
  for (int64_t i = 0; i < filter_size; ++i) {
    const double c = static_cast<double>(i) - static_cast<double>(filter_size - 1) / 2.0;
    g[static_cast<size_t>(i)] = std::exp(-0.5 * c * c / (filter_sigma * filter_sigma));
    total += g[static_cast<size_t>(i)];
  }
  for (double& v : g) v /= total;
  const auto wh = valid_filter(g, H), ww = valid_filter(g, W);
  const auto blur = [&](const Tensor& x) {
    return image_detail::apply_axis_weights(
        image_detail::apply_axis_weights(x, h + 1, ww, W - filter_size + 1), h, wh,
        H - filter_size + 1);
  };
  const DType d = a.dtype();
  const Tensor c1 = scalar((k1 * max_val) * (k1 * max_val), d);
  const Tensor c2 = scalar((k2 * max_val) * (k2 * max_val), d);
  const Tensor two = scalar(2, d);
  const Tensor mean0 = blur(a), mean1 = blur(b);
  const Tensor num0 = mean0 * mean1 * two;
  const Tensor den0 = square(mean0) + square(mean1);
  const Tensor luminance = (num0 + c1) / (den0 + c1);
  const Tensor num1 = blur(a * b) * two;
  const Tensor den1 = blur(square(a) + square(b));
  const Tensor cs = (num1 - num0 + c2) / (den1 - den0 + c2);
  return {reduce_mean(luminance * cs, {h, h + 1}), reduce_mean(cs, {h, h + 1})};
}

void check_filter(const char* op, int64_t filter_size, double filter_sigma) {
  TF_CHECK_ARG(filter_size > 0 && filter_sigma > 0, op,
               "filter_size and filter_sigma must be positive, got {} and {}", filter_size,
               filter_sigma);
}

// The 2x average pool of one axis after TF's symmetric pad of an odd size: (ceil(n / 2), n).
std::vector<double> halve(int64_t n) {
  const int64_t out = (n + 1) / 2;
  std::vector<double> w(static_cast<size_t>(out * n), 0.0);
  for (int64_t o = 0; o < out; ++o) {
    w[static_cast<size_t>(o * n + 2 * o)] += 0.5;
    w[static_cast<size_t>(o * n + std::min(2 * o + 1, n - 1))] += 0.5;
  }
  return w;
}

}  // namespace

Tensor ssim(const Tensor& a, const Tensor& b, double max_val, int64_t filter_size,
            double filter_sigma, double k1, double k2) {
  const char* op = "ssim";
  const FloatPair p = float_pair(op, a, b, max_val);
  check_filter(op, filter_size, filter_sigma);
  const Tensor s =
      ssim_per_channel(op, p.a, p.b, a, p.max_val, filter_size, filter_sigma, k1, k2).first;
  return reduce_mean(s, -1);
}

Tensor ssim_multiscale(const Tensor& a, const Tensor& b, double max_val,
                       const std::vector<double>& power_factors, int64_t filter_size,
                       double filter_sigma, double k1, double k2) {
  const char* op = "ssim_multiscale";
  const FloatPair p = float_pair(op, a, b, max_val);
  check_filter(op, filter_size, filter_sigma);
  TF_CHECK_ARG(!power_factors.empty(), op, "power_factors must not be empty");
  const int h = p.a.rank() - 3;
  const DType d = p.a.dtype();
  Tensor x = p.a, y = p.b;
  std::vector<Tensor> terms;
  for (size_t k = 0; k < power_factors.size(); ++k) {
    if (k > 0) {
      // Halve height and width (2x2 average pool, an odd size padded by repeating its edge).
      const int64_t H = x.shape()[h], W = x.shape()[h + 1];
      const auto down = [&](const Tensor& t) {
        using image_detail::apply_axis_weights;
        return apply_axis_weights(apply_axis_weights(t, h + 1, halve(W), (W + 1) / 2), h, halve(H),
                                  (H + 1) / 2);
      };
      x = down(x);
      y = down(y);
    }
    const auto [s, cs] =
        ssim_per_channel(op, x, y, a, p.max_val, filter_size, filter_sigma, k1, k2);
    // The contrast-structure term of every scale but the last, whose full ssim is used instead.
    const Tensor term = k + 1 < power_factors.size() ? cs : s;
    const Tensor rect = maximum(term, scalar(0, d));
    terms.push_back(pow(rect, scalar(power_factors[k], d)));
  }
  Tensor ms = terms[0];
  for (size_t k = 1; k < terms.size(); ++k) ms = ms * terms[k];
  return reduce_mean(ms, -1);
}

Tensor total_variation(const Tensor& images) {
  check_image("total_variation", images);
  TF_CHECK_ARG(images.dtype() != bool_ && images.dtype() != uint8, "total_variation",
               "images must be a signed numeric dtype, got {}", dtype_name(images.dtype()));
  const int r = images.rank();
  const std::vector<int> axes = {r - 3, r - 2, r - 1};
  return reduce_sum(abs(diff(images, r - 3)), axes) + reduce_sum(abs(diff(images, r - 2)), axes);
}

std::pair<Tensor, Tensor> image_gradients(const Tensor& images) {
  check_image("image_gradients", images, true);
  const Tensor dy = pad(diff(images, 1), {{0, 0}, {0, 1}, {0, 0}, {0, 0}});
  const Tensor dx = pad(diff(images, 2), {{0, 0}, {0, 0}, {0, 1}, {0, 0}});
  return {dy, dx};
}

Tensor sobel_edges(const Tensor& images) {
  const char* op = "sobel_edges";
  check_image(op, images, true);
  TF_CHECK_ARG(is_floating(images.dtype()), op,
               "images must be float16, bfloat16, float32 or float64, got {}",
               dtype_name(images.dtype()));
  const int64_t H = images.shape()[1], W = images.shape()[2];
  TF_CHECK_ARG(H >= 2 && W >= 2, op,
               "the height and width of images must be >= 2 (reflect padding), got shape {}",
               images.shape().to_string());
  using image_detail::apply_axis_weights;
  // Vertical kernel: differences [-1, 0, 1] down the height, smoothing [1, 2, 1] across.
  const Tensor dy = apply_axis_weights(apply_axis_weights(images, 2, reflect3(1, 2, 1, W), W), 1,
                                       reflect3(-1, 0, 1, H), H);
  const Tensor dx = apply_axis_weights(apply_axis_weights(images, 2, reflect3(-1, 0, 1, W), W), 1,
                                       reflect3(1, 2, 1, H), H);
  return stack({dy, dx}, 4);
}

}  // namespace tapeflow::image
