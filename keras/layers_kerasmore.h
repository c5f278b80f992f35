// Keras 3.15's Conv1DTranspose, GroupQueryAttention and SpectralNormalization. See docs/keras.md
// (Conv1DTranspose, SpectralNormalization) and docs/keras_attention.md (GroupQueryAttention).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keras/initializers.h"
#include "keras/layers.h"
#include "keras/layers_attention.h"
#include "keras/regularizers.h"

namespace tapeflow::keras::layers {

struct Conv1DTransposeOptions {
  int strides = 1;
  std::string padding = "valid";  // "valid" or "same", any case
  // Extra steps at the end of the output (less than strides); none: Keras' default length.
  std::optional<int> output_padding = std::nullopt;
  std::string data_format = "";  // "" or "channels_last", or "channels_first" (channels at axis 1)
  int dilation_rate = 1;         // strides > 1 together with dilation_rate > 1 is refused
  std::string activation = "";
  bool use_bias = true;
  Initializer kernel_initializer = {};  // glorot_uniform
  Initializer bias_initializer = {};    // zeros
  Regularizer kernel_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};
  Constraint bias_constraint = {};
  std::vector<int64_t> input_shape = {};  // (steps, channels), builds at construction
  std::string name = "";
};

// Transposed 1-D convolution of (batch, steps, channels) inputs, a conv2d_transpose of height
// 1; kernel (kernel_size, filters, in_channels), bias (filters,), as Keras'. The output length is
// Keras': steps * stride + max(k - stride, 0) with "valid", steps * stride with "same" (k the
// dilated kernel size), or (steps - 1) * stride + k - 2 * pad + output_padding when
// output_padding is given (pad = k / 2 with "same", 0 with "valid").
//   Conv1DTranspose(8, 3)  Conv1DTranspose(4, 3, {.strides = 2, .padding = "same"})
class Conv1DTranspose : public Layer {
 public:
  Conv1DTranspose(int64_t filters, int kernel_size, Conv1DTransposeOptions options = {});
  Variable kernel() const;
  Variable bias() const;
};
using Convolution1DTranspose = Conv1DTranspose;  // Keras' alias

struct GroupQueryAttentionOptions {
  double dropout = 0.0;  // of the attention probabilities, in training only
  bool use_bias = true;
  // Each query position attends only to key positions less than sliding_window away (a
  // symmetric band; with use_causal_mask, Mistral's causal sliding window).
  std::optional<int64_t> sliding_window = std::nullopt;
  // Keras' gated attention: the attention output times sigmoid(a "gate" projection of the
  // query, (num_query_heads, head_dim) like the query's) before the output projection.
  bool use_gate = false;
  Initializer kernel_initializer = {};  // glorot_uniform
  Initializer bias_initializer = {};    // zeros
  Regularizer kernel_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};  // of the projections' kernels, as Keras'
  Constraint bias_constraint = {};
  std::optional<int64_t> seed = std::nullopt;  // of the dropout
  std::string name = "";
};

// Grouped-query attention (Ainslie et al. 2023), as Keras 3.15's GroupQueryAttention (alias
// GroupedQueryAttention): the sub-layers "query" (kernel (dim, num_query_heads, head_dim)),
// "key" and "value" (kernels (dim, num_key_value_heads, head_dim)), biases (heads, head_dim),
// each key/value head repeated num_query_heads / num_key_value_heads times, softmax(q k^T /
// sqrt(head_dim)) over the key positions, and "attention_output" (kernel (num_query_heads,
// head_dim, query dim), bias (query dim)). Inputs (batch, T, dim); scores (batch,
// num_query_heads, T, S). Call arguments and masks as MultiHeadAttention's (layers_attention.h);
// attention_mask may also be (batch, num_query_heads, T, S), one mask per query head (each
// dimension 1 or full); the inputs' masks and the causal mask then apply to every head.
// With use_gate the sub-layer "gate" sits between "key" and "value", as in Keras' weights.
// Keras' flash_attention is not taken (the results are the same).
//   GroupQueryAttention gqa(16, 8, 2);
//   Tensor y = gqa(q, v, {.use_causal_mask = true});
class GroupQueryAttention : public Layer {
 public:
  GroupQueryAttention(int64_t head_dim, int64_t num_query_heads, int64_t num_key_value_heads,
                      GroupQueryAttentionOptions options = {});
  using Layer::operator();  // gqa(x, training): self-attention
  Tensor operator()(const Tensor& query, const Tensor& value,
                    const MultiHeadAttentionCall& args = {}) const;
  AttentionOutputs call_with_scores(const Tensor& query, const Tensor& value,
                                    const MultiHeadAttentionCall& args = {}) const;
  // In a functional model, as MultiHeadAttention's (keras/layers_attention.h).
  KerasTensor operator()(const KerasTensor& query, const KerasTensor& value,
                         const SymbolicAttentionCall& args = {}) const;
  std::vector<KerasTensor> call_with_scores(const KerasTensor& query, const KerasTensor& value,
                                            const SymbolicAttentionCall& args = {}) const;
  using Layer::build;
  void build(const TensorShape& query_shape, const TensorShape& value_shape,
             const std::optional<TensorShape>& key_shape = std::nullopt) const;
  Layer query_dense() const;
  Layer key_dense() const;
  Layer value_dense() const;
  // The gate's projection of the query (before the sigmoid); an empty handle without use_gate.
  Layer gate_dense() const;
  Layer output_dense() const;
};
using GroupedQueryAttention = GroupQueryAttention;  // Keras' alias

// Keras 3.15's SpectralNormalization wrapper: the wrapped layer's "kernel" (or "embeddings")
// divided by its largest singular value sigma, estimated by power iteration with the
// non-trainable weight "vector_u" (1, kernel.shape[-1]) (truncated normal, stddev 0.02). In
// training each call runs power_iterations steps on the kernel reshaped to (-1, last), assigns
// the new vector_u and kernel / sigma to the variables (no gradient flows through sigma, as in
// Keras, where the assignment happens before the wrapped layer reads its kernel) and calls the
// wrapped layer; in inference it calls the wrapped layer with the stored kernel. An all-zero
// kernel is left as it is.
//   SpectralNormalization(Dense(10))  SpectralNormalization(Conv2D(8, 3), 2)
class SpectralNormalization : public Layer {
 public:
  explicit SpectralNormalization(Layer layer, int power_iterations = 1, std::string name = "");
  Layer layer() const;
  Variable vector_u() const;
};

}  // namespace tapeflow::keras::layers

namespace tapeflow::keras::detail {
// The symbolic call of a GroupQueryAttention layer (detail::call_attention_symbolic's).
std::vector<KerasTensor> call_gqa_symbolic(const Layer& layer, const KerasTensor& query,
                                           const KerasTensor& value, const KerasTensor& key,
                                           const KerasTensor& attention_mask, bool use_causal_mask,
                                           bool scores, std::optional<bool> training);
}  // namespace tapeflow::keras::detail
