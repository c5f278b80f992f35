// Weight constraints (keras/constraints.h): Keras 3.15's values of MaxNorm, MinMaxNorm, NonNeg
// and UnitNorm on every device, their application after each optimizer update (a Dense layer
// trained one step against Keras' result, eagerly and traced, and under a custom weight),
// their configs in the layers' get_config and back, and the errors.
#include <cmath>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/constraints.h"
#include "keras/initializers.h"
#include "keras/layers.h"
#include "keras/layers_attention.h"
#include "keras/layers_conv.h"
#include "keras/layers_core.h"
#include "keras/layers_kerasmore.h"
#include "keras/layers_misc.h"
#include "keras/layers_more.h"
#include "keras/layers_recurrent.h"
#include "keras/layers_rnn_cells.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "keras/serialization.h"
#include "keras/serialization_json.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
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

TEST_CASE("recurrent layers and cells project their constrained weights, as Keras 3.15",
          "[cpu][cuda][keras][constraints]") {
  namespace L = K::layers;
  const tf::Tensor x =
      tf::convert_to_tensor(std::vector<float>{1, 2, 0.5, -1, 2, 0, -1, 1, 0, 3, 1, 1}, {2, 3, 2});
  const tf::Tensor y = tf::convert_to_tensor(std::vector<float>{1, 0, 0, 1}, {2, 2});
  // l = keras.layers.LSTM(2, kernel_initializer=Constant(0.3),
  //     recurrent_initializer=Constant(0.4), kernel_constraint=MaxNorm(0.5),
  //     recurrent_constraint=MaxNorm(0.3), bias_constraint=MaxNorm(0.1, axis=0))
  // in keras.Sequential, compile(SGD(0.5), "mse"), train_on_batch(x, y).
  const std::vector<double> lstm_kernel = {
      0.31336623430252075, 0.28941452503204346, 0.30501240491867065, 0.29591700434684753,
      0.36325061321258545, 0.24769048392772675, 0.3198547959327698,  0.2847743630409241,
      0.28623509407043457, 0.31411829590797424, 0.29341042041778564, 0.30570369958877563,
      0.23095645010471344, 0.3644614815711975,  0.2801862061023712,  0.31833136081695557};
  const std::vector<double> lstm_bias = {0.00011331855785101652, -8.275127584056463e-06,
                                         0.0709817111492157,     0.07043448090553284,
                                         0.0006824261508882046,  -0.0002903529384639114,
                                         2.0989044060115702e-05, 0.00012928896467201412};
  // r = keras.layers.RNN(keras.layers.GRUCell(2, kernel_initializer=Constant(0.3),
  //     recurrent_initializer=Constant(-0.2), bias_initializer=Constant(-0.1),
  //     kernel_constraint=UnitNorm(), recurrent_constraint=NonNeg(), bias_constraint=NonNeg()))
  // trained likewise.
  const std::vector<double> gru_kernel = {
      0.648156464099884,  0.7645459771156311, 0.6981267333030701, 0.7114441990852356,
      0.9328038096427917, 0.5414490103721619, 0.761506974697113,  0.6445688009262085,
      0.715973973274231,  0.7027422785758972, 0.360384076833725,  0.8407333493232727};
  const std::vector<double> gru_bias = {
      0, 0, 0, 0, 0.009461835026741028, 0.0044742003083229065, 0, 0, 0, 0, 0, 0};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (bool traced : {false, true}) {
      CAPTURE(traced);
      L::LSTM lstm(2, L::LSTMOptions{.kernel_initializer = K::initializers::Constant(0.3),
                                     .recurrent_initializer = K::initializers::Constant(0.4),
                                     .kernel_constraint = C::MaxNorm(0.5),
                                     .recurrent_constraint = C::MaxNorm(0.3),
                                     .bias_constraint = C::MaxNorm(0.1, {0})});
      K::Sequential m1({lstm});
      m1.compile(K::optimizers::SGD(0.5), "mse", {}, {.run_eagerly = !traced});
      m1.train_on_batch(x, y);
      check_values(lstm.kernel().value(), lstm_kernel, 2e-6, 1e-7);
      // Every column of the (2, 8) recurrent kernel scaled to norm 0.3: 0.3 / sqrt(2).
      check_values(lstm.recurrent_kernel().value(), std::vector<double>(16, 0.3 / std::sqrt(2.0)),
                   2e-6, 1e-7);
      check_values(lstm.weights()[2].value(), lstm_bias, 2e-5, 1e-7);

      L::GRUCell cell(2, {.kernel_initializer = K::initializers::Constant(0.3),
                          .recurrent_initializer = K::initializers::Constant(-0.2),
                          .bias_initializer = K::initializers::Constant(-0.1),
                          .kernel_constraint = C::UnitNorm(),
                          .recurrent_constraint = C::NonNeg(),
                          .bias_constraint = C::NonNeg()});
      L::RNN rnn(cell);
      K::Sequential m2({rnn});
      m2.compile(K::optimizers::SGD(0.5), "mse", {}, {.run_eagerly = !traced});
      m2.train_on_batch(x, y);
      check_values(rnn.weights()[0].value(), gru_kernel, 2e-6, 1e-7);
      check_values(rnn.weights()[1].value(), std::vector<double>(12, 0.0), 0, 0);
      check_values(rnn.weights()[2].value(), gru_bias, 2e-5, 1e-7);
    }
  }
  // SimpleRNN, its cell and ConvLSTM1D attach theirs too.
  L::SimpleRNN simple(3, L::SimpleRNNOptions{.kernel_constraint = C::NonNeg(),
                                             .recurrent_constraint = C::UnitNorm(),
                                             .bias_constraint = C::MaxNorm(1.0)});
  simple.build({tf::None, 4, 2});
  CHECK(C::of(simple.kernel()).name() == "NonNeg");
  CHECK(C::of(simple.recurrent_kernel()).name() == "UnitNorm");
  CHECK(C::of(simple.weights()[2]).name() == "MaxNorm");
  L::ConvLSTM1D conv(2, {3}, {.kernel_constraint = C::NonNeg(), .bias_constraint = C::NonNeg()});
  conv.build({tf::None, 4, 6, 2});
  CHECK(C::of(conv.weights()[0]).name() == "NonNeg");
  CHECK(!C::of(conv.weights()[1]).defined());
  CHECK(C::of(conv.weights()[2]).name() == "NonNeg");
}

TEST_CASE("EinsumDense, ReversibleEmbedding and the attention layers project theirs",
          "[cpu][cuda][keras][constraints]") {
  namespace L = K::layers;
  // keras.layers.EinsumDense("ab,bc->ac", output_shape=3, bias_axes="c",
  //     kernel_initializer=Constant(0.7), kernel_constraint=MaxNorm(1.0),
  //     bias_constraint="non_neg"), trained as the Dense of the test above: the same values.
  const std::vector<double> kernel = {0.5899999141693115, 0.5233332514762878, 0.5899999141693115,
                                      0.5733332633972168, 0.6733332872390747, 0.5733332633972168};
  const tf::Tensor x = tf::convert_to_tensor(std::vector<float>{1, 2, 3, -1}, {2, 2});
  const tf::Tensor y = tf::convert_to_tensor(std::vector<float>{0, 1, 0, 1, 0, 1}, {2, 3});
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    L::EinsumDense e("ab,bc->ac", 3,
                     {.bias_axes = "c",
                      .kernel_initializer = K::initializers::Constant(0.7),
                      .kernel_constraint = C::MaxNorm(1.0),
                      .bias_constraint = C::NonNeg()});
    K::Sequential model({e});
    model.compile(K::optimizers::SGD(0.1), "mse");
    model.train_on_batch(x, y);
    check_values(e.kernel().value(), kernel, 2e-6, 1e-7);
    check_values(e.bias().value(), {0, 0, 0}, 0, 0);

    // A large step, then every constrained weight satisfies its constraint.
    L::MultiHeadAttention mha(
        2, 3, {.kernel_constraint = C::NonNeg(), .bias_constraint = C::MaxNorm(0.01, {0})});
    L::GroupQueryAttention gqa(2, 4, 2, {.kernel_constraint = C::NonNeg()});
    const tf::Tensor q = tf::random::normal({2, 3, 4}, 0.0, 1.0, tf::float32, 3);
    for (K::Layer* layer : std::initializer_list<K::Layer*>{&mha, &gqa}) {
      CAPTURE(layer->class_name());
      tf::GradientTape tape;
      const tf::Tensor out = layer == &mha ? mha(q, q) : gqa(q, q);
      const tf::Tensor loss = tf::reduce_sum(tf::square(out - 5.0));
      std::vector<tf::Variable> vars = layer->trainable_variables();
      K::optimizers::SGD sgd(10.0);
      sgd.apply_gradients(tape.gradient(loss, vars), vars);
      for (const tf::Variable& v : vars) {
        CAPTURE(v.name());
        if (v.name().find("kernel") != std::string::npos) {
          CHECK(C::of(v).name() == "NonNeg");
          CHECK(tf::reduce_min(v.value()).item<float>() >= 0.0f);
        }
      }
    }
    // The query bias (2, 3) and the output bias (4,): norms over axis 0 at most 0.01.
    for (const tf::Tensor& b : {mha.weights()[1].value(), mha.weights()[7].value()}) {
      const std::vector<float> norms = tf::sqrt(tf::reduce_sum(tf::square(b), {0})).numpy<float>();
      for (float n : norms) CHECK(n <= 0.01f * (1 + 1e-5f));
    }

    L::ReversibleEmbedding rev(
        5, 3, {.tie_weights = false, .embeddings_constraint = C::MaxNorm(0.5, {1})});
    rev.build({tf::None});
    CHECK(C::of(rev.embeddings()).name() == "MaxNorm");
    CHECK(!C::of(rev.reverse_embeddings()).defined());  // as Keras' (none on the reverse table)
  }
}

TEST_CASE("recurrent, EinsumDense and attention configs carry their constraints",
          "[cpu][keras][constraints][serialization]") {
  namespace L = K::layers;
  using Config = K::saving::Config;
  const auto config_of = [](const K::Layer& l) {
    return Config::parse(K::saving::get_config_json(l));
  };
  const L::LSTM lstm(2, L::LSTMOptions{.kernel_constraint = C::MaxNorm(0.5),
                                       .recurrent_constraint = C::NonNeg(),
                                       .bias_constraint = C::MaxNorm(0.1, {0})});
  // json.dumps of that LSTM's get_config() (Keras 3.15), its three constraint keys.
  const Config want = Config::parse(R"({"kernel_constraint": {"module": "keras.constraints",
"class_name": "MaxNorm", "config": {"max_value": 0.5, "axis": 0}, "registered_name": null},
"recurrent_constraint": {"module": "keras.constraints", "class_name": "NonNeg", "config": {},
"registered_name": null}, "bias_constraint": {"module": "keras.constraints", "class_name":
"MaxNorm", "config": {"max_value": 0.1, "axis": 0}, "registered_name": null}})");
  const Config lc = config_of(lstm);
  for (const char* k : {"kernel_constraint", "recurrent_constraint", "bias_constraint"})
    CHECK(lc[k] == want[k]);
  const L::RNN rnn(L::GRUCell(2, {.kernel_constraint = C::UnitNorm()}));
  // Keras: r.get_config()["cell"]["config"]["kernel_constraint"].
  CHECK(config_of(rnn)["cell"]["config"]["kernel_constraint"] ==
        Config::parse(R"({"module": "keras.constraints", "class_name": "UnitNorm", "config":
{"axis": 0}, "registered_name": null})"));
  const L::EinsumDense e("ab,bc->ac", 3, {.bias_axes = "c", .kernel_constraint = C::MaxNorm(1.0)});
  CHECK(config_of(e)["kernel_constraint"] ==
        Config::parse(R"({"module": "keras.constraints", "class_name": "MaxNorm", "config":
{"max_value": 1.0, "axis": 0}, "registered_name": null})"));
  const L::MultiHeadAttention mha(2, 3, {.bias_constraint = C::NonNeg()});
  CHECK(config_of(mha)["bias_constraint"]["class_name"] == "NonNeg");
  const L::GroupQueryAttention gqa(2, 4, 2, {.kernel_constraint = C::NonNeg()});
  const L::ReversibleEmbedding rev(5, 3, {.embeddings_constraint = C::NonNeg()});
  const L::SimpleRNN simple(2, L::SimpleRNNOptions{.recurrent_constraint = C::NonNeg()});
  const L::GRU gru(2, L::GRUOptions{.bias_constraint = C::NonNeg()});
  const L::ConvLSTM2D conv(2, {3, 3}, {.recurrent_constraint = C::NonNeg()});
  const L::Bidirectional bi(L::LSTM(2, L::LSTMOptions{.kernel_constraint = C::NonNeg()}));
  for (const K::Layer& l :
       {K::Layer(lstm), K::Layer(rnn), K::Layer(e), K::Layer(mha), K::Layer(gqa), K::Layer(rev),
        K::Layer(simple), K::Layer(gru), K::Layer(conv), K::Layer(bi)}) {
    CAPTURE(l.class_name());
    const std::string json = K::saving::get_config_json(l);
    const K::Layer back = K::saving::from_config_json(l.class_name(), json);
    CHECK(Config::parse(K::saving::get_config_json(back)) == Config::parse(json));
  }
  // Bidirectional's backward copy keeps the constraint.
  CHECK(config_of(bi)["backward_layer"]["config"]["kernel_constraint"]["class_name"] == "NonNeg");
}
