// The layers of keras/layers_misc.h against Keras 3.15.1 (on TF 2.21): padding and cropping,
// LeakyReLU, ELU, PReLU, Permute, RepeatVector, UpSampling1D, the noise layers,
// ActivityRegularization, GroupNormalization, UnitNormalization and TimeDistributed. Values and
// gradients on the same inputs and weights (layer(x) in Python, and tf.GradientTape gradients of
// sum(y * cos(0.3 i))), float64 finite differences, output shapes with a None batch, weight
// names, traced functions with a None batch, and every device.
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "keras/layers.h"
#include "keras/layers_misc.h"
#include "keras/layers_more.h"
#include "keras/model.h"
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

// The reference script's inputs: sin(a * i + b) * s in float32 (numpy computes it in float64
// and rounds, as here).
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
// seq((2, 3, 4), 0.37, 0, 2) + 0.1 * i, in float32 (the normalization layers' input).
tf::Tensor x24() {
  std::vector<float> v(24);
  for (int i = 0; i < 24; ++i)
    v[i] = static_cast<float>(std::sin(0.37 * i) * 2.0) + 0.1f * static_cast<float>(i);
  return tf::constant(v, {2, 3, 4});
}
// gamma = 1 + 0.1 cos(i), beta = 0.2 sin(i) of the reference script.
std::vector<tf::Tensor> norm_params(int64_t n) {
  std::vector<double> g(n), b(n);
  for (int64_t i = 0; i < n; ++i) {
    g[i] = 1 + 0.1 * std::cos(double(i));
    b[i] = 0.2 * std::sin(double(i));
  }
  return {tf::cast(tf::convert_to_tensor(g, {n}), tf::float32),
          tf::cast(tf::convert_to_tensor(b, {n}), tf::float32)};
}

// y = layer(x) and the gradients of sum(y * cotangent) with respect to x and the layer's
// trainable variables, in that order.
std::pair<tf::Tensor, std::vector<tf::Tensor>> value_and_grads(const tf::keras::Layer& layer,
                                                               const tf::Tensor& x) {
  if (!layer.built()) layer.build(tf::keras::detail::with_unknown_batch(x.shape()));
  tf::GradientTape tape;
  tape.watch(x);
  tf::Tensor y = layer(x);
  tf::Tensor loss = tf::reduce_sum(y * cotangent(y.shape(), y.dtype()));
  std::vector<tf::Variable> vars = layer.trainable_variables();
  std::vector<tf::Tensor> grads{tape.gradient(loss, x)};
  tf::GradientTape tape2;
  tf::Tensor loss2 = tf::reduce_sum(layer(x) * cotangent(y.shape(), y.dtype()));
  for (tf::Tensor g : tape2.gradient(loss2, vars)) grads.push_back(g);
  return {y, grads};
}

// Keras' values and gradients: y, dx, then the trainable weights' gradients.
void check_keras(const tf::keras::Layer& layer, const tf::Tensor& x,
                 const std::vector<std::vector<double>>& want, double rtol = 1e-5,
                 double atol = 1e-6) {
  auto [y, g] = value_and_grads(layer, x);
  REQUIRE(want.size() == g.size() + 1);
  check_values(y, want[0], rtol, atol);
  for (size_t i = 0; i < g.size(); ++i) {
    CAPTURE(i);
    check_values(g[i], want[i + 1], rtol, atol);
  }
}

// Central differences of sum(layer(x) * cotangent) in float64 against the tape's gradients,
// with respect to x and every trainable variable. Builds the layer in float64.
void check_finite_differences(const tf::keras::Layer& layer, const tf::Tensor& x32) {
  const tf::Tensor x = tf::cast(x32, tf::float64);
  auto [y, grads] = value_and_grads(layer, x);
  REQUIRE(y.dtype() == tf::float64);
  const tf::Tensor c = cotangent(y.shape(), tf::float64);
  auto loss = [&](const tf::Tensor& in) { return tf::reduce_sum(layer(in) * c).item<double>(); };
  const double h = 1e-6;
  const std::vector<double> fd = tf::testing::central_differences(
      [&](const std::vector<double>& v) { return loss(tf::convert_to_tensor(v, x.shape())); },
      vals(x), h);
  check_values(grads[0], fd, 1e-6, 1e-7);
  auto vars = layer.trainable_variables();
  for (size_t k = 0; k < vars.size(); ++k) {
    CAPTURE(vars[k].name());
    const auto w = vals(vars[k].value());
    const std::vector<double> wfd = tf::testing::central_differences(
        [&](const std::vector<double>& v) {
          vars[k].assign(tf::convert_to_tensor(v, vars[k].shape()));
          return loss(x);
        },
        w, h);
    vars[k].assign(tf::convert_to_tensor(w, vars[k].shape()));
    check_values(grads[k + 1], wfd, 1e-6, 1e-7);
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

// The output shape for an input shape with a None batch, without building `l`.
tf::TensorShape shape_for(const tf::keras::Layer& l, const tf::TensorShape& s) {
  return l.impl().compute_output_shape(s);
}

}  // namespace

TEST_CASE("ZeroPadding and Cropping layers match Keras values gradients and shapes",
          "[cpu][keras]") {
  layers::ZeroPadding1D zp1({1, 2});
  CHECK(starts_with(zp1.name(), "zero_padding1d"));
  CHECK(zp1.class_name() == "ZeroPadding1D");
  // Keras 3.15.1: ZeroPadding1D((1, 2)) on seq((2, 3, 2), 0.5, 0.1).
  check_keras(zp1, seq({2, 3, 2}, 0.5, 0.1),
              {{0,
                0,
                0.099833414,
                0.564642489,
                0.891207337,
                0.999573588,
                0.863209367,
                0.51550138,
                0,
                0,
                0,
                0,
                0,
                0,
                0.0415806621,
                -0.44252044,
                -0.818277121,
                -0.993691027,
                -0.925814688,
                -0.631266654,
                0,
                0,
                0,
                0},
               {0.825335622, 0.621609986, 0.362357765, 0.070737198, -0.227202088, -0.504846096,
                -0.49026081, -0.210795805, 0.0874989852, 0.377977729, 0.634692848, 0.834712803}});
  CHECK(zp1.output_shape() == tf::TensorShape({tf::None, 6, 2}));
  layers::ZeroPadding2D zp2({{1, 0}, {0, 2}});
  CHECK(starts_with(zp2.name(), "zero_padding2d"));
  // ZeroPadding2D(((1, 0), (0, 2))) on seq((1, 2, 2, 2), 0.7).
  check_keras(zp2, seq({1, 2, 2, 2}, 0.7),
              {{0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0,
                0.64421767,
                0.985449731,
                0.863209367,
                0,
                0,
                0,
                0,
                0.334988147,
                -0.350783229,
                -0.871575773,
                -0.982452631,
                0,
                0,
                0,
                0},
               {-0.737393737, -0.904072165, -0.989992499, -0.987479746, 0.0874989852, 0.377977729,
                0.634692848, 0.834712803}});
  CHECK(zp2.output_shape() == tf::TensorShape({tf::None, 3, 4, 2}));
  // Keras' compute_output_shape: (None, 5, 6, 2), (None, 5, 8, 2), (None, None, 2).
  CHECK(shape_for(layers::ZeroPadding2D(), {tf::None, 3, 4, 2}) ==
        tf::TensorShape({tf::None, 5, 6, 2}));
  CHECK(shape_for(layers::ZeroPadding2D({1, 2}), {tf::None, 3, 4, 2}) ==
        tf::TensorShape({tf::None, 5, 8, 2}));
  CHECK(shape_for(layers::ZeroPadding1D(2), {tf::None, tf::None, 2}) ==
        tf::TensorShape({tf::None, tf::None, 2}));

  layers::Cropping1D cr1({1, 2});
  CHECK(starts_with(cr1.name(), "cropping1d"));
  // Cropping1D((1, 2)) on seq((2, 5, 2), 0.5).
  check_keras(cr1, seq({2, 5, 2}, 0.5),
              {{0.841470957, 0.997494996, 0.909297407, 0.598472118, -0.279415488, 0.215119988,
                0.656986594, 0.937999964},
               {0, 0, 1,           0.955336511, 0.825335622,  0.621609986,  0, 0, 0, 0,
                0, 0, 0.362357765, 0.070737198, -0.227202088, -0.504846096, 0, 0, 0, 0}});
  CHECK(cr1.output_shape() == tf::TensorShape({tf::None, 2, 2}));
  layers::Cropping2D cr2({{1, 0}, {0, 1}});
  CHECK(starts_with(cr2.name(), "cropping2d"));
  // Cropping2D(((1, 0), (0, 1))) on seq((1, 3, 3, 2), 0.4).
  check_keras(cr2, seq({1, 3, 3, 2}, 0.4),
              {{0.6754632, 0.334988147, -0.0583741441, -0.44252044, -0.99616462, -0.88345468,
                -0.631266654, -0.279415488},
               {0, 0, 0, 0, 0, 0, 1, 0.955336511, 0.825335622, 0.621609986, 0, 0, 0.362357765,
                0.070737198, -0.227202088, -0.504846096, 0, 0}});
  CHECK(shape_for(layers::Cropping2D(1), {tf::None, 3, 4, 2}) ==
        tf::TensorShape({tf::None, 1, 2, 2}));
  CHECK(shape_for(layers::Cropping1D(), {tf::None, tf::None, 2}) ==
        tf::TensorShape({tf::None, tf::None, 2}));
  // Integer inputs keep their dtype.
  const tf::Tensor ints = tf::constant(std::vector<int32_t>{1, 2, 3, 4}, {1, 4, 1});
  CHECK(layers::ZeroPadding1D(1)(ints).dtype() == tf::int32);
  check_values(layers::Cropping1D({1, 2})(ints), {2});

  // Keras' errors when the cropping leaves nothing, and on negative amounts and wrong ranks.
  tf::testing::require_error(
      [] {
        (void)layers::Cropping1D({1, 2})(tf::ones({2, 3, 2}));
      },
      {"(Cropping1D)", "cropping (1, 2)", "smaller than the input's length", "(None, 3, 2)"});
  tf::testing::require_error(
      [] {
        (void)layers::Cropping1D({2, 1})(tf::ones({2, 3, 2}));
      },
      {"(Cropping1D)", "(2, 1)"});
  tf::testing::require_error(
      [] {
        (void)layers::Cropping2D({{1, 1}, {2, 2}})(tf::ones({2, 3, 4, 2}));
      },
      {"(Cropping2D)", "((1, 1), (2, 2))", "height and width", "(None, 3, 4, 2)", "axis 2"});
  layers::Cropping1D built(1);
  (void)built(tf::ones({1, 5, 2}));
  tf::testing::require_error(
      [&] {
        (void)built(tf::ones({1, 2, 2}));
      },
      {"[" + built.name() + "]", "(Cropping1D)", "(1, 2, 2)"});
  tf::testing::require_error(
      [] {
        layers::ZeroPadding1D({-1, 0});
      },
      {"ZeroPadding1D", "padding", "negative", "(-1, 0)"});
  tf::testing::require_error([] { layers::Cropping2D({1, -2}); }, {"Cropping2D", "negative"});
  tf::testing::require_error(
      [] {
        (void)layers::ZeroPadding2D()(tf::ones({2, 3, 4}));
      },
      {"(ZeroPadding2D)", "ndim=4", "(None, 3, 4)"});

  Float64Layers f64;
  check_finite_differences(layers::ZeroPadding1D({2, 1}), seq({2, 3, 2}, 0.5, 0.1));
  check_finite_differences(layers::ZeroPadding2D({{1, 0}, {0, 2}}), seq({1, 2, 2, 2}, 0.7));
  check_finite_differences(layers::Cropping1D({0, 2}), seq({2, 5, 2}, 0.5));
  check_finite_differences(layers::Cropping2D({{1, 0}, {0, 1}}), seq({1, 3, 3, 2}, 0.4));
}

TEST_CASE("LeakyReLU ELU and PReLU match Keras values and gradients", "[cpu][keras]") {
  // seq((2, 5), 0.9, 0, 1.5): x[0] = 0 exercises the gradients at 0.
  const tf::Tensor x = seq({2, 5}, 0.9, 0.0, 1.5);
  layers::LeakyReLU lr;
  CHECK(starts_with(lr.name(), "leaky_re_lu"));
  CHECK(lr.class_name() == "LeakyReLU");
  // Keras 3.15.1: LeakyReLU() (negative_slope 0.3), LeakyReLU(negative_slope=0.1), ELU(0.5),
  // ELU().
  check_keras(lr, x,
              {{0, 1.17499042, 1.46077144, 0.641069829, -0.199134216, -0.439888567, -0.347744048,
                0.0252208505, 1.19050181, 1.4548347},
               {0.300000012, 0.955336511, 0.825335622, 0.621609986, 0.108707331, 0.0212211609,
                -0.0681606308, -0.504846096, -0.737393737, -0.904072165}});
  check_keras(layers::LeakyReLU(0.1), x,
              {{0, 1.17499042, 1.46077144, 0.641069829, -0.0663780719, -0.146629512, -0.11591468,
                0.0252208505, 1.19050181, 1.4548347},
               {0.100000001, 0.955336511, 0.825335622, 0.621609986, 0.0362357758, 0.00707371999,
                -0.0227202084, -0.504846096, -0.737393737, -0.904072165}});
  layers::ELU elu05(0.5);
  CHECK(starts_with(elu05.name(), "elu"));
  check_keras(elu05, x,
              {{0, 1.17499042, 1.46077144, 0.641069829, -0.242549509, -0.384610534, -0.343123138,
                0.0252208505, 1.19050181, 1.4548347},
               {0.5, 0.955336511, 0.825335622, 0.621609986, 0.0932891816, 0.00816232711,
                -0.0356427506, -0.504846096, -0.737393737, -0.904072165}});
  check_keras(layers::ELU(), x,
              {{0, 1.17499042, 1.46077144, 0.641069829, -0.485099018, -0.769221067, -0.686246276,
                0.0252208505, 1.19050181, 1.4548347},
               {1, 0.955336511, 0.825335622, 0.621609986, 0.186578363, 0.0163246542, -0.0712855011,
                -0.504846096, -0.737393737, -0.904072165}});
  tf::testing::require_error([] { layers::LeakyReLU(-0.1); }, {"LeakyReLU", "negative_slope"});

  // PReLU with alpha = seq((3, 2), 0.5, 0.2, 0.3), and with shared_axes=[1] and alpha
  // [[0.1, -0.2]].
  const tf::Tensor xp = seq({2, 3, 2}, 0.7, 0.1, 1.5);
  layers::PReLU p;
  CHECK(starts_with(p.name(), "p_re_lu"));
  p.build({tf::None, 3, 2});
  CHECK(p.alpha().shape() == tf::TensorShape({3, 2}));
  check_values(p.alpha(), std::vector<double>(6, 0.0));  // Keras' zeros initializer
  CHECK(weight_names(p) == std::vector<std::string>{p.impl().local_base_name() + "/alpha"});
  p.set_weights({seq({3, 2}, 0.5, 0.2, 0.3)});
  check_keras(p, xp,
              {{0.149750128, 1.07603419, 1.49624252, 1.21274459, 0.358873993, -0.0851059482,
                -0.0819063336, -0.277990192, -0.230967209, 0.174823806, 1.09345353, 1.49781501},
               {1, 0.955336511, 0.825335622, 0.621609986, 0.362357765, 0.00906949583, -0.0135414265,
                -0.0975692347, -0.20618394, -0.904072165, -0.989992499, -0.987479746},
               {0.312232196, 0.726163805, 0.60910809, -0, -0, -0.0469539873}});
  CHECK(p.output_shape() == tf::TensorShape({tf::None, 3, 2}));
  layers::PReLU shared({.shared_axes = {1}});
  shared.build({tf::None, 3, 2});
  CHECK(shared.alpha().shape() == tf::TensorShape({1, 2}));
  shared.set_weights({tf::constant({{0.1f, -0.2f}})});
  check_keras(shared, xp,
              {{0.149750128, 1.07603419, 1.49624252, 1.21274459, 0.358873993, 0.132756144,
                -0.137424886, 0.287677288, -0.0826028287, 0.174823806, 1.09345353, 1.49781501},
               {1, 0.955336511, 0.825335622, 0.621609986, 0.362357765, -0.01414744, -0.0227202084,
                0.100969218, -0.0737393722, -0.904072165, -0.989992499, -0.987479746},
               {0.921340287, 0.679209828}});
  // A shared axis takes any size; the others must match the build.
  CHECK(shared(tf::ones({1, 7, 2})).shape() == tf::TensorShape({1, 7, 2}));
  tf::testing::require_error(
      [&] {
        (void)p(tf::ones({1, 4, 2}));
      },
      {"[" + p.name() + "]", "(PReLU)", "(3, 2)", "(1, 4, 2)"});
  tf::testing::require_error(
      [] {
        (void)layers::PReLU({.shared_axes = {2}})(tf::ones({2, 3}));
      },
      {"(PReLU)", "shared axis 2", "(None, 3)"});
  // Options: an initializer and a regularizer (its penalty in losses()).
  layers::PReLU reg({.alpha_initializer = tf::keras::initializers::Constant(0.25),
                     .alpha_regularizer = tf::keras::regularizers::L2(0.5),
                     .shared_axes = {1, 2},
                     .name = "act"});
  CHECK(reg(tf::ones({2, 4, 4, 3})).shape() == tf::TensorShape({2, 4, 4, 3}));
  CHECK(reg.name() == "act");
  CHECK(reg.alpha().shape() == tf::TensorShape({1, 1, 3}));
  REQUIRE(reg.losses().size() == 1);
  check_values(reg.losses()[0], {0.5 * 3 * 0.0625});

  Float64Layers f64;
  check_finite_differences(layers::LeakyReLU(), seq({2, 5}, 0.9, 0.3, 1.5));
  check_finite_differences(layers::ELU(0.5), seq({2, 5}, 0.9, 0.3, 1.5));
  check_finite_differences(
      layers::PReLU({.alpha_initializer = "random_normal", .shared_axes = {1}}),
      seq({2, 3, 2}, 0.7, 0.1, 1.5));
}

TEST_CASE("Permute RepeatVector and UpSampling1D match Keras", "[cpu][keras]") {
  layers::Permute perm({2, 1});
  CHECK(starts_with(perm.name(), "permute"));
  // Keras 3.15.1: Permute((2, 1)) on seq((2, 3, 4), 0.3), Permute((3, 1, 2)) on
  // seq((2, 2, 3, 2), 0.3), RepeatVector(3) on seq((2, 4), 0.5), UpSampling1D(3) on
  // seq((2, 2, 3), 0.5).
  check_keras(perm, seq({2, 3, 4}, 0.3),
              {{0,
                0.932039082,
                0.6754632,
                0.295520216,
                0.997494996,
                0.427379876,
                0.564642489,
                0.973847628,
                0.141120002,
                0.783326924,
                0.863209367,
                -0.157745689,
                -0.44252044,
                -0.99616462,
                -0.279415488,
                -0.687766135,
                -0.925814688,
                0.0168139003,
                -0.871575773,
                -0.772764504,
                0.311541349,
                -0.977530122,
                -0.550685525,
                0.578439772},
               {1,
                0.621609986,
                -0.227202088,
                -0.904072165,
                0.955336511,
                0.362357765,
                -0.504846096,
                -0.989992499,
                0.825335622,
                0.070737198,
                -0.737393737,
                -0.987479746,
                -0.896758437,
                -0.210795805,
                0.634692848,
                0.999858618,
                -0.7259323,
                0.0874989852,
                0.834712803,
                0.950232565,
                -0.49026081,
                0.377977729,
                0.960170269,
                0.815725088}});
  CHECK(perm.output_shape() == tf::TensorShape({tf::None, 4, 3}));
  layers::Permute perm3({3, 1, 2});
  check_keras(perm3, seq({2, 2, 3, 2}, 0.3),
              {{0,
                0.564642489,
                0.932039082,
                0.973847628,
                0.6754632,
                0.141120002,
                0.295520216,
                0.783326924,
                0.997494996,
                0.863209367,
                0.427379876,
                -0.157745689,
                -0.44252044,
                -0.871575773,
                -0.99616462,
                -0.772764504,
                -0.279415488,
                0.311541349,
                -0.687766135,
                -0.977530122,
                -0.925814688,
                -0.550685525,
                0.0168139003,
                0.578439772},
               {1,
                -0.227202088,
                0.955336511,
                -0.504846096,
                0.825335622,
                -0.737393737,
                0.621609986,
                -0.904072165,
                0.362357765,
                -0.989992499,
                0.070737198,
                -0.987479746,
                -0.896758437,
                0.634692848,
                -0.7259323,
                0.834712803,
                -0.49026081,
                0.960170269,
                -0.210795805,
                0.999858618,
                0.0874989852,
                0.950232565,
                0.377977729,
                0.815725088}});
  CHECK(perm3.output_shape() == tf::TensorShape({tf::None, 2, 2, 3}));
  CHECK(shape_for(layers::Permute({2, 1}), {tf::None, tf::None, 5}) ==
        tf::TensorShape({tf::None, 5, tf::None}));
  layers::RepeatVector rep(3);
  CHECK(starts_with(rep.name(), "repeat_vector"));
  check_keras(rep, seq({2, 4}, 0.5),
              {{0,           0.47942555,   0.841470957, 0.997494996,  0,           0.47942555,
                0.841470957, 0.997494996,  0,           0.47942555,   0.841470957, 0.997494996,
                0.909297407, 0.598472118,  0.141120002, -0.350783229, 0.909297407, 0.598472118,
                0.141120002, -0.350783229, 0.909297407, 0.598472118,  0.141120002, -0.350783229},
               {0.624963999, 0.122001529, -0.391858935, -0.870715857, 0.150910795, 0.651904047,
                1.09466457, 1.43964207}});
  CHECK(rep.output_shape() == tf::TensorShape({tf::None, 3, 4}));
  layers::UpSampling1D up(3);
  CHECK(starts_with(up.name(), "up_sampling1d"));
  check_keras(up, seq({2, 2, 3}, 0.5),
              {{0,
                0.47942555,
                0.841470957,
                0,
                0.47942555,
                0.841470957,
                0,
                0.47942555,
                0.841470957,
                0.997494996,
                0.909297407,
                0.598472118,
                0.997494996,
                0.909297407,
                0.598472118,
                0.997494996,
                0.909297407,
                0.598472118,
                0.141120002,
                -0.350783229,
                -0.756802499,
                0.141120002,
                -0.350783229,
                -0.756802499,
                0.141120002,
                -0.350783229,
                -0.756802499,
                -0.977530122,
                -0.958924294,
                -0.705540299,
                -0.977530122,
                -0.958924294,
                -0.705540299,
                -0.977530122,
                -0.958924294,
                -0.705540299},
               {1.39440787, 0.81284821, 0.158679068, -2.01162648, -1.62842572, -1.0997628,
                2.24290276, 2.13158059, 1.82985079, -2.04386568, -2.22577953, -2.20887136}});
  CHECK(up.output_shape() == tf::TensorShape({tf::None, 6, 3}));
  CHECK(shape_for(layers::UpSampling1D(), {tf::None, tf::None, 3}) ==
        tf::TensorShape({tf::None, tf::None, 3}));
  // Empty batches.
  CHECK(layers::UpSampling1D()(tf::ones({0, 2, 3})).shape() == tf::TensorShape({0, 4, 3}));
  CHECK(layers::RepeatVector(2)(tf::ones({0, 3})).shape() == tf::TensorShape({0, 2, 3}));

  tf::testing::require_error([] { layers::Permute({1, 3}); }, {"Permute", "dims", "(1, 3)"});
  tf::testing::require_error([] { layers::Permute({2, 2}); }, {"Permute", "(2, 2)"});
  tf::testing::require_error(
      [] {
        (void)layers::Permute({2, 1})(tf::ones({2, 3}));
      },
      {"(Permute)", "ndim=3", "(None, 3)"});
  tf::testing::require_error(
      [] {
        (void)layers::RepeatVector(2)(tf::ones({2, 3, 1}));
      },
      {"(RepeatVector)", "ndim=2", "(None, 3, 1)"});
  tf::testing::require_error([] { layers::RepeatVector(0); }, {"RepeatVector", "n must"});
  tf::testing::require_error(
      [] {
        (void)layers::UpSampling1D()(tf::ones({2, 3}));
      },
      {"(UpSampling1D)", "ndim=3"});

  Float64Layers f64;
  check_finite_differences(layers::Permute({3, 1, 2}), seq({2, 2, 3, 2}, 0.3));
  check_finite_differences(layers::RepeatVector(3), seq({2, 4}, 0.5));
  check_finite_differences(layers::UpSampling1D(2), seq({2, 2, 3}, 0.5));
}

TEST_CASE("noise layers are the identity in inference and draw Keras' noise in training",
          "[cpu][keras]") {
  tf::random::set_seed(7);
  CHECK(starts_with(layers::SpatialDropout1D(0.5).name(), "spatial_dropout1d"));
  CHECK(starts_with(layers::SpatialDropout2D(0.5).name(), "spatial_dropout2d"));
  CHECK(starts_with(layers::GaussianNoise(0.1).name(), "gaussian_noise"));
  CHECK(starts_with(layers::GaussianDropout(0.1).name(), "gaussian_dropout"));
  const tf::Tensor x3 = tf::random::normal({40, 8, 50}, 0, 1, tf::float32, 1) + 3.0;
  const tf::Tensor x4 = tf::random::normal({20, 4, 5, 50}, 0, 1, tf::float32, 2) + 3.0;
  for (const tf::keras::Layer& l : std::vector<tf::keras::Layer>{
           layers::SpatialDropout1D(0.3), layers::GaussianNoise(0.5), layers::GaussianDropout(0.4)})
    check_values(l(x3), vals(x3), 0, 0);
  check_values(layers::SpatialDropout2D(0.3)(x4), vals(x4), 0, 0);

  // SpatialDropout1D: every (example, channel) keeps all its steps, scaled by 1 / (1 - rate), or
  // none; about `rate` of them are dropped. The gradient is the same mask.
  {
    layers::SpatialDropout1D sd(0.3);
    tf::GradientTape tape;
    tape.watch(x3);
    const tf::Tensor y = sd(x3, true);
    const auto g = vals(tape.gradient(tf::reduce_sum(y), x3));
    const auto yv = vals(y), xv = vals(x3);
    int dropped = 0;
    for (int b = 0; b < 40; ++b)
      for (int c = 0; c < 50; ++c) {
        const bool drop = yv[(b * 8) * 50 + c] == 0.0;
        dropped += drop;
        for (int t = 0; t < 8; ++t) {
          const size_t i = static_cast<size_t>((b * 8 + t) * 50 + c);
          const double want = drop ? 0.0 : xv[i] / 0.7;
          REQUIRE(std::abs(yv[i] - want) <= 1e-5 * std::abs(want));
          REQUIRE(std::abs(g[i] - (drop ? 0.0 : 1 / 0.7)) <= 1e-5);
        }
      }
    CHECK(std::abs(dropped / 2000.0 - 0.3) < 0.04);
  }
  {
    layers::SpatialDropout2D sd(0.5);
    const auto yv = vals(sd(x4, true)), xv = vals(x4);
    int dropped = 0;
    for (int b = 0; b < 20; ++b)
      for (int c = 0; c < 50; ++c) {
        const bool drop = yv[static_cast<size_t>(b * 20 * 50 + c)] == 0.0;
        dropped += drop;
        for (int p = 0; p < 20; ++p) {
          const size_t i = static_cast<size_t>((b * 20 + p) * 50 + c);
          REQUIRE(std::abs(yv[i] - (drop ? 0.0 : 2 * xv[i])) <= 1e-5 * std::abs(xv[i]));
        }
      }
    CHECK(std::abs(dropped / 1000.0 - 0.5) < 0.06);
  }
  // GaussianNoise: y - x ~ N(0, stddev^2); GaussianDropout: y / x ~ N(1, rate / (1 - rate)).
  auto moments = [](const std::vector<double>& v) {
    double m = 0, s = 0;
    for (double e : v) m += e;
    m /= double(v.size());
    for (double e : v) s += (e - m) * (e - m);
    return std::pair<double, double>{m, std::sqrt(s / double(v.size()))};
  };
  {
    const auto [m, s] = moments(vals(layers::GaussianNoise(0.5)(x3, true) - x3));
    CHECK(std::abs(m) < 0.02);
    CHECK(std::abs(s - 0.5) < 0.02);
    const auto [m2, s2] = moments(vals(layers::GaussianDropout(0.2)(x3, true) / x3));
    CHECK(std::abs(m2 - 1) < 0.02);
    CHECK(std::abs(s2 - 0.5) < 0.02);
  }
  // A new draw per call; the same draws after set_seed again; the seed argument.
  layers::GaussianNoise gn(0.1, /*seed=*/3);
  tf::random::set_seed(11);
  const auto a1 = vals(gn(x3, true)), a2 = vals(gn(x3, true));
  CHECK(a1 != a2);
  tf::random::set_seed(11);
  CHECK(vals(gn(x3, true)) == a1);
  // rate 0 / stddev 0 is the identity even in training.
  check_values(layers::SpatialDropout1D(0.0)(x3, true), vals(x3), 0, 0);
  check_values(layers::GaussianNoise(0.0)(x3, true), vals(x3), 0, 0);

  tf::testing::require_error([] { layers::SpatialDropout1D(1.0); },
                             {"SpatialDropout1D", "rate", "[0, 1)"});
  tf::testing::require_error([] { layers::GaussianDropout(-0.1); }, {"GaussianDropout", "rate"});
  tf::testing::require_error([] { layers::GaussianNoise(1.5); },
                             {"GaussianNoise", "stddev", "between 0 and 1"});
  tf::testing::require_error([&] { (void)layers::SpatialDropout2D(0.5)(x3, true); },
                             {"(SpatialDropout2D)", "ndim=4", "(None, 8, 50)"});
  tf::testing::require_error([&] { (void)layers::SpatialDropout1D(0.5)(x4); },
                             {"(SpatialDropout1D)", "ndim=3"});
}

TEST_CASE("ActivityRegularization adds Keras' penalty to losses at every call", "[cpu][keras]") {
  layers::ActivityRegularization ar(0.01, 0.1);
  CHECK(starts_with(ar.name(), "activity_regularization"));
  const tf::Tensor x = x24();
  tf::GradientTape tape;
  tape.watch(x);
  const tf::Tensor y = ar(x);
  check_values(y, vals(x), 0, 0);
  // Keras 3.15.1: ActivityRegularization(l1=0.01, l2=0.1)(x); layer.losses (divided by the
  // batch size 2).
  auto losses = ar.losses();
  REQUIRE(losses.size() == 1);
  check_values(losses[0], {5.907042503356934}, 1e-6);
  // d/dx of (l1 sum|x| + l2 sum x^2) / 2 = (0.01 sign(x) + 0.2 x) / 2.
  std::vector<double> want;
  for (double v : vals(x)) want.push_back((0.01 * (v > 0 ? 1 : v < 0 ? -1 : 0) + 0.2 * v) / 2);
  check_values(tape.gradient(losses[0], x), want, 1e-5, 1e-7);
  // Another call replaces the record (Keras clears it at each outermost call), training or not.
  (void)ar(tf::ones({4, 2}), true);
  REQUIRE(ar.losses().size() == 1);
  check_values(ar.losses()[0], {(0.01 * 8 + 0.1 * 8) / 4});
  (void)ar(tf::zeros({0, 2}));
  check_values(ar.losses()[0], {0.0});
  // In a model: model.losses() holds the penalty of the latest call.
  K::Sequential model(
      {layers::Dense(2, {.kernel_initializer = "ones"}), layers::ActivityRegularization(0.0, 1.0)});
  (void)model(tf::ones({2, 3}));
  REQUIRE(model.losses().size() == 1);
  check_values(model.losses()[0], {2 * 2 * 9 / 2.0});
  tf::testing::require_error([] { layers::ActivityRegularization(-1.0); },
                             {"ActivityRegularization", "l1"});
}

TEST_CASE("GroupNormalization and UnitNormalization match Keras values and gradients",
          "[cpu][keras]") {
  const tf::Tensor x = x24();
  layers::GroupNormalization gn(2);
  CHECK(starts_with(gn.name(), "group_normalization"));
  gn.build({tf::None, 3, 4});
  CHECK(weight_names(gn) == std::vector<std::string>{gn.name() + "/gamma", gn.name() + "/beta"});
  CHECK(gn.gamma().shape() == tf::TensorShape({4}));
  gn.set_weights(norm_params(4));
  // Keras 3.15.1: GroupNormalization(groups=2) and GroupNormalization(groups=3, axis=1,
  // epsilon=0.01) with the reference gamma and beta.
  check_keras(
      gn, x,
      {{-1.47730267, -0.292617381, 0.525568724,   0.814710379,  1.41725147,   1.56202149,
        1.11080873,  0.521659017,  -0.0720061064, -0.637982249, -0.934680641, -1.39846778,
        -1.28102756, -1.03958178,  -1.26029229,   -1.04756927,  -0.356607139, 0.27839756,
        0.330845594, 0.538355947,  1.30710053,    1.58278799,   1.19298565,   0.859037042},
       {0.931673765,  0.916239202,    0.772494018,   0.324193299,   0.412562966,   0.0593121573,
        -0.455729783, -0.492193937,   -1.04832745,   -1.27146053,   -0.195742011,  0.0469785929,
        -0.112000048, -0.00449985266, -0.0484576821, 0.0195964575,  0.108339228,   0.090652369,
        0.0779259205, 0.039328441,    -0.0092972517, -0.0731945932, -0.0137334764, -0.0746594816},
       {1.32904959, 2.58051562, 3.06805468, 3.30622339},
       {0.775874794, 0.773905575, 0.702805638, 0.568926215}});
  CHECK(gn.output_shape() == tf::TensorShape({tf::None, 3, 4}));
  check_values(gn(x, true), vals(gn(x)));  // the same in training
  layers::GroupNormalization gn1(3, 1, 0.01);
  gn1.build({tf::None, 3, 4});
  gn1.set_weights(norm_params(3));
  check_keras(
      gn1, x,
      {{-1.54952741,  -0.406295896, 0.601000309,  1.35482335,  0.91270256,  1.02567291,
        0.183880806,  -1.44908094,  1.51397252,   0.551322103, -0.33456409, -1.00329268,
        -0.941285133, -0.8347435,   0.0739425421, 1.70208621,  -1.26042879, -0.287255049,
        0.683740377,  1.5371201,    -0.816719055, 0.859342575, 1.00565147,  -0.320833206},
       {-0.0590114295, 0.0756050646,  0.0683309808, -0.0849242806,  0.901042223,    -0.275630653,
        -0.574139774,  -0.0512733459, 0.0528534204, -0.0546117835,  -0.0513545498,  0.0531125814,
        -0.329428434,  0.110056996,   0.221996352,  -0.00262498856, -0.0227349699,  0.0170675665,
        0.017679289,   -0.012011975,  0.303367913,  0.292207241,    -0.00985798985, -0.585716724},
       {0.414136529, 2.1971879, 0.476393938},
       {1.0785346, 1.63592923, 0.107048512}});
  // groups = -1 (instance normalization), no gamma or beta: each channel of each example has
  // mean 0.
  layers::GroupNormalization inst({.groups = -1, .center = false, .scale = false});
  const tf::Tensor yi = inst(x);
  CHECK(inst.variables().empty());
  check_values(tf::reduce_mean(yi, 1), std::vector<double>(8, 0.0), 0, 1e-6);
  tf::testing::require_error(
      [] {
        (void)layers::GroupNormalization(3)(tf::ones({2, 4}));
      },
      {"(GroupNormalization)", "multiple", "groups (3)", "(None, 4)"});
  tf::testing::require_error(
      [] {
        (void)layers::GroupNormalization(8)(tf::ones({2, 4}));
      },
      {"(GroupNormalization)", "groups (8)", "more than", "channels (4)"});
  tf::testing::require_error([] { layers::GroupNormalization(0); },
                             {"GroupNormalization", "groups"});
  tf::testing::require_error(
      [] {
        (void)layers::GroupNormalization(1, 0)(tf::ones({2, 4}));
      },
      {"(GroupNormalization)", "axis 0"});
  tf::testing::require_error(
      [&] {
        (void)gn(tf::ones({2, 3, 6}));
      },
      {"[" + gn.name() + "]", "axis 2", "value 4", "(2, 3, 6)"});

  layers::UnitNormalization un;
  CHECK(starts_with(un.name(), "unit_normalization"));
  // Keras 3.15.1: UnitNormalization() and UnitNormalization(axis=[1, 2]).
  check_keras(un, x,
              {{0,
                0.301613748,
                0.567364275,
                0.766242146,
                0.542254627,
                0.549234986,
                0.497221529,
                0.396322578,
                0.847039759,
                0.383264393,
                -0.0435283184,
                -0.365701199,
                -0.668929875,
                -0.635972381,
                -0.354879737,
                0.148769647,
                0.195141435,
                0.375944614,
                0.556343138,
                0.714890063,
                0.477563024,
                0.5147295,
                0.5179739,
                0.488559246},
               {0.366378099,   0.213793918,   0.0461411774,   -0.118320376,  0.0917064846,
                0.0257139392,  -0.0427505448, -0.107475013,   -0.187630415,  -0.500994742,
                -0.740156531,  -0.871547937,  -0.0840526223,  0.036734879,   -0.0579595566,
                -0.359156758,  -0.0282819085, -0.0085446015,  0.00388394296, 0.00919085741,
                0.00880684704, 0.00508596748, -0.00191551447, -0.0119361728}});
  check_keras(layers::UnitNormalization({1, 2}), x,
              {{0,
                0.153442726,
                0.28864041,
                0.389817387,
                0.445802569,
                0.451541305,
                0.408779591,
                0.325827777,
                0.216435701,
                0.097931765,
                -0.0111223608,
                -0.0934440047,
                -0.0786887035,
                -0.0748117864,
                -0.0417458192,
                0.0175003242,
                0.0963743925,
                0.185667574,
                0.274760872,
                0.353062391,
                0.41144079,
                0.443461299,
                0.446256489,
                0.420914501},
               {0.186390877,   0.166099906,    0.131325632,    0.0854628235,   0.032774616,
                -0.0220283307, -0.0742267519,  -0.119508132,   -0.154322043,   -0.176147938,
                -0.183658198,  -0.176770061,   -0.0775932893,  -0.0600488111,  -0.0427372195,
                -0.0271911919, -0.0144860735,  -0.00521882996, 0.000439912081, 0.00263957679,
                0.0017150566,  -0.00194767118, -0.00801963359, -0.0162911564}});
  // A zero vector stays zero (Keras caps 1 / norm at 1e12).
  check_values(layers::UnitNormalization()(tf::zeros({1, 3})), {0, 0, 0});
  tf::testing::require_error(
      [] {
        (void)layers::UnitNormalization(2)(tf::ones({2, 4}));
      },
      {"(UnitNormalization)", "axis 2", "(None, 4)"});

  Float64Layers f64;
  check_finite_differences(
      layers::GroupNormalization({.groups = 2,
                                  .beta_initializer = tf::keras::initializers::RandomUniform(),
                                  .gamma_initializer = "random_normal"}),
      x);
  check_finite_differences(layers::GroupNormalization({.groups = 3, .axis = 1, .epsilon = 0.01}),
                           x);
  check_finite_differences(layers::UnitNormalization({1, 2}), x);
}

TEST_CASE("TimeDistributed matches Keras and shares one set of weights", "[cpu][keras]") {
  layers::Dense dense(3);
  layers::TimeDistributed td(dense);
  CHECK(starts_with(td.name(), "time_distributed"));
  CHECK(td.class_name() == "TimeDistributed");
  CHECK(td.layer().id() == dense.id());
  td.build({tf::None, 4, 5});
  CHECK(td.output_shape() == tf::TensorShape({tf::None, 4, 3}));
  CHECK(dense.input_shape() == tf::TensorShape({tf::None, 5}));
  // Keras 3.15.1's paths: time_distributed/dense/kernel and time_distributed/dense/bias, as the
  // checkpoint names of a model that holds it (a root layer names its sub-layers' weights
  // without its own name, as every tapeflow model does).
  CHECK(weight_names(td) == std::vector<std::string>{"dense/kernel", "dense/bias"});
  K::Sequential holder({td});
  CHECK(weight_names(holder) ==
        std::vector<std::string>{"time_distributed/dense/kernel", "time_distributed/dense/bias"});
  CHECK(td.count_params() == 18);
  std::vector<float> bias{0.f, 0.1f, 0.2f};
  td.set_weights({seq({5, 3}, 0.3), tf::constant(bias, {3})});
  // TimeDistributed(Dense(3)) on seq((2, 4, 5), 0.45, 0.3), kernel seq((5, 3), 0.3), bias
  // (0, 0.1, 0.2).
  check_keras(td, seq({2, 4, 5}, 0.45, 0.3),
              {{1.48566222,   1.17418253,   0.766749084, -0.0652176142, 0.680356264, 1.37408864,
                -1.40372634,  -1.70331144,  -1.84181213, 1.82878518,    1.78522909,  1.59113646,
                -0.893863082, -0.213921458, 0.494061708, -0.70578289,   -1.19083464, -1.56058002,
                1.78057146,   2.03565788,   2.11783814,  -1.53123319,   -1.04102409, -0.448890567},
               {0.748340845,  2.49700594,    2.35598683,   0.432003856,  -1.81891108,  0.147025272,
                0.895215392,  0.965924382,   0.305641025,  -0.585945368, -0.565556049, -1.38405633,
                -1.15513039,  -0.0520247966, 1.09045219,   -0.850135803, -2.61590195,  -2.40200567,
                -0.370319366, 1.94161713,    -0.491349757, -1.86808515,  -1.83109081,  -0.408363581,
                1.32340503,   0.23928,       0.293461323,  0.125557005,  -0.137366384, -0.296333611,
                0.788827419,  2.23292208,    1.98718572,   0.237586901,  -1.69181287,  0.741405964,
                2.48255181,   2.34495187,    0.432739139,  -1.80696189},
               {0.572438121, 0.604673982, 0.582896233, 0.435103536, 0.545390129, 0.606958747,
                0.211136937, 0.377516031, 0.510172367, -0.0548677444, 0.134475946, 0.311807752,
                -0.309948325, -0.135338783, 0.0513602495},
               {1.01733291, 0.969367683, 0.834811628}});
  // A wrapped layer with training behaviour gets `training`; a 2-D layer runs on every frame.
  layers::TimeDistributed drop(layers::Dropout(0.5));
  check_values(drop(tf::ones({2, 3, 4})), std::vector<double>(24, 1.0));
  const auto dv = vals(drop(tf::ones({2, 3, 4}), true));
  CHECK(std::set<double>(dv.begin(), dv.end()) == std::set<double>{0.0, 2.0});
  layers::TimeDistributed conv(layers::Conv2D(2, 3, {.padding = "same"}));
  CHECK(conv(tf::ones({2, 5, 6, 6, 1})).shape() == tf::TensorShape({2, 5, 6, 6, 2}));
  CHECK(conv.output_shape() == tf::TensorShape({tf::None, 5, 6, 6, 2}));
  CHECK(layers::TimeDistributed(layers::Flatten())(tf::ones({3, 2, 4, 5})).shape() ==
        tf::TensorShape({3, 2, 20}));
  CHECK(layers::TimeDistributed(layers::Dense(2))(tf::ones({0, 3, 4})).shape() ==
        tf::TensorShape({0, 3, 2}));
  tf::testing::require_error(
      [] {
        (void)layers::TimeDistributed(layers::Dense(2))(tf::ones({2, 3}));
      },
      {"(TimeDistributed)", "rank >= 3", "(None, 3)"});
  tf::testing::require_error(
      [&] {
        (void)td(tf::ones({2, 4, 6}));
      },
      {"(Dense)", "axis -1", "value 5"});
  tf::testing::require_error([] { (void)layers::TimeDistributed(tf::keras::Layer{}); },
                             {"TimeDistributed", "empty"});

  Float64Layers f64;
  check_finite_differences(layers::TimeDistributed(layers::Dense(3, {.bias_initializer = "ones"})),
                           seq({2, 4, 5}, 0.45, 0.3));
}

TEST_CASE("the misc layers traced with an unknown batch match the eager calls", "[cpu][keras]") {
  // (n, 6, 4) -> ZeroPadding1D (n, 9, 4) -> Cropping1D (n, 7, 4) -> UpSampling1D (n, 14, 4) ->
  // Permute (n, 4, 14) -> TimeDistributed(Dense) (n, 4, 3) -> GroupNormalization -> PReLU ->
  // LeakyReLU -> ELU -> UnitNormalization -> Flatten (n, 12) -> RepeatVector (n, 2, 12) ->
  // ActivityRegularization -> Reshape (n, 2, 3, 4) -> ZeroPadding2D -> Cropping2D -> noise
  // layers (inference: the identity).
  K::Sequential model({layers::ZeroPadding1D({1, 2}),
                       layers::Cropping1D({2, 0}),
                       layers::UpSampling1D(2),
                       layers::Permute({2, 1}),
                       layers::TimeDistributed(layers::Dense(3)),
                       layers::GroupNormalization(3),
                       layers::PReLU({.alpha_initializer = "random_normal"}),
                       layers::LeakyReLU(),
                       layers::ELU(0.7),
                       layers::UnitNormalization(),
                       layers::Flatten(),
                       layers::RepeatVector(2),
                       layers::ActivityRegularization(0.01, 0.01),
                       layers::Reshape({2, 3, 4}),
                       layers::ZeroPadding2D({1, 2}),
                       layers::Cropping2D({{1, 0}, {2, 1}}),
                       layers::SpatialDropout2D(0.5),
                       layers::GaussianNoise(0.5),
                       layers::GaussianDropout(0.5),
                       layers::Flatten(),
                       layers::Dense(2)});
  auto grads = [&](const tf::Tensor& x) {
    tf::GradientTape tape;
    tape.watch(x);
    const tf::Tensor y = model(x);
    tf::Tensor loss = tf::reduce_sum(tf::square(y));
    for (const tf::Tensor& l : model.losses()) loss = loss + l;
    std::vector<tf::Tensor> out{y, tape.gradient(loss, x)};
    return out;
  };
  auto f = tf::function([&](tf::Tensor x) { return grads(x); },
                        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 6, 4})}});
  for (int64_t n : {3, 5}) {
    CAPTURE(n);
    const tf::Tensor x = tf::random::normal({n, 6, 4}, 0, 1, tf::float32, n);
    const auto eager = grads(x);
    const auto traced = f(x);
    REQUIRE(traced.size() == 2);
    CHECK(traced[0].shape() == tf::TensorShape({n, 2}));
    check_values(traced[0], vals(eager[0]), 1e-5, 1e-6);
    check_values(traced[1], vals(eager[1]), 1e-4, 1e-6);
  }
  // The Keras output shapes of the stack, batch None.
  const std::vector<std::string> keras_shapes = {
      "(None, 9, 4)",    "(None, 7, 4)",    "(None, 14, 4)",   "(None, 4, 14)",   "(None, 4, 3)",
      "(None, 4, 3)",    "(None, 4, 3)",    "(None, 4, 3)",    "(None, 4, 3)",    "(None, 4, 3)",
      "(None, 12)",      "(None, 2, 12)",   "(None, 2, 12)",   "(None, 2, 3, 4)", "(None, 4, 7, 4)",
      "(None, 3, 4, 4)", "(None, 3, 4, 4)", "(None, 3, 4, 4)", "(None, 3, 4, 4)", "(None, 48)",
      "(None, 2)"};
  const auto stack = model.layers();
  REQUIRE(stack.size() == keras_shapes.size());
  for (size_t i = 0; i < stack.size(); ++i) {
    CAPTURE(i, stack[i].name());
    CHECK(stack[i].output_shape().to_string() == keras_shapes[i]);
  }
  // Training noise inside a traced function: a new draw per call, the right shape.
  layers::SpatialDropout1D sd(0.5);
  layers::GaussianNoise noise(0.3);
  auto g = tf::function([&](tf::Tensor x) { return noise(sd(x, true), true); },
                        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 3, 8})}});
  const tf::Tensor ones = tf::ones({4, 3, 8});
  const auto d1 = vals(g(ones)), d2 = vals(g(ones));
  CHECK(d1 != d2);
  CHECK(g(tf::ones({7, 3, 8})).shape() == tf::TensorShape({7, 3, 8}));
}

TEST_CASE("the misc layers give Keras' values on every device", "[cpu][cuda][keras]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    check_keras(layers::ZeroPadding2D({{1, 0}, {0, 2}}), seq({1, 2, 2, 2}, 0.7),
                {{0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0,
                  0.64421767,
                  0.985449731,
                  0.863209367,
                  0,
                  0,
                  0,
                  0,
                  0.334988147,
                  -0.350783229,
                  -0.871575773,
                  -0.982452631,
                  0,
                  0,
                  0,
                  0},
                 {-0.737393737, -0.904072165, -0.989992499, -0.987479746, 0.0874989852, 0.377977729,
                  0.634692848, 0.834712803}});
    check_keras(layers::Cropping1D({1, 2}), seq({2, 5, 2}, 0.5),
                {{0.841470957, 0.997494996, 0.909297407, 0.598472118, -0.279415488, 0.215119988,
                  0.656986594, 0.937999964},
                 {0, 0, 1,           0.955336511, 0.825335622,  0.621609986,  0, 0, 0, 0,
                  0, 0, 0.362357765, 0.070737198, -0.227202088, -0.504846096, 0, 0, 0, 0}});
    check_keras(layers::ELU(0.5), seq({2, 5}, 0.9, 0.0, 1.5),
                {{0, 1.17499042, 1.46077144, 0.641069829, -0.242549509, -0.384610534, -0.343123138,
                  0.0252208505, 1.19050181, 1.4548347},
                 {0.5, 0.955336511, 0.825335622, 0.621609986, 0.0932891816, 0.00816232711,
                  -0.0356427506, -0.504846096, -0.737393737, -0.904072165}});
    layers::PReLU p;
    p.build({tf::None, 3, 2});
    p.set_weights({seq({3, 2}, 0.5, 0.2, 0.3)});
    check_keras(
        p, seq({2, 3, 2}, 0.7, 0.1, 1.5),
        {{0.149750128, 1.07603419, 1.49624252, 1.21274459, 0.358873993, -0.0851059482,
          -0.0819063336, -0.277990192, -0.230967209, 0.174823806, 1.09345353, 1.49781501},
         {1, 0.955336511, 0.825335622, 0.621609986, 0.362357765, 0.00906949583, -0.0135414265,
          -0.0975692347, -0.20618394, -0.904072165, -0.989992499, -0.987479746},
         {0.312232196, 0.726163805, 0.60910809, -0, -0, -0.0469539873}});
    check_keras(layers::Permute({3, 1, 2}), seq({2, 2, 3, 2}, 0.3),
                {{0,
                  0.564642489,
                  0.932039082,
                  0.973847628,
                  0.6754632,
                  0.141120002,
                  0.295520216,
                  0.783326924,
                  0.997494996,
                  0.863209367,
                  0.427379876,
                  -0.157745689,
                  -0.44252044,
                  -0.871575773,
                  -0.99616462,
                  -0.772764504,
                  -0.279415488,
                  0.311541349,
                  -0.687766135,
                  -0.977530122,
                  -0.925814688,
                  -0.550685525,
                  0.0168139003,
                  0.578439772},
                 {1,
                  -0.227202088,
                  0.955336511,
                  -0.504846096,
                  0.825335622,
                  -0.737393737,
                  0.621609986,
                  -0.904072165,
                  0.362357765,
                  -0.989992499,
                  0.070737198,
                  -0.987479746,
                  -0.896758437,
                  0.634692848,
                  -0.7259323,
                  0.834712803,
                  -0.49026081,
                  0.960170269,
                  -0.210795805,
                  0.999858618,
                  0.0874989852,
                  0.950232565,
                  0.377977729,
                  0.815725088}});
    check_keras(layers::UpSampling1D(3), seq({2, 2, 3}, 0.5),
                {{0,
                  0.47942555,
                  0.841470957,
                  0,
                  0.47942555,
                  0.841470957,
                  0,
                  0.47942555,
                  0.841470957,
                  0.997494996,
                  0.909297407,
                  0.598472118,
                  0.997494996,
                  0.909297407,
                  0.598472118,
                  0.997494996,
                  0.909297407,
                  0.598472118,
                  0.141120002,
                  -0.350783229,
                  -0.756802499,
                  0.141120002,
                  -0.350783229,
                  -0.756802499,
                  0.141120002,
                  -0.350783229,
                  -0.756802499,
                  -0.977530122,
                  -0.958924294,
                  -0.705540299,
                  -0.977530122,
                  -0.958924294,
                  -0.705540299,
                  -0.977530122,
                  -0.958924294,
                  -0.705540299},
                 {1.39440787, 0.81284821, 0.158679068, -2.01162648, -1.62842572, -1.0997628,
                  2.24290276, 2.13158059, 1.82985079, -2.04386568, -2.22577953, -2.20887136}});
    layers::GroupNormalization gn(2);
    gn.build({tf::None, 3, 4});
    gn.set_weights(norm_params(4));
    check_keras(
        gn, x24(),
        {{-1.47730267, -0.292617381, 0.525568724,   0.814710379,  1.41725147,   1.56202149,
          1.11080873,  0.521659017,  -0.0720061064, -0.637982249, -0.934680641, -1.39846778,
          -1.28102756, -1.03958178,  -1.26029229,   -1.04756927,  -0.356607139, 0.27839756,
          0.330845594, 0.538355947,  1.30710053,    1.58278799,   1.19298565,   0.859037042},
         {0.931673765,  0.916239202,    0.772494018,   0.324193299,   0.412562966,   0.0593121573,
          -0.455729783, -0.492193937,   -1.04832745,   -1.27146053,   -0.195742011,  0.0469785929,
          -0.112000048, -0.00449985266, -0.0484576821, 0.0195964575,  0.108339228,   0.090652369,
          0.0779259205, 0.039328441,    -0.0092972517, -0.0731945932, -0.0137334764, -0.0746594816},
         {1.32904959, 2.58051562, 3.06805468, 3.30622339},
         {0.775874794, 0.773905575, 0.702805638, 0.568926215}});
    check_keras(layers::UnitNormalization({1, 2}), x24(),
                {{0,
                  0.153442726,
                  0.28864041,
                  0.389817387,
                  0.445802569,
                  0.451541305,
                  0.408779591,
                  0.325827777,
                  0.216435701,
                  0.097931765,
                  -0.0111223608,
                  -0.0934440047,
                  -0.0786887035,
                  -0.0748117864,
                  -0.0417458192,
                  0.0175003242,
                  0.0963743925,
                  0.185667574,
                  0.274760872,
                  0.353062391,
                  0.41144079,
                  0.443461299,
                  0.446256489,
                  0.420914501},
                 {0.186390877,   0.166099906,    0.131325632,    0.0854628235,   0.032774616,
                  -0.0220283307, -0.0742267519,  -0.119508132,   -0.154322043,   -0.176147938,
                  -0.183658198,  -0.176770061,   -0.0775932893,  -0.0600488111,  -0.0427372195,
                  -0.0271911919, -0.0144860735,  -0.00521882996, 0.000439912081, 0.00263957679,
                  0.0017150566,  -0.00194767118, -0.00801963359, -0.0162911564}});
    layers::TimeDistributed td(layers::Dense(3));
    td.build({tf::None, 4, 5});
    std::vector<float> bias{0.f, 0.1f, 0.2f};
    td.set_weights({seq({5, 3}, 0.3), tf::constant(bias, {3})});
    const tf::Tensor ty = td(seq({2, 4, 5}, 0.45, 0.3));
    CHECK(ty.placement() == device);
    check_values(
        ty, {1.48566222,   1.17418253,   0.766749084, -0.0652176142, 0.680356264, 1.37408864,
             -1.40372634,  -1.70331144,  -1.84181213, 1.82878518,    1.78522909,  1.59113646,
             -0.893863082, -0.213921458, 0.494061708, -0.70578289,   -1.19083464, -1.56058002,
             1.78057146,   2.03565788,   2.11783814,  -1.53123319,   -1.04102409, -0.448890567},
        1e-5, 1e-6);
    // The noise is drawn where the layer runs.
    const tf::Tensor x = tf::ones({8, 4, 16});
    for (const tf::keras::Layer& l :
         std::vector<tf::keras::Layer>{layers::SpatialDropout1D(0.5), layers::GaussianNoise(0.2),
                                       layers::GaussianDropout(0.2)}) {
      CAPTURE(l.name());
      const tf::Tensor y = l(x, true);
      CHECK(y.placement() == device);
      CHECK(vals(y) != vals(x));
    }
    const tf::Tensor y2 = layers::SpatialDropout2D(0.5)(tf::ones({4, 2, 2, 8}), true);
    CHECK(y2.placement() == device);
  }
}

TEST_CASE("the constructor spellings of docs/keras.md configure the misc layers", "[cpu][keras]") {
  using namespace tf::keras::layers;
  const tf::Tensor seq3 = tf::ones({2, 10, 3});
  const tf::Tensor img = tf::ones({2, 8, 8, 3});
  CHECK(ZeroPadding1D({1, 2})(seq3).shape() == tf::TensorShape({2, 13, 3}));
  CHECK(ZeroPadding2D({{1, 0}, {0, 2}})(img).shape() == tf::TensorShape({2, 9, 10, 3}));
  CHECK(Cropping1D(1)(seq3).shape() == tf::TensorShape({2, 8, 3}));
  CHECK(Cropping2D({2, 3})(img).shape() == tf::TensorShape({2, 4, 2, 3}));
  CHECK(LeakyReLU()(seq3).shape() == seq3.shape());
  CHECK(ELU(0.5)(seq3).shape() == seq3.shape());
  PReLU prelu({.shared_axes = {1, 2}});
  CHECK(prelu(img).shape() == img.shape());
  CHECK(prelu.alpha().shape() == tf::TensorShape({1, 1, 3}));
  CHECK(Permute({2, 1})(seq3).shape() == tf::TensorShape({2, 3, 10}));
  CHECK(RepeatVector(3)(tf::ones({2, 4})).shape() == tf::TensorShape({2, 3, 4}));
  CHECK(UpSampling1D(2)(seq3).shape() == tf::TensorShape({2, 20, 3}));
  CHECK(SpatialDropout1D(0.2)(seq3, true).shape() == seq3.shape());
  CHECK(SpatialDropout2D(0.2, /*seed=*/42)(img, true).shape() == img.shape());
  CHECK(GaussianNoise(0.1)(seq3, true).shape() == seq3.shape());
  CHECK(GaussianDropout(0.3)(seq3, true).shape() == seq3.shape());
  ActivityRegularization ar(/*l1=*/0.0, /*l2=*/1e-3);
  (void)ar(seq3);
  check_values(ar.losses()[0], {1e-3 * 60 / 2});  // sum x^2 / batch
  CHECK(GroupNormalization(3)(img).shape() == img.shape());
  CHECK(GroupNormalization({.groups = -1})(img).shape() == img.shape());
  CHECK(UnitNormalization()(seq3).shape() == seq3.shape());
  TimeDistributed td(Dense(8));
  CHECK(td(seq3).shape() == tf::TensorShape({2, 10, 8}));
  CHECK(td.layer().count_params() == 32);
  // Keras' cropping of the whole width is refused: Cropping2D({2, 4}) on 8 columns.
  tf::testing::require_error([&] { (void)Cropping2D({2, 4})(img); }, {"(Cropping2D)"});
}

TEST_CASE("one trace of the misc layers serves every batch size", "[cpu][keras]") {
  struct Case {
    tf::keras::Layer layer;
    tf::TensorShape example;
    bool training;
  };
  const std::vector<Case> cases = {
      {layers::ZeroPadding1D({1, 2}), {6, 4}, false},
      {layers::ZeroPadding2D({{1, 0}, {0, 2}}), {3, 3, 2}, false},
      {layers::Cropping1D({1, 2}), {6, 4}, false},
      {layers::Cropping2D({{1, 0}, {0, 1}}), {3, 3, 2}, false},
      {layers::LeakyReLU(), {6, 4}, false},
      {layers::ELU(0.5), {6, 4}, false},
      {layers::PReLU({.alpha_initializer = "random_normal"}), {6, 4}, false},
      {layers::Permute({2, 1}), {6, 4}, false},
      {layers::RepeatVector(3), {4}, false},
      {layers::UpSampling1D(2), {6, 4}, false},
      {layers::SpatialDropout1D(0.5), {6, 4}, true},
      {layers::SpatialDropout2D(0.5), {3, 3, 2}, true},
      {layers::GaussianNoise(0.5), {6, 4}, true},
      {layers::GaussianDropout(0.5), {6, 4}, true},
      {layers::ActivityRegularization(0.1, 0.1), {6, 4}, false},
      {layers::GroupNormalization(2), {6, 4}, false},
      {layers::UnitNormalization(), {6, 4}, false},
      {layers::TimeDistributed(layers::Dense(3)), {6, 4}, false},
  };
  for (const Case& c : cases) {
    CAPTURE(c.layer.class_name());
    tf::TensorShape sig({tf::None});
    for (int64_t d : c.example.dims()) sig.push_back(d);
    auto f = tf::function(
        [&](tf::Tensor x) {
          tf::GradientTape tape;
          tape.watch(x);
          tf::Tensor loss = tf::reduce_sum(tf::square(c.layer(x, c.training)));
          for (const tf::Tensor& l : c.layer.losses()) loss = loss + l;
          return tape.gradient(loss, x);
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec(sig)}});
    for (int64_t n : {3, 5, 2}) {
      tf::TensorShape s({n});
      for (int64_t d : c.example.dims()) s.push_back(d);
      CHECK(f(tf::random::normal(s, 0, 1, tf::float32, n)).shape() == s);
    }
    CHECK(f.tracing_count() == 1);
  }
}

TEST_CASE("the misc layers in a Sequential: summary and a save_weights round trip",
          "[cpu][keras]") {
  auto make = [] {
    return K::Sequential(
        {layers::TimeDistributed(layers::Dense(4)), layers::PReLU({.shared_axes = {1}}),
         layers::GroupNormalization({.groups = 2,
                                     .beta_initializer = "random_normal",
                                     .gamma_initializer = "random_uniform"}),
         layers::ZeroPadding1D(1), layers::Cropping1D({0, 1}), layers::Flatten(), layers::Dense(1)},
        "misc");
  };
  K::Sequential model = make();
  const tf::Tensor x = tf::random::normal({3, 5, 2}, 0, 1, tf::float32, 5);
  const tf::Tensor y = model(x);
  CHECK(y.shape() == tf::TensorShape({3, 1}));
  // Keras 3.15.1's output shapes and parameter counts for this stack.
  const std::vector<std::pair<std::string, int64_t>> keras_rows = {
      {"(None, 5, 4)", 12}, {"(None, 5, 4)", 4}, {"(None, 5, 4)", 8}, {"(None, 7, 4)", 0},
      {"(None, 6, 4)", 0},  {"(None, 24)", 0},   {"(None, 1)", 25}};
  const auto stack = model.layers();
  REQUIRE(stack.size() == keras_rows.size());
  const std::string s = model.summary_string();
  for (size_t i = 0; i < stack.size(); ++i) {
    CAPTURE(i, stack[i].name(), s);
    CHECK(stack[i].output_shape().to_string() == keras_rows[i].first);
    CHECK(stack[i].count_params() == keras_rows[i].second);
    CHECK(s.find(stack[i].name()) != std::string::npos);
  }
  const auto names = weight_names(model);
  CHECK(names == std::vector<std::string>{"time_distributed/dense/kernel",
                                          "time_distributed/dense/bias", "p_re_lu/alpha",
                                          "group_normalization/gamma", "group_normalization/beta",
                                          "dense/kernel", "dense/bias"});
  const auto dir = std::filesystem::temp_directory_path() /
                   ("tapeflow_layers_misc_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "w.safetensors").string();
  model.save_weights(path);
  K::Sequential copy = make();
  CHECK(vals(copy(x)) != vals(y));
  copy.load_weights(path);
  check_values(copy(x), vals(y), 0, 0);
  std::filesystem::remove_all(dir);
}

TEST_CASE("GroupNormalization normalises float16 in float32 as Keras", "[cpu][cuda][keras]") {
  // Deviations of about 1000: their squares overflow float16 (65504), which made rsqrt(var) 0
  // and the output beta alone before the float32 upcast (Keras: result_type(dtype, float32)).
  const std::vector<float> v = {1000, -1000, 500, -250, 0, 800, -600, 100};
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    layers::GroupNormalization full(2);
    const tf::Tensor want = full(tf::constant(v, {2, 4}));
    tf::keras::backend::set_floatx(tf::float16);
    layers::GroupNormalization half(2);
    tf::keras::backend::set_floatx(tf::float32);
    const tf::Tensor got = half(tf::cast(tf::constant(v, {2, 4}), tf::float16));
    CHECK(got.dtype() == tf::float16);
    tf::testing::check_close(tf::cast(got, tf::float32), want, 2e-3, 2e-3);
  }
}
