#include "keras/mixed_precision.h"

#include <cmath>
#include <mutex>
#include <optional>
#include <utility>

#include "core/check.h"
#include "core/context.h"
#include "distribute/replica_context.h"
#include "keras/compile_access.h"
#include "keras/layers.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/math.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras::mixed_precision {

namespace {

constexpr const char* kValidPolicies =
    "\"float32\", \"float64\", \"float16\", \"bfloat16\", \"mixed_float16\", \"mixed_bfloat16\"";

std::mutex g_policy_mu;
std::optional<Policy> g_policy;  // guarded by g_policy_mu; none: the floatx policy

}  // namespace

Policy::Policy(const std::string& name) : name_(name) {
  if (name == "float32" || name == "float64" || name == "float16" || name == "bfloat16") {
    compute_ = variable_ = name == "float32"   ? float32
                           : name == "float64" ? float64
                           : name == "float16" ? float16
                                               : bfloat16;
  } else if (name == "mixed_float16" || name == "mixed_bfloat16") {
    compute_ = name == "mixed_float16" ? float16 : bfloat16;
    variable_ = float32;
  } else {
    TF_CHECK_ARG(false, "Policy",
                 "Cannot convert '{}' to a mixed precision Policy; valid policies are {}", name,
                 kValidPolicies);
  }
}

Policy global_policy() {
  {
    std::lock_guard lock(g_policy_mu);
    if (g_policy) return *g_policy;
  }
  return Policy(std::string(dtype_name(backend::floatx())));
}

void set_global_policy(const Policy& policy) {
  std::lock_guard lock(g_policy_mu);
  g_policy = policy;
}

void reset_global_policy() {
  std::lock_guard lock(g_policy_mu);
  g_policy.reset();
}

// ---- LossScaleOptimizer ----

namespace detail {

struct LossScaleState {
  std::string name;
  double initial_scale = 0.0;
  int64_t growth_steps = 0;
  Variable dynamic_scale;  // float32 scalar
  Variable step_counter;   // int64 scalar
};

Tensor scaled_loss(const LossScaleState& state, const Tensor& loss) {
  return multiply(loss, cast(state.dynamic_scale.read_value(), loss.dtype()));
}

std::vector<std::pair<std::string, Variable>> loss_scale_variables(const LossScaleState& state) {
  return {{"step_counter", state.step_counter}, {"dynamic_scale", state.dynamic_scale}};
}

void apply_loss_scaled(optimizers::Optimizer inner, LossScaleState& state,
                       const std::vector<Tensor>& grads, const std::vector<Variable>& vars) {
  const char* op = state.name.c_str();
  TF_CHECK_ARG(grads.size() == vars.size(), op, "apply_gradients got {} gradients for {} variables",
               grads.size(), vars.size());
  ::tapeflow::detail::PauseTapes pause;  // state changes, never differentiated
  // Keras' check_finite: every element of every gradient given.
  Tensor finite = constant(Tensor(true), bool_);
  for (const Tensor& g : grads)
    if (g.defined()) finite = logical_and(finite, reduce_all(math::is_finite(g)));
  // Read before any all-reduce: a replica that writes a shared (not mirrored) scale or counter
  // does so only after every replica has joined the all-reduces, hence after every read.
  const Tensor scale = state.dynamic_scale.read_value();
  const Tensor counter = state.step_counter.read_value();
  auto* ctx = distribute::get_replica_context();
  const bool replicated = ctx != nullptr && ctx->num_replicas_in_sync() > 1;
  if (replicated) {
    // Each replica sees its own gradients; they must agree on skipping (Keras checks the
    // gradients after the all-reduce, where every replica has the same ones).
    const Tensor bad =
        ctx->all_reduce(distribute::ReduceOp::SUM, cast(logical_not(finite), float32));
    finite = equal(bad, constant(Tensor(0.0f), float32));
  }
  // Keras divides each gradient by the scale. Non-finite elements become zeros so that the
  // update the inner optimizer computes stays finite; it is undone below when `finite` is false.
  std::vector<Tensor> unscaled(grads.size());
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!grads[i].defined()) continue;
    const Tensor& g = grads[i];
    const Tensor q = divide(g, cast(scale, g.dtype()));
    unscaled[i] = where(math::is_finite(q), q, zeros_like(q));
  }

  // Everything the inner update may write: the variables with gradients, and the optimizer's
  // own variables (iterations, Nadam's u_product, the slots, which build() creates now).
  std::vector<Variable> touched;
  for (size_t i = 0; i < vars.size(); ++i)
    if (grads[i].defined() && vars[i].defined()) touched.push_back(vars[i]);
  inner.build(touched);
  for (const auto& [name, v] : inner.tracked_variables())
    if (name != "learning_rate") touched.push_back(v);
  std::vector<Tensor> before;
  before.reserve(touched.size());
  for (const Variable& v : touched) before.push_back(v.read_value());

  inner.apply_gradients(unscaled, vars);

  // A variable shared by the replicas (not mirrored) is written by replica 0 alone, as the
  // inner optimizer does.
  auto writes = [&](const Variable& v) {
    return v.is_mirrored() || !replicated || ctx->replica_id_in_sync_group() == 0;
  };
  for (size_t i = 0; i < touched.size(); ++i)
    if (writes(touched[i])) touched[i].assign(where(finite, touched[i].read_value(), before[i]));

  // Finite: count the step, doubling the scale after growth_steps of them in a row (Keras'
  // upscale when step_counter == growth_steps - 1). Not finite: halve it and reset the count.
  const Tensor grow =
      logical_and(finite, equal(counter, constant(Tensor(state.growth_steps - 1), int64)));
  const Tensor two = constant(Tensor(2.0f), float32), half = constant(Tensor(0.5f), float32);
  const Tensor zero = constant(Tensor(int64_t{0}), int64);
  const Tensor new_scale =
      where(finite, where(grow, multiply(scale, two), scale), multiply(scale, half));
  const Tensor new_counter =
      where(finite, where(grow, zero, add(counter, constant(Tensor(int64_t{1}), int64))), zero);
  if (writes(state.dynamic_scale)) state.dynamic_scale.assign(new_scale);
  if (writes(state.step_counter)) state.step_counter.assign(new_counter);
}

}  // namespace detail

LossScaleOptimizer::LossScaleOptimizer(optimizers::Optimizer inner, LossScaleOptions options)
    : Optimizer(inner) {
  TF_CHECK_ARG(inner.defined(), "LossScaleOptimizer", "the inner optimizer is an empty handle");
  TF_CHECK_ARG(!inner.is_loss_scaled(), "LossScaleOptimizer",
               "the inner optimizer '{}' is already a LossScaleOptimizer", inner.name());
  TF_CHECK_ARG(options.initial_scale > 0.0 && std::isfinite(options.initial_scale),
               "LossScaleOptimizer", "initial_scale must be positive and finite, got {}",
               options.initial_scale);
  TF_CHECK_ARG(options.dynamic_growth_steps >= 1, "LossScaleOptimizer",
               "dynamic_growth_steps must be at least 1, got {}", options.dynamic_growth_steps);
  auto state = std::make_shared<detail::LossScaleState>();
  state->name = options.name.empty() ? "loss_scale_optimizer" : options.name;
  state->initial_scale = options.initial_scale;
  state->growth_steps = options.dynamic_growth_steps;
  // Made here, as Keras' build: mirrored under a strategy's scope.
  state->dynamic_scale = Variable(constant(Tensor(options.initial_scale), float32),
                                  state->name + "/dynamic_scale", false);
  state->step_counter =
      Variable(constant(Tensor(int64_t{0}), int64), state->name + "/step_counter", false);
  loss_scale_ = std::move(state);
}

LossScaleOptimizer::LossScaleOptimizer(const optimizers::Optimizer& scaled, bool /*tag*/)
    : Optimizer(scaled) {}

LossScaleOptimizer LossScaleOptimizer::from(const optimizers::Optimizer& optimizer) {
  TF_CHECK_T(FailedPreconditionError, optimizer.is_loss_scaled(), "LossScaleOptimizer",
             "optimizer '{}' is not a LossScaleOptimizer",
             optimizer.defined() ? optimizer.name() : std::string("(empty)"));
  return LossScaleOptimizer(optimizer, true);
}

Tensor LossScaleOptimizer::scale_loss(const Tensor& loss) const {
  TF_CHECK_ARG(loss.defined(), loss_scale_->name.c_str(), "scale_loss: the loss is undefined");
  TF_CHECK_ARG(is_floating(loss.dtype()), loss_scale_->name.c_str(),
               "scale_loss: the loss must be floating, got dtype {}", dtype_name(loss.dtype()));
  return multiply(loss, cast(loss_scale_->dynamic_scale.read_value(), loss.dtype()));
}

Variable LossScaleOptimizer::dynamic_scale() const {
  return loss_scale_->dynamic_scale;
}
Variable LossScaleOptimizer::step_counter() const {
  return loss_scale_->step_counter;
}
double LossScaleOptimizer::initial_scale() const {
  return loss_scale_->initial_scale;
}
int64_t LossScaleOptimizer::dynamic_growth_steps() const {
  return loss_scale_->growth_steps;
}
optimizers::Optimizer LossScaleOptimizer::inner_optimizer() const {
  return without_loss_scale();
}

}  // namespace tapeflow::keras::mixed_precision

namespace tapeflow::keras::detail::compile_access {

std::optional<LossScaleConfig> loss_scale_config(const optimizers::Optimizer& optimizer) {
  const auto& state = optimizer.loss_scale_state();
  if (!optimizer.defined() || state == nullptr) return std::nullopt;
  return LossScaleConfig{state->name, state->initial_scale, state->growth_steps};
}

}  // namespace tapeflow::keras::detail::compile_access
