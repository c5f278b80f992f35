// keras::layers::Conv3D, MaxPooling3D, AveragePooling3D, GlobalAveragePooling3D,
// GlobalMaxPooling3D, UpSampling3D, ZeroPadding3D, Cropping3D and Conv3DTranspose against
// Keras 3.15 on the same inputs and weights: weight names and shapes, parameter counts, output
// shapes and values on every device; automatic names and summary rows; a small model that fits;
// traced equals eager for a None batch; the errors.
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/layers.h"
#include "keras/layers_conv3d.h"
#include "keras/losses.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tf::keras;
namespace L = tf::keras::layers;

namespace {

// The Keras 3.15 check's tensors (as tests/keras/test_layers_conv.cpp's): element i is
// (((i * a + b) mod m) - off) / den, numpy's ((arange(n) * a + b) % m - off) / den: inputs
// (7, 3, 11, 4, 5), kernels (5, 1, 13, 8, 6), biases (3, 1, 5, 8, 2), all float32.
tf::Tensor pattern(const tf::TensorShape& s, int a, int b, int m, double den, int off) {
  std::vector<double> v(static_cast<size_t>(s.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = ((static_cast<int64_t>(i) * a + b) % m - off) / den;
  return tf::detail::from_doubles(v, s, tf::float32);
}
tf::Tensor X(const tf::TensorShape& s) {
  return pattern(s, 7, 3, 11, 4.0, 5);
}

void set_pattern_weights(const K::Layer& layer, const tf::TensorShape& input) {
  layer.build(input);
  std::vector<tf::Tensor> values;
  for (const tf::Variable& v : layer.weights()) {
    const std::string n = v.name().substr(0, v.name().rfind(':'));
    const bool bias = n.size() >= 4 && n.compare(n.size() - 4, 4, "bias") == 0;
    values.push_back(bias ? pattern(v.shape(), 3, 1, 5, 8.0, 2)
                          : pattern(v.shape(), 5, 1, 13, 8.0, 6));
  }
  layer.set_weights(values);
}

std::vector<std::pair<std::string, tf::TensorShape>> weight_list(const K::Layer& layer) {
  std::vector<std::pair<std::string, tf::TensorShape>> out;
  for (const tf::Variable& v : layer.weights()) {
    const std::string n = v.name().substr(0, v.name().rfind(':'));
    out.emplace_back(n.substr(n.rfind('/') + 1), v.shape());
  }
  return out;
}

struct Row {
  std::string what;
  K::Layer layer;
  tf::TensorShape input;
  tf::TensorShape output;
  std::vector<std::pair<std::string, tf::TensorShape>> weights;  // Keras 3.15's names, shapes
  int64_t params;
  std::vector<double> values;  // Keras 3.15: layer(X(input)) after set_weights, all of them
};

// Keras 3.15 (keras.layers.X(...), built for (None,) + input[1:], weights set by name as
// set_pattern_weights, called on X(input)).
std::vector<Row> rows() {
  return {
      // keras.layers.Conv3D(3, (2, 3, 2))
      {"Conv3D(3, (2, 3, 2))",
       L::Conv3D(3, {2, 3, 2}),
       {1, 4, 5, 4, 2},
       {1, 3, 3, 3, 3},
       {{"kernel", {2, 3, 2, 2, 3}}, {"bias", {3}}},
       75,
       {
           -1.71875, -0.625,   0.25,    -1.96875, 2,        -1.15625, 0.1875,   -0.1875,  3.28125,
           0.375,    -1.46875, 0.125,   0.125,    1.15625,  -1.28125, -0.8125,  3.09375,  1.09375,
           -0.96875, -1.28125, 1.03125, 0.84375,  -1.0625,  1.6875,   1.96875,  2.9375,   -2.8125,
           0.84375,  -1.0625,  1.6875,  1.96875,  2.9375,   -2.8125,  -1.71875, -0.625,   0.25,
           0.1875,   -0.1875,  3.28125, 1.3125,   -0.65625, -1.21875, 0.375,    -1.46875, 0.125,
           -0.8125,  3.09375,  1.09375, -0.71875, -1.15625, -1,       -0.96875, -1.28125, 1.03125,
           -0.71875, -1.15625, -1,      -0.96875, -1.28125, 1.03125,  0.84375,  -1.0625,  1.6875,
           -1.71875, -0.625,   0.25,    -1.96875, 2,        -1.15625, 0.1875,   -0.1875,  3.28125,
           0.375,    -1.46875, 0.125,   0.125,    1.15625,  -1.28125, -0.8125,  3.09375,  1.09375,
       }},
      // keras.layers.Conv3D(4, 3, strides=2, padding='same', activation='relu')
      {"Conv3D(4, 3, strides=2, padding=\"same\", activation=\"relu\")",
       L::Conv3D(4, 3, 2, "same", "relu"),
       {2, 5, 4, 3, 2},
       {2, 3, 2, 2, 4},
       {{"kernel", {3, 3, 3, 2, 4}}, {"bias", {4}}},
       220,
       {
           2.5,     0.71875, 0,       0,       0.3125,  0,       3.28125, 0.1875,  0,       1.375,
           0,       0,       1.65625, 1,       0,       1.28125, 0,       2.40625, 0,       1.59375,
           0.40625, 1.53125, 0,       2.125,   1.25,    0,       2.46875, 0,       0,       0,
           2.5625,  0,       1.40625, 0,       0.84375, 0,       0,       0,       3.84375, 0,
           0,       1.90625, 0,       2.65625, 2.3125,  0.59375, 0,       0.375,   0,       1.59375,
           2.96875, 0,       0,       2.125,   0,       0,       1.375,   0,       0,       0.21875,
           0.75,    0,       2.03125, 0,       3.0625,  0,       0,       2.9375,  2.28125, 0,
           4.4375,  0,       0,       1.8125,  0,       0.84375, 0,       0.84375, 0,       0.34375,
           0,       3.21875, 1.34375, 0,       0,       1.90625, 0,       0.625,   0.125,   0,
           0,       0,       0,       0,       2.03125, 0,
       }},
      // keras.layers.Conv3D(4, 2, groups=2, use_bias=False)
      {"Conv3D(4, 2, groups=2, use_bias=False)",
       L::Conv3D(4, 2, {.groups = 2, .use_bias = false}),
       {1, 3, 3, 3, 4},
       {1, 2, 2, 2, 4},
       {{"kernel", {2, 2, 2, 2, 4}}},
       64,
       {
           0.875,    0.40625,  0.28125, 1.0625,  -1.125,   -0.53125, 0.4375,  -1.1875,
           0.03125,  1.71875,  0.0625,  0.84375, -0.25,    -0.25,    0.5625,  -1.0625,
           -0.28125, 0.90625,  -1.0625, 1.78125, -2.28125, -1.0625,  -1.25,   -0.8125,
           -1.125,   -0.53125, 0.4375,  -1.1875, 1,        1.625,    0.59375, 1.03125,
       }},
      // keras.layers.MaxPooling3D()
      {"MaxPooling3D()",
       L::MaxPooling3D(),
       {1, 4, 5, 4, 2},
       {1, 2, 2, 2, 2},
       {},
       0,
       {
           1,
           1.25,
           1.25,
           1.25,
           1.25,
           1.25,
           1,
           1.25,
           1.25,
           1.25,
           1,
           1.25,
           1.25,
           1,
           1.25,
           1.25,
       }},
      // keras.layers.MaxPooling3D((2, 3, 2), (1, 2, 2), 'same')
      {"MaxPooling3D((2, 3, 2), (1, 2, 2), \"same\")",
       L::MaxPooling3D({2, 3, 2}, L::Size3(1, 2, 2), "same"),
       {1, 3, 5, 4, 2},
       {1, 3, 3, 2, 2},
       {},
       0,
       {
           1,    1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25, 1.25,  1,
           1,    1.25, 1,    1.25, 1.25, 1.25, 1.25, 1.25, 1,    1.25, 1.25,  1.25,
           0.25, 1.25, 1,    0.75, 0.75, 1.25, 1.25, 1.25, 1,    0,    -0.25, 1.25,
       }},
      // keras.layers.AveragePooling3D((3, 2, 2), (2, 1, 2), 'same')
      {"AveragePooling3D((3, 2, 2), (2, 1, 2), \"same\")",
       L::AveragePooling3D({3, 2, 2}, L::Size3(2, 1, 2), "same"),
       {1, 5, 4, 5, 2},
       {1, 3, 4, 3, 2},
       {},
       0,
       {
           -0.03125,
           0,
           0.09375,
           0.125,
           0.1875,
           -0.125,
           -0.0625,
           -0.03125,
           0.0625,
           0.09375,
           -0.1875,
           0.1875,
           -0.09375,
           -0.0625,
           0.03125,
           0.0625,
           0.125,
           -0.1875,
           0.0625,
           -0.25,
           0.1875,
           -0.125,
           0.625,
           -0.375,
           -0.104166664,
           0.0416666679,
           0.020833334,
           -0.0625,
           0,
           0.375,
           -0.020833334,
           -0.104166664,
           0.104166664,
           0.020833334,
           -0.375,
           0,
           0.0625,
           -0.020833334,
           -0.0416666679,
           0.104166664,
           0.166666672,
           -0.375,
           -0.125,
           0.25,
           0,
           -0.0833333358,
           0.666666687,
           -0.333333343,
           -0.0625,
           -0.03125,
           0.0625,
           0.09375,
           -0.1875,
           0.1875,
           -0.09375,
           -0.0625,
           0.03125,
           0.0625,
           0.125,
           -0.1875,
           -0.125,
           -0.09375,
           0,
           0.03125,
           0.4375,
           0.125,
           -0.3125,
           0.0625,
           -0.1875,
           0.1875,
           0.25,
           0.625,
       }},
      // keras.layers.GlobalAveragePooling3D()
      {"GlobalAveragePooling3D()",
       L::GlobalAveragePooling3D(),
       {2, 3, 2, 2, 3},
       {2, 3},
       {},
       0,
       {
           -0.0416666679,
           0.104166664,
           0.020833334,
           -0.0625,
           0.0833333358,
           0,
       }},
      // keras.layers.GlobalMaxPooling3D(keepdims=True)
      {"GlobalMaxPooling3D(keepdims=True)",
       L::GlobalMaxPooling3D("channels_last", true),
       {2, 3, 2, 2, 3},
       {2, 1, 1, 1, 3},
       {},
       0,
       {
           1.25,
           1.25,
           1.25,
           1.25,
           1.25,
           1.25,
       }},
      // keras.layers.GlobalAveragePooling3D('channels_first')
      {"GlobalAveragePooling3D(\"channels_first\")",
       L::GlobalAveragePooling3D("channels_first"),
       {2, 3, 2, 2, 3},
       {2, 3},
       {},
       0,
       {
           -0.0416666679,
           0.104166664,
           0.020833334,
           -0.0625,
           0.0833333358,
           0,
       }},
      // keras.layers.UpSampling3D((2, 1, 3))
      {"UpSampling3D((2, 1, 3))",
       L::UpSampling3D({2, 1, 3}),
       {1, 2, 2, 2, 2},
       {1, 4, 2, 6, 2},
       {},
       0,
       {
           -0.5,  1.25,  -0.5,  1.25,  -0.5,  1.25,  0.25,  -0.75, 0.25,  -0.75, 0.25,  -0.75,
           1,     0,     1,     0,     1,     0,     -1,    0.75,  -1,    0.75,  -1,    0.75,
           -0.5,  1.25,  -0.5,  1.25,  -0.5,  1.25,  0.25,  -0.75, 0.25,  -0.75, 0.25,  -0.75,
           1,     0,     1,     0,     1,     0,     -1,    0.75,  -1,    0.75,  -1,    0.75,
           -0.25, -1.25, -0.25, -1.25, -0.25, -1.25, 0.5,   -0.5,  0.5,   -0.5,  0.5,   -0.5,
           1.25,  0.25,  1.25,  0.25,  1.25,  0.25,  -0.75, 1,     -0.75, 1,     -0.75, 1,
           -0.25, -1.25, -0.25, -1.25, -0.25, -1.25, 0.5,   -0.5,  0.5,   -0.5,  0.5,   -0.5,
           1.25,  0.25,  1.25,  0.25,  1.25,  0.25,  -0.75, 1,     -0.75, 1,     -0.75, 1,
       }},
      // keras.layers.ZeroPadding3D(((1, 0), (0, 2), (1, 1)))
      {"ZeroPadding3D(((1, 0), (0, 2), (1, 1)))",
       L::ZeroPadding3D({{1, 0}, {0, 2}, {1, 1}}),
       {1, 2, 2, 2, 1},
       {1, 3, 4, 4, 1},
       {},
       0,
       {
           0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,  0,    0, 0, -0.5, 1.25, 0, 0, 0.25, -0.75, 0,
           0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, -1, 0.75, 0, 0, 0,    0,    0, 0, 0,    0,     0,
       }},
      // keras.layers.Cropping3D(((1, 0), (0, 1), (1, 1)))
      {"Cropping3D(((1, 0), (0, 1), (1, 1)))",
       L::Cropping3D({{1, 0}, {0, 1}, {1, 1}}),
       {1, 3, 3, 4, 1},
       {1, 2, 2, 2, 1},
       {},
       0,
       {
           0.25,
           -0.75,
           -1,
           0.75,
           -0.75,
           1,
           0.75,
           -0.25,
       }},
      // keras.layers.Conv3DTranspose(2, (2, 3, 2))
      {"Conv3DTranspose(2, (2, 3, 2))",
       L::Conv3DTranspose(2, {2, 3, 2}),
       {1, 2, 3, 2, 3},
       {1, 3, 5, 3, 2},
       {{"kernel", {2, 3, 2, 2, 3}}, {"bias", {2}}},
       74,
       {
           0.34375,  0.5625,   0.90625,  1.59375,  0.46875,  0.90625,  -0.625,   0.28125,  0.40625,
           1.46875,  0.96875,  1.09375,  -1.78125, 0.125,    -1.8125,  0.25,     -0.0625,  0.0625,
           0.875,    1.3125,   -1.0625,  -0.9375,  -2,       -1.9375,  0.125,    0.6875,   0.46875,
           1.03125,  0.25,     0.625,    -1.96875, 1.3125,   0.25,     0.25,     -0.53125, 0.21875,
           0.5625,   -1.03125, -1.78125, -1.34375, -0.5625,  1.03125,  3.09375,  -1,       1.0625,
           -1.5625,  1.1875,   2.21875,  0.53125,  0.84375,  0.90625,  -1.34375, 1.75,     -0.4375,
           -2,       -0.46875, 0.3125,   2.09375,  -0.84375, -0.21875, 0.03125,  -1,       1.4375,
           1.125,    -1.375,   -0.6875,  0.84375,  1.15625,  -1,       -0.84375, -0.125,   -0.3125,
           -1.9375,  1.78125,  -0.625,   0.34375,  -0.03125, 1.65625,  -0.6875,  -0.03125, 0.71875,
           -0.46875, -1.75,    1.25,     0.21875,  -0.46875, -0.5,     1.5,      0.5625,   -0.84375,
       }},
      // keras.layers.Conv3DTranspose(3, 3, strides=2, padding='same', activation='relu')
      {"Conv3DTranspose(3, 3, strides=2, padding=\"same\", activation=\"relu\")",
       L::Conv3DTranspose(3, 3, 2, "same", "relu"),
       {1, 2, 2, 3, 2},
       {1, 4, 4, 6, 3},
       {{"kernel", {3, 3, 3, 3, 2}}, {"bias", {3}}},
       165,
       {
           0.1875,  0,       0,       0.5625,  0.65625, 0,       0,       1.46875, 1.125,   0,
           0.03125, 0.375,   0,       0.40625, 0,       0,       0,       0.75,    0.09375, 0,
           0.875,   0.46875, 0.5625,  0,       0,       1.4375,  0,       0,       0.09375, 0.4375,
           0,       0.34375, 0,       0,       0,       0.625,   0,       0,       0,       0.875,
           1.0625,  0,       0.4375,  2.1875,  1.28125, 0,       0.125,   0.625,   0.46875, 0,
           0.125,   0,       0,       1,       0.53125, 0,       0.4375,  0.40625, 0.875,   0,
           0,       1.25,    0,       0,       0.40625, 0.3125,  0.4375,  0.15625, 0,       0,
           0,       0.5,     0,       0,       0.6875,  0.28125, 0,       0,       1.09375, 1.375,
           0,       0,       0.625,   0.5625,  0.03125, 0.21875, 0,       0,       1,       0.375,
           0,       1.125,   0.59375, 0.1875,  0,       0,       1.0625,  0.125,   0,       0,
           0.6875,  0.625,   0,       0.15625, 0.125,   0,       0.875,   0.25,    0,       0.21875,
           1,       0.6875,  0,       0.03125, 1.8125,  1.53125, 0,       0,       0.875,   0.15625,
           0,       0.375,   0.09375, 0,       1.25,    0.625,   0,       0.6875,  0.53125, 0.5,
           0,       0,       0.875,   0,       0,       0.03125, 0.5625,  0.875,   0,       0,
           0,       0,       0.75,    0.5,     0,       1.625,   0.53125, 0,       0,       1.65625,
           1.78125, 0,       0,       0.84375, 1.3125,  0,       0,       1.03125, 1.28125, 0.125,
           0.5,     0.25,    0,       1.34375, 0.65625, 0,       0,       1.375,   0.3125,  0,
           0,       0.875,   1.34375, 0,       0,       1.46875, 0,       0.125,   0.5,     0.25,
           0.25,    2.125,   1.34375, 0,       0,       2.1875,  1.90625, 0,       0,       1.4375,
           1.53125, 0,       0.4375,  1.0625,  0,       1.3125,  1.40625, 0,       0,       1.28125,
           0.53125, 0,       0,       1.0625,  0.75,    0,       0,       0.6875,  1.90625, 0,
           0,       0,       1.9375,  0.96875, 1.0625,  0,       0.5625,  0.375,   0,       0,
           1.125,   0.3125,  0,       0,       0,       0.375,   0,       0,       0.875,   1.53125,
           0,       0,       0.5,     0.625,   0.375,   0.59375, 0,       0,       0.9375,  0.125,
           0,       0.3125,  1.4375,  0.34375, 0,       0,       0.96875, 0,       0,       0,
           0.625,   0.75,    0.75,    0.78125, 0,       0,       1.375,   0.78125, 0,       0,
           1.09375, 1,       0,       0,       0.59375, 0,       0.46875, 0.40625, 0.0625,  0,
           0.375,   0.15625, 0,       0,       0.8125,  0.375,   0,       0.0625,  1.125,   0.65625,
           0,       0,       0,       1.8125,  0,       0.1875,  0,       0,
       }},
      // keras.layers.Conv3DTranspose(2, 2, strides=(2, 1, 2), output_padding=(1, 0, 1))
      {"Conv3DTranspose(2, 2, strides=(2, 1, 2), output_padding=(1, 0, 1))",
       L::Conv3DTranspose(2, 2, {.strides = {2, 1, 2}, .output_padding = L::Size3(1, 0, 1)}),
       {1, 2, 2, 2, 1},
       {1, 5, 3, 5, 2},
       {{"kernel", {2, 2, 2, 2, 1}}, {"bias", {2}}},
       18,
       {
           0.1875,   0.25,     -0.4375,  0.4375,   -0.90625, 0.25,     0.65625, -0.21875, -0.125,
           0.25,     -0.40625, 0.625,    0.09375,  -0.09375, 0.65625,  -0.6875, -0.75,    1.15625,
           -0.125,   0.25,     -0.0625,  0.0625,   -0.15625, 0.375,    -0.3125, 0.8125,   -0.03125,
           -0.125,   -0.125,   0.25,     0.125,    0.1875,   -0.5,     0.375,   -0.75,    0.40625,
           0.8125,   -0.0625,  -0.125,   0.25,     -0.4375,  0.59375,  0.0625,  -0.125,   0.71875,
           -0.625,   -0.6875,  1.21875,  -0.125,   0.25,     -0.03125, 0.09375, -0.125,   0.40625,
           -0.40625, 0.71875,  -0.125,   -0.21875, -0.125,   0.25,     -0.75,   0.25,     0.5,
           -0.125,   -0.125,   0.25,     -0.125,   0.25,     -0.125,   0.25,    0.75,     -0.5,
           -0.875,   1.125,    -0.59375, 0.25,     0.34375,  -0.03125, -0.125,  0.25,     -0.375,
           1,        0,        -0.25,    0.0625,   -0.3125,  -0.21875, 0.625,   -0.125,   0.25,
           -0.625,   0.375,    0.625,    0,        -0.125,   0.25,     -0.125,  0.25,     -0.125,
           0.25,     0.75,     -0.5,     -0.875,   1.125,    -0.5,     0.34375, 0.4375,   0.0625,
           -0.125,   0.25,     -0.5,     0.875,    -0.125,   -0.375,   0.15625, -0.21875, -0.125,
           0.71875,  -0.125,   0.25,     -0.125,   0.25,     -0.125,   0.25,    -0.125,   0.25,
           -0.125,   0.25,     -0.125,   0.25,     -0.125,   0.25,     -0.125,  0.25,     -0.125,
           0.25,     -0.125,   0.25,     -0.125,   0.25,     -0.125,   0.25,    -0.125,   0.25,
           -0.125,   0.25,     -0.125,   0.25,     -0.125,   0.25,
       }},
  };
}

}  // namespace

TEST_CASE("3-D keras layers give Keras 3.15's weights shapes and values", "[cpu][cuda][keras]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (Row& r : rows()) {
      INFO(r.what);
      tf::TensorShape built = r.input;
      built[0] = tf::None;
      set_pattern_weights(r.layer, built);
      CHECK(weight_list(r.layer) == r.weights);
      CHECK(r.layer.count_params() == r.params);
      tf::TensorShape out = r.output;
      out[0] = tf::None;
      CHECK(r.layer.output_shape() == out);
      const tf::Tensor y = r.layer(X(r.input));
      REQUIRE(y.shape() == r.output);
      // Multiples of 1/32 but for the averages over 3, 6 or 12 elements.
      tf::testing::check_values(y, r.values, 1e-6, 1e-6);
    }
  }
}

TEST_CASE("3-D keras layers names summary and errors", "[cpu][keras]") {
  // Keras 3.15: Sequential([Input((6, 6, 6, 2)), Conv3D(4, 3, padding="same"), MaxPooling3D(),
  // Conv3D(2, (1, 2, 2), groups=2), UpSampling3D(2), ZeroPadding3D(1),
  // Cropping3D(((1, 0), (0, 1), (0, 0))), AveragePooling3D(2), GlobalMaxPooling3D()]).summary():
  // output shapes below, 220 + 18 = 238 parameters.
  auto c1 = L::Conv3D(4, 3, {.padding = "same", .input_shape = {6, 6, 6, 2}});
  REQUIRE(c1.built());
  K::Sequential model({c1, L::MaxPooling3D(), L::Conv3D(2, {1, 2, 2}, {.groups = 2}),
                       L::UpSampling3D(2), L::ZeroPadding3D(1),
                       L::Cropping3D({{1, 0}, {0, 1}, {0, 0}}), L::AveragePooling3D(2),
                       L::GlobalMaxPooling3D()});
  CHECK(model.count_params() == 238);
  CHECK(model.output_shape() == tf::TensorShape({tf::None, 2}));
  const std::string s = model.summary_string(110);
  INFO(s);
  const std::vector<std::pair<std::string, std::string>> want = {
      {"(Conv3D)", "(None, 6, 6, 6, 4)"},           {"(MaxPooling3D)", "(None, 3, 3, 3, 4)"},
      {"(Conv3D)", "(None, 3, 2, 2, 2)"},           {"(UpSampling3D)", "(None, 6, 4, 4, 2)"},
      {"(ZeroPadding3D)", "(None, 8, 6, 6, 2)"},    {"(Cropping3D)", "(None, 7, 5, 6, 2)"},
      {"(AveragePooling3D)", "(None, 3, 2, 3, 2)"}, {"(GlobalMaxPooling3D)", "(None, 2)"}};
  size_t at = 0;
  for (const auto& [cls, shape] : want) {
    at = s.find(cls, at);
    REQUIRE(at != std::string::npos);
    const size_t eol = s.find('\n', at);
    CHECK(s.substr(at, eol - at).find(shape) != std::string::npos);
  }
  CHECK(s.find("238") != std::string::npos);
  // Automatic names: Keras' snake_case bases.
  const std::vector<std::pair<K::Layer, std::string>> names = {
      {L::Conv3D(2, 3), "conv3d"},
      {L::MaxPooling3D(), "max_pooling3d"},
      {L::AveragePooling3D(2), "average_pooling3d"},
      {L::GlobalAveragePooling3D(), "global_average_pooling3d"},
      {L::GlobalMaxPooling3D(), "global_max_pooling3d"},
      {L::UpSampling3D(), "up_sampling3d"},
      {L::ZeroPadding3D(), "zero_padding3d"},
      {L::Cropping3D(), "cropping3d"},
      {L::Conv3DTranspose(2, 2), "conv3d_transpose"}};
  for (const auto& [layer, base] : names) {
    INFO(layer.name());
    CHECK(layer.name().rfind(base, 0) == 0);
  }
  CHECK(L::Conv3D(2, 3, {.name = "mine"}).name() == "mine");
  // Keras' default cropping and padding: one slice at each side.
  CHECK(L::Cropping3D()(tf::ones({1, 3, 4, 5, 1})).shape() == tf::TensorShape({1, 1, 2, 3, 1}));
  CHECK(L::ZeroPadding3D()(tf::ones({1, 1, 1, 1, 2})).shape() == tf::TensorShape({1, 3, 3, 3, 2}));

  using tf::testing::require_error;
  require_error([] { L::Conv3D(0, 3); }, {"[Conv3D]", "filters must be positive"});
  require_error([] { L::Conv3D(2, {3, 0, 3}); }, {"kernel_size must be positive", "(3, 0, 3)"});
  require_error([] { L::Conv3D(2, 3, 1, "full"); },
                {"padding must be \"valid\" or \"same\", got \"full\""});
  require_error(
      [] {
        L::Conv3D(4, 3, {.strides = 2, .dilation_rate = {1, 2, 1}});
      },
      {"strides > 1 together with dilation_rate > 1", "(2, 2, 2)", "(1, 2, 1)"});
  require_error([] { L::Conv3D(5, 3, {.groups = 2}); },
                {"[Conv3D]", "evenly divisible by the number of groups", "groups=2, filters=5"});
  require_error(
      [] {
        L::Conv3D(4, 3, {.groups = 2}).build({tf::None, 5, 5, 5, 3});
      },
      {"input channels must be evenly divisible", "groups=2 but the input has 3"});
  require_error([] { L::Conv3D(4, 3, {.data_format = "channels_middle"}); },
                {"[Conv3D]", "channels_middle"});
  require_error(
      [] {
        (void)L::Conv3D(2, 3, {.data_format = "channels_first"})(tf::ones({1, 5, 5, 2}));
      },
      {"needs NCDHW (channels_first) inputs of rank 5"});
  require_error(
      [] {
        (void)L::Conv3D(2, 3)(tf::ones({1, 5, 5, 2}));
      },
      {"needs NDHWC inputs of rank 5", "(None, 5, 5, 2)"});
  require_error([&] { (void)c1(tf::ones({1, 6, 6, 6, 3})); }, {"is incompatible with the layer"});
  require_error(
      [] {
        (void)L::Conv3D(2, 4)(tf::ones({1, 3, 5, 5, 1}));
      },
      {"conv3d", "effective depth 4", "exceeds the input depth 3"});
  require_error([] { L::Conv3DTranspose(2, 3, {.strides = 2, .output_padding = L::Size3(2)}); },
                {"[Conv3DTranspose]",
                 "output_padding (2, 2, 2) must be non-negative and less than "
                 "strides (2, 2, 2)"});
  require_error([] { L::Conv3DTranspose(2, 3, {.strides = 2, .dilation_rate = 2}); },
                {"[Conv3DTranspose]", "strides > 1 together with dilation_rate > 1"});
  require_error(
      [] {
        (void)L::Conv3DTranspose(2, 3)(tf::ones({1, 4, 4, 2}));
      },
      {"(Conv3DTranspose) needs NDHWC inputs of rank 5"});
  require_error([] { L::MaxPooling3D(0); }, {"[MaxPooling3D]", "pool_size must be positive"});
  require_error([] { L::AveragePooling3D(2, L::Size3(1, 0, 1)); },
                {"[AveragePooling3D]", "strides must be positive"});
  require_error([] { L::MaxPooling3D(2, std::nullopt, "causal"); }, {"padding", "causal"});
  require_error(
      [] {
        (void)L::MaxPooling3D()(tf::ones({1, 4, 4, 2}));
      },
      {"needs NDHWC inputs of rank 5"});
  require_error([] { L::GlobalMaxPooling3D("channels_middle"); },
                {"data_format", "channels_middle"});
  require_error([] { (void)L::GlobalAveragePooling3D()(tf::ones({2, 3, 3})); }, {"rank 5"});
  require_error([] { L::UpSampling3D({2, 0, 1}); }, {"[UpSampling3D]", "size must be positive"});
  require_error([] { L::ZeroPadding3D({1, -1, 0}); }, {"[ZeroPadding3D]", "cannot be negative"});
  require_error(
      [] {
        (void)L::Cropping3D({1, 2, 0})(tf::ones({1, 3, 4, 3, 1}));
      },
      {"(Cropping3D)", "must be smaller", "axis 2", "(None, 3, 4, 3, 1)"});
}

TEST_CASE("a 3-D conv model trains and a traced call equals eager", "[cpu][keras]") {
  tf::random::set_seed(3);
  K::Sequential model(
      {L::Conv3D(4, 3, {.padding = "same", .activation = "relu", .input_shape = {6, 6, 6, 1}}),
       L::MaxPooling3D(2), L::Conv3D(4, 2, {.groups = 2}), L::UpSampling3D({1, 2, 2}),
       L::ZeroPadding3D({{0, 1}, {0, 0}, {1, 0}}), L::Cropping3D({{1, 0}, {0, 0}, {0, 1}}),
       L::AveragePooling3D(2, std::nullopt, "same"),
       L::Conv3DTranspose(4, 2, {.strides = {1, 2, 1}}), L::GlobalAveragePooling3D()});
  CHECK(model.output_shape() == tf::TensorShape({tf::None, 4}));
  const tf::Tensor x = tf::random::normal({16, 6, 6, 6, 1}, 0, 1, tf::float32, 1);
  const tf::Tensor y = tf::random::normal({16, 4}, 0, 0.5, tf::float32, 2);
  model.compile(K::optimizers::Adam(1e-2), K::losses::MeanSquaredError());
  const auto h = model.fit(x, y, {.epochs = 12, .batch_size = 8, .verbose = 0});
  const auto& loss = h.history.at("loss");
  CHECK(loss.back() < 0.9 * loss.front());
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 6, 6, 6, 1})};
  auto f = tf::function([&](const tf::Tensor& in) { return model(in); }, opts);
  tf::testing::check_close(f(x), model(x), 1e-6, 1e-6);
  const tf::Tensor part = tf::slice(x, {0, 0, 0, 0, 0}, {3, 6, 6, 6, 1});
  tf::testing::check_close(f(part), model(part), 1e-6, 1e-6);
}

TEST_CASE("Conv3D and Conv3DTranspose with channels_first equal the transposed channels_last",
          "[cpu][cuda][keras]") {
  // Keras 3.15 keeps the kernel layout (kd, kh, kw, in, out) for both data formats, so the same
  // weights give the same numbers on transposed inputs.
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor x = tf::random::normal({2, 4, 5, 6, 7}, 0, 1, tf::float32, 5);  // NCDHW
    const tf::Tensor x_last = tf::transpose(x, {0, 2, 3, 4, 1});
    struct Case {
      L::Conv3D first, last;
    };
    std::vector<Case> convs;
    convs.push_back(
        {L::Conv3D(6, {2, 3, 2}, {.data_format = "channels_first"}), L::Conv3D(6, {2, 3, 2})});
    convs.push_back(
        {L::Conv3D(4, 3,
                   {.strides = 2,
                    .padding = "same",
                    .data_format = "channels_first",
                    .groups = 2,
                    .activation = "relu"}),
         L::Conv3D(4, 3, {.strides = 2, .padding = "same", .groups = 2, .activation = "relu"})});
    for (Case& c : convs) {
      c.first.build({tf::None, 4, 5, 6, 7});
      c.last.build({tf::None, 5, 6, 7, 4});
      c.first.set_weights(c.last.get_weights());
      CHECK(c.first.impl().compute_output_shape({tf::None, 4, 5, 6, 7}) == [&] {
        const tf::TensorShape l = c.last.impl().compute_output_shape({tf::None, 5, 6, 7, 4});
        return tf::TensorShape({l[0], l[4], l[1], l[2], l[3]});
      }());
      tf::GradientTape tape({.persistent = true});
      tape.watch(x);
      tape.watch(x_last);
      const tf::Tensor y_first = c.first(x);
      const tf::Tensor y_last = c.last(x_last);
      tf::testing::check_close(y_first, tf::transpose(y_last, {0, 4, 1, 2, 3}), 1e-5, 1e-5);
      const tf::Tensor g_first = tape.gradient(tf::reduce_sum(tf::square(y_first)), x);
      const tf::Tensor g_last = tape.gradient(tf::reduce_sum(tf::square(y_last)), x_last);
      tf::testing::check_close(g_first, tf::transpose(g_last, {0, 4, 1, 2, 3}), 1e-4, 1e-4);
    }
    L::Conv3DTranspose tf_first(3, 3,
                                {.strides = 2, .padding = "same", .data_format = "channels_first"});
    L::Conv3DTranspose tf_last(3, 3, 2, "same");
    tf_first.build({tf::None, 4, 5, 6, 7});
    tf_last.build({tf::None, 5, 6, 7, 4});
    tf_first.set_weights(tf_last.get_weights());
    const tf::Tensor t_first = tf_first(x);
    CHECK(t_first.shape() == tf::TensorShape({2, 3, 10, 12, 14}));
    tf::testing::check_close(t_first, tf::transpose(tf_last(x_last), {0, 4, 1, 2, 3}), 1e-5, 1e-5);
    tf::testing::require_error(
        [&] {
          (void)tf_first(tf::ones({1, 5, 5, 6, 7}));
        },
        {"expected axis 1 of input shape to have value 4"});
  }
}
