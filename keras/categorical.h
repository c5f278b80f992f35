// Internal: Keras' encode_categorical_inputs, shared by CategoryEncoding, IntegerLookup
// (keras/layers_extra.cpp), Hashing and HashedCrossing (keras/layers_hashing.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tapeflow::keras::detail {

// int64 `ids` (all in [0, depth)) to (batch, depth) in `dtype`. mode "one_hot": (batch,) or
// (batch, 1) ids; "multi_hot" and "count": (batch, k) ids, or (k,) ids of one example (a
// (depth,) output, as Keras). count_weights (mode "count" only, undefined for none) weigh each
// id. Errors name `layer` and its class `cls`.
Tensor encode_categorical(const Tensor& ids, int64_t depth, const std::string& mode, DType dtype,
                          const Tensor& count_weights, const std::string& layer, const char* cls);
// The shape encode_categorical gives for ids of shape s ("int": s itself).
TensorShape encoded_shape(const TensorShape& s, const std::string& mode, int64_t depth);
// Keras' hashing of integer values to `bins` buckets (Hashing, IntegerLookup's "farmhash"):
// FarmHash64 of their decimal text, or with a salt ({s} or {a, b}) SipHash-2-4 keyed by it.
Tensor hash_to_bins(const Tensor& values, int64_t bins, const std::vector<int64_t>& salt);
// Keras' output_mode check of IntegerLookup and Hashing: "int", "one_hot", "multi_hot" or
// "count", else an InvalidArgumentError naming the class.
void check_output_mode(const char* cls, const std::string& mode);

}  // namespace tapeflow::keras::detail
