// Keras 3's CTC loss (keras/losses.h): Keras 3.15's values on every device, its gradient against
// central differences, its config and compile() string, a small sequence model trained with it
// and decoded with ctc_greedy_decoder, and the errors.
#include <cmath>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "keras/layers.h"
#include "keras/losses.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/serialization_json.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/nn_more.h"
#include "ops/random.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

// y_pred[b, t, c] = 1.5 sin(1.3 t + 2.1 b + 0.7 c + 0.5 t c): (batch 2, frames 5, classes 4).
tf::Tensor logits(tf::DType dtype) {
  std::vector<double> v;
  for (int b = 0; b < 2; ++b)
    for (int t = 0; t < 5; ++t)
      for (int c = 0; c < 4; ++c)
        v.push_back(1.5 * std::sin(1.3 * t + 2.1 * b + 0.7 * c + 0.5 * t * c));
  return tf::constant(tf::convert_to_tensor(v, {2, 5, 4}), dtype);
}
tf::Tensor labels() {
  return tf::convert_to_tensor(std::vector<int32_t>{1, 2, 0, 3, 3, 1}, {2, 3});
}

}  // namespace

TEST_CASE("the CTC loss matches Keras 3.15", "[cpu][cuda][keras][losses]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // keras.losses.ctc(y_true, y_pred) and keras.losses.CTC()(y_true, y_pred).
    for (tf::DType dtype : {tf::float32, tf::float64}) {
      CAPTURE(tf::dtype_name(dtype));
      const tf::Tensor per_sample = K::losses::ctc(labels(), logits(dtype));
      CHECK(per_sample.dtype() == dtype);
      check_values(per_sample, {5.306448936462402, 7.710240840911865}, 2e-6);
      check_values(K::losses::CTC()(labels(), logits(dtype)), {6.508344650268555}, 2e-6);
      check_values(K::losses::get("ctc")(labels(), logits(dtype)), {6.508344650268555}, 2e-6);
    }
  }
  // The gradient with respect to the logits: central differences in float64.
  tf::testing::check_gradient([](const tf::Tensor& x) { return K::losses::ctc(labels(), x); },
                              {2, 5, 4}, logits(tf::float64).numpy<double>(), 1e-6, 1e-8);
  // keras.losses.serialize(keras.losses.CTC())
  using Config = K::saving::Config;
  CHECK(K::losses::serialize(K::losses::CTC()) ==
        Config::parse(R"({"module": "keras.losses", "class_name": "CTC",
"config": {"name": "ctc", "reduction": "sum_over_batch_size"}, "registered_name": null})"));
  const K::losses::Loss back = K::losses::deserialize(K::losses::serialize(K::losses::CTC()));
  check_values(back(labels(), logits(tf::float32)), {6.508344650268555}, 2e-6);
  require_error(
      [] {
        K::losses::ctc(tf::convert_to_tensor(std::vector<int32_t>{1, 2, 0}, {3}),
                       logits(tf::float32));
      },
      {"[ctc] Targets `y_true` are expected to be a tensor of shape", "(3,)"});
  require_error(
      [] {
        K::losses::ctc(labels(), tf::zeros({5, 4}));
      },
      {"[ctc] Logits `y_pred` are expected", "(5, 4)"});
}

TEST_CASE("a sequence model trained with the CTC loss decodes its labels", "[cpu][keras][losses]") {
  // Each of 4 sequences of 6 frames holds its label sequence as one-hot frames (blank between):
  // a per-frame Dense layer learns to emit them.
  const std::vector<std::vector<int>> frames = {
      {1, 0, 2, 0, 3, 0}, {2, 2, 0, 1, 0, 0}, {3, 0, 3, 0, 1, 0}, {1, 0, 1, 0, 2, 0}};
  const std::vector<int32_t> label_rows = {1, 2, 3, 2, 1, 0, 3, 3, 1, 1, 1, 2};
  std::vector<float> x;
  for (const auto& seq : frames)
    for (int f : seq)
      for (int c = 0; c < 4; ++c) x.push_back(c == f ? 1.0f : 0.0f);
  const tf::Tensor xs = tf::convert_to_tensor(x, {4, 6, 4});
  const tf::Tensor ys = tf::convert_to_tensor(label_rows, {4, 3});
  tf::random::set_seed(5);
  K::Sequential model({K::layers::Dense(16, "tanh"), K::layers::Dense(4)});
  model.compile(K::optimizers::Adam(0.05), "ctc");
  const double first = model.train_on_batch(xs, ys)[0];
  for (int step = 0; step < 150; ++step) model.train_on_batch(xs, ys);
  const double last = model.train_on_batch(xs, ys)[0];
  CHECK(last < 0.1 * first);
  // Greedy decoding (time-major, blank 0) gives the labels back.
  const tf::Tensor out = tf::transpose(model(xs, false), {1, 0, 2});
  const auto decoded = tf::nn::ctc_greedy_decoder(
      out, tf::convert_to_tensor(std::vector<int32_t>{6, 6, 6, 6}, {4}), true, 0);
  CHECK(decoded.decoded.numpy<int64_t>() == std::vector<int64_t>{1,  2,  3,  -1, -1, -1, 2,  1,
                                                                 -1, -1, -1, -1, 3,  3,  1,  -1,
                                                                 -1, -1, 1,  1,  2,  -1, -1, -1});
  tf::detail::clear_random_seed();
}
