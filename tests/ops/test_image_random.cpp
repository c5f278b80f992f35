// tf::image extract_patches (ops/image_more.h) against TF 2.21 literals and the random
// augmentations (ops/image_random.h) against the adjust_* ops driven by the same tf::random draw,
// on every device; gradients against central finite differences in float64 (a fixed seed per
// evaluation for the random ops), traced against eager, and the errors.
#include <algorithm>
#include <array>
#include <functional>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image.h"
#include "ops/image_color.h"
#include "ops/image_metrics.h"
#include "ops/image_more.h"
#include "ops/image_random.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::random_values;

namespace {

struct PatchCase {
  std::vector<int64_t> sizes, strides, rates;
  const char* padding;
  tf::TensorShape shape;
  std::vector<double> want;
};
// clang-format off
// tf.image.extract_patches(s, [1, kh, kw, 1], [1, sh, sw, 1], [1, rh, rw, 1], padding) (TF 2.21), s
// = (1, 5, 6, 2) ((i * 37) % 101) / 100
const std::vector<PatchCase> kPatchCases = {
    {{2, 3}, {1, 2}, {1, 1}, "VALID", {1, 4, 2, 12}, {0, 0.370000005, 0.74000001, 0.100000001,
        0.469999999, 0.839999974, 0.400000006, 0.769999981, 0.129999995, 0.5, 0.870000005,
        0.230000004, 0.469999999, 0.839999974, 0.200000003, 0.569999993, 0.939999998, 0.300000012,
        0.870000005, 0.230000004, 0.600000024, 0.970000029, 0.330000013, 0.699999988, 0.400000006,
        0.769999981, 0.129999995, 0.5, 0.870000005, 0.230000004, 0.800000012, 0.159999996,
        0.529999971, 0.899999976, 0.25999999, 0.629999995, 0.870000005, 0.230000004, 0.600000024,
        0.970000029, 0.330000013, 0.699999988, 0.25999999, 0.629999995, 1, 0.360000014, 0.730000019,
        0.0900000036, 0.800000012, 0.159999996, 0.529999971, 0.899999976, 0.25999999, 0.629999995,
        0.189999998, 0.560000002, 0.930000007, 0.289999992, 0.660000026, 0.0199999996, 0.25999999,
        0.629999995, 1, 0.360000014, 0.730000019, 0.0900000036, 0.660000026, 0.0199999996,
        0.389999986, 0.75999999, 0.119999997, 0.49000001, 0.189999998, 0.560000002, 0.930000007,
        0.289999992, 0.660000026, 0.0199999996, 0.589999974, 0.959999979, 0.319999993, 0.689999998,
        0.0500000007, 0.419999987, 0.660000026, 0.0199999996, 0.389999986, 0.75999999, 0.119999997,
        0.49000001, 0.0500000007, 0.419999987, 0.790000021, 0.150000006, 0.519999981,
        0.889999986}},
    {{3, 2}, {2, 3}, {2, 1}, "SAME", {1, 3, 2, 12}, {0, 0, 0, 0, 0, 0.370000005, 0.74000001,
        0.100000001, 0.800000012, 0.159999996, 0.529999971, 0.899999976, 0, 0, 0, 0, 0.200000003,
        0.569999993, 0.939999998, 0.300000012, 1, 0.360000014, 0.730000019, 0.0900000036, 0,
        0.370000005, 0.74000001, 0.100000001, 0.800000012, 0.159999996, 0.529999971, 0.899999976,
        0.589999974, 0.959999979, 0.319999993, 0.689999998, 0.200000003, 0.569999993, 0.939999998,
        0.300000012, 1, 0.360000014, 0.730000019, 0.0900000036, 0.790000021, 0.150000006,
        0.519999981, 0.889999986, 0.800000012, 0.159999996, 0.529999971, 0.899999976, 0.589999974,
        0.959999979, 0.319999993, 0.689999998, 0, 0, 0, 0, 1, 0.360000014, 0.730000019,
        0.0900000036, 0.790000021, 0.150000006, 0.519999981, 0.889999986, 0, 0, 0, 0}},
    {{2, 2}, {3, 3}, {1, 2}, "VALID", {1, 2, 2, 8}, {0, 0.370000005, 0.469999999, 0.839999974,
        0.400000006, 0.769999981, 0.870000005, 0.230000004, 0.200000003, 0.569999993, 0.670000017,
        0.0299999993, 0.600000024, 0.970000029, 0.0599999987, 0.430000007, 0.189999998, 0.560000002,
        0.660000026, 0.0199999996, 0.589999974, 0.959999979, 0.0500000007, 0.419999987, 0.389999986,
        0.75999999, 0.860000014, 0.219999999, 0.790000021, 0.150000006, 0.25, 0.620000005}},
    {{1, 1}, {2, 2}, {1, 1}, "SAME", {1, 3, 3, 2}, {0, 0.370000005, 0.469999999, 0.839999974,
        0.939999998, 0.300000012, 0.800000012, 0.159999996, 0.25999999, 0.629999995, 0.730000019,
        0.0900000036, 0.589999974, 0.959999979, 0.0500000007, 0.419999987, 0.519999981,
        0.889999986}},
    {{3, 3}, {1, 1}, {1, 1}, "SAME", {1, 5, 6, 18}, {0, 0, 0, 0, 0, 0, 0, 0, 0, 0.370000005,
        0.74000001, 0.100000001, 0, 0, 0.400000006, 0.769999981, 0.129999995, 0.5, 0, 0, 0, 0, 0, 0,
        0, 0.370000005, 0.74000001, 0.100000001, 0.469999999, 0.839999974, 0.400000006, 0.769999981,
        0.129999995, 0.5, 0.870000005, 0.230000004, 0, 0, 0, 0, 0, 0, 0.74000001, 0.100000001,
        0.469999999, 0.839999974, 0.200000003, 0.569999993, 0.129999995, 0.5, 0.870000005,
        0.230000004, 0.600000024, 0.970000029, 0, 0, 0, 0, 0, 0, 0.469999999, 0.839999974,
        0.200000003, 0.569999993, 0.939999998, 0.300000012, 0.870000005, 0.230000004, 0.600000024,
        0.970000029, 0.330000013, 0.699999988, 0, 0, 0, 0, 0, 0, 0.200000003, 0.569999993,
        0.939999998, 0.300000012, 0.670000017, 0.0299999993, 0.600000024, 0.970000029, 0.330000013,
        0.699999988, 0.0599999987, 0.430000007, 0, 0, 0, 0, 0, 0, 0.939999998, 0.300000012,
        0.670000017, 0.0299999993, 0, 0, 0.330000013, 0.699999988, 0.0599999987, 0.430000007, 0, 0,
        0, 0, 0, 0.370000005, 0.74000001, 0.100000001, 0, 0, 0.400000006, 0.769999981, 0.129999995,
        0.5, 0, 0, 0.800000012, 0.159999996, 0.529999971, 0.899999976, 0, 0.370000005, 0.74000001,
        0.100000001, 0.469999999, 0.839999974, 0.400000006, 0.769999981, 0.129999995, 0.5,
        0.870000005, 0.230000004, 0.800000012, 0.159999996, 0.529999971, 0.899999976, 0.25999999,
        0.629999995, 0.74000001, 0.100000001, 0.469999999, 0.839999974, 0.200000003, 0.569999993,
        0.129999995, 0.5, 0.870000005, 0.230000004, 0.600000024, 0.970000029, 0.529999971,
        0.899999976, 0.25999999, 0.629999995, 1, 0.360000014, 0.469999999, 0.839999974, 0.200000003,
        0.569999993, 0.939999998, 0.300000012, 0.870000005, 0.230000004, 0.600000024, 0.970000029,
        0.330000013, 0.699999988, 0.25999999, 0.629999995, 1, 0.360000014, 0.730000019,
        0.0900000036, 0.200000003, 0.569999993, 0.939999998, 0.300000012, 0.670000017, 0.0299999993,
        0.600000024, 0.970000029, 0.330000013, 0.699999988, 0.0599999987, 0.430000007, 1,
        0.360000014, 0.730000019, 0.0900000036, 0.460000008, 0.829999983, 0.939999998, 0.300000012,
        0.670000017, 0.0299999993, 0, 0, 0.330000013, 0.699999988, 0.0599999987, 0.430000007, 0, 0,
        0.730000019, 0.0900000036, 0.460000008, 0.829999983, 0, 0, 0, 0, 0.400000006, 0.769999981,
        0.129999995, 0.5, 0, 0, 0.800000012, 0.159999996, 0.529999971, 0.899999976, 0, 0,
        0.189999998, 0.560000002, 0.930000007, 0.289999992, 0.400000006, 0.769999981, 0.129999995,
        0.5, 0.870000005, 0.230000004, 0.800000012, 0.159999996, 0.529999971, 0.899999976,
        0.25999999, 0.629999995, 0.189999998, 0.560000002, 0.930000007, 0.289999992, 0.660000026,
        0.0199999996, 0.129999995, 0.5, 0.870000005, 0.230000004, 0.600000024, 0.970000029,
        0.529999971, 0.899999976, 0.25999999, 0.629999995, 1, 0.360000014, 0.930000007, 0.289999992,
        0.660000026, 0.0199999996, 0.389999986, 0.75999999, 0.870000005, 0.230000004, 0.600000024,
        0.970000029, 0.330000013, 0.699999988, 0.25999999, 0.629999995, 1, 0.360000014, 0.730000019,
        0.0900000036, 0.660000026, 0.0199999996, 0.389999986, 0.75999999, 0.119999997, 0.49000001,
        0.600000024, 0.970000029, 0.330000013, 0.699999988, 0.0599999987, 0.430000007, 1,
        0.360000014, 0.730000019, 0.0900000036, 0.460000008, 0.829999983, 0.389999986, 0.75999999,
        0.119999997, 0.49000001, 0.860000014, 0.219999999, 0.330000013, 0.699999988, 0.0599999987,
        0.430000007, 0, 0, 0.730000019, 0.0900000036, 0.460000008, 0.829999983, 0, 0, 0.119999997,
        0.49000001, 0.860000014, 0.219999999, 0, 0, 0, 0, 0.800000012, 0.159999996, 0.529999971,
        0.899999976, 0, 0, 0.189999998, 0.560000002, 0.930000007, 0.289999992, 0, 0, 0.589999974,
        0.959999979, 0.319999993, 0.689999998, 0.800000012, 0.159999996, 0.529999971, 0.899999976,
        0.25999999, 0.629999995, 0.189999998, 0.560000002, 0.930000007, 0.289999992, 0.660000026,
        0.0199999996, 0.589999974, 0.959999979, 0.319999993, 0.689999998, 0.0500000007, 0.419999987,
        0.529999971, 0.899999976, 0.25999999, 0.629999995, 1, 0.360000014, 0.930000007, 0.289999992,
        0.660000026, 0.0199999996, 0.389999986, 0.75999999, 0.319999993, 0.689999998, 0.0500000007,
        0.419999987, 0.790000021, 0.150000006, 0.25999999, 0.629999995, 1, 0.360000014, 0.730000019,
        0.0900000036, 0.660000026, 0.0199999996, 0.389999986, 0.75999999, 0.119999997, 0.49000001,
        0.0500000007, 0.419999987, 0.790000021, 0.150000006, 0.519999981, 0.889999986, 1,
        0.360000014, 0.730000019, 0.0900000036, 0.460000008, 0.829999983, 0.389999986, 0.75999999,
        0.119999997, 0.49000001, 0.860000014, 0.219999999, 0.790000021, 0.150000006, 0.519999981,
        0.889999986, 0.25, 0.620000005, 0.730000019, 0.0900000036, 0.460000008, 0.829999983, 0, 0,
        0.119999997, 0.49000001, 0.860000014, 0.219999999, 0, 0, 0.519999981, 0.889999986, 0.25,
        0.620000005, 0, 0, 0, 0, 0.189999998, 0.560000002, 0.930000007, 0.289999992, 0, 0,
        0.589999974, 0.959999979, 0.319999993, 0.689999998, 0, 0, 0, 0, 0, 0, 0.189999998,
        0.560000002, 0.930000007, 0.289999992, 0.660000026, 0.0199999996, 0.589999974, 0.959999979,
        0.319999993, 0.689999998, 0.0500000007, 0.419999987, 0, 0, 0, 0, 0, 0, 0.930000007,
        0.289999992, 0.660000026, 0.0199999996, 0.389999986, 0.75999999, 0.319999993, 0.689999998,
        0.0500000007, 0.419999987, 0.790000021, 0.150000006, 0, 0, 0, 0, 0, 0, 0.660000026,
        0.0199999996, 0.389999986, 0.75999999, 0.119999997, 0.49000001, 0.0500000007, 0.419999987,
        0.790000021, 0.150000006, 0.519999981, 0.889999986, 0, 0, 0, 0, 0, 0, 0.389999986,
        0.75999999, 0.119999997, 0.49000001, 0.860000014, 0.219999999, 0.790000021, 0.150000006,
        0.519999981, 0.889999986, 0.25, 0.620000005, 0, 0, 0, 0, 0, 0, 0.119999997, 0.49000001,
        0.860000014, 0.219999999, 0, 0, 0.519999981, 0.889999986, 0.25, 0.620000005, 0, 0, 0, 0, 0,
        0, 0, 0}},
    {{4, 1}, {2, 4}, {1, 1}, "SAME", {1, 3, 2, 8}, {0, 0, 0, 0.370000005, 0.400000006, 0.769999981,
        0.800000012, 0.159999996, 0, 0, 0.939999998, 0.300000012, 0.330000013, 0.699999988,
        0.730000019, 0.0900000036, 0.400000006, 0.769999981, 0.800000012, 0.159999996, 0.189999998,
        0.560000002, 0.589999974, 0.959999979, 0.330000013, 0.699999988, 0.730000019, 0.0900000036,
        0.119999997, 0.49000001, 0.519999981, 0.889999986, 0.189999998, 0.560000002, 0.589999974,
        0.959999979, 0, 0, 0, 0, 0.119999997, 0.49000001, 0.519999981, 0.889999986, 0, 0, 0, 0}},
};
// clang-format on

tf::Tensor patch_input(const tf::TensorShape& shape = {1, 5, 6, 2}) {
  std::vector<double> v(60);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 37) % 101) / 100.0;
  return tf::detail::from_doubles(v, shape, tf::float32);
}

// sum(f(x) * w) differentiated by the tape and by central differences, in float64; x in
// [0.05, 0.95).
void check_gradient(const std::function<tf::Tensor(const tf::Tensor&)>& f,
                    const tf::TensorShape& shape) {
  tf::testing::check_gradient(
      f, shape, random_values(static_cast<size_t>(shape.num_elements()), 0.05, 0.95, 3), 1e-6,
      1e-7);
}

// The float32 scalar that a random op with this op seed draws first after set_seed(global).
double first_draw(int64_t global, int64_t seed, double lo, double hi) {
  tf::random::set_seed(global);
  return tf::detail::to_double_vector(tf::random::uniform({}, lo, hi, tf::float32, seed))[0];
}

}  // namespace

TEST_CASE("image extract_patches gives TF's values", "[cpu][cuda][image]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = patch_input();
    for (const auto& c : kPatchCases) {
      INFO("sizes " << c.sizes[0] << "x" << c.sizes[1] << " strides " << c.strides[0] << "x"
                    << c.strides[1] << " rates " << c.rates[0] << "x" << c.rates[1] << " "
                    << c.padding);
      const tf::Tensor y = tf::image::extract_patches(x, c.sizes, c.strides, c.rates, c.padding);
      CHECK(y.shape() == c.shape);
      check_values(y, c.want, 1e-7, 0);
    }
    // Integer images keep their dtype.
    const tf::Tensor u = tf::image::extract_patches(
        tf::cast(x * tf::detail::from_doubles({100}, {}, tf::float32), tf::int32), {1, 1}, {5, 6},
        {1, 1}, "VALID");
    CHECK(u.dtype() == tf::int32);
    check_values(u, {0, 37}, 0, 0);
  }
}

TEST_CASE("image extract_patches gradients match finite differences", "[cpu][cuda][image]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const char* padding : {"VALID", "SAME"})
      check_gradient(
          [&](const tf::Tensor& x) {
            return tf::image::extract_patches(x, {3, 2}, {2, 1}, {1, 2}, padding);
          },
          {2, 5, 6, 2});
  }
}

TEST_CASE("image random flips pick each image or its mirror from the seeded draw",
          "[cpu][cuda][image]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const int64_t n = 8;
    const tf::Tensor x =
        tf::detail::from_doubles(random_values(n * 12, 0, 1, 4), {n, 2, 3, 2}, tf::float32);
    for (bool lr : {true, false}) {
      INFO((lr ? "left_right" : "up_down"));
      const auto flip = [&](const tf::Tensor& t, std::optional<int64_t> seed) {
        return lr ? tf::image::random_flip_left_right(t, seed)
                  : tf::image::random_flip_up_down(t, seed);
      };
      const tf::Tensor mirrored = lr ? tf::image::flip_left_right(x) : tf::image::flip_up_down(x);
      tf::random::set_seed(21);
      const auto coins =
          tf::detail::to_double_vector(tf::random::uniform({n, 1, 1, 1}, 0, 1, tf::float32, 9));
      tf::random::set_seed(21);
      const tf::Tensor y = flip(x, 9);
      CHECK(y.shape() == x.shape());
      int flipped = 0;
      for (int64_t b = 0; b < n; ++b) {
        const auto pick = [b](const tf::Tensor& t) {
          return tf::slice(t, {b, 0, 0, 0}, {1, -1, -1, -1});
        };
        const bool f = coins[static_cast<size_t>(b)] < 0.5;
        flipped += f ? 1 : 0;
        check_close(pick(y), pick(f ? mirrored : x), 0, 0);
      }
      // Eight fair coins: both outcomes occur for this seed.
      CHECK(flipped > 0);
      CHECK(flipped < n);
      // A single image flips on the first coin of its op's stream.
      const tf::Tensor x0 = tf::reshape(tf::slice(x, {0, 0, 0, 0}, {1, -1, -1, -1}), {2, 3, 2});
      const bool f0 = first_draw(5, 3, 0, 1) < 0.5;
      tf::random::set_seed(5);
      check_close(flip(x0, 3),
                  f0 ? (lr ? tf::image::flip_left_right(x0) : tf::image::flip_up_down(x0)) : x0, 0,
                  0);
    }
  }
}

TEST_CASE("image random colour ops apply the adjust op with the seeded draw",
          "[cpu][cuda][image]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x =
        tf::detail::from_doubles(random_values(2 * 3 * 4 * 3, 0, 1, 4), {2, 3, 4, 3}, tf::float32);
    double d = first_draw(17, 4, -0.3, 0.3);
    CHECK(std::abs(d) <= 0.3);
    tf::random::set_seed(17);
    check_close(tf::image::random_brightness(x, 0.3, 4), tf::image::adjust_brightness(x, d), 1e-6,
                1e-6);
    d = first_draw(17, 4, 0.2, 1.8);
    CHECK((d >= 0.2 && d < 1.8));
    tf::random::set_seed(17);
    check_close(tf::image::random_contrast(x, 0.2, 1.8, 4), tf::image::adjust_contrast(x, d), 1e-6,
                1e-6);
    tf::random::set_seed(17);
    check_close(tf::image::random_saturation(x, 0.2, 1.8, 4), tf::image::adjust_saturation(x, d),
                1e-6, 1e-6);
    d = first_draw(17, 4, -0.4, 0.4);
    tf::random::set_seed(17);
    check_close(tf::image::random_hue(x, 0.4, 4), tf::image::adjust_hue(x, d), 1e-6, 1e-6);
    // A seeded op draws again on the next call, and repeats after set_seed.
    tf::random::set_seed(8);
    const tf::Tensor a = tf::image::random_brightness(x, 0.5, 1);
    const tf::Tensor b = tf::image::random_brightness(x, 0.5, 1);
    tf::random::set_seed(8);
    check_close(tf::image::random_brightness(x, 0.5, 1), a, 0, 0);
    CHECK(tf::detail::to_double_vector(a)[0] != tf::detail::to_double_vector(b)[0]);
  }
}

TEST_CASE("image random op gradients match finite differences", "[cpu][cuda][image]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // The same seed before every evaluation fixes the draw.
    const auto seeded = [](std::function<tf::Tensor(const tf::Tensor&)> f) {
      return [f](const tf::Tensor& x) {
        tf::random::set_seed(31);
        return f(x);
      };
    };
    const tf::TensorShape s{2, 2, 3, 3};
    check_gradient(
        seeded([](const tf::Tensor& x) { return tf::image::random_brightness(x, 0.2, 2); }), s);
    check_gradient(
        seeded([](const tf::Tensor& x) { return tf::image::random_contrast(x, 0.5, 1.5, 2); }), s);
    check_gradient(
        seeded([](const tf::Tensor& x) { return tf::image::random_saturation(x, 0.5, 1.5, 2); }),
        s);
    check_gradient(seeded([](const tf::Tensor& x) { return tf::image::random_hue(x, 0.3, 2); }), s);
    check_gradient(
        seeded([](const tf::Tensor& x) { return tf::image::random_flip_left_right(x, 2); }), s);
    check_gradient(seeded([](const tf::Tensor& x) { return tf::image::random_flip_up_down(x, 2); }),
                   s);
  }
}

TEST_CASE("image extract_patches and random flips inside a traced function equal eager",
          "[cpu][cuda][image]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    auto patches = [](const tf::Tensor& x) {
      return tf::image::extract_patches(x, {2, 3}, {2, 1}, {1, 1}, "SAME");
    };
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, 5, 6, 2})};
    auto f = tf::function(patches, opts);
    for (int64_t n : {1, 3}) {
      const tf::Tensor x = tf::detail::from_doubles(
          random_values(static_cast<size_t>(n * 60), 0, 1, 5), {n, 5, 6, 2}, tf::float32);
      check_close(f(x), patches(x), 0, 0);
    }
    CHECK(f.tracing_count() == 1);
    // A traced random flip serves every batch size; each image is itself or its mirror.
    auto g = tf::function(
        [](const tf::Tensor& x) { return tf::image::random_flip_left_right(x, 4); }, opts);
    const tf::Tensor x =
        tf::detail::from_doubles(random_values(4 * 60, 0, 1, 5), {4, 5, 6, 2}, tf::float32);
    const tf::Tensor y = g(x), m = tf::image::flip_left_right(x);
    for (int64_t b = 0; b < 4; ++b) {
      const auto pick = [b](const tf::Tensor& t) {
        return tf::detail::to_double_vector(tf::slice(t, {b, 0, 0, 0}, {1, -1, -1, -1}));
      };
      CHECK((pick(y) == pick(x) || pick(y) == pick(m)));
    }
  }
}

TEST_CASE("image extract_patches and random ops reject bad arguments", "[cpu][image]") {
  using tf::testing::require_error;
  const tf::Tensor x = tf::zeros({1, 4, 5, 3});
  require_error(
      [&] {
        tf::image::extract_patches(tf::zeros({4, 5, 3}), {2, 2}, {1, 1}, {1, 1}, "VALID");
      },
      {"[extract_patches]", "rank 4", "(4, 5, 3)"});
  require_error(
      [&] {
        tf::image::extract_patches(x, {2, 0}, {1, 1}, {1, 1}, "VALID");
      },
      {"[extract_patches]", "positive"});
  require_error(
      [&] {
        tf::image::extract_patches(x, {2, 2}, {1, 1}, {1, 1}, "FULL");
      },
      {"[extract_patches]", "FULL"});
  require_error(
      [&] {
        tf::image::extract_patches(x, {3, 3}, {1, 1}, {2, 1}, "VALID");
      },
      {"[extract_patches]", "(1, 4, 5, 3)"});
  require_error(
      [&] {
        tf::image::random_flip_left_right(tf::zeros({4, 5}));
      },
      {"[random_flip_left_right]", "(4, 5)"});
  require_error([&] { tf::image::random_brightness(x, -0.1); },
                {"[random_brightness]", "non-negative"});
  require_error([&] { tf::image::random_contrast(x, 0.9, 0.5); },
                {"[random_contrast]", "upper must be > lower"});
  require_error([&] { tf::image::random_saturation(x, -0.5, 0.5); },
                {"[random_saturation]", "non-negative"});
  require_error([&] { tf::image::random_hue(x, 0.7); }, {"[random_hue]", "[0, 0.5]"});
  require_error(
      [&] {
        tf::image::random_saturation(tf::zeros({4, 5, 2}), 0.5, 1.5);
      },
      {"[adjust_saturation]", "(4, 5, 2)"});
  require_error([&] { tf::image::random_brightness(tf::cast(x, tf::int32), 0.1); },
                {"[random_brightness]", "int32"});
}

TEST_CASE("image: stateless random ops repeat for a seed pair, random_crop crops",
          "[cpu][cuda][image]") {
  using tf::testing::require_error;
  const std::array<int64_t, 2> pair{3, 7}, other{4, 7};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::random::uniform({4, 6, 5, 3}, 0.0, 1.0, tf::float32, 12);
    // Each stateless op is its adjust op driven by stateless_uniform with the pair.
    const tf::Tensor u = tf::random::stateless_uniform({}, pair, -0.3, 0.3);
    check_close(tf::image::stateless_random_brightness(x, 0.3, pair), x + u, 0, 0);
    check_close(tf::image::stateless_random_brightness(x, 0.3, pair),
                tf::image::stateless_random_brightness(x, 0.3, pair), 0, 0);
    CHECK(tf::reduce_max(tf::abs(tf::image::stateless_random_brightness(x, 0.3, other) -
                                 tf::image::stateless_random_brightness(x, 0.3, pair)))
              .item<float>() > 0);
    const tf::Tensor c = tf::random::stateless_uniform({}, pair, 0.5, 1.5);
    const tf::Tensor mean = tf::reduce_mean(x, std::vector<int>{1, 2}, true);
    check_close(tf::image::stateless_random_contrast(x, 0.5, 1.5, pair), (x - mean) * c + mean,
                1e-6, 1e-6);
    check_close(tf::image::stateless_random_saturation(x, 0.5, 1.5, pair),
                tf::image::stateless_random_saturation(x, 0.5, 1.5, pair), 0, 0);
    check_close(tf::image::stateless_random_hue(x, 0.2, pair),
                tf::image::stateless_random_hue(x, 0.2, pair), 0, 0);
    // One coin per image: flipped where stateless_uniform((4, 1, 1, 1)) < 0.5.
    const tf::Tensor coins = tf::random::stateless_uniform({4, 1, 1, 1}, pair);
    check_close(tf::image::stateless_random_flip_left_right(x, pair),
                tf::where(tf::less(coins, tf::Tensor(0.5f)), tf::image::flip_left_right(x), x), 0,
                0);
    check_close(tf::image::stateless_random_flip_up_down(x, pair),
                tf::where(tf::less(coins, tf::Tensor(0.5f)), tf::image::flip_up_down(x), x), 0, 0);
    // random_crop: a (2, 4, 3, 3) window of x at some offset; the stateless one repeats.
    for (int call = 0; call < 3; ++call) {
      const tf::Tensor crop = tf::image::random_crop(x, {2, 4, 3, 3}, 5);
      REQUIRE(crop.shape() == tf::TensorShape{2, 4, 3, 3});
      bool found = false;
      for (int64_t b = 0; b <= 2 && !found; ++b)
        for (int64_t h = 0; h <= 2 && !found; ++h)
          for (int64_t w = 0; w <= 2 && !found; ++w)
            found = tf::reduce_max(tf::abs(crop - tf::slice(x, {b, h, w, 0}, {2, 4, 3, 3})))
                        .item<float>() == 0.0f;
      CHECK(found);
    }
    check_close(tf::image::stateless_random_crop(x, {3, 3, 3, 1}, pair),
                tf::image::stateless_random_crop(x, {3, 3, 3, 1}, pair), 0, 0);
    check_close(tf::image::random_crop(x, {4, 6, 5, 3}), x, 0, 0);  // the whole tensor
    // Integer images crop too.
    CHECK(tf::image::random_crop(tf::cast(x * 255.0f, tf::uint8), {1, 2, 2, 3}).dtype() ==
          tf::uint8);
  }
  // In a traced function the stateless ops give the same numbers at every call.
  auto f = tf::function(
      [pair](const tf::Tensor& t) { return tf::image::stateless_random_brightness(t, 0.5, pair); });
  const tf::Tensor x = tf::random::uniform({2, 3, 3, 3}, 0.0, 1.0, tf::float32, 1);
  check_close(f(x), f(x), 0, 0);
  check_close(f(x), tf::image::stateless_random_brightness(x, 0.5, pair), 0, 0);
  require_error(
      [] {
        tf::image::random_crop(tf::zeros({4, 5}), {5, 5});
      },
      {"random_crop", "size", "(4, 5)"});
  require_error(
      [] {
        tf::image::random_crop(tf::zeros({4, 5}), {2});
      },
      {"random_crop", "one size per axis"});
  require_error(
      [&] {
        tf::image::stateless_random_hue(tf::zeros({2, 2, 3}), 0.7, pair);
      },
      {"stateless_random_hue", "max_delta", "0.7"});
}

TEST_CASE("image: random flips, gradients and total variation of images without pixels",
          "[cpu][cuda][image]") {
  // An empty height, width or channel axis: the flips return the images, image_gradients pads
  // its empty differences with a zero row / column as TF, total_variation sums nothing. (The
  // flips' coin slice and the differences' slices were out of bounds.)
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const tf::TensorShape& s :
         {tf::TensorShape{2, 0, 4, 3}, tf::TensorShape{1, 3, 0, 3}, tf::TensorShape{2, 3, 3, 0}}) {
      INFO("images " << s.to_string());
      const tf::Tensor x = tf::zeros(s);
      CHECK(tf::image::random_flip_left_right(x, 1).shape() == s);
      CHECK(tf::image::stateless_random_flip_up_down(x, {1, 2}).shape() == s);
      auto [dy, dx] = tf::image::image_gradients(x);
      tf::TensorShape sy = s, sx = s;
      sy[1] = std::max<int64_t>(s[1], 1);
      sx[2] = std::max<int64_t>(s[2], 1);
      CHECK(dy.shape() == (s[1] == 0 ? sy : s));
      CHECK(dx.shape() == (s[2] == 0 ? sx : s));
      check_values(tf::image::total_variation(x),
                   std::vector<double>(static_cast<size_t>(s[0]), 0.0), 0, 0);
    }
  }
}
