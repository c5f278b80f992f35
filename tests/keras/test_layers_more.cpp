// The layers of keras/layers_more.h against Keras 3.15 (on TF 2.21): Embedding,
// LayerNormalization, the global poolings, Reshape, Activation, Rescaling, Conv1D, the 1-D
// poolings and UpSampling2D. Values and gradients on the same weights, float64 finite
// differences, names and weight lists, Sequential, summary(), traced functions, every device,
// save_weights/load_weights and fit().
#include <cmath>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/layers.h"
#include "keras/layers_more.h"
#include "keras/model.h"
#include "keras/serialization.h"
#include "keras/training.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace layers = tf::keras::layers;
using tf::testing::check_values;

namespace {

std::vector<double> vals(const tf::Tensor& t) {
  return tf::detail::to_double_vector(t);
}

struct Float64Layers {
  Float64Layers() { tf::keras::backend::set_floatx(tf::float64); }
  ~Float64Layers() { tf::keras::backend::set_floatx(tf::float32); }
};

// The inputs and weights of the Keras reference script: sin(a * i + b) * s in float32 (numpy
// computes it in float64 and rounds, as here).
tf::Tensor seq(const tf::TensorShape& shape, double a, double b = 0.0, double s = 1.0) {
  std::vector<float> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(std::sin(a * double(i) + b) * s);
  return tf::constant(v, shape);
}
// The cotangent of the reference gradients: cos(0.3 * i) in y's shape.
tf::Tensor cotangent(const tf::TensorShape& shape, tf::DType dtype = tf::float32) {
  std::vector<double> v(static_cast<size_t>(shape.num_elements()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = std::cos(0.3 * double(i));
  return tf::cast(tf::convert_to_tensor(v, shape), dtype);
}
// 0.1 * i in float32 (numpy's float32 arithmetic).
tf::Tensor tenths(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = 0.1f * static_cast<float>(i);
  return tf::constant(v, {n});
}

// y = layer(x) and the gradients of sum(y * cotangent) with respect to x and the layer's
// trainable variables, in that order.
std::pair<tf::Tensor, std::vector<tf::Tensor>> value_and_grads(const tf::keras::Layer& layer,
                                                               const tf::Tensor& x) {
  if (!layer.built()) layer.build(tf::keras::detail::with_unknown_batch(x.shape()));
  const bool floating = tf::is_floating(x.dtype());
  tf::GradientTape tape;
  if (floating) tape.watch(x);
  tf::Tensor y = layer(x);
  tf::Tensor loss = tf::reduce_sum(y * cotangent(y.shape(), y.dtype()));
  std::vector<tf::Variable> vars = layer.trainable_variables();
  std::vector<tf::Tensor> grads{floating ? tape.gradient(loss, x) : tf::Tensor()};
  tf::GradientTape tape2;
  tf::Tensor loss2 = tf::reduce_sum(layer(x) * cotangent(y.shape(), y.dtype()));
  for (tf::Tensor g : tape2.gradient(loss2, vars)) grads.push_back(g);
  return {y, grads};
}

// Central differences of sum(layer(x) * cotangent) in float64 against the tape's gradients,
// with respect to x (when floating) and every trainable variable.
void check_finite_differences(const tf::keras::Layer& layer, const tf::Tensor& x) {
  auto [y, grads] = value_and_grads(layer, x);
  const tf::Tensor c = cotangent(y.shape(), tf::float64);
  auto loss = [&](const tf::Tensor& in) { return tf::reduce_sum(layer(in) * c).item<double>(); };
  const double h = 1e-6;
  if (x.dtype() == tf::float64) {
    const std::vector<double> fd = tf::testing::central_differences(
        [&](const std::vector<double>& v) { return loss(tf::convert_to_tensor(v, x.shape())); },
        vals(x), h);
    check_values(grads[0], fd, 1e-6, 1e-7);
  }
  auto vars = layer.trainable_variables();
  for (size_t k = 0; k < vars.size(); ++k) {
    CAPTURE(vars[k].name());
    const auto w = vals(vars[k].value());
    const std::vector<double> fd = tf::testing::central_differences(
        [&](const std::vector<double>& v) {
          vars[k].assign(tf::convert_to_tensor(v, vars[k].shape()));
          return loss(x);
        },
        w, h);
    vars[k].assign(tf::convert_to_tensor(w, vars[k].shape()));
    check_values(grads[k + 1], fd, 1e-6, 1e-7);
  }
}

std::vector<std::string> weight_names(const tf::keras::Layer& l) {
  std::vector<std::string> out;
  for (const auto& [name, v] : l.tracked_variables()) out.push_back(name);
  return out;
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

}  // namespace

TEST_CASE("Embedding looks up rows and matches Keras' values and table gradient", "[cpu][keras]") {
  layers::Embedding e(5, 3);
  CHECK(starts_with(e.name(), "embedding"));
  CHECK(e.class_name() == "Embedding");
  CHECK(e.input_dim() == 5);
  CHECK(e.output_dim() == 3);
  const tf::Tensor ids = tf::constant(std::vector<int32_t>{0, 4, 1, 3, 3, 2}, {2, 3});
  e.build({tf::None, 3});
  CHECK(e.output_shape() == tf::TensorShape({tf::None, 3, 3}));
  CHECK(weight_names(e) == std::vector<std::string>{"embedding/embeddings"});
  CHECK(e.embeddings().shape() == tf::TensorShape({5, 3}));
  // Keras' "uniform" initializer: U(-0.05, 0.05).
  for (double v : vals(e.embeddings())) CHECK(std::abs(v) <= 0.05);
  CHECK(tf::keras::Initializer("uniform").name() == "random_uniform");
  e.set_weights({seq({5, 3}, 0.7, 0.3, 0.5)});
  // TF 2.21 / Keras 3.15: the rows, and the gradient of sum(y * cos(0.3 i)) w.r.t. the table
  // (ids 3 twice: its row sums two cotangents; no id 5 rows).
  tf::GradientTape tape;
  tf::Tensor y = e(ids);
  CHECK(y.dtype() == tf::float32);
  check_values(y,
               {0.147760108, 0.420735478, 0.495832413, 0.331484616, 0.0123877125, -0.312535316,
                0.3377316, 0.0207903311, -0.305928946, 0.155770674, 0.425218314, 0.494679123,
                0.155770674, 0.425218314, 0.494679123, -0.488765061, -0.44172734, -0.186938331},
               1e-6, 1e-7);
  tf::Tensor g = tape.gradient(tf::reduce_sum(y * cotangent({2, 3, 3})), e.embeddings());
  check_values(g,
               {1, 0.955336511, 0.825335622, -0.227202088, -0.504846096, -0.737393737, -0.210795805,
                0.0874989852, 0.377977729, -1.8008306, -1.71592474, -1.47774053, 0.621609986,
                0.362357765, 0.070737198},
               1e-6, 1e-6);
  // int64, floating and rank-3 ids; the ids are not cast to the table's dtype.
  check_values(e(tf::constant(std::vector<int64_t>{0, 4, 1, 3, 3, 2}, {2, 3})), vals(y));
  check_values(e(tf::constant({{0.f, 4.f, 1.f}, {3.f, 3.f, 2.f}})), vals(y));
  layers::Embedding e3(5, 2);
  CHECK(e3(tf::zeros({2, 3, 4}, tf::int32)).shape() == tf::TensorShape({2, 3, 4, 2}));
  CHECK(e3.output_shape() == tf::TensorShape({tf::None, 3, 4, 2}));
  CHECK(e3.count_params() == 10);
  // Ids outside [0, input_dim) name the layer.
  tf::testing::require_error(
      [&] {
        (void)e(tf::constant(std::vector<int32_t>{1, 5}, {1, 2}));
      },
      {"[" + e.name() + "]", "(Embedding)", "[0, 5)", "= 5"});
  tf::testing::require_error(
      [&] {
        (void)e(tf::constant(std::vector<int32_t>{-1}, {1, 1}));
      },
      {"(Embedding)", "= -1"});
  tf::testing::require_error([] { layers::Embedding(0, 3); }, {"Embedding", "input_dim"});
  // Options and the positional initializer.
  layers::Embedding named(4, 2, {.embeddings_initializer = "ones", .name = "words"});
  CHECK(named.name() == "words");
  check_values(named(tf::constant(std::vector<int32_t>{3}, {1})), {1, 1});
  layers::Embedding pos(4, 2, "zeros");
  check_values(pos(tf::constant(std::vector<int32_t>{3}, {1})), {0, 0});
  layers::Embedding declared(4, 2, {.input_shape = {7}});
  CHECK(declared.built());
  CHECK(declared.output_shape() == tf::TensorShape({tf::None, 7, 2}));
}

TEST_CASE("Embedding gradients against finite differences in float64", "[cpu][keras]") {
  Float64Layers f64;
  layers::Embedding e(4, 3);
  check_finite_differences(e, tf::constant(std::vector<int64_t>{0, 2, 2, 3, 0}, {5}));
}

TEST_CASE("LayerNormalization matches Keras' values and gradients", "[cpu][keras]") {
  const tf::Tensor x = seq({2, 3, 4}, 0.37, 0.0, 2.0) + tf::reshape(tenths(24), {2, 3, 4});
  auto params = [](const tf::TensorShape& s) {
    const int64_t n = s.num_elements();
    std::vector<double> g(n), b(n);
    for (int64_t i = 0; i < n; ++i) {
      g[i] = 1 + 0.1 * std::cos(double(i));
      b[i] = 0.2 * std::sin(double(i));
    }
    return std::vector<tf::Tensor>{tf::cast(tf::convert_to_tensor(g, s), tf::float32),
                                   tf::cast(tf::convert_to_tensor(b, s), tf::float32)};
  };
  {
    layers::LayerNormalization ln;
    CHECK(starts_with(ln.name(), "layer_normalization"));
    ln.build({tf::None, 3, 4});
    CHECK(ln.gamma().shape() == tf::TensorShape({4}));
    const auto names = weight_names(ln);
    CHECK(names ==
          std::vector<std::string>{"layer_normalization/gamma", "layer_normalization/beta"});
    ln.set_weights(params({4}));
    CHECK(ln.output_shape() == tf::TensorShape({tf::None, 3, 4}));
    auto [y, g] = value_and_grads(ln, x);
    // TF 2.21 / Keras 3.15, axis=-1.
    check_values(y,
                 {-1.56076193,  -0.223845005, 0.709282875, 1.14599407, 0.823054314,  1.07663727,
                  0.196875095,  -1.43651342,  1.54641938,  0.57927072, -0.340464145, -1.09869516,
                  -0.973944545, -0.659317255, 0.248517871, 1.47076142, -1.49952769,  -0.289849997,
                  0.653202772,  1.2049818,    -1.3849659,  1.0686512,  1.17731476,   -0.542848587},
                 1e-5, 1e-5);
    check_values(g[0], {-0.0637681186, 0.0859009773,  0.0474006236, -0.0695334971, 0.896077394,
                        -0.413996041,  -0.635028601,  0.15294528,   0.0767390728,  -0.101920344,
                        -0.0512457266, 0.0764269978,  -0.369196117, 0.170737147,   0.31706354,
                        -0.118604779,  -0.0389007628, 0.0459893271, 0.0274908245,  -0.0345795751,
                        0.952109158,   0.744852722,   -0.295714736, -1.40124571},
                 1e-5, 1e-5);
    check_values(g[1], {-2.71859837, 0.612814009, 2.25522709, 3.06262589}, 1e-5, 1e-5);
    check_values(g[2], {0.775874853, 0.773905575, 0.702805638, 0.568926275}, 1e-5, 1e-5);
    // The same in training.
    check_values(ln(x, true), vals(y));
  }
  {
    layers::LayerNormalization ln({.axis = {1, 2}});
    ln.build({tf::None, 3, 4});
    CHECK(ln.gamma().shape() == tf::TensorShape({3, 4}));
    ln.set_weights(params({3, 4}));
    auto [y, g] = value_and_grads(ln, x);
    // TF 2.21 / Keras 3.15, axis=[1, 2].
    check_values(y,
                 {-1.33454204, -0.22980243, 0.525432706,  0.847614765,  0.98354423,   1.0890696,
                  1.05402792,  0.734675407, 0.163697243,  -0.535582721, -1.27570844,  -1.92280364,
                  -1.52888048, -1.27663839, -0.976431251, -0.798734188, -0.647399247, -0.286911905,
                  0.321960568, 0.915383518, 1.1986258,    1.14825535,   0.978044748,  0.862496495},
                 1e-5, 1e-5);
    check_values(g[0], {1.40015364,   1.13162398,    0.75904119,    0.409879565,   0.121653616,
                        -0.154759169, -0.432810932,  -0.636975467,  -0.69936502,   -0.661367655,
                        -0.62413609,  -0.61293745,   -0.179319203,  -0.0683190227, 0.0318721235,
                        0.0788983405, 0.0878172219,  0.0975532234,  0.107640594,   0.0804817379,
                        0.0059685111, -0.0689732134, -0.0941200554, -0.0795002282},
                 1e-5, 1e-5);
    check_values(g[1],
                 {0.0331767797, 0.63433367, 0.888398349, 0.758779466, 0.393563718, 0.0531407446,
                  -0.0112766773, 0.325315118, 1.00065398, 1.7872448, 2.38838863, 2.56680298},
                 1e-5, 1e-5);
    check_values(g[2],
                 {0.103241563, 0.229404211, 0.335074812, 0.410814166, 0.449856758, 0.448714912,
                  0.40749076, 0.329866707, 0.222776532, 0.0957864523, -0.0397599339, -0.171754658},
                 1e-5, 1e-5);
  }
  // center=False (gamma only), epsilon 0.5: Keras 3.15's values.
  layers::LayerNormalization nc({.epsilon = 0.5, .center = false});
  CHECK(nc(seq({2, 4}, 0.9, 0.2, 1.5)).shape() == tf::TensorShape({2, 4}));
  CHECK(nc.variables().size() == 1);
  CHECK(weight_names(nc).back().ends_with("/gamma"));
  check_values(nc(seq({2, 4}, 0.9, 0.2, 1.5)),
               {-0.620362818, 0.569942892, 0.601035416, -0.550615609, -0.16183883, -0.76068002,
                -0.191789329, 1.11430824},
               1e-5, 1e-6);
  layers::LayerNormalization ns(-1, 1e-3, true, /*scale=*/false);
  (void)ns(tf::ones({2, 4}));
  CHECK(weight_names(ns).size() == 1);
  CHECK(weight_names(ns)[0].ends_with("/beta"));
  tf::testing::require_error(
      [] {
        (void)layers::LayerNormalization(3)(tf::ones({2, 4}));
      },
      {"(LayerNormalization)", "axis 3", "(None, 4)"});
  tf::testing::require_error([] { layers::LayerNormalization(-1, 0.0); }, {"epsilon"});
  layers::LayerNormalization built;
  (void)built(tf::ones({2, 4}));
  tf::testing::require_error(
      [&] {
        (void)built(tf::ones({2, 5}));
      },
      {"[" + built.name() + "]", "(None, 4)", "(2, 5)"});
}

TEST_CASE("LayerNormalization gradients against finite differences in float64", "[cpu][keras]") {
  Float64Layers f64;
  const tf::Tensor x = tf::cast(seq({3, 2, 3}, 0.61, 0.4, 1.7), tf::float64);
  for (std::vector<int> axis : {std::vector<int>{-1}, std::vector<int>{1, 2}}) {
    CAPTURE(axis);
    layers::LayerNormalization ln({.axis = axis,
                                   .beta_initializer = tf::keras::initializers::RandomUniform(),
                                   .gamma_initializer = "random_normal"});
    check_finite_differences(ln, x);
  }
}

TEST_CASE("global poolings match Keras with keepdims and both data formats", "[cpu][keras]") {
  const tf::Tensor x = seq({2, 3, 4, 2}, 0.41, 0.2);
  layers::GlobalAveragePooling2D gap;
  CHECK(starts_with(gap.name(), "global_average_pooling2d"));
  CHECK(starts_with(layers::GlobalMaxPooling2D().name(), "global_max_pooling2d"));
  CHECK(starts_with(layers::GlobalAveragePooling1D().name(), "global_average_pooling1d"));
  CHECK(starts_with(layers::GlobalMaxPooling1D().name(), "global_max_pooling1d"));
  // TF 2.21 / Keras 3.15.
  check_values(gap(x), {0.204570234, 0.187810466, -0.187384382, -0.139138266}, 1e-6, 1e-7);
  CHECK(gap.output_shape() == tf::TensorShape({tf::None, 2}));
  layers::GlobalAveragePooling2D gapk("channels_last", /*keepdims=*/true);
  CHECK(gapk(x).shape() == tf::TensorShape({2, 1, 1, 2}));
  CHECK(gapk.output_shape() == tf::TensorShape({tf::None, 1, 1, 2}));
  check_values(layers::GlobalAveragePooling2D("channels_first")(x),
               {0.611316025, -0.600047588, 0.577302575, -0.54351604, 0.499334276, -0.445602179},
               1e-6, 1e-7);
  layers::GlobalMaxPooling2D gmp({.keepdims = true});
  check_values(gmp(x), {0.963982999, 0.990763783, 0.999996006, 0.918246448}, 1e-6, 1e-7);
  CHECK(gmp(x).shape() == tf::TensorShape({2, 1, 1, 2}));
  check_values(layers::GlobalMaxPooling2D("channels_first")(x),
               {0.990104556, 0.066764988, 0.990763783, 0.336906523, 0.999996006, 0.58139652}, 1e-6,
               1e-7);
  const tf::Tensor x1 = seq({2, 5, 3}, 0.41, 0.2);
  check_values(
      layers::GlobalAveragePooling1D()(x1),
      {0.0106844185, 0.00165001152, -0.00765788555, 0.0133045074, 0.00469065923, -0.0047007082},
      1e-6, 1e-7);
  check_values(layers::GlobalMaxPooling1D()(x1),
               {0.990104556, 0.963982999, 0.852108002, 0.962701261, 0.990763783, 0.85459888}, 1e-6,
               1e-7);
  layers::GlobalMaxPooling1D g1k({.keepdims = true});
  g1k.build({tf::None, 5, 3});
  CHECK(g1k.output_shape() == tf::TensorShape({tf::None, 1, 3}));
  tf::testing::require_error(
      [] {
        (void)layers::GlobalAveragePooling2D()(tf::ones({2, 3, 4}));
      },
      {"(GlobalAveragePooling2D)", "rank 4", "(None, 3, 4)"});
  tf::testing::require_error([] { layers::GlobalMaxPooling1D("channels_middle"); },
                             {"GlobalMaxPooling1D", "channels_middle"});
  // Gradients: the mean spreads 1 / (H * W); the maximum goes to the arg max.
  Float64Layers f64;
  check_finite_differences(layers::GlobalAveragePooling2D(), tf::cast(x, tf::float64));
  check_finite_differences(layers::GlobalMaxPooling1D(), tf::cast(x1, tf::float64));
}

TEST_CASE("Reshape Activation and Rescaling", "[cpu][keras]") {
  layers::Reshape r({-1, 2});
  CHECK(starts_with(r.name(), "reshape"));
  r.build({tf::None, 3, 4});
  // Keras 3.15: (None, 6, 2); an unknown example dimension leaves the -1 unknown.
  CHECK(r.output_shape() == tf::TensorShape({tf::None, 6, 2}));
  const tf::Tensor x = seq({2, 3, 4}, 0.3);
  tf::Tensor y = r(x);
  CHECK(y.shape() == tf::TensorShape({2, 6, 2}));
  check_values(y, vals(x));
  CHECK(layers::Reshape({4, 3})(tf::ones({5, 12}, tf::int32)).dtype() == tf::int32);
  layers::Reshape open({-1, 4});
  open.build({tf::None, tf::None, 4});
  CHECK(open.output_shape() == tf::TensorShape({tf::None, tf::None, 4}));
  tf::testing::require_error(
      [] {
        (void)layers::Reshape({5, -1})(tf::ones({2, 3, 4}));
      },
      {"(Reshape)", "(None, 3, 4)", "(5, -1)"});
  tf::testing::require_error(
      [] {
        (void)layers::Reshape({5})(tf::ones({2, 3, 4}));
      },
      {"(Reshape)", "(5,)"});
  tf::testing::require_error([] { layers::Reshape({-1, -1}); }, {"Reshape", "one -1"});
  tf::testing::require_error([] { layers::Reshape({0, 2}); }, {"Reshape", "positive or -1"});

  layers::Activation a("gelu");
  CHECK(starts_with(a.name(), "activation"));
  // Keras 3.15's gelu (exact) on -1 and 0.5.
  check_values(a(tf::constant({-1.0f, 0.5f})), {-0.158655256, 0.345731229}, 1e-6, 1e-7);
  check_values(layers::Activation("linear")(tf::constant({-1.0f, 0.5f})), {-1, 0.5});
  tf::testing::require_error([] { layers::Activation("relux"); }, {"'relux'"});

  layers::Rescaling rs(1.0 / 255, -1.0);
  CHECK(starts_with(rs.name(), "rescaling"));
  tf::Tensor img = rs(tf::constant(std::vector<uint8_t>{0, 255, 128}, {3}));
  CHECK(img.dtype() == tf::float32);
  check_values(img, {-1, 0, -0.498039186}, 1e-6, 1e-7);
  check_values(layers::Rescaling(2.0)(tf::constant({1.5f})), {3.0});
}

TEST_CASE("Conv1D matches Keras for valid same and causal padding", "[cpu][keras]") {
  const tf::Tensor x = seq({2, 7, 3}, 0.53, 0.1);
  const std::vector<tf::Tensor> w = {seq({3, 3, 4}, 0.5, 0.0, 0.3), tenths(4)};
  {
    layers::Conv1D c(4, 3);
    CHECK(starts_with(c.name(), "conv1d"));
    c.build({tf::None, 7, 3});
    CHECK(weight_names(c) == std::vector<std::string>{"conv1d/kernel", "conv1d/bias"});
    CHECK(c.kernel().shape() == tf::TensorShape({3, 3, 4}));
    c.set_weights(w);
    CHECK(c.output_shape() == tf::TensorShape({tf::None, 5, 4}));
    check_values(c(x), {-0.0380469784, 0.133271009,   0.296443045,   0.436002493,   0.0694840997,
                        0.239132732,   0.374716848,   0.467524171,   0.0353784151,  0.061385572,
                        0.0968469605,  0.157563761,   -0.0708428621, -0.0376497582, 0.0292447358,
                        0.137946114,   -0.0326577388, 0.143900812,   0.30971086,    0.448659927,
                        -0.0732449144, -0.0340772197, 0.0379172415,  0.149595261,   -0.0270758644,
                        0.154271752,   0.322331697,   0.460440636,   0.0742847696,  0.23199293,
                        0.357384562,   0.444243073,   0.0242229495,  0.0406590588,  0.0716239512,
                        0.134019732,   -0.0752150565, -0.0297138914, 0.0475457311,  0.162131444},
                 1e-5, 1e-6);
  }
  {
    layers::Conv1D c(4, 3, 2, "same", "relu");
    c.build({tf::None, 7, 3});
    c.set_weights(w);
    CHECK(c.output_shape() == tf::TensorShape({tf::None, 4, 4}));
    auto [y, g] = value_and_grads(c, x);
    // TF 2.21 / Keras 3.15.
    check_values(y,
                 {0.0607970692,
                  0.127775833,
                  0.187954038,
                  0.251081586,
                  0.0694840997,
                  0.239132732,
                  0.374716848,
                  0.467524171,
                  0,
                  0,
                  0.0292447358,
                  0.137946114,
                  0.106460541,
                  0.360781372,
                  0.551253855,
                  0.655727148,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0.154271752,
                  0.322331697,
                  0.460440636,
                  0.0242229495,
                  0.0406590588,
                  0.0716239512,
                  0.134019732,
                  0.0677043349,
                  0.165259153,
                  0.246836185,
                  0.316946149},
                 1e-5, 1e-6);
    check_values(g[0],
                 {0.31542033,
                  0.613681018,
                  -0.8261832,
                  -0.124309681,
                  0.919694602,
                  -0.641146302,
                  -0.212653726,
                  0.107786991,
                  0.12294329,
                  -0.755528688,
                  0.113936596,
                  0.660700023,
                  -0.473000348,
                  -0.1001352,
                  0.556342244,
                  -0.654156446,
                  -0.627832472,
                  1.17669737,
                  -0.127624661,
                  -0.495920122,
                  0.540375829,
                  0,
                  0,
                  0,
                  0.627789736,
                  0.13390252,
                  -0.739235997,
                  0.481358916,
                  0.338603973,
                  -0.763176858,
                  0.28717941,
                  0.772433281,
                  -0.930070698,
                  -0.0865233019,
                  0.275759935,
                  -0.142989963,
                  -0.791355252,
                  0.0632258207,
                  0.738732815,
                  -0.463577777,
                  -0.423742205,
                  0.816255748},
                 1e-5, 1e-5);
    check_values(
        g[1], {-0.863435388, -0.733617663, 0.198528826,  0.220074892,  -1.22130287,  -0.602262616,
               0.157866001,  0.205258161,  -1.24406219,  -0.305655241, 0.0738871023, 0.134121418,
               -0.825634956, 0.170194089,  0.0520306751, 0.0882411823, 0.236205637,  0.997596562,
               0.359956115,  0.277279794,  1.23323464,   1.55127251,   0.569114625,  0.390236706,
               0.832424879,  0.703304529,  -0.183237836, -0.166653007, 0.977759004,  0.236690044,
               -0.562504411, -0.635365486, 0.85480988,   -0.294868797, -0.787427723, -0.929742575},
        1e-5, 1e-5);
    check_values(g[2], {0.55466187, 0.897988677, -0.789062023, -1.50155604}, 1e-5, 1e-5);
  }
  {
    layers::Conv1D c(4, 3, {.strides = 2});
    c.build({tf::None, 7, 3});
    c.set_weights(w);
    CHECK(c.output_shape() == tf::TensorShape({tf::None, 3, 4}));
    check_values(c(x), {-0.0380469784, 0.133271009,   0.296443045,   0.436002493,   0.0353784151,
                        0.061385572,   0.0968469605,  0.157563761,   -0.0326577388, 0.143900812,
                        0.30971086,    0.448659927,   -0.0732449144, -0.0340772197, 0.0379172415,
                        0.149595261,   0.0742847696,  0.23199293,    0.357384562,   0.444243073,
                        -0.0752150565, -0.0297138914, 0.0475457311,  0.162131444},
                 1e-5, 1e-6);
  }
  {
    layers::Conv1D c(4, 3, {.padding = "causal"});
    c.build({tf::None, 7, 3});
    c.set_weights(w);
    CHECK(c.output_shape() == tf::TensorShape({tf::None, 7, 4}));
    auto [y, g] = value_and_grads(c, x);
    check_values(
        y,
        {0.0798277706,  0.0674801171,  0.063094452,    0.092228055,   0.0607970692,  0.127775833,
         0.187954038,   0.251081586,   -0.0380469784,  0.133271009,   0.296443045,   0.436002493,
         0.0694840997,  0.239132732,   0.374716848,    0.467524171,   0.0353784151,  0.061385572,
         0.0968469605,  0.157563761,   -0.0708428621,  -0.0376497582, 0.0292447358,  0.137946114,
         -0.0326577388, 0.143900812,   0.30971086,     0.448659927,   -0.0343635008, -0.0248176381,
         0.0152879655,  0.100617483,   -0.00231836457, -0.0771944299, -0.108687118,  -0.0646024048,
         -0.0732449144, -0.0340772197, 0.0379172415,   0.149595261,   -0.0270758644, 0.154271752,
         0.322331697,   0.460440636,   0.0742847696,   0.23199293,    0.357384562,   0.444243073,
         0.0242229495,  0.0406590588,  0.0716239512,   0.134019732,   -0.0752150565, -0.0297138914,
         0.0475457311,  0.162131444},
        1e-5, 1e-6);
    check_values(
        g[0], {-0.814155161, 0.570958853,  0.33894974,   -0.970897198, -0.857168317,   1.68431294,
               0.110530883,  -1.19216216,  0.881698012,  1.0510006,    -0.00680994987, -1.04533267,
               0.651145637,  1.18722677,   -1.63926685,  0.0554995909, 1.07743788,     -0.952244401,
               -0.156750321, 0.273452252,  -0.070842281, -0.196943432, -1.27214265,    1.25573981,
               0.928104281,  -0.363196582, -0.625818133, 0.869554996,  1.00892854,     -1.70927978,
               -0.29792434,  1.09438264,   -0.612923443, -1.08546543,  -0.215812504,   1.26508474,
               -0.616047084, -1.05528355,  1.49435294,   -0.10090439,  -0.786215067,   0.755266249},
        1e-5, 1e-5);
    check_values(
        g[1], {0.380696535,  0.0119963884, -0.35777545,  -0.69558841,   0.598811388,   0.171481252,
               -0.271167278, -0.689593077, 0.65262115,   0.28391397,    -0.11015439,   -0.494382858,
               1.52129054,   1.19037652,   0.753129601,  0.248608351,   1.18160892,    0.949073613,
               0.631760478,  0.258014321,  0.517710567,  0.44735837,    0.337044924,   0.196624294,
               0.316678286,  0.646438241,  0.91845417,   1.10842717,    -0.0511450768, 0.350215197,
               0.720291257,  1.02602661,   -0.404934764, -0.0421023369, 0.324491262,   0.662098765},
        1e-5, 1e-5);
    check_values(g[2], {0.0816625953, -0.368609607, -0.785954893, -1.13309336}, 1e-5, 1e-5);
  }
  layers::Conv1D declared(8, 5, {.activation = "relu", .input_shape = {20, 3}});
  CHECK(declared.output_shape() == tf::TensorShape({tf::None, 16, 8}));
  layers::Conv1D dilated(2, 3, {.padding = "same", .dilation_rate = 2});
  CHECK(dilated(tf::ones({1, 9, 2})).shape() == tf::TensorShape({1, 9, 2}));
  CHECK(dilated.output_shape() == tf::TensorShape({tf::None, 9, 2}));
  tf::testing::require_error([] { layers::Conv1D(4, 3, 1, "full"); }, {"Conv1D", "\"full\""});
  tf::testing::require_error(
      [] {
        (void)layers::Conv1D(4, 3)(tf::ones({2, 7}));
      },
      {"(Conv1D)", "rank 3", "(None, 7)"});
  Float64Layers f64;
  check_finite_differences(layers::Conv1D(2, 2, {.padding = "causal", .dilation_rate = 2}),
                           tf::cast(seq({2, 5, 3}, 0.7), tf::float64));
}

TEST_CASE("MaxPooling1D AveragePooling1D and UpSampling2D match Keras", "[cpu][keras]") {
  const tf::Tensor x = seq({2, 7, 3}, 0.53, 0.1);
  layers::MaxPooling1D mp;
  CHECK(starts_with(mp.name(), "max_pooling1d"));
  CHECK(starts_with(layers::AveragePooling1D().name(), "average_pooling1d"));
  // TF 2.21 / Keras 3.15: "same" windows ignore the padding.
  check_values(mp(x),
               {0.99290365, 0.796565473, 0.916803122, -0.137965873, -0.61973685, -0.345888257,
                0.980849862, 0.747823715, 0.944744647, 0.250918865, 0.705854952, 0.967114449,
                0.963011384, 0.694671631, 0.235723779, 0.324463099, 0.758132219, 0.983780563},
               1e-6, 1e-7);
  CHECK(mp.output_shape() == tf::TensorShape({tf::None, 3, 3}));
  check_values(layers::MaxPooling1D(3, 2, "same")(x),
               {0.99290365,  0.796565473, 0.916803122, 0.99290365,  0.796565473, 0.381660998,
                0.980849862, 0.747823715, 0.944744647, 0.980849862, 0.747823715, 0.30960536,
                0.250918865, 0.705854952, 0.967114449, 0.963011384, 0.705854952, 0.967114449,
                0.324463099, 0.758132219, 0.983780563, 0.939493418, 0.758132219, 0.983780563},
               1e-6, 1e-7);
  check_values(layers::AveragePooling1D()(x),
               {0.546368539, 0.69285512, 0.64923203, -0.562785506, -0.696250677, -0.638674498,
                0.578372359, 0.698619246, 0.627174973, -0.36086452, -0.00796249509, 0.347124338,
                0.337554038, -0.0189310908, -0.370221794, -0.313745677, 0.0457967818, 0.392773241},
               1e-6, 1e-7);
  layers::AveragePooling1D ap(3, 2, "same");
  check_values(ap(x), {0.546368539,   0.69285512,   0.64923203,   -0.0442224331,  -0.198645294,
                       -0.298562676,  0.0563798733, 0.208158016,  0.302820593,    0.383642763,
                       0.0348443389,  -0.323514819, -0.36086452,  -0.00796249509, 0.347124338,
                       0.308675647,   0.222664237,  0.0755569339, -0.305131525,   -0.213646725,
                       -0.0635403171, 0.631978273,  0.69777739,   0.572116256},
               1e-6, 1e-7);
  CHECK(ap.output_shape() == tf::TensorShape({tf::None, 4, 3}));
  tf::testing::require_error(
      [] {
        (void)layers::MaxPooling1D()(tf::ones({2, 3, 4, 1}));
      },
      {"(MaxPooling1D)", "rank 3"});

  layers::UpSampling2D up({2, 3});
  CHECK(starts_with(up.name(), "up_sampling2d"));
  tf::Tensor u = up(seq({2, 2, 2, 1}, 0.3));
  CHECK(u.shape() == tf::TensorShape({2, 4, 6, 1}));
  CHECK(up.output_shape() == tf::TensorShape({tf::None, 4, 6, 1}));
  check_values(
      u, {0,           0,           0,           0.295520216, 0.295520216, 0.295520216, 0,
          0,           0,           0.295520216, 0.295520216, 0.295520216, 0.564642489, 0.564642489,
          0.564642489, 0.783326924, 0.783326924, 0.783326924, 0.564642489, 0.564642489, 0.564642489,
          0.783326924, 0.783326924, 0.783326924, 0.932039082, 0.932039082, 0.932039082, 0.997494996,
          0.997494996, 0.997494996, 0.932039082, 0.932039082, 0.932039082, 0.997494996, 0.997494996,
          0.997494996, 0.973847628, 0.973847628, 0.973847628, 0.863209367, 0.863209367, 0.863209367,
          0.973847628, 0.973847628, 0.973847628, 0.863209367, 0.863209367, 0.863209367},
      1e-6, 1e-7);
  tf::testing::require_error([] { layers::UpSampling2D(2, "spline"); },
                             {"UpSampling2D", "spline", "bilinear"});
  Float64Layers f64;
  check_finite_differences(layers::AveragePooling1D(3, 2, "same"), tf::cast(x, tf::float64));
  check_finite_differences(layers::UpSampling2D(2), tf::cast(seq({1, 2, 3, 2}, 0.9), tf::float64));
  check_finite_differences(layers::UpSampling2D({2, 3}, "bilinear"),
                           tf::cast(seq({1, 2, 3, 2}, 0.9), tf::float64));
  check_finite_differences(layers::UpSampling2D(2, "bicubic"),
                           tf::cast(seq({1, 3, 2, 1}, 0.9), tf::float64));
}

TEST_CASE("UpSampling2D resizes with Keras' other interpolations", "[keras]") {
  // Keras 3.15 (TF 2.21): x = np.arange(12, dtype="float32").reshape(2, 2, 3, 1);
  // UpSampling2D((2, 3), interpolation=m)(x)[0, :, :, 0], rounded to 4 places.
  const tf::Tensor x = tf::reshape(tf::range(0.0, 12.0, 1.0, tf::float32), {2, 2, 3, 1});
  const std::vector<std::pair<std::string, std::vector<double>>> cases = {
      {"bilinear",
       {0.0,    0.0,  0.3333, 0.6667, 1.0,  1.3333, 1.6667, 2.0,  2.0,    0.75,   0.75, 1.0833,
        1.4167, 1.75, 2.0833, 2.4167, 2.75, 2.75,   2.25,   2.25, 2.5833, 2.9167, 3.25, 3.5833,
        3.9167, 4.25, 4.25,   3.0,    3.0,  3.3333, 3.6667, 4.0,  4.3333, 4.6667, 5.0,  5.0}},
      {"bicubic", {-0.3699, -0.2647, -0.0236, 0.3428, 0.7353, 1.1278, 1.4942, 1.7353, 1.8405,
                   0.5162,  0.6214,  0.8625,  1.229,  1.6214, 2.0139, 2.3804, 2.6214, 2.7266,
                   2.2734,  2.3786,  2.6196,  2.9861, 3.3786, 3.771,  4.1375, 4.3786, 4.4838,
                   3.1595,  3.2647,  3.5058,  3.8722, 4.2647, 4.6572, 5.0236, 5.2647, 5.3699}},
      {"lanczos3", {-0.6467, -0.5264, -0.3496, -0.0302, 0.4736, 0.9773, 1.2968, 1.4736, 1.5939,
                    0.5783,  0.6986,  0.8754,  1.1948,  1.6986, 2.2024, 2.5218, 2.6986, 2.8189,
                    2.1811,  2.3014,  2.4782,  2.7976,  3.3014, 3.8052, 4.1246, 4.3014, 4.4217,
                    3.4061,  3.5264,  3.7032,  4.0227,  4.5264, 5.0302, 5.3496, 5.5264, 5.6467}},
      {"lanczos5", {-0.6943, -0.6621, -0.5443, -0.2251, 0.3379, 0.9008, 1.22,   1.3379, 1.3701,
                    0.6993,  0.7315,  0.8493,  1.1686,  1.7315, 2.2944, 2.6137, 2.7315, 2.7637,
                    2.2363,  2.2685,  2.3864,  2.7056,  3.2685, 3.8314, 4.1507, 4.2685, 4.3007,
                    3.6299,  3.6621,  3.78,    4.0992,  4.6621, 5.2251, 5.5443, 5.6621, 5.6943}},
      {"area",
       {0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0, 0.0, 0.0, 0.0, 1.0, 1.0, 1.0, 2.0, 2.0, 2.0,
        3.0, 3.0, 3.0, 4.0, 4.0, 4.0, 5.0, 5.0, 5.0, 3.0, 3.0, 3.0, 4.0, 4.0, 4.0, 5.0, 5.0, 5.0}},
  };
  for (const auto& [method, want] : cases) {
    INFO(method);
    layers::UpSampling2D up({2, 3}, method);
    const tf::Tensor y = up(x);
    REQUIRE(y.shape() == tf::TensorShape({2, 4, 9, 1}));
    CHECK(y.dtype() == tf::float32);
    CHECK(up.output_shape() == tf::TensorShape({tf::None, 4, 9, 1}));
    check_values(tf::reshape(tf::slice(y, {0, 0, 0, 0}, {1, 4, 9, 1}), {36}), want, 1e-4, 1e-4);
    // A float64 layer (Keras' dtype="float64") keeps float64.
    Float64Layers f64;
    CHECK(layers::UpSampling2D(2, method)(tf::cast(x, tf::float64)).dtype() == tf::float64);
  }
  // Keras' config round trip keeps the method.
  const K::Layer back = K::saving::from_config_json(
      "UpSampling2D", K::saving::get_config_json(layers::UpSampling2D(2, "Bicubic")));
  CHECK_THAT(K::saving::get_config_json(back),
             Catch::Matchers::Contains(R"("interpolation":"bicubic")"));
}

TEST_CASE("the new layers in Sequential: summary rows and save_weights round trip",
          "[cpu][keras]") {
  auto make = [] {
    return K::Sequential({layers::Embedding(100, 8, {.input_shape = {12}}),
                          layers::Conv1D(6, 3, {.padding = "causal", .activation = "relu"}),
                          layers::LayerNormalization(), layers::MaxPooling1D(),
                          layers::Reshape({-1, 2}), layers::GlobalAveragePooling1D(),
                          layers::Activation("tanh"), layers::Rescaling(2.0), layers::Dense(1)},
                         "text");
  };
  K::Sequential model = make();
  REQUIRE(model.built());
  // Keras 3.15's output shapes and parameter counts for this stack.
  const std::vector<std::pair<std::string, int64_t>> keras_rows = {
      {"(None, 12, 8)", 800}, {"(None, 12, 6)", 150}, {"(None, 12, 6)", 12},
      {"(None, 6, 6)", 0},    {"(None, 18, 2)", 0},   {"(None, 2)", 0},
      {"(None, 2)", 0},       {"(None, 2)", 0},       {"(None, 1)", 3}};
  const auto stack = model.layers();
  REQUIRE(stack.size() == keras_rows.size());
  const std::string s = model.summary_string();
  for (size_t i = 0; i < stack.size(); ++i) {
    CAPTURE(i, stack[i].name(), s);
    CHECK(stack[i].output_shape().to_string() == keras_rows[i].first);
    CHECK(stack[i].count_params() == keras_rows[i].second);
    CHECK(s.find(stack[i].name()) != std::string::npos);
  }
  CHECK(s.find("Total params: 965\n") != std::string::npos);
  const tf::Tensor ids = tf::cast(tf::random::uniform({4, 12}, 0, 100, tf::float32, 3), tf::int32);
  const tf::Tensor y = model(ids);
  CHECK(y.shape() == tf::TensorShape({4, 1}));
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tapeflow_layers_more_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "w.safetensors").string();
  model.save_weights(path);
  K::Sequential copy = make();
  CHECK(vals(copy(ids)) != vals(y));
  copy.load_weights(path);
  check_values(copy(ids), vals(y), 0, 0);
  std::filesystem::remove_all(dir);

  K::Sequential images(
      {layers::Rescaling(1.0 / 255), layers::UpSampling2D(2), layers::GlobalMaxPooling2D()});
  const tf::Tensor img = tf::cast(tf::fill({1, 2, 2, 3}, tf::Tensor(int32_t{51})), tf::uint8);
  check_values(images(img), {0.2, 0.2, 0.2}, 1e-6);
}

TEST_CASE("the new layers traced with an unknown batch match the eager calls", "[cpu][keras]") {
  K::Sequential text({layers::Embedding(20, 4), layers::Conv1D(3, 2, {.padding = "same"}),
                      layers::Conv1D(3, 3, {.padding = "causal", .dilation_rate = 2}),
                      layers::AveragePooling1D(2, 1, "same"), layers::LayerNormalization(),
                      layers::Reshape({-1, 6}), layers::GlobalMaxPooling1D({.keepdims = true}),
                      layers::Activation("relu"), layers::Rescaling(0.5, 1.0)});
  auto f = tf::function(
      [&](tf::Tensor x) { return text(x); },
      tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 6}, tf::int32)}});
  // (n, 2, 2, 3) -> (n, 4, 2, 3) -> (n, 8, 3) -> (n, 4, 3) -> (n, 1, 3) -> (n, 1, 1, 3) -> (n, 3)
  K::Sequential image({layers::UpSampling2D({2, 1}), layers::Reshape({8, 3}),
                       layers::MaxPooling1D(), layers::GlobalAveragePooling1D({.keepdims = true}),
                       layers::Reshape({1, 1, 3}), layers::GlobalMaxPooling2D(),
                       layers::Reshape({3, 1}), layers::Dense(2)});
  layers::GlobalAveragePooling2D gap;
  auto g = tf::function(
      [&](tf::Tensor x) {
        tf::GradientTape tape;
        tape.watch(x);
        tf::Tensor loss = tf::reduce_sum(tf::square(image(x))) + tf::reduce_sum(gap(x));
        return tape.gradient(loss, x);
      },
      tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 2, 2, 3})}});
  for (int64_t n : {3, 5}) {
    CAPTURE(n);
    const tf::Tensor ids =
        tf::cast(tf::random::uniform({n, 6}, 0, 20, tf::float32, 9 + n), tf::int32);
    tf::Tensor y = f(ids);
    CHECK(y.shape() == tf::TensorShape({n, 1, 6}));
    check_values(y, vals(text(ids)), 1e-5, 1e-6);
    const tf::Tensor x = tf::random::normal({n, 2, 2, 3}, 0, 1, tf::float32, n);
    tf::GradientTape tape;
    tape.watch(x);
    tf::Tensor loss = tf::reduce_sum(tf::square(image(x))) + tf::reduce_sum(gap(x));
    check_values(g(x), vals(tape.gradient(loss, x)), 1e-5, 1e-6);
  }
  CHECK(f.tracing_count() == 1);
  CHECK(g.tracing_count() == 1);
  // Inside a traced function an id out of range is found when the graph runs, by the gather.
  tf::testing::require_error(
      [&] {
        (void)f(tf::constant(std::vector<int32_t>{1, 2, 3, 20, 4, 5}, {1, 6}));
      },
      {"gather", "= 20 is not in [0, 20)"});
}

TEST_CASE("the new layers give Keras' values on every device", "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    layers::Embedding e(5, 3);
    e.build({tf::None, 3});
    e.set_weights({seq({5, 3}, 0.7, 0.3, 0.5)});
    tf::Tensor ey = e(tf::constant(std::vector<int32_t>{0, 4, 1, 3, 3, 2}, {2, 3}));
    CHECK(ey.placement() == device);
    check_values(ey,
                 {0.147760108, 0.420735478, 0.495832413, 0.331484616, 0.0123877125, -0.312535316,
                  0.3377316, 0.0207903311, -0.305928946, 0.155770674, 0.425218314, 0.494679123,
                  0.155770674, 0.425218314, 0.494679123, -0.488765061, -0.44172734, -0.186938331},
                 1e-6, 1e-7);
    layers::LayerNormalization ln;
    const tf::Tensor x = seq({2, 3, 4}, 0.37, 0.0, 2.0) + tf::reshape(tenths(24), {2, 3, 4});
    auto [ly, lg] = value_and_grads(ln, x);
    std::vector<double> gamma_grad = vals(lg[1]);
    (void)ly;
    // With gamma 1 and beta 0 the gradient w.r.t. beta is the cotangent summed over rows.
    std::vector<double> beta_grad(4, 0.0);
    for (int i = 0; i < 24; ++i) beta_grad[i % 4] += std::cos(0.3 * i);
    check_values(lg[2], beta_grad, 1e-5, 1e-5);
    layers::Conv1D c(4, 3, {.padding = "causal"});
    c.build({tf::None, 7, 3});
    c.set_weights({seq({3, 3, 4}, 0.5, 0.0, 0.3), tenths(4)});
    tf::Tensor cy = c(seq({2, 7, 3}, 0.53, 0.1));
    CHECK(cy.placement() == device);
    check_values(
        cy,
        {0.0798277706,  0.0674801171,  0.063094452,    0.092228055,   0.0607970692,  0.127775833,
         0.187954038,   0.251081586,   -0.0380469784,  0.133271009,   0.296443045,   0.436002493,
         0.0694840997,  0.239132732,   0.374716848,    0.467524171,   0.0353784151,  0.061385572,
         0.0968469605,  0.157563761,   -0.0708428621,  -0.0376497582, 0.0292447358,  0.137946114,
         -0.0326577388, 0.143900812,   0.30971086,     0.448659927,   -0.0343635008, -0.0248176381,
         0.0152879655,  0.100617483,   -0.00231836457, -0.0771944299, -0.108687118,  -0.0646024048,
         -0.0732449144, -0.0340772197, 0.0379172415,   0.149595261,   -0.0270758644, 0.154271752,
         0.322331697,   0.460440636,   0.0742847696,   0.23199293,    0.357384562,   0.444243073,
         0.0242229495,  0.0406590588,  0.0716239512,   0.134019732,   -0.0752150565, -0.0297138914,
         0.0475457311,  0.162131444},
        1e-4, 1e-5);
    check_values(
        layers::AveragePooling1D(3, 2, "same")(seq({2, 7, 3}, 0.53, 0.1)),
        {0.546368539,  0.69285512,     0.64923203,    -0.0442224331, -0.198645294, -0.298562676,
         0.0563798733, 0.208158016,    0.302820593,   0.383642763,   0.0348443389, -0.323514819,
         -0.36086452,  -0.00796249509, 0.347124338,   0.308675647,   0.222664237,  0.0755569339,
         -0.305131525, -0.213646725,   -0.0635403171, 0.631978273,   0.69777739,   0.572116256},
        1e-5, 1e-6);
    check_values(
        layers::UpSampling2D({2, 3})(seq({2, 2, 2, 1}, 0.3)),
        {0,           0,           0,           0.295520216, 0.295520216, 0.295520216, 0,
         0,           0,           0.295520216, 0.295520216, 0.295520216, 0.564642489, 0.564642489,
         0.564642489, 0.783326924, 0.783326924, 0.783326924, 0.564642489, 0.564642489, 0.564642489,
         0.783326924, 0.783326924, 0.783326924, 0.932039082, 0.932039082, 0.932039082, 0.997494996,
         0.997494996, 0.997494996, 0.932039082, 0.932039082, 0.932039082, 0.997494996, 0.997494996,
         0.997494996, 0.973847628, 0.973847628, 0.973847628, 0.863209367, 0.863209367, 0.863209367,
         0.973847628, 0.973847628, 0.973847628, 0.863209367, 0.863209367, 0.863209367},
        1e-6, 1e-7);
    check_values(layers::GlobalAveragePooling2D()(seq({2, 3, 4, 2}, 0.41, 0.2)),
                 {0.204570234, 0.187810466, -0.187384382, -0.139138266}, 1e-5, 1e-6);
  }
}

TEST_CASE("the constructor spellings of docs/keras.md configure the new layers", "[cpu][keras]") {
  using namespace tf::keras::layers;
  const tf::Tensor ids = tf::zeros({2, 200}, tf::int32);
  CHECK(Embedding(10000, 16)(ids).shape() == tf::TensorShape({2, 200, 16}));
  Embedding declared(10000, 16, {.embeddings_initializer = "glorot_uniform", .input_shape = {200}});
  CHECK(declared.output_shape() == tf::TensorShape({tf::None, 200, 16}));
  const tf::Tensor x = tf::ones({2, 3, 4});
  LayerNormalization ln1, ln2(-1, 1e-6), ln3({.axis = {1, 2}});
  for (auto* ln : {&ln1, &ln2, &ln3}) CHECK((*ln)(x).shape() == x.shape());
  CHECK(ln3.gamma().shape() == tf::TensorShape({3, 4}));
  CHECK(GlobalAveragePooling1D()(x).shape() == tf::TensorShape({2, 4}));
  const tf::Tensor img = tf::ones({2, 6, 6, 3});
  CHECK(GlobalMaxPooling2D("channels_last", /*keepdims=*/true)(img).shape() ==
        tf::TensorShape({2, 1, 1, 3}));
  CHECK(GlobalAveragePooling2D({.keepdims = true})(img).shape() == tf::TensorShape({2, 1, 1, 3}));
  CHECK(Reshape({7, 7, 64})(tf::ones({1, 3136})).shape() == tf::TensorShape({1, 7, 7, 64}));
  CHECK(Reshape({-1, 2})(x).shape() == tf::TensorShape({2, 6, 2}));
  CHECK(Activation("relu")(x).shape() == x.shape());
  check_values(Rescaling(1.0 / 255)(tf::fill({1}, tf::Tensor(255.0f))), {1.0});
  check_values(Rescaling(1.0 / 127.5, -1.0)(tf::fill({1}, tf::Tensor(255.0f))), {1.0});
  const tf::Tensor seq3 = tf::ones({2, 20, 3});
  CHECK(Conv1D(32, 3)(seq3).shape() == tf::TensorShape({2, 18, 32}));
  CHECK(Conv1D(32, 5, 2, "same", "relu")(seq3).shape() == tf::TensorShape({2, 10, 32}));
  CHECK(Conv1D(32, 3, {.padding = "causal"})(seq3).shape() == tf::TensorShape({2, 20, 32}));
  tf::testing::require_error([] { Conv1D(4, 3, {.strides = 2, .dilation_rate = 2}); },
                             {"Conv1D", "dilation_rate"});
  CHECK(MaxPooling1D()(seq3).shape() == tf::TensorShape({2, 10, 3}));
  CHECK(AveragePooling1D(3, 2, "same")(seq3).shape() == tf::TensorShape({2, 10, 3}));
  CHECK(UpSampling2D()(img).shape() == tf::TensorShape({2, 12, 12, 3}));
  CHECK(UpSampling2D({2, 3})(img).shape() == tf::TensorShape({2, 12, 18, 3}));
  // The text-classification model of the docs compiles and trains a step.
  auto model = tf::keras::Sequential(
      {Embedding(10000, 16), Dropout(0.2), GlobalAveragePooling1D(), Dropout(0.2), Dense(1)});
  model.compile(tf::keras::optimizers::Adam(1e-3),
                tf::keras::losses::BinaryCrossentropy(/*from_logits=*/true), {"accuracy"});
  const tf::Tensor labels = tf::zeros({2, 1});
  K::History h = model.fit(ids, labels, {.epochs = 1, .verbose = 0});
  CHECK(h.history.at("loss").size() == 1);
}

TEST_CASE("fit trains an Embedding GlobalAveragePooling1D Dense text classifier", "[cpu][keras]") {
  // Synthetic "reviews": sequences of 10 word ids; positive ones hold more words from [0, 25),
  // negative ones more from [25, 50).
  tf::random::set_seed(4);
  const int64_t n = 256, len = 10;
  const auto r = tf::testing::random_values(static_cast<size_t>(n * len * 2), 0.0, 1.0, 11);
  std::vector<int32_t> ids(static_cast<size_t>(n * len));
  std::vector<float> labels(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const bool positive = i % 2 == 0;
    labels[i] = positive ? 1.f : 0.f;
    for (int64_t t = 0; t < len; ++t) {
      const size_t k = static_cast<size_t>(i * len + t);
      const bool own = r[2 * k] < 0.75;
      const int32_t word = static_cast<int32_t>(r[2 * k + 1] * 25);
      ids[k] = (positive == own) ? word : 25 + word;
    }
  }
  const tf::Tensor x = tf::constant(ids, {n, len});
  const tf::Tensor y = tf::constant(labels, {n, 1});
  K::Sequential model({layers::Embedding(50, 8), layers::GlobalAveragePooling1D(),
                       layers::Dense(8, "relu"), layers::Dense(1)});
  model.compile(K::optimizers::Adam(0.02), K::losses::BinaryCrossentropy(true), {"accuracy"});
  K::History h = model.fit(x, y, {.epochs = 8, .batch_size = 32, .verbose = 0});
  const auto& loss = h.history.at("loss");
  REQUIRE(loss.size() == 8);
  CHECK(loss.back() < 0.5 * loss.front());
  CHECK(h.history.at("accuracy").back() > 0.9);
  // Only the rows of words that occur got gradients: every row of the table did here.
  CHECK(model.trainable_variables()[0].shape() == tf::TensorShape({50, 8}));
}
