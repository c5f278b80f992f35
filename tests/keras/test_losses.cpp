// Losses against hand-computed values (and Keras' documented examples): reductions, sample
// weights, from_logits, label smoothing, clipping, gradients, distribution scaling, errors.
#include <cmath>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/error.h"
#include "distribute/replica_context.h"
#include "keras/losses.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace losses = tapeflow::keras::losses;
using losses::Reduction;
using tf::testing::check_values;

namespace {
double lse(std::vector<double> x) {
  double s = 0;
  for (double v : x) s += std::exp(v);
  return std::log(s);
}
}  // namespace

TEST_CASE("losses: SparseCategoricalCrossentropy from logits and probabilities", "[keras][cpu]") {
  tf::Tensor logits = tf::constant({{1.0f, 2.0f, 3.0f}, {1.0f, 1.0f, 1.0f}});
  tf::Tensor labels = tf::constant({2, 0});
  const double l0 = lse({1, 2, 3}) - 3, l1 = std::log(3.0);
  losses::SparseCategoricalCrossentropy scce(/*from_logits=*/true);
  CHECK(scce.name() == "sparse_categorical_crossentropy");
  check_values(scce(labels, logits), {(l0 + l1) / 2});
  check_values(losses::SparseCategoricalCrossentropy(true, Reduction::SUM)(labels, logits),
               {l0 + l1});
  check_values(losses::SparseCategoricalCrossentropy(true, Reduction::NONE)(labels, logits),
               {l0, l1});
  // Labels with a trailing 1, int64 or float: the same.
  check_values(scce(tf::constant({{2}, {0}}), logits), {(l0 + l1) / 2});
  check_values(scce(tf::constant({2.0f, 0.0f}), logits), {(l0 + l1) / 2});
  // Sample weights multiply the per-sample losses; SUM_OVER_BATCH_SIZE divides by the count.
  check_values(scce(labels, logits, tf::constant({1.0f, 2.0f})), {(l0 + 2 * l1) / 2});
  check_values(scce(labels, logits, tf::constant({{1.0f}, {2.0f}})), {(l0 + 2 * l1) / 2});
  check_values(scce(labels, logits, tf::constant(0.5f)), {(l0 + l1) / 4});

  tf::Tensor probs = tf::constant({{0.2f, 0.3f, 0.5f}, {0.7f, 0.2f, 0.1f}});
  losses::SparseCategoricalCrossentropy from_probs;
  check_values(from_probs(tf::constant({2, 1}), probs),
               {(-std::log(0.5) - std::log(0.2)) / 2});
  // A probability of 0 is clipped to 1e-7, never log(0).
  check_values(losses::SparseCategoricalCrossentropy(false, Reduction::NONE)(
                   tf::constant({0}), tf::constant({{0.0f, 1.0f}})),
               {-std::log(1e-7)}, 1e-4);

  tf::testing::require_error([&] { scce(tf::constant({0, 1, 2}), logits); },
                             {"sparse_categorical_crossentropy", "(3,)", "(2, 3)"});
  tf::testing::require_error([&] { scce(labels, logits, tf::constant({1.0f, 2.0f, 3.0f})); },
                             {"sample_weight of shape (3,)", "(2,)"});
  REQUIRE_THROWS_AS(scce(tf::constant({3, 0}), logits), tf::InvalidArgumentError);
  // A NaN float label is out of range (as TF, whose cast makes it INT64_MIN), not class 0.
  tf::testing::require_error([&] { scce(tf::constant({std::nanf(""), 0.0f}), logits); },
                             {"label value of -1"});
  losses::Loss empty;
  TF_REQUIRE_THROWS_CONTAINING(empty(labels, logits), tf::FailedPreconditionError, "empty");
}

TEST_CASE("losses: CategoricalCrossentropy with normalisation and label smoothing",
          "[keras][cpu]") {
  tf::Tensor onehot = tf::constant({{0.0f, 0.0f, 1.0f}, {0.0f, 1.0f, 0.0f}});
  tf::Tensor probs = tf::constant({{0.2f, 0.3f, 0.5f}, {0.7f, 0.2f, 0.1f}});
  losses::CategoricalCrossentropy cce;
  check_values(cce(onehot, probs), {(-std::log(0.5) - std::log(0.2)) / 2});
  // Unnormalised probabilities are divided by their sum first: (1, 1, 2) -> 0.5 for class 2.
  check_values(cce(tf::constant({{0.0f, 0.0f, 1.0f}}), tf::constant({{1.0f, 1.0f, 2.0f}})),
               {-std::log(0.5)});
  // From logits with smoothing 0.3: labels become y * 0.7 + 0.1.
  tf::Tensor logits = tf::constant({{1.0, 2.0, 3.0}, {0.5, -1.0, 2.0}});
  losses::CategoricalCrossentropy smooth(true, 0.3, Reduction::NONE);
  const std::vector<std::vector<double>> x = {{1, 2, 3}, {0.5, -1, 2}};
  const std::vector<std::vector<double>> y = {{0.1, 0.1, 0.8}, {0.1, 0.8, 0.1}};
  std::vector<double> want;
  for (size_t r = 0; r < 2; ++r) {
    double l = 0;
    for (size_t c = 0; c < 3; ++c) l -= y[r][c] * (x[r][c] - lse(x[r]));
    want.push_back(l);
  }
  auto got = smooth(tf::constant({{0.0, 0.0, 1.0}, {0.0, 1.0, 0.0}}), logits);
  CHECK(got.dtype() == tf::float64);
  check_values(got, want, 1e-12, 1e-12);
  tf::testing::require_error([&] { cce(tf::constant({{0.0f, 1.0f}}), probs); },
                             {"categorical_crossentropy", "(1, 2)", "(2, 3)"});
  TF_REQUIRE_THROWS_CONTAINING(losses::CategoricalCrossentropy(false, 1.5),
                               tf::InvalidArgumentError, "label_smoothing");
}

TEST_CASE("losses: MeanSquaredError as Keras' documented example", "[keras][cpu]") {
  tf::Tensor y_true = tf::constant({{0.0f, 1.0f}, {0.0f, 0.0f}});
  tf::Tensor y_pred = tf::constant({{1.0f, 1.0f}, {1.0f, 0.0f}});
  losses::MeanSquaredError mse;
  CHECK(mse.name() == "mean_squared_error");
  check_values(mse(y_true, y_pred), {0.5});
  check_values(mse(y_true, y_pred, tf::constant({0.7f, 0.3f})), {0.25});
  check_values(losses::MeanSquaredError(Reduction::SUM)(y_true, y_pred), {1.0});
  check_values(losses::MeanSquaredError(Reduction::NONE)(y_true, y_pred), {0.5, 0.5});
  // Integer labels are cast to y_pred's dtype; (n, 1) against (n,) squeezes.
  check_values(mse(tf::constant({{1}, {3}}), tf::constant({2.0f, 1.0f})), {2.5});
  tf::testing::require_error([&] { mse(tf::ones({2, 3}), y_pred); },
                             {"mean_squared_error", "(2, 3)", "(2, 2)"});
}

TEST_CASE("losses: BinaryCrossentropy as Keras' documented examples", "[keras][cpu]") {
  tf::Tensor y_true = tf::constant({{0.0f, 1.0f}, {0.0f, 0.0f}});
  tf::Tensor logits = tf::constant({{-18.6f, 0.51f}, {2.94f, -12.8f}});
  auto sce = [](double z, double x) {
    return std::max(x, 0.0) - x * z + std::log1p(std::exp(-std::abs(x)));
  };
  const double r0 = (sce(0, -18.6) + sce(1, 0.51)) / 2, r1 = (sce(0, 2.94) + sce(0, -12.8)) / 2;
  losses::BinaryCrossentropy bce(true);
  check_values(bce(y_true, logits), {(r0 + r1) / 2}, 1e-5);
  CHECK(bce(y_true, logits).item<float>() == Approx(0.865).epsilon(1e-3));
  check_values(bce(y_true, logits, tf::constant({0.8f, 0.2f})), {(0.8 * r0 + 0.2 * r1) / 2},
               1e-5);
  check_values(losses::BinaryCrossentropy(true, 0, Reduction::NONE)(y_true, logits), {r0, r1},
               1e-5);
  tf::Tensor probs = tf::constant({{0.6f, 0.4f}, {0.4f, 0.6f}});
  const double p0 = -(std::log(0.4) + std::log(0.4)) / 2, p1 = -(std::log(0.6) + std::log(0.4)) / 2;
  check_values(losses::BinaryCrossentropy()(y_true, probs), {(p0 + p1) / 2}, 1e-5);
  // Saturated probabilities are clipped to [1e-7, 1 - 1e-7]: a large finite loss.
  tf::Tensor worst = losses::BinaryCrossentropy()(tf::constant({1.0f}), tf::constant({0.0f}));
  CHECK(worst.item<float>() == Approx(-std::log(1e-7)).epsilon(1e-4));
  // Label smoothing 0.2: y -> y * 0.8 + 0.1.
  const double s = -(0.9 * std::log(0.6) + 0.1 * std::log(0.4));
  check_values(losses::BinaryCrossentropy(false, 0.2)(tf::constant({{1.0f}}), tf::constant({{0.6f}})),
               {s}, 1e-5);
}

TEST_CASE("losses: gradients flow and custom losses wrap functions", "[keras][cpu]") {
  tf::Tensor logits = tf::constant({{1.0, 2.0, 3.0}, {1.0, 1.0, 1.0}});
  tf::GradientTape tape;
  tape.watch(logits);
  tf::Tensor loss = losses::SparseCategoricalCrossentropy(true)(tf::constant({2, 0}), logits);
  tf::Tensor g = tape.gradient(loss, logits);
  // d mean / d logits = (softmax - onehot) / batch.
  const double z = std::exp(1) + std::exp(2) + std::exp(3);
  check_values(g, {std::exp(1) / z / 2, std::exp(2) / z / 2, (std::exp(3) / z - 1) / 2,
                   (1.0 / 3 - 1) / 2, 1.0 / 6, 1.0 / 6},
               1e-10, 1e-12);
  losses::Loss mae([](const tf::Tensor& t, const tf::Tensor& p) {
    return tf::reduce_mean(tf::abs(t - p), -1);
  }, "mae");
  check_values(mae(tf::constant({{1.0f, 2.0f}}), tf::constant({{2.0f, 4.0f}})), {1.5});
  CHECK(mae.name() == "mae");
  CHECK(losses::get("mse").name() == "mean_squared_error");
  CHECK(losses::get("sparse_categorical_crossentropy").impl()->kind ==
        "sparse_categorical_crossentropy");
  TF_REQUIRE_THROWS_CONTAINING(losses::get("huber_loss"), tf::InvalidArgumentError, "huber_loss");
}

namespace {
class TwoReplicas final : public tf::distribute::ReplicaContext {
 public:
  int replica_id_in_sync_group() const override { return 0; }
  int num_replicas_in_sync() const override { return 2; }
  tf::Tensor all_reduce(tf::distribute::ReduceOp, const tf::Tensor& v) override { return v; }
  std::vector<tf::Tensor> all_reduce(tf::distribute::ReduceOp,
                                     const std::vector<tf::Tensor>& v) override {
    return v;
  }
};
}  // namespace

TEST_CASE("losses: inside a replica SUM_OVER_BATCH_SIZE divides by the replica count",
          "[keras][cpu]") {
  tf::Tensor y_true = tf::constant({{0.0f, 1.0f}, {0.0f, 0.0f}});
  tf::Tensor y_pred = tf::constant({{1.0f, 1.0f}, {1.0f, 0.0f}});
  TwoReplicas ctx;
  tf::distribute::detail::ReplicaContextScope scope(&ctx);
  check_values(losses::MeanSquaredError()(y_true, y_pred), {0.25});
  check_values(losses::MeanSquaredError(Reduction::SUM)(y_true, y_pred), {1.0});
}

TEST_CASE("losses: an empty batch gives the scalar 0 under AUTO and SUM", "[keras][cpu]") {
  // The per-sample losses of shape (0,) came back unreduced, so .item() failed.
  const tf::Tensor no_labels = tf::zeros({0}, tf::int32), no_logits = tf::zeros({0, 3});
  const tf::Tensor no_y = tf::zeros({0, 3});
  for (Reduction r : {Reduction::SUM_OVER_BATCH_SIZE, Reduction::SUM}) {
    for (const tf::Tensor& l :
         {losses::SparseCategoricalCrossentropy(true, r)(no_labels, no_logits),
          losses::CategoricalCrossentropy(true, 0.0, r)(no_y, no_logits),
          losses::MeanSquaredError(r)(no_y, no_logits),
          losses::BinaryCrossentropy(true, 0.0, r)(no_y, no_logits)}) {
      CHECK(l.shape() == tf::TensorShape{});
      CHECK(l.item<float>() == 0.0f);
    }
  }
  // NONE keeps the (empty) per-sample losses.
  CHECK(losses::MeanSquaredError(Reduction::NONE)(no_y, no_logits).shape() ==
        tf::TensorShape({0}));
  // The 0 stays connected to the predictions: their gradient is defined (an empty share of a
  // global batch under a strategy gets zero gradients, not "No gradients provided").
  tf::Variable pred(tf::zeros({0, 3}), "pred");
  tf::GradientTape tape;
  const tf::Tensor l = losses::MeanSquaredError()(no_y, pred.value());
  const auto g = tape.gradient(l, std::vector<tf::Variable>{pred});
  REQUIRE(g[0].defined());
  CHECK(g[0].shape() == tf::TensorShape({0, 3}));
}
