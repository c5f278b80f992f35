// Whole-model serialization (Keras 3's get_config / from_config, model.to_json /
// keras.models.model_from_json, model.save / keras.models.load_model). See docs/keras.md,
// "Saving whole models".
//
// Configs are Keras 3.15's JSON: the same keys, value spellings and nesting
// ({"module": "keras.layers", "class_name": "Dense", "config": {...}, "registered_name": null}),
// so JSON written by Keras' model.to_json() for the supported layers loads here and tapeflow's
// loads in Keras. Reading is strict: a key tapeflow does not know, or a value it cannot honour
// (a constraint of a layer that takes none yet, an initializer class it lacks), is an
// InvalidArgumentError naming the layer class and the key; nothing is dropped silently.
//
// Supported classes: Dense, Conv2D, MaxPooling2D, AveragePooling2D, Flatten, Dropout,
// BatchNormalization, ReLU, Softmax, Activation, Embedding, LayerNormalization, Reshape,
// InputLayer (in models), Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate;
// Conv1D, Conv3D, Conv1DTranspose, Conv2DTranspose, Conv3DTranspose, DepthwiseConv1D/2D,
// SeparableConv1D/2D, MaxPooling1D/3D, AveragePooling1D/3D, GlobalAveragePooling1D/2D/3D,
// GlobalMaxPooling1D/2D/3D, UpSampling1D/2D/3D, ZeroPadding1D/2D/3D, Cropping1D/2D/3D, Permute,
// RepeatVector, Rescaling, LeakyReLU, ELU, PReLU, SpatialDropout1D/2D/3D, GaussianNoise,
// GaussianDropout, AlphaDropout, ActivityRegularization, GroupNormalization, UnitNormalization,
// RMSNormalization (keras/serialization_conv.cpp); SimpleRNN, LSTM, GRU, RNN (with the built-in
// cells), Bidirectional, TimeDistributed, MultiHeadAttention, Attention, AdditiveAttention
// (self-attention in functional models), Masking, Normalization, Discretization,
// CategoryEncoding, IntegerLookup, Hashing, HashedCrossing, Resizing, CenterCrop, RandomCrop,
// RandomFlip, RandomRotation, RandomZoom, RandomTranslation, RandomContrast, RandomBrightness,
// RandomGrayscale, RandomSaturation, RandomHue (keras/serialization_sequence.cpp); Sequential and
// functional models (nested too), and whatever saving::register_layer adds.
//
// This header needs only the standard library (as every public tapeflow header): configs are
// JSON text here. keras/serialization_json.h has the same calls on nlohmann::ordered_json
// objects and register_layer for custom layers; it needs nlohmann-json's header.
//
// Thread-safety: the registry is guarded by a mutex; registering while another thread loads is
// allowed. Saving reads the weights as they are (do not train concurrently).
#pragma once

#include <string>

#include "keras/layers.h"
#include "keras/model.h"

namespace tapeflow::keras {

namespace saving {

// Whether a class name is registered (built in or by register_layer, keras/serialization_json.h).
bool is_registered(const std::string& class_name);
// Keras' layer.get_config() as JSON text (`indent` < 0: one line): saving::get_config of
// keras/serialization_json.h, dumped.
std::string get_config_json(const Layer& layer, int indent = -1);
// Keras' cls.from_config(config) with the config given as JSON text (the "config" object of a
// serialized layer); an InvalidArgumentError names the byte where the text fails to parse.
Layer from_config_json(const std::string& class_name, const std::string& config_json);

}  // namespace saving

namespace models {

// Keras' model.to_json(): the JSON text of saving::serialize(model) and, for a compiled model,
// its "compile_config" (saving::get_compile_config; left out with a warning when tapeflow cannot
// write it); `indent` < 0: one line (Keras' default), else pretty-printed with that indent.
// Works on unbuilt models too (a Sequential then has no InputLayer and no build_input_shape).
std::string to_json(const Model& model, int indent = -1);
// keras.models.model_from_json(json): a new model with fresh weights (initialized as the config
// says), built when the JSON gives its input shape. A top-level "compile_config" (Keras'
// model.get_compile_config(), written by to_json for a compiled model) compiles the model, as
// Keras does; one that tapeflow cannot honour (an AUC metric object, an unknown loss or optimizer
// key) logs a warning naming the class and key and leaves the model uncompiled, as Keras'
// load_model (saving::compile_from_config of keras/serialization_json.h is the strict form that
// throws).
Model model_from_json(const std::string& json);

// Keras' model.save(path) in tapeflow's own format (not a .keras zip): one safetensors file
// whose __metadata__ holds {"format": "tapeflow.keras.model", "format_version": "1",
// "config": to_json(model)} and whose tensors are every layer's own weights, named as Keras 3's
// .weights.h5 paths: "layers/<layer name>/vars/<i>" (nested models: "layers/<model>/layers/
// <layer>/vars/<i>"), i in the layer's weight creation order; the classes Keras nests deeper
// as there ("layers/<lstm>/cell/vars/<i>", "layers/<bidirectional>/forward_layer/cell/...",
// "layers/<time_distributed>/layer/...", "layers/<mha>/query_dense/vars/<i>", ...). A compiled
// model also saves its compile state: the config's "compile_config" (optimizer config, loss,
// metrics, options) and the optimizer's variables as "optimizer/vars/<i>" in Keras' order
// (iterations, the constant learning rate, the slots: momentums, velocities, ..., Nadam's
// u_product last), with the metadata entry "optimizer_variables" naming what each is
// ("iterations", "learning_rate", "<weight path>:<slot>"; a LossScaleOptimizer's
// "step_counter" and "dynamic_scale" first). A compile state tapeflow cannot write (a loss made
// from a function, a metric object other than the plain ones of saving::get_compile_config, a
// custom schedule) is left out with a warning, the weights saved. Written atomically (a
// temporary file renamed over `path`: a save never leaves a torn file behind). The model must be
// built (FailedPreconditionError otherwise).
void save_model(const Model& model, const std::string& path);
// keras.models.load_model(path, compile=True): the model saved at `path`, with its weights; with
// `compile` and a saved compile state, compiled as it was and with its optimizer's state
// restored (iterations and learning rate at once, the slots when the optimizer creates them at
// its first update), so fit / train_on_batch continue the saved training exactly. A compile
// state that cannot be honoured is skipped with a warning (the model loads uncompiled, as
// Keras). NotFoundError for a missing file; InvalidArgumentError for a file that is not a
// tapeflow model, a config that does not parse (its byte position), an unknown class, weights
// that do not match the config's model (a missing, extra or mis-shaped weight, named), or
// optimizer variables that do not fit the optimizer.
Model load_model(const std::string& path, bool compile = true);

}  // namespace models
}  // namespace tapeflow::keras
