// Depthwise and separable convolution layers (Keras 3.15's DepthwiseConv2D, SeparableConv2D,
// DepthwiseConv1D, SeparableConv1D), channels_last (or, with data_format "channels_first", the
// channels at axis 1, transposed around the same computation), through tf::nn::depthwise_conv2d
// (the 1-D layers run it over a height of 1). Grouped convolution is Conv2DOptions::groups and
// Conv1DOptions::groups (keras/layers.h, keras/layers_more.h). See docs/keras.md.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "keras/layers.h"

namespace tapeflow::keras::layers {

struct DepthwiseConv2DOptions {
  Size2 strides = 1;
  std::string padding = "valid";  // "valid" or "same", any case
  int depth_multiplier = 1;
  std::string data_format = "";  // "" or "channels_last", or "channels_first" (channels at axis 1)
  Size2 dilation_rate = 1;
  std::string activation = "";
  bool use_bias = true;
  Initializer depthwise_initializer = {};  // glorot_uniform
  Initializer bias_initializer = {};       // zeros
  Regularizer depthwise_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint depthwise_constraint = {};
  Constraint bias_constraint = {};
  std::vector<int64_t> input_shape = {};  // (H, W, C), builds at construction
  std::string name = "";
};

// Each input channel convolved with its own depth_multiplier filters: kernel
// (kh, kw, in_channels, depth_multiplier) (Keras 3 names it "kernel"), bias
// (in_channels * depth_multiplier,); output channel c * depth_multiplier + m.
//   DepthwiseConv2D(3)  DepthwiseConv2D(3, 2, "same")
//   DepthwiseConv2D({3, 3}, {.padding = "same", .depth_multiplier = 2, .activation = "relu"})
class DepthwiseConv2D : public Layer {
 public:
  explicit DepthwiseConv2D(Size2 kernel_size)
      : DepthwiseConv2D(kernel_size, DepthwiseConv2DOptions{}) {}
  template <class St>
  requires std::is_convertible_v<St, Size2> DepthwiseConv2D(Size2 kernel_size, St&& strides,
                                                            std::string padding = "valid",
                                                            int depth_multiplier = 1,
                                                            std::string activation = "")
      : DepthwiseConv2D(kernel_size,
                        DepthwiseConv2DOptions{.strides = Size2(std::forward<St>(strides)),
                                               .padding = std::move(padding),
                                               .depth_multiplier = depth_multiplier,
                                               .activation = std::move(activation)}) {}
  DepthwiseConv2D(Size2 kernel_size, DepthwiseConv2DOptions options);
  Variable kernel() const;
  Variable bias() const;
};

struct SeparableConv2DOptions {
  Size2 strides = 1;
  std::string padding = "valid";  // "valid" or "same", any case
  std::string data_format = "";   // "" or "channels_last", or "channels_first"
  Size2 dilation_rate = 1;
  int depth_multiplier = 1;
  std::string activation = "";
  bool use_bias = true;
  Initializer depthwise_initializer = {};  // glorot_uniform
  Initializer pointwise_initializer = {};  // glorot_uniform
  Initializer bias_initializer = {};       // zeros
  Regularizer depthwise_regularizer = {};
  Regularizer pointwise_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint depthwise_constraint = {};
  Constraint pointwise_constraint = {};
  Constraint bias_constraint = {};
  std::vector<int64_t> input_shape = {};  // (H, W, C), builds at construction
  std::string name = "";
};

// A depthwise convolution, then a 1x1 convolution to `filters` channels: depthwise_kernel
// (kh, kw, in_channels, depth_multiplier), pointwise_kernel (1, 1, in * depth_multiplier,
// filters), bias (filters,).
//   SeparableConv2D(64, 3)  SeparableConv2D(64, 3, 2, "same", "relu")
class SeparableConv2D : public Layer {
 public:
  SeparableConv2D(int64_t filters, Size2 kernel_size)
      : SeparableConv2D(filters, kernel_size, SeparableConv2DOptions{}) {}
  template <class St>
  requires std::is_convertible_v<St, Size2> SeparableConv2D(int64_t filters, Size2 kernel_size,
                                                            St&& strides,
                                                            std::string padding = "valid",
                                                            std::string activation = "")
      : SeparableConv2D(filters, kernel_size,
                        SeparableConv2DOptions{.strides = Size2(std::forward<St>(strides)),
                                               .padding = std::move(padding),
                                               .activation = std::move(activation)}) {}
  SeparableConv2D(int64_t filters, Size2 kernel_size, SeparableConv2DOptions options);
  Variable depthwise_kernel() const;
  Variable pointwise_kernel() const;
  Variable bias() const;
};

struct DepthwiseConv1DOptions {
  int strides = 1;
  std::string padding = "valid";  // "valid" or "same", any case
  int depth_multiplier = 1;
  std::string data_format = "";  // "" or "channels_last", or "channels_first"
  int dilation_rate = 1;
  std::string activation = "";
  bool use_bias = true;
  Initializer depthwise_initializer = {};
  Initializer bias_initializer = {};
  Regularizer depthwise_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint depthwise_constraint = {};
  Constraint bias_constraint = {};
  std::vector<int64_t> input_shape = {};  // (steps, channels), builds at construction
  std::string name = "";
};

// DepthwiseConv2D over (batch, steps, channels): kernel (k, in_channels, depth_multiplier).
class DepthwiseConv1D : public Layer {
 public:
  explicit DepthwiseConv1D(int kernel_size)
      : DepthwiseConv1D(kernel_size, DepthwiseConv1DOptions{}) {}
  DepthwiseConv1D(int kernel_size, DepthwiseConv1DOptions options);
  Variable kernel() const;
  Variable bias() const;
};

struct SeparableConv1DOptions {
  int strides = 1;
  std::string padding = "valid";  // "valid" or "same", any case
  std::string data_format = "";   // "" or "channels_last", or "channels_first"
  int dilation_rate = 1;
  int depth_multiplier = 1;
  std::string activation = "";
  bool use_bias = true;
  Initializer depthwise_initializer = {};
  Initializer pointwise_initializer = {};
  Initializer bias_initializer = {};
  Regularizer depthwise_regularizer = {};
  Regularizer pointwise_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint depthwise_constraint = {};
  Constraint pointwise_constraint = {};
  Constraint bias_constraint = {};
  std::vector<int64_t> input_shape = {};  // (steps, channels), builds at construction
  std::string name = "";
};

// SeparableConv2D over (batch, steps, channels): depthwise_kernel (k, in, depth_multiplier),
// pointwise_kernel (1, in * depth_multiplier, filters), bias (filters,).
class SeparableConv1D : public Layer {
 public:
  SeparableConv1D(int64_t filters, int kernel_size)
      : SeparableConv1D(filters, kernel_size, SeparableConv1DOptions{}) {}
  SeparableConv1D(int64_t filters, int kernel_size, SeparableConv1DOptions options);
  Variable depthwise_kernel() const;
  Variable pointwise_kernel() const;
  Variable bias() const;
};

}  // namespace tapeflow::keras::layers
