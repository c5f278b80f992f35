// More of Keras 3's layers: RMSNormalization, AlphaDropout, Lambda, the adaptive poolings
// (AdaptiveAveragePooling1D/2D/3D, AdaptiveMaxPooling1D/2D/3D), the integer preprocessing
// layers CategoryEncoding, Discretization and IntegerLookup, and Keras' alias names
// (MaxPool2D, AvgPool2D, Convolution2D, GlobalAvgPool2D, ...). See docs/keras.md.
//
// Each is a Layer handle on shared state with the threading rules of keras/layers.h, composed of
// existing ops (so every device runs it, and traced functions record it). Inputs are
// channels_last (Keras' default) unless a FormatOptions says "channels_first".
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "keras/layers.h"
#include "keras/layers_conv.h"
#include "keras/layers_conv3d.h"
#include "keras/layers_more.h"

namespace tapeflow::keras::layers {

// x / sqrt(mean(x^2 over axis) + epsilon) * scale, with one trainable `scale` (ones) per element
// of the normalised axes. Computes in float32 at least, as Keras (under a mixed policy the
// scale stays float32 and the output comes in the compute dtype).
//   RMSNormalization()  RMSNormalization(-1, 1e-5)  RMSNormalization(std::vector<int>{1, 2})
class RMSNormalization : public Layer {
 public:
  explicit RMSNormalization(int axis = -1, double epsilon = 1e-6, std::string name = "");
  explicit RMSNormalization(std::vector<int> axes, double epsilon = 1e-6, std::string name = "");
  Variable scale() const;
};

// Dropout that keeps SELU's self-normalisation (Keras' AlphaDropout): with training = true each
// element is kept with probability 1 - rate or set to -alpha * scale of SELU, then the whole is
// mapped by a * x + b so that mean and variance stay those of the input. `noise_shape` (Keras'
// noise_shape; 0 = the input's size there) shares one draw along the axes where it is 1. The
// identity otherwise.
class AlphaDropout : public Layer {
 public:
  explicit AlphaDropout(double rate, std::vector<int64_t> noise_shape = {},
                        std::optional<int64_t> seed = std::nullopt, std::string name = "");
};

// Keras' Lambda: a layer that applies a function (no weights). `output_shape` maps an input
// shape (batch None) to the output shape; without it the output shape is found by running the
// function once on a symbolic input when a model needs it.
//   Lambda([](const Tensor& x) { return x * 2.0; })
class Lambda : public Layer {
 public:
  using Function = std::function<Tensor(const Tensor&)>;
  using ShapeFunction = std::function<TensorShape(const TensorShape&)>;
  explicit Lambda(Function function, ShapeFunction output_shape = {}, std::string name = "");
};

// The adaptive poolings (PyTorch's AdaptiveAvgPool/MaxPool, Keras 3.15): each output position i
// of an axis of length L pooled to n covers the input rows [floor(i L / n), ceil((i + 1) L / n)),
// so any input length gives the output size asked for. Inputs (batch, steps, channels),
// (batch, height, width, channels) or (batch, depth, height, width, channels); with
// FormatOptions{.data_format = "channels_first"} the channels come first, after the batch.
class AdaptiveAveragePooling1D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit AdaptiveAveragePooling1D(int64_t output_size, std::string name = "")
      : AdaptiveAveragePooling1D(output_size, FormatOptions{.name = std::move(name)}) {}
  AdaptiveAveragePooling1D(int64_t output_size, FormatOptions options);
};
class AdaptiveMaxPooling1D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit AdaptiveMaxPooling1D(int64_t output_size, std::string name = "")
      : AdaptiveMaxPooling1D(output_size, FormatOptions{.name = std::move(name)}) {}
  AdaptiveMaxPooling1D(int64_t output_size, FormatOptions options);
};
class AdaptiveAveragePooling2D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit AdaptiveAveragePooling2D(Size2 output_size, std::string name = "")
      : AdaptiveAveragePooling2D(output_size, FormatOptions{.name = std::move(name)}) {}
  AdaptiveAveragePooling2D(Size2 output_size, FormatOptions options);
};
class AdaptiveMaxPooling2D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit AdaptiveMaxPooling2D(Size2 output_size, std::string name = "")
      : AdaptiveMaxPooling2D(output_size, FormatOptions{.name = std::move(name)}) {}
  AdaptiveMaxPooling2D(Size2 output_size, FormatOptions options);
};
class AdaptiveAveragePooling3D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit AdaptiveAveragePooling3D(Size3 output_size, std::string name = "")
      : AdaptiveAveragePooling3D(output_size, FormatOptions{.name = std::move(name)}) {}
  AdaptiveAveragePooling3D(Size3 output_size, FormatOptions options);
};
class AdaptiveMaxPooling3D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit AdaptiveMaxPooling3D(Size3 output_size, std::string name = "")
      : AdaptiveMaxPooling3D(output_size, FormatOptions{.name = std::move(name)}) {}
  AdaptiveMaxPooling3D(Size3 output_size, FormatOptions options);
};

// Keras' CategoryEncoding: integer ids in [0, num_tokens) to a (batch, num_tokens) encoding.
// "one_hot" takes (batch,) or (batch, 1) ids; "multi_hot" and "count" take (batch, k) ids (or
// (batch,) ids, one per example). An id outside [0, num_tokens) is an InvalidArgumentError in
// eager calls (Keras on TF drops it silently; a traced call drops it too, as the check needs
// the values). The output has the layer's dtype (float32).
class CategoryEncoding : public Layer {
 public:
  explicit CategoryEncoding(int64_t num_tokens, std::string output_mode = "multi_hot",
                            std::string name = "");
  // "count" with a weight per id (Keras' count_weights): the sum of the weights of each token.
  Tensor operator()(const Tensor& ids, const Tensor& count_weights) const;
  using Layer::operator();
};

// Keras' Discretization: the index of the bucket each value falls in (int64), bucket i holding
// [bin_boundaries[i - 1], bin_boundaries[i]). Either give the boundaries, or num_bins (and
// Keras' epsilon, 0.01) and call adapt() on data: the boundaries become Keras 3's approximate
// (1 / num_bins, ..., (num_bins - 1) / num_bins) quantiles, computed as Keras computes them
// (exact for fewer than 1 / epsilon values: the sorted value at position q n - 1, interpolated;
// with fewer values than bins, the sorted values but the last).
class Discretization : public Layer {
 public:
  explicit Discretization(std::vector<double> bin_boundaries, std::string name = "");
  static Discretization with_num_bins(int64_t num_bins, double epsilon = 0.01,
                                      std::string name = "");
  void adapt(const Tensor& data);
  std::vector<double> bin_boundaries() const;

 private:
  explicit Discretization(std::shared_ptr<detail::LayerImpl> impl) : Layer(std::move(impl)) {}
};

struct IntegerLookupOptions {
  std::vector<int64_t> vocabulary = {};  // empty: call adapt()
  int64_t num_oov_indices = 1;           // > 1: an unknown token t gets OOV index floormod(t, n)
  std::optional<int64_t> mask_token = std::nullopt;
  int64_t oov_token = -1;
  std::string output_mode = "int";                   // "int", "one_hot", "multi_hot", "count"
  bool invert = false;                               // indices back to tokens ("int" only)
  std::optional<int64_t> max_tokens = std::nullopt;  // adapt(): keep the most frequent
  // How several OOV indices share unknown tokens: "floormod" or "farmhash" (Keras' FarmHash64 of
  // the token's decimal text, modulo num_oov_indices; with a salt, SipHash-2-4 keyed by it).
  std::string oov_method = "floormod";
  std::vector<int64_t> salt = {};  // "farmhash" only: {s} (Keras' salt=s, i.e. {s, s}) or {a, b}
  std::string name = "";
};
// Keras' IntegerLookup: integer tokens to indices in a vocabulary. Indices: the mask token (if
// any, output_mode "int" only) is 0, then the OOV indices, then the vocabulary in order;
// get_vocabulary() lists them that way (the OOV token once per OOV index). With several OOV
// indices an unknown token t takes the one floormod(t, num_oov_indices) along (Keras' default
// oov_method "floormod"), or Keras' "farmhash" bucket of it (the same values as Keras' for
// every token, salted or not). With "one_hot", "multi_hot" or
// "count" the mask token has no index and masked tokens encode to nothing, as Keras.
// num_oov_indices = 0: an unknown token is an InvalidArgumentError in eager calls; a traced call
// gives it -1 (nothing when encoded). adapt() builds the vocabulary from data, most frequent first
// (ties: the larger token first, as Keras 3.15).
class IntegerLookup : public Layer {
 public:
  IntegerLookup() : IntegerLookup(IntegerLookupOptions{}) {}
  explicit IntegerLookup(IntegerLookupOptions options);
  // IntegerLookup({12, 36, 1138}); the options' form for the rest, e.g.
  // IntegerLookup({.vocabulary = {12, 36}, .invert = true}).
  explicit IntegerLookup(std::initializer_list<int64_t> vocabulary)
      : IntegerLookup(IntegerLookupOptions{.vocabulary = vocabulary}) {}
  void adapt(const Tensor& data);
  std::vector<int64_t> get_vocabulary() const;
  int64_t vocabulary_size() const;
};

// Keras' alias names: the same classes.
using MaxPool1D = MaxPooling1D;
using MaxPool2D = MaxPooling2D;
using MaxPool3D = MaxPooling3D;
using AvgPool1D = AveragePooling1D;
using AvgPool2D = AveragePooling2D;
using AvgPool3D = AveragePooling3D;
using GlobalAvgPool1D = GlobalAveragePooling1D;
using GlobalAvgPool2D = GlobalAveragePooling2D;
using GlobalAvgPool3D = GlobalAveragePooling3D;
using GlobalMaxPool1D = GlobalMaxPooling1D;
using GlobalMaxPool2D = GlobalMaxPooling2D;
using GlobalMaxPool3D = GlobalMaxPooling3D;
using Convolution1D = Conv1D;
using Convolution2D = Conv2D;
using Convolution3D = Conv3D;
using Convolution2DTranspose = Conv2DTranspose;
using Convolution3DTranspose = Conv3DTranspose;
using SeparableConvolution1D = SeparableConv1D;
using SeparableConvolution2D = SeparableConv2D;

}  // namespace tapeflow::keras::layers
