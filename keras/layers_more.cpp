// The layers of keras/layers_more.h: Embedding, LayerNormalization, the global poolings,
// Reshape, Activation, Rescaling, Conv1D, MaxPooling1D, AveragePooling1D, UpSampling2D. Each is
// a LayerImpl (state, build, call) behind its handle, composed of existing ops.
#include "keras/layers_more.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <string_view>
#include <utility>

#include "core/check.h"
#include "core/error.h"
#include "keras/data_format.h"
#include "keras/embedding_lookup.h"
#include "keras/layer_handle.h"
#include "keras/serialization_access.h"
#include "keras/serialization_access_conv.h"
#include "ops/binary.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/image.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras {
namespace {

using detail::DataFormat;
using detail::LayerImpl;

std::string shape_str(const TensorShape& s) {
  return s.to_string();
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// "valid"/"same" (and "causal" where allowed) in any case; anything else is an
// InvalidArgumentError naming the layer.
std::string parse_padding(const char* layer, const std::string& padding, bool causal_ok) {
  const std::string p = lower(padding);
  TF_CHECK_ARG(p == "valid" || p == "same" || (causal_ok && p == "causal"), layer,
               "padding must be \"valid\"{} or \"same\", got \"{}\"",
               causal_ok ? ", \"causal\"" : "", padding);
  return p;
}

// A batch dimension for reshape: the known size, or -1 (a graph traced for a None batch).
int64_t batch_or_infer(const TensorShape& s) {
  return s[0] == None ? -1 : s[0];
}

// A target_shape as Keras prints it, with its -1: "(5, -1)", "(7,)".
std::string target_str(const std::vector<int64_t>& t) {
  return t.size() == 1 ? fmt::format("({},)", t[0]) : fmt::format("({})", fmt::join(t, ", "));
}

// ---- Embedding ----
class EmbeddingImpl final : public LayerImpl {
 public:
  // Keras: looks up in the variable dtype under a mixed policy, then casts the output.
  bool autocast() const override { return false; }
  EmbeddingImpl(int64_t input_dim, int64_t output_dim, const layers::EmbeddingOptions& o)
      : LayerImpl("Embedding", "embedding", o.name),
        input_dim_(input_dim),
        output_dim_(output_dim),
        init_(o.embeddings_initializer.defined() ? o.embeddings_initializer
                                                 : initializers::RandomUniform(-0.05, 0.05)),
        reg_(o.embeddings_regularizer),
        con_(o.embeddings_constraint),
        mask_zero_(o.mask_zero) {
    TF_CHECK_ARG(input_dim > 0 && output_dim > 0, "Embedding",
                 "input_dim and output_dim must be positive, got input_dim={}, output_dim={}",
                 input_dim, output_dim);
  }
  int64_t input_dim() const { return input_dim_; }
  int64_t output_dim() const { return output_dim_; }
  bool mask_zero() const { return mask_zero_; }
  // Keras: supports_masking = mask_zero; the mask is ids != 0 (an incoming mask is replaced).
  bool supports_masking() const override { return mask_zero_; }
  Tensor compute_mask(const Tensor& x, const Tensor&) const override {
    if (!mask_zero_) return Tensor();
    return not_equal(x, zeros_like(x));
  }

 protected:
  void build(const TensorShape&) override {
    table_ =
        add_weight("embeddings", TensorShape({input_dim_, output_dim_}), init_, true, reg_, con_);
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    TF_CHECK_ARG(s.rank() < TensorShape::kMaxRank, name_.c_str(),
                 "layer \"{}\" (Embedding): ids of shape {} give an output of rank {} (maximum "
                 "{})",
                 name_, shape_str(s), s.rank() + 1, TensorShape::kMaxRank);
    TensorShape o = s;
    o.push_back(output_dim_);
    return o;
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() >= TensorShape::kMaxRank)
      incompatible(s, fmt::format("expected ndim < {}", TensorShape::kMaxRank));
  }
  // Integer ids stay as they are (the table's dtype is the layer's; the ids are not cast to it).
  bool casts_all_inputs() const override { return false; }
  Tensor call(const Tensor& x, bool) override {
    return detail::embedding_lookup(table_.value(), x, name_, "Embedding", input_dim_);
  }

 private:
  friend std::optional<detail::layer_options::EmbeddingConfig> detail::layer_options::embedding(
      const LayerImpl&);
  int64_t input_dim_, output_dim_;
  Initializer init_;
  Regularizer reg_;
  Constraint con_;
  bool mask_zero_ = false;
  Variable table_;
};

// ---- LayerNormalization ----
class LayerNormImpl final : public LayerImpl {
 public:
  // Keras: computes in the variable dtype under a mixed policy (float32 statistics).
  bool autocast() const override { return false; }
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  explicit LayerNormImpl(layers::LayerNormalizationOptions o)
      : LayerImpl("LayerNormalization", "layer_normalization", o.name), o_(std::move(o)) {
    TF_CHECK_ARG(!o_.axis.empty(), "LayerNormalization", "axis must name at least one axis");
    TF_CHECK_ARG(o_.epsilon > 0.0 && std::isfinite(o_.epsilon), "LayerNormalization",
                 "epsilon must be positive and finite, got {}", o_.epsilon);
  }

 protected:
  void build(const TensorShape& s) override {
    rank_ = s.rank();
    axes_.clear();
    for (int a : o_.axis) {
      TF_CHECK_ARG(a >= -rank_ && a < rank_, name_.c_str(),
                   "layer \"{}\" (LayerNormalization): axis {} is out of range for inputs of "
                   "shape {}",
                   name_, a, shape_str(s));
      const int n = a < 0 ? a + rank_ : a;
      TF_CHECK_ARG(std::find(axes_.begin(), axes_.end(), n) == axes_.end(), name_.c_str(),
                   "layer \"{}\" (LayerNormalization): axis {} is listed twice", name_, a);
      axes_.push_back(n);
    }
    std::sort(axes_.begin(), axes_.end());
    TensorShape param;
    bshape_ = TensorShape();
    for (int d = 0; d < rank_; ++d) bshape_.push_back(1);
    for (int a : axes_) {
      TF_CHECK_ARG(s[a] != None, name_.c_str(),
                   "layer \"{}\" (LayerNormalization): axis {} of the input must be known, got "
                   "shape {}",
                   name_, a, shape_str(s));
      param.push_back(s[a]);
      bshape_[a] = s[a];
    }
    dims_ = param;
    auto pick = [](const Initializer& i, Initializer d) { return i.defined() ? i : d; };
    if (o_.scale)
      gamma_ = add_weight("gamma", param, pick(o_.gamma_initializer, initializers::Ones()), true,
                          o_.gamma_regularizer, o_.gamma_constraint);
    if (o_.center)
      beta_ = add_weight("beta", param, pick(o_.beta_initializer, initializers::Zeros()), true,
                         o_.beta_regularizer, o_.beta_constraint);
  }
  void check_input(const TensorShape& s) const override {
    bool ok = s.rank() == rank_;
    for (size_t i = 0; ok && i < axes_.size(); ++i)
      ok = s[axes_[i]] == dims_[static_cast<int>(i)] || s[axes_[i]] == None;
    if (!ok)
      incompatible(s, fmt::format("expected ndim={} and the normalised axes to match (the layer "
                                  "was built for input shape {})",
                                  rank_, shape_str(built_input_shape())));
  }
  Tensor call(const Tensor& x, bool) override {
    // Each example's mean and biased variance over the axes; then, as BatchNormalization,
    // x * inv + (beta - mean * inv) with inv = gamma / sqrt(var + epsilon).
    const Tensor mean = reduce_mean(x, axes_, true);
    const Tensor var = reduce_mean(square(x - mean), axes_, true);
    Tensor inv = rsqrt(var + o_.epsilon);
    if (o_.scale) inv = inv * reshape(gamma_.value(), bshape_);
    Tensor shift = mean * inv;
    shift = o_.center ? reshape(beta_.value(), bshape_) - shift : -shift;
    return x * inv + shift;
  }

 private:
  friend class layers::LayerNormalization;
  friend std::optional<layers::LayerNormalizationOptions>
  detail::layer_options::layer_normalization(const LayerImpl&);
  layers::LayerNormalizationOptions o_;
  int rank_ = 0;
  std::vector<int> axes_;
  TensorShape dims_, bshape_;
  Variable gamma_, beta_;
};

// ---- Global pooling ----
class GlobalPoolingImpl final : public LayerImpl {
 public:
  GlobalPoolingImpl(const char* cls, bool max, int spatial, const layers::GlobalPoolingOptions& o)
      : LayerImpl(cls, detail::to_snake_case(cls), o.name),
        max_(max),
        spatial_(spatial),
        channels_first_(DataFormat::parse(cls, o.data_format).channels_first()),
        keepdims_(o.keepdims) {
    for (int i = 0; i < spatial_; ++i) axes_.push_back(channels_first_ ? 2 + i : 1 + i);
  }

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_ARG(s.rank() == spatial_ + 2, name_.c_str(),
                 "layer \"{}\" ({}) needs inputs of rank {} ({}), got shape {}", name_, class_name_,
                 spatial_ + 2, layout(), shape_str(s));
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    TensorShape o;
    for (int d = 0; d < s.rank(); ++d) {
      const bool pooled = std::find(axes_.begin(), axes_.end(), d) != axes_.end();
      if (!pooled)
        o.push_back(s[d]);
      else if (keepdims_)
        o.push_back(1);
    }
    return o;
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != spatial_ + 2)
      incompatible(s, fmt::format("expected ndim={} ({})", spatial_ + 2, layout()));
  }
  // Keras 3.15: GlobalAveragePooling1D supports masking (a masked mean, and no mask after it);
  // GlobalMaxPooling1D and the 2-D layers do not (the mask is dropped, the max unmasked).
  bool supports_masking() const override { return !max_ && spatial_ == 1; }
  Tensor compute_mask(const Tensor&, const Tensor&) const override { return Tensor(); }
  Tensor call(const Tensor& x, bool) override {
    const Tensor mask = supports_masking() ? call_mask() : Tensor();
    if (mask.defined()) {
      TF_CHECK_ARG(mask.rank() == 2, name_.c_str(),
                   "layer \"{}\" ({}) takes a mask of shape (batch, steps), got {} for an input "
                   "of shape {}",
                   name_, class_name_, shape_str(mask.shape()), shape_str(x.shape()));
      const Tensor m = expand_dims(mask, channels_first_ ? 1 : 2);
      // Keras: the sum of the kept steps over their number (0 / 0 = nan for an all-masked row).
      const Tensor kept = where(m, x, zeros_like(x));
      return reduce_sum(kept, axes_, keepdims_) / reduce_sum(cast(m, x.dtype()), axes_, keepdims_);
    }
    return max_ ? reduce_max(x, axes_, keepdims_) : reduce_mean(x, axes_, keepdims_);
  }

 private:
  std::string layout() const {
    if (spatial_ == 1) return channels_first_ ? "batch, channels, steps" : "batch, steps, channels";
    return channels_first_ ? "NCHW" : "NHWC";
  }
  friend std::optional<detail::layer_options::GlobalPoolingConfig>
  detail::layer_options::global_pooling(const LayerImpl&);
  bool max_;
  int spatial_;
  bool channels_first_, keepdims_;
  std::vector<int> axes_;
};

// ---- Reshape ----
class ReshapeImpl final : public LayerImpl {
 public:
  ReshapeImpl(std::vector<int64_t> target, std::string name)
      : LayerImpl("Reshape", "reshape", std::move(name)), target_(std::move(target)) {
    int unknown = 0;
    for (int64_t d : target_) {
      TF_CHECK_ARG(d > 0 || d == -1, "Reshape",
                   "target_shape entries must be positive or -1, got {}", target_str(target_));
      unknown += d == -1;
    }
    TF_CHECK_ARG(unknown <= 1, "Reshape", "target_shape may hold one -1 only, got {}",
                 target_str(target_));
    TF_CHECK_ARG(target_.size() < static_cast<size_t>(TensorShape::kMaxRank), "Reshape",
                 "target_shape {} gives outputs of rank {} (maximum {})", target_str(target_),
                 target_.size() + 1, TensorShape::kMaxRank);
  }
  const std::vector<int64_t>& target_shape() const { return target_; }

 protected:
  void build(const TensorShape& s) override { (void)compute_output_shape(s); }
  // The target with its -1 resolved from the input's known size (None when some input
  // dimension after the batch is unknown). A size that does not divide is an error.
  TensorShape compute_output_shape(const TensorShape& s) const override {
    TF_CHECK_ARG(s.rank() >= 1, name_.c_str(),
                 "layer \"{}\" (Reshape) needs inputs with a batch dimension, got shape {}", name_,
                 shape_str(s));
    int64_t in = 1;
    bool known = true;
    for (int d = 1; d < s.rank(); ++d) {
      if (s[d] == None)
        known = false;
      else
        in *= s[d];
    }
    int64_t fixed = 1;
    bool infer = false;
    for (int64_t d : target_) {
      if (d == -1)
        infer = true;
      else
        fixed *= d;
    }
    TensorShape o({s[0]});
    for (int64_t d : target_) {
      if (d != -1) {
        o.push_back(d);
        continue;
      }
      o.push_back(known && fixed > 0 ? in / fixed : None);
    }
    if (known) {
      const bool ok = infer ? (fixed > 0 && in % fixed == 0) : in == fixed;
      TF_CHECK_ARG(ok, name_.c_str(),
                   "layer \"{}\" (Reshape): inputs of shape {} ({} values per example) cannot "
                   "be reshaped to target_shape {}",
                   name_, shape_str(s), in, target_str(target_));
    }
    return o;
  }
  bool casts_all_inputs() const override { return false; }
  Tensor call(const Tensor& x, bool) override {
    const TensorShape o = compute_output_shape(x.shape());
    bool resolved = true;
    for (int d = 1; d < o.rank(); ++d) resolved = resolved && o[d] != None;
    TensorShape t({batch_or_infer(x.shape())});
    if (resolved) {
      int64_t rest = 1;
      for (int d = 1; d < o.rank(); ++d) {
        t.push_back(o[d]);
        rest *= o[d];
      }
      // -1 for the batch: one traced graph serves every batch size (an empty example needs the
      // batch itself).
      if (rest > 0) t[0] = -1;
    } else {
      TF_CHECK_ARG(x.shape()[0] != None, name_.c_str(),
                   "layer \"{}\" (Reshape): cannot infer the -1 of target_shape {} for inputs "
                   "of shape {} (both the batch and an example dimension are unknown)",
                   name_, target_str(target_), shape_str(x.shape()));
      for (int64_t d : target_) t.push_back(d);
    }
    return reshape(x, t);
  }

 private:
  friend std::optional<std::vector<int64_t>> detail::layer_options::reshape_target(
      const LayerImpl&);
  std::vector<int64_t> target_;
};

// ---- Activation and Rescaling ----
class ActivationImpl final : public LayerImpl {
 public:
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  ActivationImpl(const std::string& activation, std::string name)
      : LayerImpl("Activation", "activation", std::move(name)),
        fn_(activations::get(activation)),
        activation_(activation) {}

 protected:
  Tensor call(const Tensor& x, bool) override { return fn_ ? fn_(x) : x; }

 private:
  friend std::optional<std::string> detail::layer_options::activation(const LayerImpl&);
  activations::Activation fn_;
  std::string activation_;  // as given, for get_config (keras/serialization.h)
};

class RescalingImpl final : public LayerImpl {
 public:
  bool supports_masking() const override { return true; }  // Keras: passes masks on
  RescalingImpl(double scale, double offset, std::string name)
      : LayerImpl("Rescaling", "rescaling", std::move(name)), scale_(scale), offset_(offset) {
    TF_CHECK_ARG(std::isfinite(scale) && std::isfinite(offset), "Rescaling",
                 "scale and offset must be finite, got scale={}, offset={}", scale, offset);
  }

 protected:
  Tensor call(const Tensor& x, bool) override {
    Tensor y = x * scale_;
    return offset_ != 0.0 ? y + offset_ : y;
  }

 private:
  friend std::optional<std::array<double, 2>> detail::layer_options::rescaling(const LayerImpl&);
  double scale_, offset_;
};

// ---- Conv1D ----
class Conv1DImpl final : public LayerImpl {
 public:
  Conv1DImpl(int64_t filters, int kernel, const layers::Conv1DOptions& o)
      : LayerImpl("Conv1D", "conv1d", o.name),
        filters_(filters),
        kernel_size_(kernel),
        strides_(o.strides),
        dilation_(o.dilation_rate),
        groups_(o.groups),
        padding_(parse_padding("Conv1D", o.padding, true)),
        format_(DataFormat::parse("Conv1D", o.data_format)),
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
    TF_CHECK_ARG(filters > 0, "Conv1D", "filters must be positive, got {}", filters);
    TF_CHECK_ARG(kernel > 0, "Conv1D", "kernel_size must be positive, got {}", kernel);
    TF_CHECK_ARG(o.strides > 0, "Conv1D", "strides must be positive, got {}", o.strides);
    TF_CHECK_ARG(o.dilation_rate > 0, "Conv1D", "dilation_rate must be positive, got {}",
                 o.dilation_rate);
    TF_CHECK_ARG(o.strides == 1 || o.dilation_rate == 1, "Conv1D",
                 "strides > 1 together with dilation_rate > 1 is not supported (as Keras), got "
                 "strides={}, dilation_rate={}",
                 o.strides, o.dilation_rate);
    TF_CHECK_ARG(o.groups > 0, "Conv1D",
                 "the number of groups must be a positive integer, got groups={}", o.groups);
    TF_CHECK_ARG(filters % o.groups == 0, "Conv1D",
                 "the number of filters must be evenly divisible by the number of groups, got "
                 "groups={}, filters={}",
                 o.groups, filters);
  }

 protected:
  void build(const TensorShape& input) override {
    const TensorShape s = format_.to_last(input);
    TF_CHECK_ARG(s.rank() == 3 && s[2] != None, name_.c_str(),
                 "layer \"{}\" (Conv1D) needs inputs {} of rank 3 with a known channel "
                 "dimension, got shape {}",
                 name_, format_.layout(1), shape_str(input));
    TF_CHECK_ARG(s[2] % groups_ == 0, name_.c_str(),
                 "layer \"{}\" (Conv1D): the number of input channels must be evenly divisible "
                 "by the number of groups, got groups={} but the input has {} channels (full "
                 "input shape {})",
                 name_, groups_, s[2], shape_str(input));
    channels_ = s[2];
    kernel_ = add_weight("kernel", TensorShape({kernel_size_, channels_ / groups_, filters_}),
                         kernel_init_, true, kernel_reg_, kernel_con_);
    if (use_bias_)
      bias_ = add_weight("bias", TensorShape({filters_}), bias_init_, true, bias_reg_, bias_con_);
  }
  TensorShape compute_output_shape(const TensorShape& input) const override {
    if (input.rank() != 3) incompatible(input, format_.expected_ndim(1));
    TensorShape o = format_.to_last(input);
    int64_t steps = o[1];
    if (padding_ == "causal" && steps != None) steps += int64_t{dilation_} * (kernel_size_ - 1);
    o[1] =
        ::tapeflow::detail::window_dim(steps, kernel_size_, strides_, dilation_, padding_ == "same")
            .out;
    o[2] = filters_;
    return format_.to_first(o);
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    require_rank_and_channels(s, 3, channels_, format_.channels_first());
  }
  Tensor call(const Tensor& x, bool) override {
    const bool first = format_.channels_first();
    Tensor in = x;
    if (padding_ == "causal") {
      const std::pair<int64_t, int64_t> none{0, 0},
          left{int64_t{dilation_} * (kernel_size_ - 1), 0};
      in = first ? pad(in, {none, none, left}) : pad(in, {none, left, none});
    }
    // (batch, 1, steps, channels) with a (1, k, in, filters) kernel: a 2-D convolution;
    // channels_first: (batch, channels, 1, steps), an NCHW one (no transposes).
    const int h_axis = first ? 2 : 1;
    const char* data_format = first ? "NCHW" : "NHWC";
    Tensor y = nn::conv2d(expand_dims(in, h_axis), expand_dims(kernel_.value(), 0), {1, strides_},
                          padding_ == "same" ? "SAME" : "VALID", {1, dilation_}, data_format);
    y = squeeze(y, {h_axis});
    if (use_bias_) y = nn::bias_add(y, bias_.value(), data_format);
    return activation_ ? activation_(y) : y;
  }

 private:
  friend class layers::Conv1D;
  friend std::optional<detail::layer_options::ConvConfig> detail::layer_options::conv1d(
      const LayerImpl&);
  int64_t filters_;
  int kernel_size_, strides_, dilation_, groups_;
  std::string padding_;
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

// ---- 1-D pooling ----
class Pooling1DImpl final : public LayerImpl {
 public:
  Pooling1DImpl(bool max, int pool, std::optional<int> strides, const std::string& padding,
                std::string name, const std::string& data_format = "")
      : LayerImpl(max ? "MaxPooling1D" : "AveragePooling1D",
                  max ? "max_pooling1d" : "average_pooling1d", std::move(name)),
        max_(max),
        pool_(pool),
        strides_(strides.value_or(pool)),
        same_(parse_padding(max ? "MaxPooling1D" : "AveragePooling1D", padding, false) == "same"),
        format_(DataFormat::parse(max ? "MaxPooling1D" : "AveragePooling1D", data_format)) {
    TF_CHECK_ARG(pool_ > 0 && strides_ > 0, class_name_.c_str(),
                 "pool_size and strides must be positive, got pool_size={}, strides={}", pool_,
                 strides_);
  }

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_ARG(s.rank() == 3, name_.c_str(),
                 "layer \"{}\" ({}) needs inputs {} of rank 3, got shape {}", name_, class_name_,
                 format_.layout(1), shape_str(s));
  }
  TensorShape compute_output_shape(const TensorShape& input) const override {
    if (input.rank() != 3) incompatible(input, format_.expected_ndim(1));
    TensorShape o = format_.to_last(input);
    o[1] = ::tapeflow::detail::window_dim(o[1], pool_, strides_, 1, same_).out;
    return format_.to_first(o);
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != 3) incompatible(s, format_.expected_ndim(1));
  }
  Tensor call(const Tensor& x, bool) override {
    const char* pad = same_ ? "SAME" : "VALID";
    const Tensor x4 = expand_dims(format_.to_last(x), 1);
    const Tensor y = max_ ? nn::max_pool2d(x4, {1, pool_}, {1, strides_}, pad)
                          : nn::avg_pool2d(x4, {1, pool_}, {1, strides_}, pad);
    return format_.to_first(squeeze(y, {1}));
  }

 private:
  friend std::optional<detail::layer_options::PoolingConfig> detail::layer_options::pooling1d(
      const LayerImpl&);
  bool max_;
  int pool_, strides_;
  bool same_;
  DataFormat format_;
};

// ---- UpSampling2D ----
class UpSampling2DImpl final : public LayerImpl {
 public:
  UpSampling2DImpl(Size2 size, const std::string& interpolation, std::string name,
                   const std::string& data_format = "")
      : LayerImpl("UpSampling2D", "up_sampling2d", std::move(name)),
        size_(size),
        interpolation_(lower(interpolation)),
        format_(DataFormat::parse("UpSampling2D", data_format)) {
    TF_CHECK_ARG(size.h > 0 && size.w > 0, "UpSampling2D", "size must be positive, got ({}, {})",
                 size.h, size.w);
    static constexpr std::array<std::string_view, 6> kMethods = {"nearest",  "bilinear", "bicubic",
                                                                 "lanczos3", "lanczos5", "area"};
    TF_CHECK_ARG(std::find(kMethods.begin(), kMethods.end(), interpolation_) != kMethods.end(),
                 "UpSampling2D",
                 "interpolation \"{}\" is not one of \"nearest\", \"bilinear\", \"bicubic\", "
                 "\"lanczos3\", \"lanczos5\" and \"area\"",
                 interpolation);
  }

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_ARG(s.rank() == 4 && s[1] != None && s[2] != None && s[3] != None, name_.c_str(),
                 "layer \"{}\" (UpSampling2D) needs {} inputs of rank 4 with known height, "
                 "width and channels, got shape {}",
                 name_, format_.layout(2), shape_str(s));
  }
  TensorShape compute_output_shape(const TensorShape& input) const override {
    if (input.rank() != 4) incompatible(input, format_.expected_ndim(2));
    TensorShape o = format_.to_last(input);
    if (o[1] != None) o[1] *= size_.h;
    if (o[2] != None) o[2] *= size_.w;
    return format_.to_first(o);
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != 4 || s[1] == None || s[2] == None || s[3] == None)
      incompatible(
          s, fmt::format("{} with known height, width and channels", format_.expected_ndim(2)));
  }
  Tensor call(const Tensor& input, bool) override {
    return format_.to_first(call_last(format_.to_last(input)));
  }

 private:
  Tensor call_last(const Tensor& x) const {
    const TensorShape& s = x.shape();
    if (interpolation_ != "nearest") {
      const DType out = is_floating(x.dtype()) ? x.dtype() : float32;
      // Images without pixels have nothing to interpolate (resize refuses them): repeat them.
      if (s.known_elements() == 0) return cast(repeat_pixels(x), out);
      const Tensor y = image::resize(x, {s[1] * size_.h, s[2] * size_.w}, interpolation_);
      return y.dtype() == out ? y : cast(y, out);
    }
    return repeat_pixels(x);
  }

  // Nearest neighbour: (b, h, 1, w, 1, c) broadcast against ones (1, 1, sh, 1, sw, 1) and
  // merged; the gradient sums each block back onto its pixel. (Broadcasting, unlike a gather
  // along axis 1, keeps a graph traced for a None batch open to every batch size.)
  Tensor repeat_pixels(const Tensor& x) const {
    Tensor y = expand_dims(expand_dims(x, 3), 2);
    y = y * ones(TensorShape({1, 1, size_.h, 1, size_.w, 1}), x.dtype());
    // (The sizes follow x when a graph traced for None dimensions runs.)
    return tapeflow::detail::merge_axes(y, {1, 2, 2, 1});
  }

  friend std::optional<detail::layer_options::UpSampling2DConfig>
  detail::layer_options::up_sampling2d(const LayerImpl&);
  Size2 size_;
  std::string interpolation_;
  DataFormat format_;
};

}  // namespace

Tensor detail::embedding_lookup(const Tensor& table, const Tensor& x, const std::string& layer,
                                const char* class_name, int64_t input_dim) {
  Tensor ids = x;
  if (ids.dtype() != int32 && ids.dtype() != int64) ids = cast(ids, int32);
  if (ids.is_symbolic()) return gather(table, ids, 0);
  try {
    return gather(table, ids, 0);
  } catch (const InvalidArgumentError& e) {
    TF_THROW(InvalidArgumentError, layer.c_str(),
             "layer \"{}\" ({}) has input_dim {}: every id must be in [0, {}), got ids of shape "
             "{} ({})",
             layer, class_name, input_dim, input_dim, ids.shape().to_string(), e.what());
  }
}

namespace layers {

Embedding::Embedding(int64_t input_dim, int64_t output_dim, EmbeddingOptions options) {
  auto impl = std::make_shared<EmbeddingImpl>(input_dim, output_dim, options);
  impl_ = impl;
  if (!options.input_shape.empty()) impl->build_from_declared_shape(options.input_shape);
}
int64_t Embedding::input_dim() const {
  return impl_as<EmbeddingImpl>(*this, "Embedding").input_dim();
}
bool Embedding::mask_zero() const {
  return impl_as<EmbeddingImpl>(*this, "Embedding").mask_zero();
}
int64_t Embedding::output_dim() const {
  return impl_as<EmbeddingImpl>(*this, "Embedding").output_dim();
}
Variable Embedding::embeddings() const {
  return impl().weight("embeddings");
}

LayerNormalization::LayerNormalization(LayerNormalizationOptions options)
    : Layer(std::make_shared<LayerNormImpl>(std::move(options))) {}
Variable LayerNormalization::gamma() const {
  return impl().weight("gamma");
}
Variable LayerNormalization::beta() const {
  return impl().weight("beta");
}

GlobalAveragePooling1D::GlobalAveragePooling1D(GlobalPoolingOptions o)
    : Layer(std::make_shared<GlobalPoolingImpl>("GlobalAveragePooling1D", false, 1, o)) {}
GlobalMaxPooling1D::GlobalMaxPooling1D(GlobalPoolingOptions o)
    : Layer(std::make_shared<GlobalPoolingImpl>("GlobalMaxPooling1D", true, 1, o)) {}
GlobalAveragePooling2D::GlobalAveragePooling2D(GlobalPoolingOptions o)
    : Layer(std::make_shared<GlobalPoolingImpl>("GlobalAveragePooling2D", false, 2, o)) {}
GlobalMaxPooling2D::GlobalMaxPooling2D(GlobalPoolingOptions o)
    : Layer(std::make_shared<GlobalPoolingImpl>("GlobalMaxPooling2D", true, 2, o)) {}

Reshape::Reshape(std::vector<int64_t> target_shape, std::string name)
    : Layer(std::make_shared<ReshapeImpl>(std::move(target_shape), std::move(name))) {}
const std::vector<int64_t>& Reshape::target_shape() const {
  return impl_as<ReshapeImpl>(*this, "Reshape").target_shape();
}

Activation::Activation(const std::string& activation, std::string name,
                       std::optional<mixed_precision::Policy> dtype)
    : Layer(std::make_shared<ActivationImpl>(activation, std::move(name))) {
  if (dtype) set_dtype_policy(*dtype);
}

Rescaling::Rescaling(double scale, double offset, std::string name)
    : Layer(std::make_shared<RescalingImpl>(scale, offset, std::move(name))) {}

Conv1D::Conv1D(int64_t filters, int kernel_size, Conv1DOptions options) {
  auto impl = std::make_shared<Conv1DImpl>(filters, kernel_size, options);
  impl_ = impl;
  if (!options.input_shape.empty()) impl->build_from_declared_shape(options.input_shape);
}
Variable Conv1D::kernel() const {
  return impl().weight("kernel");
}
Variable Conv1D::bias() const {
  return impl().weight("bias");
}

MaxPooling1D::MaxPooling1D(int pool_size, Pooling1DOptions o)
    : Layer(std::make_shared<Pooling1DImpl>(true, pool_size, o.strides, o.padding,
                                            std::move(o.name), o.data_format)) {}
AveragePooling1D::AveragePooling1D(int pool_size, Pooling1DOptions o)
    : Layer(std::make_shared<Pooling1DImpl>(false, pool_size, o.strides, o.padding,
                                            std::move(o.name), o.data_format)) {}

UpSampling2D::UpSampling2D(Size2 size, UpSampling2DOptions o)
    : Layer(std::make_shared<UpSampling2DImpl>(size, o.interpolation, std::move(o.name),
                                               o.data_format)) {}

}  // namespace layers

namespace detail::layer_options {

std::optional<std::string> activation(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const ActivationImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->activation_;
}
std::optional<EmbeddingConfig> embedding(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const EmbeddingImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return EmbeddingConfig{p->input_dim_, p->output_dim_, p->init_, p->reg_, p->mask_zero_, p->con_};
}
std::optional<layers::LayerNormalizationOptions> layer_normalization(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const LayerNormImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->o_;
}
std::optional<std::vector<int64_t>> reshape_target(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const ReshapeImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return p->target_;
}

// keras/serialization_access_conv.h
std::optional<ConvConfig> conv1d(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const Conv1DImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  ConvConfig c;
  c.filters = p->filters_;
  c.kernel_size = {p->kernel_size_};
  c.strides = {p->strides_};
  c.dilation_rate = {p->dilation_};
  c.padding = p->padding_;
  c.channels_first = p->format_.channels_first();
  c.groups = p->groups_;
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
std::optional<PoolingConfig> pooling1d(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const Pooling1DImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return PoolingConfig{{p->pool_}, {p->strides_}, p->same_, p->format_.channels_first()};
}
std::optional<GlobalPoolingConfig> global_pooling(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const GlobalPoolingImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return GlobalPoolingConfig{p->channels_first_, p->keepdims_};
}
std::optional<UpSampling2DConfig> up_sampling2d(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const UpSampling2DImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return UpSampling2DConfig{p->size_, p->interpolation_, p->format_.channels_first()};
}
std::optional<std::array<double, 2>> rescaling(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const RescalingImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return std::array<double, 2>{p->scale_, p->offset_};
}

}  // namespace detail::layer_options
}  // namespace tapeflow::keras
