// Internal to keras/serialization_conv.cpp: the options the convolution, pooling, padding,
// cropping, upsampling, activation, noise and normalization layers were made with (what Keras'
// get_config reports), read from the layers' state where only their own .cpp can see it. Each
// function returns nullopt when the layer is not of that class. Defined beside the layers (the
// file named above each group).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "keras/layers.h"
#include "keras/layers_misc.h"

namespace tapeflow::keras::detail::layer_options {

// A convolution of any rank and kind, its sizes one per spatial dimension. The depthwise and
// separable layers keep their depthwise kernel's options in kernel_*.
struct ConvConfig {
  int64_t filters = 0;  // not for DepthwiseConv1D/2D
  std::vector<int> kernel_size, strides, dilation_rate;
  std::optional<std::vector<int>> output_padding;  // the transposed convolutions
  std::string padding = "valid";                   // lower case
  bool channels_first = false;
  int groups = 1;            // Conv1D/2D/3D
  int depth_multiplier = 1;  // depthwise and separable
  std::string activation;    // "": none
  bool use_bias = true;
  Initializer kernel_initializer, pointwise_initializer, bias_initializer;  // undefined: default
  Regularizer kernel_regularizer, pointwise_regularizer, bias_regularizer;
  Constraint kernel_constraint, pointwise_constraint, bias_constraint;
};
// Max- and AveragePooling1D/3D.
struct PoolingConfig {
  std::vector<int> pool_size, strides;
  bool same = false, channels_first = false;
};
struct UpSampling2DConfig {
  Size2 size = 1;
  std::string interpolation;
  bool channels_first = false;
};
struct GlobalPoolingConfig {
  bool channels_first = false, keepdims = false;
};
// ZeroPadding and Cropping: {begin, end} per spatial dimension.
using SidesConfig = std::vector<std::array<int64_t, 2>>;
struct PadCropConfig {
  SidesConfig sides;
  bool channels_first = false;
};
struct UpSampling3DConfig {
  std::array<int, 3> size{};
  bool channels_first = false;
};
// SpatialDropout1D/2D, GaussianDropout (rate), GaussianNoise (stddev).
struct NoiseConfig {
  double amount = 0.0;
  std::optional<int64_t> seed;
  bool channels_first = false;  // SpatialDropout2D/3D
};
struct PReLUConfig {
  Initializer initializer;  // undefined: zeros
  Regularizer regularizer;
  std::vector<int> shared_axes;
  Constraint constraint;
};
struct AlphaDropoutConfig {
  double rate = 0.0;
  std::vector<int64_t> noise_shape;  // 0: the input's size (Keras' None); empty: none
  std::optional<int64_t> seed;
};
struct AdaptivePoolingConfig {
  std::vector<int64_t> output_size;  // per spatial dimension
  bool channels_first = false;
};
struct RMSNormalizationConfig {
  std::vector<int> axis;
  double epsilon = 1e-6;
};

// keras/layers_builtin.cpp
std::optional<ConvConfig> conv2d_transpose(const LayerImpl& layer);
// keras/layers_more.cpp
std::optional<ConvConfig> conv1d(const LayerImpl& layer);
std::optional<PoolingConfig> pooling1d(const LayerImpl& layer);
std::optional<GlobalPoolingConfig> global_pooling(const LayerImpl& layer);  // 1-D and 2-D
std::optional<UpSampling2DConfig> up_sampling2d(const LayerImpl& layer);
std::optional<std::array<double, 2>> rescaling(const LayerImpl& layer);  // scale, offset
// keras/layers_kerasmore.cpp
std::optional<ConvConfig> conv1d_transpose(const LayerImpl& layer);
// keras/layers_conv.cpp: DepthwiseConv1D/2D and SeparableConv1D/2D
std::optional<ConvConfig> depthwise_conv(const LayerImpl& layer);
// keras/layers_misc.cpp
std::optional<PadCropConfig> pad_crop(const LayerImpl& layer);  // 1-D and 2-D
std::optional<double> leaky_relu_slope(const LayerImpl& layer);
std::optional<double> elu_alpha(const LayerImpl& layer);
std::optional<PReLUConfig> prelu(const LayerImpl& layer);
std::optional<std::vector<int>> permute_dims(const LayerImpl& layer);
std::optional<int64_t> repeat_vector_n(const LayerImpl& layer);
std::optional<int64_t> up_sampling1d(const LayerImpl& layer);
std::optional<NoiseConfig> noise(const LayerImpl& layer);
std::optional<std::array<double, 2>> activity_regularization(const LayerImpl& layer);  // l1, l2
std::optional<layers::GroupNormalizationOptions> group_normalization(const LayerImpl& layer);
std::optional<std::vector<int>> unit_normalization_axis(const LayerImpl& layer);
// keras/layers_extra.cpp
// AdaptiveAverage/MaxPooling1D/2D/3D.
std::optional<AdaptivePoolingConfig> adaptive_pooling(const LayerImpl& layer);
std::optional<RMSNormalizationConfig> rms_normalization(const LayerImpl& layer);
std::optional<AlphaDropoutConfig> alpha_dropout(const LayerImpl& layer);
// keras/layers_conv3d.cpp
std::optional<ConvConfig> conv3d(const LayerImpl& layer);
std::optional<ConvConfig> conv3d_transpose(const LayerImpl& layer);
std::optional<PoolingConfig> pooling3d(const LayerImpl& layer);
std::optional<GlobalPoolingConfig> global_pooling3d(const LayerImpl& layer);
std::optional<UpSampling3DConfig> up_sampling3d(const LayerImpl& layer);
std::optional<PadCropConfig> pad_crop3d(const LayerImpl& layer);

}  // namespace tapeflow::keras::detail::layer_options
