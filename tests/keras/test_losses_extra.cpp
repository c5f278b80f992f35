// The losses of keras/losses_extra.cpp against Keras 3.15 (TF 2.21) on the same inputs: focal
// crossentropies (class balancing, logits, label smoothing), Dice and Tversky under every
// reduction with and without sample weights, edge cases, float64 gradients against central
// differences, float16 inputs, a traced train step, compile() strings and errors.
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/losses.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace losses = tapeflow::keras::losses;
using losses::Reduction;
using tf::testing::check_values;

namespace {

const tf::Tensor& bin_true() {
  static const tf::Tensor t = tf::constant({{0.f, 1.f, 1.f}, {1.f, 0.f, 0.f}});
  return t;
}
const tf::Tensor& bin_pred() {
  static const tf::Tensor t = tf::constant({{0.1f, 0.8f, 0.6f}, {0.3f, 0.4f, 0.05f}});
  return t;
}
const tf::Tensor& bin_logits() {
  static const tf::Tensor t = tf::constant({{-1.2f, 0.8f, 2.5f}, {0.3f, -0.4f, -3.0f}});
  return t;
}
const tf::Tensor& cat_true() {
  static const tf::Tensor t = tf::constant({{0.f, 1.f, 0.f}, {0.f, 0.f, 1.f}});
  return t;
}
const tf::Tensor& cat_pred() {
  static const tf::Tensor t = tf::constant({{0.2f, 0.5f, 0.3f}, {0.1f, 0.3f, 0.6f}});
  return t;
}
const tf::Tensor& cat_logits() {
  static const tf::Tensor t = tf::constant({{0.5f, 1.5f, -1.0f}, {0.1f, 0.8f, 0.1f}});
  return t;
}

struct Case {
  std::string name;
  std::function<losses::Loss(Reduction)> make;
  const tf::Tensor* t;
  const tf::Tensor* p;
  // Keras: sample_weight (0.4, 1.6) under sum_over_batch_size, sum, None; then no weights.
  double mean, sum;
  std::vector<double> none;
  double unweighted;
};

std::vector<Case> cases() {
  return {
      {"binary focal",
       [](Reduction r) { return losses::BinaryFocalCrossentropy(false, 0.25, 2.0, false, 0.0, r); },
       &bin_true(),
       &bin_pred(),
       0.18526262044906616,
       0.3705252408981323,
       {0.012228189967572689, 0.35829704999923706},
       0.12725305557250977},
      {"binary focal balanced smoothed",
       [](Reduction r) { return losses::BinaryFocalCrossentropy(true, 0.3, 1.5, false, 0.1, r); },
       &bin_true(),
       &bin_pred(),
       0.08609377592802048,
       0.17218755185604095,
       {0.008347520604729652, 0.16384002566337585},
       0.061634406447410583},
      {"binary focal logits",
       [](Reduction r) { return losses::BinaryFocalCrossentropy(false, 0.25, 3.0, true, 0.0, r); },
       &bin_true(),
       &bin_logits(),
       0.021193332970142365,
       0.04238666594028473,
       {0.0019144027028232813, 0.04047226160764694},
       0.015040584839880466},
      {"categorical focal",
       [](Reduction r) { return losses::CategoricalFocalCrossentropy(0.25, 2.0, false, 0.0, r); },
       &cat_true(),
       &cat_pred(),
       0.02501075528562069,
       0.05002151057124138,
       {0.01732867956161499, 0.03269283100962639},
       0.03187736123800278},
      {"categorical focal logits smoothed",
       [](Reduction r) { return losses::CategoricalFocalCrossentropy(0.5, 1.0, true, 0.2, r); },
       &cat_true(),
       &cat_logits(),
       0.43360885977745056,
       0.8672177195549011,
       {0.0697522759437561, 0.797465443611145},
       0.33639830350875854},
      {"dice axis 1",
       [](Reduction r) { return losses::Dice(r, "dice", {1}); },
       &bin_true(),
       &bin_pred(),
       0.5657142996788025,
       1.131428599357605,
       {0.07999997586011887, 1.0514286756515503},
       0.4285714030265808},
      {"tversky axis 1",
       [](Reduction r) { return losses::Tversky(0.7, 0.3, r, "tversky", {1}); },
       &bin_true(),
       &bin_pred(),
       0.5891892313957214,
       1.1783784627914429,
       {0.0972973108291626, 1.0810811519622803},
       0.45945948362350464},
  };
}

}  // namespace

TEST_CASE("losses extra: values under every reduction match Keras 3.15", "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor w = tf::constant({0.4f, 1.6f});
    for (const Case& c : cases()) {
      CAPTURE(c.name);
      check_values(c.make(Reduction::AUTO)(*c.t, *c.p, w), {c.mean}, 2e-6, 1e-7);
      check_values(c.make(Reduction::SUM_OVER_BATCH_SIZE)(*c.t, *c.p, w), {c.mean}, 2e-6, 1e-7);
      check_values(c.make(Reduction::SUM)(*c.t, *c.p, w), {c.sum}, 2e-6, 1e-7);
      check_values(c.make(Reduction::NONE)(*c.t, *c.p, w), c.none, 2e-6, 1e-7);
      check_values(c.make(Reduction::AUTO)(*c.t, *c.p), {c.unweighted}, 2e-6, 1e-7);
    }
  }
}

TEST_CASE("losses extra: edge cases as Keras 3.15", "[keras][cpu]") {
  // Dice and Tversky over every axis (Keras' axis=None): one value for the batch.
  check_values(losses::Dice()(bin_true(), bin_pred()), {0.3523809313774109}, 2e-6);
  check_values(losses::Tversky(0.2, 0.8)(bin_true(), bin_pred()), {0.2916666865348816}, 2e-6);
  // All zeros: 1 - 0 / 1e-7.
  check_values(losses::Dice()(tf::zeros({2, 2}), tf::zeros({2, 2})), {1.0});
  // All one class, predictions at the clip bounds: the clipped crossentropy, the unclipped p_t.
  check_values(losses::BinaryFocalCrossentropy(false, 0.25, 2.0, false, 0.0, Reduction::NONE)(
                   tf::ones({2, 2}), tf::constant({{1.0f, 0.0f}, {0.5f, 1e-9f}})),
               {8.05904769897461, 8.14569091796875}, 2e-6);
  // Predictions exactly right: (1 - p_t)^gamma at 0 has a zero gradient, not NaN (TF's
  // GradientTape through keras.losses.BinaryFocalCrossentropy(gamma=1.5) gives 0 and 0).
  {
    const tf::Tensor p = tf::constant({1.0, 0.0});
    tf::GradientTape tape;
    tape.watch(p);
    const tf::Tensor l =
        losses::BinaryFocalCrossentropy(false, 0.25, 1.5)(tf::constant({1.0, 0.0}), p);
    const tf::Tensor g = tape.gradient(l, p);
    REQUIRE(g.defined());
    check_values(g, {0.0, 0.0});
  }
  // A large logit: the crossentropy comes from the logits, not clipped probabilities.
  check_values(losses::binary_focal_crossentropy(tf::constant({0.0}), tf::constant({30.0}), false,
                                                 0.25, 2.0, true),
               {30.0}, 1e-9);
}

TEST_CASE("losses extra: gradients match central differences", "[keras][cpu]") {
  const tf::TensorShape shape({2, 3});
  const std::vector<double> tb = {0, 1, 1, 1, 0, 0}, pb = {0.1, 0.8, 0.6, 0.3, 0.4, 0.05};
  const std::vector<double> lb = {-1.2, 0.8, 2.5, 0.3, -0.4, -3.0};
  const std::vector<double> tc = {0, 1, 0, 0, 0, 1}, pc = {0.2, 0.5, 0.3, 0.1, 0.3, 0.6};
  const std::vector<double> lc = {0.5, 1.5, -1.0, 0.1, 0.8, 0.1};
  struct G {
    std::string name;
    losses::Loss loss;
    std::vector<double> t, p;
  };
  const std::vector<G> gs = {
      {"binary focal", losses::BinaryFocalCrossentropy(), tb, pb},
      {"binary focal balanced", losses::BinaryFocalCrossentropy(true, 0.3, 1.5, false, 0.1), tb,
       pb},
      {"binary focal logits", losses::BinaryFocalCrossentropy(false, 0.25, 3.0, true), tb, lb},
      {"categorical focal", losses::CategoricalFocalCrossentropy(), tc, pc},
      {"categorical focal logits", losses::CategoricalFocalCrossentropy(0.5, 1.0, true, 0.2), tc,
       lc},
      {"dice", losses::Dice(Reduction::AUTO, "dice", {1}), tb, pb},
      {"dice all axes", losses::Dice(), tb, pb},
      {"tversky", losses::Tversky(0.7, 0.3, Reduction::SUM, "tversky", {1}), tb, pb},
  };
  const tf::Tensor w = tf::constant({0.7, 1.3});
  for (const G& g : gs) {
    CAPTURE(g.name);
    const bool weighted = g.name != "dice all axes";
    const tf::Tensor t = tf::detail::from_doubles(g.t, shape, tf::float64);
    tf::testing::check_gradient(
        [&](const tf::Tensor& p) { return weighted ? g.loss(t, p, w) : g.loss(t, p); }, shape, g.p,
        1e-6, 1e-7);
  }
}

TEST_CASE("losses extra: float16 predictions as under mixed_float16", "[keras][cpu]") {
  // A mixed_float16 model hands the loss float16 predictions: the values stay within float16's
  // precision of the float32 ones.
  const tf::Tensor w = tf::constant({0.4f, 1.6f});
  for (const Case& c : cases()) {
    CAPTURE(c.name);
    const tf::Tensor half = tf::cast(*c.p, tf::float16);
    const tf::Tensor l = c.make(Reduction::AUTO)(*c.t, half, w);
    check_values(tf::cast(l, tf::float32), {c.mean}, 2e-2, 1e-3);
  }
}

TEST_CASE("losses extra: a traced train step equals the eager one", "[keras][cpu][cuda]") {
  const tf::Tensor x = tf::constant({{0.5f, -1.0f}, {1.5f, 0.25f}, {-0.5f, 2.0f}});
  const tf::Tensor y = tf::constant({{0.f, 1.f, 0.f}, {1.f, 0.f, 0.f}, {0.f, 0.f, 1.f}});
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const std::vector<losses::Loss> ls = {losses::BinaryFocalCrossentropy(true, 0.25, 2.0, true),
                                          losses::CategoricalFocalCrossentropy(0.25, 2.0, true),
                                          losses::Dice(Reduction::AUTO, "dice", {1}),
                                          losses::Tversky()};
    for (const losses::Loss& loss : ls) {
      CAPTURE(loss.name());
      const tf::Tensor w0 = tf::constant({{0.3f, -0.2f, 0.1f}, {0.05f, 0.15f, -0.1f}});
      auto step_with = [&](tf::Variable& W, const tf::Tensor& xin, const tf::Tensor& yin) {
        tf::GradientTape tape;
        // Dice and Tversky take probabilities: sigmoid of the logits.
        const tf::Tensor z = tf::matmul(xin, W);
        const bool probs = loss.name() == "dice" || loss.name() == "tversky";
        const tf::Tensor l = loss(yin, probs ? tf::sigmoid(z) : z);
        const tf::Tensor g = tape.gradient(l, W);
        W.assign_sub(g * 0.5f);
        return l;
      };
      tf::Variable eager_w(w0, "eager_w"), traced_w(w0, "traced_w");
      auto traced = tf::function([&](const tf::Tensor& xin, const tf::Tensor& yin) {
        return step_with(traced_w, xin, yin);
      });
      for (int i = 0; i < 3; ++i) {
        const tf::Tensor a = step_with(eager_w, x, y);
        const tf::Tensor b = traced(x, y);
        check_values(b, {a.item<float>()}, 1e-5, 1e-6);
      }
      CHECK(traced.tracing_count() == 1);
      tf::testing::check_close(traced_w.value(), eager_w.value(), 1e-5, 1e-6);
    }
  }
}

TEST_CASE("losses extra: compile strings names and errors", "[keras][cpu]") {
  for (const std::string id : {"binary_focal_crossentropy", "categorical_focal_crossentropy",
                               "dice", "tversky", "BinaryFocalCrossentropy"}) {
    CAPTURE(id);
    const losses::Loss l = losses::get(id);
    REQUIRE(l.defined());
    CHECK(l.impl()->kind == l.name());
  }
  CHECK(losses::get("binary_focal_crossentropy").name() == "binary_focal_crossentropy");
  TF_REQUIRE_THROWS_CONTAINING(losses::get("focal"), tf::InvalidArgumentError, "tversky");
  tf::testing::require_error([] { losses::BinaryFocalCrossentropy(false, 0.25, 2.0, false, 1.5); },
                             {"BinaryFocalCrossentropy", "label_smoothing", "1.5"});
  tf::testing::require_error([] { losses::CategoricalFocalCrossentropy(0.25, std::nan("")); },
                             {"CategoricalFocalCrossentropy", "gamma"});
  tf::testing::require_error(
      [] {
        losses::BinaryFocalCrossentropy()(tf::ones({2, 3}), tf::ones({2, 4}));
      },
      {"binary_focal_crossentropy", "(2, 3)", "(2, 4)"});
  tf::testing::require_error(
      [] {
        losses::Dice(Reduction::AUTO, "dice", {2})(tf::ones({2, 3}), tf::ones({2, 3}));
      },
      {"dice", "axis 2", "(2, 3)"});
  tf::testing::require_error(
      [] {
        losses::Tversky()(tf::ones({2, 3}), tf::constant({{1, 2, 3}, {4, 5, 6}}));
      },
      {"tversky", "int32"});
}

TEST_CASE("losses extra: CategoricalGeneralizedCrossEntropy as Keras 3.15", "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    // keras.losses.CategoricalGeneralizedCrossEntropy(q, reduction)(t, p, sample_weight=w).
    const tf::Tensor t = tf::constant({1, 2, 0});
    const tf::Tensor p = tf::constant({{0.2f, 0.5f, 0.3f}, {0.1f, 0.3f, 0.6f}, {0.7f, 0.2f, 0.1f}});
    const tf::Tensor w = tf::constant({0.4f, 1.6f, 1.0f});
    using GCE = losses::CategoricalGeneralizedCrossEntropy;
    check_values(GCE(0.5)(t, p, w), {0.42742836475372314}, 2e-6);
    check_values(GCE(0.5, Reduction::SUM)(t, p, w), {1.2822850942611694}, 2e-6);
    check_values(GCE(0.5, Reduction::NONE)(t, p, w),
                 {0.23431459069252014, 0.7212905883789062, 0.32667994499206543}, 2e-6);
    check_values(GCE(0.7)(t, p, w), {0.4074885845184326}, 2e-6);
    check_values(GCE(0.7, Reduction::SUM)(t, p, w), {1.2224657535552979}, 2e-6);
    check_values(GCE(0.7, Reduction::NONE)(t, p, w),
                 {0.2196730226278305, 0.6871583461761475, 0.31563442945480347}, 2e-6);
    check_values(GCE()(t, p), {0.45442435145378113}, 2e-6);
    // Float labels with a trailing 1 are the same labels (Keras 3.15 would pair every label with
    // every row here: its one_hot of (3, 1) broadcasts against (3, 3)).
    check_values(GCE()(tf::constant({{1.f}, {2.f}, {0.f}}), p), {0.45442435145378113}, 2e-6);
    // An out-of-range label hits no class: p = 0, loss 1 / q.
    check_values(GCE()(tf::constant({3}), tf::slice(p, {0, 0}, {1, 3})), {2.0});
  }
  // Gradient against central differences (float64).
  const tf::Tensor t = tf::constant({1, 2});
  const std::vector<double> pv = {0.2, 0.5, 0.3, 0.1, 0.3, 0.6};
  const losses::CategoricalGeneralizedCrossEntropy gce(0.7);
  const tf::Tensor w = tf::constant({0.7, 1.3});
  auto value = [&](const std::vector<double>& v) {
    return gce(t, tf::detail::from_doubles(v, tf::TensorShape({2, 3}), tf::float64), w)
        .item<double>();
  };
  const tf::Tensor p = tf::detail::from_doubles(pv, tf::TensorShape({2, 3}), tf::float64);
  tf::GradientTape tape;
  tape.watch(p);
  const tf::Tensor grad = tape.gradient(gce(t, p, w), p);
  REQUIRE(grad.defined());
  std::vector<double> want(pv.size());
  for (size_t i = 0; i < pv.size(); ++i) {
    auto plus = pv, minus = pv;
    plus[i] += 1e-6;
    minus[i] -= 1e-6;
    want[i] = (value(plus) - value(minus)) / 2e-6;
  }
  check_values(grad, want, 1e-6, 1e-7);
  CHECK(losses::get("categorical_generalized_cross_entropy").name() ==
        "categorical_generalized_cross_entropy");
  tf::testing::require_error([] { losses::CategoricalGeneralizedCrossEntropy(1.0); },
                             {"CategoricalGeneralizedCrossEntropy", "q", "(0, 1)"});
  tf::testing::require_error(
      [] {
        losses::CategoricalGeneralizedCrossEntropy()(tf::constant({0, 1, 2}), tf::ones({2, 3}));
      },
      {"categorical_generalized_cross_entropy", "(3,)", "(2, 3)"});
}

namespace {
// (2, 3, 2) inputs for the focal losses along axis 1 (the Keras script's yt, yp, lg, ct).
const tf::Tensor& axis_bin_true() {
  static const tf::Tensor t =
      tf::constant(std::vector<float>{1.f, 0.f, 0.f, 1.f, 1.f, 1.f, 0.f, 0.f, 1.f, 0.f, 0.f, 1.f},
                   tf::TensorShape({2, 3, 2}));
  return t;
}
const tf::Tensor& axis_pred() {
  static const tf::Tensor t = tf::constant(
      std::vector<float>{0.9f, 0.2f, 0.3f, 0.6f, 0.7f, 0.4f, 0.1f, 0.8f, 0.55f, 0.35f, 0.25f, 0.5f},
      tf::TensorShape({2, 3, 2}));
  return t;
}
const tf::Tensor& axis_logits() {
  static const tf::Tensor t = tf::constant(std::vector<float>{1.5f, -0.5f, -1.0f, 0.8f, 0.3f, -2.0f,
                                                              -0.7f, 1.2f, 2.0f, 0.1f, -0.2f, 0.6f},
                                           tf::TensorShape({2, 3, 2}));
  return t;
}
// One class of 3 along axis 1 per (sample, column); the last column of sample 1 has none.
const tf::Tensor& axis_cat_true() {
  static const tf::Tensor t =
      tf::constant(std::vector<float>{1.f, 0.f, 0.f, 0.f, 0.f, 1.f, 0.f, 1.f, 1.f, 0.f, 0.f, 0.f},
                   tf::TensorShape({2, 3, 2}));
  return t;
}
}  // namespace

TEST_CASE("losses extra: focal losses along Keras axis 1 of rank 3 inputs", "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor &bt = axis_bin_true(), &p = axis_pred(), &lg = axis_logits(),
                     &ct = axis_cat_true();
    // keras.losses.BinaryFocalCrossentropy(..., axis=1, reduction=None)(yt, yp): (2, 2).
    const tf::Tensor plain = losses::BinaryFocalCrossentropy(
        false, 0.25, 2.0, false, 0.0, Reduction::NONE, "binary_focal_crossentropy", 1)(bt, p);
    CHECK(plain.shape() == tf::TensorShape({2, 2}));
    check_values(
        plain,
        {0.021751701831817627, 0.14017418026924133, 0.04669857397675514, 0.41869938373565674}, 2e-6,
        1e-7);
    // apply_class_balancing=True, alpha=0.3, gamma=1.5, label_smoothing=0.1.
    check_values(losses::BinaryFocalCrossentropy(true, 0.3, 1.5, false, 0.1, Reduction::NONE,
                                                 "bfce", 1)(bt, p),
                 {0.0252805445343256, 0.0654979795217514, 0.03365490213036537, 0.28509286046028137},
                 2e-6, 1e-7);
    // from_logits=True.
    check_values(losses::BinaryFocalCrossentropy(false, 0.25, 2.0, true, 0.0, Reduction::NONE,
                                                 "bfce", 1)(bt, lg),
                 {0.0432513989508152, 0.5844400525093079, 0.05580218508839607, 0.3747825622558594},
                 2e-6, 1e-7);
    // The default reduction: 0.15683096647262573.
    check_values(losses::BinaryFocalCrossentropy(false, 0.25, 2.0, false, 0.0, Reduction::AUTO,
                                                 "bfce", 1)(bt, p),
                 {0.15683096647262573}, 2e-6);
    // keras.losses.binary_focal_crossentropy(yt, yp, axis=0): (3, 2).
    check_values(losses::binary_focal_crossentropy(bt, p, false, 0.25, 2.0, false, 0.0, 0),
                 {0.0010536058107391, 0.5194830894470215, 0.07658136636018753, 0.06725149601697922,
                  0.025040440261363983, 0.251575767993927},
                 2e-6, 1e-7);

    // keras.losses.CategoricalFocalCrossentropy(..., axis=1, reduction=None)(ct, yp).
    check_values(
        losses::CategoricalFocalCrossentropy(0.25, 2.0, false, 0.0, Reduction::NONE, "cfce", 1)(ct,
                                                                                                p),
        {0.05174615979194641, 0.12206804007291794, 0.01861986704170704, 0.04802858456969261}, 2e-6,
        1e-7);
    // alpha=0.5, gamma=1.0, from_logits=True, label_smoothing=0.2 (smoothed over the last
    // axis's 2 entries, as Keras).
    check_values(losses::CategoricalFocalCrossentropy(0.5, 1.0, true, 0.2, Reduction::NONE, "cfce",
                                                      1)(ct, lg),
                 {0.2329239547252655, 1.3928449153900146, 0.25323647260665894, 0.24822063744068146},
                 2e-6, 1e-7);
    check_values(losses::CategoricalFocalCrossentropy(0.25, 2.0, false, 0.0, Reduction::AUTO,
                                                      "cfce", 1)(ct, p),
                 {0.060115665197372437}, 2e-6);
    // The functions: axis=0, and axis=-2 with label_smoothing=0.3.
    check_values(losses::categorical_focal_crossentropy(ct, p, 0.25, 2.0, false, 0.0, 0),
                 {0.000263401452684775, 0.002231435151770711, 0.013556615449488163, 0.0, 0.0,
                  0.06257176399230957},
                 2e-6, 1e-7);
    check_values(
        losses::categorical_focal_crossentropy(ct, p, 0.25, 2.0, false, 0.3, -2),
        {0.10800638049840927, 0.15691649913787842, 0.10598514974117279, 0.09866826236248016}, 2e-6,
        1e-7);
  }
  // float64 gradients along axis 1 against central differences, weighted per (sample, column).
  const tf::TensorShape shape({2, 3, 2});
  const tf::Tensor w = tf::constant({{0.7, 1.3}, {1.1, 0.4}});
  const auto to64 = [](const tf::Tensor& x) { return tf::cast(x, tf::float64); };
  const std::vector<double> pv = tf::detail::to_double_vector(axis_pred());
  const std::vector<double> lv = tf::detail::to_double_vector(axis_logits());
  const losses::Loss bfce =
      losses::BinaryFocalCrossentropy(true, 0.3, 1.5, true, 0.1, Reduction::AUTO, "bfce", 1);
  const losses::Loss cfce =
      losses::CategoricalFocalCrossentropy(0.5, 1.0, true, 0.2, Reduction::AUTO, "cfce", 1);
  tf::testing::check_gradient(
      [&](const tf::Tensor& x) { return bfce(to64(axis_bin_true()), x, w); }, shape, lv, 1e-6,
      1e-7);
  tf::testing::check_gradient(
      [&](const tf::Tensor& x) { return cfce(to64(axis_cat_true()), x, w); }, shape, lv, 1e-6,
      1e-7);
  tf::testing::check_gradient(
      [&](const tf::Tensor& x) {
        return losses::categorical_focal_crossentropy(to64(axis_cat_true()), x, 0.25, 2.0, false,
                                                      0.0, 1);
      },
      shape, pv, 1e-6, 1e-7);
  // An axis outside the inputs' rank names the loss, the axis and the shape.
  tf::testing::require_error(
      [] {
        losses::BinaryFocalCrossentropy(false, 0.25, 2.0, false, 0.0, Reduction::AUTO, "b", 3)(
            axis_bin_true(), axis_pred());
      },
      {"binary_focal_crossentropy", "axis 3", "(2, 3, 2)"});
  tf::testing::require_error(
      [] {
        losses::categorical_focal_crossentropy(axis_cat_true(), axis_pred(), 0.25, 2.0, false, 0.0,
                                               -4);
      },
      {"categorical_focal_crossentropy", "axis -4", "(2, 3, 2)"});
}
