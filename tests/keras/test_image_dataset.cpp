// keras::utils::image_dataset_from_directory (keras/utils.h) on a folder of PNG and JPEG files
// written by the test: classes from the subfolders, labels that match each image (every class
// has its own color), the label modes, color modes, aspect-ratio handling, a validation split
// into disjoint subsets, fit on the dataset, and the errors.
#include <array>
#include <cmath>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "data/image_io.h"
#include "keras/layers.h"
#include "keras/losses.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/utils.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace fs = std::filesystem;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

// An h x w image of one RGB color.
tf::Tensor solid(int64_t h, int64_t w, double r, double g, double b) {
  std::vector<double> v;
  for (int64_t i = 0; i < h * w; ++i) v.insert(v.end(), {r, g, b});
  return tf::cast(tf::constant(v, {h, w, 3}), tf::uint8);
}

// A 24-bit BMP of an h x w image of one color.
std::string solid_bmp(int h, int w, uint8_t r, uint8_t g, uint8_t b) {
  auto le = [](std::string& s, uint32_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
  };
  const uint32_t stride = (static_cast<uint32_t>(w) * 3 + 3) / 4 * 4;
  std::string out = "BM";
  le(out, 54 + stride * static_cast<uint32_t>(h), 4);
  le(out, 0, 4);
  le(out, 54, 4);
  for (uint32_t v : {40u, static_cast<uint32_t>(w), static_cast<uint32_t>(h)}) le(out, v, 4);
  le(out, 1, 2);
  le(out, 24, 2);
  for (int i = 0; i < 6; ++i) le(out, 0, 4);
  for (int y = 0; y < h; ++y) {
    std::string row;
    for (int x = 0; x < w; ++x)
      row += {static_cast<char>(b), static_cast<char>(g), static_cast<char>(r)};
    row.resize(stride, '\0');
    out += row;
  }
  return out;
}

// A GIF of an h x w image of one color: a 2-color table, index 0 everywhere, LZW codes that are
// all single indices (a clear code after every two keeps them 3 bits wide).
std::string solid_gif(int h, int w, uint8_t r, uint8_t g, uint8_t b) {
  std::string out = "GIF89a";
  auto le16 = [&](uint32_t v) { out += {static_cast<char>(v & 0xff), static_cast<char>(v >> 8)}; };
  le16(static_cast<uint32_t>(w));
  le16(static_cast<uint32_t>(h));
  out +=
      {'\x80', '\0', '\0',  static_cast<char>(r), static_cast<char>(g), static_cast<char>(b), '\0',
       '\0',   '\0', '\x2c'};
  le16(0);
  le16(0);
  le16(static_cast<uint32_t>(w));
  le16(static_cast<uint32_t>(h));
  out += {'\0', '\x02'};
  std::string data;
  uint32_t acc = 0;
  int bits = 0;
  auto emit = [&](uint32_t code) {
    acc |= code << bits;
    bits += 3;
    while (bits >= 8) data += static_cast<char>(acc & 0xff), acc >>= 8, bits -= 8;
  };
  emit(4);
  for (int i = 0; i < h * w; ++i) {
    emit(0);
    if (i % 2 == 1) emit(4);
  }
  emit(5);
  if (bits > 0) data += static_cast<char>(acc & 0xff);
  for (size_t i = 0; i < data.size(); i += 255) {
    const std::string block = data.substr(i, 255);
    out += static_cast<char>(block.size());
    out += block;
  }
  out += {'\0', ';'};
  return out;
}

// root/cats: 4 red PNGs (one in a nested folder), root/dogs: 6 blue images of assorted sizes
// (4 JPEGs, a GIF and a BMP, as Keras' extensions); a text file that is not read.
void write_folder(const fs::path& root) {
  fs::create_directories(root / "cats" / "nested");
  fs::create_directories(root / "dogs");
  for (int i = 0; i < 4; ++i) {
    const fs::path dir = i == 3 ? root / "cats" / "nested" : root / "cats";
    tf::io::write_file((dir / ("c" + std::to_string(i) + ".png")).string(),
                       tf::io::encode_png(solid(10 + i, 14, 200, 0, 0)));
  }
  for (int i = 0; i < 4; ++i)
    tf::io::write_file((root / "dogs" / ("d" + std::to_string(i) + ".JPG")).string(),
                       tf::io::encode_jpeg(solid(16, 8 + 2 * i, 0, 0, 200)));
  tf::io::write_file((root / "dogs" / "d4.gif").string(), solid_gif(16, 16, 0, 0, 200));
  tf::io::write_file((root / "dogs" / "d5.bmp").string(), solid_bmp(16, 18, 0, 0, 200));
  tf::io::write_file((root / "cats" / "notes.txt").string(), "not an image");
}

// The mean of each channel of an (h, w, c) image.
std::vector<double> channel_means(const tf::Tensor& image) {
  return tf::reduce_mean(image, {0, 1}).numpy<double>();
}

}  // namespace

TEST_CASE("image_dataset_from_directory labels each image with its folder's class",
          "[keras][data][io]") {
  tf::testing::TempDir tmp;
  const fs::path root = fs::path(tmp.path()) / "pets";
  write_folder(root);
  namespace ku = tf::keras::utils;
  const ku::ImageDataset d = ku::image_dataset_from_directory(
      root.string(), {.batch_size = 4, .image_size = {8, 6}, .seed = 3, .verbose = false});
  CHECK(d.class_names == std::vector<std::string>{"cats", "dogs"});
  CHECK(d.file_paths.size() == 10);
  int64_t seen = 0, cats = 0;
  std::set<std::string> batches;
  for (const std::vector<tf::Tensor>& e : d.dataset) {
    REQUIRE(e.size() == 2);
    const int64_t b = e[0].shape()[0];
    CHECK(e[0].shape() == tf::TensorShape{b, 8, 6, 3});
    CHECK(e[0].dtype() == tf::float32);
    CHECK(e[1].dtype() == tf::int32);
    const std::vector<double> labels = e[1].numpy<double>();
    for (int64_t i = 0; i < b; ++i) {
      const tf::Tensor image = tf::slice(e[0], {i, 0, 0, 0}, {1, -1, -1, -1});
      const std::vector<double> m = tf::reduce_mean(image, {0, 1, 2}).numpy<double>();
      if (labels[static_cast<size_t>(i)] == 0) {
        ++cats;
        CHECK(m[0] > 190);  // red, 0..255 (JPEG's and the resize's small errors allowed)
        CHECK(m[2] < 10);
      } else {
        CHECK(m[2] > 190);  // blue
        CHECK(m[0] < 10);
      }
    }
    seen += b;
  }
  CHECK(seen == 10);
  CHECK(cats == 4);

  // Other label and color modes, no batching, the aspect-ratio options.
  const auto cat = ku::image_dataset_from_directory(root.string(), {.label_mode = "categorical",
                                                                    .color_mode = "grayscale",
                                                                    .batch_size = 10,
                                                                    .image_size = {4, 4},
                                                                    .shuffle = false,
                                                                    .verbose = false});
  for (const auto& e : cat.dataset) {
    CHECK(e[0].shape() == tf::TensorShape{10, 4, 4, 1});
    CHECK(e[1].shape() == tf::TensorShape{10, 2});
    // Unshuffled: the 4 cats first.
    CHECK(e[1].numpy<double>()[0] == 1);
    CHECK(e[1].numpy<double>()[19] == 1);
  }
  const auto binary = ku::image_dataset_from_directory(root.string(), {.label_mode = "binary",
                                                                       .batch_size = std::nullopt,
                                                                       .image_size = {5, 5},
                                                                       .shuffle = false,
                                                                       .crop_to_aspect_ratio = true,
                                                                       .verbose = false});
  int64_t n = 0;
  for (const auto& e : binary.dataset) {
    CHECK(e[0].shape() == tf::TensorShape{5, 5, 3});
    CHECK(e[1].shape() == tf::TensorShape{1});
    const std::vector<double> m = channel_means(e[0]);
    CHECK((e[1].numpy<double>()[0] == 0 ? m[0] : m[2]) > 190);
    ++n;
  }
  CHECK(n == 10);
  const auto padded =
      ku::image_dataset_from_directory((root / "cats").string(), {.labels = "",
                                                                  .batch_size = std::nullopt,
                                                                  .image_size = {12, 12},
                                                                  .shuffle = false,
                                                                  .pad_to_aspect_ratio = true,
                                                                  .verbose = false});
  CHECK(padded.class_names.empty());
  for (const auto& e : padded.dataset) {
    REQUIRE(e.size() == 1);
    // 10..13 x 14 padded to a square: zero rows above and below the red.
    CHECK(channel_means(e[0])[0] < 200);
    CHECK(tf::reduce_max(e[0]).item<double>() >= 199);
  }
}

TEST_CASE("image_dataset_from_directory splits into disjoint subsets and feeds fit",
          "[keras][data][io]") {
  tf::testing::TempDir tmp;
  const fs::path root = fs::path(tmp.path()) / "pets";
  write_folder(root);
  namespace ku = tf::keras::utils;
  ku::ImageDatasetOptions o{.batch_size = 3,
                            .image_size = {6, 6},
                            .seed = 9,
                            .validation_split = 0.2,
                            .subset = "training",
                            .verbose = false};
  const auto train = ku::image_dataset_from_directory(root.string(), o);
  o.subset = "validation";
  const auto val = ku::image_dataset_from_directory(root.string(), o);
  CHECK(train.file_paths.size() == 8);
  CHECK(val.file_paths.size() == 2);
  std::set<std::string> all(train.file_paths.begin(), train.file_paths.end());
  all.insert(val.file_paths.begin(), val.file_paths.end());
  CHECK(all.size() == 10);

  tf::keras::Sequential model({tf::keras::layers::Flatten({6, 6, 3}), tf::keras::layers::Dense(2)});
  model.compile(tf::keras::optimizers::Adam(1e-2),
                tf::keras::losses::SparseCategoricalCrossentropy(true), {"accuracy"});
  const auto history =
      model.fit(train.dataset, {.epochs = 3, .validation_data = val.dataset, .verbose = 0});
  CHECK(history.history.at("loss").size() == 3);

  require_error(
      [&] {
        ku::image_dataset_from_directory(
            root.string(),
            {.label_mode = "binary", .class_names = {"cats", "dogs", "cats"}, .verbose = false});
      },
      {"label_mode \"binary\" needs exactly 2 classes, found 3"});
  require_error(
      [&] {
        ku::image_dataset_from_directory(root.string(),
                                         {.validation_split = 0.2, .verbose = false});
      },
      {"with validation_split, subset must be \"training\" or \"validation\""});
  require_error(
      [&] {
        ku::image_dataset_from_directory(root.string(), {.color_mode = "cmyk", .verbose = false});
      },
      {"color_mode must be \"grayscale\", \"rgb\" or \"rgba\", got \"cmyk\""});
  TF_REQUIRE_THROWS_CONTAINING(ku::image_dataset_from_directory((root / "missing").string()),
                               tf::NotFoundError, "is not a directory");
  fs::create_directories(root / "empty" / "none");
  require_error(
      [&] { ku::image_dataset_from_directory((root / "empty").string(), {.verbose = false}); },
      {"no images found in directory"});
  // A file that does not decode fails at iteration, naming the file.
  tf::io::write_file((root / "dogs" / "broken.png").string(), "\x89PNG\r\n\x1a\n broken");
  const auto broken = ku::image_dataset_from_directory(
      root.string(), {.batch_size = 20, .shuffle = false, .verbose = false});
  require_error(
      [&] {
        for (const auto& e : broken.dataset) (void)e;
      },
      {"[image_dataset_from_directory]", "broken.png", "invalid PNG data"});
}

TEST_CASE("load_img and save_img", "[keras][data][io]") {
  tf::testing::TempDir tmp;
  namespace ku = tf::keras::utils;
  const std::string png = (fs::path(tmp.path()) / "red.png").string();
  tf::io::write_file(png, tf::io::encode_png(solid(10, 14, 200, 0, 0)));
  const tf::Tensor x = ku::load_img(png);
  CHECK(x.dtype() == tf::float32);
  CHECK(x.shape() == tf::TensorShape{10, 14, 3});
  CHECK(channel_means(x) == std::vector<double>{200, 0, 0});
  CHECK(ku::load_img(png, {.target_size = std::array<int64_t, 2>{5, 7}}).shape() ==
        tf::TensorShape{5, 7, 3});
  CHECK(ku::load_img(png, {.color_mode = "grayscale"}).shape() == tf::TensorShape{10, 14, 1});
  const tf::Tensor square =
      ku::load_img(png, {.target_size = std::array<int64_t, 2>{5, 5}, .keep_aspect_ratio = true});
  CHECK(square.shape() == tf::TensorShape{5, 5, 3});
  CHECK(channel_means(square)[0] == 200);

  // scale: [min, max] to [0, 255] (Keras' array_to_img); without, rounded values as they are.
  std::vector<double> ramp;
  for (int i = 0; i < 12; ++i) ramp.push_back(i / 11.0);
  const std::string out = (fs::path(tmp.path()) / "ramp.png").string();
  ku::save_img(out, tf::constant(ramp, {3, 4, 1}));
  const std::vector<double> back = tf::io::decode_png(tf::io::read_file(out)).numpy<double>();
  CHECK(back.front() == 0);
  CHECK(back.back() == 255);
  CHECK(back[5] == std::round(5 * 255.0 / 11));
  ku::save_img(out, tf::constant(std::vector<double>{3, 250.4, 300, -2}, {2, 2, 1}), false);
  check_values(tf::io::decode_png(tf::io::read_file(out)), {3, 250, 255, 0}, 0, 0);
  const std::string jpg = (fs::path(tmp.path()) / "red.jpg").string();
  ku::save_img(jpg, x, false);
  CHECK(tf::io::decode_jpeg(tf::io::read_file(jpg)).shape() == tf::TensorShape{10, 14, 3});
  require_error([&] { ku::save_img(out, tf::zeros({4, 4})); }, {"[save_img] x must be an image"});
  require_error([&] { ku::load_img(png, {.color_mode = "bgr"}); }, {"color_mode must be"});
  TF_REQUIRE_THROWS_CONTAINING(ku::load_img(png + ".missing"), tf::NotFoundError, "[read_file]");
}
