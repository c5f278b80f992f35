// Keras' functional API (tf.keras.Input, layer calls on symbolic tensors, tf.keras.Model(inputs,
// outputs)). See docs/keras.md, "Functional API".
//
//   auto inputs = tf::keras::Input({784});                  // shape (None, 784)
//   auto x = tf::keras::layers::Dense(64, "relu")(inputs);   // builds the layer for (None, 784)
//   auto outputs = tf::keras::layers::Dense(10)(x);
//   tf::keras::Model model(inputs, outputs);                 // built at once
//
// A KerasTensor is a symbolic value: a shape (batch dimension None unless Input's batch_size
// fixes it), a dtype, a name, and the layer call (node) that produced it. Calling a layer on one
// builds the layer for that shape (as Sequential builds its layers) and records the call; a
// layer called twice is one layer with one set of weights (Keras' shared layers). Model(inputs,
// outputs) walks the calls back from the outputs and runs them in topological order on every
// call of the model, with the model's training flag (a call that pinned true stays in training).
//
// Calls of several inputs or outputs: a recurrent layer's states (RecurrentLayer::
// call_with_state, lstm(x, {h, c})) and attention on a query, a value and a key
// (MultiHeadAttention(q, v, {.key}), call_with_scores) make nodes with several inputs or
// outputs; each output KerasTensor has its tensor_index().
//
// Differences from Keras: inputs and outputs are single tensors or flat lists (no dicts or
// nested structures); layers take one input (but the calls above), merge layers
// (keras/layers_merge.h) a list; a
// model with several inputs is called with a std::vector<Tensor>; fit/evaluate/predict take
// lists or maps by name for several inputs or outputs (keras/model.h, docs/keras_fit.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "keras/keras_tensor.h"
#include "keras/layers.h"
#include "keras/model.h"

namespace tapeflow::keras {

// Keras' Input: a symbolic model input of `shape` (without the batch dimension; tf::None for an
// unknown size) and `dtype` (default backend::floatx(), as Keras), made by a new InputLayer
// named `name` (automatic names: "input_layer", "input_layer_1", ...). `batch_size` fixes the
// batch dimension.
KerasTensor Input(const std::vector<int64_t>& shape, std::optional<DType> dtype = std::nullopt,
                  std::string name = "", std::optional<int64_t> batch_size = std::nullopt);

namespace detail {

class MergeImpl;

// A layer call of several inputs or several outputs: a recurrent layer with initial states or
// returning its states (Keras' initial_state= and return_state=True), an attention layer on a
// query, a value and a key (returning its scores: return_attention_scores=True). `run` and
// `shapes` compute it; the rest is how Keras writes it in a model's config.
struct MultiCall {
  enum class Kind { recurrent, attention };
  Kind kind = Kind::recurrent;
  bool return_state = false;     // recurrent: the outputs are {output, states...}, else {output}
  bool return_scores = false;    // attention: the outputs are {output, scores}, else {output}
  bool use_causal_mask = false;  // attention
  bool has_key = false;          // attention: the inputs are {query, value, key}, else 2
  bool has_attention_mask = false;  // attention: then the attention_mask, the last input
  // The outputs and their Keras masks (undefined: none) from the inputs and their masks.
  std::function<std::vector<MaskedTensor>(const std::vector<Tensor>& inputs,
                                          const std::vector<Tensor>& masks, bool training)>
      run;
  // The outputs' shapes for the inputs' shapes.
  std::function<std::vector<TensorShape>(const std::vector<TensorShape>&)> shapes;
};

// One recorded layer call.
struct KerasNode {
  Layer layer;
  std::vector<KerasTensor> inputs;         // empty for an InputLayer
  bool list_call = false;                  // a merge layer's list of inputs
  std::shared_ptr<const MultiCall> multi;  // set for calls of several inputs or outputs
  int num_outputs = 1;
  std::optional<bool> training;  // pinned by the call, else the model's
  int node_index = 0;
  bool is_input() const { return inputs.empty(); }
};

struct KerasTensorData {
  TensorShape shape;
  DType dtype = float32;
  std::string name;
  std::shared_ptr<KerasNode> node;
  int tensor_index = 0;  // which of the node's outputs
};

// Records a call of `layer` on symbolic `inputs` (one, or a merge layer's list) and returns
// its symbolic output.
KerasTensor call_symbolic(const Layer& layer, const std::vector<KerasTensor>& inputs,
                          bool list_call, std::optional<bool> training);
// Records a call of several inputs or outputs (the layer already built for them) and returns
// its outputs, of `how->shapes` of the inputs' shapes and the layer's dtype.
std::vector<KerasTensor> call_multi(const Layer& layer, const std::vector<KerasTensor>& inputs,
                                    std::shared_ptr<const MultiCall> how,
                                    std::optional<bool> training);
// InvalidArgumentError naming `layer` and the position of an empty handle in `inputs`.
void check_defined(const Layer& layer, const std::vector<KerasTensor>& inputs);

// The state of a functional model: the recorded calls between its inputs and outputs.
class FunctionalImpl final : public ModelImpl {
 public:
  FunctionalImpl(const std::vector<KerasTensor>& inputs, const std::vector<KerasTensor>& outputs,
                 std::string name);

  std::vector<Layer> sublayers() const override { return layers_; }
  void on_sublayer_called(LayerImpl&) override {}
  void track(const Layer&) override {}
  // Masks flow through the model (execute); its output's mask is the output layer's.
  bool supports_masking() const override { return true; }
  Tensor compute_mask(const Tensor& x, const Tensor& mask) const override;
  TensorShape compute_output_shape(const TensorShape& input_shape) const override;
  std::vector<std::string> summary_connections() const override;
  // Keras' list of shapes for a layer whose (first) call has several outputs.
  std::vector<std::string> summary_shapes() const override { return shapes_; }

  const std::vector<KerasTensor>& inputs() const { return inputs_; }
  const std::vector<KerasTensor>& outputs() const { return outputs_; }
  // Runs the model on every input, returning every output (Model's vector call).
  // output_masks (if given) receives each output's Keras mask (undefined: none).
  std::vector<Tensor> call_all(const std::vector<Tensor>& inputs, bool training,
                               std::vector<Tensor>* output_masks = nullptr);

 protected:
  void build(const TensorShape&) override {}
  Tensor run(const Tensor& x, bool training) override;
  Tensor call(const Tensor& x, bool training) override { return run(x, training); }

 private:
  struct Step {
    Layer layer;
    MergeImpl* merge = nullptr;        // set for merge layers (list calls)
    const MultiCall* multi = nullptr;  // set for calls of several inputs or outputs
    std::vector<size_t> in;            // value slots
    std::vector<size_t> out;           // one per output
    std::optional<bool> training;
  };
  // `input_mask`: the first input's mask; `output_masks` (if given) receives each output's.
  std::vector<Tensor> execute(const std::vector<Tensor>& inputs, bool training,
                              const Tensor& input_mask = {},
                              std::vector<Tensor>* output_masks = nullptr) const;
  void check_inputs(const std::vector<Tensor>& inputs) const;

  std::vector<KerasTensor> inputs_, outputs_;
  std::vector<Step> steps_;
  std::vector<size_t> input_slots_, output_slots_;
  std::vector<bool> is_input_slot_;
  size_t slots_ = 0;
  std::vector<Layer> layers_;  // Keras' order: by decreasing depth, then traversal order
  std::vector<std::string> connections_, shapes_;
  bool sequential_like_ = true;
};

}  // namespace detail
}  // namespace tapeflow::keras
