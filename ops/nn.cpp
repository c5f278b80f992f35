#include "ops/nn.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>

#include "core/check.h"
#include "core/context.h"
#include "ops/activation.h"
#include "ops/binary.h"
#include "ops/depthwise.h"
#include "ops/dispatch.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/helpers.h"
#include "ops/loss.h"
#include "ops/movement.h"
#include "ops/nn_grad.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow {

namespace detail {

std::string pool_attributes(int k_h, int k_w, int stride_h, int stride_w, bool same) {
  return fmt::format("ksize=[{}, {}], strides=[{}, {}], padding={}", k_h, k_w, stride_h, stride_w,
                     same ? "SAME" : "VALID");
}

WindowDim window_dim(int64_t in, int64_t k, int stride, int dilation, bool same) {
  if (in == None) return {None, 0, 0};
  const int64_t eff = (k - 1) * dilation + 1;
  WindowDim d;
  if (same) {
    d.out = (in + stride - 1) / stride;
    const int64_t total = std::max<int64_t>((d.out - 1) * stride + eff - in, 0);
    d.pad_before = total / 2;
    d.pad_after = total - d.pad_before;
  } else {
    d.out = in >= eff ? (in - eff) / stride + 1 : 0;
  }
  return d;
}

int64_t transposed_extra(int64_t k, int stride, int dilation, bool same,
                         std::optional<int> output_padding) {
  const int64_t eff = (k - 1) * dilation + 1;
  if (!output_padding) return same ? 0 : std::max<int64_t>(eff - stride, 0);
  return eff - stride - 2 * (same ? eff / 2 : 0) + *output_padding;
}

void fill_transposed_lengths(TensorShape& xs, const TensorShape& dy, std::span<const int> strides,
                             std::span<const int64_t> extra) {
  if (dy.rank() != xs.rank()) return;  // the op's rank checks report it
  for (size_t i = 0; i < strides.size(); ++i) {
    const int a = static_cast<int>(i) + 1;
    if (xs[a] == None && dy[a] != None) xs[a] = dy[a] * strides[i] + extra[i];
  }
}

std::string transposed_extra_text(const TensorShape& input_shape, bool from_attribute,
                                  std::span<const int64_t> extra) {
  bool open = false;
  for (size_t i = 0; i < extra.size() && static_cast<int>(i) + 1 < input_shape.rank(); ++i)
    open = open || input_shape[static_cast<int>(i) + 1] == None;
  return from_attribute && open ? fmt::format(", extra=[{}]", fmt::join(extra, ", ")) : "";
}

int64_t transposed_length(int64_t in, int64_t k, int stride, int dilation, bool same,
                          std::optional<int> output_padding) {
  if (in == None) return None;
  return in * stride + transposed_extra(k, stride, dilation, same, output_padding);
}

int64_t clamp_same_window(int64_t in, int64_t k, int stride) {
  if (in == None || in <= 0 || stride <= 0) return k;  // no window over an empty dimension
  const int64_t out = (in + stride - 1) / stride;
  return std::min<int64_t>(k, in + (out - 1) * stride + 1);
}

}  // namespace detail

namespace {

// 1, 2 or 4 values (TF's forms; 4 in the layout's order) -> {height, width}.
std::array<int, 2> parse_hw(const char* op, const char* what, const std::vector<int>& v,
                            detail::Layout2D layout = {}) {
  std::array<int, 2> hw{};
  if (v.size() == 1) {
    hw = {v[0], v[0]};
  } else if (v.size() == 2) {
    hw = {v[0], v[1]};
  } else if (v.size() == 4) {
    TF_CHECK_ARG(v[0] == 1 && v[static_cast<size_t>(layout.c())] == 1, op,
                 "{} {} must be 1 in the batch and channel dimensions ({})", what,
                 detail::vec_to_string(v), layout.name());
    hw = {v[static_cast<size_t>(layout.h())], v[static_cast<size_t>(layout.w())]};
  } else {
    TF_THROW(InvalidArgumentError, op, "{} must have 1, 2 or 4 values, got {}", what,
             detail::vec_to_string(v));
  }
  TF_CHECK_ARG(hw[0] >= 1 && hw[1] >= 1, op, "{} must be positive, got {}", what,
               detail::vec_to_string(v));
  return hw;
}

bool parse_padding(const char* op, const std::string& padding) {
  TF_CHECK_ARG(padding == "SAME" || padding == "VALID", op,
               "padding must be \"SAME\" or \"VALID\", got \"{}\"", padding);
  return padding == "SAME";
}

// Output size of one spatial dimension; VALID windows larger than the input are an error.
int64_t spatial_out(const char* op, const char* dim, int64_t in, int64_t k, int stride,
                    int dilation, bool same, const TensorShape& input) {
  const auto d = detail::window_dim(in, k, stride, dilation, same);
  if (!same && in != None) {
    const int64_t eff = (k - 1) * dilation + 1;
    TF_CHECK_ARG(in >= eff, op,
                 "the window's effective {} {} (size {}, dilation {}) exceeds the input {} {} "
                 "with VALID padding (input is {})",
                 dim, eff, k, dilation, dim, in, input.to_string());
  }
  return d.out;
}

void check_pool_input(const char* op, const Tensor& x) {
  TF_CHECK_ARG(x.rank() == 4, op, "input must be rank 4 (NHWC), got shape {}",
               x.shape().to_string());
}

}  // namespace

// ---------------------------------------------------------------- primitives
namespace prims {

void Conv2D::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  const char* op = name();
  const Tensor& x = in[0];
  const Tensor& f = in[1];
  TF_CHECK_ARG(x.rank() == 4, op, "input must be rank 4 ({}), got shape {}", layout.name(),
               x.shape().to_string());
  TF_CHECK_ARG(f.rank() == 4, op, "filters must be rank 4 (HWIO), got shape {}",
               f.shape().to_string());
  TF_CHECK_ARG(x.dtype() == f.dtype(), op,
               "input and filters dtypes differ: {} and {} (input is {}, filters {})",
               dtype_name(x.dtype()), dtype_name(f.dtype()), x.shape().to_string(),
               f.shape().to_string());
  TF_CHECK_ARG(is_floating(x.dtype()), op,
               "expects float16, bfloat16, float32 or float64 tensors, got {}",
               dtype_name(x.dtype()));
  const TensorShape& xs = x.shape();
  const TensorShape& fs = f.shape();
  detail::check_conv_groups(op, xs, fs, groups, layout.c());
  TF_CHECK_ARG(fs[0] >= 1 && fs[1] >= 1, op, "filters must have a positive size, got {}",
               fs.to_string());
  TF_CHECK_ARG(fs[2] != 0 && fs[3] != 0, op, "filter must not have zero elements, got {}",
               fs.to_string());
  const int64_t oh =
      spatial_out(op, "height", xs[layout.h()], fs[0], stride_h, dilation_h, same, xs);
  const int64_t ow =
      spatial_out(op, "width", xs[layout.w()], fs[1], stride_w, dilation_w, same, xs);
  out[0] = {layout.shape(xs[0], oh, ow, fs[3]), x.dtype()};
}

std::string Conv2D::attributes() const {
  return fmt::format("strides=[{}, {}], dilations=[{}, {}], padding={}{}{}", stride_h, stride_w,
                     dilation_h, dilation_w, same ? "SAME" : "VALID",
                     detail::conv_groups_attribute(groups), layout.attribute());
}

std::vector<Tensor> Conv2D::vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                                std::span<const int> argnums, std::span<const Tensor>) const {
  const Tensor& x = primals[0];
  const Tensor& f = primals[1];
  std::vector<Tensor> grads;
  // NCHW: the NHWC gradient ops on dy moved to NHWC once (and x for the filters), dx moved back.
  const bool cf = layout.channels_first;
  const Tensor dy = cf ? tapeflow::transpose(cotangents[0], {0, 2, 3, 1}) : cotangents[0];
  for (int a : argnums) {
    if (a == 0) {
      // (In a trace for None dimensions, dx takes x's shape when the graph runs.)
      const Tensor dx =
          detail::conv2d_backprop_input(detail::shape_source(x, cf), f, dy, stride_h, stride_w,
                                        dilation_h, dilation_w, same, groups);
      grads.push_back(cf ? tapeflow::transpose(dx, {0, 3, 1, 2}) : dx);
    } else {
      grads.push_back(detail::conv2d_backprop_filter(cf ? tapeflow::transpose(x, {0, 2, 3, 1}) : x,
                                                     f.shape(), dy, stride_h, stride_w, dilation_h,
                                                     dilation_w, same, groups));
    }
  }
  return grads;
}

namespace {
TensorShape pool_out_shape(const char* op, const Tensor& x, int kh, int kw, int sh, int sw,
                           bool same) {
  check_pool_input(op, x);
  const TensorShape& xs = x.shape();
  const int64_t oh = spatial_out(op, "height", xs[1], kh, sh, 1, same, xs);
  const int64_t ow = spatial_out(op, "width", xs[2], kw, sw, 1, same, xs);
  return TensorShape{xs[0], oh, ow, xs[3]};
}
}  // namespace

void MaxPool2D::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  TF_CHECK_ARG(!is_bool(in[0].dtype()), name(), "is not defined for bool tensors");
  out[0] = {pool_out_shape(name(), in[0], k_h, k_w, stride_h, stride_w, same), in[0].dtype()};
}
std::string MaxPool2D::attributes() const {
  return detail::pool_attributes(k_h, k_w, stride_h, stride_w, same);
}

std::vector<Tensor> MaxPool2D::vjp(std::span<const Tensor> primals,
                                   std::span<const Tensor> cotangents, std::span<const int> argnums,
                                   std::span<const Tensor>) const {
  std::vector<Tensor> grads;
  for (size_t i = 0; i < argnums.size(); ++i)
    grads.push_back(
        detail::max_pool2d_grad(primals[0], cotangents[0], k_h, k_w, stride_h, stride_w, same));
  return grads;
}

void AvgPool2D::infer(std::span<const Tensor> in, std::span<TensorMeta> out) const {
  detail::check_dtype_floating(name(), in[0]);
  out[0] = {pool_out_shape(name(), in[0], k_h, k_w, stride_h, stride_w, same), in[0].dtype()};
}
std::string AvgPool2D::attributes() const {
  return detail::pool_attributes(k_h, k_w, stride_h, stride_w, same);
}

std::vector<Tensor> AvgPool2D::vjp(std::span<const Tensor> primals,
                                   std::span<const Tensor> cotangents, std::span<const int> argnums,
                                   std::span<const Tensor>) const {
  std::vector<Tensor> grads;
  for (size_t i = 0; i < argnums.size(); ++i)
    grads.push_back(detail::avg_pool2d_grad(detail::shape_source(primals[0]), cotangents[0], k_h,
                                            k_w, stride_h, stride_w, same));
  return grads;
}

}  // namespace prims

// ---------------------------------------------------------------- frontends
namespace nn {

Tensor relu(const Tensor& features) {
  TF_CHECK_ARG(features.defined(), "relu", "the input is an undefined tensor (TF's None)");
  detail::check_dtype_not_bool("relu", features);
  return detail::dispatch(prims::Relu{}, {features});
}

namespace {
// The checks every floating activation makes: a defined input of a floating dtype.
void check_activation_input(const char* op, const Tensor& x) {
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  detail::check_dtype_floating(op, x);
}
}  // namespace

// max(x, 0) + log1p(exp(-|x|)) with one select on x >= 0 for both terms, as
// sigmoid_cross_entropy_with_logits: the gradient is 1 - sigmoid(-x) = sigmoid(x) for x >= 0 and
// sigmoid(x) below (0.5 at 0), and exp never overflows. TF thresholds instead (x itself above
// -log(eps) - 2, exp(x) below log(eps) + 2); the values agree to a few ulps (docs/ops.md).
Tensor softplus(const Tensor& features) {
  check_activation_input("softplus", features);
  const Tensor& x = features;
  const Tensor zero = tapeflow::zeros_like(x);
  const Tensor nonneg = tapeflow::greater_equal(x, zero);
  return tapeflow::where(nonneg, x, zero) +
         tapeflow::log1p(tapeflow::exp(tapeflow::where(nonneg, -x, x)));
}

// A primitive (ops/unary.h): the composite's gradient cancelled at large |x|.
Tensor softsign(const Tensor& features) {
  check_activation_input("softsign", features);
  return detail::dispatch(prims::Softsign{}, {features});
}

namespace {
// where(x < 0, scale_neg * (exp(x) - 1), scale_pos * x) (scales of 1 are skipped): TF's Elu and
// Selu. exp reads x only where x < 0 (0 elsewhere), so a large positive x, whose exp is inf,
// gives no 0 * inf = NaN in the gradient.
Tensor exponential_linear(const Tensor& x, double scale_neg, double scale_pos) {
  const Tensor zero = tapeflow::zeros_like(x);
  const Tensor negative = tapeflow::less(x, zero);
  Tensor neg = tapeflow::exp(tapeflow::where(negative, x, zero)) - 1;
  if (scale_neg != 1.0) neg = scale_neg * neg;
  return tapeflow::where(negative, neg, scale_pos != 1.0 ? scale_pos * x : x);
}
}  // namespace

Tensor elu(const Tensor& features) {
  check_activation_input("elu", features);
  return exponential_linear(features, 1.0, 1.0);
}

Tensor selu(const Tensor& features) {
  check_activation_input("selu", features);
  // TF's constants (scale and scale * alpha), rounded to the input's dtype as TF's kernel does.
  return exponential_linear(features, 1.7580993408473768599402175208123,
                            1.0507009873554804934193349852946);
}

Tensor leaky_relu(const Tensor& features, double alpha) {
  const char* op = "leaky_relu";
  TF_CHECK_ARG(features.defined(), op, "the input is an undefined tensor (TF's None)");
  TF_CHECK_ARG(!is_bool(features.dtype()), op,
               "expects a floating-point or integer tensor (integers are cast to float32), got "
               "bool");
  const Tensor x = is_integer(features.dtype()) ? tapeflow::cast(features, float32) : features;
  // A select, as TF's kernel (alpha may exceed 1): x where x > 0, else x * alpha.
  return tapeflow::where(tapeflow::greater(x, tapeflow::zeros_like(x)), x, x * alpha);
}

Tensor gelu(const Tensor& features, bool approximate) {
  check_activation_input("gelu", features);
  const Tensor& x = features;
  // TF's expressions, in TF's order of operations.
  if (approximate)
    return 0.5 * x *
           (1.0 + tapeflow::tanh(0.7978845608028654 * (x + 0.044715 * tapeflow::pow(x, 3.0))));
  return 0.5 * x * tapeflow::erfc(-x * 0.7071067811865476);
}

Tensor silu(const Tensor& features, double beta) {
  check_activation_input("silu", features);
  // beta * x is x itself for beta = 1 (TF multiplies; the product is exact).
  return features * tapeflow::sigmoid(beta == 1.0 ? features : beta * features);
}

Tensor swish(const Tensor& features, double beta) { return silu(features, beta); }

Tensor softmax(const Tensor& logits, int axis) {
  const char* op = "softmax";
  TF_CHECK_ARG(logits.defined(), op, "the input is an undefined tensor (TF's None)");
  detail::check_dtype_floating(op, logits);
  const int a = detail::normalize_axis(op, axis, logits.shape());
  // The fused primitive works on the last axis; other axes keep the composite.
  if (a == logits.rank() - 1) return detail::dispatch(prims::Softmax{}, {logits});
  return detail::softmax_composite(logits, a);
}

Tensor log_softmax(const Tensor& logits, int axis) {
  const char* op = "log_softmax";
  TF_CHECK_ARG(logits.defined(), op, "the input is an undefined tensor (TF's None)");
  detail::check_dtype_floating(op, logits);
  const int a = detail::normalize_axis(op, axis, logits.shape());
  if (a == logits.rank() - 1) return detail::dispatch(prims::LogSoftmax{}, {logits});
  return detail::log_softmax_composite(logits, a);
}

Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  const char* op = "sigmoid_cross_entropy_with_logits";
  auto [z, x] = detail::unify_dtypes(op, labels, logits);
  detail::check_dtype_floating(op, x);
  TF_CHECK_ARG(z.shape() == x.shape(), op,
               "logits and labels must have the same shape: labels are {}, logits {}",
               z.shape().to_string(), x.shape().to_string());
  // max(x, 0) - x * z + log(1 + exp(-|x|)): no overflow for any x. Written with one select on
  // x >= 0, as TF: at x = 0 the gradient is then sigmoid(0) - z = 0.5 - z (maximum's tie rule
  // and abs'(0) = 0 gave 1 - z).
  const Tensor zero = tapeflow::zeros_like(x);
  const Tensor nonneg = tapeflow::greater_equal(x, zero);
  const Tensor relu_x = tapeflow::where(nonneg, x, zero);
  const Tensor neg_abs_x = tapeflow::where(nonneg, -x, x);
  return relu_x - x * z + tapeflow::log1p(tapeflow::exp(neg_abs_x));
}

Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits) {
  const char* op = "sparse_softmax_cross_entropy_with_logits";
  TF_CHECK_ARG(labels.defined() && logits.defined(), op,
               "an input is an undefined tensor (TF's None)");
  TF_CHECK_ARG(labels.dtype() == int32 || labels.dtype() == int64, op,
               "labels must be int32 or int64 class indices, got {}", dtype_name(labels.dtype()));
  detail::check_dtype_floating(op, logits);
  TF_CHECK_ARG(logits.rank() >= 1, op, "logits must have rank at least 1, got shape {}",
               logits.shape().to_string());
  bool leading_equal = labels.rank() == logits.rank() - 1;
  for (int i = 0; leading_equal && i < labels.rank(); ++i)
    leading_equal = labels.shape()[i] == logits.shape()[i];
  TF_CHECK_ARG(leading_equal, op,
               "labels must have the shape of logits without its last dimension: labels are "
               "{}, logits {}",
               labels.shape().to_string(), logits.shape().to_string());
  // The primitive checks every label against [0, classes) when it runs (eager or replayed),
  // as TF's CPU kernel: "Received a label value of ... outside the valid range". It runs on the
  // logits' device unless a DeviceScope says otherwise (labels are often host-side).
  const auto& ctx = detail::thread_context();
  const prims::SparseSoftmaxCrossEntropy prim;
  const std::array<Tensor, 2> in{labels, logits};
  if (ctx.device_stack.empty()) {
    const DeviceScope scope(logits.placement());
    return detail::dispatch_multi(prim, in)[0];
  }
  return detail::dispatch_multi(prim, in)[0];
}

namespace {
// The taps of a SAME convolution's dilated filter that reach the input along one spatial
// dimension, and the stretch of the (zero-padded) input they read: [start, start + length).
struct UsefulTaps {
  int64_t first = 0, last = 0;  // filter indices
  int64_t start = 0, length = 0;
  bool trimmed = false;  // some taps never reach the input
};

// With SAME padding and a dilation longer than the input, most taps of a dilated filter read only
// padding at every output position (a 3x3 filter with dilation 10^8 over a 4x4 input: only the
// centre tap reads the input), yet kernels walk the whole padded extent (oneDNN took seconds per
// 10^7 of dilation). Those taps contribute zeros; dropping them gives the same values.
std::optional<UsefulTaps> useful_taps(int64_t in, int64_t k, int stride, int dilation) {
  if (in == None || k == None || in <= 0 || k <= 0 || stride <= 0 || dilation <= 0)
    return std::nullopt;
  const detail::WindowDim w = detail::window_dim(in, k, stride, dilation, /*same=*/true);
  const int64_t reach = (w.out - 1) * int64_t{stride};  // the last output's offset
  // Tap j reads positions j*d - pad_before + [0, reach]: some of them lie in [0, in) when
  // j*d >= pad_before - reach and j*d <= in - 1 + pad_before.
  const int64_t lo = w.pad_before - reach;
  const int64_t first = lo <= 0 ? 0 : (lo + dilation - 1) / dilation;
  const int64_t last = std::min(k - 1, (in - 1 + w.pad_before) / dilation);
  if (first > last) {
    // No tap ever reaches the input (a dilation of 2^31 - 1 over 3 rows): every output reads
    // padding alone. One tap over a stretch of padding keeps the output's shape, its zeros and
    // the zero gradients at a small geometry (a GPU's cuDNN takes 32-bit ints only).
    return UsefulTaps{0, 0, in, reach + 1, true};
  }
  UsefulTaps t{first, last, first * dilation - w.pad_before, 0, first > 0 || last < k - 1};
  t.length = reach + (last - first) * dilation + 1;
  return t;
}
}  // namespace

Tensor conv2d(const Tensor& input, const Tensor& filters, const std::vector<int>& strides,
              const std::string& padding, const std::vector<int>& dilations,
              const std::string& data_format) {
  const char* op = "conv2d";
  TF_CHECK_ARG(input.defined() && filters.defined(), op,
               "an input is an undefined tensor (TF's None)");
  const detail::Layout2D layout = detail::parse_data_format_2d(op, data_format);
  // Filters whose depth divides the input's: a grouped convolution, as TF's conv2d.
  if (input.rank() == 4 && filters.rank() == 4) {
    const int64_t c = input.shape()[layout.c()], fc = filters.shape()[2];
    if (c != None && fc != None && fc > 0 && c > fc && c % fc == 0) {
      if (!layout.channels_first)
        return grouped_conv2d(input, filters, strides, padding, dilations);
      const int64_t groups = c / fc;
      TF_CHECK_ARG(filters.shape()[3] == None || filters.shape()[3] % groups == 0, op,
                   "the filters' {} output channels must be divisible by the {} groups (input "
                   "{}, filters {})",
                   filters.shape()[3], groups, input.shape().to_string(),
                   filters.shape().to_string());
      // Depthwise (one input channel per group) has NHWC kernels only: through NHWC.
      if (fc == 1)
        return detail::move_channels_first(
            grouped_conv2d(detail::move_channels_last(op, input, 4, "NCHW"), filters,
                           detail::spatial_values(op, "strides", strides, 2, "NCHW"), padding,
                           detail::spatial_values(op, "dilations", dilations, 2, "NCHW")));
      return detail::conv2d_with_groups(input, filters, strides, padding, dilations,
                                        static_cast<int>(groups), layout);
    }
  }
  return detail::conv2d_with_groups(input, filters, strides, padding, dilations, 1, layout);
}

}  // namespace nn

detail::Layout2D detail::parse_data_format_2d(const char* op, const std::string& data_format) {
  return Layout2D{parse_channels_first(op, data_format, "NHWC", "NCHW")};
}

bool detail::parse_channels_first(const char* op, const std::string& data_format, const char* last,
                                  const char* first) {
  TF_CHECK_ARG(data_format == last || data_format == first, op,
               "data_format must be \"{}\" or \"{}\", got \"{}\"", last, first, data_format);
  return data_format == first;
}

std::vector<int> detail::spatial_values(const char* op, const char* what, const std::vector<int>& v,
                                        int spatial, const char* first) {
  if (v.size() != static_cast<size_t>(spatial + 2)) return v;
  TF_CHECK_ARG(v[0] == 1 && v[1] == 1, op,
               "{} {} must be 1 in the batch and channel dimensions ({})", what,
               detail::vec_to_string(v), first);
  return std::vector<int>(v.begin() + 2, v.end());
}

namespace {
std::vector<int> channels_last_perm(int rank) {
  std::vector<int> p{0};
  for (int i = 2; i < rank; ++i) p.push_back(i);
  p.push_back(1);
  return p;
}
}  // namespace

Tensor detail::move_channels_last(const char* op, const Tensor& x, int rank, const char* first) {
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  TF_CHECK_ARG(x.rank() == rank, op, "the input must be rank {} ({}), got shape {}", rank, first,
               x.shape().to_string());
  return tapeflow::transpose(x, channels_last_perm(rank));
}

Tensor detail::move_channels_first(const Tensor& x) {
  std::vector<int> p{0, x.rank() - 1};
  for (int i = 1; i < x.rank() - 1; ++i) p.push_back(i);
  return tapeflow::transpose(x, p);
}

TensorShape detail::channels_last_shape(const TensorShape& s) {
  if (s.rank() < 3) return s;
  std::vector<int64_t> d{s[0]};
  for (int i = 2; i < s.rank(); ++i) d.push_back(s[i]);
  d.push_back(s[1]);
  return TensorShape(d);
}

void detail::check_conv_groups(const char* op, const TensorShape& xs, const TensorShape& fs,
                               int groups, int channel_axis) {
  const int64_t c = xs[channel_axis];
  TF_CHECK_ARG(groups >= 1, op, "groups must be positive, got {}", groups);
  TF_CHECK_ARG(c == None || fs[2] == None || c == fs[2] * groups, op,
               "input depth {} does not match filter depth {}{}: input is {}, filters {}", c, fs[2],
               groups == 1 ? std::string() : fmt::format(" times {} groups", groups),
               xs.to_string(), fs.to_string());
  TF_CHECK_ARG(fs[3] == None || fs[3] % groups == 0, op,
               "the filters' {} output channels must be divisible by the {} groups (input {}, "
               "filters {})",
               fs[3], groups, xs.to_string(), fs.to_string());
}

std::string detail::conv_groups_attribute(int groups) {
  return groups == 1 ? std::string() : fmt::format(", groups={}", groups);
}

std::optional<std::pair<Tensor, Tensor>> detail::trim_same_taps(const Tensor& input,
                                                                const Tensor& filters,
                                                                std::span<const int> strides,
                                                                std::span<const int> dilations,
                                                                int first_spatial) {
  const int k = static_cast<int>(strides.size());
  std::vector<nn::UsefulTaps> taps;
  bool trimmed = false;
  for (int i = 0; i < k; ++i) {
    const auto t = nn::useful_taps(input.shape()[first_spatial + i], filters.shape()[i], strides[i],
                                   dilations[i]);
    if (!t) return std::nullopt;
    trimmed = trimmed || t->trimmed;
    taps.push_back(*t);
  }
  if (!trimmed) return std::nullopt;
  // The useful taps run as a VALID convolution over the stretch of the padded input they read.
  const int rank = input.rank();
  std::vector<std::pair<int64_t, int64_t>> pads(static_cast<size_t>(rank), {0, 0});
  std::vector<int64_t> begin(static_cast<size_t>(rank), 0), size = input.shape().dims();
  std::vector<int64_t> fbegin(static_cast<size_t>(filters.rank()), 0),
      fsize = filters.shape().dims();
  for (int i = 0; i < k; ++i) {
    const auto& t = taps[static_cast<size_t>(i)];
    const auto a = static_cast<size_t>(first_spatial + i), f = static_cast<size_t>(i);
    const int64_t in = input.shape()[first_spatial + i];
    const int64_t end = t.start + t.length;
    pads[a] = {std::max<int64_t>(0, -t.start), std::max<int64_t>(0, end - in)};
    begin[a] = std::max<int64_t>(0, t.start);
    size[a] = std::min(in, end) - begin[a];
    fbegin[f] = t.first;
    fsize[f] = t.last - t.first + 1;
  }
  return std::pair{tapeflow::pad(tapeflow::slice(input, begin, size), pads),
                   tapeflow::slice(filters, fbegin, fsize)};
}

Tensor detail::conv2d_with_groups(const Tensor& input, const Tensor& filters,
                                  const std::vector<int>& strides, const std::string& padding,
                                  const std::vector<int>& dilations, int groups, Layout2D layout) {
  const char* op = "conv2d";
  const auto s = parse_hw(op, "strides", strides, layout);
  const auto d = parse_hw(op, "dilations", dilations, layout);
  const bool same = parse_padding(op, padding);
  const prims::Conv2D conv(s[0], s[1], d[0], d[1], same, groups, layout);
  // (Not in a trace for None dimensions: the taps that matter depend on the sizes.)
  if (same && input.rank() == 4 && filters.rank() == 4 && !detail::open_shapes()) {
    const int sv[2] = {s[0], s[1]}, dv[2] = {d[0], d[1]};
    if (auto trimmed = detail::trim_same_taps(input, filters, sv, dv, layout.h())) {
      // Checked as given first (the same errors as the untrimmed op).
      const Tensor given[2] = {input, filters};
      TensorMeta meta[1];
      conv.infer(given, meta);
      return detail::dispatch(prims::Conv2D(s[0], s[1], d[0], d[1], /*same=*/false, groups, layout),
                              {trimmed->first, trimmed->second});
    }
  }
  return detail::dispatch(conv, {input, filters});
}

namespace nn {

Tensor conv2d_transpose(const Tensor& input, const Tensor& filters, const TensorShape& output_shape,
                        const std::vector<int>& strides, const std::string& padding,
                        const std::vector<int>& dilations, const std::string& data_format) {
  return detail::conv2d_transpose(input, filters, output_shape, strides, padding, dilations,
                                  data_format, std::nullopt);
}

}  // namespace nn

namespace detail {

Tensor conv2d_transpose(const Tensor& input, const Tensor& filters, const TensorShape& output_shape,
                        const std::vector<int>& strides, const std::string& padding,
                        const std::vector<int>& dilations, const std::string& data_format,
                        std::optional<std::array<int, 2>> output_padding) {
  const char* op = "conv2d_transpose";
  TF_CHECK_ARG(input.defined() && filters.defined(), op,
               "an input is an undefined tensor (TF's None)");
  const detail::Layout2D layout = detail::parse_data_format_2d(op, data_format);
  const auto s = parse_hw(op, "strides", strides, layout);
  const auto d = parse_hw(op, "dilations", dilations, layout);
  const bool same = parse_padding(op, padding);
  const TensorShape &xs = input.shape(), &fs = filters.shape(), &os = output_shape;
  TF_CHECK_ARG(xs.rank() == 4, op, "the input must be {} of rank 4, got shape {}", layout.name(),
               xs.to_string());
  TF_CHECK_ARG(fs.rank() == 4, op,
               "filters must be (height, width, out_channels, in_channels) of rank 4, got shape {}",
               fs.to_string());
  TF_CHECK_ARG(os.rank() == 4, op, "output_shape must be {} of rank 4, got {}", layout.name(),
               os.to_string());
  const int c = layout.c(), h = layout.h();
  auto differ = [](int64_t a, int64_t b) { return a != None && b != None && a != b; };
  TF_CHECK_ARG(!differ(fs[3], xs[c]), op,
               "the input has {} channels but filters {} expect {} (their last dimension)", xs[c],
               fs.to_string(), fs[3]);
  TF_CHECK_ARG(!differ(os[c], fs[2]), op,
               "output_shape {} has {} channels but filters {} give {} (their third dimension)",
               os.to_string(), os[c], fs.to_string(), fs[2]);
  TF_CHECK_ARG(!differ(os[0], xs[0]), op, "output_shape {} has batch {} but the input {} has {}",
               os.to_string(), os[0], xs.to_string(), xs[0]);
  std::array<int64_t, 2> extra{0, 0};
  for (int i = 0; i < 2; ++i) {
    if (os[h + i] == None) {  // Keras' length, which the op checks when it runs
      extra[static_cast<size_t>(i)] = detail::transposed_extra(
          fs[i], s[i], d[i], same,
          output_padding ? std::optional<int>((*output_padding)[static_cast<size_t>(i)])
                         : std::nullopt);
      continue;
    }
    TF_CHECK_ARG(os[h + i] >= 0, op, "output_shape {} needs a non-negative height and width",
                 os.to_string());
    const int64_t eff = (fs[i] - 1) * d[i] + 1;
    const int64_t back =
        same || os[h + i] >= eff ? detail::window_dim(os[h + i], fs[i], s[i], d[i], same).out : 0;
    TF_CHECK_ARG(!differ(back, xs[h + i]), op,
                 "output_shape {} does not fit the input {}: a conv2d of that output with filters "
                 "{}, strides {}, dilations {} and {} padding gives {} {}, not {}",
                 os.to_string(), xs.to_string(), fs.to_string(), detail::vec_to_string(strides),
                 detail::vec_to_string(dilations), padding, i == 0 ? "height" : "width", back,
                 xs[h + i]);
  }
  // The batch always equals the input's: in a trace for None dimensions it is left open, so that
  // one graph serves every batch size.
  TensorShape out = os;
  if (detail::open_shapes()) out[0] = None;
  // NCHW: the NHWC op between two transposes.
  return detail::naming_errors(op, [&] {
    if (!layout.channels_first)
      return detail::conv2d_backprop_input(out, filters, input, s[0], s[1], d[0], d[1], same, 1,
                                           extra);
    const Tensor in = detail::move_channels_last(op, input, 4, "NCHW");
    return detail::move_channels_first(detail::conv2d_backprop_input(
        layout.nhwc(out), filters, in, s[0], s[1], d[0], d[1], same, 1, extra));
  });
}

}  // namespace detail

namespace nn {

namespace {
// detail::clamp_same_window for both dimensions of a 2-D pooling.
std::array<int, 2> clamp_same_windows(const Tensor& input, std::array<int, 2> k,
                                      std::array<int, 2> s, bool same) {
  if (!same || input.rank() != 4) return k;
  for (int i = 0; i < 2; ++i)
    k[i] = static_cast<int>(detail::clamp_same_window(input.shape()[1 + i], k[i], s[i]));
  return k;
}
}  // namespace

namespace {
// A 2-D pooling primitive P of input in data_format's layout: NCHW goes through NHWC.
template <class P>
Tensor pool2d(const char* op, const Tensor& input, const std::vector<int>& ksize,
              const std::vector<int>& strides, const std::string& padding,
              const std::string& data_format) {
  TF_CHECK_ARG(input.defined(), op, "the input is an undefined tensor (TF's None)");
  const detail::Layout2D layout = detail::parse_data_format_2d(op, data_format);
  const auto s = parse_hw(op, "strides", strides, layout);
  const bool same = parse_padding(op, padding);
  const auto kh = parse_hw(op, "ksize", ksize, layout);
  if (!layout.channels_first) {
    const auto k = clamp_same_windows(input, kh, s, same);
    return detail::dispatch(P(k[0], k[1], s[0], s[1], same), {input});
  }
  const Tensor x = detail::move_channels_last(op, input, 4, "NCHW");
  const auto k = clamp_same_windows(x, kh, s, same);
  return detail::move_channels_first(detail::dispatch(P(k[0], k[1], s[0], s[1], same), {x}));
}
}  // namespace

Tensor max_pool2d(const Tensor& input, const std::vector<int>& ksize,
                  const std::vector<int>& strides, const std::string& padding,
                  const std::string& data_format) {
  return pool2d<prims::MaxPool2D>("max_pool2d", input, ksize, strides, padding, data_format);
}

Tensor avg_pool2d(const Tensor& input, const std::vector<int>& ksize,
                  const std::vector<int>& strides, const std::string& padding,
                  const std::string& data_format) {
  return pool2d<prims::AvgPool2D>("avg_pool2d", input, ksize, strides, padding, data_format);
}

Tensor dropout(const Tensor& x, double rate, std::optional<int64_t> seed) {
  const char* op = "dropout";
  TF_CHECK_ARG(x.defined(), op, "the input is an undefined tensor (TF's None)");
  detail::check_dtype_floating(op, x);
  TF_CHECK_ARG(rate >= 0.0 && rate < 1.0, op, "rate must be in the range [0, 1), got {}", rate);
  TF_CHECK_ARG(x.shape().is_fully_defined(), op,
               "needs a fully defined shape for its random mask, got {}", x.shape().to_string());
  // The mask goes where x lives unless a DeviceScope says otherwise.
  std::optional<DeviceScope> scope;
  if (detail::thread_context().device_stack.empty()) scope.emplace(x.placement());
  // In a graph for None dimensions the mask's shape is read from x when it runs.
  const Tensor u = detail::random_uniform_like(x, 0.0, 1.0, x.dtype(), seed);
  const Tensor keep = tapeflow::greater_equal(u, rate);
  return tapeflow::where(keep, x * (1.0 / (1.0 - rate)), 0);
}

Tensor bias_add(const Tensor& value, const Tensor& bias, const std::string& data_format) {
  const char* op = "bias_add";
  TF_CHECK_ARG(value.defined() && bias.defined(), op,
               "an input is an undefined tensor (TF's None)");
  // TF: a data_format that starts with "NC" puts the channels on axis 1, any other is
  // channels-last.
  const bool channels_first = data_format.rfind("NC", 0) == 0;
  TF_CHECK_ARG(bias.rank() == 1, op, "bias must be 1-D, got shape {} (value is {})",
               bias.shape().to_string(), value.shape().to_string());
  TF_CHECK_ARG(value.rank() >= 2, op, "value must be at least 2-D, got shape {} (bias is {})",
               value.shape().to_string(), bias.shape().to_string());
  const int axis = channels_first ? 1 : value.rank() - 1;
  const int64_t vc = value.shape()[axis];
  TF_CHECK_ARG(bias.shape()[0] == vc || bias.shape()[0] == None || vc == None, op,
               "bias shape {} must match the {} dimension of value shape {}",
               bias.shape().to_string(), channels_first ? "channel (second)" : "last",
               value.shape().to_string());
  auto [v, b] = detail::unify_dtypes(op, value, bias);
  detail::check_dtype_not_bool(op, v);
  if (!channels_first) return tapeflow::add(v, b);
  std::vector<int64_t> shape(static_cast<size_t>(v.rank() - 1), 1);
  shape[0] = b.shape()[0] == None ? -1 : b.shape()[0];
  return tapeflow::add(v, reshape(b, shape));
}

}  // namespace nn

}  // namespace tapeflow
