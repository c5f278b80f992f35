// Gradient kernels of conv2d and pooling, as TF's Conv2DBackpropInput, Conv2DBackpropFilter,
// MaxPoolGrad, MaxPoolGradGrad and AvgPoolGrad: NHWC activations, HWIO filters, the forward op's
// strides, dilations, window and SAME/VALID padding (TF's asymmetric SAME padding included). They
// are primitives (so the vjps of Conv2D/MaxPool2D/AvgPool2D are single ops) and have vjps of their
// own where the op is linear, so second-order gradients work. Floating dtypes only.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "ops/dynamic_shape.h"
#include "ops/primitive.h"

namespace tapeflow::prims {

// filters (KH, KW, C / G, O) and dy (N, OH, OW, O) -> dx of input_shape (N, H, W, C): conv2d's
// gradient with respect to its input (the transposed convolution), G = groups as in Conv2D.
// Linear in filters and dy. With `from` other than attribute, a third input (the forward input)
// gives input_shape's None dimensions when the op runs (detail::ShapeFrom); a None height or
// width left is dy's times the stride plus `extra` (a transposed convolution's length,
// detail::transposed_extra), the batch and channels come from dy and filters.
struct Conv2DBackpropInput final : PrimitiveBase<Conv2DBackpropInput> {
  TensorShape input_shape;  // the forward input's shape
  int stride_h, stride_w, dilation_h, dilation_w;
  bool same;
  int groups;
  detail::ShapeFrom from;
  std::array<int64_t, 2> extra;
  Conv2DBackpropInput(TensorShape in, int sh, int sw, int dh, int dw, bool s, int g = 1,
                      detail::ShapeFrom f = detail::ShapeFrom::attribute,
                      std::array<int64_t, 2> e = {0, 0})
      : input_shape(std::move(in)),
        stride_h(sh),
        stride_w(sw),
        dilation_h(dh),
        dilation_w(dw),
        same(s),
        groups(g),
        from(f),
        extra(e) {}
  const char* name() const override { return "conv2d_backprop_input"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return save_input(0) | save_input(1); }
  std::string attributes() const override;
};

// input (N, H, W, C) and dy (N, OH, OW, O) -> dfilters of filter_shape (KH, KW, C / G, O):
// conv2d's gradient with respect to its filters, G = groups as in Conv2D. Linear in input and dy.
struct Conv2DBackpropFilter final : PrimitiveBase<Conv2DBackpropFilter> {
  TensorShape filter_shape;  // the forward filters' shape; tf::None dims come from input and dy
  int stride_h, stride_w, dilation_h, dilation_w;
  bool same;
  int groups;
  Conv2DBackpropFilter(TensorShape fs, int sh, int sw, int dh, int dw, bool s, int g = 1)
      : filter_shape(std::move(fs)),
        stride_h(sh),
        stride_w(sw),
        dilation_h(dh),
        dilation_w(dw),
        same(s),
        groups(g) {}
  const char* name() const override { return "conv2d_backprop_filter"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return save_input(0) | save_input(1); }
  std::string attributes() const override;
};

// input (N, H, W, C) and dy (N, OH, OW, C) -> dx (N, H, W, C): each dy element goes to the FIRST
// maximal valid element of its window in row-major (h, w) order (TF's CPU rule for ties; a NaN
// first element wins, as the forward kernel's `max < v` comparison keeps it), and overlapping
// windows add up. Its vjp gives zeros for the input (piecewise constant) and, for dy, gathers
// the cotangent at each window's argmax (MaxPool2DGradGrad).
struct MaxPool2DGrad final : PrimitiveBase<MaxPool2DGrad> {
  int k_h, k_w, stride_h, stride_w;
  bool same;
  MaxPool2DGrad(int kh, int kw, int sh, int sw, bool s)
      : k_h(kh), k_w(kw), stride_h(sh), stride_w(sw), same(s) {}
  const char* name() const override { return "max_pool2d_grad"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return save_input(0); }
  std::string attributes() const override;
};

// input (N, H, W, C) and g (N, H, W, C) -> (N, OH, OW, C): g at each window's argmax, by
// MaxPool2DGrad's rule (TF's MaxPoolGradGrad): max_pool2d_grad's gradient with respect to dy.
// Linear in g (its vjp is MaxPool2DGrad), piecewise constant in the input.
struct MaxPool2DGradGrad final : PrimitiveBase<MaxPool2DGradGrad> {
  int k_h, k_w, stride_h, stride_w;
  bool same;
  MaxPool2DGradGrad(int kh, int kw, int sh, int sw, bool s)
      : k_h(kh), k_w(kw), stride_h(sh), stride_w(sw), same(s) {}
  const char* name() const override { return "max_pool2d_grad_grad"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return save_input(0); }
  std::string attributes() const override;
};

// dy (N, OH, OW, C) -> dx of input_shape (N, H, W, C): each dy element divided by its window's
// count of valid (non-padded) elements, as avg_pool2d divides, spread over that window. Linear.
// With `from` other than attribute, a second input (the forward input) gives input_shape's None
// dimensions when the op runs (detail::ShapeFrom).
struct AvgPool2DGrad final : PrimitiveBase<AvgPool2DGrad> {
  TensorShape input_shape;
  int k_h, k_w, stride_h, stride_w;
  bool same;
  detail::ShapeFrom from;
  AvgPool2DGrad(TensorShape in, int kh, int kw, int sh, int sw, bool s,
                detail::ShapeFrom f = detail::ShapeFrom::attribute)
      : input_shape(std::move(in)),
        k_h(kh),
        k_w(kw),
        stride_h(sh),
        stride_w(sw),
        same(s),
        from(f) {}
  const char* name() const override { return "avg_pool2d_grad"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return 0; }
  std::string attributes() const override;
};

}  // namespace tapeflow::prims

namespace tapeflow::detail {

// The gradient ops through dispatch (so tapes record them), with the attributes of the forward
// primitive whose gradient they compute.
Tensor conv2d_backprop_input(const TensorShape& input_shape, const Tensor& filters,
                             const Tensor& dy, int stride_h, int stride_w, int dilation_h,
                             int dilation_w, bool same, int groups = 1,
                             std::array<int64_t, 2> extra = {0, 0});
// The same with the input's shape from `input` (detail::shape_source: read when the op runs in a
// trace for None dimensions).
Tensor conv2d_backprop_input(const ShapeSource& input, const Tensor& filters, const Tensor& dy,
                             int stride_h, int stride_w, int dilation_h, int dilation_w, bool same,
                             int groups = 1);
Tensor conv2d_backprop_filter(const Tensor& input, const TensorShape& filter_shape,
                              const Tensor& dy, int stride_h, int stride_w, int dilation_h,
                              int dilation_w, bool same, int groups = 1);
Tensor max_pool2d_grad(const Tensor& input, const Tensor& dy, int k_h, int k_w, int stride_h,
                       int stride_w, bool same);
Tensor avg_pool2d_grad(const TensorShape& input_shape, const Tensor& dy, int k_h, int k_w,
                       int stride_h, int stride_w, bool same);
Tensor avg_pool2d_grad(const ShapeSource& input, const Tensor& dy, int k_h, int k_w, int stride_h,
                       int stride_w, bool same);

}  // namespace tapeflow::detail
