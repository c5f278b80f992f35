// Loss and metric objects with options in compile_config (keras/serialization_json.h): the
// configs Keras 3.15.1 writes (the JSON literals: keras.saving.serialize_keras_object of the
// Python objects named beside each C++ one), read back into objects that compute the same
// values, and whole-model files that keep them.
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "keras/layers.h"
#include "keras/losses.h"
#include "keras/metrics.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/serialization.h"
#include "keras/serialization_json.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace M = tapeflow::keras::metrics;
namespace L = tapeflow::keras::losses;
namespace O = tapeflow::keras::optimizers;
using K::saving::Config;
using tf::testing::check_close;
using tf::testing::TempDir;

namespace {

// Equal as JSON values, whatever the key order (Keras' IoU configs start with num_classes).
void check_same_json(const Config& got, const std::string& want) {
  const nlohmann::json g = nlohmann::json::parse(got.dump()), w = nlohmann::json::parse(want);
  INFO("got  " << g.dump());
  INFO("want " << w.dump());
  CHECK(g == w);
}

K::Sequential small_model(int outputs = 2) {
  return K::Sequential(
      {K::layers::Dense(4, {.activation = "relu", .input_shape = {3}, .name = "d1"}),
       K::layers::Dense(outputs, {.name = "d2"})},
      "small");
}

}  // namespace

TEST_CASE("serialization metrics: metric objects with options are written as Keras writes them",
          "[keras][serialization]") {
  // The Python objects, in this order (keras.metrics.X):
  //   BinaryAccuracy(name="ba", threshold=0.3),
  //   SparseCategoricalCrossentropy(name="scce", from_logits=True),
  //   BinaryCrossentropy(name="bce", from_logits=True, label_smoothing=0.1),
  //   CategoricalCrossentropy(name="cce", label_smoothing=0.2),
  //   TopKCategoricalAccuracy(k=3, name="top3"), SparseTopKCategoricalAccuracy(k=2, name="stop2"),
  //   Precision(thresholds=[0.2, 0.7], top_k=2, class_id=1, name="p"),
  //   Recall(thresholds=0.4, name="r"),
  //   AUC(num_thresholds=50, curve="PR", summation_method="minoring", name="auc_pr",
  //       from_logits=True),
  //   AUC(num_thresholds=5, multi_label=True, num_labels=3, name="auc_ml"),
  //   AUC(thresholds=[0.1, 0.5], name="auc_th"),
  //   TruePositives(thresholds=0.6, name="tp"), FalsePositives(thresholds=[0.1, 0.2], name="fp"),
  //   TrueNegatives(thresholds=0.5, name="tn"), FalseNegatives(thresholds=0.25, name="fn"),
  //   SensitivityAtSpecificity(0.8, num_thresholds=20, class_id=2, name="sas"),
  //   SpecificityAtSensitivity(0.7, num_thresholds=10, name="sps"),
  //   PrecisionAtRecall(0.6, name="par"),
  //   RecallAtPrecision(0.9, num_thresholds=30, class_id=0, name="rap"),
  //   IoU(4, [1, 3], name="iou", ignore_class=0, sparse_y_pred=False),
  //   MeanIoU(5, name="miou", axis=1), BinaryIoU(target_class_ids=[1], threshold=0.4, name="biou"),
  //   OneHotIoU(3, [0, 2], name="ohiou", sparse_y_pred=True),
  //   OneHotMeanIoU(3, name="ohmiou", ignore_class=1), CosineSimilarity(name="cos", axis=-1),
  //   PearsonCorrelation(name="pearson", axis=0), ConcordanceCorrelation(name="ccc"),
  //   FBetaScore(average="macro", beta=2.0, threshold=0.4, name="fb"),
  //   F1Score(average="weighted", name="f1"),
  //   R2Score(class_aggregation=None, num_regressors=2, name="r2")
  // Keras 3.15 leaves CosineSimilarity's axis out of its config (a loaded one has axis -1
  // whatever it was made with); tapeflow writes it ("axis": -1 below), which Keras reads.
  const std::string keras =
      R"([{"module": "keras.metrics", "class_name": "BinaryAccuracy", "config": {"name": "ba", "dtype":
"float32", "threshold": 0.3}, "registered_name": null},
{"module": "keras.metrics", "class_name": "SparseCategoricalCrossentropy", "config": {"name":
"scce", "dtype": "float32", "from_logits": true, "ignore_class": null, "axis": -1},
"registered_name": null},
{"module": "keras.metrics", "class_name": "BinaryCrossentropy", "config": {"name": "bce", "dtype":
"float32", "from_logits": true, "label_smoothing": 0.1}, "registered_name": null},
{"module": "keras.metrics", "class_name": "CategoricalCrossentropy", "config": {"name": "cce",
"dtype": "float32", "from_logits": false, "label_smoothing": 0.2, "axis": -1}, "registered_name":
null},
{"module": "keras.metrics", "class_name": "TopKCategoricalAccuracy", "config": {"name": "top3",
"dtype": "float32", "k": 3}, "registered_name": null},
{"module": "keras.metrics", "class_name": "SparseTopKCategoricalAccuracy", "config": {"name":
"stop2", "dtype": "float32", "k": 2}, "registered_name": null},
{"module": "keras.metrics", "class_name": "Precision", "config": {"name": "p", "dtype": "float32",
"thresholds": [0.2, 0.7], "top_k": 2, "class_id": 1}, "registered_name": null},
{"module": "keras.metrics", "class_name": "Recall", "config": {"name": "r", "dtype": "float32",
"thresholds": 0.4, "top_k": null, "class_id": null}, "registered_name": null},
{"module": "keras.metrics", "class_name": "AUC", "config": {"name": "auc_pr", "dtype": "float32",
"num_thresholds": 50, "curve": "PR", "summation_method": "minoring", "multi_label": false,
"num_labels": null, "label_weights": null, "from_logits": true}, "registered_name": null},
{"module": "keras.metrics", "class_name": "AUC", "config": {"name": "auc_ml", "dtype": "float32",
"num_thresholds": 5, "curve": "ROC", "summation_method": "interpolation", "multi_label": true,
"num_labels": 3, "label_weights": null, "from_logits": false}, "registered_name": null},
{"module": "keras.metrics", "class_name": "AUC", "config": {"name": "auc_th", "dtype": "float32",
"num_thresholds": 4, "curve": "ROC", "summation_method": "interpolation", "multi_label": false,
"num_labels": null, "label_weights": null, "from_logits": false, "thresholds": [0.1, 0.5]},
"registered_name": null},
{"module": "keras.metrics", "class_name": "TruePositives", "config": {"name": "tp", "dtype":
"float32", "thresholds": 0.6}, "registered_name": null},
{"module": "keras.metrics", "class_name": "FalsePositives", "config": {"name": "fp", "dtype":
"float32", "thresholds": [0.1, 0.2]}, "registered_name": null},
{"module": "keras.metrics", "class_name": "TrueNegatives", "config": {"name": "tn", "dtype":
"float32", "thresholds": 0.5}, "registered_name": null},
{"module": "keras.metrics", "class_name": "FalseNegatives", "config": {"name": "fn", "dtype":
"float32", "thresholds": 0.25}, "registered_name": null},
{"module": "keras.metrics", "class_name": "SensitivityAtSpecificity", "config": {"name": "sas",
"dtype": "float32", "class_id": 2, "num_thresholds": 20, "specificity": 0.8}, "registered_name":
null},
{"module": "keras.metrics", "class_name": "SpecificityAtSensitivity", "config": {"name": "sps",
"dtype": "float32", "class_id": null, "num_thresholds": 10, "sensitivity": 0.7},
"registered_name": null},
{"module": "keras.metrics", "class_name": "PrecisionAtRecall", "config": {"name": "par", "dtype":
"float32", "class_id": null, "num_thresholds": 200, "recall": 0.6}, "registered_name": null},
{"module": "keras.metrics", "class_name": "RecallAtPrecision", "config": {"name": "rap", "dtype":
"float32", "class_id": 0, "num_thresholds": 30, "precision": 0.9}, "registered_name": null},
{"module": "keras.metrics", "class_name": "IoU", "config": {"name": "iou", "dtype": "int64",
"num_classes": 4, "target_class_ids": [1, 3], "ignore_class": 0, "sparse_y_true": true,
"sparse_y_pred": false, "axis": -1}, "registered_name": null},
{"module": "keras.metrics", "class_name": "MeanIoU", "config": {"num_classes": 5, "name": "miou",
"dtype": "int64", "ignore_class": null, "sparse_y_true": true, "sparse_y_pred": true, "axis": 1},
"registered_name": null},
{"module": "keras.metrics", "class_name": "BinaryIoU", "config": {"target_class_ids": [1],
"threshold": 0.4, "name": "biou", "dtype": "int64"}, "registered_name": null},
{"module": "keras.metrics", "class_name": "OneHotIoU", "config": {"num_classes": 3,
"target_class_ids": [0, 2], "name": "ohiou", "dtype": "int64", "ignore_class": null,
"sparse_y_pred": true, "axis": -1}, "registered_name": null},
{"module": "keras.metrics", "class_name": "OneHotMeanIoU", "config": {"num_classes": 3, "name":
"ohmiou", "dtype": "int64", "ignore_class": 1, "sparse_y_pred": false, "axis": -1},
"registered_name": null},
{"module": "keras.metrics", "class_name": "CosineSimilarity", "config": {"name": "cos", "dtype":
"float32", "axis": -1}, "registered_name": null},
{"module": "keras.metrics", "class_name": "PearsonCorrelation", "config": {"name": "pearson",
"dtype": "float32", "axis": 0}, "registered_name": null},
{"module": "keras.metrics", "class_name": "ConcordanceCorrelation", "config": {"name": "ccc",
"dtype": "float32", "axis": -1}, "registered_name": null},
{"module": "keras.metrics", "class_name": "FBetaScore", "config": {"name": "fb", "dtype":
"float32", "average": "macro", "beta": 2.0, "threshold": 0.4}, "registered_name": null},
{"module": "keras.metrics", "class_name": "F1Score", "config": {"name": "f1", "dtype": "float32",
"average": "weighted", "threshold": null}, "registered_name": null},
{"module": "keras.metrics", "class_name": "R2Score", "config": {"name": "r2", "dtype": "float32",
"class_aggregation": null, "num_regressors": 2}, "registered_name": null}])";
  M::ConfusionOptions p_options;
  p_options.thresholds = {0.2, 0.7};
  p_options.top_k = 2;
  p_options.class_id = 1;
  M::ConfusionOptions r_options;
  r_options.thresholds = {0.4};
  M::AUCOptions ml;
  ml.num_thresholds = 5;
  ml.multi_label = true;
  ml.num_labels = 3;
  M::AUCOptions th;
  th.thresholds = {0.5, 0.1};  // sorted as Keras keeps them
  const std::vector<K::MetricSpec> specs = {M::BinaryAccuracy("ba", 0.3),
                                            M::SparseCategoricalCrossentropy("scce", true),
                                            M::BinaryCrossentropy("bce", true, 0.1),
                                            M::CategoricalCrossentropy("cce", false, 0.2),
                                            M::TopKCategoricalAccuracy(3, "top3"),
                                            M::SparseTopKCategoricalAccuracy(2, "stop2"),
                                            M::Precision(p_options, "p"),
                                            M::Recall(r_options, "r"),
                                            M::AUC(50, "PR", "minoring", "auc_pr", true),
                                            M::AUC(ml, "auc_ml"),
                                            M::AUC(th, "auc_th"),
                                            M::TruePositives(0.6, "tp"),
                                            M::FalsePositives(std::vector<double>{0.1, 0.2}, "fp"),
                                            M::TrueNegatives(0.5, "tn"),
                                            M::FalseNegatives(0.25, "fn"),
                                            M::SensitivityAtSpecificity(0.8, 20, 2, "sas"),
                                            M::SpecificityAtSensitivity(0.7, 10, -1, "sps"),
                                            M::PrecisionAtRecall(0.6, 200, -1, "par"),
                                            M::RecallAtPrecision(0.9, 30, 0, "rap"),
                                            M::IoU(4, {1, 3}, "iou", 0, true, false),
                                            M::MeanIoU(5, "miou", std::nullopt, true, true, 1),
                                            M::BinaryIoU({1}, 0.4, "biou"),
                                            M::OneHotIoU(3, {0, 2}, "ohiou", std::nullopt, true),
                                            M::OneHotMeanIoU(3, "ohmiou", 1),
                                            M::CosineSimilarity("cos", -1),
                                            M::PearsonCorrelation("pearson", 0),
                                            M::ConcordanceCorrelation("ccc"),
                                            M::FBetaScore("macro", 2.0, 0.4, "fb"),
                                            M::F1Score("weighted", std::nullopt, "f1"),
                                            M::R2Score(std::nullopt, 2, "r2")};
  K::Sequential model = small_model();
  model.compile(O::SGD(), "mse", specs);
  const Config config = K::saving::get_compile_config(model);
  check_same_json(config["metrics"], keras);

  // Read back: the same objects (written again, key for key and in order).
  K::Sequential other = small_model();
  K::saving::compile_from_config(other, config);
  CHECK(K::saving::get_compile_config(other) == config);
  CHECK(other.metrics_names() == model.metrics_names());
  // Keras' own files read too: the configs as Keras wrote them (CosineSimilarity without axis),
  // and AUC's label_weights as the tensor object Keras 3.15 writes for them.
  Config from_keras = config;
  from_keras["metrics"] = Config::parse(keras);
  from_keras["metrics"][24]["config"].erase("axis");
  from_keras["metrics"][9]["config"]["label_weights"] = Config::parse(
      R"({"class_name": "__tensor__", "config": {"value": [1.0, 2.0, 3.0], "dtype": "float32"}})");
  K::saving::compile_from_config(other, from_keras);
  const Config reread = K::saving::get_compile_config(other);
  CHECK(reread["metrics"][24]["config"]["axis"] == -1);
  CHECK(reread["metrics"][9]["config"]["label_weights"] == Config::parse("[1.0, 2.0, 3.0]"));

  // What tapeflow still cannot write: a metric of your own function.
  model.compile(
      O::SGD(), "mse",
      {M::MeanMetricWrapper(
          [](const tf::Tensor& t, const tf::Tensor& p) { return tf::subtract(t, p); }, "diff")});
  TF_REQUIRE_THROWS_CONTAINING(K::saving::get_compile_config(model), tf::UnimplementedError,
                               "metric \"diff\" is a metric object tapeflow has no config writer");
}

TEST_CASE("serialization metrics: bad metric configs name the class and the key",
          "[keras][serialization]") {
  K::Sequential model = small_model();
  model.compile(O::SGD(), "mse", {M::AUC()});
  const Config good = K::saving::get_compile_config(model);
  auto with_metric = [&](const std::string& metric) {
    Config c = good;
    c["metrics"] = Config::array();
    c["metrics"].push_back(Config::parse(metric));
    return c;
  };
  auto fails = [&](const std::string& metric, const std::vector<std::string>& parts) {
    std::vector<std::string> all = {"compile_config config key \"metrics\""};
    all.insert(all.end(), parts.begin(), parts.end());
    tf::testing::require_error([&] { K::saving::compile_from_config(model, with_metric(metric)); },
                               all);
  };
  fails(R"({"class_name": "AUC", "config": {"name": "a", "curve": "XY"}})",
        {"AUC", "curve must be 'ROC' or 'PR'"});
  fails(R"({"class_name": "AUC", "config": {"name": "a", "num_thresholds": "many"}})",
        {"AUC config key \"num_thresholds\" must be an integer"});
  fails(R"({"class_name": "Precision", "config": {"thresholds": [0.2, "x"]}})",
        {"Precision config key \"thresholds\" must be a list of numbers"});
  fails(R"({"class_name": "Recall", "config": {"name": "r", "sharpness": 2}})",
        {"Recall config key \"sharpness\" is not supported by tapeflow"});
  fails(R"({"class_name": "MeanIoU", "config": {"name": "m"}})",
        {"MeanIoU config key \"num_classes\" is required"});
  fails(R"({"class_name": "MeanIoU", "config": {"num_classes": 3, "dtype": "float32"}})",
        {"MeanIoU config key \"dtype\"", "\"int64\" or \"int32\""});
  fails(R"({"class_name": "SparseCategoricalCrossentropy", "config": {"ignore_class": 3}})",
        {"SparseCategoricalCrossentropy config key \"ignore_class\" = 3 is not supported"});
  fails(R"({"class_name": "PrecisionAtRecall", "config": {"name": "p"}})",
        {"PrecisionAtRecall config key \"recall\" is required"});
  fails(R"({"class_name": "ExactMatch", "config": {}})",
        {"metric class \"ExactMatch\" has no config reader", "AUC", "R2Score"});
}

TEST_CASE("serialization metrics: metrics read from a config compute what they computed",
          "[keras][serialization]") {
  // A binary classifier's probabilities against 0/1 labels, and the metrics with options that
  // take them; evaluate() with the compiled metrics, then with the ones compile_from_config and
  // load_model made from their configs.
  TempDir dir;
  const tf::Tensor x = tf::random::uniform({32, 3}, -1.0, 1.0, tf::float32, 21);
  const tf::Tensor y = tf::cast(
      tf::greater(tf::random::uniform({32, 1}, 0.0, 1.0, tf::float32, 22), tf::constant(0.5f)),
      tf::float32);
  K::Sequential model(
      {K::layers::Dense(4, {.activation = "relu", .input_shape = {3}, .name = "d1"}),
       K::layers::Dense(1, {.activation = "sigmoid", .name = "d2"})},
      "binary");
  M::ConfusionOptions p_options;
  p_options.thresholds = {0.45};
  M::AUCOptions pr;
  pr.num_thresholds = 25;
  pr.curve = "PR";
  pr.summation_method = "majoring";
  model.compile(O::SGD(0.1), L::BinaryFocalCrossentropy(true, 0.3, 1.5, false, 0.05),
                {M::BinaryAccuracy("ba", 0.4), M::Precision(p_options, "p"), M::Recall(0.55, "r"),
                 M::AUC(pr, "auc_pr"), M::TruePositives(0.6, "tp"),
                 M::SensitivityAtSpecificity(0.5, 20, -1, "sas"),
                 M::BinaryIoU({0, 1}, 0.45, "biou"), M::BinaryCrossentropy("bce", false, 0.1),
                 M::FBetaScore("micro", 0.5, 0.5, "fb"), M::R2Score("uniform_average", 1, "r2")});
  const std::vector<double> want = model.evaluate(x, y, {.batch_size = 8, .verbose = 0});
  REQUIRE(want.size() == 11);

  const Config config = K::saving::get_compile_config(model);
  K::saving::compile_from_config(model, config);
  const std::vector<double> again = model.evaluate(x, y, {.batch_size = 8, .verbose = 0});
  REQUIRE(again.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(again[i] == want[i]);
  }

  model.save(dir / "binary.tfmodel");
  K::Model loaded = K::models::load_model(dir / "binary.tfmodel");
  REQUIRE(loaded.compiled());
  CHECK(loaded.metrics_names() == model.metrics_names());
  CHECK(K::saving::get_compile_config(loaded) == config);
  const std::vector<double> from_file = loaded.evaluate(x, y, {.batch_size = 8, .verbose = 0});
  REQUIRE(from_file.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    CHECK(from_file[i] == want[i]);
  }
}

TEST_CASE("serialization metrics: losses with options are written as Keras writes them",
          "[keras][serialization]") {
  // keras.losses.X: Huber(delta=2.5, reduction="sum", name="hub"),
  //   CosineSimilarity(axis=1, name="cosl"),
  //   BinaryFocalCrossentropy(apply_class_balancing=True, alpha=0.3, gamma=1.5, from_logits=True,
  //                           label_smoothing=0.1, name="bfc"),
  //   CategoricalFocalCrossentropy(alpha=0.4, gamma=3.0, label_smoothing=0.05, reduction="none",
  //                                name="cfc"),
  //   Dice(axis=[1, 2], name="dice"), Tversky(alpha=0.3, beta=0.7, axis=1, name="tv"),
  //   CategoricalGeneralizedCrossEntropy(q=0.3, name="cgce"),
  //   Circle(gamma=60.0, margin=0.3, remove_diagonal=False, name="circ")
  // Keras 3.15 leaves Huber's delta and CosineSimilarity's axis out (a loaded one has delta 1
  // and axis -1); tapeflow writes them ("delta": 2.5 and "axis": 1 below), which Keras reads.
  const Config keras = Config::parse(
      R"([{"module": "keras.losses", "class_name": "Huber", "config": {"name": "hub", "reduction": "sum",
"delta": 2.5}, "registered_name": null},
{"module": "keras.losses", "class_name": "CosineSimilarity", "config": {"name": "cosl",
"reduction": "sum_over_batch_size", "axis": 1}, "registered_name": null},
{"module": "keras.losses", "class_name": "BinaryFocalCrossentropy", "config": {"name": "bfc",
"reduction": "sum_over_batch_size", "from_logits": true, "label_smoothing": 0.1, "axis": -1,
"apply_class_balancing": true, "alpha": 0.3, "gamma": 1.5}, "registered_name": null},
{"module": "keras.losses", "class_name": "CategoricalFocalCrossentropy", "config": {"name": "cfc",
"reduction": "none", "from_logits": false, "label_smoothing": 0.05, "axis": -1, "alpha": 0.4,
"gamma": 3.0}, "registered_name": null},
{"module": "keras.losses", "class_name": "Dice", "config": {"name": "dice", "reduction":
"sum_over_batch_size", "axis": [1, 2]}, "registered_name": null},
{"module": "keras.losses", "class_name": "Tversky", "config": {"name": "tv", "reduction":
"sum_over_batch_size", "alpha": 0.3, "beta": 0.7, "axis": 1}, "registered_name": null},
{"module": "keras.losses", "class_name": "CategoricalGeneralizedCrossEntropy", "config": {"name":
"cgce", "reduction": "sum_over_batch_size", "q": 0.3}, "registered_name": null},
{"module": "keras.losses", "class_name": "Circle", "config": {"name": "circ", "reduction":
"sum_over_batch_size", "gamma": 60.0, "margin": 0.3, "remove_diagonal": false}, "registered_name":
null}])");
  using R = L::Reduction;
  const std::vector<L::Loss> losses = {
      L::Huber(2.5, R::SUM, "hub"),
      L::CosineSimilarity(1, R::AUTO, "cosl"),
      L::BinaryFocalCrossentropy(true, 0.3, 1.5, true, 0.1, R::AUTO, "bfc"),
      L::CategoricalFocalCrossentropy(0.4, 3.0, false, 0.05, R::NONE, "cfc"),
      L::Dice(R::AUTO, "dice", {1, 2}),
      L::Tversky(0.3, 0.7, R::AUTO, "tv", {1}),
      L::CategoricalGeneralizedCrossEntropy(0.3, R::AUTO, "cgce"),
      L::Circle(60.0, 0.3, false, R::AUTO, "circ")};
  REQUIRE(keras.size() == losses.size());

  // Inputs each loss takes: (2, 3, 4) values in (0, 1) for the first six, integer labels for
  // the generalized crossentropy, labels and unit embeddings for the circle loss.
  const tf::Tensor t = tf::random::uniform({2, 3, 4}, 0.0, 1.0, tf::float32, 31);
  const tf::Tensor p = tf::random::uniform({2, 3, 4}, 0.05, 0.95, tf::float32, 32);
  const tf::Tensor labels = tf::constant(std::vector<int32_t>{0, 3, 1, 2, 2, 0}, {2, 3});
  const tf::Tensor ids = tf::constant(std::vector<int32_t>{0, 1, 0, 1, 2, 2}, {6});
  const tf::Tensor raw = tf::random::normal({6, 4}, 0.0, 1.0, tf::float32, 33);
  const tf::Tensor emb = tf::divide(
      raw, tf::sqrt(tf::reduce_sum(tf::square(raw), std::vector<int>{1}, /*keepdims=*/true)));
  for (size_t i = 0; i < losses.size(); ++i) {
    CAPTURE(losses[i].name());
    const Config got = L::serialize(losses[i]);
    check_same_json(got, keras[i].dump());
    const L::Loss back = L::deserialize(got);
    CHECK(L::serialize(back) == got);
    const bool cgce = losses[i].name() == "cgce", circ = losses[i].name() == "circ";
    const tf::Tensor y_true = cgce ? labels : circ ? ids : t;
    const tf::Tensor y_pred = cgce ? p : circ ? emb : p;
    check_close(back(y_true, y_pred), losses[i](y_true, y_pred), 0.0, 0.0);
  }
  // Keras' files, which lack delta and axis: Keras' defaults.
  Config huber = keras[0];
  huber["config"].erase("delta");
  CHECK(L::serialize(L::deserialize(huber))["config"]["delta"] == 1.0);
  // A bad option names the class and the key.
  Config bad = keras[5];
  bad["config"]["axis"] = "rows";
  tf::testing::require_error([&] { L::deserialize(bad); },
                             {"Tversky config key \"axis\" must be a list of integers"});
  bad = keras[2];
  bad["config"]["gamma_schedule"] = 1;
  tf::testing::require_error([&] { L::deserialize(bad); },
                             {"BinaryFocalCrossentropy config key \"gamma_schedule\""});
  // What tapeflow still cannot write: a loss made from a function.
  const L::Loss fn([](const tf::Tensor& a, const tf::Tensor& b) { return tf::subtract(a, b); },
                   "diff");
  TF_REQUIRE_THROWS_CONTAINING(L::serialize(fn), tf::UnimplementedError,
                               "loss \"diff\" (custom) has no Keras config");
}
