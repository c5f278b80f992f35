#include "data/fashion_mnist.h"

#include <cstdlib>
#include <filesystem>

#include "core/check.h"
#include "core/log.h"
#include "data/idx.h"

namespace tapeflow::keras::datasets::fashion_mnist {
namespace {

constexpr const char* kOp = "fashion_mnist.load_data";
constexpr const char* kSystemDir = "/usr/share/datasets/fashion-mnist";
namespace fs = std::filesystem;

// The file `name` in dir, compressed or not.
std::string find_file(const std::string& dir, const std::string& name) {
  std::error_code ec;
  const fs::path gz = fs::path(dir) / (name + ".gz");
  if (fs::is_regular_file(gz, ec)) return gz.string();
  const fs::path plain = fs::path(dir) / name;
  if (fs::is_regular_file(plain, ec)) return plain.string();
  TF_THROW(NotFoundError, kOp,
           "{} not found (nor without .gz); install the Debian package dataset-fashion-mnist "
           "(files in {}) or point TAPEFLOW_DATA_DIR at a folder holding the four IDX files",
           gz.string(), kSystemDir);
}

Split load_split(const std::string& dir, const std::string& prefix) {
  const std::string images_path = find_file(dir, prefix + "-images-idx3-ubyte");
  const std::string labels_path = find_file(dir, prefix + "-labels-idx1-ubyte");
  Tensor x = data::read_idx(images_path);
  Tensor y = data::read_idx(labels_path);
  TF_CHECK_ARG(x.dtype() == uint8 && x.rank() == 3 && x.shape()[1] == 28 && x.shape()[2] == 28, kOp,
               "{}: expected uint8 images of shape (N, 28, 28), got {} {}", images_path,
               dtype_name(x.dtype()), x.shape().to_string());
  TF_CHECK_ARG(y.dtype() == uint8 && y.rank() == 1, kOp,
               "{}: expected uint8 labels of shape (N,), got {} {}", labels_path,
               dtype_name(y.dtype()), y.shape().to_string());
  TF_CHECK_ARG(x.shape()[0] == y.shape()[0], kOp, "{} holds {} images but {} holds {} labels",
               images_path, x.shape()[0], labels_path, y.shape()[0]);
  const uint8_t* labels = y.data<uint8_t>();
  for (int64_t i = 0; i < y.shape()[0]; ++i)
    TF_CHECK_ARG(labels[i] <= 9, kOp, "{}: label {} at index {} is outside 0..9", labels_path,
                 labels[i], i);
  return {x, y};
}

bool has_files(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / "train-images-idx3-ubyte.gz", ec) ||
         fs::is_regular_file(fs::path(dir) / "train-images-idx3-ubyte", ec);
}

}  // namespace

std::string default_data_dir() {
  const char* env = std::getenv("TAPEFLOW_DATA_DIR");
  if (env && *env) {
    const std::string sub = (fs::path(env) / "fashion-mnist").string();
    return has_files(sub) ? sub : std::string(env);
  }
  return kSystemDir;
}

std::pair<Split, Split> load_data() {
  return load_data(default_data_dir());
}

std::pair<Split, Split> load_data(const std::string& dir) {
  Split train = load_split(dir, "train");
  Split test = load_split(dir, "t10k");
  TF_LOG_DEBUG("fashion_mnist: loaded {} training and {} test images from {}",
               train.first.shape()[0], test.first.shape()[0], dir);
  return {std::move(train), std::move(test)};
}

}  // namespace tapeflow::keras::datasets::fashion_mnist
