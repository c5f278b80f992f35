// experimental_distribute_dataset (splitting global batches as TF's rebatching does) and
// tf::nn::compute_average_loss.
#include <list>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/error.h"
#include "data/dataset.h"
#include "distribute/strategy.h"
#include "distribute_testing.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/reduce.h"

namespace tf = tapeflow;
namespace ds = tapeflow::distribute;
using distribute_testing::cpus;
using distribute_testing::split_cpu;
using tf::testing::check_values;

namespace {
// A dataset of `items` examples batched by `batch` (features: the example index as float32,
// two columns; labels: the index as int32), as tf.data's range(items).batch(batch) would give.
std::vector<std::vector<tf::Tensor>> batches(int items, int batch) {
  std::vector<std::vector<tf::Tensor>> out;
  for (int b = 0; b < items; b += batch) {
    const int n = std::min(batch, items - b);
    std::vector<float> x;
    std::vector<int> y;
    for (int i = b; i < b + n; ++i) {
      x.push_back(float(i));
      x.push_back(float(-i));
      y.push_back(i);
    }
    out.push_back({tf::constant(x, {n, 2}), tf::constant(y, {n})});
  }
  return out;
}

// The label values of each replica's component, per global batch.
std::vector<std::vector<std::vector<int>>> labels_of(ds::Strategy& strategy,
                                                     const std::vector<std::vector<tf::Tensor>>& data) {
  std::vector<std::vector<std::vector<int>>> out;
  for (const ds::PerReplica<std::vector<tf::Tensor>>& element :
       strategy.experimental_distribute_dataset(data)) {
    REQUIRE(element.size() == static_cast<size_t>(strategy.num_replicas_in_sync()));
    std::vector<std::vector<int>> step;
    for (size_t r = 0; r < element.size(); ++r) {
      const auto& comp = element[r];
      REQUIRE(comp.size() == 2);
      CHECK(comp[0].device() == "/device:CPU:" + std::to_string(r));
      CHECK(comp[0].shape()[0] == comp[1].shape()[0]);
      CHECK(comp[0].shape()[1] == 2);
      const auto labels = comp[1].numpy<int>();
      const auto feats = comp[0].numpy<float>();
      for (size_t i = 0; i < labels.size(); ++i) CHECK(feats[2 * i] == float(labels[i]));
      step.push_back(labels);
    }
    out.push_back(step);
  }
  return out;
}
using Split = std::vector<std::vector<std::vector<int>>>;
}  // namespace

TEST_CASE("distribute_dataset: even batches split in order", "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(2));
  CHECK(labels_of(strategy, batches(8, 4)) == Split{{{0, 1}, {2, 3}}, {{4, 5}, {6, 7}}});
}

TEST_CASE("distribute_dataset: uneven and short last batches", "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy two(cpus(2));
  // TF's example: 6 items, batch 4, 2 replicas -> [0,1] [2,3] then [4] [5].
  CHECK(labels_of(two, batches(6, 4)) == Split{{{0, 1}, {2, 3}}, {{4}, {5}}});
  // A last batch of 3: the first replica takes ceil(3 / 2) = 2 rows.
  CHECK(labels_of(two, batches(7, 4)) == Split{{{0, 1}, {2, 3}}, {{4, 5}, {6}}});
  // A last batch of 1: the second replica gets an empty component.
  CHECK(labels_of(two, batches(5, 4)) == Split{{{0, 1}, {2, 3}}, {{4}, {}}});
  ds::MirroredStrategy three(cpus(3));
  // A global batch of 4 on 3 replicas: 2, 2, 0 (what TF 2.21's experimental_distribute_dataset
  // yields; its helper batch_sizes_for_worker would say 2, 1, 1).
  CHECK(labels_of(three, batches(8, 4)) == Split{{{0, 1}, {2, 3}, {}}, {{4, 5}, {6, 7}, {}}});
  CHECK(labels_of(three, batches(6, 4)) == Split{{{0, 1}, {2, 3}, {}}, {{4}, {5}, {}}});
  CHECK(labels_of(three, batches(15, 7)) ==
        Split{{{0, 1, 2}, {3, 4, 5}, {6}}, {{7, 8, 9}, {10, 11, 12}, {13}}, {{14}, {}, {}}});
  ds::MirroredStrategy four(cpus(4));
  // Fewer items than replicas: one replica without data.
  CHECK(labels_of(four, batches(3, 4)) == Split{{{0}, {1}, {2}, {}}});
  CHECK(labels_of(four, batches(6, 4)) == Split{{{0}, {1}, {2}, {3}}, {{4}, {5}, {}, {}}});
  // Empty components keep their trailing dimensions.
  for (const auto& element : four.experimental_distribute_dataset(batches(6, 4))) {
    CHECK(element[3][0].shape() == (element[3][0].shape()[0] == 0 ? tf::TensorShape{0, 2}
                                                                  : tf::TensorShape{1, 2}));
  }
  CHECK(ds::detail::replica_batch_sizes(10, 4) == std::vector<int64_t>{3, 3, 3, 1});
  CHECK(ds::detail::replica_batch_sizes(6, 4) == std::vector<int64_t>{2, 2, 2, 0});
  CHECK(ds::detail::replica_batch_sizes(0, 3) == std::vector<int64_t>{0, 0, 0});
}

TEST_CASE("distribute_dataset: any range of std::vector<Tensor>, moved in or referenced",
          "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(2));
  std::list<std::vector<tf::Tensor>> list;
  for (auto& b : batches(4, 4)) list.push_back(b);
  int steps = 0;
  for (const auto& element : strategy.experimental_distribute_dataset(std::move(list))) {
    check_values(element[1][1], {2, 3});
    ++steps;
  }
  CHECK(steps == 1);
  // Bad elements: no batch dimension, different batch sizes.
  std::vector<std::vector<tf::Tensor>> scalar = {{tf::constant(1.0f)}};
  TF_REQUIRE_THROWS_CONTAINING(strategy.experimental_distribute_dataset(scalar).begin(),
                               tf::InvalidArgumentError, "need a first (batch) dimension");
  std::vector<std::vector<tf::Tensor>> ragged = {{tf::zeros({4, 2}), tf::zeros({3})}};
  TF_REQUIRE_THROWS_CONTAINING(strategy.experimental_distribute_dataset(ragged).begin(),
                               tf::InvalidArgumentError, "differ in batch size: tensor 0 is (4, 2)");
}

TEST_CASE("compute_average_loss: sum over the global batch", "[cpu][distribute]") {
  split_cpu();
  tf::Tensor losses = tf::constant({1.0f, 2.0f, 3.0f, 6.0f});
  check_values(tf::nn::compute_average_loss(losses, 8), {12.0 / 8});
  // Without a strategy: the default strategy's one replica (a plain mean).
  check_values(tf::nn::compute_average_loss(losses), {12.0 / 4});
  check_values(tf::nn::compute_average_loss(losses, 4, tf::constant({1.0f, 0.0f, 0.5f, 2.0f})),
               {(1 + 0 + 1.5 + 12) / 4.0});
  check_values(tf::nn::compute_average_loss(tf::constant({{1.0, 2.0}, {3.0, 4.0}}), 2), {5});
  ds::MirroredStrategy strategy(cpus(4));
  // Inside run, the default global batch is the per-replica batch times the replicas.
  auto scaled = strategy.run([](const tf::Tensor& l) { return tf::nn::compute_average_loss(l); },
                             losses);
  check_values(scaled[2], {12.0 / 16});
  {
    auto scope = strategy.scope();
    TF_REQUIRE_THROWS_CONTAINING(tf::nn::compute_average_loss(losses),
                                 tf::FailedPreconditionError, "cross-replica context");
    check_values(tf::nn::compute_average_loss(losses, 16), {12.0 / 16});
  }
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::compute_average_loss(tf::constant(1.0f), 4),
                               tf::InvalidArgumentError, "at least rank 1");
  // TF's div_no_nan: a global batch of 0 gives 0; a negative one is an error here.
  check_values(tf::nn::compute_average_loss(losses, 0), {0});
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::compute_average_loss(losses, -1), tf::InvalidArgumentError,
                               "global_batch_size must not be negative, got -1");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::compute_average_loss(tf::constant({1, 2}), 2),
                               tf::InvalidArgumentError, "must be a floating tensor, got int32");
}

TEST_CASE("scale_regularization_loss: divided by the replicas inside run", "[cpu][distribute]") {
  split_cpu();
  // Without a strategy: the default strategy's one replica.
  check_values(tf::nn::scale_regularization_loss(tf::constant({1.0f, 2.0f})), {3});
  ds::MirroredStrategy strategy(cpus(4));
  tf::Variable w = [&] {
    auto scope = strategy.scope();
    return tf::Variable(tf::constant({1.0f, 2.0f}), "w");
  }();
  // Summed over the replicas, the penalty counts once, and so does its gradient.
  auto out = strategy.run([&] {
    tf::GradientTape tape;
    const tf::Tensor penalty =
        tf::nn::scale_regularization_loss({tf::reduce_sum(w * w), tf::constant(1.0f)});
    return std::vector<tf::Tensor>{penalty, tape.gradient(penalty, w)};
  });
  check_values(
      strategy.reduce(ds::ReduceOp::SUM, ds::PerReplica<tf::Tensor>(std::vector<tf::Tensor>{
                                             out[0][0], out[1][0], out[2][0], out[3][0]})),
      {6});
  for (int r = 0; r < 4; ++r) check_values(out[r][1], {0.5, 1.0});
  {
    auto scope = strategy.scope();
    TF_REQUIRE_THROWS_CONTAINING(tf::nn::scale_regularization_loss(tf::constant(1.0f)),
                                 tf::FailedPreconditionError, "cross-replica context");
  }
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::scale_regularization_loss(tf::constant(1)),
                               tf::InvalidArgumentError, "must be a floating tensor, got int32");
  TF_REQUIRE_THROWS_CONTAINING(
      tf::nn::scale_regularization_loss({tf::constant(1.0f), tf::constant(1.0)}),
      tf::InvalidArgumentError, "differ in dtype: float32 for loss 0, float64 for loss 1");
  TF_REQUIRE_THROWS_CONTAINING(tf::nn::scale_regularization_loss(std::vector<tf::Tensor>{}),
                               tf::InvalidArgumentError, "no regularization losses given");
}

TEST_CASE("distribute_dataset: a tf::data::Dataset pipeline", "[cpu][distribute]") {
  split_cpu();
  ds::MirroredStrategy strategy(cpus(2));
  std::vector<float> xs;
  std::vector<int> ys;
  for (int i = 0; i < 7; ++i) {
    xs.push_back(float(i));
    xs.push_back(float(-i));
    ys.push_back(i);
  }
  tf::data::Dataset data =
      tf::data::Dataset::from_tensor_slices({tf::constant(xs, {7, 2}), tf::constant(ys, {7})})
          .batch(4);
  Split got;
  for (int epoch = 0; epoch < 2; ++epoch) {
    got.clear();
    for (const auto& element : strategy.experimental_distribute_dataset(data)) {
      std::vector<std::vector<int>> step;
      for (size_t r = 0; r < element.size(); ++r) {
        CHECK(element[r][0].device() == "/device:CPU:" + std::to_string(r));
        step.push_back(element[r][1].numpy<int>());
      }
      got.push_back(step);
    }
    CHECK(got == Split{{{0, 1}, {2, 3}}, {{4, 5}, {6}}});
  }
}
