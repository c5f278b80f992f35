// TF2's guide "The Functional API", in C++, on Fashion-MNIST: keras.Input, layers called on
// symbolic tensors, keras.Model(inputs, outputs, name="mnist_model"), summary(), RMSprop, fit
// with validation_split, evaluate; then the guide's "manipulate complex graph topologies"
// part: a small residual model with a merge layer, trained with class weights.
//   build/samples/functional_api [epochs [min_accuracy]]
// Exits 1 when the first model's test accuracy is below min_accuracy (default 0.83), 77
// without the data.
#include <tapeflow/tapeflow.h>

#include <cstdlib>
#include <iostream>

#include "../common/args.h"

namespace tf = tapeflow;
namespace K = tf::keras;
namespace L = tf::keras::layers;

int main(int argc, char** argv) {
  samples::Args args(argc, argv, "TF2's functional API guide on Fashion-MNIST.",
                     "Exits 77 without the data files.");
  const int epochs = args.epochs(2);
  const double min_accuracy = args.min_accuracy(0.83);
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
  x_train = tf::reshape(tf::cast(x_train, tf::float32), {-1, 784}) / 255.0f;
  x_test = tf::reshape(tf::cast(x_test, tf::float32), {-1, 784}) / 255.0f;

  // inputs = keras.Input(shape=(784,)); x = layers.Dense(64, activation="relu")(inputs); ...
  const K::KerasTensor inputs = K::Input({784});
  K::KerasTensor x = L::Dense(64, "relu")(inputs);
  x = L::Dense(64, "relu")(x);
  const K::KerasTensor outputs = L::Dense(10)(x);
  K::Model model(inputs, outputs, "mnist_model");
  model.summary();

  model.compile(K::optimizers::RMSprop(), K::losses::SparseCategoricalCrossentropy(true),
                {"accuracy"});
  model.fit(x_train, y_train, {.epochs = epochs, .batch_size = 64, .validation_split = 0.2});
  const std::vector<double> scores = model.evaluate(x_test, y_test, {.verbose = 2});
  std::cout << "Test loss: " << scores[0] << "\nTest accuracy: " << scores[1] << "\n";

  // A residual block: the block's input is added back to its output (layers.add in the guide),
  // and the shirt class (6), the one most often confused, weighs twice in the loss.
  const K::KerasTensor in = K::Input({784}, tf::float32, "pixels");
  const K::KerasTensor h = L::Dense(64, "relu")(in);
  K::KerasTensor block = L::Dense(64, "relu")(h);
  block = L::Dense(64, "relu")(block);
  const K::KerasTensor merged = L::Add()({block, h});
  K::Model resnet(in, L::Dense(10)(L::Dropout(0.2)(merged)), "toy_resnet");
  resnet.summary();
  resnet.compile(K::optimizers::Adam(), K::losses::SparseCategoricalCrossentropy(true),
                 {"accuracy"});
  resnet.fit(x_train, y_train, {.epochs = epochs, .batch_size = 64, .class_weight = {{6, 2.0}}});
  const std::vector<double> res_scores = resnet.evaluate(x_test, y_test, {.verbose = 2});
  std::cout << "toy_resnet test accuracy: " << res_scores[1] << "\n";

  if (scores[1] < min_accuracy) {
    std::cerr << "test accuracy " << scores[1] << " is below " << min_accuracy << "\n";
    return 1;
  }
  return 0;
}
