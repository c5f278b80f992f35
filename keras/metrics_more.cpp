// Keras 3's regression, crossentropy, top-k and confusion-matrix metrics (keras/metrics.h, "More
// metrics"). The means are MeanMetricWrapper-style; Precision, Recall and AUC keep their own
// counts (metrics_impl.h's Custom kind), summed over replicas and workers on read.
#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "keras/losses.h"
#include "keras/metrics.h"
#include "keras/metrics_impl.h"
#include "ops/binary.h"
#include "ops/dynamic_shape.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/scatter.h"
#include "ops/sort.h"
#include "ops/unary.h"

namespace tapeflow::keras::metrics {

namespace {

using detail::MetricImpl;

std::shared_ptr<MetricImpl> mean_of(std::function<Tensor(const Tensor&, const Tensor&)> fn,
                                    std::string name, std::string direction) {
  auto impl = std::make_shared<MetricImpl>(MetricImpl::Kind::Wrapper, std::move(name));
  impl->fn = std::move(fn);
  impl->direction = std::move(direction);
  return impl;
}

// Shapes equal where both are known (a traced None dimension is -1 on both sides).
bool same_dims(const TensorShape& a, const TensorShape& b) {
  return a == b;
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

// TF's in_top_k over the last axis: every prediction of the row is finite (a NaN or an inf
// anywhere makes the row false, as TF's kernel) and fewer than k predictions are strictly
// greater than the label's (ties at the boundary count as in). Labels int64. The semantics are
// tf::math::in_top_k's (ops/sort.h), but that op is not used: it gathers the label's prediction
// with gather_nd(batch_dims=1), which needs the batch size, so a step traced with a None batch
// would be retraced for every batch size; it also takes only float32 (batch, classes).
Tensor in_top_k(const Tensor& labels, const Tensor& pred, int k) {
  const int64_t classes = pred.shape()[pred.rank() - 1];
  const Tensor ids = cast(range(int64_t{0}, classes, int64_t{1}), int64);
  const Tensor hit = equal(expand_dims(labels, -1), ids);
  const Tensor lowest = constant(Tensor(-std::numeric_limits<double>::infinity()), pred.dtype());
  // An out-of-range label hits nothing: -inf, not finite, so not in the top k.
  const Tensor target = reduce_max(where(hit, pred, lowest), -1);
  const Tensor zero = constant(Tensor(0.0), pred.dtype());
  const Tensor finite = logical_and(equal(subtract(target, target), zero),
                                    reduce_all(equal(subtract(pred, pred), zero), -1));
  const Tensor above = reduce_sum(cast(greater(pred, expand_dims(target, -1)), int32), -1);
  return cast(logical_and(finite, less(above, Tensor(k))), float32);
}

void check_k(const char* op, int k) {
  TF_CHECK_ARG(k >= 1, op, "k must be at least 1, got {}", k);
}

void check_class_axis(const char* op, const Tensor& y_pred) {
  TF_CHECK_ARG(is_floating(y_pred.dtype()) && y_pred.rank() >= 1, op,
               "y_pred must be floating point with a class axis, got {} of shape {}",
               dtype_name(y_pred.dtype()), y_pred.shape().to_string());
}

// ---- confusion matrices ----

// y_true as positives (bool), y_pred (float32) and the weights (float32, broadcastable to
// y_pred; undefined without sample weights), as Keras' update_confusion_matrix_variables
// prepares them.
struct Confusion {
  Tensor positive, pred, weight;
};

Confusion prepare(const char* op, const Tensor& y_true, const Tensor& y_pred,
                  const Tensor& sample_weight) {
  TF_CHECK_ARG(is_floating(y_pred.dtype()) || y_pred.dtype() == int32 || y_pred.dtype() == int64 ||
                   y_pred.dtype() == uint8 || y_pred.dtype() == bool_,
               op, "y_pred must be numeric, got {}", dtype_name(y_pred.dtype()));
  auto [p, t] =
      losses::detail::squeeze_or_expand_to_same_rank(cast(y_pred, float32), cast(y_true, float32));
  TF_CHECK_ARG(same_dims(p.shape(), t.shape()), op,
               "y_true and y_pred must have the same shape, got y_true {} and y_pred {}",
               y_true.shape().to_string(), y_pred.shape().to_string());
  Confusion c{not_equal(t, Tensor(0.0f)), p, Tensor()};
  if (sample_weight.defined()) {
    Tensor w = expand_dims(cast(sample_weight, float32), -1);
    if (w.rank() == t.rank() + 1) w = squeeze(w, {-1});
    TF_CHECK_ARG(broadcasts_to(w.shape(), p.shape()), op,
                 "sample_weight of shape {} does not broadcast to y_pred of shape {}",
                 sample_weight.shape().to_string(), y_pred.shape().to_string());
    c.weight = w;
  }
  return c;
}

Tensor divide_no_nan(const Tensor& a, const Tensor& b) {
  return where(equal(b, Tensor(0.0f)), zeros_like(a), divide(a, b));
}

std::shared_ptr<MetricImpl> confusion_impl(std::string name,
                                           const std::vector<std::string>& variables,
                                           const std::vector<int64_t>& shape) {
  auto impl = std::make_shared<MetricImpl>(MetricImpl::Kind::Custom, std::move(name));
  impl->direction = "up";
  for (const std::string& v : variables)
    impl->state.emplace_back(
        v, Variable(zeros(TensorShape(shape), float32), impl->name + "/" + v, false));
  return impl;
}

// Keras' _filter_top_k: predictions outside each row's k largest (along the last axis; equal
// values keep the lower index) become -1e10 (Keras' NEG_INF), above no threshold in [0, 1].
Tensor filter_top_k(const std::string& op, const Tensor& p, int k) {
  const int64_t classes = p.rank() >= 1 ? p.shape()[p.rank() - 1] : 0;
  TF_CHECK_ARG(classes >= k, op.c_str(),
               "top_k {} needs y_pred with at least {} entries along its last axis, got shape {}",
               k, k, p.shape().to_string());
  const Tensor idx = math::top_k(p, k).second;
  const Tensor keep = greater(reduce_sum(one_hot(idx, classes), -2), Tensor(0.0f));
  return where(keep, p, Tensor(-1e10f));
}

// Keras' y[..., class_id, None]: the column of one class, with a trailing 1.
Tensor class_column(const Tensor& x, int class_id) {
  std::vector<int64_t> begin(static_cast<size_t>(x.rank()), 0), size(begin.size(), -1);
  begin.back() = class_id;
  size.back() = 1;
  return slice(x, begin, size);
}

std::shared_ptr<MetricImpl> precision_or_recall(const ConfusionOptions& o, std::string name,
                                                bool precision) {
  const char* op = precision ? "Precision" : "Recall";
  for (double t : o.thresholds)
    TF_CHECK_ARG(std::isfinite(t) && t >= 0 && t <= 1, op, "thresholds must be in [0, 1], got {}",
                 t);
  TF_CHECK_ARG(o.top_k >= 0, op, "top_k must be positive (0 for none), got {}", o.top_k);
  TF_CHECK_ARG(o.class_id >= -1, op, "class_id must be >= 0 (or -1 for none), got {}", o.class_id);
  // Keras' default: 0.5, or with top_k its NEG_INF (every prediction among the top k).
  std::vector<float> th(o.thresholds.begin(), o.thresholds.end());
  if (th.empty()) th.push_back(o.top_k > 0 ? -1e10f : 0.5f);
  const auto n = static_cast<int64_t>(th.size());
  const bool scalar = n == 1;  // one threshold: scalar state and result, as before lists
  // Evenly spaced thresholds take Keras' bucketed path (detail::above_thresholds).
  const bool evenly = detail::evenly_distributed(o.thresholds);
  auto impl = confusion_impl(std::move(name),
                             {"true_positives", precision ? "false_positives" : "false_negatives"},
                             scalar ? std::vector<int64_t>{} : std::vector<int64_t>{n});
  const std::string op_name = impl->name;
  const int top_k = o.top_k, class_id = o.class_id;
  impl->increments = [th, scalar, evenly, top_k, class_id, precision, op_name](
                         const Tensor& t, const Tensor& p, const Tensor& sw) {
    Confusion c = prepare(op_name.c_str(), t, p, sw);
    Tensor pred = c.pred, positive = c.positive;
    Tensor w =
        c.weight.defined() ? tapeflow::detail::broadcast_like(c.weight, pred) : ones_like(pred);
    if (top_k > 0) pred = filter_top_k(op_name, pred, top_k);
    if (class_id >= 0) {
      TF_CHECK_ARG(pred.rank() >= 2 && class_id < pred.shape()[pred.rank() - 1], op_name.c_str(),
                   "class_id {} needs y_pred of shape (batch, classes) with more than {} "
                   "classes, got {}",
                   class_id, class_id, p.shape().to_string());
      pred = class_column(pred, class_id);
      positive = class_column(positive, class_id);
      w = class_column(w, class_id);
    }
    const TensorShape flat({1, -1});
    const Tensor above = detail::above_thresholds(pred, th, evenly);
    const Tensor pos = reshape(positive, flat), wf = reshape(w, flat);
    auto count = [&](const Tensor& hit) {
      const Tensor per = reduce_sum(where(hit, wf, Tensor(0.0f)), 1);  // (n,)
      return scalar ? reshape(per, TensorShape({})) : per;
    };
    const Tensor tp = count(logical_and(pos, above));
    const Tensor other = precision ? count(logical_and(logical_not(pos), above))
                                   : count(logical_and(pos, logical_not(above)));
    return std::vector<Tensor>{tp, other};
  };
  impl->compute = [](const std::vector<Tensor>& v) { return divide_no_nan(v[0], add(v[0], v[1])); };
  impl->keras_class = op;
  impl->write_config = [thresholds = o.thresholds, top_k, class_id](nlohmann::ordered_json& c) {
    detail::write_thresholds(c, thresholds);
    c["top_k"] = top_k > 0 ? nlohmann::ordered_json(top_k) : nlohmann::ordered_json(nullptr);
    c["class_id"] =
        class_id >= 0 ? nlohmann::ordered_json(class_id) : nlohmann::ordered_json(nullptr);
  };
  return impl;
}

enum class Curve { ROC, PR };
enum class Summation { Interpolation, Minoring, Majoring };

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// x[lo : lo + n - 1] of a vector of length n.
Tensor part(const Tensor& x, int64_t lo, int64_t n) {
  std::vector<int64_t> begin(static_cast<size_t>(x.rank()), 0), size(begin.size(), -1);
  begin[0] = lo;
  size[0] = n - 1;
  return slice(x, begin, size);
}

// Davis & Goadrich's interpolation between the PR points, in Keras' closed form: the area of
// each interval (n - 1[, labels]).
Tensor interpolate_pr_auc(const Tensor& tp, const Tensor& fp, const Tensor& fn, int64_t n) {
  const Tensor zero = Tensor(0.0f);
  const Tensor dtp = subtract(part(tp, 0, n), part(tp, 1, n));
  const Tensor p = add(tp, fp);
  const Tensor p0 = part(p, 0, n), p1 = part(p, 1, n);
  const Tensor slope = divide_no_nan(dtp, maximum(subtract(p0, p1), zero));
  const Tensor intercept = subtract(part(tp, 1, n), multiply(slope, p1));
  const Tensor ratio = where(logical_and(greater(p0, zero), greater(p1, zero)),
                             divide_no_nan(p0, maximum(p1, zero)), ones_like(p1));
  const Tensor num = multiply(slope, add(dtp, multiply(intercept, log(ratio))));
  return divide_no_nan(num, maximum(add(part(tp, 1, n), part(fn, 1, n)), zero));
}

}  // namespace

// ---- per-sample functions ----

Tensor top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, int k) {
  const char* op = "top_k_categorical_accuracy";
  check_k(op, k);
  TF_CHECK_ARG(y_true.defined() && y_pred.defined(), op, "inputs must be defined");
  check_class_axis(op, y_pred);
  TF_CHECK_ARG(y_true.shape() == y_pred.shape(), op,
               "y_true and y_pred must have the same shape, got {} and {}",
               y_true.shape().to_string(), y_pred.shape().to_string());
  return in_top_k(argmax(cast(y_true, y_pred.dtype()), -1), y_pred, k);
}

Tensor sparse_top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, int k) {
  const char* op = "sparse_top_k_categorical_accuracy";
  check_k(op, k);
  TF_CHECK_ARG(y_true.defined() && y_pred.defined(), op, "inputs must be defined");
  check_class_axis(op, y_pred);
  Tensor t = y_true;
  const bool trailing_one = t.rank() == y_pred.rank() && t.shape()[t.rank() - 1] == 1;
  if (trailing_one) t = squeeze(t, {-1});
  TensorShape lead = y_pred.shape();
  lead.pop_back();
  TF_CHECK_ARG(t.shape() == lead, op,
               "y_true of shape {} does not match y_pred of shape {}: expected labels of shape {} "
               "(or with a trailing 1)",
               y_true.shape().to_string(), y_pred.shape().to_string(), lead.to_string());
  // Keras casts the labels to int32: a fractional label truncates, a NaN matches nothing.
  if (is_floating(t.dtype())) t = where(equal(t, t), t, constant(Tensor(-1.0), t.dtype()));
  Tensor matches = in_top_k(cast(t, int64), y_pred, k);
  if (trailing_one) matches = tapeflow::detail::reshape_like(matches, y_true);
  return matches;
}

// ---- classes ----

MeanAbsoluteError::MeanAbsoluteError(std::string name)
    : Metric(mean_of(losses::mean_absolute_error, std::move(name), "down")) {
  impl_->keras_class = "MeanAbsoluteError";
}
MeanAbsolutePercentageError::MeanAbsolutePercentageError(std::string name)
    : Metric(mean_of(losses::mean_absolute_percentage_error, std::move(name), "down")) {
  impl_->keras_class = "MeanAbsolutePercentageError";
}

RootMeanSquaredError::RootMeanSquaredError(std::string name)
    : Metric(mean_of(
          [](const Tensor& y_true, const Tensor& y_pred) {
            auto [t, p] = losses::detail::same_shape("root_mean_squared_error", y_true, y_pred);
            return square(subtract(p, t));
          },
          std::move(name), "down")) {
  impl_->transform = [](const Tensor& mean) { return sqrt(mean); };
  impl_->keras_class = "RootMeanSquaredError";
}

BinaryCrossentropy::BinaryCrossentropy(std::string name, bool from_logits, double label_smoothing)
    : Metric(mean_of(
          [from_logits, label_smoothing](const Tensor& t, const Tensor& p) {
            return losses::binary_crossentropy(t, p, from_logits, label_smoothing);
          },
          std::move(name), "down")) {
  TF_CHECK_ARG(label_smoothing >= 0 && label_smoothing <= 1, "BinaryCrossentropy",
               "label_smoothing must be in [0, 1], got {}", label_smoothing);
  impl_->keras_class = "BinaryCrossentropy";
  impl_->write_config = [from_logits, label_smoothing](nlohmann::ordered_json& c) {
    c["from_logits"] = from_logits;
    c["label_smoothing"] = label_smoothing;
  };
}

CategoricalCrossentropy::CategoricalCrossentropy(std::string name, bool from_logits,
                                                 double label_smoothing)
    : Metric(mean_of(
          [from_logits, label_smoothing](const Tensor& t, const Tensor& p) {
            return losses::categorical_crossentropy(t, p, from_logits, label_smoothing);
          },
          std::move(name), "down")) {
  TF_CHECK_ARG(label_smoothing >= 0 && label_smoothing <= 1, "CategoricalCrossentropy",
               "label_smoothing must be in [0, 1], got {}", label_smoothing);
  impl_->keras_class = "CategoricalCrossentropy";
  impl_->write_config = [from_logits, label_smoothing](nlohmann::ordered_json& c) {
    c["from_logits"] = from_logits;
    c["label_smoothing"] = label_smoothing;
    c["axis"] = -1;
  };
}

TopKCategoricalAccuracy::TopKCategoricalAccuracy(int k, std::string name)
    : Metric(mean_of(
          [k](const Tensor& t, const Tensor& p) { return top_k_categorical_accuracy(t, p, k); },
          std::move(name), "up")) {
  check_k("TopKCategoricalAccuracy", k);
  impl_->keras_class = "TopKCategoricalAccuracy";
  impl_->write_config = [k](nlohmann::ordered_json& c) { c["k"] = k; };
}

SparseTopKCategoricalAccuracy::SparseTopKCategoricalAccuracy(int k, std::string name)
    : Metric(mean_of([k](const Tensor& t,
                         const Tensor& p) { return sparse_top_k_categorical_accuracy(t, p, k); },
                     std::move(name), "up")) {
  check_k("SparseTopKCategoricalAccuracy", k);
  impl_->keras_class = "SparseTopKCategoricalAccuracy";
  impl_->write_config = [k](nlohmann::ordered_json& c) { c["k"] = k; };
}

Precision::Precision(double thresholds, std::string name)
    : Metric(precision_or_recall({.thresholds = {thresholds}}, std::move(name), true)) {}
Precision::Precision(const ConfusionOptions& options, std::string name)
    : Metric(precision_or_recall(options, std::move(name), true)) {}
Recall::Recall(double thresholds, std::string name)
    : Metric(precision_or_recall({.thresholds = {thresholds}}, std::move(name), false)) {}
Recall::Recall(const ConfusionOptions& options, std::string name)
    : Metric(precision_or_recall(options, std::move(name), false)) {}

AUC::AUC(int num_thresholds, const std::string& curve, const std::string& summation_method,
         std::string name, bool from_logits)
    : AUC(AUCOptions{.num_thresholds = num_thresholds,
                     .curve = curve,
                     .summation_method = summation_method,
                     .from_logits = from_logits},
          std::move(name)) {}

AUC::AUC(const AUCOptions& o, std::string name) {
  const char* op = "AUC";
  const std::string c = lower(o.curve), s = lower(o.summation_method);
  TF_CHECK_ARG(c == "roc" || c == "pr", op, "curve must be 'ROC' or 'PR', got '{}'", o.curve);
  TF_CHECK_ARG(s == "interpolation" || s == "minoring" || s == "majoring", op,
               "summation_method must be 'interpolation', 'minoring' or 'majoring', got '{}'",
               o.summation_method);
  // Keras' thresholds: -eps, the inner ones, 1 + eps; evenly spaced ones use the buckets.
  std::vector<double> inner;
  bool evenly = true;
  if (!o.thresholds.empty()) {
    inner = o.thresholds;
    for (double t : inner)
      TF_CHECK_ARG(std::isfinite(t), op, "thresholds must be finite, got {}", t);
    std::sort(inner.begin(), inner.end());
    std::vector<double> all = {0.0};
    all.insert(all.end(), inner.begin(), inner.end());
    all.push_back(1.0);
    evenly = detail::evenly_distributed(all);
  } else {
    TF_CHECK_ARG(o.num_thresholds > 1, op, "num_thresholds must be an integer > 1, got {}",
                 o.num_thresholds);
    for (int i = 0; i < o.num_thresholds - 2; ++i)
      inner.push_back((i + 1) * 1.0 / (o.num_thresholds - 1));
  }
  std::vector<float> th = {static_cast<float>(0.0 - 1e-7)};
  for (double t : inner) th.push_back(static_cast<float>(t));
  th.push_back(static_cast<float>(1.0 + 1e-7));
  const auto n = static_cast<int64_t>(th.size());
  TF_CHECK_ARG(o.multi_label || o.num_labels == 0, op,
               "num_labels is needed only when multi_label is true, got {}", o.num_labels);
  TF_CHECK_ARG(o.num_labels >= 0, op, "num_labels must be >= 0 (0: from the first update), got {}",
               o.num_labels);
  for (double w : o.label_weights)
    TF_CHECK_ARG(std::isfinite(w) && w >= 0, op, "label_weights must be non-negative, got {}", w);
  TF_CHECK_ARG(o.label_weights.empty() || o.num_labels == 0 ||
                   static_cast<int64_t>(o.label_weights.size()) == o.num_labels,
               op, "{} label_weights for num_labels {}", o.label_weights.size(), o.num_labels);
  const Curve kind = c == "roc" ? Curve::ROC : Curve::PR;
  const Summation sum = s == "interpolation" ? Summation::Interpolation
                        : s == "minoring"    ? Summation::Minoring
                                             : Summation::Majoring;
  const std::vector<std::string> names = {"true_positives", "false_positives", "true_negatives",
                                          "false_negatives"};
  const bool multi = o.multi_label;
  impl_ = confusion_impl(std::move(name),
                         multi && o.num_labels == 0 ? std::vector<std::string>{} : names,
                         multi ? std::vector<int64_t>{n, o.num_labels} : std::vector<int64_t>{n});
  const std::string op_name = impl_->name;
  const std::vector<float> lw(o.label_weights.begin(), o.label_weights.end());
  if (multi) {
    // The (thresholds, labels) state: from num_labels, else built at the first update (or by a
    // checkpoint's restore) from y_pred's labels (metrics_impl.h's LazyState).
    auto z = std::make_shared<detail::LazyState>();
    z->names = names;
    z->shape_of = [n, lw, op_name](int64_t l) {
      TF_CHECK_ARG(lw.empty() || static_cast<int64_t>(lw.size()) == l, op_name.c_str(),
                   "{} label_weights for a state of {} labels", lw.size(), l);
      return TensorShape({n, l});
    };
    z->check = [lw, op_name](const Tensor&, const Tensor& y_pred, int64_t labels) {
      TF_CHECK_ARG(y_pred.rank() == 2 && y_pred.shape()[1] >= 0, op_name.c_str(),
                   "multi_label needs y_pred of rank 2 (batch, labels) with known labels, got {}",
                   y_pred.shape().to_string());
      const int64_t l = y_pred.shape()[1];
      TF_CHECK_ARG(lw.empty() || static_cast<int64_t>(lw.size()) == l, op_name.c_str(),
                   "{} label_weights for y_pred {} of {} labels", lw.size(),
                   y_pred.shape().to_string(), l);
      TF_CHECK_ARG(labels < 0 || labels == l, op_name.c_str(),
                   "the state has {} labels, got y_pred of shape {}", labels,
                   y_pred.shape().to_string());
      return l;
    };
    if (o.num_labels > 0) {  // made above
      z->built.store(true);
      z->dim.store(o.num_labels);
    }
    impl_->lazy = z;
  }
  impl_->increments = [th, n, evenly, multi, lw, from_logits = o.from_logits, op_name](
                          const Tensor& y_true, const Tensor& y_pred, const Tensor& sw) {
    Confusion c = prepare(op_name.c_str(), y_true, y_pred, sw);
    const Tensor p0 = from_logits ? sigmoid(c.pred) : c.pred;
    Tensor w = c.weight.defined() ? tapeflow::detail::broadcast_like(c.weight, p0) : ones_like(p0);
    if (!lw.empty() && !multi) {
      TF_CHECK_ARG(p0.rank() >= 1 && p0.shape()[p0.rank() - 1] == static_cast<int64_t>(lw.size()),
                   op_name.c_str(), "{} label_weights for y_pred of shape {}", lw.size(),
                   y_pred.shape().to_string());
      w = multiply(w, constant(lw, TensorShape({static_cast<int64_t>(lw.size())})));
    }
    // Rows: (elements,) flattened, or (batch, labels) with multi_label.
    const TensorShape rows = multi ? TensorShape({-1, p0.shape()[1]}) : TensorShape({-1});
    const Tensor pos = reshape(cast(c.positive, float32), rows);
    const Tensor wf = reshape(w, rows);
    const Tensor true_w = multiply(pos, wf);
    const Tensor false_w = multiply(subtract(Tensor(1.0f), pos), wf);
    const Tensor total_true = reduce_sum(true_w, 0), total_false = reduce_sum(false_w, 0);
    Tensor tp, fp;
    if (evenly) {
      // The bucket of each prediction clipped to [0, 1]: above thresholds 0..b,
      // max(ceil(p * (n - 1)) - 1, 0). A NaN gets -1, which unsorted_segment_sum drops: it is
      // then negative at every threshold (tn and fn below), as in Keras.
      const Tensor p = reshape(clip_by_value(p0, Tensor(0.0f), Tensor(1.0f)), rows);
      Tensor bucket =
          maximum(subtract(ceil(multiply(p, Tensor(static_cast<float>(n - 1)))), Tensor(1.0f)),
                  Tensor(0.0f));
      bucket = cast(where(equal(p, p), bucket, Tensor(-1.0f)), int32);
      const int64_t l = multi ? p.shape()[1] : 1;
      if (multi)  // one segment per (bucket, label); a NaN's stays negative
        bucket = add(multiply(bucket, Tensor(static_cast<int32_t>(l))),
                     cast(range(int64_t{0}, l, int64_t{1}), int32));
      // Counts above each threshold j: the bucket sums of buckets i >= j, a reversed
      // cumulative sum (O(n) memory, as Keras' flip(cumsum(flip))).
      auto above = [&](const Tensor& weights) {
        Tensor sums = unsorted_segment_sum(weights, bucket, n * l);
        if (multi) sums = reshape(sums, TensorShape({n, l}));
        return cumsum(sums, 0, /*exclusive=*/false, /*reverse=*/true);
      };
      tp = above(true_w);
      fp = above(false_w);
    } else {
      // Keras' general path: p > threshold, (thresholds, elements[, labels]), unclipped.
      const Tensor p = expand_dims(reshape(p0, rows), 0);
      const TensorShape th_shape = multi ? TensorShape({n, 1, 1}) : TensorShape({n, 1});
      const Tensor hit = greater(p, constant(th, th_shape));
      tp = reduce_sum(where(hit, expand_dims(true_w, 0), Tensor(0.0f)), 1);
      fp = reduce_sum(where(hit, expand_dims(false_w, 0), Tensor(0.0f)), 1);
    }
    const Tensor tn = subtract(total_false, fp);
    const Tensor fn = subtract(total_true, tp);
    return std::vector<Tensor>{tp, fp, tn, fn};
  };
  // Sums the curve's pieces (n - 1[, labels]): the area, or the labels' (weighted) mean area.
  auto total = [multi, lw](const Tensor& pieces) {
    if (!multi) return reduce_sum(pieces);
    const Tensor by_label = reduce_sum(pieces, 0);
    if (lw.empty()) return reduce_mean(by_label);
    const Tensor w = constant(lw, TensorShape({static_cast<int64_t>(lw.size())}));
    return divide_no_nan(reduce_sum(multiply(by_label, w)), reduce_sum(w));
  };
  impl_->compute = [n, kind, sum, total, op_name](const std::vector<Tensor>& v) {
    TF_CHECK_T(FailedPreconditionError, v.size() == 4, op_name.c_str(),
               "AUC '{}' with multi_label builds its state at the first update_state (from "
               "y_pred's labels): update it, or give num_labels, before reading result()",
               op_name);
    const Tensor &tp = v[0], &fp = v[1], &tn = v[2], &fn = v[3];
    if (kind == Curve::PR && sum == Summation::Interpolation)
      return total(interpolate_pr_auc(tp, fp, fn, n));
    const Tensor recall = divide_no_nan(tp, add(tp, fn));
    Tensor x, y;
    if (kind == Curve::ROC) {
      x = divide_no_nan(fp, add(fp, tn));
      y = recall;
    } else {
      x = recall;
      y = divide_no_nan(tp, add(tp, fp));
    }
    const Tensor y0 = part(y, 0, n), y1 = part(y, 1, n);
    const Tensor heights = sum == Summation::Interpolation ? multiply(add(y0, y1), Tensor(0.5f))
                           : sum == Summation::Minoring    ? minimum(y0, y1)
                                                           : maximum(y0, y1);
    return total(multiply(subtract(part(x, 0, n), part(x, 1, n)), heights));
  };
  impl_->keras_class = "AUC";
  impl_->write_config = [o, n, inner, roc = kind == Curve::ROC, s](nlohmann::ordered_json& c) {
    using J = nlohmann::ordered_json;
    c["num_thresholds"] = n;
    c["curve"] = roc ? "ROC" : "PR";
    c["summation_method"] = s;
    c["multi_label"] = o.multi_label;
    c["num_labels"] = o.num_labels > 0 ? J(o.num_labels) : J(nullptr);
    // A plain list: Keras 3.15 writes a tensor object here that its own from_config rejects.
    c["label_weights"] = o.label_weights.empty() ? J(nullptr) : J(o.label_weights);
    c["from_logits"] = o.from_logits;
    if (!o.thresholds.empty()) c["thresholds"] = inner;  // sorted, as Keras keeps them
  };
}

Metric detail::get_more(const std::string& id, const std::string& name) {
  if (id == "mae" || id == "mean_absolute_error") return MeanAbsoluteError(name);
  if (id == "root_mean_squared_error") return RootMeanSquaredError(name);
  if (id == "mape" || id == "mean_absolute_percentage_error")
    return MeanAbsolutePercentageError(name);
  if (id == "precision") return Precision(0.5, name);
  if (id == "recall") return Recall(0.5, name);
  if (id == "auc") return AUC(200, "ROC", "interpolation", name);
  if (id == "top_k_categorical_accuracy") return TopKCategoricalAccuracy(5, name);
  if (id == "sparse_top_k_categorical_accuracy") return SparseTopKCategoricalAccuracy(5, name);
  if (id == "binary_crossentropy") return BinaryCrossentropy(name);
  if (id == "categorical_crossentropy") return CategoricalCrossentropy(name);
  return Metric();
}

}  // namespace tapeflow::keras::metrics
