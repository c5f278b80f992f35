// data_format "channels_first" on every Keras layer that has the argument (keras/data_format.h):
// each layer computes on a channels_first input what its channels_last twin with the same
// weights computes on the transposed input (values, output shapes and input gradients, on every
// device), Keras 3.15's JSON of channels_first models loads and predicts as Keras, the configs
// round trip, and mistakes are errors naming the layer and the layout. The JSON literals and
// predictions come from Keras 3.15.1 (TensorFlow 2.21 backend, CPU): the models built below in
// kCF2DJson, kCF1DJson and kCF3DJson, weights set by set_formula_weights' formula, inputs
// cos(0.1 * arange(n)) reshaped.
#include <algorithm>
#include <cmath>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/layers.h"
#include "keras/layers_conv.h"
#include "keras/layers_conv3d.h"
#include "keras/layers_extra.h"
#include "keras/layers_kerasmore.h"
#include "keras/layers_misc.h"
#include "keras/layers_more.h"
#include "keras/layers_rnn_cells.h"
#include "keras/losses.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/serialization_json.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "serialization_testing.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
using K::Size2;
using K::saving::Config;
using tf::testing::check_close;
using tf::testing::KerasModel;
using tf::testing::require_error;
using tf::testing::set_formula_weights;

namespace {

const std::string kFirst = "channels_first";

// (batch, channels, d1, ...) -> (batch, d1, ..., channels) and back; rank < 3 unchanged.
std::vector<int> last_perm(int r) {
  std::vector<int> p(static_cast<size_t>(r));
  std::iota(p.begin(), p.end(), 0);
  std::rotate(p.begin() + 1, p.begin() + 2, p.end());
  return p;
}
std::vector<int> first_perm(int r) {
  std::vector<int> p(static_cast<size_t>(r));
  std::iota(p.begin(), p.end(), 0);
  std::rotate(p.begin() + 1, p.end() - 1, p.end());
  return p;
}
tf::Tensor to_last(const tf::Tensor& x) {
  return x.rank() < 3 ? x : tf::transpose(x, last_perm(x.rank()));
}
tf::Tensor to_first(const tf::Tensor& x) {
  return x.rank() < 3 ? x : tf::transpose(x, first_perm(x.rank()));
}
tf::TensorShape shape_to_last(const tf::TensorShape& s) {
  if (s.rank() < 3) return s;
  std::vector<int64_t> d = s.dims();
  std::rotate(d.begin() + 1, d.begin() + 2, d.end());
  return tf::TensorShape(d);
}
tf::TensorShape shape_to_first(const tf::TensorShape& s) {
  if (s.rank() < 3) return s;
  std::vector<int64_t> d = s.dims();
  std::rotate(d.begin() + 1, d.end() - 1, d.end());
  return tf::TensorShape(d);
}
tf::TensorShape unknown_batch(tf::TensorShape s) {
  s[0] = tf::None;
  return s;
}

// A channels_first layer, its channels_last twin and a channels_first input shape.
struct Twin {
  std::string what;
  std::function<K::Layer()> first, last;
  std::vector<int64_t> input;
};

std::vector<Twin> twins() {
  using S1 = L::Sides1D;
  using S2 = L::Sides2D;
  using S3 = L::Sides3D;
  return {
      {"Conv2D strided same relu",
       [] {
         return L::Conv2D(
             4, 3, {.strides = 2, .padding = "same", .data_format = kFirst, .activation = "relu"});
       },
       [] { return L::Conv2D(4, 3, 2, "same", "relu"); },
       {2, 3, 7, 8}},
      {"Conv2D grouped dilated",
       [] {
         return L::Conv2D(4, {2, 3}, {.data_format = kFirst, .dilation_rate = 2, .groups = 2});
       },
       [] {
         return L::Conv2D(4, {2, 3}, {.dilation_rate = 2, .groups = 2});
       },
       {2, 4, 7, 8}},
      {"Conv2DTranspose",
       [] {
         return L::Conv2DTranspose(
             3, 3, {.strides = 2, .padding = "same", .output_padding = 1, .data_format = kFirst});
       },
       [] {
         return L::Conv2DTranspose(3, 3, {.strides = 2, .padding = "same", .output_padding = 1});
       },
       {2, 3, 5, 6}},
      {"MaxPooling2D",
       [] { return L::MaxPooling2D(2, {.data_format = kFirst}); },
       [] { return L::MaxPooling2D(2); },
       {2, 3, 7, 8}},
      {"AveragePooling2D same",
       [] {
         return L::AveragePooling2D(3, {.strides = 2, .padding = "same", .data_format = kFirst});
       },
       [] { return L::AveragePooling2D(3, 2, "same"); },
       {2, 3, 7, 8}},
      {"Flatten",
       [] { return L::Flatten({.data_format = kFirst}); },
       [] { return L::Flatten(); },
       {2, 3, 4, 5}},
      {"DepthwiseConv2D",
       [] {
         return L::DepthwiseConv2D(
             3, {.padding = "same", .depth_multiplier = 2, .data_format = kFirst});
       },
       [] { return L::DepthwiseConv2D(3, {.padding = "same", .depth_multiplier = 2}); },
       {2, 3, 6, 7}},
      {"SeparableConv2D",
       [] { return L::SeparableConv2D(4, 3, {.strides = 2, .data_format = kFirst}); },
       [] { return L::SeparableConv2D(4, 3, {.strides = 2}); },
       {2, 3, 7, 8}},
      {"DepthwiseConv1D",
       [] { return L::DepthwiseConv1D(3, {.data_format = kFirst}); },
       [] { return L::DepthwiseConv1D(3); },
       {2, 3, 9}},
      {"SeparableConv1D",
       [] { return L::SeparableConv1D(2, 3, {.data_format = kFirst, .dilation_rate = 2}); },
       [] { return L::SeparableConv1D(2, 3, {.dilation_rate = 2}); },
       {2, 3, 9}},
      {"Conv1D causal dilated",
       [] {
         return L::Conv1D(3, 3, {.padding = "causal", .data_format = kFirst, .dilation_rate = 2});
       },
       [] { return L::Conv1D(3, 3, {.padding = "causal", .dilation_rate = 2}); },
       {2, 4, 9}},
      {"Conv1D strided grouped",
       [] { return L::Conv1D(4, 2, {.strides = 2, .data_format = kFirst, .groups = 2}); },
       [] { return L::Conv1D(4, 2, {.strides = 2, .groups = 2}); },
       {2, 4, 9}},
      {"Conv1DTranspose",
       [] { return L::Conv1DTranspose(3, 3, {.strides = 2, .data_format = kFirst}); },
       [] { return L::Conv1DTranspose(3, 3, {.strides = 2}); },
       {2, 4, 6}},
      {"MaxPooling1D",
       [] { return L::MaxPooling1D(2, {.data_format = kFirst}); },
       [] { return L::MaxPooling1D(2); },
       {2, 3, 9}},
      {"AveragePooling1D same",
       [] {
         return L::AveragePooling1D(3, {.strides = 1, .padding = "same", .data_format = kFirst});
       },
       [] { return L::AveragePooling1D(3, 1, "same"); },
       {2, 3, 9}},
      {"UpSampling2D nearest",
       [] { return L::UpSampling2D(2, {.data_format = kFirst}); },
       [] { return L::UpSampling2D(2); },
       {2, 3, 4, 5}},
      {"UpSampling2D bilinear",
       [] {
         return L::UpSampling2D({2, 3}, {.data_format = kFirst, .interpolation = "bilinear"});
       },
       [] {
         return L::UpSampling2D({2, 3}, "bilinear");
       },
       {2, 3, 4, 5}},
      {"UpSampling3D",
       [] {
         return L::UpSampling3D({1, 2, 2}, {.data_format = kFirst});
       },
       [] {
         return L::UpSampling3D({1, 2, 2});
       },
       {2, 3, 2, 3, 4}},
      {"ZeroPadding1D",
       [] { return L::ZeroPadding1D(S1(1, 2), {.data_format = kFirst}); },
       [] { return L::ZeroPadding1D(S1(1, 2)); },
       {2, 3, 5}},
      {"ZeroPadding2D",
       [] { return L::ZeroPadding2D(S2(S1(1, 0), S1(2, 1)), {.data_format = kFirst}); },
       [] { return L::ZeroPadding2D(S2(S1(1, 0), S1(2, 1))); },
       {2, 3, 4, 5}},
      {"Cropping2D",
       [] { return L::Cropping2D(S2(1, 2), {.data_format = kFirst}); },
       [] { return L::Cropping2D(S2(1, 2)); },
       {2, 3, 6, 7}},
      {"ZeroPadding3D",
       [] { return L::ZeroPadding3D(S3(1, 0, 2), {.data_format = kFirst}); },
       [] { return L::ZeroPadding3D(S3(1, 0, 2)); },
       {2, 3, 2, 3, 4}},
      {"Cropping3D",
       [] { return L::Cropping3D(S3(S1(1, 0), S1(0, 1), 1), {.data_format = kFirst}); },
       [] { return L::Cropping3D(S3(S1(1, 0), S1(0, 1), 1)); },
       {2, 3, 3, 4, 5}},
      {"MaxPooling3D",
       [] { return L::MaxPooling3D(2, {.data_format = kFirst}); },
       [] { return L::MaxPooling3D(2); },
       {2, 3, 4, 4, 5}},
      {"AveragePooling3D same",
       [] {
         return L::AveragePooling3D(L::Size3(1, 2, 2), {.padding = "same", .data_format = kFirst});
       },
       [] { return L::AveragePooling3D(L::Size3(1, 2, 2), std::nullopt, "same"); },
       {2, 3, 4, 5, 5}},
      {"AdaptiveAveragePooling1D",
       [] { return L::AdaptiveAveragePooling1D(3, {.data_format = kFirst}); },
       [] { return L::AdaptiveAveragePooling1D(3); },
       {2, 3, 8}},
      {"AdaptiveMaxPooling2D",
       [] {
         return L::AdaptiveMaxPooling2D({2, 3}, {.data_format = kFirst});
       },
       [] {
         return L::AdaptiveMaxPooling2D({2, 3});
       },
       {2, 3, 5, 7}},
      {"AdaptiveAveragePooling3D",
       [] {
         return L::AdaptiveAveragePooling3D({1, 2, 2}, {.data_format = kFirst});
       },
       [] {
         return L::AdaptiveAveragePooling3D({1, 2, 2});
       },
       {2, 3, 3, 4, 5}},
      {"SpatialDropout2D (inference)",
       [] { return L::SpatialDropout2D(0.5, {.data_format = kFirst}); },
       [] { return L::SpatialDropout2D(0.5); },
       {2, 3, 4, 5}},
  };
}

constexpr const char* kCF2DJson = R"json(
{"module": "keras", "class_name": "Sequential", "config": {"name": "cf2d", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "layers": [{"module": "keras.layers", "class_name": "InputLayer",
"config": {"batch_shape": [null, 3, 8, 8], "dtype": "float32", "sparse": false, "ragged": false,
"name": "input_layer", "optional": false}, "registered_name": null}, {"module": "keras.layers",
"class_name": "Conv2D", "config": {"name": "c2", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "filters":
4, "kernel_size": [3, 3], "strides": [1, 1], "padding": "same", "data_format": "channels_first",
"dilation_rate": [1, 1], "groups": 1, "activation": "linear", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config":
{"seed": null, "input_axes": null, "output_axes": null}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null,
"activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null},
"registered_name": null, "build_config": {"input_shape": [null, 3, 8, 8]}}, {"module":
"keras.layers", "class_name": "MaxPooling2D", "config": {"name": "mp", "trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name":
null}, "pool_size": [2, 2], "padding": "valid", "strides": [2, 2], "data_format":
"channels_first"}, "registered_name": null}, {"module": "keras.layers", "class_name":
"DepthwiseConv2D", "config": {"name": "dw", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"depth_multiplier": 2, "kernel_size": [3, 3], "strides": [1, 1], "padding": "same", "data_format":
"channels_first", "dilation_rate": [1, 1], "activation": "linear", "use_bias": true,
"depthwise_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config":
{"seed": null, "input_axes": null, "output_axes": null}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "depthwise_regularizer": null, "bias_regularizer": null,
"activity_regularizer": null, "depthwise_constraint": null, "bias_constraint": null},
"registered_name": null, "build_config": {"input_shape": [null, 4, 4, 4]}}, {"module":
"keras.layers", "class_name": "SeparableConv2D", "config": {"name": "sep", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "depth_multiplier": 1, "filters": 3, "kernel_size": [3, 3], "strides":
[1, 1], "padding": "same", "data_format": "channels_first", "dilation_rate": [1, 1], "activation":
"linear", "use_bias": true, "depthwise_initializer": {"module": "keras.initializers",
"class_name": "GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "pointwise_initializer": {"module": "keras.initializers", "class_name":
"GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "depthwise_regularizer": null,
"pointwise_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"depthwise_constraint": null, "pointwise_constraint": null, "bias_constraint": null},
"registered_name": null, "build_config": {"input_shape": [null, 8, 4, 4]}}, {"module":
"keras.layers", "class_name": "ZeroPadding2D", "config": {"name": "zp", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "padding": [[1, 1], [1, 1]], "data_format": "channels_first"},
"registered_name": null, "build_config": {"input_shape": [null, 3, 4, 4]}}, {"module":
"keras.layers", "class_name": "UpSampling2D", "config": {"name": "up", "trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name":
null}, "size": [2, 2], "data_format": "channels_first", "interpolation": "nearest"},
"registered_name": null, "build_config": {"input_shape": [null, 3, 6, 6]}}, {"module":
"keras.layers", "class_name": "Cropping2D", "config": {"name": "cr", "trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name":
null}, "cropping": [[1, 0], [0, 2]], "data_format": "channels_first"}, "registered_name": null,
"build_config": {"input_shape": [null, 3, 12, 12]}}, {"module": "keras.layers", "class_name":
"AveragePooling2D", "config": {"name": "ap", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "pool_size":
[2, 2], "padding": "valid", "strides": [2, 2], "data_format": "channels_first"},
"registered_name": null}, {"module": "keras.layers", "class_name": "Conv2DTranspose", "config":
{"name": "ct", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "filters": 2, "kernel_size": [3, 3],
"strides": [2, 2], "padding": "same", "output_padding": null, "data_format": "channels_first",
"dilation_rate": [1, 1], "activation": "linear", "use_bias": true, "kernel_initializer":
{"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null,
"input_axes": null, "output_axes": null}, "registered_name": null}, "bias_initializer": {"module":
"keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "bias_constraint": null}, "registered_name": null, "build_config":
{"input_shape": [null, 3, 5, 5]}}, {"module": "keras.layers", "class_name":
"AdaptiveMaxPooling2D", "config": {"name": "am", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"output_size": [3, 2], "data_format": "channels_first"}, "registered_name": null, "build_config":
{"input_shape": [null, 2, 10, 10]}}, {"module": "keras.layers", "class_name": "Flatten", "config":
{"name": "fl", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_first"},
"registered_name": null, "build_config": {"input_shape": [null, 2, 3, 2]}}, {"module":
"keras.layers", "class_name": "Dense", "config": {"name": "d", "trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name":
null}, "units": 5, "activation": "linear", "use_bias": true, "kernel_initializer": {"module":
"keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null, "input_axes": null,
"output_axes": null}, "registered_name": null}, "bias_initializer": {"module":
"keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null,
"bias_constraint": null, "quantization_config": null}, "registered_name": null, "build_config":
{"input_shape": [null, 12]}}], "build_input_shape": [null, 3, 8, 8]}, "registered_name": null,
"build_config": {"input_shape": [null, 3, 8, 8]}, "compile_config": {}}
)json";
const std::vector<double> kCF2DPred = {-0.546668291, -0.215996623, 0.143909216,  0.484337568,
                                       0.75921315,   -0.655229568, -0.257041574, 0.175935835,
                                       0.585101008,  0.91507566};
const std::vector<std::vector<int64_t>> kCF2DShapes = {
    {3, 3, 3, 4}, {4},          {3, 3, 4, 2}, {8},     {3, 3, 8, 1}, {1, 1, 8, 3},
    {3},          {3, 3, 2, 3}, {2},          {12, 5}, {5}};
constexpr const char* kCF1DJson = R"json(
{"module": "keras", "class_name": "Sequential", "config": {"name": "cf1d", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "layers": [{"module": "keras.layers", "class_name": "InputLayer",
"config": {"batch_shape": [null, 4, 10], "dtype": "float32", "sparse": false, "ragged": false,
"name": "input_layer_1", "optional": false}, "registered_name": null}, {"module": "keras.layers",
"class_name": "Conv1D", "config": {"name": "c1", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "filters":
3, "kernel_size": [3], "strides": [1], "padding": "causal", "data_format": "channels_first",
"dilation_rate": [1], "groups": 1, "activation": "linear", "use_bias": true, "kernel_initializer":
{"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null,
"input_axes": null, "output_axes": null}, "registered_name": null}, "bias_initializer": {"module":
"keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "bias_constraint": null}, "registered_name": null, "build_config":
{"input_shape": [null, 4, 10]}}, {"module": "keras.layers", "class_name": "MaxPooling1D",
"config": {"name": "mp1", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "pool_size": [2],
"padding": "valid", "strides": [2], "data_format": "channels_first"}, "registered_name": null},
{"module": "keras.layers", "class_name": "ZeroPadding1D", "config": {"name": "zp1", "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "padding": [1, 2], "data_format": "channels_first"}, "registered_name":
null, "build_config": {"input_shape": [null, 3, 5]}}, {"module": "keras.layers", "class_name":
"Conv1DTranspose", "config": {"name": "ct1", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "filters":
2, "kernel_size": [3], "strides": [2], "padding": "valid", "output_padding": null, "data_format":
"channels_first", "dilation_rate": [1], "activation": "linear", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config":
{"seed": null, "input_axes": null, "output_axes": null}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null,
"activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null},
"registered_name": null, "build_config": {"input_shape": [null, 3, 8]}}, {"module":
"keras.layers", "class_name": "SeparableConv1D", "config": {"name": "sep1", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "depth_multiplier": 1, "filters": 3, "kernel_size": [2], "strides": [1],
"padding": "valid", "data_format": "channels_first", "dilation_rate": [1], "activation": "linear",
"use_bias": true, "depthwise_initializer": {"module": "keras.initializers", "class_name":
"GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "pointwise_initializer": {"module": "keras.initializers", "class_name":
"GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "depthwise_regularizer": null,
"pointwise_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"depthwise_constraint": null, "pointwise_constraint": null, "bias_constraint": null},
"registered_name": null, "build_config": {"input_shape": [null, 2, 17]}}, {"module":
"keras.layers", "class_name": "DepthwiseConv1D", "config": {"name": "dw1", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "depth_multiplier": 1, "kernel_size": [2], "strides": [1], "padding":
"valid", "data_format": "channels_first", "dilation_rate": [1], "activation": "linear",
"use_bias": true, "depthwise_initializer": {"module": "keras.initializers", "class_name":
"GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "depthwise_regularizer": null,
"bias_regularizer": null, "activity_regularizer": null, "depthwise_constraint": null,
"bias_constraint": null}, "registered_name": null, "build_config": {"input_shape": [null, 3,
16]}}, {"module": "keras.layers", "class_name": "AveragePooling1D", "config": {"name": "ap1",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}, "pool_size": [2], "padding": "same", "strides": [2],
"data_format": "channels_first"}, "registered_name": null}, {"module": "keras.layers",
"class_name": "AdaptiveAveragePooling1D", "config": {"name": "aa1", "trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name":
null}, "output_size": [3], "data_format": "channels_first"}, "registered_name": null,
"build_config": {"input_shape": [null, 3, 8]}}, {"module": "keras.layers", "class_name":
"Flatten", "config": {"name": "fl1", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "data_format":
"channels_first"}, "registered_name": null, "build_config": {"input_shape": [null, 3, 3]}}],
"build_input_shape": [null, 4, 10]}, "registered_name": null, "build_config": {"input_shape":
[null, 4, 10]}, "compile_config": {}}
)json";
const std::vector<double> kCF1DPred = {
    -0.528412819, -0.775680482, -0.866434276, -0.529691041, -0.774789691, -0.862953544,
    -0.527404606, -0.774144828, -0.865024567, -0.530581176, -0.783407986, -0.878908694,
    -0.522257924, -0.761693239, -0.844394803, -0.526141882, -0.766431808, -0.849859536};
const std::vector<std::vector<int64_t>> kCF1DShapes = {{3, 4, 3}, {3}, {3, 2, 3}, {2}, {2, 2, 1},
                                                       {1, 2, 3}, {3}, {2, 3, 1}, {3}};
constexpr const char* kCF3DJson = R"json(
{"module": "keras", "class_name": "Sequential", "config": {"name": "cf3d", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "layers": [{"module": "keras.layers", "class_name": "InputLayer",
"config": {"batch_shape": [null, 2, 4, 6, 6], "dtype": "float32", "sparse": false, "ragged":
false, "name": "input_layer_2", "optional": false}, "registered_name": null}, {"module":
"keras.layers", "class_name": "Conv3D", "config": {"name": "c3", "trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name":
null}, "filters": 3, "kernel_size": [2, 2, 2], "strides": [1, 1, 1], "padding": "same",
"data_format": "channels_first", "dilation_rate": [1, 1, 1], "groups": 1, "activation": "linear",
"use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name":
"GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer":
null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null},
"registered_name": null, "build_config": {"input_shape": [null, 2, 4, 6, 6]}}, {"module":
"keras.layers", "class_name": "MaxPooling3D", "config": {"name": "mp3", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "pool_size": [2, 2, 2], "padding": "valid", "strides": [2, 2, 2],
"data_format": "channels_first"}, "registered_name": null}, {"module": "keras.layers",
"class_name": "ZeroPadding3D", "config": {"name": "zp3", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"padding": [[1, 1], [0, 0], [1, 1]], "data_format": "channels_first"}, "registered_name": null,
"build_config": {"input_shape": [null, 3, 2, 3, 3]}}, {"module": "keras.layers", "class_name":
"UpSampling3D", "config": {"name": "up3", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "size": [1,
2, 1], "data_format": "channels_first"}, "registered_name": null, "build_config": {"input_shape":
[null, 3, 4, 3, 5]}}, {"module": "keras.layers", "class_name": "Cropping3D", "config": {"name":
"cr3", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config":
{"name": "float32"}, "registered_name": null}, "cropping": [[0, 1], [1, 1], [0, 0]],
"data_format": "channels_first"}, "registered_name": null, "build_config": {"input_shape": [null,
3, 4, 6, 5]}}, {"module": "keras.layers", "class_name": "AveragePooling3D", "config": {"name":
"ap3", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config":
{"name": "float32"}, "registered_name": null}, "pool_size": [1, 2, 2], "padding": "same",
"strides": [1, 2, 2], "data_format": "channels_first"}, "registered_name": null}, {"module":
"keras.layers", "class_name": "Flatten", "config": {"name": "fl3", "trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name":
null}, "data_format": "channels_first"}, "registered_name": null, "build_config": {"input_shape":
[null, 3, 3, 2, 3]}}], "build_input_shape": [null, 2, 4, 6, 6]}, "registered_name": null,
"build_config": {"input_shape": [null, 2, 4, 6, 6]}, "compile_config": {}}
)json";
const std::vector<double> kCF3DPred = {
    0,           0,           0,           0,           0,           0,           0, 0, 0,
    0,           0,           0,           0,           0,           0,           0, 0, 0,
    0.43510592,  0.518240452, 0.538161874, 0.912952781, 0.982254505, 1.0480746,   0, 0, 0,
    0.336692154, 0.420901954, 0.487793475, 0.883366287, 0.837560415, 0.878643572, 0, 0, 0,
    0.375235021, 0.384322017, 0.384158492, 0.889413178, 0.822912216, 0.785759866, 0, 0, 0,
    0.429379821, 0.389521033, 0.35907802,  1.02943444,  0.960170031, 0.903824747, 0, 0, 0,
    0,           0,           0,           0,           0,           0,           0, 0, 0,
    0,           0,           0,           0,           0,           0,           0, 0, 0,
    0.429947466, 0.513156176, 0.537610769, 0.941903174, 0.989184976, 1.03565109,  0, 0, 0,
    0.453455597, 0.469828963, 0.472444743, 1.050354,    1.02953196,  1.02857196,  0, 0, 0,
    0.400102705, 0.4416008,   0.440484583, 0.772816658, 0.87508285,  0.872807503, 0, 0, 0,
    0.420468301, 0.394977927, 0.357692599, 0.874595106, 0.853966117, 0.777644515, 0, 0, 0};
const std::vector<std::vector<int64_t>> kCF3DShapes = {{2, 2, 2, 2, 3}, {3}};

// The Keras 3.15 models of the reference (see the file comment).
std::vector<KerasModel> keras_models() {
  return {{"cf2d", kCF2DJson, {2, 3, 8, 8}, &kCF2DPred, &kCF2DShapes},
          {"cf1d", kCF1DJson, {2, 4, 10}, &kCF1DPred, &kCF1DShapes},
          {"cf3d", kCF3DJson, {2, 2, 4, 6, 6}, &kCF3DPred, &kCF3DShapes}};
}

}  // namespace

TEST_CASE("channels_first layers compute the transposed channels_last results",
          "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    for (const Twin& t : twins()) {
      CAPTURE(device.to_string(), t.what);
      const K::Layer first = t.first(), last = t.last();
      const tf::TensorShape in_first(t.input);
      const tf::TensorShape in_last = shape_to_last(in_first);
      first.build(unknown_batch(in_first));
      last.build(unknown_batch(in_last));
      // Keras keeps one kernel layout for both formats: the same weights serve both.
      first.set_weights(last.get_weights());
      const tf::TensorShape out_first = first.impl().compute_output_shape(unknown_batch(in_first));
      const tf::TensorShape out_last = last.impl().compute_output_shape(unknown_batch(in_last));
      CHECK(out_first == shape_to_first(out_last));

      const tf::Tensor x = tf::random::normal(in_first, 0, 1, tf::float32, 11);
      const tf::Tensor x_last = to_last(x);
      tf::GradientTape tape({.persistent = true});
      tape.watch(x);
      tape.watch(x_last);
      const tf::Tensor y_first = first(x, false);
      const tf::Tensor y_last = last(x_last, false);
      CHECK(y_first.shape() == shape_to_first(y_last.shape()));
      check_close(y_first, to_first(y_last), 1e-5, 1e-5);
      const tf::Tensor g_first = tape.gradient(tf::reduce_sum(tf::square(y_first)), x);
      const tf::Tensor g_last = tape.gradient(tf::reduce_sum(tf::square(y_last)), x_last);
      check_close(g_first, to_first(g_last), 1e-4, 1e-4);
    }
  }
}

TEST_CASE("channels_first convolutions activate their channels_first output, as Keras",
          "[cpu][cuda][keras]") {
  // Keras 3.15.1 (TF 2.21 backend): activation="softmax" normalises axis -1 of the layer's own
  // output, the width of an NCHW one; weights i % 3 / 2 - 0.4 in Keras' order, bias likewise
  // (Conv1D) or as given.
  auto fill = [](const std::vector<tf::Tensor>& ws) {
    std::vector<tf::Tensor> out;
    for (const tf::Tensor& w : ws) {
      std::vector<double> v(static_cast<size_t>(w.num_elements()));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 3) / 2 - 0.4;
      out.push_back(tf::detail::from_doubles(v, w.shape(), tf::float32));
    }
    return out;
  };
  auto input = [](const tf::TensorShape& s) {
    std::vector<double> v(static_cast<size_t>(s.num_elements()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i % 5) / 4 - 0.5;
    return tf::detail::from_doubles(v, s, tf::float32);
  };
  struct Ref {
    const char* what;
    std::function<K::Layer()> make;
    tf::TensorShape in;
    std::vector<double> want;
  };
  const std::vector<Ref> refs = {
      {"Conv2D",
       [] { return L::Conv2D(2, 1, {.data_format = kFirst, .activation = "softmax"}); },
       {1, 2, 2, 3},
       {0.3168124, 0.3330557, 0.3501319, 0.4242154, 0.2106591, 0.3651255, 0.358622, 0.3327092,
        0.3086688, 0.2644164, 0.4044488, 0.3311347}},
      {"SeparableConv2D",
       [] { return L::SeparableConv2D(2, 1, {.data_format = kFirst, .activation = "softmax"}); },
       {1, 2, 2, 3},
       {0.3151772, 0.3329975, 0.3518254, 0.3535952, 0.3465936, 0.2998112, 0.3400218, 0.3332889,
        0.3266893, 0.3233848, 0.3332334, 0.3433818}},
      {"Conv1D causal",
       [] {
         return L::Conv1D(2, 2,
                          {.padding = "causal", .data_format = kFirst, .activation = "softmax"});
       },
       {1, 2, 4},
       {0.1719143, 0.4335453, 0.199736, 0.1948045, 0.2016423, 0.1650908, 0.300815, 0.332452}},
  };
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    for (const Ref& r : refs) {
      CAPTURE(device.to_string(), r.what);
      const K::Layer layer = r.make();
      layer.build(r.in);
      layer.set_weights(fill(layer.get_weights()));
      tf::testing::check_values(layer(input(r.in), false), r.want, 1e-5, 1e-6);
    }
  }
}

TEST_CASE("SpatialDropout2D/3D with channels_first drop whole channels of NCHW inputs",
          "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (int rank : {4, 5}) {
      CAPTURE(rank);
      std::vector<int64_t> shape{4, 6, 3, 5};
      if (rank == 5) shape.push_back(2);
      const tf::Tensor x = tf::ones(tf::TensorShape(shape));
      const K::Layer drop =
          rank == 4 ? K::Layer(L::SpatialDropout2D(0.5, {.data_format = kFirst, .seed = 3}))
                    : K::Layer(L::SpatialDropout3D(0.5, {.data_format = kFirst, .seed = 3}));
      const tf::Tensor y = drop(x, true);
      // Every (example, channel) map is all 0 or all 2 (1 / (1 - rate)).
      std::vector<int> spatial{2, 3};
      if (rank == 5) spatial.push_back(4);
      const std::vector<float> lo = tf::reduce_min(y, spatial, false).numpy<float>();
      const std::vector<float> hi = tf::reduce_max(y, spatial, false).numpy<float>();
      REQUIRE(lo.size() == 24);
      int dropped = 0;
      for (size_t i = 0; i < lo.size(); ++i) {
        CHECK(lo[i] == hi[i]);
        CHECK((lo[i] == 0.0f || lo[i] == 2.0f));
        dropped += lo[i] == 0.0f ? 1 : 0;
      }
      CHECK(dropped > 0);
      CHECK(dropped < 24);
      check_close(drop(x, false), x, 0.0, 0.0);
    }
  }
}

TEST_CASE("channels_first models from Keras 3.15's JSON predict as Keras",
          "[cpu][cuda][keras][serialization]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    for (const KerasModel& m : keras_models()) {
      CAPTURE(device.to_string(), m.name);
      tf::testing::check_keras_prediction(m);
    }
  }
}

TEST_CASE("channels_first layer configs are Keras' and round trip", "[keras][serialization]") {
  for (const KerasModel& m : keras_models()) {
    CAPTURE(m.name);
    const Config keras = Config::parse(m.json);
    K::Model model = K::models::model_from_json(m.json);
    const Config ours = Config::parse(K::models::to_json(model));
    const auto theirs = tf::testing::layers_by_name(keras);
    const auto mine = tf::testing::layers_by_name(ours);
    for (const auto& [name, layer] : theirs) {
      if (layer["class_name"] == "InputLayer") continue;
      CAPTURE(name);
      REQUIRE(mine.count(name) == 1);
      CHECK(mine.at(name)["config"].dump() == layer["config"].dump());
    }
    K::Model again = K::models::model_from_json(K::models::to_json(model));
    CHECK(K::models::to_json(again) == K::models::to_json(model));
  }
  // A layer made in C++ writes channels_first, and its config makes the same layer again.
  for (const Twin& t : twins()) {
    CAPTURE(t.what);
    const K::Layer layer = t.first();
    const Config c = K::saving::get_config(layer);
    REQUIRE(c.contains("data_format"));
    CHECK(c["data_format"] == kFirst);
    const K::Layer back = K::saving::from_config(layer.class_name(), c);
    CHECK(K::saving::get_config(back).dump() == c.dump());
  }
}

TEST_CASE("channels_first mistakes name the layer and the layout", "[keras]") {
  require_error([] { L::Conv2D(2, 3, {.data_format = "channels_middle"}); },
                {"[Conv2D]", "data_format must be \"channels_last\" or \"channels_first\"",
                 "channels_middle"});
  require_error([] { L::MaxPooling1D(2, {.data_format = "NCW"}); }, {"[MaxPooling1D]", "NCW"});
  require_error([] { L::ZeroPadding2D(1, {.data_format = "first"}); }, {"[ZeroPadding2D]"});
  const L::Conv2D conv(2, 3, {.data_format = kFirst, .name = "cf_conv"});
  (void)conv(tf::ones({1, 3, 5, 5}));
  // Channels at axis 1: a channels_last input of the same size is refused, naming the axis.
  require_error(
      [&] {
        (void)conv(tf::ones({1, 5, 5, 3}));
      },
      {"cf_conv", "expected ndim=4 and axis 1 of input shape to have value 3", "(1, 5, 5, 3)"});
  require_error(
      [] {
        (void)L::Conv2D(2, 3, {.data_format = kFirst})(tf::ones({1, 3, 5}));
      },
      {"needs NCHW (channels_first) inputs of rank 4", "(None, 3, 5)"});
  require_error(
      [] {
        (void)L::Conv1D(2, 3, {.data_format = kFirst})(tf::ones({1, 3, 5, 5}));
      },
      {"needs inputs (batch, channels, steps) (channels_first) of rank 3"});
  require_error(
      [] {
        (void)L::MaxPooling3D(2, {.data_format = kFirst})(tf::ones({1, 3, 5, 5}));
      },
      {"needs NCDHW (channels_first) inputs of rank 5"});
  require_error(
      [] {
        (void)L::Cropping2D(L::Sides2D(3, 0), {.data_format = kFirst})(tf::ones({1, 2, 6, 9}));
      },
      {"(Cropping2D)", "must be smaller than the input's height and width", "axis 2"});
}

TEST_CASE("docs/keras.md's channels_first example runs", "[keras]") {
  const std::string cf = "channels_first";
  tf::keras::Sequential model(
      {L::Conv2D(32, 3, {.padding = "same", .data_format = cf, .activation = "relu"}),
       L::MaxPooling2D(2, {.data_format = cf}), L::ZeroPadding2D(1, {.data_format = cf}),
       L::Flatten({.data_format = cf}), L::Dense(10)});
  const tf::Tensor y = model(tf::ones({8, 3, 28, 28}));
  CHECK(y.shape() == tf::TensorShape({8, 10}));
  // (8, 32, 28, 28) -> pooled (8, 32, 14, 14) -> padded (8, 32, 16, 16) -> 8192 features.
  CHECK(model.layers()[3].output_shape() == tf::TensorShape({tf::None, 32 * 16 * 16}));
}

TEST_CASE("channels_first models train with fit and trace for a None batch", "[keras]") {
  K::Model model = K::models::model_from_json(kCF2DJson);
  set_formula_weights(model);
  const tf::Tensor x = tf::random::normal({16, 3, 8, 8}, 0, 1, tf::float32, 3);
  const tf::Tensor y = tf::random::normal({16, 5}, 0, 0.5, tf::float32, 4);
  // One traced graph serves every batch size, with the values of the eager calls.
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 3, 8, 8})};
  auto f = tf::function([&](const tf::Tensor& in) { return model(in, false); }, opts);
  check_close(f(x), model(x, false), 1e-5, 1e-6);
  const tf::Tensor part = tf::slice(x, {0, 0, 0, 0}, {5, 3, 8, 8});
  check_close(f(part), model(part, false), 1e-5, 1e-6);
  CHECK(f.tracing_count() == 1);
  model.compile(K::optimizers::Adam(1e-2), K::losses::MeanSquaredError());
  const auto h = model.fit(x, y, {.epochs = 10, .batch_size = 8, .verbose = 0});
  const auto& loss = h.history.at("loss");
  CHECK(loss.back() < 0.9 * loss.front());
}

TEST_CASE("backend::set_image_data_format sets the format of layers made without one", "[keras]") {
  namespace B = tf::keras::backend;
  REQUIRE(B::image_data_format() == "channels_last");
  struct Restore {
    ~Restore() { tf::keras::backend::set_image_data_format("channels_last"); }
  } restore;
  B::set_image_data_format("channels_first");
  CHECK(B::image_data_format() == "channels_first");
  // Layers made now with data_format "" (Keras' None) take channels_first; an explicit
  // channels_last keeps it; the format is fixed at construction.
  const L::Conv2D conv(2, 3);
  const L::Conv3D conv3(2, 3);
  const L::GlobalAveragePooling2D gap;
  const L::MaxPooling1D pool(2);
  const L::Conv2D last(2, 3, {.data_format = "channels_last"});
  B::set_image_data_format("channels_last");
  CHECK(conv(tf::ones({1, 4, 6, 6})).shape() == tf::TensorShape({1, 2, 4, 4}));
  CHECK(conv3(tf::ones({1, 4, 5, 5, 5})).shape() == tf::TensorShape({1, 2, 3, 3, 3}));
  CHECK(gap(tf::ones({1, 4, 6, 6})).shape() == tf::TensorShape({1, 4}));
  CHECK(pool(tf::ones({1, 3, 8})).shape() == tf::TensorShape({1, 3, 4}));
  CHECK(last(tf::ones({1, 6, 6, 4})).shape() == tf::TensorShape({1, 4, 4, 2}));
  CHECK(K::saving::get_config(conv)["data_format"] == kFirst);
  CHECK(L::Conv2D(2, 3)(tf::ones({1, 6, 6, 4})).shape() == tf::TensorShape({1, 4, 4, 2}));
  require_error([] { B::set_image_data_format("NCHW"); },
                {"set_image_data_format", "\"channels_last\" or \"channels_first\"", "NCHW"});
}

TEST_CASE("ConvLSTM1D/2D/3D with channels_first compute the transposed channels_last results",
          "[cpu][cuda][keras]") {
  using V = std::vector<int64_t>;
  struct Case {
    const char* what;
    int rank;
    std::function<K::Layer(const std::string&)> make;
    V input;  // channels_last: (batch, time, spatial..., channels)
  };
  const std::vector<Case> cases = {
      {"ConvLSTM1D same, sequences",
       1,
       [](const std::string& f) {
         return L::ConvLSTM1D(3, V{3},
                              {.padding = "same", .data_format = f, .return_sequences = true});
       },
       {2, 3, 7, 2}},
      {"ConvLSTM2D valid, strided",
       2,
       [](const std::string& f) {
         return L::ConvLSTM2D(4, V{2, 3}, {.strides = {2}, .data_format = f});
       },
       {2, 3, 6, 7, 3}},
      {"ConvLSTM2D same, sequences",
       2,
       [](const std::string& f) {
         return L::ConvLSTM2D(2, V{3},
                              {.padding = "same", .data_format = f, .return_sequences = true});
       },
       {1, 2, 5, 4, 2}},
      {"ConvLSTM3D same",
       3,
       [](const std::string& f) {
         return L::ConvLSTM3D(2, V{2}, {.padding = "same", .data_format = f});
       },
       {1, 2, 3, 4, 4, 2}},
  };
  // (batch, time, spatial..., C) <-> (batch, time, C, spatial...).
  auto to_first5 = [](const tf::Tensor& t) {
    std::vector<int> p{0, 1, t.rank() - 1};
    for (int i = 2; i < t.rank() - 1; ++i) p.push_back(i);
    return tf::transpose(t, p);
  };
  auto step_to_first = [](const tf::Tensor& t) {  // (batch, spatial..., F) -> (batch, F, ...)
    std::vector<int> p{0, t.rank() - 1};
    for (int i = 1; i < t.rank() - 1; ++i) p.push_back(i);
    return tf::transpose(t, p);
  };
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    for (const Case& c : cases) {
      CAPTURE(device.to_string(), c.what);
      const K::Layer first = c.make("channels_first"), last = c.make("channels_last");
      const tf::Tensor x = tf::random::normal(tf::TensorShape(c.input), 0, 1, tf::float32, 5);
      const tf::Tensor xf = to_first5(x);
      tf::GradientTape tape({.persistent = true});
      tape.watch(x);
      tape.watch(xf);
      const tf::Tensor y = last(x, false);
      first.build(xf.shape());
      first.set_weights(last.get_weights());  // the same kernel layout in both formats
      const tf::Tensor yf = first(xf, false);
      const bool seq = y.rank() == c.rank + 3;
      const tf::Tensor want = seq ? to_first5(y) : step_to_first(y);
      REQUIRE(yf.shape() == want.shape());
      check_close(yf, want, 1e-5, 1e-5);
      check_close(tape.gradient(tf::reduce_sum(tf::square(yf)), xf),
                  to_first5(tape.gradient(tf::reduce_sum(tf::square(y)), x)), 1e-4, 1e-4);
      CHECK(first.impl().compute_output_shape(xf.shape()) == yf.shape());
      // The config says so and loads back.
      const Config config = K::saving::get_config(first);
      REQUIRE(config["data_format"] == "channels_first");
      const K::Layer loaded = K::saving::from_config(first.class_name(), config);
      REQUIRE(K::saving::get_config(loaded)["data_format"] == "channels_first");
    }
  }
  // data_format "" follows the global format.
  K::backend::set_image_data_format("channels_first");
  const K::Layer made = L::ConvLSTM2D(2, V{3});
  K::backend::set_image_data_format("channels_last");
  REQUIRE(K::saving::get_config(made)["data_format"] == "channels_first");
  require_error([] { L::ConvLSTM2D(2, V{3}, {.data_format = "channels_middle"}); },
                {"ConvLSTM2D", "data_format", "channels_middle"});
}
