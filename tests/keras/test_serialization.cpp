// Whole-model serialization (keras/serialization.h): Keras 3.15's JSON read and written, and
// save_model / load_model. The JSON literals and predictions come from Keras 3.15 (the calls
// named above each); the weights are set in both to the same formula (set_formula_weights).
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "keras/functional.h"
#include "keras/layers.h"
#include "keras/layers_merge.h"
#include "keras/layers_more.h"
#include "keras/losses.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/safetensors.h"
#include "keras/serialization_json.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/random.h"
#include "ops/unary.h"
#include "serialization_testing.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace fs = std::filesystem;
using K::saving::Config;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::layers_by_name;
using tf::testing::set_formula_weights;

using tf::testing::TempDir;

namespace {

tf::Tensor input_a() {  // np.cos(0.1 * arange(144)).reshape(2, 6, 6, 2)
  std::vector<double> v(144);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.1 * double(i));
  return tf::cast(tf::convert_to_tensor(v, {2, 6, 6, 2}), tf::float32);
}
tf::Tensor input_b() {  // np.cos(0.3 * arange(12)).reshape(3, 4)
  std::vector<double> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.3 * double(i));
  return tf::cast(tf::convert_to_tensor(v, {3, 4}), tf::float32);
}
tf::Tensor input_d() {  // np.cos(0.7 * arange(4)).reshape(2, 2)
  std::vector<double> v(4);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.7 * double(i));
  return tf::cast(tf::convert_to_tensor(v, {2, 2}), tf::float32);
}
tf::Tensor input_c() {
  return tf::convert_to_tensor(std::vector<int32_t>{1, 2, 3, 9, 0, 4}, {2, 3});
}

// Model A (Keras 3.15): keras.Sequential([keras.Input((6, 6, 2)), Conv2D(3, 3, padding="same",
// activation="relu", name="conv"), BatchNormalization(name="bn"), MaxPooling2D(2, name="pool"),
// AveragePooling2D(2, strides=1, name="avg"), Flatten(name="flat"), Dropout(0.25, name="drop"),
// Dense(4, name="dense"), ReLU(max_value=0.8, name="relu"), Softmax(name="soft")],
// name="seq_a"): kAJson is its to_json(), kAPred its predict(input_a()) with the formula weights.
const char* const kAJson = R"json(
{"module": "keras", "class_name": "Sequential", "config": {"name": "seq_a",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null},
"layers": [{"module": "keras.layers", "class_name": "InputLayer",
"config": {"batch_shape": [null, 6, 6, 2], "dtype": "float32", "sparse": false,
"ragged": false, "name": "input_layer", "optional": false}, "registered_name": null},
{"module": "keras.layers", "class_name": "Conv2D", "config": {"name": "conv",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "filters": 3,
"kernel_size": [3, 3], "strides": [1, 1], "padding": "same",
"data_format": "channels_last", "dilation_rate": [1, 1], "groups": 1,
"activation": "relu", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "bias_constraint": null}, "registered_name": null,
"build_config": {"input_shape": [null, 6, 6, 2]}}, {"module": "keras.layers",
"class_name": "BatchNormalization", "config": {"name": "bn", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "axis": -1, "momentum": 0.99, "epsilon": 0.001,
"center": true, "scale": true, "beta_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null},
"gamma_initializer": {"module": "keras.initializers", "class_name": "Ones",
"config": {}, "registered_name": null},
"moving_mean_initializer": {"module": "keras.initializers", "class_name": "Zeros",
"config": {}, "registered_name": null},
"moving_variance_initializer": {"module": "keras.initializers", "class_name": "Ones",
"config": {}, "registered_name": null}, "beta_regularizer": null,
"gamma_regularizer": null, "beta_constraint": null, "gamma_constraint": null,
"synchronized": false, "renorm": false, "renorm_clipping": null,
"renorm_momentum": 0.99}, "registered_name": null,
"build_config": {"input_shape": [null, 6, 6, 3]}}, {"module": "keras.layers",
"class_name": "MaxPooling2D", "config": {"name": "pool", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "pool_size": [2, 2], "padding": "valid", "strides": [2, 2],
"data_format": "channels_last"}, "registered_name": null}, {"module": "keras.layers",
"class_name": "AveragePooling2D", "config": {"name": "avg", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "pool_size": [2, 2], "padding": "valid", "strides": [1, 1],
"data_format": "channels_last"}, "registered_name": null}, {"module": "keras.layers",
"class_name": "Flatten", "config": {"name": "flat", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "data_format": "channels_last"}, "registered_name": null,
"build_config": {"input_shape": [null, 2, 2, 3]}}, {"module": "keras.layers",
"class_name": "Dropout", "config": {"name": "drop", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "rate": 0.25, "seed": null, "noise_shape": null},
"registered_name": null}, {"module": "keras.layers", "class_name": "Dense",
"config": {"name": "dense", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"units": 4, "activation": "linear", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null,
"bias_constraint": null, "quantization_config": null}, "registered_name": null,
"build_config": {"input_shape": [null, 12]}}, {"module": "keras.layers",
"class_name": "ReLU", "config": {"name": "relu", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "max_value": 0.8, "negative_slope": 0.0, "threshold": 0.0},
"registered_name": null}, {"module": "keras.layers", "class_name": "Softmax",
"config": {"name": "soft", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"axis": -1}, "registered_name": null}], "build_input_shape": [null, 6, 6, 2]},
"registered_name": null, "build_config": {"input_shape": [null, 6, 6, 2]},
"compile_config": {}})json";
const std::vector<double> kAPred = {0.3091849982738495,  0.2625204026699066,  0.2165127545595169,
                                    0.21178193390369415, 0.31288447976112366, 0.262661874294281,
                                    0.21398724615573883, 0.2104664444923401};
// Model B (Keras 3.15): x = Input((4,), name="x"); a = Dense(3, activation="tanh", name="d1")(x);
// b = Dense(3, name="d2")(x); s = Add(name="add")([a, b]); e = LayerNormalization(name="ln")(s);
// o = Dense(2, activation="softmax", name="out")(e); keras.Model(x, o, name="fun").
const char* const kBJson = R"json(
{"module": "keras.src.models.functional", "class_name": "Functional",
"config": {"name": "fun", "trainable": true, "layers": [{"module": "keras.layers",
"class_name": "InputLayer", "config": {"batch_shape": [null, 4], "dtype": "float32",
"sparse": false, "ragged": false, "name": "x", "optional": false},
"registered_name": null, "name": "x", "inbound_nodes": []}, {"module": "keras.layers",
"class_name": "Dense", "config": {"name": "d1", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "units": 3, "activation": "tanh", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null,
"bias_constraint": null, "quantization_config": null}, "registered_name": null,
"build_config": {"input_shape": [null, 4]}, "name": "d1",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
"config": {"shape": [null, 4], "dtype": "float32", "keras_history": ["x", 0, 0]}}],
"kwargs": {}}]}, {"module": "keras.layers", "class_name": "Dense",
"config": {"name": "d2", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"units": 3, "activation": "linear", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null,
"bias_constraint": null, "quantization_config": null}, "registered_name": null,
"build_config": {"input_shape": [null, 4]}, "name": "d2",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
"config": {"shape": [null, 4], "dtype": "float32", "keras_history": ["x", 0, 0]}}],
"kwargs": {}}]}, {"module": "keras.layers", "class_name": "Add",
"config": {"name": "add", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}},
"registered_name": null, "build_config": {"input_shape": [[null, 3], [null, 3]]},
"name": "add", "inbound_nodes": [{"args": [[{"class_name": "__keras_tensor__",
"config": {"shape": [null, 3], "dtype": "float32", "keras_history": ["d1", 0, 0]}},
{"class_name": "__keras_tensor__", "config": {"shape": [null, 3], "dtype": "float32",
"keras_history": ["d2", 0, 0]}}]], "kwargs": {}}]}, {"module": "keras.layers",
"class_name": "LayerNormalization", "config": {"name": "ln", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "axis": [-1], "epsilon": 0.001, "center": true, "scale": true,
"rms_scaling": false, "beta_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null},
"gamma_initializer": {"module": "keras.initializers", "class_name": "Ones",
"config": {}, "registered_name": null}, "beta_regularizer": null,
"gamma_regularizer": null, "beta_constraint": null, "gamma_constraint": null},
"registered_name": null, "build_config": {"input_shape": [null, 3]}, "name": "ln",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
"config": {"shape": [null, 3], "dtype": "float32", "keras_history": ["add", 0, 0]}}],
"kwargs": {}}]}, {"module": "keras.layers", "class_name": "Dense",
"config": {"name": "out", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"units": 2, "activation": "softmax", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null,
"bias_constraint": null, "quantization_config": null}, "registered_name": null,
"build_config": {"input_shape": [null, 3]}, "name": "out",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
"config": {"shape": [null, 3], "dtype": "float32", "keras_history": ["ln", 0, 0]}}],
"kwargs": {}}]}], "input_layers": ["x", 0, 0], "output_layers": ["out", 0, 0]},
"registered_name": "Functional", "build_config": {"input_shape": null},
"compile_config": {}})json";
const std::vector<double> kBPred = {0.5812458992004395,  0.41875410079956055, 0.5795045495033264,
                                    0.42049548029899597, 0.5689895153045654,  0.4310104250907898};
// Model C (Keras 3.15): keras.Sequential([keras.Input((3,), dtype="int32"), Embedding(10, 4,
// name="emb"), Reshape((12,), name="rs"), Activation("tanh", name="act"), Dense(2, name="dc",
// kernel_regularizer=L2(1e-4))], name="seq_c"), predicted on [[1, 2, 3], [9, 0, 4]].
const char* const kCJson = R"json(
{"module": "keras", "class_name": "Sequential", "config": {"name": "seq_c",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null},
"layers": [{"module": "keras.layers", "class_name": "InputLayer",
"config": {"batch_shape": [null, 3], "dtype": "int32", "sparse": false, "ragged": false,
"name": "input_layer_1", "optional": false}, "registered_name": null},
{"module": "keras.layers", "class_name": "Embedding", "config": {"name": "emb",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "input_dim": 10,
"output_dim": 4, "embeddings_initializer": {"module": "keras.initializers",
"class_name": "RandomUniform", "config": {"seed": null, "minval": -0.05,
"maxval": 0.05}, "registered_name": null}, "embeddings_regularizer": null,
"activity_regularizer": null, "embeddings_constraint": null, "mask_zero": false,
"quantization_config": null}, "registered_name": null,
"build_config": {"input_shape": [null, 3]}}, {"module": "keras.layers",
"class_name": "Reshape", "config": {"name": "rs", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "target_shape": [12]}, "registered_name": null},
{"module": "keras.layers", "class_name": "Activation", "config": {"name": "act",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "activation": "tanh"},
"registered_name": null}, {"module": "keras.layers", "class_name": "Dense",
"config": {"name": "dc", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"units": 2, "activation": "linear", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": {"module": "keras.regularizers", "class_name": "L2",
"config": {"l2": 0.0001}, "registered_name": null}, "bias_regularizer": null,
"kernel_constraint": null, "bias_constraint": null, "quantization_config": null},
"registered_name": null, "build_config": {"input_shape": [null, 12]}}],
"build_input_shape": [null, 3]}, "registered_name": null,
"build_config": {"input_shape": [null, 3]}, "compile_config": {}})json";
const std::vector<double> kCPred = {0.18697673082351685, -0.14540138840675354, 0.4642447233200073,
                                    0.13781818747520447};
// Model D (Keras 3.15), a shared layer called twice: x = Input((2,), name="in");
// sh = Dense(2, activation="tanh", name="shared"); a = sh(x); b = sh(a);
// c = Concatenate(name="cat")([a, b]); o = Dense(1, name="do")(c); keras.Model(x, o,
// name="fun_d"), predicted on cos(0.7 * arange(4)).reshape(2, 2).
const char* const kDJson = R"json(
{"module": "keras.src.models.functional", "class_name": "Functional",
"config": {"name": "fun_d", "trainable": true, "layers": [{"module": "keras.layers",
"class_name": "InputLayer", "config": {"batch_shape": [null, 2], "dtype": "float32",
"sparse": false, "ragged": false, "name": "in", "optional": false},
"registered_name": null, "name": "in", "inbound_nodes": []}, {"module": "keras.layers",
"class_name": "Dense", "config": {"name": "shared", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "units": 2, "activation": "tanh", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null,
"bias_constraint": null, "quantization_config": null}, "registered_name": null,
"build_config": {"input_shape": [null, 2]}, "name": "shared",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
"config": {"shape": [null, 2], "dtype": "float32", "keras_history": ["in", 0, 0]}}],
"kwargs": {}}, {"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null,
2], "dtype": "float32", "keras_history": ["shared", 0, 0]}}], "kwargs": {}}]},
{"module": "keras.layers", "class_name": "Concatenate", "config": {"name": "cat",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "axis": -1},
"registered_name": null, "build_config": {"input_shape": [[null, 2], [null, 2]]},
"name": "cat", "inbound_nodes": [{"args": [[{"class_name": "__keras_tensor__",
"config": {"shape": [null, 2], "dtype": "float32", "keras_history": ["shared", 0, 0]}},
{"class_name": "__keras_tensor__", "config": {"shape": [null, 2], "dtype": "float32",
"keras_history": ["shared", 1, 0]}}]], "kwargs": {}}]}, {"module": "keras.layers",
"class_name": "Dense", "config": {"name": "do", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "units": 1, "activation": "linear", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform",
"config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null,
"bias_constraint": null, "quantization_config": null}, "registered_name": null,
"build_config": {"input_shape": [null, 4]}, "name": "do",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__",
"config": {"shape": [null, 4], "dtype": "float32", "keras_history": ["cat", 0, 0]}}],
"kwargs": {}}]}], "input_layers": ["in", 0, 0], "output_layers": ["do", 0, 0]},
"registered_name": "Functional", "build_config": {"input_shape": null},
"compile_config": {}})json";
const std::vector<double> kDPred = {-0.377970427274704, -0.4524056911468506};

// A custom layer for register_layer: y = x * w * factor, w (channels,) initialised to ones.
class ScaleImpl final : public K::detail::LayerImpl {
 public:
  ScaleImpl(double factor, std::string name)
      : LayerImpl("Scale", "scale", std::move(name)), factor_(factor) {}
  double factor() const { return factor_; }

 protected:
  void build(const tf::TensorShape& s) override {
    w_ = add_weight("w", tf::TensorShape({s[s.rank() - 1]}), "ones", true);
  }
  tf::Tensor call(const tf::Tensor& x, bool) override { return x * w_.value() * factor_; }

 private:
  double factor_;
  tf::Variable w_;
};

void register_scale() {
  K::saving::register_layer(
      "Scale",
      [](const Config& c) {
        return K::Layer(std::make_shared<ScaleImpl>(c.at("factor").get<double>(),
                                                    c.at("name").get<std::string>()));
      },
      [](const K::Layer& l) {
        return Config{{"factor", dynamic_cast<const ScaleImpl&>(l.impl()).factor()}};
      });
}

}  // namespace

TEST_CASE("serialization: Keras Sequential JSON with conv pooling and batch norm predicts as Keras",
          "[keras][serialization]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    CAPTURE(device.to_string());
    K::Model model = K::models::model_from_json(kAJson);
    CHECK(model.name() == "seq_a");
    CHECK(model.built());
    std::vector<std::string> names;
    for (const K::Layer& l : model.layers()) names.push_back(l.name());
    CHECK(names == std::vector<std::string>{"conv", "bn", "pool", "avg", "flat", "drop", "dense",
                                            "relu", "soft"});
    set_formula_weights(model, 5);
    check_values(model(input_a(), false), kAPred, 1e-5, 1e-6);
  }
}

TEST_CASE("serialization: Keras functional JSON with an Add branch predicts as Keras",
          "[keras][serialization]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    CAPTURE(device.to_string());
    K::Model model = K::models::model_from_json(kBJson);
    CHECK(model.name() == "fun");
    set_formula_weights(model);
    check_values(model(input_b(), false), kBPred, 1e-5, 1e-6);
  }
}

TEST_CASE(
    "serialization: Keras functional JSON with a shared layer and Concatenate predicts as Keras",
    "[keras][serialization]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    CAPTURE(device.to_string());
    K::Model model = K::models::model_from_json(kDJson);
    CHECK(model.layers().size() == 4);  // in, shared (called twice), cat, do
    set_formula_weights(model);
    check_values(model(input_d(), false), kDPred, 1e-5, 1e-6);
  }
}

TEST_CASE("serialization: Keras JSON with Embedding Reshape Activation and a regularizer loads",
          "[keras][serialization]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    CAPTURE(device.to_string());
    K::Model model = K::models::model_from_json(kCJson);
    set_formula_weights(model);
    check_values(model(input_c(), false), kCPred, 1e-5, 1e-6);
    // The L2(1e-4) kernel regularizer came through: its penalty is a loss of the model.
    REQUIRE(model.losses().size() == 1);
  }
}

TEST_CASE("serialization: to_json writes the layer configs Keras writes",
          "[keras][serialization]") {
  for (const char* json : {kAJson, kBJson, kCJson, kDJson}) {
    const Config keras = Config::parse(json);
    K::Model model = K::models::model_from_json(json);
    const Config ours = Config::parse(K::models::to_json(model));
    CHECK(ours["module"] == keras["module"]);
    CHECK(ours["class_name"] == keras["class_name"]);
    CHECK(ours["registered_name"] == keras["registered_name"]);
    const auto theirs = layers_by_name(keras);
    const auto mine = layers_by_name(ours);
    CHECK(ours["config"]["layers"].size() == keras["config"]["layers"].size());
    for (const auto& [name, layer] : theirs) {
      CAPTURE(name);
      if (layer["class_name"] == "InputLayer" && keras["class_name"] == "Sequential") {
        // A Sequential keeps no Input: tapeflow writes an InputLayer of the built shape.
        const Config& first = ours["config"]["layers"][0];
        CHECK(first["class_name"] == "InputLayer");
        CHECK(first["config"]["batch_shape"] == layer["config"]["batch_shape"]);
        continue;
      }
      REQUIRE(mine.count(name) == 1);
      const Config& m = mine.at(name);
      CHECK(m["module"] == layer["module"]);
      CHECK(m["class_name"] == layer["class_name"]);
      // The same keys in the same order with the same values.
      CHECK(m["config"].dump() == layer["config"].dump());
      if (layer.contains("inbound_nodes")) CHECK(m["inbound_nodes"] == layer["inbound_nodes"]);
    }
    if (keras["config"].contains("input_layers")) {
      CHECK(ours["config"]["input_layers"] == keras["config"]["input_layers"]);
      CHECK(ours["config"]["output_layers"] == keras["config"]["output_layers"]);
    } else {
      CHECK(ours["config"]["build_input_shape"] == keras["config"]["build_input_shape"]);
    }
    // And tapeflow's JSON loads back into the same model.
    K::Model again = K::models::model_from_json(K::models::to_json(model));
    CHECK(K::models::to_json(again) == K::models::to_json(model));
  }
}

TEST_CASE("serialization: initializer and regularizer configs are Keras'",
          "[keras][serialization]") {
  // keras.initializers.serialize(RandomNormal(0.0, 1.0, seed=2)), Constant(0.5),
  // keras.regularizers.serialize(L1L2(1e-4, 2e-4)) (Keras 3.15).
  const Config random_normal = Config::parse(
      R"({"module": "keras.initializers", "class_name": "RandomNormal", "config": {"seed": 2,
      "mean": 0.0, "stddev": 1.0}, "registered_name": null})");
  const Config constant = Config::parse(
      R"({"module": "keras.initializers", "class_name": "Constant", "config": {"value": 0.5},
      "registered_name": null})");
  const Config l1l2 = Config::parse(
      R"({"module": "keras.regularizers", "class_name": "L1L2", "config": {"l1": 0.0001,
      "l2": 0.0002}, "registered_name": null})");
  K::layers::Dense dense(3, {.kernel_initializer = K::initializers::RandomNormal(0.0, 1.0, 2),
                             .bias_initializer = K::initializers::Constant(0.5),
                             .kernel_regularizer = K::regularizers::L1L2(1e-4, 2e-4),
                             .name = "d"});
  const Config c = K::saving::get_config(dense);
  CHECK(c["kernel_initializer"] == random_normal);
  CHECK(c["bias_initializer"] == constant);
  CHECK(c["kernel_regularizer"] == l1l2);
  CHECK(c["bias_regularizer"].is_null());
  // From the config: the same layer again (the config round trips).
  const K::Layer back = K::saving::from_config("Dense", c);
  CHECK(K::saving::get_config(back) == c);
  const tf::Tensor bias_init = tf::ones({2, 3});
  (void)back(bias_init, false);
  check_values(back.weights()[1].value(), {0.5, 0.5, 0.5});
}

TEST_CASE("serialization: the JSON text calls of the public header round trip a config",
          "[keras][serialization]") {
  K::layers::Dense dense(3, {.activation = "relu", .name = "text"});
  const std::string text = K::saving::get_config_json(dense);
  CHECK(Config::parse(text) == K::saving::get_config(dense));
  CHECK(K::saving::get_config_json(dense, 2).find("\n  \"name\": \"text\"") != std::string::npos);
  const K::Layer back = K::saving::from_config_json("Dense", text);
  CHECK(back.name() == "text");
  CHECK(K::saving::get_config_json(back) == text);
  tf::testing::require_error([&] { K::saving::from_config_json("Dense", R"({"units": 3,)"); },
                             {"from_config", "Dense", "does not parse at byte"});
  tf::testing::require_error([&] { K::saving::from_config_json("Dense", R"({"units": "three"})"); },
                             {"Dense"});
}

TEST_CASE("serialization: unsupported config keys and values name the class and the key",
          "[keras][serialization]") {
  Config dense = K::saving::get_config(K::layers::Dense(2));
  Config bad = dense;
  bad["kernel_constraint"] = Config::parse(
      R"({"module": "keras.constraints", "class_name": "MaxNorm", "config": {"max_value": 2,
      "axis": 0, "surprise": 1}, "registered_name": null})");
  tf::testing::require_error([&] { K::saving::from_config("Dense", bad); },
                             {"Dense", "kernel_constraint", "surprise"});
  bad = dense;
  bad["surprise"] = 1;
  tf::testing::require_error([&] { K::saving::from_config("Dense", bad); }, {"Dense", "surprise"});
  bad = dense;
  bad["kernel_initializer"]["class_name"] = "STFTInitializer";
  tf::testing::require_error([&] { K::saving::from_config("Dense", bad); },
                             {"Dense", "kernel_initializer", "STFTInitializer"});
  bad = dense;
  bad["activation"] = "hard_sigmoidish";
  tf::testing::require_error([&] { K::saving::from_config("Dense", bad); },
                             {"Dense", "activation", "hard_sigmoidish"});
  Config conv = K::saving::get_config(K::layers::Conv2D(2, 3));
  conv["data_format"] = "channels_middle";
  tf::testing::require_error([&] { K::saving::from_config("Conv2D", conv); },
                             {"Conv2D", "data_format", "channels_middle"});
  Config bn = K::saving::get_config(K::layers::BatchNormalization());
  bn["renorm"] = true;
  tf::testing::require_error([&] { K::saving::from_config("BatchNormalization", bn); },
                             {"BatchNormalization", "renorm"});
  tf::testing::require_error([&] { K::saving::from_config("Frobnicate", Config::object()); },
                             {"Frobnicate", "register_layer"});
  // A custom initializer has no Keras config: writing it is refused, not approximated.
  K::layers::Dense custom(
      2, {.kernel_initializer = K::Initializer(
              "mine", [](const tf::TensorShape& s, tf::DType d) { return tf::zeros(s, d); })});
  TF_REQUIRE_THROWS_CONTAINING(K::saving::get_config(custom), tf::UnimplementedError, "mine");
}

TEST_CASE("serialization: model_from_json rejects bad JSON and unknown classes",
          "[keras][serialization]") {
  tf::testing::require_error([] { K::models::model_from_json("{\"class_name\": "); },
                             {"model_from_json", "does not parse"});
  std::string json = kAJson;
  const std::string from = "\"class_name\": \"Dense\"";
  json.replace(json.find(from), from.size(), "\"class_name\": \"MyDense\"");
  tf::testing::require_error([&] { K::models::model_from_json(json); },
                             {"MyDense", "tf::keras::saving::register_layer(\"MyDense\""});
  tf::testing::require_error(
      [] { K::models::model_from_json(R"({"class_name": "Dense", "config": {"units": 2}})"); },
      {"not a model"});
}

TEST_CASE("serialization: save_model and load_model round trip a trained model",
          "[keras][serialization]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    CAPTURE(device.to_string());
    TempDir dir;
    K::Sequential model(
        {K::layers::Conv2D(4, 3,
                           {.padding = "same",
                            .activation = "relu",
                            .kernel_regularizer = K::regularizers::L2(1e-3),
                            .input_shape = {6, 6, 2}}),
         K::layers::BatchNormalization(), K::layers::MaxPooling2D(), K::layers::Flatten(),
         K::layers::Dropout(0.3, 7), K::layers::Dense(3, "softmax")},
        "trained");
    const tf::Tensor x = tf::random::uniform({8, 6, 6, 2}, -1.0, 1.0, tf::float32, 3);
    const tf::Tensor y = tf::random::uniform({8, 3}, 0.0, 1.0, tf::float32, 4);
    model.compile(K::optimizers::SGD(0.1), "mse");
    model.fit(x, y, {.epochs = 1, .batch_size = 4, .verbose = 0});
    const std::string path = dir / "model.tfmodel";
    model.save(path);  // Keras' model.save: models::save_model
    // Only the file: no temporary left behind.
    CHECK(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()) == 1);

    K::Model loaded = K::models::load_model(path);
    CHECK(loaded.name() == "trained");
    CHECK(loaded.compiled());  // with its compile state (test_serialization_compile.cpp)
    REQUIRE(loaded.variables().size() == model.variables().size());
    for (size_t i = 0; i < model.variables().size(); ++i)
      check_close(loaded.variables()[i].value(), model.variables()[i].value(), 0.0, 0.0);
    check_close(loaded(x, false), model(x, false), 0.0, 0.0);
    CHECK(loaded.to_json() == K::models::to_json(model));
  }
}

TEST_CASE("serialization: save_model and load_model round trip a functional model",
          "[keras][serialization]") {
  TempDir dir;
  K::Model model = K::models::model_from_json(kBJson);
  set_formula_weights(model);
  K::models::save_model(model, dir / "fun.tfmodel");
  K::Model loaded = K::models::load_model(dir / "fun.tfmodel");
  check_values(loaded(input_b(), false), kBPred, 1e-5, 1e-6);
  // The weights sit under Keras 3's .weights.h5 paths.
  tf::keras::safetensors::Reader reader(dir / "fun.tfmodel");
  CHECK(reader.find("layers/d1/vars/0") != nullptr);
  CHECK(reader.find("layers/ln/vars/1") != nullptr);
  CHECK(reader.metadata().at("format") == "tapeflow.keras.model");
}

TEST_CASE("serialization: load_model errors name the file and the problem",
          "[keras][serialization]") {
  TempDir dir;
  TF_REQUIRE_THROWS_CONTAINING(K::models::load_model(dir / "missing.tfmodel"), tf::NotFoundError,
                               "missing.tfmodel");
  // A weights file is not a model file.
  K::Sequential model({K::layers::Dense(2, {.input_shape = {3}, .name = "d"})});
  model.save_weights(dir / "weights.safetensors");
  tf::testing::require_error([&] { K::models::load_model(dir / "weights.safetensors"); },
                             {"weights.safetensors", "not a tapeflow model file", "load_weights"});
  // A corrupt config.
  namespace st = tf::keras::safetensors;
  st::save_file(dir / "corrupt.tfmodel", {{"layers/d/vars/0", tf::zeros({3, 2})}},
                {{"format", "tapeflow.keras.model"},
                 {"format_version", "1"},
                 {"config", "{\"class_name\": \"Sequential\", \"config\": {"}});
  tf::testing::require_error([&] { K::models::load_model(dir / "corrupt.tfmodel"); },
                             {"corrupt.tfmodel", "does not parse"});
  // An unknown class.
  std::string json = K::models::to_json(model);
  json.replace(json.find("\"Dense\""), 7, "\"Wobble\"");
  st::save_file(dir / "unknown.tfmodel", {{"layers/d/vars/0", tf::zeros({3, 2})}},
                {{"format", "tapeflow.keras.model"}, {"format_version", "1"}, {"config", json}});
  tf::testing::require_error([&] { K::models::load_model(dir / "unknown.tfmodel"); },
                             {"unknown.tfmodel", "Wobble", "register_layer"});
  // Weights that do not fit the config: a missing one.
  st::save_file(dir / "short.tfmodel", {{"layers/d/vars/0", tf::zeros({3, 2})}},
                {{"format", "tapeflow.keras.model"},
                 {"format_version", "1"},
                 {"config", K::models::to_json(model)}});
  TF_REQUIRE_THROWS_CONTAINING(K::models::load_model(dir / "short.tfmodel"), tf::NotFoundError,
                               "layers/d/vars/1");
  // A model that is not built has no weights to save.
  TF_REQUIRE_THROWS_CONTAINING(
      K::models::save_model(K::Sequential({K::layers::Dense(2)}), dir / "unbuilt.tfmodel"),
      tf::FailedPreconditionError, "not built");
}

TEST_CASE("serialization: register_layer makes a custom layer serializable",
          "[keras][serialization]") {
  register_scale();
  TempDir dir;
  K::Sequential model({K::layers::Dense(3, {.input_shape = {2}, .name = "d"}),
                       K::Layer(std::make_shared<ScaleImpl>(2.5, "scale"))});
  model.set_weights({tf::constant({{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}}),
                     tf::constant({0.f, 1.f, -1.f}), tf::constant({1.f, 0.5f, -2.f})});
  const Config json = Config::parse(K::models::to_json(model));
  const Config& scale = json["config"]["layers"][2];
  CHECK(scale["class_name"] == "Scale");
  CHECK(scale["registered_name"] == "Scale");
  CHECK(scale["config"]["factor"] == 2.5);
  K::models::save_model(model, dir / "custom.tfmodel");
  K::Model loaded = K::models::load_model(dir / "custom.tfmodel");
  const tf::Tensor x = tf::constant({{1.f, -1.f}});
  // [1, -1] @ kernel + bias = [-3, -2, -4]; * w * 2.5 = [-7.5, -2.5, 20].
  check_values(loaded(x, false), {-7.5, -2.5, 20.0});
  check_close(loaded(x, false), model(x, false), 0.0, 0.0);
  tf::testing::require_error(
      [] { K::saving::register_layer("Dense", [](const Config&) { return K::Layer(); }); },
      {"Dense", "built-in"});
  CHECK(K::saving::is_registered("Scale"));
}

TEST_CASE("serialization: a subclassed model without a registered writer is refused",
          "[keras][serialization]") {
  struct Custom : K::Model {
    K::layers::Dense d{2};
    tf::Tensor call(const tf::Tensor& x, bool) override { return d(x); }
  };
  Custom m;
  (void)m(tf::ones({1, 3}), false);
  TF_REQUIRE_THROWS_CONTAINING(K::models::to_json(m), tf::UnimplementedError, "register_layer");
}

TEST_CASE("serialization: the docs example round trips", "[keras][serialization]") {
  TempDir dir;
  K::Sequential model(
      {K::layers::Dense(16, {.activation = "relu", .input_shape = {4}}), K::layers::Dense(1)});
  std::string json = model.to_json();
  K::Model same_architecture = K::models::model_from_json(json);
  CHECK(same_architecture.to_json() == json);
  model.save(dir / "model.tfmodel");
  K::Model restored = K::models::load_model(dir / "model.tfmodel");
  const tf::Tensor x = tf::random::uniform({5, 4}, -1.0, 1.0, tf::float32, 11);
  check_close(restored(x, false), model(x, false), 0.0, 0.0);
}

TEST_CASE("serialization: nested models and dtype policies round trip", "[keras][serialization]") {
  TempDir dir;
  K::Sequential inner({K::layers::Dense(3, {.activation = "tanh", .name = "in_d"})}, "inner");
  K::layers::Dense last(1, {.name = "last"});
  last.set_trainable(false);
  K::Sequential outer({K::layers::Dense(4, {.input_shape = {2}, .name = "first"}), inner, last},
                      "outer");
  outer.save(dir / "nested.tfmodel");
  K::Model loaded = K::models::load_model(dir / "nested.tfmodel");
  const tf::Tensor x = tf::random::uniform({3, 2}, -1.0, 1.0, tf::float32, 5);
  check_close(loaded(x, false), outer(x, false), 0.0, 0.0);
  CHECK(!loaded.get_layer("last").trainable());
  CHECK(loaded.trainable_variables().size() == 4);  // first and in_d; last is frozen
  tf::keras::safetensors::Reader reader(dir / "nested.tfmodel");
  CHECK(reader.find("layers/inner/layers/in_d/vars/1") != nullptr);

  K::layers::Dense mixed(2, {.name = "mixed"});
  mixed.set_dtype_policy(K::mixed_precision::Policy("mixed_float16"));
  const Config c = K::saving::get_config(mixed);
  CHECK(c["dtype"]["config"]["name"] == "mixed_float16");
  const K::Layer back = K::saving::from_config("Dense", c);
  CHECK(back.compute_dtype() == tf::float16);
  CHECK(back.variable_dtype() == tf::float32);
}
