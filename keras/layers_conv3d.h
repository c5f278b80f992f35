// 3-D convolution, pooling and shaping layers (Keras 3.15's Conv3D, MaxPooling3D,
// AveragePooling3D, GlobalAveragePooling3D, GlobalMaxPooling3D, UpSampling3D, ZeroPadding3D,
// Cropping3D, Conv3DTranspose), channels_last (batch, depth, height, width, channels) inputs
// (or channels_first (batch, channels, depth, height, width) with data_format),
// through tf::nn::conv3d / conv3d_transpose / max_pool3d / avg_pool3d (ops/conv3d.h). See
// docs/keras.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "keras/layers.h"
#include "keras/layers_misc.h"
#include "keras/layers_more.h"

namespace tapeflow::keras::layers {

// Keras' int or (depth, height, width) triple.
struct Size3 {
  int d = 1, h = 1, w = 1;
  Size3(int all) : d(all), h(all), w(all) {}  // NOLINT(google-explicit-constructor): Keras' ints
  Size3(int depth, int height, int width) : d(depth), h(height), w(width) {}
};

struct Conv3DOptions {
  Size3 strides = 1;
  std::string padding = "valid";  // "valid" or "same", any case
  std::string data_format = "";   // "" or "channels_last" (NDHWC), or "channels_first" (NCDHW)
  // Keras forbids strides > 1 together with dilation_rate > 1.
  Size3 dilation_rate = 1;
  // Grouped convolution: kernel (kd, kh, kw, in / groups, filters); groups divides both.
  int groups = 1;
  std::string activation = "";
  bool use_bias = true;
  Initializer kernel_initializer = {};  // glorot_uniform
  Initializer bias_initializer = {};    // zeros
  Regularizer kernel_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};
  Constraint bias_constraint = {};
  std::vector<int64_t> input_shape = {};  // (D, H, W, C), builds at construction
  std::string name = "";
};

// 3-D convolution of NDHWC inputs: kernel (kd, kh, kw, in_channels / groups, filters), bias
// (filters,), as Keras'.
//   Conv3D(16, 3)  Conv3D(16, {3, 3, 1}, 2, "same", "relu")  Conv3D(8, 3, {.groups = 2})
class Conv3D : public Layer {
 public:
  Conv3D(int64_t filters, Size3 kernel_size) : Conv3D(filters, kernel_size, Conv3DOptions{}) {}
  template <class St>
  requires std::is_convertible_v<St, Size3> Conv3D(int64_t filters, Size3 kernel_size, St&& strides,
                                                   std::string padding = "valid",
                                                   std::string activation = "")
      : Conv3D(filters, kernel_size,
               Conv3DOptions{.strides = Size3(std::forward<St>(strides)),
                             .padding = std::move(padding),
                             .activation = std::move(activation)}) {}
  Conv3D(int64_t filters, Size3 kernel_size, Conv3DOptions options);
  Variable kernel() const;
  Variable bias() const;
};

struct Conv3DTransposeOptions {
  Size3 strides = 1;
  std::string padding = "valid";  // "valid" or "same", any case
  // Extra slices at the back/bottom/right of the output (each less than the stride); none:
  // Keras' default output size (below).
  std::optional<Size3> output_padding = std::nullopt;
  std::string data_format = "";  // "" or "channels_last" (NDHWC), or "channels_first" (NCDHW)
  Size3 dilation_rate = 1;
  std::string activation = "";
  bool use_bias = true;
  Initializer kernel_initializer = {};  // glorot_uniform
  Initializer bias_initializer = {};    // zeros
  Regularizer kernel_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};
  Constraint bias_constraint = {};
  std::vector<int64_t> input_shape = {};  // (D, H, W, C), builds at construction
  std::string name = "";
};

// Transposed 3-D convolution of NDHWC inputs through tf::nn::conv3d_transpose; kernel
// (kd, kh, kw, filters, in_channels) as Keras'. Each output size is Keras':
// in * stride + max(k - stride, 0) with "valid" and in * stride with "same" (k the dilated
// kernel size), or (in - 1) * stride + k - 2 * pad + output_padding when output_padding is given
// (pad = k / 2 with "same", 0 with "valid").
//   Conv3DTranspose(8, 3, 2, "same")  Conv3DTranspose(1, {2, 4, 4}, {.strides = {1, 2, 2}})
class Conv3DTranspose : public Layer {
 public:
  Conv3DTranspose(int64_t filters, Size3 kernel_size)
      : Conv3DTranspose(filters, kernel_size, Conv3DTransposeOptions{}) {}
  template <class St>
  requires std::is_convertible_v<St, Size3> Conv3DTranspose(int64_t filters, Size3 kernel_size,
                                                            St&& strides,
                                                            std::string padding = "valid",
                                                            std::string activation = "")
      : Conv3DTranspose(filters, kernel_size,
                        Conv3DTransposeOptions{.strides = Size3(std::forward<St>(strides)),
                                               .padding = std::move(padding),
                                               .activation = std::move(activation)}) {}
  Conv3DTranspose(int64_t filters, Size3 kernel_size, Conv3DTransposeOptions options);
  Variable kernel() const;
  Variable bias() const;
};

// Pooling over NDHWC windows; strides default to the pool size (Keras'). SAME windows take the
// maximum / mean of their valid elements.
struct Pooling3DOptions {
  std::optional<Size3> strides = std::nullopt;  // the pool size
  std::string padding = "valid";                // "valid" or "same", any case
  std::string data_format = "";  // "" or "channels_last" (NDHWC), or "channels_first" (NCDHW)
  std::string name = "";
};
//   MaxPooling3D(2)  MaxPooling3D(2, {.data_format = "channels_first"})
class MaxPooling3D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit MaxPooling3D(Size3 pool_size = 2, std::optional<Size3> strides = std::nullopt,
                        std::string padding = "valid", std::string name = "")
      : MaxPooling3D(pool_size, Pooling3DOptions{.strides = strides,
                                                 .padding = std::move(padding),
                                                 .name = std::move(name)}) {}
  MaxPooling3D(Size3 pool_size, Pooling3DOptions options);
};
class AveragePooling3D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit AveragePooling3D(Size3 pool_size = 2, std::optional<Size3> strides = std::nullopt,
                            std::string padding = "valid", std::string name = "")
      : AveragePooling3D(pool_size, Pooling3DOptions{.strides = strides,
                                                     .padding = std::move(padding),
                                                     .name = std::move(name)}) {}
  AveragePooling3D(Size3 pool_size, Pooling3DOptions options);
};

// The mean or maximum over depth, height and width (axes 1-3, or 2-4 with channels_first);
// keepdims keeps them with size 1. GlobalPoolingOptions is keras/layers_more.h's.
class GlobalAveragePooling3D : public Layer {
 public:
  GlobalAveragePooling3D() : GlobalAveragePooling3D(GlobalPoolingOptions{}) {}
  explicit GlobalAveragePooling3D(std::string data_format, bool keepdims = false)
      : GlobalAveragePooling3D(
            GlobalPoolingOptions{.data_format = std::move(data_format), .keepdims = keepdims}) {}
  explicit GlobalAveragePooling3D(GlobalPoolingOptions options);
};
class GlobalMaxPooling3D : public Layer {
 public:
  GlobalMaxPooling3D() : GlobalMaxPooling3D(GlobalPoolingOptions{}) {}
  explicit GlobalMaxPooling3D(std::string data_format, bool keepdims = false)
      : GlobalMaxPooling3D(
            GlobalPoolingOptions{.data_format = std::move(data_format), .keepdims = keepdims}) {}
  explicit GlobalMaxPooling3D(GlobalPoolingOptions options);
};

// Repeats each depth slice size.d times, each row size.h times and each column size.w times of
// NDHWC inputs with known depth, height, width and channels (Keras' repeat along each axis).
// UpSampling3D(2, {.data_format = "channels_first"}) repeats NCDHW inputs.
class UpSampling3D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit UpSampling3D(Size3 size = 2, std::string name = "")
      : UpSampling3D(size, FormatOptions{.name = std::move(name)}) {}
  UpSampling3D(Size3 size, FormatOptions options);
};

// The amounts for depth, height and width: one int for all six sides, {depth, height, width}
// (each at both ends), or {{front, back}, {top, bottom}, {left, right}}, as Keras' int, triple
// or triple of pairs.
struct Sides3D {
  Sides1D depth = 0, height = 0, width = 0;
  Sides3D(int64_t all)  // NOLINT(google-explicit-constructor): Keras' int
      : depth(all), height(all), width(all) {}
  Sides3D(Sides1D d, Sides1D h, Sides1D w) : depth(d), height(h), width(w) {}
};

// Zeros around the depth, height and width of NDHWC inputs:
//   ZeroPadding3D()  ZeroPadding3D({1, 2, 0})  ZeroPadding3D({{1, 0}, {0, 2}, {1, 1}})
class ZeroPadding3D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit ZeroPadding3D(Sides3D padding = 1, std::string name = "")
      : ZeroPadding3D(padding, FormatOptions{.name = std::move(name)}) {}
  // data_format "channels_first": NCDHW inputs.
  ZeroPadding3D(Sides3D padding, FormatOptions options);
  // Braced triples: overloads of their own, as ZeroPadding2D's.
  template <class = void>
  explicit ZeroPadding3D(const int64_t (&padding)[3], std::string name = "")
      : ZeroPadding3D(padding, FormatOptions{.name = std::move(name)}) {}
  ZeroPadding3D(const int64_t (&padding)[3], FormatOptions options)
      : ZeroPadding3D(Sides3D(padding[0], padding[1], padding[2]), std::move(options)) {}
  template <class = void>
  explicit ZeroPadding3D(const int64_t (&padding)[3][2], std::string name = "")
      : ZeroPadding3D(padding, FormatOptions{.name = std::move(name)}) {}
  ZeroPadding3D(const int64_t (&padding)[3][2], FormatOptions options)
      : ZeroPadding3D(Sides3D({padding[0][0], padding[0][1]}, {padding[1][0], padding[1][1]},
                              {padding[2][0], padding[2][1]}),
                      std::move(options)) {}
};
// Removes slices at the borders of the depth, height and width of NDHWC inputs; cropping a
// whole dimension (or more) is an InvalidArgumentError, as Keras' ValueError.
//   Cropping3D(1)  Cropping3D({{1, 1}, {2, 0}, {0, 1}})
class Cropping3D : public Layer {
 public:
  template <class = void>  // see FormatOptions
  explicit Cropping3D(Sides3D cropping = 1, std::string name = "")
      : Cropping3D(cropping, FormatOptions{.name = std::move(name)}) {}
  // data_format "channels_first": NCDHW inputs.
  Cropping3D(Sides3D cropping, FormatOptions options);
  template <class = void>
  explicit Cropping3D(const int64_t (&cropping)[3], std::string name = "")
      : Cropping3D(cropping, FormatOptions{.name = std::move(name)}) {}
  Cropping3D(const int64_t (&cropping)[3], FormatOptions options)
      : Cropping3D(Sides3D(cropping[0], cropping[1], cropping[2]), std::move(options)) {}
  template <class = void>
  explicit Cropping3D(const int64_t (&cropping)[3][2], std::string name = "")
      : Cropping3D(cropping, FormatOptions{.name = std::move(name)}) {}
  Cropping3D(const int64_t (&cropping)[3][2], FormatOptions options)
      : Cropping3D(Sides3D({cropping[0][0], cropping[0][1]}, {cropping[1][0], cropping[1][1]},
                           {cropping[2][0], cropping[2][1]}),
                   std::move(options)) {}
};

}  // namespace tapeflow::keras::layers
