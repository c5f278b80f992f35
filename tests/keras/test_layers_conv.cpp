// keras::layers::DepthwiseConv2D, SeparableConv2D, DepthwiseConv1D, SeparableConv1D and the
// groups option of Conv2D / Conv1D against Keras 3.15 on the same inputs and weights: weight
// names and shapes, output shapes and values on every device, summary, training through fit,
// traced equals eager, errors.
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/layers.h"
#include "keras/layers_conv.h"
#include "keras/layers_more.h"
#include "keras/losses.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tf::keras;
namespace L = tf::keras::layers;

namespace {

// The Keras 3.15 check's tensors: element i of a tensor is (((i * a + b) mod m) - off) / den
// (numpy's ((arange(n) * a + b) % m - off) / den): inputs X, depthwise (and Conv) kernels F,
// pointwise kernels P, biases B.
tf::Tensor pattern(const tf::TensorShape& s, int a, int b, int m, double den, int off) {
  std::vector<double> v(static_cast<size_t>(s.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = ((static_cast<int64_t>(i) * a + b) % m - off) / den;
  return tf::detail::from_doubles(v, s, tf::float32);
}
tf::Tensor X(const tf::TensorShape& s) {
  return pattern(s, 7, 3, 11, 4.0, 5);
}

// Builds the layer for `input` and gives each weight its pattern by name, as the Keras check.
void set_pattern_weights(const K::Layer& layer, const tf::TensorShape& input) {
  layer.build(input);
  std::vector<tf::Tensor> values;
  for (const tf::Variable& v : layer.weights()) {
    const std::string n = v.name().substr(0, v.name().rfind(':'));  // "<layer>/<weight>:0"
    const auto ends = [&](const std::string& s) {
      return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
    };
    if (ends("bias"))
      values.push_back(pattern(v.shape(), 3, 1, 5, 8.0, 2));
    else if (ends("pointwise_kernel"))
      values.push_back(pattern(v.shape(), 3, 1, 5, 4.0, 2));
    else
      values.push_back(pattern(v.shape(), 5, 1, 13, 8.0, 6));
  }
  layer.set_weights(values);
}

std::vector<std::pair<std::string, tf::TensorShape>> weight_list(const K::Layer& layer) {
  std::vector<std::pair<std::string, tf::TensorShape>> out;
  for (const tf::Variable& v : layer.weights()) {
    const std::string n = v.name().substr(0, v.name().rfind(':'));
    out.emplace_back(n.substr(n.rfind('/') + 1), v.shape());
  }
  return out;
}

struct Row {
  std::string what;
  K::Layer layer;
  tf::TensorShape input;
  std::vector<std::pair<std::string, tf::TensorShape>> weights;  // Keras 3.15's names, shapes
  tf::TensorShape output;
  int64_t params;
  double sum, sum_sq;               // Keras 3.15
  std::vector<double> values = {};  // Keras 3.15, all of them (where given)
};

using WL = std::vector<std::pair<std::string, tf::TensorShape>>;

std::vector<Row> rows() {
  // Keras 3.15: each layer built for the input, set_weights of the patterns, called on X.
  return {
      {"DepthwiseConv2D((3, 3), depth_multiplier=2)",
       L::DepthwiseConv2D(3, {.depth_multiplier = 2}),
       {1, 4, 5, 3},
       WL{{"kernel", {3, 3, 3, 2}}, {"bias", {6}}},
       {1, 2, 3, 6},
       60,
       -6.625,
       36.2109375,
       {-1,       -0.34375, -1.15625, 0.625,   -1.125,   -0.3125, -0.84375, -0.375, 0.0625,
        -1.09375, 0.40625,  -1.3125,  0.34375, -2.125,   0.25,    -1.09375, 0.5625, 0.78125,
        0.125,    1.21875,  -1.25,    0.28125, -1.03125, 1.5625,  0.28125,  1.1875, 0.3125,
        -1.09375, -0.875,   0.90625,  0.4375,  1.15625,  0.5,     -1.09375, 1,      -2.5}},
      {"DepthwiseConv2D((3, 2), strides=2, padding='same', depth_multiplier=2)",
       L::DepthwiseConv2D({3, 2}, 2, "same", 2),
       {2, 5, 6, 3},
       WL{{"kernel", {3, 2, 3, 2}}, {"bias", {6}}},
       {2, 3, 3, 6},
       42,
       1.34375,
       95.7646484},
      {"DepthwiseConv2D(3, padding='same', dilation_rate=2, activation='relu', use_bias=False)",
       L::DepthwiseConv2D(
           3, {.padding = "same", .dilation_rate = 2, .activation = "relu", .use_bias = false}),
       {1, 5, 6, 3},
       WL{{"kernel", {3, 3, 3, 1}}},
       {1, 5, 6, 3},
       27,
       29.125,
       25.4785156},
      {"SeparableConv2D(4, 3, padding='same', depth_multiplier=2)",
       L::SeparableConv2D(4, 3, {.padding = "same", .depth_multiplier = 2}),
       {1, 4, 5, 3},
       WL{{"depthwise_kernel", {3, 3, 3, 2}}, {"pointwise_kernel", {1, 1, 6, 4}}, {"bias", {4}}},
       {1, 4, 5, 4},
       82,
       -2.734375,
       49.3701172,
       {0.796875,   -0.4296875, 0.6875,     -0.6953125, -0.8984375, 0.796875,   0.890625,
        -0.8515625, 0.015625,   0.0859375,  0.15625,    0.3046875,  -1.21875,   1.78125,
        -0.921875,  -0.7734375, -0.5859375, 0.5625,     0.3046875,  -0.578125,  -0.015625,
        -0.453125,  -0.03125,   -0.3125,    -0.0546875, -0.859375,  0.8359375,  -0.828125,
        0.3046875,  -0.109375,  -0.6796875, 1.015625,   -0.96875,   2.015625,   -1.6796875,
        -0.4921875, -0.65625,   1,          0.2734375,  -0.7265625, 0.1015625,  -0.25,
        0.609375,   -0.0546875, -0.3203125, 0.3984375,  1.5078125,  -2.265625,  -0.90625,
        1.234375,   0.6796875,  -0.8515625, 0.7421875,  -0.3359375, -0.3203125, 1.3359375,
        -0.109375,  0.640625,   -0.7578125, -0.0859375, -0.1953125, 0.015625,   -0.1640625,
        -0.03125,   1.0390625,  -1.453125,  0.390625,   -0.1484375, -0.765625,  -0.1484375,
        0.546875,   0.265625,   0.1796875,  -0.4765625, -0.15625,   1.0234375,  -0.625,
        1.1015625,  -0.5703125, -0.5625}},
      {"SeparableConv2D(5, (2, 3), strides=2, activation='tanh')",
       L::SeparableConv2D(5, {2, 3}, 2, "valid", "tanh"),
       {2, 5, 7, 3},
       WL{{"depthwise_kernel", {2, 3, 3, 1}}, {"pointwise_kernel", {1, 1, 3, 5}}, {"bias", {5}}},
       {2, 2, 3, 5},
       38,
       0,
       14.2226264},
      {"Conv2D(6, 3, groups=2)",
       L::Conv2D(6, 3, {.groups = 2}),
       {1, 4, 5, 4},
       WL{{"kernel", {3, 3, 2, 6}}, {"bias", {6}}},
       {1, 2, 3, 6},
       114,
       -2.65625,
       125.038086,
       {-0.59375, 0.8125,   -2.0625, -2.46875, 2.75,     -2.8125, -0.25,    -0.375,  1.71875,
        1.8125,   -1.71875, 1.4375,  -1.625,   1.1875,   -0.6875, -2.15625, 1.71875, -1.53125,
        3.53125,  -2.71875, 1.375,   2.78125,  -0.6875,  0.90625, -2.65625, 2.96875, -1.375,
        -1.875,   2.0625,   -2.75,   1.46875,  -1.65625, 0.6875,  0.6875,   -1.375,  0.8125}},
      {"Conv2D(6, (3, 2), padding='same', groups=3, strides=2)",
       L::Conv2D(6, {3, 2}, {.strides = 2, .padding = "same", .groups = 3}),
       {2, 5, 6, 6},
       WL{{"kernel", {3, 2, 2, 6}}, {"bias", {6}}},
       {2, 3, 3, 6},
       78,
       -0.25,
       101.644531},
      {"Conv1D(4, 3, padding='causal', groups=2)",
       L::Conv1D(4, 3, {.padding = "causal", .groups = 2}),
       {2, 6, 4},
       WL{{"kernel", {3, 2, 4}}, {"bias", {4}}},
       {2, 6, 4},
       28,
       -4.1875,
       34.3261719,
       {0.6875,   -0.5,    -0.28125, -0.84375, 0.21875, -0.34375, 1.03125,  -0.09375,
        -0.53125, 0,       -0.9375,  -0.4375,  -1.4375, 1.1875,   0.34375,  0.90625,
        -1.3125,  1.6875,  -0.78125, -0.15625, -0.5,    0.125,    0.5,      1.1875,
        -0.59375, 0.6875,  -0.75,    -0.375,   0.21875, 0.125,    0.78125,  -1.40625,
        -0.125,   0.59375, -0.46875, -1.3125,  1.03125, -0.625,   0.8125,   -1.6875,
        -0.21875, 0.21875, 1.75,     -0.6875,  0.9375,  -1,       -1.09375, -0.71875}},
      {"DepthwiseConv1D(3, strides=2, padding='same', depth_multiplier=2)",
       L::DepthwiseConv1D(3, {.strides = 2, .padding = "same", .depth_multiplier = 2}),
       {1, 7, 3},
       WL{{"kernel", {3, 3, 2}}, {"bias", {6}}},
       {1, 4, 6},
       24,
       1.0625,
       5.890625,
       {-0.34375, 0.46875,  -0.625,   0.53125, 0.3125, -0.1875,  0,       0.53125,
        0.25,     -0.21875, 0.125,    -0.1875, 0.875,  0.25,     0.1875,  -0.40625,
        -0.1875,  0.1875,   -0.84375, 0.625,   0.125,  -0.28125, -1.0625, 0.9375}},
      {"SeparableConv1D(5, 3, dilation_rate=2)",
       L::SeparableConv1D(5, 3, {.dilation_rate = 2}),
       {1, 8, 3},
       WL{{"depthwise_kernel", {3, 3, 1}}, {"pointwise_kernel", {1, 3, 5}}, {"bias", {5}}},
       {1, 4, 5},
       29,
       0,
       7.56958008,
       {-0.515625, 1.03125,    0,        -1.03125,   0.515625,  -0.578125, 1.15625,
        0,         -1.15625,   0.578125, -0.3828125, 0.765625,  0,         -0.765625,
        0.3828125, -0.1015625, 0.203125, 0,          -0.203125, 0.1015625}},
  };
}

}  // namespace

TEST_CASE("depthwise separable and grouped conv layers give Keras 3.15's weights and values",
          "[cpu][cuda][keras]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (Row& r : rows()) {
      INFO(r.what);
      tf::TensorShape built = r.input;
      built[0] = tf::None;
      set_pattern_weights(r.layer, built);
      CHECK(weight_list(r.layer) == r.weights);
      CHECK(r.layer.count_params() == r.params);
      tf::TensorShape out = r.output;
      out[0] = tf::None;
      CHECK(r.layer.output_shape() == out);
      const tf::Tensor y = r.layer(X(r.input));
      REQUIRE(y.shape() == r.output);
      // The inputs are multiples of 1/8: the sums are exact but for the activations' rounding.
      CHECK(tf::reduce_sum(y).item<float>() == Approx(r.sum).margin(1e-5));
      CHECK(tf::reduce_sum(tf::square(y)).item<float>() == Approx(r.sum_sq).epsilon(1e-6));
      if (!r.values.empty()) tf::testing::check_values(y, r.values, 0, 0);
    }
  }
}

TEST_CASE("depthwise and separable layers names summary and errors", "[cpu][keras]") {
  auto dw =
      L::DepthwiseConv2D(3, {.padding = "same", .depth_multiplier = 2, .input_shape = {8, 8, 3}});
  auto sep = L::SeparableConv2D(4, 3);
  REQUIRE(dw.built());
  CHECK(dw.class_name() == "DepthwiseConv2D");
  CHECK(dw.name().rfind("depthwise_conv2d", 0) == 0);
  CHECK(sep.class_name() == "SeparableConv2D");
  CHECK(sep.name().rfind("separable_conv2d", 0) == 0);
  CHECK(L::DepthwiseConv1D(3).name().rfind("depthwise_conv1d", 0) == 0);
  CHECK(L::SeparableConv1D(2, 3).name().rfind("separable_conv1d", 0) == 0);
  CHECK(dw.kernel().shape() == tf::TensorShape({3, 3, 3, 2}));
  CHECK(dw.bias().shape() == tf::TensorShape({6}));
  // Keras 3.15's summary of Sequential([Input((8, 8, 3)), DepthwiseConv2D(3, padding="same",
  // depth_multiplier=2), SeparableConv2D(4, 3)]): (None, 8, 8, 6) 60, (None, 6, 6, 4) 82, 142.
  K::Sequential model({dw, sep});
  CHECK(model.count_params() == 142);
  CHECK(sep.depthwise_kernel().shape() == tf::TensorShape({3, 3, 6, 1}));
  CHECK(sep.pointwise_kernel().shape() == tf::TensorShape({1, 1, 6, 4}));
  const std::string s = model.summary_string(100);  // wide enough for the class names
  INFO(s);
  CHECK(s.find("(DepthwiseConv2D)") != std::string::npos);
  CHECK(s.find("(SeparableConv2D)") != std::string::npos);
  CHECK(s.find("(None, 8, 8, 6)") != std::string::npos);
  CHECK(s.find("(None, 6, 6, 4)") != std::string::npos);
  CHECK(s.find("142") != std::string::npos);

  using tf::testing::require_error;
  require_error([] { L::DepthwiseConv2D(3, {.depth_multiplier = 0}); },
                {"[DepthwiseConv2D]", "depth_multiplier must be a strictly positive value, got 0"});
  require_error([] { L::SeparableConv2D(0, 3); },
                {"[SeparableConv2D]", "filters must be positive"});
  require_error([] { L::DepthwiseConv2D(3, 1, "full"); },
                {"padding must be \"valid\" or \"same\", got \"full\""});
  require_error([] { L::SeparableConv1D(2, 0); }, {"kernel_size must be positive"});
  require_error([] { L::DepthwiseConv1D(3, {.dilation_rate = 0}); },
                {"dilation_rate must be positive"});
  require_error([] { L::DepthwiseConv2D(3, {.data_format = "NCHW"}); },
                {"[DepthwiseConv2D]", "data_format must be \"channels_last\" or", "NCHW"});
  require_error(
      [] {
        (void)L::DepthwiseConv2D(3)(tf::ones({2, 5, 3}));
      },
      {"needs NHWC inputs of rank 4"});
  require_error([&] { (void)dw(tf::ones({1, 8, 8, 4})); }, {"is incompatible with the layer"});
  // groups, with Keras 3.15's conditions.
  require_error([] { L::Conv2D(5, 3, {.groups = 2}); },
                {"[Conv2D]", "filters must be evenly divisible by the number of groups",
                 "groups=2, filters=5"});
  require_error([] { L::Conv2D(4, 3, {.groups = 0}); }, {"groups must be a positive integer"});
  require_error([] { L::Conv1D(4, 3, {.groups = 3}); }, {"[Conv1D]", "groups=3, filters=4"});
  require_error(
      [] {
        L::Conv2D(4, 3, {.groups = 2}).build({tf::None, 5, 5, 3});
      },
      {"input channels must be evenly divisible by the number of groups",
       "groups=2 but the input has 3 channels"});
  require_error([] { L::Conv2D(4, 3, {.strides = 2, .dilation_rate = 2}); },
                {"strides > 1 together with dilation_rate > 1"});
}

TEST_CASE("a depthwise separable model trains and a traced call equals eager", "[cpu][keras]") {
  tf::random::set_seed(5);
  K::Sequential model(
      {L::Conv2D(8, 3, {.padding = "same", .groups = 1, .input_shape = {8, 8, 2}}),
       L::DepthwiseConv2D(
           3, {.strides = 2, .padding = "same", .depth_multiplier = 2, .activation = "relu"}),
       L::SeparableConv2D(4, 3, {.padding = "same", .activation = "relu"}),
       L::Conv2D(2, 1, {.groups = 2})});
  CHECK(model.output_shape() == tf::TensorShape({tf::None, 4, 4, 2}));
  const tf::Tensor x = tf::random::normal({16, 8, 8, 2}, 0, 1, tf::float32, 1);
  const tf::Tensor y = tf::random::normal({16, 4, 4, 2}, 0, 1, tf::float32, 2);
  model.compile(K::optimizers::Adam(1e-2), K::losses::MeanSquaredError());
  const auto h = model.fit(x, y, {.epochs = 15, .batch_size = 8, .verbose = 0});
  const auto& loss = h.history.at("loss");
  CHECK(loss.back() < 0.9 * loss.front());
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 8, 8, 2})};
  auto f = tf::function([&](const tf::Tensor& in) { return model(in); }, opts);
  tf::testing::check_close(f(x), model(x), 1e-6, 1e-6);
  tf::testing::check_close(f(tf::slice(x, {0, 0, 0, 0}, {3, 8, 8, 2})),
                           model(tf::slice(x, {0, 0, 0, 0}, {3, 8, 8, 2})), 1e-6, 1e-6);
}
