// The state behind a keras::metrics::Metric handle (internal to keras/metrics*.cpp). Mean, Sum
// and MeanMetricWrapper keep "total" and "count"; a Custom metric (Precision, Recall, AUC) keeps
// its own named variables, accumulated by assign_add of what `increments` returns and read back
// (summed over replicas and workers, as total and count are) by `compute`.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

#include "autograd/variable.h"
#include "keras/metrics.h"
#include "ops/factory.h"

namespace tapeflow::keras::metrics::detail {

// The state Keras builds at a metric's first update from y_pred's last dimension d: variables
// `names` of shape shape_of(d), appended to MetricImpl::state. Built once, by the first update
// (eagerly, traced or on a replica thread) or by a checkpoint's restore from the saved shapes
// (Metric::build_from_saved).
struct LazyState {
  std::vector<std::string> names;
  // The variables' shape for the last dimension d; throws for a d the metric cannot take.
  std::function<TensorShape(int64_t d)> shape_of;
  // Checks an update's inputs against `dim` (-1: not known yet) and returns their d.
  std::function<int64_t(const Tensor& y_true, const Tensor& y_pred, int64_t dim)> check;
  std::atomic<bool> built{false};
  // The d the state is for: -1 until an update fixes it (a restored scalar state, FBetaScore's
  // "micro", does not tell it).
  std::atomic<int64_t> dim{-1};
};

struct MetricImpl {
  enum class Kind { Mean, Sum, Wrapper, Custom };
  Kind kind = Kind::Mean;
  std::string name;
  // Keras' class of a built-in metric ("MeanSquaredError", "AUC"), else "" (Mean, Sum,
  // MeanMetricWrapper, the "accuracy" chosen at the first update): compile_config writes a
  // metric object of that class (keras/serialization_compile.cpp) and reads it back
  // (keras/serialization_metrics.cpp).
  std::string keras_class;
  // Adds the class's keys after "name" and "dtype" (Keras' get_config order; may replace "dtype",
  // which the IoU family writes as "int64"); none for a class whose config is only those two.
  std::function<void(nlohmann::ordered_json& config)> write_config;
  Variable total;                                          // not for Custom
  Variable count;                                          // not for Sum and Custom
  std::function<Tensor(const Tensor&, const Tensor&)> fn;  // Wrapper
  // Wrapper: applied to total / count (RootMeanSquaredError's sqrt); none: the mean itself.
  std::function<Tensor(const Tensor&)> transform;
  std::string direction;  // "up", "down" or "" (Metric::direction)
  // Custom: the state, one increment per variable from (y_true, y_pred, sample_weight), and the
  // result from the (aggregated) values in the same order.
  std::vector<std::pair<std::string, Variable>> state;
  std::function<std::vector<Tensor>(const Tensor&, const Tensor&, const Tensor&)> increments;
  std::function<Tensor(const std::vector<Tensor>&)> compute;
  // Custom metrics whose state takes its shape from the first update (Keras' lazily built
  // FBetaScore, R2Score, AUC with multi_label): update_state builds it (build_lazy) before
  // `increments`, appending the variables to `state` under `mu` (readers copy `state` under it).
  std::shared_ptr<LazyState> lazy;
  // The mirroring in force where the metric was made: a lazy build mirrors its variables so, as
  // the metrics that make their state in the constructor are.
  tapeflow::detail::MirrorSpec mirror = tapeflow::detail::mirror_spec();
  // Serialises eager updates of one metric: replica threads sharing a non-mirrored metric would
  // otherwise lose increments (each assign_add is a read, an add and a write).
  std::mutex mu;

  MetricImpl(Kind k, std::string n) : kind(k), name(std::move(n)) {
    // Made where the metric is made: mirrored under a strategy's scope.
    if (kind == Kind::Custom) return;
    total = Variable(zeros({}, float32), name + "/total", false);
    if (kind != Kind::Sum) count = Variable(zeros({}, float32), name + "/count", false);
  }
};

// The metrics of keras/metrics_more.cpp by compile() string (lower case, `name` the string as
// given): an empty handle for another string. get() falls back to it.
Metric get_more(const std::string& id, const std::string& name);
inline constexpr const char* kMoreMetricNames =
    "mae, mean_absolute_error, root_mean_squared_error, mape, mean_absolute_percentage_error, "
    "precision, recall, auc, top_k_categorical_accuracy, sparse_top_k_categorical_accuracy, "
    "binary_crossentropy, categorical_crossentropy";

// The metrics of keras/metrics_extra.cpp, likewise (get() tries it after get_more).
Metric get_extra(const std::string& id, const std::string& name);
inline constexpr const char* kExtraMetricNames =
    "true_positives, false_positives, true_negatives, false_negatives, kl_divergence, poisson, "
    "log_cosh_error, msle, mean_squared_logarithmic_error, hinge, squared_hinge, "
    "categorical_hinge, cosine_similarity, pearson_correlation, concordance_correlation, "
    "binary_io_u";

// Keras' is_evenly_distributed_thresholds (at least 3 thresholds, np.allclose to i / (n - 1)):
// such thresholds count with buckets of predictions clipped to [0, 1] (keras/metrics_extra.cpp).
bool evenly_distributed(const std::vector<double>& thresholds);

// Keras' "thresholds" config key of the confusion metrics: null (none given), a number (one)
// or a list (several). Defined in keras/metrics_extra.cpp.
void write_thresholds(nlohmann::ordered_json& config, const std::vector<double>& thresholds);

// Which predictions lie above each threshold: (thresholds, elements) for `pred` flattened, as
// Keras' update_confusion_matrix_variables: p > threshold (NaN never); with `evenly` (thresholds
// that are evenly_distributed) Keras' bucketed path, predictions clipped to [0, 1] and above
// threshold i when p (n - 1) > i, the product rounded to float32 as there.
Tensor above_thresholds(const Tensor& pred, const std::vector<float>& thresholds, bool evenly);

// A metric state variable as result() reads it: in cross-replica context the sum over its
// replica copies (TF's SyncOnRead SUM; also over the workers inside a ResultsOverWorkersScope),
// inside a replica that replica's copy; a plain variable's value. Checkpoints save this.
Tensor aggregated(const Variable& v);

// The metrics of keras/metrics_fscore.cpp, likewise (get() tries it after get_extra).
Metric get_fscore(const std::string& id, const std::string& name);
inline constexpr const char* kFScoreMetricNames = "f1_score, fbeta_score, r2_score";

}  // namespace tapeflow::keras::metrics::detail
