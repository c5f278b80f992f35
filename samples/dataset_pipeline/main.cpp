// Fashion-MNIST through a tf::data pipeline: load_data(), from_tensor_slices, shuffle, batch,
// map (scaling whole batches) and prefetch, feeding a softmax regression trained with a
// GradientTape and plain SGD. Prints the pipeline's cardinalities, each epoch's loss, test
// accuracy and time, and exits with 1 if the test accuracy stays below 0.7.
//   build/samples/dataset_pipeline [epochs]     (default 1; exit code 77 without the data files)
#include <tapeflow/tapeflow.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
// Until the umbrella header lists them.
#include "data/dataset.h"
#include "data/fashion_mnist.h"

#include "../common/args.h"
namespace tf = tapeflow;

int main(int argc, char** argv) {
  samples::Args args(
      argc, argv,
      "A softmax regression on Fashion-MNIST fed by a tf::data pipeline.",
      "Exits 1 if the test accuracy stays below 0.7, 77 without the data files.");
  const int epochs = args.epochs(1);
  args.done();
  tf::Tensor x_train, y_train, x_test, y_test;
  try {
    auto [train, test] = tf::keras::datasets::fashion_mnist::load_data();
    std::tie(x_train, y_train) = train;
    std::tie(x_test, y_test) = test;
  } catch (const tf::NotFoundError& e) {
    std::cerr << e.what() << "\n";
    return 77;  // CTest's "skipped"
  }
  std::cout << "x_train " << x_train.shape() << " " << tf::dtype_name(x_train.dtype())
            << ", y_train " << y_train.shape() << "\n";

  // Scale and flatten whole batches: one cast per batch instead of one per image.
  auto prepare = [](tf::Tensor x, tf::Tensor y) {
    return std::make_pair(tf::reshape(tf::cast(x, tf::float32) / 255.0f, {-1, 784}),
                          tf::cast(y, tf::int64));
  };
  auto train_ds = tf::data::Dataset::from_tensor_slices({x_train, y_train})
                      .shuffle(60000, /*seed=*/42)
                      .batch(32)
                      .map(prepare)
                      .prefetch(tf::data::AUTOTUNE);
  auto test_ds = tf::data::Dataset::from_tensor_slices({x_test, y_test}).batch(1000).map(prepare);
  std::cout << "batches per epoch: train " << train_ds.cardinality() << ", test "
            << test_ds.cardinality() << "\n";

  tf::Variable w(tf::zeros({784, 10}), "w");
  tf::Variable b(tf::zeros({10}), "b");
  const float lr = 0.1f;
  double accuracy = 0.0;
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    double loss_sum = 0.0;
    int steps = 0;
    for (const auto& batch : train_ds) {
      tf::GradientTape tape;
      tf::Tensor logits = tf::matmul(batch[0], w) + b;
      tf::Tensor loss =
          tf::reduce_mean(tf::nn::sparse_softmax_cross_entropy_with_logits(batch[1], logits));
      auto grads = tape.gradient(loss, std::vector<tf::Variable>{w, b});
      w.assign_sub(grads[0] * lr);
      b.assign_sub(grads[1] * lr);
      loss_sum += loss.item<double>();
      ++steps;
    }
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

    int64_t correct = 0, seen = 0;
    for (const auto& batch : test_ds) {
      tf::Tensor predicted = tf::argmax(tf::matmul(batch[0], w) + b, 1);
      correct +=
          tf::reduce_sum(tf::cast(tf::equal(predicted, batch[1]), tf::int64)).item<int64_t>();
      seen += batch[1].shape()[0];
    }
    accuracy = static_cast<double>(correct) / static_cast<double>(seen);
    std::printf("epoch %d: %d steps, mean loss %.4f, test accuracy %.4f, %.2f s\n", epoch, steps,
                loss_sum / steps, accuracy, seconds);
  }
  return accuracy >= 0.7 ? 0 : 1;
}
