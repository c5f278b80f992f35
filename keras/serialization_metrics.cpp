// The config readers of the built-in metrics with options (BinaryAccuracy's threshold, AUC,
// the IoU family, ...) for compile_config in whole-model saving: Keras 3.15's keys, read
// strictly (a key tapeflow cannot honour is an error naming it). The writers sit beside the
// constructors (MetricImpl::write_config); the metrics whose config is only "name" and "dtype"
// are read in keras/serialization_compile.cpp.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keras/metrics.h"
#include "keras/serialization_compile.h"
#include "keras/serialization_internal.h"

namespace tapeflow::keras::saving::internal {

namespace {

namespace m = metrics;

// An optional integer: null (or absent) is `none`.
int optional_int(Reader& r, const std::string& key, int none) {
  const auto v = r.optional_integer(key);
  return v ? r.fits_int(key, *v) : none;
}

std::optional<std::string> optional_string(Reader& r, const std::string& key,
                                           std::optional<std::string> fallback) {
  const Config* v = r.find(key);
  if (v == nullptr) return fallback;
  if (v->is_null()) return std::nullopt;
  if (!v->is_string()) r.fail(key, "must be a string or null, got " + r.got(*v));
  return v->get<std::string>();
}

// "thresholds": null (empty: the metric's default), a number or a list of numbers.
std::vector<double> thresholds(Reader& r) {
  const Config* v = r.find("thresholds");
  if (v == nullptr || v->is_null()) return {};
  if (v->is_number()) return {v->get<double>()};
  return r.numbers("thresholds", *v);
}

// AUC's label_weights: null, a list, or the tensor object Keras 3.15 writes for them
// ({"class_name": "__tensor__", "config": {"value": [...], "dtype": ...}}).
std::vector<double> label_weights(Reader& r) {
  const Config* v = r.find("label_weights");
  if (v == nullptr || v->is_null()) return {};
  if (v->is_object() && v->value("class_name", "") == "__tensor__" && v->contains("config") &&
      (*v)["config"].is_object() && (*v)["config"].contains("value"))
    return r.numbers("label_weights", (*v)["config"]["value"]);
  return r.numbers("label_weights", *v);
}

void float_dtype(Reader& r) {
  r.expect("dtype", "float32");
}

// The IoU family keeps an integer confusion matrix (Keras' default dtype "int64").
void int_dtype(Reader& r) {
  const std::string d = r.string("dtype", "int64");
  if (d != "int64" && d != "int32")
    r.fail("dtype",
           "= \"" + d +
               "\" is not supported by tapeflow (its IoU metrics count as Keras' integer dtypes "
               "do: \"int64\" or \"int32\")");
}

m::Metric read(const std::string& cls, Reader& r) {
  auto name = [&](const char* fallback) { return r.string("name", fallback); };
  if (cls == "BinaryAccuracy") {
    std::string n = name("binary_accuracy");
    float_dtype(r);
    return m::BinaryAccuracy(std::move(n), r.number("threshold", 0.5));
  }
  if (cls == "SparseCategoricalCrossentropy") {
    std::string n = name("sparse_categorical_crossentropy");
    float_dtype(r);
    const bool logits = r.boolean("from_logits", false);
    r.expect_null("ignore_class");
    r.expect("axis", -1);
    return m::SparseCategoricalCrossentropy(std::move(n), logits);
  }
  if (cls == "BinaryCrossentropy" || cls == "CategoricalCrossentropy") {
    const bool cat = cls == "CategoricalCrossentropy";
    std::string n = name(cat ? "categorical_crossentropy" : "binary_crossentropy");
    float_dtype(r);
    const bool logits = r.boolean("from_logits", false);
    const double smoothing = r.number("label_smoothing", 0.0);
    if (cat) {
      r.expect("axis", -1);
      return m::CategoricalCrossentropy(std::move(n), logits, smoothing);
    }
    return m::BinaryCrossentropy(std::move(n), logits, smoothing);
  }
  if (cls == "TopKCategoricalAccuracy") {
    std::string n = name("top_k_categorical_accuracy");
    float_dtype(r);
    return m::TopKCategoricalAccuracy(r.int_of("k", 5), std::move(n));
  }
  if (cls == "SparseTopKCategoricalAccuracy") {
    std::string n = name("sparse_top_k_categorical_accuracy");
    float_dtype(r);
    r.expect("from_sorted_ids", false);  // later Keras versions' option
    return m::SparseTopKCategoricalAccuracy(r.int_of("k", 5), std::move(n));
  }
  if (cls == "Precision" || cls == "Recall") {
    const bool precision = cls == "Precision";
    std::string n = name(precision ? "precision" : "recall");
    float_dtype(r);
    m::ConfusionOptions o;
    o.thresholds = thresholds(r);
    o.top_k = optional_int(r, "top_k", 0);
    o.class_id = optional_int(r, "class_id", -1);
    if (precision) return m::Precision(o, std::move(n));
    return m::Recall(o, std::move(n));
  }
  if (cls == "AUC") {
    std::string n = name("auc");
    float_dtype(r);
    m::AUCOptions o;
    o.num_thresholds = r.int_of("num_thresholds", 200);
    o.curve = r.string("curve", "ROC");
    o.summation_method = r.string("summation_method", "interpolation");
    o.multi_label = r.boolean("multi_label", false);
    o.num_labels = optional_int(r, "num_labels", 0);
    o.label_weights = label_weights(r);
    o.from_logits = r.boolean("from_logits", false);
    o.thresholds = thresholds(r);  // given: num_thresholds is their count + 2
    return m::AUC(o, std::move(n));
  }
  if (cls == "TruePositives" || cls == "FalsePositives" || cls == "TrueNegatives" ||
      cls == "FalseNegatives") {
    const char* fallback = cls == "TruePositives"    ? "true_positives"
                           : cls == "FalsePositives" ? "false_positives"
                           : cls == "TrueNegatives"  ? "true_negatives"
                                                     : "false_negatives";
    std::string n = name(fallback);
    float_dtype(r);
    std::vector<double> th = thresholds(r);
    if (th.empty()) th = {0.5};
    if (cls == "TruePositives") return m::TruePositives(th, std::move(n));
    if (cls == "FalsePositives") return m::FalsePositives(th, std::move(n));
    if (cls == "TrueNegatives") return m::TrueNegatives(th, std::move(n));
    return m::FalseNegatives(th, std::move(n));
  }
  if (cls == "SensitivityAtSpecificity" || cls == "SpecificityAtSensitivity" ||
      cls == "PrecisionAtRecall" || cls == "RecallAtPrecision") {
    const bool ss = cls == "SensitivityAtSpecificity", sp = cls == "SpecificityAtSensitivity";
    const bool pr = cls == "PrecisionAtRecall";
    std::string n = name(ss   ? "sensitivity_at_specificity"
                         : sp ? "specificity_at_sensitivity"
                         : pr ? "precision_at_recall"
                              : "recall_at_precision");
    float_dtype(r);
    const int class_id = optional_int(r, "class_id", -1);
    const int num_thresholds = r.int_of("num_thresholds", 200);
    const double bound = r.number(ss   ? "specificity"
                                  : sp ? "sensitivity"
                                  : pr ? "recall"
                                       : "precision");
    if (ss) return m::SensitivityAtSpecificity(bound, num_thresholds, class_id, std::move(n));
    if (sp) return m::SpecificityAtSensitivity(bound, num_thresholds, class_id, std::move(n));
    if (pr) return m::PrecisionAtRecall(bound, num_thresholds, class_id, std::move(n));
    return m::RecallAtPrecision(bound, num_thresholds, class_id, std::move(n));
  }
  if (cls == "BinaryIoU") {
    std::string n = name("binary_io_u");
    int_dtype(r);
    const std::vector<int> ids =
        r.has("target_class_ids") ? r.int_list_of("target_class_ids") : std::vector<int>{0, 1};
    return m::BinaryIoU(ids, r.number("threshold", 0.5), std::move(n));
  }
  if (cls == "IoU" || cls == "MeanIoU" || cls == "OneHotIoU" || cls == "OneHotMeanIoU") {
    const bool one_hot = cls.rfind("OneHot", 0) == 0;
    const bool mean = cls == "MeanIoU" || cls == "OneHotMeanIoU";
    std::string n = name(cls == "IoU"         ? "io_u"
                         : cls == "MeanIoU"   ? "mean_io_u"
                         : cls == "OneHotIoU" ? "one_hot_io_u"
                                              : "one_hot_mean_io_u");
    int_dtype(r);
    const int num_classes = r.int_of("num_classes");
    std::vector<int> ids;
    if (!mean) ids = r.int_list_of("target_class_ids");
    const auto ignore = r.optional_integer("ignore_class");
    const std::optional<int> ignore_class =
        ignore ? std::optional<int>(r.fits_int("ignore_class", *ignore)) : std::nullopt;
    const bool sparse_true = one_hot ? false : r.boolean("sparse_y_true", true);
    const bool sparse_pred = r.boolean("sparse_y_pred", !one_hot);
    const int axis = r.int_of("axis", -1);
    if (cls == "IoU")
      return m::IoU(num_classes, ids, std::move(n), ignore_class, sparse_true, sparse_pred, axis);
    if (cls == "MeanIoU")
      return m::MeanIoU(num_classes, std::move(n), ignore_class, sparse_true, sparse_pred, axis);
    if (cls == "OneHotIoU")
      return m::OneHotIoU(num_classes, ids, std::move(n), ignore_class, sparse_pred, axis);
    return m::OneHotMeanIoU(num_classes, std::move(n), ignore_class, sparse_pred, axis);
  }
  if (cls == "CosineSimilarity" || cls == "PearsonCorrelation" || cls == "ConcordanceCorrelation") {
    std::string n = name(cls == "CosineSimilarity"     ? "cosine_similarity"
                         : cls == "PearsonCorrelation" ? "pearson_correlation"
                                                       : "concordance_correlation");
    float_dtype(r);
    const int axis = r.int_of("axis", -1);
    if (cls == "CosineSimilarity") return m::CosineSimilarity(std::move(n), axis);
    if (cls == "PearsonCorrelation") return m::PearsonCorrelation(std::move(n), axis);
    return m::ConcordanceCorrelation(std::move(n), axis);
  }
  if (cls == "FBetaScore" || cls == "F1Score") {
    const bool f1 = cls == "F1Score";
    std::string n = name(f1 ? "f1_score" : "fbeta_score");
    float_dtype(r);
    const auto average = optional_string(r, "average", std::nullopt);
    const double beta = f1 ? 1.0 : r.number("beta", 1.0);
    const auto threshold = r.optional_number("threshold");
    if (f1) return m::F1Score(average, threshold, std::move(n));
    return m::FBetaScore(average, beta, threshold, std::move(n));
  }
  if (cls == "R2Score") {
    std::string n = name("r2_score");
    float_dtype(r);
    const auto aggregation = optional_string(r, "class_aggregation", "uniform_average");
    return m::R2Score(aggregation, r.int_of("num_regressors", 0), std::move(n));
  }
  return m::Metric();
}

}  // namespace

const char* const kOptionMetricNames =
    "BinaryAccuracy, SparseCategoricalCrossentropy, BinaryCrossentropy, "
    "CategoricalCrossentropy, TopKCategoricalAccuracy, SparseTopKCategoricalAccuracy, Precision, "
    "Recall, AUC, TruePositives, FalsePositives, TrueNegatives, FalseNegatives, "
    "SensitivityAtSpecificity, SpecificityAtSensitivity, PrecisionAtRecall, RecallAtPrecision, "
    "IoU, MeanIoU, BinaryIoU, OneHotIoU, OneHotMeanIoU, CosineSimilarity, PearsonCorrelation, "
    "ConcordanceCorrelation, FBetaScore, F1Score, R2Score";

metrics::Metric metric_from_config(const std::string& class_name, const Config& config) {
  Reader r(class_name, config);
  metrics::Metric out = read(class_name, r);
  if (out.defined()) r.finish();
  return out;
}

}  // namespace tapeflow::keras::saving::internal
