// Optimizers (tf.keras.optimizers, Keras 3 / TF 2.11+ formulas): SGD, Adam, AdamW, RMSprop,
// Adagrad, Adadelta, Adamax, Nadam, Ftrl, Lion, Lamb, Adafactor.
//
// An optimizer is a shared handle: copies refer to the same state (iterations, slots), so it is
// passed by value to compile() and captured by value in traced functions. Updates are written
// with ops and Variable::assign*, so they run on each variable's device, and inside a traced
// tf::function every slot read and write becomes a graph node that runs at each replay; the
// learning rate is read from a float32 variable (or a schedule evaluated from `iterations` with
// ops), never frozen at trace time.
//
// Threading: apply_gradients may be called from several replica threads at once (inside
// strategy.run); slot creation is serialised by a mutex and happens once per variable. Inside a
// replica the gradients are first summed across replicas (ReplicaContext::all_reduce), then
// each replica updates its own copies of the mirrored variables, slots and iterations.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "keras/schedules.h"
#include "keras/trackable.h"

namespace tapeflow::keras::mixed_precision::detail {
struct LossScaleState;  // keras/mixed_precision.h
}

namespace tapeflow::keras::optimizers {

using schedules::LearningRateSchedule;

// A learning rate: a constant (kept in a float32 variable, so callbacks may change it between
// replays of a traced step) or a schedule of the iteration count.
class LearningRate {
 public:
  LearningRate(double value) : value_(value) {}  // NOLINT: implicit, as Python's floats
  LearningRate(LearningRateSchedule schedule) : schedule_(std::move(schedule)) {}  // NOLINT
  bool is_schedule() const { return schedule_.has_value(); }
  double value() const { return value_; }
  const std::optional<LearningRateSchedule>& schedule() const { return schedule_; }

 private:
  double value_ = 0.0;
  std::optional<LearningRateSchedule> schedule_;
};

// The keyword arguments every Keras optimizer takes. At most one of clipnorm, clipvalue and
// global_clipnorm may be set (as Keras).
struct OptimizerOptions {
  std::optional<double> weight_decay = std::nullopt;  // decoupled: var -= var * wd * lr
  std::optional<double> clipnorm = std::nullopt;      // per-gradient L2 norm limit
  std::optional<double> clipvalue = std::nullopt;     // elementwise limit
  std::optional<double> global_clipnorm = std::nullopt;
  std::string name = {};  // default: the class name ("Adam")
  // Variables whose name contains one of these strings get no weight decay.
  std::vector<std::string> exclude_from_weight_decay = {};
  // Keras' exponential moving average of the weights (docs/keras_training.md, "Weight
  // averaging and gradient accumulation"): after each update, average = m * average + (1 - m)
  // * variable (m = ema_momentum, 0 at the first step), kept in an "average" slot per variable;
  // every ema_overwrite_frequency steps the variables take their averages, and fit ends by
  // giving them the averages (finalize_variable_values).
  bool use_ema = false;
  double ema_momentum = 0.99;
  std::optional<int64_t> ema_overwrite_frequency = std::nullopt;
  // Keras' loss_scale_factor: scale_loss() multiplies the loss by it (fit's step does) and
  // apply_gradients divides the gradients by it.
  std::optional<double> loss_scale_factor = std::nullopt;
  // Keras' gradient_accumulation_steps (>= 2): the gradients of that many apply_gradients calls
  // are summed in a "gradient_accumulator" slot per variable, and every that many calls their
  // mean updates the variables; the schedules and bias corrections count those updates.
  std::optional<int64_t> gradient_accumulation_steps = std::nullopt;
};

namespace detail {
struct OptimizerImpl;
}

class Optimizer : public Trackable {
 public:
  // An empty handle (for members assigned later); every method but defined() throws.
  Optimizer() = default;
  bool defined() const { return impl_ != nullptr; }

  // Applies one update. grads[i] is the gradient of vars[i]; an undefined gradient skips its
  // variable with TF's warning (all undefined is an InvalidArgumentError). A floating gradient
  // of another dtype is cast to its variable's (as Keras 3); a gradient of another shape, or an
  // integer or bool one, is an InvalidArgumentError naming the variable.
  // Order: (all-reduce in a replica), clipping, weight decay, the update, iterations += 1.
  void apply_gradients(const std::vector<Tensor>& grads, const std::vector<Variable>& vars);
  // Keras 3's spelling of apply_gradients (optimizer.apply(grads, trainable_variables)).
  void apply(const std::vector<Tensor>& grads, const std::vector<Variable>& vars) {
    apply_gradients(grads, vars);
  }
  // Keras' scale_loss: the loss times loss_scale_factor (unchanged without one).
  Tensor scale_loss(const Tensor& loss) const;
  // Keras' finalize_variable_values: with use_ema, each of `vars` takes its moving average
  // (fit calls it when training ends); nothing otherwise.
  void finalize_variable_values(const std::vector<Variable>& vars) const;
  // SwapEMAWeights' swap: each variable with an "average" slot exchanges values with it
  // (FailedPreconditionError without use_ema).
  void swap_ema_weights() const;
  // Each average takes its variable's value (SwapEMAWeights at the last epoch with
  // swap_on_epoch, Keras' _finalize_ema_values). FailedPreconditionError without use_ema.
  void copy_weights_to_ema() const;
  // Records loss() on a tape, then applies its gradients; returns the loss.
  Tensor minimize(const std::function<Tensor()>& loss, const std::vector<Variable>& vars);
  // Creates the slots of `vars` now (apply_gradients does it on first use).
  void build(const std::vector<Variable>& vars);

  // The number of updates applied (an int64 scalar variable, TF's optimizer.iterations).
  Variable iterations() const;
  // The learning rate of the next update, a float32 scalar (the schedule at `iterations`).
  Tensor learning_rate() const;
  double current_learning_rate() const;
  // Sets the constant learning rate (FailedPreconditionError for a schedule).
  void set_learning_rate(double value);
  bool has_schedule() const;
  std::string name() const;
  // "iterations", "learning_rate" (constant rates only), Nadam's "u_product", then each slot as
  // "<variable name>/<slot>", e.g. "dense/kernel/m", in creation order.
  std::vector<std::pair<std::string, Variable>> tracked_variables() const override;
  std::vector<Variable> variables() const;
  // Checkpoint values for slots that do not exist yet: applied when the slots are created
  // (TF's deferred restoration). Names as in tracked_variables().
  void restore_deferred(const std::vector<std::pair<std::string, Tensor>>& values);
  // The same for the slot `slot` (one of slot_names()) of `var`, whatever its name: what
  // tf::train::Checkpoint uses, which keys slots by their variable's path in the checkpoint.
  void restore_deferred_slot(const Variable& var, const std::string& slot, const Tensor& value);
  // The slots an update keeps per variable ("m", "v" for Adam; none for plain SGD).
  std::vector<std::string> slot_names() const;
  // The shape of slot `slot` (one of slot_names()) for the variable `var`: the variable's shape,
  // except Adafactor's factored "r" and "c" and the unused scalar "velocity" of a Muon-updated
  // matrix. InvalidArgumentError for a slot this optimizer does not keep.
  TensorShape slot_shape(const std::string& slot, const Variable& var) const;
  // Each variable that has slots, with its slots in slot_names() order, in creation order.
  std::vector<std::pair<Variable, std::vector<Variable>>> slots() const;
  const void* handle_id() const { return impl_.get(); }
  // Whether this is a mixed_precision::LossScaleOptimizer (keras/mixed_precision.h).
  bool is_loss_scaled() const { return loss_scale_ != nullptr; }
  const std::shared_ptr<mixed_precision::detail::LossScaleState>& loss_scale_state() const {
    return loss_scale_;
  }
  // The same optimizer state without the loss scaling (a LossScaleOptimizer's inner optimizer).
  Optimizer without_loss_scale() const { return Optimizer(impl_); }

 protected:
  explicit Optimizer(std::shared_ptr<detail::OptimizerImpl> impl,
                     std::shared_ptr<mixed_precision::detail::LossScaleState> loss_scale = {})
      : impl_(std::move(impl)), loss_scale_(std::move(loss_scale)) {}
  std::shared_ptr<detail::OptimizerImpl> impl_;
  // Set on a LossScaleOptimizer: apply_gradients unscales and skips non-finite steps.
  std::shared_ptr<mixed_precision::detail::LossScaleState> loss_scale_;
};

// m = momentum * m - lr * g; var += m (nesterov: var += momentum * m - lr * g);
// without momentum var -= lr * g. Slot: "m" (only with momentum).
class SGD : public Optimizer {
 public:
  SGD(LearningRate learning_rate = 0.01, double momentum = 0.0, bool nesterov = false,
      OptimizerOptions options = {});
};

// alpha = lr * sqrt(1 - beta_2^t) / (1 - beta_1^t) with t = iterations + 1;
// m += (g - m) * (1 - beta_1); v += (g^2 - v) * (1 - beta_2); (amsgrad: vhat = max(vhat, v),
// v = vhat); var -= m * alpha / (sqrt(v) + epsilon). Slots "m", "v" (and "vhat").
class Adam : public Optimizer {
 public:
  Adam(LearningRate learning_rate = 0.001, double beta_1 = 0.9, double beta_2 = 0.999,
       double epsilon = 1e-7, bool amsgrad = false, OptimizerOptions options = {});
};

// Adam with decoupled weight decay, default 0.004 as Keras 3 and tf.keras (TF 2.11+): before
// each update var -= var * weight_decay * lr.
class AdamW : public Optimizer {
 public:
  AdamW(LearningRate learning_rate = 0.001, double weight_decay = 0.004, double beta_1 = 0.9,
        double beta_2 = 0.999, double epsilon = 1e-7, bool amsgrad = false,
        OptimizerOptions options = {});
};

// velocity = rho * velocity + (1 - rho) * g^2; (centered: average_gradient = rho * ag +
// (1 - rho) * g, denominator = velocity - ag^2 + epsilon, else velocity + epsilon);
// increment = lr * g / sqrt(denominator); momentum > 0: m = momentum * m + increment, var -= m;
// else var -= increment. Slots "velocity" (and "momentum", "average_gradient").
class RMSprop : public Optimizer {
 public:
  RMSprop(LearningRate learning_rate = 0.001, double rho = 0.9, double momentum = 0.0,
          double epsilon = 1e-7, bool centered = false, OptimizerOptions options = {});
};

// accumulator += g^2; var -= lr * g / sqrt(accumulator + epsilon). Slot "accumulator", starting
// at initial_accumulator_value.
class Adagrad : public Optimizer {
 public:
  Adagrad(LearningRate learning_rate = 0.001, double initial_accumulator_value = 0.1,
          double epsilon = 1e-7, OptimizerOptions options = {});
};

// accumulated_grad = rho * ag + (1 - rho) * g^2;
// delta = -sqrt(accumulated_delta_var + epsilon) * g / sqrt(accumulated_grad + epsilon);
// accumulated_delta_var = rho * adv + (1 - rho) * delta^2; var += lr * delta.
// Slots "accumulated_grad", "accumulated_delta_var". Keras' default learning rate is 0.001
// (Zeiler's paper uses 1).
class Adadelta : public Optimizer {
 public:
  Adadelta(LearningRate learning_rate = 0.001, double rho = 0.95, double epsilon = 1e-7,
           OptimizerOptions options = {});
};

// Adam with the infinity norm: m += (g - m) * (1 - beta_1); u = max(beta_2 * u, |g|);
// var -= lr * m / ((1 - beta_1^t) * (u + epsilon)). Slots "momentum", "norm".
class Adamax : public Optimizer {
 public:
  Adamax(LearningRate learning_rate = 0.001, double beta_1 = 0.9, double beta_2 = 0.999,
         double epsilon = 1e-7, OptimizerOptions options = {});
};

// Adam with Nesterov momentum (Dozat): u_t = beta_1 * (1 - 0.5 * 0.96^t), the optimizer variable
// "u_product" = u_1 * ... * u_t (updated first, at each step); m and v as Adam's;
// m_hat = u_{t+1} * m / (1 - u_product * u_{t+1}) + (1 - u_t) * g / (1 - u_product);
// v_hat = v / (1 - beta_2^t); var -= m_hat * lr / (sqrt(v_hat) + epsilon).
// Slots "momentum", "velocity".
class Nadam : public Optimizer {
 public:
  Nadam(LearningRate learning_rate = 0.001, double beta_1 = 0.9, double beta_2 = 0.999,
        double epsilon = 1e-7, OptimizerOptions options = {});
};

// Follow The Regularized Leader, Keras 3's update (with p = -learning_rate_power):
// l2' = l2 + beta / (2 lr); g' = g + 2 * l2_shrinkage * var; n' = n + g^2;
// linear += g' - (n'^p - n^p) / lr * var; var = (clip(linear, -l1, l1) - linear) /
// (n'^p / lr + 2 l2'); n = n'. Slots "accumulator" (from initial_accumulator_value), "linear".
class Ftrl : public Optimizer {
 public:
  Ftrl(LearningRate learning_rate = 0.001, double learning_rate_power = -0.5,
       double initial_accumulator_value = 0.1, double l1_regularization_strength = 0.0,
       double l2_regularization_strength = 0.0, double l2_shrinkage_regularization_strength = 0.0,
       double beta = 0.0, OptimizerOptions options = {});
};

// Lion (Chen et al., 2023): var -= lr * sign(m * beta_1 + g * (1 - beta_1));
// m = m * beta_2 + g * (1 - beta_2). Slot "momentum".
class Lion : public Optimizer {
 public:
  Lion(LearningRate learning_rate = 0.001, double beta_1 = 0.9, double beta_2 = 0.99,
       OptimizerOptions options = {});
};

// Layer-wise adaptive Adam (You et al., 2019), Keras 3's update: m and v as Adam's,
// update = (m / (1 - beta_1^t)) / (sqrt(v / (1 - beta_2^t)) + epsilon);
// ratio = ||var|| / ||update|| (1 when either norm is 0); var -= ratio * lr * update.
// Slots "momentum", "velocity".
class Lamb : public Optimizer {
 public:
  Lamb(LearningRate learning_rate = 0.001, double beta_1 = 0.9, double beta_2 = 0.999,
       double epsilon = 1e-7, OptimizerOptions options = {});
};

// Adafactor (Shazeer & Stern, 2018), Keras 3's update, with t = iterations + 1:
// rho_t = min(lr, 1 / sqrt(t)) (lr itself is min(lr, 1 / sqrt(t)) with relative_step and a
// constant rate); alpha_t = max(epsilon_2, rms(var)) * rho_t; g2 = g^2 + epsilon_1;
// beta_2_t = 1 - t^beta_2_decay. A variable of rank >= 2 keeps factored second moments, the
// row means "r" (shape var[:-1]) and the column means "c" (shape var[:-2] + var[-1:]):
// r = beta_2_t r + (1 - beta_2_t) mean(g2, -1), c likewise with mean(g2, -2), and
// v = (r / mean(r, -1))[..., None] * c[..., None, :]; a vector or scalar keeps
// v = beta_2_t v + (1 - beta_2_t) g2 (its "r" and "c" are unused scalars: Keras makes them too
// but leaves them out of its variables). u = g / sqrt(v);
// var -= alpha_t * u / max(1, rms(u) / clip_threshold). Slots "r", "c", "velocity".
class Adafactor : public Optimizer {
 public:
  Adafactor(LearningRate learning_rate = 0.001, double beta_2_decay = -0.8,
            double epsilon_1 = 1e-30, double epsilon_2 = 1e-3, double clip_threshold = 1.0,
            bool relative_step = true, OptimizerOptions options = {});
};

// Muon's own arguments (Keras 3.15's, with its defaults).
struct MuonOptions {
  double adam_beta_1 = 0.9, adam_beta_2 = 0.999;
  double epsilon = 1e-7;  // AdamW's
  // Regular expressions (ECMAScript) searched in a variable's name: a match updates it by AdamW.
  std::vector<std::string> exclude_layers = {};
  bool exclude_embeddings = true;  // names containing "embedding" (any case) use AdamW
  double muon_a = 3.4445, muon_b = -4.7750, muon_c = 2.0315;  // Newton-Schulz coefficients
  double adam_lr_ratio = 1.0;  // AdamW's learning rate is learning_rate * adam_lr_ratio
  double momentum = 0.95;
  int ns_steps = 5;
  bool nesterov = true;
  std::optional<double> rms_rate = 0.2;  // nullopt: no update rescaling
  // Decoupled weight decays (var -= var * wd * learning_rate) of the Muon-updated matrices and
  // of the AdamW-updated variables; nullopt for none. OptimizerOptions::weight_decay must stay
  // unset (it would be ambiguous).
  std::optional<double> weight_decay = 0.004;
  std::optional<double> adam_weight_decay = 0.004;
};

// Muon (Jordan et al., 2024; Liu et al., 2025's RMS matching), Keras 3.15's update. A 2-D
// variable not excluded (exclude_embeddings, exclude_layers) takes the Muon step:
// m += g + m (momentum - 1); u = nesterov ? g + momentum m : m; u = NS(u), ns_steps iterations of
// the quintic Newton-Schulz map X = a X + (b A + c A A) X with A = X X^T, from
// X = u / (||u||_F + 1e-7) (transposed while there are more rows than columns), which takes u
// towards the orthogonal factor of its polar decomposition; var -= lr u sqrt(max(rows, cols))
// rms_rate. Any other variable takes AdamW's step with adam_beta_1/2, epsilon and
// lr * adam_lr_ratio. Slots "momentum" and "velocity" (a Muon-updated variable's "velocity" is
// an unused scalar: Keras makes none). The optimizer for the hidden matrices of a network;
// Keras recommends excluding the output layer (exclude_layers = {"output_dense"}).
class Muon : public Optimizer {
 public:
  explicit Muon(LearningRate learning_rate = 0.001, MuonOptions muon = {},
                OptimizerOptions options = {});
};

// Schedule-free AdamW (Defazio et al., 2024), Keras 3.15's arguments and defaults. The variable
// holds y, the point gradients are taken at; slot "momentum" holds z (it starts as the variable)
// and slot "velocity" Adam's second moment. With t = iterations + 1, lr scaled by
// min(t / warmup_steps, 1) when warmup_steps > 0: v += (g^2 - v)(1 - beta_2);
// z' = z - lr g / (sqrt(v / (1 - beta_2^t)) + epsilon); x = (y - (1 - beta_1) z) / beta_1;
// x' = (1 - 1/t) x + z' / t; y' = (1 - beta_1) z' + beta_1 x'. Keras 3.15 computes x from the
// updated z' (its momentum.value is a live reference read after the update), which is not the
// paper's recovery of x; tapeflow follows the paper (docs/keras_training.md). Evaluate at x
// for the paper's guarantees; the variable keeps y, as Keras'.
class ScheduleFreeAdamW : public Optimizer {
 public:
  ScheduleFreeAdamW(LearningRate learning_rate = 0.0025, double beta_1 = 0.9, double beta_2 = 0.999,
                    double epsilon = 1e-8, int64_t warmup_steps = 0, OptimizerOptions options = {});
};

// "sgd", "adam", "adamw", "rmsprop", "adagrad", "adadelta", "adamax", "nadam", "ftrl", "lion",
// "lamb", "adafactor", "muon", "schedulefreeadamw" (case-insensitive) with Keras' defaults, as
// compile("adam").
Optimizer get(const std::string& identifier);

}  // namespace tapeflow::keras::optimizers
