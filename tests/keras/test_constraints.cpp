// Weight constraints (keras/constraints.h): Keras 3.15's values of MaxNorm, MinMaxNorm, NonNeg
// and UnitNorm on every device, their application after each optimizer update (a Dense layer
// trained one step against Keras' result, eagerly and traced, and under a custom weight),
// their configs in the layers' get_config and back, and the errors.
#include <cmath>
#include <string>
#include <vector>

#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/constraints.h"
#include "keras/initializers.h"
#include "keras/layers.h"
#include "keras/layers_conv.h"
#include "keras/layers_misc.h"
#include "keras/layers_more.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/serialization.h"
#include "keras/serialization_json.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace C = tapeflow::keras::constraints;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {
tf::Tensor weight() {
  return tf::convert_to_tensor(std::vector<float>{0.5f, -2.0f, 0.1f, 1.5f, 0.3f, -0.2f}, {2, 3});
}
}  // namespace

TEST_CASE("constraints match Keras 3.15", "[cpu][cuda][keras][constraints]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor w = weight();
    // keras.constraints.<Class>(...)(w) for w = [[0.5, -2, 0.1], [1.5, 0.3, -0.2]].
    check_values(C::MaxNorm(1.0)(w),
                 {0.3162277340888977, -0.9889363646507263, 0.09999995678663254, 0.9486832022666931,
                  0.14834046363830566, -0.19999991357326508},
                 2e-7);
    check_values(C::MaxNorm(1.0, {1})(w),
                 {0.24225078523159027, -0.9690031409263611, 0.048450157046318054,
                  0.9723055362701416, 0.19446110725402832, -0.12964074313640594},
                 2e-7);
    check_values(C::MinMaxNorm(0.5, 1.2, 0.7)(w),
                 {0.4156312942504883, -1.43070650100708, 0.1865246742963791, 1.2468938827514648,
                  0.21460598707199097, -0.3730493485927582},
                 2e-7);
    check_values(C::NonNeg()(w), {0.5, 0.0, 0.10000000149011612, 1.5, 0.30000001192092896, 0.0}, 0);
    check_values(C::UnitNorm()(w),
                 {0.3162277340888977, -0.9889363646507263, 0.44721338152885437, 0.9486832022666931,
                  0.14834046363830566, -0.8944267630577087},
                 2e-7);
    check_values(C::UnitNorm({0, 1})(w),
                 {0.19403761625289917, -0.7761504650115967, 0.03880752623081207, 0.5821128487586975,
                  0.11642257869243622, -0.07761505246162415},
                 2e-7);
  }
  CHECK(C::get("max_norm").name() == "MaxNorm");
  CHECK(C::get("MinMaxNorm").name() == "MinMaxNorm");
  CHECK(C::get("non_neg").name() == "NonNeg");
  CHECK(C::get("unit_norm").name() == "UnitNorm");
  CHECK(!C::get("").defined());
  require_error([] { C::get("clip"); }, {"[constraints.get] unknown constraint 'clip'"});
  require_error([] { C::MaxNorm(-1.0); }, {"[MaxNorm]", "max_value must be finite and >= 0"});
  require_error([] { C::MinMaxNorm(2.0, 1.0); }, {"[MinMaxNorm]", "min_value <= max_value"});
  require_error([] { C::MinMaxNorm(0.0, 1.0, 1.5); }, {"[MinMaxNorm]", "rate", "1.5"});
  require_error([] { C::UnitNorm({})(weight()); }, {"[UnitNorm]", "at least one axis"});
  require_error([] { C::MaxNorm(1.0, {2})(weight()); }, {"[MaxNorm]"});
  const K::Constraint flatten("flatten", [](const tf::Tensor& t) { return tf::reshape(t, {-1}); });
  require_error([&] { flatten(weight()); }, {"[flatten]", "keep the weight's shape (2, 3)"});
}

TEST_CASE("optimizers project constrained weights after each update, as Keras 3.15",
          "[cpu][cuda][keras][constraints]") {
  // m = keras.Sequential([keras.Input((2,)), keras.layers.Dense(3,
  //     kernel_initializer=Constant(0.7), kernel_constraint=MaxNorm(1.0),
  //     bias_constraint="non_neg")]); m.compile(SGD(0.1), "mse");
  // m.train_on_batch([[1, 2], [3, -1]], [[0, 1, 0], [1, 0, 1]])
  const std::vector<double> kernel = {0.5899999141693115, 0.5233332514762878, 0.5899999141693115,
                                      0.5733332633972168, 0.6733332872390747, 0.5733332633972168};
  const tf::Tensor x = tf::convert_to_tensor(std::vector<float>{1, 2, 3, -1}, {2, 2});
  const tf::Tensor y = tf::convert_to_tensor(std::vector<float>{0, 1, 0, 1, 0, 1}, {2, 3});
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (bool traced : {false, true}) {
      CAPTURE(traced);
      K::layers::Dense dense(3, {.kernel_initializer = K::initializers::Constant(0.7),
                                 .kernel_constraint = C::MaxNorm(1.0),
                                 .bias_constraint = C::get("non_neg")});
      K::Sequential model({dense});
      model.compile(K::optimizers::SGD(0.1), "mse", {}, {.run_eagerly = !traced});
      model.train_on_batch(x, y);
      check_values(dense.kernel().value(), kernel, 2e-6, 1e-7);
      check_values(dense.bias().value(), {0, 0, 0}, 0, 0);
      CHECK(C::of(dense.kernel()).name() == "MaxNorm");
      CHECK(!C::of(model.optimizer().iterations()).defined());
    }
  }
  // A variable with a custom constraint, updated by a traced step.
  tf::Variable v(tf::convert_to_tensor(std::vector<float>{1, -1, 2}, {3}), "v");
  C::attach(v, K::Constraint("clip_to_1", [](const tf::Tensor& t) {
              return tf::clip_by_value(t, tf::Tensor(-1.0), tf::Tensor(1.0));
            }));
  K::optimizers::SGD sgd(1.0);
  auto step = tf::function([&](const tf::Tensor& g) {
    sgd.apply_gradients({g}, {v});
    return v.value();
  });
  step(tf::convert_to_tensor(std::vector<float>{-0.5, 0.25, 0.5}, {3}));
  check_values(v.value(), {1.0, -1.0, 1.0}, 0, 0);
  step(tf::convert_to_tensor(std::vector<float>{0.5, -0.5, 1.5}, {3}));
  check_values(v.value(), {0.5, -0.5, -0.5}, 0, 0);
  C::attach(v, {});
  CHECK(!C::of(v).defined());
}

TEST_CASE("layer configs carry their constraints, as Keras 3.15's",
          "[cpu][keras][constraints][serialization]") {
  namespace L = K::layers;
  using Config = K::saving::Config;
  const auto config_of = [](const K::Layer& l) {
    return Config::parse(K::saving::get_config_json(l));
  };
  // keras.layers.Dense(3, kernel_constraint=MaxNorm(1.5), bias_constraint="non_neg")
  const L::Dense dense(3, {.kernel_constraint = C::MaxNorm(1.5), .bias_constraint = C::NonNeg()});
  const Config d = config_of(dense);
  CHECK(d["kernel_constraint"] == Config::parse(R"({"module": "keras.constraints",
"class_name": "MaxNorm", "config": {"max_value": 1.5, "axis": 0}, "registered_name": null})"));
  CHECK(d["bias_constraint"] == Config::parse(R"({"module": "keras.constraints",
"class_name": "NonNeg", "config": {}, "registered_name": null})"));
  // keras.layers.Conv2D(4, 3, kernel_constraint=MaxNorm(2.0, [0, 1, 2]))
  const L::Conv2D conv(4, 3, L::Conv2DOptions{.kernel_constraint = C::MaxNorm(2.0, {0, 1, 2})});
  const Config c = config_of(conv);
  CHECK(c["kernel_constraint"] == Config::parse(R"({"module": "keras.constraints",
"class_name": "MaxNorm", "config": {"max_value": 2.0, "axis": [0, 1, 2]},
"registered_name": null})"));
  CHECK(c["bias_constraint"].is_null());
  // keras.layers.Embedding(10, 4, embeddings_constraint=UnitNorm(1))
  const L::Embedding emb(10, 4, L::EmbeddingOptions{.embeddings_constraint = C::UnitNorm({1})});
  CHECK(config_of(emb)["embeddings_constraint"] ==
        Config::parse(R"({"module": "keras.constraints", "class_name": "UnitNorm",
"config": {"axis": 1}, "registered_name": null})"));
  // keras.layers.Dense(2, kernel_constraint=MinMaxNorm(0.5, 1.2, 0.7, axis=1))
  const L::Dense mm(2, {.kernel_constraint = C::MinMaxNorm(0.5, 1.2, 0.7, {1})});
  CHECK(config_of(mm)["kernel_constraint"] ==
        Config::parse(R"({"module": "keras.constraints", "class_name": "MinMaxNorm",
"config": {"min_value": 0.5, "max_value": 1.2, "rate": 0.7, "axis": 1},
"registered_name": null})"));
  // keras.layers.SeparableConv2D(4, 3, depthwise_constraint=NonNeg(),
  //     pointwise_constraint=MaxNorm(1.0, [0, 1, 2]), bias_constraint=UnitNorm())
  const L::SeparableConv2D sep(
      4, 3,
      L::SeparableConv2DOptions{.depthwise_constraint = C::NonNeg(),
                                .pointwise_constraint = C::MaxNorm(1.0, {0, 1, 2}),
                                .bias_constraint = C::UnitNorm()});
  const Config sc = config_of(sep);
  CHECK(sc["depthwise_constraint"]["class_name"] == "NonNeg");
  CHECK(sc["pointwise_constraint"]["config"] ==
        Config::parse(R"({"max_value": 1.0, "axis": [0, 1, 2]})"));
  CHECK(sc["bias_constraint"]["class_name"] == "UnitNorm");
  const L::DepthwiseConv2D dw(3, L::DepthwiseConv2DOptions{.depthwise_constraint = C::NonNeg()});
  CHECK(config_of(dw)["depthwise_constraint"]["class_name"] == "NonNeg");
  const L::BatchNormalization bn(
      {.beta_constraint = C::NonNeg(), .gamma_constraint = C::MaxNorm(3.0)});
  CHECK(config_of(bn)["gamma_constraint"]["class_name"] == "MaxNorm");
  const L::LayerNormalization ln({.gamma_constraint = C::NonNeg()});
  CHECK(config_of(ln)["gamma_constraint"]["class_name"] == "NonNeg");
  const L::PReLU prelu({.alpha_constraint = C::NonNeg()});
  CHECK(config_of(prelu)["alpha_constraint"]["class_name"] == "NonNeg");
  // Read back: the same configs, and the constraints act.
  for (const K::Layer& l :
       {K::Layer(dense), K::Layer(conv), K::Layer(emb), K::Layer(mm), K::Layer(sep), K::Layer(dw),
        K::Layer(bn), K::Layer(ln), K::Layer(prelu)}) {
    CAPTURE(l.class_name());
    const std::string json = K::saving::get_config_json(l);
    const K::Layer back = K::saving::from_config_json(l.class_name(), json);
    CHECK(Config::parse(K::saving::get_config_json(back)) == Config::parse(json));
  }
  const K::Layer back = K::saving::from_config_json(
      "Dense", R"({"units": 2, "kernel_constraint": "max_norm", "bias_constraint": null})");
  CHECK(Config::parse(K::saving::get_config_json(back))["kernel_constraint"]["config"] ==
        Config::parse(R"({"max_value": 2.0, "axis": 0})"));
  require_error(
      [] {
        K::saving::from_config_json(
            "Dense", R"({"units": 2, "kernel_constraint": {"class_name": "Clip", "config": {}}})");
      },
      {"kernel_constraint", "\"Clip\"", "MaxNorm, MinMaxNorm, NonNeg, UnitNorm"});
  require_error(
      [] {
        K::saving::from_config_json("Dense",
                                    R"({"units": 2, "kernel_constraint": {"class_name": "MaxNorm",
"config": {"max_value": -1}}})");
      },
      {"kernel_constraint", "max_value must be finite and >= 0"});
  const L::Dense custom(
      2, {.kernel_constraint = K::Constraint("mine", [](const tf::Tensor& t) { return t; })});
  TF_REQUIRE_THROWS_CONTAINING(K::saving::get_config_json(custom), tf::UnimplementedError,
                               "custom constraint \"mine\"");
}
