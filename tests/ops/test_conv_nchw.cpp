// data_format "NCHW" for tf::nn::conv2d, conv2d_transpose, max_pool2d, avg_pool2d and bias_add:
// each configuration (strides, dilations, SAME with TF's asymmetric padding and VALID, groups,
// a depthwise grouping, SAME taps trimmed away, every floating dtype) against the NHWC op on
// transposed tensors, which the reference-loop tests check; TF 2.21's values for one case; the
// gradients of input and filters against the NHWC twin and against central differences, to
// second order; a traced function (one graph, the layout in its attributes); the errors. The
// cases that loop over devices_under_test() are tagged [cuda] too (cuDNN's NCHW convolution on
// a GPU).
#include <fmt/format.h>

#include <functional>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/conv3d.h"
#include "ops/depthwise.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/nn_more.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::random_values;
using tf::testing::require_error;

namespace {

tf::Tensor to_nchw(const tf::Tensor& t) {
  return tf::transpose(t, {0, 3, 1, 2});
}

tf::Tensor random_tensor(const tf::TensorShape& s, tf::DType dt, unsigned seed) {
  return tf::detail::from_doubles(random_values(static_cast<size_t>(s.num_elements()), -1, 1, seed),
                                  s, dt);
}

struct Case {
  std::vector<int64_t> x;  // NHWC
  std::vector<int64_t> f;  // HWIO
  std::vector<int> strides, dilations;
  const char* padding;
  const char* what;
};

const std::vector<Case> kCases = {
    {{2, 5, 6, 3}, {3, 3, 3, 4}, {1}, {1}, "SAME", "3x3 SAME"},
    {{1, 7, 8, 2}, {3, 2, 2, 5}, {2, 3}, {1}, "SAME", "asymmetric SAME padding, strides (2, 3)"},
    {{2, 6, 7, 3}, {2, 3, 3, 2}, {1}, {2, 1}, "VALID", "VALID, dilations (2, 1)"},
    {{1, 5, 5, 4}, {3, 3, 2, 6}, {1}, {1}, "SAME", "2 groups"},
    {{2, 4, 5, 3}, {3, 3, 1, 6}, {2}, {1}, "SAME", "depthwise grouping (filters of depth 1)"},
    {{1, 3, 4, 2}, {3, 3, 2, 3}, {1}, {4}, "SAME", "dilation longer than the input"},
    {{3, 4, 4, 5}, {1, 1, 5, 7}, {1}, {1}, "VALID", "1x1"},
};

std::string describe(const Case& c) {
  return fmt::format("{}: input {}, filters {}", c.what, tf::TensorShape(c.x).to_string(),
                     tf::TensorShape(c.f).to_string());
}

}  // namespace

TEST_CASE("conv2d NCHW equals the NHWC op on transposed tensors", "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const tf::DType dt : {tf::float32, tf::float64, tf::float16, tf::bfloat16}) {
      INFO("dtype " << tf::dtype_name(dt));
      const double tol = tf::testing::rtol_of(dt);
      for (const Case& c : kCases) {
        INFO(describe(c));
        const tf::Tensor x = random_tensor(tf::TensorShape(c.x), dt, 1);
        const tf::Tensor f = random_tensor(tf::TensorShape(c.f), dt, 2);
        const tf::Tensor want = to_nchw(tf::nn::conv2d(x, f, c.strides, c.padding, c.dilations));
        const tf::Tensor got =
            tf::nn::conv2d(to_nchw(x), f, c.strides, c.padding, c.dilations, "NCHW");
        REQUIRE(got.shape() == want.shape());
        REQUIRE(got.dtype() == dt);
        check_close(got, want, tol, tol);
      }
    }
  }
}

TEST_CASE("conv2d NCHW gives TF's values", "[cpu][cuda][nn]") {
  // TF 2.21: tf.nn.conv2d(x, f, strides=[1, 1, 2, 1], padding="SAME", data_format="NCHW") with
  // x = arange(120).reshape(2, 3, 4, 5) / 50 - 1 and f = (arange(72).reshape(3, 2, 3, 4) % 7) / 5
  // - 0.5, float32: shape (2, 4, 2, 5), these first 12 values, sum 19.200005.
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    std::vector<double> xv(120), fv(72);
    for (size_t i = 0; i < xv.size(); ++i) xv[i] = static_cast<double>(i) / 50 - 1;
    for (size_t i = 0; i < fv.size(); ++i) fv[i] = static_cast<double>(i % 7) / 5 - 0.5;
    const tf::Tensor x = tf::detail::from_doubles(xv, {2, 3, 4, 5}, tf::float32);
    const tf::Tensor f = tf::detail::from_doubles(fv, {3, 2, 3, 4}, tf::float32);
    const tf::Tensor y = tf::nn::conv2d(x, f, {1, 1, 2, 1}, "SAME", {1}, "NCHW");
    REQUIRE(y.shape() == tf::TensorShape({2, 4, 2, 5}));
    check_values(
        tf::slice(tf::reshape(y, {-1}), {0}, {12}),
        {-0.726, -0.698, -0.670, -0.642, -0.114, 0.104, 0.116, 0.128, 0.140, 0.342, -1.118, -1.074},
        1e-5, 1e-5);
    check_values(tf::reduce_sum(y), {19.200005}, 1e-5, 1e-5);
  }
}

TEST_CASE("conv2d NCHW gradients equal the NHWC op's and central differences",
          "[cpu][cuda][nn][autograd]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const tf::DType dt : {tf::float32, tf::float64}) {
      INFO("dtype " << tf::dtype_name(dt));
      const double tol = dt == tf::float64 ? 1e-12 : 1e-5;
      for (const Case& c : kCases) {
        INFO(describe(c));
        const tf::Tensor x = random_tensor(tf::TensorShape(c.x), dt, 3);
        const tf::Tensor f = random_tensor(tf::TensorShape(c.f), dt, 4);
        const tf::Tensor xc = to_nchw(x);
        tf::GradientTape tape({.persistent = true});
        tape.watch(x);
        tape.watch(xc);
        tape.watch(f);
        const tf::Tensor y = tf::nn::conv2d(x, f, c.strides, c.padding, c.dilations);
        const tf::Tensor w = random_tensor(y.shape(), dt, 5);
        const tf::Tensor loss = tf::reduce_sum(y * w);
        const tf::Tensor loss_c = tf::reduce_sum(
            tf::nn::conv2d(xc, f, c.strides, c.padding, c.dilations, "NCHW") * to_nchw(w));
        check_close(tape.gradient(loss_c, xc), to_nchw(tape.gradient(loss, x)), tol, tol);
        check_close(tape.gradient(loss_c, f), tape.gradient(loss, f), tol, tol);
      }
    }
    // Central differences in float64, through both arguments.
    const Case& c = kCases[1];
    const tf::Tensor f = random_tensor(tf::TensorShape(c.f), tf::float64, 6);
    const std::vector<int64_t> xs = {c.x[0], c.x[3], c.x[1], c.x[2]};
    tf::testing::check_gradient(
        [&](const tf::Tensor& x) {
          return tf::nn::conv2d(x, f, c.strides, c.padding, c.dilations, "NCHW");
        },
        tf::TensorShape(xs));
    const tf::Tensor x = random_tensor(tf::TensorShape(xs), tf::float64, 7);
    tf::testing::check_gradient(
        [&](const tf::Tensor& fv) {
          return tf::nn::conv2d(x, fv, c.strides, c.padding, c.dilations, "NCHW");
        },
        tf::TensorShape(c.f));
  }
}

TEST_CASE("conv2d NCHW second-order gradients equal the NHWC op's", "[cpu][cuda][nn][autograd]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const Case& c = kCases[1];
    const tf::Tensor x = random_tensor(tf::TensorShape(c.x), tf::float64, 8);
    const tf::Tensor f = random_tensor(tf::TensorShape(c.f), tf::float64, 9);
    // d/df of sum(dL/dx ^ 2) with L = sum(conv2d(x, f) ^ 2 / 2): through Conv2DBackpropInput
    // and its own gradients.
    auto second = [&](const tf::Tensor& xin, const char* format) {
      tf::GradientTape outer;
      outer.watch(f);
      tf::GradientTape inner;
      inner.watch(xin);
      const tf::Tensor y = tf::nn::conv2d(xin, f, c.strides, c.padding, c.dilations, format);
      const tf::Tensor l = tf::reduce_sum(y * y) * 0.5;
      const tf::Tensor gx = inner.gradient(l, xin);
      return outer.gradient(tf::reduce_sum(gx * gx), f);
    };
    check_close(second(to_nchw(x), "NCHW"), second(x, "NHWC"), 1e-11, 1e-11);
  }
}

TEST_CASE("conv2d_transpose NCHW equals the NHWC op, gradients included", "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const tf::DType dt : {tf::float32, tf::float64}) {
      INFO("dtype " << tf::dtype_name(dt));
      const double tol = dt == tf::float64 ? 1e-12 : 1e-5;
      // (KH, KW, out_channels, in_channels) filters; NHWC output shapes.
      struct T {
        std::vector<int64_t> x, f, out;
        int stride;
        const char* padding;
      };
      for (const T& c : {T{{2, 3, 4, 3}, {3, 3, 2, 3}, {2, 6, 8, 2}, 2, "SAME"},
                         T{{1, 3, 3, 2}, {2, 3, 4, 2}, {1, 6, 8, 4}, 2, "VALID"}}) {
        INFO("input " << tf::TensorShape(c.x).to_string());
        const tf::Tensor x = random_tensor(tf::TensorShape(c.x), dt, 10);
        const tf::Tensor f = random_tensor(tf::TensorShape(c.f), dt, 11);
        const tf::Tensor xc = to_nchw(x);
        const tf::TensorShape out(c.out);
        const tf::TensorShape out_c({c.out[0], c.out[3], c.out[1], c.out[2]});
        tf::GradientTape tape({.persistent = true});
        tape.watch(x);
        tape.watch(xc);
        tape.watch(f);
        const tf::Tensor y = tf::nn::conv2d_transpose(x, f, out, {c.stride}, c.padding);
        const tf::Tensor yc =
            tf::nn::conv2d_transpose(xc, f, out_c, {c.stride}, c.padding, {1}, "NCHW");
        REQUIRE(yc.shape() == out_c);
        check_close(yc, to_nchw(y), tol, tol);
        const tf::Tensor w = random_tensor(y.shape(), dt, 12);
        const tf::Tensor loss = tf::reduce_sum(y * w);
        const tf::Tensor loss_c = tf::reduce_sum(yc * to_nchw(w));
        check_close(tape.gradient(loss_c, xc), to_nchw(tape.gradient(loss, x)), tol, tol);
        check_close(tape.gradient(loss_c, f), tape.gradient(loss, f), tol, tol);
      }
    }
  }
}

TEST_CASE("pooling and bias_add take data_format NCHW", "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = random_tensor({2, 5, 7, 3}, tf::float32, 13);
    const tf::Tensor xc = to_nchw(x);
    // 4-value ksize and strides in the layout's order.
    check_close(tf::nn::max_pool2d(xc, {1, 1, 3, 2}, {1, 1, 2, 2}, "SAME", "NCHW"),
                to_nchw(tf::nn::max_pool2d(x, {3, 2}, {2, 2}, "SAME")), 0, 0);
    check_close(tf::nn::avg_pool2d(xc, {2}, {1}, "VALID", "NCHW"),
                to_nchw(tf::nn::avg_pool2d(x, {2}, {1}, "VALID")), 1e-6, 1e-6);
    // Gradients flow through the layout moves.
    tf::GradientTape tape;
    tape.watch(xc);
    const tf::Tensor g =
        tape.gradient(tf::reduce_sum(tf::nn::avg_pool2d(xc, {3}, {2}, "SAME", "NCHW")), xc);
    tf::GradientTape tape2;
    tape2.watch(x);
    const tf::Tensor g2 =
        tape2.gradient(tf::reduce_sum(tf::nn::avg_pool2d(x, {3}, {2}, "SAME")), x);
    check_close(g, to_nchw(g2), 1e-6, 1e-6);

    // bias_add: axis 1 for a data_format starting with "NC" (TF's rule), any rank from 2.
    const tf::Tensor b = tf::detail::from_doubles({1, 2, 3}, {3}, tf::float32);
    const tf::Tensor v = tf::zeros({2, 3, 2});
    check_values(tf::nn::bias_add(v, b, "NCHW"), {1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3, 3});
    check_values(tf::nn::bias_add(tf::zeros({1, 3}), b, "NCHW"), {1, 2, 3});
    check_close(
        tf::nn::bias_add(tf::zeros({1, 3, 2, 2, 2, 2}), b, "NCDHW"),
        tf::transpose(tf::nn::bias_add(tf::zeros({1, 2, 2, 2, 2, 3}), b), {0, 5, 1, 2, 3, 4}), 0,
        0);
    check_values(tf::nn::bias_add(tf::zeros({1, 2, 3}), b), {1, 2, 3, 1, 2, 3});
  }
}

TEST_CASE("conv2d NCHW inside a traced function: one graph, the layout in its attributes",
          "[cpu][cuda][nn][jit]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor f = random_tensor({3, 3, 3, 4}, tf::float32, 14);
    auto step = tf::function([&](const tf::Tensor& x) {
      tf::GradientTape tape;
      tape.watch(x);
      const tf::Tensor y = tf::nn::conv2d(x, f, {2}, "SAME", {1}, "NCHW");
      return tape.gradient(tf::reduce_sum(y * y), x);
    });
    auto eager = [&](const tf::Tensor& x) {
      tf::GradientTape tape;
      tape.watch(x);
      const tf::Tensor y = tf::nn::conv2d(x, f, {2}, "SAME", {1}, "NCHW");
      return tape.gradient(tf::reduce_sum(y * y), x);
    };
    for (unsigned seed = 20; seed < 22; ++seed) {
      const tf::Tensor x = random_tensor({2, 3, 7, 6}, tf::float32, seed);
      check_close(step(x), eager(x), 1e-6, 1e-6);
    }
    REQUIRE(step.tracing_count() == 1);
    const std::string graph =
        step.get_concrete_function(tf::TensorSpec({2, 3, 7, 6})).graph().to_string();
    INFO(graph);
    REQUIRE(graph.find("data_format=NCHW") != std::string::npos);
  }
}

TEST_CASE("data_format errors name the op, the format and the shapes", "[cpu][nn]") {
  const tf::Tensor x = tf::ones({1, 3, 5, 5}), f = tf::ones({3, 3, 3, 2});
  require_error([&] { tf::nn::conv2d(x, f, {1}, "SAME", {1}, "NCWH"); },
                {"[conv2d]", "data_format must be \"NHWC\" or \"NCHW\", got \"NCWH\""});
  require_error(
      [&] {
        tf::nn::conv2d(tf::ones({1, 5, 5, 3}), f, {1}, "SAME", {1}, "NCHW");
      },
      {"[conv2d]", "input depth 5 does not match filter depth 3", "input is (1, 5, 5, 3)"});
  require_error(
      [&] {
        tf::nn::conv2d(x, f, {1, 2, 1, 1}, "SAME", {1}, "NCHW");
      },
      {"[conv2d]",
       "strides [1, 2, 1, 1] must be 1 in the batch and channel dimensions "
       "(NCHW)"});
  require_error(
      [&] {
        tf::nn::conv2d(tf::ones({1, 3, 5}), f, {1}, "SAME", {1}, "NCHW");
      },
      {"[conv2d]", "input must be rank 4 (NCHW), got shape (1, 3, 5)"});
  require_error(
      [&] {
        tf::nn::conv2d(tf::ones({1, 3, 2, 5}), f, {1}, "VALID", {1}, "NCHW");
      },
      {"[conv2d]", "exceeds the input height 2 with VALID padding", "input is (1, 3, 2, 5)"});
  require_error(
      [&] {
        tf::nn::conv2d_transpose(tf::ones({1, 2, 3, 3}), tf::ones({3, 3, 4, 5}), {1, 4, 6, 6}, {2},
                                 "SAME", {1}, "NCHW");
      },
      {"[conv2d_transpose]", "the input has 2 channels but filters (3, 3, 4, 5) expect 5"});
  require_error([&] { tf::nn::max_pool2d(x, {2}, {2}, "SAME", "NHCW"); },
                {"[max_pool2d]", "data_format must be \"NHWC\" or \"NCHW\""});
  require_error(
      [&] {
        tf::nn::avg_pool2d(tf::ones({3, 5}), {2}, {2}, "SAME", "NCHW");
      },
      {"[avg_pool2d]", "input must be rank 4 (NCHW)"});
  require_error(
      [&] {
        tf::nn::bias_add(tf::ones({2, 4, 3}), tf::ones({3}), "NCHW");
      },
      {"[bias_add]",
       "bias shape (3,) must match the channel (second) dimension of "
       "value shape (2, 4, 3)"});
}

namespace {
// x (N, spatial..., C) -> (N, C, spatial...).
tf::Tensor first_of(const tf::Tensor& t) {
  std::vector<int> p{0, t.rank() - 1};
  for (int i = 1; i < t.rank() - 1; ++i) p.push_back(i);
  return tf::transpose(t, p);
}

// op_first on the channels-first input equals op_last on the channels-last one, moved: values
// and the input gradient of sum(y * w).
void check_twin(const std::string& what, const tf::TensorShape& last_shape,
                const std::function<tf::Tensor(const tf::Tensor&)>& op_last,
                const std::function<tf::Tensor(const tf::Tensor&)>& op_first, tf::DType dt) {
  INFO(what << ", channels-last input " << last_shape.to_string());
  const double tol = dt == tf::float64 ? 1e-12 : 1e-5;
  const tf::Tensor x = random_tensor(last_shape, dt, 30);
  const tf::Tensor xf = first_of(x);
  tf::GradientTape tape({.persistent = true});
  tape.watch(x);
  tape.watch(xf);
  const tf::Tensor y = op_last(x);
  const tf::Tensor yf = op_first(xf);
  REQUIRE(yf.shape() == first_of(y).shape());
  check_close(yf, first_of(y), tol, tol);
  const tf::Tensor w = random_tensor(y.shape(), dt, 31);
  const tf::Tensor g = tape.gradient(tf::reduce_sum(y * w), x);
  const tf::Tensor gf = tape.gradient(tf::reduce_sum(yf * first_of(w)), xf);
  check_close(gf, first_of(g), tol, tol);
}
}  // namespace

TEST_CASE("depthwise, separable, 1-D and 3-D ops take TF's channels-first data_formats",
          "[cpu][cuda][nn]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const tf::DType dt : {tf::float32, tf::float64}) {
      INFO("dtype " << tf::dtype_name(dt));
      const tf::Tensor dw = random_tensor({3, 3, 3, 2}, dt, 32);
      const tf::Tensor pw = random_tensor({1, 1, 6, 4}, dt, 33);
      check_twin(
          "depthwise_conv2d", {2, 6, 7, 3},
          [&](const tf::Tensor& x) { return tf::nn::depthwise_conv2d(x, dw, {2}, "SAME"); },
          [&](const tf::Tensor& x) {
            return tf::nn::depthwise_conv2d(x, dw, {1, 1, 2, 2}, "SAME", {1}, "NCHW");
          },
          dt);
      check_twin(
          "depthwise_conv2d, explicit padding", {1, 5, 5, 3},
          [&](const tf::Tensor& x) {
            return tf::nn::depthwise_conv2d(x, dw, {1}, {{1, 0}, {0, 2}}, {2});
          },
          [&](const tf::Tensor& x) {
            return tf::nn::depthwise_conv2d(x, dw, {1}, {{1, 0}, {0, 2}}, {1, 1, 2, 2}, "NCHW");
          },
          dt);
      check_twin(
          "separable_conv2d", {2, 5, 6, 3},
          [&](const tf::Tensor& x) { return tf::nn::separable_conv2d(x, dw, pw, {1}, "VALID"); },
          [&](const tf::Tensor& x) {
            return tf::nn::separable_conv2d(x, dw, pw, {1}, "VALID", {1}, "NCHW");
          },
          dt);
      const tf::Tensor f1 = random_tensor({3, 3, 4}, dt, 34);
      check_twin(
          "conv1d", {2, 9, 3},
          [&](const tf::Tensor& x) { return tf::nn::conv1d(x, f1, 2, "SAME"); },
          [&](const tf::Tensor& x) { return tf::nn::conv1d(x, f1, 2, "SAME", "NCW"); }, dt);
      check_twin(
          "max_pool1d", {2, 9, 3},
          [&](const tf::Tensor& x) { return tf::nn::max_pool1d(x, 3, 2, "SAME"); },
          [&](const tf::Tensor& x) { return tf::nn::max_pool1d(x, 3, 2, "SAME", "NCW"); }, dt);
      check_twin(
          "avg_pool1d", {2, 9, 3},
          [&](const tf::Tensor& x) { return tf::nn::avg_pool1d(x, 2, 2, "VALID"); },
          [&](const tf::Tensor& x) { return tf::nn::avg_pool1d(x, 2, 2, "VALID", "NCW"); }, dt);
      const tf::Tensor f3 = random_tensor({2, 2, 3, 3, 2}, dt, 35);
      check_twin(
          "conv3d", {2, 4, 5, 6, 3},
          [&](const tf::Tensor& x) {
            return tf::nn::conv3d(x, f3, {1, 2, 1}, "SAME");
          },
          [&](const tf::Tensor& x) {
            return tf::nn::conv3d(x, f3, {1, 1, 1, 2, 1}, "SAME", {1}, "NCDHW");
          },
          dt);
      const tf::Tensor f3t = random_tensor({2, 2, 3, 2, 3}, dt, 36);
      check_twin(
          "conv3d_transpose", {1, 2, 3, 3, 3},
          [&](const tf::Tensor& x) {
            return tf::nn::conv3d_transpose(x, f3t, {1, 4, 6, 6, 2}, {2}, "SAME");
          },
          [&](const tf::Tensor& x) {
            return tf::nn::conv3d_transpose(x, f3t, {1, 2, 4, 6, 6}, {2}, "SAME", {1}, "NCDHW");
          },
          dt);
      check_twin(
          "max_pool3d", {2, 4, 5, 6, 3},
          [&](const tf::Tensor& x) { return tf::nn::max_pool3d(x, {2}, {2}, "SAME"); },
          [&](const tf::Tensor& x) {
            return tf::nn::max_pool3d(x, {1, 1, 2, 2, 2}, {2}, "SAME", "NCDHW");
          },
          dt);
      check_twin(
          "avg_pool3d", {2, 4, 5, 6, 3},
          [&](const tf::Tensor& x) {
            return tf::nn::avg_pool3d(x, {3, 2, 2}, {1}, "VALID");
          },
          [&](const tf::Tensor& x) {
            return tf::nn::avg_pool3d(x, {3, 2, 2}, {1}, "VALID", "NCDHW");
          },
          dt);
      check_twin(
          "space_to_depth", {2, 4, 6, 3},
          [&](const tf::Tensor& x) { return tf::nn::space_to_depth(x, 2); },
          [&](const tf::Tensor& x) { return tf::nn::space_to_depth(x, 2, "NCHW"); }, dt);
      check_twin(
          "depth_to_space", {2, 2, 3, 8},
          [&](const tf::Tensor& x) { return tf::nn::depth_to_space(x, 2); },
          [&](const tf::Tensor& x) { return tf::nn::depth_to_space(x, 2, "NCHW"); }, dt);
    }
    // depth_to_space undoes space_to_depth in NCHW too.
    const tf::Tensor x = random_tensor({2, 3, 4, 6}, tf::float32, 37);
    check_close(tf::nn::depth_to_space(tf::nn::space_to_depth(x, 2, "NCHW"), 2, "NCHW"), x, 0, 0);
  }
}

TEST_CASE("channels-first data_format errors name the op and the layout", "[cpu][nn]") {
  const tf::Tensor f = tf::ones({3, 3, 3, 1});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(tf::ones({1, 3, 5, 5}), f, {1}, "SAME", {1}, "NCWH");
      },
      {"[depthwise_conv2d]", "data_format must be \"NHWC\" or \"NCHW\", got \"NCWH\""});
  require_error(
      [&] {
        tf::nn::depthwise_conv2d(tf::ones({1, 3, 5, 5}), f, {1, 2, 1, 1}, "SAME", {1}, "NCHW");
      },
      {"[depthwise_conv2d]",
       "strides [1, 2, 1, 1] must be 1 in the batch and channel "
       "dimensions (NCHW)"});
  require_error(
      [&] {
        tf::nn::separable_conv2d(tf::ones({3, 5, 5}), f, tf::ones({1, 1, 3, 2}), {1}, "SAME", {1},
                                 "NCHW");
      },
      {"[separable_conv2d]", "the input must be rank 4 (NCHW), got shape (3, 5, 5)"});
  require_error(
      [&] {
        tf::nn::conv3d(tf::ones({1, 2, 3, 3, 3}), tf::ones({1, 1, 1, 2, 2}), {1}, "SAME", {1},
                       "NDCHW");
      },
      {"[conv3d]", "data_format must be \"NDHWC\" or \"NCDHW\", got \"NDCHW\""});
  require_error(
      [&] {
        tf::nn::max_pool3d(tf::ones({1, 2, 3, 3, 3}), {2}, {1, 2, 1, 1, 1}, "SAME", "NCDHW");
      },
      {"[max_pool3d]",
       "strides [1, 2, 1, 1, 1] must be 1 in the batch and channel "
       "dimensions (NCDHW)"});
  require_error(
      [&] {
        tf::nn::max_pool1d(tf::ones({2, 3, 4}), 2, 2, "SAME", "WNC");
      },
      {"[max_pool1d]", "data_format must be \"NWC\" or \"NCW\", got \"WNC\""});
  require_error(
      [&] {
        tf::nn::space_to_depth(tf::ones({1, 3, 5, 4}), 2, "NCHW");
      },
      {"[space_to_depth]",
       "height and width of shape (1, 3, 5, 4) must be divisible "
       "by block_size 2"});
  require_error(
      [&] {
        tf::nn::depth_to_space(tf::ones({1, 6, 2, 2}), 2, "NCHW");
      },
      {"[depth_to_space]",
       "the depth of shape (1, 6, 2, 2) must be divisible by "
       "block_size * block_size = 4"});
}
