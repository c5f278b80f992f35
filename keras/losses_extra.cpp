// Keras 3's focal crossentropies and overlap losses (keras/losses.h, "Extra losses"): per-sample
// functions written with ops (differentiable through the tape, traceable) and their Loss classes.
#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

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

// Keras' axis of Dice and Tversky: null (every axis), one integer or a list.
nlohmann::ordered_json axis_json(const std::vector<int>& axis) {
  if (axis.empty()) return nullptr;
  if (axis.size() == 1) return axis[0];
  return axis;
}

Tensor scalar_like(double v, const Tensor& like) {
  return constant(Tensor(v), like.dtype());
}

void check_smoothing(const char* op, double s) {
  TF_CHECK_ARG(s >= 0 && s <= 1, op, "label_smoothing must be in [0, 1], got {}", s);
}
void check_finite(const char* op, const char* what, double v) {
  TF_CHECK_ARG(std::isfinite(v), op, "{} must be finite, got {}", what, v);
}

void check_floating(const char* op, const Tensor& y_pred) {
  TF_CHECK_ARG(y_pred.defined() && is_floating(y_pred.dtype()), op,
               "y_pred must be floating point, got {}",
               y_pred.defined() ? dtype_name(y_pred.dtype()) : "None");
}

// The axes Dice and Tversky sum over: every axis when none are given (Keras' axis=None).
Tensor sum_over(const Tensor& x, const std::vector<int>& axes) {
  return axes.empty() ? reduce_sum(x) : reduce_sum(x, axes);
}

void check_axes(const char* op, const Tensor& t, const std::vector<int>& axes) {
  for (int a : axes)
    TF_CHECK_ARG(a >= -t.rank() && a < t.rank(), op,
                 "axis {} is out of range for inputs of shape {}", a, t.shape().to_string());
}

}  // namespace

// ---- per-sample functions ----

Tensor binary_focal_crossentropy(const Tensor& y_true, const Tensor& y_pred,
                                 bool apply_class_balancing, double alpha, double gamma,
                                 bool from_logits, double label_smoothing, int axis) {
  const char* op = "binary_focal_crossentropy";
  check_floating(op, y_pred);
  check_smoothing(op, label_smoothing);
  auto [t, p] = same_shape(op, y_true, y_pred);
  if (p.rank() > 0) check_axes(op, p, {axis});
  const Tensor one = scalar_like(1.0, p);
  if (label_smoothing != 0)
    t = add(multiply(t, scalar_like(1.0 - label_smoothing, p)),
            scalar_like(0.5 * label_smoothing, p));
  Tensor bce;
  if (from_logits) {
    // Keras' TF backend recognises sigmoid's output and takes the crossentropy from the logits
    // (unclipped), while the focal factor uses the probabilities.
    bce = nn::sigmoid_cross_entropy_with_logits(t, p);
    p = sigmoid(p);
  } else {
    const Tensor c = clip_by_value(p, scalar_like(kEpsilon, p), scalar_like(1.0 - kEpsilon, p));
    bce = negative(add(multiply(t, log(c)), multiply(subtract(one, t), log(subtract(one, c)))));
  }
  const Tensor p_t = add(multiply(t, p), multiply(subtract(one, t), subtract(one, p)));
  Tensor focal = multiply(pow(subtract(one, p_t), scalar_like(gamma, p)), bce);
  if (apply_class_balancing) {
    const Tensor w = add(multiply(t, scalar_like(alpha, p)),
                         multiply(subtract(one, t), scalar_like(1.0 - alpha, p)));
    focal = multiply(w, focal);
  }
  return focal.rank() == 0 ? focal : reduce_mean(focal, axis);
}

Tensor categorical_focal_crossentropy(const Tensor& y_true, const Tensor& y_pred, double alpha,
                                      double gamma, bool from_logits, double label_smoothing,
                                      int axis) {
  const char* op = "categorical_focal_crossentropy";
  check_floating(op, y_pred);
  check_smoothing(op, label_smoothing);
  auto [t, p] = same_shape(op, y_true, y_pred);
  TF_CHECK_ARG(p.rank() >= 1, op, "y_pred must have a class axis, got shape {}",
               p.shape().to_string());
  check_axes(op, p, {axis});
  // Keras 3.15 smooths over the last axis's size whatever `axis` is.
  const int64_t classes = p.shape()[p.rank() - 1];
  if (label_smoothing != 0)
    t = add(multiply(t, scalar_like(1.0 - label_smoothing, p)),
            scalar_like(label_smoothing / static_cast<double>(classes), p));
  if (from_logits) p = nn::softmax(p, axis);
  // Normalised to sum to 1 per sample, then clipped (Keras).
  Tensor out = divide(p, reduce_sum(p, axis, true));
  out = clip_by_value(out, scalar_like(kEpsilon, p), scalar_like(1.0 - kEpsilon, p));
  const Tensor cce = negative(multiply(t, log(out)));
  const Tensor factor = multiply(pow(subtract(scalar_like(1.0, p), out), scalar_like(gamma, p)),
                                 scalar_like(alpha, p));
  return reduce_sum(multiply(factor, cce), axis);
}

Tensor dice(const Tensor& y_true, const Tensor& y_pred, const std::vector<int>& axis) {
  const char* op = "dice";
  check_floating(op, y_pred);
  auto [t, p] = same_shape(op, y_true, y_pred);
  check_axes(op, t, axis);
  const Tensor inter = sum_over(multiply(t, p), axis);
  const Tensor denom = add(add(sum_over(t, axis), sum_over(p, axis)), scalar_like(kEpsilon, p));
  return subtract(scalar_like(1.0, p), divide(multiply(scalar_like(2.0, p), inter), denom));
}

Tensor tversky(const Tensor& y_true, const Tensor& y_pred, double alpha, double beta,
               const std::vector<int>& axis) {
  const char* op = "tversky";
  check_floating(op, y_pred);
  auto [t, p] = same_shape(op, y_true, y_pred);
  check_axes(op, t, axis);
  const Tensor one = scalar_like(1.0, p);
  const Tensor inter = sum_over(multiply(t, p), axis);
  const Tensor fp = sum_over(multiply(subtract(one, p), t), axis);
  const Tensor fn = sum_over(multiply(p, subtract(one, t)), axis);
  const Tensor denom =
      add(add(add(inter, multiply(fp, scalar_like(alpha, p))), multiply(fn, scalar_like(beta, p))),
          scalar_like(kEpsilon, p));
  return subtract(one, divide(inter, denom));
}

Tensor categorical_generalized_cross_entropy(const Tensor& y_true, const Tensor& y_pred, double q) {
  const char* op = "categorical_generalized_cross_entropy";
  check_floating(op, y_pred);
  TF_CHECK_ARG(y_true.defined() && y_pred.rank() >= 1, op,
               "y_pred must have a class axis, got shape {}", y_pred.shape().to_string());
  Tensor t = y_true;
  if (t.rank() == y_pred.rank() && t.shape()[t.rank() - 1] == 1) t = squeeze(t, {-1});
  TensorShape lead = y_pred.shape();
  lead.pop_back();
  TF_CHECK_ARG(t.shape() == lead, op,
               "y_true of shape {} does not match y_pred of shape {}: expected integer labels of "
               "shape {} (or with a trailing 1)",
               y_true.shape().to_string(), y_pred.shape().to_string(), lead.to_string());
  const int64_t classes = y_pred.shape()[y_pred.rank() - 1];
  // Keras casts the labels to int (a fractional label truncates) and one-hot encodes them.
  const Tensor ids = range(int64_t{0}, classes, int64_t{1});
  const Tensor hit = equal(expand_dims(cast(t, int64), -1), cast(ids, int64));
  const Tensor p = reduce_sum(where(hit, y_pred, zeros_like(y_pred)), -1);
  return divide(subtract(scalar_like(1.0, p), pow(p, scalar_like(q, p))), scalar_like(q, p));
}

// ---- classes ----

BinaryFocalCrossentropy::BinaryFocalCrossentropy(bool apply_class_balancing, double alpha,
                                                 double gamma, bool from_logits,
                                                 double label_smoothing, Reduction reduction,
                                                 std::string name, int axis) {
  const char* op = "BinaryFocalCrossentropy";
  check_smoothing(op, label_smoothing);
  check_finite(op, "alpha", alpha);
  check_finite(op, "gamma", gamma);
  impl_ = make(
      [=](const Tensor& t, const Tensor& p) {
        return binary_focal_crossentropy(t, p, apply_class_balancing, alpha, gamma, from_logits,
                                         label_smoothing, axis);
      },
      std::move(name), "binary_focal_crossentropy", reduction, "BinaryFocalCrossentropy",
      [=](nlohmann::ordered_json& c) {
        c["from_logits"] = from_logits;
        c["label_smoothing"] = label_smoothing;
        c["axis"] = axis;
        c["apply_class_balancing"] = apply_class_balancing;
        c["alpha"] = alpha;
        c["gamma"] = gamma;
      });
}

CategoricalFocalCrossentropy::CategoricalFocalCrossentropy(double alpha, double gamma,
                                                           bool from_logits, double label_smoothing,
                                                           Reduction reduction, std::string name,
                                                           int axis) {
  const char* op = "CategoricalFocalCrossentropy";
  check_smoothing(op, label_smoothing);
  check_finite(op, "alpha", alpha);
  check_finite(op, "gamma", gamma);
  impl_ = make(
      [=](const Tensor& t, const Tensor& p) {
        return categorical_focal_crossentropy(t, p, alpha, gamma, from_logits, label_smoothing,
                                              axis);
      },
      std::move(name), "categorical_focal_crossentropy", reduction, "CategoricalFocalCrossentropy",
      [=](nlohmann::ordered_json& c) {
        c["from_logits"] = from_logits;
        c["label_smoothing"] = label_smoothing;
        c["axis"] = axis;
        c["alpha"] = alpha;
        c["gamma"] = gamma;
      });
}

Dice::Dice(Reduction reduction, std::string name, std::vector<int> axis) {
  impl_ = make([axis](const Tensor& t, const Tensor& p) { return dice(t, p, axis); },
               std::move(name), "dice", reduction, "Dice",
               [axis](nlohmann::ordered_json& c) { c["axis"] = axis_json(axis); });
}

Tversky::Tversky(double alpha, double beta, Reduction reduction, std::string name,
                 std::vector<int> axis) {
  check_finite("Tversky", "alpha", alpha);
  check_finite("Tversky", "beta", beta);
  impl_ = make([alpha, beta, axis](const Tensor& t,
                                   const Tensor& p) { return tversky(t, p, alpha, beta, axis); },
               std::move(name), "tversky", reduction, "Tversky",
               [alpha, beta, axis](nlohmann::ordered_json& c) {
                 c["alpha"] = alpha;
                 c["beta"] = beta;
                 c["axis"] = axis_json(axis);
               });
}

CategoricalGeneralizedCrossEntropy::CategoricalGeneralizedCrossEntropy(double q,
                                                                       Reduction reduction,
                                                                       std::string name) {
  TF_CHECK_ARG(q > 0 && q < 1, "CategoricalGeneralizedCrossEntropy",
               "q must be in the interval (0, 1), got {}", q);
  impl_ =
      make([q](const Tensor& t,
               const Tensor& p) { return categorical_generalized_cross_entropy(t, p, q); },
           std::move(name), "categorical_generalized_cross_entropy", reduction,
           "CategoricalGeneralizedCrossEntropy", [q](nlohmann::ordered_json& c) { c["q"] = q; });
}

Loss detail::get_extra(const std::string& id) {
  if (id == "binary_focal_crossentropy" || id == "binaryfocalcrossentropy")
    return BinaryFocalCrossentropy();
  if (id == "categorical_focal_crossentropy" || id == "categoricalfocalcrossentropy")
    return CategoricalFocalCrossentropy();
  if (id == "dice") return Dice();
  if (id == "tversky") return Tversky();
  if (id == "categorical_generalized_cross_entropy" || id == "categoricalgeneralizedcrossentropy")
    return CategoricalGeneralizedCrossEntropy();
  if (id == "circle") return Circle();
  if (id == "ctc") return CTC();
  return Loss();
}

}  // namespace tapeflow::keras::losses
