#include "keras/serialization.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string_view>
#include <utility>
#include <variant>

#include "core/check.h"
#include "keras/data_format.h"
#include "keras/functional.h"
#include "keras/layers_attention.h"
#include "keras/layers_kerasmore.h"
#include "keras/layers_merge.h"
#include "keras/layers_more.h"
#include "keras/layers_recurrent.h"
#include "keras/safetensors.h"
#include "keras/serialization_access.h"
#include "keras/serialization_access_sequence.h"
#include "keras/serialization_compile.h"
#include "keras/serialization_internal.h"
#include "keras/serialization_json.h"
#include "ops/dispatch.h"

namespace tapeflow::keras {
namespace saving {
namespace internal {

// ---- values ----

Config shape_json(const TensorShape& s) {
  Config out = Config::array();
  for (int i = 0; i < s.rank(); ++i) out.push_back(s[i] == None ? Config(nullptr) : Config(s[i]));
  return out;
}
Config pair_json(Size2 s) {
  return Config::array({s.h, s.w});
}
Config seed_json(std::optional<int64_t> seed) {
  return seed ? Config(*seed) : Config(nullptr);
}

Config dtype_policy_json(const std::string& policy) {
  return Config{{"module", "keras"},
                {"class_name", "DTypePolicy"},
                {"config", {{"name", policy}}},
                {"registered_name", nullptr}};
}

// Keras' base keys, in its order.
Config base_config(const Layer& layer) {
  return Config{{"name", layer.name()},
                {"trainable", layer.trainable()},
                {"dtype", dtype_policy_json(layer.impl().policy_name())}};
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// Keras writes "linear" for no activation.
std::string activation_json(const std::string& a) {
  return a.empty() ? "linear" : a;
}

void add_kernel_bias_keys(Config& c, const Layer& layer, const Initializer& kernel_initializer,
                          const Initializer& bias_initializer,
                          const Regularizer& kernel_regularizer,
                          const Regularizer& bias_regularizer) {
  c["kernel_initializer"] = initializer_json(layer, "kernel_initializer", kernel_initializer,
                                             initializers::GlorotUniform());
  c["bias_initializer"] =
      initializer_json(layer, "bias_initializer", bias_initializer, initializers::Zeros());
  c["kernel_regularizer"] = regularizer_json(layer, "kernel_regularizer", kernel_regularizer);
  c["bias_regularizer"] = regularizer_json(layer, "bias_regularizer", bias_regularizer);
}

// "layer \"dense\" (Dense)" for write errors.
std::string who(const Layer& layer) {
  return fmt::format("layer \"{}\" ({})", layer.name(), layer.class_name());
}

struct InitializerClass {
  const char* name;        // tapeflow's Initializer::name()
  const char* keras_name;  // Keras' class
};
constexpr InitializerClass kInitializers[] = {
    {"zeros", "Zeros"},
    {"ones", "Ones"},
    {"constant", "Constant"},
    {"random_normal", "RandomNormal"},
    {"random_uniform", "RandomUniform"},
    {"truncated_normal", "TruncatedNormal"},
    {"glorot_uniform", "GlorotUniform"},
    {"glorot_normal", "GlorotNormal"},
    {"he_uniform", "HeUniform"},
    {"he_normal", "HeNormal"},
    {"orthogonal", "Orthogonal"},
    {"lecun_normal", "LecunNormal"},
    {"lecun_uniform", "LecunUniform"},
    {"identity", "Identity"},
    {"variance_scaling", "VarianceScaling"},
};

// An initializer's config value as JSON (std::monostate: null).
struct InitializerValueJson {
  Config operator()(std::monostate) const { return nullptr; }
  Config operator()(double v) const { return v; }
  Config operator()(int64_t v) const { return v; }
  Config operator()(const std::string& v) const { return v; }
  Config operator()(const std::vector<int64_t>& v) const { return v; }
};

// `init` undefined: the layer's default, `fallback`.
Config initializer_json(const Layer& layer, const char* key, const Initializer& init,
                        const Initializer& fallback) {
  const Initializer& i = init.defined() ? init : fallback;
  for (const InitializerClass& c : kInitializers) {
    if (i.name() != c.name) continue;
    Config config = Config::object();
    for (const auto& [k, v] : i.config()) config[k] = std::visit(InitializerValueJson{}, v);
    return Config{{"module", "keras.initializers"},
                  {"class_name", c.keras_name},
                  {"config", config},
                  {"registered_name", nullptr}};
  }
  TF_THROW(UnimplementedError, "get_config",
           "{}: {} is the custom initializer \"{}\", which has no Keras config (use one of "
           "tf::keras::initializers' classes)",
           who(layer), key, i.name());
}

Config regularizer_json(const Layer& layer, const char* key, const Regularizer& r) {
  if (!r.defined()) return nullptr;
  const bool orthogonal = r.name() == "OrthogonalRegularizer";
  if (r.name() != "L1" && r.name() != "L2" && r.name() != "L1L2" && !orthogonal)
    TF_THROW(UnimplementedError, "get_config",
             "{}: {} is the custom regularizer \"{}\", which has no Keras config (use "
             "tf::keras::regularizers::L1, L2, L1L2 or OrthogonalRegularizer)",
             who(layer), key, r.name());
  Config config = Config::object();
  for (const auto& [k, v] : r.config()) config[k] = v;
  if (orthogonal) {  // {"factor": f, "mode": "rows" or "columns"}, as Keras
    const bool columns = config["columns"].get<double>() != 0.0;
    config.erase("columns");
    config["mode"] = columns ? "columns" : "rows";
  }
  // Keras' L1 keeps its factor as a float32 tensor, so its config holds the float32 value
  // (L1(0.001): 0.0010000000474974513); L2 and L1L2 keep Python floats.
  if (r.name() == "L1")
    config["l1"] = static_cast<double>(static_cast<float>(config["l1"].get<double>()));
  return Config{{"module", "keras.regularizers"},
                {"class_name", r.name()},
                {"config", config},
                {"registered_name", nullptr}};
}

Config constraint_json(const Layer& layer, const char* key, const Constraint& c) {
  if (!c.defined()) return nullptr;
  const auto& k = c.config();
  TF_CHECK_T(UnimplementedError,
             c.name() == "MaxNorm" || c.name() == "MinMaxNorm" || c.name() == "NonNeg" ||
                 c.name() == "UnitNorm",
             "get_config",
             "{}: {} is the custom constraint \"{}\", which has no Keras config (use "
             "tf::keras::constraints::MaxNorm, MinMaxNorm, NonNeg or UnitNorm)",
             who(layer), key, c.name());
  Config config = Config::object();
  for (const auto& [name, v] : k.numbers) config[name] = v;
  if (k.has_axis) config["axis"] = k.axis.size() == 1 ? Config(k.axis[0]) : Config(k.axis);
  return Config{{"module", "keras.constraints"},
                {"class_name", c.name()},
                {"config", config},
                {"registered_name", nullptr}};
}

// ---- reading a config, key by key ----

// A Keras serialized object's class and config, checking its module and registered_name.
std::pair<std::string, Config> object_parts(Reader& r, const std::string& key, const Config& v,
                                            const char* module) {
  if (!v.is_object() || !v.contains("class_name") || !v["class_name"].is_string())
    r.fail(key, "must be a string or a Keras object with a class_name, got " + r.got(v));
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    if (k == "class_name" || k == "config") continue;
    if (k == "module" && (it.value().is_null() || it.value() == module)) continue;
    if (k == "registered_name" && (it.value().is_null() || it.value() == v["class_name"])) continue;
    r.fail(key,
           "has an entry \"" + k + "\" = " + r.got(it.value()) + " that tapeflow does not support");
  }
  Config config = v.contains("config") ? v["config"] : Config::object();
  if (config.is_null()) config = Config::object();
  if (!config.is_object()) r.fail(key, "has a config that is not an object: " + r.got(config));
  return {v["class_name"].get<std::string>(), config};
}

Initializer Reader::initializer(const std::string& key) {
  const Config* v = find(key);
  if (v == nullptr || v->is_null()) return {};
  if (v->is_string()) {
    try {
      return Initializer(v->get<std::string>());
    } catch (const Error& e) {
      fail(key, std::string("names an initializer tapeflow does not have: ") + e.what());
    }
  }
  auto [cls, config] = object_parts(*this, key, *v, "keras.initializers");
  Reader c(class_name_ + " " + key + " (" + cls + ")", config);
  Initializer out;
  if (cls == "Zeros") {
    out = initializers::Zeros();
  } else if (cls == "Ones") {
    out = initializers::Ones();
  } else if (cls == "Constant") {
    out = initializers::Constant(c.number("value", 0.0));
  } else if (cls == "RandomNormal") {
    auto seed = c.optional_integer("seed");
    out = initializers::RandomNormal(c.number("mean", 0.0), c.number("stddev", 0.05), seed);
  } else if (cls == "RandomUniform") {
    auto seed = c.optional_integer("seed");
    out = initializers::RandomUniform(c.number("minval", -0.05), c.number("maxval", 0.05), seed);
  } else if (cls == "TruncatedNormal") {
    auto seed = c.optional_integer("seed");
    out = initializers::TruncatedNormal(c.number("mean", 0.0), c.number("stddev", 0.05), seed);
  } else if (cls == "GlorotUniform" || cls == "GlorotNormal" || cls == "HeUniform" ||
             cls == "HeNormal" || cls == "LecunNormal" || cls == "LecunUniform") {
    auto seed = c.optional_integer("seed");
    c.expect_null("input_axes");
    c.expect_null("output_axes");
    out = cls == "GlorotUniform"  ? initializers::GlorotUniform(seed)
          : cls == "GlorotNormal" ? initializers::GlorotNormal(seed)
          : cls == "HeUniform"    ? initializers::HeUniform(seed)
          : cls == "HeNormal"     ? initializers::HeNormal(seed)
          : cls == "LecunNormal"  ? initializers::LecunNormal(seed)
                                  : initializers::LecunUniform(seed);
  } else if (cls == "Identity" || cls == "IdentityInitializer") {
    out = initializers::Identity(c.number("gain", 1.0));
  } else if (cls == "Orthogonal") {
    auto seed = c.optional_integer("seed");
    out = initializers::Orthogonal(c.number("gain", 1.0), seed);
  } else if (cls == "VarianceScaling") {
    auto seed = c.optional_integer("seed");
    const double scale = c.number("scale", 1.0);
    const std::string mode = c.string("mode", "fan_in");
    const std::string distribution = c.string("distribution", "truncated_normal");
    auto axes = [&](const char* k) -> std::optional<std::vector<int64_t>> {
      const Config* a = c.find(k);
      if (a == nullptr || a->is_null()) return std::nullopt;
      return c.int_list(k);
    };
    auto input_axes = axes("input_axes");
    auto output_axes = axes("output_axes");
    try {
      out = initializers::VarianceScaling(scale, mode, distribution, seed, input_axes, output_axes);
    } catch (const InvalidArgumentError& e) {
      fail(key, std::string("is not a valid VarianceScaling: ") + e.what());
    }
  } else {
    fail(key, "is the initializer class \"" + cls +
                  "\", which tapeflow does not have (Zeros, Ones, Constant, RandomNormal, "
                  "RandomUniform, TruncatedNormal, GlorotUniform, GlorotNormal, HeUniform, "
                  "HeNormal, LecunNormal, LecunUniform, Orthogonal, Identity, VarianceScaling)");
  }
  c.finish();
  return out;
}

Constraint Reader::constraint(const std::string& key) {
  const Config* v = find(key);
  if (v == nullptr || v->is_null()) return {};
  if (v->is_string()) {
    try {
      return constraints::get(v->get<std::string>());
    } catch (const InvalidArgumentError&) {
      fail(key, "names a constraint tapeflow does not have: \"" + v->get<std::string>() +
                    "\" (max_norm, min_max_norm, non_neg, unit_norm)");
    }
  }
  auto [cls, config] = object_parts(*this, key, *v, "keras.constraints");
  if (cls != "MaxNorm" && cls != "MinMaxNorm" && cls != "NonNeg" && cls != "UnitNorm")
    fail(key, "is the constraint class \"" + cls +
                  "\", which tapeflow does not have (MaxNorm, MinMaxNorm, NonNeg, UnitNorm)");
  Reader c(class_name_ + " " + key + " (" + cls + ")", config);
  // The keys first (their errors name the key), then the constraint (its own checks).
  std::vector<int> axis = {0};  // Keras' axis: an int or a non-empty list of ints
  if (const Config* a = cls == "NonNeg" ? nullptr : c.find("axis"); a != nullptr) {
    if (a->is_number_integer()) {
      axis = {a->get<int>()};
    } else {
      if (!a->is_array() || a->empty())
        c.fail("axis", "must be an int or a non-empty list of ints, got " + c.got(*a));
      axis.clear();
      for (const Config& e : *a) {
        if (!e.is_number_integer()) c.fail("axis", "must be an int or a list of ints");
        axis.push_back(e.get<int>());
      }
    }
  }
  const double min_value = cls == "MinMaxNorm" ? c.number("min_value", 0.0) : 0.0;
  const double max_value = cls == "MaxNorm"      ? c.number("max_value", 2.0)
                           : cls == "MinMaxNorm" ? c.number("max_value", 1.0)
                                                 : 0.0;
  const double rate = cls == "MinMaxNorm" ? c.number("rate", 1.0) : 1.0;
  c.finish();
  try {
    if (cls == "MaxNorm") return constraints::MaxNorm(max_value, axis);
    if (cls == "MinMaxNorm") return constraints::MinMaxNorm(min_value, max_value, rate, axis);
    if (cls == "UnitNorm") return constraints::UnitNorm(axis);
    return constraints::NonNeg();
  } catch (const InvalidArgumentError& e) {
    fail(key, std::string("does not load: ") + e.what());
  }
}

Regularizer Reader::regularizer(const std::string& key) {
  const Config* v = find(key);
  if (v == nullptr || v->is_null()) return {};
  if (v->is_string()) {
    const std::string s = v->get<std::string>();
    if (s == "l1") return regularizers::L1();
    if (s == "l2") return regularizers::L2();
    if (s == "l1_l2") return regularizers::L1L2(0.01, 0.01);
    if (s == "orthogonal_regularizer") return regularizers::OrthogonalRegularizer();
    fail(key, "names a regularizer tapeflow does not have: \"" + s +
                  "\" (l1, l2, l1_l2, orthogonal_regularizer)");
  }
  auto [cls, config] = object_parts(*this, key, *v, "keras.regularizers");
  Reader c(class_name_ + " " + key + " (" + cls + ")", config);
  Regularizer out;
  if (cls == "L1") {
    out = regularizers::L1(c.number("l1", 0.01));
  } else if (cls == "L2") {
    out = regularizers::L2(c.number("l2", 0.01));
  } else if (cls == "L1L2") {
    const double l1 = c.number("l1", 0.0);
    out = regularizers::L1L2(l1, c.number("l2", 0.0));
  } else if (cls == "OrthogonalRegularizer") {
    const double factor = c.number("factor", 0.01);
    const std::string mode = c.string("mode", "rows");
    try {
      out = regularizers::OrthogonalRegularizer(factor, mode);
    } catch (const InvalidArgumentError& e) {
      fail(key, std::string("does not load: ") + e.what());
    }
  } else {
    fail(key, "is the regularizer class \"" + cls +
                  "\", which tapeflow does not have (L1, L2, L1L2, OrthogonalRegularizer)");
  }
  c.finish();
  return out;
}

Base read_base(Reader& r) {
  Base b;
  b.name = r.string("name", "");
  b.trainable = r.boolean("trainable", true);
  const Config* d = r.find("dtype");
  if (d != nullptr && !d->is_null()) {
    std::string policy;
    if (d->is_string()) {
      policy = d->get<std::string>();
    } else {
      auto [cls, config] = object_parts(r, "dtype", *d, "keras");
      if (cls != "DTypePolicy" && cls != "FloatDTypePolicy")
        r.fail("dtype", "is the policy class \"" + cls + "\", which tapeflow does not have");
      Reader c(r.class_name() + " dtype", config);
      policy = c.string("name", "float32");
      c.finish();
    }
    try {
      b.policy = mixed_precision::Policy(policy);
    } catch (const Error& e) {
      r.fail("dtype", std::string("names a policy tapeflow does not have: ") + e.what());
    }
  }
  return b;
}
void apply_base(const Layer& layer, const Base& b) {
  if (b.policy && !(layer.dtype_policy() == *b.policy)) layer.set_dtype_policy(*b.policy);
  if (!b.trainable) layer.set_trainable(false);
}

// ---- the built-in classes ----

std::string padding_of(Reader& r) {
  std::string p = lower(r.string("padding", "valid"));
  if (p != "valid" && p != "same")
    r.fail("padding", "= \"" + p + "\" is not supported (valid, same)");
  return p;
}

const char* image_format_name(const Layer& layer) {
  const auto* f = dynamic_cast<const detail::ImageFormat*>(&layer.impl());
  return data_format_name(f != nullptr && f->data_format().channels_first());
}

Layer with_image_format(Layer layer, bool channels_first) {
  if (auto* f = dynamic_cast<detail::ImageFormat*>(&layer.impl()))
    f->set_data_format(channels_first ? detail::DataFormat::first() : detail::DataFormat());
  return layer;
}

bool read_channels_first(Reader& r) {
  const Config* v = r.find("data_format");
  if (v == nullptr || v->is_null() || *v == "channels_last") return false;
  if (*v == "channels_first") return true;
  r.fail("data_format",
         "= " + r.got(*v) + " is not supported (\"channels_last\", \"channels_first\")");
}

DType dtype_from(Reader& r, const std::string& key, const std::string& name) {
  for (DType d : {float16, bfloat16, float32, float64, int32, int64, uint8, bool_})
    if (dtype_name(d) == name) return d;
  r.fail(key, "= \"" + name + "\" is not a dtype tapeflow has");
}

Config embedding_keys_json(const Layer& layer, const EmbeddingKeys& k) {
  return Config{
      {"input_dim", k.input_dim},
      {"output_dim", k.output_dim},
      {"embeddings_initializer", initializer_json(layer, "embeddings_initializer", k.initializer,
                                                  initializers::RandomUniform(-0.05, 0.05))},
      {"embeddings_regularizer", regularizer_json(layer, "embeddings_regularizer", k.regularizer)},
      {"activity_regularizer", nullptr},
      {"embeddings_constraint", constraint_json(layer, "embeddings_constraint", k.constraint)},
      {"mask_zero", k.mask_zero},
      {"quantization_config", nullptr}};
}

EmbeddingKeys read_embedding_keys(Reader& r) {
  EmbeddingKeys k;
  k.input_dim = r.integer("input_dim");
  k.output_dim = r.integer("output_dim");
  k.initializer = r.initializer("embeddings_initializer");
  k.regularizer = r.regularizer("embeddings_regularizer");
  r.expect_null("activity_regularizer");
  k.constraint = r.constraint("embeddings_constraint");
  k.mask_zero = r.boolean("mask_zero", false);
  r.expect_null("quantization_config");
  return k;
}

}  // namespace internal
namespace {

using namespace internal;
using detail::LayerImpl;
namespace lo = detail::layer_options;

constexpr const char* kFormat = "tapeflow.keras.model";
constexpr const char* kFormatVersion = "1";

Layer dense_from(const Config& config) {
  Reader r("Dense", config);
  Base b = read_base(r);
  const int64_t units = r.integer("units");
  layers::DenseOptions o;
  o.activation = r.activation("activation");
  o.use_bias = r.boolean("use_bias", true);
  o.kernel_initializer = r.initializer("kernel_initializer");
  o.bias_initializer = r.initializer("bias_initializer");
  o.kernel_regularizer = r.regularizer("kernel_regularizer");
  o.bias_regularizer = r.regularizer("bias_regularizer");
  r.expect_null("activity_regularizer");
  o.kernel_constraint = r.constraint("kernel_constraint");
  o.bias_constraint = r.constraint("bias_constraint");
  for (const char* k : {"quantization_config", "lora_rank"}) r.expect_null(k);
  if (r.has("lora_alpha")) r.number("lora_alpha");  // meaningful only with lora_rank
  o.name = b.name;
  r.finish();
  Layer l = layers::Dense(units, o);
  apply_base(l, b);
  return l;
}
Config dense_get(const Layer& layer) {
  auto c = need(lo::dense(layer.impl()), layer);
  const layers::DenseOptions& o = c.options;
  Config out{
      {"units", c.units}, {"activation", activation_json(o.activation)}, {"use_bias", o.use_bias}};
  add_kernel_bias_keys(out, layer, o.kernel_initializer, o.bias_initializer, o.kernel_regularizer,
                       o.bias_regularizer);
  out["kernel_constraint"] = constraint_json(layer, "kernel_constraint", o.kernel_constraint);
  out["bias_constraint"] = constraint_json(layer, "bias_constraint", o.bias_constraint);
  out["quantization_config"] = nullptr;
  return out;
}

template <bool kMax>
Layer pooling_from(const Config& config) {
  Reader r(kMax ? "MaxPooling2D" : "AveragePooling2D", config);
  Base b = read_base(r);
  const Size2 pool = r.size2("pool_size", Size2(2));
  const Config* s = r.find("strides");
  std::optional<Size2> strides;
  if (s != nullptr && !s->is_null()) strides = r.size2("strides");
  const std::string padding = padding_of(r);
  const layers::Pooling2DOptions o{.strides = strides,
                                   .padding = padding,
                                   .data_format = data_format_name(read_channels_first(r)),
                                   .name = b.name};
  r.finish();
  Layer l = kMax ? Layer(layers::MaxPooling2D(pool, o)) : Layer(layers::AveragePooling2D(pool, o));
  apply_base(l, b);
  return l;
}
Config pooling_get(const Layer& layer) {
  auto c = need(lo::pooling2d(layer.impl()), layer);
  return Config{{"pool_size", pair_json(c.pool_size)},
                {"padding", c.same ? "same" : "valid"},
                {"strides", pair_json(c.strides)},
                {"data_format", data_format_name(c.channels_first)}};
}

Layer flatten_from(const Config& config) {
  Reader r("Flatten", config);
  Base b = read_base(r);
  const bool first = read_channels_first(r);
  r.finish();
  Layer l = layers::Flatten({.data_format = data_format_name(first), .name = b.name});
  apply_base(l, b);
  return l;
}
Config flatten_get(const Layer& layer) {
  return Config{
      {"data_format", data_format_name(need(lo::flatten_channels_first(layer.impl()), layer))}};
}

Layer dropout_from(const Config& config) {
  Reader r("Dropout", config);
  Base b = read_base(r);
  const double rate = r.number("rate");
  const auto seed = r.optional_integer("seed");
  r.expect_null("noise_shape");
  r.finish();
  Layer l = layers::Dropout(rate, seed, b.name);
  apply_base(l, b);
  return l;
}
Config dropout_get(const Layer& layer) {
  auto c = need(lo::dropout(layer.impl()), layer);
  return Config{{"rate", c.rate}, {"seed", seed_json(c.seed)}, {"noise_shape", nullptr}};
}

Layer batch_norm_from(const Config& config) {
  Reader r("BatchNormalization", config);
  Base b = read_base(r);
  layers::BatchNormalizationOptions o;
  o.axis = static_cast<int>(r.integer("axis", -1));
  o.momentum = r.number("momentum", 0.99);
  o.epsilon = r.number("epsilon", 1e-3);
  o.center = r.boolean("center", true);
  o.scale = r.boolean("scale", true);
  o.beta_initializer = r.initializer("beta_initializer");
  o.gamma_initializer = r.initializer("gamma_initializer");
  o.moving_mean_initializer = r.initializer("moving_mean_initializer");
  o.moving_variance_initializer = r.initializer("moving_variance_initializer");
  o.beta_regularizer = r.regularizer("beta_regularizer");
  o.gamma_regularizer = r.regularizer("gamma_regularizer");
  o.beta_constraint = r.constraint("beta_constraint");
  o.gamma_constraint = r.constraint("gamma_constraint");
  r.expect("synchronized", false);
  r.expect("renorm", false);
  r.expect_null("renorm_clipping");
  if (r.has("renorm_momentum")) r.number("renorm_momentum");  // unused without renorm
  o.name = b.name;
  r.finish();
  Layer l = layers::BatchNormalization(o);
  apply_base(l, b);
  return l;
}
Config batch_norm_get(const Layer& layer) {
  auto o = need(lo::batch_normalization(layer.impl()), layer);
  return Config{
      {"axis", o.axis},
      {"momentum", o.momentum},
      {"epsilon", o.epsilon},
      {"center", o.center},
      {"scale", o.scale},
      {"beta_initializer",
       initializer_json(layer, "beta_initializer", o.beta_initializer, initializers::Zeros())},
      {"gamma_initializer",
       initializer_json(layer, "gamma_initializer", o.gamma_initializer, initializers::Ones())},
      {"moving_mean_initializer",
       initializer_json(layer, "moving_mean_initializer", o.moving_mean_initializer,
                        initializers::Zeros())},
      {"moving_variance_initializer",
       initializer_json(layer, "moving_variance_initializer", o.moving_variance_initializer,
                        initializers::Ones())},
      {"beta_regularizer", regularizer_json(layer, "beta_regularizer", o.beta_regularizer)},
      {"gamma_regularizer", regularizer_json(layer, "gamma_regularizer", o.gamma_regularizer)},
      {"beta_constraint", constraint_json(layer, "beta_constraint", o.beta_constraint)},
      {"gamma_constraint", constraint_json(layer, "gamma_constraint", o.gamma_constraint)},
      {"synchronized", false},
      {"renorm", false},
      {"renorm_clipping", nullptr},
      {"renorm_momentum", 0.99}};
}

Layer relu_from(const Config& config) {
  Reader r("ReLU", config);
  Base b = read_base(r);
  const auto max_value = r.optional_number("max_value");
  const double slope = r.number("negative_slope", 0.0);
  const double threshold = r.number("threshold", 0.0);
  r.finish();
  Layer l = layers::ReLU(max_value, slope, threshold, b.name);
  apply_base(l, b);
  return l;
}
Config relu_get(const Layer& layer) {
  auto c = need(lo::relu(layer.impl()), layer);
  return Config{{"max_value", c.max_value ? Config(*c.max_value) : Config(nullptr)},
                {"negative_slope", c.negative_slope},
                {"threshold", c.threshold}};
}

Layer softmax_from(const Config& config) {
  Reader r("Softmax", config);
  Base b = read_base(r);
  const auto axes = r.int_list("axis");
  if (axes.size() != 1) r.fail("axis", "must name one axis in tapeflow");
  r.finish();
  Layer l = layers::Softmax(static_cast<int>(axes[0]), b.name);
  apply_base(l, b);
  return l;
}
Config softmax_get(const Layer& layer) {
  return Config{{"axis", need(lo::softmax_axis(layer.impl()), layer)}};
}

Layer activation_from(const Config& config) {
  Reader r("Activation", config);
  Base b = read_base(r);
  if (!r.has("activation")) r.fail("activation", "is required");
  const std::string a = r.activation("activation");
  r.finish();
  Layer l = layers::Activation(a, b.name);
  apply_base(l, b);
  return l;
}
Config activation_get(const Layer& layer) {
  return Config{{"activation", activation_json(need(lo::activation(layer.impl()), layer))}};
}

Layer embedding_from(const Config& config) {
  Reader r("Embedding", config);
  Base b = read_base(r);
  const EmbeddingKeys k = read_embedding_keys(r);
  layers::EmbeddingOptions o;
  o.embeddings_initializer = k.initializer;
  o.embeddings_regularizer = k.regularizer;
  o.embeddings_constraint = k.constraint;
  o.mask_zero = k.mask_zero;
  r.expect_null("lora_rank");
  if (r.has("lora_alpha")) r.number("lora_alpha");
  if (r.has("weights")) r.expect_null("weights");
  o.name = b.name;
  r.finish();
  Layer l = layers::Embedding(k.input_dim, k.output_dim, o);
  apply_base(l, b);
  return l;
}
Config embedding_get(const Layer& layer) {
  auto c = need(lo::embedding(layer.impl()), layer);
  return embedding_keys_json(
      layer, {c.input_dim, c.output_dim, c.initializer, c.regularizer, c.mask_zero, c.constraint});
}

Layer layer_norm_from(const Config& config) {
  Reader r("LayerNormalization", config);
  Base b = read_base(r);
  layers::LayerNormalizationOptions o;
  o.axis.clear();
  for (int64_t a : r.has("axis") ? r.int_list("axis") : std::vector<int64_t>{-1})
    o.axis.push_back(static_cast<int>(a));
  o.epsilon = r.number("epsilon", 1e-3);
  o.center = r.boolean("center", true);
  o.scale = r.boolean("scale", true);
  r.expect("rms_scaling", false);
  o.beta_initializer = r.initializer("beta_initializer");
  o.gamma_initializer = r.initializer("gamma_initializer");
  o.beta_regularizer = r.regularizer("beta_regularizer");
  o.gamma_regularizer = r.regularizer("gamma_regularizer");
  o.beta_constraint = r.constraint("beta_constraint");
  o.gamma_constraint = r.constraint("gamma_constraint");
  o.name = b.name;
  r.finish();
  Layer l = layers::LayerNormalization(o);
  apply_base(l, b);
  return l;
}
Config layer_norm_get(const Layer& layer) {
  auto o = need(lo::layer_normalization(layer.impl()), layer);
  // Keras keeps an int axis until the build, which turns it into a list.
  Config axis = o.axis.size() == 1 && !layer.built() ? Config(o.axis[0]) : Config(o.axis);
  Config c{{"axis", axis},
           {"epsilon", o.epsilon},
           {"center", o.center},
           {"scale", o.scale},
           {"rms_scaling", false}};
  add_beta_gamma(c, layer, o);
  return c;
}

Layer reshape_from(const Config& config) {
  Reader r("Reshape", config);
  Base b = read_base(r);
  const auto target = r.int_list("target_shape");
  r.finish();
  Layer l = layers::Reshape(target, b.name);
  apply_base(l, b);
  return l;
}
Config reshape_get(const Layer& layer) {
  return Config{{"target_shape", need(lo::reshape_target(layer.impl()), layer)}};
}

template <class M>
FromConfig merge_from(const char* cls) {
  return [cls](const Config& config) -> Layer {
    Reader r(cls, config);
    Base b = read_base(r);
    r.finish();
    Layer l = M(b.name);
    apply_base(l, b);
    return l;
  };
}
Config no_keys(const Layer&) {
  return Config::object();
}

Layer concatenate_from(const Config& config) {
  Reader r("Concatenate", config);
  Base b = read_base(r);
  const int64_t axis = r.integer("axis", -1);
  r.finish();
  Layer l = layers::Concatenate(static_cast<int>(axis), b.name);
  apply_base(l, b);
  return l;
}
Config concatenate_get(const Layer& layer) {
  return Config{{"axis", need(lo::concatenate_axis(layer.impl()), layer)}};
}

// Keras' Dot keeps axes as given: one int for both inputs, or a pair.
Layer dot_from(const Config& config) {
  Reader r("Dot", config);
  Base b = read_base(r);
  const Config& axes = r.require("axes");
  std::pair<int, int> a;
  if (axes.is_number_integer()) {
    a = {axes.get<int>(), axes.get<int>()};
  } else if (axes.is_array() && axes.size() == 2 && axes[0].is_number_integer() &&
             axes[1].is_number_integer()) {
    a = {axes[0].get<int>(), axes[1].get<int>()};
  } else {
    r.fail("axes", "must be an integer or a list of 2 integers, got " + r.got(axes));
  }
  const bool normalize = r.boolean("normalize", false);
  r.finish();
  Layer l = layers::Dot(a, normalize, b.name);
  apply_base(l, b);
  return l;
}
Config dot_get(const Layer& layer) {
  const lo::DotConfig c = need(lo::dot(layer.impl()), layer);
  const Config axes = c.axes.first == c.axes.second ? Config(c.axes.first)
                                                    : Config::array({c.axes.first, c.axes.second});
  return Config{{"axes", axes}, {"normalize", c.normalize}};
}

// ---- the registry ----

std::mutex& registry_mu() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> r = [] {
    std::map<std::string, Entry> m;
    auto add = [&m](const char* name, GetConfig get, FromConfig from) {
      m[name] = Entry{std::move(get), std::move(from), true};
    };
    add("Dense", dense_get, dense_from);
    add("MaxPooling2D", pooling_get, pooling_from<true>);
    add("AveragePooling2D", pooling_get, pooling_from<false>);
    add("Flatten", flatten_get, flatten_from);
    add("Dropout", dropout_get, dropout_from);
    add("BatchNormalization", batch_norm_get, batch_norm_from);
    add("ReLU", relu_get, relu_from);
    add("Softmax", softmax_get, softmax_from);
    add("Activation", activation_get, activation_from);
    add("Embedding", embedding_get, embedding_from);
    add("LayerNormalization", layer_norm_get, layer_norm_from);
    add("Reshape", reshape_get, reshape_from);
    add("Add", no_keys, merge_from<layers::Add>("Add"));
    add("Subtract", no_keys, merge_from<layers::Subtract>("Subtract"));
    add("Multiply", no_keys, merge_from<layers::Multiply>("Multiply"));
    add("Average", no_keys, merge_from<layers::Average>("Average"));
    add("Maximum", no_keys, merge_from<layers::Maximum>("Maximum"));
    add("Minimum", no_keys, merge_from<layers::Minimum>("Minimum"));
    add("Concatenate", concatenate_get, concatenate_from);
    add("Dot", dot_get, dot_from);
    add_conv_layers(m);
    add_sequence_layers(m);
    add_core_layers(m);
    add_augment_layers(m);
    add_audio_layers(m);
    return m;
  }();
  return r;
}
std::optional<Entry> lookup(const std::string& class_name) {
  std::lock_guard lock(registry_mu());
  auto it = registry().find(class_name);
  if (it == registry().end()) return std::nullopt;
  return it->second;
}

// ---- models ----

const detail::FunctionalImpl* functional_of(const Layer& layer) {
  return dynamic_cast<const detail::FunctionalImpl*>(&layer.impl());
}
bool is_sequential(const Layer& layer) {
  return layer.class_name() == "Sequential" &&
         dynamic_cast<const detail::ModelImpl*>(&layer.impl());
}

Config build_config_of(const Layer& layer) {
  // Keras writes it for the layers that make weights (their own, or a wrapper's inner ones).
  if (!layer.built() || layer.weights().empty()) return nullptr;
  if (Config c = keras_build_config(layer, layer.input_shape()); !c.is_null()) return c;
  return Config{{"input_shape", shape_json(layer.input_shape())}};
}

Config sequential_config(const Layer& model) {
  Config layers_json = Config::array();
  const bool built = model.built();
  if (built) {
    // Keras writes the InputLayer of a Sequential made with an input shape first.
    layers_json.push_back(Config{{"module", "keras.layers"},
                                 {"class_name", "InputLayer"},
                                 {"config",
                                  {{"batch_shape", shape_json(model.input_shape())},
                                   {"dtype", std::string(dtype_name(model.dtype()))},
                                   {"sparse", false},
                                   {"ragged", false},
                                   {"name", "input_layer"},
                                   {"optional", false}}},
                                 {"registered_name", nullptr}});
  }
  for (const Layer& l : model.impl().sublayers()) layers_json.push_back(serialize(l));
  Config c = base_config(model);
  c["layers"] = layers_json;
  if (built) c["build_input_shape"] = shape_json(model.input_shape());
  return c;
}

Config keras_tensor_json(const KerasTensor& t, const std::map<const void*, int>& local_index) {
  const auto& node = t.data()->node;
  auto it = local_index.find(node.get());
  return Config{{"class_name", "__keras_tensor__"},
                {"config",
                 {{"shape", shape_json(t.shape())},
                  {"dtype", std::string(dtype_name(t.dtype()))},
                  {"keras_history",
                   Config::array({node->layer.name(), it == local_index.end() ? 0 : it->second,
                                  t.data()->tensor_index})}}}};
}

// Keras' return_state=True in a recurrent layer's config (a Bidirectional's wrapped layers').
void set_return_state(Config& entry) {
  Config& c = entry["config"];
  if (entry.value("class_name", "") != "Bidirectional") {
    c["return_state"] = true;
    return;
  }
  for (const char* key : {"layer", "backward_layer"})
    if (c.contains(key) && c[key].is_object() && c[key].contains("config"))
      c[key]["config"]["return_state"] = true;
}
// Whether a layer's config says return_state=True (a Bidirectional's: its wrapped layer's);
// the flag is cleared, as tapeflow's layers take it per call (call_with_state).
bool take_return_state(Config& entry) {
  auto take = [](Config& object) {
    if (!object.is_object() || !object.contains("config") || !object["config"].is_object())
      return false;
    Config& c = object["config"];
    if (!c.contains("return_state") || c["return_state"] != true) return false;
    c["return_state"] = false;
    return true;
  };
  const std::string cls = entry.value("class_name", "");
  if (cls == "SimpleRNN" || cls == "LSTM" || cls == "GRU") return take(entry);
  if (cls != "Bidirectional" || !entry.contains("config") || !entry["config"].is_object())
    return false;
  Config& c = entry["config"];
  bool r = c.contains("layer") && take(c["layer"]);
  if (c.contains("backward_layer")) r = take(c["backward_layer"]) || r;
  return r;
}
// Keras' build_config of an attention layer called on a query, a value and maybe a key.
Config attention_build_config(const Layer& layer, const std::vector<KerasTensor>& inputs) {
  if (keras_call_form(layer) == 1) {
    Config shapes = Config::array();
    for (const KerasTensor& t : inputs) shapes.push_back(shape_json(t.shape()));
    return Config{{"input_shape", shapes}};
  }
  Config d{{"query_shape", shape_json(inputs[0].shape())},
           {"value_shape", shape_json(inputs[1].shape())}};
  if (inputs.size() > 2) d["key_shape"] = shape_json(inputs[2].shape());
  return Config{{"shapes_dict", d}};
}

Config functional_config(const Layer& model, const detail::FunctionalImpl& f) {
  // The model's nodes: everything between its inputs and its outputs.
  std::vector<const detail::KerasNode*> nodes;
  std::set<const detail::KerasNode*> seen;
  std::vector<KerasTensor> stack(f.outputs().begin(), f.outputs().end());
  while (!stack.empty()) {
    KerasTensor t = stack.back();
    stack.pop_back();
    const detail::KerasNode* n = t.data()->node.get();
    if (!seen.insert(n).second) continue;
    nodes.push_back(n);
    bool is_model_input = false;
    for (const KerasTensor& in : f.inputs()) is_model_input |= in.data() == t.data();
    if (is_model_input) continue;
    for (const KerasTensor& in : n->inputs) stack.push_back(in);
  }
  for (const KerasTensor& in : f.inputs())
    if (seen.insert(in.data()->node.get()).second) nodes.push_back(in.data()->node.get());
  // Keras numbers a layer's nodes within the model from 0, in call order.
  std::sort(nodes.begin(), nodes.end(),
            [](const auto* a, const auto* b) { return a->node_index < b->node_index; });
  std::map<const void*, int> local_index;
  std::map<const void*, int> per_layer;
  for (const detail::KerasNode* n : nodes) local_index[n] = per_layer[n->layer.id()]++;

  Config layers_json = Config::array();
  for (const Layer& l : f.sublayers()) {
    Config entry;
    if (l.class_name() == "InputLayer") {
      const KerasTensor* t = nullptr;
      for (const KerasTensor& in : f.inputs())
        if (in.layer().id() == l.id()) t = &in;
      TF_CHECK_T(InternalError, t != nullptr, "to_json", "input layer \"{}\" without its input",
                 l.name());
      entry = Config{{"module", "keras.layers"},
                     {"class_name", "InputLayer"},
                     {"config",
                      {{"batch_shape", shape_json(t->shape())},
                       {"dtype", std::string(dtype_name(t->dtype()))},
                       {"sparse", false},
                       {"ragged", false},
                       {"name", l.name()},
                       {"optional", false}}},
                     {"registered_name", nullptr}};
      entry["name"] = l.name();
      entry["inbound_nodes"] = Config::array();
      layers_json.push_back(entry);
      continue;
    }
    entry = serialize(l);
    entry["name"] = l.name();
    Config inbound = Config::array();
    std::vector<const detail::KerasNode*> mine;
    for (const detail::KerasNode* n : nodes)
      if (n->layer.id() == l.id()) mine.push_back(n);
    bool return_state = false;
    for (const detail::KerasNode* n : mine) {
      Config args = Config::array();
      Config kwargs = Config::object();
      if (n->multi != nullptr && n->multi->kind == detail::MultiCall::Kind::recurrent) {
        // Keras: layer(x, initial_state=[...]), return_state in the layer's config.
        args.push_back(keras_tensor_json(n->inputs[0], local_index));
        if (n->inputs.size() > 1) {
          Config states = Config::array();
          for (size_t i = 1; i < n->inputs.size(); ++i)
            states.push_back(keras_tensor_json(n->inputs[i], local_index));
          kwargs["initial_state"] = states;
        }
        return_state |= n->multi->return_state;
      } else if (n->multi != nullptr) {
        // Keras: mha(query, value[, key], attention_mask=...) or att([query, value[, key]]).
        Config list = Config::array();
        const size_t tensors = n->inputs.size() - (n->multi->has_attention_mask ? 1 : 0);
        for (size_t i = 0; i < tensors; ++i)
          list.push_back(keras_tensor_json(n->inputs[i], local_index));
        args = keras_call_form(l) == 1 ? Config::array({list}) : list;
        if (n->multi->has_attention_mask)
          kwargs["attention_mask"] = keras_tensor_json(n->inputs.back(), local_index);
        if (n->multi->return_scores) kwargs["return_attention_scores"] = true;
        if (n->multi->use_causal_mask) kwargs["use_causal_mask"] = true;
      } else if (n->list_call) {
        Config list = Config::array();
        for (const KerasTensor& in : n->inputs) list.push_back(keras_tensor_json(in, local_index));
        args.push_back(list);
      } else {
        for (const KerasTensor& in : n->inputs) args.push_back(keras_tensor_json(in, local_index));
        args = keras_call_args(l, args);
      }
      if (n->training) kwargs["training"] = *n->training;
      inbound.push_back(Config{{"args", args}, {"kwargs", kwargs}});
    }
    entry["inbound_nodes"] = inbound;
    if (return_state) set_return_state(entry);
    // Keras builds an attention layer for its first call's query, value and key shapes.
    if (!mine.empty() && mine[0]->multi != nullptr &&
        mine[0]->multi->kind == detail::MultiCall::Kind::attention &&
        entry.contains("build_config"))
      entry["build_config"] = attention_build_config(
          l, {mine[0]->inputs.begin(),
              mine[0]->inputs.begin() + 2 + (mine[0]->multi->has_key ? 1 : 0)});
    layers_json.push_back(entry);
  }
  auto refs = [&](const std::vector<KerasTensor>& ts) {
    Config out = Config::array();
    for (const KerasTensor& t : ts)
      out.push_back(Config::array(
          {t.data()->node->layer.name(), local_index.at(t.data()->node.get()), t.tensor_index()}));
    return out.size() == 1 ? out[0] : out;
  };
  Config c{{"name", model.name()}, {"trainable", model.trainable()}};
  c["layers"] = layers_json;
  c["input_layers"] = refs(f.inputs());
  c["output_layers"] = refs(f.outputs());
  return c;
}

// A shape from a JSON list with nulls (None).
TensorShape shape_from(Reader& r, const std::string& key, const Config& v) {
  if (!v.is_array()) r.fail(key, "must be a list, got " + r.got(v));
  std::vector<int64_t> dims;
  for (const Config& d : v) {
    if (d.is_null())
      dims.push_back(None);
    else if (d.is_number_integer() && d.get<int64_t>() >= 0)
      dims.push_back(d.get<int64_t>());
    else
      r.fail(key, "must hold sizes or null, got " + r.got(v));
  }
  return TensorShape(dims);
}

struct InputSpec {
  TensorShape batch_shape;
  DType dtype = float32;
  std::string name;
};
InputSpec input_layer_from(const Config& config) {
  Reader r("InputLayer", config);
  InputSpec s;
  s.name = r.string("name", "");
  const Config* bs = r.find("batch_shape");
  if (bs == nullptr) {
    // Older Keras writes batch_input_shape.
    bs = r.find("batch_input_shape");
  }
  if (bs == nullptr) r.fail("batch_shape", "is required");
  s.batch_shape = shape_from(r, "batch_shape", *bs);
  if (s.batch_shape.rank() < 1) r.fail("batch_shape", "needs a batch dimension");
  const Config* d = r.find("dtype");
  if (d != nullptr && !d->is_null()) {
    if (!d->is_string()) r.fail("dtype", "must be a dtype name, got " + r.got(*d));
    s.dtype = dtype_from(r, "dtype", d->get<std::string>());
  }
  r.expect("sparse", false);
  r.expect("ragged", false);
  r.expect("optional", false);
  r.finish();
  return s;
}

// The top-level keys of a serialized object (outside "config").
void check_object_keys(const Config& object, const std::string& cls,
                       std::initializer_list<const char*> extra) {
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string& k = it.key();
    bool ok = k == "module" || k == "class_name" || k == "config" || k == "registered_name" ||
              k == "build_config";
    for (const char* e : extra) ok |= k == e;
    TF_CHECK_ARG(ok, "deserialize", "{} object key \"{}\" is not supported by tapeflow", cls, k);
  }
}

Model sequential_from(const Config& config, const Config& object) {
  Reader r("Sequential", config);
  Base b = read_base(r);
  const Config& list = r.require("layers");
  if (!list.is_array()) r.fail("layers", "must be a list");
  std::optional<TensorShape> input_shape;
  std::vector<Layer> layers_list;
  for (const Config& item : list) {
    TF_CHECK_ARG(item.is_object(), "deserialize", "Sequential layers entry is not an object: {}",
                 item.dump().substr(0, 80));
    if (item.value("class_name", "") == "InputLayer") {
      input_shape = input_layer_from(item.value("config", Config::object())).batch_shape;
      continue;
    }
    layers_list.push_back(deserialize(item));
  }
  if (const Config* bis = r.find("build_input_shape"); bis != nullptr && !bis->is_null())
    if (!input_shape) input_shape = shape_from(r, "build_input_shape", *bis);
  r.finish();
  if (!input_shape && object.contains("build_config") && object["build_config"].is_object()) {
    const Config& bc = object["build_config"];
    if (bc.contains("input_shape") && !bc["input_shape"].is_null()) {
      Reader br("Sequential build_config", bc);
      input_shape = shape_from(br, "input_shape", bc["input_shape"]);
    }
  }
  Sequential model(layers_list, b.name);
  if (b.policy) model.set_dtype_policy(*b.policy);
  if (input_shape) model.build(*input_shape);
  if (!b.trainable) model.set_trainable(false);
  return model;
}

// A keras_history reference [layer name, node index, tensor index].
struct Ref {
  std::string layer;
  int node = 0;
  int tensor = 0;
};
Ref ref_from(const std::string& where, const Config& v) {
  TF_CHECK_ARG(v.is_array() && v.size() == 3 && v[0].is_string() && v[1].is_number_integer() &&
                   v[2].is_number_integer(),
               "deserialize", "{}: expected [layer name, node index, tensor index], got {}", where,
               v.dump().substr(0, 80));
  TF_CHECK_ARG(v[1].get<int64_t>() >= 0 && v[2].get<int64_t>() >= 0, "deserialize",
               "{}: negative node or tensor index in {}", where, v.dump());
  return Ref{v[0].get<std::string>(), static_cast<int>(v[1].get<int64_t>()),
             static_cast<int>(v[2].get<int64_t>())};
}
std::vector<Ref> refs_from(const std::string& where, const Config& v) {
  TF_CHECK_ARG(v.is_array() && !v.empty(), "deserialize", "{} must be a non-empty list", where);
  if (v[0].is_string()) return {ref_from(where, v)};
  std::vector<Ref> out;
  for (const Config& e : v) out.push_back(ref_from(where, e));
  return out;
}

Model functional_from(const Config& config) {
  Reader r("Functional", config);
  const std::string name = r.string("name", "");
  const bool trainable = r.boolean("trainable", true);
  r.expect_null("dtype");  // Keras writes none for functional models
  const Config& list = r.require("layers");
  const Config& input_refs = r.require("input_layers");
  const Config& output_refs = r.require("output_layers");
  r.finish();
  TF_CHECK_ARG(list.is_array(), "deserialize", "Functional config key \"layers\" must be a list");

  struct Pending {
    Layer layer;
    std::string name;
    std::vector<Config> nodes;
    size_t next = 0;
    bool return_state = false;  // Keras' return_state=True: every call returns the states
  };
  // Per layer, per node, the node's outputs.
  std::map<std::string, std::vector<std::vector<KerasTensor>>> outputs;
  std::vector<Pending> pending;
  // Keras writes the masks of Embedding(mask_zero=True) and Masking explicitly: operations
  // (NotEqual: ids != 0; Masking's any(x != mask_value, axis=-1): NotEqual, then Any) passed as
  // the `mask` argument of the layers after them. tapeflow's layers carry Keras masks along the
  // graph themselves (the same mask reaches the same calls), so these operations are not made
  // and those arguments are dropped.
  std::set<std::string> mask_ops;
  for (const Config& item : list) {
    TF_CHECK_ARG(item.is_object() && item.contains("class_name"), "deserialize",
                 "Functional layers entry is not a Keras object: {}", item.dump().substr(0, 80));
    const std::string cls =
        item["class_name"].is_string() ? item["class_name"].get<std::string>() : "";
    if (cls == "InputLayer") {
      check_object_keys(item, cls, {"name", "inbound_nodes"});
      InputSpec s = input_layer_from(item.value("config", Config::object()));
      std::vector<int64_t> dims;
      for (int i = 1; i < s.batch_shape.rank(); ++i) dims.push_back(s.batch_shape[i]);
      std::optional<int64_t> batch;
      if (s.batch_shape[0] != None) batch = s.batch_shape[0];
      outputs[s.name].push_back({Input(dims, s.dtype, s.name, batch)});
      continue;
    }
    if ((cls == "NotEqual" || cls == "Any") && item.value("module", "") == "keras.src.ops.numpy") {
      const std::string op = item.value("name", "");
      const Config config = item.value("config", Config::object());
      const Config nodes = item.value("inbound_nodes", Config::array());
      for (const Config& node : nodes) {
        const Config args = node.value("args", Config::array());
        bool ok = false;
        if (cls == "NotEqual") {
          ok = args.is_array() && args.size() == 2 && args[1].is_number();
        } else {
          // Masking's any over the features, of a mask operation's output.
          ok = args.is_array() && args.size() == 1 && args[0].is_object() &&
               args[0].contains("config") && args[0]["config"].contains("keras_history") &&
               mask_ops.count(ref_from(op, args[0]["config"]["keras_history"]).layer) > 0 &&
               config.value("axis", Config()) == -1 && config.value("keepdims", true) == false;
        }
        TF_CHECK_ARG(ok, "deserialize",
                     "operation \"{}\" ({}): tapeflow reads Keras' mask operations alone (x != "
                     "value, and any(..., axis=-1) of it), got arguments {} and config {}",
                     op, cls, args.dump().substr(0, 120), config.dump().substr(0, 80));
      }
      mask_ops.insert(op);
      continue;
    }
    Config stripped = item;
    Config inbound = stripped.contains("inbound_nodes") ? stripped["inbound_nodes"] : Config();
    stripped.erase("inbound_nodes");
    stripped.erase("name");
    Pending p;
    p.return_state = take_return_state(stripped);
    p.layer = deserialize(stripped);
    p.name = p.layer.name();
    TF_CHECK_ARG(inbound.is_array(), "deserialize", "layer \"{}\": inbound_nodes must be a list",
                 p.name);
    for (const Config& n : inbound) p.nodes.push_back(n);
    pending.push_back(std::move(p));
  }
  auto tensor_of = [&](const std::string& where, const Config& t) -> std::optional<KerasTensor> {
    TF_CHECK_ARG(t.is_object() && t.value("class_name", "") == "__keras_tensor__" &&
                     t.contains("config") && t["config"].contains("keras_history"),
                 "deserialize", "{}: expected a __keras_tensor__, got {}", where,
                 t.dump().substr(0, 80));
    Ref ref = ref_from(where, t["config"]["keras_history"]);
    TF_CHECK_ARG(mask_ops.count(ref.layer) == 0, "deserialize",
                 "{}: takes the output of Keras' mask operation \"{}\", which tapeflow reads "
                 "only as a mask argument",
                 where, ref.layer);
    auto it = outputs.find(ref.layer);
    if (it == outputs.end() || ref.node >= static_cast<int>(it->second.size())) return std::nullopt;
    const std::vector<KerasTensor>& made = it->second[ref.node];
    TF_CHECK_ARG(ref.tensor < static_cast<int>(made.size()), "deserialize",
                 "{}: takes output {} of layer \"{}\" node {}, which has {} output{}", where,
                 ref.tensor, ref.layer, ref.node, made.size(), made.size() == 1 ? "" : "s");
    return made[ref.tensor];
  };
  // Calls each layer's nodes in order once their inputs exist (Keras' deserialization order).
  for (bool progress = true; progress;) {
    progress = false;
    for (Pending& p : pending) {
      while (p.next < p.nodes.size()) {
        const Config& node = p.nodes[p.next];
        const std::string where = fmt::format("layer \"{}\" node {}", p.name, p.next);
        TF_CHECK_ARG(node.is_object() && node.contains("args") && node["args"].is_array() &&
                         !node["args"].empty(),
                     "deserialize", "{}: expected {{\"args\": [inputs], \"kwargs\": {{...}}}}",
                     where);
        const int form = keras_call_form(p.layer);
        std::optional<bool> training;
        bool scores = false, causal = false;
        const Config* initial = nullptr;
        const Config* attention_mask = nullptr;
        if (node.contains("kwargs")) {
          const Config& kw = node["kwargs"];
          TF_CHECK_ARG(kw.is_object(), "deserialize", "{}: kwargs must be an object", where);
          for (auto it = kw.begin(); it != kw.end(); ++it) {
            const std::string& k = it.key();
            const Config& v = it.value();
            if (k == "training" && v.is_boolean()) {
              training = v.get<bool>();
            } else if (k == "mask" && v.is_null()) {
            } else if (k == "mask" && v.is_object() && v.contains("config") &&
                       v["config"].contains("keras_history") &&
                       mask_ops.count(ref_from(where, v["config"]["keras_history"]).layer) > 0) {
            } else if (form != 0 && k == "return_attention_scores" && v.is_boolean()) {
              scores = v.get<bool>();
            } else if (form != 0 && k == "use_causal_mask" && v.is_boolean()) {
              causal = v.get<bool>();
            } else if (form == 2 && k == "attention_mask" && v.is_object()) {
              attention_mask = &v;
            } else if (form == 2 && k == "attention_mask" && v.is_null()) {
            } else if (form == 0 && k == "initial_state" && v.is_array()) {
              initial = &v;
            } else if (form == 0 && k == "initial_state" && v.is_null()) {
            } else {
              TF_THROW(InvalidArgumentError, "deserialize",
                       "{}: call argument \"{}\" = {} is not supported by tapeflow", where, k,
                       v.dump().substr(0, 80));
            }
          }
        }
        // The tensors: one argument, a list of them (merge layers, Attention), or the positional
        // query, value and key of a MultiHeadAttention.
        const Config& args = node["args"];
        const bool list_call = args.size() == 1 && args[0].is_array();
        TF_CHECK_ARG(args.size() == 1 || (form == 2 && args.size() <= 3), "deserialize",
                     "{}: {} positional arguments, tapeflow's {} takes one", where, args.size(),
                     p.layer.class_name());
        const Config& tensors = list_call ? args[0] : args;
        // The node's tensors, once every layer making them has been called.
        auto take = [&](const Config& list, std::vector<KerasTensor>& out) {
          for (const Config& t : list) {
            auto kt = tensor_of(where, t);
            if (!kt) return false;
            out.push_back(*kt);
          }
          return true;
        };
        std::vector<KerasTensor> ins, states, mask;
        if (!take(tensors, ins) || (initial != nullptr && !take(*initial, states)) ||
            (attention_mask != nullptr && !take(Config::array({*attention_mask}), mask)))
          break;
        const KerasTensor mask_tensor = mask.empty() ? KerasTensor() : mask[0];
        std::vector<KerasTensor> made;
        const bool self_attention =
            std::all_of(ins.begin(), ins.end(),
                        [&](const KerasTensor& t) { return t.data() == ins[0].data(); }) &&
            !scores && !causal && !mask_tensor.defined();
        if (form != 0 && !self_attention) {
          TF_CHECK_ARG(ins.size() == 2 || ins.size() == 3, "deserialize",
                       "{}: {} takes a query, a value and a key, got {} tensors", where,
                       p.layer.class_name(), ins.size());
          const auto symbolic = lo::group_query_attention(p.layer.impl())
                                    ? detail::call_gqa_symbolic
                                    : detail::call_attention_symbolic;
          made = symbolic(p.layer, ins[0], ins[1], ins.size() > 2 ? ins[2] : KerasTensor(),
                          mask_tensor, causal, scores, training);
        } else if (form != 0) {
          made = {detail::call_symbolic(p.layer, {ins[0]}, false, training)};
        } else if (p.return_state || !states.empty()) {
          TF_CHECK_ARG(!list_call && ins.size() == 1, "deserialize",
                       "{}: a recurrent layer takes one input, got {}", where, args.dump());
          made =
              detail::call_with_state_symbolic(p.layer, ins[0], states, p.return_state, training);
        } else {
          made = {detail::call_symbolic(p.layer, ins, list_call, training)};
        }
        outputs[p.name].push_back(std::move(made));
        ++p.next;
        progress = true;
      }
    }
  }
  for (const Pending& p : pending)
    TF_CHECK_ARG(p.next == p.nodes.size(), "deserialize",
                 "layer \"{}\" node {} takes a tensor that no layer of the config produces", p.name,
                 p.next);
  auto resolve = [&](const char* key, const Config& v) {
    std::vector<KerasTensor> out;
    for (const Ref& ref : refs_from(fmt::format("Functional {}", key), v)) {
      auto it = outputs.find(ref.layer);
      TF_CHECK_ARG(it != outputs.end() && ref.node < static_cast<int>(it->second.size()) &&
                       ref.tensor < static_cast<int>(it->second[ref.node].size()),
                   "deserialize",
                   "Functional {} names output {} of node {} of layer \"{}\", which the config "
                   "does not have",
                   key, ref.tensor, ref.node, ref.layer);
      out.push_back(it->second[ref.node][ref.tensor]);
    }
    return out;
  };
  Model model(resolve("input_layers", input_refs), resolve("output_layers", output_refs), name);
  if (!trainable) model.set_trainable(false);
  return model;
}

}  // namespace

// Names of the weights in a saved model, Keras' .weights.h5 paths.
void internal::collect_weights(const Layer& layer, const std::string& prefix, WeightList& out) {
  if (auto entry = lookup(layer.class_name()); entry && entry->weights)
    if (entry->weights(layer, prefix, out)) return;
  own_weights(layer, prefix, out);
  for (const Layer& sub : layer.impl().sublayers())
    collect_weights(sub, prefix + "layers/" + sub.name() + "/", out);
}
void internal::own_weights(const Layer& layer, const std::string& prefix, WeightList& out) {
  const auto& own = layer.impl().own_weights();
  for (size_t i = 0; i < own.size(); ++i)
    out.emplace_back(fmt::format("{}vars/{}", prefix, i), own[i].variable);
}

void register_layer(const std::string& class_name, FromConfig from_config, GetConfig get_config) {
  TF_CHECK_ARG(!class_name.empty(), "register_layer", "the class name is empty");
  TF_CHECK_ARG(static_cast<bool>(from_config), "register_layer",
               "class \"{}\": from_config is empty", class_name);
  TF_CHECK_ARG(class_name != "Sequential" && class_name != "Functional" && class_name != "Model" &&
                   class_name != "InputLayer",
               "register_layer", "\"{}\" is a built-in model class", class_name);
  std::lock_guard lock(registry_mu());
  auto it = registry().find(class_name);
  TF_CHECK_ARG(it == registry().end() || !it->second.builtin, "register_layer",
               "\"{}\" is a built-in layer class, serialized by tapeflow itself", class_name);
  registry()[class_name] = Entry{std::move(get_config), std::move(from_config), false};
}

bool is_registered(const std::string& class_name) {
  return class_name == "Sequential" || class_name == "Functional" || class_name == "Model" ||
         class_name == "InputLayer" || lookup(class_name).has_value();
}

Config get_config(const Layer& layer) {
  TF_CHECK_ARG(layer.defined(), "get_config", "the layer handle is empty");
  if (const auto* f = functional_of(layer)) return functional_config(layer, *f);
  if (is_sequential(layer)) return sequential_config(layer);
  const std::string cls = layer.class_name();
  auto entry = lookup(cls);
  TF_CHECK_T(UnimplementedError, entry && entry->get, "get_config",
             "{} has no config writer: register one with tf::keras::saving::register_layer(\"{}\", "
             "from_config, get_config)",
             who(layer), cls);
  Config c = base_config(layer);
  Config extra = entry->get(layer);
  TF_CHECK_ARG(extra.is_object(), "get_config", "{}: get_config returned {}, not an object",
               who(layer), extra.type_name());
  // A built-in writer that writes "name" gives the whole config, in Keras' order.
  if (entry->builtin && extra.contains("name")) return extra;
  for (auto it = extra.begin(); it != extra.end(); ++it) c[it.key()] = it.value();
  return c;
}

Layer from_config(const std::string& class_name, const Config& config) {
  if (class_name == "Sequential") return sequential_from(config, Config::object());
  if (class_name == "Functional" || class_name == "Model") return functional_from(config);
  auto entry = lookup(class_name);
  TF_CHECK_ARG(entry.has_value(), "deserialize",
               "unknown layer class \"{}\" (the classes tapeflow reads are listed in "
               "keras/serialization.h and docs/keras.md, \"Saving whole models\"); register a "
               "custom class with tf::keras::saving::register_layer(\"{}\", from_config)",
               class_name, class_name);
  Layer l;
  try {
    l = entry->from(config);
  } catch (const Error& e) {
    // A nested layer's error (a Pipeline's, a Bidirectional's) says which container read it.
    if (std::string_view(e.what()).find(class_name) != std::string_view::npos) throw;
    ::tapeflow::detail::rethrow_named(class_name, e);
  }
  TF_CHECK_ARG(l.defined(), "deserialize", "from_config of class \"{}\" returned an empty handle",
               class_name);
  if (!entry->builtin && config.is_object()) {
    // A custom factory reads its own keys; the base keys are applied here.
    Reader r(class_name, config);
    Base b = read_base(r);
    apply_base(l, b);
  }
  return l;
}

namespace {
// The class name Keras' configs give where it differs from the class's own (the one its summary
// shows): Keras 3.15 exports GroupedQueryAttention under both names and writes the shorter.
std::string config_class_name(const std::string& cls) {
  return cls == "GroupedQueryAttention" ? "GroupQueryAttention" : cls;
}
}  // namespace

Config serialize(const Layer& layer) {
  Config c = get_config(layer);
  if (functional_of(layer) != nullptr) {
    return Config{{"module", "keras.src.models.functional"},
                  {"class_name", "Functional"},
                  {"config", c},
                  {"registered_name", "Functional"},
                  {"build_config", {{"input_shape", nullptr}}}};
  }
  if (is_sequential(layer)) {
    Config out{{"module", "keras"},
               {"class_name", "Sequential"},
               {"config", c},
               {"registered_name", nullptr}};
    if (layer.built())
      out["build_config"] = Config{{"input_shape", shape_json(layer.input_shape())}};
    return out;
  }
  auto entry = lookup(layer.class_name());
  const bool builtin = entry && entry->builtin;
  Config out{{"module", builtin ? Config("keras.layers") : Config(nullptr)},
             {"class_name", config_class_name(layer.class_name())},
             {"config", c},
             {"registered_name", builtin ? Config(nullptr) : Config(layer.class_name())}};
  Config bc = build_config_of(layer);
  if (!bc.is_null()) out["build_config"] = bc;
  return out;
}

Layer deserialize(const Config& object) {
  TF_CHECK_ARG(
      object.is_object() && object.contains("class_name") && object["class_name"].is_string(),
      "deserialize",
      "expected a Keras object {{\"class_name\": ..., \"config\": ...}}, "
      "got {}",
      object.dump().substr(0, 80));
  const std::string cls = object["class_name"].get<std::string>();
  check_object_keys(object, cls, {"compile_config"});
  // A top-level "compile_config" is read by models::model_from_json and load_model.
  const Config config = object.contains("config") ? object["config"] : Config::object();
  if (cls == "Sequential") return sequential_from(config, object);
  return from_config(cls, config);
}

std::string get_config_json(const Layer& layer, int indent) {
  return get_config(layer).dump(indent);
}

Layer from_config_json(const std::string& class_name, const std::string& config_json) {
  Config config;
  try {
    config = Config::parse(config_json);
  } catch (const nlohmann::json::parse_error& e) {
    TF_THROW(InvalidArgumentError, "from_config", "the {} config does not parse at byte {}",
             class_name, e.byte);
  }
  try {
    return from_config(class_name, config);
  } catch (const nlohmann::json::exception& e) {
    TF_THROW(InvalidArgumentError, "from_config", "the {} config is malformed: {}", class_name,
             e.what());
  }
}

}  // namespace saving

namespace models {

std::string to_json(const Model& model, int indent) {
  saving::Config object = saving::serialize(model);
  if (auto cc = saving::internal::compile_config_to_save(model, "to_json"))
    object["compile_config"] = std::move(*cc);
  return object.dump(indent);
}

namespace {
Model model_from_json(const std::string& json, bool compile, const std::string& where) {
  saving::Config object;
  try {
    object = saving::Config::parse(json);
  } catch (const nlohmann::json::parse_error& e) {
    TF_THROW(InvalidArgumentError, "model_from_json", "the JSON does not parse at byte {}", e.byte);
  }
  Layer l;
  try {
    l = saving::deserialize(object);
  } catch (const nlohmann::json::exception& e) {
    // A value of the wrong JSON type somewhere the checks above did not look.
    TF_THROW(InvalidArgumentError, "model_from_json", "the config is malformed: {}", e.what());
  }
  auto* impl = dynamic_cast<detail::ModelImpl*>(&l.impl());
  TF_CHECK_ARG(impl != nullptr, "model_from_json",
               "the JSON describes a {} layer, not a model (Sequential or Functional)",
               l.class_name());
  std::shared_ptr<detail::ModelImpl> model_impl(l.impl_ptr(), impl);
  class Handle : public Model {
   public:
    explicit Handle(std::shared_ptr<detail::ModelImpl> impl) : Model(std::move(impl)) {}
  };
  Model model = Handle(model_impl);
  if (compile) saving::internal::compile_from_object(model, object, where);
  return model;
}
}  // namespace

Model model_from_json(const std::string& json) {
  return model_from_json(json, true, "model_from_json");
}

void save_model(const Model& model, const std::string& path) {
  TF_CHECK_T(FailedPreconditionError, model.impl().fully_built(), "save_model",
             "model \"{}\" is not built: call it on data or build() it before saving (its weights "
             "do not exist yet)",
             model.name());
  saving::Config object = saving::serialize(model);
  auto compile_config = saving::internal::compile_config_to_save(model, "save_model");
  if (compile_config) object["compile_config"] = std::move(*compile_config);
  saving::internal::WeightList vars;
  saving::internal::collect_weights(model, "", vars);
  std::map<std::string, std::string> metadata{{"format", saving::kFormat},
                                              {"format_version", saving::kFormatVersion},
                                              {"config", object.dump()}};
  // The optimizer's state goes with the compile state that can rebuild the optimizer.
  if (compile_config) {
    const auto weights = vars;
    saving::internal::add_optimizer_variables(model, weights, vars, metadata);
  }
  safetensors::save_variables(path, vars, metadata);
}

Model load_model(const std::string& path, bool compile) {
  std::string config;
  {
    safetensors::Reader reader(path);
    const auto& meta = reader.metadata();
    auto f = meta.find("format");
    TF_CHECK_ARG(f != meta.end() && f->second == saving::kFormat, "load_model",
                 "'{}' is not a tapeflow model file (save_model writes __metadata__ format "
                 "\"{}\"; this file has {}); a weights file from save_weights loads with "
                 "load_weights",
                 path, saving::kFormat,
                 f == meta.end() ? std::string("none")
                                 : "\"" + safetensors::detail::printable(f->second) + "\"");
    auto v = meta.find("format_version");
    TF_CHECK_ARG(
        v != meta.end() && v->second == saving::kFormatVersion, "load_model",
        "'{}': format_version {} is not one this tapeflow reads ({})", path,
        v == meta.end() ? std::string("(none)") : safetensors::detail::printable(v->second),
        saving::kFormatVersion);
    auto c = meta.find("config");
    TF_CHECK_ARG(c != meta.end(), "load_model", "'{}' has no model config", path);
    config = c->second;
  }
  Model model = [&] {
    try {
      return model_from_json(config, compile, "load_model('" + path + "')");
    } catch (const InvalidArgumentError& e) {
      TF_THROW(InvalidArgumentError, "load_model", "'{}': the model config does not load: {}", path,
               e.what());
    }
  }();
  TF_CHECK_ARG(model.impl().fully_built(), "load_model",
               "'{}': the config does not give the model's input shape, so its weights cannot "
               "be made",
               path);
  saving::internal::WeightList vars;
  saving::internal::collect_weights(model, "", vars);
  // Checks every name, shape and dtype before assigning anything.
  auto unused = safetensors::load_variables(path, vars);
  std::erase_if(unused, [](const std::string& n) {
    return n.rfind(saving::internal::kOptimizerPrefix, 0) == 0;
  });
  TF_CHECK_ARG(unused.empty(), "load_model",
               "'{}' holds {} weight(s) the config's model does not have, first \"{}\"", path,
               unused.size(), unused.empty() ? "" : safetensors::detail::printable(unused[0]));
  if (model.compiled())
    saving::internal::restore_optimizer_variables(model, safetensors::Reader(path), vars);
  return model;
}

}  // namespace models

std::string Model::to_json(int indent) const {
  return models::to_json(*this, indent);
}
void Model::save(const std::string& path) const {
  models::save_model(*this, path);
}

}  // namespace tapeflow::keras
