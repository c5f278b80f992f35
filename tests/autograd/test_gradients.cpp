// The gradient case table: for every differentiable op, the tape's gradient of sum(f(x) * w)
// (w a fixed random cotangent) against central finite differences in float64, on every device,
// with broadcasting inputs; plus second-order checks through nested tapes.
#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/math.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/scatter.h"
#include "ops/sort.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;

namespace {

using Fn = std::function<tf::Tensor(const std::vector<tf::Tensor>&)>;

struct Input {
  tf::TensorShape shape;
  double lo = -1.0, hi = 1.0;
  // Values pushed away from 0 (for abs, sign-dependent ops): |x| >= 0.2.
  bool away_from_zero = false;
};

struct Case {
  std::string name;
  std::vector<Input> inputs;
  Fn f;
  double rtol = 1e-6;
};

std::vector<double> make_values(const Input& in, unsigned seed) {
  auto v = tf::testing::random_values(static_cast<size_t>(in.shape.num_elements()), in.lo, in.hi,
                                      seed);
  if (in.away_from_zero)
    for (auto& e : v) e = e < 0 ? e - 0.2 : e + 0.2;
  return v;
}

// sum(f(xs) * w) evaluated in float64 on the host.
double weighted(const Fn& f, const std::vector<tf::Tensor>& xs, const std::vector<double>& w) {
  const auto y = tf::detail::to_double_vector(f(xs));
  double s = 0;
  for (size_t i = 0; i < y.size(); ++i) s += y[i] * w[i];
  return s;
}

void check_case(const Case& c) {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    INFO(c.name << " on " << dev.to_string());
    tf::DeviceScope scope(dev);
    std::vector<std::vector<double>> values;
    std::vector<tf::Tensor> xs;
    for (size_t k = 0; k < c.inputs.size(); ++k) {
      values.push_back(make_values(c.inputs[k], static_cast<unsigned>(17 + 31 * k)));
      xs.push_back(tf::detail::from_doubles(values[k], c.inputs[k].shape, tf::float64));
    }
    const tf::Tensor y0 = c.f(xs);
    const auto w = tf::testing::random_values(static_cast<size_t>(y0.num_elements()), -1, 1, 99);
    const tf::Tensor wt = tf::detail::from_doubles(w, y0.shape(), tf::float64);

    tf::GradientTape tape;
    tape.watch(xs);
    const tf::Tensor target = tf::reduce_sum(tf::multiply(c.f(xs), wt));
    const std::vector<tf::Tensor> grads = tape.gradient(target, xs);
    REQUIRE(grads.size() == xs.size());

    const double h = 1e-6;
    for (size_t k = 0; k < xs.size(); ++k) {
      INFO("input " << k);
      REQUIRE(grads[k].defined());
      CHECK(grads[k].shape() == xs[k].shape());
      CHECK(grads[k].device() == xs[k].device());
      std::vector<double> numeric(values[k].size());
      for (size_t i = 0; i < values[k].size(); ++i) {
        auto plus = values[k], minus = values[k];
        plus[i] += h;
        minus[i] -= h;
        auto at = [&](const std::vector<double>& v) {
          auto ys = xs;
          ys[k] = tf::detail::from_doubles(v, xs[k].shape(), tf::float64);
          return weighted(c.f, ys, w);
        };
        numeric[i] = (at(plus) - at(minus)) / (2 * h);
      }
      tf::testing::check_values(grads[k], numeric, std::max(c.rtol, 1e-6), 1e-6);
    }
  }
}

const tf::TensorShape S23{2, 3}, S3{3}, S13{1, 3}, S21{2, 1}, S4{4}, S33{3, 3};

std::vector<Case> cases() {
  using V = const std::vector<tf::Tensor>&;
  return {
      // unary
      {"negative", {{S23}}, [](V x) { return tf::negative(x[0]); }},
      {"abs", {{S23, -1, 1, true}}, [](V x) { return tf::abs(x[0]); }},
      {"exp", {{S23}}, [](V x) { return tf::exp(x[0]); }},
      {"log", {{S23, 0.5, 2}}, [](V x) { return tf::log(x[0]); }},
      {"log1p", {{S23, -0.5, 2}}, [](V x) { return tf::log1p(x[0]); }},
      {"sqrt", {{S23, 0.5, 2}}, [](V x) { return tf::sqrt(x[0]); }},
      {"rsqrt", {{S23, 0.5, 2}}, [](V x) { return tf::rsqrt(x[0]); }},
      {"square", {{S23}}, [](V x) { return tf::square(x[0]); }},
      {"tanh", {{S23}}, [](V x) { return tf::tanh(x[0]); }},
      {"sigmoid", {{S23}}, [](V x) { return tf::sigmoid(x[0]); }},
      {"sin", {{S23}}, [](V x) { return tf::sin(x[0]); }},
      {"cos", {{S23}}, [](V x) { return tf::cos(x[0]); }},
      {"erf", {{S23, -2, 2}}, [](V x) { return tf::erf(x[0]); }},
      {"erfc", {{S23, -2, 2}}, [](V x) { return tf::erfc(x[0]); }},
      // binary, with broadcasting
      {"add", {{S23}, {S13}}, [](V x) { return tf::add(x[0], x[1]); }},
      {"subtract", {{S21}, {S3}}, [](V x) { return tf::subtract(x[0], x[1]); }},
      {"multiply", {{S23}, {S21}}, [](V x) { return tf::multiply(x[0], x[1]); }},
      {"divide", {{S23}, {S3, 0.5, 2}}, [](V x) { return tf::divide(x[0], x[1]); }},
      {"pow", {{S23, 0.5, 2}, {S3, -2, 2}}, [](V x) { return tf::pow(x[0], x[1]); }},
      {"maximum", {{S23}, {S13}}, [](V x) { return tf::maximum(x[0], x[1]); }},
      {"minimum", {{S23}, {S21}}, [](V x) { return tf::minimum(x[0], x[1]); }},
      // floormod: x / y away from the integers, where floor(x / y) jumps.
      {"floormod", {{S23, -1, 1, true}, {S13, 1.5, 2}},
       [](V x) { return tf::floormod(x[0], x[1]); }},
      {"floormod_negative_divisor", {{S21, 2.2, 3.8}, {S3, -2, -1.5}},
       [](V x) { return tf::floormod(x[0], x[1]); }},
      {"where", {{S23}, {S13}}, [](V x) { return tf::where(tf::greater(x[0], 0.0), x[0], x[1]); }},
      {"scalar_ops", {{S23}}, [](V x) { return (x[0] * 3.0 - 1.0) / 2.0 + x[0] * x[0]; }},
      // reductions
      {"reduce_sum_all", {{S23}}, [](V x) { return tf::reduce_sum(x[0]); }},
      {"reduce_sum_axis", {{S23}}, [](V x) { return tf::reduce_sum(x[0], 1); }},
      {"reduce_sum_keepdims", {{S23}}, [](V x) { return tf::reduce_sum(x[0], 0, true); }},
      {"reduce_mean", {{S23}}, [](V x) { return tf::reduce_mean(x[0], -1); }},
      {"reduce_prod", {{S23, 0.5, 1.5}}, [](V x) { return tf::reduce_prod(x[0], 1); }},
      {"reduce_max", {{S23}}, [](V x) { return tf::reduce_max(x[0], 1); }},
      {"reduce_min",
       {{S23}},
       [](V x) {
         return tf::reduce_min(x[0], {0, 1});
       }},
      // movement
      {"reshape",
       {{S23}},
       [](V x) {
         return tf::reshape(x[0], {3, 2});
       }},
      {"transpose",
       {{tf::TensorShape{2, 3, 2}}},
       [](V x) {
         return tf::transpose(x[0], {2, 0, 1});
       }},
      {"broadcast_to",
       {{S13}},
       [](V x) {
         return tf::broadcast_to(x[0], {2, 2, 3});
       }},
      {"slice",
       {{tf::TensorShape{3, 4}}},
       [](V x) {
         return tf::slice(x[0], {1, 1}, {2, -1});
       }},
      {"concat",
       {{S23}, {S13}},
       [](V x) {
         return tf::concat({x[0], x[1]}, 0);
       }},
      {"pad",
       {{S23}},
       [](V x) {
         return tf::pad(x[0], {{1, 0}, {0, 2}});
       }},
      {"gather_axis0",
       {{tf::TensorShape{4, 2}}},
       [](V x) {
         return tf::gather(x[0], tf::constant({2, 0, 2, 3}));
       }},
      {"gather_axis1",
       {{tf::TensorShape{2, 4, 2}}},
       [](V x) {
         return tf::gather(x[0], tf::constant({{1, 1}, {3, 0}}), 1);
       }},
      // Random values have no ties: each cotangent goes back to one input position.
      {"top_k", {{tf::TensorShape{2, 5}}}, [](V x) { return tf::math::top_k(x[0], 3).first; }},
      {"sort_axis0_descending",
       {{tf::TensorShape{3, 2, 2}}},
       [](V x) { return tf::sort(x[0], 0, "DESCENDING"); }},
      {"unsorted_segment_sum",
       {{tf::TensorShape{5, 2}}},
       [](V x) {
         return tf::unsorted_segment_sum(x[0], tf::constant({2, 0, 2, 3, 0}), 4);
       }},
      // Negative ids drop their rows: zero gradient there (TF's _GatherDropNegatives).
      {"unsorted_segment_sum, negative ids",
       {{tf::TensorShape{5, 2}}},
       [](V x) {
         return tf::unsorted_segment_sum(x[0], tf::constant({2, -1, 2, 3, -4}), 4);
       }},
      {"unsorted_segment_sum, no segments",
       {{tf::TensorShape{3, 2}}},
       [](V x) {
         return tf::unsorted_segment_sum(x[0], tf::constant({-1, -2, -3}), 0) * 1.0f;
       }},
      {"stack_split",
       {{S23}, {S23}},
       [](V x) {
         return tf::split(tf::stack({x[0], x[1]}, 1), 3, 2)[1];
       }},
      {"tile",
       {{S21}},
       [](V x) {
         return tf::tile(x[0], {2, 3});
       }},
      {"expand_squeeze", {{S13}}, [](V x) { return tf::squeeze(tf::expand_dims(x[0], 0)); }},
      // linear algebra
      {"matmul", {{S23}, {tf::TensorShape{3, 2}}}, [](V x) { return tf::matmul(x[0], x[1]); }},
      {"matmul_transposed",
       {{tf::TensorShape{3, 2}}, {tf::TensorShape{4, 3}}},
       [](V x) { return tf::matmul(x[0], x[1], true, true); }},
      {"matmul_batched_broadcast",
       {{tf::TensorShape{2, 2, 3}}, {tf::TensorShape{3, 2}}},
       [](V x) { return tf::matmul(x[0], x[1]); }},
      {"inv", {{S33}}, [](V x) { return tf::linalg::inv(x[0] + tf::eye(3, tf::float64) * 3.0); }},
      {"solve",
       {{S33}, {tf::TensorShape{3, 2}}},
       [](V x) { return tf::linalg::solve(x[0] + tf::eye(3, tf::float64) * 3.0, x[1]); }},
      {"det",
       {{tf::TensorShape{2, 3, 3}}},
       [](V x) { return tf::linalg::det(x[0] + tf::eye(3, tf::float64) * 2.0); }},
      // composites
      {"relu", {{S23, -1, 1, true}}, [](V x) { return tf::nn::relu(x[0]); }},
      {"softmax", {{S23}}, [](V x) { return tf::nn::softmax(x[0]); }},
      {"softmax_axis0", {{tf::TensorShape{3, 2, 2}}}, [](V x) { return tf::nn::softmax(x[0], 0); }},
      {"softmax_middle_axis",
       {{tf::TensorShape{2, 3, 2}}},
       [](V x) { return tf::nn::softmax(x[0], 1); }},
      {"log_softmax", {{S23}}, [](V x) { return tf::nn::log_softmax(x[0], 0); }},
      {"log_softmax_last_axis",
       {{tf::TensorShape{2, 2, 3}}},
       [](V x) { return tf::nn::log_softmax(x[0]); }},
      {"sigmoid_cross_entropy",
       {{S23, 0, 1}, {S23, -2, 2}},
       [](V x) { return tf::nn::sigmoid_cross_entropy_with_logits(x[0], x[1]); }},
      {"sparse_softmax_cross_entropy",
       {{S23}},
       [](V x) {
         return tf::nn::sparse_softmax_cross_entropy_with_logits(tf::constant({2, 0}), x[0]);
       }},
      {"sparse_softmax_cross_entropy_rank3",
       {{tf::TensorShape{2, 2, 3}}},
       [](V x) {
         return tf::nn::sparse_softmax_cross_entropy_with_logits(
             tf::constant(std::vector<int64_t>{1, 2, 0, 0}, tf::TensorShape{2, 2}), x[0]);
       }},
      {"bias_add", {{S23}, {S3}}, [](V x) { return tf::nn::bias_add(x[0], x[1]); }},
      // activations (kinks away from 0 where the derivative jumps)
      {"softplus", {{S23, -30, 30}}, [](V x) { return tf::nn::softplus(x[0]); }},
      {"softsign", {{S23, -3, 3}}, [](V x) { return tf::nn::softsign(x[0]); }},
      {"elu", {{S23, -3, 3}}, [](V x) { return tf::nn::elu(x[0]); }},
      {"selu", {{S23, -3, 3, true}}, [](V x) { return tf::nn::selu(x[0]); }},
      {"leaky_relu", {{S23, -1, 1, true}}, [](V x) { return tf::nn::leaky_relu(x[0], 0.3); }},
      {"gelu", {{S23, -4, 4}}, [](V x) { return tf::nn::gelu(x[0]); }},
      {"gelu_approximate", {{S23, -4, 4}}, [](V x) { return tf::nn::gelu(x[0], true); }},
      {"silu", {{S23, -6, 6}}, [](V x) { return tf::nn::silu(x[0]); }},
      {"swish_beta", {{S23, -3, 3}}, [](V x) { return tf::nn::swish(x[0], 1.7); }},
      // tf.math (ops/math.h, ops/scan.h): trigonometric, hyperbolic, expm1, atan2, reductions,
      // scans and reverse
      {"tan", {{S23, -1.3, 1.3}}, [](V x) { return tf::tan(x[0]); }},
      {"asin", {{S23, -0.9, 0.9}}, [](V x) { return tf::asin(x[0]); }},
      {"acos", {{S23, -0.9, 0.9}}, [](V x) { return tf::acos(x[0]); }},
      {"atan", {{S23, -3, 3}}, [](V x) { return tf::atan(x[0]); }},
      {"sinh", {{S23, -3, 3}}, [](V x) { return tf::sinh(x[0]); }},
      {"cosh", {{S23, -3, 3}}, [](V x) { return tf::cosh(x[0]); }},
      {"asinh", {{S23, -5, 5}}, [](V x) { return tf::asinh(x[0]); }},
      {"acosh", {{S23, 1.2, 5}}, [](V x) { return tf::acosh(x[0]); }},
      {"atanh", {{S23, -0.9, 0.9}}, [](V x) { return tf::atanh(x[0]); }},
      {"expm1", {{S23, -3, 3}}, [](V x) { return tf::math::expm1(x[0]); }},
      {"reciprocal", {{S23, 0.5, 2}}, [](V x) { return tf::math::reciprocal(x[0]); }},
      {"squared_difference", {{S23}, {S13}},
       [](V x) { return tf::math::squared_difference(x[0], x[1]); }},
      {"atan2", {{S23, -1, 1, true}, {S13, -1, 1, true}},
       [](V x) { return tf::atan2(x[0], x[1]); }},
      {"reduce_logsumexp", {{S23, -3, 3}}, [](V x) { return tf::reduce_logsumexp(x[0], 1); }},
      {"reduce_logsumexp_all", {{S23, -3, 3}}, [](V x) { return tf::reduce_logsumexp(x[0]); }},
      {"reduce_variance", {{S23}}, [](V x) { return tf::math::reduce_variance(x[0], 0, true); }},
      {"reduce_std", {{S23}}, [](V x) { return tf::math::reduce_std(x[0], {0, 1}); }},
      {"reduce_euclidean_norm", {{S23}},
       [](V x) { return tf::math::reduce_euclidean_norm(x[0], 1); }},
      {"moments", {{S23}},
       [](V x) {
         auto [m, v] = tf::nn::moments(x[0], {1});
         return tf::concat({m, v * 2.0}, 0);
       }},
      {"cumsum", {{S23}}, [](V x) { return tf::cumsum(x[0], 1); }},
      {"cumsum_exclusive_reverse", {{S23}}, [](V x) { return tf::cumsum(x[0], 0, true, true); }},
      {"cumprod", {{S23, -2, 2, true}}, [](V x) { return tf::math::cumprod(x[0], 1); }},
      {"cumprod_exclusive", {{S23, -2, 2, true}},
       [](V x) { return tf::math::cumprod(x[0], -1, true); }},
      {"cumprod_reverse", {{S33, -2, 2, true}},
       [](V x) { return tf::math::cumprod(x[0], 0, false, true); }},
      {"cumulative_logsumexp", {{S23, -3, 3}},
       [](V x) { return tf::math::cumulative_logsumexp(x[0], 1, false, true); }},
      {"reverse", {{S23}}, [](V x) { return tf::reverse(x[0], {0, -1}) * x[0]; }},
      // norms
      {"norm", {{S23}}, [](V x) { return tf::norm(x[0]); }},
      {"norm_axis", {{S23}}, [](V x) { return tf::norm(x[0], "euclidean", 1, true); }},
      {"norm_1", {{S23, -1, 1, true}}, [](V x) { return tf::norm(x[0], 1, 0); }},
      {"norm_inf", {{S23}}, [](V x) { return tf::norm(x[0], INFINITY, {0, 1}); }},
      {"norm_p3", {{S23, -1, 1, true}}, [](V x) { return tf::norm(x[0], 3, 1); }},
      {"clip_by_norm_clipped", {{S23}}, [](V x) { return tf::clip_by_norm(x[0], 0.5); }},
      {"clip_by_norm_axis", {{S23}}, [](V x) { return tf::clip_by_norm(x[0], 0.8, 1); }},
      {"clip_by_norm_unclipped", {{S23}}, [](V x) { return tf::clip_by_norm(x[0], 10.0); }},
      {"clip_by_value",
       {{S23, -1, 1, true}},
       [](V x) { return tf::clip_by_value(x[0], -0.9, 0.9); }},
      // convolution and pooling (NHWC), with TF's asymmetric SAME padding
      {"conv2d_same_stride2",
       {{tf::TensorShape{1, 4, 5, 2}}, {tf::TensorShape{2, 2, 2, 3}}},
       [](V x) { return tf::nn::conv2d(x[0], x[1], {2}, "SAME"); }},
      {"conv2d_valid_dilated",
       {{tf::TensorShape{2, 5, 5, 1}}, {tf::TensorShape{2, 2, 1, 2}}},
       [](V x) { return tf::nn::conv2d(x[0], x[1], {1}, "VALID", {2}); }},
      {"max_pool2d",
       {{tf::TensorShape{1, 4, 5, 2}}},
       [](V x) { return tf::nn::max_pool2d(x[0], {2}, {2}, "SAME"); }},
      {"avg_pool2d",
       {{tf::TensorShape{1, 5, 4, 2}}},
       [](V x) { return tf::nn::avg_pool2d(x[0], {3}, {2}, "SAME"); }},
  };
}

}  // namespace

TEST_CASE("gradients: every differentiable op against central differences", "[autograd][cuda]") {
  for (const Case& c : cases()) {
    SECTION(c.name) { check_case(c); }
  }
}

// Second derivatives through nested tapes against finite differences of the first derivative.
TEST_CASE("gradients: second order through nested tapes", "[autograd][cuda]") {
  using F = std::function<tf::Tensor(const tf::Tensor&)>;
  const std::vector<std::pair<std::string, F>> fns = {
      {"x*sin(x)", [](const tf::Tensor& x) { return x * tf::sin(x); }},
      {"tanh", [](const tf::Tensor& x) { return tf::tanh(x); }},
      {"exp(x)/x^2", [](const tf::Tensor& x) { return tf::exp(x) / (x * x); }},
      {"sigmoid*log", [](const tf::Tensor& x) { return tf::sigmoid(x) * tf::log(x * x + 1.0); }},
      {"pow3", [](const tf::Tensor& x) { return tf::pow(x, 3.0); }},
      {"erf", [](const tf::Tensor& x) { return tf::erf(x) * x; }},
      {"softplus", [](const tf::Tensor& x) { return tf::nn::softplus(x) * x; }},
      {"elu", [](const tf::Tensor& x) { return tf::nn::elu(x) * x; }},
      {"selu", [](const tf::Tensor& x) { return tf::nn::selu(x); }},
      {"gelu", [](const tf::Tensor& x) { return tf::nn::gelu(x); }},
      {"gelu_approximate", [](const tf::Tensor& x) { return tf::nn::gelu(x, true); }},
      {"silu", [](const tf::Tensor& x) { return tf::nn::silu(x); }},
      {"softsign", [](const tf::Tensor& x) { return tf::nn::softsign(x); }},
      {"norm", [](const tf::Tensor& x) { return tf::norm(x) * x; }},
      {"tan", [](const tf::Tensor& x) { return tf::tan(x * 0.5); }},
      {"asin", [](const tf::Tensor& x) { return tf::asin(x * 0.4); }},
      {"atanh", [](const tf::Tensor& x) { return tf::atanh(x * 0.4); }},
      {"asinh", [](const tf::Tensor& x) { return tf::asinh(x) * x; }},
      {"acosh", [](const tf::Tensor& x) { return tf::acosh(x * x + 1.5); }},
      {"cosh", [](const tf::Tensor& x) { return tf::cosh(x) * x; }},
      {"expm1", [](const tf::Tensor& x) { return tf::math::expm1(x) * x; }},
      {"atan2", [](const tf::Tensor& x) { return tf::atan2(x, x * x + 1.0); }},
      {"reduce_logsumexp", [](const tf::Tensor& x) { return tf::reduce_logsumexp(x * x); }},
      {"reduce_std", [](const tf::Tensor& x) { return tf::math::reduce_std(x); }},
      {"cumprod", [](const tf::Tensor& x) { return tf::math::cumprod(x); }},
      {"relu*x^2", [](const tf::Tensor& x) { return tf::nn::relu(x) * x * x; }},
      {"relu(sin)", [](const tf::Tensor& x) { return tf::nn::relu(tf::sin(x * 2.0)) * x; }},
      {"softmax", [](const tf::Tensor& x) { return tf::nn::softmax(x); }},
      // The cotangents scattered back by top_k's gradient carry the second order.
      {"top_k^3", [](const tf::Tensor& x) { return tf::pow(tf::math::top_k(x, 2).first, 3.0); }},
      {"sort^3", [](const tf::Tensor& x) { return tf::pow(tf::sort(x, 0, "DESCENDING"), 3.0); }},
      {"log_softmax", [](const tf::Tensor& x) { return tf::nn::log_softmax(x) * x; }},
      {"sparse_softmax_cross_entropy",
       [](const tf::Tensor& x) {
         return tf::nn::sparse_softmax_cross_entropy_with_logits(tf::constant(tf::Tensor(1)), x);
       }},
  };
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto& [name, f] : fns) {
      INFO(name << " on " << dev.to_string());
      const std::vector<double> xv = {0.7, -1.3, 1.9};
      auto first = [&](const std::vector<double>& v) {
        tf::Tensor x = tf::detail::from_doubles(v, {3}, tf::float64);
        tf::GradientTape t;
        t.watch(x);
        tf::Tensor y = tf::reduce_sum(f(x));
        return tf::detail::to_double_vector(t.gradient(y, x));
      };
      tf::Tensor x = tf::detail::from_doubles(xv, {3}, tf::float64);
      tf::GradientTape outer;
      outer.watch(x);
      tf::Tensor g;
      {
        tf::GradientTape inner;
        inner.watch(x);
        g = inner.gradient(tf::reduce_sum(f(x)), x);
      }
      // d/dx of sum(g): the row sums of the Hessian.
      tf::Tensor gg = outer.gradient(tf::reduce_sum(g), x);
      REQUIRE(gg.defined());
      std::vector<double> want(3, 0.0);
      const double h = 1e-5;
      for (int i = 0; i < 3; ++i) {
        auto p = xv, m = xv;
        p[i] += h;
        m[i] -= h;
        const auto gp = first(p), gm = first(m);
        for (int j = 0; j < 3; ++j) want[i] += (gp[j] - gm[j]) / (2 * h);
      }
      tf::testing::check_values(gg, want, 1e-5, 1e-6);
    }
  }
}

TEST_CASE("gradients: reduce_prod with one and two zeros in a row", "[autograd][cuda]") {
  // The vjp's zero branches (the product of the others at a single zero, nothing where a row
  // has two), against the product rule written out.
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const std::vector<double> v = {1.5, 0.0,  -2.0,  // one zero
                                   0.0, 3.0,  0.0,   // two zeros
                                   0.5, -4.0, 2.5,   // none
                                   0.0, 0.0,  0.0};  // all
    const tf::Tensor x = tf::detail::from_doubles(v, {4, 3}, tf::float64);
    const tf::Tensor w = tf::detail::from_doubles({0.3, -1.1, 2.0, 0.7}, {4}, tf::float64);
    for (bool keepdims : {false, true}) {
      tf::GradientTape tape;
      tape.watch(x);
      tf::Tensor p = tf::reduce_prod(x, 1, keepdims);
      if (keepdims) p = tf::reshape(p, {4});
      const tf::Tensor g = tape.gradient(tf::reduce_sum(p * w), x);
      std::vector<double> want(12);
      const auto wv = w.numpy<double>();
      for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 3; ++c) {
          double others = 1;
          for (int k = 0; k < 3; ++k)
            if (k != c) others *= v[r * 3 + k];
          want[r * 3 + c] = wv[r] * others;
        }
      tf::testing::check_values(g, want, 1e-15, 0);
    }
    // Over every axis at once.
    const tf::Tensor r = tf::detail::from_doubles({1.5, 0.0, -2.0, 4.0}, {2, 2}, tf::float64);
    tf::GradientTape tape;
    tape.watch(r);
    tf::testing::check_values(tape.gradient(tf::reduce_prod(r), r), {0, -12, 0, 0}, 0, 0);
  }
}

TEST_CASE("gradients: values at special points agree with TF", "[autograd][cuda]") {
  // Each expected value is TensorFlow 2.21's on the same inputs.
  auto grad = [](const tf::Tensor& x, const std::function<tf::Tensor(const tf::Tensor&)>& f) {
    tf::GradientTape tape;
    tape.watch(x);
    return tape.gradient(tf::reduce_sum(f(x)), x);
  };
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    // Sigmoid cross-entropy at a logit of exactly 0: sigmoid(0) - z (it was 1 - z).
    const tf::Tensor z = tf::constant({0.0f, 1.0f, 0.5f});
    tf::testing::check_values(
        grad(tf::zeros({3}),
             [&](const tf::Tensor& x) { return tf::nn::sigmoid_cross_entropy_with_logits(z, x); }),
        {0.5, -0.5, 0.0}, 0, 0);
    // reduce_prod whose float32 product over- or underflows: the product of the others.
    auto prod = [](const tf::Tensor& x) { return tf::reduce_prod(x); };
    tf::testing::check_values(grad(tf::constant({1e30f, 1e30f}), prod), {1e30, 1e30}, 1e-6, 0);
    tf::testing::check_values(grad(tf::constant({1e-30f, 1e-30f}), prod), {1e-30, 1e-30}, 1e-6, 0);
    tf::testing::check_values(grad(tf::cast(tf::constant({300.0f, 300.0f}), tf::float16), prod),
                              {300, 300}, 0, 0);
    // divide's gradient for the denominator, -a / b / b: b * b over- or underflowed.
    const tf::Tensor a = tf::constant({1e-30f, 1e30f, 0.0f});
    tf::testing::check_values(
        grad(tf::constant({1e-30f, 1e30f, 1e-30f}), [&](const tf::Tensor& b) { return a / b; }),
        {-1e30, -1e-30, 0.0}, 1e-6, 0);
    // log_softmax of large logits: (x - max) - log(sum), not x - (max + log(sum)).
    const tf::Tensor big = tf::constant({{1000.0f, 1000.0f, -1000.0f}, {1e4f, 1e4f, 0.0f}});
    tf::testing::check_values(
        tf::nn::log_softmax(big),
        {-0.69314718, -0.69314718, -2000.6931, -0.69314718, -0.69314718, -10000.693}, 1e-7, 1e-7);
    // fill's gradient for its value: the sum of the output's (TF's).
    tf::testing::check_values(grad(tf::constant(2.0f),
                                   [](const tf::Tensor& v) {
                                     return tf::fill({2, 3}, v);
                                   }),
                              {6.0}, 0, 0);
    // sqrt and rsqrt pass 0 where the upstream gradient is 0 (TF's SqrtGrad, RsqrtGrad), so a
    // masked sqrt has gradient 0 at x = 0, not 0 * inf = NaN.
    const tf::Tensor xs = tf::constant({-1.0f, 0.0f, 4.0f});
    tf::testing::check_values(grad(xs,
                                   [](const tf::Tensor& x) {
                                     return tf::where(tf::greater(x, 0.0f), tf::sqrt(x), x * x);
                                   }),
                              {-2.0, 0.0, 0.25}, 0, 0);
    tf::testing::check_values(
        grad(xs,
             [](const tf::Tensor& x) { return tf::where(tf::greater(x, 0.0f), tf::rsqrt(x), x); }),
        {1.0, 1.0, -0.0625}, 0, 0);
    // The activations at their special points (TF 2.21's gradients, float32).
    const tf::Tensor ax = tf::constant({0.0f, 14.0f, -14.0f, -1.0f, 1.0f, 100.0f, -100.0f});
    tf::testing::check_values(grad(ax, [](const tf::Tensor& x) { return tf::nn::softplus(x); }),
                              {0.5, 0.9999991059303284, 8.315280410897685e-07, 0.26894140243530273,
                               0.7310585379600525, 1.0, 0.0},
                              1e-6, 1e-30);
    tf::testing::check_values(grad(ax, [](const tf::Tensor& x) { return tf::nn::softsign(x); }),
                              {1.0, 0.004444444552063942, 0.004444444552063942, 0.25, 0.25,
                               9.802960266824812e-05, 9.802960266824812e-05},
                              1e-6, 0);
    tf::testing::check_values(grad(ax, [](const tf::Tensor& x) { return tf::nn::elu(x); }),
                              {1.0, 1.0, 8.3e-07, 0.3678794503211975, 1.0, 1.0, 0.0}, 1e-2,
                              1e-30);
    tf::testing::check_values(grad(ax, [](const tf::Tensor& x) { return tf::nn::selu(x); }),
                              {1.0507010221481323, 1.0507010221481323, 1.46e-06,
                               0.6467685699462891, 1.0507010221481323, 1.0507010221481323, 0.0},
                              2e-2, 1e-30);
    tf::testing::check_values(grad(ax, [](const tf::Tensor& x) { return tf::nn::leaky_relu(x); }),
                              {0.2, 1, 0.2, 0.2, 1, 1, 0.2}, 1e-7, 0);
    tf::testing::check_values(grad(ax, [](const tf::Tensor& x) { return tf::nn::gelu(x); }),
                              {0.5, 1.0, 0.0, -0.08331549167633057, 1.0833154916763306, 1.0, 0.0},
                              1e-6, 1e-30);
    tf::testing::check_values(grad(ax, [](const tf::Tensor& x) { return tf::nn::silu(x); }),
                              {0.5, 1.0000108480453491, -1.0809854757098947e-05,
                               0.07232947647571564, 0.927670419216156, 1.0, 0.0},
                              1e-6, 1e-30);
    // At +-inf: softplus 1 and 0, elu 1 and 0 (the exp branch never sees +inf: no 0 * inf).
    const tf::Tensor infs = tf::constant({INFINITY, -INFINITY});
    tf::testing::check_values(grad(infs, [](const tf::Tensor& x) { return tf::nn::softplus(x); }),
                              {1.0, 0.0}, 0, 0);
    tf::testing::check_values(grad(infs, [](const tf::Tensor& x) { return tf::nn::elu(x); }),
                              {1.0, 0.0}, 0, 0);
    // norm at a zero vector: NaN (TF); clip_by_norm of zeros: zeros with gradient 1 (TF).
    const double nan = std::numeric_limits<double>::quiet_NaN();
    tf::testing::check_values(grad(tf::zeros({3}), [](const tf::Tensor& x) { return tf::norm(x); }),
                              {nan, nan, nan}, 0, 0);
    tf::testing::check_values(
        grad(tf::zeros({3}), [](const tf::Tensor& x) { return tf::norm(x, 1); }), {0, 0, 0}, 0,
        0);
    tf::testing::check_values(
        grad(tf::zeros({2, 2}), [](const tf::Tensor& x) { return tf::clip_by_norm(x, 1.0f); }),
        {1, 1, 1, 1}, 0, 0);
    tf::testing::check_values(
        grad(tf::constant({3.0f, -4.0f, 4.0f}),
             [](const tf::Tensor& x) { return tf::norm(x, INFINITY); }),
        {0.0, -0.5, 0.5}, 0, 0);
    // floormod's gradient for the divisor, -floordiv(x, y): -inf at y = 0 (TF).
    {
      const tf::Tensor fx = tf::constant({7.0f, -7.0f, 7.5f, -7.5f, 3.0f});
      const tf::Tensor fy = tf::constant({2.0f, 2.0f, -2.0f, 0.5f, 0.0f});
      tf::GradientTape tape(tf::TapeOptions{.persistent = true});
      tape.watch(fx);
      tape.watch(fy);
      const tf::Tensor m = tf::reduce_sum(tf::floormod(fx, fy));
      tf::testing::check_values(tape.gradient(m, fx), {1, 1, 1, 1, 1}, 0, 0);
      tf::testing::check_values(tape.gradient(m, fy),
                                {-3, 4, 4, 15, -std::numeric_limits<double>::infinity()}, 0, 0);
      // floordiv has no gradient (TF's None), or zeros when asked for.
      const tf::Tensor q = tf::reduce_sum(tf::floordiv(fx, fy));
      CHECK_FALSE(tape.gradient(q, fx).defined());
      tf::testing::check_values(tape.gradient(q, fy, tf::UnconnectedGradients::ZERO),
                                {0, 0, 0, 0, 0}, 0, 0);
      tf::testing::check_values(tape.gradient(q + tf::reduce_sum(fx), fx), {1, 1, 1, 1, 1}, 0, 0);
    }
    // Where the upstream gradient is not 0 the derivative stays infinite.
    tf::testing::check_values(
        grad(tf::constant({0.0f}), [](const tf::Tensor& x) { return tf::sqrt(x); }),
        {std::numeric_limits<double>::infinity()}, 0, 0);
  }
}

TEST_CASE("gradients: dropout passes the kept elements' gradient scaled", "[autograd][cuda]") {
  for (tf::Device dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const tf::Tensor x = tf::random::normal({64, 8}, 0, 1, tf::float64, 5);
    const tf::Tensor w = tf::random::normal({64, 8}, 0, 1, tf::float64, 6);
    for (double rate : {0.0, 0.25, 0.75}) {
      tf::GradientTape tape;
      tape.watch(x);
      const tf::Tensor y = tf::nn::dropout(x, rate, 7);
      const tf::Tensor g = tape.gradient(tf::reduce_sum(y * w), x);
      // y = x * mask / (1 - rate): the gradient is w * mask / (1 - rate).
      const auto yv = y.numpy<double>(), xv = x.numpy<double>(), wv = w.numpy<double>();
      std::vector<double> want(yv.size());
      int64_t kept = 0;
      for (size_t i = 0; i < yv.size(); ++i) {
        const bool on = yv[i] != 0;
        kept += on;
        if (on) CHECK(std::abs(yv[i] - xv[i] / (1 - rate)) <= 1e-15 * std::abs(yv[i]));
        want[i] = on ? wv[i] / (1 - rate) : 0.0;
      }
      tf::testing::check_values(g, want, 1e-14, 0);
      if (rate == 0.0)
        CHECK(kept == 512);
      else
        CHECK((kept > 0 && kept < 512));
    }
  }
}
