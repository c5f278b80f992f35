#include "keras/utils.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <utility>
#include <vector>

#include "core/check.h"
#include "ops/binary.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/unary.h"

namespace tapeflow::keras::utils {

namespace {

// A sequence's rows [from, from + n).
Tensor rows(const Tensor& x, int64_t from, int64_t n) {
  std::vector<int64_t> begin(static_cast<size_t>(x.rank()), 0), size(begin.size(), -1);
  begin[0] = from;
  size[0] = n;
  return slice(x, begin, size);
}

template <class T>
Tensor pad_int_sequences(const std::vector<std::vector<T>>& sequences,
                         PadSequencesOptions options) {
  std::vector<Tensor> tensors;
  tensors.reserve(sequences.size());
  for (const auto& s : sequences)
    tensors.push_back(convert_to_tensor(s, {static_cast<int64_t>(s.size())}));
  return pad_sequences(tensors, std::move(options));
}

}  // namespace

Tensor to_categorical(const Tensor& y, int64_t num_classes) {
  constexpr const char* op = "to_categorical";
  TF_CHECK_ARG(
      y.defined() && y.dtype() != bool_, op, "class ids must be a numeric tensor, got {}",
      y.defined() ? std::string(dtype_name(y.dtype())) : std::string("an undefined tensor"));
  TF_CHECK_ARG(num_classes > 0 || num_classes == -1, op,
               "num_classes must be positive (or -1 for the largest id + 1), got {}", num_classes);
  Tensor ids = y;
  // Keras squeezes a trailing dimension of 1 (labels shaped (n, 1)).
  if (ids.rank() > 1 && ids.shape()[ids.rank() - 1] == 1) ids = squeeze(ids, {ids.rank() - 1});
  const std::vector<double> v = detail::to_double_vector(ids);
  int64_t largest = -1;
  for (size_t i = 0; i < v.size(); ++i) {
    // Keras casts float ids to integers (truncating); a fractional id is more likely a mistake.
    TF_CHECK_ARG(v[i] == std::floor(v[i]), op, "class id {} (element {}) is not an integer", v[i],
                 i);
    TF_CHECK_ARG(v[i] >= 0 && (num_classes == -1 || v[i] < static_cast<double>(num_classes)), op,
                 "class id {} (element {} of shape {}) is outside [0, {})", v[i], i,
                 y.shape().to_string(),
                 num_classes == -1 ? std::string("inf") : std::to_string(num_classes));
    // one_hot's depth is an int32, as TF's (and the id must convert to int64 exactly).
    TF_CHECK_ARG(v[i] < 2147483647.0, op,
                 "class id {} (element {}) needs more than 2^31 - 1 classes, one_hot's largest "
                 "depth",
                 v[i], i);
    largest = std::max(largest, static_cast<int64_t>(v[i]));
  }
  if (num_classes == -1) num_classes = largest + 1;
  return ::tapeflow::detail::naming_errors(op,
                                           [&] { return one_hot(cast(ids, int64), num_classes); });
}

// An error of the ops inside (a maxlen too large to allocate) names pad_sequences first.
Tensor pad_sequences(const std::vector<std::vector<int64_t>>& sequences,
                     PadSequencesOptions options) {
  return ::tapeflow::detail::naming_errors(
      "pad_sequences", [&] { return pad_int_sequences(sequences, std::move(options)); });
}

Tensor pad_sequences(const std::vector<std::vector<int32_t>>& sequences,
                     PadSequencesOptions options) {
  return ::tapeflow::detail::naming_errors(
      "pad_sequences", [&] { return pad_int_sequences(sequences, std::move(options)); });
}

static Tensor pad_tensor_sequences(const std::vector<Tensor>& sequences,
                                   PadSequencesOptions options);

Tensor pad_sequences(const std::vector<Tensor>& sequences, PadSequencesOptions options) {
  return ::tapeflow::detail::naming_errors(
      "pad_sequences", [&] { return pad_tensor_sequences(sequences, std::move(options)); });
}

static Tensor pad_tensor_sequences(const std::vector<Tensor>& sequences,
                                   PadSequencesOptions options) {
  constexpr const char* op = "pad_sequences";
  TF_CHECK_ARG(options.padding == "pre" || options.padding == "post", op,
               "padding must be \"pre\" or \"post\", got \"{}\"", options.padding);
  TF_CHECK_ARG(options.truncating == "pre" || options.truncating == "post", op,
               "truncating must be \"pre\" or \"post\", got \"{}\"", options.truncating);
  if (options.maxlen)
    TF_CHECK_ARG(*options.maxlen >= 0, op, "maxlen must be non-negative, got {}", *options.maxlen);
  // Keras' sample shape: the dimensions after the length, taken from the first non-empty one.
  std::optional<TensorShape> sample;
  int64_t longest = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Tensor& s = sequences[i];
    TF_CHECK_ARG(s.defined() && s.rank() >= 1, op,
                 "sequence {} must be a tensor of rank >= 1 (its first dimension is the length), "
                 "got {}",
                 i, s.defined() ? "shape " + s.shape().to_string() : std::string("undefined"));
    longest = std::max(longest, s.shape()[0]);
    if (s.shape()[0] == 0) continue;
    TensorShape rest;
    for (int d = 1; d < s.rank(); ++d) rest.push_back(s.shape()[d]);
    if (!sample) sample = rest;
    TF_CHECK_ARG(*sample == rest, op,
                 "sequence {} has steps of shape {} but an earlier one has {}; every step must "
                 "have the same shape",
                 i, rest.to_string(), sample->to_string());
  }
  const TensorShape step = sample.value_or(TensorShape{});
  const int64_t maxlen = options.maxlen.value_or(longest);
  const bool pre_pad = options.padding == "pre", pre_cut = options.truncating == "pre";
  std::vector<Tensor> padded;
  padded.reserve(sequences.size());
  for (const Tensor& s : sequences) {
    Tensor x = cast(s, options.dtype);
    const int64_t n = x.shape()[0];
    if (n == 0) {
      // An empty sequence's steps may have any shape (Keras takes the sample shape elsewhere).
      TensorShape shape{0};
      for (int64_t d : step) shape.push_back(d);
      x = zeros(shape, options.dtype);
    }
    if (n > maxlen) x = rows(x, pre_cut ? n - maxlen : 0, maxlen);
    const int64_t missing = maxlen - x.shape()[0];
    std::vector<std::pair<int64_t, int64_t>> paddings(static_cast<size_t>(x.rank()), {0, 0});
    paddings[0] =
        pre_pad ? std::pair<int64_t, int64_t>{missing, 0} : std::pair<int64_t, int64_t>{0, missing};
    padded.push_back(missing > 0 ? pad(x, paddings, options.value) : x);
  }
  if (padded.empty()) {
    TensorShape shape{0, maxlen};
    for (int64_t d : step) shape.push_back(d);
    return zeros(shape, options.dtype);
  }
  return stack(padded, 0);
}

data::Dataset timeseries_dataset_from_array(const Tensor& data,
                                            const std::optional<Tensor>& targets,
                                            int64_t sequence_length, TimeseriesOptions options) {
  constexpr const char* op = "timeseries_dataset_from_array";
  TF_CHECK_ARG(data.defined() && data.rank() >= 1, op,
               "data must have rank >= 1 (time steps first), got {}",
               data.defined() ? "shape " + data.shape().to_string() : std::string("undefined"));
  const int64_t len = data.shape()[0];
  TF_CHECK_ARG(sequence_length > 0, op, "sequence_length must be positive, got {}",
               sequence_length);
  if (targets) {
    // Keras: fewer targets than time steps limit the number of sequences.
    TF_CHECK_ARG(
        targets->defined() && targets->rank() >= 1, op,
        "targets must have rank >= 1 (time steps first), got {}",
        targets->defined() ? "shape " + targets->shape().to_string() : std::string("undefined"));
  }
  const int64_t start = options.start_index.value_or(0);
  TF_CHECK_ARG(start >= 0 && start < len, op,
               "start_index must be in [0, {}) (the length of the data), got {}", len, start);
  const int64_t end = options.end_index.value_or(len);
  TF_CHECK_ARG(end > start && end <= len, op,
               "end_index must be above start_index {} and at most the length of the data {}, "
               "got {}",
               start, len, end);
  TF_CHECK_ARG(options.sampling_rate > 0 && options.sampling_rate < len, op,
               "sampling_rate must be in [1, {}) (the length of the data), got {}", len,
               options.sampling_rate);
  TF_CHECK_ARG(options.sequence_stride > 0 && options.sequence_stride < len, op,
               "sequence_stride must be in [1, {}) (the length of the data), got {}", len,
               options.sequence_stride);
  if (options.batch_size)
    TF_CHECK_ARG(*options.batch_size > 0, op, "batch_size must be positive, got {}",
                 *options.batch_size);

  // Keras' start positions: 0, stride, ... below end - start - (length - 1) * rate; none when a
  // sequence spans more rows than there are (then the dataset is empty, as Keras').
  int64_t span = 0;
  const bool fits = !__builtin_mul_overflow(sequence_length - 1, options.sampling_rate, &span) &&
                    span < end - start;
  int64_t num_seqs = fits ? end - start - span : 0;
  if (targets) num_seqs = std::min(num_seqs, targets->shape()[0]);
  std::vector<int64_t> starts;
  for (int64_t s = 0; s < num_seqs; s += options.sequence_stride) starts.push_back(s);
  // The step offsets (a sequence that does not fit is never gathered: no offsets for it).
  const int64_t steps_n = fits ? sequence_length : 0;
  std::vector<int64_t> steps(static_cast<size_t>(steps_n));
  for (int64_t j = 0; j < steps_n; ++j) steps[static_cast<size_t>(j)] = j * options.sampling_rate;

  // The rows used and the step offsets, on the CPU, shared by every batch.
  const Tensor window = rows(data, start, end - start);
  const Tensor offsets = convert_to_tensor(steps, {1, steps_n});
  std::optional<Tensor> labels;
  // Sequence s's target is targets[start + s] (Keras slices the targets as the data).
  if (targets)
    labels = rows(*targets, std::min(start, targets->shape()[0]),
                  std::max<int64_t>(0, std::min(end, targets->shape()[0]) - start));

  data::Dataset positions = data::Dataset::from_tensor_slices(
      convert_to_tensor(starts, {static_cast<int64_t>(starts.size())}));
  if (options.shuffle)
    positions =
        positions.shuffle(std::max<int64_t>(1, static_cast<int64_t>(starts.size())), options.seed);
  // Batch the start positions first, so that each batch is one gather ([batch, length, ...]).
  const bool batched = options.batch_size.has_value();
  if (batched) positions = positions.batch(*options.batch_size);
  return positions.map([window, offsets, labels, batched](Tensor s) -> data::Element {
    Tensor first = batched ? s : reshape(s, {1});
    Tensor idx = add(reshape(first, {-1, 1}), offsets);  // [batch, length]
    Tensor seqs = gather(window, idx);
    if (!batched) seqs = squeeze(seqs, {0});
    if (!labels) return {seqs};
    return {seqs, gather(*labels, s)};
  });
}

}  // namespace tapeflow::keras::utils
