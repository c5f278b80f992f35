// The layers of keras/layers_conv3d.h. Each is a LayerImpl (state, build, call) behind its
// handle, composed of tf::nn::conv3d / max_pool3d / avg_pool3d and movement ops.
#include "keras/layers_conv3d.h"

#include <algorithm>
#include <cctype>

#include "core/check.h"
#include "core/error.h"
#include "keras/data_format.h"
#include "keras/serialization_access_conv.h"
#include "ops/binary.h"
#include "ops/conv3d.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras {
namespace {

using detail::DataFormat;
using detail::LayerImpl;
using layers::Sides1D;
using layers::Size3;

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string size_str(Size3 s) {
  return fmt::format("({}, {}, {})", s.d, s.h, s.w);
}

// "valid" / "same" in any case -> true for "same".
bool parse_padding(const char* layer, const std::string& padding) {
  const std::string p = lower(padding);
  TF_CHECK_ARG(p == "valid" || p == "same", layer,
               "padding must be \"valid\" or \"same\", got \"{}\"", padding);
  return p == "same";
}

void check_size3(const char* layer, const char* what, Size3 s) {
  TF_CHECK_ARG(s.d > 0 && s.h > 0 && s.w > 0, layer, "{} must be positive, got {}", what,
               size_str(s));
}

// The output shape of a 3-D window over NDHWC shape s, with `channels` in the last place.
TensorShape window_shape(const TensorShape& s, Size3 k, Size3 st, Size3 dl, bool same,
                         int64_t channels) {
  namespace td = ::tapeflow::detail;
  return TensorShape({s[0], td::window_dim(s[1], k.d, st.d, dl.d, same).out,
                      td::window_dim(s[2], k.h, st.h, dl.h, same).out,
                      td::window_dim(s[3], k.w, st.w, dl.w, same).out, channels});
}

// Conv3D's and Conv3DTranspose's input check with the channels at axis 1 (channels_first): the
// expectation to report, or empty when `s` passes.
std::string channels_first_mismatch(const TensorShape& s, int64_t channels) {
  if (s.rank() != 5) return DataFormat::first().expected_ndim(3);
  if (s[1] != None && s[1] != channels)
    return fmt::format("expected axis 1 of input shape to have value {}", channels);
  return {};
}

// ---- Conv3D ----
class Conv3DImpl final : public LayerImpl {
 public:
  Conv3DImpl(int64_t filters, Size3 kernel, const layers::Conv3DOptions& o)
      : LayerImpl("Conv3D", "conv3d", o.name),
        filters_(filters),
        kernel_(kernel),
        strides_(o.strides),
        dilation_(o.dilation_rate),
        groups_(o.groups),
        same_(parse_padding("Conv3D", o.padding)),
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
    const char* cls = "Conv3D";
    TF_CHECK_ARG(filters > 0, cls, "filters must be positive, got {}", filters);
    check_size3(cls, "kernel_size", kernel);
    check_size3(cls, "strides", o.strides);
    check_size3(cls, "dilation_rate", o.dilation_rate);
    format_ = DataFormat::parse(cls, o.data_format);
    TF_CHECK_ARG(o.groups > 0, cls,
                 "the number of groups must be a positive integer, got groups={}", o.groups);
    TF_CHECK_ARG(filters % o.groups == 0, cls,
                 "the number of filters must be evenly divisible by the number of groups, got "
                 "groups={}, filters={}",
                 o.groups, filters);
    const Size3 s = o.strides, d = o.dilation_rate;
    TF_CHECK_ARG(std::max({s.d, s.h, s.w}) == 1 || std::max({d.d, d.h, d.w}) == 1, cls,
                 "strides > 1 together with dilation_rate > 1 is not supported (as Keras), got "
                 "strides={}, dilation_rate={}",
                 size_str(s), size_str(d));
  }

 protected:
  void build(const TensorShape& input) override {
    TF_CHECK_ARG(input.rank() == 5, name_.c_str(),
                 "layer \"{}\" (Conv3D) needs {} inputs of rank 5, got shape {}", name_,
                 format_.layout(3), input.to_string());
    const TensorShape s = format_.to_last(input);
    TF_CHECK_ARG(s[4] != None, name_.c_str(),
                 "layer \"{}\" (Conv3D) needs a known channel dimension, got shape {}", name_,
                 input.to_string());
    TF_CHECK_ARG(s[4] % groups_ == 0, name_.c_str(),
                 "layer \"{}\" (Conv3D): the number of input channels must be evenly divisible "
                 "by the number of groups, got groups={} but the input has {} channels (full "
                 "input shape {})",
                 name_, groups_, s[4], s.to_string());
    channels_ = s[4];
    const TensorShape kshape({kernel_.d, kernel_.h, kernel_.w, channels_ / groups_, filters_});
    kernel_var_ = add_weight("kernel", kshape, kernel_init_, true, kernel_reg_, kernel_con_);
    if (use_bias_)
      bias_ = add_weight("bias", TensorShape({filters_}), bias_init_, true, bias_reg_, bias_con_);
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    if (s.rank() != 5) incompatible(s, format_.expected_ndim(3));
    return format_.to_first(
        window_shape(format_.to_last(s), kernel_, strides_, dilation_, same_, filters_));
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (!format_.channels_first()) return require_rank_and_channels(s, 5, channels_);
    if (const std::string m = channels_first_mismatch(s, channels_); !m.empty()) incompatible(s, m);
  }
  Tensor call(const Tensor& x, bool) override {
    // channels_first is conv3d's data_format "NCDHW". With groups > 1 the kernel's depth is
    // in / groups: conv3d runs it as a grouped one.
    const char* data_format = format_.channels_first() ? "NCDHW" : "NDHWC";
    Tensor y =
        nn::conv3d(x, kernel_var_.value(), {strides_.d, strides_.h, strides_.w},
                   same_ ? "SAME" : "VALID", {dilation_.d, dilation_.h, dilation_.w}, data_format);
    if (use_bias_) y = nn::bias_add(y, bias_.value(), data_format);
    // The activation sees the output in the layer's format, as Keras' (softmax's axis -1).
    return activation_ ? activation_(y) : y;
  }

 private:
  friend std::optional<detail::layer_options::ConvConfig> detail::layer_options::conv3d(
      const LayerImpl&);
  DataFormat format_;
  int64_t filters_;
  Size3 kernel_, strides_, dilation_;
  int groups_;
  bool same_;
  std::string activation_name_;  // as given, for get_config (keras/serialization.h)
  activations::Activation activation_;
  bool use_bias_;
  Initializer kernel_init_, bias_init_;
  Regularizer kernel_reg_, bias_reg_;
  Constraint kernel_con_, bias_con_;
  int64_t channels_ = 0;
  Variable kernel_var_, bias_;
};

// ---- Conv3DTranspose ----
class Conv3DTransposeImpl final : public LayerImpl {
 public:
  Conv3DTransposeImpl(int64_t filters, Size3 kernel, const layers::Conv3DTransposeOptions& o)
      : LayerImpl("Conv3DTranspose", "conv3d_transpose", o.name),
        filters_(filters),
        kernel_(kernel),
        strides_(o.strides),
        dilation_(o.dilation_rate),
        output_padding_(o.output_padding),
        same_(parse_padding("Conv3DTranspose", o.padding)),
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
    const char* cls = "Conv3DTranspose";
    TF_CHECK_ARG(filters > 0, cls, "filters must be positive, got {}", filters);
    check_size3(cls, "kernel_size", kernel);
    check_size3(cls, "strides", o.strides);
    check_size3(cls, "dilation_rate", o.dilation_rate);
    format_ = DataFormat::parse(cls, o.data_format);
    const Size3 s = o.strides, d = o.dilation_rate;
    TF_CHECK_ARG(std::max({s.d, s.h, s.w}) == 1 || std::max({d.d, d.h, d.w}) == 1, cls,
                 "strides > 1 together with dilation_rate > 1 is not supported, got strides={}, "
                 "dilation_rate={}",
                 size_str(s), size_str(d));
    if (output_padding_) {
      const Size3 p = *output_padding_;
      TF_CHECK_ARG(p.d >= 0 && p.h >= 0 && p.w >= 0 && p.d < s.d && p.h < s.h && p.w < s.w, cls,
                   "output_padding {} must be non-negative and less than strides {}", size_str(p),
                   size_str(s));
    }
  }

 protected:
  void build(const TensorShape& input) override {
    TF_CHECK_ARG(input.rank() == 5, name_.c_str(),
                 "layer \"{}\" (Conv3DTranspose) needs {} inputs of rank 5, got shape {}", name_,
                 format_.layout(3), input.to_string());
    const TensorShape s = format_.to_last(input);
    TF_CHECK_ARG(s[4] != None, name_.c_str(),
                 "layer \"{}\" (Conv3DTranspose) needs a known channel dimension, got shape {}",
                 name_, input.to_string());
    channels_ = s[4];
    const TensorShape kshape({kernel_.d, kernel_.h, kernel_.w, filters_, channels_});
    kernel_var_ = add_weight("kernel", kshape, kernel_init_, true, kernel_reg_, kernel_con_);
    if (use_bias_)
      bias_ = add_weight("bias", TensorShape({filters_}), bias_init_, true, bias_reg_, bias_con_);
  }
  // Keras' deconv_output_length for one spatial dimension.
  int64_t out_length(int64_t in, int k, int stride, int dilation, std::optional<int> pad) const {
    return tapeflow::detail::transposed_length(in, k, stride, dilation, same_, pad);
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    if (s.rank() != 5) incompatible(s, format_.expected_ndim(3));
    return format_.to_first(ndhwc_output_shape(format_.to_last(s)));
  }
  TensorShape ndhwc_output_shape(const TensorShape& s) const {
    auto op = [&](int Size3::*m) {
      return output_padding_ ? std::optional<int>((*output_padding_).*m) : std::nullopt;
    };
    return TensorShape({s[0], out_length(s[1], kernel_.d, strides_.d, dilation_.d, op(&Size3::d)),
                        out_length(s[2], kernel_.h, strides_.h, dilation_.h, op(&Size3::h)),
                        out_length(s[3], kernel_.w, strides_.w, dilation_.w, op(&Size3::w)),
                        filters_});
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (!format_.channels_first()) return require_rank_and_channels(s, 5, channels_);
    if (const std::string m = channels_first_mismatch(s, channels_); !m.empty()) incompatible(s, m);
  }
  Tensor call(const Tensor& x, bool) override {
    // channels_first is conv3d_transpose's data_format "NCDHW".
    const char* data_format = format_.channels_first() ? "NCDHW" : "NDHWC";
    // The depth, height and width are left to the op (Keras' lengths, from output_padding), so
    // that a graph traced for None dimensions serves every input size.
    TensorShape out = compute_output_shape(x.shape());
    const int d = format_.channels_first() ? 2 : 1;
    out[d] = out[d + 1] = out[d + 2] = None;
    std::optional<std::array<int, 3>> padding;
    if (output_padding_)
      padding = std::array<int, 3>{output_padding_->d, output_padding_->h, output_padding_->w};
    Tensor y = tapeflow::detail::conv3d_transpose(
        x, kernel_var_.value(), out, {strides_.d, strides_.h, strides_.w}, same_ ? "SAME" : "VALID",
        {dilation_.d, dilation_.h, dilation_.w}, data_format, padding);
    if (use_bias_) y = nn::bias_add(y, bias_.value(), data_format);
    // The activation sees the output in the layer's format, as Keras' (softmax's axis -1).
    return activation_ ? activation_(y) : y;
  }

 private:
  friend std::optional<detail::layer_options::ConvConfig> detail::layer_options::conv3d_transpose(
      const LayerImpl&);
  DataFormat format_;
  int64_t filters_;
  Size3 kernel_, strides_, dilation_;
  std::optional<Size3> output_padding_;
  bool same_;
  std::string activation_name_;  // as given, for get_config (keras/serialization.h)
  activations::Activation activation_;
  bool use_bias_;
  Initializer kernel_init_, bias_init_;
  Regularizer kernel_reg_, bias_reg_;
  Constraint kernel_con_, bias_con_;
  int64_t channels_ = 0;
  Variable kernel_var_, bias_;
};

// ---- MaxPooling3D and AveragePooling3D ----
class Pooling3DImpl final : public LayerImpl {
 public:
  Pooling3DImpl(bool max, Size3 pool, std::optional<Size3> strides, const std::string& padding,
                std::string name, const std::string& data_format = "")
      : LayerImpl(max ? "MaxPooling3D" : "AveragePooling3D",
                  max ? "max_pooling3d" : "average_pooling3d", std::move(name)),
        max_(max),
        pool_(pool),
        strides_(strides.value_or(pool)),
        same_(parse_padding(max ? "MaxPooling3D" : "AveragePooling3D", padding)),
        format_(DataFormat::parse(max ? "MaxPooling3D" : "AveragePooling3D", data_format)) {
    check_size3(class_name_.c_str(), "pool_size", pool_);
    check_size3(class_name_.c_str(), "strides", strides_);
  }

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_ARG(s.rank() == 5, name_.c_str(),
                 "layer \"{}\" ({}) needs {} inputs of rank 5, got shape {}", name_, class_name_,
                 format_.layout(3), s.to_string());
  }
  TensorShape compute_output_shape(const TensorShape& input) const override {
    if (input.rank() != 5) incompatible(input, format_.expected_ndim(3));
    const TensorShape s = format_.to_last(input);
    return format_.to_first(window_shape(s, pool_, strides_, Size3(1), same_, s[4]));
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != 5) incompatible(s, format_.expected_ndim(3));
  }
  Tensor call(const Tensor& input, bool) override {
    const char* pad = same_ ? "SAME" : "VALID";
    const std::vector<int> k{pool_.d, pool_.h, pool_.w}, s{strides_.d, strides_.h, strides_.w};
    const Tensor x = format_.to_last(input);
    return format_.to_first(max_ ? nn::max_pool3d(x, k, s, pad) : nn::avg_pool3d(x, k, s, pad));
  }

 private:
  friend std::optional<detail::layer_options::PoolingConfig> detail::layer_options::pooling3d(
      const LayerImpl&);
  bool max_;
  Size3 pool_, strides_;
  bool same_;
  DataFormat format_;
};

// ---- GlobalAveragePooling3D and GlobalMaxPooling3D ----
class GlobalPooling3DImpl final : public LayerImpl {
 public:
  GlobalPooling3DImpl(bool max, const layers::GlobalPoolingOptions& o)
      : LayerImpl(max ? "GlobalMaxPooling3D" : "GlobalAveragePooling3D",
                  max ? "global_max_pooling3d" : "global_average_pooling3d", o.name),
        max_(max),
        keepdims_(o.keepdims) {
    axes_ = DataFormat::parse(class_name_.c_str(), o.data_format).channels_first()
                ? std::vector<int>{2, 3, 4}
                : std::vector<int>{1, 2, 3};
  }

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_ARG(s.rank() == 5, name_.c_str(), "layer \"{}\" ({}) needs inputs of rank 5, got {}",
                 name_, class_name_, s.to_string());
  }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    if (s.rank() != 5) incompatible(s, "expected ndim=5");
    TensorShape o;
    for (int d = 0; d < 5; ++d) {
      if (std::find(axes_.begin(), axes_.end(), d) == axes_.end())
        o.push_back(s[d]);
      else if (keepdims_)
        o.push_back(1);
    }
    return o;
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != 5) incompatible(s, "expected ndim=5");
  }
  Tensor call(const Tensor& x, bool) override {
    return max_ ? reduce_max(x, axes_, keepdims_) : reduce_mean(x, axes_, keepdims_);
  }

 private:
  friend std::optional<detail::layer_options::GlobalPoolingConfig>
  detail::layer_options::global_pooling3d(const LayerImpl&);
  bool max_, keepdims_;
  std::vector<int> axes_;
};

// ---- UpSampling3D ----
class UpSampling3DImpl final : public LayerImpl {
 public:
  UpSampling3DImpl(Size3 size, std::string name, const std::string& data_format = "")
      : LayerImpl("UpSampling3D", "up_sampling3d", std::move(name)),
        size_(size),
        format_(DataFormat::parse("UpSampling3D", data_format)) {
    check_size3("UpSampling3D", "size", size);
  }

 protected:
  void build(const TensorShape& s) override {
    TF_CHECK_ARG(s.rank() == 5 && s[1] != None && s[2] != None && s[3] != None && s[4] != None,
                 name_.c_str(),
                 "layer \"{}\" (UpSampling3D) needs {} inputs of rank 5 with known depth, "
                 "height, width and channels, got shape {}",
                 name_, format_.layout(3), s.to_string());
  }
  TensorShape compute_output_shape(const TensorShape& input) const override {
    if (input.rank() != 5) incompatible(input, format_.expected_ndim(3));
    return format_.to_first(output_shape_last(format_.to_last(input)));
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != 5 || s[1] == None || s[2] == None || s[3] == None || s[4] == None)
      incompatible(s, fmt::format("{} with known depth, height, width and channels",
                                  format_.expected_ndim(3)));
  }
  bool casts_all_inputs() const override { return false; }  // Keras keeps the dtype
  // Nearest neighbour: (b, d, 1, h, 1, w, 1, c) broadcast against ones (1, 1, sd, 1, sh, 1, sw,
  // 1) and merged (rank 8, tapeflow's maximum); the gradient sums each block back. Broadcasting
  // keeps a graph traced for a None batch open to every batch size.
  Tensor call(const Tensor& x, bool) override {
    return format_.to_first(repeat(format_.to_last(x)));
  }

 private:
  TensorShape output_shape_last(const TensorShape& s) const {
    TensorShape o = s;
    if (o[1] != None) o[1] *= size_.d;
    if (o[2] != None) o[2] *= size_.h;
    if (o[3] != None) o[3] *= size_.w;
    return o;
  }
  // NDHWC x.
  Tensor repeat(const Tensor& x) const {
    // bool has no product: repeat its 0/1 bytes.
    if (x.dtype() == bool_) return cast(repeat(cast(x, uint8)), bool_);
    Tensor y = expand_dims(expand_dims(expand_dims(x, 4), 3), 2);
    y = y * ones(TensorShape({1, 1, size_.d, 1, size_.h, 1, size_.w, 1}), x.dtype());
    // (The sizes follow x when a graph traced for None dimensions runs.)
    return tapeflow::detail::merge_axes(y, {1, 2, 2, 2, 1});
  }

  friend std::optional<detail::layer_options::UpSampling3DConfig>
  detail::layer_options::up_sampling3d(const LayerImpl&);
  Size3 size_;
  DataFormat format_;
};

// ---- ZeroPadding3D and Cropping3D ----
class PadCrop3DImpl final : public LayerImpl {
 public:
  PadCrop3DImpl(bool crop, const layers::Sides3D& sides, std::string name,
                const std::string& data_format = "")
      : LayerImpl(crop ? "Cropping3D" : "ZeroPadding3D", crop ? "cropping3d" : "zero_padding3d",
                  std::move(name)),
        crop_(crop),
        sides_{sides.depth, sides.height, sides.width},
        format_(DataFormat::parse(crop ? "Cropping3D" : "ZeroPadding3D", data_format)) {
    for (const Sides1D& s : sides_)
      TF_CHECK_ARG(s.begin >= 0 && s.end >= 0, class_name_.c_str(),
                   "`{}` cannot be negative, got {}", crop ? "cropping" : "padding", arg_str());
  }

 protected:
  std::string arg_str() const {
    return fmt::format("(({}, {}), ({}, {}), ({}, {}))", sides_[0].begin, sides_[0].end,
                       sides_[1].begin, sides_[1].end, sides_[2].begin, sides_[2].end);
  }
  void build(const TensorShape& s) override { (void)compute_output_shape(s); }
  TensorShape compute_output_shape(const TensorShape& s) const override {
    if (s.rank() != 5) incompatible(s, format_.expected_ndim(3));
    TensorShape o = s;
    for (int i = 0; i < 3; ++i) {
      const int a = axis(i);
      if (s[a] == None) continue;
      const int64_t total = sides_[i].begin + sides_[i].end;
      if (crop_) {
        // Keras' ValueError: the cropping must leave at least one slice in each dimension.
        TF_CHECK_ARG(s[a] > total, name_.c_str(),
                     "layer \"{}\" (Cropping3D): the cropping {} must be smaller than the input's "
                     "depth, height and width (axis {} of input shape {} has size {})",
                     name_, arg_str(), a, s.to_string(), s[a]);
        o[a] = s[a] - total;
      } else {
        o[a] = s[a] + total;
      }
    }
    return o;
  }
  void check_input(const TensorShape& s) const override {
    LayerImpl::check_input(s);
    if (s.rank() != 5) incompatible(s, format_.expected_ndim(3));
  }
  bool casts_all_inputs() const override { return false; }  // Keras keeps the dtype
  Tensor call(const Tensor& x, bool) override {
    (void)compute_output_shape(x.shape());  // checks the rank and what the cropping leaves
    if (!crop_) {
      std::vector<std::pair<int64_t, int64_t>> p(5, {0, 0});
      for (int i = 0; i < 3; ++i) p[axis(i)] = {sides_[i].begin, sides_[i].end};
      return pad(x, p);
    }
    // From each end, whatever the size (a graph traced for None dimensions serves them all).
    std::vector<int64_t> begin(5, 0), trim(5, 0);
    for (int i = 0; i < 3; ++i) {
      begin[axis(i)] = sides_[i].begin;
      trim[axis(i)] = sides_[i].end;
    }
    return tapeflow::detail::crop(class_name_.c_str(), x, begin, trim);
  }

 private:
  // The input axis of spatial dimension i (depth, height, width).
  int axis(int i) const { return i + (format_.channels_first() ? 2 : 1); }
  friend std::optional<detail::layer_options::PadCropConfig> detail::layer_options::pad_crop3d(
      const LayerImpl&);
  bool crop_;
  std::vector<Sides1D> sides_;
  DataFormat format_;
};

}  // namespace

namespace layers {

Conv3D::Conv3D(int64_t filters, Size3 kernel_size, Conv3DOptions options) {
  auto impl = std::make_shared<Conv3DImpl>(filters, kernel_size, options);
  impl_ = impl;
  if (!options.input_shape.empty()) impl->build_from_declared_shape(options.input_shape);
}
Variable Conv3D::kernel() const {
  return impl().weight("kernel");
}
Variable Conv3D::bias() const {
  return impl().weight("bias");
}

Conv3DTranspose::Conv3DTranspose(int64_t filters, Size3 kernel_size,
                                 Conv3DTransposeOptions options) {
  auto impl = std::make_shared<Conv3DTransposeImpl>(filters, kernel_size, options);
  impl_ = impl;
  if (!options.input_shape.empty()) impl->build_from_declared_shape(options.input_shape);
}
Variable Conv3DTranspose::kernel() const {
  return impl().weight("kernel");
}
Variable Conv3DTranspose::bias() const {
  return impl().weight("bias");
}

MaxPooling3D::MaxPooling3D(Size3 pool_size, Pooling3DOptions o)
    : Layer(std::make_shared<Pooling3DImpl>(true, pool_size, o.strides, o.padding,
                                            std::move(o.name), o.data_format)) {}
AveragePooling3D::AveragePooling3D(Size3 pool_size, Pooling3DOptions o)
    : Layer(std::make_shared<Pooling3DImpl>(false, pool_size, o.strides, o.padding,
                                            std::move(o.name), o.data_format)) {}

GlobalAveragePooling3D::GlobalAveragePooling3D(GlobalPoolingOptions o)
    : Layer(std::make_shared<GlobalPooling3DImpl>(false, o)) {}
GlobalMaxPooling3D::GlobalMaxPooling3D(GlobalPoolingOptions o)
    : Layer(std::make_shared<GlobalPooling3DImpl>(true, o)) {}

UpSampling3D::UpSampling3D(Size3 size, FormatOptions o)
    : Layer(std::make_shared<UpSampling3DImpl>(size, std::move(o.name), o.data_format)) {}

ZeroPadding3D::ZeroPadding3D(Sides3D padding, FormatOptions o)
    : Layer(std::make_shared<PadCrop3DImpl>(false, padding, std::move(o.name), o.data_format)) {}
Cropping3D::Cropping3D(Sides3D cropping, FormatOptions o)
    : Layer(std::make_shared<PadCrop3DImpl>(true, cropping, std::move(o.name), o.data_format)) {}

}  // namespace layers

namespace detail::layer_options {

namespace {
std::vector<int> sizes(layers::Size3 s) {
  return {s.d, s.h, s.w};
}
}  // namespace

std::optional<ConvConfig> conv3d(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const Conv3DImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  ConvConfig c;
  c.filters = p->filters_;
  c.kernel_size = sizes(p->kernel_);
  c.strides = sizes(p->strides_);
  c.dilation_rate = sizes(p->dilation_);
  c.padding = p->same_ ? "same" : "valid";
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
std::optional<ConvConfig> conv3d_transpose(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const Conv3DTransposeImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  ConvConfig c;
  c.filters = p->filters_;
  c.kernel_size = sizes(p->kernel_);
  c.strides = sizes(p->strides_);
  c.dilation_rate = sizes(p->dilation_);
  if (p->output_padding_) c.output_padding = sizes(*p->output_padding_);
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
std::optional<PoolingConfig> pooling3d(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const Pooling3DImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return PoolingConfig{sizes(p->pool_), sizes(p->strides_), p->same_, p->format_.channels_first()};
}
std::optional<GlobalPoolingConfig> global_pooling3d(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const GlobalPooling3DImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return GlobalPoolingConfig{p->axes_[0] == 2, p->keepdims_};
}
std::optional<UpSampling3DConfig> up_sampling3d(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const UpSampling3DImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  return UpSampling3DConfig{{p->size_.d, p->size_.h, p->size_.w}, p->format_.channels_first()};
}
std::optional<PadCropConfig> pad_crop3d(const LayerImpl& layer) {
  const auto* p = dynamic_cast<const PadCrop3DImpl*>(&layer);
  if (p == nullptr) return std::nullopt;
  PadCropConfig out;
  for (const auto& s : p->sides_) out.sides.push_back({s.begin, s.end});
  out.channels_first = p->format_.channels_first();
  return out;
}

}  // namespace detail::layer_options
}  // namespace tapeflow::keras
