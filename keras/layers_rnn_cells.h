// Keras 3's cell API: keras.layers.RNN(cell), the cells SimpleRNNCell, LSTMCell, GRUCell and
// StackedRNNCells, a cell base class to subclass (RNNCell), and ConvLSTM1D/2D/3D (an RNN over a
// convolutional LSTM cell). See docs/keras_recurrent.md, "Cells and the RNN layer".
//
// A cell is one timestep: call(inputs, states, training) -> {output, new states}. RNN runs it
// over the time axis of (batch, timesteps, ...) inputs as an unrolled loop of ops, so it works
// eagerly, under a GradientTape and in a traced tf::function alike (the number of timesteps
// must be known). A cell is a custom layer (it derives from tf::keras::Model): it creates its
// weights in build(step_input_shape) with add_weight, and the RNN layer lists them as its own,
// under the cell's name: "rnn/lstm_cell/kernel", as Keras 3.15.
//
// Threading: as every layer (keras/layers.h).
#pragma once

#include <concepts>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "keras/layers_recurrent.h"
#include "keras/model.h"

namespace tapeflow::keras::layers {

// Keras' RNN cell protocol. Subclass it and override state_size(), output_size() and
// call(inputs, states, training); build(step_input_shape) creates the weights (add_weight), as a
// custom layer's (docs/keras.md, "Custom layers"). Keep the cell object alive while it is used
// (RNN keeps a copy, so `RNN(MyCell(4))` is fine; a cell whose build stores weights in members
// must be built through the object that is called: the first one made).
class RNNCell : public Model {
 public:
  // Keras' state_size: the last dimension of each state ({units} or {units, units} for LSTM).
  virtual std::vector<int64_t> state_size() const = 0;
  // Keras' output_size: the last dimension of the output.
  virtual int64_t output_size() const = 0;
  // One timestep: `x` (batch, features...) and one tensor per state; returns the output and the
  // new states (as many as state_size()).
  virtual std::pair<Tensor, std::vector<Tensor>> call(const Tensor& x,
                                                      const std::vector<Tensor>& states,
                                                      bool training) = 0;
  // Keras' get_initial_state(batch_size): the states a sequence starts from. Default: zeros
  // (batch_size, state_size()[i]) in the cell's compute dtype.
  virtual std::vector<Tensor> get_initial_state(int64_t batch_size) const;
  // The output shape of one step for a step input shape (batch first). Default: (batch,
  // output_size()); ConvLSTM's cells override it.
  virtual TensorShape step_output_shape(const TensorShape& step_input_shape) const;

  // Keras' cell(inputs, states): one step, called as a layer (builds, tracks, casts). Empty
  // `states`: get_initial_state.
  std::pair<Tensor, std::vector<Tensor>> operator()(const Tensor& x,
                                                    const std::vector<Tensor>& states,
                                                    bool training = false) const;
  using Model::operator();
  // A call without states (Layer::operator()(x)): the output from get_initial_state's states.
  Tensor call(const Tensor& x, bool training) final;

  // Keras' DropoutRNNCell: `count` dropout masks of ones_like(like) at `rate` (nn::dropout,
  // scaled by 1 / (1 - rate)), drawn at the first step of an RNN call and reused by its later
  // steps; `slot` tells masks apart (0: inputs, 1: recurrent state). Outside an RNN call
  // (the cell called by hand) every call draws new ones.
  std::vector<Tensor> dropout_masks(const Tensor& like, double rate, int count, int slot,
                                    std::optional<int64_t> seed) const;

 protected:
  explicit RNNCell(std::string name = "") : Model(std::move(name)) {}
};

// The options of the built-in cells: those of the full layers (keras/layers_recurrent.h)
// without the sequence ones (return_sequences, go_backwards, ... belong to RNN).
struct SimpleRNNCellOptions {
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
  // Keras' dropout of the inputs and of the recurrent state, in training only: masks drawn once
  // per RNN call and shared by its timesteps (one per gate when recurrent_dropout is set, as
  // Keras' implementation 1); seed as tf::nn::dropout's.
  double dropout = 0.0;
  double recurrent_dropout = 0.0;
  std::optional<int64_t> seed = std::nullopt;
  std::string name = "";
};
struct LSTMCellOptions {
  std::string activation = "tanh";
  std::string recurrent_activation = "sigmoid";
  bool use_bias = true;
  Initializer kernel_initializer = {};
  Initializer recurrent_initializer = {};
  Initializer bias_initializer = {};
  bool unit_forget_bias = true;
  Regularizer kernel_regularizer = {};
  Regularizer recurrent_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};
  Constraint recurrent_constraint = {};
  Constraint bias_constraint = {};
  // Keras' dropout of the inputs and of the recurrent state, in training only: masks drawn once
  // per RNN call and shared by its timesteps (one per gate when recurrent_dropout is set, as
  // Keras' implementation 1); seed as tf::nn::dropout's.
  double dropout = 0.0;
  double recurrent_dropout = 0.0;
  std::optional<int64_t> seed = std::nullopt;
  std::string name = "";
};
struct GRUCellOptions {
  std::string activation = "tanh";
  std::string recurrent_activation = "sigmoid";
  bool use_bias = true;
  Initializer kernel_initializer = {};
  Initializer recurrent_initializer = {};
  Initializer bias_initializer = {};
  Regularizer kernel_regularizer = {};
  Regularizer recurrent_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};
  Constraint recurrent_constraint = {};
  Constraint bias_constraint = {};
  bool reset_after = true;  // Keras 3's default, as GRU's
  // Keras' dropout of the inputs and of the recurrent state, in training only: masks drawn once
  // per RNN call and shared by its timesteps (one per gate when recurrent_dropout is set, as
  // Keras' implementation 1); seed as tf::nn::dropout's.
  double dropout = 0.0;
  double recurrent_dropout = 0.0;
  std::optional<int64_t> seed = std::nullopt;
  std::string name = "";
};

// h = activation(x @ kernel + bias + h @ recurrent_kernel); states {h}.
class SimpleRNNCell : public RNNCell {
 public:
  explicit SimpleRNNCell(int64_t units, SimpleRNNCellOptions options = {});
  int64_t units() const { return units_; }
  const SimpleRNNCellOptions& options() const {
    return o_;
  }  // as given (unset initializers undefined)
  std::vector<int64_t> state_size() const override { return {units_}; }
  int64_t output_size() const override { return units_; }
  std::pair<Tensor, std::vector<Tensor>> call(const Tensor& x, const std::vector<Tensor>& states,
                                              bool training) override;
  using RNNCell::call;
  void build(const TensorShape& input_shape) override;

 private:
  int64_t units_;
  SimpleRNNCellOptions o_;
  activations::Activation act_, ract_;  // resolved once, not at every step
};

// LSTM's step (gates i, f, c, o; weights as LSTM's); states {h, c}.
class LSTMCell : public RNNCell {
 public:
  explicit LSTMCell(int64_t units, LSTMCellOptions options = {});
  int64_t units() const { return units_; }
  const LSTMCellOptions& options() const { return o_; }  // as given (unset initializers undefined)
  std::vector<int64_t> state_size() const override { return {units_, units_}; }
  int64_t output_size() const override { return units_; }
  std::pair<Tensor, std::vector<Tensor>> call(const Tensor& x, const std::vector<Tensor>& states,
                                              bool training) override;
  using RNNCell::call;
  void build(const TensorShape& input_shape) override;

 private:
  int64_t units_;
  LSTMCellOptions o_;
  activations::Activation act_, ract_;  // resolved once, not at every step
};

// GRU's step (gates z, r, h; weights as GRU's); states {h}.
class GRUCell : public RNNCell {
 public:
  explicit GRUCell(int64_t units, GRUCellOptions options = {});
  int64_t units() const { return units_; }
  const GRUCellOptions& options() const { return o_; }  // as given (unset initializers undefined)
  std::vector<int64_t> state_size() const override { return {units_}; }
  int64_t output_size() const override { return units_; }
  std::pair<Tensor, std::vector<Tensor>> call(const Tensor& x, const std::vector<Tensor>& states,
                                              bool training) override;
  using RNNCell::call;
  void build(const TensorShape& input_shape) override;

 private:
  int64_t units_;
  GRUCellOptions o_;
  activations::Activation act_, ract_;  // resolved once, not at every step
};

// Keras' StackedRNNCells: the cells one after another within a timestep (each one's output is
// the next one's input). Its states are the cells' states in order, flattened: Keras nests
// them (one list per cell, in return_state's result and initial_state too); here
// call_with_state gives {output, states of cell 1..., states of cell 2...}. Its output is the
// last cell's.
class StackedRNNCells : public RNNCell {
 public:
  explicit StackedRNNCells(std::vector<std::shared_ptr<RNNCell>> cells, std::string name = "");
  template <class... Cells>
  requires(sizeof...(Cells) >= 1 && (std::derived_from<Cells, RNNCell> &&
                                     ...)) explicit StackedRNNCells(const Cells&... cells)
      : StackedRNNCells(std::vector<std::shared_ptr<RNNCell>>{std::make_shared<Cells>(cells)...}) {}
  std::vector<int64_t> state_size() const override;
  int64_t output_size() const override;
  std::pair<Tensor, std::vector<Tensor>> call(const Tensor& x, const std::vector<Tensor>& states,
                                              bool training) override;
  using RNNCell::call;
  std::vector<Tensor> get_initial_state(int64_t batch_size) const override;
  TensorShape step_output_shape(const TensorShape& step_input_shape) const override;
  const std::vector<std::shared_ptr<RNNCell>>& cells() const { return cells_; }

 private:
  std::vector<std::shared_ptr<RNNCell>> cells_;
};

struct RNNOptions {
  bool return_sequences = false;  // (batch, timesteps, output...) instead of the last output
  bool go_backwards = false;      // last timestep first (outputs stay in that order)
  // Keras' stateful: each call starts from the final states of the previous one until
  // reset_states() (docs/keras_recurrent.md, "Stateful layers").
  bool stateful = false;
  // Keras' unroll: inside tf::function, false (the default) runs the timesteps after the first
  // as one loop node; true traces one copy of the cell per timestep (docs/keras_recurrent.md).
  bool unroll = false;
  // With a mask: masked steps output zeros instead of repeating the previous output.
  bool zero_output_for_mask = false;
  std::vector<int64_t> input_shape = {};  // (timesteps, features...), builds at construction
  std::string name = "";
};

// Keras' RNN(cell): runs `cell` over the timesteps of (batch, timesteps, features...) inputs.
// Keras' return_state is call_with_state(). RNN keeps a copy of the cell object (the copy
// shares the cell's state and weights, as every layer handle).
//   RNN(LSTMCell(8))  RNN(MyCell(4), {.return_sequences = true})
//   RNN(StackedRNNCells(SimpleRNNCell(8), GRUCell(4)))
class RNN : public Layer {
 public:
  template <class Cell>
  requires std::derived_from<Cell, RNNCell>
  explicit RNN(const Cell& cell, RNNOptions options = {})
      : RNN(std::shared_ptr<RNNCell>(std::make_shared<Cell>(cell)), std::move(options)) {}
  RNN(std::shared_ptr<RNNCell> cell, RNNOptions options);
  // The cell (the copy RNN keeps).
  RNNCell& cell() const;
  bool return_sequences() const;
  bool go_backwards() const;
  // Keras' layer(x, initial_state=..., mask=..., return_state=True): {output, final states...}
  // with the states flattened in state order. `initial_state` empty: the cell's
  // get_initial_state. Builds, casts and records like operator().
  std::vector<Tensor> call_with_state(const Tensor& x,
                                      const std::vector<Tensor>& initial_state = {},
                                      bool training = false, const Tensor& mask = {}) const;
  // Keras' stateful layers (options.stateful), as RecurrentLayer's: states() are the kept
  // states (variables "<name>/rnn_state", first made from the cell's get_initial_state at the
  // first call), reset_state() sets them to zeros, reset_states(values) to the values.
  bool stateful() const;
  std::vector<Variable> states() const;
  void reset_state() const { reset_states(); }
  void reset_states(const std::vector<Tensor>& values = {}) const;
  // Internal: call_with_state of the RNN behind `layer` (Bidirectional's call).
  static std::vector<Tensor> call_with_state_of(const std::shared_ptr<detail::LayerImpl>& layer,
                                                const Tensor& x,
                                                const std::vector<Tensor>& initial_state,
                                                bool training, const Tensor& mask);

 protected:
  explicit RNN(std::shared_ptr<detail::LayerImpl> impl) : Layer(std::move(impl)) {}
};

// ConvLSTM1D/2D/3D's options (Keras' keyword arguments). Each of strides and dilation_rate is
// one value for every spatial dimension or one per dimension.
struct ConvLSTMOptions {
  std::vector<int> strides = {1};
  std::string padding = "valid";  // "valid" or "same"
  // "" (backend::image_data_format(), Keras' None), "channels_last": steps (spatial...,
  // channels); "channels_first": steps (channels, spatial...), states (filters, spatial...),
  // computed with the convolutions' channels-first data_formats; the same weights.
  std::string data_format = "";
  std::vector<int> dilation_rate = {1};
  std::string activation = "tanh";
  std::string recurrent_activation = "sigmoid";
  bool use_bias = true;
  Initializer kernel_initializer = {};     // glorot_uniform
  Initializer recurrent_initializer = {};  // orthogonal
  Initializer bias_initializer = {};       // zeros
  bool unit_forget_bias = true;
  Regularizer kernel_regularizer = {};
  Regularizer recurrent_regularizer = {};
  Regularizer bias_regularizer = {};
  Constraint kernel_constraint = {};
  Constraint recurrent_constraint = {};
  Constraint bias_constraint = {};
  bool return_sequences = false;
  bool go_backwards = false;
  bool stateful = false;  // as RNNOptions'
  // With a mask: masked steps output zeros instead of repeating the previous output (as
  // RNNOptions'; Bidirectional's return_sequences copies set it, as Keras).
  bool zero_output_for_mask = false;
  // As the cells' (one mask per gate for each, as Keras' ConvLSTM).
  double dropout = 0.0;
  double recurrent_dropout = 0.0;
  std::optional<int64_t> seed = std::nullopt;
  std::vector<int64_t> input_shape = {};  // (timesteps, spatial..., channels)
  std::string name = "";
};

// Keras' ConvLSTM{1,2,3}D: an LSTM whose matmuls are convolutions. Inputs (batch, timesteps,
// spatial..., channels); kernel (kernel_size..., channels, 4 filters), recurrent_kernel
// (kernel_size..., filters, 4 filters; convolved with stride 1 and "same" padding), bias
// (4 filters); gates i, f, c, o. States {h, c} of shape (batch, out spatial..., filters).
// `kernel_size` has one value (every dimension) or one per spatial dimension.
//   ConvLSTM2D(16, {3, 3})  ConvLSTM2D(16, {3}, {.padding = "same", .return_sequences = true})
class ConvLSTM : public RNN {
 public:
  ConvLSTM(int rank, int64_t filters, std::vector<int64_t> kernel_size, ConvLSTMOptions options);
};
class ConvLSTM1D : public ConvLSTM {
 public:
  ConvLSTM1D(int64_t filters, std::vector<int64_t> kernel_size, ConvLSTMOptions options = {})
      : ConvLSTM(1, filters, std::move(kernel_size), std::move(options)) {}
};
class ConvLSTM2D : public ConvLSTM {
 public:
  ConvLSTM2D(int64_t filters, std::vector<int64_t> kernel_size, ConvLSTMOptions options = {})
      : ConvLSTM(2, filters, std::move(kernel_size), std::move(options)) {}
};
class ConvLSTM3D : public ConvLSTM {
 public:
  ConvLSTM3D(int64_t filters, std::vector<int64_t> kernel_size, ConvLSTMOptions options = {})
      : ConvLSTM(3, filters, std::move(kernel_size), std::move(options)) {}
};

}  // namespace tapeflow::keras::layers

namespace tapeflow::keras::detail {
// The gate math of one timestep, shared by the full layers (keras/layers_recurrent.cpp) and the
// cells. Inputs are projections: `xp` = x W + b (every gate), `hp` = h U (+ GRU's recurrent
// bias), undefined for a zero state (its terms are skipped, same values).
using ActivationFn = activations::Activation;
// LSTM: z = xp + hp split into i, f, c~, o (along `axis`, the last by default); returns {h, c}.
// `c_prev` undefined: zeros.
std::pair<Tensor, Tensor> lstm_gates(const ActivationFn& act, const ActivationFn& ract,
                                     const Tensor& z, const Tensor& c_prev, int axis = -1);
// GRU with reset_after: h = z h_prev + (1 - z) act(x_h + r r_h).
Tensor gru_gates_reset_after(const ActivationFn& act, const ActivationFn& ract, const Tensor& xp,
                             const Tensor& hp, const Tensor& h_prev);
// GRU without reset_after: `rz`, `rr` are h U_z and h U_r, `reset_h(r)` gives (r h) U_h.
Tensor gru_gates_reset_before(const ActivationFn& act, const ActivationFn& ract, const Tensor& xp,
                              const Tensor& rz, const Tensor& rr,
                              const std::function<Tensor(const Tensor&)>& reset_h,
                              const Tensor& h_prev);
// Keras' DropoutRNNCell rates: dropout and recurrent_dropout in [0, 1]; anything else is an
// InvalidArgumentError naming `cls`. At 1, SimpleRNN drops everything while the gated cells (LSTM,
// GRU, ConvLSTM) apply no dropout at all, as Keras 3 (they mask only when 0 < rate < 1).
void check_rates(const char* cls, double dropout, double recurrent_dropout);
// A dropout mask over `ones` (the mask's shape): tf::nn::dropout's kept-and-scaled ones, or
// zeros at rate 1 (where tf::nn::dropout, as TF's, refuses the rate).
Tensor dropout_mask(const Tensor& ones, double rate, std::optional<int64_t> seed);
// The rate a gated cell (LSTM, GRU, ConvLSTM) applies: Keras 3's gated cells skip the mask unless
// 0 < rate < 1, so a rate of 1 means no dropout there.
inline double gated_rate(double rate) {
  return rate < 1.0 ? rate : 0.0;
}
}  // namespace tapeflow::keras::detail
