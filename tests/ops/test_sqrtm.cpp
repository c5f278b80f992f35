// tf::linalg::sqrtm (ops/sqrtm.h): values against TF 2.21 (tf.linalg.sqrtm on the same
// matrices: real eigenvalues, a complex pair, a singular matrix, a negative eigenvalue, a
// nilpotent Jordan block), roots that square back for random batches, the gradient against
// TF's and central differences, traced with a None batch against eager, errors, every device.
#include <cmath>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/sqrtm.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

tf::Tensor f64(const std::vector<double>& v, std::vector<int64_t> shape) {
  return tf::detail::from_doubles(v, tf::TensorShape(shape), tf::float64);
}

const std::vector<double> kA = {4, 1, 0.5, 0.3, 3, -0.2, 0.1, 0.4, 2};
// tf.linalg.sqrtm(kA) (float64).
const std::vector<double> kRootA = {1.993646452083145,    0.2635744906385175,  0.15187255124837956,
                                    0.08108087778446743,  1.7283144971758282,  -0.06752781125043039,
                                    0.026357449063851797, 0.12501296953629926, 1.415782073335079};

// A random n x n matrix with eigenvalues away from the negative axis: shift * I + 0.5 * noise.
std::vector<double> shifted(int n, double shift, unsigned seed) {
  std::vector<double> v = tf::testing::random_values(static_cast<size_t>(n * n), -1, 1, seed);
  for (double& x : v) x *= 0.5;
  for (int i = 0; i < n; ++i) v[static_cast<size_t>(i * n + i)] += shift;
  return v;
}

}  // namespace

TEST_CASE("sqrtm: values equal TF's", "[cpu][cuda][linalg]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    check_values(tf::linalg::sqrtm(f64(kA, {3, 3})), kRootA, 1e-13, 1e-14);
    // Complex eigenvalues 1 +- i sqrt(6): tf.linalg.sqrtm([[1., -2.], [3., 1.]]).
    check_values(tf::linalg::sqrtm(f64({1, -2, 3, 1}, {2, 2})),
                 {1.3501391245098762, -0.7406644114272423, 1.1109966171408636, 1.3501391245098764},
                 1e-13, 1e-14);
    // float32 (tapeflow computes in float64 and rounds once; TF's float32 values differ from
    // the float64 root by up to 5e-7).
    const tf::Tensor r32 = tf::linalg::sqrtm(tf::cast(f64(kA, {3, 3}), tf::float32));
    CHECK(r32.dtype() == tf::float32);
    check_values(r32, kRootA, 1e-6, 1e-7);
    // Singular but with a root: tf.linalg.sqrtm([[1., 1.], [1., 1.]]) = 0.70710677 everywhere.
    check_values(tf::linalg::sqrtm(f64({1, 1, 1, 1}, {2, 2})),
                 {0.7071067811865476, 0.7071067811865476, 0.7071067811865476, 0.7071067811865476},
                 1e-12, 1e-12);
    // A negative eigenvalue makes every element NaN, as TF.
    const auto neg = tf::linalg::sqrtm(f64({-1, 0, 0, 4}, {2, 2})).numpy<double>();
    for (double v : neg) CHECK(std::isnan(v));
    // A nilpotent Jordan block has no root: TF gives [[nan, inf], [nan, nan]].
    const auto jordan = tf::linalg::sqrtm(f64({0, 1, 0, 0}, {2, 2})).numpy<double>();
    for (double v : jordan) CHECK(!std::isfinite(v));
    // Non-finite inputs give NaN (LAPACK never sees them).
    const auto nan_in = tf::linalg::sqrtm(f64({1, NAN, 0, 1}, {2, 2})).numpy<double>();
    for (double v : nan_in) CHECK(std::isnan(v));
    // Empty batches and 0 x 0 matrices.
    CHECK(tf::linalg::sqrtm(tf::zeros({2, 0, 0}, tf::float64)).shape() ==
          tf::TensorShape({2, 0, 0}));
    CHECK(tf::linalg::sqrtm(tf::zeros({0, 3, 3})).shape() == tf::TensorShape({0, 3, 3}));
    check_values(tf::linalg::sqrtm(f64({9}, {1, 1})), {3}, 0, 0);
  }
}

TEST_CASE("sqrtm: random batches square back", "[cpu][cuda][linalg]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    for (int n : {2, 5, 16, 33}) {
      INFO("n = " << n);
      std::vector<double> v;
      for (unsigned b = 0; b < 3; ++b) {
        // Shifts 3, 0.6 and 2: the second has eigenvalues near the axis and complex pairs.
        const std::vector<double> m = shifted(n, b == 1 ? 0.6 : 2.0 + b, 7 + b + 3 * n);
        v.insert(v.end(), m.begin(), m.end());
      }
      const tf::Tensor a = f64(v, {3, n, n});
      const tf::Tensor r = tf::linalg::sqrtm(a);
      tf::testing::check_close(tf::matmul(r, r), a, 1e-10, 1e-11);
      // Each matrix of the batch alone gives the same root.
      tf::testing::check_close(tf::linalg::sqrtm(tf::slice(a, {1, 0, 0}, {1, n, n})),
                               tf::slice(r, {1, 0, 0}, {1, n, n}), 1e-14, 1e-14);
      // float32 squares back to float32 precision.
      const tf::Tensor r32 = tf::linalg::sqrtm(tf::cast(a, tf::float32));
      tf::testing::check_close(tf::cast(tf::matmul(r32, r32), tf::float64), a, 1e-5, 1e-5);
    }
  }
}

TEST_CASE("sqrtm: gradient equals TF's and central differences", "[cpu][cuda][linalg]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.GradientTape of reduce_sum(sqrtm(x) * w), w = cos(0..8) as 3 x 3.
    std::vector<double> w;
    for (int i = 0; i < 9; ++i) w.push_back(std::cos(i));
    tf::Variable x(f64(kA, {3, 3}));
    tf::GradientTape tape;
    const tf::Tensor y = tf::reduce_sum(tf::linalg::sqrtm(x) * f64(w, {3, 3}));
    check_values(tape.gradient(y, x),
                 {0.25063677348422697, 0.14008919513298024, -0.13141943437003922,
                  -0.28268842631539265, -0.1989271844026555, 0.11365294207878458,
                  0.25015561341534576, 0.22113925078867294, -0.05371767157247409},
                 1e-11, 1e-12);
    // Central differences, a batch of two 4 x 4 (one with complex eigenvalues).
    std::vector<double> at = shifted(4, 2.0, 3);
    const std::vector<double> second = {1, -2,  0.3, 0,   3,   1, 0,    0.2,
                                        0, 0.1, 2,   0.5, 0.4, 0, -0.3, 3};
    at.insert(at.end(), second.begin(), second.end());
    tf::testing::check_gradient([](const tf::Tensor& t) { return tf::linalg::sqrtm(t); },
                                tf::TensorShape({2, 4, 4}), at, 1e-6, 1e-8);
    // float32 gradients follow the float64 ones.
    tf::Variable x32(tf::cast(f64(kA, {3, 3}), tf::float32));
    tf::GradientTape tape32;
    const tf::Tensor y32 =
        tf::reduce_sum(tf::linalg::sqrtm(x32) * tf::cast(f64(w, {3, 3}), tf::float32));
    check_values(tape32.gradient(y32, x32),
                 {0.25063677348422697, 0.14008919513298024, -0.13141943437003922,
                  -0.28268842631539265, -0.1989271844026555, 0.11365294207878458,
                  0.25015561341534576, 0.22113925078867294, -0.05371767157247409},
                 1e-5, 1e-6);
  }
}

TEST_CASE("sqrtm: traced with a None batch equals eager", "[cpu][cuda][linalg]") {
  for (auto dev : tf::testing::devices_under_test()) {
    INFO(dev.to_string());
    tf::DeviceScope scope(dev);
    tf::FunctionOptions opts;
    opts.input_signature = {tf::TensorSpec({tf::None, 3, 3}, tf::float64)};
    auto f = tf::function([](const tf::Tensor& a) { return tf::linalg::sqrtm(a); }, opts);
    for (int64_t b : {1, 4}) {
      std::vector<double> v;
      for (int64_t i = 0; i < b; ++i) {
        const auto m = shifted(3, 2.5, static_cast<unsigned>(40 + i));
        v.insert(v.end(), m.begin(), m.end());
      }
      const tf::Tensor a = f64(v, {b, 3, 3});
      tf::testing::check_close(f(a), tf::linalg::sqrtm(a), 0, 0);
    }
    CHECK(f.tracing_count() == 1);
  }
}

TEST_CASE("sqrtm: bad inputs are errors naming the op", "[cpu][linalg]") {
  require_error([] { tf::linalg::sqrtm(tf::ones({2, 2}, tf::int32)); }, {"sqrtm", "int32"});
  require_error([] { tf::linalg::sqrtm(tf::ones({2, 2}, tf::float16)); }, {"sqrtm", "float16"});
  require_error([] { tf::linalg::sqrtm(tf::ones({2, 3})); }, {"sqrtm", "square", "(2, 3)"});
  require_error([] { tf::linalg::sqrtm(tf::ones({3})); }, {"sqrtm", "rank >= 2", "(3,)"});
  // No second-order gradient.
  tf::Variable x(f64(kA, {3, 3}));
  tf::GradientTape outer;
  tf::Tensor g;
  {
    tf::GradientTape inner;
    g = inner.gradient(tf::reduce_sum(tf::linalg::sqrtm(x)), x);
  }
  CHECK_THROWS_AS(outer.gradient(tf::reduce_sum(g), x), tf::UnimplementedError);
}
