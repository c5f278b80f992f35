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
// Sequential and functional models (nested too), and whatever saving::register_layer adds.
//
// Thread-safety: the registry is guarded by a mutex; registering while another thread loads is
// allowed. Saving reads the weights as they are (do not train concurrently).
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "keras/layers.h"
#include "keras/model.h"

namespace tapeflow::keras {

namespace saving {

// A config: a JSON object whose keys keep their order (Keras writes them in a fixed order).
using Config = nlohmann::ordered_json;

// Builds a layer from its config (Keras' cls.from_config(config)): `config` is the "config"
// object (with "name", "trainable" and "dtype"). The layer must take config["name"] as its
// name (weights are matched by layer name); trainable and dtype are applied by the loader after
// the factory returns. The returned handle must own the layer's state: a built-in layer, or a
// handle on a detail::LayerImpl subclass (a Model subclass object dies with the factory).
using FromConfig = std::function<Layer(const Config& config)>;
// The class-specific part of a layer's config (Keras' get_config minus the base keys): the
// writer adds "name", "trainable" and "dtype" in front.
using GetConfig = std::function<Config(const Layer& layer)>;

// Keras' @keras.saving.register_keras_serializable: makes `class_name` (Layer::class_name() of
// the custom layer) known to deserialize and model_from_json, and, when get_config is given, to
// to_json and save_model. Registering a name again replaces it; registering a built-in class
// name (a layer tapeflow serializes itself) is an InvalidArgumentError.
void register_layer(const std::string& class_name, FromConfig from_config,
                    GetConfig get_config = {});
// Whether a class name is registered (built in or by register_layer).
bool is_registered(const std::string& class_name);

// Keras' layer.get_config(): the layer's config object. A model gives its model config
// (Sequential: "layers" and "build_input_shape"; functional: "layers" with "inbound_nodes",
// "input_layers", "output_layers"). UnimplementedError for a class with no writer (a custom
// layer registered without get_config, a built-in layer this module does not cover), naming
// the layer, its class and register_layer.
Config get_config(const Layer& layer);
// Keras' cls.from_config(config) for the class `class_name`.
Layer from_config(const std::string& class_name, const Config& config);
// keras.saving.serialize_keras_object(layer): {"module", "class_name", "config",
// "registered_name"} (and "build_config" for a built layer with weights).
Config serialize(const Layer& layer);
// keras.saving.deserialize_keras_object: the layer (or model) of a serialize() object.
// An unknown class_name is an InvalidArgumentError naming it and saving::register_layer.
Layer deserialize(const Config& object);

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
// <layer>/vars/<i>"), i in the layer's weight creation order. Written atomically (a temporary
// file renamed over `path`: a save never leaves a torn file behind). The model must be built
// (FailedPreconditionError otherwise). The optimizer and compile state are not saved.
void save_model(const Model& model, const std::string& path);
// keras.models.load_model(path): the model saved at `path`, with its weights. NotFoundError for
// a missing file; InvalidArgumentError for a file that is not a tapeflow model, a config that
// does not parse (its byte position), an unknown class, or weights that do not match the
// config's model (a missing, extra or mis-shaped weight, named).
Model load_model(const std::string& path);

}  // namespace models
}  // namespace tapeflow::keras
