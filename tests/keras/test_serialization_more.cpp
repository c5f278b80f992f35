// Keras configs of Dot and the adaptive poolings (keras/serialization.cpp,
// keras/serialization_conv.cpp): the configs Keras 3.15.1 writes (the Python line above each),
// read back, and a functional model with them saved and loaded whole.
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "keras/functional.h"
#include "keras/layers.h"
#include "keras/layers_extra.h"
#include "keras/layers_merge.h"
#include "keras/layers_rnn_cells.h"
#include "keras/model.h"
#include "keras/safetensors.h"
#include "keras/serialization.h"
#include "keras/serialization_json.h"
#include "ops/factory.h"
#include "ops/random.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
using K::saving::Config;

namespace {
// Keras' base keys of a float32 layer named `name`, then `rest`.
Config keras_config(const std::string& name, const std::string& rest) {
  return Config::parse(R"({"name": ")" + name + R"(", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, )" +
                       rest + "}");
}
}  // namespace

TEST_CASE("serialization: Dot and the adaptive poolings write Keras' configs",
          "[keras][serialization]") {
  struct Case {
    K::Layer layer;
    Config keras;
  };
  const std::vector<Case> cases = {
      // keras.layers.Dot(axes=1, name="d1")
      {L::Dot(1, false, "d1"), keras_config("d1", R"("axes": 1, "normalize": false)")},
      // keras.layers.Dot(axes=(2, 1), normalize=True, name="d2")
      {L::Dot(std::pair{2, 1}, true, "d2"),
       keras_config("d2", R"("axes": [2, 1], "normalize": true)")},
      // keras.layers.AdaptiveAveragePooling2D((3, 4), name="ap")
      {L::AdaptiveAveragePooling2D(K::Size2(3, 4), "ap"),
       keras_config("ap", R"("output_size": [3, 4], "data_format": "channels_last")")},
      // keras.layers.AdaptiveMaxPooling1D(5, name="mp")
      {L::AdaptiveMaxPooling1D(5, "mp"),
       keras_config("mp", R"("output_size": [5], "data_format": "channels_last")")},
      // keras.layers.AdaptiveMaxPooling3D((1, 2, 3), name="mp3")
      {L::AdaptiveMaxPooling3D(L::Size3(1, 2, 3), "mp3"),
       keras_config("mp3", R"("output_size": [1, 2, 3], "data_format": "channels_last")")}};
  for (const Case& c : cases) {
    CAPTURE(c.layer.name());
    CHECK(K::saving::get_config(c.layer) == c.keras);
    const K::Layer back = K::saving::from_config(c.layer.class_name(), c.keras);
    CHECK(K::saving::get_config(back) == c.keras);
  }
  // Keras also takes one int for every dimension of output_size.
  Config one = keras_config("ap", R"("output_size": 2, "data_format": "channels_last")");
  CHECK(K::saving::get_config(K::saving::from_config(
            "AdaptiveAveragePooling2D", one))["output_size"] == Config::parse("[2, 2]"));
  tf::testing::require_error(
      [&] {
        K::saving::from_config(
            "AdaptiveMaxPooling2D",
            keras_config("x", R"("output_size": [2, 2], "data_format": "channels_middle")"));
      },
      {"AdaptiveMaxPooling2D config key \"data_format\""});
  tf::testing::require_error(
      [&] { K::saving::from_config("Dot", keras_config("x", R"("axes": "last")")); },
      {"Dot config key \"axes\" must be an integer or a list of 2 integers"});

  // A functional model with both: saved and loaded whole, the same outputs.
  auto a = K::Input({6, 4}, std::nullopt, "a");
  auto b = K::Input({6, 4}, std::nullopt, "b");
  auto pa = L::AdaptiveAveragePooling1D(3, "pool_a")(a);
  auto pb = L::AdaptiveMaxPooling1D(3, "pool_b")(b);
  auto d = L::Dot(std::pair{2, 2}, true, "cos")({pa, pb});
  K::Model model(std::vector<K::KerasTensor>{a, b}, std::vector<K::KerasTensor>{d}, "two");
  const tf::Tensor xa = tf::random::normal({2, 6, 4}, 0.0, 1.0, tf::float32, 1);
  const tf::Tensor xb = tf::random::normal({2, 6, 4}, 0.0, 1.0, tf::float32, 2);
  const tf::Tensor want = model({xa, xb})[0];
  CHECK(want.shape() == tf::TensorShape({2, 3, 3}));
  tf::testing::TempDir dir;
  model.save(dir / "two.tfmodel");
  const K::Model loaded = K::models::load_model(dir / "two.tfmodel");
  tf::testing::check_close(loaded({xa, xb})[0], want, 0.0, 0.0);
}

TEST_CASE("IntegerLookup: Keras configs both ways, adapted vocabularies kept",
          "[keras][serialization]") {
  // keras.layers.IntegerLookup(vocabulary=[12, 36, 1138], name="il").get_config() and
  // IntegerLookup(vocabulary=[12, 36], invert=True, mask_token=0, num_oov_indices=2,
  // name="il3").get_config()
  const Config il = Config::parse(R"({"name": "il", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"invert": false, "max_tokens": null, "num_oov_indices": 1, "oov_token": -1, "mask_token": null,
"output_mode": "int", "sparse": false, "pad_to_max_tokens": false, "vocabulary_dtype": "int64",
"idf_weights": null, "vocabulary": [12, 36, 1138], "vocabulary_size": 4, "oov_method":
"floormod", "salt": null})");
  const Config il3 = Config::parse(R"({"name": "il3", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"invert": true, "max_tokens": null, "num_oov_indices": 2, "oov_token": -1, "mask_token": 0,
"output_mode": "int", "sparse": false, "pad_to_max_tokens": false, "vocabulary_dtype": "int64",
"idf_weights": null, "vocabulary": [12, 36], "vocabulary_size": 5, "oov_method": "floormod",
"salt": null})");
  CHECK(K::saving::serialize(
            L::IntegerLookup({.vocabulary = {12, 36, 1138}, .name = "il"}))["config"] == il);
  CHECK(K::saving::serialize(L::IntegerLookup({.vocabulary = {12, 36},
                                               .num_oov_indices = 2,
                                               .mask_token = 0,
                                               .invert = true,
                                               .name = "il3"}))["config"] == il3);
  for (const Config* c : {&il, &il3}) {
    K::Layer back = K::saving::from_config("IntegerLookup", *c);
    CHECK(K::saving::serialize(back)["config"] == *c);
  }
  const tf::Tensor ids = tf::constant(std::vector<int64_t>{36, 7, 1138, 12}, {4});
  tf::testing::check_values(K::saving::from_config("IntegerLookup", il)(ids), {2, 0, 3, 1}, 0, 0);

  // An adapted vocabulary: Keras writes null there and keeps the vocabulary in an asset file;
  // tapeflow writes the list, so a saved model keeps it.
  L::IntegerLookup adapted({.output_mode = "multi_hot", .name = "lookup"});
  adapted.adapt(tf::constant(std::vector<int64_t>{3, 3, 5, 7, 7, 7}, {6}));
  const Config written = K::saving::serialize(adapted)["config"];
  CHECK(written["vocabulary"] == Config::parse("[7, 3, 5]"));
  CHECK(written["vocabulary_size"] == 4);
  auto in = K::Input({3}, tf::int64, "tokens");
  K::Model model(std::vector<K::KerasTensor>{in}, std::vector<K::KerasTensor>{adapted(in)},
                 "lookup_model");
  const tf::Tensor x = tf::constant(std::vector<int64_t>{7, 9, 5, 3, 3, 3}, {2, 3});
  tf::testing::TempDir dir;
  model.save(dir / "lookup.tfmodel");
  K::Model loaded = K::models::load_model(dir / "lookup.tfmodel");
  tf::testing::check_close(loaded(x), model(x), 0, 0);
  tf::testing::check_values(loaded(x), {1, 1, 0, 1, 0, 0, 1, 0}, 0, 0);

  Config bad = il;
  bad["output_mode"] = "tf_idf";
  tf::testing::require_error([&] { K::saving::from_config("IntegerLookup", bad); },
                             {"IntegerLookup config key \"output_mode\"", "tf_idf"});
  bad = il;
  bad["vocabulary"] = "vocab.txt";
  tf::testing::require_error([&] { K::saving::from_config("IntegerLookup", bad); },
                             {"IntegerLookup config key \"vocabulary\"", "vocabulary files"});
  bad = il;
  bad["oov_method"] = "md5";
  tf::testing::require_error([&] { K::saving::from_config("IntegerLookup", bad); },
                             {"IntegerLookup config key \"oov_method\"", "md5"});
  bad = il;
  bad["salt"] = "pepper";
  tf::testing::require_error([&] { K::saving::from_config("IntegerLookup", bad); },
                             {"IntegerLookup config key \"salt\"", "two integers"});
}

TEST_CASE("ConvLSTM1D/2D/3D: Keras configs both ways, weights under cell/",
          "[keras][serialization]") {
  // keras.layers.ConvLSTM2D(4, (3, 3), padding="same", return_sequences=True, name="cl")
  // called on (None, 3, 6, 6, 2): serialize_keras_object.
  const std::string keras = R"({"module": "keras.layers", "class_name": "ConvLSTM2D", "config":
{"name": "cl", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "return_sequences": true,
"return_state": false, "go_backwards": false, "stateful": false, "unroll": false,
"zero_output_for_mask": false, "filters": 4, "kernel_size": [3, 3], "strides": [1, 1],
"padding": "same", "data_format": "channels_last", "dilation_rate": [1, 1], "activation":
"tanh", "recurrent_activation": "sigmoid", "use_bias": true, "kernel_initializer": {"module":
"keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null, "input_axes":
null, "output_axes": null}, "registered_name": null}, "recurrent_initializer": {"module":
"keras.initializers", "class_name": "Orthogonal", "config": {"seed": null, "gain": 1.0},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "unit_forget_bias": true,
"kernel_regularizer": null, "recurrent_regularizer": null, "bias_regularizer": null,
"activity_regularizer": null, "kernel_constraint": null, "recurrent_constraint": null,
"bias_constraint": null, "dropout": 0.0, "recurrent_dropout": 0.0, "seed": null},
"registered_name": null, "build_config": {"input_shape": [null, 3, 6, 6, 2]}})";
  L::ConvLSTM2D cl(4, {3, 3}, {.padding = "same", .return_sequences = true, .name = "cl"});
  cl.build({tf::None, 3, 6, 6, 2});
  CHECK(K::saving::serialize(cl) == Config::parse(keras));
  K::Layer back = K::saving::deserialize(Config::parse(keras));
  back.build({tf::None, 3, 6, 6, 2});
  CHECK(K::saving::serialize(back) == Config::parse(keras));

  // ConvLSTM1D(2, 3, strides=2, recurrent_dropout=0.1, dropout=0.2, seed=3, go_backwards=True,
  //   unit_forget_bias=False, use_bias=False, name="c1").get_config()
  const Config c1 = Config::parse(R"({"name": "c1", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"return_sequences": false, "return_state": false, "go_backwards": true, "stateful": false,
"unroll": false, "zero_output_for_mask": false, "filters": 2, "kernel_size": [3], "strides":
[2], "padding": "valid", "data_format": "channels_last", "dilation_rate": [1], "activation":
"tanh", "recurrent_activation": "sigmoid", "use_bias": false, "kernel_initializer": {"module":
"keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null, "input_axes":
null, "output_axes": null}, "registered_name": null}, "recurrent_initializer": {"module":
"keras.initializers", "class_name": "Orthogonal", "config": {"seed": null, "gain": 1.0},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "unit_forget_bias": false,
"kernel_regularizer": null, "recurrent_regularizer": null, "bias_regularizer": null,
"activity_regularizer": null, "kernel_constraint": null, "recurrent_constraint": null,
"bias_constraint": null, "dropout": 0.2, "recurrent_dropout": 0.1, "seed": 3})");
  L::ConvLSTM1D mine(2, {3},
                     {.strides = {2},
                      .use_bias = false,
                      .unit_forget_bias = false,
                      .go_backwards = true,
                      .dropout = 0.2,
                      .recurrent_dropout = 0.1,
                      .seed = 3,
                      .name = "c1"});
  CHECK(K::saving::serialize(mine)["config"] == c1);
  CHECK(K::saving::serialize(K::saving::from_config("ConvLSTM1D", c1))["config"] == c1);
  // The defaults fill the keys a config leaves out.
  CHECK(K::saving::from_config("ConvLSTM3D",
                               Config::parse(R"({"filters": 2, "kernel_size": [1, 2, 2]})"))
            .class_name() == "ConvLSTM3D");

  // A model saved and loaded: Keras' cell/ groups, the same outputs.
  auto in = K::Input({3, 6, 6, 2}, std::nullopt, "frames");
  K::Model model(std::vector<K::KerasTensor>{in},
                 std::vector<K::KerasTensor>{L::ConvLSTM2D(
                     4, {3, 3}, {.padding = "same", .return_sequences = true, .name = "cl"})(in)},
                 "video");
  const tf::Tensor x = tf::random::uniform({2, 3, 6, 6, 2}, -1.0, 1.0, tf::float32, 5);
  tf::testing::TempDir dir;
  model.save(dir / "video.tfmodel");
  K::safetensors::Reader reader(dir / "video.tfmodel");
  std::map<std::string, tf::TensorShape> saved;
  for (const auto& info : reader.tensors()) saved[info.name] = info.shape;
  CHECK(saved == std::map<std::string, tf::TensorShape>{{"layers/cl/cell/vars/0", {3, 3, 2, 16}},
                                                        {"layers/cl/cell/vars/1", {3, 3, 4, 16}},
                                                        {"layers/cl/cell/vars/2", {16}}});
  K::Model loaded = K::models::load_model(dir / "video.tfmodel");
  tf::testing::check_close(loaded(x), model(x), 0, 0);

  Config bad = c1;
  bad["data_format"] = "channels_middle";
  tf::testing::require_error([&] { K::saving::from_config("ConvLSTM1D", bad); },
                             {"ConvLSTM1D config key \"data_format\"", "channels_middle"});
  bad = c1;
  bad["return_state"] = true;
  tf::testing::require_error([&] { K::saving::from_config("ConvLSTM1D", bad); },
                             {"ConvLSTM1D config key \"return_state\""});
}
