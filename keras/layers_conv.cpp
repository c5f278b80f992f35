// DepthwiseConv2D, SeparableConv2D, DepthwiseConv1D and SeparableConv1D: one LayerImpl for the
// four, as Keras' base classes (the 1-D layers are the 2-D ones over a height of 1).
#include "keras/layers_conv.h"

#include <algorithm>
#include <cctype>

#include "core/check.h"
#include "core/error.h"
#include "keras/data_format.h"
#include "keras/serialization_access_conv.h"
#include "ops/depthwise.h"
#include "ops/movement.h"
#include "ops/nn.h"

namespace tapeflow::keras {

namespace {

using detail::DataFormat;
using detail::LayerImpl;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Everything the four layers are configured with, 1-D sizes as (1, k).
struct Config {
  int rank = 2;            // spatial dimensions of the input
  bool separable = false;  // a pointwise kernel follows
  int64_t filters = 0;     // separable only
  Size2 kernel = 1, strides = 1, dilation = 1;
  std::string padding = {}, data_format = {}, activation = {};
  int depth_multiplier = 1;
  bool use_bias = true;
  Initializer depthwise_init = {}, pointwise_init = {}, bias_init = {};
  Regularizer depthwise_reg = {}, pointwise_reg = {}, bias_reg = {};
  Constraint depthwise_con = {}, pointwise_con = {}, bias_con = {};
  std::string name = {};
};

class DepthwiseImpl final : public LayerImpl {
 public:
  DepthwiseImpl(const char* cls, const char* base_name, Config c)
      : LayerImpl(cls, base_name, c.name),
        c_(std::move(c)),
        same_(lower(c_.padding) == "same"),
        format_(DataFormat::parse(cls, c_.data_format)),
        activation_(activations::get(c_.activation)) {
    if (!c_.depthwise_init.defined()) c_.depthwise_init = initializers::GlorotUniform();
    if (!c_.pointwise_init.defined()) c_.pointwise_init = initializers::GlorotUniform();
    if (!c_.bias_init.defined()) c_.bias_init = initializers::Zeros();
    const std::string p = lower(c_.padding);
    TF_CHECK_ARG(p == "valid" || p == "same", cls,
                 "padding must be \"valid\" or \"same\", got \"{}\"", c_.padding);
    TF_CHECK_ARG(c_.depth_multiplier > 0, cls,
                 "depth_multiplier must be a strictly positive value, got {}", c_.depth_multiplier);
    TF_CHECK_ARG(!c_.separable || c_.filters > 0, cls, "filters must be positive, got {}",
                 c_.filters);
    TF_CHECK_ARG(c_.kernel.h > 0 && c_.kernel.w > 0, cls, "kernel_size must be positive, got {}",
                 sizes(c_.kernel));
    TF_CHECK_ARG(c_.strides.h > 0 && c_.strides.w > 0, cls, "strides must be positive, got {}",
                 sizes(c_.strides));
    TF_CHECK_ARG(c_.dilation.h > 0 && c_.dilation.w > 0, cls,
                 "dilation_rate must be positive, got {}", sizes(c_.dilation));
  }

 protected:
  void build(const TensorShape& input) override {
    const int rank = c_.rank + 2;
    const TensorShape s = format_.to_last(input);
    TF_CHECK_ARG(s.rank() == rank && s[rank - 1] != None, name_.c_str(),
                 "layer \"{}\" ({}) needs {} inputs of rank {} with a known channel dimension, "
                 "got shape {}",
                 name_, class_name_, format_.layout(c_.rank), rank, input.to_string());
    channels_ = s[rank - 1];
    const int64_t dm = c_.depth_multiplier;
    const TensorShape dshape = c_.rank == 2 ? TensorShape({c_.kernel.h, c_.kernel.w, channels_, dm})
                                            : TensorShape({c_.kernel.w, channels_, dm});
    depthwise_ = add_weight(c_.separable ? "depthwise_kernel" : "kernel", dshape, c_.depthwise_init,
                            true, c_.depthwise_reg, c_.depthwise_con);
    if (c_.separable) {
      const TensorShape pshape = c_.rank == 2 ? TensorShape({1, 1, channels_ * dm, c_.filters})
                                              : TensorShape({1, channels_ * dm, c_.filters});
      pointwise_ = add_weight("pointwise_kernel", pshape, c_.pointwise_init, true, c_.pointwise_reg,
                              c_.pointwise_con);
    }
    if (c_.use_bias)
      bias_ = add_weight("bias", TensorShape({out_channels()}), c_.bias_init, true, c_.bias_reg,
                         c_.bias_con);
  }
  TensorShape compute_output_shape(const TensorShape& input) const override {
    if (input.rank() != c_.rank + 2) incompatible(input, format_.expected_ndim(c_.rank));
    const TensorShape s = format_.to_last(input);
    TensorShape o = s;
    const int r = s.rank();
    if (c_.rank == 2) {
      o[1] =
          ::tapeflow::detail::window_dim(s[1], c_.kernel.h, c_.strides.h, c_.dilation.h, same_).out;
    }
    o[r - 2] =
        ::tapeflow::detail::window_dim(s[r - 2], c_.kernel.w, c_.strides.w, c_.dilation.w, same_)
            .out;
    o[r - 1] =
        c_.separable ? c_.filters : (s[r - 1] == None ? None : s[r - 1] * c_.depth_multiplier);
    return format_.to_first(o);
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    require_rank_and_channels(s, c_.rank + 2, channels_, format_.channels_first());
  }
  Tensor call(const Tensor& input, bool) override {
    const Tensor x = format_.to_last(input);
    // The 1-D layers: (batch, 1, steps, channels) with (1, k, in, m) kernels.
    const Tensor in = c_.rank == 1 ? expand_dims(x, 1) : x;
    const Tensor dk = c_.rank == 1 ? expand_dims(depthwise_.value(), 0) : depthwise_.value();
    Tensor y = nn::depthwise_conv2d(in, dk, {c_.strides.h, c_.strides.w}, same_ ? "SAME" : "VALID",
                                    {c_.dilation.h, c_.dilation.w});
    if (c_.separable) {
      const Tensor pk = c_.rank == 1 ? expand_dims(pointwise_.value(), 0) : pointwise_.value();
      y = nn::conv2d(y, pk, {1}, "VALID");
    }
    if (c_.rank == 1) y = squeeze(y, {1});
    if (c_.use_bias) y = nn::bias_add(y, bias_.value());
    // The activation sees the output in the layer's format, as Keras' (softmax's axis -1).
    y = format_.to_first(y);
    return activation_ ? activation_(y) : y;
  }

 private:
  static std::string sizes(Size2 s) { return fmt::format("({}, {})", s.h, s.w); }
  int64_t out_channels() const {
    return c_.separable ? c_.filters : channels_ * c_.depth_multiplier;
  }

  friend std::optional<detail::layer_options::ConvConfig> detail::layer_options::depthwise_conv(
      const LayerImpl&);
  Config c_;
  bool same_;
  DataFormat format_;
  activations::Activation activation_;
  int64_t channels_ = 0;
  Variable depthwise_, pointwise_, bias_;
};

// Builds at construction when an input_shape was declared.
std::shared_ptr<DepthwiseImpl> make(const char* cls, const char* base, Config c,
                                    const std::vector<int64_t>& input_shape) {
  auto impl = std::make_shared<DepthwiseImpl>(cls, base, std::move(c));
  if (!input_shape.empty()) impl->build_from_declared_shape(input_shape);
  return impl;
}

}  // namespace

namespace layers {

DepthwiseConv2D::DepthwiseConv2D(Size2 kernel_size, DepthwiseConv2DOptions o) {
  Config c{.rank = 2,
           .separable = false,
           .kernel = kernel_size,
           .strides = o.strides,
           .dilation = o.dilation_rate,
           .padding = o.padding,
           .data_format = o.data_format,
           .activation = o.activation,
           .depth_multiplier = o.depth_multiplier,
           .use_bias = o.use_bias,
           .depthwise_init = o.depthwise_initializer,
           .bias_init = o.bias_initializer,
           .depthwise_reg = o.depthwise_regularizer,
           .bias_reg = o.bias_regularizer,
           .depthwise_con = o.depthwise_constraint,
           .bias_con = o.bias_constraint,
           .name = o.name};
  impl_ = make("DepthwiseConv2D", "depthwise_conv2d", std::move(c), o.input_shape);
}
Variable DepthwiseConv2D::kernel() const {
  return impl().weight("kernel");
}
Variable DepthwiseConv2D::bias() const {
  return impl().weight("bias");
}

SeparableConv2D::SeparableConv2D(int64_t filters, Size2 kernel_size, SeparableConv2DOptions o) {
  Config c{.rank = 2,
           .separable = true,
           .filters = filters,
           .kernel = kernel_size,
           .strides = o.strides,
           .dilation = o.dilation_rate,
           .padding = o.padding,
           .data_format = o.data_format,
           .activation = o.activation,
           .depth_multiplier = o.depth_multiplier,
           .use_bias = o.use_bias,
           .depthwise_init = o.depthwise_initializer,
           .pointwise_init = o.pointwise_initializer,
           .bias_init = o.bias_initializer,
           .depthwise_reg = o.depthwise_regularizer,
           .pointwise_reg = o.pointwise_regularizer,
           .bias_reg = o.bias_regularizer,
           .depthwise_con = o.depthwise_constraint,
           .pointwise_con = o.pointwise_constraint,
           .bias_con = o.bias_constraint,
           .name = o.name};
  impl_ = make("SeparableConv2D", "separable_conv2d", std::move(c), o.input_shape);
}
Variable SeparableConv2D::depthwise_kernel() const {
  return impl().weight("depthwise_kernel");
}
Variable SeparableConv2D::pointwise_kernel() const {
  return impl().weight("pointwise_kernel");
}
Variable SeparableConv2D::bias() const {
  return impl().weight("bias");
}

DepthwiseConv1D::DepthwiseConv1D(int kernel_size, DepthwiseConv1DOptions o) {
  Config c{.rank = 1,
           .separable = false,
           .kernel = Size2(1, kernel_size),
           .strides = Size2(1, o.strides),
           .dilation = Size2(1, o.dilation_rate),
           .padding = o.padding,
           .data_format = o.data_format,
           .activation = o.activation,
           .depth_multiplier = o.depth_multiplier,
           .use_bias = o.use_bias,
           .depthwise_init = o.depthwise_initializer,
           .bias_init = o.bias_initializer,
           .depthwise_reg = o.depthwise_regularizer,
           .bias_reg = o.bias_regularizer,
           .depthwise_con = o.depthwise_constraint,
           .bias_con = o.bias_constraint,
           .name = o.name};
  impl_ = make("DepthwiseConv1D", "depthwise_conv1d", std::move(c), o.input_shape);
}
Variable DepthwiseConv1D::kernel() const {
  return impl().weight("kernel");
}
Variable DepthwiseConv1D::bias() const {
  return impl().weight("bias");
}

SeparableConv1D::SeparableConv1D(int64_t filters, int kernel_size, SeparableConv1DOptions o) {
  Config c{.rank = 1,
           .separable = true,
           .filters = filters,
           .kernel = Size2(1, kernel_size),
           .strides = Size2(1, o.strides),
           .dilation = Size2(1, o.dilation_rate),
           .padding = o.padding,
           .data_format = o.data_format,
           .activation = o.activation,
           .depth_multiplier = o.depth_multiplier,
           .use_bias = o.use_bias,
           .depthwise_init = o.depthwise_initializer,
           .pointwise_init = o.pointwise_initializer,
           .bias_init = o.bias_initializer,
           .depthwise_reg = o.depthwise_regularizer,
           .pointwise_reg = o.pointwise_regularizer,
           .bias_reg = o.bias_regularizer,
           .depthwise_con = o.depthwise_constraint,
           .pointwise_con = o.pointwise_constraint,
           .bias_con = o.bias_constraint,
           .name = o.name};
  impl_ = make("SeparableConv1D", "separable_conv1d", std::move(c), o.input_shape);
}
Variable SeparableConv1D::depthwise_kernel() const {
  return impl().weight("depthwise_kernel");
}
Variable SeparableConv1D::pointwise_kernel() const {
  return impl().weight("pointwise_kernel");
}
Variable SeparableConv1D::bias() const {
  return impl().weight("bias");
}

}  // namespace layers

namespace detail::layer_options {

std::optional<ConvConfig> depthwise_conv(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const DepthwiseImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  const auto& k = p->c_;
  auto sizes = [&](Size2 s) {
    return k.rank == 2 ? std::vector<int>{s.h, s.w} : std::vector<int>{s.w};
  };
  ConvConfig c;
  c.filters = k.filters;
  c.kernel_size = sizes(k.kernel);
  c.strides = sizes(k.strides);
  c.dilation_rate = sizes(k.dilation);
  c.padding = lower(k.padding);
  c.channels_first = p->format_.channels_first();
  c.depth_multiplier = k.depth_multiplier;
  c.activation = k.activation;
  c.use_bias = k.use_bias;
  c.kernel_initializer = k.depthwise_init;
  c.pointwise_initializer = k.pointwise_init;
  c.bias_initializer = k.bias_init;
  c.kernel_regularizer = k.depthwise_reg;
  c.pointwise_regularizer = k.pointwise_reg;
  c.bias_regularizer = k.bias_reg;
  c.kernel_constraint = k.depthwise_con;
  c.pointwise_constraint = k.pointwise_con;
  c.bias_constraint = k.bias_con;
  return c;
}

}  // namespace detail::layer_options
}  // namespace tapeflow::keras
