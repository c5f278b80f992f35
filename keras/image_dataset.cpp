// keras.utils.image_dataset_from_directory (keras/utils.h): the file list is made and split when
// called; the images are read, decoded (data/image_io.h) and resized by a map when iterated.
// Also load_img and save_img.
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/log.h"
#include "data/image_io.h"
#include "keras/layers_preprocessing.h"
#include "keras/utils.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/image.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras::utils {

namespace {

namespace fs = std::filesystem;
constexpr const char* kOp = "image_dataset_from_directory";

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// The image files under `dir` (recursively): Keras' extensions, sorted.
std::vector<std::string> image_files(const fs::path& dir, bool follow_links) {
  std::vector<std::string> out;
  auto opts =
      follow_links ? fs::directory_options::follow_directory_symlink : fs::directory_options::none;
  for (const auto& e : fs::recursive_directory_iterator(dir, opts)) {
    if (!e.is_regular_file()) continue;
    const std::string ext = lower(e.path().extension().string());
    if (ext == ".png" || ext == ".jpg" || ext == ".jpeg" || ext == ".bmp" || ext == ".gif")
      out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Keras' crop_to_aspect_ratio (the Resizing layer's central crop) or pad_to_aspect_ratio (zeros
// around, the odd row or column after), then the resize.
Tensor fit_image(const Tensor& image, int64_t th, int64_t tw, bool crop, bool pad_to,
                 const std::string& interpolation) {
  Tensor x = cast(image, float32);
  if (crop) x = detail::crop_to_aspect(x, th, tw, true);
  if (pad_to) {
    const int64_t h = x.shape()[0], w = x.shape()[1];
    const int64_t ph = std::max(h, w * th / tw), pw = std::max(w, h * tw / th);
    x = pad(x,
            {{(ph - h) / 2, ph - h - (ph - h) / 2}, {(pw - w) / 2, pw - w - (pw - w) / 2}, {0, 0}});
  }
  return image::resize(x, {th, tw}, interpolation);
}

// An image file's pixels with `channels` channels, as Keras' decode_image(..., channels,
// expand_animations=False) (a GIF's first frame). Where TF refuses the channel count (1 or 4 for
// a GIF, 1 for a BMP) the file's own channels are converted: to gray by TF's rgb_to_grayscale
// weights (rounded), to RGBA with an opaque alpha.
Tensor decode_file(const std::string& path, int channels) {
  const std::string contents = io::read_file(path);
  const io::ImageFormat format = io::image_format(contents);
  const bool gif = format == io::ImageFormat::gif, bmp = format == io::ImageFormat::bmp;
  if (!(gif && channels != 3) && !(bmp && channels == 1))
    return io::decode_image(contents, channels, uint8, false);
  Tensor image = io::decode_image(contents, 0, uint8, false);
  const int64_t have = image.shape()[2];
  if (have == channels) return image;
  if (channels == 1) {
    Tensor rgb =
        cast(have == 1 ? image : slice(image, {0, 0, 0}, {image.shape()[0], image.shape()[1], 3}),
             float32);
    return cast(round(image::rgb_to_grayscale(rgb)), uint8);
  }
  // channels 4 from a 3-channel GIF frame.
  return concat({image, fill(TensorShape{image.shape()[0], image.shape()[1], 1},
                             constant(Tensor(255.0), uint8))},
                2);
}

int channels_of(const std::string& color_mode) {
  const int c = color_mode == "grayscale" ? 1
                : color_mode == "rgb"     ? 3
                : color_mode == "rgba"    ? 4
                                          : 0;
  TF_CHECK_ARG(c != 0, kOp, "color_mode must be \"grayscale\", \"rgb\" or \"rgba\", got \"{}\"",
               color_mode);
  return c;
}

}  // namespace

ImageDataset image_dataset_from_directory(const std::string& directory, ImageDatasetOptions o) {
  TF_CHECK_T(NotFoundError, fs::is_directory(directory), kOp, "{} is not a directory", directory);
  TF_CHECK_ARG(o.labels == "inferred" || o.labels.empty(), kOp,
               "labels must be \"inferred\" or \"\" (no labels), got \"{}\"", o.labels);
  TF_CHECK_ARG(o.label_mode == "int" || o.label_mode == "categorical" || o.label_mode == "binary" ||
                   o.label_mode.empty(),
               kOp, "label_mode must be \"int\", \"categorical\", \"binary\" or \"\", got \"{}\"",
               o.label_mode);
  if (o.labels.empty()) o.label_mode.clear();
  const int channels = channels_of(o.color_mode);
  TF_CHECK_ARG(o.image_size[0] > 0 && o.image_size[1] > 0, kOp,
               "image_size must be positive, got ({}, {})", o.image_size[0], o.image_size[1]);
  TF_CHECK_ARG(!o.batch_size || *o.batch_size > 0, kOp, "batch_size must be positive, got {}",
               o.batch_size.value_or(0));
  TF_CHECK_ARG(!(o.crop_to_aspect_ratio && o.pad_to_aspect_ratio), kOp,
               "crop_to_aspect_ratio and pad_to_aspect_ratio cannot both be true");
  if (o.validation_split) {
    TF_CHECK_ARG(*o.validation_split > 0 && *o.validation_split < 1, kOp,
                 "validation_split must be between 0 and 1, got {}", *o.validation_split);
    TF_CHECK_ARG(o.subset == "training" || o.subset == "validation", kOp,
                 "with validation_split, subset must be \"training\" or \"validation\", got "
                 "\"{}\"",
                 o.subset);
    TF_CHECK_ARG(!o.shuffle || o.seed, kOp,
                 "with validation_split and shuffle, give a seed: the two subsets must come "
                 "from one order");
  } else {
    TF_CHECK_ARG(o.subset.empty(), kOp, "subset \"{}\" needs a validation_split", o.subset);
  }

  // The files and their labels, class by class.
  ImageDataset result;
  std::vector<int64_t> labels;
  if (o.label_mode.empty() && o.labels.empty()) {
    result.file_paths = image_files(directory, o.follow_links);
  } else {
    std::vector<std::string> classes = o.class_names;
    if (classes.empty()) {
      for (const auto& e : fs::directory_iterator(directory))
        if (e.is_directory()) classes.push_back(e.path().filename().string());
      std::sort(classes.begin(), classes.end());
    }
    for (size_t k = 0; k < classes.size(); ++k) {
      const fs::path sub = fs::path(directory) / classes[k];
      TF_CHECK_T(NotFoundError, fs::is_directory(sub), kOp,
                 "class_names names \"{}\", which is not a folder of {}", classes[k], directory);
      for (std::string& f : image_files(sub, o.follow_links)) {
        result.file_paths.push_back(std::move(f));
        labels.push_back(static_cast<int64_t>(k));
      }
    }
    result.class_names = classes;
    TF_CHECK_ARG(o.label_mode != "binary" || classes.size() == 2, kOp,
                 "label_mode \"binary\" needs exactly 2 classes, found {} in {}", classes.size(),
                 directory);
  }
  if (o.verbose) {
    if (o.label_mode.empty())
      std::cout << "Found " << result.file_paths.size() << " files." << std::endl;
    else
      std::cout << "Found " << result.file_paths.size() << " files belonging to "
                << result.class_names.size() << " classes." << std::endl;
  }
  TF_CHECK_ARG(!result.file_paths.empty(), kOp,
               "no images found in directory {}. Allowed formats: .png, .jpg, .jpeg", directory);

  // One shuffle of the list with the seed, then the split (both subsets from one order).
  if (o.shuffle) {
    const uint64_t seed = o.seed ? static_cast<uint64_t>(*o.seed) : std::random_device{}();
    std::mt19937_64 rng(seed);
    std::vector<size_t> order(result.file_paths.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<std::string> files;
    std::vector<int64_t> shuffled_labels;
    for (size_t i : order) {
      files.push_back(result.file_paths[i]);
      if (!labels.empty()) shuffled_labels.push_back(labels[i]);
    }
    result.file_paths = std::move(files);
    labels = std::move(shuffled_labels);
  }
  if (o.validation_split) {
    const auto n = static_cast<int64_t>(result.file_paths.size());
    const auto num_val = static_cast<int64_t>(*o.validation_split * static_cast<double>(n));
    const bool training = o.subset == "training";
    const int64_t from = training ? 0 : n - num_val, to = training ? n - num_val : n;
    result.file_paths =
        std::vector<std::string>(result.file_paths.begin() + from, result.file_paths.begin() + to);
    if (!labels.empty()) labels = std::vector<int64_t>(labels.begin() + from, labels.begin() + to);
    if (o.verbose)
      std::cout << "Using " << result.file_paths.size() << " files for " << o.subset << "."
                << std::endl;
  }

  // Elements: the file's position (and its label); the map reads the file.
  const auto n = static_cast<int64_t>(result.file_paths.size());
  std::vector<Tensor> columns{range(int64_t{0}, n)};
  if (!o.label_mode.empty()) {
    const Tensor ids = cast(constant(labels, TensorShape{n}), int32);
    if (o.label_mode == "int")
      columns.push_back(ids);
    else if (o.label_mode == "binary")
      columns.push_back(reshape(cast(ids, float32), {n, 1}));
    else
      columns.push_back(to_categorical(ids, static_cast<int64_t>(result.class_names.size())));
  }
  data::Dataset ds = data::Dataset::from_tensor_slices(columns);
  if (o.shuffle) ds = ds.shuffle(o.batch_size.value_or(1) * 8, o.seed);
  auto files = std::make_shared<const std::vector<std::string>>(result.file_paths);
  const ImageDatasetOptions opts = o;
  ds = ds.map(
      [files, opts, channels](const std::vector<Tensor>& e) -> data::Element {
        const std::string& path = (*files)[static_cast<size_t>(e[0].item<int64_t>())];
        Tensor image;
        try {
          image =
              fit_image(decode_file(path, channels), opts.image_size[0], opts.image_size[1],
                        opts.crop_to_aspect_ratio, opts.pad_to_aspect_ratio, opts.interpolation);
        } catch (const Error& err) {
          TF_THROW(InvalidArgumentError, kOp, "{}: {}", path, err.what());
        }
        if (e.size() == 1) return {image};
        return {image, e[1]};
      },
      data::AUTOTUNE);
  if (o.batch_size) ds = ds.batch(*o.batch_size);
  result.dataset = ds;
  return result;
}

Tensor load_img(const std::string& path, LoadImgOptions o) {
  const Tensor image = decode_file(path, channels_of(o.color_mode));
  if (!o.target_size) return cast(image, float32);
  const auto [th, tw] = *o.target_size;
  TF_CHECK_ARG(th > 0 && tw > 0, "load_img", "target_size must be positive, got ({}, {})", th, tw);
  return fit_image(image, th, tw, o.keep_aspect_ratio, false, o.interpolation);
}

void save_img(const std::string& path, const Tensor& x, bool scale) {
  const char* op = "save_img";
  TF_CHECK_ARG(x.defined() && x.rank() == 3, op,
               "x must be an image (height, width, channels), got {}",
               x.defined() ? "shape " + x.shape().to_string() : std::string("an undefined tensor"));
  Tensor v = cast(x, float64);
  if (scale) {  // Keras' array_to_img: x - min(x), then * 255 / max
    v = v - reduce_min(v);
    const double top = reduce_max(v).item<double>();
    if (top > 0) v = v * (255.0 / top);
  }
  const Tensor pixels = cast(round(clip_by_value(v, Tensor(0.0), Tensor(255.0))), uint8);
  const std::string ext = lower(fs::path(path).extension().string());
  io::write_file(
      path, ext == ".jpg" || ext == ".jpeg" ? io::encode_jpeg(pixels) : io::encode_png(pixels));
}

}  // namespace tapeflow::keras::utils
