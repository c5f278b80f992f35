// Internal to keras/layers_more.cpp and keras/layers_core.cpp: Embedding's lookup, shared with
// ReversibleEmbedding.
#pragma once

#include <cstdint>
#include <string>

#include "core/tensor.h"

namespace tapeflow::keras::detail {

// Rows `ids` of `table` (input_dim, output_dim): floating ids cast to int32 (as Keras); an id
// outside [0, input_dim) is an InvalidArgumentError naming the layer and its class (in a traced
// function the error comes from the gather op when the graph runs).
Tensor embedding_lookup(const Tensor& table, const Tensor& ids, const std::string& layer,
                        const char* class_name, int64_t input_dim);

}  // namespace tapeflow::keras::detail
