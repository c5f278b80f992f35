// Keras' hashing preprocessing layers, for integer features (tapeflow has no string tensors):
// Hashing (the hashing trick: a value to one of num_bins bins) and HashedCrossing (a bin for each
// combination of several categorical features). The bins equal Keras 3.15's for the same values
// and options, eagerly, in tf::function traces (None batches too) and on every device; see
// ops/hash.h for the hashes.
//
//   using namespace tf::keras::layers;
//   Tensor bins = Hashing(1000)(user_ids);                       // int64, user_ids' shape
//   Tensor hot = Hashing(64, {.output_mode = "multi_hot"})(tags);  // (batch, 64) float32
//   Tensor cross = HashedCrossing(500)({country_id, language_id});
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keras/layers_merge.h"

namespace tapeflow::keras::layers {

struct HashingOptions {
  std::optional<int64_t> mask_value = std::nullopt;  // the value that gets bin 0
  std::vector<int64_t> salt = {};   // {s} (Keras' salt=s, i.e. {s, s}) or {a, b}: SipHash keyed
  std::string output_mode = "int";  // "int", "one_hot", "multi_hot", "count"
  std::string name = "";
};

// Keras' Hashing: each value of an integer tensor (int32, int64, uint8; floating values are
// truncated to int64 first, as Keras) to a bin in [0, num_bins): FarmHash64 of its decimal
// text modulo num_bins (tf.strings.to_hash_bucket_fast(tf.strings.as_string(x))), or with a
// salt SipHash-2-4 keyed by it (to_hash_bucket_strong). With a mask_value (and num_bins > 1)
// that value gets bin 0 and the others bins 1 to num_bins - 1. "int" gives int64 bins of the
// input's shape; "one_hot" ((batch,) or (batch, 1) inputs), "multi_hot" and "count" ((batch, k)
// or (k,) inputs) give float32 (batch, num_bins) encodings, as Keras'.
class Hashing : public Layer {
 public:
  explicit Hashing(int64_t num_bins, HashingOptions options = {});
};

// Keras' HashedCrossing: the bin of each combination of two or more integer features of equal
// shape (), (batch,) or (batch, 1): tf.sparse.cross_hashed of their values (int32 read as
// int64) modulo num_bins. "int" gives int64 bins of the inputs' shape; "one_hot" a float32
// (batch, num_bins) encoding. Called on a list of tensors (or of KerasTensors in the functional
// API), as the merge layers.
class HashedCrossing : public Merge {
 public:
  explicit HashedCrossing(int64_t num_bins, std::string output_mode = "int", std::string name = "");
};

}  // namespace tapeflow::keras::layers

namespace tapeflow::keras::detail::layer_options {
// For keras/serialization_sequence.cpp: the options a layer was made with, or nullopt when it
// is not of that class.
struct HashingConfig {
  int64_t num_bins = 0;
  layers::HashingOptions options;
};
std::optional<HashingConfig> hashing(const LayerImpl& layer);
struct HashedCrossingConfig {
  int64_t num_bins = 0;
  std::string output_mode;
};
std::optional<HashedCrossingConfig> hashed_crossing(const LayerImpl& layer);
}  // namespace tapeflow::keras::detail::layer_options
