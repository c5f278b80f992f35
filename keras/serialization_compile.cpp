// The compile state in whole-model saving (Keras 3.15): optimizer, schedule and loss configs,
// model.get_compile_config / compile_from_config, and the optimizer's variables saved beside
// the weights ("optimizer/vars/<i>"). See keras/serialization_json.h and docs/keras.md,
// "Saving whole models".
#include "keras/serialization_compile.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/device.h"
#include "core/log.h"
#include "jit/function.h"
#include "keras/compile_access.h"
#include "keras/loss_config.h"
#include "keras/metrics_impl.h"
#include "keras/mixed_precision.h"
#include "keras/safetensors.h"
#include "keras/serialization_internal.h"
#include "keras/serialization_json.h"

namespace tapeflow::keras {

namespace ca = detail::compile_access;
using saving::Config;
using saving::internal::Reader;

namespace {

// {"module": module, "class_name": cls, "config": config, "registered_name": null}
Config keras_object(const char* module, const std::string& cls, Config config) {
  return Config{{"module", module},
                {"class_name", cls},
                {"config", std::move(config)},
                {"registered_name", nullptr}};
}

// The class name and config of a serialized object of `module` (`what` names it in errors).
std::pair<std::string, Config> parts(const Config& object, const char* module, const char* what) {
  TF_CHECK_ARG(
      object.is_object() && object.contains("class_name") && object["class_name"].is_string(),
      "deserialize", "expected a Keras {} object {{\"class_name\": ..., \"config\": ...}}, got {}",
      what, object.dump().substr(0, 80));
  const std::string cls = object["class_name"].get<std::string>();
  for (auto it = object.begin(); it != object.end(); ++it) {
    const std::string& k = it.key();
    const Config& v = it.value();
    const bool ok = k == "class_name" || k == "config" ||
                    (k == "module" && (v.is_null() || v == module)) ||
                    (k == "registered_name" && (v.is_null() || v == cls));
    TF_CHECK_ARG(ok, "deserialize", "{} object key \"{}\" = {} is not supported by tapeflow", cls,
                 k, v.dump().substr(0, 80));
  }
  Config config = object.contains("config") ? object["config"] : Config::object();
  if (config.is_null()) config = Config::object();
  TF_CHECK_ARG(config.is_object(), "deserialize", "the config of {} {} is not an object: {}", what,
               cls, config.dump().substr(0, 80));
  return {cls, config};
}

Config optional_json(const std::optional<double>& v) {
  return v ? Config(*v) : Config(nullptr);
}
Config optional_json(const std::optional<int64_t>& v) {
  return v ? Config(*v) : Config(nullptr);
}

// The float32 value Keras reads a float into (its learning_rate variable holds a float32).
double as_float32(double v) {
  return static_cast<double>(static_cast<float>(v));
}

}  // namespace

// ---- schedules ----

namespace optimizers::schedules {

Config get_config(const LearningRateSchedule& schedule) {
  const auto c = ca::schedule_config(schedule);
  TF_CHECK_T(UnimplementedError, c.has_value(), "get_config",
             "the learning-rate schedule \"{}\" is made from a function: it has no Keras config",
             schedule.name());
  const std::string& k = c->class_name;
  if (k == "ExponentialDecay" || k == "InverseTimeDecay")
    return Config{{"initial_learning_rate", c->initial_learning_rate},
                  {"decay_steps", c->decay_steps},
                  {"decay_rate", c->decay_rate},
                  {"staircase", c->staircase},
                  {"name", k}};
  if (k == "PiecewiseConstantDecay")
    return Config{
        {"boundaries", c->boundaries}, {"values", c->values}, {"name", "PiecewiseConstant"}};
  if (k == "CosineDecay")
    return Config{{"initial_learning_rate", c->initial_learning_rate},
                  {"decay_steps", c->decay_steps},
                  {"alpha", c->alpha},
                  {"name", "CosineDecay"},
                  {"warmup_target", optional_json(c->warmup_target)},
                  {"warmup_steps", c->warmup_steps}};
  if (k == "PolynomialDecay")
    return Config{{"initial_learning_rate", c->initial_learning_rate},
                  {"decay_steps", c->decay_steps},
                  {"end_learning_rate", c->end_learning_rate},
                  {"power", c->power},
                  {"cycle", c->cycle},
                  {"name", "PolynomialDecay"}};
  // CosineDecayRestarts
  return Config{{"initial_learning_rate", c->initial_learning_rate},
                {"first_decay_steps", c->decay_steps},
                {"t_mul", c->t_mul},
                {"m_mul", c->m_mul},
                {"alpha", c->alpha},
                {"name", "SGDRDecay"}};
}

LearningRateSchedule from_config(const std::string& class_name, const Config& config) {
  Reader r(class_name, config);
  // Keras uses the name only as a name scope: any string (or null) reads.
  if (const Config* n = r.find("name"); n != nullptr && !n->is_null() && !n->is_string())
    r.fail("name", "must be a string, got " + r.got(*n));
  auto number_list = [&](const std::string& key) { return r.numbers(key, r.require(key)); };
  std::optional<LearningRateSchedule> out;
  if (class_name == "ExponentialDecay") {
    const double initial = r.number("initial_learning_rate");
    const int64_t steps = r.integer("decay_steps");
    const double rate = r.number("decay_rate");
    out = ExponentialDecay(initial, steps, rate, r.boolean("staircase", false));
  } else if (class_name == "InverseTimeDecay") {
    const double initial = r.number("initial_learning_rate");
    const int64_t steps = r.integer("decay_steps");
    const double rate = r.number("decay_rate");
    out = InverseTimeDecay(initial, steps, rate, r.boolean("staircase", false));
  } else if (class_name == "PiecewiseConstantDecay") {
    std::vector<int64_t> boundaries = r.int_list("boundaries");
    out = PiecewiseConstantDecay(std::move(boundaries), number_list("values"));
  } else if (class_name == "CosineDecay") {
    const double initial = r.number("initial_learning_rate");
    const int64_t steps = r.integer("decay_steps");
    const double alpha = r.number("alpha", 0.0);
    const std::optional<double> target = r.optional_number("warmup_target");
    out = CosineDecay(initial, steps, alpha, target, r.integer("warmup_steps", 0));
  } else if (class_name == "PolynomialDecay") {
    const double initial = r.number("initial_learning_rate");
    const int64_t steps = r.integer("decay_steps");
    const double end = r.number("end_learning_rate", 0.0001);
    const double power = r.number("power", 1.0);
    out = PolynomialDecay(initial, steps, end, power, r.boolean("cycle", false));
  } else if (class_name == "CosineDecayRestarts") {
    const double initial = r.number("initial_learning_rate");
    const int64_t steps = r.integer("first_decay_steps");
    const double t_mul = r.number("t_mul", 2.0);
    const double m_mul = r.number("m_mul", 1.0);
    out = CosineDecayRestarts(initial, steps, t_mul, m_mul, r.number("alpha", 0.0));
  } else {
    TF_THROW(InvalidArgumentError, "from_config",
             "unknown learning-rate schedule class \"{}\" (tapeflow has ExponentialDecay, "
             "PiecewiseConstantDecay, CosineDecay, InverseTimeDecay, PolynomialDecay, "
             "CosineDecayRestarts)",
             class_name);
  }
  r.finish();
  return *out;
}

Config serialize(const LearningRateSchedule& schedule) {
  const auto c = ca::schedule_config(schedule);
  Config config = get_config(schedule);
  return keras_object("keras.optimizers.schedules", c->class_name, std::move(config));
}

LearningRateSchedule deserialize(const Config& object) {
  auto [cls, config] = parts(object, "keras.optimizers.schedules", "learning-rate schedule");
  return from_config(cls, config);
}

}  // namespace optimizers::schedules

// ---- optimizers ----

namespace optimizers {

namespace {
constexpr const char* kOptimizerClasses[] = {"LossScaleOptimizer",
                                             "SGD",
                                             "Adam",
                                             "AdamW",
                                             "RMSprop",
                                             "Adagrad",
                                             "Adadelta",
                                             "Adamax",
                                             "Nadam",
                                             "Ftrl",
                                             "Lion",
                                             "Lamb",
                                             "Adafactor",
                                             "Muon",
                                             "ScheduleFreeAdamW"};

// Keras' class name for any spelling Keras' deserialize accepts ("adam", "Adam").
std::optional<std::string> optimizer_class(const std::string& name) {
  for (const char* c : kOptimizerClasses)
    if (saving::internal::lower(c) == saving::internal::lower(name)) return std::string(c);
  return std::nullopt;
}
}  // namespace

Config get_config(const Optimizer& optimizer) {
  TF_CHECK_ARG(optimizer.defined(), "get_config", "the optimizer is an empty handle");
  if (const auto ls = ca::loss_scale_config(optimizer))
    return Config{{"name", ls->name},
                  {"inner_optimizer", serialize(optimizer.without_loss_scale())},
                  {"initial_scale", ls->initial_scale},
                  {"dynamic_growth_steps", ls->dynamic_growth_steps}};
  const auto c = ca::optimizer_config(optimizer);
  TF_CHECK_T(UnimplementedError, c.has_value(), "get_config",
             "optimizer \"{}\" is not one of tapeflow's built-in classes", optimizer.name());
  const OptimizerOptions& o = c->options;
  TF_CHECK_T(UnimplementedError, o.exclude_from_weight_decay.empty(), "get_config",
             "{} optimizer \"{}\": exclude_from_weight_decay has no key in Keras' config",
             c->class_name, c->name);
  Config lr = c->schedule
                  ? schedules::serialize(*c->schedule)
                  : Config(as_float32(optimizer.without_loss_scale().current_learning_rate()));
  const bool muon = c->class_name == "Muon";
  Config out{{"name", c->name},
             {"learning_rate", std::move(lr)},
             {"weight_decay", optional_json(muon ? c->muon.weight_decay : o.weight_decay)},
             {"clipnorm", optional_json(o.clipnorm)},
             {"global_clipnorm", optional_json(o.global_clipnorm)},
             {"clipvalue", optional_json(o.clipvalue)},
             {"use_ema", o.use_ema},
             {"ema_momentum", o.ema_momentum},
             {"ema_overwrite_frequency", optional_json(o.ema_overwrite_frequency)},
             {"loss_scale_factor", optional_json(o.loss_scale_factor)},
             {"gradient_accumulation_steps", optional_json(o.gradient_accumulation_steps)}};
  const std::string& k = c->class_name;
  if (k == "SGD") {
    out["momentum"] = c->momentum;
    out["nesterov"] = c->nesterov;
  } else if (k == "Adam" || k == "AdamW") {
    out["beta_1"] = c->beta_1;
    out["beta_2"] = c->beta_2;
    out["epsilon"] = c->epsilon;
    out["amsgrad"] = c->amsgrad;
  } else if (k == "RMSprop") {
    out["rho"] = c->rho;
    out["momentum"] = c->momentum;
    out["epsilon"] = c->epsilon;
    out["centered"] = c->centered;
  } else if (k == "Adagrad") {
    out["initial_accumulator_value"] = c->initial_accumulator_value;
    out["epsilon"] = c->epsilon;
  } else if (k == "Adadelta") {
    out["rho"] = c->rho;
    out["epsilon"] = c->epsilon;
  } else if (k == "Adamax" || k == "Nadam") {
    out["beta_1"] = c->beta_1;
    out["beta_2"] = c->beta_2;
    out["epsilon"] = c->epsilon;
  } else if (k == "Ftrl") {
    out["learning_rate_power"] = c->learning_rate_power;
    out["initial_accumulator_value"] = c->initial_accumulator_value;
    out["l1_regularization_strength"] = c->l1;
    out["l2_regularization_strength"] = c->l2;
    out["l2_shrinkage_regularization_strength"] = c->l2_shrinkage;
    out["beta"] = c->beta;
  } else if (k == "Lamb") {
    out["beta_1"] = c->beta_1;
    out["beta_2"] = c->beta_2;
    out["epsilon"] = c->epsilon;
  } else if (k == "Adafactor") {
    out["beta_2_decay"] = c->beta_2_decay;
    out["epsilon_1"] = c->epsilon_1;
    out["epsilon_2"] = c->epsilon_2;
    out["clip_threshold"] = c->clip_threshold;
    out["relative_step"] = c->relative_step;
  } else if (k == "ScheduleFreeAdamW") {
    out["beta_1"] = c->beta_1;
    out["beta_2"] = c->beta_2;
    out["epsilon"] = c->epsilon;
    out["warmup_steps"] = c->warmup_steps;
  } else if (muon) {
    const optimizers::MuonOptions& m = c->muon;
    // Keras writes its arguments as given: the default adam_lr_ratio is the integer 1.
    auto number = [](double v) {
      return v == std::floor(v) && std::abs(v) < 1e15 ? Config(static_cast<int64_t>(v)) : Config(v);
    };
    out["adam_beta_1"] = m.adam_beta_1;
    out["adam_beta_2"] = m.adam_beta_2;
    out["epsilon"] = m.epsilon;
    out["exclude_layers"] = m.exclude_layers;
    out["muon_a"] = m.muon_a;
    out["muon_b"] = m.muon_b;
    out["muon_c"] = m.muon_c;
    out["adam_lr_ratio"] = number(m.adam_lr_ratio);
    out["momentum"] = m.momentum;
    out["ns_steps"] = m.ns_steps;
    out["nesterov"] = m.nesterov;
    out["exclude_embeddings"] = m.exclude_embeddings;
    out["adam_weight_decay"] = optional_json(m.adam_weight_decay);
    out["rms_rate"] = optional_json(m.rms_rate);
  } else {  // Lion
    out["beta_1"] = c->beta_1;
    out["beta_2"] = c->beta_2;
  }
  return out;
}

Optimizer from_config(const std::string& class_name, const Config& config) {
  const auto known = optimizer_class(class_name);
  TF_CHECK_ARG(known.has_value() && *known == class_name, "from_config",
               "unknown optimizer class \"{}\" (tapeflow has SGD, Adam, AdamW, RMSprop, Adagrad, "
               "Adadelta, Adamax, Nadam, Ftrl, Lion, Lamb, Adafactor, Muon, ScheduleFreeAdamW, "
               "LossScaleOptimizer)",
               class_name);
  const std::string& k = class_name;
  Reader r(k, config);
  if (k == "LossScaleOptimizer") {
    mixed_precision::LossScaleOptions o;
    o.name = r.string("name", "loss_scale_optimizer");
    Optimizer inner;
    try {
      inner = deserialize(r.require("inner_optimizer"));
    } catch (const InvalidArgumentError& e) {
      r.fail("inner_optimizer", std::string("does not load: ") + e.what());
    }
    o.initial_scale = r.number("initial_scale", 32768.0);
    o.dynamic_growth_steps = r.integer("dynamic_growth_steps", 2000);
    r.finish();
    return mixed_precision::LossScaleOptimizer(inner, o);
  }
  // The keys every optimizer has, in Keras' order.
  OptimizerOptions o;
  o.name = r.string("name", "");
  const Config* lr_value = r.find("learning_rate");
  std::optional<LearningRate> lr;
  if (lr_value != nullptr && !lr_value->is_null()) {
    if (lr_value->is_number()) {
      lr = LearningRate(lr_value->get<double>());
    } else if (lr_value->is_object()) {
      try {
        lr = LearningRate(schedules::deserialize(*lr_value));
      } catch (const InvalidArgumentError& e) {
        r.fail("learning_rate", std::string("is a schedule tapeflow cannot read: ") + e.what());
      }
    } else {
      r.fail("learning_rate", "must be a number or a schedule object, got " + r.got(*lr_value));
    }
  }
  o.weight_decay = r.optional_number("weight_decay");
  o.clipnorm = r.optional_number("clipnorm");
  o.global_clipnorm = r.optional_number("global_clipnorm");
  o.clipvalue = r.optional_number("clipvalue");
  o.use_ema = r.boolean("use_ema", false);
  o.ema_momentum = r.number("ema_momentum", 0.99);
  o.ema_overwrite_frequency = r.optional_integer("ema_overwrite_frequency");
  o.loss_scale_factor = r.optional_number("loss_scale_factor");
  o.gradient_accumulation_steps = r.optional_integer("gradient_accumulation_steps");
  const double keras_default_lr = k == "SGD" ? 0.01 : 0.001;
  const LearningRate rate = lr ? *lr : LearningRate(keras_default_lr);
  std::optional<Optimizer> out;
  if (k == "SGD") {
    const double momentum = r.number("momentum", 0.0);
    out = SGD(rate, momentum, r.boolean("nesterov", false), o);
  } else if (k == "Adam" || k == "AdamW") {
    const double b1 = r.number("beta_1", 0.9), b2 = r.number("beta_2", 0.999);
    const double eps = r.number("epsilon", 1e-7);
    const bool ams = r.boolean("amsgrad", false);
    if (k == "Adam") {
      out = Adam(rate, b1, b2, eps, ams, o);
    } else {
      // AdamW takes weight_decay as its own argument (Keras' default 0.004 when absent).
      const double wd = o.weight_decay.value_or(0.004);
      o.weight_decay.reset();
      out = AdamW(rate, wd, b1, b2, eps, ams, o);
    }
  } else if (k == "RMSprop") {
    const double rho = r.number("rho", 0.9), momentum = r.number("momentum", 0.0);
    const double eps = r.number("epsilon", 1e-7);
    out = RMSprop(rate, rho, momentum, eps, r.boolean("centered", false), o);
  } else if (k == "Adagrad") {
    const double init = r.number("initial_accumulator_value", 0.1);
    out = Adagrad(rate, init, r.number("epsilon", 1e-7), o);
  } else if (k == "Adadelta") {
    const double rho = r.number("rho", 0.95);
    out = Adadelta(rate, rho, r.number("epsilon", 1e-7), o);
  } else if (k == "Adamax" || k == "Nadam") {
    const double b1 = r.number("beta_1", 0.9), b2 = r.number("beta_2", 0.999);
    const double eps = r.number("epsilon", 1e-7);
    out = k == "Adamax" ? Optimizer(Adamax(rate, b1, b2, eps, o))
                        : Optimizer(Nadam(rate, b1, b2, eps, o));
  } else if (k == "Ftrl") {
    const double power = r.number("learning_rate_power", -0.5);
    const double init = r.number("initial_accumulator_value", 0.1);
    const double l1 = r.number("l1_regularization_strength", 0.0);
    const double l2 = r.number("l2_regularization_strength", 0.0);
    const double shrink = r.number("l2_shrinkage_regularization_strength", 0.0);
    out = Ftrl(rate, power, init, l1, l2, shrink, r.number("beta", 0.0), o);
  } else if (k == "Lamb") {
    const double b1 = r.number("beta_1", 0.9), b2 = r.number("beta_2", 0.999);
    out = Lamb(rate, b1, b2, r.number("epsilon", 1e-7), o);
  } else if (k == "Adafactor") {
    const double decay = r.number("beta_2_decay", -0.8);
    const double eps1 = r.number("epsilon_1", 1e-30), eps2 = r.number("epsilon_2", 1e-3);
    const double clip = r.number("clip_threshold", 1.0);
    out = Adafactor(rate, decay, eps1, eps2, clip, r.boolean("relative_step", true), o);
  } else if (k == "ScheduleFreeAdamW") {
    const double b1 = r.number("beta_1", 0.9), b2 = r.number("beta_2", 0.999);
    const double eps = r.number("epsilon", 1e-8);
    out = ScheduleFreeAdamW(lr ? *lr : LearningRate(0.0025), b1, b2, eps,
                            r.integer("warmup_steps", 0), o);
  } else if (k == "Muon") {
    // Muon's weight_decay (Keras' default 0.004 when absent) is one of its own arguments.
    MuonOptions m;
    m.weight_decay = r.has("weight_decay") ? o.weight_decay : std::optional<double>(0.004);
    o.weight_decay.reset();
    m.adam_beta_1 = r.number("adam_beta_1", 0.9);
    m.adam_beta_2 = r.number("adam_beta_2", 0.999);
    m.epsilon = r.number("epsilon", 1e-7);
    if (const Config* e = r.find("exclude_layers"); e != nullptr && !e->is_null()) {
      if (!e->is_array()) r.fail("exclude_layers", "must be a list of strings, got " + r.got(*e));
      for (const Config& k2 : *e) {
        if (!k2.is_string())
          r.fail("exclude_layers", "must be a list of strings, got " + r.got(*e));
        m.exclude_layers.push_back(k2.get<std::string>());
      }
    }
    m.muon_a = r.number("muon_a", 3.4445);
    m.muon_b = r.number("muon_b", -4.7750);
    m.muon_c = r.number("muon_c", 2.0315);
    m.adam_lr_ratio = r.number("adam_lr_ratio", 1.0);
    m.momentum = r.number("momentum", 0.95);
    m.ns_steps = r.int_of("ns_steps", 5);
    m.nesterov = r.boolean("nesterov", true);
    m.exclude_embeddings = r.boolean("exclude_embeddings", true);
    m.adam_weight_decay = r.has("adam_weight_decay") ? r.optional_number("adam_weight_decay")
                                                     : std::optional<double>(0.004);
    m.rms_rate = r.has("rms_rate") ? r.optional_number("rms_rate") : std::optional<double>(0.2);
    out = Muon(rate, m, o);
  } else {  // Lion
    const double b1 = r.number("beta_1", 0.9);
    out = Lion(rate, b1, r.number("beta_2", 0.99), o);
  }
  r.finish();
  return *out;
}

Config serialize(const Optimizer& optimizer) {
  Config config = get_config(optimizer);
  return keras_object("keras.optimizers",
                      optimizer.is_loss_scaled() ? "LossScaleOptimizer"
                                                 : ca::optimizer_config(optimizer)->class_name,
                      std::move(config));
}

Optimizer deserialize(const Config& object) {
  if (object.is_string()) return get(object.get<std::string>());
  auto [cls, config] = parts(object, "keras.optimizers", "optimizer");
  // Keras' deserialize also takes the lower-case spelling ("adam").
  const auto known = optimizer_class(cls);
  return from_config(known ? *known : cls, config);
}

}  // namespace optimizers

// ---- losses ----

namespace losses {

namespace {
// The built-in losses whose config is only "name" and "reduction": (Keras class, kind).
constexpr std::pair<const char*, const char*> kPlainLosses[] = {
    {"MeanSquaredError", "mean_squared_error"},
    {"MeanAbsoluteError", "mean_absolute_error"},
    {"MeanAbsolutePercentageError", "mean_absolute_percentage_error"},
    {"MeanSquaredLogarithmicError", "mean_squared_logarithmic_error"},
    {"LogCosh", "log_cosh"},
    {"KLDivergence", "kl_divergence"},
    {"Poisson", "poisson"},
    {"Hinge", "hinge"},
    {"SquaredHinge", "squared_hinge"},
    {"CategoricalHinge", "categorical_hinge"},
    {"CTC", "ctc"}};

const char* reduction_json(Reduction r) {
  switch (r) {
    case Reduction::SUM:
      return "sum";
    case Reduction::NONE:
      return "none";
    default:
      return "sum_over_batch_size";
  }
}

Loss plain_loss(const std::string& kind, Reduction reduction, std::string name) {
  if (kind == "mean_squared_error") return MeanSquaredError(reduction, std::move(name));
  if (kind == "mean_absolute_error") return MeanAbsoluteError(reduction, std::move(name));
  if (kind == "mean_absolute_percentage_error")
    return MeanAbsolutePercentageError(reduction, std::move(name));
  if (kind == "mean_squared_logarithmic_error")
    return MeanSquaredLogarithmicError(reduction, std::move(name));
  if (kind == "log_cosh") return LogCosh(reduction, std::move(name));
  if (kind == "kl_divergence") return KLDivergence(reduction, std::move(name));
  if (kind == "poisson") return Poisson(reduction, std::move(name));
  if (kind == "hinge") return Hinge(reduction, std::move(name));
  if (kind == "squared_hinge") return SquaredHinge(reduction, std::move(name));
  if (kind == "ctc") return CTC(reduction, std::move(name));
  return CategoricalHinge(reduction, std::move(name));
}
}  // namespace

Config serialize(const Loss& loss) {
  TF_CHECK_ARG(loss.defined(), "serialize", "the loss is an empty handle");
  const std::string& kind = loss.impl()->kind;
  Config config{{"name", loss.name()}, {"reduction", reduction_json(loss.reduction())}};
  for (const auto& [cls, k] : kPlainLosses)
    if (kind == k) return keras_object("keras.losses", cls, std::move(config));
  if (const auto* c = dynamic_cast<const detail::ConfiguredLoss*>(loss.impl());
      c != nullptr && !c->keras_class.empty()) {
    if (c->write_config) c->write_config(config);
    return keras_object("keras.losses", c->keras_class, std::move(config));
  }
  const auto xent = ca::crossentropy_config(loss);
  TF_CHECK_T(UnimplementedError, xent.has_value(), "serialize",
             "loss \"{}\" ({}) has no Keras config in tapeflow (a loss made from a function; "
             "tapeflow writes every built-in loss class); compile with a built-in loss, or "
             "save the weights alone (save_weights)",
             loss.name(), kind);
  config["from_logits"] = xent->from_logits;
  if (kind == "sparse_categorical_crossentropy") {
    config["ignore_class"] = nullptr;
    return keras_object("keras.losses", "SparseCategoricalCrossentropy", std::move(config));
  }
  config["label_smoothing"] = xent->label_smoothing;
  config["axis"] = -1;
  return keras_object(
      "keras.losses",
      kind == "categorical_crossentropy" ? "CategoricalCrossentropy" : "BinaryCrossentropy",
      std::move(config));
}

namespace {
constexpr const char* kLossClassNames =
    "MeanSquaredError, MeanAbsoluteError, MeanAbsolutePercentageError, "
    "MeanSquaredLogarithmicError, LogCosh, KLDivergence, Poisson, Hinge, SquaredHinge, "
    "CategoricalHinge, SparseCategoricalCrossentropy, CategoricalCrossentropy, "
    "BinaryCrossentropy, Huber, CosineSimilarity, BinaryFocalCrossentropy, "
    "CategoricalFocalCrossentropy, Dice, Tversky, CategoricalGeneralizedCrossEntropy, Circle, CTC";

// Dice's and Tversky's axis: null (every axis), an integer or a list of them.
std::vector<int> axes_key(Reader& r, const std::string& key) {
  const Config* v = r.find(key);
  if (v == nullptr || v->is_null()) return {};
  return r.int_list_of(key);
}
}  // namespace

Loss deserialize(const Config& object) {
  if (object.is_string()) return get(object.get<std::string>());
  auto [cls, config] = parts(object, "keras.losses", "loss");
  Reader r(cls, config);
  auto name_or = [&](const char* fallback) { return r.string("name", fallback); };
  auto reduction = [&] {
    const std::string s = r.string("reduction", "sum_over_batch_size");
    if (s == "sum_over_batch_size") return Reduction::SUM_OVER_BATCH_SIZE;
    if (s == "sum") return Reduction::SUM;
    if (s == "none") return Reduction::NONE;
    r.fail("reduction",
           "= \"" + s + "\" is not supported by tapeflow (sum_over_batch_size, sum or none)");
  };
  Loss out;
  for (const auto& [c, kind] : kPlainLosses)
    if (cls == c) {
      std::string name = name_or(kind);
      out = plain_loss(kind, reduction(), std::move(name));
    }
  if (!out.defined()) {
    if (cls == "SparseCategoricalCrossentropy") {
      std::string name = name_or("sparse_categorical_crossentropy");
      const Reduction red = reduction();
      const bool logits = r.boolean("from_logits", false);
      r.expect_null("ignore_class");
      out = SparseCategoricalCrossentropy(logits, red, std::move(name));
    } else if (cls == "CategoricalCrossentropy" || cls == "BinaryCrossentropy") {
      const bool cat = cls == "CategoricalCrossentropy";
      std::string name = name_or(cat ? "categorical_crossentropy" : "binary_crossentropy");
      const Reduction red = reduction();
      const bool logits = r.boolean("from_logits", false);
      const double smoothing = r.number("label_smoothing", 0.0);
      r.expect("axis", -1);
      out = cat ? Loss(CategoricalCrossentropy(logits, smoothing, red, std::move(name)))
                : Loss(BinaryCrossentropy(logits, smoothing, red, std::move(name)));
    } else if (cls == "Huber") {
      std::string name = name_or("huber_loss");
      const Reduction red = reduction();
      out = Huber(r.number("delta", 1.0), red, std::move(name));  // Keras 3.15 omits delta
    } else if (cls == "CosineSimilarity") {
      std::string name = name_or("cosine_similarity");
      const Reduction red = reduction();
      out = CosineSimilarity(r.int_of("axis", -1), red, std::move(name));
    } else if (cls == "BinaryFocalCrossentropy" || cls == "CategoricalFocalCrossentropy") {
      const bool binary = cls == "BinaryFocalCrossentropy";
      std::string name =
          name_or(binary ? "binary_focal_crossentropy" : "categorical_focal_crossentropy");
      const Reduction red = reduction();
      const bool logits = r.boolean("from_logits", false);
      const double smoothing = r.number("label_smoothing", 0.0);
      const int axis = r.int_of("axis", -1);
      const bool balancing = binary && r.boolean("apply_class_balancing", false);
      const double alpha = r.number("alpha", 0.25), gamma = r.number("gamma", 2.0);
      out = binary ? Loss(BinaryFocalCrossentropy(balancing, alpha, gamma, logits, smoothing, red,
                                                  std::move(name), axis))
                   : Loss(CategoricalFocalCrossentropy(alpha, gamma, logits, smoothing, red,
                                                       std::move(name), axis));
    } else if (cls == "Dice") {
      std::string name = name_or("dice");
      const Reduction red = reduction();
      out = Dice(red, std::move(name), axes_key(r, "axis"));
    } else if (cls == "Tversky") {
      std::string name = name_or("tversky");
      const Reduction red = reduction();
      const double alpha = r.number("alpha", 0.5), beta = r.number("beta", 0.5);
      out = Tversky(alpha, beta, red, std::move(name), axes_key(r, "axis"));
    } else if (cls == "CategoricalGeneralizedCrossEntropy") {
      std::string name = name_or("categorical_generalized_cross_entropy");
      const Reduction red = reduction();
      out = CategoricalGeneralizedCrossEntropy(r.number("q", 0.5), red, std::move(name));
    } else if (cls == "Circle") {
      std::string name = name_or("circle");
      const Reduction red = reduction();
      const double gamma = r.number("gamma", 80.0), margin = r.number("margin", 0.4);
      out = Circle(gamma, margin, r.boolean("remove_diagonal", true), red, std::move(name));
    } else {
      TF_THROW(InvalidArgumentError, "deserialize",
               "loss class \"{}\" has no config reader in tapeflow (it reads {})", cls,
               kLossClassNames);
    }
  }
  r.finish();
  return out;
}

}  // namespace losses

// ---- compile_config ----

namespace saving {

namespace {

// The built-in metrics whose Keras config is only "name" and "dtype": (class, default name).
constexpr std::pair<const char*, const char*> kPlainMetrics[] = {
    {"MeanSquaredError", "mean_squared_error"},
    {"MeanAbsoluteError", "mean_absolute_error"},
    {"MeanAbsolutePercentageError", "mean_absolute_percentage_error"},
    {"MeanSquaredLogarithmicError", "mean_squared_logarithmic_error"},
    {"RootMeanSquaredError", "root_mean_squared_error"},
    {"LogCoshError", "logcosh"},
    {"Poisson", "poisson"},
    {"KLDivergence", "kl_divergence"},
    {"Hinge", "hinge"},
    {"SquaredHinge", "squared_hinge"},
    {"CategoricalHinge", "categorical_hinge"},
    {"Accuracy", "accuracy"},
    {"CategoricalAccuracy", "categorical_accuracy"},
    {"SparseCategoricalAccuracy", "sparse_categorical_accuracy"}};
constexpr const char* kPlainMetricNames =
    "MeanSquaredError, MeanAbsoluteError, MeanAbsolutePercentageError, "
    "MeanSquaredLogarithmicError, RootMeanSquaredError, LogCoshError, Poisson, KLDivergence, "
    "Hinge, SquaredHinge, CategoricalHinge, Accuracy, CategoricalAccuracy, "
    "SparseCategoricalAccuracy";

metrics::Metric plain_metric(const std::string& cls, std::string name) {
  namespace m = metrics;
  if (cls == "MeanSquaredError") return m::MeanSquaredError(std::move(name));
  if (cls == "MeanAbsoluteError") return m::MeanAbsoluteError(std::move(name));
  if (cls == "MeanAbsolutePercentageError") return m::MeanAbsolutePercentageError(std::move(name));
  if (cls == "MeanSquaredLogarithmicError") return m::MeanSquaredLogarithmicError(std::move(name));
  if (cls == "RootMeanSquaredError") return m::RootMeanSquaredError(std::move(name));
  if (cls == "LogCoshError") return m::LogCoshError(std::move(name));
  if (cls == "Poisson") return m::Poisson(std::move(name));
  if (cls == "KLDivergence") return m::KLDivergence(std::move(name));
  if (cls == "Hinge") return m::Hinge(std::move(name));
  if (cls == "SquaredHinge") return m::SquaredHinge(std::move(name));
  if (cls == "CategoricalHinge") return m::CategoricalHinge(std::move(name));
  if (cls == "Accuracy") return m::Accuracy(std::move(name));
  if (cls == "CategoricalAccuracy") return m::CategoricalAccuracy(std::move(name));
  return m::SparseCategoricalAccuracy(std::move(name));
}

Config spec_json(const ca::SpecRecord& s, const char* what) {
  if (s.metric) {
    const auto* impl = s.metric->impl();
    const std::string& cls = impl->keras_class;
    TF_CHECK_T(UnimplementedError, !cls.empty(), "get_compile_config",
               "{} \"{}\" is a metric object tapeflow has no config writer for (a Mean, Sum or "
               "MeanMetricWrapper of your own; tapeflow writes every other built-in metric "
               "class, and any metric given by name)",
               what, s.metric->name());
    Config config{{"name", s.metric->name()}, {"dtype", "float32"}};
    if (impl->write_config) impl->write_config(config);
    return keras_object("keras.metrics", cls, std::move(config));
  }
  if (s.loss.defined()) return losses::serialize(s.loss);
  return s.name;
}

Config specs_json(const std::vector<ca::SpecRecord>& list, const char* what) {
  Config out = Config::array();
  for (const auto& s : list) out.push_back(spec_json(s, what));
  return out;
}

// A PerOutput as Keras writes a list or a dict argument; null when not given.
template <class T, class F>
Config per_output_json(const PerOutput<T>& p, F to_json) {
  if (!p.given()) return nullptr;
  if (p.is_map()) {
    Config out = Config::object();
    for (const auto& [k, v] : p.by_name()) out[k] = to_json(v);
    return out;
  }
  Config out = Config::array();
  for (const T& v : p.list()) out.push_back(to_json(v));
  return out;
}

// Keras writes "auto" resolved (false for eager steps and on machines without a GPU); tapeflow
// writes what its traced steps do: tf::function's default on a GPU.
bool resolved_jit_compile(const ca::CompileRecord& rec) {
  if (rec.jit_compile) return *rec.jit_compile;
  return !rec.run_eagerly && !tapeflow::config::list_physical_devices("GPU").empty() &&
         tapeflow::detail::default_jit_compile();
}

}  // namespace

Config get_compile_config(const Model& model) {
  const ca::CompileRecord* rec = ca::compile_record(model);
  if (rec == nullptr) return Config::object();
  Config loss =
      rec->loss_per_output
          ? per_output_json(rec->loss, [](const ca::SpecRecord& s) { return spec_json(s, "loss"); })
          : spec_json(rec->single_loss, "loss");
  Config metrics =
      rec->metrics_per_output
          ? per_output_json(
                rec->metrics,
                [](const std::vector<ca::SpecRecord>& l) { return specs_json(l, "metric"); })
          : (rec->flat_metrics.empty() ? Config(nullptr) : specs_json(rec->flat_metrics, "metric"));
  return Config{
      {"optimizer", optimizers::serialize(rec->optimizer)},
      {"loss", std::move(loss)},
      {"loss_weights", per_output_json(rec->loss_weights, [](double w) { return Config(w); })},
      {"metrics", std::move(metrics)},
      {"weighted_metrics", rec->weighted_metrics.empty()
                               ? Config(nullptr)
                               : specs_json(rec->weighted_metrics, "weighted metric")},
      {"run_eagerly", rec->run_eagerly},
      {"steps_per_execution", 1},
      {"jit_compile", resolved_jit_compile(*rec)}};
}

namespace {

// A loss of compile_config: a name or a Keras loss object.
// A Keras loss object of compile_config.
losses::Loss loss_object(Reader& r, const std::string& key, const Config& v) {
  if (!v.is_object()) r.fail(key, "must be a loss name or a Keras loss object, got " + r.got(v));
  try {
    return losses::deserialize(v);
  } catch (const Error& e) {
    r.fail(key, std::string("holds a loss tapeflow cannot read: ") + e.what());
  }
}

// A loss of compile_config: a name or a Keras loss object.
LossSpec loss_spec(Reader& r, const std::string& key, const Config& v) {
  if (v.is_string()) return LossSpec(v.get<std::string>());
  return LossSpec(loss_object(r, key, v));
}

MetricSpec metric_spec(Reader& r, const std::string& key, const Config& v) {
  if (v.is_string()) return MetricSpec(v.get<std::string>());
  if (!v.is_object() || !v.contains("class_name"))
    r.fail(key, "must hold metric names or Keras metric objects, got " + r.got(v));
  try {
    auto [cls, config] = parts(v, "keras.metrics", "metric");
    for (const auto& [c, default_name] : kPlainMetrics) {
      if (cls != c) continue;
      Reader m(cls, config);
      std::string name = m.string("name", default_name);
      m.expect("dtype", "float32");
      m.finish();
      return MetricSpec(plain_metric(cls, std::move(name)));
    }
    if (metrics::Metric with_options = saving::internal::metric_from_config(cls, config);
        with_options.defined())
      return MetricSpec(with_options);
    TF_THROW(InvalidArgumentError, "deserialize",
             "metric class \"{}\" has no config reader in tapeflow (it reads {}, {} objects, "
             "and metric names)",
             cls, kPlainMetricNames, saving::internal::kOptionMetricNames);
  } catch (const InvalidArgumentError& e) {
    r.fail(key, std::string("holds a metric tapeflow cannot read: ") + e.what());
  }
}

std::vector<MetricSpec> metric_list(Reader& r, const std::string& key, const Config& v) {
  std::vector<MetricSpec> out;
  if (v.is_null()) return out;
  if (!v.is_array()) return {metric_spec(r, key, v)};  // Keras takes a lone metric too
  for (const Config& e : v) out.push_back(metric_spec(r, key, e));
  return out;
}

// Runs the compile() a config asks for; its own errors (an unknown loss name, a metric count
// that does not fit the outputs) say that the compile_config is the source.
template <class F>
void compiling(F&& compile) {
  try {
    compile();
  } catch (const InvalidArgumentError& e) {
    TF_THROW(InvalidArgumentError, "compile_from_config", "compiling from the compile_config: {}",
             e.what());
  }
}

// A dict argument (by output name) is a JSON object that is not a Keras object.
bool is_dict(const Config& v) {
  return v.is_object() && !v.contains("class_name");
}

}  // namespace

void compile_from_config(Model& model, const Config& config) {
  Reader r("compile_config", config);
  const Config& opt_json = r.require("optimizer");
  optimizers::Optimizer optimizer;
  try {
    optimizer = optimizers::deserialize(opt_json);
  } catch (const InvalidArgumentError& e) {
    r.fail("optimizer", std::string("does not load: ") + e.what());
  }
  const Config& loss = r.require("loss");
  if (loss.is_null())
    r.fail("loss",
           "is null: tapeflow compiles a model only with a loss (Keras allows none for "
           "a model that computes its own)");
  const Config* weights = r.find("loss_weights");
  const Config* metrics = r.find("metrics");
  const Config* weighted = r.find("weighted_metrics");
  CompileOptions options;
  options.run_eagerly = r.boolean("run_eagerly", false);
  r.expect("steps_per_execution", 1);
  if (const Config* j = r.find("jit_compile"); j != nullptr && !j->is_null()) {
    // "auto": left unset, tf::function's default.
    if (j->is_boolean())
      options.jit_compile = j->get<bool>();
    else if (*j != "auto")
      r.fail("jit_compile", "must be true, false or \"auto\", got " + r.got(*j));
  }
  if (weighted != nullptr) options.weighted_metrics = metric_list(r, "weighted_metrics", *weighted);
  r.finish();

  const bool per_output_loss = loss.is_array() || is_dict(loss);
  const bool weights_given = weights != nullptr && !weights->is_null();
  const bool nested_metrics =
      metrics != nullptr &&
      (is_dict(*metrics) || (metrics->is_array() && !metrics->empty() &&
                             std::all_of(metrics->begin(), metrics->end(), [](const Config& e) {
                               return e.is_array() || e.is_null();
                             })));
  if (!per_output_loss && !weights_given && !nested_metrics) {
    std::vector<MetricSpec> flat =
        metrics == nullptr ? std::vector<MetricSpec>{} : metric_list(r, "metrics", *metrics);
    const losses::Loss object = loss.is_string() ? losses::Loss() : loss_object(r, "loss", loss);
    compiling([&] {
      if (loss.is_string())
        model.compile(optimizer, loss.get<std::string>(), std::move(flat), options);
      else
        model.compile(optimizer, object, std::move(flat), options);
    });
    return;
  }
  if (!per_output_loss)
    r.fail("loss",
           "is one loss for every output while loss_weights or metrics are given per "
           "output: tapeflow reads that form only with one loss per output");
  PerOutput<LossSpec> loss_arg;
  if (loss.is_array()) {
    std::vector<LossSpec> list;
    for (const Config& e : loss) list.push_back(loss_spec(r, "loss", e));
    loss_arg = PerOutput<LossSpec>(std::move(list));
  } else {
    std::map<std::string, LossSpec> by_name;
    for (auto it = loss.begin(); it != loss.end(); ++it)
      by_name.emplace(it.key(), loss_spec(r, "loss", it.value()));
    loss_arg = PerOutput<LossSpec>(std::move(by_name));
  }
  PerOutput<double> weight_arg;
  if (weights_given) {
    auto number = [&](const Config& v) {
      if (!v.is_number()) r.fail("loss_weights", "must hold numbers, got " + r.got(v));
      return v.get<double>();
    };
    if (weights->is_array()) {
      std::vector<double> list;
      for (const Config& e : *weights) list.push_back(number(e));
      weight_arg = PerOutput<double>(std::move(list));
    } else if (is_dict(*weights)) {
      std::map<std::string, double> by_name;
      for (auto it = weights->begin(); it != weights->end(); ++it)
        by_name.emplace(it.key(), number(it.value()));
      weight_arg = PerOutput<double>(std::move(by_name));
    } else {
      r.fail("loss_weights", "must be a list or a dict of numbers, got " + r.got(*weights));
    }
  }
  PerOutput<std::vector<MetricSpec>> metric_arg;
  if (metrics != nullptr && !metrics->is_null()) {
    if (!nested_metrics)
      r.fail("metrics",
             "must be given per output (a list of lists or a dict) with a loss per "
             "output, got " +
                 r.got(*metrics));
    if (metrics->is_array()) {
      std::vector<std::vector<MetricSpec>> list;
      for (const Config& e : *metrics) list.push_back(metric_list(r, "metrics", e));
      metric_arg = PerOutput<std::vector<MetricSpec>>(std::move(list));
    } else {
      std::map<std::string, std::vector<MetricSpec>> by_name;
      for (auto it = metrics->begin(); it != metrics->end(); ++it)
        by_name.emplace(it.key(), metric_list(r, "metrics", it.value()));
      metric_arg = PerOutput<std::vector<MetricSpec>>(std::move(by_name));
    }
  }
  compiling([&] {
    model.compile(optimizer, std::move(loss_arg), std::move(weight_arg), std::move(metric_arg),
                  options);
  });
}

namespace internal {

std::optional<Config> compile_config_to_save(const Model& model, const char* op) {
  if (!model.compiled()) return std::nullopt;
  try {
    return get_compile_config(model);
  } catch (const UnimplementedError& e) {
    TF_LOG_WARN(
        "{}: model \"{}\" is written without its compile state (compile it again after "
        "loading): {}",
        op, model.name(), e.what());
    return std::nullopt;
  }
}

bool compile_from_object(Model& model, const Config& object, const std::string& where) {
  if (!object.is_object() || !object.contains("compile_config")) return false;
  const Config& cc = object["compile_config"];
  if (cc.is_null() || (cc.is_object() && cc.empty())) return false;
  try {
    compile_from_config(model, cc);
    return true;
  } catch (const Error& e) {
    // Keras' load_model: a compile state that cannot be restored is skipped with a warning.
    TF_LOG_WARN(
        "{}: model \"{}\" is left uncompiled (compile it yourself): its compile_config "
        "does not load: {}",
        where, model.name(), e.what());
    return false;
  } catch (const nlohmann::json::exception& e) {
    TF_LOG_WARN("{}: model \"{}\" is left uncompiled: its compile_config is malformed: {}", where,
                model.name(), e.what());
    return false;
  }
}

namespace {

// The order Keras 3.15 lists an optimizer's slot variables in: groups of slots, each group
// interleaved over the variables (Adam: m and v of each variable, then every vhat; RMSprop: every
// velocity, then every momentum, then every average_gradient; the rest: all of one variable's
// slots together).
std::vector<std::vector<std::string>> slot_groups(const std::string& cls,
                                                  const std::vector<std::string>& names) {
  std::vector<std::vector<std::string>> groups;
  if (cls == "RMSprop") {
    for (const auto& n : names) groups.push_back({n});
  } else if ((cls == "Adam" || cls == "AdamW") && names.size() == 3) {
    groups = {{names[0], names[1]}, {names[2]}};
  } else {
    groups = {names};
  }
  return groups;
}

constexpr const char* kOptimizerMetadata = "optimizer_variables";

}  // namespace

void add_optimizer_variables(const Model& model,
                             const std::vector<std::pair<std::string, Variable>>& weights,
                             std::vector<std::pair<std::string, Variable>>& out,
                             std::map<std::string, std::string>& metadata) {
  // The optimizer compile() uses: a LossScaleOptimizer (given, or made for mixed_float16) adds
  // its step_counter and dynamic_scale in front, as Keras lists them.
  const optimizers::Optimizer opt = model.optimizer();
  const auto config = ca::optimizer_config(opt);
  if (!config) return;
  std::map<const void*, std::string> path_of;
  for (const auto& [path, v] : weights) path_of.emplace(v.handle_id(), path);
  Config what = Config::array();
  auto add = [&](const std::string& description, const Variable& v) {
    out.emplace_back(fmt::format("{}vars/{}", kOptimizerPrefix, what.size()), v);
    what.push_back(description);
  };
  std::optional<Variable> u_product;
  for (const auto& [name, v] : opt.tracked_variables()) {
    if (name == "step_counter" || name == "dynamic_scale" || name == "iterations" ||
        name == "learning_rate")
      add(name, v);
    if (name == "u_product") u_product = v;
  }
  const std::vector<std::string> names = opt.slot_names();
  // Slots of variables outside this model (an optimizer shared by two models) are not its state.
  std::vector<std::pair<std::string, std::vector<Variable>>> slots;
  for (const auto& [var, s] : opt.slots())
    if (auto it = path_of.find(var.handle_id()); it != path_of.end())
      slots.emplace_back(it->second, s);
  // Keras' order: every variable's "average" (use_ema), every "gradient_accumulator", then the
  // class's own slots.
  std::vector<std::vector<std::string>> groups;
  std::vector<std::string> own;
  for (const auto& n : names)
    if (n == "average" || n == "gradient_accumulator")
      groups.push_back({n});
    else
      own.push_back(n);
  for (auto& g : slot_groups(config->class_name, own)) groups.push_back(std::move(g));
  for (const auto& group : groups)
    for (const auto& [path, s] : slots)
      for (const auto& slot : group) {
        const size_t i = std::find(names.begin(), names.end(), slot) - names.begin();
        add(path + ":" + slot, s[i]);
      }
  if (u_product) add("u_product", *u_product);  // Keras lists it last
  metadata[kOptimizerMetadata] = what.dump();
}

void restore_optimizer_variables(const Model& model, const safetensors::Reader& reader,
                                 const std::vector<std::pair<std::string, Variable>>& weights) {
  const std::string& path = reader.path();
  auto meta = reader.metadata().find(kOptimizerMetadata);
  size_t in_file = 0;
  for (const auto& t : reader.tensors())
    if (t.name.rfind(kOptimizerPrefix, 0) == 0) ++in_file;
  if (meta == reader.metadata().end()) {
    TF_CHECK_ARG(in_file == 0, "load_model",
                 "'{}' holds {} optimizer variable(s) but no \"{}\" metadata saying what they are",
                 path, in_file, kOptimizerMetadata);
    return;
  }
  Config what;
  try {
    what = Config::parse(meta->second);
  } catch (const nlohmann::json::parse_error& e) {
    TF_THROW(InvalidArgumentError, "load_model",
             "'{}': the \"{}\" metadata does not parse at byte {}", path, kOptimizerMetadata,
             e.byte);
  }
  TF_CHECK_ARG(what.is_array() && what.size() == in_file, "load_model",
               "'{}': the \"{}\" metadata does not describe the file's {} optimizer variable(s)",
               path, kOptimizerMetadata, in_file);
  optimizers::Optimizer opt = model.optimizer();
  // iterations, learning_rate, u_product, a LossScaleOptimizer's step_counter and dynamic_scale
  std::map<std::string, Variable> own;
  for (const auto& [name, v] : opt.tracked_variables()) own.emplace(name, v);
  std::map<std::string, Variable> by_path(weights.begin(), weights.end());
  const std::vector<std::string> slot_names = opt.slot_names();
  // Everything is checked before anything is assigned.
  std::vector<std::pair<Variable, Tensor>> assign;
  std::vector<std::tuple<Variable, std::string, Tensor>> deferred;
  for (size_t i = 0; i < what.size(); ++i) {
    const std::string name = fmt::format("{}vars/{}", kOptimizerPrefix, i);
    TF_CHECK_ARG(what[i].is_string(), "load_model", "'{}': the \"{}\" entry {} is not a string",
                 path, kOptimizerMetadata, i);
    const std::string d = what[i].get<std::string>();
    const safetensors::TensorInfo* info = reader.find(name);
    TF_CHECK_ARG(info != nullptr, "load_model", "'{}' lacks the optimizer variable \"{}\" ({})",
                 path, name, safetensors::detail::printable(d));
    const size_t colon = d.rfind(':');
    if (colon == std::string::npos) {
      auto it = own.find(d);
      TF_CHECK_ARG(it != own.end(), "load_model",
                   "'{}': optimizer variable \"{}\" is the optimizer's \"{}\", which optimizer "
                   "\"{}\" does not have (a learning_rate variable for a schedule?)",
                   path, name, safetensors::detail::printable(d), opt.name());
      safetensors::detail::check_fits("load_model", path, name, info->shape, info->dtype,
                                      it->second);
      assign.emplace_back(it->second, reader.read(name));
      continue;
    }
    const std::string weight = d.substr(0, colon), slot = d.substr(colon + 1);
    auto var = by_path.find(weight);
    TF_CHECK_ARG(var != by_path.end(), "load_model",
                 "'{}': optimizer variable \"{}\" is a slot of weight \"{}\", which the model "
                 "does not have",
                 path, name, safetensors::detail::printable(weight));
    TF_CHECK_ARG(std::find(slot_names.begin(), slot_names.end(), slot) != slot_names.end(),
                 "load_model",
                 "'{}': optimizer variable \"{}\" is slot \"{}\", which optimizer \"{}\" does not "
                 "keep",
                 path, name, safetensors::detail::printable(slot), opt.name());
    const TensorShape want = opt.slot_shape(slot, var->second);
    TF_CHECK_ARG(info->shape == want && info->dtype == var->second.dtype(), "load_model",
                 "'{}': tensor '{}' has shape {} and dtype {}, slot \"{}\" of variable '{}' has "
                 "shape {} and dtype {}",
                 path, name, info->shape.to_string(), dtype_name(info->dtype),
                 safetensors::detail::printable(slot), var->second.name(), want.to_string(),
                 dtype_name(var->second.dtype()));
    deferred.emplace_back(var->second, slot, reader.read(name));
  }
  for (auto& [v, t] : assign) v.assign(t);
  // The slots do not exist before the first update: the optimizer makes them from these values.
  for (auto& [v, slot, t] : deferred) opt.restore_deferred_slot(v, slot, t);
}

}  // namespace internal
}  // namespace saving
}  // namespace tapeflow::keras
