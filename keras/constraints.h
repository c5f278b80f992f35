// Weight constraints (tf.keras.constraints): a projection an optimizer applies to a weight after
// each update, as Keras 3's optimizer.apply does for a variable with a constraint. Layers take
// them as options (Dense's kernel_constraint, Conv2D's, Embedding's embeddings_constraint, ...)
// and custom layers through add_weight(..., constraint).
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "core/tensor.h"

namespace tapeflow::keras {

class Constraint {
 public:
  using Fn = std::function<Tensor(const Tensor& weight)>;
  // No constraint.
  Constraint() = default;
  // A custom constraint: fn maps a weight's value to its constrained value (same shape).
  Constraint(std::string name, Fn fn) : name_(std::move(name)), fn_(std::move(fn)) {}

  bool defined() const { return static_cast<bool>(fn_); }
  const std::string& name() const { return name_; }
  // The constrained value of `weight`; InvalidArgumentError naming the constraint when fn
  // changes the shape.
  Tensor operator()(const Tensor& weight) const;

  // The Keras arguments of a built-in constraint ({"max_value", 2.0}, {"axis", [0]}), kept for
  // keras/serialization.h (Keras' get_config). Empty for a custom constraint.
  struct Config {
    std::vector<std::pair<std::string, double>> numbers;
    std::vector<int> axis;  // for the norm constraints
    bool has_axis = false;
  };
  Constraint(std::string name, Config config, Fn fn)
      : name_(std::move(name)), fn_(std::move(fn)), config_(std::move(config)) {}
  const Config& config() const { return config_; }

 private:
  std::string name_;
  Fn fn_;
  Config config_;
};

namespace constraints {

// Keras 3's four, with its formulas (epsilon 1e-7); `axis` are the axes each norm runs over
// (Keras' default 0: for a Dense kernel (in, units), each unit's incoming weights; for a Conv2D
// kernel pass {0, 1, 2}).
// w * clip(||w||, 0, max_value) / (1e-7 + ||w||).
Constraint MaxNorm(double max_value = 2.0, std::vector<int> axis = {0});
// w * (rate * clip(||w||, min_value, max_value) + (1 - rate) * ||w||) / (1e-7 + ||w||).
Constraint MinMaxNorm(double min_value = 0.0, double max_value = 1.0, double rate = 1.0,
                      std::vector<int> axis = {0});
// w * (w >= 0).
Constraint NonNeg();
// w / (1e-7 + ||w||).
Constraint UnitNorm(std::vector<int> axis = {0});
// "max_norm", "min_max_norm", "non_neg", "unit_norm" or Keras' class names, with the defaults;
// "" gives no constraint.
Constraint get(const std::string& identifier);

// The constraint Layer::add_weight attached to `v` (Keras' variable.constraint); undefined when
// none. Keras' optimizers apply it after each update of v.
Constraint of(const Variable& v);
// Attaches `c` to `v` (an undefined c detaches).
void attach(const Variable& v, const Constraint& c);

}  // namespace constraints

}  // namespace tapeflow::keras
