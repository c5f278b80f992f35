// Internal to keras/serialization.cpp: the options a built-in layer was made with (what Keras'
// get_config reports), read from the layer's state where only its own .cpp can see it. Each
// function returns nullopt when the layer is not of that class. Defined beside the layers
// (keras/layers_builtin.cpp, keras/layers_more.cpp, keras/layers_merge.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keras/layers.h"
#include "keras/layers_more.h"

namespace tapeflow::keras::detail::layer_options {

struct DenseConfig {
  int64_t units = 0;
  layers::DenseOptions options;
};
struct Conv2DConfig {
  int64_t filters = 0;
  Size2 kernel_size = 1;
  layers::Conv2DOptions options;
};
struct Pooling2DConfig {
  Size2 pool_size = 1, strides = 1;
  bool same = false, channels_first = false;
};
struct DropoutConfig {
  double rate = 0.0;
  std::optional<int64_t> seed;
};
struct ReLUConfig {
  std::optional<double> max_value;
  double negative_slope = 0.0, threshold = 0.0;
};
struct EmbeddingConfig {
  int64_t input_dim = 0, output_dim = 0;
  Initializer initializer;  // undefined: Keras' default
  Regularizer regularizer;
  bool mask_zero = false;
  Constraint constraint;
};

// keras/layers_builtin.cpp
std::optional<DenseConfig> dense(const LayerImpl& layer);
std::optional<Conv2DConfig> conv2d(const LayerImpl& layer);
std::optional<Pooling2DConfig> pooling2d(const LayerImpl& layer);  // Max- and AveragePooling2D
std::optional<bool> flatten_channels_first(const LayerImpl& layer);
std::optional<DropoutConfig> dropout(const LayerImpl& layer);
std::optional<layers::BatchNormalizationOptions> batch_normalization(const LayerImpl& layer);
std::optional<ReLUConfig> relu(const LayerImpl& layer);
std::optional<int> softmax_axis(const LayerImpl& layer);
// keras/layers_more.cpp
std::optional<std::string> activation(const LayerImpl& layer);
std::optional<EmbeddingConfig> embedding(const LayerImpl& layer);
std::optional<layers::LayerNormalizationOptions> layer_normalization(const LayerImpl& layer);
std::optional<std::vector<int64_t>> reshape_target(const LayerImpl& layer);
// keras/layers_merge.cpp
std::optional<int> concatenate_axis(const LayerImpl& layer);
struct DotConfig {
  std::pair<int, int> axes;
  bool normalize = false;
};
std::optional<DotConfig> dot(const LayerImpl& layer);

}  // namespace tapeflow::keras::detail::layer_options
