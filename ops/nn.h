// Neural-network ops: activations, softmax and losses (composites of primitives), convolution
// and pooling (NHWC inputs, HWIO filters, "SAME" or "VALID" padding, as TF).
#pragma once

#include <array>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "ops/primitive.h"

namespace tapeflow::nn {

Tensor relu(const Tensor& features);
// Activations as TF's tf.nn ones, composites of primitives (so they fuse, run on every device
// and differentiate to any order); floating dtypes only unless said otherwise.
// log(1 + exp(x)) written as max(x, 0) + log1p(exp(-|x|)): no overflow for any x, and the
// gradient is sigmoid(x) (TF's SoftplusGrad), 0.5 at x = 0.
Tensor softplus(const Tensor& features);
// x / (1 + |x|) (NaN at +-inf, as TF).
Tensor softsign(const Tensor& features);
// x where x >= 0 (and NaN), else exp(x) - 1 (TF's formula: exp(x) - 1, not expm1).
Tensor elu(const Tensor& features);
// scale * x where x >= 0, else scale * alpha * (exp(x) - 1), with TF's constants
// scale = 1.0507009873554805, scale * alpha = 1.7580993408473769.
Tensor selu(const Tensor& features);
// x where x > 0, else alpha * x (alpha may be > 1 or negative: a select, not a maximum). Integer
// inputs are cast to float32 first, as TF's leaky_relu; bool is rejected.
Tensor leaky_relu(const Tensor& features, double alpha = 0.2);
// 0.5 * x * erfc(-x / sqrt(2)) (TF 2.21's exact form), or with approximate the tanh form
// 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x^3))).
Tensor gelu(const Tensor& features, bool approximate = false);
// x * sigmoid(beta * x) (TF's tf.nn.silu, also named swish).
Tensor silu(const Tensor& features, double beta = 1.0);
Tensor swish(const Tensor& features, double beta = 1.0);
Tensor softmax(const Tensor& logits, int axis = -1);
Tensor log_softmax(const Tensor& logits, int axis = -1);
// max(x, 0) - x * z + log(1 + exp(-|x|)) with x = logits, z = labels (same shapes), as TF.
Tensor sigmoid_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
// labels: int32/int64 class indices of logits' leading shape; one loss per example. A label
// outside [0, classes) is an InvalidArgumentError (checked on the host, as TF's CPU kernel).
Tensor sparse_softmax_cross_entropy_with_logits(const Tensor& labels, const Tensor& logits);
// strides: 1, 2 or 4 values as TF (a single value applies to both spatial dimensions).
// float32 runs on oneDNN; float16/bfloat16 go through float32; float64 uses a direct loop.
// Filters of depth C / G for an input of C channels are a grouped convolution of G groups, as
// TF's (nn::grouped_conv2d, ops/depthwise.h).
// data_format: "NHWC" (TF's default) or "NCHW" (input and output (N, C, H, W); the filters stay
// HWIO, as TF's). NCHW runs natively (oneDNN's and cuDNN's nchw layouts, no transposes), except
// a depthwise grouping (filters of depth 1), which goes through NHWC. It comes last, after
// dilations (TF has it before): conv2d(x, f, 1, "SAME", {1}, "NCHW").
Tensor conv2d(const Tensor& input, const Tensor& filters, const std::vector<int>& strides,
              const std::string& padding, const std::vector<int>& dilations = {1},
              const std::string& data_format = "NHWC");
// One stride for both spatial dimensions, as TF's int argument (conv2d(x, f, 1, "SAME")).
inline Tensor conv2d(const Tensor& input, const Tensor& filters, int strides,
                     const std::string& padding, const std::vector<int>& dilations = {1},
                     const std::string& data_format = "NHWC") {
  return conv2d(input, filters, std::vector<int>{strides}, padding, dilations, data_format);
}
// TF's tf.nn.conv2d_transpose (a "deconvolution"): the gradient of conv2d with respect to its
// input, as a forward op. filters are (KH, KW, out_channels, in_channels), as TF's; output_shape
// is the output shape (in data_format's layout), which a conv2d with these filters, strides,
// padding and dilations must map back to the input's height and width (else an
// InvalidArgumentError naming both). data_format "NCHW" runs natively, as conv2d's. A height or
// width of tf::None (where TF takes a run-time shape tensor) is Keras' default length, the
// shortest that maps back: input * stride for SAME, input * stride + max(effective kernel -
// stride, 0) for VALID; in a tf::function traced for None dimensions it follows each call's
// input.
Tensor conv2d_transpose(const Tensor& input, const Tensor& filters, const TensorShape& output_shape,
                        const std::vector<int>& strides, const std::string& padding = "SAME",
                        const std::vector<int>& dilations = {1},
                        const std::string& data_format = "NHWC");
// ksize and strides: 1, 2 or 4 values, as for conv2d (4 values in data_format's order). SAME
// windows ignore the padding: max_pool takes the maximum of the valid elements and avg_pool
// divides by their count, as TF. data_format "NCHW" goes through NHWC (two transposes; TF's CPU
// pooling takes NHWC only).
Tensor max_pool2d(const Tensor& input, const std::vector<int>& ksize,
                  const std::vector<int>& strides, const std::string& padding,
                  const std::string& data_format = "NHWC");
Tensor avg_pool2d(const Tensor& input, const std::vector<int>& ksize,
                  const std::vector<int>& strides, const std::string& padding,
                  const std::string& data_format = "NHWC");
// One window size and one stride for both spatial dimensions, as TF's int arguments
// (max_pool2d(x, 2, 2, "VALID")).
inline Tensor max_pool2d(const Tensor& input, int ksize, int strides, const std::string& padding) {
  return max_pool2d(input, std::vector<int>{ksize}, std::vector<int>{strides}, padding);
}
inline Tensor avg_pool2d(const Tensor& input, int ksize, int strides, const std::string& padding) {
  return avg_pool2d(input, std::vector<int>{ksize}, std::vector<int>{strides}, padding);
}
// Zeroes elements with probability rate and scales the rest by 1 / (1 - rate). The mask comes
// from random::uniform(x.shape(), 0, 1, x.dtype(), seed) >= rate, so it follows the seed rules
// of ops/random.h.
Tensor dropout(const Tensor& x, double rate, std::optional<int64_t> seed = std::nullopt);
// value + bias along value's last axis, or with data_format "NCHW" (any data_format that starts
// with "NC", as TF's) along axis 1.
Tensor bias_add(const Tensor& value, const Tensor& bias, const std::string& data_format = "NHWC");

}  // namespace tapeflow::nn

namespace tapeflow::detail {

// Where a 2-D convolution's activations keep their dimensions: NHWC (TF's default) or NCHW
// (data_format "NCHW"). The filters are HWIO in both.
struct Layout2D {
  bool channels_first = false;
  int h() const { return channels_first ? 2 : 1; }
  int w() const { return channels_first ? 3 : 2; }
  int c() const { return channels_first ? 1 : 3; }
  const char* name() const { return channels_first ? "NCHW" : "NHWC"; }
  // (n, h, w, c) in this layout.
  TensorShape shape(int64_t n, int64_t h, int64_t w, int64_t c) const {
    return channels_first ? TensorShape{n, c, h, w} : TensorShape{n, h, w, c};
  }
  // s, a shape in this layout, as NHWC.
  TensorShape nhwc(const TensorShape& s) const {
    return channels_first ? TensorShape{s[0], s[2], s[3], s[1]} : s;
  }
  // ", data_format=NCHW" for graph dumps, nothing for NHWC.
  std::string attribute() const { return channels_first ? ", data_format=NCHW" : ""; }
};
// data_format "NHWC" or "NCHW" (InvalidArgumentError naming op otherwise).
Layout2D parse_data_format_2d(const char* op, const std::string& data_format);

// For the ops that run a channels-first data_format through their channels-last kernels
// (depthwise, separable, 1-D and 3-D pooling, 3-D convolution, space_to_depth):
// whether data_format is `first` ("NCHW", "NCDHW", "NCW"); it must be that or `last`, else an
// InvalidArgumentError naming op and both.
bool parse_channels_first(const char* op, const std::string& data_format, const char* last,
                          const char* first);
// strides, dilations or ksize of 1, `spatial` or spatial + 2 values, the last form in the
// channels-first order (batch and channel entries 1, else an InvalidArgumentError naming op,
// `what` and `first`): the spatial values, or v itself for the shorter forms.
std::vector<int> spatial_values(const char* op, const char* what, const std::vector<int>& v,
                                int spatial, const char* first);
// x (N, C, spatial...) -> (N, spatial..., C), checking that x is defined and of `rank` (an
// InvalidArgumentError naming op and the layout `first` otherwise); and back.
Tensor move_channels_last(const char* op, const Tensor& x, int rank, const char* first);
Tensor move_channels_first(const Tensor& x);
// A shape (N, C, spatial...) as (N, spatial..., C).
TensorShape channels_last_shape(const TensorShape& s);

// One spatial dimension of a convolution or pooling window, as TF computes it:
//   VALID: out = ceil((in - effective_k + 1) / stride), no padding;
//   SAME:  out = ceil(in / stride), pad_total = max((out - 1) * stride + effective_k - in, 0),
//          pad_before = pad_total / 2, pad_after = the rest;
// with effective_k = (k - 1) * dilation + 1. An unknown input size (tf::None) gives None.
struct WindowDim {
  int64_t out = 0;
  int64_t pad_before = 0;
  int64_t pad_after = 0;
};
WindowDim window_dim(int64_t in, int64_t k, int stride, int dilation, bool same);
// Keras' deconv_output_length, a transposed convolution's output length for an input of length
// `in`, as in * stride + transposed_extra(...): with output_padding p, (in - 1) * stride +
// effective_k - 2 * pad + p (pad = effective_k / 2 for SAME, 0 for VALID); without it, 0 more
// for SAME and max(effective_k - stride, 0) for VALID (the shortest length whose convolution
// gives `in` windows).
int64_t transposed_extra(int64_t k, int stride, int dilation, bool same,
                         std::optional<int> output_padding = std::nullopt);
// A transposed convolution's input_shape xs (N, spatial..., C): each spatial length still None
// becomes dy's times strides[i] plus extra[i] (transposed_extra) where dy's is known.
void fill_transposed_lengths(TensorShape& xs, const TensorShape& dy, std::span<const int> strides,
                             std::span<const int64_t> extra);
// ", extra=[...]" for graph dumps when an attribute input_shape leaves a spatial length None
// (fill_transposed_lengths reads extra then), else "".
std::string transposed_extra_text(const TensorShape& input_shape, bool from_attribute,
                                  std::span<const int64_t> extra);
// Keras' deconv_output_length itself: in * stride + transposed_extra(...), None for a None in.
int64_t transposed_length(int64_t in, int64_t k, int stride, int dilation, bool same,
                          std::optional<int> output_padding = std::nullopt);
// A SAME pooling window longer than in + (out - 1) * stride covers the whole input at every
// output once clipped (pooling ignores the padding), so that length gives the same result
// without walking a window of, say, 2^30 mostly padded positions: min(k, that length), or k
// itself for an unknown or empty dimension.
int64_t clamp_same_window(int64_t in, int64_t k, int stride);
// The group count of a 2-D convolution with input xs (N, H, W, C) and filters fs (KH, KW, C /
// groups, O), for Conv2D and its two gradient ops: positive, C = fs[2] * groups and O divisible
// by groups where known (InvalidArgumentError naming `op` otherwise).
void check_conv_groups(const char* op, const TensorShape& xs, const TensorShape& fs, int groups,
                       int channel_axis = 3);
// ", groups=G" for a grouped convolution's attributes, nothing for one group.
std::string conv_groups_attribute(int groups);
// A SAME convolution (input (N, spatial..., C), filters (spatial k..., CI, O), strides and
// dilations one per spatial dimension) whose dilated filter has taps that read only padding at
// every output (a dilation longer than the input): the stretch of the zero-padded input and the
// filter taps that matter, which as a VALID convolution give the same output. nullopt when no
// tap is dropped or a size is unknown. first_spatial: the input's first spatial axis (2 for
// channels-first inputs).
std::optional<std::pair<Tensor, Tensor>> trim_same_taps(const Tensor& input, const Tensor& filters,
                                                        std::span<const int> strides,
                                                        std::span<const int> dilations,
                                                        int first_spatial = 1);
// nn::conv2d with its groups given (the Conv2D primitive's), for nn::grouped_conv2d once it has
// checked the channels: filters (KH, KW, C / groups, O).
Tensor conv2d_with_groups(const Tensor& input, const Tensor& filters,
                          const std::vector<int>& strides, const std::string& padding,
                          const std::vector<int>& dilations, int groups,
                          Layout2D layout = Layout2D{});
// A pooling primitive's attributes, as graph dumps show them (and equivalence compares):
// "ksize=[kh, kw], strides=[sh, sw], padding=SAME".
std::string pool_attributes(int k_h, int k_w, int stride_h, int stride_w, bool same);
// nn::conv2d_transpose with Keras' output_padding (per spatial dimension), which sets the length
// of a None height or width of output_shape (transposed_extra).
Tensor conv2d_transpose(const Tensor& input, const Tensor& filters, const TensorShape& output_shape,
                        const std::vector<int>& strides, const std::string& padding,
                        const std::vector<int>& dilations, const std::string& data_format,
                        std::optional<std::array<int, 2>> output_padding);
// With one output along a dimension the stride changes nothing: it is shrunk to the smallest
// one that still gives that single output (h + pads - k + 1), for kernels that reject huge
// strides (oneDNN refused a pooling descriptor with a stride of 2^31 - 1). G has the fields
// h, w, oh, ow, kh, kw, sh, sw, pt, pb, pl, pr.
template <class G>
void shrink_single_output_strides(G& g) {
  auto shrink = [](int64_t& s, int64_t out, int64_t in, int64_t pads, int64_t k) {
    const int64_t enough = in + pads - k + 1;
    if (out == 1 && enough >= 1 && s > enough) s = enough;
  };
  shrink(g.sh, g.oh, g.h, g.pt + g.pb, g.kh);
  shrink(g.sw, g.ow, g.w, g.pl + g.pr, g.kw);
}

}  // namespace tapeflow::detail

namespace tapeflow::prims {

// input (N, H, W, C) and filters (KH, KW, C / G, O) of one floating dtype -> (N, OH, OW, O).
// G = groups: input channels [g C/G, (g + 1) C/G) feed output channels [g O/G, (g + 1) O/G)
// only, with the filters' columns of those outputs (TF's conv2d with filters whose depth divides
// the input's; oneDNN and cuDNN run the G groups in one call). layout NCHW: input (N, C, H, W)
// -> (N, O, OH, OW), the same filters.
struct Conv2D final : PrimitiveBase<Conv2D> {
  int stride_h, stride_w, dilation_h, dilation_w;
  bool same;  // "SAME" padding, else "VALID"
  int groups;
  detail::Layout2D layout;
  Conv2D(int sh, int sw, int dh, int dw, bool s, int g = 1, detail::Layout2D l = {})
      : stride_h(sh), stride_w(sw), dilation_h(dh), dilation_w(dw), same(s), groups(g), layout(l) {}
  const char* name() const override { return "conv2d"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  // Conv2DBackpropInput / Conv2DBackpropFilter (ops/nn_grad.h); each needs the other input.
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return save_input(0) | save_input(1); }
  std::string attributes() const override;
};

// (N, H, W, C) -> (N, OH, OW, C).
struct MaxPool2D final : PrimitiveBase<MaxPool2D> {
  int k_h, k_w, stride_h, stride_w;
  bool same;
  MaxPool2D(int kh, int kw, int sh, int sw, bool s)
      : k_h(kh), k_w(kw), stride_h(sh), stride_w(sw), same(s) {}
  const char* name() const override { return "max_pool2d"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  // MaxPool2DGrad: routes each cotangent to its window's first maximal input.
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return save_input(0); }
  std::string attributes() const override;
};

struct AvgPool2D final : PrimitiveBase<AvgPool2D> {
  int k_h, k_w, stride_h, stride_w;
  bool same;
  AvgPool2D(int kh, int kw, int sh, int sw, bool s)
      : k_h(kh), k_w(kw), stride_h(sh), stride_w(sw), same(s) {}
  const char* name() const override { return "avg_pool2d"; }
  void infer(std::span<const Tensor> in, std::span<TensorMeta> out) const override;
  TF_DECLARE_KERNELS
  // AvgPool2DGrad: needs only the input's shape.
  std::vector<Tensor> vjp(std::span<const Tensor> primals, std::span<const Tensor> cotangents,
                          std::span<const int> argnums,
                          std::span<const Tensor> outputs) const override;
  uint32_t vjp_saves() const override { return 0; }
  std::string attributes() const override;
};

}  // namespace tapeflow::prims
