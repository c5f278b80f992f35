// Depthwise, separable and grouped 2-D convolution (NHWC activations), as TF's
// tf.nn.depthwise_conv2d (DepthwiseConv2dNative and its two backprop ops),
// tf.nn.separable_conv2d and tf.nn.conv2d with filters whose depth divides the input's.
// Depthwise convolution has its own primitives (direct CPU and CUDA kernels: its arithmetic is
// too thin for oneDNN/cuDNN's general convolution to pay); grouped convolution and
// separable_conv2d are composites of conv2d and depthwise_conv2d.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ops/dynamic_shape.h"
#include "ops/primitive.h"

namespace tapeflow::nn {

// input (N, H, W, C), filter (KH, KW, C, M) of one floating dtype -> (N, OH, OW, C * M): output
// channel c * M + m is input channel c convolved with filter[:, :, c, m]. strides and dilations:
// 1, 2 or 4 values as conv2d's; padding "SAME" or "VALID". data_format "NCHW" (input and output
// (N, C, H, W), 4-value strides in that order) runs between two transposes.
Tensor depthwise_conv2d(const Tensor& input, const Tensor& filter, const std::vector<int>& strides,
                        const std::string& padding, const std::vector<int>& dilations = {1},
                        const std::string& data_format = "NHWC");
// Explicit padding, TF's [[0, 0], [top, bottom], [left, right], [0, 0]] given as
// {{top, bottom}, {left, right}} (non-negative), whatever the data_format.
Tensor depthwise_conv2d(const Tensor& input, const Tensor& filter, const std::vector<int>& strides,
                        const std::vector<std::pair<int, int>>& explicit_padding,
                        const std::vector<int>& dilations = {1},
                        const std::string& data_format = "NHWC");
// depthwise_conv2d(input, depthwise_filter, strides, padding, dilations) followed by a 1x1
// conv2d with pointwise_filter (1, 1, C * M, O), as TF's tf.nn.separable_conv2d; data_format as
// depthwise_conv2d's.
Tensor separable_conv2d(const Tensor& input, const Tensor& depthwise_filter,
                        const Tensor& pointwise_filter, const std::vector<int>& strides,
                        const std::string& padding, const std::vector<int>& dilations = {1},
                        const std::string& data_format = "NHWC");
// conv2d whose filters (KH, KW, C / G, O) see G groups of C / G input channels, each group
// giving O / G output channels (TF's tf.nn.conv2d when the filter depth divides the input's,
// Keras' Conv2D(groups=G)). G = C / filters' depth must divide O. With G = 1 this is conv2d.
Tensor grouped_conv2d(const Tensor& input, const Tensor& filters, const std::vector<int>& strides,
                      const std::string& padding, const std::vector<int>& dilations = {1});

}  // namespace tapeflow::nn

namespace tapeflow::detail {

// The window of a depthwise convolution: strides, dilations and either TF's SAME padding
// (computed from the input size when the op runs) or explicit pads (VALID: all zero).
struct DepthwiseWindow {
  int stride_h = 1, stride_w = 1, dilation_h = 1, dilation_w = 1;
  bool same = false;
  int64_t pad_top = 0, pad_bottom = 0, pad_left = 0, pad_right = 0;  // when !same
  std::string to_string() const;
};

// The geometry of one call, with the pads resolved.
struct DepthwiseGeom {
  int64_t n, h, w, c, m;   // input (n, h, w, c), filter (kh, kw, c, m)
  int64_t kh, kw, oh, ow;  // output (n, oh, ow, c * m)
  int64_t sh, sw, dh, dw;
  int64_t pt, pl;  // padding before (top, left); the pads after only shape oh and ow
};
DepthwiseGeom depthwise_geometry(const DepthwiseWindow& win, const TensorShape& input,
                                 const TensorShape& filter);

// The gradients of depthwise_conv2d (single primitives; linear in both of their inputs).
Tensor depthwise_conv2d_backprop_input(const TensorShape& input_shape, const Tensor& filter,
                                       const Tensor& dy, const DepthwiseWindow& win);
// The same with the input's shape from `input` (read when the op runs in a trace for None
// dimensions).
Tensor depthwise_conv2d_backprop_input(const ShapeSource& input, const Tensor& filter,
                                       const Tensor& dy, const DepthwiseWindow& win);
Tensor depthwise_conv2d_backprop_filter(const Tensor& input, const TensorShape& filter_shape,
                                        const Tensor& dy, const DepthwiseWindow& win);

}  // namespace tapeflow::detail

namespace tapeflow::prims {

// input (N, H, W, C) and filter (KH, KW, C, M) -> (N, OH, OW, C * M).
struct DepthwiseConv2D final : PrimitiveBase<DepthwiseConv2D> {
  detail::DepthwiseWindow win;
  explicit DepthwiseConv2D(detail::DepthwiseWindow w) : win(std::move(w)) {}
  const char* name() const override { return "depthwise_conv2d"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return save_input(0) | save_input(1); }
  std::string attributes() const override { return win.to_string(); }
};

// filter (KH, KW, C, M) and dy (N, OH, OW, C * M) -> dx of input_shape (N, H, W, C)
// (TF's DepthwiseConv2dNativeBackpropInput). With `from` other than attribute, a third input
// (the forward input) gives input_shape's None dimensions when the op runs (detail::ShapeFrom).
struct DepthwiseConv2DBackpropInput final : PrimitiveBase<DepthwiseConv2DBackpropInput> {
  TensorShape input_shape;  // tf::None dims come from filter and dy
  detail::DepthwiseWindow win;
  detail::ShapeFrom from;
  DepthwiseConv2DBackpropInput(TensorShape s, detail::DepthwiseWindow w,
                               detail::ShapeFrom f = detail::ShapeFrom::attribute)
      : input_shape(std::move(s)), win(std::move(w)), from(f) {}
  const char* name() const override { return "depthwise_conv2d_backprop_input"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return save_input(0) | save_input(1); }
  std::string attributes() const override;
};

// input (N, H, W, C) and dy (N, OH, OW, C * M) -> dfilter of filter_shape (KH, KW, C, M)
// (TF's DepthwiseConv2dNativeBackpropFilter).
struct DepthwiseConv2DBackpropFilter final : PrimitiveBase<DepthwiseConv2DBackpropFilter> {
  TensorShape filter_shape;
  detail::DepthwiseWindow win;
  DepthwiseConv2DBackpropFilter(TensorShape s, detail::DepthwiseWindow w)
      : filter_shape(std::move(s)), win(std::move(w)) {}
  const char* name() const override { return "depthwise_conv2d_backprop_filter"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return save_input(0) | save_input(1); }
  std::string attributes() const override;
};

}  // namespace tapeflow::prims
