// Internal to keras/serialization_compile.cpp: what an optimizer, a learning-rate schedule, a
// loss and a compile() call were made with (what Keras' get_config and get_compile_config
// report), read where only their own .cpp can see it. Each function returns nullopt (or null)
// when the object is not of a class it knows. Defined beside the classes (keras/optimizers.cpp,
// keras/schedules.cpp, keras/losses.cpp, keras/training.cpp). Not installed.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "keras/losses.h"
#include "keras/metrics.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/schedules.h"

namespace tapeflow::keras::detail::compile_access {

// ---- keras/optimizers.cpp ----

// The constructor arguments of a built-in optimizer. `class_name` is Keras' ("SGD", "AdamW",
// ...); the fields a class does not have keep their defaults here.
struct OptimizerConfig {
  std::string class_name;
  std::string name;
  optimizers::OptimizerOptions options;
  std::optional<optimizers::LearningRateSchedule> schedule;  // else the learning_rate variable
  double momentum = 0.0;                                     // SGD, RMSprop
  bool nesterov = false;                                     // SGD
  double beta_1 = 0.9, beta_2 = 0.999, epsilon = 1e-7;       // Adam(W), Adamax, Nadam, Lion, Lamb
  bool amsgrad = false;                                      // Adam(W)
  double rho = 0.9;                                          // RMSprop, Adadelta
  bool centered = false;                                     // RMSprop
  double initial_accumulator_value = 0.1;                    // Adagrad, Ftrl
  double learning_rate_power = -0.5, l1 = 0.0, l2 = 0.0, l2_shrinkage = 0.0, beta = 0.0;  // Ftrl
  double beta_2_decay = -0.8, epsilon_1 = 1e-30, epsilon_2 = 1e-3;  // Adafactor
  double clip_threshold = 1.0;
  bool relative_step = true;
  optimizers::MuonOptions muon;  // Muon
  int64_t warmup_steps = 0;      // ScheduleFreeAdamW
};
// nullopt for an empty handle. A LossScaleOptimizer gives its inner optimizer's config (check
// Optimizer::is_loss_scaled first).
std::optional<OptimizerConfig> optimizer_config(const optimizers::Optimizer& optimizer);

// ---- keras/mixed_precision.cpp ----

// A LossScaleOptimizer's own arguments (Keras' LossScaleOptimizer config); nullopt for an
// optimizer that is not loss-scaled.
struct LossScaleConfig {
  std::string name;
  double initial_scale = 32768.0;
  int64_t dynamic_growth_steps = 2000;
};
std::optional<LossScaleConfig> loss_scale_config(const optimizers::Optimizer& optimizer);

// ---- keras/schedules.cpp ----

// The constructor arguments of a built-in schedule; nullopt for a custom LearningRateSchedule.
struct ScheduleConfig {
  std::string class_name;  // "ExponentialDecay", "PiecewiseConstantDecay", ...
  double initial_learning_rate = 0.0;
  int64_t decay_steps = 0;  // CosineDecayRestarts: first_decay_steps
  double decay_rate = 0.0;  // ExponentialDecay, InverseTimeDecay
  bool staircase = false;
  std::vector<int64_t> boundaries;  // PiecewiseConstantDecay
  std::vector<double> values;
  double alpha = 0.0;  // CosineDecay, CosineDecayRestarts
  std::optional<double> warmup_target;
  int64_t warmup_steps = 0;
  double end_learning_rate = 0.0001, power = 1.0;  // PolynomialDecay
  bool cycle = false;
  double t_mul = 2.0, m_mul = 1.0;  // CosineDecayRestarts
};
std::optional<ScheduleConfig> schedule_config(const optimizers::LearningRateSchedule& schedule);

// ---- keras/losses.cpp ----

// The options of SparseCategoricalCrossentropy, CategoricalCrossentropy and BinaryCrossentropy
// objects (the other built-in losses have none besides name and reduction).
struct CrossentropyConfig {
  bool from_logits = false;
  double label_smoothing = 0.0;  // not SparseCategoricalCrossentropy
};
std::optional<CrossentropyConfig> crossentropy_config(const losses::Loss& loss);

// ---- keras/training.cpp ----

// One loss or metric as compile() was given it: a name, or an object (`loss` defined, or
// `metric` set).
struct SpecRecord {
  std::string name;
  losses::Loss loss;
  std::optional<metrics::Metric> metric;
};
SpecRecord record_of(const LossSpec& spec);
SpecRecord record_of(const MetricSpec& spec);

// compile()'s arguments as given (Keras' get_compile_config echoes them).
struct CompileRecord {
  optimizers::Optimizer optimizer;  // before the automatic loss scaling of mixed_float16
  // The loss: one (single_loss) or per output (a list or a map by output name).
  bool loss_per_output = false;
  SpecRecord single_loss;
  PerOutput<SpecRecord> loss;
  PerOutput<double> loss_weights;
  // The metrics: a flat list (one output), or per output (list of lists or map).
  bool metrics_per_output = false;
  std::vector<SpecRecord> flat_metrics;
  PerOutput<std::vector<SpecRecord>> metrics;
  std::vector<SpecRecord> weighted_metrics;
  bool run_eagerly = false;
  std::optional<bool> jit_compile;  // unset: "auto"
};
// nullptr for a model that is not compiled.
const CompileRecord* compile_record(const Model& model);

}  // namespace tapeflow::keras::detail::compile_access
