// The regression, probabilistic and hinge losses of Keras 3 (keras/losses.h, "More losses"):
// per-sample functions written with ops (differentiable, traceable) and their Loss classes.
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "keras/loss_config.h"
#include "keras/losses.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras::losses {

namespace {

using detail::kEpsilon;
using detail::same_shape;

// mean over the last axis; a scalar stays a scalar (as mean_squared_error).
Tensor mean_last(const Tensor& x) {
  return x.rank() == 0 ? x : reduce_mean(x, -1);
}
Tensor sum_last(const Tensor& x) {
  return x.rank() == 0 ? x : reduce_sum(x, -1);
}

// Keras' convert_binary_labels_to_hinge: labels all 0 or 1 (over the whole batch) become -1 and
// 1; other labels stay. A where on a scalar condition, so a trace decides at every run.
Tensor hinge_labels(const Tensor& t) {
  const Tensor binary = reduce_all(logical_or(equal(t, Tensor(0.0)), equal(t, Tensor(1.0))));
  return where(binary, subtract(multiply(t, Tensor(2.0)), Tensor(1.0)), t);
}

// x / max(||x||, 1e-7) along `axis`: Keras' l2 normalize, x * min(rsqrt(sum x^2), 1e7), written
// as x * rsqrt(max(sum x^2, 1e-14)) (the same values, and a finite gradient at x = 0).
Tensor l2_normalize(const Tensor& x, int axis) {
  const Tensor ss = reduce_sum(square(x), std::vector<int>{axis}, true);
  return multiply(x, rsqrt(maximum(ss, Tensor(kEpsilon * kEpsilon))));
}

struct FnLoss final : detail::ConfiguredLoss {
  std::function<Tensor(const Tensor&, const Tensor&)> fn;
  Tensor call(const Tensor& t, const Tensor& p) const override { return fn(t, p); }
};

// `keras_class` and `config`: for a loss with options, its Keras class and the writer of them.
std::shared_ptr<const detail::LossImpl> make(
    std::function<Tensor(const Tensor&, const Tensor&)> fn, std::string name, std::string kind,
    Reduction reduction, std::string keras_class = {},
    std::function<void(nlohmann::ordered_json&)> config = {}) {
  auto impl = std::make_shared<FnLoss>();
  impl->fn = std::move(fn);
  impl->name = std::move(name);
  impl->kind = std::move(kind);
  impl->reduction = reduction;
  impl->keras_class = std::move(keras_class);
  impl->write_config = std::move(config);
  return impl;
}

}  // namespace

// ---- per-sample functions ----

Tensor mean_absolute_error(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = same_shape("mean_absolute_error", y_true, y_pred);
  return mean_last(abs(subtract(t, p)));
}

Tensor mean_absolute_percentage_error(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = same_shape("mean_absolute_percentage_error", y_true, y_pred);
  const Tensor diff = abs(divide(subtract(t, p), maximum(abs(t), Tensor(kEpsilon))));
  return multiply(mean_last(diff), Tensor(100.0));
}

Tensor mean_squared_logarithmic_error(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = same_shape("mean_squared_logarithmic_error", y_true, y_pred);
  const Tensor lp = log(add(maximum(p, Tensor(kEpsilon)), Tensor(1.0)));
  const Tensor lt = log(add(maximum(t, Tensor(kEpsilon)), Tensor(1.0)));
  return mean_last(square(subtract(lp, lt)));
}

Tensor huber(const Tensor& y_true, const Tensor& y_pred, double delta) {
  const char* op = "huber";
  TF_CHECK_ARG(std::isfinite(delta) && delta >= 0, op, "delta must be finite and >= 0, got {}",
               delta);
  auto [t, p] = same_shape(op, y_true, y_pred);
  const Tensor e = subtract(p, t);
  const Tensor a = abs(e);
  const Tensor quadratic = multiply(square(e), Tensor(0.5));
  const Tensor linear = subtract(multiply(a, Tensor(delta)), Tensor(0.5 * delta * delta));
  return mean_last(where(less_equal(a, Tensor(delta)), quadratic, linear));
}

Tensor log_cosh(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = same_shape("log_cosh", y_true, y_pred);
  const Tensor x = subtract(p, t);
  const Tensor lc =
      subtract(add(x, nn::softplus(multiply(x, Tensor(-2.0)))), Tensor(std::log(2.0)));
  return mean_last(lc);
}

Tensor kl_divergence(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = same_shape("kl_divergence", y_true, y_pred);
  t = clip_by_value(t, Tensor(kEpsilon), Tensor(1.0));
  p = clip_by_value(p, Tensor(kEpsilon), Tensor(1.0));
  return sum_last(multiply(t, log(divide(t, p))));
}

Tensor poisson(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = same_shape("poisson", y_true, y_pred);
  return mean_last(subtract(p, multiply(t, log(add(p, Tensor(kEpsilon))))));
}

Tensor cosine_similarity(const Tensor& y_true, const Tensor& y_pred, int axis) {
  const char* op = "cosine_similarity";
  auto [t, p] = same_shape(op, y_true, y_pred);
  if (p.rank() == 0) {  // Keras normalises a scalar as a vector of one
    t = reshape(t, TensorShape({1}));
    p = reshape(p, TensorShape({1}));
  }
  TF_CHECK_ARG(axis >= -p.rank() && axis < p.rank(), op,
               "axis {} is out of range for inputs of shape {}", axis, p.shape().to_string());
  return negative(reduce_sum(multiply(l2_normalize(t, axis), l2_normalize(p, axis)), axis));
}

Tensor hinge(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = same_shape("hinge", y_true, y_pred);
  t = hinge_labels(t);
  return mean_last(maximum(subtract(Tensor(1.0), multiply(t, p)), Tensor(0.0)));
}

Tensor squared_hinge(const Tensor& y_true, const Tensor& y_pred) {
  auto [t, p] = same_shape("squared_hinge", y_true, y_pred);
  t = hinge_labels(t);
  return mean_last(square(maximum(subtract(Tensor(1.0), multiply(t, p)), Tensor(0.0))));
}

Tensor categorical_hinge(const Tensor& y_true, const Tensor& y_pred) {
  const char* op = "categorical_hinge";
  auto [t, p] = same_shape(op, y_true, y_pred);
  TF_CHECK_ARG(p.rank() >= 1, op, "y_pred must have a class axis, got shape {}",
               p.shape().to_string());
  const Tensor pos = reduce_sum(multiply(t, p), -1);
  const Tensor neg = reduce_max(multiply(subtract(Tensor(1.0), t), p), -1);
  return maximum(add(subtract(neg, pos), Tensor(1.0)), Tensor(0.0));
}

// ---- classes ----

MeanAbsoluteError::MeanAbsoluteError(Reduction reduction, std::string name) {
  impl_ = make(mean_absolute_error, std::move(name), "mean_absolute_error", reduction);
}
MeanAbsolutePercentageError::MeanAbsolutePercentageError(Reduction reduction, std::string name) {
  impl_ = make(mean_absolute_percentage_error, std::move(name), "mean_absolute_percentage_error",
               reduction);
}
MeanSquaredLogarithmicError::MeanSquaredLogarithmicError(Reduction reduction, std::string name) {
  impl_ = make(mean_squared_logarithmic_error, std::move(name), "mean_squared_logarithmic_error",
               reduction);
}
Huber::Huber(double delta, Reduction reduction, std::string name) {
  TF_CHECK_ARG(std::isfinite(delta) && delta >= 0, "Huber", "delta must be finite and >= 0, got {}",
               delta);
  // Keras 3.15 leaves delta out of Huber's config (a loaded Huber has delta 1); its constructor
  // takes it, so tapeflow writes it.
  impl_ = make([delta](const Tensor& t, const Tensor& p) { return huber(t, p, delta); },
               std::move(name), "huber", reduction, "Huber",
               [delta](nlohmann::ordered_json& c) { c["delta"] = delta; });
}
LogCosh::LogCosh(Reduction reduction, std::string name) {
  impl_ = make(log_cosh, std::move(name), "log_cosh", reduction);
}
KLDivergence::KLDivergence(Reduction reduction, std::string name) {
  impl_ = make(kl_divergence, std::move(name), "kl_divergence", reduction);
}
Poisson::Poisson(Reduction reduction, std::string name) {
  impl_ = make(poisson, std::move(name), "poisson", reduction);
}
CosineSimilarity::CosineSimilarity(int axis, Reduction reduction, std::string name) {
  // Keras 3.15 leaves axis out of this config too; written for the same reason as Huber's delta.
  impl_ = make([axis](const Tensor& t, const Tensor& p) { return cosine_similarity(t, p, axis); },
               std::move(name), "cosine_similarity", reduction, "CosineSimilarity",
               [axis](nlohmann::ordered_json& c) { c["axis"] = axis; });
}
Hinge::Hinge(Reduction reduction, std::string name) {
  impl_ = make(hinge, std::move(name), "hinge", reduction);
}
SquaredHinge::SquaredHinge(Reduction reduction, std::string name) {
  impl_ = make(squared_hinge, std::move(name), "squared_hinge", reduction);
}
CategoricalHinge::CategoricalHinge(Reduction reduction, std::string name) {
  impl_ = make(categorical_hinge, std::move(name), "categorical_hinge", reduction);
}

Loss detail::get_more(const std::string& id) {
  if (id == "mae" || id == "mean_absolute_error") return MeanAbsoluteError();
  if (id == "mape" || id == "mean_absolute_percentage_error") return MeanAbsolutePercentageError();
  if (id == "msle" || id == "mean_squared_logarithmic_error") return MeanSquaredLogarithmicError();
  if (id == "huber") return Huber();
  if (id == "log_cosh") return LogCosh();
  if (id == "kl_divergence" || id == "kld") return KLDivergence();
  if (id == "poisson") return Poisson();
  if (id == "cosine_similarity") return CosineSimilarity();
  if (id == "hinge") return Hinge();
  if (id == "squared_hinge") return SquaredHinge();
  if (id == "categorical_hinge") return CategoricalHinge();
  return Loss();
}

}  // namespace tapeflow::keras::losses
