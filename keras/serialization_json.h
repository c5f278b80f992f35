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

// Keras' model.get_compile_config(): {"optimizer", "loss", "loss_weights", "metrics",
// "weighted_metrics", "run_eagerly", "steps_per_execution", "jit_compile"} with compile()'s
// arguments as given (names stay names, objects are serialized); an empty object for a model
// that is not compiled. Every built-in loss and metric class is written with its options, as
// Keras 3.15 does (and where Keras drops an option, Huber's delta and CosineSimilarity's axis,
// with it: Keras' constructors take it back). UnimplementedError naming the piece tapeflow
// cannot write: a loss made from a function, a Mean, Sum or MeanMetricWrapper of your own, a
// custom schedule.
Config get_compile_config(const Model& model);
// Keras' model.compile_from_config(config): compiles `model` from a get_compile_config object.
// Reading is strict: InvalidArgumentError naming the key (and the class) tapeflow cannot honour
// (a metric class it does not read, steps_per_execution other than 1, an optimizer key such as
// use_ema=true).
void compile_from_config(Model& model, const Config& config);

}  // namespace saving

namespace optimizers {

// Keras' optimizer.get_config(): "name", "learning_rate" (the current value of a constant rate,
// as a float32 read as a double, or the schedule's serialized object), "weight_decay",
// "clipnorm", "global_clipnorm", "clipvalue", "use_ema", "ema_momentum",
// "ema_overwrite_frequency", "loss_scale_factor", "gradient_accumulation_steps" (the last five at
// Keras' defaults: tapeflow has no EMA, loss scale factor or accumulation), then the class's
// own keys, in Keras' order; a LossScaleOptimizer: "name", "inner_optimizer" (serialized),
// "initial_scale", "dynamic_growth_steps". UnimplementedError for a custom schedule or
// exclude_from_weight_decay (Keras' config has no key for it).
saving::Config get_config(const Optimizer& optimizer);
// Keras' cls.from_config(config) for "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta",
// "Adamax", "Nadam", "Ftrl", "Lion", "Lamb", "Adafactor", "Muon", "LossScaleOptimizer". Missing
// keys take the class's defaults; a key tapeflow does not know or a value it cannot honour is
// an InvalidArgumentError naming the class and the key.
Optimizer from_config(const std::string& class_name, const saving::Config& config);
// keras.optimizers.serialize / deserialize: {"module": "keras.optimizers", "class_name",
// "config", "registered_name": null}; deserialize also takes a name ("adam", optimizers::get).
saving::Config serialize(const Optimizer& optimizer);
Optimizer deserialize(const saving::Config& object);

namespace schedules {
// Keras' schedule.get_config() / from_config and serialize_keras_object for the built-in
// schedules, with Keras' keys and order ("name" as Keras names them: "PiecewiseConstant",
// "SGDRDecay"; read back as any string, since it names nothing tapeflow keeps).
// UnimplementedError for a LearningRateSchedule made from a function.
saving::Config get_config(const LearningRateSchedule& schedule);
LearningRateSchedule from_config(const std::string& class_name, const saving::Config& config);
saving::Config serialize(const LearningRateSchedule& schedule);
LearningRateSchedule deserialize(const saving::Config& object);
}  // namespace schedules

}  // namespace optimizers

namespace losses {
// keras.losses.serialize / deserialize for every built-in loss class (config: "name",
// "reduction", then the class's options as Keras 3.15 writes them: from_logits,
// label_smoothing, axis / ignore_class of the crossentropies, alpha and gamma of the focal ones,
// ...; Huber's delta and CosineSimilarity's axis too, which Keras leaves out). deserialize also
// takes a name ("mse", losses::get). UnimplementedError for a loss made from a function.
saving::Config serialize(const Loss& loss);
Loss deserialize(const saving::Config& object);
}  // namespace losses

}  // namespace tapeflow::keras
