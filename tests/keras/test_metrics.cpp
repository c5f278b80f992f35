// Metrics against Keras' documented examples; accumulation, reset, sample weights, the
// "accuracy" string, traced updates, and mirrored state summed over replicas.
#include <thread>

#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/losses.h"
#include "keras/metrics.h"
#include "ops/factory.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace metrics = tapeflow::keras::metrics;
namespace losses = tapeflow::keras::losses;
using tf::testing::check_values;

TEST_CASE("metrics: Mean and Sum accumulate, weight and reset", "[keras][cpu]") {
  metrics::Mean mean;
  CHECK(mean.name() == "mean");
  check_values(mean.result(), {0.0});  // nothing seen yet: 0, not NaN
  mean.update_state(tf::constant({1.0f, 3.0f, 5.0f, 7.0f}));
  check_values(mean.result(), {4.0});
  mean.reset_state();
  mean.update_state(tf::constant({1.0f, 3.0f, 5.0f, 7.0f}), tf::constant({1.0f, 1.0f, 0.0f, 0.0f}));
  check_values(mean.result(), {2.0});
  mean.update_state(tf::constant(8.0));  // a float64 scalar counts as one value
  check_values(mean.result(), {(1 + 3 + 8) / 3.0});
  // Rank 2 values are averaged per sample first; the count is the number of samples.
  metrics::Mean m2;
  m2.update_state(tf::constant({{1.0f, 3.0f}, {5.0f, 9.0f}}));
  check_values(m2.result(), {4.5});
  auto vars = m2.tracked_variables();
  REQUIRE(vars.size() == 2);
  CHECK(vars[0].first == "total");
  check_values(vars[0].second, {9.0});
  check_values(vars[1].second, {2.0});

  metrics::Sum sum;
  sum.update_state(tf::constant({1.0f, 3.0f, 5.0f, 7.0f}));
  check_values(sum.result(), {16.0});
  sum.reset_state();
  sum.update_state(tf::constant({1.0f, 3.0f, 5.0f, 7.0f}), tf::constant({1.0f, 0.0f, 0.0f, 1.0f}));
  check_values(sum.result(), {8.0});
  // Through the base handle, Mean takes (values, sample_weight).
  metrics::Metric base = metrics::Mean("loss");
  base.update_state(tf::constant({2.0f, 4.0f}), tf::constant({3.0f, 1.0f}));
  check_values(base.result(), {2.5});
  tf::testing::require_error(
      [&] { base.update_state(tf::constant({2.0f}), tf::constant({2.0f}), tf::constant({1.0f})); },
      {"loss", "update_state(values, sample_weight)"});
  tf::testing::require_error(
      [&] { metrics::Mean().update_state(tf::constant({1.0f, 2.0f}), tf::constant({1.0f, 2.0f, 3.0f})); },
      {"sample_weight of shape (3,)", "(2,)"});
  // Per-sample weights of shape (batch,) on values with more axes: each sample is averaged over
  // its other axes first, then weighted (Keras 3's numbers; it was a shape error).
  metrics::Mean per_sample;
  per_sample.update_state(tf::constant({{1.0f, 2.0f, 3.0f}, {4.0f, 5.0f, 6.0f}}),
                          tf::constant({1.0f, 3.0f}));
  check_values(per_sample.result(), {4.25});
  metrics::SparseCategoricalAccuracy acc3;
  acc3.update_state(tf::constant({{0, 1, 2}, {2, 2, 0}}),
                    tf::constant(std::vector<float>{1, 0, 0, 0, 1, 0, 1, 0, 0,  //
                                                    0, 0, 1, 1, 0, 0, 1, 0, 0},
                                 tf::TensorShape({2, 3, 3})),
                    tf::constant({1.0f, 2.0f}));
  check_values(acc3.result(), {2.0 / 3.0});
}

TEST_CASE("metrics: accuracies and wrapped losses as Keras' documented examples",
          "[keras][cpu]") {
  metrics::SparseCategoricalAccuracy sca;
  sca.update_state(tf::constant({{2}, {1}}),
                   tf::constant({{0.1f, 0.6f, 0.3f}, {0.05f, 0.95f, 0.0f}}));
  check_values(sca.result(), {0.5});
  sca.reset_state();
  sca.update_state(tf::constant({{2}, {1}}), tf::constant({{0.1f, 0.6f, 0.3f}, {0.05f, 0.95f, 0.0f}}),
                   tf::constant({0.7f, 0.3f}));
  check_values(sca.result(), {0.3});
  // Accumulates over batches: 1 of 2, then 2 of 2 -> 3 of 4.
  metrics::SparseCategoricalAccuracy acc2;
  acc2.update_state(tf::constant({0, 1}), tf::constant({{0.9f, 0.1f}, {0.8f, 0.2f}}));
  acc2.update_state(tf::constant({1, 1}), tf::constant({{0.1f, 0.9f}, {0.2f, 0.8f}}));
  check_values(acc2.result(), {0.75});

  metrics::CategoricalAccuracy ca;
  ca.update_state(tf::constant({{0.0f, 0.0f, 1.0f}, {0.0f, 1.0f, 0.0f}}),
                  tf::constant({{0.1f, 0.9f, 0.8f}, {0.05f, 0.95f, 0.0f}}));
  check_values(ca.result(), {0.5});
  ca.reset_state();
  ca.update_state(tf::constant({{0.0f, 0.0f, 1.0f}, {0.0f, 1.0f, 0.0f}}),
                  tf::constant({{0.1f, 0.9f, 0.8f}, {0.05f, 0.95f, 0.0f}}), tf::constant({0.7f, 0.3f}));
  check_values(ca.result(), {0.3});

  metrics::Accuracy a;
  a.update_state(tf::constant({{1}, {2}, {3}, {4}}), tf::constant({{0}, {2}, {3}, {4}}));
  check_values(a.result(), {0.75});
  a.reset_state();
  a.update_state(tf::constant({{1}, {2}, {3}, {4}}), tf::constant({{0}, {2}, {3}, {4}}),
                 tf::constant({1.0f, 1.0f, 0.0f, 0.0f}));
  check_values(a.result(), {0.5});

  metrics::BinaryAccuracy ba;
  ba.update_state(tf::constant({{1.0f}, {1.0f}, {0.0f}, {0.0f}}),
                  tf::constant({{0.98f}, {1.0f}, {0.0f}, {0.6f}}));
  check_values(ba.result(), {0.75});
  ba.reset_state();
  ba.update_state(tf::constant({{1.0f}, {1.0f}, {0.0f}, {0.0f}}),
                  tf::constant({{0.98f}, {1.0f}, {0.0f}, {0.6f}}), tf::constant({1.0f, 0.0f, 0.0f, 1.0f}));
  check_values(ba.result(), {0.5});

  metrics::SparseCategoricalCrossentropy xent;
  xent.update_state(tf::constant({1, 2}), tf::constant({{0.05f, 0.95f, 0.0f}, {0.1f, 0.8f, 0.1f}}));
  check_values(xent.result(), {(-std::log(0.95) - std::log(0.1)) / 2}, 1e-5);

  metrics::MeanSquaredError mse;
  mse.update_state(tf::constant({{0.0f, 1.0f}, {0.0f, 0.0f}}), tf::constant({{1.0f, 1.0f}, {0.0f, 0.0f}}));
  check_values(mse.result(), {0.25});
  mse.reset_state();
  mse.update_state(tf::constant({{0.0f, 1.0f}, {0.0f, 0.0f}}), tf::constant({{1.0f, 1.0f}, {0.0f, 0.0f}}),
                   tf::constant({1.0f, 0.0f}));
  check_values(mse.result(), {0.5});

  tf::testing::require_error(
      [&] { metrics::SparseCategoricalAccuracy().update_state(tf::constant({0, 1, 2}), tf::ones({2, 3})); },
      {"sparse_categorical_accuracy", "(3,)", "(2, 3)"});
}

TEST_CASE("metrics: the accuracy string resolves from the loss as Keras' compile does", "[keras][cpu]") {
  auto sparse = metrics::get("accuracy", losses::SparseCategoricalCrossentropy(true));
  CHECK(sparse.name() == "accuracy");
  sparse.update_state(tf::constant({1, 0}), tf::constant({{0.2f, 0.8f}, {0.3f, 0.7f}}));
  check_values(sparse.result(), {0.5});
  auto cat = metrics::get("acc", losses::CategoricalCrossentropy());
  cat.update_state(tf::constant({{0.0f, 1.0f}, {1.0f, 0.0f}}), tf::constant({{0.2f, 0.8f}, {0.3f, 0.7f}}));
  check_values(cat.result(), {0.5});
  auto bin = metrics::get("accuracy", losses::BinaryCrossentropy());
  bin.update_state(tf::constant({{1.0f}, {0.0f}}), tf::constant({{0.7f}, {0.7f}}));
  check_values(bin.result(), {0.5});
  // Without a known loss: Keras' shape rule at each update.
  auto any = metrics::get("accuracy");
  any.update_state(tf::constant({1, 1}), tf::constant({{0.2f, 0.8f}, {0.3f, 0.7f}}));  // sparse
  any.update_state(tf::constant({{1.0f}, {0.0f}}), tf::constant({{0.7f}, {0.2f}}));    // binary
  any.update_state(tf::constant({{0.0f, 1.0f}}), tf::constant({{0.9f, 0.1f}}));        // categorical
  check_values(any.result(), {4.0 / 5.0});
  CHECK(metrics::get("mse").name() == "mse");
  CHECK(metrics::get("sparse_categorical_accuracy").name() == "sparse_categorical_accuracy");
  TF_REQUIRE_THROWS_CONTAINING(metrics::get("rmse"), tf::InvalidArgumentError, "rmse");
}

TEST_CASE("metrics: updates inside a traced function run at every call", "[keras][cpu]") {
  metrics::Mean loss_metric("train_loss");
  metrics::SparseCategoricalAccuracy acc("train_accuracy");
  auto step = tf::function([&](const tf::Tensor& y, const tf::Tensor& p, const tf::Tensor& l) {
    loss_metric.update_state(l);
    acc.update_state(y, p);
    return acc.result();
  });
  tf::Tensor p = tf::constant({{0.9f, 0.1f}, {0.4f, 0.6f}});
  check_values(step(tf::constant({0, 0}), p, tf::constant(1.0f)), {0.5});
  check_values(step(tf::constant({0, 1}), p, tf::constant(3.0f)), {0.75});
  check_values(step(tf::constant({1, 0}), p, tf::constant(5.0f)), {0.5});
  CHECK(step.tracing_count() == 1);
  check_values(loss_metric.result(), {3.0});
  acc.reset_state();
  check_values(step(tf::constant({0, 1}), p, tf::constant(1.0f)), {1.0});
}

TEST_CASE("metrics: mirrored state accumulates per replica and result() sums the copies",
          "[keras][cpu][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  const std::vector<tf::Device> devs = {tf::Device::parse("/cpu:0"), tf::Device::parse("/cpu:1")};
  metrics::Mean mean;
  metrics::SparseCategoricalAccuracy acc;
  {
    tf::detail::MirrorVariablesScope mirror(devs);
    mean = metrics::Mean("loss");
    acc = metrics::SparseCategoricalAccuracy();
  }
  REQUIRE(mean.variables()[0].is_mirrored());
  for (int r = 0; r < 2; ++r) {
    tf::detail::ReplicaComponentScope replica(r);
    tf::DeviceScope place(devs[static_cast<size_t>(r)]);
    // Replica 0 sees (1, 2), replica 1 sees (6): the global mean is 3.
    mean.update_state(r == 0 ? tf::constant({1.0f, 2.0f}) : tf::constant({6.0f}));
    acc.update_state(tf::constant({r}), tf::constant({{0.9f, 0.1f}}));  // right on replica 0
    check_values(mean.result(), {r == 0 ? 1.5 : 6.0});  // inside a replica: its own copy
  }
  check_values(mean.result(), {3.0});
  check_values(acc.result(), {0.5});
  auto totals = mean.variables()[0].components();
  check_values(totals[0].value(), {3.0});
  check_values(totals[1].value(), {6.0});
  // A cross-replica update lands on one copy only: counted once.
  mean.update_state(tf::constant({7.0f}));
  check_values(mean.result(), {4.0});
  mean.reset_state();
  for (const auto& c : mean.variables()[1].components()) check_values(c.value(), {0.0});
  check_values(mean.result(), {0.0});
}

TEST_CASE("metrics: concurrent eager updates of one metric lose nothing", "[keras][cpu]") {
  metrics::Mean mean;
  auto worker = [&](float v) {
    for (int i = 0; i < 200; ++i) mean.update_state(tf::constant({v, v}));
  };
  std::thread a(worker, 1.0f), b(worker, 3.0f);
  a.join();
  b.join();
  check_values(mean.variables()[1].value(), {800.0});
  check_values(mean.result(), {2.0});
}
