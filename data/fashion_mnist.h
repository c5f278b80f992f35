// tf.keras.datasets.fashion_mnist: the Fashion-MNIST images and labels, read from the IDX files
// of the Debian package dataset-fashion-mnist (/usr/share/datasets/fashion-mnist) or from the
// folder named by the environment variable TAPEFLOW_DATA_DIR. Nothing is downloaded.
// It lives in data/ (with the IDX reader) and is named as Keras names it. Thread-safe.
#pragma once

#include <string>
#include <utility>

#include "core/tensor.h"

namespace tapeflow::keras::datasets::fashion_mnist {

// ((x_train, y_train), (x_test, y_test)) as Keras returns them.
using Split = std::pair<Tensor, Tensor>;

// The default folder: $TAPEFLOW_DATA_DIR (or its fashion-mnist/ subfolder when that holds the
// files), else /usr/share/datasets/fashion-mnist.
std::string default_data_dir();

// Reads train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz and
// t10k-labels-idx1-ubyte.gz (or the same names without .gz) and returns uint8 tensors of shapes
// (60000, 28, 28), (60000,), (10000, 28, 28), (10000,). Labels are 0..9: T-shirt/top, Trouser,
// Pullover, Dress, Coat, Sandal, Shirt, Sneaker, Bag, Ankle boot.
// A missing file is a NotFoundError naming it and how to get it; a corrupt file, images that are
// not 28x28 uint8, labels out of 0..9, or image and label counts that differ are an
// InvalidArgumentError naming the file.
std::pair<Split, Split> load_data();
// The same from the files in `dir`.
std::pair<Split, Split> load_data(const std::string& dir);

}  // namespace tapeflow::keras::datasets::fashion_mnist
