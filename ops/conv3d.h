// 3-D convolution and pooling (NDHWC inputs, DHWIO filters, "SAME" or "VALID" padding), as TF's
// tf.nn.conv3d, tf.nn.conv3d_transpose, tf.nn.max_pool3d and tf.nn.avg_pool3d.
//  - conv3d is one primitive (prims::Conv3D) with two gradient primitives, each linear in its
//    inputs (so gradients of any order are single ops). CPU: oneDNN's 3-D convolutions for
//    float32 (float16/bfloat16 through float32 copies); float64 and CUDA fold the depth taps
//    into channels (the KD input planes each output depth reads, gathered side by side) and run
//    the Conv2D primitive's kernels (cuDNN on a GPU) on that, then unfold the gradients.
//    conv3d_transpose is Conv3DBackpropInput.
//  - The pools are composites of the 2-D ops (ops/nn.h) with gather/pad/reduce along the depth,
//    so they run on every device and differentiate through those ops' gradients.
#pragma once

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "ops/dynamic_shape.h"
#include "ops/primitive.h"

namespace tapeflow::nn {

// input (N, D, H, W, C) and filters (KD, KH, KW, C / G, O) of one floating dtype
// -> (N, OD, OH, OW, O). strides and dilations: 1, 3 or 5 values (TF's 5-vector has 1s in the
// batch and channel places). Strides above 1 together with dilations above 1 are refused, as
// TF/Keras do. Filters whose depth divides the input's are a grouped convolution (G groups,
// G must divide O), as conv2d's. SAME pads each dimension as TF: the odd extra at the end.
// D, H and W must be known (the batch may be tf::None in a trace).
// data_format "NCDHW" (input and output (N, C, D, H, W), 5-value strides and dilations in that
// order) runs between two transposes; the filters are DHWIO in both.
Tensor conv3d(const Tensor& input, const Tensor& filters, const std::vector<int>& strides,
              const std::string& padding, const std::vector<int>& dilations = {1},
              const std::string& data_format = "NDHWC");
// TF's tf.nn.conv3d_transpose: the gradient of conv3d with respect to its input, as a forward
// op. filters are (KD, KH, KW, out_channels, in_channels), as TF's; output_shape is the NDHWC
// output shape (depth, height and width known), which a conv3d with these filters, strides,
// padding and dilations must map back to the input's depth, height and width (else an
// InvalidArgumentError naming both). One Conv3DBackpropInput. data_format "NCDHW": input and
// output_shape (N, C, D, H, W), between two transposes. A depth, height or width of tf::None is
// Keras' default length, as for nn::conv2d_transpose.
Tensor conv3d_transpose(const Tensor& input, const Tensor& filters, const TensorShape& output_shape,
                        const std::vector<int>& strides, const std::string& padding = "SAME",
                        const std::vector<int>& dilations = {1},
                        const std::string& data_format = "NDHWC");
// ksize and strides: 1, 3 or 5 values, as conv3d's strides. SAME windows ignore the padding:
// max_pool3d takes the maximum of the valid elements and avg_pool3d divides by their count, as
// TF. Both pool each depth slice in 2-D (ops/nn.h) and then combine the depth window (a box
// window's valid count is the product of its per-dimension counts, so the depth average of the
// 2-D averages over the valid depth slices is TF's average). data_format "NCDHW" runs between
// two transposes.
Tensor max_pool3d(const Tensor& input, const std::vector<int>& ksize,
                  const std::vector<int>& strides, const std::string& padding,
                  const std::string& data_format = "NDHWC");
Tensor avg_pool3d(const Tensor& input, const std::vector<int>& ksize,
                  const std::vector<int>& strides, const std::string& padding,
                  const std::string& data_format = "NDHWC");

}  // namespace tapeflow::nn

namespace tapeflow::detail {

// The window of a 3-D convolution: strides and dilations (depth, height, width), SAME or VALID
// padding (TF's: the odd extra at the end), groups (filters (KD, KH, KW, C / groups, O)).
struct Conv3DWindow {
  std::array<int, 3> strides{1, 1, 1};
  std::array<int, 3> dilations{1, 1, 1};
  bool same = false;
  int groups = 1;
  // "strides=[1, 1, 1], dilations=[1, 1, 1], padding=SAME" (", groups=G" for groups).
  std::string to_string() const;
};

// The depth folding of x (N, D, H, W, C) and filters (KD, KH, KW, C / G, O) that the float64 and
// CUDA kernels run (defined in ops/cuda/conv3d_element.h, which the kernels include).
struct Conv3DFold;
Conv3DFold conv3d_fold(const Conv3DWindow& win, const TensorShape& x, const TensorShape& f);

// nn::conv3d_transpose with Keras' output_padding (per spatial dimension), which sets the length
// of a None depth, height or width of output_shape (transposed_extra).
Tensor conv3d_transpose(const Tensor& input, const Tensor& filters, const TensorShape& output_shape,
                        const std::vector<int>& strides, const std::string& padding,
                        const std::vector<int>& dilations, const std::string& data_format,
                        std::optional<std::array<int, 3>> output_padding);

}  // namespace tapeflow::detail

namespace tapeflow::prims {

// input (N, D, H, W, C) and filters (KD, KH, KW, C / G, O) of one floating dtype
// -> (N, OD, OH, OW, O), G = win.groups (nn::conv3d checks its arguments first).
struct Conv3D final : PrimitiveBase<Conv3D> {
  detail::Conv3DWindow win;
  explicit Conv3D(detail::Conv3DWindow w) : win(w) {}
  const char* name() const override { return "conv3d"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  // Conv3DBackpropInput / Conv3DBackpropFilter; each needs the other input.
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return save_input(0) | save_input(1); }
  std::string attributes() const override;
};

// filters (KD, KH, KW, C / G, O) and dy (N, OD, OH, OW, O) -> dx of input_shape (N, D, H, W, C):
// conv3d's gradient with respect to its input (TF's Conv3DBackpropInputV2, and
// conv3d_transpose). Linear in filters and dy. With `from` other than attribute, a third input
// (the forward input) gives input_shape's None dimensions when the op runs (detail::ShapeFrom).
// A None depth, height or width left is dy's times the stride plus `extra` (a transposed
// convolution's length, detail::transposed_extra).
struct Conv3DBackpropInput final : PrimitiveBase<Conv3DBackpropInput> {
  TensorShape input_shape;  // the forward input's; a None batch comes from dy
  detail::Conv3DWindow win;
  detail::ShapeFrom from;
  std::array<int64_t, 3> extra;
  Conv3DBackpropInput(TensorShape s, detail::Conv3DWindow w,
                      detail::ShapeFrom f = detail::ShapeFrom::attribute,
                      std::array<int64_t, 3> e = {0, 0, 0})
      : input_shape(std::move(s)), win(w), from(f), extra(e) {}
  const char* name() const override { return "conv3d_backprop_input"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return save_input(0) | save_input(1); }
  std::string attributes() const override;
};

// input (N, D, H, W, C) and dy (N, OD, OH, OW, O) -> dfilters of filter_shape
// (KD, KH, KW, C / G, O): conv3d's gradient with respect to its filters. Linear in input and dy.
struct Conv3DBackpropFilter final : PrimitiveBase<Conv3DBackpropFilter> {
  TensorShape filter_shape;  // the forward filters' (fully known)
  detail::Conv3DWindow win;
  Conv3DBackpropFilter(TensorShape s, detail::Conv3DWindow w)
      : filter_shape(std::move(s)), win(w) {}
  const char* name() const override { return "conv3d_backprop_filter"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return save_input(0) | save_input(1); }
  std::string attributes() const override;
};

}  // namespace tapeflow::prims
