// A sweep over the convolutions, poolings and resizes in a tf::function whose input has None
// spatial dimensions (a fully convolutional network on images of any size, a 1-D convolution over
// sequences of any length): for each op, the function computes a loss of the op's result and its
// first and second-order gradients (nested tapes inside), is called at several sizes, and must
// equal eager at each while tracing once. A gradient that bakes the traced height or width into
// the graph makes the probes differ and the function trace per shape: the CHECK on
// tracing_count() names the op.
#include <functional>
#include <string>
#include <vector>

#include "support/testing.h"
#include "tapeflow/tapeflow.h"

namespace tf = tapeflow;

namespace {

using Op = std::function<tf::Tensor(const tf::Tensor&)>;

struct Case {
  const char* name;
  Op op;
};

tf::Tensor ramp(int64_t n, double scale, const tf::TensorShape& shape) {
  return tf::reshape(tf::range(0.0, static_cast<double>(n), 1.0, tf::float64) * scale - 0.5, shape);
}

// x: (batch, height, width, 2) float64 in [0.2, 1.2).
std::vector<Case> image_cases() {
  const tf::Tensor f3 = ramp(36, 0.03, {3, 3, 2, 2});
  const tf::Tensor f2 = ramp(16, 0.06, {2, 2, 2, 2});
  const tf::Tensor grouped = ramp(16, 0.06, {2, 2, 1, 4});  // 2 groups of 1 channel
  const tf::Tensor dw = ramp(8, 0.1, {2, 2, 2, 1});
  const tf::Tensor pw = ramp(6, 0.2, {1, 1, 2, 3});
  const tf::Tensor f5 = ramp(32, 0.03, {2, 2, 2, 2, 2});
  return {
      {"conv2d SAME in both layouts",
       [f3](const tf::Tensor& x) {
         return tf::nn::conv2d(x, f3, 1, "SAME") +
                tf::transpose(
                    tf::nn::conv2d(tf::transpose(x, {0, 3, 1, 2}), f3, 1, "SAME", {1}, "NCHW"),
                    {0, 2, 3, 1});
       }},
      {"conv2d strided",
       [f3, f2](const tf::Tensor& x) {
         return tf::reduce_sum(tf::nn::conv2d(x, f3, 2, "VALID"), {1, 2}) +
                tf::reduce_sum(tf::nn::conv2d(x, f2, 2, "SAME"), {1, 2});
       }},
      {"conv2d dilated, grouped",
       [f2, grouped](const tf::Tensor& x) {
         return tf::reduce_sum(tf::nn::conv2d(x, f2, 1, "SAME", {2}), {1, 2, 3}) +
                tf::reduce_sum(tf::nn::conv2d(x, grouped, 1, "VALID"), {1, 2, 3});
       }},
      {"depthwise and separable conv2d",
       [dw, pw](const tf::Tensor& x) {
         return tf::reduce_sum(tf::nn::depthwise_conv2d(x, dw, {2}, "SAME"), {1, 2, 3}) +
                tf::reduce_sum(tf::nn::separable_conv2d(x, dw, pw, {1}, "VALID"), {1, 2, 3});
       }},
      {"max_pool2d, avg_pool2d",
       [](const tf::Tensor& x) {
         return tf::reduce_sum(tf::nn::max_pool2d(x, {2}, {2}, "SAME"), {1, 2}) +
                tf::reduce_sum(tf::nn::avg_pool2d(x, {3}, {2}, "VALID"), {1, 2}) +
                tf::reduce_sum(tf::nn::avg_pool2d(x, {2}, {1}, "SAME"), {1, 2});
       }},
      {"resize to a fixed size",
       [](const tf::Tensor& x) {
         return tf::image::resize(x, {4, 3}) + tf::image::resize(x, {4, 3}, "bicubic") +
                tf::image::resize(x, {4, 3}, "nearest") + tf::image::resize(x, {4, 3}, "area") +
                tf::image::resize(x, {4, 3}, "bilinear", /*antialias=*/true);
       }},
      {"conv2d_transpose with a None height and width",
       [f3, f2](const tf::Tensor& x) {
         // (batch, 2H + 1, 2W + 1, 2) and (batch, 2H, 2W, 2): Keras' lengths.
         const tf::Tensor a = tf::nn::conv2d_transpose(
             x, f3, tf::TensorShape({tf::None, tf::None, tf::None, 2}), {2}, "VALID");
         const tf::Tensor b = tf::nn::conv2d_transpose(
             x, f2, tf::TensorShape({tf::None, tf::None, tf::None, 2}), {2}, "SAME");
         return tf::reduce_sum(a, {1, 2}) + tf::reduce_sum(b, {1, 2});
       }},
      {"conv3d, max_pool3d, avg_pool3d over None height and width",
       [f5](const tf::Tensor& x) {
         const tf::Tensor v = tf::stack({x, x * x}, 1);  // (batch, 2, height, width, 2)
         return tf::reduce_sum(tf::nn::conv3d(v, f5, {1}, "SAME"), {1, 2, 3}) +
                tf::reduce_sum(tf::nn::max_pool3d(v, {2}, {1, 1, 2}, "SAME"), {1, 2, 3}) +
                tf::reduce_sum(tf::nn::avg_pool3d(v, {2}, {1}, "VALID"), {1, 2, 3});
       }},
  };
}

// x: (2, steps, 3) float64 in [0.2, 1.2).
std::vector<Case> sequence_cases() {
  const tf::Tensor f3 = ramp(18, 0.06, {3, 3, 2});
  const tf::Tensor f2 = ramp(12, 0.1, {2, 3, 2});
  const tf::Tensor ft = ramp(18, 0.06, {3, 2, 3});  // (width, out, in)
  return {
      {"conv1d SAME, strided VALID, dilated",
       [f3, f2](const tf::Tensor& x) {
         return tf::reduce_sum(tf::nn::conv1d(x, f3, 1, "SAME"), 1) +
                tf::reduce_sum(tf::nn::conv1d(x, f2, 2, "VALID"), 1) +
                tf::reduce_sum(tf::nn::conv1d(x, f2, 1, "SAME", "NWC", 2), 1);
       }},
      {"conv1d channels first",
       [f3](const tf::Tensor& x) {
         return tf::reduce_sum(tf::nn::conv1d(tf::transpose(x, {0, 2, 1}), f3, 1, "SAME", "NCW"),
                               2);
       }},
      {"conv1d_transpose with a None length",
       [ft](const tf::Tensor& x) {
         return tf::reduce_sum(tf::nn::conv1d_transpose(x, ft, {2, tf::None, 2}, 2, "SAME"), 1);
       }},
      {"max_pool1d, avg_pool1d",
       [](const tf::Tensor& x) {
         return tf::reduce_sum(tf::nn::max_pool1d(x, 2, 2, "SAME"), 1) +
                tf::reduce_sum(tf::nn::avg_pool1d(x, 2, 1, "VALID"), 1);
       }},
  };
}

tf::Tensor input(const tf::TensorShape& shape, unsigned seed) {
  return tf::constant(
      tf::testing::random_values(static_cast<size_t>(shape.num_elements()), 0.2, 1.2, seed), shape);
}

// On every device the suite reaches (the traced graph's run-time shapes and tables there too).
void sweep(const std::vector<Case>& cases, const tf::TensorSpec& spec,
           const std::vector<tf::TensorShape>& shapes) {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const Case& c : cases) {
      INFO("op: " << c.name);
      auto both = [&](const tf::Tensor& x) { return tf::testing::first_and_second(c.op, x); };
      auto f = tf::function(both, {.input_signature = {spec}});
      unsigned seed = 3;
      for (const tf::TensorShape& shape : shapes) {
        INFO("input " << shape.to_string());
        const tf::Tensor x = input(shape, ++seed);
        const std::vector<tf::Tensor> want = both(x);
        const std::vector<tf::Tensor> got = f(x);
        REQUIRE(got.size() == want.size());
        for (size_t k = 0; k < want.size(); ++k)
          tf::testing::check_close(got[k], want[k], 1e-9, 1e-9);
      }
      CHECK(f.tracing_count() == 1);
    }
  }
}

}  // namespace

TEST_CASE("None spatial sweep: image ops and their gradients trace once and equal eager",
          "[jit][cuda]") {
  sweep(image_cases(), tf::TensorSpec({tf::None, tf::None, tf::None, 2}, tf::float64),
        {{2, 5, 6, 2}, {3, 4, 7, 2}, {1, 6, 5, 2}, {2, 3, 3, 2}});
}

TEST_CASE("None spatial sweep: 1-D convolutions and poolings trace once and equal eager",
          "[jit][cuda]") {
  sweep(sequence_cases(), tf::TensorSpec({2, tf::None, 3}, tf::float64),
        {{2, 5, 3}, {2, 8, 3}, {2, 3, 3}, {2, 6, 3}});
}

TEST_CASE("None spatial sweep: a size the op refuses is an error when the graph runs", "[jit]") {
  // The one graph serves every size its ops take; an image without rows, which resize refuses
  // eagerly, is refused by the resize tables made when the graph runs.
  auto f = tf::function(
      [](const tf::Tensor& x) {
        return tf::image::resize(x, {4, 3});
      },
      {.input_signature = {tf::TensorSpec({1, tf::None, tf::None, 1})}});
  CHECK(f(tf::zeros({1, 5, 6, 1})).shape() == tf::TensorShape({1, 4, 3, 1}));
  CHECK(f(tf::zeros({1, 7, 2, 1})).shape() == tf::TensorShape({1, 4, 3, 1}));
  tf::testing::require_error(
      [&] {
        f(tf::zeros({1, 0, 6, 1}));
      },
      {"resize", "positive height and width"});
  CHECK(f.tracing_count() == 1);
}
