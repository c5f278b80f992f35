// TF2's "Distributed training with Keras" tutorial in C++ on Fashion-MNIST: a model built and
// compiled in a MirroredStrategy's scope (every GPU, or two logical CPU devices without one),
// then model.fit splits every global batch over the replicas, with the tutorial's callbacks:
// TensorBoard, ModelCheckpoint (weights per epoch), a LearningRateScheduler (decay at epochs 3
// and 7) and a callback printing the learning rate. Finally the last weights are loaded and the
// model evaluated.
//   build/samples/distributed_keras [epochs [min_accuracy [max_steps_per_epoch]]]
// Exits 1 when the test accuracy is below min_accuracy (default 0.88 after 12 epochs), 77 without
// the data files.
#include <tapeflow/tapeflow.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "../common/args.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;

namespace {
// The tutorial's schedule.
double decay(int epoch, double) {
  if (epoch < 3) return 1e-3;
  if (epoch < 7) return 1e-4;
  return 1e-5;
}

// Prints the learning rate at the end of each epoch (the tutorial's PrintLR).
class PrintLR : public K::callbacks::Callback {
 public:
  void on_epoch_end(int epoch, const K::Logs&) override {
    std::printf("\nLearning rate for epoch %d is %g\n", epoch + 1, context().get_learning_rate());
  }
};
}  // namespace

int main(int argc, char** argv) {
  samples::Args args(
      argc, argv,
      "TF2's \"Distributed training with Keras\" on Fashion-MNIST (a MirroredStrategy).",
      "Exits 77 without the data files.");
  const int epochs = args.epochs(12);
  const double min_accuracy = args.min_accuracy(0.88);
  const int64_t max_steps = args.integer("max_steps_per_epoch", -1, 1, INT64_MAX,
                                        "steps per epoch, -1: the whole training set", -1);
  args.done();

  if (tf::config::list_physical_devices("GPU").empty())
    tf::config::set_logical_device_configuration(tf::config::list_physical_devices("CPU")[0],
                                                 {{}, {}});
  tf::random::set_seed(2);

  tf::Tensor train_images, train_labels, test_images, test_labels;
  try {
    auto [train, test] = K::datasets::fashion_mnist::load_data();
    std::tie(train_images, train_labels) = train;
    std::tie(test_images, test_labels) = test;
  } catch (const tf::NotFoundError& e) {
    std::cerr << e.what() << "\n";
    return 77;
  }
  train_images = tf::expand_dims(tf::cast(train_images, tf::float32) / 255.0f, -1);
  test_images = tf::expand_dims(tf::cast(test_images, tf::float32) / 255.0f, -1);

  std::unique_ptr<tf::distribute::MirroredStrategy> strategy =
      tf::config::list_physical_devices("GPU").empty()
          ? std::make_unique<tf::distribute::MirroredStrategy>(
                std::vector<std::string>{"/cpu:0", "/cpu:1"})
          : std::make_unique<tf::distribute::MirroredStrategy>();
  std::printf("Number of devices: %d\n", strategy->num_replicas_in_sync());

  const int64_t batch_size = 64 * strategy->num_replicas_in_sync();
  auto train_dataset = tf::data::Dataset::from_tensor_slices({train_images, train_labels})
                           .cache()
                           .shuffle(10000)
                           .batch(batch_size);
  if (max_steps > 0) train_dataset = train_dataset.take(max_steps);
  auto eval_dataset =
      tf::data::Dataset::from_tensor_slices({test_images, test_labels}).batch(batch_size);

  std::optional<K::Sequential> model;
  {
    auto scope = strategy->scope();
    model.emplace(K::Sequential({K::layers::Conv2D(32, 3, {.activation = "relu"}),
                                 K::layers::MaxPooling2D(), K::layers::Flatten(),
                                 K::layers::Dense(64, "relu"), K::layers::Dense(10)}));
    model->compile(K::optimizers::Adam(), K::losses::SparseCategoricalCrossentropy(true),
                   {"accuracy"});
  }

  const std::string checkpoint_dir = "./training_checkpoints_keras";
  std::filesystem::remove_all(checkpoint_dir);
  const std::string checkpoint_prefix = checkpoint_dir + "/ckpt_{epoch}.safetensors";
  model->fit(train_dataset,
             {.epochs = epochs,
              .callbacks = {K::callbacks::TensorBoard("./logs"),
                            K::callbacks::ModelCheckpoint(checkpoint_prefix),
                            K::callbacks::LearningRateScheduler(decay), PrintLR()}});

  model->load_weights(checkpoint_dir + "/ckpt_" + std::to_string(epochs) + ".safetensors");
  const std::vector<double> r = model->evaluate(eval_dataset);
  std::printf("Eval loss: %.4f, Eval accuracy: %.4f\n", r[0], r[1]);
  if (r[1] < min_accuracy) {
    std::fprintf(stderr, "test accuracy %.4f is below %.4f\n", r[1], min_accuracy);
    return 1;
  }
  return 0;
}
