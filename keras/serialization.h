// Whole-model serialization (Keras 3's get_config / from_config, model.to_json /
// keras.models.model_from_json, model.save / keras.models.load_model). See docs/keras.md,
// "Saving whole models".
//
// Configs are Keras 3.15's JSON: the same keys, value spellings and nesting
// ({"module": "keras.layers", "class_name": "Dense", "config": {...}, "registered_name": null}),
// so JSON written by Keras' model.to_json() for the supported layers loads here and tapeflow's
// loads in Keras. Reading is strict: a key tapeflow does not know, or a value it cannot honour
// (a constraint, channels_first, an initializer class it lacks), is an InvalidArgumentError
// naming the layer class and the key; nothing is dropped silently.
//
// Supported classes: Dense, Conv2D, MaxPooling2D, AveragePooling2D, Flatten, Dropout,
// BatchNormalization, ReLU, Softmax, Activation, Embedding, LayerNormalization, Reshape,
// InputLayer (in models), Add, Subtract, Multiply, Average, Maximum, Minimum, Concatenate,
// SimpleRNN, LSTM, GRU, RNN (with the built-in cells), Bidirectional, TimeDistributed,
// MultiHeadAttention, Attention, AdditiveAttention (self-attention in functional models),
// Masking, Normalization, Discretization, CategoryEncoding, Resizing, CenterCrop, RandomCrop,
// RandomFlip, RandomRotation, RandomZoom, RandomTranslation, RandomContrast, RandomBrightness,
// RandomGrayscale, RandomSaturation, RandomHue, Sequential and functional models (nested too),
// and whatever saving::register_layer adds.
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

// Keras' model.to_json(): the JSON text of saving::serialize(model); `indent` < 0: one line
// (Keras' default), else pretty-printed with that indent. Works on unbuilt models too (a
// Sequential then has no InputLayer and no build_input_shape).
std::string to_json(const Model& model, int indent = -1);
// keras.models.model_from_json(json): a new model with fresh weights (initialized as the config
// says), built when the JSON gives its input shape. The top-level "compile_config" is ignored
// (tapeflow does not restore compile state; a non-empty one logs a warning).
Model model_from_json(const std::string& json);

// Keras' model.save(path) in tapeflow's own format (not a .keras zip): one safetensors file
// whose __metadata__ holds {"format": "tapeflow.keras.model", "format_version": "1",
// "config": to_json(model)} and whose tensors are every layer's own weights, named as Keras 3's
// .weights.h5 paths: "layers/<layer name>/vars/<i>" (nested models: "layers/<model>/layers/
// <layer>/vars/<i>"), i in the layer's weight creation order; the classes Keras nests deeper
// as there ("layers/<lstm>/cell/vars/<i>", "layers/<bidirectional>/forward_layer/cell/...",
// "layers/<time_distributed>/layer/...", "layers/<mha>/query_dense/vars/<i>", ...). Written
// atomically (a temporary file renamed over `path`: a save never leaves a torn file behind). The
// model must be built (FailedPreconditionError otherwise). The optimizer and compile state are not
// saved.
void save_model(const Model& model, const std::string& path);
// keras.models.load_model(path): the model saved at `path`, with its weights. NotFoundError for
// a missing file; InvalidArgumentError for a file that is not a tapeflow model, a config that
// does not parse (its byte position), an unknown class, or weights that do not match the
// config's model (a missing, extra or mis-shaped weight, named).
Model load_model(const std::string& path);

}  // namespace models
}  // namespace tapeflow::keras
