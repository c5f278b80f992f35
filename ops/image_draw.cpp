// tf.image.draw_bounding_boxes (ops/image_more.h): each box's outline as a mask from comparisons
// of the pixel grid with its edges, drawn in box order with `where`, so it runs on every device
// and in traced functions.
#include <cstdint>
#include <vector>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image_more.h"
#include "ops/movement.h"
#include "ops/unary.h"

namespace tapeflow::image {

namespace {

// TF's palette when no colours are given (RGBA): yellow, blue, red, lime, purple, olive,
// maroon, navy, aqua, fuchsia.
const std::vector<double> kPalette = {1, 1, 0,   1, 0,   0, 1,   1,   1, 0, 0,   1, 0, 1,
                                      0, 1, 0.5, 0, 0.5, 1, 0.5, 0.5, 0, 1, 0.5, 0, 0, 1,
                                      0, 0, 0.5, 1, 0,   1, 1,   1,   1, 0, 1,   1};

using image_detail::i32;

}  // namespace

Tensor draw_bounding_boxes(const Tensor& images, const Tensor& boxes, const Tensor& colors) {
  const char* op = "draw_bounding_boxes";
  TF_CHECK_ARG(images.defined() && boxes.defined(), op, "images and boxes must be defined");
  const TensorShape& s = images.shape();
  TF_CHECK_ARG(s.rank() == 4 && s[1] >= 1 && s[2] >= 1 && s[3] >= 1 && is_floating(images.dtype()),
               op,
               "images must be a floating (batch, height, width, depth) tensor with known, "
               "non-zero height, width and depth, got {} {}",
               dtype_name(images.dtype()), s.to_string());
  const TensorShape& bs = boxes.shape();
  TF_CHECK_ARG(bs.rank() == 3 && bs[2] == 4 && bs[1] >= 0 && is_floating(boxes.dtype()), op,
               "boxes must be a floating (batch, num_boxes, 4) tensor of [y_min, x_min, y_max, "
               "x_max] rows with a known num_boxes, got {} {}",
               dtype_name(boxes.dtype()), bs.to_string());
  const int64_t H = s[1], W = s[2], depth = s[3], n = bs[1];
  Tensor table;
  int64_t num_colors = 0;
  if (colors.defined() && colors.num_elements() > 0) {
    TF_CHECK_ARG(colors.rank() == 2 && colors.shape()[1] >= depth, op,
                 "colors must be (num_colors, channels) with at least the images' {} channels, "
                 "got {}",
                 depth, colors.shape().to_string());
    table = slice(cast(colors, images.dtype()), {0, 0}, {-1, depth});
    num_colors = colors.shape()[0];
  } else {
    TF_CHECK_ARG(depth <= 4, op, "images of {} channels need colors (the default palette is RGBA)",
                 depth);
    // One channel: every box in 1, as TF.
    table = depth == 1 ? ones({1, 1}, images.dtype())
                       : slice(detail::from_doubles(kPalette, {10, 4}, images.dtype()), {0, 0},
                               {-1, depth});
    num_colors = depth == 1 ? 1 : 10;
  }
  std::vector<int32_t> rows(static_cast<size_t>(H)), cols(static_cast<size_t>(W));
  for (int64_t i = 0; i < H; ++i) rows[static_cast<size_t>(i)] = static_cast<int32_t>(i);
  for (int64_t j = 0; j < W; ++j) cols[static_cast<size_t>(j)] = static_cast<int32_t>(j);
  const Tensor r = constant(rows, TensorShape{1, H, 1, 1});
  const Tensor c = constant(cols, TensorShape{1, 1, W, 1});
  const Tensor b = cast(boxes, float32);
  Tensor out = images;
  for (int64_t k = 0; k < n; ++k) {
    // Edges as TF computes them: y (height - 1) in float32, truncated toward zero.
    const auto edge = [&](int64_t j, int64_t size) {
      const Tensor v = slice(b, {0, k, j}, {-1, 1, 1}) * static_cast<float>(size - 1);
      return reshape(cast(v, int32), {-1, 1, 1, 1});
    };
    const Tensor top = edge(0, H), left = edge(1, W), bottom = edge(2, H), right = edge(3, W);
    const Tensor drawn = logical_not(
        logical_or(logical_or(greater(top, bottom), greater(left, right)),
                   logical_or(logical_or(greater_equal(top, i32(H)), less(bottom, i32(0))),
                              logical_or(greater_equal(left, i32(W)), less(right, i32(0))))));
    const Tensor in_cols = logical_and(greater_equal(c, maximum(left, i32(0))),
                                       less_equal(c, minimum(right, i32(W - 1))));
    const Tensor in_rows = logical_and(greater_equal(r, maximum(top, i32(0))),
                                       less_equal(r, minimum(bottom, i32(H - 1))));
    const Tensor horizontal = logical_and(
        in_cols, logical_or(equal(r, top), logical_and(equal(r, bottom), less(bottom, i32(H)))));
    const Tensor vertical = logical_and(
        in_rows, logical_or(equal(c, left), logical_and(equal(c, right), less(right, i32(W)))));
    const Tensor mask = logical_and(drawn, logical_or(horizontal, vertical));
    const Tensor color = reshape(slice(table, {k % num_colors, 0}, {1, -1}), {1, 1, 1, depth});
    out = where(mask, zeros_like(out) + color, out);
  }
  return out;
}

}  // namespace tapeflow::image
