// tf::nn::dilation2d and erosion2d (ops/morphology.h) on every device of devices_under_test():
// TF 2.21's values for VALID and SAME padding with strides and dilations, its gradients (the
// first maximising tap of each window), central differences away from ties, a trace over a
// None batch and the errors.
#include <cmath>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/morphology.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

// tf.reshape(tf.range(2 * 5 * 6 * 2, dtype=tf.float32) % 7.0, [2, 5, 6, 2]) and the filters.
tf::Tensor image() {
  return tf::reshape(tf::floormod(tf::range(0.0f, 120.0f, 1.0f), 7.0f), {2, 5, 6, 2});
}
tf::Tensor filters() {
  return tf::reshape(
      tf::constant({0.5f, -1.0f, 0.0f, 2.0f, 1.0f, -0.5f, 0.25f, 0.0f, -2.0f, 1.5f, 0.75f, -0.25f}),
      {2, 3, 2});
}

double sum_of(const tf::Tensor& t) {
  return tf::reduce_sum(t).item<float>();
}

}  // namespace

TEST_CASE("dilation2d and erosion2d match TF 2.21", "[cpu][cuda][morphology]") {
  struct Case {
    std::string padding;
    std::vector<int64_t> strides, rates;
    tf::TensorShape shape;
    std::vector<double> first;  // the first 12 values of the dilation
    double sum, erosion_sum;
  };
  const std::vector<Case> cases = {
      {"VALID",
       {1, 1, 1, 1},
       {1, 1, 1, 1},
       {2, 4, 4, 2},
       {5.25, 6.0, 7.0, 7.0, 6.75, 6.5, 6.5, 5.0, 5.5, 7.5, 5.25, 6.0},
       407.0,
       -28.0},
      {"VALID",
       {1, 2, 1, 1},
       {1, 1, 2, 1},
       {2, 2, 2, 2},
       {6.75, 7.0, 6.0, 6.5, 5.0, 7.5, 7.0, 5.0, 6.0, 5.5, 6.5, 6.0},
       101.0,
       -7.25},
      {"SAME",
       {1, 1, 1, 1},
       {1, 1, 1, 1},
       {2, 5, 6, 2},
       {3.0, 7.5, 5.25, 6.0, 7.0, 7.0, 6.75, 6.5, 6.5, 5.0, 6.25, 6.0},
       727.0,
       -2.5},
      {"SAME",
       {1, 2, 1, 1},
       {1, 1, 2, 1},
       {2, 3, 6, 2},
       {5.0, 7.5, 7.0, 5.0, 6.75, 7.0, 6.0, 6.5, 4.5, 4.0, 6.5, 6.0},
       419.0,
       18.25},
  };
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = image(), f = filters();
    for (const Case& c : cases) {
      INFO(c.padding << " strides " << c.strides[1] << " rates " << c.rates[2]);
      const tf::Tensor y = tf::nn::dilation2d(x, f, c.strides, c.padding, "NHWC", c.rates);
      CHECK(y.shape() == c.shape);
      check_values(tf::slice(tf::reshape(y, {-1}), {0}, {12}), c.first, 1e-6, 0);
      CHECK(sum_of(y) == Approx(c.sum).epsilon(1e-6));
      const tf::Tensor e = tf::nn::erosion2d(x, f, c.strides, c.padding, "NHWC", c.rates);
      CHECK(e.shape() == c.shape);
      CHECK(sum_of(e) == Approx(c.erosion_sum).margin(1e-4));
    }
    // The {h, w} forms equal TF's four-entry ones.
    tf::testing::check_close(tf::nn::dilation2d(x, f, {2, 1}, "SAME", "NHWC", {1, 2}),
                             tf::nn::dilation2d(x, f, {1, 2, 1, 1}, "SAME", "NHWC", {1, 1, 2, 1}),
                             0, 0);

    // TF 2.21's gradients of sum(dilation2d(x, f, SAME) * (range % 3)).
    tf::Tensor gx, gf;
    {
      tf::GradientTape tape(tf::TapeOptions{.persistent = true});
      tape.watch(x);
      tape.watch(f);
      const tf::Tensor y = tf::nn::dilation2d(x, f, {1, 1}, "SAME");
      const tf::Tensor w =
          tf::reshape(tf::floormod(tf::range(0.0f, 120.0f, 1.0f), 3.0f), y.shape());
      const tf::Tensor loss = tf::reduce_sum(y * w);
      gx = tape.gradient(loss, x);
      gf = tape.gradient(loss, f);
    }
    CHECK(sum_of(gx) == Approx(120.0));
    check_values(tf::slice(tf::reshape(gx, {-1}), {0}, {12}), {0, 0, 0, 0, 0, 2, 3, 0, 0, 0, 0, 2},
                 0, 0);
    check_values(gf, {18, 4, 7, 31, 9, 0, 14, 12, 0, 13, 12, 0}, 0, 0);
  }
}

TEST_CASE("dilation2d gradients match central differences away from ties",
          "[cpu][cuda][morphology]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // Distinct values (no two taps of a window tie), so the maximum is differentiable.
    tf::testing::check_gradient(
        [](const tf::Tensor& x) {
          const tf::Tensor img = tf::reshape(tf::slice(x, {0}, {40}), {1, 4, 5, 2});
          const tf::Tensor f = tf::reshape(tf::slice(x, {40}, {8}), {2, 2, 2});
          return tf::nn::dilation2d(img, f, {1, 2}, "SAME", "NHWC", {2, 1}) +
                 tf::reduce_sum(tf::nn::erosion2d(img, f, {1, 1}, "VALID"));
        },
        {48}, tf::testing::random_values(48, -3, 3, 9), 1e-6, 1e-8);
  }
}

TEST_CASE("dilation2d traces over a None batch and rejects bad arguments",
          "[cpu][morphology][jit]") {
  const tf::Tensor f = filters();
  auto fn = tf::function(
      [&](const tf::Tensor& x) {
        return tf::nn::dilation2d(x, f, {1, 1}, "SAME");
      },
      tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 5, 6, 2})}});
  const tf::Tensor x = image();
  tf::testing::check_close(fn(x), tf::nn::dilation2d(x, f, {1, 1}, "SAME"), 0, 0);
  const tf::Tensor one = tf::slice(x, {0, 0, 0, 0}, {1, 5, 6, 2});
  tf::testing::check_close(fn(one), tf::nn::dilation2d(one, f, {1, 1}, "SAME"), 0, 0);
  CHECK(fn.tracing_count() == 1);

  require_error(
      [&] {
        tf::nn::dilation2d(x, f, {1, 1}, "SAME", "NCHW");
      },
      {"[dilation2d] data_format must be \"NHWC\""});
  require_error(
      [&] {
        tf::nn::dilation2d(x, tf::ones({2, 2, 3}), {1, 1}, "SAME");
      },
      {"[dilation2d] filters must be (height, width, 2)"});
  require_error(
      [&] {
        tf::nn::dilation2d(x, f, {2, 1, 1, 1}, "SAME");
      },
      {"[dilation2d] strides must be {h, w} or {1, h, w, 1}"});
  require_error(
      [&] {
        tf::nn::dilation2d(x, f, {1, 1}, "FULL");
      },
      {"[dilation2d] padding must be"});
  require_error(
      [&] {
        tf::nn::erosion2d(tf::ones({1, 3, 3, 2}, tf::int32), f, {1, 1}, "SAME");
      },
      {"[erosion2d]", "int32"});
}
