// Whole-model serialization of the recurrent layers, their wrappers and Masking
// (keras/serialization_sequence.cpp): Keras 3.15.1's configs read and written, Keras models'
// JSON predicting as in Keras, and save_model / load_model with Keras' weight paths. The
// literals come from Keras 3.15.1 (the Python above each, `json.dumps(layer.get_config())` or
// `model.to_json()`); the models' weights are set in both to set_formula_weights' formula.
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "keras/layers.h"
#include "keras/layers_attention.h"
#include "keras/layers_extra.h"
#include "keras/layers_masking.h"
#include "keras/layers_misc.h"
#include "keras/layers_preprocessing.h"
#include "keras/layers_recurrent.h"
#include "keras/model.h"
#include "keras/safetensors.h"
#include "keras/serialization_json.h"
#include "ops/factory.h"
#include "ops/unary.h"
#include "serialization_testing.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
using K::saving::Config;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::TempDir;

namespace {

namespace L = K::layers;

// from keras import layers, initializers as I, regularizers as R
// layers.SimpleRNN(4, activation="relu", use_bias=False, kernel_initializer=I.HeNormal(seed=1),
//     recurrent_regularizer=R.L2(0.01), dropout=0.25, seed=3, return_sequences=True,
//     zero_output_for_mask=True, name="srnn")   (Keras' SimpleRNN does not write its seed)
const char* const kSimpleRNNConfig = R"json(
{"name": "srnn", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "return_sequences": true,
"return_state": false, "go_backwards": false, "stateful": false, "unroll": false,
"zero_output_for_mask": true, "units": 4, "activation": "relu", "use_bias": false,
"kernel_initializer": {"module": "keras.initializers", "class_name": "HeNormal", "config":
{"seed": 1, "input_axes": null, "output_axes": null}, "registered_name": null},
"recurrent_initializer": {"module": "keras.initializers", "class_name": "Orthogonal", "config":
{"seed": null, "gain": 1.0}, "registered_name": null}, "bias_initializer": {"module":
"keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "recurrent_regularizer": {"module": "keras.regularizers",
"class_name": "L2", "config": {"l2": 0.01}, "registered_name": null}, "bias_regularizer": null,
"activity_regularizer": null, "kernel_constraint": null, "recurrent_constraint": null,
"bias_constraint": null, "dropout": 0.25, "recurrent_dropout": 0.0}
)json";

// layers.LSTM(3, activation="relu", recurrent_activation="softsign", unit_forget_bias=False,
//     dropout=0.1, recurrent_dropout=0.2, seed=5, return_sequences=True, go_backwards=True,
//     name="l")
const char* const kLSTMConfig = R"json(
{"name": "l", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "return_sequences": true,
"return_state": false, "go_backwards": true, "stateful": false, "unroll": false,
"zero_output_for_mask": false, "units": 3, "activation": "relu", "recurrent_activation":
"softsign", "use_bias": true, "kernel_initializer": {"module": "keras.initializers",
"class_name": "GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes":
null}, "registered_name": null}, "recurrent_initializer": {"module": "keras.initializers",
"class_name": "Orthogonal", "config": {"seed": null, "gain": 1.0}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "unit_forget_bias": false, "kernel_regularizer": null,
"recurrent_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "recurrent_constraint": null, "bias_constraint": null, "dropout":
0.1, "recurrent_dropout": 0.2, "seed": 5}
)json";

// layers.GRU(5, activation="sigmoid", recurrent_activation="tanh", reset_after=False,
//     bias_initializer=I.Constant(0.5), kernel_regularizer=R.L1(0.5), recurrent_dropout=0.5,
//     seed=11, go_backwards=True, name="gru_b")
const char* const kGRUConfig = R"json(
{"name": "gru_b", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "return_sequences": false,
"return_state": false, "go_backwards": true, "stateful": false, "unroll": false,
"zero_output_for_mask": false, "units": 5, "activation": "sigmoid", "recurrent_activation":
"tanh", "use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name":
"GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "recurrent_initializer": {"module": "keras.initializers",
"class_name": "Orthogonal", "config": {"seed": null, "gain": 1.0}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Constant", "config":
{"value": 0.5}, "registered_name": null}, "kernel_regularizer": {"module": "keras.regularizers",
"class_name": "L1", "config": {"l1": 0.5}, "registered_name": null}, "recurrent_regularizer":
null, "bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null,
"recurrent_constraint": null, "bias_constraint": null, "dropout": 0.0, "recurrent_dropout": 0.5,
"reset_after": false, "seed": 11}
)json";

// layers.Bidirectional(layers.LSTM(3, return_sequences=True, name="l"), merge_mode="mul",
//     name="bi")
const char* const kBidirectionalConfig = R"json(
{"name": "bi", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "merge_mode": "mul", "layer":
{"module": "keras.layers", "class_name": "LSTM", "config": {"name": "forward_l", "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "return_sequences": true, "return_state": false, "go_backwards":
false, "stateful": false, "unroll": false, "zero_output_for_mask": true, "units": 3,
"activation": "tanh", "recurrent_activation": "sigmoid", "use_bias": true, "kernel_initializer":
{"module": "keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null,
"input_axes": null, "output_axes": null}, "registered_name": null}, "recurrent_initializer":
{"module": "keras.initializers", "class_name": "Orthogonal", "config": {"seed": null, "gain":
1.0}, "registered_name": null}, "bias_initializer": {"module": "keras.initializers",
"class_name": "Zeros", "config": {}, "registered_name": null}, "unit_forget_bias": true,
"kernel_regularizer": null, "recurrent_regularizer": null, "bias_regularizer": null,
"activity_regularizer": null, "kernel_constraint": null, "recurrent_constraint": null,
"bias_constraint": null, "dropout": 0.0, "recurrent_dropout": 0.0, "seed": null},
"registered_name": null}, "backward_layer": {"module": "keras.layers", "class_name": "LSTM",
"config": {"name": "backward_l", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "return_sequences":
true, "return_state": false, "go_backwards": true, "stateful": false, "unroll": false,
"zero_output_for_mask": true, "units": 3, "activation": "tanh", "recurrent_activation":
"sigmoid", "use_bias": true, "kernel_initializer": {"module": "keras.initializers",
"class_name": "GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes":
null}, "registered_name": null}, "recurrent_initializer": {"module": "keras.initializers",
"class_name": "Orthogonal", "config": {"seed": null, "gain": 1.0}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "unit_forget_bias": true, "kernel_regularizer": null,
"recurrent_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "recurrent_constraint": null, "bias_constraint": null, "dropout":
0.0, "recurrent_dropout": 0.0, "seed": null}, "registered_name": null}}
)json";

// layers.TimeDistributed(layers.Dense(2, activation="relu", name="dd"), name="td")
const char* const kTimeDistributedConfig = R"json(
{"name": "td", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "layer": {"module": "keras.layers",
"class_name": "Dense", "config": {"name": "dd", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "units":
2, "activation": "relu", "use_bias": true, "kernel_initializer": {"module":
"keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null, "input_axes":
null, "output_axes": null}, "registered_name": null}, "bias_initializer": {"module":
"keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null,
"bias_constraint": null, "quantization_config": null}, "registered_name": null}}
)json";

// layers.Masking(-1.0, name="mk")
const char* const kMaskingConfig = R"json(
{"name": "mk", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "mask_value": -1.0}
)json";

// Model E: keras.Sequential([keras.Input((5,), dtype="int32"),
//     layers.Embedding(10, 4, mask_zero=True, name="emb"),
//     layers.LSTM(3, return_sequences=True, name="lstm"),
//     layers.GRU(3, reset_after=False, return_sequences=True, name="gru"),
//     layers.SimpleRNN(2, go_backwards=True, name="rnn"), layers.Dense(1, name="out")],
//     name="seq_e"): kEJson is its to_json(), kEPred its predict(input_e()) with the formula
// weights.
const char* const kEJson = R"json(
{"module": "keras", "class_name": "Sequential", "config": {"name": "seq_e", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "layers": [{"module": "keras.layers", "class_name": "InputLayer",
"config": {"batch_shape": [null, 5], "dtype": "int32", "sparse": false, "ragged": false, "name":
"input_layer", "optional": false}, "registered_name": null}, {"module": "keras.layers",
"class_name": "Embedding", "config": {"name": "emb", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"input_dim": 10, "output_dim": 4, "embeddings_initializer": {"module": "keras.initializers",
"class_name": "RandomUniform", "config": {"seed": null, "minval": -0.05, "maxval": 0.05},
"registered_name": null}, "embeddings_regularizer": null, "activity_regularizer": null,
"embeddings_constraint": null, "mask_zero": true, "quantization_config": null},
"registered_name": null, "build_config": {"input_shape": [null, 5]}}, {"module": "keras.layers",
"class_name": "LSTM", "config": {"name": "lstm", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"return_sequences": true, "return_state": false, "go_backwards": false, "stateful": false,
"unroll": false, "zero_output_for_mask": false, "units": 3, "activation": "tanh",
"recurrent_activation": "sigmoid", "use_bias": true, "kernel_initializer": {"module":
"keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null, "input_axes":
null, "output_axes": null}, "registered_name": null}, "recurrent_initializer": {"module":
"keras.initializers", "class_name": "Orthogonal", "config": {"seed": null, "gain": 1.0},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "unit_forget_bias": true, "kernel_regularizer":
null, "recurrent_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "recurrent_constraint": null, "bias_constraint": null, "dropout":
0.0, "recurrent_dropout": 0.0, "seed": null}, "registered_name": null, "build_config":
{"input_shape": [null, 5, 4]}}, {"module": "keras.layers", "class_name": "GRU", "config":
{"name": "gru", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "return_sequences": true,
"return_state": false, "go_backwards": false, "stateful": false, "unroll": false,
"zero_output_for_mask": false, "units": 3, "activation": "tanh", "recurrent_activation":
"sigmoid", "use_bias": true, "kernel_initializer": {"module": "keras.initializers",
"class_name": "GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes":
null}, "registered_name": null}, "recurrent_initializer": {"module": "keras.initializers",
"class_name": "Orthogonal", "config": {"seed": null, "gain": 1.0}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "recurrent_regularizer": null,
"bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null,
"recurrent_constraint": null, "bias_constraint": null, "dropout": 0.0, "recurrent_dropout": 0.0,
"reset_after": false, "seed": null}, "registered_name": null, "build_config": {"input_shape":
[null, 5, 3]}}, {"module": "keras.layers", "class_name": "SimpleRNN", "config": {"name": "rnn",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}, "return_sequences": false, "return_state": false,
"go_backwards": true, "stateful": false, "unroll": false, "zero_output_for_mask": false,
"units": 2, "activation": "tanh", "use_bias": true, "kernel_initializer": {"module":
"keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null, "input_axes":
null, "output_axes": null}, "registered_name": null}, "recurrent_initializer": {"module":
"keras.initializers", "class_name": "Orthogonal", "config": {"seed": null, "gain": 1.0},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null,
"recurrent_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "recurrent_constraint": null, "bias_constraint": null, "dropout":
0.0, "recurrent_dropout": 0.0}, "registered_name": null, "build_config": {"input_shape": [null,
5, 3]}}, {"module": "keras.layers", "class_name": "Dense", "config": {"name": "out",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}, "units": 1, "activation": "linear", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config":
{"seed": null, "input_axes": null, "output_axes": null}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null,
"kernel_constraint": null, "bias_constraint": null, "quantization_config": null},
"registered_name": null, "build_config": {"input_shape": [null, 2]}}], "build_input_shape":
[null, 5]}, "registered_name": null, "build_config": {"input_shape": [null, 5]},
"compile_config": {}}
)json";

const std::vector<double> kEPred = {0.4270675778388977, 0.4345158636569977};

tf::Tensor input_e() {  // np.array([[1, 2, 3, 0, 0], [4, 5, 6, 7, 8]], "int32"): zeros masked
  return tf::convert_to_tensor(std::vector<int32_t>{1, 2, 3, 0, 0, 4, 5, 6, 7, 8}, {2, 5});
}

// Model F: keras.Sequential([keras.Input((4, 3)),
//     layers.TimeDistributed(layers.Dense(3, activation="tanh", name="inner"), name="td"),
//     layers.Bidirectional(layers.GRU(2, return_sequences=True, name="g"), name="bi_gru"),
//     layers.Bidirectional(layers.LSTM(2, name="l"), merge_mode="ave", name="bi_lstm"),
//     layers.Dense(1, name="out")], name="seq_f"): kFJson, kFPred as model E's.
const char* const kFJson = R"json(
{"module": "keras", "class_name": "Sequential", "config": {"name": "seq_f", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "layers": [{"module": "keras.layers", "class_name": "InputLayer",
"config": {"batch_shape": [null, 4, 3], "dtype": "float32", "sparse": false, "ragged": false,
"name": "input_layer_1", "optional": false}, "registered_name": null}, {"module":
"keras.layers", "class_name": "TimeDistributed", "config": {"name": "td", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "layer": {"module": "keras.layers", "class_name": "Dense", "config":
{"name": "inner", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "units": 3, "activation": "tanh",
"use_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name":
"GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer":
null, "kernel_constraint": null, "bias_constraint": null, "quantization_config": null},
"registered_name": null, "build_config": {"input_shape": [null, 3]}}}, "registered_name": null,
"build_config": {"input_shape": [null, 4, 3]}}, {"module": "keras.layers", "class_name":
"Bidirectional", "config": {"name": "bi_gru", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"merge_mode": "concat", "layer": {"module": "keras.layers", "class_name": "GRU", "config":
{"name": "forward_g", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "return_sequences":
true, "return_state": false, "go_backwards": false, "stateful": false, "unroll": false,
"zero_output_for_mask": true, "units": 2, "activation": "tanh", "recurrent_activation":
"sigmoid", "use_bias": true, "kernel_initializer": {"module": "keras.initializers",
"class_name": "GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes":
null}, "registered_name": null}, "recurrent_initializer": {"module": "keras.initializers",
"class_name": "Orthogonal", "config": {"seed": null, "gain": 1.0}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "recurrent_regularizer": null,
"bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null,
"recurrent_constraint": null, "bias_constraint": null, "dropout": 0.0, "recurrent_dropout": 0.0,
"reset_after": true, "seed": null}, "registered_name": null, "build_config": {"input_shape":
[null, 4, 3]}}, "backward_layer": {"module": "keras.layers", "class_name": "GRU", "config":
{"name": "backward_g", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "return_sequences":
true, "return_state": false, "go_backwards": true, "stateful": false, "unroll": false,
"zero_output_for_mask": true, "units": 2, "activation": "tanh", "recurrent_activation":
"sigmoid", "use_bias": true, "kernel_initializer": {"module": "keras.initializers",
"class_name": "GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes":
null}, "registered_name": null}, "recurrent_initializer": {"module": "keras.initializers",
"class_name": "Orthogonal", "config": {"seed": null, "gain": 1.0}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "recurrent_regularizer": null,
"bias_regularizer": null, "activity_regularizer": null, "kernel_constraint": null,
"recurrent_constraint": null, "bias_constraint": null, "dropout": 0.0, "recurrent_dropout": 0.0,
"reset_after": true, "seed": null}, "registered_name": null, "build_config": {"input_shape":
[null, 4, 3]}}}, "registered_name": null, "build_config": {"input_shape": [null, 4, 3]}},
{"module": "keras.layers", "class_name": "Bidirectional", "config": {"name": "bi_lstm",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}, "merge_mode": "ave", "layer": {"module": "keras.layers",
"class_name": "LSTM", "config": {"name": "forward_l", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"return_sequences": false, "return_state": false, "go_backwards": false, "stateful": false,
"unroll": false, "zero_output_for_mask": false, "units": 2, "activation": "tanh",
"recurrent_activation": "sigmoid", "use_bias": true, "kernel_initializer": {"module":
"keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null, "input_axes":
null, "output_axes": null}, "registered_name": null}, "recurrent_initializer": {"module":
"keras.initializers", "class_name": "Orthogonal", "config": {"seed": null, "gain": 1.0},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "unit_forget_bias": true, "kernel_regularizer":
null, "recurrent_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "recurrent_constraint": null, "bias_constraint": null, "dropout":
0.0, "recurrent_dropout": 0.0, "seed": null}, "registered_name": null, "build_config":
{"input_shape": [null, 4, 4]}}, "backward_layer": {"module": "keras.layers", "class_name":
"LSTM", "config": {"name": "backward_l", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"return_sequences": false, "return_state": false, "go_backwards": true, "stateful": false,
"unroll": false, "zero_output_for_mask": false, "units": 2, "activation": "tanh",
"recurrent_activation": "sigmoid", "use_bias": true, "kernel_initializer": {"module":
"keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null, "input_axes":
null, "output_axes": null}, "registered_name": null}, "recurrent_initializer": {"module":
"keras.initializers", "class_name": "Orthogonal", "config": {"seed": null, "gain": 1.0},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "unit_forget_bias": true, "kernel_regularizer":
null, "recurrent_regularizer": null, "bias_regularizer": null, "activity_regularizer": null,
"kernel_constraint": null, "recurrent_constraint": null, "bias_constraint": null, "dropout":
0.0, "recurrent_dropout": 0.0, "seed": null}, "registered_name": null, "build_config":
{"input_shape": [null, 4, 4]}}}, "registered_name": null, "build_config": {"input_shape": [null,
4, 4]}}, {"module": "keras.layers", "class_name": "Dense", "config": {"name": "out",
"trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name":
"float32"}, "registered_name": null}, "units": 1, "activation": "linear", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config":
{"seed": null, "input_axes": null, "output_axes": null}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null,
"kernel_constraint": null, "bias_constraint": null, "quantization_config": null},
"registered_name": null, "build_config": {"input_shape": [null, 2]}}], "build_input_shape":
[null, 4, 3]}, "registered_name": null, "build_config": {"input_shape": [null, 4, 3]},
"compile_config": {}}
)json";

const std::vector<double> kFPred = {0.24843451380729675, 0.24829478561878204};

tf::Tensor input_f() {  // np.cos(0.1 * np.arange(24)).reshape(2, 4, 3)
  std::vector<double> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.1 * double(i));
  return tf::cast(tf::convert_to_tensor(v, {2, 4, 3}), tf::float32);
}

// layers.MultiHeadAttention(2, 3, value_dim=4, dropout=0.1, use_bias=False, output_shape=(5,),
//     attention_axes=(1,), kernel_initializer=I.HeNormal(seed=2), bias_regularizer=R.L2(0.5),
//     seed=7, name="mha")
const char* const kMultiHeadAttentionConfig = R"json(
{"name": "mha", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "num_heads": 2, "key_dim": 3,
"value_dim": 4, "dropout": 0.1, "use_bias": false, "use_gate": false, "output_shape": [5],
"attention_axes": [1], "sliding_window": null, "kernel_initializer": {"module":
"keras.initializers", "class_name": "HeNormal", "config": {"seed": 2, "input_axes": null,
"output_axes": null}, "registered_name": null}, "bias_initializer": {"module":
"keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": {"module": "keras.regularizers", "class_name":
"L2", "config": {"l2": 0.5}, "registered_name": null}, "activity_regularizer": null,
"kernel_constraint": null, "bias_constraint": null, "seed": 7}
)json";

// layers.Attention(use_scale=True, score_mode="concat", dropout=0.2, seed=4, name="att")
const char* const kAttentionConfig = R"json(
{"name": "att", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "use_scale": true, "score_mode":
"concat", "dropout": 0.2, "seed": 4}
)json";

// layers.AdditiveAttention(use_scale=False, dropout=0.3, seed=9, name="aa")
const char* const kAdditiveAttentionConfig = R"json(
{"name": "aa", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "use_scale": false, "dropout": 0.3,
"seed": 9}
)json";

// Model G: x = keras.Input((4, 6), name="x")
//   y = layers.MultiHeadAttention(2, 3, name="mha")(x, x)
//   z = layers.LayerNormalization(name="ln")(layers.Add(name="add")([x, y]))
//   a = layers.Attention(use_scale=True, score_mode="concat", name="att")([z, z])
//   b = layers.AdditiveAttention(name="addatt")([a, a])
//   o = layers.Dense(2, name="out")(layers.Concatenate(name="cat")([z, b]))
//   keras.Model(x, o, name="blk"): kGJson, kGPred as model E's.
const char* const kGJson = R"json(
{"module": "keras.src.models.functional", "class_name": "Functional", "config": {"name": "blk",
"trainable": true, "layers": [{"module": "keras.layers", "class_name": "InputLayer", "config":
{"batch_shape": [null, 4, 6], "dtype": "float32", "sparse": false, "ragged": false, "name": "x",
"optional": false}, "registered_name": null, "name": "x", "inbound_nodes": []}, {"module":
"keras.layers", "class_name": "MultiHeadAttention", "config": {"name": "mha", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "num_heads": 2, "key_dim": 3, "value_dim": 3, "dropout": 0.0,
"use_bias": true, "use_gate": false, "output_shape": null, "attention_axes": [1],
"sliding_window": null, "kernel_initializer": {"module": "keras.initializers", "class_name":
"GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null, "bias_regularizer":
null, "activity_regularizer": null, "kernel_constraint": null, "bias_constraint": null, "seed":
null}, "registered_name": null, "build_config": {"shapes_dict": {"query_shape": [null, 4, 6],
"value_shape": [null, 4, 6]}}, "name": "mha", "inbound_nodes": [{"args": [{"class_name":
"__keras_tensor__", "config": {"shape": [null, 4, 6], "dtype": "float32", "keras_history": ["x",
0, 0]}}, {"class_name": "__keras_tensor__", "config": {"shape": [null, 4, 6], "dtype":
"float32", "keras_history": ["x", 0, 0]}}], "kwargs": {}}]}, {"module": "keras.layers",
"class_name": "Add", "config": {"name": "add", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}},
"registered_name": null, "build_config": {"input_shape": [[null, 4, 6], [null, 4, 6]]}, "name":
"add", "inbound_nodes": [{"args": [[{"class_name": "__keras_tensor__", "config": {"shape":
[null, 4, 6], "dtype": "float32", "keras_history": ["x", 0, 0]}}, {"class_name":
"__keras_tensor__", "config": {"shape": [null, 4, 6], "dtype": "float32", "keras_history":
["mha", 0, 0]}}]], "kwargs": {}}]}, {"module": "keras.layers", "class_name":
"LayerNormalization", "config": {"name": "ln", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "axis":
[-1], "epsilon": 0.001, "center": true, "scale": true, "rms_scaling": false, "beta_initializer":
{"module": "keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"gamma_initializer": {"module": "keras.initializers", "class_name": "Ones", "config": {},
"registered_name": null}, "beta_regularizer": null, "gamma_regularizer": null,
"beta_constraint": null, "gamma_constraint": null}, "registered_name": null, "build_config":
{"input_shape": [null, 4, 6]}, "name": "ln", "inbound_nodes": [{"args": [{"class_name":
"__keras_tensor__", "config": {"shape": [null, 4, 6], "dtype": "float32", "keras_history":
["add", 0, 0]}}], "kwargs": {}}]}, {"module": "keras.layers", "class_name": "Attention",
"config": {"name": "att", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "use_scale": true,
"score_mode": "concat", "dropout": 0.0, "seed": null}, "registered_name": null, "build_config":
{"input_shape": [[null, 4, 6], [null, 4, 6]]}, "name": "att", "inbound_nodes": [{"args":
[[{"class_name": "__keras_tensor__", "config": {"shape": [null, 4, 6], "dtype": "float32",
"keras_history": ["ln", 0, 0]}}, {"class_name": "__keras_tensor__", "config": {"shape": [null,
4, 6], "dtype": "float32", "keras_history": ["ln", 0, 0]}}]], "kwargs": {}}]}, {"module":
"keras.layers", "class_name": "AdditiveAttention", "config": {"name": "addatt", "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "use_scale": true, "dropout": 0.0, "seed": null}, "registered_name":
null, "build_config": {"input_shape": [[null, 4, 6], [null, 4, 6]]}, "name": "addatt",
"inbound_nodes": [{"args": [[{"class_name": "__keras_tensor__", "config": {"shape": [null, 4,
6], "dtype": "float32", "keras_history": ["att", 0, 0]}}, {"class_name": "__keras_tensor__",
"config": {"shape": [null, 4, 6], "dtype": "float32", "keras_history": ["att", 0, 0]}}]],
"kwargs": {}}]}, {"module": "keras.layers", "class_name": "Concatenate", "config": {"name":
"cat", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config":
{"name": "float32"}, "registered_name": null}, "axis": -1}, "registered_name": null,
"build_config": {"input_shape": [[null, 4, 6], [null, 4, 6]]}, "name": "cat", "inbound_nodes":
[{"args": [[{"class_name": "__keras_tensor__", "config": {"shape": [null, 4, 6], "dtype":
"float32", "keras_history": ["ln", 0, 0]}}, {"class_name": "__keras_tensor__", "config":
{"shape": [null, 4, 6], "dtype": "float32", "keras_history": ["addatt", 0, 0]}}]], "kwargs":
{}}]}, {"module": "keras.layers", "class_name": "Dense", "config": {"name": "out", "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "units": 2, "activation": "linear", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config":
{"seed": null, "input_axes": null, "output_axes": null}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null,
"kernel_constraint": null, "bias_constraint": null, "quantization_config": null},
"registered_name": null, "build_config": {"input_shape": [null, 4, 12]}, "name": "out",
"inbound_nodes": [{"args": [{"class_name": "__keras_tensor__", "config": {"shape": [null, 4,
12], "dtype": "float32", "keras_history": ["cat", 0, 0]}}], "kwargs": {}}]}], "input_layers":
["x", 0, 0], "output_layers": ["out", 0, 0]}, "registered_name": "Functional", "build_config":
{"input_shape": null}, "compile_config": {}}
)json";

const std::vector<double> kGPred = {
    0.5472061634063721,  1.0545423030853271,   0.5515730381011963,  1.0816236734390259,
    0.530593752861023,   1.1121875047683716,   -0.7767995595932007, -0.11072086542844772,
    -0.8243272304534912, -0.26392269134521484, 0.6487725973129272,  1.1399873495101929,
    0.6564856767654419,  1.1705278158187866,   0.6488054990768433,  1.2014455795288086};

tf::Tensor input_g() {  // np.cos(0.2 * np.arange(48)).reshape(2, 4, 6)
  std::vector<double> v(48);
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.2 * double(i));
  return tf::cast(tf::convert_to_tensor(v, {2, 4, 6}), tf::float32);
}

// layers.Normalization(axis=None, mean=2.0, variance=4.0, invert=True, name="n2")
const char* const kNormalizationConfig = R"json(
{"name": "n2", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "axis": [], "invert": true, "mean":
2.0, "variance": 4.0}
)json";

// layers.Discretization(bin_boundaries=[0., 1.5], epsilon=0.05, name="disc") (Keras writes no
// "trainable" and the dtype as a string here)
const char* const kDiscretizationConfig = R"json(
{"bin_boundaries": [0.0, 1.5], "num_bins": null, "epsilon": 0.05, "output_mode": "int",
"sparse": false, "name": "disc", "dtype": "float32"}
)json";

// layers.CategoryEncoding(num_tokens=5, output_mode="count", name="ce")
const char* const kCategoryEncodingConfig = R"json(
{"name": "ce", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "num_tokens": 5, "output_mode":
"count"}
)json";

// Model H: keras.Sequential([keras.Input((3,)), layers.Normalization(mean=[1., 2., 3.],
//     variance=[4., 5., 6.], name="norm"), layers.Dense(2, name="out")], name="seq_h"): kHJson,
// and kHPred its predict(np.cos(0.5 * np.arange(6)).reshape(2, 3)) with the formula weights (the
// Dense's: Keras' Normalization has no variables when given its mean and variance).
const char* const kHJson = R"json(
{"module": "keras", "class_name": "Sequential", "config": {"name": "seq_h", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "layers": [{"module": "keras.layers", "class_name": "InputLayer",
"config": {"batch_shape": [null, 3], "dtype": "float32", "sparse": false, "ragged": false,
"name": "input_layer", "optional": false}, "registered_name": null}, {"module": "keras.layers",
"class_name": "Normalization", "config": {"name": "norm", "trainable": true, "dtype": {"module":
"keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"axis": [-1], "invert": false, "mean": [1.0, 2.0, 3.0], "variance": [4.0, 5.0, 6.0]},
"registered_name": null, "build_config": {"input_shape": [null, 3]}}, {"module": "keras.layers",
"class_name": "Dense", "config": {"name": "out", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "units":
2, "activation": "linear", "use_bias": true, "kernel_initializer": {"module":
"keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null, "input_axes":
null, "output_axes": null}, "registered_name": null}, "bias_initializer": {"module":
"keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "bias_regularizer": null, "kernel_constraint": null,
"bias_constraint": null, "quantization_config": null}, "registered_name": null, "build_config":
{"input_shape": [null, 3]}}], "build_input_shape": [null, 3]}, "registered_name": null,
"build_config": {"input_shape": [null, 3]}, "compile_config": {}}
)json";

const std::vector<double> kHPred = {-0.18746930360794067, -0.20990151166915894, -0.655225396156311,
                                    -0.816241979598999};

// The image layers (Keras 3.15.1, json.dumps(layer.get_config())):
//   layers.Resizing(8, 6, interpolation="nearest", crop_to_aspect_ratio=True, name="rs")
//   layers.CenterCrop(4, 5, name="cc"); layers.RandomCrop(4, 5, seed=3, name="rc")
//   layers.RandomFlip("vertical", seed=2, name="rf")
//   layers.RandomRotation(0.2, fill_mode="constant", interpolation="nearest", seed=1,
//       fill_value=0.5, name="rr")
//   layers.RandomZoom((-0.2, 0.2), width_factor=(-0.1, 0.3), seed=4, name="rz")
//   layers.RandomTranslation((-0.1, 0.1), (-0.2, 0.2), name="rt")
//   layers.RandomContrast(0.3, value_range=(0., 1.), seed=5, name="rcon")
//   layers.RandomBrightness((-0.2, 0.1), value_range=(0., 1.), name="rb")
//   layers.RandomGrayscale(0.3, name="rg"); layers.RandomSaturation(0.4, name="rsat")
//   layers.RandomHue(0.2, name="rh")
const char* const kResizingConfig = R"json(
{"name": "rs", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"height": 8, "width": 6, "interpolation": "nearest", "crop_to_aspect_ratio": true,
"pad_to_aspect_ratio": false, "fill_mode": "constant", "fill_value": 0.0, "antialias": false}
)json";
const char* const kCenterCropConfig = R"json(
{"name": "cc", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"height": 4, "width": 5}
)json";
const char* const kRandomCropConfig = R"json(
{"name": "rc", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"height": 4, "width": 5, "seed": 3}
)json";
const char* const kRandomFlipConfig = R"json(
{"name": "rf", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last", "seed":
2, "mode": "vertical"}
)json";
const char* const kRandomRotationConfig = R"json(
{"name": "rr", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"factor": [-0.2, 0.2], "fill_mode": "constant", "fill_value": 0.5, "interpolation": "nearest",
"seed": 1}
)json";
const char* const kRandomZoomConfig = R"json(
{"name": "rz", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"height_factor": [-0.2, 0.2], "width_factor": [-0.1, 0.3], "fill_mode": "reflect",
"interpolation": "bilinear", "seed": 4, "fill_value": 0.0}
)json";
const char* const kRandomTranslationConfig = R"json(
{"name": "rt", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"height_factor": [-0.1, 0.1], "width_factor": [-0.2, 0.2], "fill_mode": "reflect",
"interpolation": "bilinear", "seed": null, "fill_value": 0.0}
)json";
const char* const kRandomContrastConfig = R"json(
{"name": "rcon", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"factor": [0, 0.3], "value_range": [0.0, 1.0], "seed": 5}
)json";
const char* const kRandomBrightnessConfig = R"json(
{"name": "rb", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"factor": [-0.2, 0.1], "value_range": [0.0, 1.0], "seed": null}
)json";
const char* const kRandomGrayscaleConfig = R"json(
{"name": "rg", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"factor": 0.3}
)json";
const char* const kRandomSaturationConfig = R"json(
{"name": "rsat", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"factor": [-0.4, 0.4], "value_range": [0, 255], "seed": null}
)json";
const char* const kRandomHueConfig = R"json(
{"name": "rh", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "data_format": "channels_last",
"factor": [0, 0.2], "value_range": [0, 255], "seed": null}
)json";

// Model R: keras.Sequential([keras.Input((4, 3)),
//     layers.RNN(layers.LSTMCell(3, name="lc"), return_sequences=True, name="r1"),
//     layers.RNN(layers.StackedRNNCells([layers.SimpleRNNCell(2, name="sc"),
//         layers.GRUCell(2, reset_after=False, name="gc")], name="st"), go_backwards=True,
//         name="r2"),
//     layers.Dense(1, name="out")], name="seq_r"): kRJson, and kRPred its predict(input_f())
// with the formula weights.
const char* const kRJson = R"json(
{"module": "keras", "class_name": "Sequential", "config": {"name": "seq_r", "trainable": true,
"dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "layers": [{"module": "keras.layers", "class_name": "InputLayer",
"config": {"batch_shape": [null, 4, 3], "dtype": "float32", "sparse": false, "ragged": false,
"name": "input_layer", "optional": false}, "registered_name": null}, {"module": "keras.layers",
"class_name": "RNN", "config": {"name": "r1", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null},
"return_sequences": true, "return_state": false, "go_backwards": false, "stateful": false,
"unroll": false, "zero_output_for_mask": false, "cell": {"module": "keras.layers", "class_name":
"LSTMCell", "config": {"name": "lc", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "units":
3, "activation": "tanh", "recurrent_activation": "sigmoid", "use_bias": true,
"unit_forget_bias": true, "kernel_initializer": {"module": "keras.initializers", "class_name":
"GlorotUniform", "config": {"seed": null, "input_axes": null, "output_axes": null},
"registered_name": null}, "recurrent_initializer": {"module": "keras.initializers",
"class_name": "Orthogonal", "config": {"seed": null, "gain": 1.0}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "recurrent_regularizer": null,
"bias_regularizer": null, "kernel_constraint": null, "recurrent_constraint": null,
"bias_constraint": null, "dropout": 0.0, "recurrent_dropout": 0.0, "seed": null},
"registered_name": null, "build_config": {"input_shape": [null, 3]}}}, "registered_name": null,
"build_config": {"input_shape": [null, 4, 3]}}, {"module": "keras.layers", "class_name": "RNN",
"config": {"name": "r2", "trainable": true, "dtype": {"module": "keras", "class_name":
"DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "return_sequences":
false, "return_state": false, "go_backwards": true, "stateful": false, "unroll": false,
"zero_output_for_mask": false, "cell": {"module": "keras.layers", "class_name":
"StackedRNNCells", "config": {"name": "st", "trainable": true, "dtype": {"module": "keras",
"class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": null}, "cells":
[{"module": "keras.layers", "class_name": "SimpleRNNCell", "config": {"name": "sc", "trainable":
true, "dtype": {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "units": 2, "activation": "tanh", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config":
{"seed": null, "input_axes": null, "output_axes": null}, "registered_name": null},
"recurrent_initializer": {"module": "keras.initializers", "class_name": "Orthogonal", "config":
{"seed": null, "gain": 1.0}, "registered_name": null}, "bias_initializer": {"module":
"keras.initializers", "class_name": "Zeros", "config": {}, "registered_name": null},
"kernel_regularizer": null, "recurrent_regularizer": null, "bias_regularizer": null,
"kernel_constraint": null, "recurrent_constraint": null, "bias_constraint": null, "dropout":
0.0, "recurrent_dropout": 0.0, "seed": null}, "registered_name": null, "build_config":
{"input_shape": [null, 3]}}, {"module": "keras.layers", "class_name": "GRUCell", "config":
{"name": "gc", "trainable": true, "dtype": {"module": "keras", "class_name": "DTypePolicy",
"config": {"name": "float32"}, "registered_name": null}, "units": 2, "activation": "tanh",
"recurrent_activation": "sigmoid", "use_bias": true, "kernel_initializer": {"module":
"keras.initializers", "class_name": "GlorotUniform", "config": {"seed": null, "input_axes":
null, "output_axes": null}, "registered_name": null}, "recurrent_initializer": {"module":
"keras.initializers", "class_name": "Orthogonal", "config": {"seed": null, "gain": 1.0},
"registered_name": null}, "bias_initializer": {"module": "keras.initializers", "class_name":
"Zeros", "config": {}, "registered_name": null}, "kernel_regularizer": null,
"recurrent_regularizer": null, "bias_regularizer": null, "kernel_constraint": null,
"recurrent_constraint": null, "bias_constraint": null, "dropout": 0.0, "recurrent_dropout": 0.0,
"reset_after": false, "seed": null}, "registered_name": null, "build_config": {"input_shape":
[null, 2]}}]}, "registered_name": null, "build_config": {"input_shape": [null, 3]}}},
"registered_name": null, "build_config": {"input_shape": [null, 4, 3]}}, {"module":
"keras.layers", "class_name": "Dense", "config": {"name": "out", "trainable": true, "dtype":
{"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"},
"registered_name": null}, "units": 1, "activation": "linear", "use_bias": true,
"kernel_initializer": {"module": "keras.initializers", "class_name": "GlorotUniform", "config":
{"seed": null, "input_axes": null, "output_axes": null}, "registered_name": null},
"bias_initializer": {"module": "keras.initializers", "class_name": "Zeros", "config": {},
"registered_name": null}, "kernel_regularizer": null, "bias_regularizer": null,
"kernel_constraint": null, "bias_constraint": null, "quantization_config": null},
"registered_name": null, "build_config": {"input_shape": [null, 2]}}], "build_input_shape":
[null, 4, 3]}, "registered_name": null, "build_config": {"input_shape": [null, 4, 3]},
"compile_config": {}}
)json";
const std::vector<double> kRPred = {0.4053768813610077, 0.40745142102241516};

// The layers of a model's JSON after its InputLayer.
std::vector<Config> layer_configs(const Config& model) {
  std::vector<Config> out;
  for (const Config& l : model["config"]["layers"])
    if (l["class_name"] != "InputLayer") out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("serialization: recurrent layers write Keras' get_config", "[keras][serialization]") {
  L::SimpleRNN srnn(4, {.activation = "relu",
                        .use_bias = false,
                        .kernel_initializer = K::initializers::HeNormal(1),
                        .recurrent_regularizer = K::regularizers::L2(0.01),
                        .return_sequences = true,
                        .zero_output_for_mask = true,
                        .dropout = 0.25,
                        .seed = 3,
                        .name = "srnn"});
  CHECK(K::saving::get_config(srnn) == Config::parse(kSimpleRNNConfig));
  L::LSTM lstm(3, {.activation = "relu",
                   .recurrent_activation = "softsign",
                   .unit_forget_bias = false,
                   .return_sequences = true,
                   .go_backwards = true,
                   .dropout = 0.1,
                   .recurrent_dropout = 0.2,
                   .seed = 5,
                   .name = "l"});
  CHECK(K::saving::get_config(lstm) == Config::parse(kLSTMConfig));
  L::GRU gru(5, {.activation = "sigmoid",
                 .recurrent_activation = "tanh",
                 .bias_initializer = K::initializers::Constant(0.5),
                 .kernel_regularizer = K::regularizers::L1(0.5),
                 .go_backwards = true,
                 .reset_after = false,
                 .recurrent_dropout = 0.5,
                 .seed = 11,
                 .name = "gru_b"});
  CHECK(K::saving::get_config(gru) == Config::parse(kGRUConfig));
}

TEST_CASE("serialization: Bidirectional TimeDistributed and Masking write Keras' get_config",
          "[keras][serialization]") {
  L::Bidirectional bi(L::LSTM(3, {.return_sequences = true, .name = "l"}), "mul", "bi");
  CHECK(K::saving::get_config(bi) == Config::parse(kBidirectionalConfig));
  L::TimeDistributed td(L::Dense(2, {.activation = "relu", .name = "dd"}), "td");
  CHECK(K::saving::get_config(td) == Config::parse(kTimeDistributedConfig));
  CHECK(K::saving::get_config(L::Masking(-1.0, "mk")) == Config::parse(kMaskingConfig));
}

TEST_CASE("serialization: Keras' configs of the sequence layers load and write back unchanged",
          "[keras][serialization]") {
  const std::vector<std::pair<const char*, const char*>> cases = {
      {"SimpleRNN", kSimpleRNNConfig},
      {"LSTM", kLSTMConfig},
      {"GRU", kGRUConfig},
      {"Bidirectional", kBidirectionalConfig},
      {"TimeDistributed", kTimeDistributedConfig},
      {"Masking", kMaskingConfig},
      {"MultiHeadAttention", kMultiHeadAttentionConfig},
      {"Attention", kAttentionConfig},
      {"AdditiveAttention", kAdditiveAttentionConfig},
      {"Normalization", kNormalizationConfig},
      {"CategoryEncoding", kCategoryEncodingConfig}};
  for (const auto& [cls, json] : cases) {
    CAPTURE(cls);
    K::Layer l = K::saving::from_config_json(cls, json);
    CHECK(l.class_name() == cls);
    CHECK(K::saving::get_config(l) == Config::parse(json));
  }
  // unroll is kept (it decides how a trace runs the timesteps).
  for (const char* cls : {"SimpleRNN", "LSTM", "GRU"}) {
    CAPTURE(cls);
    Config config = Config::parse(std::string(cls) == "SimpleRNN" ? kSimpleRNNConfig
                                  : std::string(cls) == "LSTM"    ? kLSTMConfig
                                                                  : kGRUConfig);
    config["unroll"] = true;
    const K::Layer l = K::saving::from_config_json(cls, config.dump());
    CHECK(K::saving::get_config(l)["unroll"] == Config(true));
  }
  // The options reached the layers, not only the configs.
  K::Layer loaded = K::saving::from_config_json("Bidirectional", kBidirectionalConfig);
  const auto y = loaded(tf::ones({1, 4, 2}, tf::float32), false);
  CHECK(y.shape() == tf::TensorShape({1, 4, 3}));  // "mul": not concatenated
  const K::Layer mk = K::saving::from_config_json("Masking", kMaskingConfig);
  const tf::Tensor x = tf::convert_to_tensor(std::vector<float>{-1, -1, 2, 3}, {1, 2, 2});
  check_values(tf::cast(mk.compute_mask(x), tf::float32), {0, 1});  // -1 steps are masked
}

TEST_CASE(
    "serialization: Keras JSON with a masked Embedding LSTM GRU and SimpleRNN predicts as "
    "Keras",
    "[keras][serialization]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    CAPTURE(device.to_string());
    K::Model model = K::models::model_from_json(kEJson);
    CHECK(model.name() == "seq_e");
    tf::testing::set_formula_weights(model);
    check_values(model(input_e(), false), kEPred, 1e-5, 1e-6);
  }
}

TEST_CASE(
    "serialization: Keras JSON with TimeDistributed and Bidirectional GRU and LSTM predicts "
    "as Keras",
    "[keras][serialization]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    CAPTURE(device.to_string());
    K::Model model = K::models::model_from_json(kFJson);
    CHECK(model.name() == "seq_f");
    tf::testing::set_formula_weights(model);
    check_values(model(input_f(), false), kFPred, 1e-5, 1e-6);
  }
}

TEST_CASE("serialization: to_json of the sequence models writes Keras' layer configs",
          "[keras][serialization]") {
  for (const char* json : {kEJson, kFJson}) {
    const Config keras = Config::parse(json);
    const Config ours = Config::parse(K::models::to_json(K::models::model_from_json(json)));
    const auto theirs = layer_configs(keras);
    const auto mine = layer_configs(ours);
    REQUIRE(mine.size() == theirs.size());
    for (size_t i = 0; i < mine.size(); ++i) {
      CAPTURE(theirs[i]["config"]["name"]);
      CHECK(mine[i] == theirs[i]);
    }
  }
}

TEST_CASE("serialization: save_model keeps sequence layers' weights under Keras' paths",
          "[keras][serialization]") {
  TempDir dir;
  K::Model f = K::models::model_from_json(kFJson);
  tf::testing::set_formula_weights(f);
  K::models::save_model(f, dir / "f.tfmodel");
  // Keras 3.15.1's F.save_weights("f.weights.h5"), its datasets and shapes (Keras names the
  // groups after the classes, "time_distributed", "bidirectional", "bidirectional_1", "dense";
  // tapeflow after the layers, "td", "bi_gru", "bi_lstm", "out").
  const std::map<std::string, tf::TensorShape> keras = {
      {"layers/bi_gru/backward_layer/cell/vars/0", {3, 6}},
      {"layers/bi_gru/backward_layer/cell/vars/1", {2, 6}},
      {"layers/bi_gru/backward_layer/cell/vars/2", {2, 6}},
      {"layers/bi_gru/forward_layer/cell/vars/0", {3, 6}},
      {"layers/bi_gru/forward_layer/cell/vars/1", {2, 6}},
      {"layers/bi_gru/forward_layer/cell/vars/2", {2, 6}},
      {"layers/bi_lstm/backward_layer/cell/vars/0", {4, 8}},
      {"layers/bi_lstm/backward_layer/cell/vars/1", {2, 8}},
      {"layers/bi_lstm/backward_layer/cell/vars/2", {8}},
      {"layers/bi_lstm/forward_layer/cell/vars/0", {4, 8}},
      {"layers/bi_lstm/forward_layer/cell/vars/1", {2, 8}},
      {"layers/bi_lstm/forward_layer/cell/vars/2", {8}},
      {"layers/out/vars/0", {2, 1}},
      {"layers/out/vars/1", {1}},
      {"layers/td/layer/vars/0", {3, 3}},
      {"layers/td/layer/vars/1", {3}}};
  K::safetensors::Reader reader(dir / "f.tfmodel");
  std::map<std::string, tf::TensorShape> saved;
  for (const auto& info : reader.tensors()) saved[info.name] = info.shape;
  CHECK(saved == keras);

  K::Model e = K::models::model_from_json(kEJson);
  tf::testing::set_formula_weights(e);
  K::models::save_model(e, dir / "e.tfmodel");
  K::safetensors::Reader er(dir / "e.tfmodel");
  for (const char* name :
       {"layers/emb/vars/0", "layers/lstm/cell/vars/0", "layers/lstm/cell/vars/2",
        "layers/gru/cell/vars/2", "layers/rnn/cell/vars/1"}) {
    CAPTURE(name);
    CHECK(er.find(name) != nullptr);
  }
  CHECK(er.find("layers/gru/cell/vars/2")->shape == tf::TensorShape({9}));  // reset_after=False
}

TEST_CASE("serialization: save_model and load_model round trip the sequence models",
          "[keras][serialization]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    CAPTURE(device.to_string());
    TempDir dir;
    for (const char* json : {kEJson, kFJson}) {
      K::Model model = K::models::model_from_json(json);
      tf::testing::set_formula_weights(model);
      const tf::Tensor x = json == kEJson ? input_e() : input_f();
      K::models::save_model(model, dir / "m.tfmodel");
      K::Model loaded = K::models::load_model(dir / "m.tfmodel");
      check_close(loaded(x, false), model(x, false), 0.0, 0.0);
      check_values(loaded(x, false), json == kEJson ? kEPred : kFPred, 1e-5, 1e-6);
      CHECK(loaded.to_json() == K::models::to_json(model));
    }
  }
}

TEST_CASE("serialization: bad sequence layer configs name the class and the key",
          "[keras][serialization]") {
  auto fails = [](const char* cls, const Config& c, std::vector<std::string> parts) {
    CAPTURE(cls, c.dump());
    tf::testing::require_error([&] { K::saving::from_config(cls, c); }, parts);
  };
  Config lstm = Config::parse(kLSTMConfig);
  Config bad = lstm;
  bad["time_major"] = false;
  fails("LSTM", bad, {"LSTM", "time_major", "not supported"});
  bad = lstm;
  bad["units"] = "3";
  fails("LSTM", bad, {"LSTM", "units", "integer"});
  bad = lstm;
  bad["stateful"] = "yes";
  fails("LSTM", bad, {"LSTM", "stateful"});
  Config stateful = lstm;  // Keras' stateful layers load (docs/keras_recurrent.md)
  stateful["stateful"] = true;
  CHECK(K::saving::get_config(K::saving::from_config("LSTM", stateful))["stateful"] == true);
  bad = lstm;
  bad["return_state"] = true;
  fails("LSTM", bad, {"LSTM", "return_state", "not supported"});
  bad = lstm;
  bad["recurrent_constraint"] =
      Config::parse(R"({"module": "keras.constraints", "class_name": "Clip", "config": {}})");
  fails("LSTM", bad, {"LSTM", "recurrent_constraint", "\"Clip\""});
  bad = lstm;
  bad["use_cudnn"] = "sometimes";
  fails("LSTM", bad, {"LSTM", "use_cudnn"});
  // Keys another class has.
  Config srnn = Config::parse(kSimpleRNNConfig);
  srnn["recurrent_activation"] = "sigmoid";
  fails("SimpleRNN", srnn, {"SimpleRNN", "recurrent_activation"});
  Config gru = Config::parse(kGRUConfig);
  gru["unit_forget_bias"] = true;
  fails("GRU", gru, {"GRU", "unit_forget_bias"});

  Config bi = Config::parse(kBidirectionalConfig);
  bad = bi;
  bad["merge_mode"] = nullptr;  // Keras' two outputs
  fails("Bidirectional", bad, {"Bidirectional", "merge_mode"});
  bad = bi;
  bad["backward_layer"]["config"]["go_backwards"] = false;
  fails("Bidirectional", bad, {"Bidirectional", "backward_layer", "go_backwards"});
  bad = bi;
  bad["layer"]["config"]["stateful"] = true;
  fails("Bidirectional", bad, {"Bidirectional", "layer", "LSTM", "stateful"});
  bad = bi;
  bad["layer"] = Config::parse(R"({"class_name": "Dense", "config": {"units": 2}})");
  bad.erase("backward_layer");
  fails("Bidirectional", bad, {"Bidirectional", "layer", "Dense"});
  Config td = Config::parse(kTimeDistributedConfig);
  td["layer"] = 3;
  fails("TimeDistributed", td, {"TimeDistributed", "layer"});
  Config mk = Config::parse(kMaskingConfig);
  mk["mask_value"] = "zero";
  fails("Masking", mk, {"Masking", "mask_value", "number"});
}

TEST_CASE("serialization: attention layers write Keras' get_config", "[keras][serialization]") {
  L::MultiHeadAttention mha(2, 3,
                            {.value_dim = 4,
                             .dropout = 0.1,
                             .use_bias = false,
                             .output_shape = {5},
                             .attention_axes = {1},
                             .kernel_initializer = K::initializers::HeNormal(2),
                             .bias_regularizer = K::regularizers::L2(0.5),
                             .seed = 7,
                             .name = "mha"});
  CHECK(K::saving::get_config(mha) == Config::parse(kMultiHeadAttentionConfig));
  L::Attention att(
      {.use_scale = true, .score_mode = "concat", .dropout = 0.2, .seed = 4, .name = "att"});
  CHECK(K::saving::get_config(att) == Config::parse(kAttentionConfig));
  L::AdditiveAttention aa({.use_scale = false, .dropout = 0.3, .seed = 9, .name = "aa"});
  CHECK(K::saving::get_config(aa) == Config::parse(kAdditiveAttentionConfig));
  // Keras writes the default attention axes once the layer is built.
  L::MultiHeadAttention plain(2, 3);
  CHECK(K::saving::get_config(plain)["attention_axes"].is_null());
  plain(tf::ones({1, 4, 6}, tf::float32), false);
  CHECK(K::saving::get_config(plain)["attention_axes"] == Config::parse("[1]"));
}

TEST_CASE("serialization: Keras JSON of a functional attention block predicts as Keras",
          "[keras][serialization]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    CAPTURE(device.to_string());
    K::Model model = K::models::model_from_json(kGJson);
    CHECK(model.name() == "blk");
    tf::testing::set_formula_weights(model);
    check_values(model(input_g(), false), kGPred, 1e-5, 1e-6);
  }
  // to_json writes Keras' layers back: configs, build_configs and the self-attention calls
  // mha(x, x) and att([z, z]).
  const Config keras = Config::parse(kGJson);
  const Config ours = Config::parse(K::models::to_json(K::models::model_from_json(kGJson)));
  REQUIRE(ours["config"]["layers"].size() == keras["config"]["layers"].size());
  for (size_t i = 0; i < ours["config"]["layers"].size(); ++i) {
    const Config& theirs = keras["config"]["layers"][i];
    CAPTURE(theirs["name"]);
    // Keras writes a merge layer's build_config (its input shapes), tapeflow does not.
    if (theirs["class_name"] == "Add" || theirs["class_name"] == "Concatenate") {
      Config without = theirs;
      without.erase("build_config");
      CHECK(ours["config"]["layers"][i] == without);
      continue;
    }
    CHECK(ours["config"]["layers"][i] == theirs);
  }
}

TEST_CASE("serialization: save_model keeps MultiHeadAttention's weights under Keras' paths",
          "[keras][serialization]") {
  TempDir dir;
  K::Model g = K::models::model_from_json(kGJson);
  tf::testing::set_formula_weights(g);
  K::models::save_model(g, dir / "g.tfmodel");
  // Keras 3.15.1's G.save_weights("g.weights.h5") (groups named after the classes there:
  // "multi_head_attention", "layer_normalization", "attention", "additive_attention", "dense").
  const std::map<std::string, tf::TensorShape> keras = {
      {"layers/addatt/vars/0", {6}},
      {"layers/att/vars/0", {}},
      {"layers/att/vars/1", {}},
      {"layers/out/vars/0", {12, 2}},
      {"layers/out/vars/1", {2}},
      {"layers/ln/vars/0", {6}},
      {"layers/ln/vars/1", {6}},
      {"layers/mha/key_dense/vars/0", {6, 2, 3}},
      {"layers/mha/key_dense/vars/1", {2, 3}},
      {"layers/mha/output_dense/vars/0", {2, 3, 6}},
      {"layers/mha/output_dense/vars/1", {6}},
      {"layers/mha/query_dense/vars/0", {6, 2, 3}},
      {"layers/mha/query_dense/vars/1", {2, 3}},
      {"layers/mha/value_dense/vars/0", {6, 2, 3}},
      {"layers/mha/value_dense/vars/1", {2, 3}}};
  K::safetensors::Reader reader(dir / "g.tfmodel");
  std::map<std::string, tf::TensorShape> saved;
  for (const auto& info : reader.tensors()) saved[info.name] = info.shape;
  CHECK(saved == keras);
  K::Model loaded = K::models::load_model(dir / "g.tfmodel");
  check_close(loaded(input_g(), false), g(input_g(), false), 0.0, 0.0);
}

TEST_CASE("serialization: bad attention configs and calls name the class and the key",
          "[keras][serialization]") {
  Config mha = Config::parse(kMultiHeadAttentionConfig);
  Config bad = mha;
  bad["use_gate"] = true;
  tf::testing::require_error([&] { K::saving::from_config("MultiHeadAttention", bad); },
                             {"MultiHeadAttention", "use_gate", "not supported"});
  bad = mha;
  bad["sliding_window"] = 2;
  tf::testing::require_error([&] { K::saving::from_config("MultiHeadAttention", bad); },
                             {"MultiHeadAttention", "sliding_window"});
  bad = mha;
  bad["num_heads"] = 2.5;
  tf::testing::require_error([&] { K::saving::from_config("MultiHeadAttention", bad); },
                             {"MultiHeadAttention", "num_heads", "integer"});
  Config att = Config::parse(kAttentionConfig);
  att["score_mode"] = "general";
  tf::testing::require_error([&] { K::saving::from_config("Attention", att); },
                             {"Attention", "score_mode", "general"});
  Config aa = Config::parse(kAdditiveAttentionConfig);
  aa["score_mode"] = "dot";  // Attention's key
  tf::testing::require_error([&] { K::saving::from_config("AdditiveAttention", aa); },
                             {"AdditiveAttention", "score_mode"});
  // An attention call on a tensor made after it (here the LayerNormalization that follows it)
  // has no producer. (Cross-attention itself loads: tests/keras/test_functional_multi.cpp.)
  Config g = Config::parse(kGJson);
  for (Config& l : g["config"]["layers"])
    if (l["name"] == "mha") l["inbound_nodes"][0]["args"][1]["config"]["keras_history"][0] = "ln";
  tf::testing::require_error([&] { K::models::model_from_json(g.dump()); },
                             {"mha", "node 0 takes a tensor that no layer of the config produces"});
}

TEST_CASE("serialization: preprocessing layers write Keras' get_config", "[keras][serialization]") {
  L::Normalization n2(
      {.axis = std::nullopt, .mean = {2.0}, .variance = {4.0}, .invert = true, .name = "n2"});
  CHECK(K::saving::get_config(n2) == Config::parse(kNormalizationConfig));
  CHECK(K::saving::get_config(L::CategoryEncoding(5, "count", "ce")) ==
        Config::parse(kCategoryEncodingConfig));
  // Discretization: Keras' keys after the base ones (name, trainable, dtype) tapeflow puts first.
  Config ours = K::saving::get_config(K::layers::Discretization::with_num_bins(2, 0.05, "disc"));
  CHECK(ours["bin_boundaries"].is_null());
  CHECK(ours["num_bins"] == 2);
  K::Layer disc = K::saving::from_config_json("Discretization", kDiscretizationConfig);
  ours = K::saving::get_config(disc);
  const Config keras = Config::parse(kDiscretizationConfig);
  for (const char* k : {"bin_boundaries", "num_bins", "epsilon", "output_mode", "sparse", "name"}) {
    CAPTURE(k);
    CHECK(ours[k] == keras[k]);
  }
  // Keras: Discretization(bin_boundaries=[0., 1.5])([-1., 0., 1., 2.]) = [0, 1, 1, 2]
  check_values(tf::cast(disc(tf::convert_to_tensor(std::vector<float>{-1, 0, 1, 2}, {4}), false),
                        tf::float32),
               {0, 1, 1, 2});
  // An adapted Discretization keeps its boundaries and num_bins, as Keras' config.
  K::layers::Discretization adapted = K::layers::Discretization::with_num_bins(3, 0.05, "d2");
  adapted.adapt(tf::convert_to_tensor(std::vector<float>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {10}));
  const Config a = K::saving::get_config(adapted);
  CHECK(a["num_bins"] == 3);
  K::Layer back = K::saving::from_config("Discretization", a);
  CHECK(K::saving::get_config(back) == a);
}

TEST_CASE(
    "serialization: Keras JSON with a Normalization of given mean and variance predicts "
    "as Keras",
    "[keras][serialization]") {
  K::Model model = K::models::model_from_json(kHJson);
  tf::testing::set_formula_weights(model.get_layer("out"));
  std::vector<double> x(6);
  for (size_t i = 0; i < x.size(); ++i) x[i] = std::cos(0.5 * double(i));
  const tf::Tensor input = tf::cast(tf::convert_to_tensor(x, {2, 3}), tf::float32);
  check_values(model(input, false), kHPred, 1e-5, 1e-6);
  const auto layers = layer_configs(Config::parse(K::models::to_json(model)));
  const auto theirs = layer_configs(Config::parse(kHJson));
  REQUIRE(layers.size() == theirs.size());
  for (size_t i = 0; i < layers.size(); ++i) CHECK(layers[i] == theirs[i]);
  // Given in the config, the mean and variance are not saved as weights (Keras has none).
  TempDir dir;
  K::models::save_model(model, dir / "h.tfmodel");
  K::safetensors::Reader reader(dir / "h.tfmodel");
  CHECK(reader.tensors().size() == 2);
  CHECK(reader.find("layers/out/vars/0") != nullptr);
  check_close(K::models::load_model(dir / "h.tfmodel")(input, false), model(input, false), 0.0,
              0.0);
}

TEST_CASE("serialization: an adapted Normalization saves its mean and variance as Keras' variables",
          "[keras][serialization]") {
  TempDir dir;
  L::Normalization norm({.name = "norm"});
  // Keras: Normalization().adapt(np.arange(12.).reshape(4, 3)): mean [4.5, 5.5, 6.5],
  // variance [11.25, 11.25, 11.25], its variables norm/mean, norm/variance (and norm/count).
  std::vector<float> data(12);
  for (size_t i = 0; i < data.size(); ++i) data[i] = float(i);
  norm.adapt(tf::convert_to_tensor(data, {4, 3}));
  K::Sequential model({norm, L::Dense(1)}, "adapted");
  const tf::Tensor x = tf::convert_to_tensor(std::vector<float>{1, 2, 3, 9, 8, 7}, {2, 3});
  const tf::Tensor y = model(x, false);
  K::models::save_model(model, dir / "n.tfmodel");
  K::safetensors::Reader reader(dir / "n.tfmodel");
  REQUIRE(reader.find("layers/norm/vars/0") != nullptr);
  check_values(reader.read("layers/norm/vars/0"), {4.5, 5.5, 6.5});
  check_values(reader.read("layers/norm/vars/1"), {11.25, 11.25, 11.25});
  K::Model loaded = K::models::load_model(dir / "n.tfmodel");
  check_close(loaded(x, false), y, 0.0, 0.0);
  CHECK(K::saving::get_config(loaded.get_layer("norm"))["mean"].is_null());
}

TEST_CASE("serialization: bad preprocessing configs name the class and the key",
          "[keras][serialization]") {
  Config n = Config::parse(kNormalizationConfig);
  n["axis"] = Config::parse("[1, 2]");
  tf::testing::require_error([&] { K::saving::from_config("Normalization", n); },
                             {"Normalization", "axis", "one"});
  n = Config::parse(kNormalizationConfig);
  n["variance"] = nullptr;
  tf::testing::require_error([&] { K::saving::from_config("Normalization", n); },
                             {"Normalization", "variance"});
  Config d = Config::parse(kDiscretizationConfig);
  d["output_mode"] = "one_hot";
  tf::testing::require_error([&] { K::saving::from_config("Discretization", d); },
                             {"Discretization", "output_mode", "not supported"});
  d = Config::parse(kDiscretizationConfig);
  d["bin_boundaries"] = Config::parse("[2.0, 1.0]");
  tf::testing::require_error([&] { K::saving::from_config("Discretization", d); },
                             {"Discretization", "bin_boundaries"});
  Config c = Config::parse(kCategoryEncodingConfig);
  c["output_mode"] = "tf_idf";
  tf::testing::require_error([&] { K::saving::from_config("CategoryEncoding", c); },
                             {"CategoryEncoding", "output_mode", "tf_idf"});
  c = Config::parse(kCategoryEncodingConfig);
  c["sparse"] = true;
  tf::testing::require_error([&] { K::saving::from_config("CategoryEncoding", c); },
                             {"CategoryEncoding", "sparse"});
}

TEST_CASE("serialization: image preprocessing layers write Keras' get_config",
          "[keras][serialization]") {
  using L::Factor;
  const std::vector<std::tuple<std::string, K::Layer, const char*>> cases = {
      {"Resizing",
       L::Resizing(8, 6, {.interpolation = "nearest", .crop_to_aspect_ratio = true, .name = "rs"}),
       kResizingConfig},
      {"CenterCrop", L::CenterCrop(4, 5, "cc"), kCenterCropConfig},
      {"RandomCrop", L::RandomCrop(4, 5, 3, "rc"), kRandomCropConfig},
      {"RandomFlip", L::RandomFlip("vertical", 2, "rf"), kRandomFlipConfig},
      {"RandomRotation",
       L::RandomRotation(0.2, {.fill_mode = "constant",
                               .interpolation = "nearest",
                               .seed = 1,
                               .fill_value = 0.5,
                               .name = "rr"}),
       kRandomRotationConfig},
      {"RandomZoom", L::RandomZoom(Factor(-0.2, 0.2), Factor(-0.1, 0.3), {.seed = 4, .name = "rz"}),
       kRandomZoomConfig},
      {"RandomTranslation",
       L::RandomTranslation(Factor(-0.1, 0.1), Factor(-0.2, 0.2), {.name = "rt"}),
       kRandomTranslationConfig},
      {"RandomContrast", L::RandomContrast(0.3, {0.0, 1.0}, 5, "rcon"), kRandomContrastConfig},
      {"RandomBrightness", L::RandomBrightness(Factor(-0.2, 0.1), {0.0, 1.0}, std::nullopt, "rb"),
       kRandomBrightnessConfig},
      {"RandomGrayscale", L::RandomGrayscale(0.3, std::nullopt, "rg"), kRandomGrayscaleConfig},
      {"RandomSaturation", L::RandomSaturation(0.4, {0.0, 255.0}, std::nullopt, "rsat"),
       kRandomSaturationConfig},
      {"RandomHue", L::RandomHue(0.2, {0.0, 255.0}, std::nullopt, "rh"), kRandomHueConfig}};
  for (const auto& [cls, layer, json] : cases) {
    CAPTURE(cls);
    const Config keras = Config::parse(json);
    CHECK(K::saving::get_config(layer) == keras);
    // Keras' config loads and writes back unchanged.
    K::Layer loaded = K::saving::from_config(cls, keras);
    CHECK(loaded.class_name() == cls);
    CHECK(K::saving::get_config(loaded) == keras);
  }
  // Resizing's options reach the layer: "rs" crops (6, 9) to the 8:6 aspect, then resizes.
  K::Layer rs = K::saving::from_config_json("Resizing", kResizingConfig);
  CHECK(rs(tf::ones({1, 6, 9, 2}, tf::float32), false).shape() == tf::TensorShape({1, 8, 6, 2}));
}

TEST_CASE("serialization: bad image layer configs name the class and the key",
          "[keras][serialization]") {
  Config c = Config::parse(kRandomRotationConfig);
  c["factor"] = Config::parse("[-2.0, 0.5]");
  tf::testing::require_error([&] { K::saving::from_config("RandomRotation", c); },
                             {"RandomRotation", "factor"});
  c = Config::parse(kRandomRotationConfig);
  c["factor"] = "big";
  tf::testing::require_error([&] { K::saving::from_config("RandomRotation", c); },
                             {"RandomRotation", "factor", "number"});
  c = Config::parse(kRandomFlipConfig);
  c["mode"] = "diagonal";
  tf::testing::require_error([&] { K::saving::from_config("RandomFlip", c); },
                             {"RandomFlip", "mode", "diagonal"});
  c = Config::parse(kResizingConfig);
  c["data_format"] = "channels_middle";
  tf::testing::require_error([&] { K::saving::from_config("Resizing", c); },
                             {"Resizing", "data_format", "channels_middle"});
  c = Config::parse(kCenterCropConfig);
  c["interpolation"] = "nearest";  // Resizing's key
  tf::testing::require_error([&] { K::saving::from_config("CenterCrop", c); },
                             {"CenterCrop", "interpolation"});
  c = Config::parse(kRandomContrastConfig);
  c["value_range"] = 1.0;
  tf::testing::require_error([&] { K::saving::from_config("RandomContrast", c); },
                             {"RandomContrast", "value_range"});
}

TEST_CASE("serialization: Keras JSON with RNN cells and StackedRNNCells predicts as Keras",
          "[keras][serialization]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(device.to_string());
    CAPTURE(device.to_string());
    K::Model model = K::models::model_from_json(kRJson);
    tf::testing::set_formula_weights(model);
    check_values(model(input_f(), false), kRPred, 1e-5, 1e-6);
  }
  K::Model model = K::models::model_from_json(kRJson);
  const auto theirs = layer_configs(Config::parse(kRJson));
  const auto mine = layer_configs(Config::parse(K::models::to_json(model)));
  REQUIRE(mine.size() == theirs.size());
  for (size_t i = 0; i < mine.size(); ++i) {
    CAPTURE(theirs[i]["config"]["name"]);
    CHECK(mine[i] == theirs[i]);
  }
  // Keras' R.save_weights: the cells' weights under cell/ (a stacked cell's under
  // cell/cells/<cell>/; Keras names those groups after the classes, "simple_rnn_cell" and
  // "gru_cell", tapeflow after the cells, "sc" and "gc").
  tf::testing::set_formula_weights(model);
  TempDir dir;
  K::models::save_model(model, dir / "r.tfmodel");
  const std::map<std::string, tf::TensorShape> keras = {{"layers/r1/cell/vars/0", {3, 12}},
                                                        {"layers/r1/cell/vars/1", {3, 12}},
                                                        {"layers/r1/cell/vars/2", {12}},
                                                        {"layers/r2/cell/cells/sc/vars/0", {3, 2}},
                                                        {"layers/r2/cell/cells/sc/vars/1", {2, 2}},
                                                        {"layers/r2/cell/cells/sc/vars/2", {2}},
                                                        {"layers/r2/cell/cells/gc/vars/0", {2, 6}},
                                                        {"layers/r2/cell/cells/gc/vars/1", {2, 6}},
                                                        {"layers/r2/cell/cells/gc/vars/2", {6}},
                                                        {"layers/out/vars/0", {2, 1}},
                                                        {"layers/out/vars/1", {1}}};
  K::safetensors::Reader reader(dir / "r.tfmodel");
  std::map<std::string, tf::TensorShape> saved;
  for (const auto& info : reader.tensors()) saved[info.name] = info.shape;
  CHECK(saved == keras);
  K::Model loaded = K::models::load_model(dir / "r.tfmodel");
  check_close(loaded(input_f(), false), model(input_f(), false), 0.0, 0.0);
  check_values(loaded(input_f(), false), kRPred, 1e-5, 1e-6);
}

TEST_CASE("serialization: bad RNN configs name the class and the key", "[keras][serialization]") {
  const Config r = Config::parse(kRJson);
  Config r2;
  for (const Config& l : r["config"]["layers"])
    if (l["config"]["name"] == "r2") r2 = l["config"];
  Config bad = r2;
  bad["cell"]["class_name"] = "ConvLSTMCell";
  tf::testing::require_error([&] { K::saving::from_config("RNN", bad); },
                             {"RNN", "cell", "ConvLSTMCell"});
  bad = r2;
  bad["cell"]["config"]["cells"][1]["config"]["reset_after"] = "no";
  tf::testing::require_error([&] { K::saving::from_config("RNN", bad); },
                             {"GRUCell", "reset_after", "true or false"});
  bad = r2;
  bad["cell"]["config"]["cells"][0]["config"]["unit_forget_bias"] = true;  // LSTMCell's key
  tf::testing::require_error([&] { K::saving::from_config("RNN", bad); },
                             {"SimpleRNNCell", "unit_forget_bias"});
  bad = r2;
  bad["stateful"] = 1.5;
  tf::testing::require_error([&] { K::saving::from_config("RNN", bad); }, {"RNN", "stateful"});
  Config stateful = r2;  // a stateful RNN loads and writes stateful back
  stateful["stateful"] = true;
  CHECK(K::saving::get_config(K::saving::from_config("RNN", stateful))["stateful"] == true);
}
