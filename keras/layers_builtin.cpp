// The built-in layers: Dense, Conv2D, Conv2DTranspose, MaxPooling2D, AveragePooling2D, Flatten,
// Dropout, BatchNormalization, ReLU, Softmax. Each is a LayerImpl (state, build, call) behind its
// handle.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <optional>

#include "autograd/tape.h"
#include "core/check.h"
#include "distribute/replica_context.h"
#include "keras/data_format.h"
#include "keras/layer_handle.h"
#include "keras/layers.h"
#include "keras/serialization_access.h"
#include "keras/serialization_access_conv.h"
#include "ops/binary.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras {
namespace {

using detail::DataFormat;
using detail::LayerImpl;
using layers::BatchNormalizationOptions;
using layers::Conv2DOptions;
using layers::Conv2DTransposeOptions;
using layers::DenseOptions;

// "valid"/"same" in any case -> true for "same"; anything else is an InvalidArgumentError.
bool parse_padding(const char* layer, std::string padding) {
  std::transform(padding.begin(), padding.end(), padding.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  TF_CHECK_ARG(padding == "valid" || padding == "same", layer,
               "padding must be \"valid\" or \"same\", got \"{}\"", padding);
  return padding == "same";
}

void check_size2(const char* layer, const char* what, Size2 s) {
  TF_CHECK_ARG(s.h > 0 && s.w > 0, layer, "{} must be positive, got ({}, {})", what, s.h, s.w);
}

std::string shape_str(const TensorShape& s) { return s.to_string(); }

// ---- Dense ----
class DenseImpl final : public LayerImpl {
 public:
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  DenseImpl(int64_t units, DenseOptions o)
      : LayerImpl("Dense", "dense", o.name),
        units_(units),
        activation_(activations::get(o.activation)),
        use_bias_(o.use_bias),
        kernel_init_(o.kernel_initializer.defined() ? o.kernel_initializer
                                                    : initializers::GlorotUniform()),
        bias_init_(o.bias_initializer.defined() ? o.bias_initializer : initializers::Zeros()),
        kernel_reg_(o.kernel_regularizer),
        bias_reg_(o.bias_regularizer),
        options_(o) {
    TF_CHECK_ARG(units > 0, "Dense", "units must be positive, got {}", units);
  }
  int64_t units() const { return units_; }

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_ARG(s.rank() >= 2 && s[s.rank() - 1] != None, name_.c_str(),
                 "layer \"{}\" (Dense) needs inputs of rank >= 2 with a known last dimension, "
                 "got shape {}",
                 name_, shape_str(s));
    in_ = s[s.rank() - 1];
    kernel_ = add_weight("kernel", TensorShape({in_, units_}), kernel_init_, true, kernel_reg_,
                         options_.kernel_constraint);
    if (use_bias_)
      bias_ = add_weight("bias", TensorShape({units_}), bias_init_, true, bias_reg_,
                         options_.bias_constraint);
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    TF_CHECK_ARG(s.rank() >= 2, name_.c_str(),
                 "layer \"{}\" (Dense) needs inputs of rank >= 2, got shape {}", name_,
                 shape_str(s));
    TensorShape o = s;
    o[o.rank() - 1] = units_;
    return o;
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() < 2 || (s[s.rank() - 1] != in_ && s[s.rank() - 1] != None))
      incompatible(s, fmt::format("expected min_ndim=2 and axis -1 of input shape to have value "
                                  "{} (the layer was built for input shape {})",
                                  in_, shape_str(built_input_shape())));
  }
  Tensor call(const Tensor& x, bool) override {
    Tensor y = matmul(x, kernel_.value());
    if (use_bias_) y = nn::bias_add(y, bias_.value());
    return activation_ ? activation_(y) : y;
  }

 private:
  friend class layers::Dense;
  friend std::optional<detail::layer_options::DenseConfig> detail::layer_options::dense(
      const LayerImpl&);
  int64_t units_;
  activations::Activation activation_;
  bool use_bias_;
  Initializer kernel_init_, bias_init_;
  Regularizer kernel_reg_, bias_reg_;
  layers::DenseOptions options_;  // as given, for get_config (keras/serialization.h)
  int64_t in_ = 0;
  Variable kernel_, bias_;  // set by build, read after built() (acquire)
};

// ---- Conv2D ----
class Conv2DImpl final : public LayerImpl {
 public:
  Conv2DImpl(int64_t filters, Size2 kernel, Conv2DOptions o)
      : LayerImpl("Conv2D", "conv2d", o.name),
        filters_(filters),
        kernel_size_(kernel),
        strides_(o.strides),
        dilation_(o.dilation_rate),
        groups_(o.groups),
        same_(parse_padding("Conv2D", o.padding)),
        format_(DataFormat::parse("Conv2D", o.data_format)),
        activation_(activations::get(o.activation)),
        use_bias_(o.use_bias),
        kernel_init_(o.kernel_initializer.defined() ? o.kernel_initializer
                                                    : initializers::GlorotUniform()),
        bias_init_(o.bias_initializer.defined() ? o.bias_initializer : initializers::Zeros()),
        kernel_reg_(o.kernel_regularizer),
        bias_reg_(o.bias_regularizer),
        options_(o) {
    TF_CHECK_ARG(filters > 0, "Conv2D", "filters must be positive, got {}", filters);
    check_size2("Conv2D", "kernel_size", kernel);
    check_size2("Conv2D", "strides", o.strides);
    check_size2("Conv2D", "dilation_rate", o.dilation_rate);
    TF_CHECK_ARG(o.groups > 0, "Conv2D",
                 "the number of groups must be a positive integer, got groups={}", o.groups);
    TF_CHECK_ARG(filters % o.groups == 0, "Conv2D",
                 "the number of filters must be evenly divisible by the number of groups, got "
                 "groups={}, filters={}",
                 o.groups, filters);
    TF_CHECK_ARG(std::max(o.strides.h, o.strides.w) == 1 ||
                     std::max(o.dilation_rate.h, o.dilation_rate.w) == 1,
                 "Conv2D",
                 "strides > 1 together with dilation_rate > 1 is not supported (as Keras), got "
                 "strides=({}, {}), dilation_rate=({}, {})",
                 o.strides.h, o.strides.w, o.dilation_rate.h, o.dilation_rate.w);
  }

 protected:
  void build(const TensorShape& input) override {
    const TensorShape s = format_.to_last(input);
    TF_CHECK_ARG(s.rank() == 4 && s[3] != None, name_.c_str(),
                 "layer \"{}\" (Conv2D) needs {} inputs of rank 4 with a known channel "
                 "dimension, got shape {}",
                 name_, format_.layout(2), shape_str(input));
    TF_CHECK_ARG(s[3] % groups_ == 0, name_.c_str(),
                 "layer \"{}\" (Conv2D): the number of input channels must be evenly divisible "
                 "by the number of groups, got groups={} but the input has {} channels (full "
                 "input shape {})",
                 name_, groups_, s[3], shape_str(input));
    channels_ = s[3];
    const TensorShape kshape({kernel_size_.h, kernel_size_.w, channels_ / groups_, filters_});
    kernel_ =
        add_weight("kernel", kshape, kernel_init_, true, kernel_reg_, options_.kernel_constraint);
    if (use_bias_)
      bias_ = add_weight("bias", TensorShape({filters_}), bias_init_, true, bias_reg_,
                         options_.bias_constraint);
  }
  TensorShape compute_output_shape(const TensorShape& input) const override {
    if (input.rank() != 4) incompatible(input, format_.expected_ndim(2));
    const TensorShape s = format_.to_last(input);
    TensorShape o = s;
    o[1] = ::tapeflow::detail::window_dim(s[1], kernel_size_.h, strides_.h, dilation_.h, same_).out;
    o[2] = ::tapeflow::detail::window_dim(s[2], kernel_size_.w, strides_.w, dilation_.w, same_).out;
    o[3] = filters_;
    return format_.to_first(o);
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    require_rank_and_channels(s, 4, channels_, format_.channels_first());
  }
  Tensor call(const Tensor& x, bool) override {
    // With groups > 1 the kernel's depth is in / groups: conv2d runs it as a grouped one.
    // channels_first runs as an NCHW convolution (no transposes).
    const char* data_format = format_.channels_first() ? "NCHW" : "NHWC";
    Tensor y = nn::conv2d(x, kernel_.value(), {strides_.h, strides_.w}, same_ ? "SAME" : "VALID",
                          {dilation_.h, dilation_.w}, data_format);
    if (use_bias_) y = nn::bias_add(y, bias_.value(), data_format);
    return activation_ ? activation_(y) : y;
  }

 private:
  friend class layers::Conv2D;
  friend std::optional<detail::layer_options::Conv2DConfig> detail::layer_options::conv2d(
      const LayerImpl&);
  int64_t filters_;
  Size2 kernel_size_, strides_, dilation_;
  int groups_;
  bool same_;
  DataFormat format_;
  activations::Activation activation_;
  bool use_bias_;
  Initializer kernel_init_, bias_init_;
  Regularizer kernel_reg_, bias_reg_;
  layers::Conv2DOptions options_;  // as given, for get_config (keras/serialization.h)
  int64_t channels_ = 0;
  Variable kernel_, bias_;
};

// ---- Conv2DTranspose ----
class Conv2DTransposeImpl final : public LayerImpl {
 public:
  Conv2DTransposeImpl(int64_t filters, Size2 kernel, Conv2DTransposeOptions o)
      : LayerImpl("Conv2DTranspose", "conv2d_transpose", o.name),
        filters_(filters),
        kernel_size_(kernel),
        strides_(o.strides),
        dilation_(o.dilation_rate),
        output_padding_(o.output_padding),
        same_(parse_padding("Conv2DTranspose", o.padding)),
        format_(DataFormat::parse("Conv2DTranspose", o.data_format)),
        activation_name_(o.activation),
        activation_(activations::get(o.activation)),
        use_bias_(o.use_bias),
        kernel_init_(o.kernel_initializer.defined() ? o.kernel_initializer
                                                    : initializers::GlorotUniform()),
        bias_init_(o.bias_initializer.defined() ? o.bias_initializer : initializers::Zeros()),
        kernel_reg_(o.kernel_regularizer),
        bias_reg_(o.bias_regularizer),
        kernel_con_(o.kernel_constraint),
        bias_con_(o.bias_constraint) {
    const char* op = "Conv2DTranspose";
    TF_CHECK_ARG(filters > 0, op, "filters must be positive, got {}", filters);
    check_size2(op, "kernel_size", kernel);
    check_size2(op, "strides", o.strides);
    check_size2(op, "dilation_rate", o.dilation_rate);
    if (output_padding_) {
      const Size2 p = *output_padding_;
      TF_CHECK_ARG(p.h >= 0 && p.w >= 0 && p.h < strides_.h && p.w < strides_.w, op,
                   "output_padding ({}, {}) must be non-negative and less than strides ({}, {})",
                   p.h, p.w, strides_.h, strides_.w);
    }
  }

 protected:
  void build(const TensorShape& input) override {
    const TensorShape s = format_.to_last(input);
    TF_CHECK_ARG(s.rank() == 4 && s[3] != None, name_.c_str(),
                 "layer \"{}\" (Conv2DTranspose) needs {} inputs of rank 4 with a known "
                 "channel dimension, got shape {}",
                 name_, format_.layout(2), shape_str(input));
    channels_ = s[3];
    const TensorShape kshape({kernel_size_.h, kernel_size_.w, filters_, channels_});
    kernel_ = add_weight("kernel", kshape, kernel_init_, true, kernel_reg_, kernel_con_);
    if (use_bias_)
      bias_ = add_weight("bias", TensorShape({filters_}), bias_init_, true, bias_reg_, bias_con_);
  }
  // Keras' deconv_output_length for one spatial dimension.
  int64_t out_length(int64_t in, int k, int stride, int dilation, std::optional<int> pad) const {
    return tapeflow::detail::transposed_length(in, k, stride, dilation, same_, pad);
  }
  TensorShape compute_output_shape(const TensorShape& input) const override {
    if (input.rank() != 4) incompatible(input, format_.expected_ndim(2));
    return format_.to_first(output_shape_last(format_.to_last(input)));
  }
  // The output shape of a channels_last input.
  TensorShape output_shape_last(const TensorShape& s) const {
    TensorShape o = s;
    const std::optional<int> ph =
        output_padding_ ? std::optional<int>(output_padding_->h) : std::nullopt;
    const std::optional<int> pw =
        output_padding_ ? std::optional<int>(output_padding_->w) : std::nullopt;
    o[1] = out_length(s[1], kernel_size_.h, strides_.h, dilation_.h, ph);
    o[2] = out_length(s[2], kernel_size_.w, strides_.w, dilation_.w, pw);
    o[3] = filters_;
    return o;
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    require_rank_and_channels(s, 4, channels_, format_.channels_first());
  }
  Tensor call(const Tensor& x, bool) override {
    // channels_first runs as an NCHW transposed convolution (no transposes).
    const char* data_format = format_.channels_first() ? "NCHW" : "NHWC";
    // The height and width are left to the op (Keras' lengths, from output_padding), so that a
    // graph traced for None dimensions serves every input size.
    TensorShape out = compute_output_shape(x.shape());
    const int h = format_.channels_first() ? 2 : 1;
    out[h] = out[h + 1] = None;
    std::optional<std::array<int, 2>> padding;
    if (output_padding_) padding = std::array<int, 2>{output_padding_->h, output_padding_->w};
    Tensor y = tapeflow::detail::conv2d_transpose(x, kernel_.value(), out, {strides_.h, strides_.w},
                                                  same_ ? "SAME" : "VALID",
                                                  {dilation_.h, dilation_.w}, data_format, padding);
    if (use_bias_) y = nn::bias_add(y, bias_.value(), data_format);
    return activation_ ? activation_(y) : y;
  }

 private:
  friend class layers::Conv2DTranspose;
  friend std::optional<detail::layer_options::ConvConfig> detail::layer_options::conv2d_transpose(
      const LayerImpl&);
  int64_t filters_;
  Size2 kernel_size_, strides_, dilation_;
  std::optional<Size2> output_padding_;
  bool same_;
  DataFormat format_;
  std::string activation_name_;  // as given, for get_config (keras/serialization.h)
  activations::Activation activation_;
  bool use_bias_;
  Initializer kernel_init_, bias_init_;
  Regularizer kernel_reg_, bias_reg_;
  Constraint kernel_con_, bias_con_;
  int64_t channels_ = 0;
  Variable kernel_, bias_;
};

// ---- Pooling ----
class Pooling2DImpl final : public LayerImpl {
 public:
  Pooling2DImpl(bool max, Size2 pool, std::optional<Size2> strides, const std::string& padding,
                std::string name, const std::string& data_format = "")
      : LayerImpl(max ? "MaxPooling2D" : "AveragePooling2D",
                  max ? "max_pooling2d" : "average_pooling2d", std::move(name)),
        max_(max),
        pool_(pool),
        strides_(strides.value_or(pool)),
        same_(parse_padding(max ? "MaxPooling2D" : "AveragePooling2D", padding)),
        format_(DataFormat::parse(max ? "MaxPooling2D" : "AveragePooling2D", data_format)) {
    check_size2(class_name_.c_str(), "pool_size", pool_);
    check_size2(class_name_.c_str(), "strides", strides_);
  }

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_ARG(s.rank() == 4, name_.c_str(),
                 "layer \"{}\" ({}) needs {} inputs of rank 4, got shape {}", name_, class_name_,
                 format_.layout(2), shape_str(s));
  }
  TensorShape compute_output_shape(const TensorShape& input) const override {
    if (input.rank() != 4) incompatible(input, format_.expected_ndim(2));
    TensorShape o = format_.to_last(input);
    o[1] = ::tapeflow::detail::window_dim(o[1], pool_.h, strides_.h, 1, same_).out;
    o[2] = ::tapeflow::detail::window_dim(o[2], pool_.w, strides_.w, 1, same_).out;
    return format_.to_first(o);
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != 4) incompatible(s, format_.expected_ndim(2));
  }
  Tensor call(const Tensor& x, bool) override {
    const char* pad = same_ ? "SAME" : "VALID";
    const Tensor in = format_.to_last(x);
    return format_.to_first(
        max_ ? nn::max_pool2d(in, {pool_.h, pool_.w}, {strides_.h, strides_.w}, pad)
             : nn::avg_pool2d(in, {pool_.h, pool_.w}, {strides_.h, strides_.w}, pad));
  }

 private:
  friend std::optional<detail::layer_options::Pooling2DConfig> detail::layer_options::pooling2d(
      const LayerImpl&);
  bool max_;
  Size2 pool_, strides_;
  bool same_;
  DataFormat format_;
};

// ---- Flatten ----
class FlattenImpl final : public LayerImpl {
 public:
  FlattenImpl(std::string name, const std::string& data_format)
      : LayerImpl("Flatten", "flatten", std::move(name)),
        format_(DataFormat::parse("Flatten", data_format)) {}
  bool channels_first() const { return format_.channels_first(); }

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_ARG(s.rank() >= 1, name_.c_str(),
                 "layer \"{}\" (Flatten) needs inputs with a batch dimension, got shape {}",
                 name_, shape_str(s));
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    TF_CHECK_ARG(s.rank() >= 1, name_.c_str(),
                 "layer \"{}\" (Flatten) needs inputs with a batch dimension, got shape {}", name_,
                 shape_str(s));
    int64_t n = 1;
    for (int i = 1; i < s.rank(); ++i) {
      if (s[i] == None || n == None) {
        n = None;
        continue;
      }
      TF_CHECK_ARG(!__builtin_mul_overflow(n, s[i], &n), name_.c_str(),
                   "layer \"{}\" (Flatten): the flattened size of shape {} overflows int64", name_,
                   shape_str(s));
    }
    return TensorShape({s[0], n});
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() < 1) incompatible(s, "expected min_ndim=1");
  }
  bool casts_all_inputs() const override { return false; }  // Keras' Flatten keeps the dtype
  Tensor call(const Tensor& input, bool) override {
    // channels_first: the channels move last first, so that the flattened order is the
    // channels_last one (Keras').
    const Tensor x = format_.to_last(input);
    (void)compute_output_shape(x.shape());  // checks the rank and the flattened size
    // The sizes follow x when the graph runs: one traced graph serves every batch size and
    // every length or image size of its None dimensions.
    return tapeflow::detail::merge_axes(x, {1, x.rank() - 1});
  }

 private:
  DataFormat format_;
};

// ---- Dropout ----
class DropoutImpl final : public LayerImpl {
 public:
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  DropoutImpl(double rate, std::optional<int64_t> seed, std::string name)
      : LayerImpl("Dropout", "dropout", std::move(name)), rate_(rate), seed_(seed) {
    TF_CHECK_ARG(rate >= 0.0 && rate < 1.0, "Dropout", "rate must be in the range [0, 1), got {}",
                 rate);
  }
  double rate() const { return rate_; }

 protected:
  bool casts_all_inputs() const override { return false; }
  Tensor call(const Tensor& x, bool training) override {
    if (!training || rate_ == 0.0) return x;
    return nn::dropout(x, rate_, seed_);
  }

 private:
  friend std::optional<detail::layer_options::DropoutConfig> detail::layer_options::dropout(
      const LayerImpl&);
  double rate_;
  std::optional<int64_t> seed_;
};

// ---- ReLU and Softmax ----
class ReLUImpl final : public LayerImpl {
 public:
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  ReLUImpl(std::optional<double> max_value, double slope, double threshold, std::string name)
      : LayerImpl("ReLU", "re_lu", std::move(name)),
        max_value_(max_value),
        slope_(slope),
        threshold_(threshold) {
    TF_CHECK_ARG(!max_value || *max_value >= 0.0, "ReLU", "max_value must be >= 0, got {}",
                 max_value.value_or(0.0));
    TF_CHECK_ARG(slope >= 0.0 && std::isfinite(slope), "ReLU",
                 "negative_slope must be finite and >= 0, got {}", slope);
    TF_CHECK_ARG(std::isfinite(threshold) && threshold >= 0.0, "ReLU",
                 "threshold must be finite and >= 0, got {}", threshold);
  }

 protected:
  // Keras 3's relu(x, negative_slope, max_value, threshold), op for op, so the values and the
  // gradients at the boundaries are Keras': x > threshold (strict), leaky_relu's slope at 0,
  // relu6's zero gradient at 6, clip's pass-through at other maxima.
  Tensor call(const Tensor& x, bool) override {
    if (slope_ == 0.0 && threshold_ == 0.0 && !max_value_) return nn::relu(x);
    if (slope_ != 0.0 && threshold_ == 0.0 && !max_value_)  // leaky_relu
      return where(greater(x, zeros_like(x)), x, x * slope_);
    Tensor negative_part;
    if (slope_ != 0.0) negative_part = nn::relu(threshold_ != 0.0 ? threshold_ - x : -x);
    bool clip = max_value_.has_value();
    Tensor y;
    if (threshold_ != 0.0) {
      y = x * cast(greater(x, threshold_), x.dtype());
    } else if (*max_value_ == 6.0) {
      // relu6: on a tie the first operand (the constant) takes the gradient, as Relu6Grad's 0.
      y = minimum(constant(Tensor(6.0), x.dtype()), nn::relu(x));
      clip = false;
    } else {
      y = nn::relu(x);
    }
    if (clip) y = clip_by_value(y, 0.0, *max_value_);
    if (slope_ != 0.0) y = y - negative_part * slope_;
    return y;
  }

 private:
  friend std::optional<detail::layer_options::ReLUConfig> detail::layer_options::relu(
      const LayerImpl&);
  std::optional<double> max_value_;
  double slope_, threshold_;
};

class SoftmaxImpl final : public LayerImpl {
 public:
  SoftmaxImpl(int axis, std::string name)
      : LayerImpl("Softmax", "softmax", std::move(name)), axis_(axis) {}

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_ARG(axis_ >= -s.rank() && axis_ < s.rank(), name_.c_str(),
                 "layer \"{}\" (Softmax): axis {} is out of range for inputs of shape {}", name_,
                 axis_, shape_str(s));
  }
  // Keras 3.15: masked entries take a large negative logit (-3e4 in float16, -1e9 otherwise)
  // and a zero output, so a row with every entry masked gives zeros, not a uniform row.
  bool supports_masking() const override { return true; }
  bool mask_broadcasts_from_last_axis() const override { return true; }
  Tensor call(const Tensor& x, bool) override {
    const Tensor mask = call_mask();
    if (!mask.defined()) return nn::softmax(x, axis_);
    const double large_negative = x.dtype() == float16 ? -3e4 : -1e9;
    const Tensor y = nn::softmax(where(mask, x, constant(large_negative, x.dtype())), axis_);
    return where(mask, y, zeros({}, y.dtype()));
  }

 private:
  friend std::optional<int> detail::layer_options::softmax_axis(const LayerImpl&);
  int axis_;
};

// ---- BatchNormalization ----
class BatchNormImpl final : public LayerImpl {
 public:
  // Keras: computes in the variable dtype under a mixed policy (float32 statistics).
  bool autocast() const override { return false; }
  explicit BatchNormImpl(BatchNormalizationOptions o)
      : LayerImpl("BatchNormalization", "batch_normalization", o.name), o_(std::move(o)) {
    TF_CHECK_ARG(o_.momentum >= 0.0 && o_.momentum <= 1.0, "BatchNormalization",
                 "momentum must be in [0, 1], got {}", o_.momentum);
    TF_CHECK_ARG(o_.epsilon > 0.0 && std::isfinite(o_.epsilon), "BatchNormalization",
                 "epsilon must be positive and finite, got {}", o_.epsilon);
  }

 protected:
  void build(const TensorShape& s) override {
    const int r = s.rank();
    TF_CHECK_ARG(o_.axis >= -r && o_.axis < r && r >= 1, name_.c_str(),
                 "layer \"{}\" (BatchNormalization): axis {} is out of range for inputs of "
                 "shape {}",
                 name_, o_.axis, shape_str(s));
    axis_ = o_.axis < 0 ? o_.axis + r : o_.axis;
    rank_ = r;
    channels_ = s[axis_];
    TF_CHECK_ARG(channels_ != None, name_.c_str(),
                 "layer \"{}\" (BatchNormalization): axis {} of the input must be known, got "
                 "shape {}",
                 name_, o_.axis, shape_str(s));
    const TensorShape c({channels_});
    auto pick = [](const Initializer& i, Initializer d) { return i.defined() ? i : d; };
    if (o_.scale)
      gamma_ = add_weight("gamma", c, pick(o_.gamma_initializer, initializers::Ones()), true,
                          o_.gamma_regularizer, o_.gamma_constraint);
    if (o_.center)
      beta_ = add_weight("beta", c, pick(o_.beta_initializer, initializers::Zeros()), true,
                         o_.beta_regularizer, o_.beta_constraint);
    moving_mean_ = add_weight("moving_mean", c,
                              pick(o_.moving_mean_initializer, initializers::Zeros()), false);
    moving_variance_ =
        add_weight("moving_variance", c,
                   pick(o_.moving_variance_initializer, initializers::Ones()), false);
  }
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  void check_input(const TensorShape& s) const override {
    if (s.rank() != rank_ || (s[axis_] != channels_ && s[axis_] != None))
      incompatible(s, fmt::format("expected ndim={} and axis {} of input shape to have value {} "
                                  "(the layer was built for input shape {})",
                                  rank_, axis_, channels_, shape_str(built_input_shape())));
  }
  Tensor call(const Tensor& x, bool training) override {
    std::vector<int> axes;
    for (int i = 0; i < rank_; ++i)
      if (i != axis_) axes.push_back(i);
    // Per-channel vectors broadcast against x after a reshape unless the channels are last.
    TensorShape bshape;
    for (int i = 0; i < rank_; ++i) bshape.push_back(i == axis_ ? channels_ : 1);
    auto b = [&](const Tensor& v) { return axis_ == rank_ - 1 ? v : reshape(v, bshape); };

    Tensor mean, var;
    // Keras reads the mask only for the training moments (inference and a frozen layer pass it
    // on whatever its rank).
    const Tensor mask = training && trainable() ? call_mask() : Tensor();
    if (mask.defined())
      TF_CHECK_ARG(mask.rank() == rank_ - 1, name_.c_str(),
                   "layer \"{}\" (BatchNormalization): the mask must have one dimension less "
                   "than the inputs, got mask shape {} for inputs of shape {}",
                   name_, shape_str(mask.shape()), shape_str(x.shape()));
    if (training && trainable() && mask.defined()) {
      // Keras 3.15's masked moments: the masked positions count for nothing, and Keras adds
      // its epsilon (1e-7) to the number of kept positions. The moving statistics follow them.
      const Tensor keep = expand_dims(mask, -1);  // broadcasts against x in where()
      const Tensor n = reduce_sum(where(keep, ones_like(x), zeros_like(x)), axes) + 1e-7;
      mean = reduce_sum(where(keep, x, zeros_like(x)), axes) / n;
      var = reduce_sum(square(where(keep, x - b(mean), zeros_like(x))), axes) / n;
      update_moving_statistics(x, axes, mean, var, false, std::nullopt);
    } else if (training && trainable()) {
      mean = reduce_mean(x, axes);
      var = reduce_mean(square(x - b(mean)), axes);
      // The statistics of an empty batch are NaN (0 / 0): the moving update skips them, and 0
      // and 1 stand in for them below, so that the gradients (sums over no elements) are 0
      // rather than NaN * 0. With None dimensions the graph decides when it runs.
      std::optional<Tensor> nonempty;
      const bool open = ::tapeflow::detail::open_shapes();
      const bool empty = !open && x.num_elements() == 0;
      if (open) {
        const Tensor n = ::tapeflow::detail::element_count(x, axes, mean.dtype());
        nonempty = greater(n, zeros_like(n));
      }
      update_moving_statistics(x, axes, mean, var, empty, nonempty);
      if (empty) {
        mean = zeros_like(mean);
        var = ones_like(var);
      } else if (nonempty) {
        mean = where(*nonempty, mean, zeros_like(mean));
        var = where(*nonempty, var, ones_like(var));
      }
    } else {
      mean = moving_mean_.value();
      var = moving_variance_.value();
    }
    // TF's batch_normalization: x * inv + (beta - mean * inv), inv = gamma / sqrt(var + eps).
    Tensor inv = rsqrt(var + o_.epsilon);
    if (o_.scale) inv = inv * gamma_.value();
    Tensor shift = o_.center ? beta_.value() - mean * inv : -(mean * inv);
    return x * b(inv) + b(shift);
  }

 private:
  friend class layers::BatchNormalization;

  // Moves the moving statistics toward the batch's, unless the batch is empty (`empty`, or at
  // run time `nonempty` false). Under a strategy a replica's empty share of the global batch
  // (the last one, split unevenly) counts for nothing. TF's layer makes them NaN for good.
  void update_moving_statistics(const Tensor& x, const std::vector<int>& axes,
                                const Tensor& batch_mean, const Tensor& batch_var, bool empty,
                                std::optional<Tensor> nonempty) {
    ::tapeflow::detail::PauseTapes pause;  // state updates, not part of the gradient
    Tensor m = batch_mean, v = batch_var;
    if (auto* ctx = distribute::get_replica_context(); ctx && ctx->num_replicas_in_sync() > 1) {
      // Every replica applies the replicas' statistics, averaged with their batch sizes as
      // weights, so mirrored copies stay equal and an empty share counts for nothing.
      const Tensor n = ::tapeflow::detail::element_count(x, axes, m.dtype());
      const Tensor has = greater(n, zeros_like(n));
      auto r = ctx->all_reduce(distribute::ReduceOp::SUM,
                               std::vector<Tensor>{where(has, m * n, zeros_like(m)),
                                                   where(has, v * n, zeros_like(v)), n});
      const Tensor total = maximum(r[2], ones_like(r[2]));
      m = r[0] / total;
      v = r[1] / total;
      nonempty = greater(r[2], zeros_like(r[2]));
      // A variable shared by the replicas (not mirrored) takes the update once.
      if (!moving_mean_.is_mirrored() && ctx->replica_id_in_sync_group() != 0) return;
    } else if (empty) {
      return;
    }
    const double decay = 1.0 - o_.momentum;
    Tensor dm = (moving_mean_.value() - m) * decay;
    Tensor dv = (moving_variance_.value() - v) * decay;
    if (nonempty) {
      dm = where(*nonempty, dm, zeros_like(dm));
      dv = where(*nonempty, dv, zeros_like(dv));
    }
    moving_mean_.assign_sub(dm);
    moving_variance_.assign_sub(dv);
  }

  friend std::optional<BatchNormalizationOptions> detail::layer_options::batch_normalization(
      const LayerImpl&);
  BatchNormalizationOptions o_;
  int axis_ = 0, rank_ = 0;
  int64_t channels_ = 0;
  Variable gamma_, beta_, moving_mean_, moving_variance_;
};

}  // namespace

namespace layers {

Dense::Dense(int64_t units, DenseOptions options) {
  auto input_shape = options.input_shape;
  auto impl = std::make_shared<DenseImpl>(units, std::move(options));
  impl_ = impl;
  if (!input_shape.empty()) impl->build_from_declared_shape(input_shape);
}
int64_t Dense::units() const {
  return impl_as<DenseImpl>(*this, "Dense").units();
}
Variable Dense::kernel() const { return impl().weight("kernel"); }
Variable Dense::bias() const { return impl().weight("bias"); }

Conv2D::Conv2D(int64_t filters, Size2 kernel_size, Conv2DOptions options) {
  auto input_shape = options.input_shape;
  auto impl = std::make_shared<Conv2DImpl>(filters, kernel_size, std::move(options));
  impl_ = impl;
  if (!input_shape.empty()) impl->build_from_declared_shape(input_shape);
}
Variable Conv2D::kernel() const { return impl().weight("kernel"); }
Variable Conv2D::bias() const { return impl().weight("bias"); }

Conv2DTranspose::Conv2DTranspose(int64_t filters, Size2 kernel_size,
                                 Conv2DTransposeOptions options) {
  auto input_shape = options.input_shape;
  auto impl = std::make_shared<Conv2DTransposeImpl>(filters, kernel_size, std::move(options));
  impl_ = impl;
  if (!input_shape.empty()) impl->build_from_declared_shape(input_shape);
}
Variable Conv2DTranspose::kernel() const {
  return impl().weight("kernel");
}
Variable Conv2DTranspose::bias() const {
  return impl().weight("bias");
}

MaxPooling2D::MaxPooling2D(Size2 pool_size, Pooling2DOptions o)
    : Layer(std::make_shared<Pooling2DImpl>(true, pool_size, o.strides, o.padding,
                                            std::move(o.name), o.data_format)) {}
AveragePooling2D::AveragePooling2D(Size2 pool_size, Pooling2DOptions o)
    : Layer(std::make_shared<Pooling2DImpl>(false, pool_size, o.strides, o.padding,
                                            std::move(o.name), o.data_format)) {}

Flatten::Flatten(FlattenOptions o)
    : Layer(std::make_shared<FlattenImpl>(std::move(o.name), o.data_format)) {
  if (!o.input_shape.empty()) impl().build_from_declared_shape(o.input_shape);
}

Dropout::Dropout(double rate, std::optional<int64_t> seed, std::string name)
    : Layer(std::make_shared<DropoutImpl>(rate, seed, std::move(name))) {}
double Dropout::rate() const {
  return impl_as<DropoutImpl>(*this, "Dropout").rate();
}

BatchNormalization::BatchNormalization(BatchNormalizationOptions options)
    : Layer(std::make_shared<BatchNormImpl>(std::move(options))) {}
Variable BatchNormalization::gamma() const { return impl().weight("gamma"); }
Variable BatchNormalization::beta() const { return impl().weight("beta"); }
Variable BatchNormalization::moving_mean() const { return impl().weight("moving_mean"); }
Variable BatchNormalization::moving_variance() const { return impl().weight("moving_variance"); }

ReLU::ReLU(std::optional<double> max_value, double negative_slope, double threshold,
           std::string name)
    : Layer(std::make_shared<ReLUImpl>(max_value, negative_slope, threshold, std::move(name))) {}

Softmax::Softmax(int axis, std::string name, std::optional<mixed_precision::Policy> dtype)
    : Layer(std::make_shared<SoftmaxImpl>(axis, std::move(name))) {
  if (dtype) set_dtype_policy(*dtype);
}

}  // namespace layers

namespace detail::layer_options {

std::optional<DenseConfig> dense(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const DenseImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return DenseConfig{p->units_, p->options_};
}
std::optional<Conv2DConfig> conv2d(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const Conv2DImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  Conv2DConfig c{p->filters_, p->kernel_size_, p->options_};
  c.options.data_format = p->format_.keras_name();  // resolved ("" follows image_data_format)
  return c;
}
std::optional<Pooling2DConfig> pooling2d(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const Pooling2DImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return Pooling2DConfig{p->pool_, p->strides_, p->same_, p->format_.channels_first()};
}
std::optional<bool> flatten_channels_first(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const FlattenImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->channels_first();
}
std::optional<DropoutConfig> dropout(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const DropoutImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return DropoutConfig{p->rate_, p->seed_};
}
std::optional<layers::BatchNormalizationOptions> batch_normalization(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const BatchNormImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->o_;
}
std::optional<ReLUConfig> relu(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const ReLUImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return ReLUConfig{p->max_value_, p->slope_, p->threshold_};
}
std::optional<int> softmax_axis(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const SoftmaxImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->axis_;
}
std::optional<ConvConfig> conv2d_transpose(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const Conv2DTransposeImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  ConvConfig c;
  c.filters = p->filters_;
  c.kernel_size = {p->kernel_size_.h, p->kernel_size_.w};
  c.strides = {p->strides_.h, p->strides_.w};
  c.dilation_rate = {p->dilation_.h, p->dilation_.w};
  if (p->output_padding_) c.output_padding = {p->output_padding_->h, p->output_padding_->w};
  c.padding = p->same_ ? "same" : "valid";
  c.channels_first = p->format_.channels_first();
  c.activation = p->activation_name_;
  c.use_bias = p->use_bias_;
  c.kernel_initializer = p->kernel_init_;
  c.bias_initializer = p->bias_init_;
  c.kernel_regularizer = p->kernel_reg_;
  c.bias_regularizer = p->bias_reg_;
  c.kernel_constraint = p->kernel_con_;
  c.bias_constraint = p->bias_con_;
  return c;
}

}  // namespace detail::layer_options
}  // namespace tapeflow::keras
