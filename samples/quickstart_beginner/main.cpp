// TF2's "TensorFlow 2 quickstart for beginners", in C++, on Fashion-MNIST: a Sequential model
// (Flatten, Dense 128 relu, Dropout 0.2, Dense 10), Adam, sparse categorical crossentropy from
// logits, model.fit for 5 epochs, model.evaluate, and the probability model.
//   build/samples/quickstart_beginner [epochs [min_accuracy]]
// Exits 1 when the test accuracy is below min_accuracy (default 0.85), 77 without the data.
#include <tapeflow/tapeflow.h>

#include <cstdlib>
#include <iostream>

#include "../common/args.h"

namespace tf = tapeflow;

int main(int argc, char** argv) {
  samples::Args args(
      argc, argv,
      "TF2's \"quickstart for beginners\" on Fashion-MNIST.",
      "Exits 77 without the data files.");
  const int epochs = args.epochs(5);
  const double min_accuracy = args.min_accuracy(0.85);
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
  x_train = tf::cast(x_train, tf::float32) / 255.0f;
  x_test = tf::cast(x_test, tf::float32) / 255.0f;

  tf::keras::Sequential model({tf::keras::layers::Flatten({28, 28}),
                               tf::keras::layers::Dense(128, "relu"),
                               tf::keras::layers::Dropout(0.2),
                               tf::keras::layers::Dense(10)});

  // The untrained model's logits and probabilities for one example.
  tf::Tensor predictions = model(tf::slice(x_train, {0, 0, 0}, {1, 28, 28}));
  std::cout << predictions << "\n" << tf::nn::softmax(predictions) << "\n";

  tf::keras::losses::SparseCategoricalCrossentropy loss_fn(/*from_logits=*/true);
  // About ln(10) = 2.3 before training.
  std::cout << "initial loss: " << loss_fn(tf::slice(y_train, {0}, {1}), predictions).item<float>()
            << "\n";

  model.compile(tf::keras::optimizers::Adam(), loss_fn, {"accuracy"});
  model.summary();
  model.fit(x_train, y_train, {.epochs = epochs});
  const std::vector<double> result = model.evaluate(x_test, y_test, {.verbose = 2});
  std::cout << "test loss " << result[0] << ", test accuracy " << result[1] << "\n";

  tf::keras::Sequential probability_model({model, tf::keras::layers::Softmax()});
  std::cout << probability_model(tf::slice(x_test, {0, 0, 0}, {5, 28, 28})) << "\n";

  if (result[1] < min_accuracy) {
    std::cerr << "test accuracy " << result[1] << " is below " << min_accuracy << "\n";
    return 1;
  }
  return 0;
}
