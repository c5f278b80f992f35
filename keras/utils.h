// keras.utils' data helpers: to_categorical, pad_sequences, timeseries_dataset_from_array and
// image_dataset_from_directory (keras/image_dataset.cpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/tensor.h"
#include "data/dataset.h"

namespace tapeflow::keras::utils {

// Keras' to_categorical: class ids (an integer tensor, or floats with integer values) to
// one-hot float32 rows (a trailing dimension of 1 is squeezed first, as Keras). num_classes -1
// means the largest id + 1. Ids must be integers in [0, num_classes): an InvalidArgumentError
// names the first one outside (Keras' one_hot gives a zero row instead) or with a fraction.
Tensor to_categorical(const Tensor& y, int64_t num_classes = -1);

struct PadSequencesOptions {
  // The length of every output row; nullopt: the longest sequence's.
  std::optional<int64_t> maxlen = std::nullopt;
  DType dtype = int32;
  std::string padding = "pre";     // "pre" or "post": where the padding goes
  std::string truncating = "pre";  // "pre" or "post": which end a longer sequence loses
  double value = 0.0;
};

// Keras' pad_sequences: a list of sequences to one [num_sequences, maxlen] tensor, each row padded
// with value (or truncated) at the start ("pre") or the end ("post").
Tensor pad_sequences(const std::vector<std::vector<int64_t>>& sequences,
                     PadSequencesOptions options = {});
Tensor pad_sequences(const std::vector<std::vector<int32_t>>& sequences,
                     PadSequencesOptions options = {});
// Sequences as tensors whose first dimension is the length; the other dimensions (Keras'
// sample shape) must agree: the result is [num_sequences, maxlen, sample shape...].
Tensor pad_sequences(const std::vector<Tensor>& sequences, PadSequencesOptions options = {});

struct TimeseriesOptions {
  int64_t sequence_stride = 1;  // steps between the starts of consecutive sequences
  int64_t sampling_rate = 1;    // steps between the time steps of one sequence
  // Sequences per batch; nullopt yields single sequences.
  std::optional<int64_t> batch_size = 128;
  bool shuffle = false;
  std::optional<int64_t> seed = std::nullopt;
  std::optional<int64_t> start_index = std::nullopt;  // first row of data used
  std::optional<int64_t> end_index = std::nullopt;    // one past the last row used
};

// Keras' timeseries_dataset_from_array: sequence i is data rows s_i, s_i + sampling_rate, ...
// (sequence_length of them) from start_index on, with s_i = i * sequence_stride; with targets,
// each element is {sequences, targets[start_index + s_i]} (fewer targets than steps limit the
// number of sequences, as Keras). Each batch is one gather from data.
// shuffle shuffles the start positions anew every epoch (Keras shuffles them once with NumPy
// and then within a buffer of 8 batches; the orders differ).
data::Dataset timeseries_dataset_from_array(const Tensor& data,
                                            const std::optional<Tensor>& targets,
                                            int64_t sequence_length,
                                            TimeseriesOptions options = {});

struct ImageDatasetOptions {
  // "inferred" (one class per subfolder of the directory) or "" (Keras' None: no labels, every
  // image file under the directory).
  std::string labels = "inferred";
  std::string label_mode = "int";  // "int" (int32), "categorical" (float32 one-hot), "binary"
                                   // (float32 (batch, 1), two classes), "" (no labels)
  std::vector<std::string> class_names = {};  // the subfolders to use, in this order
  std::string color_mode = "rgb";             // "grayscale", "rgb" or "rgba": 1, 3, 4 channels
  std::optional<int64_t> batch_size = 32;     // nullopt: single images
  std::array<int64_t, 2> image_size = {256, 256};  // every image is resized to it
  bool shuffle = true;
  std::optional<int64_t> seed = std::nullopt;
  std::optional<double> validation_split = std::nullopt;  // a fraction in (0, 1)
  std::string subset = "";                  // with validation_split: "training" or "validation"
  std::string interpolation = "bilinear";   // tf::image::resize's methods
  bool follow_links = false;
  bool crop_to_aspect_ratio = false;  // crop the center to image_size's aspect ratio first
  bool pad_to_aspect_ratio = false;   // or pad with zeros to it
  bool verbose = true;                // Keras' "Found N files belonging to K classes."
};

struct ImageDataset {
  // Elements {images float32 (batch, height, width, channels) with values 0..255, labels}, or
  // {images} without labels.
  data::Dataset dataset;
  std::vector<std::string> class_names;
  std::vector<std::string> file_paths;  // in the order the dataset reads them (before shuffle)
};

// Keras' image_dataset_from_directory: the PNG and JPEG files (.png, .jpg, .jpeg; .bmp and
// .gif, which Keras also lists, are skipped with a warning: tapeflow decodes PNG and JPEG)
// under each class subfolder (sorted by name, or class_names), files sorted within a folder,
// walked recursively. With shuffle the file list is shuffled once with the seed (then split:
// the first 1 - validation_split for "training", the rest for "validation", so both subsets
// with one seed are disjoint) and the dataset reshuffles within 8 batches every epoch. Images
// are read, decoded and resized when iterated (a map on the CPU); a file that does not decode
// is an InvalidArgumentError naming it.
ImageDataset image_dataset_from_directory(const std::string& directory,
                                          ImageDatasetOptions options = {});

struct LoadImgOptions {
  std::string color_mode = "rgb";  // "grayscale", "rgb" or "rgba"
  // (height, width) to resize to; nullopt keeps the file's size.
  std::optional<std::array<int64_t, 2>> target_size = std::nullopt;
  std::string interpolation = "nearest";  // Keras' default; any tf::image::resize method
  bool keep_aspect_ratio = false;         // crop the center to target_size's aspect ratio first
};
// Keras' img_to_array(load_img(path, ...)): a PNG or JPEG file as a float32 (height, width,
// channels) tensor of values 0..255 (Keras' load_img returns a PIL image; C++ has none).
Tensor load_img(const std::string& path, LoadImgOptions options = {});

// Keras' save_img: x (height, width, 1, 3 or 4 channels; any real dtype) written as PNG, or as
// JPEG for a .jpg or .jpeg path (1 or 3 channels). With scale (Keras' default) x is first
// mapped from [min(x), max(x)] to [0, 255] as array_to_img does; without, its values are
// rounded and clipped to 0..255. The file is written atomically.
void save_img(const std::string& path, const Tensor& x, bool scale = true);

}  // namespace tapeflow::keras::utils
