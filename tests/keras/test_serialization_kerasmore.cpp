// Keras configs of GroupQueryAttention and SpectralNormalization
// (keras/serialization_sequence.cpp): the JSON equals Keras 3.15.1's serialize_keras_object, a
// functional model Keras wrote (model.to_json()) loads and computes Keras' outputs with the same
// weights, and save_model keeps the weights under Keras' .weights.h5 groups (_query_dense, ...;
// the wrapper's vars and layer/).
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "keras/functional.h"
#include "keras/layers.h"
#include "keras/layers_kerasmore.h"
#include "keras/model.h"
#include "keras/safetensors.h"
#include "keras/serialization.h"
#include "keras/serialization_json.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "serialization_testing.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
using K::saving::Config;
using tf::testing::check_close;
using tf::testing::require_error;

namespace {

// keras.Model(x, Dense(2, name="out")(GroupQueryAttention(head_dim=4, num_query_heads=4,
//   num_key_value_heads=2, use_gate=True, sliding_window=3, name="gqa")(x, x)), name="g")
//   .to_json(), x = keras.Input((5, 8), name="x")
const char* kModel =
    R"({"module": "keras.src.models.functional", "class_name": "Functional", "config": {"name": "g",
"trainable": true, "layers": [{"module": "keras.layers", "class_name": "InputLayer",
"config": {"batch_shape": [null, 5, 8], "dtype": "float32", "sparse": false, "ragged": false,
"name": "x", "optional": false}, "registered_name": null, "name": "x", "inbound_nodes": []},
{"module": "keras.layers", "class_name": "GroupQueryAttention", "config": {"name": "gqa",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "head_dim": 4, "num_query_heads": 4,
"num_key_value_heads": 2, "use_bias": true, "use_gate": true, "sliding_window": 3,
"dropout": 0.0, "kernel_initializer": {"module": "keras.initializers",
"class_name": "GlorotUniform", "config": {"seed": null, "input_axes": null,
"output_axes": null}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null,
"activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null,
"seed": null}, "registered_name": null, "build_config": {"shapes_dict": {"query_shape": [null,
5, 8], "value_shape": [null, 5, 8]}}, "name": "gqa",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 5,
8], "dtype": "float32", "keras_history": ["x", 0, 0]}}, {"class_name": "__keras_tensor__",
"config": {"shape": [null, 5, 8], "dtype": "float32", "keras_history": ["x", 0, 0]}}],
"kwargs": {}}]}, {"module": "keras.layers", "class_name": "Dense", "config": {"name": "out",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "units": 2, "activation": "linear",
"use_bias": true, "kernel_initializer": {"module": "keras.initializers",
"class_name": "GlorotUniform", "config": {"seed": null, "input_axes": null,
"output_axes": null}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null,
"kernel_constraint": null, "bias_constraint": null, "quantization_config": null},
"registered_name": null, "build_config": {"input_shape": [null, 5, 8]}, "name": "out",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 5,
8], "dtype": "float32", "keras_history": ["gqa", 0, 0]}}], "kwargs": {}}]}],
"input_layers": ["x", 0, 0], "output_layers": ["out", 0, 0]}, "registered_name": "Functional",
"build_config": {"input_shape": null}, "compile_config": {}})";

// 0.3 cos(0.11 j), j = 0..79, as (2, 5, 8).
tf::Tensor input() {
  std::vector<float> v;
  for (int j = 0; j < 80; ++j) v.push_back(static_cast<float>(0.3 * std::cos(0.11 * j)));
  return tf::constant(v, {2, 5, 8});
}

}  // namespace

TEST_CASE("GroupQueryAttention: Keras configs both ways", "[keras][serialization]") {
  // GroupQueryAttention(head_dim=4, num_query_heads=4, num_key_value_heads=2, name="gqa"),
  // called on (None, 5, 8) twice: serialize_keras_object.
  const std::string keras = R"({"module": "keras.layers", "class_name": "GroupQueryAttention",
"config": {"name": "gqa", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "head_dim": 4,
"num_query_heads": 4, "num_key_value_heads": 2, "use_bias": true, "use_gate": false,
"sliding_window": null, "dropout": 0.0, "kernel_initializer": {"module": "keras.initializers",
"class_name": "GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer":
null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null, "seed":
null}, "registered_name": null, "build_config": {"shapes_dict": {"query_shape": [null, 5, 8],
"value_shape": [null, 5, 8]}}})";
  L::GroupQueryAttention gqa(4, 4, 2, {.name = "gqa"});
  gqa.build({tf::None, 5, 8}, {tf::None, 5, 8});
  // The class is GroupedQueryAttention (Keras' summary says so too); Keras' configs name it
  // GroupQueryAttention, its other export name. Both read.
  CHECK(gqa.class_name() == "GroupedQueryAttention");
  CHECK(K::saving::serialize(gqa) == Config::parse(keras));
  K::Layer back = K::saving::deserialize(Config::parse(keras));
  CHECK(back.class_name() == "GroupedQueryAttention");
  Config aliased = Config::parse(keras);
  aliased["class_name"] = "GroupedQueryAttention";
  CHECK(K::saving::deserialize(aliased).class_name() == "GroupedQueryAttention");

  // GroupQueryAttention(4, 4, 2, use_gate=True, sliding_window=3, dropout=0.1, seed=5,
  //   use_bias=False, name="g2").get_config()
  const Config g2 = Config::parse(R"({"name": "g2", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"head_dim": 4, "num_query_heads": 4, "num_key_value_heads": 2, "use_bias": false, "use_gate":
true, "sliding_window": 3, "dropout": 0.1, "kernel_initializer": {"module": "keras.initializers",
"class_name": "GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer":
null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null, "seed":
5})");
  L::GroupQueryAttention mine(4, 4, 2,
                              {.dropout = 0.1,
                               .use_bias = false,
                               .sliding_window = 3,
                               .use_gate = true,
                               .seed = 5,
                               .name = "g2"});
  CHECK(K::saving::serialize(mine)["config"] == g2);
  K::Layer read = K::saving::from_config("GroupQueryAttention", g2);
  CHECK(K::saving::serialize(read)["config"] == g2);

  // Strict reading.
  Config bad = g2;
  bad["kernel_constraint"] = "non_negative";
  require_error([&] { K::saving::from_config("GroupQueryAttention", bad); },
                {"GroupQueryAttention config key \"kernel_constraint\"", "non_negative"});
  bad = g2;
  bad["num_query_heads"] = 3;
  require_error([&] { K::saving::from_config("GroupQueryAttention", bad); },
                {"GroupQueryAttention", "divisible"});
}

TEST_CASE("GroupQueryAttention: a Keras model loads, computes Keras' outputs and saves",
          "[keras][serialization]") {
  K::Model g = K::models::model_from_json(kModel);
  tf::testing::set_formula_weights(g);
  // Keras 3.15.1 with the same weights (the formula of serialization_testing.h) and input.
  const std::vector<double> keras = {
      -0.3116070032119751,  -0.3964073061943054,  -0.31961292028427124, -0.3982328176498413,
      -0.32321351766586304, -0.39441442489624023, -0.32171887159347534, -0.3922727704048157,
      -0.3205118775367737,  -0.39638447761535645, -0.3206776976585388,  -0.39516741037368774,
      -0.3176116347312927,  -0.4009789824485779,  -0.31955236196517944, -0.4043479561805725,
      -0.32001692056655884, -0.3966827988624573,  -0.3211776614189148,  -0.38918858766555786};
  tf::testing::check_values(g(input(), false), keras, 1e-5, 1e-6);

  tf::testing::TempDir dir;
  K::models::save_model(g, dir / "g.tfmodel");
  // Keras' .weights.h5 groups for the layer (under the class name there): _query_dense,
  // _key_dense, _gate_dense, _value_dense, _output_dense.
  const std::map<std::string, tf::TensorShape> want = {
      {"layers/gqa/_query_dense/vars/0", {8, 4, 4}},
      {"layers/gqa/_query_dense/vars/1", {4, 4}},
      {"layers/gqa/_key_dense/vars/0", {8, 2, 4}},
      {"layers/gqa/_key_dense/vars/1", {2, 4}},
      {"layers/gqa/_gate_dense/vars/0", {8, 4, 4}},
      {"layers/gqa/_gate_dense/vars/1", {4, 4}},
      {"layers/gqa/_value_dense/vars/0", {8, 2, 4}},
      {"layers/gqa/_value_dense/vars/1", {2, 4}},
      {"layers/gqa/_output_dense/vars/0", {4, 4, 8}},
      {"layers/gqa/_output_dense/vars/1", {8}},
      {"layers/out/vars/0", {8, 2}},
      {"layers/out/vars/1", {2}}};
  K::safetensors::Reader reader(dir / "g.tfmodel");
  std::map<std::string, tf::TensorShape> saved;
  for (const auto& info : reader.tensors()) saved[info.name] = info.shape;
  CHECK(saved == want);
  K::Model loaded = K::models::load_model(dir / "g.tfmodel");
  check_close(loaded(input(), false), g(input(), false), 0.0, 0.0);
  // tapeflow's JSON is Keras' (the layer's call form and build_config included), but for the
  // empty compile_config Keras writes for an uncompiled model.
  Config keras_json = Config::parse(kModel);
  keras_json.erase("compile_config");
  CHECK(Config::parse(K::models::to_json(loaded)) == keras_json);
}

TEST_CASE("SpectralNormalization: Keras config, weights and saving", "[keras][serialization]") {
  // SpectralNormalization(Dense(3, name="d"), power_iterations=2, name="sn") called on
  // (None, 4): serialize_keras_object.
  const std::string keras = R"({"module": "keras.layers", "class_name": "SpectralNormalization",
"config": {"name": "sn", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "layer": {"module":
"keras.layers", "class_name": "Dense", "config": {"name": "d", "trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "units": 3, "activation": "linear", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config":
{"seed": null, "input_axes": null, "output_axes": null}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null,
"kernel_constraint": null, "bias_constraint": null, "quantization_config": null},
"registered_name": null, "build_config": {"input_shape": [null, 4]}}, "power_iterations": 2},
"registered_name": null, "build_config": {"input_shape": [null, 4]}})";
  L::SpectralNormalization sn(L::Dense(3, {.name = "d"}), 2, "sn");
  sn.build({tf::None, 4});
  CHECK(K::saving::serialize(sn) == Config::parse(keras));
  K::Layer back = K::saving::deserialize(Config::parse(keras));
  back.build({tf::None, 4});
  CHECK(K::saving::serialize(back) == Config::parse(keras));

  // A model saved and loaded: Keras' groups (the wrapper's vars/0 is the wrapped kernel, as
  // Keras tracks it twice), the same outputs, vector_u restored.
  auto in = K::Input({4}, std::nullopt, "x");
  L::SpectralNormalization wrapper(L::Dense(3, {.name = "d"}), 2, "sn");
  K::Model model(std::vector<K::KerasTensor>{in}, std::vector<K::KerasTensor>{wrapper(in)}, "m");
  tf::testing::set_formula_weights(model);
  const tf::Tensor x =
      tf::constant(std::vector<float>{0.5f, -1.f, 2.f, 0.25f, 1.f, 0.f, -0.5f, 3.f}, {2, 4});
  (void)model(x, true);  // a training call: power iteration, vector_u and the kernel assigned
  tf::testing::TempDir dir;
  K::models::save_model(model, dir / "sn.tfmodel");
  const std::map<std::string, tf::TensorShape> want = {{"layers/sn/vars/0", {4, 3}},
                                                       {"layers/sn/vars/1", {1, 3}},
                                                       {"layers/sn/layer/vars/0", {4, 3}},
                                                       {"layers/sn/layer/vars/1", {3}}};
  K::safetensors::Reader reader(dir / "sn.tfmodel");
  std::map<std::string, tf::TensorShape> saved;
  for (const auto& info : reader.tensors()) saved[info.name] = info.shape;
  CHECK(saved == want);
  K::Model loaded = K::models::load_model(dir / "sn.tfmodel");
  check_close(loaded(x, false), model(x, false), 0.0, 0.0);
  const auto lw = loaded.get_weights(), mw = model.get_weights();
  REQUIRE(lw.size() == mw.size());
  for (size_t i = 0; i < lw.size(); ++i) check_close(lw[i], mw[i], 0.0, 0.0);
  CHECK(K::models::to_json(loaded) == K::models::to_json(model));

  Config bad = Config::parse(keras);
  bad["config"]["power_iterations"] = 0;
  require_error([&] { K::saving::deserialize(bad); },
                {"SpectralNormalization config key \"power_iterations\"", "positive"});
}
