// Trains an image classifier on a folder of image files, as TF2's "load images" tutorial does
// with tf.keras.utils.image_dataset_from_directory: one subfolder per class, PNG or JPEG files of
// any size. Without a folder argument it first writes one: 80 images per class of horizontal or
// vertical stripes (random periods, colors, noise and sizes from 24 to 48 pixels), half PNG and
// half JPEG, under a temporary folder.
//   build/samples/image_folder [epochs [min_accuracy [folder]]]   (12 epochs by default)
// Exits 1 when the validation accuracy is below min_accuracy (default 0.9).
#include <tapeflow/tapeflow.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "../common/args.h"

namespace tf = tapeflow;
namespace fs = std::filesystem;
namespace L = tapeflow::keras::layers;

namespace {

// `count` striped images per class under root/horizontal and root/vertical.
void write_stripes(const fs::path& root, int count, std::mt19937& rng) {
  std::uniform_int_distribution<int> size(24, 48), period(4, 8), color(0, 255), noise(-20, 20);
  for (const char* cls : {"horizontal", "vertical"}) {
    fs::create_directories(root / cls);
    for (int i = 0; i < count; ++i) {
      const int h = size(rng), w = size(rng), p = period(rng);
      const int a[3] = {color(rng), color(rng), color(rng)};
      const int b[3] = {255 - a[0], 255 - a[1], 255 - a[2]};
      std::vector<uint8_t> px(static_cast<size_t>(h * w * 3));
      for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
          const bool on = ((cls[0] == 'h' ? y : x) / p) % 2 == 0;
          for (int c = 0; c < 3; ++c)
            px[static_cast<size_t>((y * w + x) * 3 + c)] =
                static_cast<uint8_t>(std::clamp((on ? a[c] : b[c]) + noise(rng), 0, 255));
        }
      const tf::Tensor image = tf::constant(px, {h, w, 3});
      const bool png = i % 2 == 0;
      const fs::path file = root / cls / (std::to_string(i) + (png ? ".png" : ".jpg"));
      tf::io::write_file(file.string(),
                         png ? tf::io::encode_png(image) : tf::io::encode_jpeg(image, 90));
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  samples::Args args(argc, argv,
                     "Trains an image classifier on a folder of PNG and JPEG files "
                     "(keras::utils::image_dataset_from_directory).",
                     "Without a folder it writes a folder of striped images first.");
  const int epochs = args.epochs(12);
  const double min_accuracy = args.min_accuracy(0.9, "validation accuracy below which it exits 1");
  std::string folder =
      args.text("folder", "", "one subfolder of images per class (none: write one first)");
  args.done();
  tf::random::set_seed(5);
  std::mt19937 rng(5);
  fs::path written;
  if (folder.empty()) {
    written = fs::temp_directory_path() / ("tapeflow_image_folder_" + std::to_string(rng()));
    write_stripes(written, 80, rng);
    folder = written.string();
    std::printf("wrote 160 striped images under %s\n", folder.c_str());
  }

  namespace ku = tf::keras::utils;
  ku::ImageDatasetOptions options{.batch_size = 16,
                                  .image_size = {32, 32},
                                  .seed = 7,
                                  .validation_split = 0.2,
                                  .subset = "training"};
  ku::ImageDataset train, val;
  try {
    train = ku::image_dataset_from_directory(folder, options);
    options.subset = "validation";
    val = ku::image_dataset_from_directory(folder, options);
  } catch (const tf::Error& e) {  // no such folder, no images in it
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  std::printf("classes:");
  for (const std::string& c : train.class_names) std::printf(" %s", c.c_str());
  std::printf("\n");

  tf::keras::Sequential model(
      {L::Rescaling(1.0 / 255), L::Conv2D(8, 3, {.padding = "same", .activation = "relu"}),
       L::MaxPooling2D(2), L::Conv2D(16, 3, {.padding = "same", .activation = "relu"}),
       L::GlobalMaxPooling2D(), L::Dense(static_cast<int64_t>(train.class_names.size()))});
  model.compile(tf::keras::optimizers::Adam(0.01),
                tf::keras::losses::SparseCategoricalCrossentropy(/*from_logits=*/true),
                {"accuracy"});
  model.fit(train.dataset, {.epochs = epochs, .validation_data = val.dataset, .verbose = 2});
  const std::vector<double> result = model.evaluate(val.dataset, {.verbose = 0});
  std::printf("validation loss %.4f, accuracy %.2f%%\n", result[0], 100 * result[1]);
  if (!written.empty()) fs::remove_all(written);
  if (result[1] < min_accuracy) {
    std::fprintf(stderr, "validation accuracy %.4f is below %.4f\n", result[1], min_accuracy);
    return 1;
  }
  return 0;
}
