// Keras 3's confusion-count metrics (TruePositives, FalsePositives, TrueNegatives,
// FalseNegatives) and the remaining MeanMetricWrapper means (keras/metrics.h, "Extra metrics").
// The counts are Custom metrics (metrics_impl.h): one float32 "accumulator" of one entry per
// threshold, summed over replicas and workers on read as Precision's counts are.
#include <cmath>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "keras/losses.h"
#include "keras/metrics.h"
#include "keras/metrics_impl.h"
#include "ops/binary.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/linalg_more.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/scatter.h"
#include "ops/unary.h"

namespace tapeflow::keras::metrics {

// Keras' is_evenly_distributed_thresholds: at least 3 thresholds within 1e-7 of i / (n - 1).
// Keras then counts with buckets of predictions clipped to [0, 1] (count_inputs' `clip`).
bool detail::evenly_distributed(const std::vector<double>& th) {
  const size_t n = th.size();
  if (n < 3) return false;
  for (size_t i = 0; i < n; ++i) {
    const double even = static_cast<double>(static_cast<float>(i) / static_cast<float>(n - 1));
    if (std::abs(th[i] - even) > 1e-7 + 1e-5 * std::abs(even)) return false;  // np.allclose
  }
  return true;
}

void detail::write_thresholds(nlohmann::ordered_json& config, const std::vector<double>& th) {
  if (th.empty())
    config["thresholds"] = nullptr;
  else if (th.size() == 1)
    config["thresholds"] = th[0];
  else
    config["thresholds"] = th;
}

Tensor detail::above_thresholds(const Tensor& pred, const std::vector<float>& thresholds,
                                bool evenly) {
  const auto n = static_cast<int64_t>(thresholds.size());
  const Tensor p = reshape(pred, TensorShape({1, -1}));
  if (!evenly) return greater(p, constant(thresholds, TensorShape({n, 1})));
  // Keras' bucket ceil(p (n - 1)) - 1 is counted for every threshold index at or below it.
  std::vector<float> index(thresholds.size());
  for (size_t i = 0; i < index.size(); ++i) index[i] = static_cast<float>(i);
  const Tensor clipped = clip_by_value(p, Tensor(0.0f), Tensor(1.0f));
  return greater(multiply(clipped, Tensor(static_cast<float>(n - 1))),
                 constant(index, TensorShape({n, 1})));
}

namespace {

using detail::evenly_distributed;

using detail::MetricImpl;

std::shared_ptr<MetricImpl> mean_of(std::function<Tensor(const Tensor&, const Tensor&)> fn,
                                    std::string name, std::string direction) {
  auto impl = std::make_shared<MetricImpl>(MetricImpl::Kind::Wrapper, std::move(name));
  impl->fn = std::move(fn);
  impl->direction = std::move(direction);
  return impl;
}

// Whether `w` broadcasts to `p` without growing it (dimensions of -1 are unknown: allowed).
bool broadcasts_to(const TensorShape& w, const TensorShape& p) {
  if (w.rank() > p.rank()) return false;
  for (int i = 1; i <= w.rank(); ++i) {
    const int64_t dw = w[w.rank() - i], dp = p[p.rank() - i];
    if (dw != dp && dw != 1 && dw != -1 && dp != -1) return false;
  }
  return true;
}

// The labels, predictions and weights of one update, flattened to (1, elements), and which
// predictions lie above each threshold, (thresholds, elements), as Keras'
// update_confusion_matrix_variables: a label is positive when nonzero (NaN too: Keras casts to
// bool), a prediction above a threshold when strictly greater (NaN never).
struct Counted {
  Tensor positive, above, weight;
};

Counted count_inputs(const std::string& op, const Tensor& y_true, const Tensor& y_pred,
                     const Tensor& sample_weight, const std::vector<float>& thf, bool clip,
                     int class_id) {
  TF_CHECK_ARG(y_true.defined() && y_pred.defined(), op.c_str(),
               "update_state needs y_true and y_pred");
  TF_CHECK_ARG(is_floating(y_pred.dtype()) || y_pred.dtype() == int32 || y_pred.dtype() == int64 ||
                   y_pred.dtype() == bool_,
               op.c_str(), "y_pred must be numeric, got {}", dtype_name(y_pred.dtype()));
  auto [p, t] =
      losses::detail::squeeze_or_expand_to_same_rank(cast(y_pred, float32), cast(y_true, float32));
  TF_CHECK_ARG(p.shape() == t.shape(), op.c_str(),
               "y_true and y_pred must have the same shape, got y_true {} and y_pred {}",
               y_true.shape().to_string(), y_pred.shape().to_string());
  Tensor w;
  if (sample_weight.defined()) {
    Tensor sw = expand_dims(cast(sample_weight, float32), -1);
    if (sw.rank() == t.rank() + 1) sw = squeeze(sw, {-1});
    TF_CHECK_ARG(broadcasts_to(sw.shape(), p.shape()), op.c_str(),
                 "sample_weight of shape {} does not broadcast to y_pred of shape {}",
                 sample_weight.shape().to_string(), y_pred.shape().to_string());
    w = tapeflow::detail::broadcast_like(sw, p);
  }
  if (class_id >= 0) {
    TF_CHECK_ARG(p.rank() >= 2 && class_id < p.shape()[p.rank() - 1], op.c_str(),
                 "class_id {} needs y_pred of shape (batch, classes) with more than {} classes, "
                 "got {}",
                 class_id, class_id, y_pred.shape().to_string());
    // Keras keeps the column with a trailing 1 (y[..., class_id, None]).
    const int last = p.rank() - 1;
    std::vector<int64_t> begin(static_cast<size_t>(p.rank()), 0), size;
    for (int i = 0; i < p.rank(); ++i) size.push_back(i == last ? 1 : -1);
    begin.back() = class_id;
    p = slice(p, begin, size);
    t = slice(t, begin, size);
    if (w.defined()) w = slice(w, begin, size);
  }
  if (!w.defined()) w = ones_like(p);
  const TensorShape flat({1, -1});
  const Tensor above = detail::above_thresholds(p, thf, clip);
  return Counted{reshape(not_equal(t, Tensor(0.0f)), flat), above, reshape(w, flat)};
}

// The weighted number of elements where `hit` holds, per threshold: (thresholds,). A selected
// element adds its weight, others add 0 (an infinite weight outside `hit` adds nothing).
Tensor weighted_count(const Tensor& hit, const Tensor& w) {
  return reduce_sum(where(hit, w, Tensor(0.0f)), 1);
}

enum class Cond { TP, FP, TN, FN };

std::shared_ptr<MetricImpl> confusion_count(const char* cls, Cond cond, std::vector<double> th,
                                            bool scalar, std::string name) {
  TF_CHECK_ARG(!th.empty(), cls, "thresholds must not be empty");
  for (double t : th)
    TF_CHECK_ARG(std::isfinite(t) && t >= 0 && t <= 1, cls, "thresholds must be in [0, 1], got {}",
                 t);
  auto impl = std::make_shared<MetricImpl>(MetricImpl::Kind::Custom, std::move(name));
  impl->direction = "";  // Keras 3 gives the raw counts no direction
  const auto n = static_cast<int64_t>(th.size());
  impl->state.emplace_back("accumulator", Variable(zeros(TensorShape({n}), float32),
                                                   impl->name + "/accumulator", false));
  std::vector<float> thf(th.begin(), th.end());
  const bool clip = evenly_distributed(th);
  const std::string op = impl->name;
  impl->increments = [thf, clip, cond, op](const Tensor& y_true, const Tensor& y_pred,
                                           const Tensor& sample_weight) {
    const Counted c = count_inputs(op, y_true, y_pred, sample_weight, thf, clip, -1);
    Tensor hit;
    switch (cond) {
      case Cond::TP:
        hit = logical_and(c.positive, c.above);
        break;
      case Cond::FP:
        hit = logical_and(logical_not(c.positive), c.above);
        break;
      case Cond::TN:
        hit = logical_and(logical_not(c.positive), logical_not(c.above));
        break;
      case Cond::FN:
        hit = logical_and(c.positive, logical_not(c.above));
        break;
    }
    return std::vector<Tensor>{weighted_count(hit, c.weight)};
  };
  impl->compute = [scalar](const std::vector<Tensor>& v) {
    return scalar ? reshape(v[0], TensorShape({})) : v[0];
  };
  impl->keras_class = cls;
  impl->write_config = [th](nlohmann::ordered_json& c) { detail::write_thresholds(c, th); };
  return impl;
}

Tensor divide_no_nan(const Tensor& a, const Tensor& b) {
  return where(equal(b, Tensor(0.0f)), zeros_like(a), divide(a, b));
}

// Which rate is bounded and which is maximised (Keras' SensitivitySpecificityBase family).
enum class AtKind {
  SensitivityAtSpecificity,
  SpecificityAtSensitivity,
  PrecisionAtRecall,
  RecallAtPrecision
};

std::shared_ptr<MetricImpl> rate_at(const char* cls, const char* what, AtKind kind, double value,
                                    int num_thresholds, int class_id, std::string name) {
  TF_CHECK_ARG(std::isfinite(value) && value >= 0 && value <= 1, cls,
               "{} must be in [0, 1], got {}", what, value);
  TF_CHECK_ARG(num_thresholds > 0, cls, "num_thresholds must be an integer > 0, got {}",
               num_thresholds);
  TF_CHECK_ARG(class_id >= -1, cls, "class_id must be >= 0 (or -1 for none), got {}", class_id);
  // Keras: 0.5 alone, or 0, 1/(n-1), ..., 1 with predictions clipped (its bucketed path).
  std::vector<float> thf;
  if (num_thresholds == 1) {
    thf.push_back(0.5f);
  } else {
    thf.push_back(0.0f);
    for (int i = 0; i < num_thresholds - 2; ++i)
      thf.push_back(static_cast<float>((i + 1) * 1.0 / (num_thresholds - 1)));
    thf.push_back(1.0f);
  }
  const bool clip = num_thresholds > 1;
  auto impl = std::make_shared<MetricImpl>(MetricImpl::Kind::Custom, std::move(name));
  impl->direction = "up";
  for (const char* v : {"true_positives", "false_positives", "true_negatives", "false_negatives"})
    impl->state.emplace_back(
        v, Variable(zeros(TensorShape({static_cast<int64_t>(thf.size())}), float32),
                    impl->name + "/" + v, false));
  const std::string op = impl->name;
  impl->increments = [thf, clip, class_id, op](const Tensor& y_true, const Tensor& y_pred,
                                               const Tensor& sample_weight) {
    const Counted c = count_inputs(op, y_true, y_pred, sample_weight, thf, clip, class_id);
    const Tensor neg = logical_not(c.positive), below = logical_not(c.above);
    return std::vector<Tensor>{weighted_count(logical_and(c.positive, c.above), c.weight),
                               weighted_count(logical_and(neg, c.above), c.weight),
                               weighted_count(logical_and(neg, below), c.weight),
                               weighted_count(logical_and(c.positive, below), c.weight)};
  };
  impl->compute = [kind, value](const std::vector<Tensor>& v) {
    const Tensor &tp = v[0], &fp = v[1], &tn = v[2], &fn = v[3];
    const Tensor sensitivity = divide_no_nan(tp, add(tp, fn));  // = recall
    const Tensor specificity = divide_no_nan(tn, add(tn, fp));
    const Tensor precision = divide_no_nan(tp, add(tp, fp));
    Tensor bounded, best;
    switch (kind) {
      case AtKind::SensitivityAtSpecificity:
        bounded = specificity;
        best = sensitivity;
        break;
      case AtKind::SpecificityAtSensitivity:
        bounded = sensitivity;
        best = specificity;
        break;
      case AtKind::PrecisionAtRecall:
        bounded = sensitivity;
        best = precision;
        break;
      case AtKind::RecallAtPrecision:
        bounded = precision;
        best = sensitivity;
        break;
    }
    // The rates are >= 0: the max over the feasible thresholds, 0 when there is none.
    const Tensor feasible = greater_equal(bounded, Tensor(static_cast<float>(value)));
    return reduce_max(where(feasible, best, zeros_like(best)));
  };
  impl->keras_class = cls;
  impl->write_config = [what = std::string(what), value, num_thresholds,
                        class_id](nlohmann::ordered_json& c) {
    c["class_id"] =
        class_id >= 0 ? nlohmann::ordered_json(class_id) : nlohmann::ordered_json(nullptr);
    c["num_thresholds"] = num_thresholds;
    c[what] = value;
  };
  return impl;
}

// The IoU family (Keras' _IoUBase). `binary_threshold` >= 0 makes predictions class 1 at or
// above it (BinaryIoU).
std::shared_ptr<MetricImpl> iou_impl(const char* cls, int num_classes, std::vector<int> ids,
                                     std::string name, std::optional<int> ignore_class,
                                     bool sparse_y_true, bool sparse_y_pred, int axis,
                                     double binary_threshold) {
  TF_CHECK_ARG(num_classes >= 1, cls, "num_classes must be at least 1, got {}", num_classes);
  TF_CHECK_ARG(!ids.empty(), cls, "target_class_ids must not be empty");
  for (int id : ids)
    TF_CHECK_ARG(id >= 0 && id < num_classes, cls,
                 "target class id {} is out of range, which is [0, {})", id, num_classes);
  auto impl = std::make_shared<MetricImpl>(MetricImpl::Kind::Custom, std::move(name));
  impl->direction = "up";
  const int64_t c = num_classes;
  impl->state.emplace_back(
      "total_confusion_matrix",
      Variable(zeros(TensorShape({c, c}), float32), impl->name + "/total_confusion_matrix", false));
  const std::string op = impl->name;
  impl->increments = [=](const Tensor& y_true, const Tensor& y_pred, const Tensor& sw) {
    TF_CHECK_ARG(y_true.defined() && y_pred.defined(), op.c_str(),
                 "update_state needs y_true and y_pred");
    auto labels = [&](const Tensor& x, bool sparse, const char* what) {
      if (sparse) return reshape(cast(x, int64), TensorShape({-1}));
      TF_CHECK_ARG(x.rank() >= 1 && axis >= -x.rank() && axis < x.rank(), op.c_str(),
                   "{} of shape {} has no axis {} to take the argmax over", what,
                   x.shape().to_string(), axis);
      return reshape(cast(argmax(x, axis), int64), TensorShape({-1}));
    };
    const Tensor t = labels(y_true, sparse_y_true, "y_true");
    Tensor p;
    if (binary_threshold >= 0)
      p = reshape(
          cast(greater_equal(cast(y_pred, float32), Tensor(static_cast<float>(binary_threshold))),
               int64),
          TensorShape({-1}));
    else
      p = labels(y_pred, sparse_y_pred, "y_pred");
    TF_CHECK_ARG(t.shape() == p.shape(), op.c_str(),
                 "y_true of shape {} and y_pred of shape {} give different numbers of labels",
                 y_true.shape().to_string(), y_pred.shape().to_string());
    const int64_t n = t.shape()[0];
    // Keras' int state truncates the weights. The weights take the labels' shape, so a batch
    // unknown while tracing (None) works too.
    Tensor w = ones_like(cast(t, float32));
    if (sw.defined()) {
      const Tensor wf = reshape(cast(cast(sw, int64), float32), TensorShape({-1}));
      const int64_t m = wf.shape()[0];
      TF_CHECK_ARG(m == 1 || m == n || m == None || n == None, op.c_str(),
                   "sample_weight of shape {} does not match the {} labels of y_true {}",
                   sw.shape().to_string(), n, y_true.shape().to_string());
      w = multiply(w, wf);
    }
    const Tensor cc = Tensor(c);
    Tensor valid = logical_and(logical_and(greater_equal(t, Tensor(int64_t{0})), less(t, cc)),
                               logical_and(greater_equal(p, Tensor(int64_t{0})), less(p, cc)));
    if (ignore_class) valid = logical_and(valid, not_equal(t, Tensor(int64_t{*ignore_class})));
    const Tensor zero = zeros_like(t);
    const Tensor index = add(multiply(where(valid, t, zero), cc), where(valid, p, zero));
    const Tensor counts =
        unsorted_segment_sum(where(valid, w, zeros_like(w)), cast(index, int32), c * c);
    return std::vector<Tensor>{reshape(counts, TensorShape({c, c}))};
  };
  std::vector<int64_t> ids64(ids.begin(), ids.end());
  impl->compute = [ids64](const std::vector<Tensor>& v) {
    const Tensor& cm = v[0];
    const Tensor tp = linalg::diag_part(cm);
    const Tensor denom = subtract(add(reduce_sum(cm, 0), reduce_sum(cm, 1)), tp);
    const Tensor pick = constant(ids64);
    const Tensor d = gather(denom, pick), tpp = gather(tp, pick);
    const Tensor valid = greater(d, Tensor(1e-9f));
    const Tensor eps = Tensor(static_cast<float>(losses::detail::kEpsilon));
    const Tensor iou = where(valid, divide(tpp, add(d, eps)), zeros_like(d));
    return divide(reduce_sum(iou), add(reduce_sum(cast(valid, float32)), eps));
  };
  impl->keras_class = cls;
  impl->write_config = [cls = std::string(cls), num_classes, ids, ignore_class, sparse_y_true,
                        sparse_y_pred, axis, binary_threshold](nlohmann::ordered_json& cfg) {
    // Keras' configs of the IoU family: each class writes only its own arguments.
    cfg["dtype"] = "int64";
    const bool binary = cls == "BinaryIoU", one_hot = cls.rfind("OneHot", 0) == 0;
    const bool mean = cls == "MeanIoU" || cls == "OneHotMeanIoU";
    if (binary) {
      cfg["target_class_ids"] = ids;
      cfg["threshold"] = binary_threshold;
      return;
    }
    cfg["num_classes"] = num_classes;
    if (!mean) cfg["target_class_ids"] = ids;
    cfg["ignore_class"] =
        ignore_class ? nlohmann::ordered_json(*ignore_class) : nlohmann::ordered_json(nullptr);
    if (!one_hot) cfg["sparse_y_true"] = sparse_y_true;
    cfg["sparse_y_pred"] = sparse_y_pred;
    cfg["axis"] = axis;
  };
  return impl;
}

std::vector<int> all_classes(int num_classes) {
  std::vector<int> ids;
  for (int i = 0; i < num_classes; ++i) ids.push_back(i);
  return ids;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

// ---- per-sample functions ----

Tensor pearson_correlation(const Tensor& y_true, const Tensor& y_pred, int axis) {
  auto [t, p] = losses::detail::same_shape("pearson_correlation", y_true, y_pred);
  TF_CHECK_ARG(t.rank() >= 1 && axis >= -t.rank() && axis < t.rank(), "pearson_correlation",
               "axis {} is out of range for inputs of shape {}", axis, t.shape().to_string());
  auto standardised = [axis](const Tensor& x) {
    const Tensor c = subtract(x, reduce_mean(x, axis, true));
    return divide(c, sqrt(reduce_mean(square(c), axis, true)));  // a constant row gives NaN
  };
  return reduce_mean(multiply(standardised(t), standardised(p)), axis);
}

Tensor concordance_correlation(const Tensor& y_true, const Tensor& y_pred, int axis) {
  auto [t, p] = losses::detail::same_shape("concordance_correlation", y_true, y_pred);
  TF_CHECK_ARG(t.rank() >= 1 && axis >= -t.rank() && axis < t.rank(), "concordance_correlation",
               "axis {} is out of range for inputs of shape {}", axis, t.shape().to_string());
  const Tensor mt = reduce_mean(t, axis, true), mp = reduce_mean(p, axis, true);
  auto var = [axis](const Tensor& x) {
    const Tensor c = subtract(x, reduce_mean(x, axis, true));
    return reduce_mean(square(c), axis, true);
  };
  // Keras 3.15 centres y_true on y_pred's mean in the covariance term; kept for equal numbers.
  const Tensor covar = multiply(subtract(t, mp), subtract(p, mp));
  const Tensor norm = add(add(var(t), var(p)), square(subtract(mt, mp)));
  const Tensor eps = constant(Tensor(losses::detail::kEpsilon), t.dtype());
  const Tensor two = constant(Tensor(2.0), t.dtype());
  return reduce_mean(divide(multiply(two, covar), add(norm, eps)), axis);
}

// ---- confusion counts ----

TruePositives::TruePositives(double thresholds, std::string name)
    : Metric(confusion_count("TruePositives", Cond::TP, {thresholds}, true, std::move(name))) {}
TruePositives::TruePositives(std::vector<double> thresholds, std::string name)
    : Metric(confusion_count("TruePositives", Cond::TP, thresholds, thresholds.size() == 1,
                             std::move(name))) {}
FalsePositives::FalsePositives(double thresholds, std::string name)
    : Metric(confusion_count("FalsePositives", Cond::FP, {thresholds}, true, std::move(name))) {}
FalsePositives::FalsePositives(std::vector<double> thresholds, std::string name)
    : Metric(confusion_count("FalsePositives", Cond::FP, thresholds, thresholds.size() == 1,
                             std::move(name))) {}
TrueNegatives::TrueNegatives(double thresholds, std::string name)
    : Metric(confusion_count("TrueNegatives", Cond::TN, {thresholds}, true, std::move(name))) {}
TrueNegatives::TrueNegatives(std::vector<double> thresholds, std::string name)
    : Metric(confusion_count("TrueNegatives", Cond::TN, thresholds, thresholds.size() == 1,
                             std::move(name))) {}
FalseNegatives::FalseNegatives(double thresholds, std::string name)
    : Metric(confusion_count("FalseNegatives", Cond::FN, {thresholds}, true, std::move(name))) {}
FalseNegatives::FalseNegatives(std::vector<double> thresholds, std::string name)
    : Metric(confusion_count("FalseNegatives", Cond::FN, thresholds, thresholds.size() == 1,
                             std::move(name))) {}

SensitivityAtSpecificity::SensitivityAtSpecificity(double specificity, int num_thresholds,
                                                   int class_id, std::string name)
    : Metric(rate_at("SensitivityAtSpecificity", "specificity", AtKind::SensitivityAtSpecificity,
                     specificity, num_thresholds, class_id, std::move(name))) {}
SpecificityAtSensitivity::SpecificityAtSensitivity(double sensitivity, int num_thresholds,
                                                   int class_id, std::string name)
    : Metric(rate_at("SpecificityAtSensitivity", "sensitivity", AtKind::SpecificityAtSensitivity,
                     sensitivity, num_thresholds, class_id, std::move(name))) {}
PrecisionAtRecall::PrecisionAtRecall(double recall, int num_thresholds, int class_id,
                                     std::string name)
    : Metric(rate_at("PrecisionAtRecall", "recall", AtKind::PrecisionAtRecall, recall,
                     num_thresholds, class_id, std::move(name))) {}
RecallAtPrecision::RecallAtPrecision(double precision, int num_thresholds, int class_id,
                                     std::string name)
    : Metric(rate_at("RecallAtPrecision", "precision", AtKind::RecallAtPrecision, precision,
                     num_thresholds, class_id, std::move(name))) {}

IoU::IoU(int num_classes, std::vector<int> target_class_ids, std::string name,
         std::optional<int> ignore_class, bool sparse_y_true, bool sparse_y_pred, int axis)
    : Metric(iou_impl("IoU", num_classes, std::move(target_class_ids), std::move(name),
                      ignore_class, sparse_y_true, sparse_y_pred, axis, -1.0)) {}
MeanIoU::MeanIoU(int num_classes, std::string name, std::optional<int> ignore_class,
                 bool sparse_y_true, bool sparse_y_pred, int axis)
    : Metric(iou_impl("MeanIoU", num_classes, all_classes(num_classes), std::move(name),
                      ignore_class, sparse_y_true, sparse_y_pred, axis, -1.0)) {}
BinaryIoU::BinaryIoU(std::vector<int> target_class_ids, double threshold, std::string name)
    : Metric(iou_impl("BinaryIoU", 2, std::move(target_class_ids), std::move(name), std::nullopt,
                      true, true, -1, threshold)) {
  TF_CHECK_ARG(std::isfinite(threshold) && threshold >= 0, "BinaryIoU",
               "threshold must be finite and >= 0, got {}", threshold);
}
OneHotIoU::OneHotIoU(int num_classes, std::vector<int> target_class_ids, std::string name,
                     std::optional<int> ignore_class, bool sparse_y_pred, int axis)
    : Metric(iou_impl("OneHotIoU", num_classes, std::move(target_class_ids), std::move(name),
                      ignore_class, false, sparse_y_pred, axis, -1.0)) {}
OneHotMeanIoU::OneHotMeanIoU(int num_classes, std::string name, std::optional<int> ignore_class,
                             bool sparse_y_pred, int axis)
    : Metric(iou_impl("OneHotMeanIoU", num_classes, all_classes(num_classes), std::move(name),
                      ignore_class, false, sparse_y_pred, axis, -1.0)) {}

// ---- means ----

KLDivergence::KLDivergence(std::string name)
    : Metric(mean_of(losses::kl_divergence, std::move(name), "")) {
  impl_->keras_class = "KLDivergence";
}
Poisson::Poisson(std::string name) : Metric(mean_of(losses::poisson, std::move(name), "")) {
  impl_->keras_class = "Poisson";
}
LogCoshError::LogCoshError(std::string name)
    : Metric(mean_of(losses::log_cosh, std::move(name), "down")) {
  impl_->keras_class = "LogCoshError";
}
MeanSquaredLogarithmicError::MeanSquaredLogarithmicError(std::string name)
    : Metric(mean_of(losses::mean_squared_logarithmic_error, std::move(name), "down")) {
  impl_->keras_class = "MeanSquaredLogarithmicError";
}
Hinge::Hinge(std::string name) : Metric(mean_of(losses::hinge, std::move(name), "down")) {
  impl_->keras_class = "Hinge";
}
SquaredHinge::SquaredHinge(std::string name)
    : Metric(mean_of(losses::squared_hinge, std::move(name), "down")) {
  impl_->keras_class = "SquaredHinge";
}
CategoricalHinge::CategoricalHinge(std::string name)
    : Metric(mean_of(losses::categorical_hinge, std::move(name), "down")) {
  impl_->keras_class = "CategoricalHinge";
}
CosineSimilarity::CosineSimilarity(std::string name, int axis)
    : Metric(mean_of(
          // The similarity itself: the loss's negation.
          [axis](const Tensor& t, const Tensor& p) {
            return negative(losses::cosine_similarity(t, p, axis));
          },
          std::move(name), "up")) {
  impl_->keras_class = "CosineSimilarity";
  // Keras 3.15 leaves axis out of this config (and so loses it); its constructor takes it.
  impl_->write_config = [axis](nlohmann::ordered_json& c) { c["axis"] = axis; };
}
PearsonCorrelation::PearsonCorrelation(std::string name, int axis)
    : Metric(mean_of(
          [axis](const Tensor& t, const Tensor& p) { return pearson_correlation(t, p, axis); },
          std::move(name), "up")) {
  impl_->keras_class = "PearsonCorrelation";
  impl_->write_config = [axis](nlohmann::ordered_json& c) { c["axis"] = axis; };
}
ConcordanceCorrelation::ConcordanceCorrelation(std::string name, int axis)
    : Metric(mean_of(
          [axis](const Tensor& t, const Tensor& p) { return concordance_correlation(t, p, axis); },
          std::move(name), "up")) {
  impl_->keras_class = "ConcordanceCorrelation";
  impl_->write_config = [axis](nlohmann::ordered_json& c) { c["axis"] = axis; };
}

Metric detail::get_extra(const std::string& id, const std::string& name) {
  const std::string s = lower(id);
  if (s == "true_positives" || s == "truepositives") return TruePositives(0.5, name);
  if (s == "false_positives" || s == "falsepositives") return FalsePositives(0.5, name);
  if (s == "true_negatives" || s == "truenegatives") return TrueNegatives(0.5, name);
  if (s == "false_negatives" || s == "falsenegatives") return FalseNegatives(0.5, name);
  if (s == "kl_divergence" || s == "kldivergence") return KLDivergence(name);
  if (s == "poisson") return Poisson(name);
  if (s == "binary_io_u" || s == "binaryiou") return BinaryIoU({0, 1}, 0.5, name);
  if (s == "log_cosh_error" || s == "logcosherror") return LogCoshError(name);
  if (s == "msle" || s == "mean_squared_logarithmic_error" || s == "meansquaredlogarithmicerror")
    return MeanSquaredLogarithmicError(name);
  if (s == "hinge") return Hinge(name);
  if (s == "squared_hinge" || s == "squaredhinge") return SquaredHinge(name);
  if (s == "categorical_hinge" || s == "categoricalhinge") return CategoricalHinge(name);
  if (s == "cosine_similarity" || s == "cosinesimilarity") return CosineSimilarity(name);
  if (s == "pearson_correlation" || s == "pearsoncorrelation") return PearsonCorrelation(name);
  if (s == "concordance_correlation" || s == "concordancecorrelation")
    return ConcordanceCorrelation(name);
  return Metric();
}

}  // namespace tapeflow::keras::metrics
