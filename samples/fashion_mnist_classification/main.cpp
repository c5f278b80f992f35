// TF2's "Basic classification: Classify images of clothing", in C++: Fashion-MNIST, a Sequential
// model (Flatten, Dense 128 relu, Dense 10), Adam, sparse categorical crossentropy from logits,
// fit for 10 epochs, evaluate, then a probability model that predicts the test images.
//   build/samples/fashion_mnist_classification [epochs [min_accuracy]]
// Exits 1 when the test accuracy is below min_accuracy (default 0.87) or the first test image
// is not predicted as class 9 (ankle boot); 77 without the data.
#include <tapeflow/tapeflow.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "../common/args.h"

namespace tf = tapeflow;

int main(int argc, char** argv) {
  samples::Args args(
      argc, argv,
      "TF2's \"Basic classification\" on Fashion-MNIST.",
      "Exits 77 without the data files.");
  const int epochs = args.epochs(10);
  const double min_accuracy = args.min_accuracy(0.87);
  args.done();
  tf::random::set_seed(7);
  const std::vector<std::string> class_names = {"T-shirt/top", "Trouser", "Pullover", "Dress",
                                                "Coat",        "Sandal",  "Shirt",    "Sneaker",
                                                "Bag",         "Ankle boot"};

  tf::Tensor train_images, train_labels, test_images, test_labels;
  try {
    auto [train, test] = tf::keras::datasets::fashion_mnist::load_data();
    std::tie(train_images, train_labels) = train;
    std::tie(test_images, test_labels) = test;
  } catch (const tf::NotFoundError& e) {
    std::cerr << e.what() << "\n";
    return 77;
  }
  std::cout << "train_images " << train_images.shape() << ", train_labels "
            << train_labels.shape() << ", test_images " << test_images.shape() << "\n";
  train_images = tf::cast(train_images, tf::float32) / 255.0f;
  test_images = tf::cast(test_images, tf::float32) / 255.0f;

  tf::keras::Sequential model({tf::keras::layers::Flatten({28, 28}),
                               tf::keras::layers::Dense(128, "relu"),
                               tf::keras::layers::Dense(10)});
  model.compile(tf::keras::optimizers::Adam(),
                tf::keras::losses::SparseCategoricalCrossentropy(/*from_logits=*/true),
                {"accuracy"});
  model.fit(train_images, train_labels, {.epochs = epochs});

  const std::vector<double> r = model.evaluate(test_images, test_labels, {.verbose = 2});
  std::printf("\nTest accuracy: %.4f\n", r[1]);

  tf::keras::Sequential probability_model({model, tf::keras::layers::Softmax()});
  const tf::Tensor predictions = probability_model.predict(test_images);
  std::cout << "predictions[0] = " << tf::slice(predictions, {0, 0}, {1, 10}) << "\n";
  const int64_t first = tf::argmax(tf::slice(predictions, {0, 0}, {1, 10}), 1).numpy<int64_t>()[0];
  const int label = static_cast<int>(tf::slice(test_labels, {0}, {1}).numpy<uint8_t>()[0]);
  std::printf("first test image: predicted %lld (%s), label %d (%s)\n",
              static_cast<long long>(first), class_names[static_cast<size_t>(first)].c_str(), label,
              class_names[static_cast<size_t>(label)].c_str());

  int status = 0;
  if (r[1] < min_accuracy) {
    std::fprintf(stderr, "test accuracy %.4f is below %.4f\n", r[1], min_accuracy);
    status = 1;
  }
  if (first != 9) {
    std::fprintf(stderr, "the first test image should be predicted as class 9 (ankle boot)\n");
    status = 1;
  }
  return status;
}
