// Keras 3's attention layers (keras.layers.MultiHeadAttention, Attention, AdditiveAttention) on
// (batch, sequence, features) inputs. See docs/keras_attention.md.
//
// Each is a Layer handle, as the layers of keras/layers.h (same threading rules). The plain
// Layer call layer(x, training) is self-attention (query = value = key = x), so the layers sit
// in a Sequential or a subclassed model; the multi-input form is an operator() overload,
// layer(query, value, {.key = ..., masks..., .training = ...}), and Keras'
// return_attention_scores=True is call_with_scores(), which returns {output, scores}. Both build,
// cast and record like the plain call (the query goes in as the layer's input).
//
// Weights follow Keras 3.15's layout and order, so get_weights/set_weights and checkpoints
// exchange values with Keras: MultiHeadAttention has the sub-layers "query", "key", "value" and
// "attention_output" (Keras' EinsumDense), each with "kernel" and "bias", tracked as
// "<layer>/query/kernel", ...; Attention has "scale" and "concat_score_weight" (scalars),
// AdditiveAttention "scale" (dim,).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "keras/initializers.h"
#include "keras/keras_tensor.h"
#include "keras/layers.h"
#include "keras/regularizers.h"

namespace tapeflow::keras::layers {

// An attention layer's output and its attention scores (the probabilities after masking and
// softmax, before dropout): MultiHeadAttention (batch, num_heads, T, S), Attention and
// AdditiveAttention (batch, Tq, Tv).
struct AttentionOutputs {
  Tensor output;
  Tensor scores;
};

// An attention layer's call on KerasTensors in a functional model (keras/functional.h):
//   mha(query, value, key=k, use_causal_mask=True)  ->  mha(q, v, {.key = k, .use_causal_mask =
//   true}); Attention()([q, v, k])                   ->  attention(q, v, {.key = k}).
// The inputs' Keras masks become the call's query, value and key masks, and the query's mask
// the output's, as in Keras.
struct SymbolicAttentionCall {
  KerasTensor key = {};  // default: value
  // MultiHeadAttention's attention_mask (Keras' mha(q, v, attention_mask=m)): an input of the
  // graph, (batch, T, S) or any shape that broadcasts to the scores, true where allowed.
  KerasTensor attention_mask = {};
  bool use_causal_mask = false;
  std::optional<bool> training = std::nullopt;  // pinned (else the model's)
};

struct MultiHeadAttentionOptions {
  std::optional<int64_t> value_dim = std::nullopt;  // per head; default key_dim
  double dropout = 0.0;                             // of the attention probabilities
  bool use_bias = true;
  // The output's trailing dimensions (kernel (num_heads, value_dim, *output_shape)); empty: the
  // query's last dimension.
  std::vector<int64_t> output_shape = {};
  // The axes attention runs over (Keras' attention_axes; negative ones count from the end of
  // the projected (batch, ..., heads, head_dim) tensors, so -2 is the last input axis but the
  // features). Empty: every axis but the batch and the features, i.e. the sequence axis 1 of
  // (batch, T, dim) inputs.
  std::vector<int> attention_axes = {};
  Initializer kernel_initializer = {};  // glorot_uniform
  Initializer bias_initializer = {};    // zeros
  Regularizer kernel_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};  // of the four projections' kernels, as Keras'
  Constraint bias_constraint = {};
  std::optional<int64_t> seed = std::nullopt;  // of the dropout, as tf::nn::dropout's
  std::string name = "";
};

// MultiHeadAttention's call arguments beyond query and value. With inputs of rank > 3 (several
// attention axes) only attention_mask is taken; it broadcasts to the scores' shape after Keras'
// expansion (new axes inserted before the query's attention axes). Masks are bool (or numeric,
// nonzero keeps) with true where attention is allowed; undefined tensors are Keras' None.
struct MultiHeadAttentionCall {
  Tensor key = {};             // (batch, S, key features); default: value
  Tensor attention_mask = {};  // (batch, T, S), or any shape that broadcasts to it
  // Keras' masks of the inputs (what masking layers attach): (batch, T), (batch, S), (batch, S).
  // In Keras the query's mask is read off the query tensor (an explicit query_mask argument is
  // ignored); here it is passed. key_mask applies without a separate key too, as Keras'.
  Tensor query_mask = {};
  Tensor value_mask = {};
  Tensor key_mask = {};
  bool use_causal_mask = false;  // query position i attends to key positions j <= i only
  bool training = false;         // dropout of the attention probabilities
};

// Multi-head scaled dot-product attention (Vaswani et al. 2017), as Keras 3.15: query, key and
// value are projected to (batch, seq, num_heads, key_dim / value_dim) by the sub-layers
// "query", "key" and "value" (kernels (dim, num_heads, head_dim), biases (num_heads,
// head_dim)), the scores softmax(q k^T / sqrt(key_dim)) over the key positions weight the
// values, and "attention_output" (kernel (num_heads, value_dim, out), bias (out)) projects back.
//   MultiHeadAttention mha(4, 16);
//   Tensor y = mha(x);                                  // self-attention
//   Tensor z = mha(q, v, {.use_causal_mask = true});    // query and value (= key)
//   auto [out, scores] = mha.call_with_scores(q, v, {.key = k, .attention_mask = m});
// Masked positions: see docs/keras_attention.md (Keras 3.15 fills them differently depending
// on whether scores are returned or dropout is set, and so does this layer). Inputs of rank > 3
// (batch, d1, ..., features) attend over attention_axes (default: all of d1, ...).
class MultiHeadAttention : public Layer {
 public:
  MultiHeadAttention(int64_t num_heads, int64_t key_dim, MultiHeadAttentionOptions options = {});
  using Layer::operator();  // mha(x, training): self-attention
  Tensor operator()(const Tensor& query, const Tensor& value,
                    const MultiHeadAttentionCall& args = {}) const;
  AttentionOutputs call_with_scores(const Tensor& query, const Tensor& value,
                                    const MultiHeadAttentionCall& args = {}) const;
  // In a functional model: the output, or {output, scores} (Keras' return_attention_scores;
  // inputs of rank 3 for the scores).
  KerasTensor operator()(const KerasTensor& query, const KerasTensor& value,
                         const SymbolicAttentionCall& args = {}) const;
  std::vector<KerasTensor> call_with_scores(const KerasTensor& query, const KerasTensor& value,
                                            const SymbolicAttentionCall& args = {}) const;
  // Keras' build(query_shape, value_shape, key_shape=None) (batch dimension included, any value
  // there); Layer::build(shape) builds for self-attention.
  using Layer::build;
  void build(const TensorShape& query_shape, const TensorShape& value_shape,
             const std::optional<TensorShape>& key_shape = std::nullopt) const;
  int64_t num_heads() const;
  int64_t key_dim() const;
  int64_t value_dim() const;
  // The projection sub-layers (their kernel and bias are weights named "kernel" and "bias").
  Layer query_dense() const;
  Layer key_dense() const;
  Layer value_dense() const;
  Layer output_dense() const;
};

struct AttentionOptions {
  bool use_scale = false;          // a trainable scalar "scale" (ones) multiplies the scores
  std::string score_mode = "dot";  // "dot" or "concat"
  double dropout = 0.0;            // of the attention probabilities, in training only
  std::optional<int64_t> seed = std::nullopt;
  std::string name = "";
};

// Attention's and AdditiveAttention's call arguments beyond query and value (Keras' inputs
// [query, value, key] and mask [query_mask, value_mask]). Masks are bool (or numeric, nonzero
// keeps).
struct AttentionCall {
  Tensor key = {};         // (batch, Tv, dim); default: value
  Tensor query_mask = {};  // (batch, Tq): the output is zero where it is false
  Tensor value_mask = {};  // (batch, Tv): false positions get no attention
  bool use_causal_mask = false;
  bool training = false;
};

// Dot-product (Luong-style) attention: scores = query key^T ("dot", times "scale" with
// use_scale) or concat_score_weight * sum(tanh(scale * (query_i + key_j))) ("concat");
// output = softmax(scores) value. Inputs (batch, Tq, dim), (batch, Tv, value_dim) and
// (batch, Tv, dim); output (batch, Tq, value_dim).
//   Attention()  Attention(true)  Attention({.score_mode = "concat", .dropout = 0.1})
class Attention : public Layer {
 public:
  Attention() : Attention(AttentionOptions{}) {}
  explicit Attention(bool use_scale, std::string score_mode = "dot", double dropout = 0.0);
  explicit Attention(AttentionOptions options);
  using Layer::operator();  // attention(x, training): self-attention (Keras wants a list)
  Tensor operator()(const Tensor& query, const Tensor& value, const AttentionCall& args = {}) const;
  AttentionOutputs call_with_scores(const Tensor& query, const Tensor& value,
                                    const AttentionCall& args = {}) const;
  // In a functional model (Keras' layer([query, value, key])): the output, or {output, scores}.
  KerasTensor operator()(const KerasTensor& query, const KerasTensor& value,
                         const SymbolicAttentionCall& args = {}) const;
  std::vector<KerasTensor> call_with_scores(const KerasTensor& query, const KerasTensor& value,
                                            const SymbolicAttentionCall& args = {}) const;
};

struct AdditiveAttentionOptions {
  bool use_scale = true;  // a trainable "scale" (dim,), glorot_uniform
  double dropout = 0.0;
  std::optional<int64_t> seed = std::nullopt;
  std::string name = "";
};

// Additive (Bahdanau-style) attention: scores = sum(scale * tanh(query_i + key_j)) over the
// features; otherwise as Attention.
//   AdditiveAttention()  AdditiveAttention(false)  AdditiveAttention({.dropout = 0.1})
class AdditiveAttention : public Layer {
 public:
  AdditiveAttention() : AdditiveAttention(AdditiveAttentionOptions{}) {}
  explicit AdditiveAttention(bool use_scale, double dropout = 0.0);
  explicit AdditiveAttention(AdditiveAttentionOptions options);
  using Layer::operator();
  Tensor operator()(const Tensor& query, const Tensor& value, const AttentionCall& args = {}) const;
  AttentionOutputs call_with_scores(const Tensor& query, const Tensor& value,
                                    const AttentionCall& args = {}) const;
  // In a functional model (Keras' layer([query, value, key])): the output, or {output, scores}.
  KerasTensor operator()(const KerasTensor& query, const KerasTensor& value,
                         const SymbolicAttentionCall& args = {}) const;
  std::vector<KerasTensor> call_with_scores(const KerasTensor& query, const KerasTensor& value,
                                            const SymbolicAttentionCall& args = {}) const;
};

}  // namespace tapeflow::keras::layers

namespace tapeflow::keras::detail {
// What a symbolic attention call needs of its layer's class: its number of heads (0: scores
// (batch, Tq, Tv), else (batch, heads, Tq, Tv)), its build for the query, value and key shapes,
// its output shape, and its eager call.
struct AttentionHooks {
  int64_t heads = 0;
  std::function<void(const TensorShape& query, const TensorShape& value, const TensorShape& key)>
      build;
  std::function<TensorShape(const TensorShape& query, const TensorShape& value,
                            const TensorShape& key)>
      output_shape;
  std::function<layers::AttentionOutputs(const Tensor& query, const Tensor& value,
                                         const layers::MultiHeadAttentionCall& args, bool scores)>
      call;
};
// The symbolic call of an attention layer through its class's hooks (keras/functional.h's
// MultiCall): inputs {query, value, [key], [attention_mask]}, outputs {output[, scores]}.
std::vector<KerasTensor> attention_symbolic(const Layer& layer, const KerasTensor& query,
                                            const KerasTensor& value, const KerasTensor& key,
                                            const KerasTensor& attention_mask, bool use_causal_mask,
                                            bool scores, std::optional<bool> training,
                                            AttentionHooks hooks);
// The symbolic call of a MultiHeadAttention, Attention or AdditiveAttention layer on a query, a
// value and a key (undefined: the value), a MultiHeadAttention's attention_mask (undefined:
// none): {output} or, with `scores`, {output, scores}.
std::vector<KerasTensor> call_attention_symbolic(const Layer& layer, const KerasTensor& query,
                                                 const KerasTensor& value, const KerasTensor& key,
                                                 const KerasTensor& attention_mask,
                                                 bool use_causal_mask, bool scores,
                                                 std::optional<bool> training);
}  // namespace tapeflow::keras::detail
