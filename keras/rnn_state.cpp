// Keras' stateful recurrent layers: the kept states (keras/rnn_state.h).
#include "keras/rnn_state.h"

#include <algorithm>
#include <string>

#include "core/check.h"
#include "core/context.h"
#include "distribute/replica_context.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/unary.h"

namespace tapeflow::keras::detail {
void RecurrentStates::make_variables(const LayerImpl& layer, const std::vector<Tensor>& values,
                                     const ::tapeflow::detail::MirrorSpec& mirror) {
  // Eagerly, outside traces and tapes, placed as the layer's weights.
  BuildScope scope(mirror);
  std::vector<Variable> vars;
  for (const Tensor& v : values)
    vars.emplace_back(v.dtype() == layer.dtype() ? v : cast(v, layer.dtype()),
                      layer.name() + "/rnn_state", false);
  vars_ = std::move(vars);
}

std::vector<Tensor> RecurrentStates::initial(
    const LayerImpl& layer, const Tensor& x, const std::vector<Tensor>& given,
    const std::function<std::vector<Tensor>(int64_t)>& make,
    const ::tapeflow::detail::MirrorSpec& mirror) {
  const std::string name = layer.name();
  const std::string cls = layer.class_name();
  if (auto* ctx = distribute::get_replica_context(); ctx && ctx->num_replicas_in_sync() > 1)
    TF_THROW(UnimplementedError, name.c_str(),
             "layer \"{}\" ({}) is stateful, which a strategy's {} replicas cannot share (each "
             "would need its own states); use stateful=false under a distribution strategy",
             name, cls, ctx->num_replicas_in_sync());
  const int64_t batch = x.shape()[0];
  // tf::function traces at each call's shapes (jit/function.h), so a known batch size is the
  // rule; a None one (a graph built by other means) cannot be checked against the states.
  TF_CHECK_ARG(batch != None, name.c_str(),
               "layer \"{}\" ({}) is stateful and needs a known batch size (Keras: \"When using "
               "`stateful=True` in a RNN, the batch size must be static\"), got input shape {}",
               name, cls, x.shape().to_string());
  std::lock_guard lock(mu_);
  if (vars_.empty()) make_variables(layer, make(batch), mirror);
  const int64_t expected = vars_[0].shape()[0];
  TF_CHECK_ARG(batch == expected, name.c_str(),
               "layer \"{}\" ({}): If an RNN is stateful, the batch size of the input sequences "
               "must be the same as the batch size of the initial state. \n- Expected batch "
               "size: {}\n- Received batch size: {}",
               name, cls, expected, batch);
  if (!given.empty()) return given;
  std::vector<Tensor> out;
  for (const Variable& v : vars_) {
    const Tensor value = v.read_value();
    out.push_back(value.dtype() == layer.compute_dtype() ? value
                                                         : cast(value, layer.compute_dtype()));
  }
  return out;
}

void RecurrentStates::keep(const std::vector<Tensor>& finals) {
  std::lock_guard lock(mu_);
  TF_CHECK_T(InternalError, finals.size() == vars_.size(), "RecurrentStates",
             "{} final states for {} kept ones", finals.size(), vars_.size());
  for (size_t i = 0; i < finals.size(); ++i)
    vars_[i].assign(finals[i].dtype() == vars_[i].dtype() ? finals[i]
                                                          : cast(finals[i], vars_[i].dtype()));
}

void RecurrentStates::reset(const LayerImpl& layer, bool stateful,
                            const std::vector<Tensor>& values,
                            const ::tapeflow::detail::MirrorSpec& mirror) {
  const std::string name = layer.name();
  TF_CHECK_ARG(stateful || values.empty(), name.c_str(),
               "reset_states: layer \"{}\" ({}) is not stateful (options.stateful)", name,
               layer.class_name());
  if (!stateful) return;  // nothing kept
  std::lock_guard lock(mu_);
  if (values.empty()) {
    for (Variable& v : vars_) v.assign(zeros_like(v.read_value()));
    return;
  }
  for (size_t i = 0; i < values.size(); ++i) {
    TF_CHECK_ARG(values[i].defined() && is_floating(values[i].dtype()), name.c_str(),
                 "reset_states: state {} of layer \"{}\" must be a floating tensor, got {}", i,
                 name,
                 values[i].defined() ? "dtype " + std::string(dtype_name(values[i].dtype()))
                                     : std::string("an undefined tensor"));
    if (!vars_.empty())
      TF_CHECK_ARG(values.size() == vars_.size() && values[i].shape() == vars_[i].shape(),
                   name.c_str(),
                   "reset_states: layer \"{}\" ({}) keeps {} state(s), state {} of shape {}; got "
                   "{} value(s), value {} of shape {}",
                   name, layer.class_name(), vars_.size(), i,
                   vars_[std::min(i, vars_.size() - 1)].shape().to_string(), values.size(), i,
                   values[i].shape().to_string());
  }
  if (vars_.empty()) {
    make_variables(layer, values, mirror);
    return;
  }
  for (size_t i = 0; i < values.size(); ++i)
    vars_[i].assign(values[i].dtype() == vars_[i].dtype() ? values[i]
                                                          : cast(values[i], vars_[i].dtype()));
}

std::vector<Variable> RecurrentStates::variables() const {
  std::lock_guard lock(mu_);
  return vars_;
}

}  // namespace tapeflow::keras::detail
