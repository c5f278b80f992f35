#include "keras/schedules.h"

#include <cmath>
#include <numbers>
#include <utility>

#include "core/check.h"
#include "keras/compile_access.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/unary.h"

namespace tapeflow::keras::optimizers::schedules {

namespace {

// A strongly typed float32 scalar on the current device (Keras computes schedules in float32).
Tensor f32(double v) { return constant(Tensor(v), float32); }
Tensor step_f32(const Tensor& step) {
  TF_CHECK_ARG(step.defined() && step.num_elements() == 1, "LearningRateSchedule",
               "step must be a scalar tensor, got shape {}",
               step.defined() ? step.shape().to_string() : "None");
  return cast(step, float32);
}

struct FunctionSchedule final : detail::ScheduleImpl {
  std::function<Tensor(const Tensor&)> fn;
  std::function<double(int64_t)> host_fn;
  std::string name_;
  double value(double step) const override {
    if (host_fn) return host_fn(static_cast<int64_t>(step));
    return fn(constant(Tensor(static_cast<int64_t>(step)), int64)).item<double>();
  }
  Tensor value(const Tensor& step) const override { return cast(fn(step), float32); }
  std::string name() const override { return name_; }
};

struct Exponential final : detail::ScheduleImpl {
  double initial, decay_rate;
  int64_t decay_steps;
  bool staircase;
  double value(double step) const override {
    double p = step / static_cast<double>(decay_steps);
    if (staircase) p = std::floor(p);
    return initial * std::pow(decay_rate, p);
  }
  Tensor value(const Tensor& step) const override {
    Tensor p = divide(step_f32(step), f32(static_cast<double>(decay_steps)));
    if (staircase) p = floor(p);
    return multiply(f32(initial), pow(f32(decay_rate), p));
  }
  std::string name() const override { return "ExponentialDecay"; }
};

struct Piecewise final : detail::ScheduleImpl {
  std::vector<int64_t> boundaries;
  std::vector<double> values;
  double value(double step) const override {
    for (size_t i = 0; i < boundaries.size(); ++i)
      if (step <= static_cast<double>(boundaries[i])) return values[i];
    return values.back();
  }
  Tensor value(const Tensor& step) const override {
    // Compared in float64 so that integer steps and boundaries stay exact.
    Tensor s = cast(step, float64);
    Tensor out = f32(values.back());
    for (size_t i = boundaries.size(); i-- > 0;)
      out = where(less_equal(s, constant(Tensor(static_cast<double>(boundaries[i])), float64)),
                  f32(values[i]), out);
    return out;
  }
  std::string name() const override { return "PiecewiseConstantDecay"; }
};

struct Cosine final : detail::ScheduleImpl {
  double initial, alpha;
  int64_t decay_steps;
  std::optional<double> warmup_target;
  int64_t warmup_steps;
  double decay(double step, double from) const {
    const double frac = step / static_cast<double>(decay_steps);
    const double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * frac));
    return from * ((1.0 - alpha) * cosine + alpha);
  }
  Tensor decay(const Tensor& step, double from) const {
    Tensor frac = divide(step, f32(static_cast<double>(decay_steps)));
    Tensor cosine = multiply(f32(0.5), add(f32(1.0), cos(multiply(f32(std::numbers::pi), frac))));
    return multiply(f32(from), add(multiply(f32(1.0 - alpha), cosine), f32(alpha)));
  }
  double value(double step) const override {
    const double ds = static_cast<double>(decay_steps);
    if (!warmup_target) return decay(std::min(step, ds), initial);
    const double ws = static_cast<double>(warmup_steps);
    step = std::min(step, ds + ws);
    if (step < ws) return (*warmup_target - initial) * (step / ws) + initial;
    return decay(step - ws, *warmup_target);
  }
  Tensor value(const Tensor& step) const override {
    const double ds = static_cast<double>(decay_steps);
    Tensor s = step_f32(step);
    if (!warmup_target) return decay(minimum(s, f32(ds)), initial);
    const double ws = static_cast<double>(warmup_steps);
    s = minimum(s, f32(ds + ws));
    // Both branches are computed (TF's cond becomes a select); the warmup branch is only
    // selected when warmup_steps > 0, so its division never reaches the result otherwise.
    Tensor warm = add(multiply(f32(*warmup_target - initial), divide(s, f32(ws))), f32(initial));
    Tensor cool = decay(subtract(s, f32(ws)), *warmup_target);
    return where(less(s, f32(ws)), warm, cool);
  }
  std::string name() const override { return "CosineDecay"; }
};

struct InverseTime final : detail::ScheduleImpl {
  double initial, decay_rate;
  int64_t decay_steps;
  bool staircase;
  double value(double step) const override {
    double p = step / static_cast<double>(decay_steps);
    if (staircase) p = std::floor(p);
    return initial / (1.0 + decay_rate * p);
  }
  Tensor value(const Tensor& step) const override {
    Tensor p = divide(step_f32(step), f32(static_cast<double>(decay_steps)));
    if (staircase) p = floor(p);
    return divide(f32(initial), add(f32(1.0), multiply(f32(decay_rate), p)));
  }
  std::string name() const override { return "InverseTimeDecay"; }
};

struct Polynomial final : detail::ScheduleImpl {
  double initial, end, power;
  int64_t decay_steps;
  bool cycle;
  double value(double step) const override {
    double ds = static_cast<double>(decay_steps);
    if (cycle)
      ds *= step == 0 ? 1.0 : std::ceil(step / ds);
    else
      step = std::min(step, ds);
    const double p = step / ds;
    return (initial - end) * std::pow(1.0 - p, power) + end;
  }
  Tensor value(const Tensor& step) const override {
    Tensor s = step_f32(step);
    Tensor ds = f32(static_cast<double>(decay_steps));
    if (cycle) {
      Tensor multiplier = where(equal(s, f32(0.0)), f32(1.0), ceil(divide(s, ds)));
      ds = multiply(ds, multiplier);
    } else {
      s = minimum(s, ds);
    }
    Tensor p = divide(s, ds);
    return add(multiply(subtract(f32(initial), f32(end)), pow(subtract(f32(1.0), p), f32(power))),
               f32(end));
  }
  std::string name() const override { return "PolynomialDecay"; }
};

struct CosineRestarts final : detail::ScheduleImpl {
  double initial, t_mul, m_mul, alpha;
  int64_t first_decay_steps;
  // Keras picks the branch by t_mul == 1 in float32.
  bool geometric() const { return static_cast<float>(t_mul) != 1.0f; }
  double value(double step) const override {
    double frac = step / static_cast<double>(first_decay_steps);
    double i_restart;
    if (geometric()) {
      i_restart = std::floor(std::log(1.0 - frac * (1.0 - t_mul)) / std::log(t_mul));
      const double sum_r = (1.0 - std::pow(t_mul, i_restart)) / (1.0 - t_mul);
      frac = (frac - sum_r) / std::pow(t_mul, i_restart);
    } else {
      i_restart = std::floor(frac);
      frac -= i_restart;
    }
    const double cosine =
        0.5 * std::pow(m_mul, i_restart) * (1.0 + std::cos(std::numbers::pi * frac));
    return initial * ((1.0 - alpha) * cosine + alpha);
  }
  Tensor value(const Tensor& step) const override {
    Tensor frac = divide(step_f32(step), f32(static_cast<double>(first_decay_steps)));
    const Tensor tm = f32(t_mul);
    Tensor i_restart;
    if (geometric()) {
      i_restart =
          floor(divide(log(subtract(f32(1.0), multiply(frac, subtract(f32(1.0), tm)))), log(tm)));
      Tensor sum_r = divide(subtract(f32(1.0), pow(tm, i_restart)), subtract(f32(1.0), tm));
      frac = divide(subtract(frac, sum_r), pow(tm, i_restart));
    } else {
      i_restart = floor(frac);
      frac = subtract(frac, i_restart);
    }
    Tensor cosine = multiply(multiply(f32(0.5), pow(f32(m_mul), i_restart)),
                             add(f32(1.0), cos(multiply(f32(std::numbers::pi), frac))));
    Tensor decayed = add(multiply(subtract(f32(1.0), f32(alpha)), cosine), f32(alpha));
    return multiply(f32(initial), decayed);
  }
  std::string name() const override { return "CosineDecayRestarts"; }
};

void check_steps(const char* op, int64_t decay_steps) {
  TF_CHECK_ARG(decay_steps > 0, op, "decay_steps must be positive, got {}", decay_steps);
}
// Rates and learning rates: finite and not negative (a negative decay rate or value would give
// negative or infinite learning rates some steps later, which the optimizers' own checks of a
// constant learning rate refuse).
void check_nonnegative(const char* op, const char* what, double v) {
  TF_CHECK_ARG(std::isfinite(v) && v >= 0, op, "{} must be finite and >= 0, got {}", what, v);
}

}  // namespace

LearningRateSchedule::LearningRateSchedule(std::function<Tensor(const Tensor&)> fn,
                                           std::function<double(int64_t)> host_fn,
                                           std::string name) {
  TF_CHECK_ARG(static_cast<bool>(fn), "LearningRateSchedule", "the schedule function is empty");
  auto impl = std::make_shared<FunctionSchedule>();
  impl->fn = std::move(fn);
  impl->host_fn = std::move(host_fn);
  impl->name_ = std::move(name);
  impl_ = std::move(impl);
}

double LearningRateSchedule::operator()(int64_t step) const {
  return impl_->value(static_cast<double>(step));
}
Tensor LearningRateSchedule::operator()(const Tensor& step) const { return impl_->value(step); }
std::string LearningRateSchedule::name() const { return impl_->name(); }

ExponentialDecay::ExponentialDecay(double initial_learning_rate, int64_t decay_steps,
                                   double decay_rate, bool staircase)
    : LearningRateSchedule() {
  check_steps("ExponentialDecay", decay_steps);
  check_nonnegative("ExponentialDecay", "initial_learning_rate", initial_learning_rate);
  check_nonnegative("ExponentialDecay", "decay_rate", decay_rate);
  auto impl = std::make_shared<Exponential>();
  impl->initial = initial_learning_rate;
  impl->decay_rate = decay_rate;
  impl->decay_steps = decay_steps;
  impl->staircase = staircase;
  impl_ = std::move(impl);
}

PiecewiseConstantDecay::PiecewiseConstantDecay(std::vector<int64_t> boundaries,
                                               std::vector<double> values)
    : LearningRateSchedule() {
  TF_CHECK_ARG(values.size() == boundaries.size() + 1, "PiecewiseConstantDecay",
               "values must have one more entry than boundaries, got {} boundaries and {} values",
               boundaries.size(), values.size());
  for (size_t i = 1; i < boundaries.size(); ++i)
    TF_CHECK_ARG(boundaries[i - 1] < boundaries[i], "PiecewiseConstantDecay",
                 "boundaries must be increasing, got {}", fmt::join(boundaries, ", "));
  for (double v : values) check_nonnegative("PiecewiseConstantDecay", "each value", v);
  auto impl = std::make_shared<Piecewise>();
  impl->boundaries = std::move(boundaries);
  impl->values = std::move(values);
  impl_ = std::move(impl);
}

CosineDecay::CosineDecay(double initial_learning_rate, int64_t decay_steps, double alpha,
                         std::optional<double> warmup_target, int64_t warmup_steps)
    : LearningRateSchedule() {
  check_steps("CosineDecay", decay_steps);
  TF_CHECK_ARG(warmup_steps >= 0, "CosineDecay", "warmup_steps must be >= 0, got {}",
               warmup_steps);
  check_nonnegative("CosineDecay", "initial_learning_rate", initial_learning_rate);
  check_nonnegative("CosineDecay", "alpha", alpha);
  if (warmup_target) check_nonnegative("CosineDecay", "warmup_target", *warmup_target);
  auto impl = std::make_shared<Cosine>();
  impl->initial = initial_learning_rate;
  impl->alpha = alpha;
  impl->decay_steps = decay_steps;
  impl->warmup_target = warmup_target;
  impl->warmup_steps = warmup_steps;
  impl_ = std::move(impl);
}

InverseTimeDecay::InverseTimeDecay(double initial_learning_rate, int64_t decay_steps,
                                   double decay_rate, bool staircase)
    : LearningRateSchedule() {
  check_steps("InverseTimeDecay", decay_steps);
  check_nonnegative("InverseTimeDecay", "initial_learning_rate", initial_learning_rate);
  check_nonnegative("InverseTimeDecay", "decay_rate", decay_rate);
  auto impl = std::make_shared<InverseTime>();
  impl->initial = initial_learning_rate;
  impl->decay_rate = decay_rate;
  impl->decay_steps = decay_steps;
  impl->staircase = staircase;
  impl_ = std::move(impl);
}

}  // namespace tapeflow::keras::optimizers::schedules

namespace tapeflow::keras::optimizers::schedules {

PolynomialDecay::PolynomialDecay(double initial_learning_rate, int64_t decay_steps,
                                 double end_learning_rate, double power, bool cycle)
    : LearningRateSchedule() {
  check_steps("PolynomialDecay", decay_steps);
  check_nonnegative("PolynomialDecay", "initial_learning_rate", initial_learning_rate);
  check_nonnegative("PolynomialDecay", "end_learning_rate", end_learning_rate);
  // A negative power makes the rate infinite at step decay_steps (0 to a negative power).
  check_nonnegative("PolynomialDecay", "power", power);
  auto impl = std::make_shared<Polynomial>();
  impl->initial = initial_learning_rate;
  impl->end = end_learning_rate;
  impl->power = power;
  impl->decay_steps = decay_steps;
  impl->cycle = cycle;
  impl_ = std::move(impl);
}

CosineDecayRestarts::CosineDecayRestarts(double initial_learning_rate, int64_t first_decay_steps,
                                         double t_mul, double m_mul, double alpha)
    : LearningRateSchedule() {
  TF_CHECK_ARG(first_decay_steps > 0, "CosineDecayRestarts",
               "first_decay_steps must be positive, got {}", first_decay_steps);
  check_nonnegative("CosineDecayRestarts", "initial_learning_rate", initial_learning_rate);
  check_nonnegative("CosineDecayRestarts", "m_mul", m_mul);
  check_nonnegative("CosineDecayRestarts", "alpha", alpha);
  // The period index is a logarithm in base t_mul: t_mul must be positive.
  TF_CHECK_ARG(std::isfinite(t_mul) && t_mul > 0, "CosineDecayRestarts",
               "t_mul must be finite and > 0, got {}", t_mul);
  auto impl = std::make_shared<CosineRestarts>();
  impl->initial = initial_learning_rate;
  impl->first_decay_steps = first_decay_steps;
  impl->t_mul = t_mul;
  impl->m_mul = m_mul;
  impl->alpha = alpha;
  impl_ = std::move(impl);
}

}  // namespace tapeflow::keras::optimizers::schedules

namespace tapeflow::keras::detail::compile_access {

namespace {
// Reads LearningRateSchedule::impl_ (protected) through a pointer to member formed in a derived
// class, which the language allows on any LearningRateSchedule object.
struct ImplOf : optimizers::LearningRateSchedule {
  static const optimizers::schedules::detail::ScheduleImpl* of(
      const optimizers::LearningRateSchedule& s) {
    return (s.*(&ImplOf::impl_)).get();
  }
};
}  // namespace

std::optional<ScheduleConfig> schedule_config(const optimizers::LearningRateSchedule& schedule) {
  using namespace optimizers::schedules;  // NOLINT: the Impl classes of this file
  const auto* impl = ImplOf::of(schedule);
  ScheduleConfig c;
  if (const auto* e = dynamic_cast<const Exponential*>(impl)) {
    c.class_name = "ExponentialDecay";
    c.initial_learning_rate = e->initial;
    c.decay_steps = e->decay_steps;
    c.decay_rate = e->decay_rate;
    c.staircase = e->staircase;
  } else if (const auto* p = dynamic_cast<const Piecewise*>(impl)) {
    c.class_name = "PiecewiseConstantDecay";
    c.boundaries = p->boundaries;
    c.values = p->values;
  } else if (const auto* k = dynamic_cast<const Cosine*>(impl)) {
    c.class_name = "CosineDecay";
    c.initial_learning_rate = k->initial;
    c.decay_steps = k->decay_steps;
    c.alpha = k->alpha;
    c.warmup_target = k->warmup_target;
    c.warmup_steps = k->warmup_steps;
  } else if (const auto* t = dynamic_cast<const InverseTime*>(impl)) {
    c.class_name = "InverseTimeDecay";
    c.initial_learning_rate = t->initial;
    c.decay_steps = t->decay_steps;
    c.decay_rate = t->decay_rate;
    c.staircase = t->staircase;
  } else if (const auto* q = dynamic_cast<const Polynomial*>(impl)) {
    c.class_name = "PolynomialDecay";
    c.initial_learning_rate = q->initial;
    c.decay_steps = q->decay_steps;
    c.end_learning_rate = q->end;
    c.power = q->power;
    c.cycle = q->cycle;
  } else if (const auto* r = dynamic_cast<const CosineRestarts*>(impl)) {
    c.class_name = "CosineDecayRestarts";
    c.initial_learning_rate = r->initial;
    c.decay_steps = r->first_decay_steps;
    c.t_mul = r->t_mul;
    c.m_mul = r->m_mul;
    c.alpha = r->alpha;
  } else {
    return std::nullopt;
  }
  return c;
}

}  // namespace tapeflow::keras::detail::compile_access
