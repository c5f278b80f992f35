// TF2's "TensorFlow 2 quickstart for experts", in C++, on Fashion-MNIST: a subclassed model
// (Conv2D 32 3x3 relu, Flatten, Dense 128 relu, Dense 10), tf::data pipelines, and train_step /
// test_step as traced tf::functions with a GradientTape inside, tracking the four metrics.
//   build/samples/quickstart_expert [epochs [min_accuracy [max_train_steps]]]
// Exits 1 when the last test accuracy is below min_accuracy (default 0.90), 77 without the data.
#include <tapeflow/tapeflow.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "../common/args.h"

namespace tf = tapeflow;

class MyModel : public tf::keras::Model {
 public:
  tf::Tensor call(const tf::Tensor& x, bool training) override {
    tf::Tensor h = conv1(x, training);
    h = flatten(h);
    h = d1(h);
    return d2(h);
  }

 private:
  tf::keras::layers::Conv2D conv1{32, 3, {.activation = "relu"}};
  tf::keras::layers::Flatten flatten;
  tf::keras::layers::Dense d1{128, "relu"};
  tf::keras::layers::Dense d2{10};
};

int main(int argc, char** argv) {
  samples::Args args(
      argc, argv,
      "TF2's \"quickstart for experts\" on Fashion-MNIST (traced train and test steps).",
      "Exits 77 without the data files.");
  const int epochs = args.epochs(5);
  const double min_accuracy = args.min_accuracy(0.90, "last test accuracy below which it exits 1");
  const int64_t max_steps = args.integer("max_train_steps", -1, 1, INT64_MAX,
                                        "train steps per epoch, -1: all", -1);
  args.done();
  tf::random::set_seed(42);

  tf::Tensor x_train, y_train, x_test, y_test;
  try {
    auto [train, test] = tf::keras::datasets::fashion_mnist::load_data();
    std::tie(x_train, y_train) = train;
    std::tie(x_test, y_test) = test;
  } catch (const tf::NotFoundError& e) {
    std::cerr << e.what() << "\n";
    return 77;
  }
  // Scale to [0, 1] and add a channels dimension (NHWC).
  x_train = tf::expand_dims(tf::cast(x_train, tf::float32) / 255.0f, -1);
  x_test = tf::expand_dims(tf::cast(x_test, tf::float32) / 255.0f, -1);

  auto train_ds =
      tf::data::Dataset::from_tensor_slices({x_train, y_train}).shuffle(10000).batch(32);
  if (max_steps > 0) train_ds = train_ds.take(max_steps);
  auto test_ds = tf::data::Dataset::from_tensor_slices({x_test, y_test}).batch(32);

  MyModel model;
  tf::keras::losses::SparseCategoricalCrossentropy loss_object(/*from_logits=*/true);
  tf::keras::optimizers::Adam optimizer;
  tf::keras::metrics::Mean train_loss("train_loss");
  tf::keras::metrics::SparseCategoricalAccuracy train_accuracy("train_accuracy");
  tf::keras::metrics::Mean test_loss("test_loss");
  tf::keras::metrics::SparseCategoricalAccuracy test_accuracy("test_accuracy");

  auto train_step = tf::function(
      [&](const tf::Tensor& images, const tf::Tensor& labels) {
        tf::Tensor predictions, loss;
        std::vector<tf::Tensor> gradients;
        {
          tf::GradientTape tape;
          // training=true only matters for layers such as Dropout.
          predictions = model(images, true);
          loss = loss_object(labels, predictions);
          gradients = tape.gradient(loss, model.trainable_variables());
        }
        optimizer.apply_gradients(gradients, model.trainable_variables());
        train_loss.update_state(loss);
        train_accuracy.update_state(labels, predictions);
        return loss;
      },
      {.input_signature = {tf::TensorSpec({tf::None, 28, 28, 1}), tf::TensorSpec({tf::None}, tf::uint8)},
       .name = "train_step"});

  auto test_step = tf::function(
      [&](const tf::Tensor& images, const tf::Tensor& labels) {
        tf::Tensor predictions = model(images, false);
        tf::Tensor t_loss = loss_object(labels, predictions);
        test_loss.update_state(t_loss);
        test_accuracy.update_state(labels, predictions);
        return t_loss;
      },
      {.input_signature = {tf::TensorSpec({tf::None, 28, 28, 1}), tf::TensorSpec({tf::None}, tf::uint8)},
       .name = "test_step"});

  double accuracy = 0;
  for (int epoch = 0; epoch < epochs; ++epoch) {
    const auto t0 = std::chrono::steady_clock::now();
    train_loss.reset_state();
    train_accuracy.reset_state();
    test_loss.reset_state();
    test_accuracy.reset_state();
    for (const auto& batch : train_ds) train_step(batch[0], batch[1]);
    for (const auto& batch : test_ds) test_step(batch[0], batch[1]);
    accuracy = test_accuracy.result().item<float>();
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::printf("Epoch %d, Loss: %.4f, Accuracy: %.2f, Test Loss: %.4f, Test Accuracy: %.2f (%.1f s)\n",
                epoch + 1, train_loss.result().item<float>(),
                100 * train_accuracy.result().item<float>(), test_loss.result().item<float>(),
                100 * accuracy, secs);
  }
  std::printf("traces: train_step %d, test_step %d\n", train_step.tracing_count(),
              test_step.tracing_count());
  if (accuracy < min_accuracy) {
    std::fprintf(stderr, "test accuracy %.4f is below %.4f\n", accuracy, min_accuracy);
    return 1;
  }
  return 0;
}
