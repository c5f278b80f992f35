#include "ops/conv3d.h"

#include <algorithm>
#include <array>
#include <optional>

#include "core/check.h"
#include "core/context.h"
#include "ops/binary.h"
#include "ops/cuda/conv3d_element.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::nn {

namespace {

// 1, 3 or 5 values (TF's forms) -> {depth, height, width}.
std::array<int, 3> parse_dhw(const char* op, const char* what, const std::vector<int>& v) {
  std::array<int, 3> dhw{};
  if (v.size() == 1) {
    dhw = {v[0], v[0], v[0]};
  } else if (v.size() == 3) {
    dhw = {v[0], v[1], v[2]};
  } else if (v.size() == 5) {
    TF_CHECK_ARG(v[0] == 1 && v[4] == 1, op,
                 "{} {} must be 1 in the batch and channel dimensions (NDHWC)", what,
                 detail::vec_to_string(v));
    dhw = {v[1], v[2], v[3]};
  } else {
    TF_THROW(InvalidArgumentError, op, "{} must have 1, 3 or 5 values, got {}", what,
             detail::vec_to_string(v));
  }
  TF_CHECK_ARG(dhw[0] >= 1 && dhw[1] >= 1 && dhw[2] >= 1, op, "{} must be positive, got {}", what,
               detail::vec_to_string(v));
  return dhw;
}

bool parse_padding(const char* op, const std::string& padding) {
  TF_CHECK_ARG(padding == "SAME" || padding == "VALID", op,
               "padding must be \"SAME\" or \"VALID\", got \"{}\"", padding);
  return padding == "SAME";
}

// Rank 5, a floating dtype and known depth, height and width (the batch may be None: it is
// folded with the depth through reshapes to -1).
void check_input(const char* op, const Tensor& x) {
  const TensorShape& s = x.shape();
  TF_CHECK_ARG(x.rank() == 5, op, "input must be rank 5 (NDHWC), got shape {}", s.to_string());
  TF_CHECK_ARG(is_floating(x.dtype()), op,
               "expects float16, bfloat16, float32 or float64 tensors, got {} (input is {})",
               dtype_name(x.dtype()), s.to_string());
  TF_CHECK_ARG(s[1] != None && s[2] != None && s[3] != None && s[4] != None, op,
               "needs known depth, height, width and channels, got input shape {}", s.to_string());
}

// The output size of one dimension; a VALID window larger than the input is an error.
int64_t out_size(const char* op, const char* dim, int64_t in, int64_t k, int stride, int dilation,
                 bool same, const TensorShape& input, const std::string& window) {
  const int64_t eff = (k - 1) * dilation + 1;
  TF_CHECK_ARG(same || in >= eff, op,
               "the window's effective {} {} (size {}, dilation {}) exceeds the input {} {} with "
               "VALID padding (input is {}, window {})",
               dim, eff, k, dilation, dim, in, input.to_string(), window);
  return detail::window_dim(in, k, stride, dilation, same).out;
}

enum class Pool { kMax, kAvg };

Tensor pool3d(const char* op, Pool kind, const Tensor& input, const std::vector<int>& ksize,
              const std::vector<int>& strides, const std::string& padding) {
  TF_CHECK_ARG(input.defined(), op, "the input is an undefined tensor (TF's None)");
  const auto k = parse_dhw(op, "ksize", ksize);
  const auto s = parse_dhw(op, "strides", strides);
  const bool same = parse_padding(op, padding);
  check_input(op, input);
  const TensorShape& xs = input.shape();
  // (A string: a huge SAME window's sizes overflow a TensorShape's element count.)
  const std::string window = detail::vec_to_string(k);
  const char* dims[3] = {"depth", "height", "width"};
  // Checks each dimension's window (the pooled tensors below carry the output sizes).
  for (int i = 0; i < 3; ++i) out_size(op, dims[i], xs[1 + i], k[i], s[i], 1, same, xs, window);
  // Each depth slice pooled in 2-D: (N * D, H, W, C) -> (N, D, OH, OW, C) (sizes read when a
  // graph for None dimensions runs).
  const Tensor flat = detail::merge_axes(input, {2, 1, 1, 1});
  const Tensor p2 = kind == Pool::kMax ? max_pool2d(flat, {k[1], k[2]}, {s[1], s[2]}, padding)
                                       : avg_pool2d(flat, {k[1], k[2]}, {s[1], s[2]}, padding);
  const Tensor p = detail::reshape_from(p2, {input, p2}, {{0, 0}, {0, 1}, {1, 1}, {1, 2}, {1, 3}});
  if (k[0] == 1 && s[0] == 1) return p;
  // Then the depth windows: a 2-D pooling of (N, D, 1, OH * OW * C) with a (KD, 1) window, whose
  // SAME windows ignore the padding as the depth's must (the maximum of the valid slices, the
  // average of their 2-D averages).
  const Tensor rows = detail::insert_axes(detail::merge_axes(p, {1, 1, 3}), {2});
  const Tensor q = kind == Pool::kMax ? max_pool2d(rows, {k[0], 1}, {s[0], 1}, padding)
                                      : avg_pool2d(rows, {k[0], 1}, {s[0], 1}, padding);
  return detail::reshape_from(q, {q, p}, {{0, 0}, {0, 1}, {1, 2}, {1, 3}, {1, 4}});
}

}  // namespace

Tensor conv3d(const Tensor& input, const Tensor& filters, const std::vector<int>& strides,
              const std::string& padding, const std::vector<int>& dilations,
              const std::string& data_format) {
  const char* op = "conv3d";
  if (detail::parse_channels_first(op, data_format, "NDHWC", "NCDHW"))
    return detail::move_channels_first(
        conv3d(detail::move_channels_last(op, input, 5, "NCDHW"), filters,
               detail::spatial_values(op, "strides", strides, 3, "NCDHW"), padding,
               detail::spatial_values(op, "dilations", dilations, 3, "NCDHW")));
  TF_CHECK_ARG(input.defined() && filters.defined(), op,
               "an input is an undefined tensor (TF's None)");
  const auto s = parse_dhw(op, "strides", strides);
  const auto dl = parse_dhw(op, "dilations", dilations);
  const bool same = parse_padding(op, padding);
  const bool strided = s[0] > 1 || s[1] > 1 || s[2] > 1;
  const bool dilated = dl[0] > 1 || dl[1] > 1 || dl[2] > 1;
  TF_CHECK_ARG(!(strided && dilated), op,
               "strides {} above 1 cannot be combined with dilations {} above 1",
               detail::vec_to_string(strides), detail::vec_to_string(dilations));
  check_input(op, input);
  const TensorShape &xs = input.shape(), &fs = filters.shape();
  TF_CHECK_ARG(filters.rank() == 5, op,
               "filters must be rank 5 (depth, height, width, in, out), got shape {} (input is {})",
               fs.to_string(), xs.to_string());
  TF_CHECK_ARG(filters.dtype() == input.dtype(), op,
               "input and filters dtypes differ: {} and {} (input is {}, filters {})",
               dtype_name(input.dtype()), dtype_name(filters.dtype()), xs.to_string(),
               fs.to_string());
  TF_CHECK_ARG(fs.is_fully_defined(), op, "filters need a known shape, got {}", fs.to_string());
  TF_CHECK_ARG(fs[0] >= 1 && fs[1] >= 1 && fs[2] >= 1 && fs[3] >= 1 && fs[4] >= 1, op,
               "filters must have a positive size in every dimension, got {}", fs.to_string());
  const int64_t c = xs[4], fc = fs[3], o = fs[4];
  TF_CHECK_ARG(c >= fc && c % fc == 0 && o % (c / fc) == 0, op,
               "input depth {} does not match filter depth {}: input is {}, filters {} (a filter "
               "depth that divides the input's gives groups, whose count must divide the {} "
               "output channels)",
               c, fc, xs.to_string(), fs.to_string(), o);
  const char* dims[3] = {"depth", "height", "width"};
  for (int i = 0; i < 3; ++i)
    out_size(op, dims[i], xs[1 + i], fs[i], s[i], dl[i], same, xs, fs.to_string());
  detail::Conv3DWindow win;
  win.strides = s;
  win.dilations = dl;
  win.same = same;
  win.groups = static_cast<int>(c / fc);
  // A dilation longer than the input: the taps that reach it, as conv2d (not in a trace for
  // None dimensions, where the taps that matter depend on the sizes).
  if (same && !detail::open_shapes()) {
    if (auto trimmed = detail::trim_same_taps(input, filters, s, dl)) {
      win.same = false;
      return detail::dispatch(prims::Conv3D(win), {trimmed->first, trimmed->second});
    }
  }
  return detail::dispatch(prims::Conv3D(win), {input, filters});
}

namespace {
Tensor conv3d_transpose_padded(const Tensor& input, const Tensor& filters,
                               const TensorShape& output_shape, const std::vector<int>& strides,
                               const std::string& padding, const std::vector<int>& dilations,
                               const std::string& data_format,
                               std::optional<std::array<int, 3>> output_padding) {
  const char* op = "conv3d_transpose";
  if (detail::parse_channels_first(op, data_format, "NDHWC", "NCDHW"))
    return detail::move_channels_first(conv3d_transpose_padded(
        detail::move_channels_last(op, input, 5, "NCDHW"), filters,
        detail::channels_last_shape(output_shape),
        detail::spatial_values(op, "strides", strides, 3, "NCDHW"), padding,
        detail::spatial_values(op, "dilations", dilations, 3, "NCDHW"), "NDHWC", output_padding));
  TF_CHECK_ARG(input.defined() && filters.defined(), op,
               "an input is an undefined tensor (TF's None)");
  const auto s = parse_dhw(op, "strides", strides);
  const auto dl = parse_dhw(op, "dilations", dilations);
  const bool same = parse_padding(op, padding);
  TF_CHECK_ARG(std::max({s[0], s[1], s[2]}) == 1 || std::max({dl[0], dl[1], dl[2]}) == 1, op,
               "strides {} above 1 cannot be combined with dilations {} above 1",
               detail::vec_to_string(strides), detail::vec_to_string(dilations));
  check_input(op, input);
  const TensorShape &xs = input.shape(), &fs = filters.shape(), &os = output_shape;
  TF_CHECK_ARG(filters.rank() == 5, op,
               "filters must be (depth, height, width, out_channels, in_channels) of rank 5, got "
               "shape {}",
               fs.to_string());
  TF_CHECK_ARG(filters.dtype() == input.dtype(), op,
               "input and filters dtypes differ: {} and {} (input is {}, filters {})",
               dtype_name(input.dtype()), dtype_name(filters.dtype()), xs.to_string(),
               fs.to_string());
  TF_CHECK_ARG(
      fs.is_fully_defined() && fs[0] >= 1 && fs[1] >= 1 && fs[2] >= 1 && fs[3] >= 1 && fs[4] >= 1,
      op, "filters need a known, positive size in every dimension, got {}", fs.to_string());
  TF_CHECK_ARG(fs[4] == xs[4], op,
               "the input has {} channels but filters {} expect {} (their last dimension)", xs[4],
               fs.to_string(), fs[4]);
  TF_CHECK_ARG(os.rank() == 5, op, "output_shape must be NDHWC of rank 5, got {}", os.to_string());
  TF_CHECK_ARG(os[4] == None || os[4] == fs[3], op,
               "output_shape {} has {} channels but filters {} give {} (their fourth dimension)",
               os.to_string(), os[4], fs.to_string(), fs[3]);
  TF_CHECK_ARG(os[0] == None || xs[0] == None || os[0] == xs[0], op,
               "output_shape {} has batch {} but the input {} has {}", os.to_string(), os[0],
               xs.to_string(), xs[0]);
  const char* dims[3] = {"depth", "height", "width"};
  std::array<int64_t, 3> extra{0, 0, 0};
  for (int i = 0; i < 3; ++i) {
    if (os[1 + i] == None) {  // Keras' length, which the op checks when it runs
      extra[static_cast<size_t>(i)] = detail::transposed_extra(
          fs[i], s[i], dl[i], same,
          output_padding ? std::optional<int>((*output_padding)[static_cast<size_t>(i)])
                         : std::nullopt);
      continue;
    }
    TF_CHECK_ARG(os[1 + i] >= 0, op, "output_shape {} needs a non-negative depth, height and width",
                 os.to_string());
    const int64_t eff = (fs[i] - 1) * dl[i] + 1;
    const int64_t back =
        same || os[1 + i] >= eff ? detail::window_dim(os[1 + i], fs[i], s[i], dl[i], same).out : 0;
    TF_CHECK_ARG(back == xs[1 + i], op,
                 "output_shape {} does not fit the input {}: a conv3d of that output with filters "
                 "{}, strides {}, dilations {} and {} padding gives {} {}, not {}",
                 os.to_string(), xs.to_string(), fs.to_string(), detail::vec_to_string(strides),
                 detail::vec_to_string(dilations), padding, dims[i], back, xs[1 + i]);
  }
  detail::Conv3DWindow win;
  win.strides = s;
  win.dilations = dl;
  win.same = same;
  // The batch always equals the input's: in a trace for None dimensions it is left open, so that
  // one graph serves every batch size.
  TensorShape input_shape = os;
  input_shape[0] = detail::open_shapes() ? None : os[0] != None ? os[0] : xs[0];
  return detail::naming_errors(op, [&] {
    return detail::dispatch(
        prims::Conv3DBackpropInput(input_shape, win, detail::ShapeFrom::attribute, extra),
        {filters, input});
  });
}
}  // namespace

Tensor conv3d_transpose(const Tensor& input, const Tensor& filters, const TensorShape& output_shape,
                        const std::vector<int>& strides, const std::string& padding,
                        const std::vector<int>& dilations, const std::string& data_format) {
  return conv3d_transpose_padded(input, filters, output_shape, strides, padding, dilations,
                                 data_format, std::nullopt);
}

namespace {
Tensor pool3d_format(const char* op, Pool kind, const Tensor& input, const std::vector<int>& ksize,
                     const std::vector<int>& strides, const std::string& padding,
                     const std::string& data_format) {
  if (!detail::parse_channels_first(op, data_format, "NDHWC", "NCDHW"))
    return pool3d(op, kind, input, ksize, strides, padding);
  return detail::move_channels_first(
      pool3d(op, kind, detail::move_channels_last(op, input, 5, "NCDHW"),
             detail::spatial_values(op, "ksize", ksize, 3, "NCDHW"),
             detail::spatial_values(op, "strides", strides, 3, "NCDHW"), padding));
}
}  // namespace

Tensor max_pool3d(const Tensor& input, const std::vector<int>& ksize,
                  const std::vector<int>& strides, const std::string& padding,
                  const std::string& data_format) {
  return pool3d_format("max_pool3d", Pool::kMax, input, ksize, strides, padding, data_format);
}

Tensor avg_pool3d(const Tensor& input, const std::vector<int>& ksize,
                  const std::vector<int>& strides, const std::string& padding,
                  const std::string& data_format) {
  return pool3d_format("avg_pool3d", Pool::kAvg, input, ksize, strides, padding, data_format);
}

}  // namespace tapeflow::nn

namespace tapeflow::detail {

Tensor conv3d_transpose(const Tensor& input, const Tensor& filters, const TensorShape& output_shape,
                        const std::vector<int>& strides, const std::string& padding,
                        const std::vector<int>& dilations, const std::string& data_format,
                        std::optional<std::array<int, 3>> output_padding) {
  return nn::conv3d_transpose_padded(input, filters, output_shape, strides, padding, dilations,
                                     data_format, output_padding);
}

std::string Conv3DWindow::to_string() const {
  return fmt::format("strides=[{}, {}, {}], dilations=[{}, {}, {}], padding={}{}", strides[0],
                     strides[1], strides[2], dilations[0], dilations[1], dilations[2],
                     same ? "SAME" : "VALID", conv_groups_attribute(groups));
}

Conv3DFold conv3d_fold(const Conv3DWindow& win, const TensorShape& x, const TensorShape& f) {
  const WindowDim w = window_dim(x[1], f[0], win.strides[0], win.dilations[0], win.same);
  Conv3DFold g{};
  g.n = x[0], g.d = x[1], g.hw = x[2] * x[3], g.c = x[4], g.groups = win.groups, g.kd = f[0];
  g.od = w.out, g.sd = win.strides[0], g.dd = win.dilations[0], g.pf = w.pad_before;
  return g;
}

}  // namespace tapeflow::detail

namespace tapeflow::prims {

namespace {

bool dims_match(int64_t a, int64_t b) {
  return a == None || b == None || a == b;
}

void check_window(const char* op, const detail::Conv3DWindow& w) {
  for (int i = 0; i < 3; ++i) {
    TF_CHECK_ARG(w.strides[i] >= 1 && w.dilations[i] >= 1, op,
                 "strides and dilations must be positive, got {}", w.to_string());
  }
  TF_CHECK_ARG(w.groups >= 1, op, "groups must be positive, got {}", w.groups);
}

void check_operand(const char* op, const char* what, const TensorShape& s, const char* layout) {
  TF_CHECK_ARG(s.rank() == 5, op, "{} must be rank 5 ({}), got shape {}", what, layout,
               s.to_string());
}

// The forward output shape of input xs (N, D, H, W, C) and filters fs (KD, KH, KW, C / G, O),
// with their channels and windows checked.
TensorShape forward_shape(const char* op, const TensorShape& xs, const TensorShape& fs,
                          const detail::Conv3DWindow& w) {
  check_window(op, w);
  const int g = w.groups;
  TF_CHECK_ARG(xs[4] == None || fs[3] == None || xs[4] == fs[3] * g, op,
               "input depth {} does not match filter depth {}{}: input is {}, filters {}", xs[4],
               fs[3], g == 1 ? std::string() : fmt::format(" times {} groups", g), xs.to_string(),
               fs.to_string());
  TF_CHECK_ARG(fs[4] == None || fs[4] % g == 0, op,
               "the filters' {} output channels must be divisible by the {} groups (input {}, "
               "filters {})",
               fs[4], g, xs.to_string(), fs.to_string());
  const char* dims[3] = {"depth", "height", "width"};
  int64_t out[3];
  for (int i = 0; i < 3; ++i) {
    TF_CHECK_ARG(fs[i] != None && fs[i] >= 1, op, "filters must have a known, positive {}, got {}",
                 dims[i], fs.to_string());
    const int64_t in = xs[1 + i];
    // (An empty dimension has no windows: conv3d_transpose's output may be one.)
    if (!w.same && in != None && in > 0) {
      const int64_t eff = (fs[i] - 1) * w.dilations[i] + 1;
      TF_CHECK_ARG(in >= eff, op,
                   "the window's effective {} {} (size {}, dilation {}) exceeds the input {} {} "
                   "with VALID padding (input is {}, filters {})",
                   dims[i], eff, fs[i], w.dilations[i], dims[i], in, xs.to_string(),
                   fs.to_string());
    }
    out[i] = detail::window_dim(in, fs[i], w.strides[i], w.dilations[i], w.same).out;
  }
  return TensorShape{xs[0], out[0], out[1], out[2], fs[4]};
}

void check_dy(const char* op, const TensorShape& xs, const TensorShape& fs, const TensorShape& ys,
              const detail::Conv3DWindow& w) {
  const TensorShape want = forward_shape(op, xs, fs, w);
  bool match = ys.rank() == 5;
  for (int i = 0; match && i < 5; ++i) match = dims_match(ys[i], want[i]);
  TF_CHECK_ARG(match, op,
               "dy shape {} does not match the conv3d output shape {} of input {} and filters {}",
               ys.to_string(), want.to_string(), xs.to_string(), fs.to_string());
}

}  // namespace

void Conv3D::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const char* op = name();
  check_operand(op, "input", in[0].shape(), "NDHWC");
  check_operand(op, "filters", in[1].shape(), "DHWIO");
  detail::check_float_pair(op, "input", in[0], "filters", in[1]);
  out[0] = {forward_shape(op, in[0].shape(), in[1].shape(), win), in[0].dtype()};
}

std::string Conv3D::attributes() const {
  return win.to_string();
}

std::vector<Tensor> Conv3D::vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                                std::span<const int> argnums, std::span<const Tensor>) const {
  const Tensor& x = primals[0];
  const Tensor& f = primals[1];
  // (In a trace for None dimensions, dx takes x's shape when the graph runs.)
  const detail::ShapeSource xs = detail::shape_source(x);
  std::vector<Tensor> grads;
  for (int a : argnums) {
    if (a == 0)
      grads.push_back(detail::dispatch(Conv3DBackpropInput(xs.shape, win, xs.from),
                                       xs.with({f, cotangents[0]})));
    else
      grads.push_back(detail::dispatch(Conv3DBackpropFilter(f.shape(), win), {x, cotangents[0]}));
  }
  return grads;
}

void Conv3DBackpropInput::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const char* op = name();
  const Tensor& f = in[0];
  const Tensor& dy = in[1];
  check_operand(op, "input_shape", input_shape, "NDHWC");
  TensorShape xs = detail::resolve_input_shape(op, input_shape, from, in);
  check_operand(op, "filters", f.shape(), "DHWIO");
  check_operand(op, "dy", dy.shape(), "NDHWC");
  detail::fill_transposed_lengths(xs, dy.shape(), win.strides, extra);
  detail::check_float_pair(op, "filters", f, "dy", dy);
  for (int i = 1; i < 4; ++i) {
    TF_CHECK_ARG(xs[i] != None && xs[i] >= 0, op,
                 "input_shape {} needs a known depth, height and width", xs.to_string());
  }
  if (xs[0] == None) xs[0] = dy.shape()[0];
  if (xs[4] == None && f.shape()[3] != None) xs[4] = f.shape()[3] * win.groups;
  check_dy(op, xs, f.shape(), dy.shape(), win);
  out[0] = {xs, f.dtype()};
}

std::string Conv3DBackpropInput::attributes() const {
  return "input_shape=" + input_shape.to_string() + ", " + win.to_string() +
         detail::shape_from_text(from) +
         detail::transposed_extra_text(input_shape, from == detail::ShapeFrom::attribute, extra);
}

// Linear in both inputs: <G, dx(f, dy)> = <dy, conv3d(G, f)> = <f, backprop_filter(G, dy)>.
std::vector<Tensor> Conv3DBackpropInput::vjp(std::span<const Tensor> primals,
                                             std::span<const Tensor> cotangents,
                                             std::span<const int> argnums,
                                             std::span<const Tensor>) const {
  const Tensor& f = primals[0];
  const Tensor& dy = primals[1];
  const Tensor& g = cotangents[0];
  std::vector<Tensor> grads;
  for (int a : argnums) {
    if (a == 0)
      grads.push_back(detail::dispatch(Conv3DBackpropFilter(f.shape(), win), {g, dy}));
    else if (a == 1)
      grads.push_back(detail::dispatch(Conv3D(win), {g, f}));
    else
      grads.emplace_back();  // the forward input gives only its shape
  }
  return grads;
}

void Conv3DBackpropFilter::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const char* op = name();
  const Tensor& x = in[0];
  const Tensor& dy = in[1];
  check_operand(op, "input", x.shape(), "NDHWC");
  check_operand(op, "filter_shape", filter_shape, "DHWIO");
  check_operand(op, "dy", dy.shape(), "NDHWC");
  detail::check_float_pair(op, "input", x, "dy", dy);
  TF_CHECK_ARG(filter_shape.is_fully_defined(), op, "filter_shape must be known, got {}",
               filter_shape.to_string());
  check_dy(op, x.shape(), filter_shape, dy.shape(), win);
  out[0] = {filter_shape, x.dtype()};
}

std::string Conv3DBackpropFilter::attributes() const {
  return "filter_shape=" + filter_shape.to_string() + ", " + win.to_string();
}

// Linear in both inputs: <G, df(x, dy)> = <x, backprop_input(G, dy)> = <dy, conv3d(x, G)>.
std::vector<Tensor> Conv3DBackpropFilter::vjp(std::span<const Tensor> primals,
                                              std::span<const Tensor> cotangents,
                                              std::span<const int> argnums,
                                              std::span<const Tensor>) const {
  const Tensor& x = primals[0];
  const Tensor& dy = primals[1];
  const Tensor& g = cotangents[0];
  const detail::ShapeSource xs = detail::shape_source(x);
  std::vector<Tensor> grads;
  for (int a : argnums) {
    if (a == 0)
      grads.push_back(
          detail::dispatch(Conv3DBackpropInput(xs.shape, win, xs.from), xs.with({g, dy})));
    else
      grads.push_back(detail::dispatch(Conv3D(win), {x, g}));
  }
  return grads;
}

}  // namespace tapeflow::prims
