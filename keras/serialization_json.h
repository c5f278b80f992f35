// keras/serialization.h's calls on JSON objects (nlohmann::ordered_json, from nlohmann-json's
// header: Debian's nlohmann-json3-dev, which tapeflow's public headers do not otherwise need),
// and register_layer for custom layers (Keras' register_keras_serializable). See docs/keras.md,
// "Saving whole models".
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "keras/serialization.h"

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

}  // namespace tapeflow::keras
