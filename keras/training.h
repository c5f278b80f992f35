// Keras' training loop: Model::compile, fit, evaluate and predict (their options and results).
// The loop runs on the calling thread; train, test and predict steps are traced tf::functions
// (input_signature with a None batch dimension, so a last partial batch does not retrace)
// unless compile's run_eagerly asks for eager steps. Under a tf::distribute strategy's scope
// fit splits every global batch over the replicas (see docs/keras_fit.md).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "data/dataset.h"
#include "keras/callbacks.h"
#include "keras/losses.h"
#include "keras/metrics.h"
#include "keras/optimizers.h"

namespace tapeflow::keras {

using History = callbacks::History;

// fit's validation_data: (x, y) or (x, y, sample_weight) tensors, or a Dataset of (x, y) or
// (x, y, sample_weight) batches.
struct ValidationData {
  ValidationData() = default;
  ValidationData(Tensor x_, Tensor y_, Tensor sample_weight_ = {})
      : x(std::move(x_)), y(std::move(y_)), sample_weight(std::move(sample_weight_)) {}
  ValidationData(data::Dataset d) : dataset(std::move(d)) {}  // NOLINT: implicit
  // A model with several inputs or outputs: one tensor per input and per output (the orders of
  // model.inputs and model.outputs), and no, one shared or one per output sample weights.
  ValidationData(std::vector<Tensor> xs_, std::vector<Tensor> ys_,
                 std::vector<Tensor> sample_weights_ = {})
      : xs(std::move(xs_)), ys(std::move(ys_)), sample_weights(std::move(sample_weights_)) {}
  bool defined() const { return x.defined() || dataset.has_value() || !xs.empty(); }
  Tensor x, y, sample_weight;
  std::vector<Tensor> xs, ys, sample_weights;
  std::optional<data::Dataset> dataset;
};

// Keras' fit arguments, the first five in API.md's order.
struct FitOptions {
  int epochs = 1;
  int batch_size = 32;  // for tensors; a Dataset is already batched
  ValidationData validation_data = {};
  std::vector<callbacks::CallbackRef> callbacks = {};
  // 0 silent, 1 progress bar (one line per epoch when not a terminal), 2 one line per epoch.
  int verbose = 1;
  double validation_split = 0.0;  // the last fraction of x and y (before shuffling)
  bool shuffle = true;            // reshuffle x and y every epoch
  int initial_epoch = 0;
  int64_t steps_per_epoch = -1;   // -1: the whole data (required for an infinite Dataset)
  int validation_freq = 1;        // validate every this many epochs
  int validation_batch_size = 0;  // 0: batch_size
  // Per-sample loss weights for tensor x and y: first dimension = the number of samples (split
  // with validation_split as x and y). A Dataset carries them as a third component instead.
  Tensor sample_weight = {};
  // A model with several outputs: one sample weight tensor per output (model.outputs' order;
  // an undefined one weighs that output's samples 1). `sample_weight` instead is shared by
  // every output, as Keras applies a single array to each output's loss.
  std::vector<Tensor> sample_weights = {};
  // Keras' class_weight: {class id: weight}; a sample's weight is its class's (1 for a class
  // not listed). The class is y itself (rank 1, or (n, 1): rounded) or argmax(y, -1) (one-hot,
  // (n, classes)). Tensors or a Dataset of (x, y) batches; not with sample weights (Keras).
  std::map<int64_t, double> class_weight = {};
};

struct EvaluateOptions {
  int batch_size = 32;
  int verbose = 1;
  int64_t steps = -1;
  std::vector<callbacks::CallbackRef> callbacks = {};
  Tensor sample_weight = {};  // for tensor x and y, as fit's
  std::vector<Tensor> sample_weights = {};  // one per output, as fit's
};

struct PredictOptions {
  int batch_size = 32;
  int verbose = 0;
  int64_t steps = -1;
  std::vector<callbacks::CallbackRef> callbacks = {};
};

// A compile() metric: a name Keras resolves ("accuracy", "mse", ...) or a Metric object.
class MetricSpec {
 public:
  MetricSpec(const char* name) : name_(name) {}         // NOLINT: implicit, as Keras' strings
  MetricSpec(std::string name) : name_(std::move(name)) {}  // NOLINT
  template <class M>
    requires std::is_base_of_v<metrics::Metric, M>
  MetricSpec(M metric) : metric_(std::move(metric)) {}  // NOLINT
  metrics::Metric resolve(const losses::Loss& loss) const;
  // As given: the name (empty for a metric object) or the object.
  const std::string& name() const { return name_; }
  const std::optional<metrics::Metric>& metric() const { return metric_; }

 private:
  std::string name_;
  std::optional<metrics::Metric> metric_;
};

// A compile() loss given by name ("mse", resolved by losses::get) or as a Loss object.
class LossSpec {
 public:
  LossSpec(const char* name) : name_(name) {}              // NOLINT: implicit, as Keras' strings
  LossSpec(std::string name) : name_(std::move(name)) {}   // NOLINT
  LossSpec(losses::Loss loss) : loss_(std::move(loss)) {}  // NOLINT
  losses::Loss resolve() const;
  // As given: the name (empty for a Loss object) or the object (undefined for a name).
  const std::string& name() const { return name_; }
  const losses::Loss& loss() const { return loss_; }

 private:
  std::string name_;
  losses::Loss loss_;
};

// A compile() argument of a model with several outputs (Keras' list or dict forms): a list in
// the order of model.outputs, or a map keyed by output name (the name of the layer that made
// the output). Empty: not given.
//   {bce, cce}                                              // a list
//   std::map<std::string, tf::keras::LossSpec>{{"priority", bce}, {"department", cce}}
template <class T>
class PerOutput {
 public:
  PerOutput() = default;
  PerOutput(std::initializer_list<T> list) : list_(list), given_(true) {}   // NOLINT: implicit
  PerOutput(std::vector<T> list) : list_(std::move(list)), given_(true) {}  // NOLINT
  PerOutput(std::map<std::string, T> by_name)                               // NOLINT
      : by_name_(std::move(by_name)), given_(true), is_map_(true) {}
  bool given() const { return given_; }
  bool is_map() const { return is_map_; }
  const std::vector<T>& list() const { return list_; }
  const std::map<std::string, T>& by_name() const { return by_name_; }

 private:
  std::vector<T> list_;
  std::map<std::string, T> by_name_;
  bool given_ = false, is_map_ = false;
};

struct CompileOptions {
  // Run the steps op by op instead of tracing them (Keras' run_eagerly; for debugging).
  bool run_eagerly = false;
  // Trace the steps with tf::function's jit_compile (Keras' jit_compile; unset is Keras'
  // "auto", tf::function's default): on GPUs, float32 elementwise chains (activations, the
  // optimizer's updates, computed into the variables) run as generated kernels and static steps
  // replay as captured CUDA graphs. CPU steps are the same either way.
  std::optional<bool> jit_compile = std::nullopt;
  // Metrics that take the data's sample weights (Keras' weighted_metrics); compile()'s
  // `metrics` ignore them, as Keras'. Names must differ from the other metrics'.
  std::vector<MetricSpec> weighted_metrics = {};
};

}  // namespace tapeflow::keras
