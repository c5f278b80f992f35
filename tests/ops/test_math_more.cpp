// The tf.math ops ported from TF2 (ops/unary.h's tan ... expm1, atan2, ops/math.h, ops/scan.h):
// values against float64 references on every device and accepted dtype, TF 2.21's values and
// special values as literals, the dtypes and arguments TF rejects, and traced against eager.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "core/device.h"
#include "core/error.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/math.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/scan.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;
using tf::testing::check_values;
using tf::testing::contains;
using tf::testing::kAllDTypes;
using tf::testing::require_error;
using tf::testing::rtol_of;

namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

const std::vector<tf::DType> kFloating = {tf::float16, tf::bfloat16, tf::float32, tf::float64};

struct UnaryCase {
  const char* name;
  tf::Tensor (*fn)(const tf::Tensor&);
  double (*ref)(double);
  double lo, hi;  // input range
};

const std::vector<UnaryCase>& unary_cases() {
  static const std::vector<UnaryCase> cases = {
      {"tan", tf::tan, [](double x) { return std::tan(x); }, -1.4, 1.4},
      {"asin", tf::math::asin, [](double x) { return std::asin(x); }, -1, 1},
      {"acos", tf::math::acos, [](double x) { return std::acos(x); }, -1, 1},
      {"atan", tf::math::atan, [](double x) { return std::atan(x); }, -20, 20},
      {"sinh", tf::math::sinh, [](double x) { return std::sinh(x); }, -10, 10},
      {"cosh", tf::math::cosh, [](double x) { return std::cosh(x); }, -10, 10},
      {"asinh", tf::math::asinh, [](double x) { return std::asinh(x); }, -100, 100},
      {"acosh", tf::math::acosh, [](double x) { return std::acosh(x); }, 1, 100},
      {"atanh", tf::math::atanh, [](double x) { return std::atanh(x); }, -0.99, 0.99},
      {"expm1", tf::math::expm1, [](double x) { return std::expm1(x); }, -10, 10},
      {"reciprocal", tf::math::reciprocal, [](double x) { return 1 / x; }, 0.1, 10},
  };
  return cases;
}

// The stored values of x as doubles, f applied, rounded to dtype d.
std::vector<double> reference(const tf::Tensor& x, const std::function<double(double)>& f,
                              tf::DType d) {
  auto v = tf::detail::to_double_vector(x);
  for (auto& e : v) e = f(e);
  return tf::detail::to_double_vector(tf::detail::from_doubles(v, x.shape(), d));
}

}  // namespace

TEST_CASE("math unary ops match a float64 reference on every floating dtype",
          "[cpu][cuda][unary][math]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto& c : unary_cases()) {
      for (const auto d : kFloating) {
        // Sizes on both sides of the parallel split.
        for (const int64_t n : {int64_t{0}, int64_t{1}, int64_t{7}, int64_t{20001}}) {
          INFO(c.name << " on " << tf::dtype_name(d) << " n " << n << " on " << dev.to_string());
          const auto vals = tf::testing::random_values(static_cast<size_t>(n), c.lo, c.hi, 5);
          const tf::Tensor x = tf::detail::from_doubles(vals, {n}, d);
          const tf::Tensor y = c.fn(x);
          REQUIRE(y.dtype() == d);
          REQUIRE(y.shape() == x.shape());
          CHECK(y.device() == dev.to_string());
          // Near zero (asin, atanh, expm1 at small x) the stored type's absolute error counts.
          check_values(y, reference(x, c.ref, d), rtol_of(d), rtol_of(d));
        }
      }
    }
  }
}

TEST_CASE("math unary ops give TensorFlow 2.21's float32 special values",
          "[cpu][cuda][unary][math]") {
  // Each list is TF 2.21's output (CPU) for these inputs.
  const std::vector<double> in = {0.0, -0.0, 1.0, -1.0, 2.0, -2.0, kInf, -kInf, kNan, 0.5, 1e-10};
  const std::vector<std::pair<const char*, std::vector<double>>> want = {
      {"tan",
       {0.0, -0.0, 1.5574077367782593, -1.5574077367782593, -2.185039758682251, 2.185039758682251,
        kNan, kNan, kNan, 0.5463024973869324, 1.000000013351432e-10}},
      {"asin",
       {0.0, -0.0, 1.5707963705062866, -1.5707963705062866, kNan, kNan, kNan, kNan, kNan,
        0.5235987901687622, 1.000000013351432e-10}},
      {"acos",
       {1.5707963705062866, 1.5707963705062866, 0.0, 3.1415927410125732, kNan, kNan, kNan, kNan,
        kNan, 1.0471975803375244, 1.5707963705062866}},
      {"atan",
       {0.0, -0.0, 0.7853981256484985, -0.7853981256484985, 1.1071487665176392, -1.1071487665176392,
        1.5707963705062866, -1.5707963705062866, kNan, 0.46364760398864746, 1.000000013351432e-10}},
      {"sinh",
       {0.0, -0.0, 1.175201177597046, -1.175201177597046, 3.6268603801727295, -3.6268603801727295,
        kInf, -kInf, kNan, 0.5210952758789062, 1.000000013351432e-10}},
      {"cosh",
       {1.0, 1.0, 1.5430805683135986, 1.5430805683135986, 3.7621958255767822, 3.7621958255767822,
        kInf, kInf, kNan, 1.1276259422302246, 1.0}},
      {"asinh",
       {0.0, -0.0, 0.8813735842704773, -0.8813735842704773, 1.4436354637145996, -1.4436354637145996,
        kInf, -kInf, kNan, 0.4812118411064148, 1.000000013351432e-10}},
      {"acosh", {kNan, kNan, 0.0, kNan, 1.316957950592041, kNan, kInf, kNan, kNan, kNan, kNan}},
      {"atanh",
       {0.0, -0.0, kInf, -kInf, kNan, kNan, kNan, kNan, kNan, 0.5493061542510986,
        1.000000013351432e-10}},
      {"expm1",
       {0.0, -0.0, 1.7182817459106445, -0.6321205496788025, 6.389056205749512, -0.8646647334098816,
        kInf, -1.0, kNan, 0.6487212777137756, 1.000000013351432e-10}},
      // TF's CPU kernel gives 0.99999994 for 1 / 1 (and 0.49999997 for 1 / 2): tapeflow's
      // division is rounded correctly, 1 ulp away.
      {"reciprocal",
       {kInf, -kInf, 0.9999999403953552, -0.9999999403953552, 0.4999999701976776,
        -0.4999999701976776, 0.0, -0.0, kNan, 2.0, 10000000000.0}},
  };
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::detail::from_doubles(in, {11}, tf::float32);
    for (const auto& [name, values] : want) {
      INFO(name << " on " << dev.to_string());
      for (const auto& c : unary_cases()) {
        if (std::string(c.name) != name) continue;
        const tf::Tensor y = c.fn(x);
        // glibc and CUDA's libdevice against TF's Eigen: within a few float32 ulp.
        check_values(y, values, 5e-7, 0);
        // Signed zeros are kept (tan(-0) = -0, acos(1) = +0).
        const auto got = tf::detail::to_double_vector(y);
        for (size_t i = 0; i < values.size(); ++i)
          if (values[i] == 0) CHECK(std::signbit(got[i]) == std::signbit(values[i]));
      }
    }
    // The bool tests, TF 2.21's values.
    check_values(tf::math::is_nan(x), {0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0}, 0, 0);
    check_values(tf::math::is_inf(x), {0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0}, 0, 0);
    check_values(tf::math::is_finite(x), {1, 1, 1, 1, 1, 1, 0, 0, 0, 1, 1}, 0, 0);
    for (const auto d : kFloating) {
      INFO(tf::dtype_name(d));
      const tf::Tensor xd = tf::detail::from_doubles({1.0, kNan, -kInf, 0.0}, {2, 2}, d);
      CHECK(tf::math::is_nan(xd).dtype() == tf::bool_);
      CHECK(tf::math::is_nan(xd).shape() == tf::TensorShape({2, 2}));
      check_values(tf::math::is_nan(xd), {0, 1, 0, 0}, 0, 0);
      check_values(tf::math::is_inf(xd), {0, 0, 1, 0}, 0, 0);
      check_values(tf::math::is_finite(xd), {1, 0, 0, 1}, 0, 0);
    }
  }
}

TEST_CASE("math ops reject the dtypes TF rejects - naming op and dtype", "[cpu][math]") {
  using Unary = tf::Tensor (*)(const tf::Tensor&);
  std::vector<std::pair<std::string, Unary>> unary;
  for (const auto& c : unary_cases()) unary.push_back({c.name, c.fn});
  unary.push_back({"is_nan", tf::math::is_nan});
  unary.push_back({"is_inf", tf::math::is_inf});
  unary.push_back({"is_finite", tf::math::is_finite});
  for (const auto& [name, fn] : unary)
    for (const auto d : {tf::int32, tf::int64, tf::uint8, tf::bool_}) {
      INFO(name << " on " << tf::dtype_name(d));
      const tf::Tensor x = tf::detail::from_doubles({1, 0}, {2}, d);
      require_error([&] { fn(x); }, {"[" + name + "]", std::string(tf::dtype_name(d))});
    }
  require_error([] { tf::tan(tf::Tensor()); }, {"[tan]"});
  require_error([] { tf::math::is_nan(tf::Tensor()); }, {"[is_nan]", "undefined"});
  // atan2: floating only, one dtype.
  for (const auto d : {tf::int32, tf::int64, tf::uint8, tf::bool_}) {
    const tf::Tensor x = tf::detail::from_doubles({1, 0}, {2}, d);
    require_error([&] { tf::atan2(x, x); }, {"[atan2]", std::string(tf::dtype_name(d))});
  }
  require_error([] { tf::atan2(tf::constant({1.f}), tf::constant({1.0})); },
                {"[atan2]", "float32", "float64"});
  require_error(
      [] {
        tf::atan2(tf::constant({1.f, 2.f}), tf::constant({1.f, 2.f, 3.f}));
      },
      {"[atan2]", "(2,)", "(3,)"});
  // squared_difference: floating, int32, int64 (TF rejects uint8).
  for (const auto d : {tf::uint8, tf::bool_}) {
    const tf::Tensor x = tf::detail::from_doubles({1, 0}, {2}, d);
    require_error([&] { tf::math::squared_difference(x, x); },
                  {"[squared_difference]", std::string(tf::dtype_name(d))});
  }
  require_error([] { tf::math::squared_difference(tf::constant({1}), tf::constant({1.f})); },
                {"[squared_difference]", "int32", "float32"});
}

TEST_CASE("atan2 matches a float64 reference and TF's special values",
          "[cpu][cuda][binary][math]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    for (const auto d : kFloating) {
      INFO(tf::dtype_name(d));
      // y (40, 1) against x (25): broadcasting both ways, all four quadrants.
      const tf::Tensor y =
          tf::detail::from_doubles(tf::testing::random_values(40, -3, 3, 7), {40, 1}, d);
      const tf::Tensor x =
          tf::detail::from_doubles(tf::testing::random_values(25, -3, 3, 8), {25}, d);
      const tf::Tensor got = tf::atan2(y, x);
      REQUIRE(got.dtype() == d);
      REQUIRE(got.shape() == tf::TensorShape({40, 25}));
      const auto yv = tf::detail::to_double_vector(y), xv = tf::detail::to_double_vector(x);
      std::vector<double> want;
      for (double a : yv)
        for (double b : xv) want.push_back(std::atan2(a, b));
      want = tf::detail::to_double_vector(tf::detail::from_doubles(want, {40, 25}, d));
      check_values(got, want, rtol_of(d), rtol_of(d));
    }
    // TF 2.21 (float64): signed zeros pick the quadrant; infinities give multiples of pi / 4.
    const tf::Tensor ys = tf::detail::from_doubles(
        {0.0, -0.0, 0.0, -0.0, 1.0, -1.0, kInf, kInf, -kInf, kNan, 1.0, 3.0}, {12}, tf::float64);
    const tf::Tensor xs = tf::detail::from_doubles(
        {0.0, 0.0, -0.0, -0.0, 0.0, 0.0, kInf, -kInf, kInf, 1.0, kNan, -4.0}, {12}, tf::float64);
    const tf::Tensor got = tf::atan2(ys, xs);
    check_values(
        got,
        {0.0, -0.0, 3.141592653589793, -3.141592653589793, 1.5707963267948966, -1.5707963267948966,
         0.7853981633974484, 2.356194490192345, -0.7853981633974484, kNan, kNan, 2.498091544796509},
        1e-15, 0);
    CHECK(std::signbit(tf::detail::to_double_vector(got)[1]));
    // A C++ scalar operand takes the tensor's dtype; empty operands give an empty result.
    check_values(tf::atan2(tf::constant({1.0f}), 1), {0.7853981633974483}, 1e-7, 0);
    CHECK(tf::atan2(tf::zeros({0, 3}), tf::ones({3})).shape() == tf::TensorShape({0, 3}));
  }
}

TEST_CASE("squared_difference and reciprocal match TF 2.21", "[cpu][cuda][binary][math]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    // int32 wraps as TF's: 70000^2 = 4.9e9 is 605032704 modulo 2^32.
    const tf::Tensor d =
        tf::math::squared_difference(tf::constant({70000, -3}), tf::constant({0, 4}));
    CHECK(d.dtype() == tf::int32);
    check_values(d, {605032704, 49}, 0, 0);
    check_values(tf::math::squared_difference(tf::constant({int64_t{1} << 31, int64_t{-5}}),
                                              tf::constant({int64_t{0}, int64_t{5}})),
                 {4611686018427387904.0, 100}, 0, 0);
    for (const auto dt : kFloating) {
      INFO(tf::dtype_name(dt));
      const tf::Tensor a = tf::detail::from_doubles({1.5, -2.0, 4.0, 0.25, 3.0, -1.0}, {2, 3}, dt);
      const tf::Tensor b = tf::detail::from_doubles({0.5, 1.0, -2.0}, {3}, dt);
      const tf::Tensor got = tf::math::squared_difference(a, b);
      CHECK(got.dtype() == dt);
      check_values(got, {1.0, 9.0, 36.0, 0.0625, 4.0, 1.0}, rtol_of(dt), 0);
      check_values(tf::math::squared_difference(b, 1.0), {0.25, 0.0, 9.0}, 0, 0);
      check_values(tf::math::reciprocal(b), {2.0, 1.0, -0.5}, 0, 0);
    }
  }
}

TEST_CASE("reduce_logsumexp matches TF 2.21 on rows of -inf inf NaN and large values",
          "[cpu][cuda][reduce][math]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const tf::Tensor x = tf::detail::from_doubles({1.0, 2.0, 3.0, -kInf, -kInf, -kInf, 0.5, kInf,
                                                   1.0, kNan, 1.0, 2.0, 1000.0, 1000.0, -1000.0},
                                                  {5, 3}, tf::float32);
    // TF 2.21's values.
    const tf::Tensor r = tf::reduce_logsumexp(x, 1);
    CHECK(r.shape() == tf::TensorShape({5}));
    check_values(r, {3.4076058864593506, -kInf, kInf, kNan, 1000.6931762695312}, 2e-7, 0);
    const tf::Tensor k = tf::math::reduce_logsumexp(tf::slice(x, {0, 0}, {1, 3}), {1}, true);
    CHECK(k.shape() == tf::TensorShape({1, 1}));
    check_values(k, {3.4076058864593506}, 2e-7, 0);
    check_values(tf::reduce_logsumexp(tf::reshape(tf::constant({1.f, 2.f, 3.f, 4.f}), {2, 2})),
                 {4.440189838409424}, 2e-7, 0);
    // An empty slice is -inf; axis=[] leaves each element alone (-inf stays -inf).
    check_values(tf::reduce_logsumexp(tf::zeros({2, 0}), 1), {-kInf, -kInf}, 0, 0);
    check_values(tf::reduce_logsumexp(tf::constant({1.f, -INFINITY, 2.f}), {}), {1, -kInf, 2}, 0,
                 0);
    // Against a float64 loop on a 3-d tensor over two axes, every floating dtype.
    for (const auto d : kFloating) {
      INFO(tf::dtype_name(d));
      const auto v = tf::testing::random_values(2 * 3 * 4, -50, 50, 3);
      const tf::Tensor t = tf::detail::from_doubles(v, {2, 3, 4}, d);
      const auto tv = tf::detail::to_double_vector(t);
      std::vector<double> want(3);
      for (int j = 0; j < 3; ++j) {
        double m = -kInf, s = 0;
        for (int i = 0; i < 2; ++i)
          for (int l = 0; l < 4; ++l) m = std::max(m, tv[static_cast<size_t>(i * 12 + j * 4 + l)]);
        for (int i = 0; i < 2; ++i)
          for (int l = 0; l < 4; ++l)
            s += std::exp(tv[static_cast<size_t>(i * 12 + j * 4 + l)] - m);
        want[static_cast<size_t>(j)] = m + std::log(s);
      }
      const tf::Tensor got = tf::reduce_logsumexp(t, {0, -1});
      CHECK(got.dtype() == d);
      check_values(got, want, rtol_of(d), 0);
    }
  }
}

TEST_CASE("reduce_variance reduce_std reduce_euclidean_norm and moments match TF 2.21",
          "[cpu][cuda][reduce][math]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const tf::Tensor a =
        tf::detail::from_doubles({1.0, 2.0, 4.0, -3.0, 0.5, 8.0}, {2, 3}, tf::float64);
    // TF 2.21's values (float64).
    check_values(tf::math::reduce_variance(a), {11.368055555555555}, 1e-15, 0);
    check_values(tf::math::reduce_variance(a, 0), {4.0, 0.5625, 4.0}, 1e-15, 0);
    const tf::Tensor vk = tf::math::reduce_variance(a, 1, true);
    CHECK(vk.shape() == tf::TensorShape({2, 1}));
    check_values(vk, {1.5555555555555554, 21.055555555555554}, 1e-15, 0);
    check_values(tf::math::reduce_std(a), {3.3716547206906515}, 1e-15, 0);
    check_values(tf::math::reduce_std(a, {1}), {1.247219128924647, 4.588633299312068}, 1e-15, 0);
    check_values(tf::math::reduce_euclidean_norm(a), {9.7082439194738}, 1e-15, 0);
    check_values(tf::math::reduce_euclidean_norm(a, 1), {4.58257569495584, 8.558621384311845},
                 1e-15, 0);
    // An empty slice: NaN variance (0 / 0), as TF.
    check_values(tf::math::reduce_variance(tf::zeros({0, 2}), 0), {kNan, kNan}, 0, 0);
    // Two passes: no cancellation around a large mean (TF: 0.8164966106414795).
    check_values(
        tf::math::reduce_std(tf::reshape(tf::constant({1e4f, 1e4f + 1, 1e4f + 2}), {1, 3}), 1),
        {0.8164966106414795}, 1e-7, 0);
    // Integer euclidean norms, as TF's: the square root truncated; int32 squares wrap
    // (2 * 50000^2 is 705032704 modulo 2^32).
    const tf::Tensor ints = tf::reshape(tf::constant({3, 4, 5, 12}), {2, 2});
    CHECK(tf::math::reduce_euclidean_norm(ints, 1).dtype() == tf::int32);
    check_values(tf::math::reduce_euclidean_norm(ints, 1), {5, 13}, 0, 0);
    check_values(tf::math::reduce_euclidean_norm(tf::cast(ints, tf::uint8), 0), {5, 12}, 0, 0);
    check_values(tf::math::reduce_euclidean_norm(tf::constant({50000, 50000})), {26552}, 0, 0);

    auto [m, v] = tf::nn::moments(a, {1});
    check_values(m, {2.3333333333333335, 1.8333333333333333}, 1e-15, 0);
    check_values(v, {1.5555555555555554, 21.055555555555554}, 1e-15, 0);
    auto [mk, vk2] = tf::nn::moments(a, {0, 1}, true);
    CHECK(mk.shape() == tf::TensorShape({1, 1}));
    CHECK(vk2.shape() == tf::TensorShape({1, 1}));
    check_values(mk, {2.0833333333333335}, 1e-15, 0);
    check_values(vk2, {11.368055555555555}, 1e-15, 0);
    // Integers: truncating means, as TF's ([2, 2] and [1, 20]).
    auto [mi, vi] = tf::nn::moments(tf::reshape(tf::constant({1, 2, 4, -3, 1, 8}), {2, 3}), {1});
    CHECK(mi.dtype() == tf::int32);
    check_values(mi, {2, 2}, 0, 0);
    check_values(vi, {1, 20}, 0, 0);
    // float16 in float32, rounded once: TF gives 2.333984375 and 1.5556640625.
    auto [mh, vh] = tf::nn::moments(tf::constant({1.f, 2.f, 4.f}), {0});
    check_values(vh, {1.5555555555555556}, 1e-7, 0);
    auto [mh16, vh16] = tf::nn::moments(tf::cast(tf::constant({1.f, 2.f, 4.f}), tf::float16), {0});
    CHECK(mh16.dtype() == tf::float16);
    check_values(mh16, {2.333984375}, 0, 0);
    check_values(vh16, {1.5556640625}, 0, 0);
    check_close(tf::cast(mh, tf::float16), mh16, 0, 0);
    // float16 variance (TF: 1.5546875, its mean and squares rounded to float16).
    check_values(tf::math::reduce_variance(tf::cast(tf::constant({1.f, 2.f, 4.f}), tf::float16)),
                 {1.5546875}, 2e-3, 0);
  }
}

TEST_CASE("math reductions reject what TF rejects", "[cpu][reduce][math]") {
  const tf::Tensor a = tf::ones({2, 3});
  require_error([&] { tf::reduce_logsumexp(a, 2); }, {"[reduce_logsumexp]", "axis 2"});
  require_error([&] { tf::math::reduce_variance(a, -3); }, {"[reduce_variance]", "axis -3"});
  require_error([&] { tf::math::reduce_std(a, {0, 0}); }, {"[reduce_std]", "duplicate"});
  require_error([&] { tf::math::reduce_euclidean_norm(a, 5); }, {"[reduce_euclidean_norm]"});
  require_error([&] { tf::nn::moments(a, {0, -2}); }, {"[moments]", "duplicate"});
  for (const auto d : {tf::int32, tf::int64, tf::uint8, tf::bool_}) {
    INFO(tf::dtype_name(d));
    const tf::Tensor x = tf::detail::from_doubles({1, 0}, {2}, d);
    const std::string dn(tf::dtype_name(d));
    require_error([&] { tf::reduce_logsumexp(x); }, {"[reduce_logsumexp]", dn});
    require_error([&] { tf::math::reduce_variance(x); }, {"[reduce_variance]", dn});
    require_error([&] { tf::math::reduce_std(x); }, {"[reduce_std]", dn});
  }
  require_error([] { tf::math::reduce_euclidean_norm(tf::constant({true})); },
                {"[reduce_euclidean_norm]", "bool"});
  require_error([] { tf::nn::moments(tf::cast(tf::constant({1}), tf::uint8), {0}); },
                {"[moments]", "uint8"});
  require_error([] { tf::reduce_logsumexp(tf::Tensor()); }, {"[reduce_logsumexp]", "undefined"});
}

namespace {

// Scan of a row-major tensor of `shape` along axis in float64 (wrapping integers are not
// covered here: the inputs stay small).
std::vector<double> scan_ref(const std::vector<double>& x, const tf::TensorShape& shape, int axis,
                             bool exclusive, bool reverse, bool product) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= shape[d];
  for (int d = axis + 1; d < shape.rank(); ++d) inner *= shape[d];
  const int64_t n = shape[axis];
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      double acc = product ? 1 : 0;
      for (int64_t s = 0; s < n; ++s) {
        const int64_t i = reverse ? n - 1 - s : s;
        const size_t at = static_cast<size_t>((o * n + i) * inner + j);
        if (exclusive) y[at] = acc;
        acc = product ? acc * x[at] : acc + x[at];
        if (!exclusive) y[at] = acc;
      }
    }
  return y;
}

}  // namespace

TEST_CASE("cumsum and cumprod match float64 scans on every axis and dtype",
          "[cpu][cuda][scan][math]") {
  const tf::TensorShape shape{3, 5, 4};
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    for (const auto d :
         {tf::float16, tf::bfloat16, tf::float32, tf::float64, tf::int32, tf::int64, tf::uint8}) {
      auto v = tf::testing::random_values(60, 0.5, 1.5, 11);
      if (tf::is_integer(d))
        for (auto& e : v) e = std::floor(e * 2);  // 1 and 2 (0 for a few): products stay small
      const tf::Tensor x = tf::detail::from_doubles(v, shape, d);
      const auto xv = tf::detail::to_double_vector(x);
      for (int axis = -3; axis < 3; ++axis)
        for (bool exclusive : {false, true})
          for (bool reverse : {false, true})
            for (bool product : {false, true}) {
              INFO((product ? "cumprod" : "cumsum")
                   << " on " << tf::dtype_name(d) << " axis " << axis << " exclusive " << exclusive
                   << " reverse " << reverse << " on " << dev.to_string());
              const tf::Tensor y = product ? tf::math::cumprod(x, axis, exclusive, reverse)
                                           : tf::math::cumsum(x, axis, exclusive, reverse);
              REQUIRE(y.dtype() == d);
              REQUIRE(y.shape() == shape);
              auto want =
                  scan_ref(xv, shape, axis < 0 ? axis + 3 : axis, exclusive, reverse, product);
              if (tf::is_floating(d))
                want = tf::detail::to_double_vector(tf::detail::from_doubles(want, shape, d));
              check_values(y, want, rtol_of(d), 0);
            }
    }
    // Long scans along the first and the last axis (many outer slices, many threads).
    for (const tf::TensorShape& s : {tf::TensorShape{5000, 7}, tf::TensorShape{7, 5000}}) {
      const auto v = tf::testing::random_values(35000, -1, 1, 12);
      const tf::Tensor x = tf::detail::from_doubles(v, s, tf::float64);
      for (int axis : {0, 1}) {
        INFO(s.to_string() << " axis " << axis);
        check_values(tf::cumsum(x, axis, false, axis == 1),
                     scan_ref(v, s, axis, false, axis == 1, false), 1e-12, 1e-12);
      }
    }
  }
}

TEST_CASE("cumsum and cumprod match TF 2.21 at the edges", "[cpu][cuda][scan][math]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const tf::Tensor v = tf::constant({1.f, 2.f, 3.f, 4.f});
    // TF 2.21's values.
    check_values(tf::cumsum(v, 0, true, true), {9, 7, 4, 0}, 0, 0);
    check_values(tf::cumsum(v, 0, true), {0, 1, 3, 6}, 0, 0);
    check_values(tf::cumsum(v, 0, false, true), {10, 9, 7, 4}, 0, 0);
    check_values(tf::math::cumprod(v, 0, true, true), {24, 12, 4, 1}, 0, 0);
    check_values(tf::cumsum(tf::reshape(tf::constant({1.f, 2.f, 3.f, 4.f}), {2, 2}), -1),
                 {1, 3, 3, 7}, 0, 0);
    check_values(tf::cumsum(tf::constant({1.f, INFINITY, -INFINITY, 2.f})), {1, kInf, kNan, kNan},
                 0, 0);
    check_values(tf::cumsum(tf::constant({1.f, NAN, 2.f})), {1, kNan, kNan}, 0, 0);
    // Integers wrap around, as TF's.
    check_values(tf::cumsum(tf::constant({2147483647, 1})), {2147483647, -2147483648.0}, 0, 0);
    check_values(tf::cumsum(tf::cast(tf::constant({200, 100}), tf::uint8)), {200, 44}, 0, 0);
    check_values(tf::math::cumprod(tf::constant({int64_t{3}, int64_t{-2}, int64_t{5}})),
                 {3, -6, -30}, 0, 0);
    // float16 accumulates in float32: 3000 float16 0.1s (0.0999755859375 each) reach 299.93,
    // stored as 300. TF rounds each partial sum to float16 and stops at 256.
    const tf::Tensor tenths = tf::cast(tf::fill({3000}, 0.1f), tf::float16);
    const auto sums = tf::detail::to_double_vector(tf::cumsum(tenths));
    CHECK(sums.back() == 300.0);
    // Empty tensors along and across the axis.
    CHECK(tf::cumsum(tf::zeros({0, 3}), 0).shape() == tf::TensorShape({0, 3}));
    CHECK(tf::math::cumprod(tf::zeros({2, 0}), 1).shape() == tf::TensorShape({2, 0}));
    // TF 2.21: cumsum(range(24) as (2, 3, 4), axis 1, exclusive, reverse).
    const tf::Tensor r = tf::reshape(tf::range(0.0, 24.0), {2, 3, 4});
    check_values(tf::cumsum(r, 1, true, true), {12, 14, 16, 18, 8,  9,  10, 11, 0, 0, 0, 0,
                                                36, 38, 40, 42, 20, 21, 22, 23, 0, 0, 0, 0},
                 0, 0);
  }
  // The rejected arguments, with TF's range in the message.
  require_error([] { tf::cumsum(tf::constant(tf::Tensor(3.f))); },
                {"[cumsum]", "axis 0", "[0, 0)"});
  require_error([] { tf::cumsum(tf::constant({1.f, 2.f}), 1); }, {"[cumsum]", "[-1, 1)"});
  require_error([] { tf::math::cumprod(tf::ones({2, 2}), -3); }, {"[cumprod]", "[-2, 2)"});
  require_error([] { tf::cumsum(tf::constant({true})); }, {"[cumsum]", "bool"});
  require_error([] { tf::cumsum(tf::Tensor()); }, {"[cumsum]", "undefined"});
}

TEST_CASE("cumprod gradients are TF 2.21's also at zeros", "[cpu][cuda][scan][autograd][math]") {
  // TF 2.21's gradients of sum(cumprod(x, axis 1, exclusive, reverse) * w).
  const std::vector<std::vector<double>> want = {
      {-11.0, 4.0, -2.25, 5.5, 2.5, 5.625},  // inclusive, forward
      {-3.0, 5.0, -0.75, -1.5, -5.0, 13.5},  // inclusive, reverse
      {-2.5, 1.5, 0.0, 9.5, 7.5, -0.0},      // exclusive, forward
      {0.0, 2.0, 0.5, 0.0, -2.0, 8.0}};      // exclusive, reverse
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    const tf::Tensor x =
        tf::detail::from_doubles({0.5, -1.5, 2.0, 1.25, 0.75, -0.5}, {2, 3}, tf::float64);
    const tf::Tensor w = tf::detail::from_doubles({1, 2, 3, 4, 5, 6}, {2, 3}, tf::float64);
    int k = 0;
    for (bool exclusive : {false, true})
      for (bool reverse : {false, true}) {
        tf::GradientTape tape;
        tape.watch(x);
        const tf::Tensor loss = tf::reduce_sum(tf::math::cumprod(x, 1, exclusive, reverse) * w);
        check_values(tape.gradient(loss, x), want[static_cast<size_t>(k++)], 1e-15, 1e-15);
      }
    // At a zero, TF's div_no_nan gives 0 where the true derivative (1 + 2 + 6 = 9) is not.
    const tf::Tensor z = tf::detail::from_doubles({1.0, 0.0, 2.0, 3.0}, {4}, tf::float64);
    tf::GradientTape tape;
    tape.watch(z);
    const tf::Tensor loss = tf::reduce_sum(tf::math::cumprod(z));
    check_values(tape.gradient(loss, z), {1.0, 0.0, 0.0, 0.0}, 0, 0);
  }
}

TEST_CASE("reverse matches TF 2.21 on every dtype", "[cpu][cuda][movement][math]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    for (const auto d : kAllDTypes) {
      INFO(tf::dtype_name(d));
      const tf::Tensor x = tf::detail::from_doubles({1, 0, 1, 1, 0, 0}, {2, 3}, d);
      check_values(tf::reverse(x, {0, -1}), {0, 0, 1, 1, 0, 1}, 0, 0);
      check_values(tf::reverse(x, {1}), {1, 0, 1, 0, 0, 1}, 0, 0);
      check_values(tf::reverse(x, {0}), {1, 0, 0, 1, 0, 1}, 0, 0);
      CHECK(tf::reverse(x, {0}).dtype() == d);
    }
    // TF 2.21: [[6, 5, 4], [3, 2, 1]]; axes {} and a scalar are returned unchanged.
    check_values(tf::reverse(tf::reshape(tf::constant({1, 2, 3, 4, 5, 6}), {2, 3}), {0, -1}),
                 {6, 5, 4, 3, 2, 1}, 0, 0);
    check_values(tf::reverse(tf::reshape(tf::constant({1, 2, 3, 4}), {2, 2}), {}), {1, 2, 3, 4}, 0,
                 0);
    check_values(tf::reverse(tf::constant(tf::Tensor(3)), {}), {3}, 0, 0);
    CHECK(tf::reverse(tf::zeros({0, 3}), {0, 1}).shape() == tf::TensorShape({0, 3}));
    // A 4-d tensor against index arithmetic.
    const tf::Tensor big = tf::reshape(tf::range(0.0, 120.0), {2, 3, 4, 5});
    const auto got = tf::detail::to_double_vector(tf::reverse(big, {1, 3}));
    bool same = true;
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 3; ++b)
        for (int c = 0; c < 4; ++c)
          for (int e = 0; e < 5; ++e)
            same = same && got[static_cast<size_t>(((a * 3 + b) * 4 + c) * 5 + e)] ==
                               (((a * 3 + (2 - b)) * 4 + c) * 5 + (4 - e));
    CHECK(same);
    // Traced with None dimensions: one graph for every length (the indices are computed when
    // the graph runs).
    auto f = tf::function(
        [](const tf::Tensor& v) {
          return tf::reverse(v, {0, 1});
        },
        {.input_signature = {tf::TensorSpec({tf::None, 3}, tf::float64)}});
    for (int64_t n : {2, 5, 1}) {
      const tf::Tensor v =
          tf::cast(tf::reshape(tf::range(0.0, static_cast<double>(3 * n)), {n, 3}), tf::float64);
      tf::testing::check_close(f(v), tf::reverse(v, {0, 1}), 0, 0);
    }
    CHECK(f.tracing_count() == 1);
  }
  require_error([] { tf::reverse(tf::ones({2, 2}), {0, 0}); }, {"[reverse]", "duplicate"});
  require_error([] { tf::reverse(tf::ones({2, 2}), {1, -1}); }, {"[reverse]", "duplicate"});
  require_error([] { tf::reverse(tf::ones({2, 2}), {2}); }, {"[reverse]", "axis 2"});
  require_error([] { tf::reverse(tf::Tensor(), {0}); }, {"[reverse]", "undefined"});
}

TEST_CASE("math ops traced in a function equal eager", "[cpu][cuda][jit][math]") {
  for (const auto dev : tf::testing::devices_under_test()) {
    tf::DeviceScope scope(dev);
    INFO(dev.to_string());
    auto body = [](const tf::Tensor& x, const tf::Tensor& y) {
      const tf::Tensor u = x * 0.3;  // in (-0.3, 0.3): inside every domain
      tf::Tensor t = tf::tan(u) + tf::math::asin(u) + tf::math::acos(u) + tf::math::atan(x) +
                     tf::math::sinh(x) + tf::math::cosh(x) + tf::math::asinh(x) +
                     tf::math::acosh(tf::abs(x) + 1.0) + tf::math::atanh(u) + tf::math::expm1(x) +
                     tf::atan2(x, y) + tf::math::squared_difference(x, y) + tf::math::reciprocal(y);
      t = t + tf::math::cumsum(x, 1, true) * tf::math::cumprod(y, 0, false, true);
      t = t + tf::reverse(x, {0, 1}) + tf::cast(tf::math::is_finite(x), x.dtype()) +
          tf::reduce_logsumexp(x, 1, true) + tf::math::reduce_std(x, 0, true) +
          tf::math::reduce_euclidean_norm(y, {1}, true);
      auto [m, v] = tf::nn::moments(x, {0, 1}, true);
      return t + m * v;
    };
    auto f = tf::function(body);
    for (const auto d : {tf::float32, tf::float64}) {
      INFO(tf::dtype_name(d));
      const tf::Tensor x =
          tf::detail::from_doubles(tf::testing::random_values(12, -1, 1, 3), {3, 4}, d);
      const tf::Tensor y =
          tf::detail::from_doubles(tf::testing::random_values(12, 0.5, 1.5, 4), {3, 4}, d);
      const tf::Tensor want = body(x, y);
      for (int rep = 0; rep < 2; ++rep) check_close(f(x, y), want, rtol_of(d), rtol_of(d));
    }
  }
}

TEST_CASE("math ops in a function whose signature has a None dimension", "[cpu][jit][math]") {
  tf::FunctionOptions opts;
  opts.input_signature = {tf::TensorSpec({tf::None, 3})};
  auto f = tf::function(
      [](const tf::Tensor& x) {
        return tf::reverse(x, {0, 1}) + tf::cumsum(x, 0, true) + tf::reduce_logsumexp(x, 0, true) +
               tf::math::reduce_variance(x, {0}, true);
      },
      opts);
  for (int64_t rows : {2, 5}) {
    INFO("rows " << rows);
    const tf::Tensor x = tf::detail::from_doubles(
        tf::testing::random_values(static_cast<size_t>(rows * 3), -1, 1, 9), {rows, 3},
        tf::float32);
    const tf::Tensor want = tf::reverse(x, {0, 1}) + tf::cumsum(x, 0, true) +
                            tf::reduce_logsumexp(x, 0, true) +
                            tf::math::reduce_variance(x, {0}, true);
    check_close(f(x), want, 1e-6, 1e-6);
  }
}
