// Weight regularizers (tf.keras.regularizers): a penalty computed from a weight's current value.
// A layer's losses() evaluates them at each access (so a GradientTape sees the variable reads);
// add them to the training loss as Keras' model.losses. Stateless, thread-safe.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/tensor.h"

namespace tapeflow::keras {

class Regularizer {
 public:
  using Fn = std::function<Tensor(const Tensor& weight)>;
  // No regularization.
  Regularizer() = default;
  Regularizer(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}

  bool defined() const { return static_cast<bool>(fn_); }
  const std::string& name() const { return name_; }
  // The scalar penalty of `weight` (its dtype).
  Tensor operator()(const Tensor& weight) const;

  // The Keras arguments of a regularizer made below ({"l2", 0.01}), kept for
  // keras/serialization.h (Keras' get_config). Empty for a custom regularizer.
  using Config = std::vector<std::pair<std::string, double>>;
  Regularizer(std::string name, Config config, Fn fn)
      : name_(std::move(name)), fn_(std::move(fn)), config_(std::move(config)) {}
  const Config& config() const { return config_; }

 private:
  std::string name_;
  Fn fn_;
  Config config_;
};

namespace regularizers {
// l1 * reduce_sum(abs(w)).
Regularizer L1(double l1 = 0.01);
// l2 * reduce_sum(square(w)).
Regularizer L2(double l2 = 0.01);
// l1 * reduce_sum(abs(w)) + l2 * reduce_sum(square(w)).
Regularizer L1L2(double l1 = 0.0, double l2 = 0.0);
// Keras' OrthogonalRegularizer (also "orthogonal_regularizer"), for a rank-2 weight: its rows
// (mode "rows") or columns ("columns") normalized to unit length (x * min(rsqrt(sum x^2), 1e7),
// so a zero row stays zero), then factor * 0.5 * the mean |cosine| over the pairs:
// factor * 0.5 * sum(|N N^T - diag|) / (n (n - 1) / 2) for n rows (N^T N for columns). It
// pushes the rows (columns) apart towards orthogonality. A weight of another rank is an
// InvalidArgumentError (Keras' message); one row (column) has no pairs and gives 0 (Keras:
// NaN).
Regularizer OrthogonalRegularizer(double factor = 0.01, const std::string& mode = "rows");
}  // namespace regularizers

}  // namespace tapeflow::keras
