// tf::math::cumulative_logsumexp (ops/scan.h) on every device of devices_under_test(): every
// axis, flag and floating dtype against a float64 reference written here, TF 2.21's values (far
// apart values, -inf, +inf), gradients against central differences and TF's, a trace over a
// None batch and the errors TF raises.
#include <algorithm>
#include <cmath>
#include <limits>
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
using tf::testing::check_gradient;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// log(sum(exp(terms))) of the terms seen so far, as the prefix's maximum plus the log of the
// shifted sum (plain, in long double).
std::vector<double> reference(const std::vector<double>& x, const tf::TensorShape& s, int axis,
                              bool exclusive, bool reverse) {
  int64_t outer = 1, inner = 1;
  for (int d = 0; d < axis; ++d) outer *= s[d];
  for (int d = axis + 1; d < s.rank(); ++d) inner *= s[d];
  const int64_t n = s[axis];
  std::vector<double> out(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j)
      for (int64_t i = 0; i < n; ++i) {
        std::vector<long double> terms;
        for (int64_t k = 0; k < n; ++k) {
          const bool before = reverse ? k > i : k < i;
          if (before || (!exclusive && k == i))
            terms.push_back(x[static_cast<size_t>((o * n + k) * inner + j)]);
        }
        long double result = -kInf;
        if (!terms.empty()) {
          const long double m = *std::max_element(terms.begin(), terms.end());
          long double sum = 0;
          for (long double t : terms) sum += std::exp(t - m);
          result = m + std::log(sum);
        }
        out[static_cast<size_t>((o * n + i) * inner + j)] = static_cast<double>(result);
      }
  return out;
}

}  // namespace

TEST_CASE("cumulative_logsumexp matches a float64 reference on every axis, flag and dtype",
          "[cpu][cuda][scan][math]") {
  const tf::TensorShape shape{3, 4, 5};
  // Spread over [-30, 30): terms far below the running maximum must still count.
  std::vector<double> data = tf::testing::random_values(60, -30, 30, 5);
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType dtype : {tf::float16, tf::bfloat16, tf::float32, tf::float64}) {
      INFO("dtype " << tf::dtype_name(dtype));
      const tf::Tensor x = tf::cast(tf::constant(data, shape), dtype);
      // The reference runs on the values x holds (rounded to the dtype).
      const std::vector<double> held = tf::cast(x, tf::float64).numpy<double>();
      for (int axis = -3; axis < 3; ++axis)
        for (bool exclusive : {false, true})
          for (bool reverse : {false, true}) {
            INFO("axis " << axis << " exclusive " << exclusive << " reverse " << reverse);
            const tf::Tensor y = tf::math::cumulative_logsumexp(x, axis, exclusive, reverse);
            REQUIRE(y.dtype() == dtype);
            REQUIRE(y.shape() == shape);
            const double rtol = dtype == tf::float64   ? 1e-13
                                : dtype == tf::float32 ? 1e-5
                                : dtype == tf::float16 ? 2e-3
                                                       : 1.6e-2;
            check_values(y, reference(held, shape, axis < 0 ? axis + 3 : axis, exclusive, reverse),
                         rtol, rtol);
          }
    }
  }
}

TEST_CASE("cumulative_logsumexp matches TF 2.21", "[cpu][cuda][scan][math]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x =
        tf::constant({{0.5f, -1.0f, 2.0f, -200.0f}, {1.0f, 1.0f, -INFINITY, 3.0f}});
    check_values(tf::math::cumulative_logsumexp(x, 1),
                 {0.5, 0.7014133, 2.2413113, 2.2413113, 1, 1.6931472, 1.6931472, 3.2395449});
    check_values(tf::math::cumulative_logsumexp(x, 1, false, true),
                 {2.2413113, 2.0485873, 2, -200, 3.2395449, 3.126928, 3, 3});
    check_values(tf::math::cumulative_logsumexp(x, 1, true, false),
                 {-kInf, 0.5, 0.7014133, 2.2413113, -kInf, 1, 1.6931472, 1.6931472});
    check_values(tf::math::cumulative_logsumexp(x, 1, true, true),
                 {2.0485873, 2, -200, -kInf, 3.126928, 3, 3, -kInf});
    check_values(tf::math::cumulative_logsumexp(x), {0.5, -1, 2, -200, 1.474077, 1.126928, 2, 3});
    check_values(
        tf::math::cumulative_logsumexp(tf::constant({-INFINITY, -INFINITY, 0.0f, INFINITY, 1.0f})),
        {-kInf, -kInf, 0, kInf, kInf}, 0, 0);
    // exp(-200 - 0) underflows float32: a log of a shifted cumsum would give -inf first.
    check_values(tf::math::cumulative_logsumexp(tf::constant({-200.0f, 0.0f, -300.0f})),
                 {-200, 0, 0}, 0, 0);
    CHECK(tf::math::cumulative_logsumexp(tf::zeros({2, 0}), 1).shape() == tf::TensorShape{2, 0});

    // TF 2.21: d/dx sum(cumulative_logsumexp(x, exclusive=True) * w).
    const tf::Tensor xx = tf::constant({0.5f, -1.0f, 2.0f, 0.0f});
    tf::GradientTape tape;
    tape.watch(xx);
    const tf::Tensor loss = tf::reduce_sum(tf::math::cumulative_logsumexp(xx, 0, true) *
                                           tf::constant({1.0f, -2.0f, 0.5f, 3.0f}));
    check_values(tape.gradient(loss, xx), {-1.0653416, 0.20855048, 2.356791, 0}, 1e-5, 1e-6);
  }
}

TEST_CASE("cumulative_logsumexp gradients match central differences",
          "[cpu][cuda][scan][autograd][math]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (int axis : {0, 1})
      for (bool exclusive : {false, true})
        for (bool reverse : {false, true}) {
          INFO("axis " << axis << " exclusive " << exclusive << " reverse " << reverse);
          check_gradient(
              [&](const tf::Tensor& x) {
                // An exclusive scan's -inf results are masked out (0 cotangent there).
                const tf::Tensor y =
                    tf::math::cumulative_logsumexp(x * 4.0, axis, exclusive, reverse);
                return tf::where(tf::math::is_finite(y), y, tf::zeros_like(y));
              },
              {3, 4}, {}, 1e-6, 1e-8);
        }
    // Ties (all zeros): each earlier term gets 1 / (its count) of the cotangent.
    const tf::Tensor z = tf::zeros({3});
    tf::GradientTape tape;
    tape.watch(z);
    const tf::Tensor loss = tf::reduce_sum(tf::math::cumulative_logsumexp(z));
    check_values(tape.gradient(loss, z), {1 + 0.5 + 1.0 / 3, 0.5 + 1.0 / 3, 1.0 / 3}, 1e-6);

    // -inf terms: TF 2.21 gives NaN for the first element; its true derivative is 0.
    const tf::Tensor m = tf::constant({-INFINITY, 1.0f});
    tf::GradientTape tape2;
    tape2.watch(m);
    const tf::Tensor loss2 =
        tf::reduce_sum(tf::math::cumulative_logsumexp(m) * tf::constant({0.0f, 1.0f}));
    check_values(tape2.gradient(loss2, m), {0, 1}, 0, 0);
    // NaN propagates (TF's kernel drops it).
    check_values(tf::math::cumulative_logsumexp(tf::constant({1.0f, NAN, 2.0f})), {1, NAN, NAN}, 0,
                 0);
  }
}

TEST_CASE("cumulative_logsumexp traces over a None batch and rejects what TF rejects",
          "[cpu][cuda][scan][jit][math]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    auto f = tf::function(
        [](const tf::Tensor& t) { return tf::math::cumulative_logsumexp(t, 0, false, true); },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 2})}});
    for (int64_t n : {1, 4}) {
      const tf::Tensor in = tf::reshape(tf::range(0, 2 * n, 1, tf::float32), {n, 2});
      check_values(f(in),
                   reference(tf::cast(in, tf::float64).numpy<double>(), {n, 2}, 0, false, true),
                   1e-6, 1e-6);
    }
    CHECK(f.tracing_count() == 1);
  }
  require_error(
      [] {
        tf::math::cumulative_logsumexp(tf::constant({1, 2}));
      },
      {"[cumulative_logsumexp]", "int32"});
  require_error([] { tf::math::cumulative_logsumexp(tf::Tensor(1.0f)); },
                {"[cumulative_logsumexp] axis 0 is out of range [0, 0)"});
  require_error([] { tf::math::cumulative_logsumexp(tf::constant({1.0f}), 1); },
                {"[cumulative_logsumexp] axis 1 is out of range [-1, 1)"});
}
