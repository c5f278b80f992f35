// The circle loss (keras/losses_circle.cpp) against Keras 3.15 (TF 2.21) on the same inputs:
// per-sample values with and without remove_diagonal, the masked reductions with sample
// weights, gradients against central differences in float64 and TF's, traced equals eager,
// errors, and compile("circle") in evaluate and fit.
#include <cmath>
#include <functional>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "jit/function.h"
#include "keras/layers_masking.h"
#include "keras/layers_misc.h"
#include "keras/losses.h"
#include "keras/model.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace losses = tapeflow::keras::losses;
using losses::Reduction;
using tf::testing::check_values;

namespace {

// numpy RandomState(3).randn(6, 4) as float32, and the same rows L2-normalised.
const std::vector<float> kRaw = {
    1.78862846f,   0.436509848f, 0.0964974687f,  -1.86349273f,  -0.277388215f, -0.354758978f,
    -0.082741484f, -0.62700069f, -0.0438181683f, -0.477218032f, -1.31386471f,  0.884622395f,
    0.881318033f,  1.70957303f,  0.0500336438f,  -0.404677421f, -0.545359969f, -1.54647732f,
    0.982367456f,  -1.10106766f, -1.18504655f,   -0.205649897f, 1.48614836f,   0.23671627f};
const std::vector<float> kUnit = {
    0.682322383f, 0.166518897f,  0.036811661f,   -0.710881472f, -0.357281625f, -0.456936747f,
    -0.10657271f, -0.807589591f, -0.0264789928f, -0.288379312f, -0.793958664f, 0.534570754f,
    0.44825238f,  0.869516075f,  0.0254479088f,  -0.205825374f, -0.247217461f, -0.701034546f,
    0.445317596f, -0.499125659f, -0.615137875f,  -0.106749423f, 0.771434784f,  0.122875459f};
// Label 2 appears once: without its diagonal it has no positive pair, loss 0 (masked).
tf::Tensor labels() {
  return tf::constant({0, 1, 0, 2, 1, 0});
}
tf::Tensor weights() {
  return tf::constant({1.0f, 0.5f, 2.0f, 1.0f, 0.0f, 1.5f});
}
tf::Tensor embeddings(bool unit) {
  return tf::constant(unit ? kUnit : kRaw, {6, 4});
}

struct Case {
  bool unit, remove_diagonal;
  double gamma, margin;
  std::vector<double> per_sample;
  // Circle(gamma, margin, remove_diagonal, reduction)(labels, x[, sample_weight=weights]):
  // sum_over_batch_size, the same weighted, sum, sum weighted.
  std::vector<double> reduced;
};

// keras.losses.circle(labels, x, remove_diagonal, gamma, margin) and keras.losses.Circle.
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {true,
       true,
       80.0,
       0.4,
       {182.154175, 0.00016032462, 167.630005, 0, 0.50550437, 175.446075},
       {105.147186, 156.116684, 525.735962, 780.583374}},
      {true,
       true,
       2.0,
       0.25,
       {6.29620838, 1.56938875, 6.08422899, 0, 1.67095661, 6.27590847},
       {4.37933826, 5.73264503, 21.8966904, 28.6632233}},
      {true,
       false,
       80.0,
       0.4,
       {182.154175, 0.000162206285, 167.630005, 3.0471921, 0.510150969, 175.446075},
       {88.1312943, 130.605087, 528.787781, 783.630554}},
      {true,
       false,
       2.0,
       0.25,
       {6.3022089, 2.10503387, 6.09016418, 1.81187963, 2.2170763, 6.28150034},
       {4.13464403, 5.12819719, 24.8078632, 30.7691841}},
      {false,
       true,
       80.0,
       0.4,
       {1038.37195, 0.0078884149, 737.93988, 0, 54.4000053, 1038.37195},
       {573.818359, 814.362793, 2869.0918, 4071.81348}},
      {false,
       true,
       2.0,
       0.25,
       {26.7229385, 1.58501887, 19.7297382, 0, 2.2817452, 26.6065598},
       {15.3852005, 21.3769531, 76.9260025, 106.884766}},
      {false,
       false,
       80.0,
       0.4,
       {1038.37195, 7.78507614, 737.93988, 54.4000053, 55.0931511, 1038.37195},
       {488.660309, 688.350342, 2931.96191, 4130.10205}},
      {false,
       false,
       2.0,
       0.25,
       {26.7229385, 2.32221222, 19.7297382, 2.33064675, 2.92249012, 26.6065598},
       {13.4390974, 18.2640018, 80.6345825, 109.584015}},
  };
  return c;
}

}  // namespace

TEST_CASE("circle: per-sample losses and masked reductions match Keras", "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (const Case& c : cases()) {
      CAPTURE(c.unit, c.remove_diagonal, c.gamma, c.margin);
      const tf::Tensor x = embeddings(c.unit);
      // gamma 80 scales the float32 roundings of logits near 100 (ulp 1e-5) into a small loss.
      const double atol = c.gamma > 10 ? 1e-4 : 1e-6;
      check_values(losses::circle(labels(), x, tf::Tensor(), tf::Tensor(), c.remove_diagonal,
                                  c.gamma, c.margin),
                   c.per_sample, 2e-6, atol);
      const losses::Circle mean(c.gamma, c.margin, c.remove_diagonal);
      const losses::Circle sum(c.gamma, c.margin, c.remove_diagonal, Reduction::SUM);
      const losses::Circle none(c.gamma, c.margin, c.remove_diagonal, Reduction::NONE);
      check_values(mean(labels(), x), {c.reduced[0]}, 2e-6);
      check_values(mean(labels(), x, weights()), {c.reduced[1]}, 2e-6);
      check_values(sum(labels(), x), {c.reduced[2]}, 2e-6);
      check_values(sum(labels(), x, weights()), {c.reduced[3]}, 2e-6);
      check_values(none(labels(), x), c.per_sample, 2e-6, atol);
    }
    // Explicit references equal to the batch give the same losses; float labels truncate.
    const tf::Tensor x = embeddings(true);
    check_values(losses::circle(labels(), x, labels(), x), cases()[0].per_sample, 2e-6, 1e-4);
    check_values(losses::Circle()(tf::cast(labels(), tf::float32), x), {105.147186}, 2e-6);
    // No sample with a pair: every loss masked, the mean 0 (Keras' divide_no_nan).
    check_values(losses::Circle()(tf::constant({0, 1, 2}), tf::slice(x, {0, 0}, {3, 4})), {0.0});
  }
}

TEST_CASE("circle: gradients match central differences and TF", "[keras][cpu][cuda]") {
  std::vector<double> raw(kRaw.begin(), kRaw.end());
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (bool remove_diagonal : {true, false}) {
      CAPTURE(remove_diagonal);
      tf::testing::check_gradient(
          [&](const tf::Tensor& x) {
            return losses::circle(labels(), x, tf::Tensor(), tf::Tensor(), remove_diagonal, 2.0,
                                  0.25);
          },
          tf::TensorShape({6, 4}), raw, 1e-6, 1e-7);
      // The masked mean of the Loss class.
      tf::testing::check_gradient(
          [&](const tf::Tensor& x) {
            return losses::Circle(2.0, 0.25, remove_diagonal)(labels(), x,
                                                              tf::cast(weights(), tf::float64));
          },
          tf::TensorShape({6, 4}), raw, 1e-6, 1e-7);
    }
    // Keras' default gamma on unit rows (large logits, still finite differences).
    std::vector<double> unit(kUnit.begin(), kUnit.end());
    tf::testing::check_gradient([&](const tf::Tensor& x) { return losses::circle(labels(), x); },
                                tf::TensorShape({6, 4}), unit, 1e-6, 1e-6);
    // TF: tape.gradient(reduce_mean(keras.losses.circle(labels, x, gamma=2, margin=0.25)), x)
    // in float64; the lone label's row gets 0.
    tf::Variable v(tf::constant(raw, {6, 4}));
    tf::GradientTape tape;
    const tf::Tensor loss = tf::reduce_mean(
        losses::circle(labels(), v.value(), tf::Tensor(), tf::Tensor(), true, 2.0, 0.25));
    check_values(tape.gradient(loss, v),
                 {5.53157511,
                  1.73643452,
                  -4.18294657,
                  -3.10091673,
                  0.230134035,
                  0.0581476192,
                  0.0492220095,
                  -0.263461976,
                  -3.63337199,
                  -0.887432139,
                  -0.20933679,
                  3.79402098,
                  0,
                  0,
                  0,
                  0,
                  0.167375184,
                  0.0408474526,
                  0.00902998134,
                  -0.174380787,
                  -8.35794988,
                  -2.04254365,
                  -0.441260099,
                  8.67882119},
                 1e-6, 1e-7);
  }
}

TEST_CASE("circle: one trace with a None batch equals eager", "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const losses::Circle loss(2.0, 0.25);
    auto step = tf::function(
        [&](const tf::Tensor& t, const tf::Tensor& p, const tf::Tensor& w) {
          return loss(t, p, w);
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None}, tf::int32),
                                                tf::TensorSpec({tf::None, 4}, tf::float32),
                                                tf::TensorSpec({tf::None}, tf::float32)}});
    for (int64_t rows : {6, 5, 3}) {
      CAPTURE(rows);
      const tf::Tensor t = tf::slice(labels(), {0}, {rows});
      const tf::Tensor p = tf::slice(embeddings(false), {0, 0}, {rows, 4});
      const tf::Tensor w = tf::slice(weights(), {0}, {rows});
      tf::testing::check_close(step(t, p, w), loss(t, p, w), 1e-6, 1e-6);
    }
    check_values(step(labels(), embeddings(false), weights()), {21.3769531}, 2e-6);
    CHECK(step.tracing_count() == 1);
  }
}

TEST_CASE("circle: errors name the loss and the shapes", "[keras][cpu]") {
  const tf::Tensor x = embeddings(true);
  tf::testing::require_error([&] { losses::circle(labels(), tf::reshape(x, {24})); },
                             {"circle", "(batch, dim)", "(24,)"});
  tf::testing::require_error(
      [&] {
        losses::circle(tf::constant({0, 1, 0}), x);
      },
      {"circle", "y_true must have shape (6,)", "(3,)", "(6, 4)"});
  tf::testing::require_error(
      [&] {
        losses::circle(tf::ones({6, 2}), x);
      },
      {"circle", "y_true", "(6, 2)"});
  tf::testing::require_error([&] { losses::circle(labels(), tf::cast(x, tf::int32)); },
                             {"circle", "floating", "int32"});
  tf::testing::require_error([&] { losses::circle(labels(), x, labels()); },
                             {"circle", "both ref_labels and ref_embeddings"});
  tf::testing::require_error(
      [&] {
        losses::circle(labels(), x, labels(), tf::ones({6, 3}));
      },
      {"circle", "ref_embeddings must be float32 of shape (n, 4)", "(6, 3)"});
  tf::testing::require_error(
      [&] {
        losses::circle(labels(), x, tf::constant({1, 2}), x);
      },
      {"circle", "ref_labels must have shape (6,)", "(2,)"});
  tf::testing::require_error([] { losses::Circle(std::nan("")); }, {"Circle", "finite"});
  tf::testing::require_error([&] { losses::Circle()(labels(), x, tf::ones({4})); },
                             {"circle", "sample_weight of shape (4,)"});
}

namespace {
// Dense(3) without bias, then UnitNormalization, on eight samples (the Keras script's model):
// keras.Sequential([Input((2,)), Dense(3, use_bias=False), UnitNormalization()]),
// set_weights([W]); compiled by the caller.
K::Sequential embedding_model() {
  K::Sequential m({K::layers::Dense(3, "", false), K::layers::UnitNormalization()});
  m.build(tf::TensorShape({tf::None, 2}));
  m.set_weights({tf::constant({{0.8f, -0.4f, 0.1f}, {0.2f, 0.3f, 0.9f}})});
  return m;
}
tf::Tensor model_x() {
  return tf::constant({{1.0f, 0.5f},
                       {0.2f, -1.0f},
                       {-0.5f, 0.8f},
                       {1.5f, 1.0f},
                       {-1.0f, -0.3f},
                       {0.3f, 0.9f},
                       {0.7f, -0.2f},
                       {-0.4f, -0.6f}});
}
tf::Tensor model_labels() {
  return tf::constant({0, 1, 2, 0, 1, 2, 0, 3});
}

// The Keras script's training of a model of make() on (x, model_labels()): compile(SGD(0.0),
// "circle") then evaluate(x, labels, batch_size=8) gives `evaluated`; compile(SGD(0.1),
// Circle(gamma=2.0, margin=0.25)) then fit(x, labels, batch_size=8, epochs=2, shuffle=False)
// gives `losses`, then the kernel.
struct KerasTraining {
  double evaluated;
  std::vector<double> losses, kernel;
};
void check_keras_training(const std::function<K::Sequential()>& make, const tf::Tensor& x,
                          const KerasTraining& want) {
  auto m = make();
  m.compile(K::optimizers::SGD(0.0), std::string("circle"));
  const auto e = m.evaluate(x, model_labels(), {.batch_size = 8, .verbose = 0});
  REQUIRE(e.size() == 1);
  CHECK(e[0] == Approx(want.evaluated).epsilon(2e-6));
  auto trained = make();
  trained.compile(K::optimizers::SGD(0.1), losses::Circle(2.0, 0.25));
  const K::History h = trained.fit(x, model_labels(), {.epochs = 2, .batch_size = 8, .verbose = 0});
  CHECK(h.history.at("loss")[0] == Approx(want.losses[0]).epsilon(2e-6));
  CHECK(h.history.at("loss")[1] == Approx(want.losses[1]).epsilon(2e-6));
  check_values(trained.get_weights()[0], want.kernel, 1e-5, 1e-6);
}
}  // namespace

TEST_CASE("circle: compile by name and training follow Keras", "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    CHECK(losses::get("circle").name() == "circle");
    // evaluate: 35.639827728271484; fit: losses 2.671224355697632, 2.6186459064483643.
    check_keras_training(embedding_model, model_x(),
                         {35.639827728271484,
                          {2.671224355697632, 2.6186459064483643},
                          {0.7671886086463928, -0.3471165597438812, 0.17569363117218018,
                           0.27744317054748535, 0.2714644968509674, 0.9319624304771423}});
  }
}

namespace {
// embedding_model() behind Keras' Masking(0.0): rows of zeros carry a False mask to the output,
// keras.Sequential([Input((2,)), Masking(0.0), Dense(3, use_bias=False), UnitNormalization()]).
K::Sequential masked_embedding_model() {
  K::Sequential m(
      {K::layers::Masking(0.0), K::layers::Dense(3, "", false), K::layers::UnitNormalization()});
  m.build(tf::TensorShape({tf::None, 2}));
  m.set_weights({tf::constant({{0.8f, -0.4f, 0.1f}, {0.2f, 0.3f, 0.9f}})});
  return m;
}
// model_x() with rows 2 and 6 zeroed (masked).
tf::Tensor masked_x() {
  return tf::constant({{1.0f, 0.5f},
                       {0.2f, -1.0f},
                       {0.0f, 0.0f},
                       {1.5f, 1.0f},
                       {-1.0f, -0.3f},
                       {0.3f, 0.9f},
                       {0.0f, 0.0f},
                       {-0.4f, -0.6f}});
}
}  // namespace

TEST_CASE("circle: a masked model output is masked once with the loss mask as Keras",
          "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    // Keras 3.15: p = m(x), p._keras_mask [T T F T T T F T]; Circle(reduction=None)(y, p) gives
    // [102.87677, 65.69446, 0, 111.37129, 72.08328, 111.37149, 0, 0]; Circle()(y, p) 92.67946
    // (the mean over the 5 samples kept by both masks), reduction="sum" 463.3973.
    auto m = masked_embedding_model();
    const K::MaskedTensor out = m.call_with_mask(masked_x(), tf::Tensor(), false);
    REQUIRE(out.mask.defined());
    check_values(out.mask, {1, 1, 0, 1, 1, 1, 0, 1});
    check_values(losses::Circle(80, 0.4, true, Reduction::NONE)(model_labels(), out.output,
                                                                tf::Tensor(), out.mask),
                 {102.87677, 65.69446, 0, 111.37129, 72.08328, 111.37149, 0, 0}, 2e-6);
    check_values(losses::Circle()(model_labels(), out.output, tf::Tensor(), out.mask), {92.67946},
                 2e-6);
    check_values(losses::Circle(80, 0.4, true, Reduction::SUM)(model_labels(), out.output,
                                                               tf::Tensor(), out.mask),
                 {463.3973}, 2e-6);
    // A sample weight multiplies in; the count of kept samples stays 5.
    const tf::Tensor sw = tf::constant({1.f, 2.f, 1.f, 0.f, 1.f, 1.f, 1.f, 1.f});
    check_values(losses::Circle()(model_labels(), out.output, sw, out.mask),
                 {(102.87677 + 2 * 65.69446 + 72.08328 + 111.37149) / 5}, 2e-6);
    // evaluate: 92.67945861816406; fit: losses 3.682264566421509, 3.6121444702148438.
    check_keras_training(masked_embedding_model, masked_x(),
                         {92.67945861816406,
                          {3.682264566421509, 3.6121444702148438},
                          {0.7452678680419922, -0.3355533182621002, 0.17427226901054382,
                           0.28384771943092346, 0.2770695984363556, 0.9520291090011597}});
  }
  // A mask that does not fit the per-sample losses names both shapes.
  tf::testing::require_error(
      [] {
        losses::Circle()(model_labels(), tf::ones({8, 3}), tf::Tensor(), tf::ones({3}, tf::bool_));
      },
      {"circle", "mask", "(3,)", "(8,)"});
}
