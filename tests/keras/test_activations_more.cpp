// Keras 3's activation functions of keras/activations.h and the initializers LecunNormal,
// LecunUniform and Identity: values against Keras 3.15 (TF backend) on every device,
// gradients against central differences, the names activations::get and layers take, the
// errors, the initializers' statistics and their configs written and read back; sparsemax
// against a bisection for the simplex projection (Keras 3.15's own sparsemax is wrong).
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "keras/activations.h"
#include "keras/initializers.h"
#include "keras/layers.h"
#include "keras/serialization.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
namespace K = tapeflow::keras;
namespace A = tapeflow::keras::activations;
using tf::testing::check_values;
using tf::testing::require_error;

TEST_CASE("Keras activations match Keras 3.15", "[cpu][cuda][keras][activations]") {
  // keras.activations.get(name)(x) for these x (float32).
  const std::vector<double> x = {-4.0, -1.5, -1.0, -0.5, 0.0, 0.3, 1.0, 2.0, 3.5};
  struct Case {
    std::string name;
    std::vector<double> want;
  };
  const std::vector<Case> cases = {
      {"hard_sigmoid", {0, 0.25, 1.0 / 3, 0.4166666567, 0.5, 0.55, 2.0 / 3, 0.8333333, 1}},
      {"hard_silu", {-0.0, -0.375, -1.0 / 3, -0.2083333, 0, 0.165, 2.0 / 3, 1.6666666, 3.5}},
      {"hard_swish", {-0.0, -0.375, -1.0 / 3, -0.2083333, 0, 0.165, 2.0 / 3, 1.6666666, 3.5}},
      {"mish",
       {-0.07259173691, -0.2980997264, -0.3034015, -0.2207437754, 0, 0.2080013901, 0.8650984168,
        1.943958998, 3.493990898}},
      {"celu", {-0.9816843867, -0.7768698335, -0.6321205497, -0.3934693336, 0, 0.3, 1, 2, 3.5}},
      {"hard_tanh", {-1, -1, -1, -0.5, 0, 0.3, 1, 1, 1}},
      {"hard_shrink", {-4, -1.5, -1, 0, 0, 0, 1, 2, 3.5}},
      {"soft_shrink", {-3.5, -1, -0.5, 0, 0, 0, 0.5, 1.5, 3}},
      {"tanh_shrink",
       {-3.000670671, -0.5948516727, -0.2384058237, -0.03788286448, 0, 0.008687376976, 0.2384058237,
        1.035972357, 2.501821995}},
      {"squareplus",
       {0.2360680103, 0.5, 0.6180340051, 0.7807763815, 1, 1.161187410, 1.618034005, 2.414213657,
        3.765564442}},
      {"sparse_plus", {0, 0, 0, 0.0625, 0.25, 0.4225, 1, 2, 3.5}},
      {"sparse_sigmoid", {0, 0, 0, 0.25, 0.5, 0.65, 1, 1, 1}},
      {"relu6", {0, 0, 0, 0, 0, 0.3, 1, 2, 3.5}},
      {"log_sigmoid",
       {-4.018149853, -1.701413274, -1.313261628, -0.9740769267, -0.6931471824, -0.5543552041,
        -0.3132616878, -0.1269280016, -0.02975041792}},
      {"log_softmax",
       {-7.845637321, -5.345637321, -4.845637321, -4.345637321, -3.84563756, -3.545637608,
        -2.84563756, -1.84563756, -0.3456375599}},
  };
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor t = tf::cast(tf::constant(x, {9}), tf::float32);
    for (const Case& c : cases) {
      INFO(c.name);
      check_values(K::activations::get(c.name)(t), c.want, 2e-6, 1e-7);
    }
    // keras.activations.glu([[1, -2, 0.5, 3]]) = [[0.6224593, -1.9051483]].
    check_values(A::glu(tf::constant({{1.0f, -2.0f, 0.5f, 3.0f}})), {0.622459352, -1.905148268},
                 2e-6, 0);
    // Keras' arguments: celu's alpha, the shrinks' thresholds, squareplus' b.
    check_values(A::celu(tf::constant({-1.0f, 2.0f}), 2.0), {2 * std::expm1(-0.5), 2}, 1e-6, 0);
    check_values(A::hard_shrink(tf::constant({-1.0f, 0.5f, 2.0f}), 1.0), {0, 0, 2}, 0, 0);
    check_values(A::soft_shrink(tf::constant({-3.0f, 0.5f, 2.0f}), 1.0), {-2, 0, 1}, 0, 0);
    check_values(A::squareplus(tf::constant({0.0f}), 0.0), {0}, 0, 0);
    // Large inputs stay finite (celu's exponential reads min(x, 0)).
    check_values(A::celu(tf::constant({1e30f})), {1e30}, 1e-6, 0);
  }
}

TEST_CASE("Keras activations' gradients match central differences",
          "[cpu][cuda][keras][activations]") {
  using F = tf::Tensor (*)(const tf::Tensor&);
  const std::vector<std::pair<std::string, F>> smooth = {{"hard_sigmoid", A::hard_sigmoid},
                                                         {"hard_silu", A::hard_silu},
                                                         {"mish", A::mish},
                                                         {"tanh_shrink", A::tanh_shrink},
                                                         {"sparse_plus", A::sparse_plus},
                                                         {"sparse_sigmoid", A::sparse_sigmoid},
                                                         {"hard_tanh", A::hard_tanh}};
  // Away from the kinks (+-3, +-1, +-0.5, 0).
  const std::vector<double> at = {-4.2, -2.4, -0.8, -0.3, 0.2, 0.7, 1.6, 3.3};
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (const auto& [name, f] : smooth) {
      INFO(name);
      tf::testing::check_gradient(f, {8}, at);
    }
    tf::testing::check_gradient([](const tf::Tensor& v) { return A::celu(v, 1.5); }, {8}, at);
    tf::testing::check_gradient([](const tf::Tensor& v) { return A::soft_shrink(v); }, {8}, at);
    tf::testing::check_gradient([](const tf::Tensor& v) { return A::hard_shrink(v); }, {8}, at);
    tf::testing::check_gradient([](const tf::Tensor& v) { return A::squareplus(v); }, {8}, at);
    tf::testing::check_gradient([](const tf::Tensor& v) { return A::glu(v, 0); }, {8}, at);
  }
}

TEST_CASE("layers take the new activation names; errors name the function",
          "[cpu][keras][activations]") {
  K::layers::Dense dense(3, "mish");
  const tf::Tensor y = dense(tf::ones({2, 4}));
  CHECK(y.shape() == tf::TensorShape{2, 3});
  CHECK(K::layers::Dense(2, "hard_swish")(tf::ones({1, 2})).shape() == tf::TensorShape{1, 2});
  require_error([] { K::activations::get("rectifier"); },
                {"[activations] unknown activation function 'rectifier'", "mish"});
  require_error(
      [] {
        A::glu(tf::ones({2, 3}));
      },
      {"[glu] axis -1 must have an even, known size", "(2, 3)"});
  require_error([] { A::mish(tf::constant({1, 2})); }, {"[mish]", "int32"});
}

TEST_CASE("LecunNormal, LecunUniform and Identity initializers", "[cpu][keras][initializers]") {
  // fan_in 400: LecunNormal's std is sqrt(1 / 400) = 0.05, LecunUniform's limit sqrt(3 / 400).
  const tf::Tensor n = K::initializers::LecunNormal(3)({400, 300}, tf::float64);
  const double mean = tf::reduce_mean(n).item<double>();
  const double sd = std::sqrt(tf::reduce_mean(tf::square(n - mean)).item<double>());
  CHECK(std::abs(mean) < 0.002);
  CHECK(sd == Approx(0.05).epsilon(0.02));
  CHECK(tf::reduce_max(tf::abs(n)).item<double>() <= 2 * 0.05 / 0.87962566103423978 + 1e-12);
  const tf::Tensor u = K::initializers::LecunUniform(4)({400, 300}, tf::float64);
  CHECK(tf::reduce_max(tf::abs(u)).item<double>() <= std::sqrt(3.0 / 400));
  CHECK(tf::reduce_max(tf::abs(u)).item<double>() > 0.99 * std::sqrt(3.0 / 400));
  // keras.initializers.Identity(2.0)((2, 3)).
  check_values(K::initializers::Identity(2.0)({2, 3}), {2, 0, 0, 0, 2, 0}, 0, 0);
  check_values(K::Initializer("identity")({2, 2}), {1, 0, 0, 1}, 0, 0);
  CHECK(K::Initializer("lecun_normal").name() == "lecun_normal");
  require_error(
      [] {
        K::initializers::Identity()({2, 3, 4});
      },
      {"[identity] Identity matrix initializer can only be used for 2D matrices"});

  // Configs as Keras writes them (Identity keeps its gain), read back.
  K::layers::Dense dense(4, "", true, K::initializers::LecunNormal(3));
  K::layers::Dense eye(4, "", true, K::initializers::Identity(2.0));
  dense.build({tf::None, 4});
  eye.build({tf::None, 4});
  const std::string json = K::saving::get_config_json(dense);
  const std::string eye_json = K::saving::get_config_json(eye);
  // keras.layers.Dense(4, kernel_initializer=keras.initializers.LecunNormal(seed=3)).
  CHECK(json.find(R"("kernel_initializer":{"module":"keras.initializers","class_name":)"
                  R"("LecunNormal","config":{"seed":3,"input_axes":null,"output_axes":null},)"
                  R"("registered_name":null})") != std::string::npos);
  CHECK(eye_json.find(R"("class_name":"Identity","config":{"gain":2.0})") != std::string::npos);
  CHECK(K::saving::get_config_json(K::saving::from_config_json("Dense", json)) == json);
  CHECK(K::saving::get_config_json(K::saving::from_config_json("Dense", eye_json)) == eye_json);
}

namespace {

// The projection onto the simplex by bisection on tau (sum(max(x - tau, 0)) = 1): an algorithm
// independent of sparsemax's sort and cumulative sums.
std::vector<double> simplex_projection(const std::vector<double>& x) {
  double lo = *std::min_element(x.begin(), x.end()) - 1.0;
  double hi = *std::max_element(x.begin(), x.end());
  for (int i = 0; i < 200; ++i) {
    const double tau = 0.5 * (lo + hi);
    double s = 0.0;
    for (double v : x) s += std::max(v - tau, 0.0);
    (s > 1.0 ? lo : hi) = tau;
  }
  std::vector<double> out;
  for (double v : x) out.push_back(std::max(v - 0.5 * (lo + hi), 0.0));
  return out;
}

}  // namespace

TEST_CASE("sparsemax projects onto the simplex", "[cpu][cuda][keras][activations]") {
  for (const tf::Device& device : tf::testing::devices_under_test()) {
    CAPTURE(device.to_string());
    tf::DeviceScope scope(device.to_string());
    // Rows with a support of 1, 2 and 3 entries, ties, and a large offset (the mean shift keeps
    // float32's precision).
    const std::vector<std::vector<double>> rows = {
        {0.1, 0.2, 0.3, 0.4}, {1.0, 2.0, 3.0, 4.0},     {0.5, 0.4, -1.0, 0.45},
        {0.0, 0.0, 0.0, 0.0}, {1e4, 1e4 + 0.5, 1e4, 0}, {-3.0, 2.0, 1.9, 1.95}};
    std::vector<double> flat, want;
    for (const auto& r : rows) {
      flat.insert(flat.end(), r.begin(), r.end());
      const auto p = simplex_projection(r);
      want.insert(want.end(), p.begin(), p.end());
    }
    for (tf::DType dtype : {tf::float32, tf::float64}) {
      CAPTURE(tf::dtype_name(dtype));
      const tf::Tensor x = tf::constant(tf::convert_to_tensor(flat, {6, 4}), dtype);
      const tf::Tensor y = A::sparsemax(x);
      check_values(y, want, 0, dtype == tf::float32 ? 2e-6 : 1e-10);
      check_values(tf::reduce_sum(y, 1), std::vector<double>(6, 1.0), 1e-6, 0);
      // Along axis 0 of the transpose, and through activations::get.
      check_values(tf::transpose(A::sparsemax(tf::transpose(x), 0)), want, 0,
                   dtype == tf::float32 ? 2e-6 : 1e-10);
      check_values(K::activations::get("sparsemax")(x), want, 0,
                   dtype == tf::float32 ? 2e-6 : 1e-10);
    }
    // Keras 3.15 gives [0, 0.0667, 0.1667] for [0.1, 0.2, 0.3] (its tau sums the cumulative
    // sums); the projection is [0.2333, 0.3333, 0.4333].
    check_values(A::sparsemax(tf::constant({0.1, 0.2, 0.3})), {0.7 / 3, 1.0 / 3, 1.3 / 3}, 1e-12);
  }
  // The Jacobian on the support S is I - 1/|S|, 0 elsewhere: central differences, on a 3-D
  // input along its middle axis, away from the support's boundaries.
  tf::testing::check_gradient([](const tf::Tensor& v) { return A::sparsemax(v, 1); }, {2, 4, 3},
                              {0.1, 0.9, -0.4, 0.2, 0.3, 0.5, -1.0, 0.0,  0.45, 0.35, 0.8,  0.1,
                               2.0, 0.0, 0.3,  1.7, 0.1, 0.2, 1.2,  -0.5, 0.25, -2.0, 0.05, 0.15});
  // threshold(x, 0.5, -1): Keras' where(x > 0.5, x, -1).
  check_values(A::threshold(tf::constant({0.2f, 0.5f, 0.7f, 3.0f}), 0.5, -1.0),
               {-1.0, -1.0, 0.7, 3.0}, 1e-7);
  require_error(
      [] {
        A::sparsemax(tf::ones({2, 3}), 2);
      },
      {"[sparsemax] axis 2 is out of range", "(2, 3)"});
  require_error([] { A::sparsemax(tf::constant({1, 2})); }, {"[sparsemax]", "int32"});
}
