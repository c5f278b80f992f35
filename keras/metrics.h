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
#include <optional>
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
  // "total", "count" (Sum: "total"; Precision, Recall and AUC: their confusion counts).
  std::vector<std::pair<std::string, Variable>> tracked_variables() const override;
  const detail::MetricImpl* impl() const { return impl_.get(); }
  // Internal (tf::train::Checkpoint::restore): a metric whose state Keras builds at its first
  // update (FBetaScore, F1Score, R2Score, AUC with multi_label) and that has not built it yet
  // builds it from the shapes a checkpoint saved it with (`saved_shape` of a tracked name,
  // nullptr when the file lacks it), so that the saved values restore into it; a no-op for the
  // other metrics. `where` names the file in errors. InvalidArgumentError when the saved shapes
  // do not fit the metric (another num_thresholds, label_weights for another number of labels).
  void build_from_saved(
      const std::function<const TensorShape*(const std::string& tracked_name)>& saved_shape,
      const std::string& where) const;

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

// ---- More metrics (keras/metrics_more.cpp) ----
// Means of per-sample functions (as MeanMetricWrapper; direction "down" for the errors and
// crossentropies, "up" for the top-k accuracies).
class MeanAbsoluteError : public Metric {
 public:
  explicit MeanAbsoluteError(std::string name = "mean_absolute_error");
};
class MeanAbsolutePercentageError : public Metric {
 public:
  explicit MeanAbsolutePercentageError(std::string name = "mean_absolute_percentage_error");
};
// sqrt of the weighted mean of square(y_pred - y_true) (each element a value, averaged per
// sample as Mean does).
class RootMeanSquaredError : public Metric {
 public:
  explicit RootMeanSquaredError(std::string name = "root_mean_squared_error");
};
class BinaryCrossentropy : public Metric {
 public:
  explicit BinaryCrossentropy(std::string name = "binary_crossentropy", bool from_logits = false,
                              double label_smoothing = 0.0);
};
class CategoricalCrossentropy : public Metric {
 public:
  explicit CategoricalCrossentropy(std::string name = "categorical_crossentropy",
                                   bool from_logits = false, double label_smoothing = 0.0);
};
// Whether argmax(y_true) (one-hot labels) is among the k largest predictions; ties at the k-th
// value count as in (TF's in_top_k), a non-finite prediction for the label never does.
class TopKCategoricalAccuracy : public Metric {
 public:
  explicit TopKCategoricalAccuracy(int k = 5, std::string name = "top_k_categorical_accuracy");
};
// The same with integer labels of y_pred's shape without its class axis (or with a trailing 1).
class SparseTopKCategoricalAccuracy : public Metric {
 public:
  explicit SparseTopKCategoricalAccuracy(int k = 5,
                                         std::string name = "sparse_top_k_categorical_accuracy");
};

// Keras' Precision and Recall arguments: several thresholds, top_k, class_id.
struct ConfusionOptions {
  // Thresholds in [0, 1]: one gives a scalar state and result, several a (thresholds,) state
  // and result (one value per threshold). Empty: 0.5, or with top_k Keras' NEG_INF (-1e10: a
  // prediction is positive when it is among its row's top k).
  std::vector<double> thresholds = {};
  int top_k = 0;      // > 0: predictions outside each row's k largest (last axis) are negative
  int class_id = -1;  // >= 0: only this class (entry of y_pred's last axis, rank >= 2) counts
};

// Confusion-matrix metrics (direction "up"). y_true of y_pred's shape (a trailing 1 squeezed or
// expanded), nonzero meaning positive; y_pred a probability, positive when > threshold; every
// element counts (multi-label outputs are flattened). sample_weight: a scalar, per sample, or
// any shape that broadcasts to y_pred's. State: float32 variables "true_positives" and
// "false_positives" (Precision) or "false_negatives" (Recall); result() is
// tp / (tp + fp) (or tp / (tp + fn)), 0 when the denominator is 0. With ConfusionOptions:
// Keras' top_k (applied first) and class_id, and a list of thresholds.
class Precision : public Metric {
 public:
  explicit Precision(double thresholds = 0.5, std::string name = "precision");
  explicit Precision(const ConfusionOptions& options, std::string name = "precision");
};
class Recall : public Metric {
 public:
  explicit Recall(double thresholds = 0.5, std::string name = "recall");
  explicit Recall(const ConfusionOptions& options, std::string name = "recall");
};
// The area under the ROC (or precision-recall) curve, approximated over num_thresholds
// thresholds evenly spaced in [0, 1] (the first just below 0, the last just above 1) as Keras:
// predictions are clipped to [0, 1] (from_logits: sigmoid first), each falls in one bucket, and
// the curve's points come from the cumulative "true_positives", "false_positives",
// "true_negatives", "false_negatives" (variables of shape (num_thresholds,)). curve "ROC" or
// "PR"; summation_method "interpolation" (trapezoids; for PR Davis & Goadrich's interpolation),
// "minoring" or "majoring". A NaN prediction counts as negative at every threshold (Keras).
// Keras' AUC arguments beyond the positional ones.
struct AUCOptions {
  int num_thresholds = 200;
  std::string curve = "ROC";                       // "ROC" or "PR"
  std::string summation_method = "interpolation";  // or "minoring", "majoring"
  // Explicit thresholds (finite; sorted, with -1e-7 and 1 + 1e-7 added at the ends as Keras):
  // num_thresholds is then their count + 2. Unevenly spaced ones count p > threshold without
  // clipping p (Keras' general path); evenly spaced ones take the buckets above.
  std::vector<double> thresholds = {};
  // One curve per label (y_pred (batch, labels)), state (num_thresholds, labels), the result the
  // mean of the labels' areas (weighted by label_weights when given). num_labels 0: taken from
  // the first update (the state is built then, as Keras).
  bool multi_label = false;
  int num_labels = 0;
  // Non-negative weights per label (y_pred's last axis): with multi_label the weights of the
  // average, without it factors of every prediction's weight (Keras).
  std::vector<double> label_weights = {};
  bool from_logits = false;
};
class AUC : public Metric {
 public:
  explicit AUC(int num_thresholds = 200, const std::string& curve = "ROC",
               const std::string& summation_method = "interpolation", std::string name = "auc",
               bool from_logits = false);
  explicit AUC(const AUCOptions& options, std::string name = "auc");
};

Tensor top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, int k = 5);
Tensor sparse_top_k_categorical_accuracy(const Tensor& y_true, const Tensor& y_pred, int k = 5);

// ---- Extra metrics (keras/metrics_extra.cpp) ----
// Confusion counts at one or more thresholds, as Keras' TruePositives etc.: y_true nonzero is
// positive (a NaN label too), y_pred positive when > threshold (a NaN prediction never is);
// every element counts, sample_weight as Precision. State: a float32 "accumulator" of one entry
// per threshold. result(): a scalar for one threshold, else a vector of one count per threshold
// (such a metric cannot be a fit() log, which takes scalars). Thresholds evenly spaced over
// [0, 1] (three or more) clip predictions to [0, 1] first, as Keras' bucketed path does.
// Direction "" (none), as Keras.
class TruePositives : public Metric {
 public:
  explicit TruePositives(double thresholds = 0.5, std::string name = "true_positives");
  explicit TruePositives(std::vector<double> thresholds, std::string name = "true_positives");
};
class FalsePositives : public Metric {
 public:
  explicit FalsePositives(double thresholds = 0.5, std::string name = "false_positives");
  explicit FalsePositives(std::vector<double> thresholds, std::string name = "false_positives");
};
class TrueNegatives : public Metric {
 public:
  explicit TrueNegatives(double thresholds = 0.5, std::string name = "true_negatives");
  explicit TrueNegatives(std::vector<double> thresholds, std::string name = "true_negatives");
};
class FalseNegatives : public Metric {
 public:
  explicit FalseNegatives(double thresholds = 0.5, std::string name = "false_negatives");
  explicit FalseNegatives(std::vector<double> thresholds, std::string name = "false_negatives");
};

// The best value of one rate where another reaches a bound, over num_thresholds thresholds
// i / (num_thresholds - 1) (one threshold: 0.5), predictions clipped to [0, 1] (Keras'
// bucketed counts): the largest sensitivity where the specificity is >= `specificity`, and so
// on; 0 when no threshold reaches the bound. class_id (>= 0) keeps that column of the last axis.
// State: "true_positives", "false_positives", "true_negatives", "false_negatives" of shape
// (num_thresholds,). Direction "up"; no compile() string (Keras' need their bound).
class SensitivityAtSpecificity : public Metric {
 public:
  explicit SensitivityAtSpecificity(double specificity, int num_thresholds = 200, int class_id = -1,
                                    std::string name = "sensitivity_at_specificity");
};
class SpecificityAtSensitivity : public Metric {
 public:
  explicit SpecificityAtSensitivity(double sensitivity, int num_thresholds = 200, int class_id = -1,
                                    std::string name = "specificity_at_sensitivity");
};
class PrecisionAtRecall : public Metric {
 public:
  explicit PrecisionAtRecall(double recall, int num_thresholds = 200, int class_id = -1,
                             std::string name = "precision_at_recall");
};
class RecallAtPrecision : public Metric {
 public:
  explicit RecallAtPrecision(double precision, int num_thresholds = 200, int class_id = -1,
                             std::string name = "recall_at_precision");
};

// Intersection over union from a confusion matrix accumulated over the updates, as Keras'
// IoU family: labels (and predictions, unless given as scores: argmax over `axis`) are cast to
// integers, truncating, as Keras' default int dtype does to predictions and sample weights too;
// pairs with a label or prediction outside [0, num_classes), or a label equal to ignore_class,
// count for nothing. result(): the mean of tp / (tp + fp + fn + 1e-7) over the target classes
// whose denominator is nonzero (0 before any update). State: "total_confusion_matrix"
// (num_classes, num_classes), rows the labels. Direction "up".
class IoU : public Metric {
 public:
  IoU(int num_classes, std::vector<int> target_class_ids, std::string name = "io_u",
      std::optional<int> ignore_class = std::nullopt, bool sparse_y_true = true,
      bool sparse_y_pred = true, int axis = -1);
};
// IoU over every class.
class MeanIoU : public Metric {
 public:
  explicit MeanIoU(int num_classes, std::string name = "mean_io_u",
                   std::optional<int> ignore_class = std::nullopt, bool sparse_y_true = true,
                   bool sparse_y_pred = true, int axis = -1);
};
// Two classes: a prediction >= threshold is class 1. compile() string "binary_io_u".
class BinaryIoU : public Metric {
 public:
  explicit BinaryIoU(std::vector<int> target_class_ids = {0, 1}, double threshold = 0.5,
                     std::string name = "binary_io_u");
};
// One-hot labels and score predictions (argmax over `axis`).
class OneHotIoU : public Metric {
 public:
  OneHotIoU(int num_classes, std::vector<int> target_class_ids, std::string name = "one_hot_io_u",
            std::optional<int> ignore_class = std::nullopt, bool sparse_y_pred = false,
            int axis = -1);
};
class OneHotMeanIoU : public Metric {
 public:
  explicit OneHotMeanIoU(int num_classes, std::string name = "one_hot_mean_io_u",
                         std::optional<int> ignore_class = std::nullopt, bool sparse_y_pred = false,
                         int axis = -1);
};

// Means of the per-sample losses of the same name (keras/losses.h; MeanMetricWrapper-style:
// weighted by sample_weight, averaged over samples). Direction "down", except KLDivergence and
// Poisson ("", as Keras) and the similarities and correlations ("up").
class KLDivergence : public Metric {
 public:
  explicit KLDivergence(std::string name = "kl_divergence");
};
class Poisson : public Metric {
 public:
  explicit Poisson(std::string name = "poisson");
};
// log(cosh(y_pred - y_true)) averaged over the last axis.
class LogCoshError : public Metric {
 public:
  explicit LogCoshError(std::string name = "logcosh");
};
class MeanSquaredLogarithmicError : public Metric {
 public:
  explicit MeanSquaredLogarithmicError(std::string name = "mean_squared_logarithmic_error");
};
class Hinge : public Metric {
 public:
  explicit Hinge(std::string name = "hinge");
};
class SquaredHinge : public Metric {
 public:
  explicit SquaredHinge(std::string name = "squared_hinge");
};
class CategoricalHinge : public Metric {
 public:
  explicit CategoricalHinge(std::string name = "categorical_hinge");
};
// sum(l2_normalize(y_true) * l2_normalize(y_pred), axis): +1 for parallel vectors (the loss
// CosineSimilarity is its negation).
class CosineSimilarity : public Metric {
 public:
  explicit CosineSimilarity(std::string name = "cosine_similarity", int axis = -1);
};
// Per sample, Pearson's r along `axis` (population standard deviations; a constant row gives
// NaN, as Keras), averaged over the samples (Keras 3's streaming definition: the mean of
// per-batch-row coefficients, not a coefficient over the whole stream).
class PearsonCorrelation : public Metric {
 public:
  explicit PearsonCorrelation(std::string name = "pearson_correlation", int axis = -1);
};
// Per sample, mean(2 * (y_true - mean(y_pred)) * (y_pred - mean(y_pred)) / (var(y_true) +
// var(y_pred) + (mean(y_true) - mean(y_pred))^2 + 1e-7)) along `axis`: Keras 3.15's formula
// (its covariance centres y_true on y_pred's mean), averaged over the samples.
class ConcordanceCorrelation : public Metric {
 public:
  explicit ConcordanceCorrelation(std::string name = "concordance_correlation", int axis = -1);
};

Tensor pearson_correlation(const Tensor& y_true, const Tensor& y_pred, int axis = -1);
Tensor concordance_correlation(const Tensor& y_true, const Tensor& y_pred, int axis = -1);

// ---- F-scores and R2 (keras/metrics_fscore.cpp) ----
// Their state is built, as Keras', at the first update_state from y_pred's last dimension (the
// classes or outputs): variables made there outside any trace or tape, mirrored if the metric
// was made under a strategy's scope, so the first update may be eager, traced or on replicas.
// Before it, variables() is empty (R2Score: "num_samples" only) and result() is a
// FailedPreconditionError; a later update with another last dimension is an
// InvalidArgumentError (reset_state() zeroes the state and keeps its shape). Direction "up".

// Per class, (1 + beta^2) P R / (beta^2 P + R), P = tp / (tp + fp + 1e-7), R = tp / (tp + fn +
// 1e-7), as Keras' FBetaScore: y_true and y_pred of shape (batch, classes), labels 0 or 1; a
// prediction is 1 when > threshold, or without a threshold where it is the largest of its row
// (every one of a tie) and |y_pred| > 1e-9. sample_weight: (batch,). average: std::nullopt (a
// vector of per-class scores, which cannot be a fit() log), "micro" (counts summed over the
// classes: scalar state), "macro" (the mean of the classes' scores) or "weighted" (weighted by
// each class's weighted number of true labels). State: "true_positives", "false_positives",
// "false_negatives", "intermediate_weights" of shape (classes,) (micro: scalars).
// compile() strings "fbeta_score"/"FBetaScore" (beta 1; Keras knows only the class name).
class FBetaScore : public Metric {
 public:
  explicit FBetaScore(std::optional<std::string> average = std::nullopt, double beta = 1.0,
                      std::optional<double> threshold = std::nullopt,
                      std::string name = "fbeta_score");
};
// FBetaScore with beta 1. compile() strings "f1_score"/"F1Score" (average none: a vector).
class F1Score : public Metric {
 public:
  explicit F1Score(std::optional<std::string> average = std::nullopt,
                   std::optional<double> threshold = std::nullopt, std::string name = "f1_score");
};
// The coefficient of determination per output, 1 - sum(w (y - p)^2) / (sum(w y^2) - (sum(w y))^2
// / sum(w)) over every update (an output of constant y_true: 0, or NaN when also predicted
// exactly, as Keras), as Keras' R2Score: y_true and y_pred of shape (batch, outputs) (a rank-1
// y_true against (batch, 1) is expanded); sample_weight (batch,) or broadcasting to y_true.
// class_aggregation: std::nullopt (per output), "uniform_average" or
// "variance_weighted_average" (weighted by each output's total sum of squares). num_regressors
// p > 0 gives the adjusted R2, 1 - (1 - R2)(n - 1) / (n - p - 1), with n the number of
// elements of y_true seen (Keras counts batch * outputs); when p >= n - 1 it is the plain R2
// and a warning is logged (once per metric; Keras warns at every result()). State:
// "num_samples" (made in the constructor), "squared_sum", "sum", "residual", "count" of shape
// (outputs,). compile() strings "r2_score"/"R2Score".
class R2Score : public Metric {
 public:
  explicit R2Score(std::optional<std::string> class_aggregation = "uniform_average",
                   int num_regressors = 0, std::string name = "r2_score");
};

// A metric from its compile() string: "accuracy"/"acc" resolve as Keras does with the loss:
// sparse categorical crossentropy -> SparseCategoricalAccuracy, categorical ->
// CategoricalAccuracy, binary -> BinaryAccuracy; with another loss (or none) the choice is made
// from the shapes at the first update, as Keras' compile does (y_pred's last axis 1: binary;
// y_true of lower rank or with a trailing 1: sparse; else categorical). The metric keeps the
// name given ("accuracy"). Also "sparse_categorical_accuracy", "categorical_accuracy",
// "binary_accuracy", "mse"/"mean_squared_error", "sparse_categorical_crossentropy", and
// "mae"/"mean_absolute_error", "root_mean_squared_error", "mape"/
// "mean_absolute_percentage_error", "precision", "recall", "auc", "top_k_categorical_accuracy",
// "sparse_top_k_categorical_accuracy", "binary_crossentropy", "categorical_crossentropy" (Keras
// 3 has no "rmse"), and the strings of detail::kExtraMetricNames (snake case or the class name
// in any case: "true_positives", "TruePositives") and of detail::kFScoreMetricNames. Metrics
// from strings keep the string as their name, as compile() logs them.
Metric get(const std::string& identifier, const losses::Loss& loss = losses::Loss());

}  // namespace tapeflow::keras::metrics
