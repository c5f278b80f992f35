// Keras mixed precision (tf.keras.mixed_precision, Keras 3's keras.mixed_precision): dtype
// policies, which give a layer a compute dtype apart from its variable dtype, and the
// LossScaleOptimizer that keeps float16 gradients from underflowing. See docs/keras_training.md,
// "Mixed precision".
//
//   tf::keras::mixed_precision::set_global_policy("mixed_float16");
//   tf::keras::Sequential model({layers::Dense(64, "relu"), layers::Dense(10),
//                                layers::Activation("softmax", "", "float32")});
//   model.compile(optimizers::Adam(), "sparse_categorical_crossentropy");  // wraps the optimizer
//
// A layer keeps the policy that was global when it was constructed (or the one given to it).
// Under a mixed policy its weights are created in the variable dtype (float32), floating inputs
// are cast to the compute dtype (float16 or bfloat16), and inside its call every read of a
// floating variable is cast to the compute dtype (Keras' autocasting, detail::AutocastScope in
// autograd/variable.h): the gradient reaches the float32 variable as float32.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/dtype.h"
#include "keras/optimizers.h"

namespace tapeflow::keras::mixed_precision {

// Keras' DTypePolicy: "float32", "float64", "float16", "bfloat16" (compute and variable dtype
// the same), "mixed_float16" and "mixed_bfloat16" (compute float16/bfloat16, variables float32).
class Policy {
 public:
  // Any other name is an InvalidArgumentError naming it and the valid ones.
  explicit Policy(const std::string& name);
  Policy(const char* name) : Policy(std::string(name)) {}  // NOLINT: Keras passes strings
  const std::string& name() const { return name_; }
  DType compute_dtype() const { return compute_; }
  DType variable_dtype() const { return variable_; }
  // Whether the compute dtype differs from the variable dtype.
  bool is_mixed() const { return compute_ != variable_; }
  bool operator==(const Policy& other) const { return name_ == other.name_; }

 private:
  std::string name_;
  DType compute_, variable_;
};

// The policy layers constructed from now on take. Until set_global_policy is called it is the
// policy named after backend::floatx() ("float32"), as Keras.
Policy global_policy();
void set_global_policy(const Policy& policy);
// Keras' set_global_policy(None): back to the floatx policy.
void reset_global_policy();

struct LossScaleOptions {
  double initial_scale = 32768.0;  // 2 ** 15
  int64_t dynamic_growth_steps = 2000;
  std::string name = {};  // default: "loss_scale_optimizer"
};

namespace detail {
struct LossScaleState;
}

// Keras 3's LossScaleOptimizer (dynamic loss scaling). scale_loss(loss) = loss * dynamic_scale;
// apply_gradients(grads, vars) divides the (scaled) gradients by dynamic_scale and, when all of
// them are finite, applies them with the inner optimizer and counts the step: after
// dynamic_growth_steps finite steps in a row the scale doubles. When any gradient has an inf or
// a NaN, nothing is updated (variables, slots and the inner optimizer's iterations keep their
// values) and the scale halves. The choice is data-dependent (tf::where on every state the
// update writes), so a traced tf::function replays it correctly. Under a MirroredStrategy the
// replicas agree on it (one extra all-reduce of a flag).
//
// As a handle it is the inner optimizer (iterations, learning_rate and slots are the inner's,
// as Keras' properties) with the loss-scale state added: tracked_variables() lists
// "step_counter" and "dynamic_scale" first, then the inner's, so checkpoints keep the scale.
//
// Differences from Keras: the update happens with gradients whose non-finite elements are
// replaced by zeros and is then undone by selecting the old values (no graph cond), so a
// skipped step still costs an update; inside a CUDA-graph capture (which writes variables in
// place) this is refused.
class LossScaleOptimizer : public optimizers::Optimizer {
 public:
  explicit LossScaleOptimizer(optimizers::Optimizer inner, LossScaleOptions options = {});
  // A view of an optimizer handle that is loss-scaled (FailedPreconditionError otherwise).
  static LossScaleOptimizer from(const optimizers::Optimizer& optimizer);

  Tensor scale_loss(const Tensor& loss) const;
  // The current scale (a float32 scalar variable) and the count of finite steps since the
  // scale last changed (int64 scalar variable).
  Variable dynamic_scale() const;
  Variable step_counter() const;
  double initial_scale() const;
  int64_t dynamic_growth_steps() const;
  // The wrapped optimizer (the same state, without the loss scaling).
  optimizers::Optimizer inner_optimizer() const;

 private:
  LossScaleOptimizer(const optimizers::Optimizer& scaled, bool tag);  // from()
};

namespace detail {
// Optimizer::apply_gradients of a loss-scaled handle (`inner` is the same handle without it).
void apply_loss_scaled(optimizers::Optimizer inner, LossScaleState& state,
                       const std::vector<Tensor>& grads, const std::vector<Variable>& vars);
std::vector<std::pair<std::string, Variable>> loss_scale_variables(const LossScaleState& state);
// loss * the current scale, in the loss's dtype (what minimize() differentiates).
Tensor scaled_loss(const LossScaleState& state, const Tensor& loss);
}  // namespace detail

}  // namespace tapeflow::keras::mixed_precision

namespace tapeflow::keras::optimizers {
using mixed_precision::LossScaleOptimizer;  // Keras 3 has it in keras.optimizers too
}  // namespace tapeflow::keras::optimizers
