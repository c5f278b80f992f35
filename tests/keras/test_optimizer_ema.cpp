// Keras' base optimizer options use_ema (ema_momentum, ema_overwrite_frequency),
// gradient_accumulation_steps and loss_scale_factor, and the SwapEMAWeights callback: values
// from Keras 3.15 (TF backend) eagerly and traced, configs, checkpoint names, fit.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/callbacks.h"
#include "keras/layers_core.h"
#include "keras/losses.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/serialization_json.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace opt = tapeflow::keras::optimizers;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

tf::Tensor vec(std::vector<double> v) {
  return tf::cast(tf::convert_to_tensor(v, {static_cast<int64_t>(v.size())}), tf::float32);
}

// The slot `name` of the only variable the optimizer updated.
tf::Variable slot_of(const opt::Optimizer& o, const std::string& name) {
  const std::vector<std::string> names = o.slot_names();
  const auto it = std::find(names.begin(), names.end(), name);
  REQUIRE(it != names.end());
  return o.slots().at(0).second.at(static_cast<size_t>(it - names.begin()));
}

// Runs apply_gradients(grad(w), w) `n` times, eagerly or through one traced step.
void run(opt::Optimizer& o, tf::Variable& w, bool traced, int n,
         const std::function<tf::Tensor(int, const tf::Variable&)>& grad,
         const std::function<void(int)>& after) {
  auto step = tf::function([&](const tf::Tensor& g) {
    o.apply_gradients({g}, {w});
    return w.value();
  });
  for (int i = 0; i < n; ++i) {
    const tf::Tensor g = grad(i, w);
    if (traced)
      step(g);
    else
      o.apply_gradients({g}, {w});
    after(i);
  }
}

}  // namespace

TEST_CASE("use_ema keeps Keras' moving average and overwrites the weights with it",
          "[keras][cpu]") {
  // Keras 3.15: Adam(0.1, use_ema=True, ema_momentum=0.9, ema_overwrite_frequency=3) on
  // w = [1, -2] with gradients 2 w [1, 3]; w and the average after each step.
  const std::vector<std::vector<double>> w_after = {{0.900000810623169, -1.9000006914138794},
                                                    {0.8004141449928284, -1.8001681566238403},
                                                    {0.8711968064308167, -1.8710782527923584},
                                                    {0.7721971869468689, -1.771472454071045}};
  const std::vector<std::vector<double>> avg_after = {{0.900000810623169, -1.9000006914138794},
                                                      {0.8900421261787415, -1.8900175094604492},
                                                      {0.8711968064308167, -1.8710782527923584},
                                                      {0.8612968325614929, -1.8611176013946533}};
  for (const bool traced : {false, true}) {
    CAPTURE(traced);
    opt::Optimizer o =
        opt::Adam(0.1, 0.9, 0.999, 1e-7, false,
                  {.use_ema = true, .ema_momentum = 0.9, .ema_overwrite_frequency = 3});
    tf::Variable w(vec({1.0, -2.0}), "w");
    run(
        o, w, traced, 4,
        [](int, const tf::Variable& v) {
          return tf::multiply(v.value(), vec({2.0, 6.0}));
        },
        [&](int i) {
          CAPTURE(i);
          check_values(w.value(), w_after[static_cast<size_t>(i)], 2e-6, 1e-7);
          check_values(slot_of(o, "average").value(), avg_after[static_cast<size_t>(i)], 2e-6,
                       1e-7);
        });
    // finalize_variable_values: the weights take their averages.
    o.finalize_variable_values({w});
    check_values(w.value(), avg_after.back(), 2e-6, 1e-7);
    // The slot is checkpointed as "<variable>/average".
    bool found = false;
    for (const auto& [name, v] : o.tracked_variables()) found = found || name == "w/average";
    CHECK(found);
  }
}

TEST_CASE("gradient_accumulation_steps updates with the mean every n calls, as Keras",
          "[keras][cpu]") {
  const std::vector<std::vector<double>> grads = {{1.0, -2.0}, {0.5, 0.25}, {-1.0, 3.0},
                                                  {2.0, 2.0},  {0.0, -1.0}, {1.5, 0.5}};
  struct Case {
    std::string name;
    std::function<opt::Optimizer()> make;
    std::vector<std::vector<double>> w, acc, avg;
    std::vector<int64_t> steps;  // Keras' optimizer.iterations after each call
  };
  // Keras 3.15: SGD(0.1, momentum=0.5, gradient_accumulation_steps=3) and Adam(0.1,
  // gradient_accumulation_steps=2, use_ema=True, ema_momentum=0.5) on v = [1, -2].
  const std::vector<Case> cases = {
      {"SGD",
       [] { return opt::SGD(0.1, 0.5, false, {.gradient_accumulation_steps = 3}); },
       {{1.0, -2.0},
        {1.0, -2.0},
        {0.9833333492279053, -2.0416667461395264},
        {0.9833333492279053, -2.0416667461395264},
        {0.9833333492279053, -2.0416667461395264},
        {0.8583333492279053, -2.1125001907348633}},
       {{1.0, -2.0}, {1.5, -1.75}, {0, 0}, {2.0, 2.0}, {2.0, 1.0}, {0, 0}},
       {},
       {0, 0, 1, 1, 1, 2}},
      {"Adam",
       [] {
         return opt::Adam(0.1, 0.9, 0.999, 1e-7, false,
                          {.use_ema = true, .ema_momentum = 0.5, .gradient_accumulation_steps = 2});
       },
       {{1.0, -2.0},
        {0.9000011086463928, -1.900001049041748},
        {0.9000011086463928, -1.900001049041748},
        {0.8029671907424927, -1.9481147527694702},
        {0.8029671907424927, -1.9481147527694702},
        {0.7044491767883301, -1.9791362285614014}},
       {{1.0, -2.0}, {0, 0}, {-1.0, 3.0}, {0, 0}, {0.0, -1.0}, {0, 0}},
       {{1.0, -2.0},
        {0.9000011086463928, -1.900001049041748},
        {0.9000011086463928, -1.900001049041748},
        {0.8514841794967651, -1.924057960510254},
        {0.8272256851196289, -1.9360864162445068},
        {0.7658374309539795, -1.957611322402954}},
       {0, 1, 1, 2, 2, 3}}};
  for (const Case& c : cases) {
    for (const bool traced : {false, true}) {
      CAPTURE(c.name, traced);
      opt::Optimizer o = c.make();
      tf::Variable v(vec({1.0, -2.0}), "v");
      run(
          o, v, traced, 6, [&](int i, const tf::Variable&) { return vec(grads[size_t(i)]); },
          [&](int i) {
            CAPTURE(i);
            const size_t k = static_cast<size_t>(i);
            check_values(v.value(), c.w[k], 2e-6, 1e-7);
            check_values(slot_of(o, "gradient_accumulator").value(), c.acc[k], 1e-6, 1e-7);
            if (!c.avg.empty()) check_values(slot_of(o, "average").value(), c.avg[k], 2e-6, 1e-7);
            // iterations() counts the calls; the rate and bias corrections count the updates.
            CHECK(o.iterations().value().item<int64_t>() == i + 1);
            CHECK((i + 1) / (c.name == "SGD" ? 3 : 2) == c.steps[k]);
          });
    }
  }
}

TEST_CASE("loss_scale_factor scales the loss and unscales the gradients", "[keras][cpu]") {
  opt::Optimizer o = opt::SGD(0.1, 0.0, false, {.loss_scale_factor = 8.0});
  CHECK(o.scale_loss(tf::Tensor(2.0f)).item<float>() == 16.0f);
  tf::Variable w(vec({1.0, -2.0}), "w");
  o.apply_gradients({vec({8.0, -16.0})}, {w});
  check_values(w.value(), {0.9, -1.8}, 1e-6, 1e-7);
  // minimize differentiates the scaled loss: the same step as without a factor.
  tf::Variable a(vec({1.0, -2.0}), "a"), b(vec({1.0, -2.0}), "b");
  opt::Optimizer scaled = opt::Adam(0.1, 0.9, 0.999, 1e-7, false, {.loss_scale_factor = 64.0});
  opt::Optimizer plain = opt::Adam(0.1);
  for (int i = 0; i < 3; ++i) {
    scaled.minimize([&] { return tf::reduce_sum(tf::square(a.value())); }, {a});
    plain.minimize([&] { return tf::reduce_sum(tf::square(b.value())); }, {b});
  }
  check_close(a.value(), b.value(), 1e-6, 1e-7);
}

TEST_CASE("use_ema, gradient accumulation and loss scaling: checks and configs",
          "[keras][cpu][serialization]") {
  // Keras' messages.
  require_error([] { opt::SGD(0.1, 0.0, false, {.gradient_accumulation_steps = 1}); },
                {"SGD",
                 "`gradient_accumulation_steps` must be an integer >= 2. Received: "
                 "gradient_accumulation_steps=1"});
  require_error([] { opt::SGD(0.1, 0.0, false, {.use_ema = true, .ema_momentum = 1.5}); },
                {"`ema_momentum` must be in the range [0, 1]. Received: ema_momentum=1.5"});
  require_error([] { opt::SGD(0.1, 0.0, false, {.use_ema = true, .ema_overwrite_frequency = 0}); },
                {"`ema_overwrite_frequency` must be an integer >= 1 or None"});
  require_error([] { opt::SGD(0.1, 0.0, false, {.loss_scale_factor = 0.0}); },
                {"loss_scale_factor must be a finite, non-zero number"});
  // Written with Keras' keys and read back.
  const opt::Optimizer o = opt::Adam(0.01, 0.9, 0.999, 1e-7, false,
                                     {.use_ema = true,
                                      .ema_momentum = 0.95,
                                      .ema_overwrite_frequency = 10,
                                      .loss_scale_factor = 128.0,
                                      .gradient_accumulation_steps = 4});
  const K::saving::Config c = opt::serialize(o);
  CHECK(c["config"]["use_ema"] == true);
  CHECK(c["config"]["ema_momentum"] == 0.95);
  CHECK(c["config"]["ema_overwrite_frequency"] == 10);
  CHECK(c["config"]["loss_scale_factor"] == 128.0);
  CHECK(c["config"]["gradient_accumulation_steps"] == 4);
  CHECK(opt::serialize(opt::deserialize(c)) == c);
  CHECK(o.slot_names() == std::vector<std::string>{"m", "v", "average", "gradient_accumulator"});
  tf::Variable w(vec({1.0, 2.0, 3.0}), "w");
  CHECK(o.slot_shape("gradient_accumulator", w) == tf::TensorShape({3}));
  // Without use_ema there is nothing to swap.
  CHECK_THROWS_AS(opt::SGD(0.1).swap_ema_weights(), tf::FailedPreconditionError);
}

TEST_CASE("fit with use_ema ends on the averages; SwapEMAWeights evaluates with them",
          "[keras][cpu]") {
  const tf::Tensor x = tf::reshape(tf::range(0, 32, 1, tf::float32), {16, 2});
  const tf::Tensor xs = tf::divide(x, tf::Tensor(32.0f));
  const tf::Tensor y = tf::reduce_sum(xs, {1}, true);
  auto make = [] {
    K::Sequential m({K::layers::Dense(1, {.input_shape = {2}})});
    m.compile(opt::SGD(0.2, 0.0, false, {.use_ema = true, .ema_momentum = 0.8}),
              K::losses::MeanSquaredError());
    return m;
  };
  K::Sequential model = make();
  const K::History h = model.fit(xs, y,
                                 {.epochs = 2,
                                  .batch_size = 4,
                                  .validation_data = K::ValidationData(xs, y),
                                  .callbacks = {K::callbacks::SwapEMAWeights()},
                                  .verbose = 0,
                                  .shuffle = false});
  // The weights are the averages now (finalize_variable_values), and the last validation ran
  // on the same averages.
  const opt::Optimizer o = model.optimizer();
  for (const auto& [var, slots] : o.slots()) check_close(var.value(), slots.at(0).value());
  CHECK(h.history.at("val_loss").back() ==
        Approx(model.evaluate(xs, y, {.verbose = 0})[0]).epsilon(1e-6));
  // The training loss was computed on the raw weights, which differ from the averages.
  CHECK(h.history.at("loss").back() != Approx(h.history.at("val_loss").back()).epsilon(1e-6));
  // SwapEMAWeights without use_ema: Keras' error.
  K::Sequential plain({K::layers::Dense(1, {.input_shape = {2}})});
  plain.compile(opt::SGD(0.1), K::losses::MeanSquaredError());
  CHECK_THROWS_AS(
      plain.evaluate(xs, y, {.verbose = 0, .callbacks = {K::callbacks::SwapEMAWeights()}}),
      tf::FailedPreconditionError);
}
