// More built-in Keras layers (tf.keras.layers), the ones TF2 tutorials use beyond keras/layers.h:
// Embedding, LayerNormalization, the global poolings, Reshape, Activation, Rescaling, Conv1D,
// MaxPooling1D, AveragePooling1D and UpSampling2D. See docs/keras.md.
//
// Each is a Layer handle on shared state, as the layers of keras/layers.h, with the same
// threading rules: the build runs once under the layer's mutex, calls read immutable
// configuration and the (internally synchronised) variables.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "keras/initializers.h"
#include "keras/layers.h"
#include "keras/regularizers.h"

namespace tapeflow::keras::layers {

struct EmbeddingOptions {
  Initializer embeddings_initializer = {};  // Keras' "uniform": RandomUniform(-0.05, 0.05)
  Regularizer embeddings_regularizer = {};
  Constraint embeddings_constraint = {};
  // Keras' mask_zero: id 0 is padding, and the output carries the mask ids != 0 (see
  // Layer::call_with_mask); input_dim stays the vocabulary size plus one, as in Keras.
  bool mask_zero = false;
  // Keras' input_shape (without the batch dimension): builds the layer at construction.
  std::vector<int64_t> input_shape = {};
  std::string name = "";
};

// Looks up rows of the table `embeddings` (input_dim, output_dim): integer ids of any shape s
// give s + (output_dim,). Floating ids are cast to int32 (as Keras). An id outside
// [0, input_dim) is an InvalidArgumentError naming the layer (in a traced function the error
// comes from the gather op when the graph runs). The gradient with respect to the table is
// dense (a (input_dim, output_dim) tensor, zero in the rows no id selected), where TF hands out
// an IndexedSlices.
//   Embedding(10000, 16)  Embedding(1000, 64, "glorot_uniform")
class Embedding : public Layer {
 public:
  Embedding(int64_t input_dim, int64_t output_dim)
      : Embedding(input_dim, output_dim, EmbeddingOptions{}) {}
  Embedding(int64_t input_dim, int64_t output_dim, Initializer embeddings_initializer,
            Regularizer embeddings_regularizer = {})
      : Embedding(input_dim, output_dim,
                  EmbeddingOptions{.embeddings_initializer = std::move(embeddings_initializer),
                                   .embeddings_regularizer = std::move(embeddings_regularizer)}) {}
  Embedding(int64_t input_dim, int64_t output_dim, EmbeddingOptions options);
  int64_t input_dim() const;
  int64_t output_dim() const;
  bool mask_zero() const;
  Variable embeddings() const;
};

struct LayerNormalizationOptions {
  std::vector<int> axis = {-1};  // the axes normalised over (and the shape of gamma and beta)
  double epsilon = 1e-3;
  bool center = true;                  // beta
  bool scale = true;                   // gamma
  Initializer beta_initializer = {};   // zeros
  Initializer gamma_initializer = {};  // ones
  Regularizer beta_regularizer = {};
  Regularizer gamma_regularizer = {};
  Constraint beta_constraint = {};
  Constraint gamma_constraint = {};
  std::string name = "";
};

// Normalises each example over `axis` with its own mean and (biased) variance, then scales by
// gamma and shifts by beta (whose shape is the input's dimensions at `axis`). The same in
// training and inference; no moving statistics.
//   LayerNormalization()  LayerNormalization(-1, 1e-6)  LayerNormalization({.axis = {1, 2}})
class LayerNormalization : public Layer {
 public:
  LayerNormalization() : LayerNormalization(LayerNormalizationOptions{}) {}
  template <class A>
  requires std::is_integral_v<A>
  explicit LayerNormalization(A axis, double epsilon = 1e-3, bool center = true, bool scale = true)
      : LayerNormalization(LayerNormalizationOptions{.axis = {static_cast<int>(axis)},
                                                     .epsilon = epsilon,
                                                     .center = center,
                                                     .scale = scale}) {}
  explicit LayerNormalization(LayerNormalizationOptions options);
  Variable gamma() const;
  Variable beta() const;
};

// Global poolings: the mean or maximum over the spatial axes (steps for the 1-D ones, height
// and width for the 2-D ones). data_format "channels_last" (default; "" means it too) or
// "channels_first"; keepdims keeps the pooled axes with size 1.
//   GlobalAveragePooling2D()  GlobalMaxPooling1D("channels_last", /*keepdims=*/true)
//   GlobalAveragePooling1D({.keepdims = true})
struct GlobalPoolingOptions {
  std::string data_format = "";  // "": backend::image_data_format() (Keras' None)
  bool keepdims = false;
  std::string name = "";
};

class GlobalAveragePooling1D : public Layer {
 public:
  GlobalAveragePooling1D() : GlobalAveragePooling1D(GlobalPoolingOptions{}) {}
  explicit GlobalAveragePooling1D(std::string data_format, bool keepdims = false)
      : GlobalAveragePooling1D(
            GlobalPoolingOptions{.data_format = std::move(data_format), .keepdims = keepdims}) {}
  explicit GlobalAveragePooling1D(GlobalPoolingOptions options);
};

class GlobalMaxPooling1D : public Layer {
 public:
  GlobalMaxPooling1D() : GlobalMaxPooling1D(GlobalPoolingOptions{}) {}
  explicit GlobalMaxPooling1D(std::string data_format, bool keepdims = false)
      : GlobalMaxPooling1D(
            GlobalPoolingOptions{.data_format = std::move(data_format), .keepdims = keepdims}) {}
  explicit GlobalMaxPooling1D(GlobalPoolingOptions options);
};

class GlobalAveragePooling2D : public Layer {
 public:
  GlobalAveragePooling2D() : GlobalAveragePooling2D(GlobalPoolingOptions{}) {}
  explicit GlobalAveragePooling2D(std::string data_format, bool keepdims = false)
      : GlobalAveragePooling2D(
            GlobalPoolingOptions{.data_format = std::move(data_format), .keepdims = keepdims}) {}
  explicit GlobalAveragePooling2D(GlobalPoolingOptions options);
};

class GlobalMaxPooling2D : public Layer {
 public:
  GlobalMaxPooling2D() : GlobalMaxPooling2D(GlobalPoolingOptions{}) {}
  explicit GlobalMaxPooling2D(std::string data_format, bool keepdims = false)
      : GlobalMaxPooling2D(
            GlobalPoolingOptions{.data_format = std::move(data_format), .keepdims = keepdims}) {}
  explicit GlobalMaxPooling2D(GlobalPoolingOptions options);
};

// (batch, ...) -> (batch,) + target_shape; one entry of target_shape may be -1 (inferred from
// the input's size). Keeps the dtype.
//   Reshape({7, 7, 64})  Reshape({-1, 2})
class Reshape : public Layer {
 public:
  explicit Reshape(std::vector<int64_t> target_shape, std::string name = "");
  const std::vector<int64_t>& target_shape() const;
};

// Applies an activation by its Keras name (activations::get): Activation("relu"). `dtype` is
// Keras' dtype argument, a policy: Activation("softmax", "", "float32") is the mixed-precision
// guide's float32 output layer.
class Activation : public Layer {
 public:
  explicit Activation(const std::string& activation, std::string name = "",
                      std::optional<mixed_precision::Policy> dtype = std::nullopt);
};

// y = x * scale + offset, in the layer's dtype (uint8 images go straight in):
// Rescaling(1.0 / 255), Rescaling(1.0 / 127.5, -1.0).
class Rescaling : public Layer {
 public:
  explicit Rescaling(double scale, double offset = 0.0, std::string name = "");
};

struct Conv1DOptions {
  int strides = 1;
  std::string padding = "valid";  // "valid", "same" or "causal", any case
  // "" or "channels_last" ((batch, steps, channels)), or "channels_first" ((batch, channels,
  // steps): tf::nn::conv2d with data_format "NCHW"; the same kernel layout).
  std::string data_format = "";
  int dilation_rate = 1;
  int groups = 1;  // kernel (kernel_size, in_channels / groups, filters), as Conv2D's groups
  std::string activation = "";
  bool use_bias = true;
  Initializer kernel_initializer = {};  // glorot_uniform
  Initializer bias_initializer = {};    // zeros
  Regularizer kernel_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};
  Constraint bias_constraint = {};
  std::vector<int64_t> input_shape = {};  // (steps, channels), builds at construction
  std::string name = "";
};

// 1-D convolution of (batch, steps, channels) inputs with a kernel (kernel_size, in_channels,
// filters), run as a 2-D convolution over a height of 1. "causal" pads the start of the steps
// so that output t sees inputs up to t only.
//   Conv1D(32, 3)  Conv1D(32, 5, 2, "same", "relu")  Conv1D(32, 3, {.padding = "causal"})
class Conv1D : public Layer {
 public:
  Conv1D(int64_t filters, int kernel_size) : Conv1D(filters, kernel_size, Conv1DOptions{}) {}
  template <class St>
  requires std::is_integral_v<St> Conv1D(int64_t filters, int kernel_size, St strides,
                                         std::string padding = "valid", std::string activation = "")
      : Conv1D(filters, kernel_size,
               Conv1DOptions{.strides = static_cast<int>(strides),
                             .padding = std::move(padding),
                             .activation = std::move(activation)}) {}
  Conv1D(int64_t filters, int kernel_size, Conv1DOptions options);
  Variable kernel() const;
  Variable bias() const;
};

struct Pooling1DOptions {
  std::optional<int> strides = std::nullopt;  // the pool size
  std::string padding = "valid";              // "valid" or "same", any case
  // "" or "channels_last" ((batch, steps, channels)), or "channels_first" ((batch, channels,
  // steps)).
  std::string data_format = "";
  std::string name = "";
};

// Pooling over windows of the steps of (batch, steps, channels) inputs; strides default to the
// pool size. "same" windows ignore the padding (as TF).
//   MaxPooling1D(2)  MaxPooling1D(3, 2, "same")  MaxPooling1D(2, {.data_format = "channels_first"})
class MaxPooling1D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit MaxPooling1D(int pool_size = 2, std::optional<int> strides = std::nullopt,
                        std::string padding = "valid", std::string name = "")
      : MaxPooling1D(pool_size, Pooling1DOptions{.strides = strides,
                                                 .padding = std::move(padding),
                                                 .name = std::move(name)}) {}
  MaxPooling1D(int pool_size, Pooling1DOptions options);
};
class AveragePooling1D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit AveragePooling1D(int pool_size = 2, std::optional<int> strides = std::nullopt,
                            std::string padding = "valid", std::string name = "")
      : AveragePooling1D(pool_size, Pooling1DOptions{.strides = strides,
                                                     .padding = std::move(padding),
                                                     .name = std::move(name)}) {}
  AveragePooling1D(int pool_size, Pooling1DOptions options);
};

struct UpSampling2DOptions {
  std::string data_format = "";  // "" or "channels_last" (NHWC), or "channels_first" (NCHW)
  std::string interpolation = "nearest";
  std::string name = "";
};

// Upsamples NHWC inputs with known height, width and channels by size.h rows and size.w columns.
// "nearest" repeats each row and column; "bilinear", "bicubic", "lanczos3", "lanczos5" and
// "area" resize to (size.h * height, size.w * width) with tf::image::resize and that method
// (no antialias), as Keras 3 (a floating output keeps the input's dtype; integer inputs give
// float32). Any other interpolation is an InvalidArgumentError naming it.
//   UpSampling2D(2)  UpSampling2D({2, 3}, "bilinear")
//   UpSampling2D(2, {.data_format = "channels_first", .interpolation = "bilinear"})
class UpSampling2D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit UpSampling2D(Size2 size = 2, std::string interpolation = "nearest",
                        std::string name = "")
      : UpSampling2D(size, UpSampling2DOptions{.interpolation = std::move(interpolation),
                                               .name = std::move(name)}) {}
  UpSampling2D(Size2 size, UpSampling2DOptions options);
};

}  // namespace tapeflow::keras::layers
