// Keras 3's recurrent layers (keras.layers.SimpleRNN, LSTM, GRU) and the Bidirectional wrapper,
// on (batch, timesteps, features) inputs. See docs/keras_recurrent.md.
//
// Weights follow Keras 3.15's layout, so get_weights/set_weights exchange values with Keras:
// kernel (features, k * units), recurrent_kernel (units, k * units) and bias, with k = 1
// (SimpleRNN), 4 (LSTM: gates i, f, c, o) or 3 (GRU: gates z, r, h; bias (2, 3 * units) with
// reset_after, (3 * units) without). A call projects every timestep's input with one matmul,
// then runs the timesteps one after the other, so it works eagerly, under a GradientTape and
// inside a traced tf::function alike; traced, the timesteps are one loop node (unroll = false,
// Keras' default: any number of timesteps, None included) or one copy of the step each.
//
// Keras' return_state (several outputs) is call_with_state(): {output, states...}, which also
// takes initial states. Threading: as every layer (keras/layers.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "keras/layers.h"

namespace tapeflow::keras::layers {

class RNN;  // keras/layers_rnn_cells.h

struct SimpleRNNOptions {
  std::string activation = "tanh";
  bool use_bias = true;
  Initializer kernel_initializer = {};     // glorot_uniform
  Initializer recurrent_initializer = {};  // orthogonal
  Initializer bias_initializer = {};       // zeros
  Regularizer kernel_regularizer = {};
  Regularizer recurrent_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};
  Constraint recurrent_constraint = {};
  Constraint bias_constraint = {};
  bool return_sequences = false;  // (batch, timesteps, units) instead of the last output
  bool go_backwards = false;      // run the timesteps last to first
  // Keras' stateful: each call starts from the final states of the previous one (per sample
  // index, so the batch size stays fixed) until reset_states(); see docs/keras_recurrent.md.
  bool stateful = false;
  // Keras' unroll: inside tf::function, false (Keras' default) runs the timesteps as one loop
  // node (one copy of the step; any number of timesteps, None included, with one trace); true
  // traces one copy of the step per timestep (faster for a few short steps, as Keras says).
  // Eagerly the timesteps run one after the other either way.
  bool unroll = false;
  // With a mask (docs/keras_recurrent.md, "Masking and padding"): masked steps output zeros
  // instead of repeating the previous output (Keras' zero_output_for_mask).
  bool zero_output_for_mask = false;
  // Keras' dropout of the inputs and of the recurrent state, in training only (see
  // docs/keras_recurrent.md); seed as tf::nn::dropout's.
  double dropout = 0.0;
  double recurrent_dropout = 0.0;
  std::optional<int64_t> seed = std::nullopt;
  std::vector<int64_t> input_shape = {};  // (timesteps, features), builds at construction
  std::string name = "";
};

struct LSTMOptions {
  std::string activation = "tanh";
  std::string recurrent_activation = "sigmoid";
  bool use_bias = true;
  Initializer kernel_initializer = {};     // glorot_uniform
  Initializer recurrent_initializer = {};  // orthogonal
  Initializer bias_initializer = {};       // zeros
  bool unit_forget_bias = true;            // the forget gate's bias starts at 1
  Regularizer kernel_regularizer = {};
  Regularizer recurrent_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};
  Constraint recurrent_constraint = {};
  Constraint bias_constraint = {};
  bool return_sequences = false;
  bool go_backwards = false;
  bool stateful = false;  // as SimpleRNNOptions'
  bool unroll = false;
  bool zero_output_for_mask = false;
  double dropout = 0.0;
  double recurrent_dropout = 0.0;
  std::optional<int64_t> seed = std::nullopt;
  std::vector<int64_t> input_shape = {};
  std::string name = "";
};

struct GRUOptions {
  std::string activation = "tanh";
  std::string recurrent_activation = "sigmoid";
  bool use_bias = true;
  Initializer kernel_initializer = {};     // glorot_uniform
  Initializer recurrent_initializer = {};  // orthogonal
  Initializer bias_initializer = {};       // zeros
  Regularizer kernel_regularizer = {};
  Regularizer recurrent_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};
  Constraint recurrent_constraint = {};
  Constraint bias_constraint = {};
  bool return_sequences = false;
  bool go_backwards = false;
  bool stateful = false;  // as SimpleRNNOptions'
  bool unroll = false;
  bool zero_output_for_mask = false;
  // Keras 3's default: the reset gate multiplies the recurrent projection (h @ U_h + b_h) and
  // the bias is (2, 3 * units), input and recurrent; false: it multiplies h before the matmul.
  bool reset_after = true;
  double dropout = 0.0;
  double recurrent_dropout = 0.0;
  std::optional<int64_t> seed = std::nullopt;
  std::vector<int64_t> input_shape = {};
  std::string name = "";
};

// What SimpleRNN, LSTM and GRU share: the weights and the call that returns states.
class RecurrentLayer : public Layer {
 public:
  RecurrentLayer() = default;
  int64_t units() const;
  bool return_sequences() const;
  bool go_backwards() const;
  // The number of states: 2 for LSTM (h, c), 1 otherwise (h).
  int num_states() const;
  // The weights (FailedPreconditionError before the build; bias also without use_bias).
  Variable kernel() const;
  Variable recurrent_kernel() const;
  Variable bias() const;
  // Keras' layer(x, initial_state=..., return_state=True): {output, final states...} (LSTM:
  // {output, h, c}; else {output, h}). `initial_state` is empty (zeros) or one (batch, units)
  // tensor per state. Builds, casts and records like operator(). `mask` (batch, timesteps) is
  // Keras' mask argument (undefined: none; see Layer::call_with_mask).
  std::vector<Tensor> call_with_state(const Tensor& x,
                                      const std::vector<Tensor>& initial_state = {},
                                      bool training = false, const Tensor& mask = {}) const;
  // The same in a functional model (keras/functional.h), on KerasTensors: Keras'
  //   auto [out, h, c] = LSTM(...)(x, return_state=True)   (encoder)
  // as  auto s = lstm.call_with_state(x);  s = {output, h, c}, one KerasTensor each, and
  //   LSTM(...)(y, initial_state=[h, c])                     (decoder)
  // as  lstm(y, {h, c})  (the output alone). States are (batch, units); x's mask reaches the
  // layer and the output (with return_sequences), not the states, as Keras.
  std::vector<KerasTensor> call_with_state(const KerasTensor& x,
                                           const std::vector<KerasTensor>& initial_state = {},
                                           std::optional<bool> training = std::nullopt) const;
  using Layer::operator();
  KerasTensor operator()(const KerasTensor& x, const std::vector<KerasTensor>& initial_state,
                         std::optional<bool> training = std::nullopt) const;
  // Keras' stateful layers (options.stateful; docs/keras_recurrent.md). states(): the kept
  // states, non-trainable variables "<name>/rnn_state" of shape (batch, units), made by the
  // first call (empty before it and for a layer that is not stateful). reset_state(): Keras'
  // reset_state(), the kept states to zeros. reset_states(values): tf.keras 2's
  // reset_states(states), one (batch, units) tensor per state (no values: zeros); before the
  // first call the values make the states (and fix the batch size).
  bool stateful() const;
  std::vector<Variable> states() const;
  void reset_state() const { reset_states(); }
  void reset_states(const std::vector<Tensor>& values = {}) const;

 protected:
  friend class Bidirectional;
  explicit RecurrentLayer(std::shared_ptr<detail::LayerImpl> impl) : Layer(std::move(impl)) {}
};

// h_t = activation(x_t @ kernel + h_{t-1} @ recurrent_kernel + bias).
//   SimpleRNN(8)  SimpleRNN(8, "relu")  SimpleRNN(8, {.return_sequences = true})
class SimpleRNN : public RecurrentLayer {
 public:
  explicit SimpleRNN(int64_t units) : SimpleRNN(units, SimpleRNNOptions{}) {}
  template <class S>
  requires std::is_convertible_v<S, std::string> SimpleRNN(int64_t units, S&& activation,
                                                           bool use_bias = true)
      : SimpleRNN(units, SimpleRNNOptions{.activation = std::string(std::forward<S>(activation)),
                                          .use_bias = use_bias}) {}
  SimpleRNN(int64_t units, SimpleRNNOptions options);
};

// Long short-term memory (Hochreiter 1997) with Keras' gate order i, f, c, o:
//   c_t = f * c_{t-1} + i * activation(c~),  h_t = o * activation(c_t),
// i, f, o = recurrent_activation(...). States {h, c}.
//   LSTM(32)  LSTM(32, {.return_sequences = true})
class LSTM : public RecurrentLayer {
 public:
  explicit LSTM(int64_t units) : LSTM(units, LSTMOptions{}) {}
  template <class S>
  requires std::is_convertible_v<S, std::string> LSTM(int64_t units, S&& activation,
                                                      std::string recurrent_activation = "sigmoid",
                                                      bool use_bias = true)
      : LSTM(units, LSTMOptions{.activation = std::string(std::forward<S>(activation)),
                                .recurrent_activation = std::move(recurrent_activation),
                                .use_bias = use_bias}) {}
  LSTM(int64_t units, LSTMOptions options);
};

// Gated recurrent unit (Cho 2014), Keras' gate order z, r, h:
//   h_t = z * h_{t-1} + (1 - z) * activation(x_h + r * (h_{t-1} @ U_h + b_h))   (reset_after)
//   GRU(32)  GRU(32, {.reset_after = false})
class GRU : public RecurrentLayer {
 public:
  explicit GRU(int64_t units) : GRU(units, GRUOptions{}) {}
  template <class S>
  requires std::is_convertible_v<S, std::string> GRU(int64_t units, S&& activation,
                                                     std::string recurrent_activation = "sigmoid",
                                                     bool use_bias = true)
      : GRU(units, GRUOptions{.activation = std::string(std::forward<S>(activation)),
                              .recurrent_activation = std::move(recurrent_activation),
                              .use_bias = use_bias}) {}
  GRU(int64_t units, GRUOptions options);
};

// Runs a copy of `layer` forwards ("forward_<name>") and another backwards ("backward_<name>",
// go_backwards flipped) and merges their outputs: "concat" (last axis), "sum", "mul" or "ave".
// As Keras, the copies are new layers with the given layer's configuration (not its weights);
// with return_sequences the backward outputs are put back in time order before the merge.
class Bidirectional : public Layer {
 public:
  explicit Bidirectional(const RecurrentLayer& layer, std::string merge_mode = "concat",
                         std::string name = "");
  // An RNN(cell) or a ConvLSTM1D/2D/3D: copied as Keras copies it, through its config (so its
  // cell must be one tapeflow serializes: the built-in cells, StackedRNNCells, or a cell class
  // registered with keras/serialization_json.h). The concat merge joins the last axes, as Keras
  // (a channels_first ConvLSTM's last axis is spatial).
  explicit Bidirectional(const RNN& layer, std::string merge_mode = "concat",
                         std::string name = "");
  // Keras' backward_layer argument: `layer` runs forwards and `backward_layer` backwards, both
  // used as they are (not copied), new layers of one class with the same units,
  // return_sequences and stateful and opposite go_backwards (InvalidArgumentError naming the
  // difference otherwise).
  Bidirectional(const Layer& layer, const Layer& backward_layer, std::string merge_mode = "concat",
                std::string name = "");
  // The two copies, whatever their class; forward_layer()/backward_layer() for a wrapped
  // SimpleRNN, LSTM or GRU (FailedPreconditionError for an RNN).
  Layer forward() const;
  Layer backward() const;
  RecurrentLayer forward_layer() const;
  RecurrentLayer backward_layer() const;
  // Both layers' kept states to zeros (stateful layers; Keras' reset_state()).
  void reset_state() const;
  void reset_states() const { reset_state(); }
  // {output, forward states..., backward states...}; `initial_state` is empty or the forward
  // states followed by the backward ones (Keras' order). `mask` as RecurrentLayer's.
  std::vector<Tensor> call_with_state(const Tensor& x,
                                      const std::vector<Tensor>& initial_state = {},
                                      bool training = false, const Tensor& mask = {}) const;
  // On KerasTensors in a functional model, as RecurrentLayer's (a wrapped SimpleRNN, LSTM or
  // GRU): {output, forward states..., backward states...}, and the output alone of a call with
  // initial states.
  std::vector<KerasTensor> call_with_state(const KerasTensor& x,
                                           const std::vector<KerasTensor>& initial_state = {},
                                           std::optional<bool> training = std::nullopt) const;
  using Layer::operator();
  KerasTensor operator()(const KerasTensor& x, const std::vector<KerasTensor>& initial_state,
                         std::optional<bool> training = std::nullopt) const;
};

}  // namespace tapeflow::keras::layers

namespace tapeflow::keras::detail {
// call_with_state of a recurrent layer or a Bidirectional: invokes `layer` (as Layer's
// operator() does) with `initial_state` and returns {output, final states...}.
std::vector<Tensor> call_with_state(const std::shared_ptr<LayerImpl>& layer, const Tensor& x,
                                    const std::vector<Tensor>& initial_state, bool training,
                                    const Tensor& mask = {});
// The symbolic call of a SimpleRNN, LSTM, GRU or a Bidirectional of one in a functional model:
// {output, final states...} with `return_state`, else {output} (InvalidArgumentError naming
// the layer for other classes and for initial states of the wrong number or shape).
std::vector<KerasTensor> call_with_state_symbolic(const Layer& layer, const KerasTensor& x,
                                                  const std::vector<KerasTensor>& initial_state,
                                                  bool return_state, std::optional<bool> training);
}  // namespace tapeflow::keras::detail
