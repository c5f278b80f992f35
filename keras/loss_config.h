// Internal to keras/: the Keras config of the built-in losses that have options beyond "name"
// and "reduction" (Huber's delta, the focal crossentropies' alpha and gamma, ...). Their
// implementations derive from ConfiguredLoss; keras/serialization_compile.cpp writes the config
// (model.get_compile_config, whole-model saving) and reads it back.
#pragma once

#include <functional>
#include <nlohmann/json_fwd.hpp>
#include <string>

#include "keras/losses.h"

namespace tapeflow::keras::losses::detail {

struct ConfiguredLoss : LossImpl {
  // Keras' class ("Huber"); "" for a loss whose config is only its name and reduction.
  std::string keras_class;
  // Adds the class's keys after "name" and "reduction", in Keras' order.
  std::function<void(nlohmann::ordered_json& config)> write_config;
};

}  // namespace tapeflow::keras::losses::detail
