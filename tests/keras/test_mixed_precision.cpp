// Keras mixed precision: dtype policies, layers under mixed_float16 against Keras 3.15's outputs,
// gradients reaching the float32 variables, LossScaleOptimizer (skips, growth, traced steps,
// checkpoints) and fit under mixed_float16 against Keras 3.15's history.
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "distribute/replica_context.h"
#include "distribute/strategy.h"
#include "jit/function.h"
#include "keras/callbacks.h"
#include "keras/checkpoint.h"
#include "keras/layers.h"
#include "keras/layers_attention.h"
#include "keras/layers_merge.h"
#include "keras/layers_more.h"
#include "keras/layers_recurrent.h"
#include "keras/mixed_precision.h"
#include "keras/model.h"
#include "keras/optimizers.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace L = tapeflow::keras::layers;
namespace mp = tapeflow::keras::mixed_precision;
namespace opt = tapeflow::keras::optimizers;
namespace ds = tapeflow::distribute;
using tf::testing::check_close;
using tf::testing::check_values;

namespace {

// Sets the global policy while it lives (tests share the process-wide policy).
struct GlobalPolicy {
  explicit GlobalPolicy(const std::string& name) { mp::set_global_policy(mp::Policy(name)); }
  ~GlobalPolicy() { mp::reset_global_policy(); }
  GlobalPolicy(const GlobalPolicy&) = delete;
  GlobalPolicy& operator=(const GlobalPolicy&) = delete;
};

// The weights both sides use: weight k (get_weights() order), element j =
// 0.5 * sin(0.7 j + 0.3 k + 0.1); the weights listed in `positive` get 0.75 + 0.5 * that
// (a BatchNormalization variance).
void fill(const K::Layer& layer, const std::vector<size_t>& positive = {}) {
  std::vector<tf::Tensor> ws;
  const auto current = layer.get_weights();
  for (size_t k = 0; k < current.size(); ++k) {
    const auto n = static_cast<size_t>(current[k].num_elements());
    std::vector<double> v(n);
    for (size_t j = 0; j < n; ++j) {
      v[j] = 0.5 * std::sin(0.7 * static_cast<double>(j) + 0.3 * static_cast<double>(k) + 0.1);
      for (size_t p : positive)
        if (p == k) v[j] = 0.75 + 0.5 * v[j];
    }
    ws.push_back(tf::constant(tf::convert_to_tensor(v, current[k].shape()), current[k].dtype()));
  }
  layer.set_weights(ws);
}

// The inputs both sides use: element j = cos(a j + b), float32.
tf::Tensor input(const tf::TensorShape& shape, double a = 0.37, double b = 0.1) {
  const auto n = static_cast<size_t>(shape.num_elements());
  std::vector<double> v(n);
  for (size_t j = 0; j < n; ++j) v[j] = std::cos(a * static_cast<double>(j) + b);
  return tf::constant(tf::convert_to_tensor(v, shape), tf::float32);
}

// A mixed layer: float16 output and float32 weights, values within float16 rounding of Keras'.
void check_mixed(const K::Layer& layer, const tf::Tensor& y, const std::vector<double>& want) {
  CAPTURE(layer.name());
  CHECK(layer.dtype_policy().name() == "mixed_float16");
  CHECK(layer.compute_dtype() == tf::float16);
  CHECK(layer.variable_dtype() == tf::float32);
  CHECK(layer.dtype() == tf::float32);
  for (const tf::Variable& w : layer.weights()) CHECK(w.dtype() == tf::float32);
  CHECK(y.dtype() == tf::float16);
  check_values(y, want, 4e-3, 2e-3);
}

}  // namespace

TEST_CASE("mixed precision: policy names and dtypes", "[keras][mixed_precision]") {
  const std::vector<std::tuple<std::string, tf::DType, tf::DType>> cases = {
      {"float32", tf::float32, tf::float32},       {"float64", tf::float64, tf::float64},
      {"float16", tf::float16, tf::float16},       {"bfloat16", tf::bfloat16, tf::bfloat16},
      {"mixed_float16", tf::float16, tf::float32}, {"mixed_bfloat16", tf::bfloat16, tf::float32}};
  for (const auto& [name, compute, variable] : cases) {
    const mp::Policy p(name);
    CHECK(p.name() == name);
    CHECK(p.compute_dtype() == compute);
    CHECK(p.variable_dtype() == variable);
    CHECK(p.is_mixed() == (compute != variable));
  }
  tf::testing::require_error([] { mp::Policy("mixed_float32"); },
                             {"mixed_float32", "mixed_float16", "mixed_bfloat16", "float64"});
  tf::testing::require_error([] { mp::set_global_policy("int32"); }, {"'int32'"});
}

TEST_CASE("mixed precision: global policy defaults to floatx and layers keep theirs",
          "[keras][mixed_precision]") {
  CHECK(mp::global_policy().name() == "float32");
  K::backend::set_floatx(tf::float64);
  CHECK(mp::global_policy().name() == "float64");
  K::backend::set_floatx(tf::float32);
  L::Dense before(2);
  {
    GlobalPolicy policy("mixed_bfloat16");
    CHECK(mp::global_policy().name() == "mixed_bfloat16");
    L::Dense during(2);
    CHECK(during.dtype_policy().name() == "mixed_bfloat16");
    CHECK(during.compute_dtype() == tf::bfloat16);
    CHECK(during.dtype() == tf::float32);
    // A policy explicitly set wins over floatx, as Keras.
    K::backend::set_floatx(tf::float64);
    CHECK(mp::global_policy().name() == "mixed_bfloat16");
    K::backend::set_floatx(tf::float32);
    const tf::Tensor y = during(input({2, 3}));
    CHECK(y.dtype() == tf::bfloat16);
    CHECK(during.kernel().dtype() == tf::float32);
  }
  CHECK(mp::global_policy().name() == "float32");
  CHECK(before.dtype_policy().name() == "float32");
  CHECK(before(input({1, 3})).dtype() == tf::float32);
  // A layer's dtype option names a policy; after the build the weights' dtype is fixed.
  L::Activation act("softmax", "", "mixed_float16");
  CHECK(act.compute_dtype() == tf::float16);
  L::Dense built(2);
  built(input({1, 3}));
  TF_REQUIRE_THROWS_CONTAINING(built.set_dtype_policy("mixed_float16"), tf::FailedPreconditionError,
                               "before it is built");
}

TEST_CASE("mixed precision: layers under mixed_float16 match Keras", "[keras][mixed_precision]") {
  // Expected values: tests/keras reference script, Keras 3.15.1 (TensorFlow 2.21 backend, CPU):
  //   keras.mixed_precision.set_global_policy("mixed_float16"); layer.build(...);
  //   fill(layer) (as fill() here); print(layer(input(...)))
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    GlobalPolicy policy("mixed_float16");

    L::Dense dense(3);
    dense.build(tf::TensorShape({tf::None, 4}));
    fill(dense);
    check_mixed(dense, dense(input({2, 4})),
                {0.3198242, 0.7177734, 0.7783203, 0.3041992, 0.3964844, 0.3024902});

    L::Conv2D conv(2, 2);
    conv.build(tf::TensorShape({tf::None, 3, 3, 2}));
    fill(conv);
    check_mixed(
        conv, conv(input({1, 3, 3, 2})),
        {0.2883301, 0.6879883, 0.2998047, 0.6206055, 0.180542, 0.293457, 0.1123047, 0.2058105});

    L::BatchNormalization bn;
    bn.build(tf::TensorShape({tf::None, 3}));
    fill(bn, {3});
    check_mixed(bn, bn(input({4, 3}), false),
                {0.2290039, 0.5888672, 0.609375, 0.1962891, 0.2653809, 0.07000732, 0.1436768,
                 -0.0541687, -0.2558594, 0.1295166, -0.01509857, -0.005905151});
    check_mixed(bn, bn(input({4, 3}), true),
                {0.2624512, 0.9907227, 1.28418, 0.2216797, 0.5419922, 0.4326172, 0.1561279,
                 0.09777832, -0.08172607, 0.1385498, 0.1520996, 0.3127441});
    // The moving statistics are updated in float32 (Keras computes BN in float32).
    check_values(bn.moving_mean().value(), {0.31815898, 0.48577634, 0.42425033}, 1e-5, 1e-6);
    check_values(bn.moving_variance().value(), {0.9569549, 0.99310493, 0.91335917}, 1e-5, 1e-6);

    L::LayerNormalization ln;
    ln.build(tf::TensorShape({tf::None, 4}));
    fill(ln);
    check_mixed(
        ln, ln(input({2, 4})),
        {0.2486572, 0.6835938, 0.3676758, -0.3095703, 0.2658691, 0.5732422, 0.2041016, -0.1923828});

    L::Embedding emb(5, 3);
    emb.build(tf::TensorShape({tf::None, 2}));
    fill(emb);
    check_mixed(emb,
                emb(tf::constant(tf::convert_to_tensor(std::vector<int64_t>{0, 3, 4, 1}, {2, 2}),
                                 tf::int32)),
                {0.04992676, 0.3586426, 0.4987793, 0.05828857, 0.364502, 0.4992676, 0.3991699,
                 0.1114502, -0.2287598, 0.4042969, 0.1196289, -0.2213135});

    L::LSTM lstm(3);
    lstm.build(tf::TensorShape({tf::None, 3, 2}));
    fill(lstm);
    check_mixed(lstm, lstm(input({2, 3, 2})),
                {-0.2592773, -0.2539062, -0.09631348, -0.0803833, -0.09295654, -0.0562439});

    L::GRU gru(3);
    gru.build(tf::TensorShape({tf::None, 3, 2}));
    fill(gru);
    check_mixed(gru, gru(input({2, 3, 2})),
                {-0.421875, -0.2124023, 0.008483887, -0.05679321, 0.2001953, 0.3371582});

    L::MultiHeadAttention mha(2, 2);
    const tf::Tensor x = input({1, 3, 4});
    mha(x, x);
    fill(mha);
    check_mixed(mha, mha(x, x),
                {0.5888672, 0.2609863, -0.1894531, -0.5507812, 0.5854492, 0.2600098, -0.1877441,
                 -0.546875, 0.5820312, 0.2578125, -0.1881104, -0.5454102});

    // The guide's float32 output layer: float16 logits in, float32 probabilities out.
    const std::vector<double> probs = {0.2456723, 0.3657492, 0.3885784,
                                       0.3231049, 0.3543419, 0.3225532};
    L::Activation act("softmax", "", "float32");
    L::Softmax softmax(-1, "", "float32");
    for (const K::Layer& out : {K::Layer(act), K::Layer(softmax)}) {
      CHECK(out.dtype_policy().name() == "float32");
      const tf::Tensor p = out(dense(input({2, 4})));
      CHECK(p.dtype() == tf::float32);
      check_values(p, probs, 2e-3, 1e-4);
    }
  }
}

TEST_CASE("mixed precision: gradient of a mixed Dense reaches its float32 kernel",
          "[keras][mixed_precision]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    const tf::Tensor x = input({2, 3});
    L::Dense mixed(2, "tanh");
    mixed.set_dtype_policy("mixed_float16");
    mixed.build(tf::TensorShape({tf::None, 3}));
    fill(mixed);
    tf::Tensor g;
    {
      tf::GradientTape tape;
      const tf::Tensor y = mixed(x);
      REQUIRE(y.dtype() == tf::float16);
      const tf::Tensor loss = tf::reduce_sum(tf::square(tf::cast(y, tf::float32)));
      g = tape.gradient(loss, std::vector<tf::Variable>{mixed.kernel()})[0];
    }
    REQUIRE(g.defined());
    CHECK(g.dtype() == tf::float32);
    // Central differences of the same model in float64.
    L::Dense ref(2, "tanh");
    ref.set_dtype_policy("float64");
    ref.build(tf::TensorShape({tf::None, 3}));
    fill(ref);
    const tf::Tensor x64 = tf::cast(x, tf::float64);
    auto loss64 = [&] { return tf::reduce_sum(tf::square(ref(x64))).item<double>(); };
    const std::vector<double> k0 = tf::detail::to_double_vector(ref.kernel().value());
    std::vector<double> fd(k0.size());
    const double h = 1e-6;
    for (size_t i = 0; i < k0.size(); ++i) {
      std::vector<double> k = k0;
      k[i] = k0[i] + h;
      ref.kernel().assign(tf::convert_to_tensor(k, {3, 2}));
      const double up = loss64();
      k[i] = k0[i] - h;
      ref.kernel().assign(tf::convert_to_tensor(k, {3, 2}));
      fd[i] = (up - loss64()) / (2 * h);
    }
    check_values(g, fd, 2e-2, 5e-3);
  }
}

namespace {

struct LossScaleRun {
  std::vector<double> x, m, v, scale;
  std::vector<int64_t> iterations, counter;
};

// Scaled gradients, one row per step: steps 2 and 3 have an inf and a NaN.
const std::vector<std::vector<double>> kScaledGrads = {
    {4.0, -8.0}, {INFINITY, 1.0}, {2.0, NAN}, {1.0, 0.5}, {-0.5, 0.25}, {0.5, 0.5}, {0.25, -1.0}};

void record(LossScaleRun& r, const tf::Variable& x, const mp::LossScaleOptimizer& lso) {
  for (double d : tf::detail::to_double_vector(x.value())) r.x.push_back(d);
  const auto slots = lso.slots();
  REQUIRE(slots.size() == 1);
  for (double d : tf::detail::to_double_vector(slots[0].second[0].value())) r.m.push_back(d);
  for (double d : tf::detail::to_double_vector(slots[0].second[1].value())) r.v.push_back(d);
  r.scale.push_back(lso.dynamic_scale().value().item<float>());
  r.iterations.push_back(lso.iterations().value().item<int64_t>());
  r.counter.push_back(lso.step_counter().value().item<int64_t>());
}

}  // namespace

TEST_CASE("mixed precision: LossScaleOptimizer skips non-finite steps and grows the scale",
          "[keras][mixed_precision]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    for (const bool traced : {false, true}) {
      CAPTURE(traced);
      tf::Variable x(tf::constant({1.0f, 2.0f}), "x");
      mp::LossScaleOptimizer lso(opt::Adam(0.1), {.initial_scale = 8, .dynamic_growth_steps = 2});
      CHECK(lso.dynamic_scale().value().item<float>() == 8.0f);
      CHECK(lso.scale_loss(tf::constant(1.5f)).item<float>() == 12.0f);
      auto step = tf::function([&](const tf::Tensor& g) {
        lso.apply_gradients({g}, {x});
        return g;
      });
      // Reference: a plain Adam that sees only the finite steps, unscaled.
      tf::Variable ref(tf::constant({1.0f, 2.0f}), "ref");
      opt::Adam adam(0.1);
      LossScaleRun run;
      double scale = 8;
      int64_t counter = 0, iterations = 0;
      for (const auto& row : kScaledGrads) {
        const tf::Tensor g = tf::convert_to_tensor(std::vector<float>(row.begin(), row.end()), {2});
        if (traced)
          step(g);
        else
          lso.apply_gradients({g}, {x});
        const bool finite = std::isfinite(row[0]) && std::isfinite(row[1]);
        if (finite) {
          adam.apply_gradients({tf::divide(g, tf::constant(static_cast<float>(scale)))}, {ref});
          ++iterations;
          if (++counter == 2) {
            counter = 0;
            scale *= 2;
          }
        } else {
          counter = 0;
          scale /= 2;
        }
        record(run, x, lso);
        check_close(x.value(), ref.value(), 1e-6, 1e-7);
        CHECK(run.scale.back() == scale);
        CHECK(run.counter.back() == counter);
        CHECK(run.iterations.back() == iterations);
        const auto slots = adam.slots();
        check_close(lso.slots()[0].second[0].value(), slots[0].second[0].value(), 1e-6, 1e-7);
        check_close(lso.slots()[0].second[1].value(), slots[0].second[1].value(), 1e-6, 1e-7);
      }
      // 8 -> finite (count 1) -> inf: 4 -> nan: 2 -> two finite: 4 -> two finite: 8.
      CHECK(run.scale == std::vector<double>{8, 4, 2, 2, 4, 4, 8});
    }
  }
}

TEST_CASE("mixed precision: LossScaleOptimizer errors and handle", "[keras][mixed_precision]") {
  opt::SGD sgd(0.1);
  tf::testing::require_error([&] { mp::LossScaleOptimizer(sgd, {.initial_scale = 0}); },
                             {"LossScaleOptimizer", "initial_scale"});
  tf::testing::require_error([&] { mp::LossScaleOptimizer(sgd, {.dynamic_growth_steps = 0}); },
                             {"LossScaleOptimizer", "dynamic_growth_steps"});
  mp::LossScaleOptimizer lso(sgd);
  CHECK(lso.initial_scale() == 32768.0);
  CHECK(lso.dynamic_growth_steps() == 2000);
  CHECK(lso.is_loss_scaled());
  CHECK_FALSE(lso.inner_optimizer().is_loss_scaled());
  CHECK(lso.iterations().handle_id() == sgd.iterations().handle_id());
  tf::testing::require_error([&] { mp::LossScaleOptimizer(lso, mp::LossScaleOptions{}); },
                             {"already"});
  TF_REQUIRE_THROWS_CONTAINING(mp::LossScaleOptimizer::from(sgd), tf::FailedPreconditionError,
                               "not a LossScaleOptimizer");
  tf::testing::require_error([&] { lso.scale_loss(tf::constant(int64_t{1})); }, {"floating"});
  const auto tracked = lso.tracked_variables();
  REQUIRE(tracked.size() >= 3);
  CHECK(tracked[0].first == "step_counter");
  CHECK(tracked[1].first == "dynamic_scale");
  CHECK(tracked[2].first == "iterations");
}

TEST_CASE("mixed precision: checkpoints keep the loss scale", "[keras][mixed_precision]") {
  const auto dir = std::filesystem::temp_directory_path() / "tapeflow_mixed_precision_ckpt";
  std::filesystem::create_directories(dir);
  tf::Variable x(tf::constant({1.0f, 2.0f}), "x");
  mp::LossScaleOptimizer lso(opt::SGD(0.1), {.initial_scale = 16, .dynamic_growth_steps = 5});
  lso.apply_gradients({tf::constant({INFINITY, 1.0f})}, {x});
  lso.apply_gradients({tf::constant({1.0f, 1.0f})}, {x});
  REQUIRE(lso.dynamic_scale().value().item<float>() == 8.0f);
  tf::train::Checkpoint ckpt({{"x", x}, {"optimizer", lso}});
  const std::string path = ckpt.write((dir / "ckpt").string());
  tf::Variable y(tf::constant({0.0f, 0.0f}), "x");
  mp::LossScaleOptimizer fresh(opt::SGD(0.1), {.initial_scale = 16, .dynamic_growth_steps = 5});
  tf::train::Checkpoint restored({{"x", y}, {"optimizer", fresh}});
  restored.restore(path);
  CHECK(fresh.dynamic_scale().value().item<float>() == 8.0f);
  CHECK(fresh.step_counter().value().item<int64_t>() == 1);
  CHECK(fresh.iterations().value().item<int64_t>() == 1);
  check_close(y.value(), x.value());
  std::filesystem::remove_all(dir);
}

TEST_CASE("mixed precision: compile wraps the optimizer and fit matches Keras",
          "[keras][mixed_precision]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    {
      GlobalPolicy policy("mixed_bfloat16");
      K::Sequential m({L::Dense(1)});
      m.compile(opt::SGD(0.1), "mse");
      CHECK_FALSE(m.optimizer().is_loss_scaled());  // bfloat16 needs no loss scaling
    }
    GlobalPolicy policy("mixed_float16");
    // Keras 3.15.1 (TensorFlow 2.21 backend, CPU), under mixed_float16:
    //   model = Sequential([Input((3,)), Dense(4, "relu"), Dense(1),
    //                       Activation("linear", dtype="float32")]); fill() each layer
    //   model.compile(SGD(0.1), "mse")  # wraps SGD in a LossScaleOptimizer
    //   model.fit(x, y, batch_size=4, epochs=5, shuffle=False)
    //   with x = input((8, 3)), y = input((8, 1), 0.9, 0.3)
    K::Sequential model({L::Dense(4, "relu"), L::Dense(1), L::Activation("linear", "", "float32")});
    model.build(tf::TensorShape({tf::None, 3}));
    for (const K::Layer& l : model.layers()) fill(l);
    model.compile(opt::SGD(0.1), "mse");
    REQUIRE(model.optimizer().is_loss_scaled());
    // An explicit LossScaleOptimizer is not wrapped again.
    mp::LossScaleOptimizer lso = mp::LossScaleOptimizer::from(model.optimizer());
    const tf::Tensor x = input({8, 3});
    const tf::Tensor y = input({8, 1}, 0.9, 0.3);
    const K::callbacks::History h =
        model.fit(x, y, {.epochs = 5, .batch_size = 4, .verbose = 0, .shuffle = false});
    const std::vector<double> want = {0.696593, 0.4374948, 0.3903253, 0.3706641, 0.3541716};
    const auto& loss = h.history.at("loss");
    REQUIRE(loss.size() == want.size());
    for (size_t i = 0; i < want.size(); ++i) CHECK(loss[i] == Approx(want[i]).epsilon(5e-3));
    CHECK(lso.dynamic_scale().value().item<float>() == 32768.0f);
    CHECK(lso.iterations().value().item<int64_t>() == 10);
    CHECK(lso.step_counter().value().item<int64_t>() == 10);
    CHECK(model.predict(x).dtype() == tf::float32);
    CHECK(model.layers()[0].weights()[0].dtype() == tf::float32);
    model.compile(lso, "mse");
    CHECK(model.optimizer().loss_scale_state() == lso.loss_scale_state());
  }
}

TEST_CASE("mixed precision: LossScaleOptimizer under MirroredStrategy",
          "[keras][mixed_precision][cpu][multi_device]") {
  if (!tf::testing::split_cpu_in_two()) return;
  ds::MirroredStrategy strategy({"/cpu:0", "/cpu:1"});
  tf::Variable w;
  opt::Optimizer mirrored;
  {
    auto scope = strategy.scope();
    w = tf::Variable(tf::constant({1.0f, 2.0f}), "w");
    mirrored =
        mp::LossScaleOptimizer(opt::SGD(0.5), {.initial_scale = 4, .dynamic_growth_steps = 2});
  }
  const mp::LossScaleOptimizer lso = mp::LossScaleOptimizer::from(mirrored);
  REQUIRE(lso.dynamic_scale().is_mirrored());
  // Replica r's scaled gradient is row * (r + 1); in step 2 only replica 1 has an inf, so both
  // replicas must skip.
  const std::vector<std::vector<float>> rows = {{4.0f, -4.0f}, {2.0f, 2.0f}, {1.0f, 3.0f}};
  for (size_t s = 0; s < rows.size(); ++s)
    strategy.run([&] {
      const int r = ds::get_replica_context()->replica_id_in_sync_group();
      std::vector<float> g = rows[s];
      for (float& e : g) e *= static_cast<float>(r + 1);
      if (s == 1 && r == 1) g[0] = INFINITY;
      mirrored.apply_gradients({tf::convert_to_tensor(g, {2})}, {w});
      return 0;
    });
  // Summed gradients: 3 * row; step 1 with scale 4, step 2 skipped (scale 2), step 3 with 2.
  // w = [1, 2] - 0.5 * 3 * [4, -4] / 4 - 0.5 * 3 * [1, 3] / 2 = [-1.25, 1.25].
  for (const tf::Variable& copy : strategy.experimental_local_results(w))
    check_values(copy.value(), {-1.25, 1.25}, 1e-6, 1e-6);
  for (const tf::Variable& copy : strategy.experimental_local_results(lso.dynamic_scale()))
    check_values(copy.value(), {2.0}, 0, 0);
  for (const tf::Variable& copy : strategy.experimental_local_results(lso.iterations()))
    CHECK(copy.value().item<int64_t>() == 2);
}

TEST_CASE("mixed precision: autocast scopes cast floating variable reads",
          "[keras][mixed_precision]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    tf::Variable w(tf::constant({1.5f, -2.0f}), "w");
    tf::Variable n(tf::constant({int64_t{3}}), "n", false);
    tf::Tensor g;
    {
      tf::GradientTape tape;
      tf::detail::AutocastScope cast16(tf::float16);
      CHECK(w.value().dtype() == tf::float16);
      CHECK(w.read_value().dtype() == tf::float32);
      CHECK(n.value().dtype() == tf::int64);  // only floating variables are cast
      {
        // A layer that does not autocast clears the outer scope (Keras' AutocastScope(None)).
        tf::detail::AutocastScope none(std::nullopt);
        CHECK(w.value().dtype() == tf::float32);
      }
      const tf::Tensor loss = tf::reduce_sum(tf::cast(tf::square(w.value()), tf::float32));
      g = tape.gradient(loss, std::vector<tf::Variable>{w})[0];
    }
    CHECK(w.value().dtype() == tf::float32);
    REQUIRE(g.defined());
    CHECK(g.dtype() == tf::float32);
    check_values(g, {3.0, -4.0}, 0, 0);
    // Traced: the cast is part of the graph and the variable's new values are read at replay.
    auto f = tf::function([&] {
      tf::detail::AutocastScope cast16(tf::float16);
      return w.value();
    });
    CHECK(f().dtype() == tf::float16);
    w.assign(tf::constant({0.25f, 4.0f}));
    check_values(f(), {0.25, 4.0}, 0, 0);
  }
}

TEST_CASE("mixed precision: attention merges initial states and minimize under mixed_float16",
          "[keras][mixed_precision]") {
  // Review findings: these layers computed in the variable dtype (float32) and failed on the
  // float16 activations or gave float32 outputs; Keras 3.15 gives float16.
  {
    GlobalPolicy policy("mixed_float16");
    const tf::Tensor q = tf::random::normal({2, 3, 4}, 0.0, 1.0, tf::float32, 1);
    const tf::Tensor v = tf::random::normal({2, 5, 4}, 0.0, 1.0, tf::float32, 2);
    L::Attention att;
    const tf::Tensor a = att(q, v);
    CHECK(a.dtype() == tf::float16);
    const tf::Tensor want = L::Attention()(tf::cast(tf::cast(q, tf::float16), tf::float32),
                                           tf::cast(tf::cast(v, tf::float16), tf::float32));
    check_close(tf::cast(a, tf::float32), tf::cast(want, tf::float32), 2e-2, 2e-2);
    L::AdditiveAttention add_att;
    CHECK(add_att(q, v).dtype() == tf::float16);
    L::MultiHeadAttention mha(2, 3);
    CHECK(mha(q, v).dtype() == tf::float16);
    L::Add add;
    CHECK(add({q, q}).dtype() == tf::float16);
    L::LSTM lstm(3);
    const auto out = lstm.call_with_state(q, {tf::zeros({2, 3}), tf::zeros({2, 3})});
    CHECK(out[0].dtype() == tf::float16);
  }
  // minimize differentiates the scaled loss and the update unscales it: one step equals SGD's.
  tf::Variable x(tf::constant({1.0f, -2.0f}), "x");
  tf::Variable y(tf::constant({1.0f, -2.0f}), "y");
  mp::LossScaleOptimizer lso(opt::SGD(0.1), {.initial_scale = 1024});
  opt::SGD sgd(0.1);
  lso.minimize([&] { return tf::reduce_sum(tf::square(x.value())); }, {x});
  sgd.minimize([&] { return tf::reduce_sum(tf::square(y.value())); }, {y});
  check_values(x.value(), {0.8, -1.6}, 1e-6, 1e-6);
  check_close(x.value(), y.value(), 1e-6, 1e-7);
}
