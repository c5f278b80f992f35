// tapeflow's main sample: TF2's "Custom training with tf.distribute.Strategy" tutorial in C++ on
// Fashion-MNIST. A MirroredStrategy over every GPU, or over two logical CPU devices on a machine
// without one; the CNN (Conv2D 32, pool, Conv2D 64, pool, Flatten, Dense 64, Dense 10) made in
// the strategy's scope; 64 examples per replica; traced per-replica train and test steps run by
// strategy.run; losses scaled by the global batch (compute_average_loss); a checkpoint every
// 2 epochs (and after the last epoch when it was not one of them); and at the end a restore of
// the last checkpoint into a model made without the strategy, evaluated on the test set.
//   build/samples/distributed_training [epochs [min_accuracy [max_steps_per_epoch]]]
// Exits 1 when the restored model's test accuracy is below min_accuracy (default 0.90 after
// 10 epochs), 77 without the data files.
#include <tapeflow/tapeflow.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "../common/args.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;

namespace {
K::Sequential create_model() {
  return K::Sequential({K::layers::Conv2D(32, 3, {.activation = "relu"}), K::layers::MaxPooling2D(),
                        K::layers::Conv2D(64, 3, {.activation = "relu"}), K::layers::MaxPooling2D(),
                        K::layers::Flatten(), K::layers::Dense(64, "relu"),
                        K::layers::Dense(10)});
}
}  // namespace

int main(int argc, char** argv) {
  samples::Args args(
      argc, argv,
      "tapeflow's main sample: TF2's \"Custom training with tf.distribute.Strategy\" on\n"
      "Fashion-MNIST (a MirroredStrategy over every GPU, or two logical CPUs without one).",
      "Exits 77 without the data files.");
  const int epochs = args.epochs(10);
  const double min_accuracy =
      args.min_accuracy(0.90, "restored model's test accuracy below which it exits 1");
  const int64_t max_steps = args.integer("max_steps_per_epoch", -1, 1, INT64_MAX,
                                        "steps per epoch, -1: the whole training set", -1);
  args.done();

  // Without GPUs, two logical CPU devices stand in for two GPUs (before any op runs).
  if (tf::config::list_physical_devices("GPU").empty())
    tf::config::set_logical_device_configuration(tf::config::list_physical_devices("CPU")[0],
                                                 {{}, {}});
  tf::random::set_seed(1);

  tf::Tensor train_images, train_labels, test_images, test_labels;
  try {
    auto [train, test] = K::datasets::fashion_mnist::load_data();
    std::tie(train_images, train_labels) = train;
    std::tie(test_images, test_labels) = test;
  } catch (const tf::NotFoundError& e) {
    std::cerr << e.what() << "\n";
    return 77;
  }
  // Add a channels dimension and scale to [0, 1].
  train_images = tf::expand_dims(tf::cast(train_images, tf::float32) / 255.0f, -1);
  test_images = tf::expand_dims(tf::cast(test_images, tf::float32) / 255.0f, -1);

  std::unique_ptr<tf::distribute::MirroredStrategy> strategy_ptr =
      tf::config::list_physical_devices("GPU").empty()
          ? std::make_unique<tf::distribute::MirroredStrategy>(
                std::vector<std::string>{"/cpu:0", "/cpu:1"})
          : std::make_unique<tf::distribute::MirroredStrategy>();
  tf::distribute::MirroredStrategy& strategy = *strategy_ptr;
  const int replicas = strategy.num_replicas_in_sync();
  std::printf("Number of devices: %d\n", replicas);

  const int64_t buffer_size = train_images.shape()[0];
  const int64_t batch_size_per_replica = 64;
  const int64_t global_batch_size = batch_size_per_replica * replicas;

  auto train_dataset = tf::data::Dataset::from_tensor_slices({train_images, train_labels})
                           .shuffle(buffer_size)
                           .batch(global_batch_size);
  if (max_steps > 0) train_dataset = train_dataset.take(max_steps);
  auto test_dataset =
      tf::data::Dataset::from_tensor_slices({test_images, test_labels}).batch(global_batch_size);
  auto train_dist_dataset = strategy.experimental_distribute_dataset(train_dataset);
  auto test_dist_dataset = strategy.experimental_distribute_dataset(test_dataset);

  // A fresh directory: an earlier run's checkpoints would be restored instead of this run's.
  const std::string checkpoint_dir = "./training_checkpoints";
  if (std::filesystem::exists(checkpoint_dir)) {
    std::printf("Removing %s (an earlier run's checkpoints)\n", checkpoint_dir.c_str());
    std::filesystem::remove_all(checkpoint_dir);
  }

  // Everything that holds variables is made in the strategy's scope: mirrored on every replica.
  std::optional<K::Sequential> model;
  std::optional<K::optimizers::Adam> optimizer;
  std::optional<K::metrics::Mean> test_loss;
  std::optional<K::metrics::SparseCategoricalAccuracy> train_accuracy, test_accuracy;
  K::losses::SparseCategoricalCrossentropy loss_object(/*from_logits=*/true,
                                                       K::losses::Reduction::NONE);
  {
    auto scope = strategy.scope();
    model.emplace(create_model());
    optimizer.emplace(0.001);
    test_loss.emplace("test_loss");
    train_accuracy.emplace("train_accuracy");
    test_accuracy.emplace("test_accuracy");
  }
  tf::train::Checkpoint checkpoint({{"optimizer", *optimizer}, {"model", *model}});
  // The manager keeps the directory's index ("checkpoint"), as tf.train.Checkpoint.save does.
  tf::train::CheckpointManager checkpoints(checkpoint, checkpoint_dir, std::nullopt);

  auto compute_loss = [&](const tf::Tensor& labels, const tf::Tensor& predictions) {
    const tf::Tensor per_example_loss = loss_object(labels, predictions);
    return tf::nn::compute_average_loss(per_example_loss, global_batch_size);
  };

  // The per-replica steps are traced functions (each replica traces its own graph once); the
  // distributed steps call strategy.run on them.
  const tf::FunctionOptions step_options{
      .input_signature = {tf::TensorSpec({tf::None, 28, 28, 1}), tf::TensorSpec({tf::None}, tf::uint8)}};
  auto train_step = tf::function(
      [&](const tf::Tensor& images, const tf::Tensor& labels) {
        tf::Tensor predictions, loss;
        std::vector<tf::Tensor> gradients;
        {
          tf::GradientTape tape;
          predictions = (*model)(images, true);
          loss = compute_loss(labels, predictions);
          gradients = tape.gradient(loss, model->trainable_variables());
        }
        optimizer->apply_gradients(gradients, model->trainable_variables());
        train_accuracy->update_state(labels, predictions);
        return loss;
      },
      step_options);
  auto test_step = tf::function(
      [&](const tf::Tensor& images, const tf::Tensor& labels) {
        const tf::Tensor predictions = (*model)(images, false);
        const tf::Tensor t_loss = loss_object(labels, predictions);
        test_loss->update_state(t_loss);
        test_accuracy->update_state(labels, predictions);
        return t_loss;
      },
      step_options);
  auto distributed_train_step = [&](const tf::distribute::PerReplica<std::vector<tf::Tensor>>& in) {
    auto per_replica_losses = strategy.run(
        [&](const std::vector<tf::Tensor>& batch) { return train_step(batch[0], batch[1]); }, in);
    return strategy.reduce(tf::distribute::ReduceOp::SUM, per_replica_losses);
  };
  auto distributed_test_step = [&](const tf::distribute::PerReplica<std::vector<tf::Tensor>>& in) {
    strategy.run([&](const std::vector<tf::Tensor>& batch) { test_step(batch[0], batch[1]); }, in);
  };

  bool saved_last_epoch = false;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    double total_loss = 0.0;
    int num_batches = 0;
    for (const auto& x : train_dist_dataset) {
      total_loss += distributed_train_step(x).item<float>();
      ++num_batches;
    }
    const double train_loss = total_loss / num_batches;
    for (const auto& x : test_dist_dataset) distributed_test_step(x);
    saved_last_epoch = epoch % 2 == 0;
    if (saved_last_epoch) checkpoints.save();
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("Epoch %d, Loss: %.4f, Accuracy: %.2f, Test Loss: %.4f, Test Accuracy: %.2f "
                "(%.1f s)\n",
                epoch + 1, train_loss, 100 * train_accuracy->result().item<float>(),
                test_loss->result().item<float>(), 100 * test_accuracy->result().item<float>(),
                secs);
    test_loss->reset_state();
    train_accuracy->reset_state();
    test_accuracy->reset_state();
  }
  if (!saved_last_epoch) checkpoints.save();  // the restore below reads the final weights

  // Restore the latest checkpoint into a model made without the strategy and test it.
  K::metrics::SparseCategoricalAccuracy eval_accuracy("eval_accuracy");
  K::Sequential new_model = create_model();
  K::optimizers::Adam new_optimizer;
  new_model.build({tf::None, 28, 28, 1});
  tf::train::Checkpoint restored({{"optimizer", new_optimizer}, {"model", new_model}});
  tf::train::CheckpointManager manager(restored, checkpoint_dir, std::nullopt);
  const std::string latest = manager.latest_checkpoint();
  std::printf("Restoring %s\n", latest.c_str());
  restored.restore(latest);
  auto eval_step = tf::function(
      [&](const tf::Tensor& images, const tf::Tensor& labels) {
        const tf::Tensor predictions = new_model(images, false);
        eval_accuracy.update_state(labels, predictions);
        return predictions;
      },
      step_options);
  for (const auto& batch : test_dataset) eval_step(batch[0], batch[1]);
  const double accuracy = eval_accuracy.result().item<float>();
  std::printf("Accuracy after restoring the saved model without strategy: %.2f\n",
              100 * accuracy);
  if (accuracy < min_accuracy) {
    std::fprintf(stderr, "test accuracy %.4f is below %.4f\n", accuracy, min_accuracy);
    return 1;
  }
  return 0;
}
