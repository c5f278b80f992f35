// Internal to keras/serialization*.cpp: the pieces every built-in class's config reader and
// writer uses (Keras' value spellings, the strict key-by-key Reader, the base keys) and the
// registry hooks of the files that add classes. Not installed; include only from keras/.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "keras/layers.h"
#include "keras/layers_preprocessing.h"
#include "keras/mixed_precision.h"
#include "keras/serialization_json.h"

namespace tapeflow::keras::saving::internal {

// ---- writing values as Keras does ----

Config shape_json(const TensorShape& s);  // None dimensions as null
Config pair_json(Size2 s);                // [h, w]
Config seed_json(std::optional<int64_t> seed);
Config base_config(const Layer& layer);  // Keras' name, trainable and dtype, in its order
std::string lower(std::string s);
std::string activation_json(const std::string& a);  // "" (no activation) is "linear"
std::string who(const Layer& layer);                // "layer \"dense\" (Dense)" for errors
// A Keras initializer object; `init` undefined: the layer's default `fallback`. A custom
// initializer is an UnimplementedError naming the layer and `key`.
Config initializer_json(const Layer& layer, const char* key, const Initializer& init,
                        const Initializer& fallback);
Config regularizer_json(const Layer& layer, const char* key, const Regularizer& r);  // null: none
Config constraint_json(const Layer& layer, const char* key, const Constraint& c);    // null: none
// Appends Keras' "kernel_initializer", "bias_initializer", "kernel_regularizer" and
// "bias_regularizer" (in that order) of a layer with a kernel and a bias (glorot_uniform and
// zeros when not given).
void add_kernel_bias_keys(Config& c, const Layer& layer, const Initializer& kernel_initializer,
                          const Initializer& bias_initializer,
                          const Regularizer& kernel_regularizer,
                          const Regularizer& bias_regularizer);

// ---- reading a config, key by key ----

// Reads the keys of one layer's config; finish() rejects every key nobody asked for, so a
// config tapeflow cannot honour fully never loads silently changed.
class Reader {
 public:
  Reader(std::string class_name, const Config& config)
      : class_name_(std::move(class_name)), config_(config) {
    TF_CHECK_ARG(config_.is_object(), "from_config",
                 "the config of a {} layer must be a JSON object, got {}", class_name_,
                 config_.type_name());
  }

  bool has(const std::string& key) const { return config_.contains(key); }
  const Config* find(const std::string& key) {
    used_.insert(key);
    auto it = config_.find(key);
    return it == config_.end() ? nullptr : &*it;
  }
  const Config& require(const std::string& key) {
    const Config* v = find(key);
    if (v == nullptr) fail(key, "is required");
    return *v;
  }
  [[noreturn]] void fail(const std::string& key, const std::string& what) const {
    TF_THROW(InvalidArgumentError, "from_config", "{} config key \"{}\" {}", class_name_, key,
             what);
  }
  std::string got(const Config& v) const {
    std::string s = v.dump();
    return s.size() > 80 ? s.substr(0, 77) + "..." : s;
  }

  int64_t integer(const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
    const Config* v = find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      fail(key, "is required");
    }
    if (!v->is_number_integer()) fail(key, "must be an integer, got " + got(*v));
    return v->get<int64_t>();
  }
  double number(const std::string& key, std::optional<double> fallback = std::nullopt) {
    const Config* v = find(key);
    if (v == nullptr) {
      if (fallback) return *fallback;
      fail(key, "is required");
    }
    if (!v->is_number()) fail(key, "must be a number, got " + got(*v));
    return v->get<double>();
  }
  std::optional<double> optional_number(const std::string& key) {
    const Config* v = find(key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    if (!v->is_number()) fail(key, "must be a number or null, got " + got(*v));
    return v->get<double>();
  }
  std::optional<int64_t> optional_integer(const std::string& key) {
    const Config* v = find(key);
    if (v == nullptr || v->is_null()) return std::nullopt;
    if (!v->is_number_integer()) fail(key, "must be an integer or null, got " + got(*v));
    return v->get<int64_t>();
  }
  bool boolean(const std::string& key, bool fallback) {
    const Config* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_boolean()) fail(key, "must be true or false, got " + got(*v));
    return v->get<bool>();
  }
  std::string string(const std::string& key, const std::string& fallback) {
    const Config* v = find(key);
    if (v == nullptr) return fallback;
    if (!v->is_string()) fail(key, "must be a string, got " + got(*v));
    return v->get<std::string>();
  }
  // An int or a list of two ints (Keras' kernel_size, strides, ...).
  Size2 size2(const std::string& key, std::optional<Size2> fallback = std::nullopt) {
    const Config* v = find(key);
    if (v == nullptr || (v->is_null() && fallback)) {
      if (fallback) return *fallback;
      fail(key, "is required");
    }
    if (v->is_number_integer()) return Size2(static_cast<int>(v->get<int64_t>()));
    if (v->is_array() && v->size() == 2 && (*v)[0].is_number_integer() &&
        (*v)[1].is_number_integer())
      return Size2(static_cast<int>((*v)[0].get<int64_t>()),
                   static_cast<int>((*v)[1].get<int64_t>()));
    fail(key, "must be an integer or a list of 2 integers, got " + got(*v));
  }
  // The list of numbers `v` (the value of `key`, which names it in errors).
  std::vector<double> numbers(const std::string& key, const Config& v) {
    std::vector<double> out;
    if (!v.is_array()) fail(key, "must be a list of numbers, got " + got(v));
    for (const Config& e : v) {
      if (!e.is_number()) fail(key, "must be a list of numbers, got " + got(v));
      out.push_back(e.get<double>());
    }
    return out;
  }
  // An integer value `v` of `key` as an int (InvalidArgumentError when it does not fit).
  int fits_int(const std::string& key, int64_t v) const {
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
      fail(key, "= " + std::to_string(v) + " is out of range");
    return static_cast<int>(v);
  }
  int int_of(const std::string& key, std::optional<int64_t> fallback = std::nullopt) {
    return fits_int(key, integer(key, fallback));
  }
  std::vector<int> int_list_of(const std::string& key) {
    std::vector<int> out;
    for (int64_t v : int_list(key)) out.push_back(fits_int(key, v));
    return out;
  }
  std::vector<int64_t> int_list(const std::string& key) {
    const Config& v = require(key);
    std::vector<int64_t> out;
    if (v.is_number_integer()) return {v.get<int64_t>()};
    if (!v.is_array()) fail(key, "must be a list of integers, got " + got(v));
    for (const Config& e : v) {
      if (!e.is_number_integer()) fail(key, "must be a list of integers, got " + got(v));
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
  // Keys tapeflow has no option for: accepted only at Keras' value that changes nothing.
  void expect_null(const std::string& key) {
    const Config* v = find(key);
    if (v != nullptr && !v->is_null())
      fail(key, "= " + got(*v) + " is not supported by tapeflow (only null)");
  }
  void expect(const std::string& key, const Config& value) {
    const Config* v = find(key);
    if (v != nullptr && *v != value)
      fail(key, "= " + got(*v) + " is not supported by tapeflow (only " + value.dump() + ")");
  }
  std::string activation(const std::string& key) {
    std::string a = string(key, "linear");
    try {
      activations::get(a == "linear" ? "" : a);
    } catch (const Error& e) {
      fail(key, std::string("names an activation tapeflow does not have: ") + e.what());
    }
    return a == "linear" ? "" : a;
  }
  Initializer initializer(const std::string& key);
  Regularizer regularizer(const std::string& key);
  Constraint constraint(const std::string& key);  // null: none

  // Rejects the keys nobody read.
  void finish() const {
    for (auto it = config_.begin(); it != config_.end(); ++it)
      if (!used_.count(it.key()))
        TF_THROW(InvalidArgumentError, "from_config",
                 "{} config key \"{}\" is not supported by tapeflow (value {})", class_name_,
                 it.key(), got(it.value()));
  }

  const std::string& class_name() const { return class_name_; }

 private:
  std::string class_name_;
  const Config& config_;
  std::set<std::string> used_;
};

// A Keras serialized object's class and config, checking its module and registered_name.
std::pair<std::string, Config> object_parts(Reader& r, const std::string& key, const Config& v,
                                            const char* module);

// The base keys: the name (for the constructor), then trainable and dtype, applied after.
struct Base {
  std::string name;
  bool trainable = true;
  std::optional<mixed_precision::Policy> policy;
};
Base read_base(Reader& r);
void apply_base(const Layer& layer, const Base& b);
Config base_config(const Layer& layer);  // Keras' "name", "trainable", "dtype", in its order

// Keras' Embedding keys, which ReversibleEmbedding's config begins with, in Keras' order:
// input_dim, output_dim, the initializer and regularizer, activity_regularizer (null),
// embeddings_constraint, mask_zero, quantization_config (null).
struct EmbeddingKeys {
  int64_t input_dim = 0, output_dim = 0;
  Initializer initializer;
  Regularizer regularizer;
  bool mask_zero = false;
  Constraint constraint;
};
Config embedding_keys_json(const Layer& layer, const EmbeddingKeys& k);
EmbeddingKeys read_embedding_keys(Reader& r);
// The dtype named `name` (Keras' spelling, "float32"); a dtype tapeflow lacks fails on `key`.
DType dtype_from(Reader& r, const std::string& key, const std::string& name);

// Runs `make` (the constructor call of a reader, which reads keys as it goes): a constructor's
// InvalidArgumentError, which names the option, gets "<class> config: " in front (the Reader's
// own errors name the key already); then rejects the keys nobody read and applies the base keys.
template <class F>
Layer make_checked(Reader& r, const Base& b, F make) {
  Layer l = [&]() -> Layer {
    try {
      return make();
    } catch (const InvalidArgumentError& e) {
      if (std::string(e.what()).find(" config key ") != std::string::npos) throw;
      TF_THROW(InvalidArgumentError, "from_config", "{} config: {}", r.class_name(), e.what());
    }
  }();
  r.finish();
  apply_base(l, b);
  return l;
}

// The options of `layer` as its class's access function gives them; a layer whose class name
// is a built-in one but whose state is not (a model subclass named "Dense") has none.
template <class T>
T need(std::optional<T> options, const Layer& layer) {
  TF_CHECK_T(UnimplementedError, options.has_value(), "get_config",
             "{} is not tapeflow's built-in {} layer, so it has no config writer", who(layer),
             layer.class_name());
  return std::move(*options);
}

// Appends the beta/gamma keys of a normalization layer's options `o` (LayerNormalization's,
// GroupNormalization's) in Keras' order: initializers, regularizers, then constraints.
template <class O>
void add_beta_gamma(Config& c, const Layer& layer, const O& o) {
  c["beta_initializer"] =
      initializer_json(layer, "beta_initializer", o.beta_initializer, initializers::Zeros());
  c["gamma_initializer"] =
      initializer_json(layer, "gamma_initializer", o.gamma_initializer, initializers::Ones());
  c["beta_regularizer"] = regularizer_json(layer, "beta_regularizer", o.beta_regularizer);
  c["gamma_regularizer"] = regularizer_json(layer, "gamma_regularizer", o.gamma_regularizer);
  c["beta_constraint"] = constraint_json(layer, "beta_constraint", o.beta_constraint);
  c["gamma_constraint"] = constraint_json(layer, "gamma_constraint", o.gamma_constraint);
}

std::string padding_of(Reader& r);  // "valid" or "same", lower case
// data_format "channels_last" (or missing or null: Keras' default) -> false, "channels_first"
// -> true; anything else fails naming the value.
bool read_channels_first(Reader& r);
inline const char* data_format_name(bool channels_first) {
  return channels_first ? "channels_first" : "channels_last";
}
// The data_format of an image preprocessing or augmentation layer (keras/data_format.h's
// ImageFormat; "channels_last" for other layers), and a loaded one given its config's.
const char* image_format_name(const Layer& layer);
Layer with_image_format(Layer layer, bool channels_first);

// ---- the image preprocessing layers' values (serialization_sequence.cpp) ----

Config range_json(std::pair<double, double> r);  // [lower, upper]
// A Keras factor: a number or a [lower, upper] pair.
layers::Factor factor_of(Reader& r, const std::string& key);
// "value_range": [low, high] ([0, 255] when absent).
std::pair<double, double> value_range_of(Reader& r);
// RandomRotation's, RandomZoom's, RandomTranslation's and RandomShear's "fill_mode",
// "interpolation", "seed" and "fill_value", with the name of `b`.
layers::RandomTransformOptions transform_of(Reader& r, const Base& b);

// ---- classes whose Keras call takes several inputs (serialization_sequence.cpp) ----

// Keras calls MultiHeadAttention and GroupQueryAttention as mha(query, value[, key]) (2: the
// inputs are positional) and Attention / AdditiveAttention as att([query, value[, key]]) (1:
// one list); 0 for the other classes. tapeflow's one-input call of such a layer is
// self-attention, which Keras spells with the one tensor repeated.
int keras_call_form(const Layer& layer);
// The args [x] of such a layer's node as Keras writes them; others unchanged.
Config keras_call_args(const Layer& layer, const Config& args);
// Keras' build_config of such a layer built for query shape `shape` (MultiHeadAttention:
// shapes_dict with query_shape and value_shape); null for other classes.
Config keras_build_config(const Layer& layer, const TensorShape& shape);

// ---- weight paths (save_model / load_model) ----

// A model's weights named as Keras 3's .weights.h5 paths: (path, variable) pairs.
using WeightList = std::vector<std::pair<std::string, Variable>>;
// Appends `layer`'s weights to `out` under `prefix` (ending in "/" or empty). Keras' default
// nesting: the layer's own weights at "vars/<i>" (creation order), then each sublayer's under
// "layers/<sublayer name>/"; a class whose registry entry has a `weights` hook nests its own way.
void collect_weights(const Layer& layer, const std::string& prefix, WeightList& out);
// Appends `layer`'s own weights alone at `prefix` + "vars/<i>".
void own_weights(const Layer& layer, const std::string& prefix, WeightList& out);
// A class's own nesting of its weights (a recurrent layer's under "cell/", a wrapper's under
// "layer/"): appends them as collect_weights does and returns true, or returns false (nothing
// appended) for a layer that is not the built-in class, which then gets the default nesting.
using WeightPaths =
    std::function<bool(const Layer& layer, const std::string& prefix, WeightList& out)>;

// ---- the registry ----

struct Entry {
  // The class-specific keys (base keys added by get_config in front), or for a built-in class
  // whose Keras config has other base keys or puts them elsewhere (ELU, SpatialDropout1D), the
  // whole config: a config with "name" is taken as it is (base_config gives the base keys).
  GetConfig get;
  FromConfig from;  // the whole config (built-ins read the base keys themselves)
  bool builtin = false;
  WeightPaths weights = {};  // empty: the default nesting
};
using Registry = std::map<std::string, Entry>;
inline void add_builtin(Registry& m, const char* name, GetConfig get, FromConfig from,
                        WeightPaths weights = {}) {
  m[name] = Entry{std::move(get), std::move(from), true, std::move(weights)};
}
// The built-in classes defined outside serialization.cpp, each file adding its own.
void add_conv_layers(Registry& m);      // keras/serialization_conv.cpp
void add_sequence_layers(Registry& m);  // keras/serialization_sequence.cpp
void add_core_layers(Registry& m);      // keras/serialization_core.cpp
void add_augment_layers(Registry& m);   // keras/serialization_augment.cpp
void add_audio_layers(Registry& m);     // keras/serialization_audio.cpp

}  // namespace tapeflow::keras::saving::internal
