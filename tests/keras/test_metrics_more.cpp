// The metrics of keras/metrics_more.cpp against Keras 3.15 (TF 2.21) on the same inputs: the
// error and crossentropy means, top-k accuracies, Precision, Recall and AUC (curves, summation
// methods, weights, NaN and empty states), traced updates, mirrored state, compile() strings and
// directions, and the metrics in fit() and evaluate().
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "distribute/strategy.h"
#include "jit/function.h"
#include "keras/losses.h"
#include "keras/metrics.h"
#include "keras/model.h"
#include "ops/binary.h"
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

const tf::Tensor& reg_true() {
  static const tf::Tensor t = tf::constant({{0.f, 1.f, 2.f}, {1.5f, -0.5f, 3.f}});
  return t;
}
const tf::Tensor& reg_pred() {
  static const tf::Tensor t = tf::constant({{0.5f, 1.f, -1.f}, {2.f, 0.25f, 3.5f}});
  return t;
}

// 40 labels, predictions and weights drawn by numpy (RandomState(0)) for the AUC cases.
tf::Tensor auc_true() {
  return tf::constant(
      std::vector<float>{1, 1, 1, 1, 0, 1, 0, 1, 1, 0, 1, 1, 1, 1, 0, 0, 0, 1, 1, 1,
                         1, 1, 0, 1, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 1, 1, 1},
      tf::TensorShape({40}));
}
tf::Tensor auc_pred() {
  return tf::constant(
      std::vector<float>{
          0.5516555309295654f,  0.6059224009513855f,  0.7883418202400208f,  0.34215784072875977f,
          0.46673670411109924f, 0.7694464921951294f,  0.14726778864860535f, 0.3902484178543091f,
          0.5207998752593994f,  0.254597544670105f,   0.6991377472877502f,  0.6070210933685303f,
          0.9918617010116577f,  0.3714313805103302f,  0.14621372520923615f, 0.11291666328907013f,
          0.4571758210659027f,  0.4773041307926178f,  0.6264175772666931f,  0.4710979163646698f,
          0.41127872467041016f, 0.3772626221179962f,  0.4594307243824005f,  0.3967280685901642f,
          0.1376076489686966f,  0.5581076145172119f,  0.5746952891349792f,  0.36797091364860535f,
          0.8865614533424377f,  0.06726888567209244f, 0.6835216283798218f,  0.6280558705329895f,
          0.6837327480316162f,  0.7233918905258179f,  0.5174844861030579f,  0.32743147015571594f,
          0.49796488881111145f, 0.3841376006603241f,  0.5072981715202332f,  0.3831094205379486f},
      tf::TensorShape({40}));
}
tf::Tensor auc_weight() {
  return tf::constant(
      std::vector<float>{
          0.6359663605690002f,  0.828525960445404f,   0.12829498946666718f, 1.384944200515747f,
          1.1332029104232788f,  0.5307790040969849f,  1.0464961528778076f,  0.18788102269172668f,
          1.1518930196762085f,  1.8585923910140991f,  0.6371378898620605f,  1.3348207473754883f,
          0.26359573006629944f, 1.4326543807983398f,  0.5788121819496155f,  0.3663827180862427f,
          1.1730258464813232f,  0.04021509364247322f, 1.6578800678253174f,  0.009390952065587044f,
          1.355633020401001f,   0.5400159358978271f,  1.4703880548477173f,  1.9243770837783813f,
          0.4975062906742096f,  1.1523146629333496f,  1.1840838193893433f,  1.1445038318634033f,
          0.44616326689720154f, 1.9054980278015137f,  0.894250750541687f,   1.6928173303604126f,
          1.3989585638046265f,  0.5948739051818848f,  1.6275956630706787f,  0.793011486530304f,
          1.7622064352035522f,  1.1625458002090454f,  1.7634707689285278f,  1.3850631713867188f},
      tf::TensorShape({40}));
}

double result_of(metrics::Metric m) {
  return m.result().item<float>();
}

// Updates `eager` directly and `traced` through a tf::function whose signature has a None batch,
// with (t1, p1, w1) then (t2, p2, w2): one trace, and the traced result equals the eager one.
void check_traced_equals_eager(metrics::Metric& eager, metrics::Metric& traced,
                               const tf::Tensor& t1, const tf::Tensor& p1, const tf::Tensor& w1,
                               const tf::Tensor& t2, const tf::Tensor& p2, const tf::Tensor& w2) {
  const int64_t cols = p1.shape()[1];
  auto step = tf::function(
      [&](const tf::Tensor& y, const tf::Tensor& p, const tf::Tensor& w) {
        traced.update_state(y, p, w);
        return traced.result();
      },
      tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, cols}, tf::float32),
                                              tf::TensorSpec({tf::None, cols}, tf::float32),
                                              tf::TensorSpec({tf::None}, tf::float32)}});
  eager.update_state(t1, p1, w1);
  eager.update_state(t2, p2, w2);
  step(t1, p1, w1);
  step(t2, p2, w2);
  CHECK(step.tracing_count() == 1);
  check_values(traced.result(), tf::detail::to_double_vector(eager.result()), 1e-6);
}

}  // namespace

TEST_CASE("metrics more: error and crossentropy means match Keras 3.15", "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor w = tf::constant({0.7f, 0.3f});
    metrics::MeanAbsoluteError mae;
    check_values(mae.result(), {0.0});  // nothing seen: 0
    mae.update_state(reg_true(), reg_pred());
    mae.update_state(tf::constant({{1.f, 1.f, 1.f}}), tf::constant({{0.f, 0.f, 4.f}}));
    check_values(mae.result(), {1.138888836}, 1e-6);
    mae.reset_state();
    mae.update_state(reg_true(), reg_pred(), w);
    check_values(mae.result(), {0.991666615}, 1e-6);

    metrics::MeanAbsolutePercentageError mape;
    mape.update_state(reg_true(), reg_pred());  // a zero label divides by 1e-7
    check_values(mape.result(), {83333392.0}, 1e-6);

    metrics::RootMeanSquaredError rmse;
    check_values(rmse.result(), {0.0});
    rmse.update_state(reg_true(), reg_pred());
    rmse.update_state(tf::constant({{1.f, 1.f, 1.f}}), tf::constant({{0.f, 0.f, 4.f}}));
    check_values(rmse.result(), {1.538848758}, 1e-6);
    rmse.reset_state();
    rmse.update_state(reg_true(), reg_pred(), w);
    check_values(rmse.result(), {1.504853249}, 1e-6);
    // Rank-1 inputs: each element is a sample.
    rmse.reset_state();
    rmse.update_state(tf::constant({1.f, 2.f, 3.f}), tf::constant({1.f, 2.f, 5.f}));
    rmse.update_state(tf::constant({0.f}), tf::constant({3.f}));
    check_values(rmse.result(), {1.802775621}, 1e-6);

    metrics::BinaryCrossentropy bce;
    bce.update_state(tf::constant({{0.f, 1.f}, {0.f, 0.f}}),
                     tf::constant({{0.6f, 0.4f}, {0.4f, 0.6f}}));
    check_values(bce.result(), {0.814924479}, 1e-6);
    metrics::BinaryCrossentropy bce_logits("bce", /*from_logits=*/true, /*label_smoothing=*/0.2);
    bce_logits.update_state(tf::constant({{0.f, 1.f}, {0.f, 0.f}}),
                            tf::constant({{0.6f, -0.4f}, {1.4f, 0.6f}}), tf::constant({1.f, 3.f}));
    check_values(bce_logits.result(), {1.153027415}, 1e-6);
    metrics::CategoricalCrossentropy cce;
    cce.update_state(tf::constant({{0.f, 1.f, 0.f}, {0.f, 0.f, 1.f}}),
                     tf::constant({{0.05f, 0.95f, 0.f}, {0.1f, 0.8f, 0.1f}}));
    check_values(cce.result(), {1.176939249}, 1e-6);
    metrics::CategoricalCrossentropy cce_logits("cce", true, 0.1);
    cce_logits.update_state(tf::constant({{0.f, 1.f, 0.f}, {0.f, 0.f, 1.f}}),
                            tf::constant({{0.5f, 1.5f, -1.f}, {0.1f, 0.8f, 0.1f}}));
    check_values(cce_logits.result(), {0.9272995}, 1e-6);
  }
}

TEST_CASE("metrics more: top-k accuracies with ties and NaN as Keras 3.15", "[keras][cpu][cuda]") {
  const float nan = std::nanf("");
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    // Row 1 ties three classes at the top (all in the top 1, as TF's in_top_k); row 3's label
    // has a NaN prediction (never in).
    const tf::Tensor p = tf::constant({{0.1f, 0.5f, 0.2f, 0.2f},
                                       {0.3f, 0.3f, 0.3f, 0.1f},
                                       {0.4f, 0.1f, 0.2f, 0.3f},
                                       {nan, 0.1f, 0.2f, 0.3f}});
    const tf::Tensor onehot = tf::constant(
        {{0.f, 0.f, 1.f, 0.f}, {0.f, 0.f, 1.f, 0.f}, {0.f, 1.f, 0.f, 0.f}, {1.f, 0.f, 0.f, 0.f}});
    const tf::Tensor labels = tf::constant({{2}, {2}, {1}, {0}});
    const double want[] = {0.25, 0.5, 0.5};  // k = 1, 2, 3
    for (int k = 1; k <= 3; ++k) {
      CAPTURE(k);
      metrics::TopKCategoricalAccuracy top(k);
      top.update_state(onehot, p);
      check_values(top.result(), {want[k - 1]});
      metrics::SparseTopKCategoricalAccuracy sparse(k);
      sparse.update_state(labels, p);
      check_values(sparse.result(), {want[k - 1]});
    }
    metrics::SparseTopKCategoricalAccuracy weighted(2);
    weighted.update_state(tf::constant({2, 2, 1, 0}), p, tf::constant({1.f, 2.f, 3.f, 4.f}));
    check_values(weighted.result(), {0.300000012}, 1e-6);
    // Labels out of range are never in the top k.
    metrics::SparseTopKCategoricalAccuracy out_of_range(2);
    out_of_range.update_state(tf::constant({5, 2, 1, -1}), p);
    check_values(out_of_range.result(), {0.25});
    // The per-sample function keeps y_true's shape.
    CHECK(metrics::sparse_top_k_categorical_accuracy(labels, p, 2).shape() ==
          tf::TensorShape({4, 1}));
    check_values(metrics::top_k_categorical_accuracy(onehot, p, 2), {1, 1, 0, 0});
    // A NaN or an inf anywhere in a row makes the row miss, even when the label's prediction
    // leads (TF 2.21's in_top_k and Keras 3.15: [False, False, True], 1/3).
    const float inf = std::numeric_limits<float>::infinity();
    const tf::Tensor q = tf::constant({{1.f, nan, 0.5f}, {1.f, 0.2f, inf}, {1.f, 2.f, 0.f}});
    metrics::SparseTopKCategoricalAccuracy rows(2);
    rows.update_state(tf::constant({0, 0, 1}), q);
    check_values(rows.result(), {0.333333343}, 1e-6);
    metrics::TopKCategoricalAccuracy dense_rows(2);
    dense_rows.update_state(tf::constant({{1.f, 0.f, 0.f}, {1.f, 0.f, 0.f}, {0.f, 1.f, 0.f}}), q);
    check_values(dense_rows.result(), {0.333333343}, 1e-6);
    // (batch, steps, classes): the result takes the labels' shape; float16 and float64
    // predictions match the float32 ones here.
    const tf::Tensor p3 = tf::reshape(p, tf::TensorShape({2, 2, 4}));
    const tf::Tensor per_step =
        metrics::sparse_top_k_categorical_accuracy(tf::constant({{2, 2}, {1, 0}}), p3, 2);
    CHECK(per_step.shape() == tf::TensorShape({2, 2}));
    check_values(per_step, {1, 1, 0, 0});
    for (const tf::DType dt : {tf::float16, tf::float64}) {
      CAPTURE(tf::dtype_name(dt));
      check_values(metrics::top_k_categorical_accuracy(onehot, tf::cast(p, dt), 2), {1, 1, 0, 0});
    }
  }
}

TEST_CASE("metrics more: Precision and Recall as Keras 3.15", "[keras][cpu][cuda]") {
  const float nan = std::nanf("");
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor t = tf::constant({0.f, 1.f, 1.f, 1.f}), p = tf::constant({1.f, 0.f, 1.f, 1.f});
    const tf::Tensor w = tf::constant({0.f, 0.f, 1.f, 0.f});
    metrics::Precision precision;
    check_values(precision.result(), {0.0});  // 0 / 0 is 0
    precision.update_state(t, p);
    check_values(precision.result(), {0.666666687}, 1e-6);
    precision.reset_state();
    precision.update_state(t, p, w);
    check_values(precision.result(), {1.0});
    metrics::Recall recall;
    recall.update_state(t, p);
    check_values(recall.result(), {0.666666687}, 1e-6);
    recall.reset_state();
    recall.update_state(t, p, w);
    check_values(recall.result(), {1.0});

    // Rank 2: every element counts; per-sample weights broadcast over the columns.
    const tf::Tensor t2 = tf::constant({{1.f, 0.f, 1.f}, {0.f, 1.f, 1.f}});
    const tf::Tensor p2 = tf::constant({{0.6f, 0.7f, 0.4f}, {0.2f, 0.9f, 0.51f}});
    metrics::Precision p_2d;
    p_2d.update_state(t2, p2);
    p_2d.update_state(tf::constant({{1.f}, {0.f}}), tf::constant({{0.8f}, {0.3f}}));
    check_values(p_2d.result(), {0.800000012}, 1e-6);
    metrics::Precision p_th(0.45);
    p_th.update_state(t2, p2, tf::constant({1.f, 2.f}));
    check_values(p_th.result(), {0.833333313}, 1e-6);
    metrics::Recall r_th(0.45);
    r_th.update_state(t2, p2, tf::constant({1.f, 2.f}));
    check_values(r_th.result(), {0.833333313}, 1e-6);
    metrics::Recall r_w2;
    r_w2.update_state(t2, p2, tf::constant({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}));
    check_values(r_w2.result(), {0.800000012}, 1e-6);

    // A NaN prediction is negative; a NaN label is positive (nonzero); so is a label of 2 or -1.
    metrics::Precision p_nan;
    metrics::Recall r_nan;
    const tf::Tensor tn = tf::constant({1.f, 1.f, 0.f, 0.f, nan});
    const tf::Tensor pn = tf::constant({nan, 0.7f, 0.2f, 0.9f, 0.8f});
    p_nan.update_state(tn, pn);
    r_nan.update_state(tn, pn);
    check_values(p_nan.result(), {0.666666687}, 1e-6);
    check_values(r_nan.result(), {0.666666687}, 1e-6);
    metrics::Precision p_labels;
    p_labels.update_state(tf::constant({2.f, 0.f, -1.f}), tf::constant({0.9f, 0.8f, 0.7f}));
    check_values(p_labels.result(), {0.666666687}, 1e-6);
    metrics::Precision none_predicted;
    none_predicted.update_state(tf::constant({1.f, 0.f}), tf::constant({0.1f, 0.2f}));
    check_values(none_predicted.result(), {0.0});

    auto vars = precision.tracked_variables();
    REQUIRE(vars.size() == 2);
    CHECK(vars[0].first == "true_positives");
    CHECK(vars[1].first == "false_positives");
    CHECK(recall.tracked_variables()[1].first == "false_negatives");
  }
}

TEST_CASE("metrics more: Precision and Recall with thresholds top_k and class_id as Keras 3.15",
          "[keras][cpu][cuda]") {
  const tf::Tensor t1 =
      tf::constant({{0.f, 1.f, 1.f, 0.f}, {1.f, 0.f, 1.f, 1.f}, {0.f, 0.f, 1.f, 0.f}});
  const tf::Tensor p1 = tf::constant(
      {{0.2f, 0.7f, 0.4f, 0.9f}, {0.6f, 0.1f, 0.55f, 0.3f}, {0.25f, 0.35f, 0.8f, 0.5f}});
  const tf::Tensor w1 = tf::constant({1.f, 2.f, 0.5f});
  const tf::Tensor t2 = tf::constant({{1.f, 1.f, 0.f, 0.f}});
  const tf::Tensor p2 = tf::constant({{0.9f, 0.3f, 0.3f, 0.1f}});
  const tf::Tensor w2 = tf::constant({3.f});
  // keras.metrics.Precision(**kw) / Recall(**kw): update_state(t1, p1, w1), (t2, p2, w2); the
  // result and the two variables.
  struct Case {
    const char* what;
    std::vector<double> thresholds;
    int top_k, class_id;
    std::vector<double> precision, tp, fp, recall, fn;
  };
  const std::vector<Case> cases = {
      {"thresholds [0.3, 0.6]",
       {0.3, 0.6},
       0,
       -1,
       {0.8260869383811951, 0.8181818127632141},
       {9.5, 4.5},
       {2.0, 1.0},
       {0.6551724076271057, 0.3103448152542114},
       {5.0, 10.0}},
      {"top_k 2", {}, 2, -1, {0.8846153616905212}, {11.5}, {1.5}, {0.7931034564971924}, {3.0}},
      {"class_id 1", {}, 0, 1, {1.0}, {1.0}, {0.0}, {0.25}, {3.0}},
      {"top_k 1 class_id 2 thresholds [0.2, 0.5]",
       {0.2, 0.5},
       1,
       2,
       {1.0, 1.0},
       {0.5, 0.5},
       {0.0, 0.0},
       {0.1428571492433548, 0.1428571492433548},
       {3.0, 3.0}},
      {"top_k 3 threshold 0.4",
       {0.4},
       3,
       -1,
       {0.8500000238418579},
       {8.5},
       {1.5},
       {0.5862069129943848},
       {6.0}},
      {"class_id 3 thresholds [0, 0.5, 1]",
       {0.0, 0.5, 1.0},
       0,
       3,
       {0.3076923191547394, 0.0, 0.0},
       {2.0, 0.0, 0.0},
       {4.5, 1.0, 0.0},
       {1.0, 0.0, 0.0},
       {0.0, 2.0, 2.0}},
  };
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (const Case& c : cases) {
      CAPTURE(c.what);
      const metrics::ConfusionOptions options{c.thresholds, c.top_k, c.class_id};
      metrics::Precision precision(options);
      metrics::Recall recall(options);
      for (metrics::Metric* m :
           {static_cast<metrics::Metric*>(&precision), static_cast<metrics::Metric*>(&recall)}) {
        m->update_state(t1, p1, w1);
        m->update_state(t2, p2, w2);
      }
      const tf::TensorShape shape = c.precision.size() == 1
                                        ? tf::TensorShape({})
                                        : tf::TensorShape({static_cast<int64_t>(c.tp.size())});
      REQUIRE(precision.result().shape() == shape);
      check_values(precision.result(), c.precision, 1e-6);
      check_values(precision.variables()[0].value(), c.tp, 1e-6);
      check_values(precision.variables()[1].value(), c.fp, 1e-6);
      REQUIRE(recall.result().shape() == shape);
      check_values(recall.result(), c.recall, 1e-6);
      check_values(recall.variables()[1].value(), c.fn, 1e-6);
    }
  }
  // Evenly spaced thresholds take Keras' buckets: predictions clipped to [0, 1] (so 1.5 and 2.0
  // are not above 1), p (n - 1) > i in float32 (0.90000004 is not above 0.9 of 11). Keras 3.15.
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor yt = tf::constant({1.f, 1.f, 0.f, 1.f});
    const tf::Tensor yp = tf::constant({1.5f, 0.7f, 2.0f, -0.2f});
    metrics::Precision even({.thresholds = {0.0, 0.5, 1.0}}),
        uneven({.thresholds = {0, 0.5, 0.999}});
    metrics::Recall even_r({.thresholds = {0.0, 0.5, 1.0}}),
        uneven_r({.thresholds = {0, 0.5, 0.999}});
    for (metrics::Metric* m : std::vector<metrics::Metric*>{&even, &uneven, &even_r, &uneven_r})
      m->update_state(yt, yp);
    check_values(even.result(), {0.6666666865348816, 0.6666666865348816, 0.0}, 1e-6);
    check_values(uneven.result(), {0.6666666865348816, 0.6666666865348816, 0.5}, 1e-6);
    check_values(even_r.result(), {0.6666666865348816, 0.6666666865348816, 0.0}, 1e-6);
    check_values(uneven_r.result(), {0.6666666865348816, 0.6666666865348816, 0.3333333432674408},
                 1e-6);
    std::vector<double> tenths;
    for (int i = 0; i <= 10; ++i) tenths.push_back(i / 10.0);
    metrics::Recall bucketed({.thresholds = tenths});
    bucketed.update_state(tf::constant({1.f}), tf::constant({std::nextafter(0.9f, 1.0f)}));
    check_values(bucketed.variables()[0].value(), {1, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0});
    metrics::Precision top1({.thresholds = {0.0, 0.5, 1.0}, .top_k = 1});
    top1.update_state(tf::constant({{1.f, 0.f, 1.f}, {0.f, 1.f, 0.f}}),
                      tf::constant({{1.5f, 0.2f, 0.9f}, {0.3f, -0.4f, 0.1f}}));
    check_values(top1.result(), {0.5, 1.0, 0.0}, 1e-6);
    check_values(top1.variables()[1].value(), {1, 0, 0});
  }

  // Traced with a None batch: one trace, the eager values.
  metrics::Precision eager({.thresholds = {0.3, 0.6}, .top_k = 2});
  metrics::Precision traced({.thresholds = {0.3, 0.6}, .top_k = 2});
  check_traced_equals_eager(eager, traced, t1, p1, w1, t2, p2, w2);

  tf::testing::require_error(
      [] {
        metrics::Recall({.thresholds = {0.5, -0.1}});
      },
      {"Recall", "thresholds", "[0, 1]", "-0.1"});
  tf::testing::require_error([] { metrics::Precision({.top_k = -1}); },
                             {"Precision", "top_k", "-1"});
  tf::testing::require_error([&] { metrics::Precision({.top_k = 5}).update_state(t1, p1); },
                             {"precision", "top_k 5", "(3, 4)"});
  tf::testing::require_error(
      [] { metrics::Recall({.class_id = 2}).update_state(tf::ones({4}), tf::ones({4})); },
      {"recall", "class_id 2", "(4,)"});
  tf::testing::require_error([&] { metrics::Recall({.class_id = 4}).update_state(t1, p1); },
                             {"recall", "class_id 4", "(3, 4)"});
}

TEST_CASE("metrics more: AUC curves and summation methods as Keras 3.15", "[keras][cpu][cuda]") {
  const float nan = std::nanf("");
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor t4 = tf::constant({0.f, 0.f, 1.f, 1.f}),
                     p4 = tf::constant({0.f, 0.5f, 0.3f, 0.9f});
    metrics::AUC doc3(3);
    doc3.update_state(t4, p4);
    check_values(doc3.result(), {0.75}, 1e-6);
    metrics::AUC doc;
    check_values(doc.result(), {0.0});  // empty state
    doc.update_state(t4, p4);
    check_values(doc.result(), {0.75}, 1e-6);

    struct C {
      int n;
      const char* curve;
      const char* method;
      double want;
    };
    const C cs[] = {
        {200, "ROC", "interpolation", 0.706552744}, {200, "ROC", "minoring", 0.706552744},
        {200, "ROC", "majoring", 0.706552744},      {200, "PR", "interpolation", 0.8252877},
        {200, "PR", "minoring", 0.781058133},       {200, "PR", "majoring", 0.831910014},
        {10, "ROC", "interpolation", 0.669515669},  {10, "ROC", "minoring", 0.618233621},
        {10, "ROC", "majoring", 0.720797658},       {10, "PR", "interpolation", 0.790856123},
        {10, "PR", "minoring", 0.718386233},        {10, "PR", "majoring", 0.834134996},
    };
    for (const C& c : cs) {
      CAPTURE(c.n, c.curve, c.method);
      metrics::AUC auc(c.n, c.curve, c.method);
      auc.update_state(auc_true(), auc_pred());
      check_values(auc.result(), {c.want}, 2e-6, 1e-6);
    }
    metrics::AUC weighted;
    weighted.update_state(auc_true(), auc_pred(), auc_weight());
    check_values(weighted.result(), {0.639400125}, 2e-6, 1e-6);
    metrics::AUC weighted_pr(200, "PR");
    weighted_pr.update_state(auc_true(), auc_pred(), auc_weight());
    check_values(weighted_pr.result(), {0.729192793}, 2e-6, 1e-6);
    // Two updates accumulate to the one-update value.
    metrics::AUC two;
    two.update_state(tf::slice(auc_true(), {0}, {20}), tf::slice(auc_pred(), {0}, {20}));
    two.update_state(tf::slice(auc_true(), {20}, {20}), tf::slice(auc_pred(), {20}, {20}));
    check_values(two.result(), {0.706552744}, 2e-6, 1e-6);

    metrics::AUC logits(200, "ROC", "interpolation", "auc", /*from_logits=*/true);
    logits.update_state(tf::constant({0.f, 0.f, 1.f, 1.f, 1.f}),
                        tf::constant({-2.f, 0.5f, 0.3f, 3.f, -0.1f}));
    check_values(logits.result(), {0.666666687}, 1e-6);
    metrics::AUC clipped;  // predictions outside [0, 1] are clipped
    clipped.update_state(t4, tf::constant({-0.5f, 0.5f, 1.5f, 0.9f}));
    check_values(clipped.result(), {1.0}, 1e-6);
    metrics::AUC with_nan;  // a NaN prediction is negative at every threshold
    with_nan.update_state(tf::constant({0.f, 0.f, 1.f, 1.f, 0.f}),
                          tf::constant({0.1f, 0.5f, 0.3f, 0.9f, nan}));
    check_values(with_nan.result(), {0.5}, 1e-6);
    metrics::AUC one_class;
    one_class.update_state(tf::constant({1.f, 1.f, 1.f}), tf::constant({0.1f, 0.5f, 0.3f}));
    check_values(one_class.result(), {0.0});
    metrics::AUC two_d;
    two_d.update_state(tf::constant({{0.f, 1.f}, {1.f, 1.f}, {0.f, 0.f}}),
                       tf::constant({{0.2f, 0.6f}, {0.5f, 0.55f}, {0.7f, 0.1f}}),
                       tf::constant({1.f, 2.f, 0.5f}));
    check_values(two_d.result(), {0.75}, 1e-6);
    // Predictions on the thresholds (0.25, 0.5, 0.75 for 5 thresholds) are not above them.
    metrics::AUC boundary(5);
    boundary.update_state(tf::constant({0.f, 1.f, 0.f, 1.f, 1.f}),
                          tf::constant({0.25f, 0.5f, 0.75f, 1.0f, 0.0f}));
    check_values(boundary.result(), {0.583333373}, 1e-6);

    auto vars = doc.tracked_variables();
    REQUIRE(vars.size() == 4);
    CHECK(vars[0].first == "true_positives");
    CHECK(vars[3].first == "false_negatives");
    CHECK(vars[0].second.shape() == tf::TensorShape({200}));
    doc.reset_state();
    check_values(doc.result(), {0.0});
  }
}

TEST_CASE("metrics more: AUC with multi_label label_weights and explicit thresholds as Keras 3.15",
          "[keras][cpu][cuda]") {
  const tf::Tensor t1 =
      tf::constant({{1.f, 0.f, 1.f}, {0.f, 1.f, 1.f}, {1.f, 1.f, 0.f}, {0.f, 0.f, 1.f}});
  const tf::Tensor p1 = tf::constant(
      {{0.8f, 0.3f, 0.6f}, {0.4f, 0.7f, 0.2f}, {0.65f, 0.55f, 0.1f}, {0.2f, 0.45f, 0.9f}});
  const tf::Tensor w1 = tf::constant({1.f, 2.f, 0.5f, 1.5f});
  const tf::Tensor t2 = tf::constant({{1.f, 0.f, 0.f}, {0.f, 1.f, 1.f}});
  const tf::Tensor p2 = tf::constant({{0.3f, 0.8f, 0.35f}, {0.5f, 0.6f, 0.75f}});
  const tf::Tensor w2 = tf::constant({3.f, 1.f});
  const std::vector<double> lw = {0.5, 1.0, 2.0};
  // keras.metrics.AUC(**kw): update_state(t1, p1, w1), (t2, p2, w2), result(); and the shape of
  // true_positives.
  struct Case {
    const char* what;
    metrics::AUCOptions options;
    double want;
    std::vector<int64_t> state;
  };
  auto opts = [](int n, const char* curve, const char* summation, std::vector<double> th,
                 bool multi, std::vector<double> weights, bool logits) {
    metrics::AUCOptions o;
    o.num_thresholds = n;
    o.curve = curve;
    o.summation_method = summation;
    o.thresholds = std::move(th);
    o.multi_label = multi;
    o.label_weights = std::move(weights);
    o.from_logits = logits;
    return o;
  };
  const std::vector<Case> cases = {
      {"multi_label",
       opts(200, "ROC", "interpolation", {}, true, {}, false),
       0.5661376118659973,
       {200, 3}},
      {"multi_label PR",
       opts(200, "PR", "interpolation", {}, true, {}, false),
       0.6167964935302734,
       {200, 3}},
      {"multi_label minoring",
       opts(200, "ROC", "minoring", {}, true, {}, false),
       0.5661376118659973,
       {200, 3}},
      {"multi_label label_weights",
       opts(200, "ROC", "interpolation", {}, true, lw, false),
       0.6025561690330505,
       {200, 3}},
      {"multi_label PR label_weights 50",
       opts(50, "PR", "interpolation", {}, true, lw, false),
       0.6783825159072876,
       {50, 3}},
      {"label_weights",
       opts(200, "ROC", "interpolation", {}, false, lw, false),
       0.6104224324226379,
       {200}},
      {"thresholds [0.3, 0.5, 0.9]",
       opts(200, "ROC", "interpolation", {0.3, 0.5, 0.9}, false, {}, false),
       0.6008230447769165,
       {5}},
      {"thresholds [0.75, 0.25, 0.5] (even) PR",
       opts(200, "PR", "interpolation", {0.75, 0.25, 0.5}, false, {}, false),
       0.570421576499939,
       {5}},
      {"thresholds multi_label PR majoring",
       opts(200, "PR", "majoring", {0.3, 0.5, 0.9}, true, {}, false),
       0.6879046559333801,
       {5, 3}},
      {"multi_label from_logits 7",
       opts(7, "ROC", "interpolation", {}, true, {}, true),
       0.6171236038208008,
       {7, 3}},
  };
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (const Case& c : cases) {
      CAPTURE(c.what);
      metrics::AUC auc(c.options);
      auc.update_state(t1, p1, w1);
      auc.update_state(t2, p2, w2);
      check_values(auc.result(), {c.want}, 1e-5);
      REQUIRE(auc.variables().size() == 4);
      CHECK(auc.variables()[0].shape() == tf::TensorShape(c.state));
    }
    // The counts of the uneven multi_label case (Keras' true_positives, false_negatives).
    metrics::AUC uneven(opts(200, "ROC", "interpolation", {0.3, 0.5, 0.9}, true, {}, false));
    uneven.update_state(t1, p1, w1);
    uneven.update_state(t2, p2, w2);
    check_values(uneven.variables()[0].value(),
                 {4.5, 3.5, 5.5, 1.5, 3.5, 3.5, 1.5, 3.5, 3.5, 0, 0, 0, 0, 0, 0}, 1e-6);
    check_values(uneven.variables()[3].value(),
                 {0, 0, 0, 3.0, 0, 2.0, 3.0, 0, 2.0, 4.5, 3.5, 5.5, 4.5, 3.5, 5.5}, 1e-6);
  }
  // A lazily built multi_label AUC traced with a None batch: the first (traced) update builds
  // the state; one trace; the eager values.
  metrics::AUC eager(opts(200, "ROC", "interpolation", {}, true, lw, false));
  metrics::AUC traced(opts(200, "ROC", "interpolation", {}, true, lw, false));
  TF_REQUIRE_THROWS_CONTAINING(traced.result(), tf::FailedPreconditionError,
                               "multi_label builds its state at the first update_state");
  check_traced_equals_eager(eager, traced, t1, p1, w1, t2, p2, w2);
  check_values(traced.result(), {0.6025561690330505}, 1e-5);
  // The designated-initializer form of docs/keras_training.md.
  metrics::AUC pr({.curve = "PR", .multi_label = true, .label_weights = {1, 2, 1}});
  pr.update_state(t1, p1);
  CHECK(pr.variables()[0].shape() == tf::TensorShape({200, 3}));

  tf::testing::require_error(
      [&] {
        metrics::AUCOptions o;
        o.multi_label = true;
        metrics::AUC(o).update_state(tf::ones({4}), tf::ones({4}));
      },
      {"auc", "multi_label", "rank 2", "(4,)"});
  tf::testing::require_error(
      [&] {
        metrics::AUCOptions o;
        o.multi_label = true;
        o.num_labels = 2;
        metrics::AUC(o).update_state(t1, p1);
      },
      {"auc", "2 labels", "(4, 3)"});
  tf::testing::require_error(
      [&] {
        metrics::AUCOptions o;
        o.label_weights = {1.0, 2.0};
        metrics::AUC(o).update_state(t1, p1);
      },
      {"auc", "2 label_weights", "(4, 3)"});
  tf::testing::require_error(
      [] {
        metrics::AUCOptions o;
        o.num_labels = 3;
        metrics::AUC a(o);
      },
      {"AUC", "num_labels", "multi_label"});
  tf::testing::require_error(
      [] {
        metrics::AUCOptions o;
        o.label_weights = {1.0, -1.0};
        metrics::AUC a(o);
      },
      {"AUC", "label_weights", "non-negative", "-1"});
}

TEST_CASE("metrics more: traced updates equal eager ones", "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    auto make = [] {
      return std::vector<metrics::Metric>{metrics::AUC(),
                                          metrics::AUC(50, "PR"),
                                          metrics::Precision(0.4),
                                          metrics::Recall(),
                                          metrics::RootMeanSquaredError(),
                                          metrics::MeanAbsoluteError(),
                                          metrics::BinaryCrossentropy()};
    };
    auto eager = make(), traced = make();
    auto step = tf::function([&](const tf::Tensor& y, const tf::Tensor& p, const tf::Tensor& w) {
      for (auto& m : traced) m.update_state(y, p, w);
      return traced[0].result();
    });
    const tf::Tensor y = tf::reshape(auc_true(), {10, 4}), p = tf::reshape(auc_pred(), {10, 4});
    const tf::Tensor w = tf::slice(auc_weight(), {0}, {10});
    for (int i = 0; i < 3; ++i) {
      const tf::Tensor yi = i == 1 ? tf::constant(1.0f) - y : y;
      for (auto& m : eager) m.update_state(yi, p, w);
      const tf::Tensor r = step(yi, p, w);
      check_values(r, {eager[0].result().item<float>()}, 1e-6);
    }
    CHECK(step.tracing_count() == 1);
    for (size_t i = 0; i < eager.size(); ++i) {
      CAPTURE(eager[i].name());
      check_values(traced[i].result(), {eager[i].result().item<float>()}, 1e-6);
    }
  }
}

TEST_CASE("metrics more: one trace serves every batch size of a None dimension", "[keras][cpu]") {
  // AUC's bucket sums (unsorted_segment_sum) and the others keep the batch size open.
  auto make = [] {
    return std::vector<metrics::Metric>{metrics::AUC(), metrics::Precision(), metrics::Recall(),
                                        metrics::RootMeanSquaredError(),
                                        metrics::SparseTopKCategoricalAccuracy(2)};
  };
  auto eager = make(), traced = make();
  auto update = [](std::vector<metrics::Metric>& ms, const tf::Tensor& y, const tf::Tensor& p) {
    for (size_t i = 0; i < 4; ++i) ms[i].update_state(y, p);
    ms[4].update_state(tf::cast(tf::reduce_sum(y, 1), tf::int32), p);
  };
  auto step = tf::function(
      [&](const tf::Tensor& y, const tf::Tensor& p) {
        update(traced, y, p);
        return traced[0].result();
      },
      tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 4}, tf::float32),
                                              tf::TensorSpec({tf::None, 4}, tf::float32)}});
  const tf::Tensor y = tf::reshape(auc_true(), {10, 4}), p = tf::reshape(auc_pred(), {10, 4});
  for (int64_t rows : {10, 6, 3}) {
    const tf::Tensor yr = tf::slice(y, {0, 0}, {rows, 4}), pr = tf::slice(p, {0, 0}, {rows, 4});
    update(eager, yr, pr);
    step(yr, pr);
  }
  CHECK(step.tracing_count() == 1);
  for (size_t i = 0; i < eager.size(); ++i) {
    CAPTURE(eager[i].name());
    check_values(traced[i].result(), {eager[i].result().item<float>()}, 1e-6);
  }
}

TEST_CASE("metrics more: mirrored confusion counts are summed over replicas",
          "[keras][cpu][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  const std::vector<tf::Device> devs = {tf::Device::parse("/cpu:0"), tf::Device::parse("/cpu:1")};
  metrics::AUC auc;
  metrics::Precision precision;
  metrics::RootMeanSquaredError rmse;
  {
    tf::detail::MirrorVariablesScope mirror(devs);
    auc = metrics::AUC();
    precision = metrics::Precision();
    rmse = metrics::RootMeanSquaredError();
  }
  REQUIRE(auc.variables()[0].is_mirrored());
  for (int r = 0; r < 2; ++r) {
    tf::detail::ReplicaComponentScope replica(r);
    tf::DeviceScope place(devs[static_cast<size_t>(r)]);
    const tf::Tensor y = tf::slice(auc_true(), {20 * r}, {20});
    const tf::Tensor p = tf::slice(auc_pred(), {20 * r}, {20});
    auc.update_state(y, p);
    precision.update_state(y, p);
    rmse.update_state(y, p);
  }
  // The global values: those of one metric that saw all 40.
  metrics::AUC auc1;
  metrics::Precision precision1;
  metrics::RootMeanSquaredError rmse1;
  auc1.update_state(auc_true(), auc_pred());
  precision1.update_state(auc_true(), auc_pred());
  rmse1.update_state(auc_true(), auc_pred());
  check_values(auc.result(), {0.706552744}, 2e-6, 1e-6);
  check_values(precision.result(), {result_of(precision1)}, 1e-6);
  check_values(rmse.result(), {result_of(rmse1)}, 1e-6);
  auc.reset_state();
  for (const auto& c : auc.variables()[0].components())
    check_values(c.value(), std::vector<double>(200, 0.0));
}

TEST_CASE("metrics more: a mirrored multi_label AUC builds mirrored state at its first update",
          "[keras][cpu][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  const std::vector<tf::Device> devs = {tf::Device::parse("/cpu:0"), tf::Device::parse("/cpu:1")};
  metrics::AUCOptions o;
  o.multi_label = true;
  o.curve = "PR";
  metrics::AUC auc;
  {
    tf::detail::MirrorVariablesScope mirror(devs);
    auc = metrics::AUC(o);
  }
  REQUIRE(auc.variables().empty());  // built by the first update
  // (40,) labels as (10, 4): four labels, five rows per replica.
  const tf::Tensor y = tf::reshape(auc_true(), {10, 4}), p = tf::reshape(auc_pred(), {10, 4});
  for (int r = 0; r < 2; ++r) {
    tf::detail::ReplicaComponentScope replica(r);
    tf::DeviceScope place(devs[static_cast<size_t>(r)]);
    auc.update_state(tf::slice(y, {5 * r, 0}, {5, 4}), tf::slice(p, {5 * r, 0}, {5, 4}));
  }
  REQUIRE(auc.variables().size() == 4);
  CHECK(auc.variables()[0].is_mirrored());
  // The global value: that of one metric that saw all ten rows.
  metrics::AUC one(o);
  one.update_state(y, p);
  check_values(auc.result(), {result_of(one)}, 1e-6);
}

TEST_CASE("metrics more: compile strings directions and errors", "[keras][cpu]") {
  const std::vector<std::pair<std::string, std::string>> dirs = {
      {"mae", "down"},
      {"mean_absolute_error", "down"},
      {"root_mean_squared_error", "down"},
      {"mape", "down"},
      {"mean_absolute_percentage_error", "down"},
      {"precision", "up"},
      {"recall", "up"},
      {"auc", "up"},
      {"AUC", "up"},
      {"top_k_categorical_accuracy", "up"},
      {"sparse_top_k_categorical_accuracy", "up"},
      {"binary_crossentropy", "down"},
      {"categorical_crossentropy", "down"},
  };
  for (const auto& [id, dir] : dirs) {
    CAPTURE(id);
    const metrics::Metric m = metrics::get(id);
    CHECK(m.name() == id);  // compile() logs the string given
    CHECK(m.direction() == dir);
  }
  CHECK(metrics::AUC().name() == "auc");
  CHECK(metrics::RootMeanSquaredError().name() == "root_mean_squared_error");
  // Keras 3.15 has no "rmse".
  TF_REQUIRE_THROWS_CONTAINING(metrics::get("rmse"), tf::InvalidArgumentError, "unknown metric");

  tf::testing::require_error([] { metrics::TopKCategoricalAccuracy(0); },
                             {"TopKCategoricalAccuracy", "k must be at least 1"});
  tf::testing::require_error([] { metrics::Precision(1.5); }, {"Precision", "thresholds", "1.5"});
  tf::testing::require_error([] { metrics::AUC(1); }, {"AUC", "num_thresholds", "1"});
  tf::testing::require_error([] { metrics::AUC(200, "ROCK"); }, {"AUC", "curve", "ROCK"});
  tf::testing::require_error([] { metrics::AUC(200, "ROC", "trapezoid"); },
                             {"AUC", "summation_method", "trapezoid"});
  tf::testing::require_error(
      [] {
        metrics::Precision().update_state(tf::ones({2, 3}), tf::ones({2, 2}));
      },
      {"precision", "(2, 3)", "(2, 2)"});
  tf::testing::require_error(
      [] { metrics::AUC().update_state(tf::ones({4}), tf::ones({4}), tf::ones({3})); },
      {"auc", "sample_weight of shape (3,)", "(4,)"});
  tf::testing::require_error(
      [] {
        metrics::SparseTopKCategoricalAccuracy().update_state(tf::constant({0, 1, 2}),
                                                              tf::ones({2, 6}));
      },
      {"sparse_top_k_categorical_accuracy", "(3,)", "(2, 6)"});
  tf::testing::require_error(
      [] {
        metrics::TopKCategoricalAccuracy().update_state(tf::ones({2, 5}), tf::ones({2, 6}));
      },
      {"top_k_categorical_accuracy", "(2, 5)", "(2, 6)"});
}

TEST_CASE("metrics more: compiled metrics in fit and evaluate match Keras 3.15", "[keras][cpu]") {
  // Keras 3.15 (TF 2.21): Dense(1, sigmoid, no bias) with kernel (1.5, -0.5), SGD(0.5),
  // binary crossentropy, batches of 3, no shuffling.
  const tf::Tensor x = tf::constant({{1.f, 0.f},
                                     {0.5f, 0.5f},
                                     {0.f, 1.f},
                                     {-1.f, 0.5f},
                                     {0.2f, -0.3f},
                                     {0.8f, 0.1f},
                                     {-0.4f, -0.6f},
                                     {0.3f, 0.9f}});
  const tf::Tensor y = tf::constant({{1.f}, {0.f}, {0.f}, {1.f}, {1.f}, {1.f}, {0.f}, {1.f}});
  auto make = [] {
    K::Sequential m({K::layers::Dense(1, "sigmoid", false)});
    m.build(tf::TensorShape({tf::None, 2}));
    m.set_weights({tf::constant({{1.5f}, {-0.5f}})});
    m.compile(K::optimizers::SGD(0.5), K::losses::BinaryCrossentropy(),
              {"precision", "recall", "auc", "mae", metrics::RootMeanSquaredError("rmse")});
    return m;
  };
  auto evaluated = make();
  CHECK(evaluated.metrics_names() ==
        std::vector<std::string>{"loss", "precision", "recall", "auc", "mae", "rmse"});
  const auto e = evaluated.evaluate(x, y, {.batch_size = 3, .verbose = 0});
  const std::vector<double> want_e = {0.6969529390335083, 0.75,
                                      0.6000000238418579, 0.6666666269302368,
                                      0.4487231969833374, 0.4911251366138458};
  REQUIRE(e.size() == want_e.size());
  for (size_t i = 0; i < e.size(); ++i) CHECK(e[i] == Approx(want_e[i]).epsilon(1e-5));

  auto trained = make();
  const K::History h =
      trained.fit(x, y, {.epochs = 2, .batch_size = 3, .verbose = 0, .shuffle = false});
  const std::vector<std::pair<std::string, std::vector<double>>> want_h = {
      {"loss", {0.7103362083435059, 0.7039908766746521}},
      {"precision", {0.75, 0.800000011920929}},
      {"recall", {0.6000000238418579, 0.800000011920929}},
      {"auc", {0.6666666269302368, 0.6666666865348816}},
      {"mae", {0.4543398320674896, 0.45539259910583496}},
      {"rmse", {0.49680644273757935, 0.49559471011161804}},
  };
  for (const auto& [key, values] : want_h) {
    CAPTURE(key);
    REQUIRE(h.history.count(key) == 1);
    for (size_t i = 0; i < 2; ++i) CHECK(h.history.at(key)[i] == Approx(values[i]).epsilon(1e-5));
  }
  check_values(trained.get_weights()[0], {1.4295731782913208, -0.263169527053833}, 1e-5);
}

TEST_CASE("metrics more: fit under a MirroredStrategy reports the global AUC and precision",
          "[keras][cpu][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  const tf::Tensor x = tf::reshape(auc_pred(), {40, 1});
  const tf::Tensor y = tf::reshape(auc_true(), {40, 1});
  auto make = [] {
    K::Sequential m({K::layers::Dense(1, "", false)});
    m.build(tf::TensorShape({tf::None, 1}));
    m.set_weights({tf::constant({{1.0f}})});  // y_pred = x
    m.compile(K::optimizers::SGD(0.0), K::losses::MeanSquaredError(), {"auc", "precision"});
    return m;
  };
  auto single = make();
  const auto a = single.evaluate(x, y, {.batch_size = 16, .verbose = 0});
  tf::distribute::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  std::optional<K::Sequential> mirrored;
  std::vector<double> b;
  {
    auto scope = strategy.scope();
    mirrored.emplace(make());
    b = mirrored->evaluate(x, y, {.batch_size = 16, .verbose = 0});
  }
  REQUIRE(a.size() == 3);
  REQUIRE(b.size() == 3);
  CHECK(a[1] == Approx(0.706552744).epsilon(1e-5));
  CHECK(b[1] == Approx(a[1]).epsilon(1e-6));
  CHECK(b[2] == Approx(a[2]).epsilon(1e-6));
}
