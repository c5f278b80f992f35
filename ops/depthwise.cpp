#include "ops/depthwise.h"

#include <array>
#include <climits>

#include "core/check.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/helpers.h"
#include "ops/movement.h"
#include "ops/nn.h"

namespace tapeflow {

namespace {

bool known(int64_t d) {
  return d != None;
}
int64_t known_or(int64_t a, int64_t b) {
  return a != None ? a : b;
}

// 1, 2 or 4 values (TF's forms) -> {height, width}, as conv2d's.
std::array<int, 2> parse_hw(const char* op, const char* what, const std::vector<int>& v) {
  std::array<int, 2> hw{};
  if (v.size() == 1) {
    hw = {v[0], v[0]};
  } else if (v.size() == 2) {
    hw = {v[0], v[1]};
  } else if (v.size() == 4) {
    TF_CHECK_ARG(v[0] == 1 && v[3] == 1, op,
                 "{} {} must be 1 in the batch and channel dimensions (NHWC)", what,
                 detail::vec_to_string(v));
    hw = {v[1], v[2]};
  } else {
    TF_THROW(InvalidArgumentError, op, "{} must have 1, 2 or 4 values, got {}", what,
             detail::vec_to_string(v));
  }
  TF_CHECK_ARG(hw[0] >= 1 && hw[1] >= 1, op, "{} must be positive, got {}", what,
               detail::vec_to_string(v));
  return hw;
}

// Output size along one dimension, TF's formula; negative sizes are TF's error.
int64_t out_size(const char* op, int64_t in, int64_t k, int64_t stride, int64_t dilation, bool same,
                 int64_t pad_before, int64_t pad_after) {
  if (!known(in)) return None;
  if (same)
    return detail::window_dim(in, k, static_cast<int>(stride), static_cast<int>(dilation), true)
        .out;
  const int64_t eff = (k - 1) * dilation + 1;
  const int64_t span = in + pad_before + pad_after - eff;
  TF_CHECK_ARG(span >= 0, op,
               "Computed output size would be negative: {} [input_size: {}, "
               "effective_filter_size: {}, stride: {}, padding: {} + {}]",
               span / stride, in, eff, stride, pad_before, pad_after);
  return span / stride + 1;
}

void check_window(const char* op, const detail::DepthwiseWindow& w) {
  TF_CHECK_ARG(w.stride_h >= 1 && w.stride_w >= 1 && w.dilation_h >= 1 && w.dilation_w >= 1, op,
               "strides and dilations must be positive, got {}", w.to_string());
  TF_CHECK_ARG(w.pad_top >= 0 && w.pad_bottom >= 0 && w.pad_left >= 0 && w.pad_right >= 0, op,
               "explicit paddings must be non-negative, got {}", w.to_string());
}

void check_rank4(const char* op, const char* what, const TensorShape& s) {
  TF_CHECK_ARG(s.rank() == 4, op, "{} must be 4-dimensional: {}", what, s.to_string());
}

// Checks input (N, H, W, C), filter (KH, KW, C, M) and, when given, dy against each other;
// returns the forward output's shape.
TensorShape check_shapes(const char* op, const detail::DepthwiseWindow& w, const TensorShape& xs,
                         const TensorShape& fs, const TensorShape* dys) {
  check_window(op, w);
  check_rank4(op, "input", xs);
  check_rank4(op, "filter", fs);
  TF_CHECK_ARG(!known(xs[3]) || !known(fs[2]) || xs[3] == fs[2], op,
               "input and filter must have the same depth: {} vs {} (input {}, filter {})", xs[3],
               fs[2], xs.to_string(), fs.to_string());
  TF_CHECK_ARG(fs[0] >= 1 && fs[1] >= 1, op, "filter must have a positive height and width, got {}",
               fs.to_string());
  TF_CHECK_ARG(fs[3] != 0, op, "filter's channel multiplier must not be 0, got filter {}",
               fs.to_string());
  const int64_t oh =
      out_size(op, xs[1], fs[0], w.stride_h, w.dilation_h, w.same, w.pad_top, w.pad_bottom);
  const int64_t ow =
      out_size(op, xs[2], fs[1], w.stride_w, w.dilation_w, w.same, w.pad_left, w.pad_right);
  const int64_t c = known_or(xs[3], fs[2]);
  const int64_t oc = known(c) && known(fs[3]) ? c * fs[3] : None;
  TensorShape out{xs[0], oh, ow, oc};
  if (dys != nullptr) {
    check_rank4(op, "dy", *dys);
    for (int i = 0; i < 4; ++i) {
      TF_CHECK_ARG(!known(out[i]) || !known((*dys)[i]) || out[i] == (*dys)[i], op,
                   "dy has shape {}, but an input {} and filter {} give outputs of shape {}",
                   dys->to_string(), xs.to_string(), fs.to_string(), out.to_string());
    }
  }
  return out;
}

}  // namespace

namespace detail {

std::string DepthwiseWindow::to_string() const {
  std::string pad =
      same ? "SAME"
      : (pad_top || pad_bottom || pad_left || pad_right)
          ? fmt::format("[[{}, {}], [{}, {}]]", pad_top, pad_bottom, pad_left, pad_right)
          : "VALID";
  return fmt::format("strides=[{}, {}], dilations=[{}, {}], padding={}", stride_h, stride_w,
                     dilation_h, dilation_w, pad);
}

DepthwiseGeom depthwise_geometry(const DepthwiseWindow& win, const TensorShape& xs,
                                 const TensorShape& fs) {
  DepthwiseGeom g{};
  g.n = xs[0], g.h = xs[1], g.w = xs[2], g.c = xs[3];
  g.kh = fs[0], g.kw = fs[1], g.m = fs[3];
  g.sh = win.stride_h, g.sw = win.stride_w, g.dh = win.dilation_h, g.dw = win.dilation_w;
  if (win.same) {
    const auto h = window_dim(g.h, g.kh, win.stride_h, win.dilation_h, true);
    const auto w = window_dim(g.w, g.kw, win.stride_w, win.dilation_w, true);
    g.oh = h.out, g.ow = w.out, g.pt = h.pad_before, g.pl = w.pad_before;
  } else {
    g.pt = win.pad_top, g.pl = win.pad_left;
    const int64_t sh = g.h + win.pad_top + win.pad_bottom - ((g.kh - 1) * g.dh + 1);
    const int64_t sw = g.w + win.pad_left + win.pad_right - ((g.kw - 1) * g.dw + 1);
    g.oh = sh < 0 ? 0 : sh / g.sh + 1;
    g.ow = sw < 0 ? 0 : sw / g.sw + 1;
  }
  return g;
}

Tensor depthwise_conv2d_backprop_input(const TensorShape& input_shape, const Tensor& filter,
                                       const Tensor& dy, const DepthwiseWindow& win) {
  return dispatch(prims::DepthwiseConv2DBackpropInput(input_shape, win), {filter, dy});
}

Tensor depthwise_conv2d_backprop_input(const ShapeSource& input, const Tensor& filter,
                                       const Tensor& dy, const DepthwiseWindow& win) {
  return dispatch(prims::DepthwiseConv2DBackpropInput(input.shape, win, input.from),
                  input.with({filter, dy}));
}

Tensor depthwise_conv2d_backprop_filter(const Tensor& input, const TensorShape& filter_shape,
                                        const Tensor& dy, const DepthwiseWindow& win) {
  return dispatch(prims::DepthwiseConv2DBackpropFilter(filter_shape, win), {input, dy});
}

}  // namespace detail

// ---------------------------------------------------------------- primitives
namespace prims {

void DepthwiseConv2D::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const char* op = name();
  check_rank4(op, "input", in[0].shape());
  check_rank4(op, "filter", in[1].shape());
  detail::check_float_pair(op, "input", in[0], "filter", in[1]);
  out[0] = {check_shapes(op, win, in[0].shape(), in[1].shape(), nullptr), in[0].dtype()};
}

// dx = backprop_input(f, dy), df = backprop_filter(x, dy): TF's two native backprop ops.
std::vector<Tensor> DepthwiseConv2D::vjp(std::span<const Tensor> primals,
                                         std::span<const Tensor> cotangents,
                                         std::span<const int> argnums,
                                         std::span<const Tensor>) const {
  const Tensor& x = primals[0];
  const Tensor& f = primals[1];
  std::vector<Tensor> grads;
  for (int a : argnums) {
    if (a == 0)
      grads.push_back(
          detail::depthwise_conv2d_backprop_input(detail::shape_source(x), f, cotangents[0], win));
    else
      grads.push_back(detail::depthwise_conv2d_backprop_filter(x, f.shape(), cotangents[0], win));
  }
  return grads;
}

void DepthwiseConv2DBackpropInput::infer(std::span<const Tensor> in,
                                         std::span<TensorMeta> out) const {
  const char* op = name();
  const Tensor& f = in[0];
  const Tensor& dy = in[1];
  check_rank4(op, "input_shape", input_shape);
  const TensorShape xs = detail::resolve_input_shape(op, input_shape, from, in);
  check_rank4(op, "filter", f.shape());
  detail::check_float_pair(op, "filter", f, "dy", dy);
  check_shapes(op, win, xs, f.shape(), &dy.shape());
  out[0] = {
      TensorShape{known_or(xs[0], dy.shape()[0]), xs[1], xs[2], known_or(xs[3], f.shape()[2])},
      f.dtype()};
}

std::string DepthwiseConv2DBackpropInput::attributes() const {
  return fmt::format("input_shape={}, {}{}", input_shape.to_string(), win.to_string(),
                     detail::shape_from_text(from));
}

// Linear in both inputs: <G, dx(f, dy)> = <dy, dwconv(G, f)> = <f, backprop_filter(G, dy)>.
std::vector<Tensor> DepthwiseConv2DBackpropInput::vjp(std::span<const Tensor> primals,
                                                      std::span<const Tensor> cotangents,
                                                      std::span<const int> argnums,
                                                      std::span<const Tensor>) const {
  const Tensor& f = primals[0];
  const Tensor& dy = primals[1];
  const Tensor& g = cotangents[0];
  std::vector<Tensor> grads;
  for (int a : argnums) {
    if (a == 0)
      grads.push_back(detail::depthwise_conv2d_backprop_filter(g, f.shape(), dy, win));
    else if (a == 1)
      grads.push_back(detail::dispatch(DepthwiseConv2D(win), {g, f}));
    else
      grads.emplace_back();  // the forward input gives only its shape
  }
  return grads;
}

void DepthwiseConv2DBackpropFilter::infer(std::span<const Tensor> in,
                                          std::span<TensorMeta> out) const {
  const char* op = name();
  const Tensor& x = in[0];
  const Tensor& dy = in[1];
  check_rank4(op, "input", x.shape());
  check_rank4(op, "filter_shape", filter_shape);
  detail::check_float_pair(op, "input", x, "dy", dy);
  check_shapes(op, win, x.shape(), filter_shape, &dy.shape());
  const TensorShape& fs = filter_shape;
  const int64_t c = known_or(fs[2], x.shape()[3]);
  int64_t m = fs[3];
  if (!known(m) && known(c) && c > 0 && known(dy.shape()[3])) m = dy.shape()[3] / c;
  out[0] = {TensorShape{fs[0], fs[1], c, m}, x.dtype()};
}

std::string DepthwiseConv2DBackpropFilter::attributes() const {
  return fmt::format("filter_shape={}, {}", filter_shape.to_string(), win.to_string());
}

// Linear in both inputs: <G, df(x, dy)> = <x, backprop_input(G, dy)> = <dy, dwconv(x, G)>.
std::vector<Tensor> DepthwiseConv2DBackpropFilter::vjp(std::span<const Tensor> primals,
                                                       std::span<const Tensor> cotangents,
                                                       std::span<const int> argnums,
                                                       std::span<const Tensor>) const {
  const Tensor& x = primals[0];
  const Tensor& dy = primals[1];
  const Tensor& g = cotangents[0];
  std::vector<Tensor> grads;
  for (int a : argnums) {
    if (a == 0)
      grads.push_back(detail::depthwise_conv2d_backprop_input(detail::shape_source(x), g, dy, win));
    else
      grads.push_back(detail::dispatch(DepthwiseConv2D(win), {x, g}));
  }
  return grads;
}

}  // namespace prims

// ---------------------------------------------------------------- frontends
namespace nn {

namespace {
Tensor depthwise_impl(const char* op, const Tensor& input, const Tensor& filter,
                      const std::vector<int>& strides, const std::vector<int>& dilations,
                      detail::DepthwiseWindow win) {
  TF_CHECK_ARG(input.defined() && filter.defined(), op,
               "an input is an undefined tensor (TF's None)");
  const auto s = parse_hw(op, "strides", strides);
  const auto d = parse_hw(op, "dilations", dilations);
  win.stride_h = s[0], win.stride_w = s[1], win.dilation_h = d[0], win.dilation_w = d[1];
  return detail::dispatch(prims::DepthwiseConv2D(win), {input, filter});
}
}  // namespace

Tensor depthwise_conv2d(const Tensor& input, const Tensor& filter, const std::vector<int>& strides,
                        const std::string& padding, const std::vector<int>& dilations,
                        const std::string& data_format) {
  const char* op = "depthwise_conv2d";
  if (detail::parse_channels_first(op, data_format, "NHWC", "NCHW"))
    return detail::move_channels_first(
        depthwise_conv2d(detail::move_channels_last(op, input, 4, "NCHW"), filter,
                         detail::spatial_values(op, "strides", strides, 2, "NCHW"), padding,
                         detail::spatial_values(op, "dilations", dilations, 2, "NCHW")));
  TF_CHECK_ARG(padding == "SAME" || padding == "VALID", op,
               "padding must be \"SAME\" or \"VALID\" (or explicit pads), got \"{}\"", padding);
  detail::DepthwiseWindow win;
  win.same = padding == "SAME";
  return depthwise_impl(op, input, filter, strides, dilations, win);
}

Tensor depthwise_conv2d(const Tensor& input, const Tensor& filter, const std::vector<int>& strides,
                        const std::vector<std::pair<int, int>>& explicit_padding,
                        const std::vector<int>& dilations, const std::string& data_format) {
  const char* op = "depthwise_conv2d";
  if (detail::parse_channels_first(op, data_format, "NHWC", "NCHW"))
    return detail::move_channels_first(depthwise_conv2d(
        detail::move_channels_last(op, input, 4, "NCHW"), filter,
        detail::spatial_values(op, "strides", strides, 2, "NCHW"), explicit_padding,
        detail::spatial_values(op, "dilations", dilations, 2, "NCHW")));
  TF_CHECK_ARG(explicit_padding.size() == 2, op,
               "explicit padding must give {{top, bottom}} and {{left, right}}, got {} pairs",
               explicit_padding.size());
  detail::DepthwiseWindow win;
  win.pad_top = explicit_padding[0].first, win.pad_bottom = explicit_padding[0].second;
  win.pad_left = explicit_padding[1].first, win.pad_right = explicit_padding[1].second;
  return depthwise_impl(op, input, filter, strides, dilations, win);
}

Tensor separable_conv2d(const Tensor& input, const Tensor& depthwise_filter,
                        const Tensor& pointwise_filter, const std::vector<int>& strides,
                        const std::string& padding, const std::vector<int>& dilations,
                        const std::string& data_format) {
  const char* op = "separable_conv2d";
  if (detail::parse_channels_first(op, data_format, "NHWC", "NCHW"))
    return detail::move_channels_first(separable_conv2d(
        detail::move_channels_last(op, input, 4, "NCHW"), depthwise_filter, pointwise_filter,
        detail::spatial_values(op, "strides", strides, 2, "NCHW"), padding,
        detail::spatial_values(op, "dilations", dilations, 2, "NCHW")));
  TF_CHECK_ARG(input.defined() && depthwise_filter.defined() && pointwise_filter.defined(), op,
               "an input is an undefined tensor (TF's None)");
  const TensorShape& ds = depthwise_filter.shape();
  const TensorShape& ps = pointwise_filter.shape();
  TF_CHECK_ARG(ds.rank() == 4 && ps.rank() == 4, op,
               "depthwise_filter and pointwise_filter must be 4-dimensional, got {} and {}",
               ds.to_string(), ps.to_string());
  TF_CHECK_ARG(ps[0] == 1 && ps[1] == 1, op,
               "pointwise_filter must be 1x1 (1, 1, C * M, O), got {}", ps.to_string());
  TF_CHECK_ARG(!known(ds[2]) || !known(ds[3]) || !known(ps[2]) || ps[2] == ds[2] * ds[3], op,
               "pointwise_filter {} must have in_channels * channel_multiplier = {} * {} input "
               "channels (depthwise_filter {})",
               ps.to_string(), ds[2], ds[3], ds.to_string());
  return detail::naming_errors(op, [&] {
    const Tensor depthwise = depthwise_conv2d(input, depthwise_filter, strides, padding, dilations);
    return conv2d(depthwise, pointwise_filter, {1}, "VALID");
  });
}

Tensor grouped_conv2d(const Tensor& input, const Tensor& filters, const std::vector<int>& strides,
                      const std::string& padding, const std::vector<int>& dilations) {
  const char* op = "conv2d";
  TF_CHECK_ARG(input.defined() && filters.defined(), op,
               "an input is an undefined tensor (TF's None)");
  const TensorShape& xs = input.shape();
  const TensorShape& fs = filters.shape();
  TF_CHECK_ARG(xs.rank() == 4 && fs.rank() == 4, op,
               "input and filters must be rank 4 (NHWC and HWIO), got {} and {}", xs.to_string(),
               fs.to_string());
  TF_CHECK_ARG(known(xs[3]) && known(fs[2]) && known(fs[3]), op,
               "grouped convolution needs known channel sizes, got input {} and filters {}",
               xs.to_string(), fs.to_string());
  TF_CHECK_ARG(fs[2] > 0 && xs[3] >= fs[2] && xs[3] % fs[2] == 0, op,
               "input depth must be a positive multiple of the filter depth: {} vs {} (input {}, "
               "filters {})",
               xs[3], fs[2], xs.to_string(), fs.to_string());
  const int64_t groups = xs[3] / fs[2];
  if (groups == 1) return conv2d(input, filters, strides, padding, dilations);
  TF_CHECK_ARG(fs[3] % groups == 0, op,
               "the filters' {} output channels must be divisible by the {} groups (input {}, "
               "filters {})",
               fs[3], groups, xs.to_string(), fs.to_string());
  // One input channel per group is a depthwise convolution: output channel o = c * M + m of
  // group c is filter[:, :, 0, o], which is the depthwise filter[:, :, c, m] after a reshape.
  if (fs[2] == 1)
    return detail::naming_errors(op, [&] {
      return depthwise_conv2d(input, reshape(filters, {fs[0], fs[1], groups, fs[3] / groups}),
                              strides, padding, dilations);
    });
  // One Conv2D primitive with the group count: oneDNN and cuDNN run every group in one call.
  TF_CHECK_ARG(groups <= INT_MAX, op, "{} groups exceed the 32-bit group count (input {})", groups,
               xs.to_string());
  return detail::conv2d_with_groups(input, filters, strides, padding, dilations,
                                    static_cast<int>(groups));
}

}  // namespace nn

}  // namespace tapeflow
