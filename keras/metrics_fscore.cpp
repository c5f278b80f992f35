// Keras 3's FBetaScore, F1Score and R2Score (keras/metrics.h, "F-scores and R2"). They are
// Custom metrics (metrics_impl.h) whose state, as Keras', is built at the first update from
// y_pred's last dimension (metrics_impl.h's LazyState: outside any trace or tape, mirrored as
// where the metric was made, as a layer's build), so the first update may run eagerly, inside a
// traced tf::function, or on a strategy's replica threads; a checkpoint's restore builds it from
// the saved shapes.
#include <atomic>
#include <cctype>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/context.h"
#include "core/log.h"
#include "keras/losses.h"
#include "keras/metrics.h"
#include "keras/metrics_impl.h"
#include "ops/binary.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/math.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"

namespace tapeflow::keras::metrics {

namespace {

using detail::MetricImpl;

bool numeric(DType d) {
  return is_floating(d) || d == int32 || d == int64 || d == bool_;
}

// Keras' _build checks: both inputs (batch, output_dim), output_dim known. `classes` the value of
// the first build (-1 before it); a later update with another output_dim is an error (Keras
// fails in the variable assignment).
void check_2d(const std::string& op, const char* cls, const Tensor& y_true, const Tensor& y_pred,
              int64_t classes) {
  TF_CHECK_ARG(
      y_true.rank() == 2 && y_pred.rank() == 2, op.c_str(),
      "{} expects 2D inputs of shape (batch_size, output_dim), got y_true {} and y_pred {}", cls,
      y_true.shape().to_string(), y_pred.shape().to_string());
  const int64_t d = y_pred.shape()[1];
  TF_CHECK_ARG(d != None && y_true.shape()[1] != None, op.c_str(),
               "{} expects 2D inputs of shape (batch_size, output_dim) with output_dim known (not "
               "None), got y_true {} and y_pred {}",
               cls, y_true.shape().to_string(), y_pred.shape().to_string());
  TF_CHECK_ARG(classes < 0 || d == classes, op.c_str(),
               "{} '{}' was built for y_pred of shape (batch_size, {}) (by its first update or a "
               "restored checkpoint), got y_pred of shape {} (y_true {}): reset_state() keeps the "
               "state; make a new metric",
               cls, op, classes, y_pred.shape().to_string(), y_true.shape().to_string());
  TF_CHECK_ARG(y_true.shape()[1] == d && (y_true.shape()[0] == y_pred.shape()[0] ||
                                          y_true.shape()[0] == None || y_pred.shape()[0] == None),
               op.c_str(),
               "{}: y_true and y_pred must have the same shape, got y_true {} and y_pred {}", cls,
               y_true.shape().to_string(), y_pred.shape().to_string());
}

// The lazily built state (metrics_impl.h): variables `names` of shape `shape_of(output_dim)`,
// and at every update the 2D checks of the prepared inputs.
std::shared_ptr<detail::LazyState> lazy_state(
    const std::string& op, const char* cls, std::vector<std::string> names,
    std::function<TensorShape(int64_t)> shape_of,
    std::function<std::pair<Tensor, Tensor>(const Tensor&, const Tensor&)> prepare) {
  auto z = std::make_shared<detail::LazyState>();
  z->names = std::move(names);
  z->shape_of = std::move(shape_of);
  z->check = [op, cls, prepare = std::move(prepare)](const Tensor& y_true, const Tensor& y_pred,
                                                     int64_t classes) {
    const auto [t, p] = prepare(y_true, y_pred);
    check_2d(op, cls, t, p, classes);
    return p.shape()[1];
  };
  return z;
}

std::pair<Tensor, Tensor> checked_inputs(const std::string& op, const Tensor& y_true,
                                         const Tensor& y_pred) {
  TF_CHECK_ARG(y_true.defined() && y_pred.defined(), op.c_str(),
               "update_state needs y_true and y_pred");
  TF_CHECK_ARG(numeric(y_true.dtype()) && numeric(y_pred.dtype()), op.c_str(),
               "y_true and y_pred must be numeric, got {} and {}", dtype_name(y_true.dtype()),
               dtype_name(y_pred.dtype()));
  return {cast(y_true, float32), cast(y_pred, float32)};
}

Tensor f32(double v) {
  return Tensor(static_cast<float>(v));
}

std::shared_ptr<MetricImpl> fbeta_impl(const char* cls, const std::optional<std::string>& average,
                                       double beta, std::optional<double> threshold,
                                       std::string name) {
  TF_CHECK_ARG(!average || *average == "micro" || *average == "macro" || *average == "weighted",
               cls,
               "average must be one of none (std::nullopt), \"micro\", \"macro\", \"weighted\", "
               "got \"{}\"",
               average.value_or(""));
  TF_CHECK_ARG(std::isfinite(beta) && beta > 0, cls, "beta must be > 0, got {}", beta);
  TF_CHECK_ARG(!threshold || (*threshold > 0 && *threshold <= 1), cls,
               "threshold must verify 0 < threshold <= 1, got {}", threshold.value_or(0.0));
  auto impl = std::make_shared<MetricImpl>(MetricImpl::Kind::Custom, std::move(name));
  impl->direction = "up";
  const bool micro = average && *average == "micro";
  // Keras: per-class counts, except micro's scalars (summed over the classes too).
  impl->lazy = lazy_state(
      impl->name, cls,
      {"true_positives", "false_positives", "false_negatives", "intermediate_weights"},
      [micro](int64_t d) { return micro ? TensorShape({}) : TensorShape({d}); },
      [op = impl->name](const Tensor& t, const Tensor& p) { return checked_inputs(op, t, p); });
  const std::string op = impl->name;
  impl->increments = [op, micro, threshold](const Tensor& y_true, const Tensor& y_pred,
                                            const Tensor& sample_weight) {
    auto [t, p] = checked_inputs(op, y_true, y_pred);
    Tensor pred;
    if (threshold) {
      pred = greater(p, f32(*threshold));
    } else {
      // Keras without a threshold: the row's largest values (every one of a tie), unless ~0.
      pred = logical_and(greater_equal(p, reduce_max(p, -1, true)), greater(abs(p), f32(1e-9)));
    }
    pred = cast(pred, float32);
    Tensor w;
    if (sample_weight.defined()) {
      w = cast(sample_weight, float32);
      const int64_t n = p.shape()[0], m = w.rank() == 1 ? w.shape()[0] : -2;
      TF_CHECK_ARG(w.rank() == 1 && (m == n || m == None || n == None), op.c_str(),
                   "sample_weight must have shape (batch_size,) = ({},), got {}", n,
                   sample_weight.shape().to_string());
      w = expand_dims(w, 1);
    }
    auto weighted_sum = [&](const Tensor& v) {
      const Tensor x = w.defined() ? multiply(v, w) : v;
      return micro ? reduce_sum(x) : reduce_sum(x, 0);
    };
    const Tensor one = f32(1.0);
    return std::vector<Tensor>{weighted_sum(multiply(pred, t)),
                               weighted_sum(multiply(pred, subtract(one, t))),
                               weighted_sum(multiply(subtract(one, pred), t)), weighted_sum(t)};
  };
  const bool weighted = average && *average == "weighted";
  const bool mean = average && !weighted;
  impl->compute = [op, cls, beta, weighted, mean](const std::vector<Tensor>& v) {
    TF_CHECK_T(FailedPreconditionError, v.size() == 4, op.c_str(),
               "{} '{}' has no state before its first update_state (its number of classes comes "
               "from y_pred's last dimension there)",
               cls, op);
    const Tensor &tp = v[0], &fp = v[1], &fn = v[2], &iw = v[3];
    const Tensor eps = f32(losses::detail::kEpsilon), b2 = f32(beta * beta);
    // Keras' order of operations, for the same float32 roundings.
    const Tensor precision = divide(tp, add(add(tp, fp), eps));
    const Tensor recall = divide(tp, add(add(tp, fn), eps));
    const Tensor ratio =
        divide(multiply(precision, recall), add(add(multiply(b2, precision), recall), eps));
    Tensor f = multiply(ratio, f32(1.0 + beta * beta));
    if (weighted) return reduce_sum(multiply(f, divide(iw, add(reduce_sum(iw), eps))));
    if (mean) return reduce_mean(f);
    return f;
  };
  return impl;
}

std::shared_ptr<MetricImpl> r2_impl(const std::optional<std::string>& aggregation,
                                    int num_regressors, std::string name) {
  const char* cls = "R2Score";
  TF_CHECK_ARG(!aggregation || *aggregation == "uniform_average" ||
                   *aggregation == "variance_weighted_average",
               cls,
               "class_aggregation must be one of none (std::nullopt), \"uniform_average\", "
               "\"variance_weighted_average\", got \"{}\"",
               aggregation.value_or(""));
  TF_CHECK_ARG(num_regressors >= 0, cls, "num_regressors must be >= 0, got {}", num_regressors);
  auto impl = std::make_shared<MetricImpl>(MetricImpl::Kind::Custom, std::move(name));
  impl->direction = "up";
  // Keras makes num_samples in the constructor, the per-output sums at the first update.
  impl->state.emplace_back("num_samples",
                           Variable(zeros({}, float32), impl->name + "/num_samples", false));
  const std::string op = impl->name;
  auto prepare = [op](const Tensor& y_true, const Tensor& y_pred) {
    auto [t, p] = checked_inputs(op, y_true, y_pred);
    return losses::detail::squeeze_or_expand_to_same_rank(t, p);
  };
  impl->lazy = lazy_state(
      op, cls, {"squared_sum", "sum", "residual", "count"},
      [](int64_t d) { return TensorShape({d}); }, prepare);
  impl->increments = [op, prepare](const Tensor& y_true, const Tensor& y_pred,
                                   const Tensor& sample_weight) {
    auto [t, p] = prepare(y_true, y_pred);
    Tensor w = ones_like(t);
    if (sample_weight.defined()) {
      Tensor sw = cast(sample_weight, float32);
      if (sw.rank() == 1) sw = expand_dims(sw, 1);  // Keras: a per-sample weight
      const TensorShape &ws = sw.shape(), &ts = t.shape();
      bool fits = ws.rank() <= 2;
      for (int i = 1; fits && i <= ws.rank(); ++i) {
        const int64_t a = ws[ws.rank() - i], b = ts[ts.rank() - i];
        fits = a == b || a == 1 || a == None || b == None;
      }
      TF_CHECK_ARG(fits, op.c_str(),
                   "sample_weight of shape {} does not broadcast to y_true of shape {}",
                   sample_weight.shape().to_string(), y_true.shape().to_string());
      w = tapeflow::detail::broadcast_like(sw, t);
    }
    const Tensor wt = multiply(t, w);
    // Keras counts every element of y_true (batch * outputs) as a sample of the adjusted R2.
    return std::vector<Tensor>{
        tapeflow::detail::element_count(t, {0, 1}, float32), reduce_sum(multiply(t, wt), 0),
        reduce_sum(wt, 0), reduce_sum(multiply(square(subtract(t, p)), w), 0), reduce_sum(w, 0)};
  };
  const int agg = !aggregation ? 0 : *aggregation == "uniform_average" ? 1 : 2;
  // Keras warns at every result() when the adjusted R2 falls back; here once per metric.
  auto warned = std::make_shared<std::atomic<bool>>(false);
  impl->compute = [op, agg, num_regressors, warned](const std::vector<Tensor>& v) {
    TF_CHECK_T(FailedPreconditionError, v.size() == 5, op.c_str(),
               "R2Score '{}' has no state before its first update_state (its number of outputs "
               "comes from y_pred's last dimension there)",
               op);
    const Tensor &n = v[0], &sum = v[2], &residual = v[3], &count = v[4];
    const Tensor mean = divide(sum, count);
    const Tensor total = subtract(v[1], multiply(sum, mean));
    Tensor raw = subtract(f32(1.0), divide(residual, total));
    raw = where(math::is_inf(raw), zeros_like(raw), raw);  // constant y_true: 0 (NaN stays NaN)
    Tensor r2 = raw;
    if (agg == 1) r2 = reduce_mean(raw);
    if (agg == 2) r2 = divide(reduce_sum(multiply(total, raw)), reduce_sum(total));
    if (num_regressors == 0) return r2;
    const Tensor p = f32(num_regressors);
    // Keras: adjusted only when num_regressors < num_samples - 1, else the plain R2 and a
    // warning. A where keeps it one graph when result() is traced.
    const Tensor adjusted =
        subtract(f32(1.0), divide(multiply(subtract(f32(1.0), r2), subtract(n, f32(1.0))),
                                  subtract(subtract(n, p), f32(1.0))));
    const Tensor ok = greater(subtract(n, f32(1.0)), p);
    if (tapeflow::detail::thread_context().trace == nullptr && !ok.item<bool>() &&
        !warned->exchange(true)) {
      const float samples = n.item<float>();
      if (static_cast<float>(num_regressors) > samples - 1)
        TF_LOG_WARN(
            "R2Score '{}': more independent predictors ({}) than data points ({}) in "
            "the adjusted R2 score; falling back to the standard R2 score",
            op, num_regressors, samples);
      else
        TF_LOG_WARN(
            "R2Score '{}': division by zero in the adjusted R2 score ({} regressors, {} "
            "data points); falling back to the standard R2 score",
            op, num_regressors, samples);
    }
    return where(ok, adjusted, r2);
  };
  return impl;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

namespace {
using Json = nlohmann::ordered_json;
template <class T>
Json optional_json(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}
}  // namespace

FBetaScore::FBetaScore(std::optional<std::string> average, double beta,
                       std::optional<double> threshold, std::string name)
    : Metric(fbeta_impl("FBetaScore", average, beta, threshold, std::move(name))) {
  impl_->keras_class = "FBetaScore";
  impl_->write_config = [average, beta, threshold](Json& c) {
    c["average"] = optional_json(average);
    c["beta"] = beta;
    c["threshold"] = optional_json(threshold);
  };
}

F1Score::F1Score(std::optional<std::string> average, std::optional<double> threshold,
                 std::string name)
    : Metric(fbeta_impl("F1Score", average, 1.0, threshold, std::move(name))) {
  impl_->keras_class = "F1Score";
  impl_->write_config = [average, threshold](Json& c) {
    c["average"] = optional_json(average);
    c["threshold"] = optional_json(threshold);
  };
}

R2Score::R2Score(std::optional<std::string> class_aggregation, int num_regressors, std::string name)
    : Metric(r2_impl(class_aggregation, num_regressors, std::move(name))) {
  impl_->keras_class = "R2Score";
  impl_->write_config = [class_aggregation, num_regressors](Json& c) {
    c["class_aggregation"] = optional_json(class_aggregation);
    c["num_regressors"] = num_regressors;
  };
}

Metric detail::get_fscore(const std::string& id, const std::string& name) {
  const std::string s = lower(id);
  // Keras 3 resolves "f1_score", "F1Score", "r2_score", "R2Score" and "FBetaScore" (beta 1).
  if (s == "f1_score" || s == "f1score") return F1Score(std::nullopt, std::nullopt, name);
  if (s == "fbeta_score" || s == "fbetascore")
    return FBetaScore(std::nullopt, 1.0, std::nullopt, name);
  if (s == "r2_score" || s == "r2score") return R2Score("uniform_average", 0, name);
  return Metric();
}

}  // namespace tapeflow::keras::metrics
