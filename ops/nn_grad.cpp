#include "ops/nn_grad.h"

#include "core/check.h"
#include "ops/dispatch.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/nn.h"

namespace tapeflow {

namespace {

bool dims_match(int64_t a, int64_t b) {
  return a == None || b == None || a == b;
}
int64_t known_or(int64_t a, int64_t b) {
  return a != None ? a : b;
}

bool shapes_match(const TensorShape& a, const TensorShape& b) {
  if (a.rank() != b.rank()) return false;
  for (int i = 0; i < a.rank(); ++i)
    if (!dims_match(a[i], b[i])) return false;
  return true;
}

// The forward op's output size along one spatial dimension (None when unknown); a VALID window
// larger than the input is an error, as in the forward op.
int64_t forward_out(const char* op, const char* dim, int64_t in, int64_t k, int stride,
                    int dilation, bool same, const TensorShape& input) {
  if (!same && in != None) {
    const int64_t eff = (k - 1) * dilation + 1;
    TF_CHECK_ARG(in >= eff, op,
                 "the window's effective {} {} (size {}, dilation {}) exceeds the input {} {} "
                 "with VALID padding (input is {})",
                 dim, eff, k, dilation, dim, in, input.to_string());
  }
  return detail::window_dim(in, k, stride, dilation, same).out;
}

void check_window(const char* op, int sh, int sw, int dh, int dw) {
  TF_CHECK_ARG(sh >= 1 && sw >= 1, op, "strides must be positive, got [{}, {}]", sh, sw);
  TF_CHECK_ARG(dh >= 1 && dw >= 1, op, "dilations must be positive, got [{}, {}]", dh, dw);
}

void check_rank4(const char* op, const char* what, const TensorShape& s, const char* layout) {
  TF_CHECK_ARG(s.rank() == 4, op, "{} must be rank 4 ({}), got shape {}", what, layout,
               s.to_string());
}

// Shared by both convolution gradients: xs (N, H, W, C) and fs (KH, KW, C / groups, O) against
// dy.
void check_conv_shapes(const char* op, const TensorShape& xs, const TensorShape& fs,
                       const TensorShape& ys, int sh, int sw, int dh, int dw, bool same,
                       int groups) {
  detail::check_conv_groups(op, xs, fs, groups);
  TF_CHECK_ARG(fs[0] >= 1 && fs[1] >= 1, op, "filters must have a positive size, got {}",
               fs.to_string());
  const int64_t oh = forward_out(op, "height", xs[1], fs[0], sh, dh, same, xs);
  const int64_t ow = forward_out(op, "width", xs[2], fs[1], sw, dw, same, xs);
  const TensorShape want{xs[0], oh, ow, fs[3]};
  TF_CHECK_ARG(shapes_match(ys, want), op,
               "dy shape {} does not match the conv2d output shape {} of input {} and filters {}",
               ys.to_string(), want.to_string(), xs.to_string(), fs.to_string());
}

void check_pool_shapes(const char* op, const TensorShape& xs, const TensorShape& ys, int kh, int kw,
                       int sh, int sw, bool same) {
  TF_CHECK_ARG(kh >= 1 && kw >= 1, op, "ksize must be positive, got [{}, {}]", kh, kw);
  check_window(op, sh, sw, 1, 1);
  const int64_t oh = forward_out(op, "height", xs[1], kh, sh, 1, same, xs);
  const int64_t ow = forward_out(op, "width", xs[2], kw, sw, 1, same, xs);
  const TensorShape want{xs[0], oh, ow, xs[3]};
  TF_CHECK_ARG(shapes_match(ys, want), op,
               "dy shape {} does not match the pooling output shape {} of input {}", ys.to_string(),
               want.to_string(), xs.to_string());
}

const char* padding_name(bool same) {
  return same ? "SAME" : "VALID";
}

}  // namespace

// ---------------------------------------------------------------- primitives
namespace prims {

void Conv2DBackpropInput::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const char* op = name();
  const Tensor& f = in[0];
  const Tensor& dy = in[1];
  check_window(op, stride_h, stride_w, dilation_h, dilation_w);
  check_rank4(op, "input_shape", input_shape, "NHWC");
  TensorShape xs = detail::resolve_input_shape(op, input_shape, from, in);
  const int strides[2] = {stride_h, stride_w};
  detail::fill_transposed_lengths(xs, dy.shape(), strides, extra);
  check_rank4(op, "filters", f.shape(), "HWIO");
  check_rank4(op, "dy", dy.shape(), "NHWC");
  detail::check_float_pair(op, "filters", f, "dy", dy);
  check_conv_shapes(op, xs, f.shape(), dy.shape(), stride_h, stride_w, dilation_h, dilation_w, same,
                    groups);
  const int64_t fc = f.shape()[2];
  out[0] = {TensorShape{known_or(xs[0], dy.shape()[0]), xs[1], xs[2],
                        known_or(xs[3], fc == None ? None : fc * groups)},
            f.dtype()};
}

std::string Conv2DBackpropInput::attributes() const {
  return fmt::format("input_shape={}, strides=[{}, {}], dilations=[{}, {}], padding={}{}{}",
                     input_shape.to_string(), stride_h, stride_w, dilation_h, dilation_w,
                     padding_name(same), detail::conv_groups_attribute(groups),
                     detail::shape_from_text(from)) +
         detail::transposed_extra_text(input_shape, from == detail::ShapeFrom::attribute, extra);
}

// Linear in both inputs: <G, dx(f, dy)> = <dy, conv2d(G, f)> = <f, backprop_filter(G, dy)>.
std::vector<Tensor> Conv2DBackpropInput::vjp(std::span<const Tensor> primals,
                                             std::span<const Tensor> cotangents,
                                             std::span<const int> argnums,
                                             std::span<const Tensor>) const {
  const Tensor& f = primals[0];
  const Tensor& dy = primals[1];
  const Tensor& g = cotangents[0];
  std::vector<Tensor> grads;
  for (int a : argnums) {
    if (a == 0)
      grads.push_back(detail::conv2d_backprop_filter(g, f.shape(), dy, stride_h, stride_w,
                                                     dilation_h, dilation_w, same, groups));
    else if (a == 2)
      grads.emplace_back();  // the forward input gives only its shape
    else
      // (Filters without elements: Conv2D refuses them, and dy has no dependence on them.)
      grads.push_back(
          f.num_elements() == 0
              ? zeros_like(dy)
              : detail::dispatch(Conv2D(stride_h, stride_w, dilation_h, dilation_w, same, groups),
                                 {g, f}));
  }
  return grads;
}

void Conv2DBackpropFilter::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const char* op = name();
  const Tensor& x = in[0];
  const Tensor& dy = in[1];
  check_window(op, stride_h, stride_w, dilation_h, dilation_w);
  check_rank4(op, "input", x.shape(), "NHWC");
  check_rank4(op, "filter_shape", filter_shape, "HWIO");
  check_rank4(op, "dy", dy.shape(), "NHWC");
  detail::check_float_pair(op, "input", x, "dy", dy);
  check_conv_shapes(op, x.shape(), filter_shape, dy.shape(), stride_h, stride_w, dilation_h,
                    dilation_w, same, groups);
  const TensorShape& fs = filter_shape;
  const int64_t xc = x.shape()[3];
  TF_CHECK_ARG(xc == None || xc % groups == 0, op,
               "input depth {} must be divisible by the {} groups (input is {})", xc, groups,
               x.shape().to_string());
  out[0] = {TensorShape{fs[0], fs[1], known_or(fs[2], xc == None ? None : xc / groups),
                        known_or(fs[3], dy.shape()[3])},
            x.dtype()};
}

std::string Conv2DBackpropFilter::attributes() const {
  return fmt::format("filter_shape={}, strides=[{}, {}], dilations=[{}, {}], padding={}{}",
                     filter_shape.to_string(), stride_h, stride_w, dilation_h, dilation_w,
                     padding_name(same), detail::conv_groups_attribute(groups));
}

// Linear in both inputs: <G, df(x, dy)> = <x, backprop_input(G, dy)> = <dy, conv2d(x, G)>.
std::vector<Tensor> Conv2DBackpropFilter::vjp(std::span<const Tensor> primals,
                                              std::span<const Tensor> cotangents,
                                              std::span<const int> argnums,
                                              std::span<const Tensor>) const {
  const Tensor& x = primals[0];
  const Tensor& dy = primals[1];
  const Tensor& g = cotangents[0];
  std::vector<Tensor> grads;
  for (int a : argnums) {
    if (a == 0)
      grads.push_back(detail::conv2d_backprop_input(detail::shape_source(x), g, dy, stride_h,
                                                    stride_w, dilation_h, dilation_w, same,
                                                    groups));
    else
      grads.push_back(
          g.num_elements() == 0
              ? zeros_like(dy)
              : detail::dispatch(Conv2D(stride_h, stride_w, dilation_h, dilation_w, same, groups),
                                 {x, g}));
  }
  return grads;
}

void MaxPool2DGrad::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const char* op = name();
  const Tensor& x = in[0];
  const Tensor& dy = in[1];
  check_rank4(op, "input", x.shape(), "NHWC");
  check_rank4(op, "dy", dy.shape(), "NHWC");
  detail::check_float_pair(op, "input", x, "dy", dy);
  check_pool_shapes(op, x.shape(), dy.shape(), k_h, k_w, stride_h, stride_w, same);
  out[0] = {x.shape(), x.dtype()};
}

std::string MaxPool2DGrad::attributes() const {
  return detail::pool_attributes(k_h, k_w, stride_h, stride_w, same);
}

std::vector<Tensor> MaxPool2DGrad::vjp(std::span<const Tensor> primals,
                                       std::span<const Tensor> cotangents,
                                       std::span<const int> argnums,
                                       std::span<const Tensor>) const {
  std::vector<Tensor> grads;
  for (int a : argnums) {
    // The routing changes only where the argmax changes: zero almost everywhere. Linear in dy:
    // its transpose gathers the cotangent at each window's argmax.
    if (a == 0)
      grads.push_back(zeros_like(cotangents[0]));
    else
      grads.push_back(detail::dispatch(MaxPool2DGradGrad(k_h, k_w, stride_h, stride_w, same),
                                       {primals[0], cotangents[0]}));
  }
  return grads;
}

void MaxPool2DGradGrad::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const char* op = name();
  const Tensor& x = in[0];
  const Tensor& g = in[1];
  check_rank4(op, "input", x.shape(), "NHWC");
  detail::check_float_pair(op, "input", x, "grad", g);
  TF_CHECK_ARG(shapes_match(x.shape(), g.shape()), op, "input and grad shapes differ: {} and {}",
               x.shape().to_string(), g.shape().to_string());
  TF_CHECK_ARG(k_h >= 1 && k_w >= 1, op, "ksize must be positive, got [{}, {}]", k_h, k_w);
  check_window(op, stride_h, stride_w, 1, 1);
  const TensorShape& xs = x.shape();
  const int64_t oh = forward_out(op, "height", xs[1], k_h, stride_h, 1, same, xs);
  const int64_t ow = forward_out(op, "width", xs[2], k_w, stride_w, 1, same, xs);
  out[0] = {TensorShape{xs[0], oh, ow, xs[3]}, x.dtype()};
}

std::string MaxPool2DGradGrad::attributes() const {
  return detail::pool_attributes(k_h, k_w, stride_h, stride_w, same);
}

std::vector<Tensor> MaxPool2DGradGrad::vjp(std::span<const Tensor> primals,
                                           std::span<const Tensor> cotangents,
                                           std::span<const int> argnums,
                                           std::span<const Tensor>) const {
  std::vector<Tensor> grads;
  for (int a : argnums) {
    if (a == 0)
      grads.push_back(zeros_like(primals[0]));
    else
      grads.push_back(detail::dispatch(MaxPool2DGrad(k_h, k_w, stride_h, stride_w, same),
                                       {primals[0], cotangents[0]}));
  }
  return grads;
}

void AvgPool2DGrad::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const char* op = name();
  const Tensor& dy = in[0];
  check_rank4(op, "input_shape", input_shape, "NHWC");
  const TensorShape xs = detail::resolve_input_shape(op, input_shape, from, in);
  check_rank4(op, "dy", dy.shape(), "NHWC");
  TF_CHECK_ARG(is_floating(dy.dtype()), op,
               "expects float16, bfloat16, float32 or float64 tensors, got {}",
               dtype_name(dy.dtype()));
  check_pool_shapes(op, xs, dy.shape(), k_h, k_w, stride_h, stride_w, same);
  out[0] = {
      TensorShape{known_or(xs[0], dy.shape()[0]), xs[1], xs[2], known_or(xs[3], dy.shape()[3])},
      dy.dtype()};
}

std::string AvgPool2DGrad::attributes() const {
  return "input_shape=" + input_shape.to_string() + ", " +
         detail::pool_attributes(k_h, k_w, stride_h, stride_w, same) +
         detail::shape_from_text(from);
}

// Linear in dy, and the transpose of avg_pool2d: its vjp is avg_pool2d itself.
std::vector<Tensor> AvgPool2DGrad::vjp(std::span<const Tensor>, std::span<const Tensor> cotangents,
                                       std::span<const int> argnums,
                                       std::span<const Tensor>) const {
  std::vector<Tensor> grads;
  for (int a : argnums)
    grads.push_back(
        a == 0 ? detail::dispatch(AvgPool2D(k_h, k_w, stride_h, stride_w, same), {cotangents[0]})
               : Tensor());  // the forward input gives only its shape
  return grads;
}

}  // namespace prims

// ---------------------------------------------------------------- helpers
namespace detail {

Tensor conv2d_backprop_input(const TensorShape& input_shape, const Tensor& filters,
                             const Tensor& dy, int stride_h, int stride_w, int dilation_h,
                             int dilation_w, bool same, int groups, std::array<int64_t, 2> extra) {
  return dispatch(prims::Conv2DBackpropInput(input_shape, stride_h, stride_w, dilation_h,
                                             dilation_w, same, groups, ShapeFrom::attribute, extra),
                  {filters, dy});
}

Tensor conv2d_backprop_input(const ShapeSource& input, const Tensor& filters, const Tensor& dy,
                             int stride_h, int stride_w, int dilation_h, int dilation_w, bool same,
                             int groups) {
  return dispatch(prims::Conv2DBackpropInput(input.shape, stride_h, stride_w, dilation_h,
                                             dilation_w, same, groups, input.from),
                  input.with({filters, dy}));
}

Tensor conv2d_backprop_filter(const Tensor& input, const TensorShape& filter_shape,
                              const Tensor& dy, int stride_h, int stride_w, int dilation_h,
                              int dilation_w, bool same, int groups) {
  return dispatch(prims::Conv2DBackpropFilter(filter_shape, stride_h, stride_w, dilation_h,
                                              dilation_w, same, groups),
                  {input, dy});
}

Tensor max_pool2d_grad(const Tensor& input, const Tensor& dy, int k_h, int k_w, int stride_h,
                       int stride_w, bool same) {
  return dispatch(prims::MaxPool2DGrad(k_h, k_w, stride_h, stride_w, same), {input, dy});
}

Tensor avg_pool2d_grad(const TensorShape& input_shape, const Tensor& dy, int k_h, int k_w,
                       int stride_h, int stride_w, bool same) {
  return avg_pool2d_grad(ShapeSource{input_shape, ShapeFrom::attribute, Tensor()}, dy, k_h, k_w,
                         stride_h, stride_w, same);
}

Tensor avg_pool2d_grad(const ShapeSource& input, const Tensor& dy, int k_h, int k_w, int stride_h,
                       int stride_w, bool same) {
  return dispatch(prims::AvgPool2DGrad(input.shape, k_h, k_w, stride_h, stride_w, same, input.from),
                  input.with({dy}));
}

}  // namespace detail

}  // namespace tapeflow
