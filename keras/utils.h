// keras.utils' data helpers: to_categorical, pad_sequences and timeseries_dataset_from_array.
#pragma once

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

}  // namespace tapeflow::keras::utils
