// FBetaScore, F1Score and R2Score (keras/metrics_fscore.cpp) against Keras 3.15 (TF 2.21) on the
// same inputs: every average with and without a threshold over two weighted batches, R2 with
// each aggregation and adjusted R2, their lazily built state (eager, traced with a None batch,
// mirrored), errors, and compile() by name in evaluate and fit.
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

// Two batches of multi-label targets and scores (a tie in the last row of the first, an all-zero
// row and an empty label row in the second) with per-sample weights.
tf::Tensor yt1() {
  return tf::constant({{1.f, 0.f, 0.f}, {0.f, 1.f, 0.f}, {0.f, 0.f, 1.f}, {1.f, 0.f, 1.f}});
}
tf::Tensor yp1() {
  return tf::constant(
      {{0.7f, 0.2f, 0.1f}, {0.3f, 0.3f, 0.4f}, {0.1f, 0.5f, 0.6f}, {0.6f, 0.1f, 0.6f}});
}
tf::Tensor sw1() {
  return tf::constant({1.0f, 2.0f, 0.5f, 1.5f});
}
tf::Tensor yt2() {
  return tf::constant(
      {{0.f, 1.f, 0.f}, {0.f, 0.f, 1.f}, {1.f, 0.f, 0.f}, {0.f, 1.f, 0.f}, {0.f, 0.f, 0.f}});
}
tf::Tensor yp2() {
  return tf::constant({{0.2f, 0.6f, 0.2f},
                       {0.4f, 0.45f, 0.15f},
                       {0.9f, 0.05f, 0.05f},
                       {0.f, 0.f, 0.f},
                       {0.3f, 0.3f, 0.2f}});
}
tf::Tensor sw2() {
  return tf::constant({0.5f, 1.0f, 2.0f, 1.0f, 3.0f});
}

struct FCase {
  std::optional<std::string> average;
  double beta;
  std::optional<double> threshold;
  std::vector<double> after1, after2;
};

// keras.metrics.FBetaScore(average, beta, threshold): update_state(yt1, yp1, sw1), result(),
// update_state(yt2, yp2, sw2), result().
const std::vector<FCase>& fbeta_cases() {
  static const std::vector<FCase> cases = {
      {std::nullopt,
       1.0,
       std::nullopt,
       {1, 0, 0.666666627},
       {0.74999994, 0.124999955, 0.571428478}},
      {std::nullopt, 1.0, 0.5, {1, 0, 1}, {1, 0.24999997, 0.799999952}},
      {std::nullopt, 2.0, std::nullopt, {1, 0, 0.833333373}, {0.882352948, 0.135135114, 0.625}},
      {std::nullopt, 2.0, 0.5, {1, 0, 1}, {1, 0.172413811, 0.714285731}},
      {"micro", 1.0, std::nullopt, {0.692307651}, {0.518518448}},
      {"micro", 1.0, 0.5, {0.818181753}, {0.777777731}},
      {"micro", 2.0, std::nullopt, {0.692307711}, {0.583333373}},
      {"micro", 2.0, 0.5, {0.737704992}, {0.686274529}},
      {"macro", 1.0, std::nullopt, {0.555555522}, {0.482142776}},
      {"macro", 1.0, 0.5, {0.666666687}, {0.683333337}},
      {"macro", 2.0, std::nullopt, {0.611111104}, {0.547496021}},
      {"macro", 2.0, 0.5, {0.666666687}, {0.628899872}},
      {"weighted", 1.0, std::nullopt, {0.589743614}, {0.502435029}},
      {"weighted", 1.0, 0.5, {0.692307711}, {0.706818163}},
      {"weighted", 2.0, std::nullopt, {0.641025662}, {0.57441467}},
      {"weighted", 2.0, 0.5, {0.692307711}, {0.658755064}},
  };
  return cases;
}

// Rank-1 expected values are per class; the others scalars.
void check_result(const tf::Tensor& got, const std::vector<double>& want, bool vector,
                  double atol = 1e-7) {
  if (!vector) REQUIRE(got.rank() == 0);
  check_values(got, want, 2e-6, atol);
}

// Two batches of two outputs with per-sample weights (R2).
tf::Tensor rt1() {
  return tf::constant({{1.0f, 2.0f}, {2.0f, 1.5f}, {3.0f, 0.5f}, {4.5f, 3.0f}});
}
tf::Tensor rp1() {
  return tf::constant({{1.2f, 1.8f}, {1.7f, 1.0f}, {3.3f, 1.0f}, {4.0f, 2.5f}});
}
tf::Tensor rw1() {
  return tf::constant({1.0f, 0.5f, 2.0f, 1.5f});
}
tf::Tensor rt2() {
  return tf::constant({{0.5f, 2.5f}, {2.5f, 1.0f}, {3.5f, 2.0f}});
}
tf::Tensor rp2() {
  return tf::constant({{0.8f, 2.0f}, {2.0f, 1.2f}, {3.9f, 2.2f}});
}
tf::Tensor rw2() {
  return tf::constant({2.0f, 1.0f, 0.5f});
}

struct RCase {
  std::optional<std::string> aggregation;
  int num_regressors;
  std::vector<double> after1, after2;
};

// keras.metrics.R2Score(class_aggregation, num_regressors) over (rt1, rp1, rw1) then
// (rt2, rp2, rw2). num_samples is 8, then 14: 7 regressors fall back to the plain R2 after the
// first batch (n - 1 == p), 20 after both (p > n - 1).
const std::vector<RCase>& r2_cases() {
  static const std::vector<RCase> cases = {
      {std::nullopt, 0, {0.918600917, 0.811337888}, {0.93310523, 0.779757082}},
      {std::nullopt, 2, {0.886041284, 0.735873044}, {0.920942545, 0.739712954}},
      {std::nullopt, 6, {0.430206418, -0.320634842}, {0.875766873, 0.59097743}},
      {std::nullopt, 7, {0.918600917, 0.811337888}, {0.855061352, 0.522807002}},
      {std::nullopt, 20, {0.918600917, 0.811337888}, {0.93310523, 0.779757082}},
      {"uniform_average", 0, {0.864969373}, {0.856431127}},
      {"uniform_average", 2, {0.810957134}, {0.83032769}},
      {"uniform_average", 6, {0.0547856092}, {0.733372092}},
      {"uniform_average", 7, {0.864969373}, {0.688934088}},
      {"uniform_average", 20, {0.864969373}, {0.856431127}},
      {"variance_weighted_average", 0, {0.874392509}, {0.887552619}},
      {"variance_weighted_average", 2, {0.824149489}, {0.86710763}},
      {"variance_weighted_average", 6, {0.120747566}, {0.791169167}},
      {"variance_weighted_average", 7, {0.874392509}, {0.756363988}},
      {"variance_weighted_average", 20, {0.874392509}, {0.887552619}},
  };
  return cases;
}

std::vector<std::string> names_of(const metrics::Metric& m) {
  std::vector<std::string> out;
  for (const auto& [n, v] : m.tracked_variables()) out.push_back(n);
  return out;
}

}  // namespace

TEST_CASE("fscore: FBetaScore matches Keras for every average over two weighted batches",
          "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (const FCase& c : fbeta_cases()) {
      CAPTURE(c.average.value_or("none"), c.beta, c.threshold.value_or(-1.0));
      metrics::FBetaScore m(c.average, c.beta, c.threshold);
      m.update_state(yt1(), yp1(), sw1());
      check_result(m.result(), c.after1, !c.average);
      m.update_state(yt2(), yp2(), sw2());
      check_result(m.result(), c.after2, !c.average);
      if (c.beta == 1.0) {
        // F1Score is FBetaScore with beta 1.
        metrics::F1Score f1(c.average, c.threshold);
        f1.update_state(yt1(), yp1(), sw1());
        f1.update_state(yt2(), yp2(), sw2());
        check_result(f1.result(), c.after2, !c.average);
      }
    }
  }
}

TEST_CASE("fscore: F1Score state names reset and direction as Keras", "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    // keras.metrics.F1Score(average="macro") without weights: 0.6, then 0.619047582.
    metrics::F1Score f1("macro");
    CHECK(f1.name() == "f1_score");
    CHECK(f1.direction() == "up");
    CHECK(f1.variables().empty());  // built at the first update, as Keras'
    f1.update_state(yt1(), yp1());
    check_values(f1.result(), {0.599999964}, 2e-6);
    CHECK(names_of(f1) == std::vector<std::string>{"true_positives", "false_positives",
                                                   "false_negatives", "intermediate_weights"});
    for (const tf::Variable& v : f1.variables()) CHECK(v.shape() == tf::TensorShape({3}));
    f1.update_state(yt2(), yp2());
    check_values(f1.result(), {0.619047582}, 2e-6);
    f1.reset_state();
    for (const tf::Variable& v : f1.variables()) check_values(v.value(), {0, 0, 0});
    f1.update_state(yt1(), yp1());
    check_values(f1.result(), {0.599999964}, 2e-6);
    // micro keeps scalar counts, as Keras.
    metrics::FBetaScore micro("micro", 2.0);
    micro.update_state(yt1(), yp1());
    for (const tf::Variable& v : micro.variables()) CHECK(v.shape() == tf::TensorShape({}));
    CHECK(metrics::FBetaScore().name() == "fbeta_score");
    CHECK(metrics::R2Score().direction() == "up");
  }
}

TEST_CASE("fscore: R2Score matches Keras for each aggregation and adjusted R2",
          "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (const RCase& c : r2_cases()) {
      CAPTURE(c.aggregation.value_or("none"), c.num_regressors);
      metrics::R2Score m(c.aggregation, c.num_regressors);
      // The adjusted score scales 1 - R2 by (n - 1) / (n - p - 1), up to 7 here: float32
      // rounding, in another order on a GPU, grows by as much.
      const double atol = c.num_regressors > 0 ? 1e-6 : 1e-7;
      m.update_state(rt1(), rp1(), rw1());
      check_result(m.result(), c.after1, !c.aggregation, atol);
      m.update_state(rt2(), rp2(), rw2());
      check_result(m.result(), c.after2, !c.aggregation, atol);
    }
    // keras.metrics.R2Score() without weights over both batches.
    metrics::R2Score plain;
    plain.update_state(rt1(), rp1());
    plain.update_state(rt2(), rp2());
    check_values(plain.result(), {0.832145929}, 2e-6);
    // Weights of y_true's shape; a rank-1 y_true against (batch, 1) (num_samples 4).
    metrics::R2Score per_output(std::nullopt);
    per_output.update_state(rt1(), rp1(),
                            tf::constant({{1.f, 0.5f}, {2.f, 1.f}, {0.f, 1.f}, {1.f, 3.f}}));
    check_values(per_output.result(), {0.929719627, 0.761196494}, 2e-6);
    metrics::R2Score column;
    column.update_state(tf::slice(rt1(), {0, 0}, {4, 1}), tf::slice(rp1(), {0, 0}, {4, 1}));
    check_values(column.result(), {0.929719627}, 2e-6);
    check_values(column.variables()[0].value(), {4.0});
    // A constant y_true: 0 where the residual is not 0, NaN where it is (Keras).
    metrics::R2Score constant(std::nullopt);
    constant.update_state(tf::ones({3, 2}), tf::constant({{1.f, 2.f}, {1.f, 1.f}, {1.f, 0.f}}));
    check_values(constant.result(), {std::nan(""), 0.0});
  }
}

TEST_CASE("fscore: R2Score state names and the adjusted R2 fallback warning", "[keras][cpu]") {
  metrics::R2Score m("uniform_average", 7);
  CHECK(names_of(m) == std::vector<std::string>{"num_samples"});
  m.update_state(rt1(), rp1(), rw1());
  CHECK(names_of(m) ==
        std::vector<std::string>{"num_samples", "squared_sum", "sum", "residual", "count"});
  // 7 regressors, 8 samples: Keras warns of a division by zero and gives the plain R2.
  const std::string log = tf::testing::capture_stderr([&] {
    check_values(m.result(), {0.864969373}, 2e-6);
    m.result();  // warned once
  });
  CHECK(log.find("division by zero in the adjusted R2") != std::string::npos);
  CHECK(log.find("r2_score") != std::string::npos);
  CHECK(log.find("division by zero", log.find("division by zero") + 1) == std::string::npos);
  metrics::R2Score many("uniform_average", 20);
  many.update_state(rt1(), rp1(), rw1());
  const std::string log2 = tf::testing::capture_stderr([&] { many.result(); });
  CHECK(log2.find("more independent predictors (20) than data points (8)") != std::string::npos);
  m.reset_state();
  for (const tf::Variable& v : m.variables())
    CHECK(tf::reduce_sum(tf::abs(v.value())).item<float>() == 0.0f);
  CHECK(m.variables().size() == 5);
}

TEST_CASE("fscore: lazily built state errors name the metric and the shapes", "[keras][cpu]") {
  metrics::F1Score f1;
  TF_REQUIRE_THROWS_CONTAINING(f1.result(), tf::FailedPreconditionError,
                               "F1Score 'f1_score' has no state before its first update_state");
  TF_REQUIRE_THROWS_CONTAINING(metrics::R2Score().result(), tf::FailedPreconditionError,
                               "R2Score 'r2_score' has no state");
  f1.update_state(tf::slice(yt1(), {0, 0}, {4, 2}), tf::slice(yp1(), {0, 0}, {4, 2}));
  tf::testing::require_error([&] { f1.update_state(yt1(), yp1()); },
                             {"F1Score 'f1_score'", "(batch_size, 2)", "y_pred of shape (4, 3)"});
  metrics::FBetaScore micro("micro");
  micro.update_state(yt1(), yp1());
  tf::testing::require_error(
      [&] {
        micro.update_state(tf::ones({2, 4}), tf::ones({2, 4}));
      },
      {"fbeta_score", "(batch_size, 3)", "(2, 4)"});
  tf::testing::require_error([] { metrics::F1Score().update_state(tf::ones({4}), tf::ones({4})); },
                             {"f1_score", "2D inputs", "(4,)"});
  tf::testing::require_error(
      [] {
        metrics::F1Score().update_state(tf::ones({4, 2}), tf::ones({4, 3}));
      },
      {"f1_score", "same shape", "(4, 2)", "(4, 3)"});
  tf::testing::require_error(
      [] {
        metrics::F1Score().update_state(yt1(), yp1(), tf::ones({4, 1}));
      },
      {"f1_score", "sample_weight must have shape (batch_size,) = (4,)", "(4, 1)"});
  tf::testing::require_error([] { metrics::R2Score().update_state(tf::ones({4}), tf::ones({4})); },
                             {"r2_score", "2D inputs", "(4,)"});
  tf::testing::require_error([] { metrics::R2Score().update_state(rt1(), rp1(), tf::ones({3})); },
                             {"r2_score", "sample_weight of shape (3,)", "(4, 2)"});
  tf::testing::require_error([] { metrics::FBetaScore("mean"); }, {"FBetaScore", "\"mean\""});
  tf::testing::require_error([] { metrics::FBetaScore("macro", 0.0); },
                             {"FBetaScore", "beta must be > 0"});
  tf::testing::require_error([] { metrics::F1Score("macro", 1.5); },
                             {"F1Score", "0 < threshold <= 1", "1.5"});
  tf::testing::require_error([] { metrics::R2Score("weighted"); },
                             {"R2Score", "class_aggregation", "\"weighted\""});
  tf::testing::require_error([] { metrics::R2Score("uniform_average", -1); },
                             {"R2Score", "num_regressors must be >= 0"});
  // A class axis left None in a tf::function's signature: traces take the call's shapes, so the
  // first call builds the state; a call with other classes is the same error.
  metrics::F1Score open;
  auto step = tf::function(
      [&](const tf::Tensor& t, const tf::Tensor& p) {
        open.update_state(t, p);
        return open.result();
      },
      tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, tf::None}, tf::float32),
                                              tf::TensorSpec({tf::None, tf::None}, tf::float32)}});
  check_values(step(yt1(), yp1()), {1, 0, 0.8}, 2e-6);  // Keras: macro 0.6
  tf::testing::require_error(
      [&] {
        step(tf::ones({2, 4}), tf::ones({2, 4}));
      },
      {"f1_score", "(batch_size, 3)", "(2, 4)"});
}

TEST_CASE("fscore: the first update traced with a None batch builds the state as eager",
          "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    auto make = [] {
      return std::vector<metrics::Metric>{metrics::F1Score("weighted"),
                                          metrics::FBetaScore(std::nullopt, 2.0, 0.5),
                                          metrics::FBetaScore("micro", 0.5)};
    };
    auto eager = make(), traced = make();
    metrics::R2Score r2_eager("variance_weighted_average", 2),
        r2_traced("variance_weighted_average", 2);
    auto step = tf::function(
        [&](const tf::Tensor& t, const tf::Tensor& p, const tf::Tensor& w) {
          for (auto& m : traced) m.update_state(t, p, w);
          r2_traced.update_state(t, p, w);
          return traced[0].result();
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 3}, tf::float32),
                                                tf::TensorSpec({tf::None, 3}, tf::float32),
                                                tf::TensorSpec({tf::None}, tf::float32)}});
    for (int b = 0; b < 2; ++b) {
      const tf::Tensor t = b == 0 ? yt1() : yt2(), p = b == 0 ? yp1() : yp2();
      const tf::Tensor w = b == 0 ? sw1() : sw2();
      for (auto& m : eager) m.update_state(t, p, w);
      r2_eager.update_state(t, p, w);
      const tf::Tensor got = step(t, p, w);
      check_values(got, {eager[0].result().item<float>()}, 1e-6);
    }
    CHECK(step.tracing_count() == 1);
    for (size_t i = 0; i < eager.size(); ++i) {
      CAPTURE(eager[i].name());
      REQUIRE(traced[i].variables().size() == 4);
      tf::testing::check_close(traced[i].result(), eager[i].result(), 1e-6, 1e-7);
    }
    check_values(traced[1].result(), {1, 0.172413811, 0.714285731}, 2e-6);
    tf::testing::check_close(r2_traced.result(), r2_eager.result(), 1e-6, 1e-7);
  }
}

TEST_CASE("fscore: lazily built state made under a strategy scope is mirrored and summed",
          "[keras][cpu][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  const std::vector<tf::Device> devs = {tf::Device::parse("/cpu:0"), tf::Device::parse("/cpu:1")};
  std::optional<metrics::F1Score> f1;
  std::optional<metrics::R2Score> r2;
  {
    tf::detail::MirrorVariablesScope mirror(devs);
    f1.emplace("macro");
    r2.emplace(std::nullopt);
  }
  // Each replica sees half the rows; the first update (replica 0's) builds mirrored state.
  const tf::Tensor t = tf::concat({yt1(), tf::slice(yt2(), {0, 0}, {4, 3})}, 0);
  const tf::Tensor p = tf::concat({yp1(), tf::slice(yp2(), {0, 0}, {4, 3})}, 0);
  const tf::Tensor rt = tf::concat({rt1(), rp2(), tf::slice(rt2(), {0, 0}, {1, 2})}, 0);
  const tf::Tensor rp = tf::concat({rp1(), rt2(), tf::slice(rp2(), {0, 0}, {1, 2})}, 0);
  for (int r = 0; r < 2; ++r) {
    tf::detail::ReplicaComponentScope replica(r);
    tf::DeviceScope place(devs[static_cast<size_t>(r)]);
    f1->update_state(tf::slice(t, {4 * r, 0}, {4, 3}), tf::slice(p, {4 * r, 0}, {4, 3}));
    r2->update_state(tf::slice(rt, {4 * r, 0}, {4, 2}), tf::slice(rp, {4 * r, 0}, {4, 2}));
  }
  REQUIRE(f1->variables().size() == 4);
  CHECK(f1->variables()[0].is_mirrored());
  CHECK(r2->variables()[1].is_mirrored());
  metrics::F1Score f1_one("macro");
  metrics::R2Score r2_one(std::nullopt);
  f1_one.update_state(t, p);
  r2_one.update_state(rt, rp);
  tf::testing::check_close(f1->result(), f1_one.result(), 1e-6, 1e-7);
  tf::testing::check_close(r2->result(), r2_one.result(), 1e-6, 1e-7);
}

namespace {
// A Dense(3) without bias at fixed weights on six samples (keras_model in the Keras script):
// keras.Sequential([Input((2,)), Dense(3, use_bias=False)]), set_weights([W]), compile(SGD(0),
// "mse", metrics=[F1Score(average="macro"), "r2_score", FBetaScore(average="weighted",
// beta=0.5, threshold=0.3)]), evaluate(x, y, batch_size=4): loss 0.35250556468963623, f1_score
// 0.8222221732139587, r2_score -0.5862751007080078, fbeta_score 0.589946985244751; fit for two
// epochs gives the same metrics at each (the learning rate is 0).
K::Sequential scoring_model(std::vector<K::MetricSpec> compiled) {
  K::Sequential m({K::layers::Dense(3, "", false)});
  m.build(tf::TensorShape({tf::None, 2}));
  m.set_weights({tf::constant({{0.8f, -0.4f, 0.1f}, {0.2f, 0.3f, 0.9f}})});
  m.compile(K::optimizers::SGD(0.0), K::losses::MeanSquaredError(), std::move(compiled));
  return m;
}
tf::Tensor model_x() {
  return tf::constant(
      {{1.0f, 0.5f}, {0.2f, -1.0f}, {-0.5f, 0.8f}, {1.5f, 1.0f}, {-1.0f, -0.3f}, {0.3f, 0.9f}});
}
tf::Tensor model_y() {
  return tf::one_hot(tf::constant({0, 1, 2, 0, 1, 2}), 3);
}
std::vector<K::MetricSpec> scoring_metrics() {
  return {metrics::F1Score("macro"), "r2_score", metrics::FBetaScore("weighted", 0.5, 0.3)};
}
const std::vector<double> kScoringWant = {0.35250556468963623, 0.8222221732139587,
                                          -0.5862751007080078, 0.589946985244751};
}  // namespace

TEST_CASE("fscore: compiled F-scores and R2 in evaluate and fit as Keras", "[keras][cpu][cuda]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    auto m = scoring_model(scoring_metrics());
    const auto e = m.evaluate(model_x(), model_y(), {.batch_size = 4, .verbose = 0});
    REQUIRE(e.size() == kScoringWant.size());
    for (size_t i = 0; i < e.size(); ++i) CHECK(e[i] == Approx(kScoringWant[i]).epsilon(2e-6));
    const K::History h = m.fit(model_x(), model_y(), {.epochs = 2, .batch_size = 4, .verbose = 0});
    for (int epoch = 0; epoch < 2; ++epoch) {
      CHECK(h.history.at("f1_score")[epoch] == Approx(kScoringWant[1]).epsilon(2e-6));
      CHECK(h.history.at("r2_score")[epoch] == Approx(kScoringWant[2]).epsilon(2e-6));
      CHECK(h.history.at("fbeta_score")[epoch] == Approx(kScoringWant[3]).epsilon(2e-6));
    }
    // "f1_score" is Keras' F1Score() with average none: one score per class, not a log.
    auto vector_valued = scoring_model({"f1_score"});
    tf::testing::require_error(
        [&] { vector_valued.evaluate(model_x(), model_y(), {.batch_size = 4, .verbose = 0}); },
        {"f1_score", "(3,)", "one number per metric", "an average"});
    CHECK(metrics::get("F1Score").name() == "F1Score");
    CHECK(metrics::get("fbeta_score").direction() == "up");
    auto r2 = metrics::get("R2Score");
    r2.update_state(rt1(), rp1(), rw1());
    check_values(r2.result(), {0.864969373}, 2e-6);
  }
}

TEST_CASE("fscore: compiled F-scores and R2 under a MirroredStrategy are the global ones",
          "[keras][cpu][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  tf::distribute::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  std::optional<K::Sequential> mirrored;
  std::optional<metrics::F1Score> f1;
  std::vector<double> e;
  {
    auto scope = strategy.scope();
    f1.emplace("macro");
    mirrored.emplace(scoring_model({*f1, "r2_score", metrics::FBetaScore("weighted", 0.5, 0.3)}));
    e = mirrored->evaluate(model_x(), model_y(), {.batch_size = 4, .verbose = 0});
  }
  REQUIRE(e.size() == kScoringWant.size());
  for (size_t i = 0; i < e.size(); ++i) CHECK(e[i] == Approx(kScoringWant[i]).epsilon(2e-6));
  REQUIRE(f1->variables().size() == 4);
  CHECK(f1->variables()[0].is_mirrored());  // built on a replica thread, mirrored
  // Training steps on the replica threads (the learning rate is 0: the same scores).
  std::optional<K::Sequential> trained;
  K::History h;
  {
    auto scope = strategy.scope();
    trained.emplace(scoring_model(scoring_metrics()));
    h = trained->fit(model_x(), model_y(), {.epochs = 1, .batch_size = 4, .verbose = 0});
  }
  CHECK(h.history.at("f1_score")[0] == Approx(kScoringWant[1]).epsilon(2e-6));
  CHECK(h.history.at("r2_score")[0] == Approx(kScoringWant[2]).epsilon(2e-6));
  CHECK(h.history.at("fbeta_score")[0] == Approx(kScoringWant[3]).epsilon(2e-6));
}
