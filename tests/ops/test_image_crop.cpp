// tf::image::crop_and_resize's kernels (the CropAndResize primitive and its two gradient
// primitives) against plain loops of TF's definition on random inputs, with many channels (the
// CPU image gradient splits them in blocks), boxes reaching outside the image and flipped ones;
// inside traced functions with a None batch; second derivatives; dtypes. TF's own values are
// checked in test_image_more.cpp.
#include <cmath>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image_more.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::random_values;

namespace {

// A (batch, h, w, c) image, boxes and box indices on the host, and TF's arithmetic over them:
// sample positions in float32 (as TF's kernel), interpolation in double.
struct CropCase {
  int64_t batch = 3, h = 7, w = 9, c = 70, n = 11, oh = 5, ow = 4;
  std::vector<double> image, boxes, weights;
  std::vector<int> index;

  CropCase(int64_t crop_h, int64_t crop_w) : oh(crop_h), ow(crop_w) {
    image = random_values(static_cast<size_t>(batch * h * w * c), -2, 2, 11);
    boxes = random_values(static_cast<size_t>(n * 4), -0.3, 1.3, 12);
    weights = random_values(static_cast<size_t>(n * oh * ow * c), -1, 1, 13);
    for (int64_t k = 0; k < n; ++k) index.push_back(static_cast<int>((k * 5 + 1) % batch));
  }
  static float position(double a, double z, int64_t len, int64_t n, int64_t i) {
    const auto fa = static_cast<float>(a), fz = static_cast<float>(z);
    const auto span = static_cast<float>(len - 1);
    if (n > 1)
      return fa * span + static_cast<float>(i) * ((fz - fa) * span / static_cast<float>(n - 1));
    return 0.5f * (fa + fz) * span;
  }
  size_t pixel(int64_t b, int64_t y, int64_t x) const {
    return static_cast<size_t>(((b * h + y) * w + x) * c);
  }
  // Calls f(k, y, x, in_y, in_x) for every crop point inside the image.
  template <class F>
  void each_inside(F f) const {
    for (int64_t k = 0; k < n; ++k)
      for (int64_t y = 0; y < oh; ++y)
        for (int64_t x = 0; x < ow; ++x) {
          const size_t kb = static_cast<size_t>(k * 4);
          const float py = position(boxes[kb], boxes[kb + 2], h, oh, y);
          const float px = position(boxes[kb + 1], boxes[kb + 3], w, ow, x);
          if (py < 0 || py > static_cast<float>(h - 1) || px < 0 || px > static_cast<float>(w - 1))
            continue;
          f(k, y, x, static_cast<double>(py), static_cast<double>(px));
        }
  }
  size_t out_at(int64_t k, int64_t y, int64_t x) const {
    return static_cast<size_t>(((k * oh + y) * ow + x) * c);
  }
  std::vector<double> forward(bool nearest, double extrapolation) const {
    std::vector<double> out(static_cast<size_t>(n * oh * ow * c), extrapolation);
    each_inside([&](int64_t k, int64_t y, int64_t x, double py, double px) {
      const int64_t b = index[static_cast<size_t>(k)];
      for (int64_t ch = 0; ch < c; ++ch) {
        double v;
        if (nearest) {
          v = image[pixel(b, std::llround(py), std::llround(px)) + static_cast<size_t>(ch)];
        } else {
          const auto t = static_cast<int64_t>(std::floor(py)),
                     l = static_cast<int64_t>(std::floor(px));
          const auto bt = static_cast<int64_t>(std::ceil(py)),
                     r = static_cast<int64_t>(std::ceil(px));
          const double dy = py - static_cast<double>(t), dx = px - static_cast<double>(l);
          const auto at = [&](int64_t yy, int64_t xx) {
            return image[pixel(b, yy, xx) + static_cast<size_t>(ch)];
          };
          const double top = at(t, l) + (at(t, r) - at(t, l)) * dx;
          const double bottom = at(bt, l) + (at(bt, r) - at(bt, l)) * dx;
          v = top + (bottom - top) * dy;
        }
        out[out_at(k, y, x) + static_cast<size_t>(ch)] = v;
      }
    });
    return out;
  }
  // The cotangents of the image and of the boxes for sum(crop * weights).
  std::vector<double> grad_image(bool nearest) const {
    std::vector<double> g(image.size(), 0.0);
    each_inside([&](int64_t k, int64_t y, int64_t x, double py, double px) {
      const int64_t b = index[static_cast<size_t>(k)];
      for (int64_t ch = 0; ch < c; ++ch) {
        const double wv = weights[out_at(k, y, x) + static_cast<size_t>(ch)];
        const auto add = [&](int64_t yy, int64_t xx, double v) {
          g[pixel(b, yy, xx) + static_cast<size_t>(ch)] += v;
        };
        if (nearest) {
          add(std::llround(py), std::llround(px), wv);
          continue;
        }
        const auto t = static_cast<int64_t>(std::floor(py)),
                   l = static_cast<int64_t>(std::floor(px));
        const auto bt = static_cast<int64_t>(std::ceil(py)),
                   r = static_cast<int64_t>(std::ceil(px));
        const double dy = py - static_cast<double>(t), dx = px - static_cast<double>(l);
        add(t, l, (1 - dy) * (1 - dx) * wv);
        add(t, r, (1 - dy) * dx * wv);
        add(bt, l, dy * (1 - dx) * wv);
        add(bt, r, dy * dx * wv);
      }
    });
    return g;
  }
  std::vector<double> grad_boxes() const {
    std::vector<double> g(static_cast<size_t>(n * 4), 0.0);
    each_inside([&](int64_t k, int64_t y, int64_t x, double py, double px) {
      const int64_t b = index[static_cast<size_t>(k)];
      const auto t = static_cast<int64_t>(std::floor(py)), l = static_cast<int64_t>(std::floor(px));
      const auto bt = static_cast<int64_t>(std::ceil(py)), r = static_cast<int64_t>(std::ceil(px));
      const double dy = py - static_cast<double>(t), dx = px - static_cast<double>(l);
      // d in_y / d y1 and d y2 (the centre's halves for one row), likewise for x.
      const double hs = static_cast<double>(h - 1), ws = static_cast<double>(w - 1);
      const double fy2 =
          oh > 1 ? static_cast<double>(y) * hs / static_cast<double>(oh - 1) : hs / 2;
      const double fy1 = oh > 1 ? hs - fy2 : fy2;
      const double fx2 =
          ow > 1 ? static_cast<double>(x) * ws / static_cast<double>(ow - 1) : ws / 2;
      const double fx1 = ow > 1 ? ws - fx2 : fx2;
      for (int64_t ch = 0; ch < c; ++ch) {
        const auto at = [&](int64_t yy, int64_t xx) {
          return image[pixel(b, yy, xx) + static_cast<size_t>(ch)];
        };
        const double wv = weights[out_at(k, y, x) + static_cast<size_t>(ch)];
        const double gy = ((1 - dx) * (at(bt, l) - at(t, l)) + dx * (at(bt, r) - at(t, r))) * wv;
        const double gx = ((1 - dy) * (at(t, r) - at(t, l)) + dy * (at(bt, r) - at(bt, l))) * wv;
        const size_t kb = static_cast<size_t>(k * 4);
        g[kb] += gy * fy1;
        g[kb + 1] += gx * fx1;
        g[kb + 2] += gy * fy2;
        g[kb + 3] += gx * fx2;
      }
    });
    return g;
  }
  tf::Tensor image_t(tf::DType d = tf::float32) const {
    return tf::detail::from_doubles(image, {batch, h, w, c}, d);
  }
  tf::Tensor boxes_t() const { return tf::detail::from_doubles(boxes, {n, 4}, tf::float32); }
  tf::Tensor index_t() const {
    std::vector<double> v(index.begin(), index.end());
    return tf::detail::from_doubles(v, {n}, tf::int32);
  }
  tf::Tensor weights_t() const {
    return tf::detail::from_doubles(weights, {n, oh, ow, c}, tf::float32);
  }
};

}  // namespace

TEST_CASE("image: crop_and_resize kernels and gradients against TF's definition",
          "[cpu][cuda][image]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (auto [oh, ow] : {std::pair<int64_t, int64_t>{5, 4}, {1, 3}, {2, 1}}) {
      const CropCase cc(oh, ow);
      for (const char* method : {"bilinear", "nearest"}) {
        INFO("crop " << oh << " x " << ow << ", " << method);
        const bool nearest = std::string(method) == "nearest";
        tf::Tensor img = cc.image_t(), bx = cc.boxes_t();
        tf::GradientTape tape({.persistent = true});
        tape.watch(img);
        tape.watch(bx);
        const tf::Tensor crop =
            tf::image::crop_and_resize(img, bx, cc.index_t(), {oh, ow}, method, -3);
        CHECK(crop.shape() == tf::TensorShape{cc.n, oh, ow, cc.c});
        check_values(crop, cc.forward(nearest, -3), 1e-5, 1e-5);
        const tf::Tensor loss = tf::reduce_sum(crop * cc.weights_t());
        check_values(tape.gradient(loss, img), cc.grad_image(nearest), 1e-4, 1e-4);
        // Both methods differentiate the boxes through bilinear sampling, as TF.
        check_values(tape.gradient(loss, bx), cc.grad_boxes(), 1e-4, 1e-3);
      }
    }
  }
}

TEST_CASE("image: crop_and_resize traced with a None batch, second order, dtypes",
          "[cpu][cuda][image]") {
  const CropCase cc(5, 4);
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // The crop and both cotangents, traced once for all batch and box counts.
    auto step = [](const tf::Tensor& image, const tf::Tensor& boxes, const tf::Tensor& index) {
      tf::Tensor img = image, bx = boxes;
      tf::GradientTape tape;
      tape.watch(img);
      tape.watch(bx);
      const tf::Tensor crop = tf::image::crop_and_resize(img, bx, index, {5, 4});
      const tf::Tensor loss = tf::reduce_sum(tf::square(crop));
      std::vector<tf::Tensor> g = tape.gradient(loss, std::vector<tf::Tensor>{img, bx});
      return std::vector<tf::Tensor>{crop, g[0], g[1]};
    };
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, cc.h, cc.w, cc.c}),
                            tf::TensorSpec({tf::None, 4}), tf::TensorSpec({tf::None}, tf::int32)};
    auto f = tf::function(step, opts);
    for (int64_t boxes : {int64_t{11}, int64_t{4}}) {
      const tf::Tensor img =
          tf::slice(cc.image_t(), {0, 0, 0, 0}, {boxes == 4 ? 2 : 3, -1, -1, -1});
      const tf::Tensor bx = tf::slice(cc.boxes_t(), {0, 0}, {boxes, -1});
      const tf::Tensor idx = tf::floormod(tf::slice(cc.index_t(), {0}, {boxes}),
                                          tf::constant(std::vector<int32_t>{2}, tf::TensorShape{}));
      const std::vector<tf::Tensor> traced = f(img, bx, idx), eager = step(img, bx, idx);
      for (size_t i = 0; i < 3; ++i) check_close(traced[i], eager[i], 1e-5, 1e-5);
    }
    CHECK(f.tracing_count() == 1);

    // The image cotangent is linear in the crop's cotangent g: d <grad_image(g), u> / d g is
    // crop_and_resize(u).
    {
      tf::Tensor g = cc.weights_t();
      const tf::Tensor img = cc.image_t();
      const tf::Tensor u = tf::detail::from_doubles(random_values(cc.image.size(), -1, 1, 21),
                                                    {cc.batch, cc.h, cc.w, cc.c}, tf::float32);
      tf::GradientTape outer;
      outer.watch(g);
      tf::Tensor x = img;
      tf::GradientTape inner;
      inner.watch(x);
      const tf::Tensor crop = tf::image::crop_and_resize(x, cc.boxes_t(), cc.index_t(), {5, 4});
      const tf::Tensor gi = inner.gradient(tf::reduce_sum(crop * g), x);
      const tf::Tensor dg = outer.gradient(tf::reduce_sum(gi * u), g);
      check_close(dg, tf::image::crop_and_resize(u, cc.boxes_t(), cc.index_t(), {5, 4}), 1e-5,
                  1e-5);
    }
    // Its derivative with respect to the boxes is not implemented (TF has none): a clear error.
    {
      tf::Tensor bx = cc.boxes_t();
      tf::GradientTape outer;
      outer.watch(bx);
      tf::Tensor x = cc.image_t();
      tf::GradientTape inner;
      inner.watch(x);
      const tf::Tensor crop = tf::image::crop_and_resize(x, bx, cc.index_t(), {5, 4});
      const tf::Tensor gi = inner.gradient(tf::reduce_sum(crop), x);
      TF_REQUIRE_THROWS_CONTAINING(
          outer.gradient(tf::reduce_sum(gi), bx), tf::UnimplementedError,
          "second derivative of crop_and_resize with respect to the boxes");
    }
    // float16 and uint8 images crop to float32 (as TF); a float16 image's cotangent is float16.
    {
      tf::Tensor h16 = cc.image_t(tf::float16);
      tf::GradientTape tape;
      tape.watch(h16);
      const tf::Tensor crop = tf::image::crop_and_resize(h16, cc.boxes_t(), cc.index_t(), {5, 4});
      CHECK(crop.dtype() == tf::float32);
      check_close(crop,
                  tf::image::crop_and_resize(tf::cast(h16, tf::float32), cc.boxes_t(), cc.index_t(),
                                             {5, 4}),
                  0, 0);
      const tf::Tensor gh = tape.gradient(tf::reduce_sum(crop * cc.weights_t()), h16);
      CHECK(gh.dtype() == tf::float16);
      check_values(gh, cc.grad_image(false), 2e-3, 2e-3);
      const tf::Tensor u8 = tf::cast(tf::abs(cc.image_t()) * 50.0f, tf::uint8);
      const tf::Tensor c8 = tf::image::crop_and_resize(u8, cc.boxes_t(), cc.index_t(), {5, 4});
      CHECK(c8.dtype() == tf::float32);
      check_close(
          c8,
          tf::image::crop_and_resize(tf::cast(u8, tf::float32), cc.boxes_t(), cc.index_t(), {5, 4}),
          0, 0);
    }
  }
}
