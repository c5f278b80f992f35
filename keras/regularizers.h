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
}  // namespace regularizers

}  // namespace tapeflow::keras
