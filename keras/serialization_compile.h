// Internal to keras/serialization*.cpp: the compile state in whole-model saving (Keras'
// "compile_config" and the optimizer's variables beside the weights), defined in
// keras/serialization_compile.cpp. Not installed; include only from keras/.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "keras/metrics.h"
#include "keras/model.h"
#include "keras/safetensors.h"
#include "keras/serialization_json.h"

namespace tapeflow::keras::saving::internal {

// A built-in metric with options (keras/serialization_metrics.cpp) from the "config" of its
// Keras object of class `class_name`, read strictly (InvalidArgumentError naming a key tapeflow
// cannot honour); an empty handle for a class it does not read. kOptionMetricNames lists them.
metrics::Metric metric_from_config(const std::string& class_name, const Config& config);
extern const char* const kOptionMetricNames;

// The "compile_config" to_json and save_model write: nullopt for a model that is not compiled,
// or (after a warning naming what and why, from `op`) one whose compile state tapeflow cannot
// write (a custom loss function, a metric object with options, a custom schedule): it is then
// saved without its compile state.
std::optional<Config> compile_config_to_save(const Model& model, const char* op);

// Compiles `model` from the top-level "compile_config" of `object` (nothing when it is absent,
// null or empty); when it cannot be honoured, logs a warning naming the problem (`where`: the
// call or file) and leaves the model uncompiled, as Keras' load_model. Returns whether the model
// was compiled from it.
bool compile_from_object(Model& model, const Config& object, const std::string& where);

// The optimizer's variables of a compiled model, under Keras' .weights.h5 paths
// "optimizer/vars/<i>" in Keras' order, and the metadata entry that says what each is.
// `weights` are the model's weights by path (their tensor names).
void add_optimizer_variables(const Model& model,
                             const std::vector<std::pair<std::string, Variable>>& weights,
                             std::vector<std::pair<std::string, Variable>>& out,
                             std::map<std::string, std::string>& metadata);
// Restores what add_optimizer_variables wrote into the optimizer `model` was just compiled
// with: iterations and the learning rate at once, the slots when the optimizer creates them
// (its deferred restoration). InvalidArgumentError naming `path` for a file whose optimizer
// variables do not fit the optimizer.
void restore_optimizer_variables(const Model& model, const safetensors::Reader& reader,
                                 const std::vector<std::pair<std::string, Variable>>& weights);
inline constexpr const char* kOptimizerPrefix = "optimizer/";

}  // namespace tapeflow::keras::saving::internal
