// TF2's "Multi-worker training with Keras" tutorial in C++ on Fashion-MNIST: every process of an
// MPI job is one worker of a MultiWorkerMirroredStrategy (its GPUs, or its CPU); the model is built
// and compiled in the strategy's scope and model.fit splits every global batch (64 per worker)
// over all workers' replicas, all-reducing the gradients across processes. Worker 0 (the chief)
// prints the progress bar and writes the checkpoints; the others train silently.
//   mpirun -np 2 build/samples/multi_worker [epochs [min_accuracy [steps_per_epoch]]]
// Run alone it is a one-worker job. Exits 1 when the test accuracy is below min_accuracy
// (default 0.85 after 3 epochs), 77 without the data files.
#include <tapeflow/tapeflow.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "../common/args.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;

int main(int argc, char** argv) {
  samples::Args args(
      argc, argv,
      "TF2's \"Multi-worker training with Keras\" on Fashion-MNIST, under mpirun\n"
      "(mpirun -np 2 multi_worker); alone it is a one-worker job.",
      "Exits 77 without the data files.");
  const int epochs = args.epochs(3);
  const double min_accuracy = args.min_accuracy(0.85);
  const int64_t steps_per_epoch = args.integer("steps_per_epoch", -1, 1, INT64_MAX,
                                              "-1: the whole training set", -1);
  args.done();

  tf::distribute::MultiWorkerMirroredStrategy strategy;
  const bool chief = strategy.worker_index() == 0;
  if (chief)
    std::printf("Workers: %d, replicas in sync: %d\n", strategy.num_workers(),
                strategy.num_replicas_in_sync());

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

  // Every worker reads the whole dataset in the same (seeded) order and keeps its replicas'
  // rows of each global batch.
  const int64_t global_batch = 64 * strategy.num_workers();
  auto train_dataset = tf::data::Dataset::from_tensor_slices({train_images, train_labels})
                           .shuffle(60000, /*seed=*/7)
                           .batch(global_batch)
                           .repeat();
  auto eval_dataset =
      tf::data::Dataset::from_tensor_slices({test_images, test_labels}).batch(256);

  tf::random::set_seed(5);
  std::optional<K::Sequential> model;
  {
    auto scope = strategy.scope();
    model.emplace(K::Sequential({K::layers::Conv2D(32, 3, {.activation = "relu"}),
                                 K::layers::MaxPooling2D(), K::layers::Flatten(),
                                 K::layers::Dense(128, "relu"), K::layers::Dense(10)}));
    model->compile(K::optimizers::SGD(0.01, 0.9), K::losses::SparseCategoricalCrossentropy(true),
                   {"accuracy"});
  }

  // Only the chief writes checkpoints (the others would write the same files).
  const std::string checkpoint_dir = "./multi_worker_checkpoints";
  std::vector<K::callbacks::CallbackRef> callbacks;
  if (chief) {
    std::filesystem::remove_all(checkpoint_dir);
    callbacks.push_back(K::callbacks::ModelCheckpoint(checkpoint_dir + "/ckpt_{epoch}.safetensors"));
  }
  const int64_t steps = steps_per_epoch > 0 ? steps_per_epoch : 60000 / global_batch;
  model->fit(train_dataset, {.epochs = epochs,
                             .callbacks = callbacks,
                             .verbose = chief ? 1 : 0,
                             .steps_per_epoch = steps});

  // Evaluation runs on each worker over the whole test set (no collectives): every worker
  // holds the same weights, so every worker prints the same figures.
  const std::vector<double> r = model->evaluate(eval_dataset, {.verbose = 0});
  std::printf("worker %d: test loss %.4f, test accuracy %.4f\n", strategy.worker_index(), r[0],
              r[1]);
  if (r[1] < min_accuracy) {
    std::fprintf(stderr, "test accuracy %.4f is below %.4f\n", r[1], min_accuracy);
    return 1;
  }
  return 0;
}
