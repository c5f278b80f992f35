// The compile state in whole-model saving (keras/serialization_json.h, keras/serialization.h):
// optimizer and schedule configs as Keras 3.15 writes them, from_config steps against Keras,
// get_compile_config / compile_from_config, and training resumed exactly after save_model and
// load_model. The JSON literals and values come from Keras 3.15.1 (the Python line above each).
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/functional.h"
#include "keras/layers.h"
#include "keras/losses.h"
#include "keras/metrics.h"
#include "keras/mixed_precision.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/safetensors.h"
#include "keras/schedules.h"
#include "keras/serialization_json.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/temp_dir.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace O = tapeflow::keras::optimizers;
namespace S = tapeflow::keras::optimizers::schedules;
using K::saving::Config;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::TempDir;

namespace {

// The config part of Keras' serialized optimizer (every key in Keras' order).
std::string keras_optimizer(const std::string& cls, const std::string& config) {
  return R"({"module": "keras.optimizers", "class_name": ")" + cls + R"(", "config": )" + config +
         R"(, "registered_name": null})";
}

void check_json(const Config& got, const std::string& want) {
  const Config w = Config::parse(want);
  INFO("got  " << got.dump());
  INFO("want " << w.dump());
  CHECK(got == w);  // ordered_json: the key order counts too
}

O::OptimizerOptions named(const std::string& name) {
  O::OptimizerOptions o;
  o.name = name;
  return o;
}

}  // namespace

TEST_CASE("serialization compile: optimizer get_config is Keras'", "[keras][serialization]") {
  // keras.optimizers.serialize(O.SGD())
  check_json(O::serialize(O::SGD(0.01, 0.0, false, named("sgd"))),
             keras_optimizer("SGD", R"({"name": "sgd", "learning_rate": 0.009999999776482582,
"weight_decay": null, "clipnorm": null, "global_clipnorm": null, "clipvalue": null,
"use_ema": false, "ema_momentum": 0.99, "ema_overwrite_frequency": null,
"loss_scale_factor": null, "gradient_accumulation_steps": null, "momentum": 0.0,
"nesterov": false})"));
  // O.serialize(O.SGD(0.1, momentum=0.9, nesterov=True))
  check_json(O::serialize(O::SGD(0.1, 0.9, true, named("sgd_1"))),
             keras_optimizer("SGD", R"({"name": "sgd_1", "learning_rate": 0.10000000149011612,
"weight_decay": null, "clipnorm": null, "global_clipnorm": null, "clipvalue": null,
"use_ema": false, "ema_momentum": 0.99, "ema_overwrite_frequency": null,
"loss_scale_factor": null, "gradient_accumulation_steps": null, "momentum": 0.9,
"nesterov": true})"));
  const std::string common =
      R"("weight_decay": null, "clipnorm": null, "global_clipnorm": null, "clipvalue": null,
"use_ema": false, "ema_momentum": 0.99, "ema_overwrite_frequency": null,
"loss_scale_factor": null, "gradient_accumulation_steps": null, )";
  const std::string lr = R"("learning_rate": 0.0010000000474974513, )";
  // O.serialize(O.Adam())
  check_json(O::serialize(O::Adam(0.001, 0.9, 0.999, 1e-7, false, named("adam"))),
             keras_optimizer("Adam", R"({"name": "adam", )" + lr + common +
                                         R"("beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-07,
"amsgrad": false})"));
  // O.serialize(O.AdamW())
  check_json(O::serialize(O::AdamW(0.001, 0.004, 0.9, 0.999, 1e-7, false, named("adam_w"))),
             keras_optimizer("AdamW", R"({"name": "adam_w", "learning_rate": 0.0010000000474974513,
"weight_decay": 0.004, "clipnorm": null, "global_clipnorm": null, "clipvalue": null,
"use_ema": false, "ema_momentum": 0.99, "ema_overwrite_frequency": null,
"loss_scale_factor": null, "gradient_accumulation_steps": null, "beta_1": 0.9, "beta_2": 0.999,
"epsilon": 1e-07, "amsgrad": false})"));
  // O.serialize(O.RMSprop())
  check_json(O::serialize(O::RMSprop(0.001, 0.9, 0.0, 1e-7, false, named("rm_sprop"))),
             keras_optimizer("RMSprop", R"({"name": "rm_sprop", )" + lr + common +
                                            R"("rho": 0.9, "momentum": 0.0, "epsilon": 1e-07,
"centered": false})"));
  // O.serialize(O.Adagrad())
  check_json(O::serialize(O::Adagrad(0.001, 0.1, 1e-7, named("adagrad"))),
             keras_optimizer("Adagrad", R"({"name": "adagrad", )" + lr + common +
                                            R"("initial_accumulator_value": 0.1,
"epsilon": 1e-07})"));
  // O.serialize(O.Adadelta())
  check_json(O::serialize(O::Adadelta(0.001, 0.95, 1e-7, named("adadelta"))),
             keras_optimizer("Adadelta", R"({"name": "adadelta", )" + lr + common +
                                             R"("rho": 0.95, "epsilon": 1e-07})"));
  // O.serialize(O.Adamax())
  check_json(O::serialize(O::Adamax(0.001, 0.9, 0.999, 1e-7, named("adamax"))),
             keras_optimizer("Adamax", R"({"name": "adamax", )" + lr + common +
                                           R"("beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-07})"));
  // O.serialize(O.Nadam())
  check_json(O::serialize(O::Nadam(0.001, 0.9, 0.999, 1e-7, named("nadam"))),
             keras_optimizer("Nadam", R"({"name": "nadam", )" + lr + common +
                                          R"("beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-07})"));
  // O.serialize(O.Ftrl())
  check_json(O::serialize(O::Ftrl(0.001, -0.5, 0.1, 0.0, 0.0, 0.0, 0.0, named("ftrl"))),
             keras_optimizer("Ftrl", R"({"name": "ftrl", )" + lr + common +
                                         R"("learning_rate_power": -0.5,
"initial_accumulator_value": 0.1, "l1_regularization_strength": 0.0,
"l2_regularization_strength": 0.0, "l2_shrinkage_regularization_strength": 0.0, "beta": 0.0})"));
  // O.serialize(O.Lion())
  check_json(O::serialize(O::Lion(0.001, 0.9, 0.99, named("lion"))),
             keras_optimizer("Lion", R"({"name": "lion", )" + lr + common +
                                         R"("beta_1": 0.9, "beta_2": 0.99})"));
  // O.serialize(O.Lamb())
  check_json(O::serialize(O::Lamb(0.001, 0.9, 0.999, 1e-7, named("lamb"))),
             keras_optimizer("Lamb", R"({"name": "lamb", )" + lr + common +
                                         R"("beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-07})"));
  // O.serialize(O.Adafactor())
  check_json(O::serialize(O::Adafactor(0.001, -0.8, 1e-30, 1e-3, 1.0, true, named("adafactor"))),
             keras_optimizer("Adafactor", R"({"name": "adafactor", )" + lr + common +
                                              R"("beta_2_decay": -0.8, "epsilon_1": 1e-30,
"epsilon_2": 0.001, "clip_threshold": 1.0, "relative_step": true})"));
  // O.serialize(O.SGD(clipnorm=1.0, weight_decay=0.01))
  O::OptimizerOptions clip = named("sgd_2");
  clip.clipnorm = 1.0;
  clip.weight_decay = 0.01;
  check_json(O::serialize(O::SGD(0.01, 0.0, false, clip)),
             keras_optimizer("SGD", R"({"name": "sgd_2", "learning_rate": 0.009999999776482582,
"weight_decay": 0.01, "clipnorm": 1.0, "global_clipnorm": null, "clipvalue": null,
"use_ema": false, "ema_momentum": 0.99, "ema_overwrite_frequency": null,
"loss_scale_factor": null, "gradient_accumulation_steps": null, "momentum": 0.0,
"nesterov": false})"));
  // O.serialize(O.Adam(S.ExponentialDecay(0.1, 10, 0.5)))
  check_json(O::serialize(O::Adam(S::ExponentialDecay(0.1, 10, 0.5), 0.9, 0.999, 1e-7, false,
                                  named("adam_1"))),
             keras_optimizer("Adam", R"({"name": "adam_1", "learning_rate": {
"module": "keras.optimizers.schedules", "class_name": "ExponentialDecay", "config": {
"initial_learning_rate": 0.1, "decay_steps": 10, "decay_rate": 0.5, "staircase": false,
"name": "ExponentialDecay"}, "registered_name": null}, )" +
                                         common +
                                         R"("beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-07,
"amsgrad": false})"));
  // keras.optimizers.serialize(keras.optimizers.LossScaleOptimizer(
  //   keras.optimizers.SGD(0.1, momentum=0.9, name="sgd"), initial_scale=1024.0,
  //   dynamic_growth_steps=10))
  K::mixed_precision::LossScaleOptions ls;
  ls.initial_scale = 1024.0;
  ls.dynamic_growth_steps = 10;
  const K::mixed_precision::LossScaleOptimizer lso(O::SGD(0.1, 0.9, false, named("sgd")), ls);
  const std::string lso_json = R"({"module": "keras.optimizers",
"class_name": "LossScaleOptimizer", "config": {"name": "loss_scale_optimizer",
"inner_optimizer": {"module": "keras.optimizers", "class_name": "SGD", "config": {"name": "sgd",
"learning_rate": 0.10000000149011612, "weight_decay": null, "clipnorm": null,
"global_clipnorm": null, "clipvalue": null, "use_ema": false, "ema_momentum": 0.99,
"ema_overwrite_frequency": null, "loss_scale_factor": null, "gradient_accumulation_steps": null,
"momentum": 0.9, "nesterov": false}, "registered_name": null}, "initial_scale": 1024.0,
"dynamic_growth_steps": 10}, "registered_name": null})";
  check_json(O::serialize(lso), lso_json);
  const O::Optimizer lso_back = O::deserialize(Config::parse(lso_json));
  CHECK(lso_back.is_loss_scaled());
  check_json(O::serialize(lso_back), lso_json);
  // The learning rate is the current one (a callback may have changed it), as Keras'.
  O::SGD sgd(0.5);
  sgd.set_learning_rate(0.25);
  CHECK(O::get_config(sgd)["learning_rate"] == 0.25);
  // Every config reads back into the same config.
  for (const O::Optimizer& o :
       {O::Optimizer(O::RMSprop(0.01, 0.8, 0.5, 1e-6, true)), O::Optimizer(O::AdamW(0.002, 0.1)),
        O::Optimizer(O::Ftrl(0.1, -0.4, 0.2, 0.01, 0.02, 0.03, 0.1)),
        O::Optimizer(O::Adam(0.01, 0.8, 0.99, 1e-6, true)),
        O::Optimizer(O::Lamb(0.01, 0.8, 0.9, 1e-3)),
        O::Optimizer(O::Adafactor(0.2, -0.5, 1e-20, 1e-2, 0.5, false))}) {
    const Config c = O::serialize(o);
    CHECK(O::serialize(O::deserialize(c)) == c);
  }
}

TEST_CASE("serialization compile: schedule configs are Keras'", "[keras][serialization]") {
  const auto object = [](const std::string& cls, const std::string& config) {
    return R"({"module": "keras.optimizers.schedules", "class_name": ")" + cls +
           R"(", "config": )" + config + R"(, "registered_name": null})";
  };
  // keras.saving.serialize_keras_object(S.ExponentialDecay(0.1, 10, 0.5, staircase=True))
  check_json(S::serialize(S::ExponentialDecay(0.1, 10, 0.5, true)),
             object("ExponentialDecay", R"({"initial_learning_rate": 0.1, "decay_steps": 10,
"decay_rate": 0.5, "staircase": true, "name": "ExponentialDecay"})"));
  // S.PiecewiseConstantDecay([10, 20], [0.1, 0.05, 0.01])
  check_json(S::serialize(S::PiecewiseConstantDecay({10, 20}, {0.1, 0.05, 0.01})),
             object("PiecewiseConstantDecay", R"({"boundaries": [10, 20],
"values": [0.1, 0.05, 0.01], "name": "PiecewiseConstant"})"));
  // S.CosineDecay(0.1, 100)
  check_json(S::serialize(S::CosineDecay(0.1, 100)),
             object("CosineDecay", R"({"initial_learning_rate": 0.1, "decay_steps": 100,
"alpha": 0.0, "name": "CosineDecay", "warmup_target": null, "warmup_steps": 0})"));
  // S.CosineDecay(0.0, 100, alpha=0.1, warmup_target=0.1, warmup_steps=10)
  check_json(S::serialize(S::CosineDecay(0.0, 100, 0.1, 0.1, 10)),
             object("CosineDecay", R"({"initial_learning_rate": 0.0, "decay_steps": 100,
"alpha": 0.1, "name": "CosineDecay", "warmup_target": 0.1, "warmup_steps": 10})"));
  // S.InverseTimeDecay(0.1, 10, 0.5)
  check_json(S::serialize(S::InverseTimeDecay(0.1, 10, 0.5)),
             object("InverseTimeDecay", R"({"initial_learning_rate": 0.1, "decay_steps": 10,
"decay_rate": 0.5, "staircase": false, "name": "InverseTimeDecay"})"));
  // S.PolynomialDecay(0.1, 100)
  check_json(S::serialize(S::PolynomialDecay(0.1, 100)),
             object("PolynomialDecay", R"({"initial_learning_rate": 0.1, "decay_steps": 100,
"end_learning_rate": 0.0001, "power": 1.0, "cycle": false, "name": "PolynomialDecay"})"));
  // S.CosineDecayRestarts(0.1, 100)
  check_json(S::serialize(S::CosineDecayRestarts(0.1, 100)),
             object("CosineDecayRestarts", R"({"initial_learning_rate": 0.1,
"first_decay_steps": 100, "t_mul": 2.0, "m_mul": 1.0, "alpha": 0.0, "name": "SGDRDecay"})"));
  // Read back, they compute the same rates.
  for (const S::LearningRateSchedule& s :
       {S::LearningRateSchedule(S::ExponentialDecay(0.1, 10, 0.5, true)),
        S::LearningRateSchedule(S::PiecewiseConstantDecay({10, 20}, {0.1, 0.05, 0.01})),
        S::LearningRateSchedule(S::CosineDecay(0.0, 100, 0.1, 0.1, 10)),
        S::LearningRateSchedule(S::PolynomialDecay(0.1, 100, 0.001, 2.0, true)),
        S::LearningRateSchedule(S::CosineDecayRestarts(0.1, 100, 1.5, 0.9, 0.01))}) {
    const S::LearningRateSchedule back = S::deserialize(S::serialize(s));
    CHECK(S::serialize(back) == S::serialize(s));
    for (int64_t step : {0, 5, 15, 150}) CHECK(back(step) == s(step));
  }
  // A schedule made from a function has no Keras config.
  S::LearningRateSchedule custom([](const tf::Tensor&) { return tf::constant(tf::Tensor(0.1)); });
  TF_REQUIRE_THROWS_CONTAINING(S::serialize(custom), tf::UnimplementedError,
                               "made from a function");
}

TEST_CASE("serialization compile: optimizers from Keras configs step as Keras'",
          "[keras][serialization]") {
  // /tmp/kc/e.py: o = keras.optimizers.deserialize(json); w = keras.Variable([1., -2., 3.]);
  // 3 times: o.apply([2 * w], [w]); then w.
  const std::vector<std::pair<std::string, std::vector<double>>> cases = {
      {R"({"class_name": "SGD", "config": {"name": "SGD", "learning_rate": 0.1, "momentum": 0.9,
"nesterov": true}})",
       {-0.1083519458770752, 0.2167038917541504, -0.3250560760498047}},
      {R"({"class_name": "Adam", "config": {"name": "Adam", "learning_rate": 0.05,
"beta_1": 0.8, "beta_2": 0.99, "amsgrad": true}})",
       {0.8505682945251465, -1.8502626419067383, 2.850170373916626}},
      {R"({"class_name": "AdamW", "config": {"name": "AdamW", "learning_rate": 0.05,
"weight_decay": 0.1}})",
       {0.8361751437187195, -1.8210678100585938, 2.8060903549194336}},
      {R"({"class_name": "RMSprop", "config": {"name": "RMSprop", "learning_rate": 0.01,
"rho": 0.8, "momentum": 0.5, "centered": true}})",
       {0.9059008359909058, -1.905438780784607, 2.9052884578704834}},
      {R"({"class_name": "Adagrad", "config": {"name": "Adagrad", "learning_rate": 0.1,
"initial_accumulator_value": 0.5}})",
       {0.7891543507575989, -1.7781617641448975, 2.7754156589508057}},
      {R"({"class_name": "Adadelta", "config": {"name": "Adadelta", "learning_rate": 1.0,
"rho": 0.9}})",
       {0.9969318509101868, -1.9969310760498047, 2.9969308376312256}},
      {R"({"class_name": "Adamax", "config": {"name": "Adamax", "learning_rate": 0.05,
"beta_1": 0.8}})",
       {0.8540871143341064, -1.851975679397583, 2.851268768310547}},
      {R"({"class_name": "Nadam", "config": {"name": "Nadam", "learning_rate": 0.05,
"beta_2": 0.99}})",
       {0.8748462200164795, -1.8737025260925293, 2.873333692550659}},
      {R"({"class_name": "Ftrl", "config": {"name": "Ftrl", "learning_rate": 0.1,
"l1_regularization_strength": 0.01, "l2_regularization_strength": 0.02, "beta": 0.1}})",
       {0.6081212759017944, -1.5831135511398315, 2.5754847526550293}},
      {R"({"class_name": "Lion", "config": {"name": "Lion", "learning_rate": 0.01,
"beta_1": 0.8}})",
       {0.9700000286102295, -1.9700000286102295, 2.9700000286102295}},
      {R"({"module": "keras.optimizers", "class_name": "SGD", "config": {"name": "SGD",
"learning_rate": {"module": "keras.optimizers.schedules", "class_name": "PiecewiseConstantDecay",
"config": {"boundaries": [1], "values": [0.1, 0.01], "name": "PiecewiseConstant"},
"registered_name": null}, "clipnorm": 1.0}, "registered_name": null})",
       {0.9438751339912415, -1.887750267982483, 2.8316256999969482}},
  };
  for (const auto& [json, want] : cases) {
    CAPTURE(json);
    O::Optimizer o = O::deserialize(Config::parse(json));
    tf::Variable w(tf::constant({1.0f, -2.0f, 3.0f}), "w");
    for (int i = 0; i < 3; ++i) o.apply_gradients({tf::multiply(w.value(), tf::Tensor(2.0))}, {w});
    check_values(w.value(), want, 1e-6, 1e-7);
  }
  // Keras' lower-case spelling and a plain name read too.
  const Config lower =
      O::get_config(O::deserialize(Config::parse(R"({"class_name": "adam", "config": {}})")));
  CHECK(lower["learning_rate"].get<double>() == Approx(0.001).epsilon(1e-7));
  CHECK(O::deserialize(Config("rmsprop")).name() == "RMSprop");
}

TEST_CASE("serialization compile: bad optimizer and schedule configs name the class and key",
          "[keras][serialization]") {
  const auto fails = [](const std::string& json, std::vector<std::string> parts) {
    CAPTURE(json);
    tf::testing::require_error([&] { O::deserialize(Config::parse(json)); }, parts);
  };
  fails(R"({"class_name": "Adam", "config": {"foo": 1}})",
        {"Adam config key \"foo\"", "not supported"});
  fails(R"({"class_name": "SGD", "config": {"use_ema": "yes"}})", {"SGD config key \"use_ema\""});
  // Keras' own check of the value.
  fails(R"({"class_name": "Nadam", "config": {"gradient_accumulation_steps": 1}})",
        {"Nadam", "`gradient_accumulation_steps` must be an integer >= 2"});
  fails(R"({"class_name": "Lion", "config": {"loss_scale_factor": "big"}})",
        {"Lion config key \"loss_scale_factor\""});
  fails(R"({"class_name": "Adam", "config": {"beta_1": "high"}})",
        {"Adam config key \"beta_1\"", "must be a number"});
  fails(R"({"class_name": "Adam", "config": {"learning_rate": "fast"}})",
        {"Adam config key \"learning_rate\""});
  fails(R"({"class_name": "Sophia", "config": {}})", {"unknown optimizer class \"Sophia\""});
  fails(R"({"class_name": "SGD", "config": {"learning_rate": {"class_name": "ExponentialDecay",
"config": {"initial_learning_rate": 0.1, "decay_steps": 10, "decay_rate": 0.5, "bogus": 1}}}})",
        {"SGD config key \"learning_rate\"", "ExponentialDecay config key \"bogus\""});
  fails(R"({"class_name": "SGD", "config": {"learning_rate": {"class_name": "WarmUp",
"config": {}}}})",
        {"SGD config key \"learning_rate\"", "WarmUp"});
  fails(R"({"class_name": "SGD", "module": "my.module", "config": {}})",
        {"SGD object key \"module\""});
  // The constructors' own checks name the class.
  fails(R"({"class_name": "Adam", "config": {"beta_1": 1.5}})", {"Adam", "beta_1"});
  tf::testing::require_error(
      [&] {
        S::deserialize(Config::parse(
            R"({"class_name": "CosineDecay", "config": {"initial_learning_rate": 0.1}})"));
      },
      {"CosineDecay config key \"decay_steps\"", "required"});
  // What tapeflow cannot write.
  O::OptimizerOptions excl;
  excl.exclude_from_weight_decay = {"bias"};
  TF_REQUIRE_THROWS_CONTAINING(O::get_config(O::AdamW(0.001, 0.004, 0.9, 0.999, 1e-7, false, excl)),
                               tf::UnimplementedError, "exclude_from_weight_decay");
  fails(R"({"class_name": "LossScaleOptimizer", "config": {"inner_optimizer": {
"class_name": "SGD", "config": {"momentum": -1.0}}}})",
        {"LossScaleOptimizer config key \"inner_optimizer\"", "momentum"});
}

namespace {

K::Sequential small_model() {
  return K::Sequential(
      {K::layers::Dense(4, {.activation = "relu", .input_shape = {3}, .name = "d1"}),
       K::layers::Dense(2, {.name = "d2"})},
      "small");
}

}  // namespace

TEST_CASE("serialization compile: get_compile_config is Keras' and round trips",
          "[keras][serialization]") {
  K::Sequential model = small_model();
  CHECK(K::saving::get_compile_config(model) == Config::object());  // Keras: {} uncompiled
  // model.compile(optimizer=keras.optimizers.SGD(0.1, momentum=0.9, name="sgd"), loss="mse",
  //               metrics=["mae"], weighted_metrics=["accuracy"]); model.get_compile_config()
  model.compile(O::SGD(0.1, 0.9, false, named("sgd")), "mse", {"mae"},
                {.weighted_metrics = {"accuracy"}});
  // compile()'s default jit_compile is Keras' "auto", written resolved: false on a machine
  // without a GPU (where these configs were written), tf::function's default with one.
  const auto auto_jit = [](std::string config) {
    const std::string off = R"("jit_compile": false)";
    if (!tf::config::list_physical_devices("GPU").empty() && tf::detail::default_jit_compile())
      config.replace(config.find(off), off.size(), R"("jit_compile": true)");
    return config;
  };
  const std::string sgd_config = auto_jit(R"({"optimizer": {"module": "keras.optimizers",
"class_name": "SGD", "config": {"name": "sgd", "learning_rate": 0.10000000149011612,
"weight_decay": null, "clipnorm": null, "global_clipnorm": null, "clipvalue": null,
"use_ema": false, "ema_momentum": 0.99, "ema_overwrite_frequency": null,
"loss_scale_factor": null, "gradient_accumulation_steps": null, "momentum": 0.9,
"nesterov": false}, "registered_name": null}, "loss": "mse", "loss_weights": null,
"metrics": ["mae"], "weighted_metrics": ["accuracy"], "run_eagerly": false,
"steps_per_execution": 1, "jit_compile": false})");
  check_json(K::saving::get_compile_config(model), sgd_config);
  // to_json carries it, and model_from_json compiles from it.
  const Config object = Config::parse(model.to_json());
  check_json(object["compile_config"], sgd_config);
  K::Model back = K::models::model_from_json(model.to_json());
  REQUIRE(back.compiled());
  check_json(K::saving::get_compile_config(back), sgd_config);
  CHECK(back.metrics_names() == model.metrics_names());

  // Metric objects whose config is only name and dtype. model.compile(optimizer=
  //   keras.optimizers.SGD(0.1, momentum=0.9, name="sgd"), loss="mse",
  //   metrics=["mae", keras.metrics.MeanSquaredError(name="mm")], weighted_metrics=["accuracy"])
  const std::string objects_config = auto_jit(R"({"optimizer": {"module": "keras.optimizers",
"class_name": "SGD", "config": {"name": "sgd", "learning_rate": 0.10000000149011612,
"weight_decay": null, "clipnorm": null, "global_clipnorm": null, "clipvalue": null,
"use_ema": false, "ema_momentum": 0.99, "ema_overwrite_frequency": null,
"loss_scale_factor": null, "gradient_accumulation_steps": null, "momentum": 0.9,
"nesterov": false}, "registered_name": null}, "loss": "mse", "loss_weights": null,
"metrics": ["mae", {"module": "keras.metrics", "class_name": "MeanSquaredError",
"config": {"name": "mm", "dtype": "float32"}, "registered_name": null}],
"weighted_metrics": ["accuracy"], "run_eagerly": false, "steps_per_execution": 1,
"jit_compile": false})");
  model.compile(O::SGD(0.1, 0.9, false, named("sgd")), "mse",
                {"mae", K::metrics::MeanSquaredError("mm")}, {.weighted_metrics = {"accuracy"}});
  check_json(K::saving::get_compile_config(model), objects_config);
  K::Sequential from_keras = small_model();
  K::saving::compile_from_config(from_keras, Config::parse(objects_config));
  check_json(K::saving::get_compile_config(from_keras), objects_config);
  CHECK(from_keras.metrics_names() == model.metrics_names());
  // keras.metrics.serialize(keras.metrics.LogCoshError()): Keras' default name, "logcosh".
  K::Sequential logcosh = small_model();
  logcosh.compile(O::SGD(), "mse", {K::metrics::LogCoshError("logcosh")});
  CHECK(K::saving::get_compile_config(logcosh)["metrics"] == Config::parse(R"([{
"module": "keras.metrics", "class_name": "LogCoshError", "config": {"name": "logcosh",
"dtype": "float32"}, "registered_name": null}])"));
  // A metric object with options (more in test_serialization_metrics.cpp):
  // keras.metrics.BinaryAccuracy(name="ba", threshold=0.3).
  logcosh.compile(O::SGD(), "mse", {K::metrics::BinaryAccuracy("ba", 0.3)});
  CHECK(K::saving::get_compile_config(logcosh)["metrics"] == Config::parse(R"([{
"module": "keras.metrics", "class_name": "BinaryAccuracy", "config": {"name": "ba",
"dtype": "float32", "threshold": 0.3}, "registered_name": null}])"));

  // model.compile(optimizer=keras.optimizers.Adam(name="adam"),
  //   loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"],
  //   run_eagerly=True); model.get_compile_config()
  const std::string adam_config = R"({"optimizer": {"module": "keras.optimizers",
"class_name": "Adam", "config": {"name": "adam", "learning_rate": 0.0010000000474974513,
"weight_decay": null, "clipnorm": null, "global_clipnorm": null, "clipvalue": null,
"use_ema": false, "ema_momentum": 0.99, "ema_overwrite_frequency": null,
"loss_scale_factor": null, "gradient_accumulation_steps": null, "beta_1": 0.9, "beta_2": 0.999,
"epsilon": 1e-07, "amsgrad": false}, "registered_name": null}, "loss": {"module": "keras.losses",
"class_name": "SparseCategoricalCrossentropy", "config": {
"name": "sparse_categorical_crossentropy", "reduction": "sum_over_batch_size",
"from_logits": true, "ignore_class": null}, "registered_name": null}, "loss_weights": null,
"metrics": ["accuracy"], "weighted_metrics": null, "run_eagerly": true,
"steps_per_execution": 1, "jit_compile": false})";
  model.compile(O::Adam(0.001, 0.9, 0.999, 1e-7, false, named("adam")),
                K::losses::SparseCategoricalCrossentropy(true), {"accuracy"},
                {.run_eagerly = true});
  check_json(K::saving::get_compile_config(model), adam_config);
  K::Sequential other = small_model();
  K::saving::compile_from_config(other, Config::parse(adam_config));
  check_json(K::saving::get_compile_config(other), adam_config);
  // "auto" read back is compile()'s default again, written resolved; true and false stay.
  for (const Config& jit : {Config("auto"), Config(true), Config(false)}) {
    Config c = Config::parse(sgd_config);
    c["jit_compile"] = jit;
    K::Sequential m = small_model();
    K::saving::compile_from_config(m, c);
    CHECK(K::saving::get_compile_config(m)["jit_compile"] ==
          (jit.is_boolean() ? jit : Config::parse(sgd_config)["jit_compile"]));
  }

  // A model with two outputs: per-output losses (a name and an object), weights and metrics.
  auto x = K::Input({3}, std::nullopt, "x");
  auto a = K::layers::Dense(2, {.name = "a"})(x);
  auto b = K::layers::Dense(1, {.name = "b"})(x);
  K::Model two(std::vector<K::KerasTensor>{x}, std::vector<K::KerasTensor>{a, b}, "two");
  two.compile(O::Adamax(), {K::LossSpec("mse"), K::LossSpec(K::losses::MeanAbsoluteError())},
              std::vector<double>{1.0, 0.5}, std::vector<std::vector<K::MetricSpec>>{{"mae"}, {}});
  const Config two_config = K::saving::get_compile_config(two);
  CHECK(two_config["loss"] == Config::parse(R"(["mse", {"module": "keras.losses",
"class_name": "MeanAbsoluteError", "config": {"name": "mean_absolute_error",
"reduction": "sum_over_batch_size"}, "registered_name": null}])"));
  CHECK(two_config["loss_weights"] == Config::parse("[1.0, 0.5]"));
  CHECK(two_config["metrics"] == Config::parse(R"([["mae"], []])"));
  K::Model two_back = K::models::model_from_json(two.to_json());
  REQUIRE(two_back.compiled());
  CHECK(K::saving::get_compile_config(two_back) == two_config);
  CHECK(two_back.metrics_names() == two.metrics_names());

  // Strict reading of compile_config itself.
  Config bad = Config::parse(sgd_config);
  bad["steps_per_execution"] = 4;
  tf::testing::require_error([&] { K::saving::compile_from_config(other, bad); },
                             {"compile_config config key \"steps_per_execution\""});
  bad = Config::parse(sgd_config);
  bad["metrics"] = Config::parse(R"([{"module": "keras.metrics", "class_name": "ExactMatch",
"config": {"name": "em", "dtype": "float32"}, "registered_name": null}])");
  tf::testing::require_error(
      [&] { K::saving::compile_from_config(other, bad); },
      {"compile_config config key \"metrics\"", "metric class \"ExactMatch\""});
  bad["metrics"] = Config::parse(R"([{"module": "keras.metrics", "class_name": "Hinge",
"config": {"name": "h", "dtype": "float16"}, "registered_name": null}])");
  tf::testing::require_error(
      [&] { K::saving::compile_from_config(other, bad); },
      {"compile_config config key \"metrics\"", "Hinge config key \"dtype\""});
  bad = Config::parse(sgd_config);
  bad["optimizer"]["config"]["amsgrad"] = true;
  tf::testing::require_error(
      [&] { K::saving::compile_from_config(other, bad); },
      {"compile_config config key \"optimizer\"", "SGD config key \"amsgrad\""});
  bad = Config::parse(sgd_config);
  bad["loss"] = "wobble";
  tf::testing::require_error([&] { K::saving::compile_from_config(other, bad); },
                             {"compiling from the compile_config", "unknown loss 'wobble'"});
  // model_from_json, as Keras' load_model, leaves such a model uncompiled (with a warning).
  Config with_bad = object;
  with_bad["compile_config"] = bad;
  K::Model uncompiled = K::models::model_from_json(with_bad.dump());
  CHECK(!uncompiled.compiled());
  // What tapeflow cannot write: to_json leaves the compile state out (with a warning).
  model.compile(O::SGD(), K::losses::Loss([](const tf::Tensor& t,
                                             const tf::Tensor& p) { return tf::subtract(t, p); },
                                          "diff"));
  TF_REQUIRE_THROWS_CONTAINING(K::saving::get_compile_config(model), tf::UnimplementedError,
                               "loss \"diff\" (custom) has no Keras config");
  CHECK(!Config::parse(model.to_json()).contains("compile_config"));
}

namespace {

// Trains a fresh copy of the model saved at `init` (compiled with make()) for `steps` batches
// of (x, y) starting at batch `first`.
void train(K::Model& m, const tf::Tensor& x, const tf::Tensor& y, int first, int steps) {
  for (int i = first; i < first + steps; ++i) {
    const int64_t b = (i % 4) * 4;
    m.train_on_batch(tf::slice(x, {b, 0}, {4, 3}), tf::slice(y, {b, 0}, {4, 2}));
  }
}

}  // namespace

TEST_CASE("serialization compile: training resumes exactly after save_model and load_model",
          "[keras][serialization]") {
  TempDir dir;
  const tf::Tensor x = tf::random::uniform({16, 3}, -1.0, 1.0, tf::float32, 11);
  const tf::Tensor y = tf::random::uniform({16, 2}, -1.0, 1.0, tf::float32, 12);
  {
    K::Sequential init = small_model();
    init.save(dir / "init.tfmodel");  // uncompiled: loads uncompiled
  }
  const std::vector<std::pair<const char*, std::function<O::Optimizer()>>> optimizers = {
      {"SGD with momentum", [] { return O::SGD(0.1, 0.9, true); }},
      {"Adam", [] { return O::Adam(0.01); }},
      {"Adam with a schedule",
       [] {
         return O::Adam(S::PiecewiseConstantDecay({4}, {0.02, 0.005}), 0.9, 0.999, 1e-7, true);
       }},
      {"RMSprop centered", [] { return O::RMSprop(0.01, 0.9, 0.5, 1e-7, true); }},
      {"Nadam", [] { return O::Nadam(0.01); }},
      {"Lamb", [] { return O::Lamb(0.01); }},
      {"Adafactor (factored slots)", [] { return O::Adafactor(0.05); }},
      {"Muon (scalar velocity slots of its matrices)", [] { return O::Muon(0.05); }},
      {"ScheduleFreeAdamW", [] { return O::ScheduleFreeAdamW(0.05, 0.9, 0.999, 1e-8, 2); }},
      {"Adam with use_ema and gradient accumulation (stopped mid-accumulation)",
       [] {
         return O::Adam(0.01, 0.9, 0.999, 1e-7, false,
                        {.use_ema = true, .ema_momentum = 0.9, .gradient_accumulation_steps = 2});
       }},
  };
  for (const auto& [what, make] : optimizers) {
    CAPTURE(what);
    // Uninterrupted: 7 steps.
    K::Model straight = K::models::load_model(dir / "init.tfmodel");
    REQUIRE(!straight.compiled());
    straight.compile(make(), "mse", {"mae"});
    train(straight, x, y, 0, 7);
    // Interrupted: 3 steps, save, load into a new model and optimizer, 4 more steps.
    K::Model first = K::models::load_model(dir / "init.tfmodel");
    first.compile(make(), "mse", {"mae"});
    train(first, x, y, 0, 3);
    first.save(dir / "mid.tfmodel");
    K::Model resumed = K::models::load_model(dir / "mid.tfmodel");
    REQUIRE(resumed.compiled());
    CHECK(resumed.optimizer().iterations().value().item<int64_t>() == 3);
    CHECK(resumed.metrics_names() == first.metrics_names());
    train(resumed, x, y, 3, 4);
    // Same ops on the same values: bit for bit.
    const auto want = straight.get_weights(), got = resumed.get_weights();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) check_close(got[i], want[i], 0.0, 0.0);
    // Control: the same 4 steps from the weights alone (compile=false, a fresh optimizer) end
    // elsewhere, so the optimizer's restored state is what made the match.
    K::Model weights_only = K::models::load_model(dir / "mid.tfmodel", false);
    CHECK(!weights_only.compiled());
    weights_only.compile(make(), "mse", {"mae"});
    train(weights_only, x, y, 3, 4);
    double max_diff = 0.0;
    for (size_t i = 0; i < want.size(); ++i)
      max_diff = std::max(
          max_diff, tf::reduce_max(tf::abs(tf::subtract(weights_only.get_weights()[i], want[i])))
                        .item<double>());
    CHECK(max_diff > 1e-4);
  }
  // The same through fit (shuffle off: the same batches), with a schedule that changes rate
  // mid-way: 2 epochs, save, 2 more epochs from the file, against 4 epochs straight.
  {
    const auto make = [] { return O::SGD(S::ExponentialDecay(0.1, 3, 0.5, true), 0.9); };
    const K::FitOptions epoch{.epochs = 1, .batch_size = 4, .verbose = 0, .shuffle = false};
    K::Model straight = K::models::load_model(dir / "init.tfmodel");
    straight.compile(make(), "mse", {"mae"});
    for (int e = 0; e < 4; ++e) straight.fit(x, y, epoch);
    K::Model first = K::models::load_model(dir / "init.tfmodel");
    first.compile(make(), "mse", {"mae"});
    for (int e = 0; e < 2; ++e) first.fit(x, y, epoch);
    first.save(dir / "fit.tfmodel");
    K::Model resumed = K::models::load_model(dir / "fit.tfmodel");
    CHECK(resumed.optimizer().iterations().value().item<int64_t>() == 8);
    CHECK(resumed.optimizer().current_learning_rate() == Approx(0.025).epsilon(1e-6));
    for (int e = 0; e < 2; ++e) resumed.fit(x, y, epoch);
    const auto want = straight.get_weights(), got = resumed.get_weights();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) check_close(got[i], want[i], 0.0, 0.0);
  }
  // Under mixed_float16, compile wraps the optimizer in a LossScaleOptimizer: its scale and step
  // counter are saved too (first), so float16 training also resumes exactly.
  {
    struct PolicyScope {
      PolicyScope() { K::mixed_precision::set_global_policy("mixed_float16"); }
      ~PolicyScope() { K::mixed_precision::reset_global_policy(); }
    };
    {
      PolicyScope mixed;
      small_model().save(dir / "init16.tfmodel");
    }
    // Loaded without the global policy: the layers' configs carry mixed_float16.
    const tf::Tensor big_y = tf::multiply(y, tf::Tensor(100.0));  // some steps overflow float16
    K::Model straight = K::models::load_model(dir / "init16.tfmodel");
    straight.compile(O::Adam(0.01), "mse");
    REQUIRE(straight.optimizer().is_loss_scaled());
    train(straight, x, big_y, 0, 7);
    K::Model first = K::models::load_model(dir / "init16.tfmodel");
    first.compile(O::Adam(0.01), "mse");
    train(first, x, big_y, 0, 3);
    first.save(dir / "mid16.tfmodel");
    K::Model resumed = K::models::load_model(dir / "mid16.tfmodel");
    REQUIRE(resumed.optimizer().is_loss_scaled());
    const auto scale_of = [](const K::Model& m) {
      return K::mixed_precision::LossScaleOptimizer::from(m.optimizer())
          .dynamic_scale()
          .value()
          .item<float>();
    };
    CHECK(scale_of(first) < 32768.0f);  // overflowing steps halved it: the state matters
    CHECK(scale_of(resumed) == scale_of(first));
    train(resumed, x, big_y, 3, 4);
    CHECK(scale_of(resumed) == scale_of(straight));
    const auto want = straight.get_weights(), got = resumed.get_weights();
    REQUIRE(got.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) check_close(got[i], want[i], 0.0, 0.0);
    K::safetensors::Reader mid16(dir / "mid16.tfmodel");
    const Config what = Config::parse(mid16.metadata().at("optimizer_variables"));
    CHECK(what[0] == "step_counter");
    CHECK(what[1] == "dynamic_scale");
    CHECK(what[2] == "iterations");
  }
  // The optimizer's variables sit under Keras' paths, in Keras' order (SGD: iterations,
  // learning_rate, then one momentum per weight; RMSprop: every velocity, every momentum, every
  // average_gradient).
  K::Model sgd_model = K::models::load_model(dir / "init.tfmodel");
  sgd_model.compile(O::RMSprop(0.01, 0.9, 0.5, 1e-7, true), "mse");
  train(sgd_model, x, y, 0, 1);
  sgd_model.save(dir / "rms.tfmodel");
  K::safetensors::Reader reader(dir / "rms.tfmodel");
  CHECK(Config::parse(reader.metadata().at("optimizer_variables")) == Config::parse(R"([
"iterations", "learning_rate",
"layers/d1/vars/0:velocity", "layers/d1/vars/1:velocity",
"layers/d2/vars/0:velocity", "layers/d2/vars/1:velocity",
"layers/d1/vars/0:momentum", "layers/d1/vars/1:momentum",
"layers/d2/vars/0:momentum", "layers/d2/vars/1:momentum",
"layers/d1/vars/0:average_gradient", "layers/d1/vars/1:average_gradient",
"layers/d2/vars/0:average_gradient", "layers/d2/vars/1:average_gradient"])"));
  REQUIRE(reader.find("optimizer/vars/0") != nullptr);
  CHECK(reader.find("optimizer/vars/0")->dtype == tf::int64);
  CHECK(reader.find("optimizer/vars/13")->shape == tf::TensorShape({2}));
  CHECK(reader.find("optimizer/vars/14") == nullptr);

  // A file whose optimizer variable does not fit its optimizer is refused, naming it.
  {
    auto tensors = K::safetensors::load_file(dir / "rms.tfmodel");
    std::map<std::string, std::string> meta(reader.metadata());
    for (auto& [name, t] : tensors)
      if (name == "optimizer/vars/2") t = tf::zeros({5, 5});
    K::safetensors::save_file(dir / "bad.tfmodel", tensors, meta);
    tf::testing::require_error([&] { K::models::load_model(dir / "bad.tfmodel"); },
                               {"bad.tfmodel", "optimizer/vars/2"});
  }
}
