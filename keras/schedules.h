// Learning-rate schedules (tf.keras.optimizers.schedules): ExponentialDecay,
// PiecewiseConstantDecay, CosineDecay (with Keras 3's linear warmup), InverseTimeDecay,
// PolynomialDecay and CosineDecayRestarts. A schedule is an immutable, shared handle (copies share
// one definition) and may be used from several threads at once. It evaluates two ways:
// schedule(int64_t step) computes a double on the host (callbacks, logs), schedule(Tensor step)
// builds the value with ops (float32 scalar), so inside a traced tf::function the learning rate
// follows the optimizer's `iterations` variable at every replay.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace tapeflow::keras::optimizers::schedules {

namespace detail {
struct ScheduleImpl {
  virtual ~ScheduleImpl() = default;
  virtual double value(double step) const = 0;
  virtual Tensor value(const Tensor& step) const = 0;  // step: any numeric scalar tensor
  virtual std::string name() const = 0;
};
}  // namespace detail

class LearningRateSchedule {
 public:
  // A custom schedule from its op form (float32 result) and, optionally, its host form; without
  // a host form, schedule(step) evaluates the op form eagerly.
  explicit LearningRateSchedule(std::function<Tensor(const Tensor& step)> fn,
                                std::function<double(int64_t step)> host_fn = {},
                                std::string name = "LearningRateSchedule");
  // The learning rate at `step` (the optimizer's iteration count before the update).
  double operator()(int64_t step) const;
  // The same with ops: a float32 scalar computed from `step` (int or float scalar tensor).
  Tensor operator()(const Tensor& step) const;
  std::string name() const;

 protected:
  LearningRateSchedule() = default;
  std::shared_ptr<const detail::ScheduleImpl> impl_;
};

// initial_learning_rate * decay_rate ^ (step / decay_steps); with staircase the exponent is
// floored (the rate drops every decay_steps steps).
class ExponentialDecay : public LearningRateSchedule {
 public:
  ExponentialDecay(double initial_learning_rate, int64_t decay_steps, double decay_rate,
                   bool staircase = false);
};

// values[0] while step <= boundaries[0], values[i] while boundaries[i-1] < step <= boundaries[i],
// values.back() after the last boundary. values has one more entry than boundaries.
class PiecewiseConstantDecay : public LearningRateSchedule {
 public:
  PiecewiseConstantDecay(std::vector<int64_t> boundaries, std::vector<double> values);
};

// Keras 3: with warmup_steps > 0 and a warmup_target, the rate rises linearly from
// initial_learning_rate to warmup_target over warmup_steps, then decays from warmup_target by
// a cosine over decay_steps down to alpha * warmup_target (and stays there). Without warmup:
// initial * ((1 - alpha) * 0.5 * (1 + cos(pi * min(step, decay_steps) / decay_steps)) + alpha).
class CosineDecay : public LearningRateSchedule {
 public:
  CosineDecay(double initial_learning_rate, int64_t decay_steps, double alpha = 0.0,
              std::optional<double> warmup_target = std::nullopt, int64_t warmup_steps = 0);
};

// initial_learning_rate / (1 + decay_rate * step / decay_steps); staircase floors the ratio.
class InverseTimeDecay : public LearningRateSchedule {
 public:
  InverseTimeDecay(double initial_learning_rate, int64_t decay_steps, double decay_rate,
                   bool staircase = false);
};

// (initial_learning_rate - end_learning_rate) * (1 - step / decay_steps)^power +
// end_learning_rate, with step capped at decay_steps. With cycle the decay restarts: decay_steps
// is multiplied by ceil(step / decay_steps) (by 1 at step 0), so the rate jumps back up at each
// multiple of decay_steps and decays to end_learning_rate over a longer span each time.
class PolynomialDecay : public LearningRateSchedule {
 public:
  PolynomialDecay(double initial_learning_rate, int64_t decay_steps,
                  double end_learning_rate = 0.0001, double power = 1.0, bool cycle = false);
};

// SGDR (Loshchilov & Hutter): a cosine from initial_learning_rate down to alpha * it over
// first_decay_steps, then restarts, period i lasting first_decay_steps * t_mul^i steps and
// starting from initial_learning_rate * m_mul^i:
// initial * ((1 - alpha) * 0.5 * m_mul^i * (1 + cos(pi * fraction of period i)) + alpha).
class CosineDecayRestarts : public LearningRateSchedule {
 public:
  CosineDecayRestarts(double initial_learning_rate, int64_t first_decay_steps, double t_mul = 2.0,
                      double m_mul = 1.0, double alpha = 0.0);
};

}  // namespace tapeflow::keras::optimizers::schedules
