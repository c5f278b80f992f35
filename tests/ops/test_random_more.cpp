// tf::random::gamma and poisson (ops/array_more.h) on every device of devices_under_test(). Gamma:
// the shape rule,
// the distribution's mean, variance and CDF at a point against Gamma(alpha, beta), seeds,
// every floating dtype, traced calls drawing new numbers, and the implicit gradient checked
// against the CDF it keeps fixed (P(alpha + h, x + h dx/dalpha) = P(alpha, x) to O(h^2)) and
// in expectation (d E[x] / d alpha = 1 / beta). Poisson: mean, variance and P(X = k) on both
// samplers' sides of lam = 10, dtypes, lam <= 0 and NaN, traced draws.
#include <cmath>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/array_more.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/math.h"
#include "ops/random.h"
#include "ops/reduce.h"
#include "ops/special.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

tf::Tensor vec(const std::vector<double>& v, tf::DType dtype = tf::float64) {
  return tf::cast(tf::constant(v, {static_cast<int64_t>(v.size())}), dtype);
}

// The column means of a (n, k) float64 tensor.
std::vector<double> column_means(const tf::Tensor& t) {
  return tf::reduce_mean(tf::cast(t, tf::float64), 0).numpy<double>();
}

}  // namespace

TEST_CASE("random gamma: shape, moments and CDF of Gamma(alpha, beta)",
          "[cpu][cuda][random][gamma]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::random::set_seed(5);
    // alpha below and above 1 (the boosted and the direct sampler), one beta per column.
    const std::vector<double> alpha = {0.3, 1.0, 2.5, 10.0}, beta = {1.0, 2.0, 0.5, 4.0};
    const int64_t n = 200000;
    const tf::Tensor x = tf::random::gamma({n}, vec(alpha), vec(beta), tf::float64);
    CHECK(x.shape() == tf::TensorShape{n, 4});
    CHECK(tf::reduce_min(x).item<double>() >= 0);
    const std::vector<double> mean = column_means(x);
    const std::vector<double> var = column_means(tf::square(x - tf::reduce_mean(x, 0, true)));
    // P(x <= alpha / beta) against the regularized incomplete gamma function.
    const std::vector<double> below =
        column_means(tf::cast(tf::less_equal(x, vec(alpha) / vec(beta)), tf::float64));
    const std::vector<double> cdf = tf::math::igamma(vec(alpha), vec(alpha)).numpy<double>();
    for (size_t k = 0; k < alpha.size(); ++k) {
      INFO("alpha " << alpha[k] << ", beta " << beta[k]);
      const double m = alpha[k] / beta[k], v = alpha[k] / (beta[k] * beta[k]);
      // Within five standard errors (the variance's from the fourth moment, 3 + 6 / alpha
      // excess kurtosis).
      CHECK(std::abs(mean[k] - m) <= 5 * std::sqrt(v / n));
      CHECK(std::abs(var[k] - v) <= 5 * v * std::sqrt((2 + 6 / alpha[k]) / n));
      CHECK(std::abs(below[k] - cdf[k]) <= 5 * std::sqrt(cdf[k] * (1 - cdf[k]) / n));
    }
    // Without beta, a scalar alpha; float32, float16 and bfloat16 results.
    for (tf::DType dt : {tf::float16, tf::bfloat16, tf::float32}) {
      INFO("dtype " << tf::dtype_name(dt));
      const tf::Tensor y = tf::random::gamma({2, 3}, 2.0, tf::Tensor(), dt);
      CHECK(y.shape() == tf::TensorShape{2, 3});
      CHECK(y.dtype() == dt);
      CHECK(tf::reduce_min(tf::cast(y, tf::float64)).item<double>() >= 0);
    }
    const tf::Tensor big = tf::random::gamma({50000}, 3.0, 2.0);
    CHECK(std::abs(tf::reduce_mean(tf::cast(big, tf::float64)).item<double>() - 1.5) < 0.03);
    // alpha <= 0 gives NaN, as TF's kernel.
    const tf::Tensor bad = tf::random::gamma({2}, vec({0.0, -1.0}));
    CHECK(tf::reduce_all(tf::math::is_nan(bad)).item<bool>());
  }
}

TEST_CASE("random gamma: seeds reproduce, traced calls draw new numbers",
          "[cpu][cuda][random][gamma]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::random::set_seed(11);
    const tf::Tensor a = tf::random::gamma({6}, 0.7, tf::Tensor(), tf::float32, 3);
    const tf::Tensor b = tf::random::gamma({6}, 0.7, tf::Tensor(), tf::float32, 3);
    tf::random::set_seed(11);
    const tf::Tensor a2 = tf::random::gamma({6}, 0.7, tf::Tensor(), tf::float32, 3);
    check_values(a2, a.numpy<double>(), 0, 0);
    CHECK(a.numpy<double>() != b.numpy<double>());
    auto f = tf::function([](const tf::Tensor& alpha) { return tf::random::gamma({1000}, alpha); });
    const tf::Tensor f1 = f(vec({4.0}, tf::float32)), f2 = f(vec({4.0}, tf::float32));
    CHECK(f.tracing_count() == 1);
    CHECK(f1.shape() == tf::TensorShape{1000, 1});
    CHECK(f1.numpy<double>() != f2.numpy<double>());
    CHECK(std::abs(tf::reduce_mean(tf::cast(f1, tf::float64)).item<double>() - 4.0) < 0.4);
  }
}

TEST_CASE("random gamma: the gradient keeps the sample's CDF fixed", "[cpu][cuda][random][gamma]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::random::set_seed(21);
    const std::vector<double> alpha = {0.2, 0.8, 1.0, 3.0, 25.0};
    tf::Variable a(vec(alpha)), b(vec({1.0, 2.0, 1.0, 0.5, 3.0}));
    tf::GradientTape tape(tf::TapeOptions{.persistent = true});
    const tf::Tensor x = tf::random::gamma({400}, a.value(), b.value(), tf::float64);
    const tf::Tensor dx_da = tape.gradient(tf::reduce_sum(x), a);
    const tf::Tensor dx_db = tape.gradient(tf::reduce_sum(x), b);
    // d x / d beta = -x / beta, summed over the samples.
    check_values(dx_db, (-tf::reduce_sum(x, 0) / b.value()).numpy<double>(), 1e-12, 1e-12);
    // Per sample: with rate beta the standard sample is s = x beta, and P(alpha + h, s + h ds)
    // = P(alpha, s) + O(h^2). The tape gives the sum over samples, so take one sample per column
    // through a second tape on a single draw.
    tf::GradientTape one;
    const tf::Tensor s = tf::random::gamma({}, a.value(), tf::Tensor(), tf::float64);
    const tf::Tensor ds = one.gradient(tf::reduce_sum(s), a);
    const double h = 1e-5;
    const tf::Tensor before = tf::math::igamma(a.value(), s);
    const tf::Tensor after = tf::math::igamma(a.value() + h, s + h * ds);
    const std::vector<double> p0 = before.numpy<double>(), p1 = after.numpy<double>();
    for (size_t k = 0; k < alpha.size(); ++k) {
      INFO("alpha " << alpha[k] << ", sample " << s.numpy<double>()[k]);
      CHECK(std::abs(p1[k] - p0[k]) < 1e-8);
    }
    // In expectation: d E[x] / d alpha = 1 / beta (mean over 400 samples, loose).
    const std::vector<double> mean_grad = (dx_da / 400.0).numpy<double>();
    const std::vector<double> rate = {1.0, 2.0, 1.0, 0.5, 3.0};
    for (size_t k = 0; k < alpha.size(); ++k) {
      INFO("alpha " << alpha[k]);
      CHECK(std::abs(mean_grad[k] - 1 / rate[k]) < 0.25 / rate[k]);
    }
  }
}

TEST_CASE("random gamma: bad arguments", "[cpu][random][gamma]") {
  require_error([] { tf::random::gamma({2}, 1.0, tf::Tensor(), tf::int32); },
                {"[random_gamma] dtype must be float16, bfloat16, float32 or float64, got int32"});
  require_error([] { tf::random::gamma({2}, tf::Tensor()); },
                {"[random_gamma] alpha is an undefined tensor"});
  require_error(
      [] {
        tf::random::gamma({2}, vec({1, 2}), vec({1, 2, 3}));
      },
      {"[random_gamma]", "(2,)", "(3,)"});
  require_error([] { tf::random::gamma({tf::None}, 1.0); },
                {"[random_gamma] shape (None,) has an unknown dimension"});
  require_error([] { tf::random::gamma({2}, tf::constant<bool>({true}, {1})); },
                {"alpha must be a number, got bool"});
}

TEST_CASE("random poisson: moments and probabilities on both samplers",
          "[cpu][cuda][random][poisson]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    tf::random::set_seed(8);
    // The inverse CDF (below 10) and PTRS (from 10), one column each.
    const std::vector<double> lam = {0.01, 1.5, 7.0, 10.0, 33.0, 1e6};
    const int64_t n = 100000;
    const tf::Tensor x = tf::random::poisson({n}, vec(lam), tf::float64);
    CHECK(x.shape() == tf::TensorShape{n, 6});
    CHECK(tf::reduce_all(tf::equal(x, tf::floor(x))).item<bool>());
    CHECK(tf::reduce_min(x).item<double>() >= 0);
    const std::vector<double> mean = column_means(x);
    const std::vector<double> var = column_means(tf::square(x - tf::reduce_mean(x, 0, true)));
    // P(X = floor(lam)) = exp(-lam + k log lam - lgamma(k + 1)).
    std::vector<double> at_k(lam.size()), p_k(lam.size());
    for (size_t c = 0; c < lam.size(); ++c) at_k[c] = std::floor(lam[c]);
    const std::vector<double> hit = column_means(tf::cast(tf::equal(x, vec(at_k)), tf::float64));
    for (size_t c = 0; c < lam.size(); ++c) {
      INFO("lam " << lam[c]);
      const double k = at_k[c];
      const double pk = std::exp(-lam[c] + (k > 0 ? k * std::log(lam[c]) : 0) - std::lgamma(k + 1));
      CHECK(std::abs(mean[c] - lam[c]) <= 5 * std::sqrt(lam[c] / n));
      CHECK(std::abs(var[c] - lam[c]) <= 5 * lam[c] * std::sqrt((2 + 1 / lam[c]) / n));
      CHECK(std::abs(hit[c] - pk) <= 5 * std::sqrt(pk * (1 - pk) / n) + 1e-9);
    }
    // Integer dtypes, lam <= 0 (0, as TF), NaN (NaN; 0 in integers).
    const tf::Tensor i = tf::random::poisson({3}, vec({2.0, 0.0, -1.0}), tf::int32);
    CHECK(i.dtype() == tf::int32);
    const std::vector<double> iv = i.numpy<double>();
    CHECK(iv[1] == 0);
    CHECK(iv[2] == 0);
    const tf::Tensor nan = tf::random::poisson({2}, vec({std::nan(""), 3.0}), tf::float32);
    CHECK(std::isnan(nan.numpy<double>()[0]));
    CHECK(tf::random::poisson({2}, vec({std::nan("")}), tf::int64).numpy<double>()[0] == 0);
    // Traced: one trace, new numbers at each call, the same distribution.
    auto f = tf::function([](const tf::Tensor& l) { return tf::random::poisson({20000}, l); });
    const tf::Tensor f1 = f(vec({4.0, 50.0}, tf::float32)), f2 = f(vec({4.0, 50.0}, tf::float32));
    CHECK(f.tracing_count() == 1);
    CHECK(f1.numpy<double>() != f2.numpy<double>());
    const std::vector<double> fm = column_means(f1);
    CHECK(std::abs(fm[0] - 4.0) < 0.1);
    CHECK(std::abs(fm[1] - 50.0) < 0.3);
    require_error([] { tf::random::poisson({2}, 1.0, tf::bool_); },
                  {"[random_poisson] dtype must be float16, float32, float64, int32 or int64"});
    require_error([] { tf::random::poisson({2}, tf::Tensor()); },
                  {"[random_poisson] lam is an undefined tensor"});
  }
}
