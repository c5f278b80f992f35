// tf.map_fn, tf.foldl, tf.foldr and tf.scan (ops/higher_order.h) on every device of
// devices_under_test(): values against TF 2.21's (printed by the Python lines quoted in each
// case), float64 gradients through fn against central differences, traced equals eager, and
// the errors for bad arguments.
#include <string>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/higher_order.h"
#include "ops/linalg.h"
#include "ops/movement.h"
#include "ops/reduce.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_gradient;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

tf::Tensor vec(const std::vector<double>& v, tf::DType dtype = tf::float32) {
  return tf::cast(tf::constant(v, {static_cast<int64_t>(v.size())}), dtype);
}
tf::Tensor mat(const std::vector<double>& v, int64_t rows, int64_t cols) {
  return tf::cast(tf::constant(v, {rows, cols}), tf::float32);
}

}  // namespace

TEST_CASE("higher_order: map_fn stacks fn over the first dimension as TF",
          "[cpu][cuda][higher_order]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // tf.map_fn(lambda x: x * 2, tf.constant([[1., 2.], [3., 4.]])) -> [[2, 4], [6, 8]]
    const tf::Tensor m = mat({1, 2, 3, 4}, 2, 2);
    const tf::Tensor doubled = tf::map_fn([](const tf::Tensor& x) { return x * 2.0f; }, m);
    CHECK(doubled.shape() == tf::TensorShape{2, 2});
    CHECK(doubled.placement() == dev);
    check_values(doubled, {2, 4, 6, 8});
    // Row sums: a different shape per element than elems' rows.
    check_values(tf::map_fn([](const tf::Tensor& x) { return tf::reduce_sum(x); }, m), {3, 7});
    // tf.map_fn(lambda x: tf.cast(x, tf.int32), [1., 2.], fn_output_signature=tf.int32)
    const tf::Tensor as_int = tf::map_fn([](const tf::Tensor& x) { return tf::cast(x, tf::int32); },
                                         vec({1, 2}), tf::TensorSpec({}, tf::int32));
    CHECK(as_int.dtype() == tf::int32);
    check_values(as_int, {1, 2}, 0, 0);
    // Two elems unstacked together, two results.
    const auto [sums, prods] = [&] {
      auto r = tf::map_fn(
          [](const std::vector<tf::Tensor>& xy) {
            return std::vector<tf::Tensor>{xy[0] + xy[1], tf::reduce_sum(xy[0] * xy[1])};
          },
          std::vector<tf::Tensor>{m, mat({10, 20, 30, 40}, 2, 2)});
      return std::make_pair(r[0], r[1]);
    }();
    check_values(sums, {11, 22, 33, 44});
    check_values(prods, {50, 250});
    // tf.map_fn(lambda x: tf.reduce_sum(x), tf.zeros([0, 3])) has shape (0,): fn is probed.
    const tf::Tensor none =
        tf::map_fn([](const tf::Tensor& x) { return tf::reduce_sum(x); }, tf::zeros({0, 3}));
    CHECK(none.shape() == tf::TensorShape{0});
    CHECK(none.placement() == dev);
    const tf::Tensor none_sig = tf::map_fn([](const tf::Tensor& x) { return x; }, tf::zeros({0, 3}),
                                           tf::TensorSpec({5}, tf::float64));
    CHECK(none_sig.shape() == tf::TensorShape{0, 5});
    CHECK(none_sig.dtype() == tf::float64);
    // Traced: the loop unrolls; the replay equals eager.
    auto f = tf::function([](const tf::Tensor& x) {
      return tf::map_fn([](const tf::Tensor& r) { return tf::exp(r) - r; }, x);
    });
    const tf::Tensor in = mat({0.5, -1, 2, 0.25, 3, -2}, 3, 2);
    tf::testing::check_close(f(in), tf::exp(in) - in, 1e-6, 1e-6);
    tf::testing::check_close(f(in * 2.0f), tf::exp(in * 2.0f) - in * 2.0f, 1e-6, 1e-6);
    CHECK(f.tracing_count() == 1);
  }
  // Gradients through fn (a per-row quadratic form and a nonlinearity).
  check_gradient(
      [](const tf::Tensor& x) {
        return tf::map_fn([](const tf::Tensor& r) { return tf::tanh(r) * tf::reduce_sum(r * r); },
                          x);
      },
      {3, 4});
  // TF: "TensorArray dtype is float32 but Op is trying to write dtype int32".
  require_error(
      [] {
        tf::map_fn([](const tf::Tensor& x) { return tf::cast(x, tf::int32); }, vec({1, 2}));
      },
      {"map_fn", "int32", "float32", "fn_output_signature"});
  // TF: "Incompatible shape for value ((2,)), expected ((1,))".
  require_error(
      [] {
        tf::map_fn(
            [](const tf::Tensor& x) {
              return x.numpy<float>()[0] < 1.5f ? tf::ones({1}) : tf::ones({2});
            },
            vec({1, 2}));
      },
      {"map_fn", "shape (2,) for element 1", "(1,)"});
  // TF: "Elements in elems must be 1+ dimensional Tensors, not scalars".
  require_error([] { tf::map_fn([](const tf::Tensor& x) { return x; }, tf::Tensor(1.0f)); },
                {"map_fn", "1+ dimensional", "scalar"});
  require_error(
      [] {
        tf::map_fn([](const std::vector<tf::Tensor>& xy) { return xy; },
                   std::vector<tf::Tensor>{tf::zeros({2, 3}), tf::zeros({3, 3})});
      },
      {"map_fn", "first dimensions", "(3, 3)", "(2, 3)"});
}

TEST_CASE("higher_order: foldl, foldr and scan accumulate as TF", "[cpu][cuda][higher_order]") {
  auto add = [](const tf::Tensor& a, const tf::Tensor& x) { return a + x; };
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor e = vec({1, 2, 3});
    // tf.foldl(lambda a, x: a + x, [1., 2., 3.]) -> 6.0
    check_values(tf::foldl(add, e), {6});
    // tf.foldr(lambda a, x: a * 10 + x, [1., 2., 3.]) -> 321.0
    check_values(
        tf::foldr([](const tf::Tensor& a, const tf::Tensor& x) { return a * 10.0f + x; }, e),
        {321});
    check_values(tf::foldl(add, e, tf::Tensor(10.0f)), {16});
    // tf.scan(lambda a, x: a + x, [1., 2., 3.]) -> [1, 3, 6]; reverse=True -> [6, 5, 3]
    check_values(tf::scan(add, e), {1, 3, 6});
    check_values(tf::scan(add, e, std::nullopt, true), {6, 5, 3});
    // tf.scan(lambda a, x: a * x, [1., 2., 3.], initializer=tf.constant(2.)) -> [2, 4, 12]
    check_values(tf::scan([](const tf::Tensor& a, const tf::Tensor& x) { return a * x; }, e,
                          tf::Tensor(2.0f)),
                 {2, 4, 12});
    // A vector accumulator over matrix rows: running column sums.
    const tf::Tensor rows = mat({1, 2, 3, 4, 5, 6}, 3, 2);
    check_values(tf::scan(add, rows), {1, 2, 4, 6, 9, 12});
    // tf.scan(lambda a, x: a + x, tf.zeros([0]), initializer=tf.constant(1.)) -> shape (0,)
    const tf::Tensor empty = tf::scan(add, tf::zeros({0}), tf::Tensor(1.0f));
    CHECK(empty.shape() == tf::TensorShape{0});
    CHECK(empty.placement() == dev);
    check_values(tf::foldl(add, tf::zeros({0}), tf::Tensor(5.0f)), {5});
    auto f = tf::function([](const tf::Tensor& x) {
      return tf::scan([](const tf::Tensor& a, const tf::Tensor& r) { return a * 0.5f + r; }, x);
    });
    tf::testing::check_close(
        f(rows),
        tf::scan([](const tf::Tensor& a, const tf::Tensor& r) { return a * 0.5f + r; }, rows));
  }
  check_gradient(
      [](const tf::Tensor& x) {
        return tf::scan([](const tf::Tensor& a, const tf::Tensor& r) { return tf::sin(a) * r; }, x);
      },
      {4, 3});
  check_gradient(
      [](const tf::Tensor& x) {
        return tf::foldr([](const tf::Tensor& a, const tf::Tensor& r) { return a * r + r; }, x,
                         tf::ones({3}, tf::float64));
      },
      {4, 3});
  // TF raises OutOfRangeError "Tried to read from index 0 but array size is: 0".
  require_error([&] { tf::foldl(add, tf::zeros({0})); }, {"foldl", "no elements", "initializer"});
  require_error([&] { tf::scan(add, tf::zeros({0, 2})); }, {"scan", "(0, 2)", "initializer"});
  require_error(
      [] {
        tf::foldl(
            [](const tf::Tensor& a, const tf::Tensor& x) {
              return tf::stack({a, x});
            },
            vec({1, 2, 3}));
      },
      {"foldl", "the accumulator of shape (2,) for element 1", "shape ()"});
  require_error(
      [] {
        tf::scan([](const tf::Tensor& a, const tf::Tensor&) { return tf::cast(a, tf::float64); },
                 vec({1, 2}));
      },
      {"scan", "float64", "float32"});
}
