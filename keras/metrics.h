// Metrics (tf.keras.metrics) with Keras 3's semantics: update_state accumulates, result() reads,
// reset_state() zeroes. The state lives in float32 Variables ("total", "count") made in the
// constructor, so metrics work inside traced tf::functions (their updates are graph nodes) and,
// made under a strategy's scope, are mirrored: each replica accumulates into its own copy.
// result() in cross-replica context sums the totals and the counts over every copy (TF's
// SyncOnRead SUM aggregation); update_state outside a replica writes the first copy only, so
// nothing is counted twice. A metric is a shared handle (copies share the state); concurrent
// update_state calls on one replica copy are serialised by the Variables' mutexes.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "keras/losses.h"
#include "keras/trackable.h"

namespace tapeflow::distribute {
class Strategy;
}

namespace tapeflow::keras::metrics {

namespace detail {
struct MetricImpl;
// While it lives on this thread, result() also sums the totals and counts over the workers of
// `strategy` (fit's training logs under a MultiWorkerMirroredStrategy, so that they cover every
// worker's share as TF's do). A collective: every worker must read the same metrics in the same
// order inside it.
class ResultsOverWorkersScope {
 public:
  explicit ResultsOverWorkersScope(const distribute::Strategy* strategy);
  ~ResultsOverWorkersScope();
  ResultsOverWorkersScope(const ResultsOverWorkersScope&) = delete;
  ResultsOverWorkersScope& operator=(const ResultsOverWorkersScope&) = delete;

 private:
  const distribute::Strategy* saved_;
};
}  // namespace detail

class Metric : public Trackable {
 public:
  Metric() = default;  // an empty handle
  bool defined() const { return impl_ != nullptr; }

  // (y_true, y_pred[, sample_weight]) for the metrics that compare predictions; Mean and Sum
  // take (values[, sample_weight]) (their own overload, or these two arguments here).
  void update_state(const Tensor& y_true, const Tensor& y_pred,
                    const Tensor& sample_weight = Tensor());
  // A float32 scalar.
  Tensor result() const;
  void reset_state();
  const std::string& name() const;
  // Which way the metric improves, as Keras 3's metric direction: "up" (the accuracies), "down"
  // (mean squared error, crossentropy) or "" (Mean, Sum, a MeanMetricWrapper of your own).
  // EarlyStopping and ReduceLROnPlateau read it in "auto" mode.
  const std::string& direction() const;
  std::vector<Variable> variables() const;
  // "total", "count" (Sum: "total").
  std::vector<std::pair<std::string, Variable>> tracked_variables() const override;
  const detail::MetricImpl* impl() const { return impl_.get(); }

 protected:
  explicit Metric(std::shared_ptr<detail::MetricImpl> impl) : impl_(std::move(impl)) {}
  std::shared_ptr<detail::MetricImpl> impl_;
};

// The weighted mean of the values: total += sum(values * w), count += sum(w) (or the number of
// samples: values are first averaged over every axis but the first).
class Mean : public Metric {
 public:
  explicit Mean(std::string name = "mean");
  void update_state(const Tensor& values, const Tensor& sample_weight = Tensor());
};

// The weighted sum of the values.
class Sum : public Metric {
 public:
  explicit Sum(std::string name = "sum");
  void update_state(const Tensor& values, const Tensor& sample_weight = Tensor());
};

// The mean of a per-sample function of (y_true, y_pred) (Keras' MeanMetricWrapper).
class MeanMetricWrapper : public Metric {
 public:
  MeanMetricWrapper(std::function<Tensor(const Tensor& y_true, const Tensor& y_pred)> fn,
                    std::string name);
};

// argmax(y_pred, -1) == y_true (integer labels, optionally with a trailing 1).
class SparseCategoricalAccuracy : public Metric {
 public:
  explicit SparseCategoricalAccuracy(std::string name = "sparse_categorical_accuracy");
};
// argmax(y_pred, -1) == argmax(y_true, -1) (one-hot labels).
class CategoricalAccuracy : public Metric {
 public:
  explicit CategoricalAccuracy(std::string name = "categorical_accuracy");
};
// y_pred == y_true elementwise.
class Accuracy : public Metric {
 public:
  explicit Accuracy(std::string name = "accuracy");
};
// (y_pred > threshold) == y_true.
class BinaryAccuracy : public Metric {
 public:
  explicit BinaryAccuracy(std::string name = "binary_accuracy", double threshold = 0.5);
};
// The mean sparse categorical crossentropy.
class SparseCategoricalCrossentropy : public Metric {
 public:
  explicit SparseCategoricalCrossentropy(std::string name = "sparse_categorical_crossentropy",
                                         bool from_logits = false);
};
// The mean squared error.
class MeanSquaredError : public Metric {
 public:
  explicit MeanSquaredError(std::string name = "mean_squared_error");
};

// The per-sample functions (tf.keras.metrics.sparse_categorical_accuracy etc.), float32.
Tensor sparse_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred);
Tensor categorical_accuracy(const Tensor& y_true, const Tensor& y_pred);
Tensor accuracy(const Tensor& y_true, const Tensor& y_pred);
Tensor binary_accuracy(const Tensor& y_true, const Tensor& y_pred, double threshold = 0.5);

// A metric from its compile() string: "accuracy"/"acc" resolve as Keras does with the loss:
// sparse categorical crossentropy -> SparseCategoricalAccuracy, categorical ->
// CategoricalAccuracy, binary -> BinaryAccuracy; with another loss (or none) the choice is made
// from the shapes at the first update, as Keras' compile does (y_pred's last axis 1: binary;
// y_true of lower rank or with a trailing 1: sparse; else categorical). The metric keeps the
// name given ("accuracy"). Also "sparse_categorical_accuracy", "categorical_accuracy",
// "binary_accuracy", "mse"/"mean_squared_error", "sparse_categorical_crossentropy".
Metric get(const std::string& identifier, const losses::Loss& loss = losses::Loss());

}  // namespace tapeflow::keras::metrics
