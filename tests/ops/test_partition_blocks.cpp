// space_to_batch_nd, batch_to_space_nd, atrous_conv2d (ops/space_batch.h), dynamic_partition,
// dynamic_stitch, unravel_index (ops/partition.h), divide_no_nan, multiply_no_nan,
// weighted_moments (ops/math.h), log_poisson_loss (ops/nn_more.h) and matrix_rank
// (ops/linalg_decomp.h) on every device of devices_under_test(): values against TF 2.21
// literals, float64 gradients against central differences, traced against eager, the errors.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "autograd/tape.h"
#include "autograd/variable.h"
#include "core/device.h"
#include "core/error.h"
#include "core/tensor.h"
#include "jit/function.h"
#include "ops/binary.h"
#include "ops/factory.h"
#include "ops/linalg.h"
#include "ops/linalg_decomp.h"
#include "ops/math.h"
#include "ops/movement.h"
#include "ops/nn.h"
#include "ops/nn_more.h"
#include "ops/partition.h"
#include "ops/reduce.h"
#include "ops/space_batch.h"
#include "ops/unary.h"
#include "support/testing.h"

namespace tf = tapeflow;
using tf::testing::check_close;
using tf::testing::check_gradient;
using tf::testing::check_values;
using tf::testing::require_error;

namespace {

tf::Tensor iota(const tf::TensorShape& shape, double start = 0.0, tf::DType dtype = tf::float32) {
  return tf::reshape(
      tf::range(start, start + static_cast<double>(shape.num_elements()), 1.0, dtype), shape);
}

tf::Tensor ints(const std::vector<int64_t>& v, const tf::TensorShape& shape,
                tf::DType dtype = tf::int32) {
  return tf::cast(tf::constant(v, shape), dtype);
}

tf::Tensor vec(const std::vector<double>& v, tf::DType dtype = tf::float32) {
  return tf::cast(tf::constant(v, {static_cast<int64_t>(v.size())}), dtype);
}

// clang-format off
// tf.space_to_batch_nd(reshape(range(1, 49), (2, 3, 4, 2)), [2, 2], [[1, 0], [0, 2]]): (8, 2, 3, 2)
const std::vector<double> kSpaceToBatch = {
    0, 0, 0, 0, 0, 0, 9, 10, 13, 14, 0, 0, 0, 0, 0, 0, 0, 0, 33, 34, 37, 38, 0, 0, 0, 0, 0, 0, 0,
    0, 11, 12, 15, 16, 0, 0, 0, 0, 0, 0, 0, 0, 35, 36, 39, 40, 0, 0, 1, 2, 5, 6, 0, 0, 17, 18, 21,
    22, 0, 0, 25, 26, 29, 30, 0, 0, 41, 42, 45, 46, 0, 0, 3, 4, 7, 8, 0, 0, 19, 20, 23, 24, 0, 0,
    27, 28, 31, 32, 0, 0, 43, 44, 47, 48, 0, 0};
// tf.batch_to_space(reshape(range(1, 49), (8, 2, 3, 1)), [2, 2], [[0, 1], [1, 1]]): (2, 3, 4, 1)
const std::vector<double> kBatchToSpace = {
    13, 2, 14, 3, 37, 26, 38, 27, 16, 5, 17, 6, 19, 8, 20, 9, 43, 32, 44, 33, 22, 11, 23, 12};
// tf.space_to_batch_nd(reshape(range(1, 37), (2, 6, 3)), [3], [[1, 2]]): (6, 3, 3)
const std::vector<double> kSpaceToBatch1 = {
    0, 0, 0, 7, 8, 9, 16, 17, 18, 0, 0, 0, 25, 26, 27, 34, 35, 36, 1, 2, 3, 10, 11, 12, 0, 0, 0,
    19, 20, 21, 28, 29, 30, 0, 0, 0, 4, 5, 6, 13, 14, 15, 0, 0, 0, 22, 23, 24, 31, 32, 33, 0, 0,
    0};
// clang-format on

}  // namespace

TEST_CASE("space_to_batch_nd and batch_to_space_nd move blocks between space and batch",
          "[cpu][cuda][space_batch]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = iota({2, 3, 4, 2}, 1);
    const tf::Tensor a = tf::space_to_batch_nd(x, {2, 2}, {{1, 0}, {0, 2}});
    CHECK(a.shape() == tf::TensorShape{8, 2, 3, 2});
    check_values(a, kSpaceToBatch, 0, 0);
    check_values(tf::batch_to_space(a, {2, 2}, {{1, 0}, {0, 2}}), x.numpy<double>(), 0, 0);
    const tf::Tensor b = tf::batch_to_space_nd(iota({8, 2, 3, 1}, 1), {2, 2}, {{0, 1}, {1, 1}});
    CHECK(b.shape() == tf::TensorShape{2, 3, 4, 1});
    check_values(b, kBatchToSpace, 0, 0);
    const tf::Tensor c = tf::space_to_batch(iota({2, 6, 3}, 1), {3}, {{1, 2}});
    CHECK(c.shape() == tf::TensorShape{6, 3, 3});
    check_values(c, kSpaceToBatch1, 0, 0);
    // Integers and no padding.
    check_values(tf::space_to_batch_nd(ints({1, 2, 3, 4}, {1, 4}, tf::int64), {2}, {{0, 0}}),
                 {1, 3, 2, 4}, 0, 0);
    // Gradients (float64): pad, reshape, transpose and slice.
    check_gradient(
        [](const tf::Tensor& t) {
          return tf::space_to_batch_nd(t, {2, 3}, {{1, 1}, {2, 1}});
        },
        {2, 2, 3, 2});
    check_gradient(
        [](const tf::Tensor& t) {
          return tf::batch_to_space_nd(t, {2, 1}, {{1, 2}, {0, 1}});
        },
        {4, 3, 3, 1});
    // A None batch: one trace serves every batch size.
    auto f = tf::function(
        [](const tf::Tensor& t) {
          return tf::batch_to_space(tf::space_to_batch(t, {2, 2}, {{1, 0}, {0, 2}}) * 2.0f, {2, 2},
                                    {{1, 0}, {0, 2}});
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None, 3, 4, 2})}});
    check_close(f(x), x * 2.0f, 0, 0);
    const tf::Tensor x3 = iota({3, 3, 4, 2});
    check_close(f(x3), x3 * 2.0f, 0, 0);
    CHECK(f.tracing_count() == 1);
    // TF 2.21's messages where it has them.
    require_error(
        [&] {
          tf::space_to_batch_nd(x, {2, 2}, {{0, 0}, {0, 1}});
        },
        {"[space_to_batch_nd] padded_shape[0]=3 is not divisible by block_shape[0]=2"});
    require_error(
        [&] {
          tf::batch_to_space(iota({8, 2, 3, 1}), {3, 3}, {{0, 0}, {0, 0}});
        },
        {"[batch_to_space_nd] Input batch dimension (8) is not divisible by product of "
         "block sizes (9)"});
    require_error(
        [&] {
          tf::batch_to_space(iota({8, 2, 3, 1}), {2, 2}, {{3, 2}, {0, 0}});
        },
        {"crops[0] = (3, 2) exceed dimension 1 of the result, 4"});
    require_error(
        [&] {
          tf::space_to_batch_nd(x, {2, 0}, {{0, 0}, {0, 0}});
        },
        {"block_shape must be positive"});
    require_error(
        [&] {
          tf::space_to_batch_nd(x, {2}, {{0, 0}, {0, 0}});
        },
        {"paddings must have one pair per entry of block_shape [2], got 2"});
    require_error(
        [&] {
          tf::space_to_batch_nd(x, {2, 2}, {{-1, 0}, {0, 0}});
        },
        {"paddings[0] = (-1, 0) must be non-negative"});
    require_error(
        [&] {
          tf::space_to_batch_nd(iota({2, 4}), {2, 2}, {{0, 0}, {0, 0}});
        },
        {"needs a batch dimension and 2 block dimension(s)"});
  }
}

TEST_CASE("atrous_conv2d is conv2d with dilations, as TF's space_to_batch route",
          "[cpu][cuda][space_batch]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::constant(tf::testing::random_values(2 * 8 * 8 * 3), {2, 8, 8, 3});
    const tf::Tensor w =
        tf::constant(tf::testing::random_values(3 * 3 * 3 * 4, -1, 1, 2), {3, 3, 3, 4});
    const tf::Tensor y = tf::nn::atrous_conv2d(x, w, 2, "VALID");
    CHECK(y.shape() == tf::TensorShape{2, 4, 4, 4});
    // TF's definition for VALID and a rate dividing the size: conv2d on the space_to_batch
    // blocks, back through batch_to_space.
    const tf::Tensor blocks = tf::space_to_batch_nd(x, {2, 2}, {{0, 0}, {0, 0}});
    const tf::Tensor ref =
        tf::batch_to_space_nd(tf::nn::conv2d(blocks, w, 1, "VALID"), {2, 2}, {{0, 0}, {0, 0}});
    check_close(y, ref, 1e-5, 1e-5);
    check_close(tf::nn::atrous_conv2d(x, w, 1, "SAME"), tf::nn::conv2d(x, w, 1, "SAME"), 1e-6,
                1e-6);
    const tf::Tensor t = tf::nn::atrous_conv2d_transpose(y, w, {2, 8, 8, 3}, 2, "VALID");
    CHECK(t.shape() == tf::TensorShape{2, 8, 8, 3});
    // The transpose is the adjoint: <atrous(x), y> = <x, atrous_transpose(y)>.
    const double lhs = tf::reduce_sum(y * y).item<double>();
    const double rhs = tf::reduce_sum(x * t).item<double>();
    CHECK(std::abs(lhs - rhs) <= 1e-4 * std::abs(lhs));
    require_error([&] { tf::nn::atrous_conv2d(x, w, 0, "SAME"); },
                  {"[atrous_conv2d] rate must be positive, got 0"});
  }
}

TEST_CASE("dynamic_partition and dynamic_stitch split and merge rows", "[cpu][cuda][partition]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor data = iota({5, 2}, 1);
    const auto parts = tf::dynamic_partition(data, ints({1, 0, 1, 2, 0}, {5}), 4);
    REQUIRE(parts.size() == 4);
    check_values(parts[0], {3, 4, 9, 10}, 0, 0);
    check_values(parts[1], {1, 2, 5, 6}, 0, 0);
    check_values(parts[2], {7, 8}, 0, 0);
    CHECK(parts[3].shape() == tf::TensorShape{0, 2});
    // 2-D partitions over (2, 2, 2) data (TF 2.21: [0, 1, 6, 7] and [2, 3, 4, 5]).
    const auto p2 =
        tf::dynamic_partition(iota({2, 2, 2}), ints({0, 1, 1, 0}, {2, 2}, tf::int64), 2);
    check_values(p2[0], {0, 1, 6, 7}, 0, 0);
    CHECK(p2[0].shape() == tf::TensorShape{2, 2});
    check_values(p2[1], {2, 3, 4, 5}, 0, 0);
    // Scalar partitions: the whole tensor goes to one partition.
    const auto p0 = tf::dynamic_partition(vec({1, 2}), ints({1}, {}), 2);
    CHECK(p0[0].shape() == tf::TensorShape{0, 2});
    check_values(p0[1], {1, 2}, 0, 0);

    // TF 2.21: stitch of indices [6], [4, 1], [[5, 2], [0, 3]].
    const tf::Tensor s = tf::dynamic_stitch(
        {ints({6}, {1}), ints({4, 1}, {2}), ints({5, 2, 0, 3}, {2, 2})},
        {tf::constant<float>({61.0f, 62.0f}, {1, 2}),
         tf::constant<float>({41.0f, 42.0f, 11.0f, 12.0f}, {2, 2}),
         tf::constant<float>({51.0f, 52.0f, 21.0f, 22.0f, 1.0f, 2.0f, 31.0f, 32.0f}, {2, 2, 2})});
    CHECK(s.shape() == tf::TensorShape{7, 2});
    check_values(s, {1, 2, 11, 12, 21, 22, 31, 32, 41, 42, 51, 52, 61, 62}, 0, 0);
    // The later entry wins; unnamed positions are zero (TF: [1, 0, 3, 4], [1, 0, 0, 2]).
    check_values(
        tf::dynamic_stitch({ints({0, 2}, {2}), ints({2, 3}, {2})}, {vec({1, 2}), vec({3, 4})}),
        {1, 0, 3, 4}, 0, 0);
    check_values(tf::dynamic_stitch({ints({0, 3}, {2})}, {vec({1, 2}, tf::int32)}), {1, 0, 0, 2}, 0,
                 0);
    CHECK(tf::dynamic_stitch({ints({}, {0})}, {tf::zeros({0, 3})}).shape() ==
          tf::TensorShape{0, 3});
    // Partition then stitch back by the positions: the identity (TF's documented round trip).
    const tf::Tensor where_to = ints({1, 0, 1, 2, 0}, {5});
    const auto pos = tf::dynamic_partition(ints({0, 1, 2, 3, 4}, {5}), where_to, 3);
    const auto vals = tf::dynamic_partition(data, where_to, 3);
    check_close(tf::dynamic_stitch(pos, vals), data, 0, 0);

    // Gradients: partition scatters back, stitch gathers the winners (TF also gives the
    // overwritten entry, data[0][1], a gradient of 100; here it is 0).
    check_gradient(
        [](const tf::Tensor& t) {
          const auto p = tf::dynamic_partition(t, ints({2, 0, 2}, {3}), 3);
          return tf::concat({p[2] * 3.0, p[0]}, 0);
        },
        {3, 2});
    tf::Variable v0(vec({1, 2})), v1(vec({3, 4}));
    tf::GradientTape tape;
    const tf::Tensor st =
        tf::dynamic_stitch({ints({0, 2}, {2}), ints({2, 3}, {2})}, {v0.value(), v1.value()});
    const tf::Tensor loss = tf::reduce_sum(st * vec({1, 10, 100, 1000}));
    const auto g = tape.gradient(loss, std::vector<tf::Variable>{v0, v1});
    check_values(g[0], {1, 0}, 0, 0);
    check_values(g[1], {100, 1000}, 0, 0);

    // The errors: TF 2.21's words for the range, the shapes, a traced partitions tensor.
    require_error(
        [&] {
          tf::dynamic_partition(data, ints({1, 0, 5, 0, 0}, {5}), 2);
        },
        {"[dynamic_partition] partitions[2] = 5 is not in [0, 2)"});
    require_error(
        [&] {
          tf::dynamic_partition(data, ints({0, 0, 0, 0}, {4}), 2);
        },
        {"data.shape must start with partitions.shape"});
    require_error(
        [&] {
          tf::dynamic_partition(data, vec({0, 0, 0, 0, 0}), 2);
        },
        {"partitions must be int32 or int64, got float32"});
    require_error(
        [&] {
          tf::dynamic_stitch({ints({0, -1}, {2})}, {vec({1, 2})});
        },
        {"[dynamic_stitch] indices[0][1] = -1 is negative"});
    require_error(
        [&] {
          tf::dynamic_stitch({ints({0}, {1}), ints({1}, {1})}, {vec({1}), vec({1, 2})});
        },
        {"data[1].shape = (2,) does not start with indices[1].shape = (1,)"});
    require_error(
        [&] {
          tf::dynamic_stitch({ints({0}, {1}), ints({1}, {1})},
                             {tf::zeros({1, 2}), tf::zeros({1, 3})});
        },
        {"data[1] has shape (3,) after its indices' dimensions, data[0] has (2,)"});
    auto traced = tf::function(
        [](const tf::Tensor& d, const tf::Tensor& p) { return tf::dynamic_partition(d, p, 2)[0]; });
    require_error(
        [&] {
          traced(data, ints({0, 1, 0, 1, 0}, {5}));
        },
        {"depends on the values of partitions"});
    // Constant partitions inside a traced function are known when tracing.
    auto with_constant = tf::function([](const tf::Tensor& d) {
      return tf::dynamic_partition(d, tf::constant<int32_t>({0, 1, 0, 1, 0}), 2)[1];
    });
    check_values(with_constant(data), {3, 4, 7, 8}, 0, 0);
  }
}

TEST_CASE("unravel_index gives coordinates and checks the range at every call",
          "[cpu][cuda][partition]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    // TF 2.21: tf.unravel_index([5, 7, 0], [2, 4]) = [[1, 1, 0], [1, 3, 0]]; 7 -> [1, 3].
    const tf::Tensor u = tf::unravel_index(ints({5, 7, 0}, {3}), {2, 4});
    CHECK(u.shape() == tf::TensorShape{2, 3});
    CHECK(u.dtype() == tf::int32);
    check_values(u, {1, 1, 0, 1, 3, 0}, 0, 0);
    const tf::Tensor s = tf::unravel_index(ints({7}, {}, tf::int64), {2, 4});
    CHECK(s.shape() == tf::TensorShape{2});
    CHECK(s.dtype() == tf::int64);
    check_values(s, {1, 3}, 0, 0);
    check_values(tf::unravel_index(ints({23, 6}, {2}), {2, 3, 4}), {1, 0, 2, 1, 3, 2}, 0, 0);
    // Beyond int32 strides with int64 indices.
    check_values(tf::unravel_index(ints({int64_t{5} << 33}, {1}, tf::int64), {1 << 20, 1 << 20, 8}),
                 {5120, 0, 0}, 0, 0);
    require_error(
        [&] {
          tf::unravel_index(ints({8}, {1}), {2, 4});
        },
        {"[unravel_index] Condition 0 <= indices < 8 (the product of dims [2, 4]) did "
         "not hold.\nIndices of first 1 different values:\n[[0]]\nCorresponding indices "
         "values:\n[8]"});
    require_error(
        [&] {
          tf::unravel_index(ints({-1}, {1}), {2, 4});
        },
        {"Corresponding indices values:\n[-1]"});
    require_error(
        [&] {
          tf::unravel_index(ints({1}, {1}), {2, 0});
        },
        {"dims must be positive, got [2, 0]"});
    require_error(
        [&] {
          tf::unravel_index(ints({1, 2}, {1, 2}), {2, 4});
        },
        {"indices must be a scalar or 1-D, got shape (1, 2)"});
    // Traced: one trace for every length, the range checked at each call.
    auto f = tf::function(
        [](const tf::Tensor& i) {
          return tf::unravel_index(i, {3, 5});
        },
        tf::FunctionOptions{.input_signature = {tf::TensorSpec({tf::None}, tf::int32)}});
    check_values(f(ints({14, 0}, {2})), {2, 0, 4, 0}, 0, 0);
    check_values(f(ints({5}, {1})), {1, 0}, 0, 0);
    require_error(
        [&] {
          f(ints({3, 15}, {2}));
        },
        {"Indices of first 1 different values:\n[[1]]\nCorresponding indices "
         "values:\n[15]"});
    CHECK(f.tracing_count() == 1);
  }
}

TEST_CASE("divide_no_nan and multiply_no_nan are 0 where y is 0, gradients too",
          "[cpu][cuda][math]") {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    for (tf::DType dt : {tf::float16, tf::float32, tf::float64}) {
      INFO("dtype " << tf::dtype_name(dt));
      const tf::Tensor x = vec({6, 0, kInf, kNaN, -3}, dt), y = vec({3, 0, 0, 0, 2}, dt);
      check_values(tf::math::divide_no_nan(x, y), {2, 0, 0, 0, -1.5}, 0, 0);
      check_values(tf::math::multiply_no_nan(x, y), {18, 0, 0, 0, -6}, 0, 0);
      check_values(tf::math::divide_no_nan(vec({1, 2}, dt), 0.0), {0, 0}, 0, 0);
    }
    // Broadcasting.
    check_values(tf::math::divide_no_nan(iota({2, 2}, 1), vec({0, 2})), {0, 1, 0, 2}, 0, 0);
    // Gradients away from zero are the plain ones; at y = 0, TF's: divide_no_nan gives 0 to
    // both, multiply_no_nan y to x (0) and x to y.
    check_gradient(
        [](const tf::Tensor& t) {
          return tf::math::divide_no_nan(t, vec({2, -3, 4}, tf::float64));
        },
        {3});
    check_gradient(
        [](const tf::Tensor& t) {
          return tf::math::divide_no_nan(vec({2, -3, 4}, tf::float64), t);
        },
        {3}, {0.5, -0.7, 1.5});
    tf::Variable a(vec({5, 7}, tf::float64)), b(vec({0, 2}, tf::float64));
    tf::GradientTape tape(tf::TapeOptions{.persistent = true});
    const tf::Tensor q = tf::reduce_sum(tf::math::divide_no_nan(a.value(), b.value()));
    const tf::Tensor p = tf::reduce_sum(tf::math::multiply_no_nan(a.value(), b.value()));
    auto gq = tape.gradient(q, std::vector<tf::Variable>{a, b});
    check_values(gq[0], {0, 0.5}, 1e-12, 0);
    check_values(gq[1], {0, -7.0 / 4}, 1e-12, 0);
    auto gp = tape.gradient(p, std::vector<tf::Variable>{a, b});
    check_values(gp[0], {0, 2}, 1e-12, 0);
    check_values(gp[1], {5, 7}, 1e-12, 0);
    require_error([&] { tf::math::divide_no_nan(ints({1}, {1}), ints({1}, {1})); },
                  {"[divide_no_nan]", "int32"});
    require_error(
        [&] {
          tf::math::multiply_no_nan(vec({1, 2}), vec({1, 2, 3}));
        },
        {"[multiply_no_nan]", "(2,)", "(3,)"});
  }
}

TEST_CASE("weighted_moments, log_poisson_loss and matrix_rank match TF", "[cpu][cuda][nn_more]") {
  for (const tf::Device& dev : tf::testing::devices_under_test()) {
    INFO("device " << dev.to_string());
    tf::DeviceScope scope(dev);
    const tf::Tensor x = tf::constant<float>({1.0f, 2.0f, 3.0f, 4.0f, 5.0f, 7.0f}, {2, 3});
    const tf::Tensor w = tf::constant<float>({1.0f, 0.0f, 2.0f, 3.0f, 1.0f, 1.0f}, {2, 3});
    // TF 2.21 values.
    auto [m, v] = tf::nn::weighted_moments(x, {1}, w);
    check_values(m, {2.3333332538604736, 4.800000190734863}, 1e-6, 1e-6);
    check_values(v, {0.8888888359069824, 1.3600000143051147}, 1e-6, 1e-6);
    auto [ma, va] = tf::nn::weighted_moments(x, {0, 1}, w, true);
    CHECK(ma.shape() == tf::TensorShape{1, 1});
    check_values(ma, {3.875}, 1e-6, 0);
    check_values(va, {2.609375}, 1e-6, 0);
    // Weights that broadcast, and a column whose weights sum to 0 (TF: 0 by divide_no_nan).
    auto [mb, vb] = tf::nn::weighted_moments(x, {0}, vec({1, 2, 0}));
    check_values(mb, {2.5, 3.5, 0}, 1e-6, 0);
    check_values(vb, {2.25, 2.25, 0}, 1e-6, 0);
    check_gradient(
        [](const tf::Tensor& t) {
          auto [mean, var] = tf::nn::weighted_moments(
              t, {1}, tf::constant<double>({1.0, 0.5, 2.0, 3.0, 1.0, 1.0}, {2, 3}));
          return tf::concat({mean, var}, 0);
        },
        {2, 3});

    // TF 2.21: tf.nn.log_poisson_loss(t, l) and compute_full_loss=True.
    const tf::Tensor t = vec({0, 1, 2, 3, 10}), l = vec({0.5, -1, 2, 1, 3});
    check_values(tf::nn::log_poisson_loss(t, l),
                 {1.6487212181091309, 1.3678793907165527, 3.3890562057495117, -0.28171825408935547,
                  -9.91446304321289},
                 1e-6, 1e-6);
    check_values(tf::nn::log_poisson_loss(t, l, true),
                 {1.6487212181091309, 1.3678793907165527, 4.040862560272217, 1.4823633432388306,
                  5.1816205978393555},
                 1e-6, 1e-5);
    check_gradient(
        [](const tf::Tensor& li) {
          return tf::nn::log_poisson_loss(vec({0, 1, 2, 3}, tf::float64), li, true);
        },
        {4});
    // With respect to the targets (inside [0, 1] and past it), and at 0 exactly: finite, the
    // plain term's -log_input (TF's is NaN there).
    check_gradient(
        [](const tf::Tensor& tt) {
          return tf::nn::log_poisson_loss(tt, vec({0.5, -1, 2}, tf::float64), true);
        },
        {3}, {0.3, 0.5, 2.5});
    tf::Variable targets(vec({0, 3}, tf::float64));
    tf::GradientTape tape;
    const tf::Tensor lp =
        tf::reduce_sum(tf::nn::log_poisson_loss(targets.value(), vec({0.5, 2}, tf::float64), true));
    // d/dt at 3: -2 + log(3) + 1 / (2 * 3).
    check_values(tape.gradient(lp, targets), {-0.5, -2 + std::log(3.0) + 1.0 / 6}, 1e-12, 0);
    require_error(
        [&] {
          tf::nn::log_poisson_loss(vec({1, 2}), vec({1, 2, 3}));
        },
        {"[log_poisson_loss] targets of shape (2,) and log_input of shape (3,)"});

    // TF 2.21: rank 2 for [[1, 2, 3], [2, 4, 6], [1, 0, 1]], 4 for eye(4), 0 for zeros and for
    // tol = 10.
    const tf::Tensor a =
        tf::constant<float>({1.0f, 2.0f, 3.0f, 2.0f, 4.0f, 6.0f, 1.0f, 0.0f, 1.0f}, {3, 3});
    const tf::Tensor r = tf::linalg::matrix_rank(a);
    CHECK(r.dtype() == tf::int64);
    CHECK(r.shape() == tf::TensorShape{});
    check_values(r, {2}, 0, 0);
    check_values(tf::linalg::matrix_rank(tf::stack({tf::eye(4), tf::eye(4) * 3.0f})), {4, 4}, 0, 0);
    check_values(tf::linalg::matrix_rank(tf::zeros({2, 3})), {0}, 0, 0);
    check_values(tf::linalg::matrix_rank(a, 10.0), {0}, 0, 0);
    check_values(tf::linalg::matrix_rank(tf::cast(a, tf::float64), 1e-3), {2}, 0, 0);
    require_error([&] { tf::linalg::matrix_rank(vec({1, 2})); }, {"[matrix_rank]"});
  }
}
