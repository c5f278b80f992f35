// keras::layers::Conv2DTranspose against Keras 3.15 on the same weights: output sizes for every
// padding/stride/output_padding/dilation form, values, summary, training, save and load.
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/callbacks.h"
#include "keras/layers.h"
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
using K::layers::Conv2DTranspose;

namespace {

// The Keras 3.15 check's input and weights: x = (arange(18) - 8) / 10 in (1, 2, 3, 3), kernel
// (3, 2, 2, 3) = (arange(36) - 17) / 10, bias [0.5, -0.25].
tf::Tensor input() {
  return (tf::reshape(tf::range(0.0f, 18.0f, 1.0f), {1, 2, 3, 3}) - 8.0f) / 10.0f;
}

Conv2DTranspose with_weights(Conv2DTranspose layer) {
  layer.build({tf::None, 2, 3, 3});
  layer.set_weights({(tf::reshape(tf::range(0.0f, 36.0f, 1.0f), {3, 2, 2, 3}) - 17.0f) / 10.0f,
                     tf::constant({0.5f, -0.25f})});
  return layer;
}

}  // namespace

TEST_CASE("Conv2DTranspose gives Keras 3.15's shapes and values", "[cpu][cuda][keras]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    struct Row {
      K::layers::Conv2DTransposeOptions options;
      tf::TensorShape shape;
      double sum, sum_sq;  // Keras 3.15
    };
    const std::vector<Row> rows = {
        {{.strides = 2, .padding = "same"}, {1, 4, 6, 2}, -14.76, 169.315201},
        {{.strides = 2, .padding = "valid", .output_padding = K::Size2(1)},
         {1, 6, 7, 2},
         12.48,
         235.584},
        {{.strides = 3, .padding = "valid"}, {1, 6, 9, 2}, 15.480001, 200.804382},
        {{.strides = 1, .padding = "same", .dilation_rate = 2}, {1, 2, 3, 2}, -0.22, 4.556},
        {{.strides = 2, .padding = "same", .output_padding = K::Size2(1)},
         {1, 4, 5, 2},
         -12.93,
         155.3871},
    };
    for (const Row& r : rows) {
      auto layer = with_weights(Conv2DTranspose(2, {3, 2}, r.options));
      const tf::Tensor y = layer(input());
      INFO("expected " << r.shape.to_string());
      CHECK(y.shape() == r.shape);
      CHECK(layer.output_shape() ==
            tf::TensorShape({tf::None, r.shape[1], r.shape[2], r.shape[3]}));
      CHECK(tf::reduce_sum(y).item<float>() == Approx(r.sum).margin(2e-5));
      CHECK(tf::reduce_sum(tf::square(y)).item<float>() == Approx(r.sum_sq).epsilon(1e-6));
    }
    // All of the first row (Keras 3.15, rounded to 1e-6).
    auto layer = with_weights(Conv2DTranspose(2, {3, 2}, 2, "same"));
    tf::testing::check_values(
        layer(input()),
        {3.88, 2.5,   2.62, 1.24,  2.44,  1.33,  1.72,  0.61,  1.0,   0.16,  0.82,  -0.02,
         1.36, -0.02, 0.1,  -1.28, 1.0,   -0.11, 0.28,  -0.83, 0.64,  -0.2,  0.46,  -0.38,
         -2.1, -3.3,  -3.0, -4.2,  -2.82, -3.48, -2.64, -3.3,  -3.54, -3.66, -2.28, -2.4,
         0.28, -0.29, 0.64, 0.07,  -0.08, -0.38, 0.82,  0.52,  -0.44, -0.47, 1.0,   0.97},
        1e-5, 1e-5);
  }
}

TEST_CASE("Conv2DTranspose weights summary and errors", "[cpu][keras]") {
  auto layer = Conv2DTranspose(4, 3, {.strides = 2, .padding = "same", .input_shape = {7, 7, 5}});
  REQUIRE(layer.built());
  CHECK(layer.kernel().shape() == tf::TensorShape({3, 3, 4, 5}));  // (kh, kw, filters, in)
  CHECK(layer.bias().shape() == tf::TensorShape({4}));
  CHECK(layer.count_params() == 3 * 3 * 4 * 5 + 4);
  CHECK(layer.output_shape() == tf::TensorShape({tf::None, 14, 14, 4}));
  CHECK(layer.name().rfind("conv2d_transpose", 0) == 0);
  CHECK(layer.class_name() == "Conv2DTranspose");
  K::Sequential model({layer});
  const std::string s = model.summary_string();
  CHECK(s.find(layer.name()) != std::string::npos);
  CHECK(s.find("(None, 14, 14, 4)") != std::string::npos);
  tf::testing::require_error([] { Conv2DTranspose(0, 3); }, {"filters must be positive"});
  tf::testing::require_error(
      [] { Conv2DTranspose(2, 3, {.strides = 2, .output_padding = K::Size2(2)}); },
      {"output_padding (2, 2) must be non-negative and less than strides (2, 2)"});
  tf::testing::require_error([] { Conv2DTranspose(2, 3, 1, "full"); },
                             {"padding must be \"valid\" or \"same\""});
  tf::testing::require_error(
      [&] {
        (void)layer(tf::ones({1, 7, 7, 3}));
      },
      {"is incompatible with the layer", "found shape=(1, 7, 7, 3)"});
  tf::testing::require_error(
      [] {
        (void)Conv2DTranspose(2, 3)(tf::ones({2, 3}));
      },
      {"needs NHWC inputs of rank 4"});
}

TEST_CASE("Conv2DTranspose trains in a small decoder and saves and loads", "[cpu][keras]") {
  tf::random::set_seed(3);
  // Upsample (4, 4, 2) codes to (8, 8, 1) images: fit a fixed random target.
  K::Sequential model(
      {Conv2DTranspose(
           4, 3, {.strides = 2, .padding = "same", .activation = "relu", .input_shape = {4, 4, 2}}),
       Conv2DTranspose(1, 3, 1, "same")});
  CHECK(model.output_shape() == tf::TensorShape({tf::None, 8, 8, 1}));
  const tf::Tensor x = tf::random::normal({16, 4, 4, 2}, 0, 1, tf::float32, 1);
  const tf::Tensor y = tf::random::normal({16, 8, 8, 1}, 0, 1, tf::float32, 2);
  model.compile(K::optimizers::Adam(1e-2), K::losses::MeanSquaredError());
  const auto h = model.fit(x, y, {.epochs = 20, .batch_size = 8, .verbose = 0});
  const auto& loss = h.history.at("loss");
  CHECK(loss.back() < 0.9 * loss.front());
  // A traced call equals the eager one, and one trace for a None batch serves every batch size.
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 4, 4, 2})};
  auto f = tf::function([&](const tf::Tensor& in) { return model(in); }, opts);
  tf::testing::check_close(f(x), model(x), 1e-6, 1e-6);
  const tf::Tensor three = tf::slice(x, {0, 0, 0, 0}, {3, 4, 4, 2});
  tf::testing::check_close(f(three), model(three), 1e-6, 1e-6);
  CHECK(f.tracing_count() == 1);
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("tapeflow_conv_t_" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  model.save_weights(path);
  K::Sequential copy(
      {Conv2DTranspose(
           4, 3, {.strides = 2, .padding = "same", .activation = "relu", .input_shape = {4, 4, 2}}),
       Conv2DTranspose(1, 3, 1, "same")});
  copy.load_weights(path);
  std::filesystem::remove(path);
  tf::testing::check_close(copy(x), model(x), 0, 0);
}
