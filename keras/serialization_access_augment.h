// Internal to keras/serialization_augment.cpp: the options of the augmentation layers of
// keras/layers_augment.h as Keras' get_config writes them, from the layers' state (defined in
// keras/layers_augment.cpp).
#pragma once

#include <nlohmann/json_fwd.hpp>

#include "keras/layers.h"

namespace tapeflow::keras::detail::layer_options {
// Adds the class's keys after "data_format" (Keras 3.15's order) and returns true; false (and
// nothing added) for a layer that is not one of keras/layers_augment.h's.
bool augment_config(const LayerImpl& layer, nlohmann::ordered_json& config);
}  // namespace tapeflow::keras::detail::layer_options
