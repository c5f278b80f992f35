// Keras configs of the built-in convolutions, poolings, padding, cropping, upsampling, the
// activation layers and the noise and normalization layers of layers_more/misc/conv/conv3d
// (keras/serialization.h; the shared reader and writer pieces are in
// keras/serialization_internal.h). Each class has a writer (Keras' get_config keys minus the
// base ones, in Keras' order) and a strict reader (every key read or rejected).
#include <fmt/format.h>

#include <array>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "keras/layers_conv.h"
#include "keras/layers_conv3d.h"
#include "keras/layers_extra.h"
#include "keras/layers_kerasmore.h"
#include "keras/layers_misc.h"
#include "keras/layers_more.h"
#include "keras/serialization_access.h"
#include "keras/serialization_access_conv.h"
#include "keras/serialization_internal.h"

namespace tapeflow::keras::saving::internal {
namespace {

using detail::LayerImpl;
namespace lo = detail::layer_options;
using layers::Size3;

// ---- values ----

Config ints_json(const std::vector<int>& v) {
  Config out = Config::array();
  for (int x : v) out.push_back(x);
  return out;
}

// An int (the same for each of the n dimensions) or a list of n ints, each at least `min`;
// missing or null: `fallback` in each dimension.
std::vector<int> sizes_of(Reader& r, const std::string& key, int n, std::optional<int> fallback,
                          int min = 1) {
  const Config* v = r.find(key);
  if (v == nullptr || v->is_null()) {
    if (!fallback) r.fail(key, "is required");
    return std::vector<int>(static_cast<size_t>(n), *fallback);
  }
  std::vector<int> out;
  if (v->is_number_integer()) {
    out.assign(static_cast<size_t>(n), static_cast<int>(v->get<int64_t>()));
  } else if (v->is_array() && v->size() == static_cast<size_t>(n)) {
    for (const Config& e : *v) {
      if (!e.is_number_integer()) break;
      out.push_back(static_cast<int>(e.get<int64_t>()));
    }
  }
  if (out.size() != static_cast<size_t>(n))
    r.fail(key, fmt::format("must be an integer or a list of {} integers, got {}", n, r.got(*v)));
  for (int x : out)
    if (x < min) r.fail(key, fmt::format("must hold integers >= {}, got {}", min, r.got(*v)));
  return out;
}

std::optional<int64_t> seed_of(Reader& r) {
  return r.optional_integer("seed");
}

// The axis key of the normalization layers: an int or a list of ints.
std::vector<int> axes_of(Reader& r, const std::string& key, int fallback) {
  std::vector<int> out;
  if (!r.has(key)) return {fallback};
  for (int64_t a : r.int_list(key)) out.push_back(static_cast<int>(a));
  if (out.empty()) r.fail(key, "must name at least one axis");
  return out;
}

// Builds the layer (its constructor's InvalidArgumentError names the class), then applies the
// base keys.
template <class F>
Layer finish(Reader& r, const Base& b, F make) {
  r.finish();
  Layer l = make();
  apply_base(l, b);
  return l;
}

// ---- the convolutions: one reader and writer for the family ----

enum class ConvKind { kConv, kTranspose, kDepthwise, kSeparable };
struct ConvClass {
  const char* name;
  int rank;  // spatial dimensions
  ConvKind kind;
  bool causal_ok;
  std::optional<lo::ConvConfig> (*get)(const LayerImpl&);
  Layer (*make)(const lo::ConvConfig&, const std::string& name);
};

Size2 size2(const std::vector<int>& v) {
  return Size2(v[0], v[1]);
}
Size3 size3(const std::vector<int>& v) {
  return Size3(v[0], v[1], v[2]);
}

// Conv2D's options (kept as given, keras/serialization_access.h) in the family's form.
std::optional<lo::ConvConfig> conv2d_config(const LayerImpl& layer) {
  auto c2 = lo::conv2d(layer);
  if (!c2) return std::nullopt;
  const layers::Conv2DOptions& o = c2->options;
  lo::ConvConfig c;
  c.filters = c2->filters;
  c.kernel_size = {c2->kernel_size.h, c2->kernel_size.w};
  c.strides = {o.strides.h, o.strides.w};
  c.dilation_rate = {o.dilation_rate.h, o.dilation_rate.w};
  c.padding = lower(o.padding);
  c.channels_first = lower(o.data_format) == "channels_first";
  c.groups = o.groups;
  c.activation = o.activation;
  c.use_bias = o.use_bias;
  c.kernel_initializer = o.kernel_initializer;
  c.bias_initializer = o.bias_initializer;
  c.kernel_regularizer = o.kernel_regularizer;
  c.bias_regularizer = o.bias_regularizer;
  c.kernel_constraint = o.kernel_constraint;
  c.bias_constraint = o.bias_constraint;
  return c;
}

// The options every convolution class shares, set on its options struct.
template <class O>
O conv_options(const lo::ConvConfig& c, const std::string& name) {
  O o;
  o.padding = c.padding;
  o.data_format = data_format_name(c.channels_first);
  o.activation = c.activation;
  o.use_bias = c.use_bias;
  o.bias_initializer = c.bias_initializer;
  o.bias_regularizer = c.bias_regularizer;
  o.bias_constraint = c.bias_constraint;
  o.name = name;
  return o;
}
template <class O>
O kernel_options(const lo::ConvConfig& c, const std::string& name) {
  O o = conv_options<O>(c, name);
  o.kernel_initializer = c.kernel_initializer;
  o.kernel_regularizer = c.kernel_regularizer;
  o.kernel_constraint = c.kernel_constraint;
  return o;
}
template <class O>
O depthwise_options(const lo::ConvConfig& c, const std::string& name) {
  O o = conv_options<O>(c, name);
  o.depth_multiplier = c.depth_multiplier;
  o.depthwise_initializer = c.kernel_initializer;
  o.depthwise_regularizer = c.kernel_regularizer;
  o.depthwise_constraint = c.kernel_constraint;
  return o;
}

Layer make_conv1d(const lo::ConvConfig& c, const std::string& name) {
  auto o = kernel_options<layers::Conv1DOptions>(c, name);
  o.strides = c.strides[0];
  o.dilation_rate = c.dilation_rate[0];
  o.groups = c.groups;
  return layers::Conv1D(c.filters, c.kernel_size[0], o);
}
Layer make_conv2d(const lo::ConvConfig& c, const std::string& name) {
  auto o = kernel_options<layers::Conv2DOptions>(c, name);
  o.strides = size2(c.strides);
  o.dilation_rate = size2(c.dilation_rate);
  o.groups = c.groups;
  return layers::Conv2D(c.filters, size2(c.kernel_size), o);
}
Layer make_conv3d(const lo::ConvConfig& c, const std::string& name) {
  auto o = kernel_options<layers::Conv3DOptions>(c, name);
  o.strides = size3(c.strides);
  o.dilation_rate = size3(c.dilation_rate);
  o.groups = c.groups;
  return layers::Conv3D(c.filters, size3(c.kernel_size), o);
}
Layer make_conv1d_transpose(const lo::ConvConfig& c, const std::string& name) {
  auto o = kernel_options<layers::Conv1DTransposeOptions>(c, name);
  o.strides = c.strides[0];
  o.dilation_rate = c.dilation_rate[0];
  if (c.output_padding) o.output_padding = (*c.output_padding)[0];
  return layers::Conv1DTranspose(c.filters, c.kernel_size[0], o);
}
Layer make_conv2d_transpose(const lo::ConvConfig& c, const std::string& name) {
  auto o = kernel_options<layers::Conv2DTransposeOptions>(c, name);
  o.strides = size2(c.strides);
  o.dilation_rate = size2(c.dilation_rate);
  if (c.output_padding) o.output_padding = size2(*c.output_padding);
  return layers::Conv2DTranspose(c.filters, size2(c.kernel_size), o);
}
Layer make_conv3d_transpose(const lo::ConvConfig& c, const std::string& name) {
  auto o = kernel_options<layers::Conv3DTransposeOptions>(c, name);
  o.strides = size3(c.strides);
  o.dilation_rate = size3(c.dilation_rate);
  if (c.output_padding) o.output_padding = size3(*c.output_padding);
  return layers::Conv3DTranspose(c.filters, size3(c.kernel_size), o);
}
Layer make_depthwise_conv1d(const lo::ConvConfig& c, const std::string& name) {
  auto o = depthwise_options<layers::DepthwiseConv1DOptions>(c, name);
  o.strides = c.strides[0];
  o.dilation_rate = c.dilation_rate[0];
  return layers::DepthwiseConv1D(c.kernel_size[0], o);
}
Layer make_depthwise_conv2d(const lo::ConvConfig& c, const std::string& name) {
  auto o = depthwise_options<layers::DepthwiseConv2DOptions>(c, name);
  o.strides = size2(c.strides);
  o.dilation_rate = size2(c.dilation_rate);
  return layers::DepthwiseConv2D(size2(c.kernel_size), o);
}
Layer make_separable_conv1d(const lo::ConvConfig& c, const std::string& name) {
  auto o = depthwise_options<layers::SeparableConv1DOptions>(c, name);
  o.strides = c.strides[0];
  o.dilation_rate = c.dilation_rate[0];
  o.pointwise_initializer = c.pointwise_initializer;
  o.pointwise_regularizer = c.pointwise_regularizer;
  o.pointwise_constraint = c.pointwise_constraint;
  return layers::SeparableConv1D(c.filters, c.kernel_size[0], o);
}
Layer make_separable_conv2d(const lo::ConvConfig& c, const std::string& name) {
  auto o = depthwise_options<layers::SeparableConv2DOptions>(c, name);
  o.strides = size2(c.strides);
  o.dilation_rate = size2(c.dilation_rate);
  o.pointwise_initializer = c.pointwise_initializer;
  o.pointwise_regularizer = c.pointwise_regularizer;
  o.pointwise_constraint = c.pointwise_constraint;
  return layers::SeparableConv2D(c.filters, size2(c.kernel_size), o);
}

constexpr ConvClass kConvClasses[] = {
    {"Conv1D", 1, ConvKind::kConv, true, lo::conv1d, make_conv1d},
    {"Conv2D", 2, ConvKind::kConv, false, conv2d_config, make_conv2d},
    {"Conv3D", 3, ConvKind::kConv, false, lo::conv3d, make_conv3d},
    {"Conv1DTranspose", 1, ConvKind::kTranspose, false, lo::conv1d_transpose,
     make_conv1d_transpose},
    {"Conv2DTranspose", 2, ConvKind::kTranspose, false, lo::conv2d_transpose,
     make_conv2d_transpose},
    {"Conv3DTranspose", 3, ConvKind::kTranspose, false, lo::conv3d_transpose,
     make_conv3d_transpose},
    {"DepthwiseConv1D", 1, ConvKind::kDepthwise, false, lo::depthwise_conv, make_depthwise_conv1d},
    {"DepthwiseConv2D", 2, ConvKind::kDepthwise, false, lo::depthwise_conv, make_depthwise_conv2d},
    {"SeparableConv1D", 1, ConvKind::kSeparable, false, lo::depthwise_conv, make_separable_conv1d},
    {"SeparableConv2D", 2, ConvKind::kSeparable, false, lo::depthwise_conv, make_separable_conv2d},
};

bool is_depthwise(ConvKind k) {
  return k == ConvKind::kDepthwise || k == ConvKind::kSeparable;
}

// Keras' get_config keys of each kind, in its order.
Config conv_get(const ConvClass& k, const Layer& layer) {
  const lo::ConvConfig c = need(k.get(layer.impl()), layer);
  const bool dw = is_depthwise(k.kind);
  const std::string w = dw ? "depthwise" : "kernel";
  const std::string w_init = w + "_initializer", w_reg = w + "_regularizer";
  Config out = Config::object();
  if (dw) out["depth_multiplier"] = c.depth_multiplier;
  if (k.kind != ConvKind::kDepthwise) out["filters"] = c.filters;
  out["kernel_size"] = ints_json(c.kernel_size);
  out["strides"] = ints_json(c.strides);
  out["padding"] = c.padding;
  if (k.kind == ConvKind::kTranspose)
    out["output_padding"] = c.output_padding ? ints_json(*c.output_padding) : Config(nullptr);
  out["data_format"] = data_format_name(c.channels_first);
  out["dilation_rate"] = ints_json(c.dilation_rate);
  if (k.kind == ConvKind::kConv) out["groups"] = c.groups;
  out["activation"] = activation_json(c.activation);
  out["use_bias"] = c.use_bias;
  out[w_init] =
      initializer_json(layer, w_init.c_str(), c.kernel_initializer, initializers::GlorotUniform());
  if (k.kind == ConvKind::kSeparable)
    out["pointwise_initializer"] = initializer_json(
        layer, "pointwise_initializer", c.pointwise_initializer, initializers::GlorotUniform());
  out["bias_initializer"] =
      initializer_json(layer, "bias_initializer", c.bias_initializer, initializers::Zeros());
  out[w_reg] = regularizer_json(layer, w_reg.c_str(), c.kernel_regularizer);
  if (k.kind == ConvKind::kSeparable)
    out["pointwise_regularizer"] =
        regularizer_json(layer, "pointwise_regularizer", c.pointwise_regularizer);
  out["bias_regularizer"] = regularizer_json(layer, "bias_regularizer", c.bias_regularizer);
  out["activity_regularizer"] = nullptr;
  out[w + "_constraint"] = constraint_json(layer, (w + "_constraint").c_str(), c.kernel_constraint);
  if (k.kind == ConvKind::kSeparable)
    out["pointwise_constraint"] =
        constraint_json(layer, "pointwise_constraint", c.pointwise_constraint);
  out["bias_constraint"] = constraint_json(layer, "bias_constraint", c.bias_constraint);
  return out;
}

Layer conv_from(const ConvClass& k, const Config& config) {
  Reader r(k.name, config);
  Base b = read_base(r);
  const bool dw = is_depthwise(k.kind);
  const std::string w = dw ? "depthwise" : "kernel";
  lo::ConvConfig c;
  if (dw) c.depth_multiplier = static_cast<int>(r.integer("depth_multiplier", 1));
  if (k.kind != ConvKind::kDepthwise) c.filters = r.integer("filters");
  c.kernel_size = sizes_of(r, "kernel_size", k.rank, std::nullopt);
  c.strides = sizes_of(r, "strides", k.rank, 1);
  c.padding = lower(r.string("padding", "valid"));
  if (c.padding != "valid" && c.padding != "same" && !(k.causal_ok && c.padding == "causal"))
    r.fail("padding", "= \"" + c.padding + "\" is not supported (valid, same" +
                          (k.causal_ok ? ", causal)" : ")"));
  if (k.kind == ConvKind::kTranspose)
    if (const Config* p = r.find("output_padding"); p != nullptr && !p->is_null())
      c.output_padding = sizes_of(r, "output_padding", k.rank, std::nullopt, 0);
  c.channels_first = read_channels_first(r);
  c.dilation_rate = sizes_of(r, "dilation_rate", k.rank, 1);
  if (k.kind == ConvKind::kConv) c.groups = static_cast<int>(r.integer("groups", 1));
  c.activation = r.activation("activation");
  c.use_bias = r.boolean("use_bias", true);
  c.kernel_initializer = r.initializer(w + "_initializer");
  c.bias_initializer = r.initializer("bias_initializer");
  c.kernel_regularizer = r.regularizer(w + "_regularizer");
  c.bias_regularizer = r.regularizer("bias_regularizer");
  r.expect_null("activity_regularizer");
  c.kernel_constraint = r.constraint(w + "_constraint");
  c.bias_constraint = r.constraint("bias_constraint");
  if (k.kind == ConvKind::kSeparable) {
    c.pointwise_initializer = r.initializer("pointwise_initializer");
    c.pointwise_regularizer = r.regularizer("pointwise_regularizer");
    c.pointwise_constraint = r.constraint("pointwise_constraint");
  }
  return finish(r, b, [&] { return k.make(c, b.name); });
}

// ---- poolings, padding, cropping, upsampling ----

// Max- and AveragePooling1D/3D (2-D: keras/serialization.cpp).
template <int kRank, bool kMax>
Layer pooling_from(const Config& config) {
  const char* cls = kRank == 1 ? (kMax ? "MaxPooling1D" : "AveragePooling1D")
                               : (kMax ? "MaxPooling3D" : "AveragePooling3D");
  Reader r(cls, config);
  Base b = read_base(r);
  const std::vector<int> pool = sizes_of(r, "pool_size", kRank, 2);
  const Config* s = r.find("strides");
  std::optional<std::vector<int>> strides;
  if (s != nullptr && !s->is_null()) strides = sizes_of(r, "strides", kRank, std::nullopt);
  const std::string padding = padding_of(r);
  const std::string format = data_format_name(read_channels_first(r));
  return finish(r, b, [&]() -> Layer {
    if constexpr (kRank == 1) {
      const layers::Pooling1DOptions o{
          .strides = strides ? std::optional<int>((*strides)[0]) : std::nullopt,
          .padding = padding,
          .data_format = format,
          .name = b.name};
      if constexpr (kMax) return layers::MaxPooling1D(pool[0], o);
      return layers::AveragePooling1D(pool[0], o);
    } else {
      const layers::Pooling3DOptions o{
          .strides = strides ? std::optional<Size3>(size3(*strides)) : std::nullopt,
          .padding = padding,
          .data_format = format,
          .name = b.name};
      if constexpr (kMax) return layers::MaxPooling3D(size3(pool), o);
      return layers::AveragePooling3D(size3(pool), o);
    }
  });
}
template <std::optional<lo::PoolingConfig> (*kGet)(const LayerImpl&)>
Config pooling_get(const Layer& layer) {
  const lo::PoolingConfig c = need(kGet(layer.impl()), layer);
  return Config{{"pool_size", ints_json(c.pool_size)},
                {"padding", c.same ? "same" : "valid"},
                {"strides", ints_json(c.strides)},
                {"data_format", data_format_name(c.channels_first)}};
}

template <class L>
FromConfig global_pooling_from(const char* cls) {
  return [cls](const Config& config) -> Layer {
    Reader r(cls, config);
    Base b = read_base(r);
    layers::GlobalPoolingOptions o;
    o.data_format = data_format_name(read_channels_first(r));
    o.keepdims = r.boolean("keepdims", false);
    o.name = b.name;
    return finish(r, b, [&] { return L(o); });
  };
}
template <std::optional<lo::GlobalPoolingConfig> (*kGet)(const LayerImpl&)>
Config global_pooling_get(const Layer& layer) {
  const lo::GlobalPoolingConfig c = need(kGet(layer.impl()), layer);
  return Config{{"data_format", data_format_name(c.channels_first)}, {"keepdims", c.keepdims}};
}

Layer up_sampling1d_from(const Config& config) {
  Reader r("UpSampling1D", config);
  Base b = read_base(r);
  const int64_t size = sizes_of(r, "size", 1, 2)[0];
  return finish(r, b, [&] { return layers::UpSampling1D(size, b.name); });
}
Config up_sampling1d_get(const Layer& layer) {
  return Config{{"size", need(lo::up_sampling1d(layer.impl()), layer)}};
}
Layer up_sampling2d_from(const Config& config) {
  Reader r("UpSampling2D", config);
  Base b = read_base(r);
  const Size2 size = size2(sizes_of(r, "size", 2, 2));
  const layers::UpSampling2DOptions o{.data_format = data_format_name(read_channels_first(r)),
                                      .interpolation = r.string("interpolation", "nearest"),
                                      .name = b.name};
  return finish(r, b, [&] { return layers::UpSampling2D(size, o); });
}
Config up_sampling2d_get(const Layer& layer) {
  const lo::UpSampling2DConfig c = need(lo::up_sampling2d(layer.impl()), layer);
  return Config{{"size", pair_json(c.size)},
                {"data_format", data_format_name(c.channels_first)},
                {"interpolation", c.interpolation}};
}
Layer up_sampling3d_from(const Config& config) {
  Reader r("UpSampling3D", config);
  Base b = read_base(r);
  const Size3 size = size3(sizes_of(r, "size", 3, 2));
  const layers::FormatOptions o{.data_format = data_format_name(read_channels_first(r)),
                                .name = b.name};
  return finish(r, b, [&] { return layers::UpSampling3D(size, o); });
}
Config up_sampling3d_get(const Layer& layer) {
  const lo::UpSampling3DConfig c = need(lo::up_sampling3d(layer.impl()), layer);
  return Config{{"size", ints_json({c.size[0], c.size[1], c.size[2]})},
                {"data_format", data_format_name(c.channels_first)}};
}

// ZeroPadding / Cropping amounts: an int, one int per dimension (both sides) or, with n > 1,
// n [begin, end] pairs; 1-D: an int or one [begin, end] pair.
lo::SidesConfig sides_of(Reader& r, const std::string& key, int n) {
  const Config& v = r.require(key);
  const std::string want =
      n == 1 ? "an integer or a list of 2 integers"
             : fmt::format("an integer, a list of {} integers or a list of {} pairs", n, n);
  auto bad = [&]() { r.fail(key, "must be " + want + " >= 0, got " + r.got(v)); };
  auto count = [&](const Config& e) -> int64_t {
    if (!e.is_number_integer() || e.get<int64_t>() < 0) bad();
    return e.get<int64_t>();
  };
  lo::SidesConfig out;
  if (v.is_number_integer()) {
    const int64_t x = count(v);
    return lo::SidesConfig(static_cast<size_t>(n), {x, x});
  }
  if (!v.is_array()) bad();
  if (n == 1) {
    if (v.size() != 2) bad();
    return {{count(v[0]), count(v[1])}};
  }
  if (v.size() != static_cast<size_t>(n)) bad();
  for (const Config& e : v) {
    if (e.is_array()) {
      if (e.size() != 2) bad();
      out.push_back({count(e[0]), count(e[1])});
    } else {
      const int64_t x = count(e);
      out.push_back({x, x});
    }
  }
  return out;
}
Config sides_json(const lo::SidesConfig& s) {
  if (s.size() == 1) return Config::array({s[0][0], s[0][1]});
  Config out = Config::array();
  for (const auto& p : s) out.push_back(Config::array({p[0], p[1]}));
  return out;
}
layers::Sides1D side(const std::array<int64_t, 2>& s) {
  return layers::Sides1D(s[0], s[1]);
}

template <int kRank, bool kCrop>
Layer pad_crop_from(const Config& config) {
  constexpr const char* kNames[2][3] = {{"ZeroPadding1D", "ZeroPadding2D", "ZeroPadding3D"},
                                        {"Cropping1D", "Cropping2D", "Cropping3D"}};
  Reader r(kNames[kCrop][kRank - 1], config);
  Base b = read_base(r);
  const lo::SidesConfig s = sides_of(r, kCrop ? "cropping" : "padding", kRank);
  // Cropping1D has no data_format.
  const bool first = (kRank > 1 || !kCrop) && read_channels_first(r);
  const layers::FormatOptions o{.data_format = data_format_name(first), .name = b.name};
  return finish(r, b, [&]() -> Layer {
    if constexpr (kRank == 1) {
      if constexpr (kCrop) return layers::Cropping1D(side(s[0]), b.name);
      return layers::ZeroPadding1D(side(s[0]), o);
    } else if constexpr (kRank == 2) {
      const layers::Sides2D s2(side(s[0]), side(s[1]));
      if constexpr (kCrop) return layers::Cropping2D(s2, o);
      return layers::ZeroPadding2D(s2, o);
    } else {
      const layers::Sides3D s3(side(s[0]), side(s[1]), side(s[2]));
      if constexpr (kCrop) return layers::Cropping3D(s3, o);
      return layers::ZeroPadding3D(s3, o);
    }
  });
}
template <int kRank, bool kCrop>
Config pad_crop_get(const Layer& layer) {
  const lo::PadCropConfig c =
      need(kRank == 3 ? lo::pad_crop3d(layer.impl()) : lo::pad_crop(layer.impl()), layer);
  Config out{{kCrop ? "cropping" : "padding", sides_json(c.sides)}};
  if (kRank > 1 || !kCrop) out["data_format"] = data_format_name(c.channels_first);
  return out;
}

Layer permute_from(const Config& config) {
  Reader r("Permute", config);
  Base b = read_base(r);
  std::vector<int> dims;
  for (int64_t d : r.int_list("dims")) dims.push_back(static_cast<int>(d));
  return finish(r, b, [&] { return layers::Permute(dims, b.name); });
}
Config permute_get(const Layer& layer) {
  return Config{{"dims", ints_json(need(lo::permute_dims(layer.impl()), layer))}};
}

Layer repeat_vector_from(const Config& config) {
  Reader r("RepeatVector", config);
  Base b = read_base(r);
  const int64_t n = r.integer("n");
  return finish(r, b, [&] { return layers::RepeatVector(n, b.name); });
}
Config repeat_vector_get(const Layer& layer) {
  return Config{{"n", need(lo::repeat_vector_n(layer.impl()), layer)}};
}

Layer rescaling_from(const Config& config) {
  Reader r("Rescaling", config);
  Base b = read_base(r);
  const double scale = r.number("scale");
  const double offset = r.number("offset", 0.0);
  return finish(r, b, [&] { return layers::Rescaling(scale, offset, b.name); });
}
Config rescaling_get(const Layer& layer) {
  const auto c = need(lo::rescaling(layer.impl()), layer);
  return Config{{"scale", c[0]}, {"offset", c[1]}};
}

// ---- activations ----

Layer leaky_relu_from(const Config& config) {
  Reader r("LeakyReLU", config);
  Base b = read_base(r);
  const double slope = r.number("negative_slope", 0.3);
  return finish(r, b, [&] { return layers::LeakyReLU(slope, b.name); });
}
Config leaky_relu_get(const Layer& layer) {
  return Config{{"negative_slope", need(lo::leaky_relu_slope(layer.impl()), layer)}};
}

Layer elu_from(const Config& config) {
  Reader r("ELU", config);
  Base b = read_base(r);
  const double alpha = r.number("alpha", 1.0);
  return finish(r, b, [&] { return layers::ELU(alpha, b.name); });
}
// Keras writes alpha between the name and the other base keys.
Config elu_get(const Layer& layer) {
  const Config base = base_config(layer);
  return Config{{"name", base["name"]},
                {"alpha", need(lo::elu_alpha(layer.impl()), layer)},
                {"trainable", base["trainable"]},
                {"dtype", base["dtype"]}};
}

Layer prelu_from(const Config& config) {
  Reader r("PReLU", config);
  Base b = read_base(r);
  layers::PReLUOptions o;
  o.alpha_initializer = r.initializer("alpha_initializer");
  o.alpha_regularizer = r.regularizer("alpha_regularizer");
  o.alpha_constraint = r.constraint("alpha_constraint");
  if (const Config* s = r.find("shared_axes"); s != nullptr && !s->is_null())
    for (int64_t a : r.int_list("shared_axes")) o.shared_axes.push_back(static_cast<int>(a));
  o.name = b.name;
  return finish(r, b, [&] { return layers::PReLU(o); });
}
Config prelu_get(const Layer& layer) {
  const lo::PReLUConfig c = need(lo::prelu(layer.impl()), layer);
  return Config{
      {"alpha_initializer",
       initializer_json(layer, "alpha_initializer", c.initializer, initializers::Zeros())},
      {"alpha_regularizer", regularizer_json(layer, "alpha_regularizer", c.regularizer)},
      {"alpha_constraint", constraint_json(layer, "alpha_constraint", c.constraint)},
      {"shared_axes", c.shared_axes.empty() ? Config(nullptr) : ints_json(c.shared_axes)}};
}

// ---- noise ----

// SpatialDropout1D/2D/3D, GaussianNoise and GaussianDropout: {amount key, seed[, data_format]}.
// Keras' SpatialDropout1D/2D/3D config is {rate, seed, name, dtype (the variable dtype's name, a
// string), [data_format]}, with no trainable.
template <class L>
FromConfig noise_from(const char* cls, const char* amount_key, bool data_format) {
  return [=](const Config& config) -> Layer {
    Reader r(cls, config);
    Base b = read_base(r);
    const double amount = r.number(amount_key);
    const auto seed = seed_of(r);
    if constexpr (std::is_constructible_v<L, double, layers::SpatialDropoutOptions>) {
      const bool first = data_format && read_channels_first(r);
      const layers::SpatialDropoutOptions o{
          .data_format = data_format_name(first), .seed = seed, .name = b.name};
      return finish(r, b, [&] { return L(amount, o); });
    } else {
      return finish(r, b, [&] { return L(amount, seed, b.name); });
    }
  };
}
GetConfig noise_get(const char* amount_key, bool spatial, bool data_format) {
  return [=](const Layer& layer) {
    const lo::NoiseConfig c = need(lo::noise(layer.impl()), layer);
    Config out{{amount_key, c.amount}, {"seed", seed_json(c.seed)}};
    if (spatial) {
      out["name"] = layer.name();
      out["dtype"] = std::string(dtype_name(layer.variable_dtype()));
    }
    if (data_format) out["data_format"] = data_format_name(c.channels_first);
    return out;
  };
}

Layer alpha_dropout_from(const Config& config) {
  Reader r("AlphaDropout", config);
  Base b = read_base(r);
  const double rate = r.number("rate");
  const auto seed = seed_of(r);
  std::vector<int64_t> noise_shape;
  if (const Config* n = r.find("noise_shape"); n != nullptr && !n->is_null()) {
    if (!n->is_array()) r.fail("noise_shape", "must be a list, got " + r.got(*n));
    for (const Config& d : *n) {
      if (d.is_null()) {
        noise_shape.push_back(0);
      } else if (d.is_number_integer() && d.get<int64_t>() > 0) {
        noise_shape.push_back(d.get<int64_t>());
      } else {
        r.fail("noise_shape", "must hold sizes > 0 or null, got " + r.got(*n));
      }
    }
  }
  return finish(r, b, [&] { return layers::AlphaDropout(rate, noise_shape, seed, b.name); });
}
Config alpha_dropout_get(const Layer& layer) {
  const lo::AlphaDropoutConfig c = need(lo::alpha_dropout(layer.impl()), layer);
  Config noise_shape = nullptr;
  if (!c.noise_shape.empty()) {
    noise_shape = Config::array();
    for (int64_t d : c.noise_shape) noise_shape.push_back(d == 0 ? Config(nullptr) : Config(d));
  }
  return Config{{"rate", c.rate}, {"seed", seed_json(c.seed)}, {"noise_shape", noise_shape}};
}

Layer activity_regularization_from(const Config& config) {
  Reader r("ActivityRegularization", config);
  Base b = read_base(r);
  const double l1 = r.number("l1", 0.0);
  const double l2 = r.number("l2", 0.0);
  return finish(r, b, [&] { return layers::ActivityRegularization(l1, l2, b.name); });
}
Config activity_regularization_get(const Layer& layer) {
  const auto c = need(lo::activity_regularization(layer.impl()), layer);
  return Config{{"l1", c[0]}, {"l2", c[1]}};
}

// ---- normalization ----

Layer group_norm_from(const Config& config) {
  Reader r("GroupNormalization", config);
  Base b = read_base(r);
  layers::GroupNormalizationOptions o;
  o.groups = static_cast<int>(r.integer("groups", 32));
  o.axis = static_cast<int>(r.integer("axis", -1));
  o.epsilon = r.number("epsilon", 1e-3);
  o.center = r.boolean("center", true);
  o.scale = r.boolean("scale", true);
  o.beta_initializer = r.initializer("beta_initializer");
  o.gamma_initializer = r.initializer("gamma_initializer");
  o.beta_regularizer = r.regularizer("beta_regularizer");
  o.gamma_regularizer = r.regularizer("gamma_regularizer");
  o.beta_constraint = r.constraint("beta_constraint");
  o.gamma_constraint = r.constraint("gamma_constraint");
  o.name = b.name;
  return finish(r, b, [&] { return layers::GroupNormalization(o); });
}
Config group_norm_get(const Layer& layer) {
  const auto o = need(lo::group_normalization(layer.impl()), layer);
  Config c{{"groups", o.groups},
           {"axis", o.axis},
           {"epsilon", o.epsilon},
           {"center", o.center},
           {"scale", o.scale}};
  add_beta_gamma(c, layer, o);
  return c;
}

Layer unit_norm_from(const Config& config) {
  Reader r("UnitNormalization", config);
  Base b = read_base(r);
  const std::vector<int> axis = axes_of(r, "axis", -1);
  return finish(r, b, [&] { return layers::UnitNormalization(axis, b.name); });
}
// Keras keeps the axis as given: an int (tapeflow writes one axis so) or a list.
Config unit_norm_get(const Layer& layer) {
  const std::vector<int> axis = need(lo::unit_normalization_axis(layer.impl()), layer);
  return Config{{"axis", axis.size() == 1 ? Config(axis[0]) : ints_json(axis)}};
}

Layer rms_norm_from(const Config& config) {
  Reader r("RMSNormalization", config);
  Base b = read_base(r);
  const std::vector<int> axis = axes_of(r, "axis", -1);
  const double epsilon = r.number("epsilon", 1e-6);
  return finish(r, b, [&] { return layers::RMSNormalization(axis, epsilon, b.name); });
}
// Keras keeps an int axis until the build, which turns it into a list.
Config rms_norm_get(const Layer& layer) {
  const lo::RMSNormalizationConfig c = need(lo::rms_normalization(layer.impl()), layer);
  const Config axis = c.axis.size() == 1 && !layer.built() ? Config(c.axis[0]) : ints_json(c.axis);
  return Config{{"axis", axis}, {"epsilon", c.epsilon}};
}

// AdaptiveAverage/MaxPooling1D/2D/3D: output_size (an int or a list of n ints) and data_format.
template <int N>
FromConfig adaptive_from(const char* cls) {
  return [cls](const Config& config) -> Layer {
    Reader r(cls, config);
    Base b = read_base(r);
    const std::vector<int> s = sizes_of(r, "output_size", N, std::nullopt);
    const layers::FormatOptions o{.data_format = data_format_name(read_channels_first(r)),
                                  .name = b.name};
    const std::string c = cls;
    return make_checked(r, b, [&]() -> Layer {
      const bool max = c.find("Max") != std::string::npos;
      if constexpr (N == 1) {
        if (max) return layers::AdaptiveMaxPooling1D(s[0], o);
        return layers::AdaptiveAveragePooling1D(s[0], o);
      } else if constexpr (N == 2) {
        if (max) return layers::AdaptiveMaxPooling2D(size2(s), o);
        return layers::AdaptiveAveragePooling2D(size2(s), o);
      } else {
        if (max) return layers::AdaptiveMaxPooling3D(size3(s), o);
        return layers::AdaptiveAveragePooling3D(size3(s), o);
      }
    });
  };
}
Config adaptive_get(const Layer& layer) {
  const lo::AdaptivePoolingConfig c = need(lo::adaptive_pooling(layer.impl()), layer);
  return Config{{"output_size", c.output_size},
                {"data_format", data_format_name(c.channels_first)}};
}

}  // namespace

void add_conv_layers(Registry& m) {
  for (const ConvClass& k : kConvClasses)
    add_builtin(
        m, k.name, [&k](const Layer& l) { return conv_get(k, l); },
        [&k](const Config& c) { return conv_from(k, c); });
  add_builtin(m, "MaxPooling1D", pooling_get<lo::pooling1d>, pooling_from<1, true>);
  add_builtin(m, "AveragePooling1D", pooling_get<lo::pooling1d>, pooling_from<1, false>);
  add_builtin(m, "MaxPooling3D", pooling_get<lo::pooling3d>, pooling_from<3, true>);
  add_builtin(m, "AveragePooling3D", pooling_get<lo::pooling3d>, pooling_from<3, false>);
  add_builtin(m, "GlobalAveragePooling1D", global_pooling_get<lo::global_pooling>,
              global_pooling_from<layers::GlobalAveragePooling1D>("GlobalAveragePooling1D"));
  add_builtin(m, "GlobalMaxPooling1D", global_pooling_get<lo::global_pooling>,
              global_pooling_from<layers::GlobalMaxPooling1D>("GlobalMaxPooling1D"));
  add_builtin(m, "GlobalAveragePooling2D", global_pooling_get<lo::global_pooling>,
              global_pooling_from<layers::GlobalAveragePooling2D>("GlobalAveragePooling2D"));
  add_builtin(m, "GlobalMaxPooling2D", global_pooling_get<lo::global_pooling>,
              global_pooling_from<layers::GlobalMaxPooling2D>("GlobalMaxPooling2D"));
  add_builtin(m, "GlobalAveragePooling3D", global_pooling_get<lo::global_pooling3d>,
              global_pooling_from<layers::GlobalAveragePooling3D>("GlobalAveragePooling3D"));
  add_builtin(m, "GlobalMaxPooling3D", global_pooling_get<lo::global_pooling3d>,
              global_pooling_from<layers::GlobalMaxPooling3D>("GlobalMaxPooling3D"));
  add_builtin(m, "UpSampling1D", up_sampling1d_get, up_sampling1d_from);
  add_builtin(m, "UpSampling2D", up_sampling2d_get, up_sampling2d_from);
  add_builtin(m, "UpSampling3D", up_sampling3d_get, up_sampling3d_from);
  add_builtin(m, "ZeroPadding1D", pad_crop_get<1, false>, pad_crop_from<1, false>);
  add_builtin(m, "ZeroPadding2D", pad_crop_get<2, false>, pad_crop_from<2, false>);
  add_builtin(m, "ZeroPadding3D", pad_crop_get<3, false>, pad_crop_from<3, false>);
  add_builtin(m, "Cropping1D", pad_crop_get<1, true>, pad_crop_from<1, true>);
  add_builtin(m, "Cropping2D", pad_crop_get<2, true>, pad_crop_from<2, true>);
  add_builtin(m, "Cropping3D", pad_crop_get<3, true>, pad_crop_from<3, true>);
  add_builtin(m, "Permute", permute_get, permute_from);
  add_builtin(m, "RepeatVector", repeat_vector_get, repeat_vector_from);
  add_builtin(m, "Rescaling", rescaling_get, rescaling_from);
  add_builtin(m, "LeakyReLU", leaky_relu_get, leaky_relu_from);
  add_builtin(m, "ELU", elu_get, elu_from);
  add_builtin(m, "PReLU", prelu_get, prelu_from);
  add_builtin(m, "SpatialDropout1D", noise_get("rate", true, false),
              noise_from<layers::SpatialDropout1D>("SpatialDropout1D", "rate", false));
  add_builtin(m, "SpatialDropout2D", noise_get("rate", true, true),
              noise_from<layers::SpatialDropout2D>("SpatialDropout2D", "rate", true));
  add_builtin(m, "SpatialDropout3D", noise_get("rate", true, true),
              noise_from<layers::SpatialDropout3D>("SpatialDropout3D", "rate", true));
  add_builtin(m, "GaussianNoise", noise_get("stddev", false, false),
              noise_from<layers::GaussianNoise>("GaussianNoise", "stddev", false));
  add_builtin(m, "GaussianDropout", noise_get("rate", false, false),
              noise_from<layers::GaussianDropout>("GaussianDropout", "rate", false));
  add_builtin(m, "AlphaDropout", alpha_dropout_get, alpha_dropout_from);
  add_builtin(m, "ActivityRegularization", activity_regularization_get,
              activity_regularization_from);
  add_builtin(m, "GroupNormalization", group_norm_get, group_norm_from);
  add_builtin(m, "UnitNormalization", unit_norm_get, unit_norm_from);
  add_builtin(m, "RMSNormalization", rms_norm_get, rms_norm_from);
  add_builtin(m, "AdaptiveAveragePooling1D", adaptive_get,
              adaptive_from<1>("AdaptiveAveragePooling1D"));
  add_builtin(m, "AdaptiveMaxPooling1D", adaptive_get, adaptive_from<1>("AdaptiveMaxPooling1D"));
  add_builtin(m, "AdaptiveAveragePooling2D", adaptive_get,
              adaptive_from<2>("AdaptiveAveragePooling2D"));
  add_builtin(m, "AdaptiveMaxPooling2D", adaptive_get, adaptive_from<2>("AdaptiveMaxPooling2D"));
  add_builtin(m, "AdaptiveAveragePooling3D", adaptive_get,
              adaptive_from<3>("AdaptiveAveragePooling3D"));
  add_builtin(m, "AdaptiveMaxPooling3D", adaptive_get, adaptive_from<3>("AdaptiveMaxPooling3D"));
}

}  // namespace tapeflow::keras::saving::internal
