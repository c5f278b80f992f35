// Keras 3's core layers EinsumDense, Identity and ReversibleEmbedding. See docs/keras.md
// ("EinsumDense", "ReversibleEmbedding").
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keras/constraints.h"
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
  // Default glorot_uniform. The variance-scaling ones (glorot_*, he_*, lecun_* and a
  // VarianceScaling without both axis lists) take their fans from the kernel's axes as Keras
  // 3.15 does: fan_in the product of the kernel dimensions that come from the input, fan_out
  // that of those that come from the output.
  Initializer kernel_initializer = {};
  Initializer bias_initializer = {};  // zeros
  Regularizer kernel_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};
  Constraint bias_constraint = {};
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

struct ReversibleEmbeddingOptions {
  // true: the reverse projection is the transposed embeddings; false: a weight of its own,
  // "reverse_embeddings" (output_dim, input_dim), initialized as the embeddings.
  bool tie_weights = true;
  Initializer embeddings_initializer = {};  // Keras' "uniform": RandomUniform(-0.05, 0.05)
  Regularizer embeddings_regularizer = {};
  // The table's constraint (as Keras', not the untied reverse_embeddings').
  Constraint embeddings_constraint = {};
  bool mask_zero = false;  // as Embedding's
  // The dtype the reverse projection computes in (Keras' reverse_dtype; unset: the input's).
  std::optional<DType> reverse_dtype = std::nullopt;
  // Logits of the reverse projection become cap * tanh(logits / cap) (Gemma's soft cap).
  std::optional<double> logit_soft_cap = std::nullopt;
  std::vector<int64_t> input_shape = {};  // without the batch dimension; builds at construction
  std::string name = "";
};

// Keras' ReversibleEmbedding: an Embedding (ids (...) to (..., output_dim), the table
// "embeddings" (input_dim, output_dim)) that can also map hidden states back to logits over the
// vocabulary, as language models tie their input and output embeddings: reverse(h) for h
// (..., output_dim) is h embeddings^T (..., input_dim), or h reverse_embeddings without
// tie_weights, then the soft cap if set. Keras calls that layer(h, reverse=True); in a
// functional model tapeflow's layer is the forward lookup (the reverse call is for subclassed
// models and plain code). Gradients flow to the table from both directions.
//   ReversibleEmbedding emb(32000, 512);
//   Tensor h = emb(ids);  ...  Tensor logits = emb.reverse(h);
class ReversibleEmbedding : public Layer {
 public:
  ReversibleEmbedding(int64_t input_dim, int64_t output_dim,
                      ReversibleEmbeddingOptions options = {});
  Tensor reverse(const Tensor& hidden) const;
  Variable embeddings() const;
  // FailedPreconditionError with tie_weights.
  Variable reverse_embeddings() const;
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
// What ReversibleEmbedding was made with; nullopt for another class.
struct ReversibleEmbeddingConfig {
  int64_t input_dim = 0, output_dim = 0;
  layers::ReversibleEmbeddingOptions options;
};
std::optional<ReversibleEmbeddingConfig> reversible_embedding(const LayerImpl& layer);
}  // namespace tapeflow::keras::detail::layer_options
