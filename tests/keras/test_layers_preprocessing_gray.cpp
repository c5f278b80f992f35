// keras.layers.RandomGrayscale, RandomSaturation and RandomHue: Keras 3.15's values
// (RandomGrayscale with factor 1, RandomSaturation with an empty factor range, which fixes the
// draw), the identity at inference, each image grey or unchanged by its own draw, traced against
// eager, errors.
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/layers.h"
#include "keras/layers_preprocessing.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace layers = tf::keras::layers;
using tf::testing::check_close;
using tf::testing::check_values;

namespace {

// clang-format off
// keras.layers.RandomGrayscale(factor=1.0)(x, training=True) (Keras 3.15), x = (2, 2, 3, 3) ((i *
// 53) % 97) / 96 * 255
const std::vector<double> kGray = {85.3639069, 85.3639069, 85.3639069, 98.7907181, 98.7907181,
    98.7907181, 157.075485, 157.075485, 157.075485, 141.129486, 141.129486, 141.129486, 77.5428467,
    77.5428467, 77.5428467, 135.827606, 135.827606, 135.827606, 149.254425, 149.254425, 149.254425,
    56.2949677, 56.2949677, 56.2949677, 114.579735, 114.579735, 114.579735, 128.006546, 128.006546,
    128.006546, 186.291336, 186.291336, 186.291336, 93.3318634, 93.3318634, 93.3318634};
// keras.layers.RandomSaturation((0.3, 0.3))(x, training=True) (Keras 3.15), x as kGray's input
const std::vector<double> kSaturation = {80.4464417, 140.78125, 90.6919785, 178.348221, 128.258942,
    188.59375, 152.165192, 212.5, 162.410736, 236.40625, 186.316971, 136.227676, 157.098221,
    107.008934, 167.34375, 130.915176, 191.25, 141.160721, 228.816971, 178.727692, 239.0625,
    135.848221, 85.7589417, 146.09375, 109.665184, 170, 119.910736, 207.566986, 157.477692,
    217.8125, 181.383942, 241.71875, 191.629486, 88.415184, 148.75, 98.6607208};
// keras.layers.RandomSaturation((0.8, 0.8), value_range=(0, 1))(x / 255, training=True)
const std::vector<double> kSaturationUnit = {0, 0.552083313, 0.0937500894, 0.613993764, 0,
    0.739583313, 0, 0.833333313, 0.141509563, 0.927083313, 0.463541657, 0, 0.544811368, 0, 0.65625,
    0, 0.75, 0.127358615, 0.778301954, 0, 0.9375, 0.475629002, 0, 0.572916687, 0, 0.666666687,
    0.113207661, 0.709119558, 0, 0.854166687, 0, 0.947916687, 0.160967141, 0, 0.583333313,
    0.0990566984};
// keras.layers.RandomHue((0.4, 0.4)).transform_images(x, {'factor': [d, d]}) (Keras 3.15): the
// hue shifted by d = 0.2 and d = -0.2; x as kGray's input
const std::vector<double> kHuePlus = {0, 88.7187195, 140.78125, 188.59375, 52.0625191, 47.8125038,
    71.7187576, 160.437469, 212.5, 72.7812347, 236.40625, 2.65624928, 167.34375, 30.8125248,
    26.5625095, 50.46875, 139.187469, 191.25, 239.0625, 102.531258, 98.2812424, 146.09375,
    9.56251144, 5.31249475, 29.2187405, 117.937462, 170, 217.8125, 81.2812576, 77.0312424,
    100.937492, 189.656235, 241.71875, 7.96874571, 96.6874695, 148.75};
const std::vector<double> kHueMinus = {140.78125, 136.531265, 0, 47.8125038, 99.8749542, 188.59375,
    212.5, 208.250015, 71.7187576, 236.40625, 2.65624928, 166.281189, 26.5625095, 78.6249695,
    167.34375, 191.25, 187, 50.46875, 98.2812424, 150.343704, 239.0625, 5.31249475, 57.3749619,
    146.09375, 170, 165.750031, 29.2187405, 77.0312424, 129.093704, 217.8125, 241.71875, 237.468781,
    100.937492, 148.75, 144.500015, 7.96874571};
// clang-format on

tf::Tensor gray_input(int64_t n = 2) {
  std::vector<double> v(static_cast<size_t>(n * 18));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>((i * 53) % 97) / 96.0 * 255;
  return tf::detail::from_doubles(v, {n, 2, 3, 3}, tf::float32);
}

}  // namespace

TEST_CASE("RandomGrayscale gives Keras values and keeps or greys each image",
          "[cpu][cuda][keras][preprocessing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = gray_input();
    const tf::Tensor all = layers::RandomGrayscale(1.0, 3)(x, true);
    CHECK(all.shape() == x.shape());
    check_values(all, kGray, 1e-6, 1e-4);
    check_close(layers::RandomGrayscale(0.0, 3)(x, true), x, 0, 0);
    check_close(layers::RandomGrayscale(1.0, 3)(x, false), x, 0, 0);
    // factor 0.5: image b is grey where its draw (the layer's op stream) is below 0.5.
    const int64_t n = 8;
    const tf::Tensor xb = gray_input(n);
    const tf::Tensor grey = layers::RandomGrayscale(1.0)(xb, true);
    tf::random::set_seed(13);
    const auto u =
        tf::detail::to_double_vector(tf::random::uniform({n, 1, 1, 1}, 0, 1, tf::float32, 6));
    tf::random::set_seed(13);
    const tf::Tensor y = layers::RandomGrayscale(0.5, 6)(xb, true);
    int greyed = 0;
    for (int64_t b = 0; b < n; ++b) {
      const auto pick = [b](const tf::Tensor& t) {
        return tf::slice(t, {b, 0, 0, 0}, {1, -1, -1, -1});
      };
      const bool g = u[static_cast<size_t>(b)] < 0.5;
      greyed += g ? 1 : 0;
      check_close(pick(y), pick(g ? grey : xb), 0, 0);
    }
    CHECK(greyed > 0);
    CHECK(greyed < n);
    // A single image (rank 3).
    const tf::Tensor x3 = tf::reshape(tf::slice(x, {0, 0, 0, 0}, {1, -1, -1, -1}), {2, 3, 3});
    check_values(layers::RandomGrayscale(1.0)(x3, true),
                 std::vector<double>(kGray.begin(), kGray.begin() + 18), 1e-6, 1e-4);
  }
}

TEST_CASE("RandomGrayscale traced equals eager and rejects bad arguments",
          "[cpu][keras][preprocessing]") {
  const layers::RandomGrayscale layer(1.0);
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 2, 3, 3})};
  auto f = tf::function([&](const tf::Tensor& x) { return layer(x, true); }, opts);
  for (int64_t n : {1, 3}) {
    const tf::Tensor x = gray_input(n);
    check_close(f(x), layer(x, true), 0, 0);
  }
  CHECK(f.tracing_count() == 1);
  using tf::testing::require_error;
  require_error([] { layers::RandomGrayscale(1.5); }, {"[RandomGrayscale]", "between 0 and 1"});
  require_error(
      [&] {
        layer(tf::zeros({1, 2, 2, 4}), true);
      },
      {"[RandomGrayscale]", "3 channels", "(1, 2, 2, 4)"});
}

TEST_CASE("RandomSaturation gives Keras values for a fixed factor",
          "[cpu][cuda][keras][preprocessing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = gray_input();
    const tf::Tensor y = layers::RandomSaturation(layers::Factor{0.3, 0.3}, {0, 255}, 1)(x, true);
    CHECK(y.shape() == x.shape());
    check_values(y, kSaturation, 1e-5, 1e-3);
    const tf::Tensor unit = x * tf::detail::from_doubles({1.0 / 255}, {}, tf::float32);
    check_values(layers::RandomSaturation(layers::Factor{0.8, 0.8}, {0, 1})(unit, true),
                 kSaturationUnit, 1e-5, 1e-5);
    check_close(layers::RandomSaturation(0.5)(x, false), x, 0, 0);
    // A single image (rank 3).
    const tf::Tensor x3 = tf::reshape(tf::slice(x, {0, 0, 0, 0}, {1, -1, -1, -1}), {2, 3, 3});
    check_values(layers::RandomSaturation(layers::Factor{0.3, 0.3})(x3, true),
                 std::vector<double>(kSaturation.begin(), kSaturation.begin() + 18), 1e-5, 1e-3);
    // A random factor: image b uses the layer's draw u_b, mapped onto (-0.6, 0.6).
    const int64_t n = 4;
    const tf::Tensor xb = gray_input(n);
    tf::random::set_seed(13);
    const auto u =
        tf::detail::to_double_vector(tf::random::uniform({n, 1, 1, 1}, 0, 1, tf::float32, 6));
    tf::random::set_seed(13);
    const tf::Tensor yb = layers::RandomSaturation(0.6, {0, 255}, 6)(xb, true);
    for (int64_t b = 0; b < n; ++b) {
      const auto pick = [b](const tf::Tensor& t) {
        return tf::slice(t, {b, 0, 0, 0}, {1, -1, -1, -1});
      };
      const double ub =
          static_cast<double>(static_cast<float>(u[static_cast<size_t>(b)]) * 1.2f - 0.6f);
      check_close(pick(yb), pick(layers::RandomSaturation(layers::Factor{ub, ub})(xb, true)), 1e-5,
                  1e-3);
    }
    // Traced (None batch) equals eager for a fixed factor.
    const layers::RandomSaturation layer(layers::Factor{0.6, 0.6}, {0, 255}, 4);
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, 2, 3, 3})};
    auto f = tf::function([&](const tf::Tensor& t) { return layer(t, true); }, opts);
    for (int64_t n : {1, 3}) {
      const tf::Tensor xn = gray_input(n);
      check_close(f(xn), layer(xn, true), 1e-6, 1e-4);
    }
    CHECK(f.tracing_count() == 1);
    using tf::testing::require_error;
    require_error([] { layers::RandomSaturation(1.5); }, {"[RandomSaturation]", "factor"});
    require_error(
        [&] {
          layers::RandomSaturation(0.5)(tf::zeros({1, 2, 2, 1}), true);
        },
        {"[RandomSaturation]", "3 channels", "(1, 2, 2, 1)"});
  }
}

TEST_CASE("RandomHue shifts each image's hue by the signed Keras amount",
          "[cpu][cuda][keras][preprocessing]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // factor (0.4, 0.4): every image shifts by +-0.2, the sign from the layer's first draw.
    const int64_t n = 2;
    const tf::Tensor x = gray_input(n);
    int minus = 0;
    for (int64_t global : {13, 14, 15, 16}) {
      tf::random::set_seed(global);
      const auto flip =
          tf::detail::to_double_vector(tf::random::uniform({n, 1, 1, 1}, 0, 1, tf::float32, 6));
      tf::random::set_seed(global);
      const tf::Tensor y = layers::RandomHue(layers::Factor{0.4, 0.4}, {0, 255}, 6)(x, true);
      CHECK(y.shape() == x.shape());
      for (int64_t b = 0; b < n; ++b) {
        INFO("image " << b << " draw " << flip[static_cast<size_t>(b)]);
        const bool neg = flip[static_cast<size_t>(b)] > 0.5;
        minus += neg ? 1 : 0;
        const auto& want = neg ? kHueMinus : kHuePlus;
        check_values(tf::slice(y, {b, 0, 0, 0}, {1, -1, -1, -1}),
                     std::vector<double>(want.begin() + b * 18, want.begin() + (b + 1) * 18), 1e-5,
                     1e-3);
      }
    }
    // Both signs occur over these eight draws.
    CHECK(minus > 0);
    CHECK(minus < 8);
    check_close(layers::RandomHue(0.5)(x, false), x, 0, 0);
    // Traced (None batch) serves every batch size and keeps the value range.
    const layers::RandomHue layer(0.3, {0, 255}, 4);
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, 2, 3, 3})};
    auto f = tf::function([&](const tf::Tensor& t) { return layer(t, true); }, opts);
    for (int64_t m : {1, 3}) {
      const auto v = tf::detail::to_double_vector(f(gray_input(m)));
      CHECK(v.size() == static_cast<size_t>(m * 18));
      for (double e : v) CHECK((e >= -1e-3 && e <= 255.001));
    }
    CHECK(f.tracing_count() == 1);
    using tf::testing::require_error;
    require_error([] { layers::RandomHue(1.5); }, {"[RandomHue]", "[0, 1]"});
    require_error(
        [&] {
          layers::RandomHue(0.5)(tf::zeros({1, 2, 2, 2}), true);
        },
        {"[RandomHue]", "3 channels", "(1, 2, 2, 2)"});
  }
}
