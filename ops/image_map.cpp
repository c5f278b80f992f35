// keras.ops.image.map_coordinates and elastic_transform (ops/image_more.h), composed of gathers
// and elementwise ops: every device, traced functions, and gradients with respect to the input
// and the coordinates.
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/check.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image_more.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/unary.h"

namespace tapeflow::image {

namespace {

using image_detail::i32;

bool known_fill_mode(const std::string& m) {
  return m == "constant" || m == "nearest" || m == "wrap" || m == "mirror" || m == "reflect";
}

// One interpolation node along an axis: the integer index (already mapped into [0, size) by the
// fill mode), its weight (undefined: 1) and, in "constant" mode, whether it was inside.
struct Node {
  Tensor index, weight, inside;
};

// SciPy's boundary rules (scipy.ndimage: "reflect" d c b a | a b c d | d c b a, "mirror"
// d c b | a b c d | c b a, "nearest" a a a | a b c d, "wrap" as SciPy's "grid-wrap" and
// "constant" as "grid-constant").
Node fix(Tensor index, Tensor weight, int64_t size, const std::string& mode) {
  Node n{index, std::move(weight), Tensor()};
  if (mode == "constant") {
    n.inside = logical_and(greater_equal(index, i32(0)), less(index, i32(size)));
    n.index = clip_by_value(index, i32(0), i32(size - 1));
  } else if (mode == "nearest") {
    n.index = clip_by_value(index, i32(0), i32(size - 1));
  } else if (mode == "wrap") {
    n.index = floormod(index, i32(size));
  } else if (mode == "reflect") {
    const Tensor m = floormod(index, i32(2 * size));
    n.index = where(less(m, i32(size)), m, i32(2 * size - 1) - m);
  } else if (size == 1) {  // mirror of one sample
    n.index = zeros_like(index);
  } else {
    const Tensor m = floormod(index, i32(2 * size - 2));
    n.index = where(less(m, i32(size)), m, i32(2 * size - 2) - m);
  }
  return n;
}

// The nodes of one coordinate tensor: its rounded index (order 0, half to even as TF's and JAX's
// round) or its floor and floor + 1 with linear weights (order 1).
std::vector<Node> nodes(const Tensor& c, int order, int64_t size, const std::string& mode) {
  if (order == 0) return {fix(cast(round(c), int32), Tensor(), size, mode)};
  const Tensor lower = floor(c);
  const Tensor upper_w = c - lower;
  const Tensor index = cast(lower, int32);
  return {fix(index, 1.0 - upper_w, size, mode), fix(index + i32(1), upper_w, size, mode)};
}

// sum over the node combinations of (product of weights) * flat[base + sum_d index_d stride_d],
// a node outside the input reading fill_value in "constant" mode. coords[d] and base broadcast
// to the output's shape; values are computed in dtype cd. With a 2-D `flat` (rows of `width`
// values, such as an image's pixels), the indices pick rows, the last axis of the indices'
// shape (1) becomes the row's values, and index arithmetic runs once per row.
Tensor sample(const Tensor& flat, const std::vector<Tensor>& coords,
              const std::vector<int64_t>& sizes, const std::vector<int64_t>& strides,
              const Tensor& base, int order, const std::string& mode, double fill_value, DType cd) {
  const bool rows = flat.rank() == 2;
  std::vector<std::vector<Node>> per_axis;
  for (size_t d = 0; d < coords.size(); ++d)
    per_axis.push_back(nodes(coords[d], order, sizes[d], mode));
  Tensor total;
  std::vector<size_t> pick(coords.size(), 0);
  while (true) {
    Tensor index = base, weight, inside;
    for (size_t d = 0; d < coords.size(); ++d) {
      const Node& n = per_axis[d][pick[d]];
      const Tensor term = strides[d] == 1 ? n.index : n.index * i32(strides[d]);
      index = index.defined() ? index + term : term;
      if (n.weight.defined()) weight = weight.defined() ? weight * n.weight : n.weight;
      if (n.inside.defined()) inside = inside.defined() ? logical_and(inside, n.inside) : n.inside;
    }
    Tensor v = gather(flat, index, 0);
    if (rows) {
      std::vector<int64_t> dims;
      for (int i = 0; i < index.rank(); ++i) dims.push_back(i == 0 ? -1 : index.shape()[i]);
      dims.back() = flat.shape()[1];
      v = reshape(v, TensorShape(dims));
    }
    if (v.dtype() != cd) v = cast(v, cd);
    if (inside.defined()) v = where(inside, v, constant(Tensor(fill_value), cd));
    if (weight.defined()) v = weight * v;
    total = total.defined() ? total + v : v;
    size_t d = 0;
    while (d < pick.size() && ++pick[d] == per_axis[d].size()) pick[d++] = 0;
    if (d == pick.size()) break;
  }
  return total;
}

void check_common(const char* op, int order, const std::string& mode) {
  TF_CHECK_ARG(order == 0 || order == 1, op, "order must be 0 or 1, got {}", order);
  TF_CHECK_ARG(known_fill_mode(mode), op,
               "fill_mode must be \"constant\", \"nearest\", \"wrap\", \"mirror\" or \"reflect\", "
               "got \"{}\"",
               mode);
}

}  // namespace

Tensor map_coordinates(const Tensor& input, const Tensor& coordinates, int order,
                       const std::string& fill_mode, double fill_value) {
  const char* op = "map_coordinates";
  TF_CHECK_ARG(input.defined() && coordinates.defined(), op,
               "the input and the coordinates must be defined");
  check_common(op, order, fill_mode);
  const TensorShape& s = input.shape();
  const TensorShape& cs = coordinates.shape();
  TF_CHECK_ARG(s.rank() >= 1, op, "the input must have rank >= 1, got shape {}", s.to_string());
  TF_CHECK_ARG(is_floating(coordinates.dtype()), op,
               "the coordinates must have a floating dtype, got {}",
               dtype_name(coordinates.dtype()));
  TF_CHECK_ARG(cs.rank() >= 2 && cs[0] == s.rank(), op,
               "the coordinates must have shape (input rank = {}, ...) with rank >= 2, got {} "
               "for an input of shape {}",
               s.rank(), cs.to_string(), s.to_string());
  std::vector<int64_t> sizes, strides(static_cast<size_t>(s.rank()));
  int64_t stride = 1;
  for (int d = s.rank() - 1; d >= 0; --d) {
    TF_CHECK_ARG(s[d] >= 1, op, "every axis of the input must have a known, non-zero size, got {}",
                 s.to_string());
    strides[static_cast<size_t>(d)] = stride;
    stride *= s[d];
  }
  for (int d = 0; d < s.rank(); ++d) sizes.push_back(s[d]);
  TF_CHECK_ARG(stride <= int64_t{1} << 31, op,
               "inputs of more than 2^31 elements are not supported, got {}", s.to_string());
  const std::vector<Tensor> coords = unstack(coordinates, s.rank(), 0);
  const DType cd = coordinates.dtype();
  Tensor out = sample(reshape(input, {-1}), coords, sizes, strides, Tensor(), order, fill_mode,
                      fill_value, cd);
  if (is_integer(input.dtype())) out = round(out);
  return out.dtype() == input.dtype() ? out : cast(out, input.dtype());
}

Tensor elastic_transform(const Tensor& images, const Tensor& alpha, const Tensor& sigma,
                         int64_t max_kernel_radius, const std::string& interpolation,
                         const std::string& fill_mode, double fill_value,
                         std::optional<int64_t> seed) {
  const char* op = "elastic_transform";
  TF_CHECK_ARG(images.defined(), op, "images is an undefined tensor");
  TF_CHECK_ARG(interpolation == "bilinear" || interpolation == "nearest", op,
               "interpolation must be \"bilinear\" or \"nearest\", got \"{}\"", interpolation);
  check_common(op, 1, fill_mode);
  TF_CHECK_ARG(images.rank() == 3 || images.rank() == 4, op,
               "images must have rank 3 (height, width, channels) or 4 (batch, height, width, "
               "channels), got shape {}",
               images.shape().to_string());
  const bool single = images.rank() == 3;
  const Tensor x4 = single ? expand_dims(images, 0) : images;
  const TensorShape& s = x4.shape();
  const int64_t H = s[1], W = s[2], C = s[3];
  TF_CHECK_ARG(H >= 1 && W >= 1 && C >= 1, op,
               "images must have known, non-zero height, width and channels, got shape {}",
               s.to_string());
  TF_CHECK_ARG(max_kernel_radius >= 0, op, "max_kernel_radius must be >= 0, got {}",
               max_kernel_radius);
  const DType cd = is_floating(images.dtype()) ? images.dtype() : float32;
  const Tensor a = cast(alpha, cd), sg = cast(sigma, cd);
  TF_CHECK_ARG(a.rank() == 0 && sg.rank() == 0, op,
               "alpha and sigma must be scalars, got {} and {}", alpha.shape().to_string(),
               sigma.shape().to_string());
  // Keras' Gaussian kernel: 6 floor(sigma) + 1 taps, exp(-t^2 / (2 sigma^2)) normalised; taps
  // beyond max_kernel_radius are left out (callers size it for their largest sigma).
  const int64_t R = max_kernel_radius;
  std::vector<double> offsets;
  for (int64_t t = -R; t <= R; ++t) offsets.push_back(static_cast<double>(t));
  const Tensor t = constant(Tensor(0.0), cd) + detail::from_doubles(offsets, {2 * R + 1}, cd);
  const Tensor radius = 3.0 * floor(sg);
  const Tensor q = t / maximum(sg, constant(Tensor(1e-30), cd));
  Tensor g = where(less_equal(abs(t), radius), exp(-0.5 * q * q), zeros_like(t));
  g = g / reduce_sum(g);
  // (n, n) banded matrices: row i holds the taps around i (zero padding, as Keras' "SAME"
  // depthwise convolution).
  const auto band = [&](int64_t n) {
    std::vector<int32_t> idx(static_cast<size_t>(n * n));
    std::vector<double> mask(static_cast<size_t>(n * n), 0.0);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        const int64_t k = j - i;
        const bool in = k >= -R && k <= R;
        idx[static_cast<size_t>(i * n + j)] = static_cast<int32_t>(in ? k + R : 0);
        mask[static_cast<size_t>(i * n + j)] = in ? 1.0 : 0.0;
      }
    return gather(g, constant(idx, TensorShape{n, n})) * detail::from_doubles(mask, {n, n}, cd);
  };
  const Tensor mh = band(H), mw = band(W);
  const Tensor like = slice(x4, {0, 0, 0, 0}, {-1, -1, -1, 1});
  const auto field = [&](std::optional<int64_t> s2) {
    const Tensor noise =
        reshape(::tapeflow::detail::random_normal_like(like, 0.0, 1.0, cd, s2), {-1, H, W}) * sg;
    // Blurred along the height, then the width.
    return matmul(matmul(mh, noise), mw, false, true);
  };
  // Two independent fields (Keras' TensorFlow backend draws both from one seed, so that its dy
  // equals its dx and every pixel moves along the diagonal).
  const Tensor dx = field(seed), dy = field(seed ? std::optional<int64_t>(*seed + 1) : seed);
  std::vector<double> xs(static_cast<size_t>(W)), ys(static_cast<size_t>(H));
  for (int64_t i = 0; i < W; ++i) xs[static_cast<size_t>(i)] = static_cast<double>(i);
  for (int64_t i = 0; i < H; ++i) ys[static_cast<size_t>(i)] = static_cast<double>(i);
  const Tensor cx = reshape(detail::from_doubles(xs, {1, 1, W}, cd) + a * dx, {-1, H, W, 1});
  const Tensor cy = reshape(detail::from_doubles(ys, {1, H, 1}, cd) + a * dy, {-1, H, W, 1});
  // Pixel (b, y, x) is row b H W + y W + x of the images seen as (pixels, channels).
  const Tensor images_idx =
      cast(cumsum(ones_like(slice(like, {0, 0, 0, 0}, {-1, 1, 1, 1})), 0), int32) - i32(1);
  Tensor out = sample(reshape(x4, {-1, C}), {cy, cx}, {H, W}, {W, 1}, images_idx * i32(H * W),
                      interpolation == "nearest" ? 0 : 1, fill_mode, fill_value, cd);
  if (is_integer(images.dtype())) out = round(out);
  if (out.dtype() != images.dtype()) out = cast(out, images.dtype());
  return single ? squeeze(out, {0}) : out;
}

}  // namespace tapeflow::image
