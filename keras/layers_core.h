// Keras 3's core layers EinsumDense and Identity. See docs/keras.md ("EinsumDense and
// Identity").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keras/initializers.h"
#include "keras/layers.h"
#include "keras/regularizers.h"

namespace tapeflow::keras::layers {

struct EinsumDenseOptions {
  std::string activation = "";
  // The output axes (letters of the equation's output) that get a bias; "" for none (Keras'
  // None). The bias spans the output from the first of them on: (6,) for "abd" with "d",
  // (2, 3) for "abde" with "de", (3, 1) for "ac..." with "c" on rank-3 inputs.
  std::string bias_axes = "";
  // Default glorot_uniform. The variance-scaling ones (glorot_*, he_*) take their fans from the
  // kernel's axes as Keras 3.15 does: fan_in the product of the kernel dimensions that come from
  // the input, fan_out that of those that come from the output.
  Initializer kernel_initializer = {};
  Initializer bias_initializer = {};  // zeros
  Regularizer kernel_regularizer = {};
  Regularizer bias_regularizer = {};
  std::vector<int64_t> input_shape = {};  // without the batch dimension; builds at construction
  std::string name = "";
};

// y = activation(einsum(equation, x, kernel) + bias), as Keras' EinsumDense. The equation has
// one of Keras' three forms: "ab,bc->ac" (every input axis named, the first the batch),
// "...b,bc->...c" (leading axes elided) or "ab...,bc->ac..." (trailing axes elided; at least two
// letters before the ellipsis). `output_shape` is the output's shape without the batch and the
// elided axes, one entry per remaining output letter; tf::None for one the input gives. The
// kernel's shape comes from the equation: each kernel letter takes its size from the output
// (output_shape) or else from the input, so every kernel letter must appear in one of them; an
// output letter must appear in the input or the kernel. Inputs must keep the rank the layer was
// built for.
//   EinsumDense("ab,bc->ac", 64, {.bias_axes = "c"})           // Dense(64)
//   EinsumDense("abc,cd->abd", {tf::None, 64}, {.bias_axes = "d"})  // per step of a sequence
//   EinsumDense("...x,xy->...y", 64)                           // any leading axes
class EinsumDense : public Layer {
 public:
  EinsumDense(std::string equation, std::vector<int64_t> output_shape,
              EinsumDenseOptions options = {});
  EinsumDense(std::string equation, int64_t output_shape, EinsumDenseOptions options = {});
  const std::string& equation() const;
  // As given (tf::None entries kept).
  const std::vector<int64_t>& partial_output_shape() const;
  // The weights (FailedPreconditionError before the build; bias also without bias_axes).
  Variable kernel() const;
  Variable bias() const;
};

// Passes its input (and its mask) on unchanged, as Keras' Identity: a placeholder layer.
class Identity : public Layer {
 public:
  explicit Identity(std::string name = "");
};

}  // namespace tapeflow::keras::layers

namespace tapeflow::keras::detail::layer_options {
// What EinsumDense was made with (keras/serialization_core.cpp writes it); nullopt for
// another class.
struct EinsumDenseConfig {
  std::string equation;
  std::vector<int64_t> output_shape;
  layers::EinsumDenseOptions options;
};
std::optional<EinsumDenseConfig> einsum_dense(const LayerImpl& layer);
// Whether `layer` is the built-in Identity.
bool identity(const LayerImpl& layer);
}  // namespace tapeflow::keras::detail::layer_options
