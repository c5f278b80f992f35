// The metrics of keras/metrics_extra.cpp against Keras 3.15 (TF 2.21) on the same inputs: the
// confusion counts at one or several thresholds (weights, NaN, evenly spaced thresholds), the
// remaining MeanMetricWrapper means over two weighted batches, compile() strings, directions and
// errors, the metrics in evaluate() and their mirrored state.
#include <cmath>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "distribute/strategy.h"
#include "jit/function.h"
#include "keras/losses.h"
#include "keras/metrics.h"
#include "keras/model.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace metrics = tapeflow::keras::metrics;
using tf::testing::check_values;

namespace {

// Two batches and their per-sample weights (w1 for the first, w2 for the second).
const tf::Tensor& t1() {
  static const tf::Tensor t = tf::constant({{0.f, 1.f, 1.f}, {1.f, 0.f, 1.f}});
  return t;
}
const tf::Tensor& p1() {
  static const tf::Tensor t = tf::constant({{0.2f, 0.7f, 0.4f}, {0.9f, 0.6f, 0.3f}});
  return t;
}
const tf::Tensor& t2() {
  static const tf::Tensor t = tf::constant({{1.f, 1.f, 0.f}});
  return t;
}
const tf::Tensor& p2() {
  static const tf::Tensor t = tf::constant({{0.55f, 0.1f, 0.8f}});
  return t;
}
const tf::Tensor& w1() {
  static const tf::Tensor t = tf::constant({0.5f, 2.0f});
  return t;
}
const tf::Tensor& w2() {
  static const tf::Tensor t = tf::constant({1.5f});
  return t;
}

void two_batches(metrics::Metric& m) {
  m.update_state(t1(), p1(), w1());
  m.update_state(t2(), p2(), w2());
}

}  // namespace

TEST_CASE("metrics extra: confusion counts at one and several thresholds as Keras 3.15",
          "[keras][cpu][cuda]") {
  const float nan = std::nanf("");
  const std::vector<double> th = {0.0, 0.35, 0.5, 0.75};
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    // keras.metrics.TruePositives() etc.: update_state(t1, p1, w1), (t2, p2, w2), result().
    struct Case {
      metrics::Metric one, many;
      double want_one;
      std::vector<double> want_many;
    };
    std::vector<Case> cases = {
        {metrics::TruePositives(), metrics::TruePositives(th), 4.0, {8.0, 4.5, 4.0, 2.0}},
        {metrics::FalsePositives(), metrics::FalsePositives(th), 3.5, {4.0, 3.5, 3.5, 1.5}},
        {metrics::TrueNegatives(), metrics::TrueNegatives(th), 0.5, {0.0, 0.5, 0.5, 2.5}},
        {metrics::FalseNegatives(), metrics::FalseNegatives(th), 4.0, {0.0, 3.5, 4.0, 6.0}},
    };
    for (Case& c : cases) {
      CAPTURE(c.one.name());
      REQUIRE(c.one.result().shape() == tf::TensorShape({}));  // nothing seen: a scalar 0
      check_values(c.one.result(), {0.0});
      check_values(c.many.result(), {0.0, 0.0, 0.0, 0.0});
      two_batches(c.one);
      two_batches(c.many);
      REQUIRE(c.one.result().shape() == tf::TensorShape({}));
      check_values(c.one.result(), {c.want_one});
      REQUIRE(c.many.result().shape() == tf::TensorShape({4}));
      check_values(c.many.result(), c.want_many);
      c.one.reset_state();
      check_values(c.one.result(), {0.0});
      REQUIRE(c.one.tracked_variables().size() == 1);
      CHECK(c.one.tracked_variables()[0].first == "accumulator");
      CHECK(c.one.direction().empty());
    }
    // Per-element weights.
    metrics::FalsePositives fp;
    fp.update_state(t1(), p1(), tf::constant({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}));
    check_values(fp.result(), {5.0});
    // A one-element list gives a scalar, as Keras.
    metrics::TruePositives single(std::vector<double>{0.5});
    CHECK(single.result().shape() == tf::TensorShape({}));

    // Out-of-range and NaN predictions. Evenly spaced thresholds clip predictions to [0, 1]
    // (Keras' bucketed path), others compare them as they are; NaN is above no threshold.
    const tf::Tensor yt = tf::constant({1.f, 1.f, 1.f, 0.f, 1.f});
    const tf::Tensor yp = tf::constant({1.5f, -0.2f, nan, 0.9f, 1.0f});
    metrics::TruePositives even(std::vector<double>{0.0, 0.5, 1.0});
    even.update_state(yt, yp);
    check_values(even.result(), {2.0, 2.0, 0.0});
    metrics::FalseNegatives even_fn(std::vector<double>{0.0, 0.5, 1.0});
    even_fn.update_state(yt, yp);
    check_values(even_fn.result(), {2.0, 2.0, 4.0});
    metrics::TruePositives uneven(std::vector<double>{0.2, 1.0});
    uneven.update_state(yt, yp);
    check_values(uneven.result(), {2.0, 1.0});

    // Keras' buckets at evenly spaced thresholds: 0.90000004 (the float after 0.9) is p * 10 =
    // 9 in float32, so it lies at or below the threshold 0.9 (Keras 3.15 with thresholds i / 10).
    std::vector<double> tenths;
    for (int i = 0; i <= 10; ++i) tenths.push_back(i / 10.0);
    metrics::TruePositives bucketed(tenths);
    bucketed.update_state(tf::constant({1.f}), tf::constant({std::nextafter(0.9f, 1.0f)}));
    check_values(bucketed.result(), {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
    // An infinite weight counts where its element does and nowhere else (no inf * 0 NaN).
    const float inf = std::numeric_limits<float>::infinity();
    const tf::Tensor four = tf::constant({0.1f, 0.5f, 0.9f, 0.2f});
    const tf::Tensor winf = tf::constant({inf, 1.f, 2.f, 3.f});
    metrics::FalsePositives fp_inf(tenths);
    fp_inf.update_state(tf::zeros({4}), four, winf);
    check_values(fp_inf.result(), {inf, 6, 3, 3, 3, 2, 2, 2, 2, 0, 0});
    metrics::TruePositives tp_inf(std::vector<double>{0.3, 0.6});
    tp_inf.update_state(tf::constant({1.f, 1.f, 0.f, 1.f}), tf::constant({0.1f, 0.5f, 0.9f, 0.7f}),
                        winf);
    check_values(tp_inf.result(), {4, 3});
  }
}

TEST_CASE("metrics extra: wrapper means over weighted batches match Keras 3.15",
          "[keras][cpu][cuda]") {
  // keras.metrics.X(): result() empty, then update_state(a, sample_weight=w1),
  // update_state(b, sample_weight=w2), result(); and a fresh metric after update_state(a).
  const tf::Tensor rt = tf::constant({{0.2f, 0.5f, 0.3f}, {0.9f, 0.05f, 0.05f}});
  const tf::Tensor rp = tf::constant({{0.1f, 0.6f, 0.3f}, {0.7f, 0.2f, 0.1f}});
  const tf::Tensor rt2 = tf::constant({{1.f, 2.f, 3.f}});
  const tf::Tensor rp2 = tf::constant({{1.5f, 1.f, 4.f}});
  const tf::Tensor ht = tf::constant({{0.f, 1.f, 1.f}, {1.f, 0.f, 0.f}});
  const tf::Tensor hp = tf::constant({{-0.3f, 0.8f, 1.4f}, {0.6f, 0.2f, -0.9f}});
  const tf::Tensor ht2 = tf::constant({{1.f, 0.f, 1.f}});
  const tf::Tensor hp2 = tf::constant({{0.1f, -0.5f, 2.0f}});
  struct Case {
    metrics::Metric m, fresh;
    bool hinge;
    double two, one;
  };
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    std::vector<Case> cases = {
        {metrics::KLDivergence(), metrics::KLDivergence(), false, 0.10441646724939346,
         0.08483976125717163},
        {metrics::Poisson(), metrics::Poisson(), false, 0.581271231174469, 0.5989549160003662},
        {metrics::LogCoshError(), metrics::LogCoshError(), false, 0.12926310300827026,
         0.0070514976978302},
        {metrics::MeanSquaredLogarithmicError(), metrics::MeanSquaredLogarithmicError(), false,
         0.03888183832168579, 0.007350352592766285},
        {metrics::Hinge(), metrics::Hinge(), true, 0.4958333373069763, 0.4333333373069763},
        {metrics::SquaredHinge(), metrics::SquaredHinge(), true, 0.4229166805744171,
         0.3566666841506958},
        {metrics::CategoricalHinge(), metrics::CategoricalHinge(), true, 0.29999998211860657,
         0.29999998211860657},
        {metrics::CosineSimilarity(), metrics::CosineSimilarity(), false, 0.9627782106399536,
         0.976455807685852},
        {metrics::PearsonCorrelation(), metrics::PearsonCorrelation(), false, 0.9102041721343994,
         0.9925026893615723},
        {metrics::ConcordanceCorrelation(), metrics::ConcordanceCorrelation(), false,
         0.82198166847229, 0.89509117603302},
    };
    for (Case& c : cases) {
      CAPTURE(c.m.name());
      check_values(c.m.result(), {0.0});
      if (c.hinge) {
        c.m.update_state(ht, hp, w1());
        c.m.update_state(ht2, hp2, w2());
        c.fresh.update_state(ht, hp);
      } else {
        // KLDivergence's second batch: distributions (the rows divided by 6 and 6.5).
        const bool kl = c.m.name() == "kl_divergence";
        c.m.update_state(rt, rp, w1());
        c.m.update_state(kl ? tf::constant({{1.f / 6, 2.f / 6, 3.f / 6}}) : rt2,
                         kl ? tf::constant({{1.5f / 6.5f, 1.f / 6.5f, 4.f / 6.5f}}) : rp2, w2());
        c.fresh.update_state(rt, rp);
      }
      check_values(c.m.result(), {c.two}, 2e-6, 1e-6);
      check_values(c.fresh.result(), {c.one}, 2e-6, 1e-6);
    }
    // A constant row has no Pearson coefficient: NaN, as Keras.
    metrics::PearsonCorrelation constant_row;
    constant_row.update_state(tf::constant({{1.f, 1.f, 1.f}}), tf::constant({{1.f, 2.f, 3.f}}));
    CHECK(std::isnan(constant_row.result().item<float>()));
    metrics::CosineSimilarity over_batch("cos", 0);
    over_batch.update_state(rt, rp);
    check_values(over_batch.result(), {0.9867528080940247}, 2e-6);
  }
}

TEST_CASE("metrics extra: compile strings names directions and errors", "[keras][cpu]") {
  const std::vector<std::pair<std::string, std::string>> dirs = {
      {"true_positives", ""},
      {"TruePositives", ""},
      {"false_positives", ""},
      {"true_negatives", ""},
      {"false_negatives", ""},
      {"kl_divergence", ""},
      {"poisson", ""},
      {"log_cosh_error", "down"},
      {"msle", "down"},
      {"hinge", "down"},
      {"squared_hinge", "down"},
      {"categorical_hinge", "down"},
      {"cosine_similarity", "up"},
      {"pearson_correlation", "up"},
      {"concordance_correlation", "up"},
      {"mean_squared_logarithmic_error", "down"},
  };
  for (const auto& [id, dir] : dirs) {
    CAPTURE(id);
    const metrics::Metric m = metrics::get(id);
    CHECK(m.name() == id);
    CHECK(m.direction() == dir);
  }
  CHECK(metrics::LogCoshError().name() == "logcosh");  // Keras 3.15's default name
  TF_REQUIRE_THROWS_CONTAINING(metrics::get("true_positive"), tf::InvalidArgumentError,
                               "concordance_correlation");
  tf::testing::require_error([] { metrics::TruePositives(1.5); },
                             {"TruePositives", "thresholds", "1.5"});
  tf::testing::require_error([] { metrics::FalseNegatives(std::vector<double>{}); },
                             {"FalseNegatives", "empty"});
  tf::testing::require_error(
      [] {
        metrics::TrueNegatives().update_state(tf::ones({2, 3}), tf::ones({2, 2}));
      },
      {"true_negatives", "(2, 3)", "(2, 2)"});
  tf::testing::require_error(
      [] { metrics::FalsePositives().update_state(tf::ones({4}), tf::ones({4}), tf::ones({3})); },
      {"false_positives", "sample_weight of shape (3,)", "(4,)"});
  tf::testing::require_error(
      [] {
        metrics::PearsonCorrelation().update_state(tf::ones({2, 3}), tf::ones({2, 4}));
      },
      {"pearson_correlation", "(2, 3)", "(2, 4)"});
  tf::testing::require_error(
      [] {
        metrics::ConcordanceCorrelation("cc", 2).update_state(tf::ones({2, 3}), tf::ones({2, 3}));
      },
      {"concordance_correlation", "axis 2", "(2, 3)"});
}

namespace {
// y_pred = x (a bias-free Dense(1) with kernel 1, never trained): the metrics of evaluate()
// are those of (y, x), checked against numpy's by hand: threshold 0.5 counts tp 2, fp 1, fn 1;
// mse 0.145, msle 0.0699148, hinge (labels mapped to -1/1) 0.8166667.
K::Sequential counting_model() {
  K::Sequential m({K::layers::Dense(1, "", false)});
  m.build(tf::TensorShape({tf::None, 1}));
  m.set_weights({tf::constant({{1.0f}})});
  m.compile(K::optimizers::SGD(0.0), K::losses::MeanSquaredError(),
            {"true_positives", "false_positives", "false_negatives", "msle", "hinge"});
  return m;
}
const std::vector<double> kCountingWant = {
    0.145, 2.0, 1.0, 1.0, 0.06991484016180038, 0.8166666626930237};
}  // namespace

TEST_CASE("metrics extra: a compiled metric with several results is a clear error",
          "[keras][cpu]") {
  K::Sequential m({K::layers::Dense(1, "", false)});
  m.build(tf::TensorShape({tf::None, 1}));
  m.compile(K::optimizers::SGD(0.0), K::losses::MeanSquaredError(),
            {metrics::TruePositives(std::vector<double>{0.3, 0.6})});
  tf::testing::require_error(
      [&] {
        m.evaluate(tf::ones({4, 1}), tf::ones({4, 1}), {.verbose = 0});
      },
      {"true_positives", "(2,)", "one number per metric"});
}

TEST_CASE("metrics extra: compiled metrics in evaluate and fit match a hand computation",
          "[keras][cpu]") {
  const tf::Tensor x = tf::constant({{0.9f}, {0.2f}, {0.6f}, {0.4f}, {0.7f}, {0.1f}});
  const tf::Tensor y = tf::constant({{1.f}, {0.f}, {0.f}, {1.f}, {1.f}, {0.f}});
  auto m = counting_model();
  const auto e = m.evaluate(x, y, {.batch_size = 4, .verbose = 0});
  REQUIRE(e.size() == kCountingWant.size());
  for (size_t i = 0; i < e.size(); ++i) CHECK(e[i] == Approx(kCountingWant[i]).epsilon(1e-5));
  auto trained = counting_model();
  const K::History h = trained.fit(x, y, {.epochs = 1, .batch_size = 4, .verbose = 0});
  CHECK(h.history.at("true_positives")[0] == Approx(2.0));
  CHECK(h.history.at("false_negatives")[0] == Approx(1.0));
  CHECK(h.history.at("msle")[0] == Approx(0.06991484016180038).epsilon(1e-5));
}

TEST_CASE("metrics extra: counts and means under a MirroredStrategy are the global ones",
          "[keras][cpu][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  const tf::Tensor x = tf::constant({{0.9f}, {0.2f}, {0.6f}, {0.4f}, {0.7f}, {0.1f}});
  const tf::Tensor y = tf::constant({{1.f}, {0.f}, {0.f}, {1.f}, {1.f}, {0.f}});
  tf::distribute::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  std::optional<K::Sequential> mirrored;
  std::vector<double> e;
  {
    auto scope = strategy.scope();
    mirrored.emplace(counting_model());
    e = mirrored->evaluate(x, y, {.batch_size = 4, .verbose = 0});
  }
  REQUIRE(e.size() == kCountingWant.size());
  for (size_t i = 0; i < e.size(); ++i) CHECK(e[i] == Approx(kCountingWant[i]).epsilon(1e-5));
}

namespace {
// 24 labels and predictions drawn by numpy (RandomState(1); one prediction set to 1.3, one to
// -0.2), seen as two batches of 12 with scalar weights.
const std::vector<float> kRateTrue = {1, 1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 1,
                                      0, 1, 0, 1, 0, 1, 0, 0, 1, 1, 0, 1};
const std::vector<float> kRatePred = {
    1.2999999523162842f,  0.8946066498756409f,  0.08504421263933182f,  0.039054784923791885f,
    0.16983042657375336f, 0.8781424760818481f,  0.09834683686494827f,  0.42110762000083923f,
    0.9578895568847656f,  0.5331652760505676f,  0.6918771266937256f,   0.3155156373977661f,
    0.6865009069442749f,  0.8346256613731384f,  0.018288277089595795f, -0.20000000298023224f,
    0.988861083984375f,   0.7481656670570374f,  0.2804439961910248f,   0.7892793416976929f,
    0.10322600603103638f, 0.44789353013038635f, 0.9085955023765564f,   0.29361414909362793f};
tf::Tensor rate_part(const std::vector<float>& v, int half) {
  return tf::constant(std::vector<float>(v.begin() + 12 * half, v.begin() + 12 * (half + 1)),
                      tf::TensorShape({12}));
}
}  // namespace

TEST_CASE("metrics extra: rates at a bound on another rate as Keras 3.15", "[keras][cpu][cuda]") {
  // keras.metrics.X(bound, num_thresholds=n): update_state(first 12, sample_weight=0.5755507),
  // update_state(last 12, sample_weight=0.2600572), result().
  struct Case {
    std::function<metrics::Metric(int)> make;
    std::vector<double> want;  // num_thresholds 200, 7, 1
  };
  const std::vector<Case> cases = {
      {[](int n) { return metrics::SensitivityAtSpecificity(0.5, n); },
       {0.6490080952644348, 0.5816802382469177, 0.5816802382469177}},
      {[](int n) { return metrics::SpecificityAtSensitivity(0.6, n); },
       {0.5511770248413086, 0.4578154683113098, 0.0}},
      {[](int n) { return metrics::PrecisionAtRecall(0.7, n); }, {0.5, 0.4444444477558136, 0.0}},
      {[](int n) { return metrics::RecallAtPrecision(0.6, n); }, {0.1490081250667572, 0.0, 0.0}},
  };
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (const Case& c : cases) {
      const int ns[] = {200, 7, 1};
      for (size_t i = 0; i < 3; ++i) {
        metrics::Metric m = c.make(ns[i]);
        CAPTURE(m.name(), ns[i]);
        check_values(m.result(), {0.0});
        m.update_state(rate_part(kRateTrue, 0), rate_part(kRatePred, 0),
                       tf::constant(0.5755506753921509f));
        m.update_state(rate_part(kRateTrue, 1), rate_part(kRatePred, 1),
                       tf::constant(0.26005715131759644f));
        check_values(m.result(), {c.want[i]}, 2e-6, 1e-7);
        CHECK(m.direction() == "up");
        REQUIRE(m.tracked_variables().size() == 4);
        CHECK(m.tracked_variables()[2].first == "true_negatives");
      }
    }
    // A bound of 1 on the first batch alone (unweighted).
    const std::vector<std::pair<metrics::Metric, double>> bound1 = {
        {metrics::SensitivityAtSpecificity(1.0), 0.25},
        {metrics::SpecificityAtSensitivity(1.0), 0.5},
        {metrics::PrecisionAtRecall(1.0), 0.5},
        {metrics::RecallAtPrecision(1.0), 0.25}};
    for (auto [m, want] : bound1) {
      CAPTURE(m.name());
      m.update_state(rate_part(kRateTrue, 0), rate_part(kRatePred, 0));
      check_values(m.result(), {want}, 1e-6);
    }
    // class_id: the column of a (6, 4) batch.
    const tf::Tensor t64 = tf::constant(kRateTrue, tf::TensorShape({6, 4}));
    const tf::Tensor p64 = tf::constant(kRatePred, tf::TensorShape({6, 4}));
    const double want_par[] = {1.0, 0.8333333134651184, 0.0, 0.5};
    const double want_sas[] = {0.5, 0.20000000298023224, 0.0, 0.0};
    for (int c = 0; c < 4; ++c) {
      CAPTURE(c);
      metrics::PrecisionAtRecall par(0.5, 200, c);
      metrics::SensitivityAtSpecificity sas(0.5, 200, c);
      par.update_state(t64, p64);
      sas.update_state(t64, p64);
      check_values(par.result(), {want_par[c]}, 1e-6);
      check_values(sas.result(), {want_sas[c]}, 1e-6);
    }
    // Only negatives: no recall reaches the bound.
    metrics::RecallAtPrecision one_class(0.8);
    one_class.update_state(tf::zeros({4}), tf::constant({0.1f, 0.2f, 0.3f, 0.9f}));
    check_values(one_class.result(), {0.0});
  }
  tf::testing::require_error([] { metrics::PrecisionAtRecall(1.5); },
                             {"PrecisionAtRecall", "recall", "1.5"});
  tf::testing::require_error([] { metrics::RecallAtPrecision(0.5, 0); },
                             {"RecallAtPrecision", "num_thresholds", "0"});
  tf::testing::require_error(
      [] {
        metrics::PrecisionAtRecall(0.5, 200, 4).update_state(tf::ones({2, 4}), tf::ones({2, 4}));
      },
      {"precision_at_recall", "class_id 4", "(2, 4)"});
}

TEST_CASE("metrics extra: IoU metrics as Keras 3.15", "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    // keras.metrics.MeanIoU(num_classes=3): Keras' int state truncates the weights (1.5 -> 1,
    // 2.7 -> 2) and the prediction 0.7 (-> class 0).
    const tf::Tensor yt = tf::constant({0.f, 1.f, 2.f, 2.f, 1.f, 0.f});
    const tf::Tensor yp = tf::constant({0.f, 2.f, 2.f, 1.f, 1.f, 0.7f});
    metrics::MeanIoU mean_iou(3);
    check_values(mean_iou.result(), {0.0});
    mean_iou.update_state(yt, yp, tf::constant({1.5f, 2.f, 1.f, 1.f, 3.f, 1.f}));
    mean_iou.update_state(tf::constant({{2, 0}}), tf::constant({{2, 1}}), tf::constant({2.7f}));
    check_values(mean_iou.result(), {0.4583333432674408}, 1e-6);
    REQUIRE(mean_iou.tracked_variables().size() == 1);
    CHECK(mean_iou.tracked_variables()[0].first == "total_confusion_matrix");
    check_values(mean_iou.variables()[0].value(), {2, 2, 0, 0, 3, 2, 0, 1, 3});
    CHECK(mean_iou.direction() == "up");

    metrics::IoU iou02(3, {0, 2});
    iou02.update_state(yt, yp);
    check_values(iou02.result(), {0.6666666865348816}, 1e-6);
    metrics::MeanIoU ignoring(3, "mean_io_u", 2);
    ignoring.update_state(yt, yp);
    check_values(ignoring.result(), {0.5}, 1e-6);
    // Labels or predictions outside [0, 3) count for nothing.
    metrics::MeanIoU out_of_bounds(3);
    out_of_bounds.update_state(tf::constant({0, 5, -1, 1}), tf::constant({0, 1, 1, 7}));
    check_values(out_of_bounds.result(), {0.9999997615814209}, 1e-6);

    // BinaryIoU: fractional weights truncate to 0 (Keras' int state): nothing counted.
    metrics::BinaryIoU binary({0, 1}, 0.3);
    binary.update_state(tf::constant({0.f, 1.f, 0.f, 1.f}), tf::constant({0.1f, 0.2f, 0.4f, 0.7f}),
                        tf::constant({0.2f, 0.3f, 0.4f, 0.1f}));
    check_values(binary.result(), {0.0});
    metrics::BinaryIoU binary1({1});
    binary1.update_state(tf::constant({0.f, 1.f, 0.f, 1.f}),
                         tf::constant({0.1f, 0.5f, 0.4f, 0.7f}));
    binary1.update_state(tf::constant({1.f, 1.f}), tf::constant({0.2f, 0.9f}));
    check_values(binary1.result(), {0.7499999403953552}, 1e-6);

    const tf::Tensor oh_t =
        tf::constant({{0.f, 0.f, 1.f}, {1.f, 0.f, 0.f}, {0.f, 1.f, 0.f}, {1.f, 0.f, 0.f}});
    const tf::Tensor oh_p = tf::constant(
        {{0.2f, 0.3f, 0.5f}, {0.1f, 0.2f, 0.7f}, {0.5f, 0.3f, 0.1f}, {0.1f, 0.4f, 0.5f}});
    metrics::OneHotIoU one_hot(3, {0, 2});
    one_hot.update_state(oh_t, oh_p, tf::constant({1.f, 2.f, 3.f, 4.f}));
    check_values(one_hot.result(), {0.0714285746216774}, 1e-6);
    metrics::OneHotMeanIoU one_hot_mean(3);
    one_hot_mean.update_state(oh_t, oh_p);
    check_values(one_hot_mean.result(), {0.1111111119389534}, 1e-6);
  }
  CHECK(metrics::get("binary_io_u").name() == "binary_io_u");
  CHECK(metrics::MeanIoU(2).name() == "mean_io_u");
  tf::testing::require_error(
      [] {
        metrics::IoU(3, {0, 3});
      },
      {"IoU", "target class id 3", "[0, 3)"});
  tf::testing::require_error([] { metrics::MeanIoU(0); }, {"MeanIoU", "num_classes", "0"});
  tf::testing::require_error([] { metrics::MeanIoU(3).update_state(tf::ones({4}), tf::ones({5})); },
                             {"mean_io_u", "(4,)", "(5,)"});
  tf::testing::require_error(
      [] { metrics::MeanIoU(3).update_state(tf::ones({4}), tf::ones({4}), tf::ones({3})); },
      {"mean_io_u", "sample_weight of shape (3,)", "(4,)"});
}

TEST_CASE("metrics extra: one trace of the IoU metrics serves every batch size", "[keras][cpu]") {
  auto make = [] {
    return std::vector<metrics::Metric>{metrics::MeanIoU(3), metrics::BinaryIoU({0, 1}, 0.5),
                                        metrics::OneHotMeanIoU(3)};
  };
  auto eager = make(), traced = make();
  auto update = [](std::vector<metrics::Metric>& ms, const tf::Tensor& y, const tf::Tensor& p,
                   const tf::Tensor& w) {
    const tf::Tensor y_class = tf::cast(tf::argmax(y, 1), tf::float32);
    const tf::Tensor p_class = tf::cast(tf::argmax(p, 1), tf::float32);
    ms[0].update_state(y_class, p_class, w);
    ms[1].update_state(tf::slice(y, {0, 0}, {-1, 1}), tf::slice(p, {0, 0}, {-1, 1}), w);
    ms[2].update_state(y, p, w);
  };
  auto step = tf::function(
      [&](const tf::Tensor& y, const tf::Tensor& p, const tf::Tensor& w) {
        update(traced, y, p, w);
        return traced[0].result();
      },
      tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 3}, tf::float32),
                                              tf::TensorSpec({tf::None, 3}, tf::float32),
                                              tf::TensorSpec({tf::None}, tf::float32)}});
  const tf::Tensor y = tf::one_hot(tf::constant({0, 1, 2, 2, 1, 0, 0, 2}), 3);
  const tf::Tensor p = tf::constant({{0.7f, 0.2f, 0.1f},
                                     {0.1f, 0.3f, 0.6f},
                                     {0.2f, 0.2f, 0.6f},
                                     {0.3f, 0.4f, 0.3f},
                                     {0.1f, 0.8f, 0.1f},
                                     {0.5f, 0.1f, 0.4f},
                                     {0.2f, 0.5f, 0.3f},
                                     {0.1f, 0.1f, 0.8f}});
  const tf::Tensor w = tf::constant({1.f, 2.f, 1.f, 3.f, 1.f, 1.f, 2.f, 1.f});
  int64_t begin = 0;
  for (int64_t rows : {4, 3, 1}) {
    const tf::Tensor yr = tf::slice(y, {begin, 0}, {rows, 3});
    const tf::Tensor pr = tf::slice(p, {begin, 0}, {rows, 3});
    const tf::Tensor wr = tf::slice(w, {begin}, {rows});
    update(eager, yr, pr, wr);
    step(yr, pr, wr);
    begin += rows;
  }
  CHECK(step.tracing_count() == 1);
  for (size_t i = 0; i < eager.size(); ++i) {
    CAPTURE(eager[i].name());
    check_values(traced[i].result(), {eager[i].result().item<float>()}, 1e-6);
  }
}

TEST_CASE("metrics extra: mirrored IoU confusion matrices are summed over replicas",
          "[keras][cpu][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  const std::vector<tf::Device> devs = {tf::Device::parse("/cpu:0"), tf::Device::parse("/cpu:1")};
  metrics::MeanIoU iou(3);
  metrics::TruePositives tp;
  {
    tf::detail::MirrorVariablesScope mirror(devs);
    iou = metrics::MeanIoU(3);
    tp = metrics::TruePositives();
  }
  REQUIRE(iou.variables()[0].is_mirrored());
  const tf::Tensor yt = tf::constant({0.f, 1.f, 2.f, 2.f, 1.f, 0.f});
  const tf::Tensor yp = tf::constant({0.f, 2.f, 2.f, 1.f, 1.f, 0.f});
  for (int r = 0; r < 2; ++r) {
    tf::detail::ReplicaComponentScope replica(r);
    tf::DeviceScope place(devs[static_cast<size_t>(r)]);
    iou.update_state(tf::slice(yt, {3 * r}, {3}), tf::slice(yp, {3 * r}, {3}));
    tp.update_state(tf::slice(yt, {3 * r}, {3}), tf::slice(yp, {3 * r}, {3}));
  }
  metrics::MeanIoU iou1(3);
  metrics::TruePositives tp1;
  iou1.update_state(yt, yp);
  tp1.update_state(yt, yp);
  check_values(iou.result(), {iou1.result().item<float>()}, 1e-6);
  check_values(tp.result(), {tp1.result().item<float>()}, 1e-6);
  check_values(tp.result(), {4.0});
}
