// Keras' stateful=True for the recurrent layers (SimpleRNN, LSTM, GRU, RNN(cell), ConvLSTM): the
// final states of a call are the initial states of the next. See docs/keras_recurrent.md,
// "Stateful layers".
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

#include "autograd/variable.h"
#include "core/tensor.h"
#include "keras/layers.h"

namespace tapeflow::keras::detail {

// The kept states of one stateful layer: non-trainable variables "<layer>/rnn_state", one per
// state, in the layer's variable dtype, made at the layer's first call whose batch size is known
// (Keras makes them at a build with a static batch size). As in Keras they are not weights:
// weights() does not list them and files do not hold them.
class RecurrentStates {
 public:
  // The states a call of `layer` on `x` starts from: `given` when it is not empty (an explicit
  // initial state wins, as in Keras), else the kept states, read in the layer's compute dtype.
  // Makes the variables at the first call from `make(batch)` (Keras' get_initial_state), eagerly
  // with `mirror`'s placement, also inside a trace. Keras' error for a batch size other than
  // the states'; an unknown (None) batch size, and a call in a replica of a strategy with
  // several replicas, are refused.
  std::vector<Tensor> initial(const LayerImpl& layer, const Tensor& x,
                              const std::vector<Tensor>& given,
                              const std::function<std::vector<Tensor>(int64_t)>& make,
                              const ::tapeflow::detail::MirrorSpec& mirror);
  // Keeps a call's final states (cast to the variables' dtype): assignments, graph nodes when
  // traced.
  void keep(const std::vector<Tensor>& finals);
  // Keras' reset_state(): every kept state to zeros (nothing before the first call). With
  // `values` (tf.keras 2's reset_states(states)): those, one per state, of the states' shapes;
  // before the first call they make the states. A layer that is not `stateful` keeps nothing:
  // no values is nothing to do, values are an InvalidArgumentError.
  void reset(const LayerImpl& layer, bool stateful, const std::vector<Tensor>& values,
             const ::tapeflow::detail::MirrorSpec& mirror);
  // The variables (empty before the first call), in state order.
  std::vector<Variable> variables() const;

 private:
  void make_variables(const LayerImpl& layer, const std::vector<Tensor>& values,
                      const ::tapeflow::detail::MirrorSpec& mirror);
  mutable std::mutex mu_;
  std::vector<Variable> vars_;  // guarded by mu_; set once
};

}  // namespace tapeflow::keras::detail
